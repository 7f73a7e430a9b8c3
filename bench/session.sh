#!/usr/bin/env bash
# Sessions against a sandbox per command, in one hyperfine run: `jail exec S -- /bin/true` beside
# bare /bin/true, bubblewrap, minijail (when installed) and a one-shot `jail -- /bin/true`; then
# 1,000 sequential execs and 8 callers at a time, p50 and p99 of each exec's wall time: through
# `jail exec` (a process per command) and through the library (`Session::exec` from one process,
# as an orchestrator that keeps the session does).
# A report, not a test (see bench/README.md). Tunables: RUNS (300), WARMUP (20), SEQ (1000),
# PAR (8), PAR_EACH (125).
set -euo pipefail

ROOT="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd -P)"
cd "$ROOT"
RUNS="${RUNS:-300}"
WARMUP="${WARMUP:-20}"
SEQ="${SEQ:-1000}"
PAR="${PAR:-8}"
PAR_EACH="${PAR_EACH:-125}"
OUT="$ROOT/target/bench/session-$(date +%Y%m%d-%H%M%S)"
mkdir -p "$OUT"

# The README's install build: glibc linked statically (no dynamic loader at each start, which is
# most of what a `jail exec` client costs beyond a bare process).
HOST="$(rustc -vV | sed -n 's/^host: //p')"
RUSTFLAGS="-C target-feature=+crt-static" cargo build --release --locked --target "$HOST" \
    --bin jail --example session_exec_bench >&2
JAIL="$ROOT/target/$HOST/release/jail"
LIBRARY="$ROOT/target/$HOST/release/examples/session_exec_bench"
NAME="bench-$$"
"$JAIL" session start --name "$NAME" --ro "$ROOT" >/dev/null
trap '"$JAIL" session stop "$NAME" >/dev/null 2>&1 || true' EXIT

cmds=(-n bare /bin/true
      -n "jail exec" "$JAIL exec $NAME -- /bin/true"
      -n "jail one-shot" "$JAIL --ro $ROOT -- /bin/true"
      -n "jail one-shot, no flags" "$JAIL -- /bin/true"
      -n bwrap "bwrap --unshare-user --unshare-pid --die-with-parent --ro-bind / / --dev /dev --proc /proc --tmpfs /tmp -- /bin/true")
if command -v minijail0 >/dev/null; then
    cmds+=(-n minijail "minijail0 -p -v -- /bin/true")
fi
hyperfine -N --warmup "$WARMUP" --runs "$RUNS" --export-json "$OUT/startup.json" "${cmds[@]}" >&2

# Each exec's wall time, sequential and PAR at a time.
python3 - "$JAIL" "$NAME" "$SEQ" "$PAR" "$PAR_EACH" "$OUT/startup.json" <<'EOF'
import json, subprocess, sys, threading, time
jail, name, seq, par, each, startup = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), sys.argv[6]

def one():
    t = time.perf_counter()
    subprocess.run([jail, "exec", name, "--", "/bin/true"], check=True)
    return (time.perf_counter() - t) * 1000

def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * p))]

seq_times = [one() for _ in range(seq)]
par_times, lock = [], threading.Lock()
def worker():
    mine = [one() for _ in range(each)]
    with lock:
        par_times.extend(mine)
threads = [threading.Thread(target=worker) for _ in range(par)]
t0 = time.perf_counter()
for t in threads: t.start()
for t in threads: t.join()
wall = time.perf_counter() - t0

res = {r["command"]: r["median"] * 1000 for r in json.load(open(startup))["results"]}
bare, bwrap, ex, one_shot = res["bare"], res["bwrap"], res["jail exec"], res["jail one-shot"]
print("| runner | median, ms | × bare | × bwrap |")
print("|---|---|---|---|")
for k, v in res.items():
    print(f"| {k} | {v:.2f} | {v / bare:.2f} | {v / bwrap:.2f} |")
print()
print(f"- jail exec ≤ 0.4× bwrap: {ex / bwrap:.2f}; ≤ 2× bare: {ex / bare:.2f}; one-shot ≤ 1.0× bwrap: {one_shot / bwrap:.2f}")
print(f"- {seq} sequential execs (Python subprocess, wall): p50 {pct(seq_times, .5):.2f} ms, p99 {pct(seq_times, .99):.2f} ms")
print(f"- {par}×{each} execs {par} at a time: p50 {pct(par_times, .5):.2f} ms, p99 {pct(par_times, .99):.2f} ms, {len(par_times) / wall:.0f} execs/s")
EOF
"$LIBRARY" "$NAME" "$SEQ" "$PAR" "$PAR_EACH" -- /bin/true | sed 's/^/- /'
