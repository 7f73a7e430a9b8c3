#!/usr/bin/env bash
# Installs the OpenClaw integration's dependencies from the registry (openclaw pinned at
# 2026.9.6, exactly as package-lock.json says), builds the plugin and runs its suite against the
# real `openclaw` CLI, offline: the model is a script served on 127.0.0.1.
#
#   JAIL_BIN             the jail under test (default: the repository's target/release/jail,
#                        what `cargo build --locked --release` leaves)
#   JAIL_TEST_HOOKS_BIN  a jail built with `--features test-hooks`, for the `--require full`
#                        refusal (JAIL_TEST_DISABLE=landlock) (default: the repository's
#                        target/debug/jail when it exists, what .ci/run builds first); without
#                        one that test is skipped, unless JAIL_OPENCLAW_REQUIRE_ALL=1 (CI)
#   JAIL_OPENCLAW_NODE_DIR  where Node 24 is installed when the machine's node is older
#                        (default: the repository's target/openclaw-node)
#   JAIL_OPENCLAW_TEST_DIR  where the fixtures go (default /var/tmp/jot: not /tmp, which is
#                        private inside a jail, not a home, which jail hides)
#
# Nothing is taken from an earlier run: the binaries are copied into a fresh directory under
# JAIL_OPENCLAW_TEST_DIR (the repository may sit under a home directory, which a jail hides, and
# the tests run `jail status` inside), removed at the end.
set -euo pipefail
cd "$(dirname "$0")"
repo="$(cd ../.. && pwd)"

# openclaw@2026.9.6 needs Node >= 24.16. The machine's, if it is that; else Node 24 from the
# registry's `node-linux-<arch>` package, installed once under the repository's target/.
NODE_VERSION=24.22.3
node_ok() {
    command -v node >/dev/null &&
        node -e 'const [a,b]=process.versions.node.split(".").map(Number); process.exit(a>24||(a===24&&b>=16)?0:1)'
}
if ! node_ok; then
    dir="${JAIL_OPENCLAW_NODE_DIR:-$repo/target/openclaw-node}"
    case "$(uname -m)" in
        x86_64) arch=x64 ;;
        aarch64 | arm64) arch=arm64 ;;
        *) echo "test.sh: no Node 24 package for $(uname -m)" >&2; exit 1 ;;
    esac
    bin="$dir/node_modules/node-linux-$arch/bin"
    command -v npm >/dev/null || { echo "test.sh: Node >= 24.16 or npm is needed (to install Node 24)" >&2; exit 1; }
    if [[ ! -x $bin/node ]]; then
        echo "== installing node-linux-$arch@$NODE_VERSION (npm) under $dir"
        npm install --no-audit --no-fund --loglevel=error --prefix "$dir" "node-linux-$arch@$NODE_VERSION"
    fi
    export PATH="$bin:$PATH"
    node_ok || { echo "test.sh: $bin/node is not Node >= 24.16" >&2; exit 1; }
fi
echo "== node $(node --version)"

JAIL_BIN="${JAIL_BIN:-$repo/target/release/jail}"
[[ -x $JAIL_BIN ]] || { echo "test.sh: no jail binary at $JAIL_BIN (cargo build --locked --release, or set JAIL_BIN)" >&2; exit 1; }
if [[ -z ${JAIL_TEST_HOOKS_BIN:-} && -x $repo/target/debug/jail ]]; then
    JAIL_TEST_HOOKS_BIN="$repo/target/debug/jail"
fi
fixtures="${JAIL_OPENCLAW_TEST_DIR:-/var/tmp/jot}"
mkdir -p "$fixtures"
chmod 755 "$fixtures"
bindir="$(mktemp -d "$fixtures/bin-XXXXXX")"
trap 'rm -rf "$bindir"' EXIT
chmod 755 "$bindir"
install -m 755 "$JAIL_BIN" "$bindir/jail"
echo "== jail $JAIL_BIN (as $bindir/jail)"
export JAIL_BIN="$bindir/jail"
if [[ -n ${JAIL_TEST_HOOKS_BIN:-} ]]; then
    mkdir -m 755 "$bindir/test-hooks"
    install -m 755 "$JAIL_TEST_HOOKS_BIN" "$bindir/test-hooks/jail"
    echo "== jail --features test-hooks $JAIL_TEST_HOOKS_BIN (as $bindir/test-hooks/jail)"
    export JAIL_TEST_HOOKS_BIN="$bindir/test-hooks/jail"
fi
export JAIL_OPENCLAW_TEST_DIR="$fixtures"

# No install scripts: nothing from the registry runs at install time (the suite needs none).
echo "== npm ci (openclaw $(node -p 'require("./package.json").devDependencies.openclaw'))"
npm ci --no-audit --no-fund --loglevel=error --ignore-scripts
echo "== build"
npx --no-install tsc -p tsconfig.json
echo "== tests"
npm test
