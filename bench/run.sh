#!/usr/bin/env bash
# Benchmarks jail against bare execution and bubblewrap: start-up, per-syscall cost, a git
# workload and the supervisor's memory. A report, not a test: it exits 0 when a target is missed
# and non-zero only when something fails to run. See bench/README.md.
#
# Tunables (environment): RUNS_STARTUP (50), RUNS_DD (20), RUNS_GIT (50), WARMUP (5, per round),
# ROUNDS (5: each command's runs are split over this many hyperfine calls in alternating order),
# DD_COUNT (500000 one-byte blocks = ~1M read/write syscalls).
set -euo pipefail

ROOT="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd -P)"
# Work from the repo root: the jail keeps the cwd, and a cwd under /tmp would not exist inside.
cd "$ROOT"

RUNS_STARTUP="${RUNS_STARTUP:-50}"
RUNS_DD="${RUNS_DD:-20}"
RUNS_GIT="${RUNS_GIT:-50}"
WARMUP="${WARMUP:-5}"
ROUNDS="${ROUNDS:-5}"
DD_COUNT="${DD_COUNT:-500000}"

BENCH_DIR="$ROOT/target/bench"   # not under /tmp: /tmp is private inside the jail
REPO="$BENCH_DIR/repo-20k"
REPO_SPEC="files=20000 dirs=200 layout=20x10x100 v1"
STAMP="$(date +%Y%m%d-%H%M%S)"
OUT="$BENCH_DIR/results/$STAMP"
HOST="$(rustc -vV | sed -n 's/^host: //p')"
# The recommended release build: glibc linked statically, which saves the dynamic loader's work
# (about 0.4 ms of jail's start-up here). --target keeps the flag off build scripts and proc-macros.
JAIL="$ROOT/target/$HOST/release/jail"

log() { printf '\n== %s\n' "$*" >&2; }
die() { printf 'bench: error: %s\n' "$*" >&2; exit 1; }
q() { printf '%q' "$1"; }   # quoting that hyperfine's -N word splitting understands

# --- 1. tools and build -----------------------------------------------------------------------
SUDO=""
if [[ $EUID -ne 0 ]]; then
    command -v sudo >/dev/null || die "not root and no sudo: install hyperfine, bubblewrap, jq"
    SUDO="sudo"
fi

missing=()
command -v hyperfine >/dev/null || missing+=(hyperfine)
command -v bwrap >/dev/null || missing+=(bubblewrap)
command -v jq >/dev/null || missing+=(jq)
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
command -v strace >/dev/null || true   # optional, only mentioned in the README

log "building jail (release, --locked, static glibc)"
RUSTFLAGS="-C target-feature=+crt-static" \
    cargo build --release --locked --target "$HOST" --manifest-path "$ROOT/Cargo.toml" >&2
[[ -x "$JAIL" ]] || die "$JAIL was not built"

mkdir -p "$OUT"
ln -sfn "$STAMP" "$BENCH_DIR/results/latest"

BWRAP=(bwrap --unshare-user --unshare-pid --die-with-parent --ro-bind / / --dev /dev
       --proc /proc --tmpfs /tmp --)
BWRAP_STR="$(printf '%q ' "${BWRAP[@]}")"
JAIL_Q="$(q "$JAIL")"

# Sanity: everything must actually work before it is timed.
log "checking that jail and bwrap run here"
"$JAIL" -- /bin/true || die "jail -- /bin/true failed"
"${BWRAP[@]}" /bin/true || die "bwrap -- /bin/true failed (flags: ${BWRAP[*]})"
for runner in "" "$JAIL --" "${BWRAP[*]}"; do
    # shellcheck disable=SC2086
    $runner dd if=/dev/zero of=/dev/null bs=1 count=1000 status=none \
        || die "dd failed under '${runner:-bare}'"
done

# hf NAME WARMUP RUNS LABEL CMD [LABEL CMD]...
# hyperfine runs each command's batch back to back, so a machine whose speed drifts (a VM with
# neighbours) favours whichever command ran in the faster stretch. Spread the runs over ROUNDS
# hyperfine invocations, alternating the command order, and merge the raw times.
hf() {
    local name="$1" warmup="$2" runs="$3"
    shift 3
    local -a labels=() cmds=()
    while (($#)); do labels+=("$1"); cmds+=("$2"); shift 2; done
    local n=${#labels[@]} per=$(((runs + ROUNDS - 1) / ROUNDS)) r i j
    ((per >= 2)) || per=2
    local -a parts=()
    for ((r = 1; r <= ROUNDS; r++)); do
        local -a args=()
        for ((j = 0; j < n; j++)); do
            i=$(( r % 2 ? j : n - 1 - j ))
            args+=(-n "${labels[i]}" "${cmds[i]}")
        done
        log "$name: round $r/$ROUNDS ($per runs each)"
        hyperfine -N --style basic --warmup "$warmup" --runs "$per" \
            --export-json "$OUT/$name.round$r.json" \
            --export-markdown "$OUT/$name.round$r.md" "${args[@]}" >&2
        parts+=("$OUT/$name.round$r.json")
    done
    # Merged file in hyperfine's JSON shape (command, mean, stddev, median, min, max, user,
    # system, times), in the original command order.
    jq -s --argjson order "$(printf '%s\n' "${labels[@]}" | jq -R . | jq -s .)" '
        def stats: (length) as $n | (add / $n) as $m | sort as $s
            | {mean: $m, stddev: (if $n > 1 then ((map(. - $m | . * .) | add) / ($n - 1) | sqrt) else 0 end),
               median: (if $n % 2 == 1 then $s[($n - 1) / 2] else ($s[$n / 2 - 1] + $s[$n / 2]) / 2 end),
               min: $s[0], max: $s[-1]};
        [.[].results[]] as $all
        | {results: [$order[] as $c | [$all[] | select(.command == $c)] as $rs
            | {command: $c,
               times: ([$rs[].times[]])}
              + ([$rs[].times[]] | stats)
              + {user: ([$rs[].user] | add / length), system: ([$rs[].system] | add / length)}]}
    ' "${parts[@]}" >"$OUT/$name.json"
    jq -r '
        (.results | map(.mean) | min) as $best
        | "| Command | Mean [ms] | Min [ms] | Max [ms] | Relative |",
          "|:---|---:|---:|---:|---:|",
          (.results[] | "| `\(.command)` | \(.mean * 1e3 * 100 | round / 100) ± \(.stddev * 1e3 * 100 | round / 100) | \(.min * 1e3 * 100 | round / 100) | \(.max * 1e3 * 100 | round / 100) | \(.mean / $best * 100 | round / 100) |")
    ' "$OUT/$name.json" >"$OUT/$name.md"
}

# --- 2. start-up ------------------------------------------------------------------------------
log "start-up: /bin/true bare vs jail vs bwrap"
hf startup "$WARMUP" "$RUNS_STARTUP" \
    bare "/bin/true" \
    jail "$JAIL_Q -- /bin/true" \
    bwrap "${BWRAP_STR}/bin/true"

# --- 3. per-syscall cost ----------------------------------------------------------------------
DD="dd if=/dev/zero of=/dev/null bs=1 count=$DD_COUNT status=none"
log "syscalls: $DD (~$((2 * DD_COUNT)) syscalls) bare vs jail vs bwrap"
hf syscalls 1 "$RUNS_DD" \
    bare "$DD" \
    jail "$JAIL_Q -- $DD" \
    bwrap "${BWRAP_STR}$DD"

# --- 4. git status on 20k files ---------------------------------------------------------------
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

log "checking git status bare and jailed (ownership / safe.directory)"
bare_out="$(git -C "$REPO" status 2>&1)" || die "bare git status failed: $bare_out"
jail_out="$("$JAIL" --ro "$REPO" -- git -C "$REPO" status 2>&1)" \
    || die "jailed git status failed: $jail_out"
grep -q 'nothing to commit, working tree clean' <<<"$bare_out" || die "bare status not clean: $bare_out"
[[ "$bare_out" == "$jail_out" ]] || die "jailed git status differs from bare: $jail_out"

log "git: git -C REPO status bare vs jail --ro REPO"
REPO_Q="$(q "$REPO")"
hf git "$WARMUP" "$RUNS_GIT" \
    bare "git -C $REPO_Q status" \
    jail "$JAIL_Q --ro $REPO_Q -- git -C $REPO_Q status"

# --- 5. supervisor memory ---------------------------------------------------------------------
log "supervisor memory: jail -- sleep 2"
field() { awk -v k="$2:" '$1 == k { print $2 }' "/proc/$1/status" 2>/dev/null; }   # kB
children_of() {   # no /proc/PID/task/TID/children on every kernel: scan PPid instead
    { grep -lsxE "PPid:[[:space:]]+$1" /proc/[0-9]*/status || true; } | sed -E 's|^/proc/([0-9]+)/status$|\1|'
}
"$JAIL" -- sleep 2 &
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

# --- 6. report --------------------------------------------------------------------------------
# mean, sd, median, min (seconds) of command NAME in result FILE
stat_of() {
    jq -r --arg n "$2" '.results[] | select(.command == $n) | "\(.mean) \(.stddev) \(.median) \(.min)"' \
        "$OUT/$1.json"
}
read -r st_bare_m st_bare_s _ _ < <(stat_of startup bare)
read -r st_jail_m st_jail_s st_jail_med st_jail_min < <(stat_of startup jail)
read -r st_bw_m st_bw_s st_bw_med st_bw_min < <(stat_of startup bwrap)
read -r dd_bare_m dd_bare_s _ _ < <(stat_of syscalls bare)
read -r dd_jail_m dd_jail_s _ _ < <(stat_of syscalls jail)
read -r dd_bw_m dd_bw_s _ _ < <(stat_of syscalls bwrap)
read -r git_bare_m git_bare_s _ _ < <(stat_of git bare)
read -r git_jail_m git_jail_s _ _ < <(stat_of git jail)

AWK_LIB='
function fmt_t(m, s) { return (m >= 1) ? sprintf("%.3f s ± %.3f s", m, s) : sprintf("%.2f ms ± %.2f ms", m*1e3, s*1e3) }
function ratio(am, as, bm, bs,   r) { r = am / bm; return sprintf("%.2f× ± %.2f", r, r * sqrt((as/am)^2 + (bs/bm)^2)) }
function row(name, m, s, bm, bs, wm, ws) {
    printf "| %s | %s | %s | %s |\n", name, fmt_t(m, s),
        (bm == "" ? "—" : ratio(m, s, bm, bs)), (wm == "" ? "—" : ratio(m, s, wm, ws))
}
function mib(k) { return sprintf("%d KiB (%.2f MiB)", k, k / 1024) }
function verdict(ok) { return ok ? "PASS" : "MISS" }
'
export V="$st_bare_m $st_bare_s $st_jail_m $st_jail_s $st_bw_m $st_bw_s $dd_bare_m $dd_bare_s \
$dd_jail_m $dd_jail_s $dd_bw_m $dd_bw_s $git_bare_m $git_bare_s $git_jail_m $git_jail_s \
$sup_rss $sup_hwm $sup_anon $sup_file $init_rss $init_hwm $init_anon $init_file \
$st_jail_med $st_jail_min $st_bw_med $st_bw_min"
export SUP="$sup" INIT="$init" DD_COUNT
report="$(awk "$AWK_LIB"'
BEGIN {
    split(ENVIRON["V"], v, " ")
    stb=v[1]; stbs=v[2]; stj=v[3]; stjs=v[4]; stw=v[5]; stws=v[6]
    ddb=v[7]; ddbs=v[8]; ddj=v[9]; ddjs=v[10]; ddw=v[11]; ddws=v[12]
    gb=v[13]; gbs=v[14]; gj=v[15]; gjs=v[16]
    srss=v[17]; shwm=v[18]; sanon=v[19]; sfile=v[20]; irss=v[21]; ihwm=v[22]; ianon=v[23]; ifile=v[24]
    stjmed=v[25]; stjmin=v[26]; stwmed=v[27]; stwmin=v[28]
    nsys = 2 * ENVIRON["DD_COUNT"]
    print "| measurement | mean ± σ | vs bare | vs bwrap |"
    print "|---|---|---|---|"
    row("start-up: /bin/true (bare)", stb, stbs, "", "", stw, stws)
    row("start-up: jail -- /bin/true", stj, stjs, stb, stbs, stw, stws)
    row("start-up: bwrap -- /bin/true", stw, stws, stb, stbs, "", "")
    row("syscalls: dd 1-byte x" ENVIRON["DD_COUNT"] " (bare)", ddb, ddbs, "", "", ddw, ddws)
    row("syscalls: jail -- dd", ddj, ddjs, ddb, ddbs, ddw, ddws)
    row("syscalls: bwrap -- dd", ddw, ddws, ddb, ddbs, "", "")
    row("git status, 20k files (bare)", gb, gbs, "", "", "", "")
    row("git status: jail --ro REPO", gj, gjs, gb, gbs, "", "")
    print ""
    printf "supervisor (outer jail, pid %s): VmRSS %s, VmHWM %s (RssAnon %d KiB, RssFile %d KiB)\n", ENVIRON["SUP"], mib(srss), mib(shwm), sanon, sfile
    printf "init (pid 1 in the namespace, host pid %s): VmRSS %s, VmHWM %s (RssAnon %d KiB, RssFile %d KiB)\n", ENVIRON["INIT"], mib(irss), mib(ihwm), ianon, ifile
    printf "derived: jail adds %.0f ns/syscall over bare, bwrap %.0f ns/syscall (dd overhead minus start-up overhead, / %d syscalls)\n", \
        ((ddj - ddb) - (stj - stb)) / nsys * 1e9, ((ddw - ddb) - (stw - stb)) / nsys * 1e9, nsys
    printf "derived: jailed git status costs %.2f ms more than bare, of which %.2f ms is jail start-up; the rest (%.2f ms, %.1f%% of bare) is inside git\n", \
        (gj - gb) * 1e3, (stj - stb) * 1e3, ((gj - gb) - (stj - stb)) * 1e3, ((gj - gb) - (stj - stb)) / gb * 100
    print ""
    print "targets:"
    printf "- %s  jail start-up no slower than bwrap: jail/bwrap = %.3f (≤ 1.00) [by median %.3f, by min %.3f]\n", \
        verdict(stj / stw <= 1.0), stj / stw, stjmed / stwmed, stjmin / stwmin
    printf "- %s  git status jailed within 1.05× of bare: jail/bare = %.3f (≤ 1.05)\n", verdict(gj / gb <= 1.05), gj / gb
    printf "- %s  supervisor RSS < 5 MiB: VmRSS = %.2f MiB (VmHWM %.2f MiB)\n", verdict(srss < 5 * 1024), srss / 1024, shwm / 1024
}')"
{
    echo "# jail benchmark $STAMP"
    echo
    echo "kernel $(uname -r), $(nproc) CPUs, $(hyperfine --version), $(bwrap --version)"
    echo
    echo "$report"
} >"$OUT/summary.md"
log "results in $OUT (also $BENCH_DIR/results/latest)"
echo
echo "$report"
