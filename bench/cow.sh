#!/usr/bin/env bash
# Measures copy-on-write runs (--cow): start-up against --ro on a 20,000-file tree, and the
# hand-back (jail diff, jail apply) of 10 changes in a 100,000-file tree. A report, not a test:
# it prints hyperfine's tables and exits 0 when a target is missed.
#
#   bench/cow.sh [PATH/TO/jail]   default: the static release build bench/run.sh makes
#
# Tunables (environment): RUNS (60), WARMUP (10).
set -euo pipefail

ROOT="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd -P)"
cd "$ROOT"
RUNS="${RUNS:-60}"
WARMUP="${WARMUP:-10}"
HOST="$(rustc -vV | sed -n 's/^host: //p')"
JAIL="${1:-$ROOT/target/$HOST/release/jail}"

die() { printf 'bench: error: %s\n' "$*" >&2; exit 1; }
log() { printf '\n== %s\n' "$*" >&2; }
command -v hyperfine >/dev/null || die "needs hyperfine (apt-get install hyperfine)"
if [[ -z "${1:-}" ]]; then
    log "building jail (release, --locked, static glibc)"
    RUSTFLAGS="-C target-feature=+crt-static" \
        cargo build --release --locked --target "$HOST" >&2
fi
[[ -x "$JAIL" ]] || die "$JAIL is not executable"

# Not under /tmp: /tmp is private inside the jail.
WORK="$(mktemp -d /var/tmp/jail-cow-bench.XXXXXX)"
trap 'rm -rf -- "$WORK"' EXIT
export XDG_STATE_HOME="$WORK/state"
mkdir -p "$XDG_STATE_HOME"

# tree DIR DIRS FILES: DIRS directories of FILES small files, committed to git.
tree() {
    python3 - "$1" "$2" "$3" <<'PY'
import os, sys
root, dirs, files = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
for d in range(dirs):
    p = os.path.join(root, "d%04d" % d)
    os.makedirs(p)
    for f in range(files):
        with open(os.path.join(p, "f%03d.txt" % f), "w") as fh:
            fh.write("%d %d\n" % (d, f))
PY
    git -C "$1" init -q
    git -C "$1" add -A
    git -C "$1" -c user.name=b -c user.email=b@invalid commit -qm base
}

log "generating 20,000 files in 200 directories"
tree "$WORK/small" 200 100
log "start-up: jail --ro TREE vs jail --cow TREE (20,000 files)"
hyperfine -N --style basic --warmup "$WARMUP" --runs "$RUNS" \
    -n ro "$JAIL --ro $WORK/small -- /bin/true" \
    -n cow "$JAIL --cow $WORK/small -- /bin/true"

log "generating 100,000 files in 1,000 directories"
tree "$WORK/big" 1000 100
# Each timed apply gets a fresh run of 10 changes (made in --prepare, not timed).
cat >"$WORK/edit.sh" <<SH
cd $WORK/big && for i in 0 1 2 3 4 5 6 7 8 9; do echo changed >> d000\$i/f001.txt; done
SH
PREP="sh -c '$JAIL --cow $WORK/big -- /bin/sh $WORK/edit.sh 2>/dev/null; ls $XDG_STATE_HOME/jail/runs > $WORK/id'"
log "hand-back: jail diff and jail apply of 10 changes in 100,000 files"
sh -c "$PREP"
hyperfine -N --style basic --warmup 3 --runs "$RUNS" \
    -n diff "sh -c '$JAIL diff \$(cat $WORK/id) >/dev/null'"
"$JAIL" discard "$(cat "$WORK/id")" >/dev/null 2>&1
hyperfine --style basic --warmup 3 --runs "$RUNS" --prepare "$PREP" \
    -n apply "$JAIL apply \$(cat $WORK/id)"
hyperfine -N --style basic --warmup 3 --runs "$RUNS" -n 'sh (the cost of the wrapper above)' "sh -c true"

# The copy fallback is what a run without user namespaces gets; a release build with the
# test-only switch forces it here (JAIL_TEST_DISABLE=mount), in a target directory of its own.
log "building jail with test-hooks (release) for the copy fallback"
HOOKS_DIR="$ROOT/target/bench-hooks"
RUSTFLAGS="-C target-feature=+crt-static" \
    cargo build --release --locked --features test-hooks --target "$HOST" --target-dir "$HOOKS_DIR" >&2
HOOKS="$HOOKS_DIR/$HOST/release/jail"
log "copy fallback start-up: --ro vs --cow without the mount view (20,000 files)"
hyperfine -N --style basic --warmup 3 --runs "$((RUNS / 3 + 2))" \
    -n 'ro, no mount view' "env JAIL_TEST_DISABLE=mount $HOOKS --ro $WORK/small -- /bin/true" \
    -n 'cow (copy), no mount view' "env JAIL_TEST_DISABLE=mount $HOOKS --cow $WORK/small -- /bin/true"
log "copy fallback: start-up on the 100,000-file tree"
hyperfine -N --style basic --warmup 1 --runs 5 \
    -n 'cow (copy), 100k files' "env JAIL_TEST_DISABLE=mount $HOOKS --cow $WORK/big -- /bin/true"
