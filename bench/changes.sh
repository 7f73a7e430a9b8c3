#!/usr/bin/env bash
# Measures what `--report` costs: a baseline snapshot of a 100,000-file tree, a second snapshot
# after the run and the comparison (src/changes/). A report, not a test.
#
#   bench/changes.sh                 the changes_bench example: per-step times, warm cache (and
#                                    a cold-cache run when root can drop the page cache)
#   bench/changes.sh jail PATH/jail  hyperfine: `jail --rw TREE -- true` vs the same with
#                                    `--report FILE` (needs the CLI integration)
#
# Tunables (environment): DIRS (1000), FILES (100 per directory), RUNS (5), THREADS (0: auto).
set -euo pipefail

ROOT="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd -P)"
# Work from the repo root: the jail keeps the cwd, and a cwd under /tmp would not exist inside.
cd "$ROOT"

MODE="${1:-example}"
DIRS="${DIRS:-1000}"
FILES="${FILES:-100}"
RUNS="${RUNS:-5}"
THREADS="${THREADS:-0}"
TOTAL=$((DIRS * FILES))

die() { printf 'bench: error: %s\n' "$*" >&2; exit 1; }
log() { printf '\n== %s\n' "$*" >&2; }

case "$MODE" in
    example) ;;
    jail)
        JAIL="${2:-}"
        [[ -n "$JAIL" ]] || die "usage: bench/changes.sh jail PATH/TO/jail"
        [[ -x "$JAIL" ]] || die "$JAIL is not executable"
        JAIL="$(cd -- "$(dirname -- "$JAIL")" && pwd -P)/$(basename -- "$JAIL")"
        command -v hyperfine >/dev/null || die "the jail mode needs hyperfine"
        ;;
    *) die "unknown mode '$MODE' (example, or: jail PATH/TO/jail)" ;;
esac

# Not under /tmp: /tmp is private inside the jail.
WORK="$(mktemp -d /var/tmp/jail-changes-bench.XXXXXX)"
trap 'rm -rf -- "$WORK"' EXIT
TREE="$WORK/tree"

log "generating $TOTAL files in $DIRS directories under $TREE"
if command -v python3 >/dev/null; then
    python3 - "$TREE" "$DIRS" "$FILES" <<'EOF'
import os, sys
root, dirs, files = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
for d in range(dirs):
    p = os.path.join(root, "d%04d" % d)
    os.makedirs(p)
    for f in range(files):
        with open(os.path.join(p, "f%03d.txt" % f), "w") as fh:
            fh.write("%d %d\n" % (d, f))
EOF
else
    mkdir -p "$TREE"
    for ((d = 0; d < DIRS; d++)); do
        dir="$(printf '%s/d%04d' "$TREE" "$d")"
        mkdir "$dir"
        for ((f = 0; f < FILES; f++)); do
            printf '%d %d\n' "$d" "$f" >"$dir/f$f.txt"
        done
    done
fi
# Files written in the last 2 s are "racy" and get hashed; measure the usual case, an older tree.
sleep 3

if [[ "$MODE" == jail ]]; then
    log "hyperfine: jail --rw TREE -- true, without and with --report"
    hyperfine -N --warmup 1 --runs "$RUNS" \
        --command-name "jail --rw TREE -- true" \
        "$JAIL --rw $TREE -- /bin/true" \
        --command-name "jail --rw TREE --report FILE -- true" \
        "$JAIL --rw $TREE --report $WORK/report.json -- /bin/true"
    exit 0
fi

log "building the changes_bench example"
cargo build --release --example changes_bench >&2
TARGET_DIR="$(cargo metadata --format-version 1 --no-deps |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])' 2>/dev/null ||
    echo "${CARGO_TARGET_DIR:-$ROOT/target}")"
BENCH="$TARGET_DIR/release/examples/changes_bench"
[[ -x "$BENCH" ]] || die "$BENCH was not built"

# One line of the example: entries=N baseline_ms=X snapshot2_ms=Y compare_ms=Z total_ms=T ...
field() { sed -n "s/.*[[:space:]]$1=\([^[:space:]]*\).*/\1/p" <<<" $2"; }

if [[ $EUID -eq 0 && -w /proc/sys/vm/drop_caches ]]; then
    log "cold cache (page, dentry and inode caches dropped before the baseline)"
    sync
    echo 3 >/proc/sys/vm/drop_caches
    "$BENCH" "$TREE" "$THREADS"
else
    log "cold cache: skipped (needs root to drop the caches)"
fi

log "warm cache: $RUNS runs after one warm-up"
"$BENCH" "$TREE" "$THREADS" >/dev/null
sum_base=0 sum_snap=0 sum_cmp=0 sum_total=0 entries=0
for ((i = 0; i < RUNS; i++)); do
    line="$("$BENCH" "$TREE" "$THREADS")"
    printf '%s\n' "$line" >&2
    entries="$(field entries "$line")"
    read -r sum_base sum_snap sum_cmp sum_total < <(awk -v a="$sum_base" -v b="$sum_snap" \
        -v c="$sum_cmp" -v d="$sum_total" -v x="$(field baseline_ms "$line")" \
        -v y="$(field snapshot2_ms "$line")" -v z="$(field compare_ms "$line")" \
        -v t="$(field total_ms "$line")" 'BEGIN { print a + x, b + y, c + z, d + t }')
done
[[ "$entries" -gt "$TOTAL" ]] || die "the example saw $entries entries, expected more than $TOTAL"

if command -v hyperfine >/dev/null; then
    log "hyperfine: the whole example process (two snapshots and a comparison)"
    hyperfine -N --warmup 1 --runs "$RUNS" "$BENCH $TREE $THREADS" >&2
fi

awk -v n="$RUNS" -v files="$TOTAL" -v b="$sum_base" -v s="$sum_snap" -v c="$sum_cmp" \
    -v t="$sum_total" 'BEGIN {
        printf "mean of %d warm runs: baseline %.1f ms, second snapshot %.1f ms, compare %.1f ms\n",
            n, b / n, s / n, c / n
        printf "baseline+compare on %d files: %.0f ms\n", files, t / n
    }'
