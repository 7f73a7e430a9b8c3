#!/usr/bin/env bash
# Benchmarks jail's network proxy (--net allow-host=...) on loopback: bulk throughput through the
# proxy against a direct download, and the latency the proxy adds to a small request. A report,
# not a test: it exits 0 whatever the numbers, non-zero only when something fails to run.
#
# Usage: bench/net.sh [path/to/jail]     (default: target/release/jail)
# Tunables (environment): RUNS (5), WARMUP (1), BIG_MIB (512), SMALL_REQUESTS (20).
#
# The jailed curl is given no proxy option: it must pick up the proxy from the environment jail
# sets (curl reads only the lower-case http_proxy for http:// URLs, and obeys NO_PROXY).
set -euo pipefail

ROOT="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd -P)"
# Work from the repo root: the jail keeps the cwd, and a cwd under /tmp would not exist inside.
cd "$ROOT"

JAIL="${1:-target/release/jail}"
RUNS="${RUNS:-5}"
WARMUP="${WARMUP:-1}"
BIG_MIB="${BIG_MIB:-512}"
SMALL_REQUESTS="${SMALL_REQUESTS:-20}"

log() { printf '\n== %s\n' "$*" >&2; }
die() { printf 'bench/net: error: %s\n' "$*" >&2; exit 1; }

# --- tools ------------------------------------------------------------------------------------
missing=()
for tool in hyperfine curl python3; do
    command -v "$tool" >/dev/null || missing+=("$tool")
done
if ((${#missing[@]})); then
    die "missing: ${missing[*]}; install them (apt-get install ${missing[*]}) and run again"
fi
[[ -x "$JAIL" ]] || die "$JAIL is not an executable (build it with cargo build --release, or pass its path)"
JAIL="$(cd -- "$(dirname -- "$JAIL")" && pwd -P)/$(basename -- "$JAIL")"

# --- server -----------------------------------------------------------------------------------
# The files and the server run outside the jail, so the private /tmp inside does not matter.
WORK="$(mktemp -d "${TMPDIR:-/tmp}/jail-bench-net.XXXXXX")"
SERVER_PID=""
cleanup() {
    if [[ -n "$SERVER_PID" ]]; then
        kill "$SERVER_PID" 2>/dev/null || true
        wait "$SERVER_PID" 2>/dev/null || true
    fi
    rm -rf -- "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

mkdir "$WORK/www"
log "creating a ${BIG_MIB} MiB file and a 1-byte file in $WORK/www"
head -c "$((BIG_MIB * 1024 * 1024))" /dev/zero >"$WORK/www/big"
printf 'x' >"$WORK/www/small"

# Port 0 lets the kernel choose a free port; the server prints the one it got (-u: unbuffered).
python3 -u -m http.server --bind 127.0.0.1 --directory "$WORK/www" 0 \
    >"$WORK/server.log" 2>&1 &
SERVER_PID=$!
PORT=""
for _ in $(seq 100); do
    PORT="$(sed -n 's/.* port \([0-9][0-9]*\).*/\1/p' "$WORK/server.log" | head -n1)"
    [[ -n "$PORT" ]] && break
    kill -0 "$SERVER_PID" 2>/dev/null || die "the python server exited: $(cat "$WORK/server.log")"
    sleep 0.1
done
[[ -n "$PORT" ]] || die "the python server did not report its port: $(cat "$WORK/server.log")"
BASE="http://127.0.0.1:$PORT"
BIG="$BASE/big"
SMALL="$BASE/small"
curl -sf -o /dev/null "$SMALL" || die "cannot fetch $SMALL directly"
log "serving $WORK/www at $BASE (pid $SERVER_PID)"

NET=(--net "allow-host=127.0.0.1:$PORT")

# --- sanity: the jailed curl goes through the proxy, and only through it ----------------------
log "checking the jailed download works"
code="$("$JAIL" "${NET[@]}" -- curl -s -o /dev/null -w '%{http_code}' "$SMALL" || true)"
if [[ "$code" != "200" ]]; then
    die "jail ${NET[*]} -- curl $SMALL gave HTTP '${code:-nothing}' (does jail set http_proxy in \
lower case and clear NO_PROXY?)"
fi
code="$("$JAIL" --net none -- curl -s -o /dev/null -w '%{http_code}' "$SMALL" || true)"
if [[ "$code" == "200" ]]; then
    die "jail --net none -- curl $SMALL succeeded: the jail is not in a network namespace of its own"
fi

# --- measurements -----------------------------------------------------------------------------
# -N: no intermediate shell, whose start-up would blur the latency numbers. hyperfine splits the
# command lines like a shell does, so paths are quoted with %q.
HF=(hyperfine --warmup "$WARMUP" --runs "$RUNS" -N --style basic)
q() { printf '%q' "$1"; }
JQ="$(q "$JAIL")"
NETQ="--net $(q "allow-host=127.0.0.1:$PORT")"

# Mean seconds of each command in a hyperfine JSON export, one per line, in order.
means() {
    python3 -c 'import json,sys; [print(r["mean"]) for r in json.load(open(sys.argv[1]))["results"]]' "$1"
}
# calc EXPR: floating-point arithmetic without bc.
calc() { python3 -c "import sys; print(eval(sys.argv[1]))" "$1"; }

log "throughput: ${BIG_MIB} MiB, direct vs through the jail's proxy"
"${HF[@]}" --export-json "$WORK/big.json" \
    -n direct "curl -s -o /dev/null $BIG" \
    -n jailed "$JQ $NETQ -- curl -s -o /dev/null $BIG" >&2
mapfile -t big < <(means "$WORK/big.json")

log "latency: one 1-byte request"
"${HF[@]}" --export-json "$WORK/small.json" \
    -n direct "curl -s -o /dev/null $SMALL" \
    -n jail-none-true "$JQ --net none -- true" \
    -n jailed "$JQ $NETQ -- curl -s -o /dev/null $SMALL" >&2
mapfile -t small < <(means "$WORK/small.json")

log "per-request time of ${SMALL_REQUESTS} requests in one curl (no jail start-up in it)"
curl_args=(-s -w '%{time_total}\n')
for _ in $(seq "$SMALL_REQUESTS"); do curl_args+=(-o /dev/null "$SMALL"); done
curl "${curl_args[@]}" >"$WORK/direct.times"
"$JAIL" "${NET[@]}" -- curl "${curl_args[@]}" >"$WORK/jailed.times"
# Median of a file of seconds, in ms.
median_ms() {
    python3 -c 'import statistics,sys; print(round(statistics.median(float(l) for l in open(sys.argv[1]) if l.strip())*1000, 3))' "$1"
}
direct_req="$(median_ms "$WORK/direct.times")"
jailed_req="$(median_ms "$WORK/jailed.times")"

# --- report -----------------------------------------------------------------------------------
direct_mibs="$(calc "round($BIG_MIB / ${big[0]}, 1)")"
jailed_mibs="$(calc "round($BIG_MIB / ${big[1]}, 1)")"
ratio="$(calc "round(${big[0]} / ${big[1]}, 3)")"
added_ms="$(calc "round((${small[2]} - ${small[1]} - ${small[0]}) * 1000, 2)")"

printf '\n== results (mean of %s runs)\n' "$RUNS"
printf 'throughput direct:            %10s MiB/s\n' "$direct_mibs"
printf 'throughput through the proxy: %10s MiB/s  (ratio %s, target >= 0.8; includes jail start-up)\n' \
    "$jailed_mibs" "$ratio"
printf 'small request direct:         %10s ms\n' "$(calc "round(${small[0]} * 1000, 2)")"
printf 'jail --net none -- true:      %10s ms\n' "$(calc "round(${small[1]} * 1000, 2)")"
printf 'small request jailed:         %10s ms\n' "$(calc "round(${small[2]} * 1000, 2)")"
printf 'added latency (jailed - jail start - direct): %s ms\n' "$added_ms"
printf 'per request in one curl (median of %s): direct %s ms, through the proxy %s ms, added %s ms\n' \
    "$SMALL_REQUESTS" "$direct_req" "$jailed_req" "$(calc "round($jailed_req - $direct_req, 3)")"
