#!/usr/bin/env bash
# Benchmarks jail against bare execution, the kernel's floor for each layer and the peers
# (bubblewrap, firejail; minijail and nsjail when installed) in one run: start-up, a git workload,
# the cost per syscall inside, and the supervisor's memory. A report, not a test: it exits 0 when a
# target is missed and non-zero only when something fails to run. See bench/README.md.
#
# Tunables (environment): RUNS_STARTUP (50), RUNS_GIT (30), RUNS_INSIDE (5), WARMUP (5, per round),
# ROUNDS (5: each comparison's runs are split over this many hyperfine calls in alternating order),
# DD_COUNT (200000 one-byte blocks = ~400k read/write syscalls), FIND_DIR (/usr).
set -euo pipefail

ROOT="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd -P)"
# Work from the repo root: the jail keeps the cwd, and a cwd under /tmp would not exist inside.
cd "$ROOT"

RUNS_STARTUP="${RUNS_STARTUP:-50}"
RUNS_GIT="${RUNS_GIT:-30}"
RUNS_INSIDE="${RUNS_INSIDE:-5}"
WARMUP="${WARMUP:-5}"
ROUNDS="${ROUNDS:-5}"
DD_COUNT="${DD_COUNT:-200000}"
FIND_DIR="${FIND_DIR:-/usr}"

BENCH_DIR="$ROOT/target/bench"   # not under /tmp: /tmp is private inside the jail
REPO="$BENCH_DIR/repo-20k"
REPO_SPEC="files=20000 dirs=200 layout=20x10x100 v1"
STAMP="$(date +%Y%m%d-%H%M%S)"
OUT="$BENCH_DIR/results/$STAMP"
HOST="$(rustc -vV | sed -n 's/^host: //p')"
# The two builds a user can make: README's install command links glibc statically (no dynamic
# loader at each launch); `cargo build --release` is the plain one.
JAIL_STATIC="$ROOT/target/$HOST/release/jail"
JAIL_RELEASE="$ROOT/target/release/jail"
FLOOR="$BENCH_DIR/floor"

log() { printf '\n== %s\n' "$*" >&2; }
die() { printf 'bench: error: %s\n' "$*" >&2; exit 1; }
q() { printf '%q' "$1"; }   # quoting that hyperfine's -N word splitting understands

# --- 1. tools and builds ----------------------------------------------------------------------
SUDO=""
if [[ $EUID -ne 0 ]]; then
    command -v sudo >/dev/null || die "not root and no sudo: install hyperfine, bubblewrap, firejail, jq, strace, gcc"
    SUDO="sudo"
fi

missing=()
command -v hyperfine >/dev/null || missing+=(hyperfine)
command -v bwrap >/dev/null || missing+=(bubblewrap)
command -v firejail >/dev/null || missing+=(firejail)
command -v jq >/dev/null || missing+=(jq)
command -v strace >/dev/null || missing+=(strace)
command -v cc >/dev/null || missing+=(gcc)
if ((${#missing[@]})); then
    log "installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    need_update=0
    for p in "${missing[@]}"; do
        # No candidate means the package lists are missing or stale.
        if ! apt-cache policy "$p" 2>/dev/null | grep -q 'Candidate: [0-9]'; then need_update=1; fi
    done
    ((need_update)) && $SUDO apt-get update -q
    $SUDO apt-get install -y -q "${missing[@]}" >&2
fi

log "building jail: README's install build (static glibc) and the plain release build"
# --target keeps the flag off build scripts and proc-macros, which cannot be static.
RUSTFLAGS="-C target-feature=+crt-static" \
    cargo build --release --locked --target "$HOST" --manifest-path "$ROOT/Cargo.toml" >&2
cargo build --release --locked --manifest-path "$ROOT/Cargo.toml" >&2
[[ -x "$JAIL_STATIC" && -x "$JAIL_RELEASE" ]] || die "the jail builds are missing"
mkdir -p "$OUT"
cc -O2 -Wall -Wextra -o "$FLOOR" "$ROOT/bench/floor.c" || die "building bench/floor.c failed"
ln -sfn "$STAMP" "$BENCH_DIR/results/latest"

# --- 2. the git fixture -----------------------------------------------------------------------
GIT_ID=(-c user.name=bench -c user.email=bench@invalid -c commit.gpgsign=false
        -c core.hooksPath=/dev/null -c init.defaultBranch=main)
if [[ "$(cat "$REPO.ok" 2>/dev/null)" != "$REPO_SPEC" ]]; then
    log "generating $REPO (20,000 files in 200 directories; cached for later runs)"
    rm -rf "$REPO" "$REPO.ok"
    mkdir -p "$REPO"
    for a in $(seq -w 0 19); do
        for b in $(seq -w 0 9); do
            d="$REPO/src$a/mod$b"
            mkdir -p "$d"
            for f in $(seq -w 0 99); do
                printf 'file %s/%s/%s\nline two\n' "$a" "$b" "$f" >"$d/f$f.txt"
            done
        done
    done
    git "${GIT_ID[@]}" -C "$REPO" init -q
    git "${GIT_ID[@]}" -C "$REPO" add -A
    git "${GIT_ID[@]}" -C "$REPO" commit -q -m "20k files"
    # Rewrite the index once the files are older than it, so no entry is "racily clean" (those
    # would be re-hashed on every status, and the jailed, read-only run could never fix that).
    sleep 1.1
    git -C "$REPO" reset -q
    echo "$REPO_SPEC" >"$REPO.ok"
fi
nfiles="$(git -C "$REPO" ls-files | wc -l)"
[[ "$nfiles" -eq 20000 ]] || die "$REPO has $nfiles tracked files, expected 20000"
git -C "$REPO" status >/dev/null   # refresh the index once more if anything is stale
REPO_Q="$(q "$REPO")"

# --- 3. runners -------------------------------------------------------------------------------
# Each runner is a name and a command prefix (quoted for hyperfine's -N splitting and for eval).
# The floors are the kernel's own price for a layer: the least filter, the least Landlock domain
# handling the rights jail handles. The peers get what matches jail's default: user, mount and pid
# namespaces and a read-only root where they offer it. jail runs as `jail --ro REPO`, as a user
# would for a review.
NAMES=() PREFIXES=()
runner() { NAMES+=("$1"); PREFIXES+=("$2"); }
runner bare ""
runner "floor: allow-all seccomp" "$(q "$FLOOR") seccomp"
runner "floor: minimal Landlock" "$(q "$FLOOR") landlock"
runner bwrap "bwrap --unshare-user --unshare-pid --die-with-parent --ro-bind / / --dev /dev --proc /proc --tmpfs /tmp --"
runner firejail "firejail --quiet --noprofile --"
if command -v minijail0 >/dev/null; then
    runner minijail "minijail0 -U -m -M -p -v -r --"
fi
if command -v nsjail >/dev/null; then
    runner nsjail "nsjail -Mo --quiet --chroot / --disable_clone_newnet --rlimit_as inf --rlimit_fsize inf --"
fi
runner "jail (install: crt-static)" "$(q "$JAIL_STATIC") --ro $REPO_Q --"
runner "jail (cargo build --release)" "$(q "$JAIL_RELEASE") --ro $REPO_Q --"

# Everything must actually work before it is timed; an optional peer that does not run here is
# dropped with the reason, a required one stops the bench.
log "checking that every runner works here"
git_bare="$(git -C "$REPO" status 2>&1)" || die "bare git status failed: $git_bare"
grep -q 'nothing to commit, working tree clean' <<<"$git_bare" || die "bare status not clean: $git_bare"
KEEP_N=() KEEP_P=()
for i in "${!NAMES[@]}"; do
    name="${NAMES[i]}" prefix="${PREFIXES[i]}"
    why=""
    if ! out="$(eval "$prefix /bin/true" 2>&1)"; then why="/bin/true failed: $out"
    elif ! out="$(eval "$prefix git -C $REPO_Q status" 2>&1)" || [[ "$out" != "$git_bare" ]]; then
        why="git status differs from bare: $out"
    elif ! out="$(eval "$prefix $(q "$FLOOR") time 1 dd if=/dev/zero of=/dev/null bs=1 count=1000 status=none" 2>&1)"; then
        why="dd inside failed: $out"
    fi
    if [[ -n "$why" ]]; then
        case "$name" in
            minijail | nsjail) log "skipping $name: $why"; continue ;;
            *) die "$name: $why" ;;
        esac
    fi
    KEEP_N+=("$name") KEEP_P+=("$prefix")
done
NAMES=("${KEEP_N[@]}") PREFIXES=("${KEEP_P[@]}")

# hf NAME WARMUP RUNS CMD-SUFFIX: times PREFIX CMD-SUFFIX for every runner.
# hyperfine runs each command's batch back to back, so a machine whose speed drifts (a VM with
# neighbours) favours whichever command ran in the faster stretch. Spread the runs over ROUNDS
# hyperfine invocations, alternating the command order, and merge the raw times.
hf() {
    local name="$1" warmup="$2" runs="$3" suffix="$4"
    local n=${#NAMES[@]} per=$(((runs + ROUNDS - 1) / ROUNDS)) r i j
    ((per >= 2)) || per=2
    local -a parts=()
    for ((r = 1; r <= ROUNDS; r++)); do
        local -a args=()
        for ((j = 0; j < n; j++)); do
            i=$(( r % 2 ? j : n - 1 - j ))
            args+=(-n "${NAMES[i]}" "${PREFIXES[i]:+${PREFIXES[i]} }$suffix")
        done
        log "$name: round $r/$ROUNDS ($per runs each)"
        hyperfine -N --style basic --warmup "$warmup" --runs "$per" \
            --export-json "$OUT/$name.round$r.json" "${args[@]}" >&2
        parts+=("$OUT/$name.round$r.json")
    done
    # Merged, in hyperfine's JSON shape (command, mean, stddev, median, min, max, times), in the
    # runners' order.
    jq -s --argjson order "$(printf '%s\n' "${NAMES[@]}" | jq -R . | jq -s .)" '
        def stats: (length) as $n | (add / $n) as $m | sort as $s
            | {mean: $m, stddev: (if $n > 1 then ((map(. - $m | . * .) | add) / ($n - 1) | sqrt) else 0 end),
               median: (if $n % 2 == 1 then $s[($n - 1) / 2] else ($s[$n / 2 - 1] + $s[$n / 2]) / 2 end),
               min: $s[0], max: $s[-1]};
        [.[].results[]] as $all
        | {results: [$order[] as $c | [$all[] | select(.command == $c)] as $rs
            | {command: $c, times: ([$rs[].times[]])} + ([$rs[].times[]] | stats)]}
    ' "${parts[@]}" >"$OUT/$name.json"
}
median_of() { jq -r --arg n "$2" '.results[] | select(.command == $n) | .median' "$OUT/$1.json"; }

# --- 4. start-up and git status ----------------------------------------------------------------
log "start-up: /bin/true under every runner"
hf startup "$WARMUP" "$RUNS_STARTUP" /bin/true
log "git status on 20,000 files under every runner"
hf git "$WARMUP" "$RUNS_GIT" "git -C $REPO_Q status"

# --- 5. per syscall, timed inside ---------------------------------------------------------------
# `floor time` runs the workload RUNS_INSIDE times inside the sandbox and prints the median, so the
# sandbox's start-up is not in the figure. The syscall count comes from strace on a bare run.
syscalls_of() {   # CMD... -> number of syscalls one bare run makes
    strace -f -c -U calls,name -o "$OUT/strace.txt" -- "$@" >/dev/null
    awk '$2 == "total" { print $1 }' "$OUT/strace.txt"
}
# Directories only their owner can read are skipped: inside a user namespace root cannot read
# them, bare root can, and the two would walk different trees.
FIND=(find "$FIND_DIR")
while IFS= read -r -d '' closed; do
    FIND+=(-path "$closed" -prune -o)
done < <(find "$FIND_DIR" -xdev -type d ! -perm -o=rx -print0 2>/dev/null)
FIND+=(-print)
DD=(dd if=/dev/zero of=/dev/null bs=1 "count=$DD_COUNT" status=none)
FIND_Q="$(printf '%q ' "${FIND[@]}")" DD_Q="$(printf '%q ' "${DD[@]}")"
find_calls="$(syscalls_of "${FIND[@]}")"
dd_calls="$(syscalls_of "${DD[@]}")"
declare -A FIND_NS DD_NS
for round in 1 2; do   # two passes in opposite order, the lower median kept: a drifting VM again
    order=("${!NAMES[@]}")
    ((round == 2)) && order=($(printf '%s\n' "${order[@]}" | tac))
    for i in "${order[@]}"; do
        name="${NAMES[i]}" prefix="${PREFIXES[i]}"
        log "inside $name: find $FIND_DIR, ${DD[*]} (pass $round)"
        t="$(eval "$prefix $(q "$FLOOR") time $RUNS_INSIDE $FIND_Q")"
        [[ -z "${FIND_NS[$name]:-}" || $t -lt ${FIND_NS[$name]} ]] && FIND_NS[$name]=$t
        t="$(eval "$prefix $(q "$FLOOR") time $RUNS_INSIDE $DD_Q")"
        [[ -z "${DD_NS[$name]:-}" || $t -lt ${DD_NS[$name]} ]] && DD_NS[$name]=$t
    done
done
# --- 6. supervisor memory ---------------------------------------------------------------------
log "supervisor memory: jail -- sleep 2"
field() { awk -v k="$2:" '$1 == k { print $2 }' "/proc/$1/status" 2>/dev/null; }   # kB
children_of() {   # no /proc/PID/task/TID/children on every kernel: scan PPid instead
    { grep -lsxE "PPid:[[:space:]]+$1" /proc/[0-9]*/status || true; } | sed -E 's|^/proc/([0-9]+)/status$|\1|'
}
"$JAIL_STATIC" -- sleep 2 &
sup=$!
[[ "$(field "$sup" PPid)" == "$$" ]] || die "pid $sup is not a child of this shell"
init="" cmd=""
for _ in $(seq 1 150); do   # up to ~3 s: wait until the command has exec'd sleep
    init="$(children_of "$sup" | head -n1)"
    if [[ -n "$init" ]]; then
        cmd="$(children_of "$init" | head -n1)"
        [[ -n "$cmd" && "$(cat "/proc/$cmd/comm" 2>/dev/null)" == sleep ]] && break
    fi
    sleep 0.02
done
[[ -n "$init" && -n "$cmd" ]] || die "could not find jail's init / command processes"
sleep 0.2   # settled
# comm, not exe: both are non-dumpable, so /proc/PID/exe is unreadable without privilege.
[[ "$(cat "/proc/$sup/comm")" == jail ]] || die "pid $sup is not jail"
[[ "$(cat "/proc/$init/comm")" == jail ]] || die "pid $init is not jail"
sup_rss="$(field "$sup" VmRSS)" sup_hwm="$(field "$sup" VmHWM)"
sup_anon="$(field "$sup" RssAnon)" sup_file="$(field "$sup" RssFile)"
init_rss="$(field "$init" VmRSS)" init_hwm="$(field "$init" VmHWM)"
init_anon="$(field "$init" RssAnon)" init_file="$(field "$init" RssFile)"
init_nspid="$(awk '$1 == "NSpid:" { print $NF }' "/proc/$init/status")"
[[ "$init_nspid" == 1 ]] || die "pid $init is pid $init_nspid in its namespace, expected 1"
wait "$sup" || die "jail -- sleep 2 exited with $?"
cat >"$OUT/memory.json" <<EOF
{"supervisor": {"pid": $sup, "VmRSS_kB": $sup_rss, "VmHWM_kB": $sup_hwm, "RssAnon_kB": $sup_anon, "RssFile_kB": $sup_file},
 "init": {"pid": $init, "nspid": $init_nspid, "VmRSS_kB": $init_rss, "VmHWM_kB": $init_hwm, "RssAnon_kB": $init_anon, "RssFile_kB": $init_file}}
EOF

# --- 7. report --------------------------------------------------------------------------------
st_bare="$(median_of startup bare)" git_bare_t="$(median_of git bare)"
st_bwrap="$(median_of startup bwrap)"
table="$(
    echo "| runner | start-up, ms | start-up × bwrap | git status × bare | \`find $FIND_DIR\` ns/syscall inside (+ over bare) | \`dd\` ns/syscall inside (+ over bare) |"
    echo "|---|---:|---:|---:|---:|---:|"
    for name in "${NAMES[@]}"; do
        awk -v n="$name" -v st="$(median_of startup "$name")" -v stw="$st_bwrap" \
            -v g="$(median_of git "$name")" -v gb="$git_bare_t" \
            -v f="${FIND_NS[$name]}" -v fb="${FIND_NS[bare]}" -v fc="$find_calls" \
            -v d="${DD_NS[$name]}" -v db="${DD_NS[bare]}" -v dc="$dd_calls" 'BEGIN {
            printf "| %s | %.2f | %.2f× | %.3f× | %.0f (%+.1f) | %.0f (%+.1f) |\n", n, st * 1e3, st / stw,
                g / gb, f / fc, (f - fb) / fc, d / dc, (d - db) / dc }'
    done
)"
added() { awk -v a="$1" -v b="$2" -v c="$3" 'BEGIN { printf "%.2f", (a - b) / c }'; }
J="jail (install: crt-static)"
st_jail="$(median_of startup "$J")"
dd_jail="$(added "${DD_NS[$J]}" "${DD_NS[bare]}" "$dd_calls")"
dd_floor="$(added "${DD_NS[floor: allow-all seccomp]}" "${DD_NS[bare]}" "$dd_calls")"
find_jail="$(added "${FIND_NS[$J]}" "${FIND_NS[bare]}" "$find_calls")"
find_floor="$(added "${FIND_NS[floor: minimal Landlock]}" "${FIND_NS[bare]}" "$find_calls")"
# jail's find pays its filter on every syscall as well as Landlock on every lookup: its floor is
# the two floors' sum.
find_floor_sc="$(added "${FIND_NS[floor: allow-all seccomp]}" "${FIND_NS[bare]}" "$find_calls")"
find_floors="$(awk -v a="$find_floor" -v b="$find_floor_sc" 'BEGIN { printf "%.2f", a + b }')"
verdict() { awk "BEGIN { exit !($1) }" && echo PASS || echo MISS; }
minijail_line="- n/a   start-up no slower than minijail: minijail0 is not installed here"
if [[ " ${NAMES[*]} " == *" minijail "* ]]; then
    st_mj="$(median_of startup minijail)"
    minijail_line="- $(verdict "$st_jail <= $st_mj")  start-up no slower than minijail: jail/minijail = $(awk -v a="$st_jail" -v b="$st_mj" 'BEGIN { printf "%.2f", a / b }') (≤ 1.00)"
fi
targets="$(
    echo "targets (jail as README's install command builds it; medians):"
    echo "- $(verdict "$st_jail <= 0.8 * $st_bwrap")  start-up ≤ 0.8× bwrap: jail/bwrap = $(awk -v a="$st_jail" -v b="$st_bwrap" 'BEGIN { printf "%.2f", a / b }')"
    echo "$minijail_line"
    echo "- $(verdict "$dd_jail <= $dd_floor + 1")  per syscall at the allow-all seccomp floor (+1 ns noise): jail +$dd_jail ns, floor +$dd_floor ns"
    echo "- $(verdict "$find_jail <= $find_floors + 4")  per lookup ≤ the floors + 4 ns: jail +$find_jail ns per find syscall, minimal Landlock domain +$find_floor ns and allow-all filter +$find_floor_sc ns (sum +$find_floors ns)"
    echo "- $(verdict "$(median_of git "$J") <= 1.05 * $git_bare_t")  git status ≤ 1.05× bare: $(awk -v a="$(median_of git "$J")" -v b="$git_bare_t" 'BEGIN { printf "%.3f", a / b }')×"
    echo "- $(verdict "$sup_rss <= 3 * 1024")  supervisor RSS ≤ 3 MiB: VmRSS $(awk -v k="$sup_rss" 'BEGIN { printf "%.2f", k / 1024 }') MiB (VmHWM $(awk -v k="$sup_hwm" 'BEGIN { printf "%.2f", k / 1024 }') MiB, RssAnon $sup_anon KiB); init $(awk -v k="$init_rss" 'BEGIN { printf "%.2f", k / 1024 }') MiB"
)"
report="$(
    echo "$table"
    echo
    echo "start-up: /bin/true, hyperfine medians of $RUNS_STARTUP runs over $ROUNDS rounds (bare: $(awk -v a="$st_bare" 'BEGIN { printf "%.2f", a * 1e3 }') ms); git status: $RUNS_GIT runs on 20,000 files (bare: $(awk -v a="$git_bare_t" 'BEGIN { printf "%.2f", a * 1e3 }') ms)."
    echo "inside: the median of $RUNS_INSIDE runs timed in the sandbox, the lower of two passes, over the syscalls of one bare run (strace: find $FIND_DIR $find_calls, dd $dd_calls)."
    echo
    echo "$targets"
)"
{
    echo "# jail benchmark $STAMP"
    echo
    echo "kernel $(uname -r), $(nproc) CPUs, $(hyperfine --version), $(bwrap --version), $(firejail --version | head -n1)"
    echo
    echo "$report"
} >"$OUT/summary.md"
log "results in $OUT (also $BENCH_DIR/results/latest)"
echo
echo "$report"
