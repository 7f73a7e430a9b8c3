#!/usr/bin/env bash
# GitLab CI: run $JAIL_RUN under jail (see jail.gitlab-ci.yml). Builds jail first from the
# checkout this script lives in, unless JAIL_BIN is set or a jail is on PATH. The rest is the
# GitHub action's script: ../github-actions/run.sh (same variables: JAIL_RUN, JAIL_PROFILE,
# JAIL_REQUIRE, JAIL_FLAGS, JAIL_BIN).
#
#   JAIL_INSTALL_ROOT  where to install (default: $HOME/.jail-ci; keep it outside the project,
#                      which the ci profile makes writable to the command)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd -P)
common=$here/../github-actions/run.sh

if [ -z "${JAIL_BIN:-}" ] && ! command -v jail >/dev/null; then
	src=$(cd "$here/../.." && pwd -P)
	JAIL_BIN=$(bash "$common" install "$src" "${JAIL_INSTALL_ROOT:-$HOME/.jail-ci}")
	export JAIL_BIN
	# So that the command can ask `jail status`.
	PATH=$(dirname "$JAIL_BIN"):$PATH
	export PATH
fi
exec bash "$common" run
