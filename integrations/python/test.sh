#!/usr/bin/env bash
# The Python package's suite: a venv of Debian's python3 (a path a jail shows: not under a
# home, not under /tmp), this package with the dependency set constraints.txt pins (from the
# registry), and pytest against a jail binary: $JAIL_BIN, else this checkout's release build
# (target/, or $CARGO_TARGET_DIR), else `jail` on PATH. Extra arguments go to pytest.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
venv="${JAIL_SANDBOX_VENV:-/var/tmp/jail-sandbox-venv}"

jail="${JAIL_BIN:-}"
if [[ -z $jail ]]; then
    built="${CARGO_TARGET_DIR:-$here/../../target}/release/jail"
    if [[ -x $built ]]; then
        jail="$built"
    else
        jail="$(command -v jail)" || { echo "test.sh: no jail binary (set JAIL_BIN)" >&2; exit 1; }
    fi
fi

py=/usr/bin/python3
[[ -x $py ]] || py="$(command -v python3)"
if [[ ! -x $venv/bin/python ]]; then
    "$py" -m venv "$venv" || {
        apt-get install -y -q --no-install-recommends python3-venv
        "$py" -m venv "$venv"
    }
fi
# Every dependency (and the build's setuptools) at the version constraints.txt pins: the
# environment variable reaches the isolated build environment too, where -c would not.
PIP_CONSTRAINT="$here/constraints.txt" \
    "$venv/bin/pip" install -q --disable-pip-version-check "$here[test]"
# The tests run `jail status` inside their sessions by the binary's own path: a copy where a
# jail shows it (the checkout may be under /tmp, which a jail makes private).
install -m 0755 "$jail" "$venv/bin/jail"
chmod a+rX "$venv" "$(dirname "$venv")"
export JAIL_BIN="$venv/bin/jail"
cd "$here"
exec "$venv/bin/python" -m pytest -q -p no:cacheprovider tests "$@"
