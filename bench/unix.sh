#!/usr/bin/env bash
# The cost of a mediated unix connect: N connects bare and under `jail --allow-unix-sockets`
# (every connect goes to the supervisor), minus the same process with no connect, per connect;
# and start-up with and without unix sockets allowed (mediation adds a connector process and a
# second filter only when they are allowed). A report, not a test. See bench/README.md.
set -euo pipefail
ROOT="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd -P)"
cd "$ROOT"
N="${N:-2000}"
RUNS="${RUNS:-20}"
command -v hyperfine >/dev/null || { echo "bench: hyperfine is needed (apt-get install hyperfine)" >&2; exit 1; }
cargo build --release --locked >&2
JAIL="$ROOT/target/release/jail"
PY="$ROOT/bench/unix-connect.py"
OUT="$ROOT/target/bench/unix-$(date +%Y%m%d-%H%M%S).json"
mkdir -p "$(dirname "$OUT")"
hyperfine -N --warmup 3 --runs "$RUNS" --export-json "$OUT" \
    -n "bare 0" "python3 $PY 0" \
    -n "bare $N" "python3 $PY $N" \
    -n "jail 0" "$JAIL --allow-unix-sockets -- python3 $PY 0" \
    -n "jail $N" "$JAIL --allow-unix-sockets -- python3 $PY $N" \
    -n "start-up, sockets refused" "$JAIL -- /bin/true" \
    -n "start-up, sockets mediated" "$JAIL --allow-unix-sockets -- /bin/true" >&2
python3 - "$OUT" "$N" <<'PY'
import json, sys
res = {r["command"]: r for r in json.load(open(sys.argv[1]))["results"]}
n = int(sys.argv[2])
med = lambda k: res[k]["median"]
bare = (med(f"bare {n}") - med("bare 0")) / n * 1e6
jail = (med(f"jail {n}") - med("jail 0")) / n * 1e6
print(f"per connect: bare {bare:.1f} µs, mediated {jail:.1f} µs ({jail - bare:+.1f} µs, x{jail / bare:.1f})")
print(f"start-up: refused {med('start-up, sockets refused')*1e3:.2f} ms, "
      f"mediated {med('start-up, sockets mediated')*1e3:.2f} ms")
PY
