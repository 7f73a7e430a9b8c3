#!/usr/bin/env bash
# Installs the OpenClaw integration's dependencies from the registry (openclaw pinned at
# 2026.9.6, exactly as package-lock.json says), builds the plugin and runs its suite against the
# real `openclaw` CLI, offline: the model is a script served on 127.0.0.1.
#
#   JAIL_BIN             the jail under test (default: the repository's target/release/jail,
#                        else `jail` on PATH)
#   JAIL_TEST_HOOKS_BIN  a jail built with `--features test-hooks`, for the `--require full`
#                        refusal (JAIL_TEST_DISABLE=landlock); without it that test is skipped,
#                        unless JAIL_OPENCLAW_REQUIRE_ALL=1 (CI), which makes it fail
#   JAIL_OPENCLAW_NODE_DIR  where Node 24 is installed when the machine's node is older
#                        (default /var/tmp/jail-openclaw-node: not /tmp, not a home)
set -euo pipefail
cd "$(dirname "$0")"
repo="$(cd ../.. && pwd)"

# openclaw@2026.9.6 needs Node >= 24.16. The machine's, if it is that; else Node 24 from the
# registry's `node-linux-<arch>` package, installed once under /var/tmp.
NODE_VERSION=24.22.3
node_ok() {
    command -v node >/dev/null &&
        node -e 'const [a,b]=process.versions.node.split(".").map(Number); process.exit(a>24||(a===24&&b>=16)?0:1)'
}
if ! node_ok; then
    dir="${JAIL_OPENCLAW_NODE_DIR:-/var/tmp/jail-openclaw-node}"
    case "$(uname -m)" in
        x86_64) arch=x64 ;;
        aarch64 | arm64) arch=arm64 ;;
        *) echo "test.sh: no Node 24 package for $(uname -m)" >&2; exit 1 ;;
    esac
    bin="$dir/node_modules/node-linux-$arch/bin"
    if [[ ! -x $bin/node ]]; then
        echo "== installing node-linux-$arch@$NODE_VERSION (npm) under $dir"
        npm install --no-audit --no-fund --loglevel=error --prefix "$dir" "node-linux-$arch@$NODE_VERSION"
    fi
    export PATH="$bin:$PATH"
    node_ok || { echo "test.sh: $bin/node is not Node >= 24.16" >&2; exit 1; }
fi
echo "== node $(node --version)"

if [[ -z ${JAIL_BIN:-} ]]; then
    if [[ -x $repo/target/release/jail ]]; then
        JAIL_BIN="$repo/target/release/jail"
    else
        JAIL_BIN="$(command -v jail || true)"
    fi
fi
[[ -n $JAIL_BIN && -x $JAIL_BIN ]] || { echo "test.sh: no jail binary (set JAIL_BIN)" >&2; exit 1; }
export JAIL_BIN
echo "== jail $JAIL_BIN"

# No install scripts: nothing from the registry runs at install time (the suite needs none).
echo "== npm ci (openclaw $(node -p 'require("./package.json").devDependencies.openclaw'))"
npm ci --no-audit --no-fund --loglevel=error --ignore-scripts
echo "== build"
npx --no-install tsc -p tsconfig.json
echo "== tests"
npm test
