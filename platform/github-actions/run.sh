#!/usr/bin/env bash
# Runs a CI command under jail. Used by action.yml (GitHub Actions) and by
# ../gitlab/run.sh (GitLab CI); tested by tests/platform.rs.
#
#   run.sh install SRC ROOT   build jail from the checkout SRC:
#                               cargo install --locked --path SRC --root ROOT
#                             prints ROOT/bin/jail; appends ROOT/bin to $GITHUB_PATH when set.
#                             Does nothing when ROOT/bin/jail exists (the action used twice).
#   run.sh userns             where AppArmor restricts unprivileged user namespaces
#                             (kernel.apparmor_restrict_unprivileged_userns=1, Ubuntu >= 24.04),
#                             lift that on a GitHub-hosted runner, or say what it will cost.
#                             JAIL_ENABLE_USERNS: auto (default: only when
#                             RUNNER_ENVIRONMENT=github-hosted), true, false.
#   run.sh run                jail --profile "$JAIL_PROFILE" --require "$JAIL_REQUIRE" \
#                                  $JAIL_FLAGS -- bash -c "$JAIL_RUN"
#                             JAIL_RUN      the command (required)
#                             JAIL_PROFILE  default: ci
#                             JAIL_REQUIRE  default: full (full, landlock, mount, any)
#                             JAIL_FLAGS    more jail flags, split on whitespace (no quoting)
#                             JAIL_BIN      the jail binary (default: jail on PATH)
#
# Exit status: the command's; 125 when jail cannot confine it as required (or is missing).
set -euo pipefail

die() {
	echo "jail-ci: $*" >&2
	exit 125
}

group() {
	if [ -n "${GITHUB_ACTIONS:-}" ]; then echo "::group::$1"; else echo "== $1"; fi
}

endgroup() {
	if [ -n "${GITHUB_ACTIONS:-}" ]; then echo "::endgroup::"; fi
}

cmd_install() {
	[ $# -eq 2 ] || die "usage: run.sh install SRC ROOT"
	local src=$1 root=$2
	if [ -x "$root/bin/jail" ]; then
		echo "jail-ci: $root/bin/jail already installed" >&2
	else
		[ -f "$src/Cargo.lock" ] || die "$src is not a checkout of jail (no Cargo.lock)"
		command -v cargo >/dev/null || die "cargo not found: install a Rust toolchain first"
		cargo install --locked --path "$src" --root "$root"
		[ -x "$root/bin/jail" ] || die "cargo install left no $root/bin/jail"
	fi
	if [ -n "${GITHUB_PATH:-}" ]; then echo "$root/bin" >>"$GITHUB_PATH"; fi
	echo "$root/bin/jail"
}

cmd_userns() {
	local sysctl=kernel.apparmor_restrict_unprivileged_userns
	local file=/proc/sys/kernel/apparmor_restrict_unprivileged_userns
	[ "$(cat "$file" 2>/dev/null || true)" = 1 ] || return 0
	[ "$(id -u)" != 0 ] || return 0 # root is not restricted
	local lift=no
	case ${JAIL_ENABLE_USERNS:-auto} in
	auto) [ "${RUNNER_ENVIRONMENT:-}" = github-hosted ] && lift=yes ;;
	true) lift=yes ;;
	false) ;;
	*) die "enable-userns must be auto, true or false, not '${JAIL_ENABLE_USERNS}'" ;;
	esac
	if [ $lift = no ]; then
		echo "jail-ci: $sysctl=1: AppArmor refuses unprivileged user namespaces here, so jail" \
			"has no mount view (level partial; require=full stops the run)" >&2
		return 0
	fi
	echo "jail-ci: $sysctl=1: setting it to 0 so that jail can build its mount view"
	sudo -n sysctl -w "$sysctl=0" || die "could not set $sysctl=0 (no passwordless sudo?)"
}

cmd_run() {
	[ -n "${JAIL_RUN:-}" ] || die "JAIL_RUN is empty: nothing to run"
	local jail=${JAIL_BIN:-}
	if [ -z "$jail" ]; then
		jail=$(command -v jail) || die "jail is not installed (not on PATH, JAIL_BIN unset)"
	fi
	[ -x "$jail" ] || die "$jail is not executable"
	local flags=()
	if [ -n "${JAIL_FLAGS:-}" ]; then read -r -a flags <<<"$JAIL_FLAGS"; fi
	group "jail probe"
	"$jail" probe || true
	endgroup
	exec "$jail" --profile "${JAIL_PROFILE:-ci}" --require "${JAIL_REQUIRE:-full}" \
		"${flags[@]}" -- bash -c "$JAIL_RUN"
}

case ${1:-} in
install) shift && cmd_install "$@" ;;
userns) cmd_userns ;;
run) cmd_run ;;
*) die "usage: run.sh install SRC ROOT | userns | run" ;;
esac
