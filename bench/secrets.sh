#!/usr/bin/env bash
# Benchmarks the path a --secret's host takes through jail's proxy (TLS terminated with the run
# CA, the request heads rewritten, TLS again to the server) against the plain CONNECT tunnel
# every other allowed host gets, and against curl straight to the server ("bare"), on loopback:
# the latency of small requests (keep-alive and a new connection per request) and the
# throughput of a download and an upload. A report, not a test: it exits 0 whatever the
# figures, non-zero only when something fails to run.
#
#   bench/secrets.sh [PATH/TO/jail]   default: a release build with --features test-hooks
#
# Why test-hooks: the proxy resolves names itself and refuses loopback addresses for a name, so
# the two test names (secret.test, other.test) can reach the loopback server only through
# JAIL_TEST_HOSTS, which only a build with that feature reads. The proxy verifies the server
# against a test CA made here, through jail's own SSL_CERT_FILE (the command's bundle starts
# with that file too, so curl inside trusts the tunnelled host).
#
# Tunables (environment): RUNS (10), WARMUP (2), N (200: requests per curl), MIB (100: size of
# the download and the upload), SAMPLES (5: jail runs whose per-request times make p50/p99).
set -euo pipefail

ROOT="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd -P)"
# The jail keeps the cwd, and a cwd under /tmp would not exist inside.
cd "$ROOT"
RUNS="${RUNS:-10}"
WARMUP="${WARMUP:-2}"
N="${N:-200}"
MIB="${MIB:-100}"
SAMPLES="${SAMPLES:-5}"
HOST="$(rustc -vV | sed -n 's/^host: //p')"
JAIL="${1:-$ROOT/target/bench-hooks/$HOST/release/jail}"

die() { printf 'bench/secrets: error: %s\n' "$*" >&2; exit 1; }
log() { printf '\n== %s\n' "$*" >&2; }

missing=()
for tool in hyperfine curl node openssl python3; do
    command -v "$tool" >/dev/null || missing+=("$tool")
done
((${#missing[@]} == 0)) || die "missing: ${missing[*]} (apt-get install ${missing[*]/node/nodejs})"
if [[ -z "${1:-}" ]]; then
    log "building jail with test-hooks (release) for JAIL_TEST_HOSTS"
    # The same build directory as bench/cow.sh: one build serves both.
    cargo build --release --locked --features test-hooks --target "$HOST" \
        --target-dir "$ROOT/target/bench-hooks" >&2
fi
[[ -x "$JAIL" ]] || die "$JAIL is not executable"
JAIL="$(cd -- "$(dirname -- "$JAIL")" && pwd -P)/$(basename -- "$JAIL")"

# --- fixtures: a test CA, a certificate per name, the upload's file ----------------------------
# Not under /tmp: /tmp is private inside the jail, and curl inside reads the upload from here.
WORK="$(mktemp -d /var/tmp/jail-secrets-bench.XXXXXX)"
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
chmod 755 "$WORK"

log "making a test CA and certificates for secret.test and other.test in $WORK"
CA="$WORK/ca.pem"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
    -subj '/CN=jail bench CA' -keyout "$WORK/ca.key" -out "$CA" 2>/dev/null
for name in secret.test other.test; do
    openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
        -subj "/CN=$name" -keyout "$WORK/$name.key" 2>/dev/null |
        openssl x509 -req -CA "$CA" -CAkey "$WORK/ca.key" -CAcreateserial -days 2 \
            -out "$WORK/$name.pem" 2>/dev/null -extfile <(printf '%s\n' \
            "subjectAltName=DNS:$name" "basicConstraints=critical,CA:FALSE" \
            "keyUsage=critical,digitalSignature" "extendedKeyUsage=serverAuth")
done
chmod 644 "$WORK"/*
BYTES=$((MIB * 1024 * 1024))
head -c "$BYTES" /dev/zero >"$WORK/upload"

# --- the server -------------------------------------------------------------------------------
node "$ROOT/bench/https-server.js" "$WORK/secret.test.pem" "$WORK/secret.test.key" \
    "$WORK/other.test.pem" "$WORK/other.test.key" >"$WORK/ports" 2>"$WORK/server.log" &
SERVER_PID=$!
for _ in $(seq 100); do
    [[ -s "$WORK/ports" ]] && break
    kill -0 "$SERVER_PID" 2>/dev/null || die "the node server exited: $(cat "$WORK/server.log")"
    sleep 0.1
done
read -r SP OP <"$WORK/ports" || die "the node server did not print its ports"
log "serving secret.test on 127.0.0.1:$SP, other.test on 127.0.0.1:$OP (pid $SERVER_PID)"

export JAIL_TEST_HOSTS="secret.test=127.0.0.1,other.test=127.0.0.1"
export SSL_CERT_FILE="$CA"
# The secret: a value only jail sees; inside, K holds a placeholder.
export K="sk-bench-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')"
FLAGS="--net allow=secret.test,other.test --net allow-host=127.0.0.1:$SP \
--net allow-host=127.0.0.1:$OP --ro $WORK --secret K@secret.test"
BARE_TLS="--cacert $CA --resolve secret.test:$SP:127.0.0.1"
INT="https://secret.test:$SP"
TUN="https://other.test:$OP"
# Every curl sends the key header, so the intercepted path does its rewrite; the shell is there
# to expand $K (the placeholder inside, the value outside), in every row alike.
CURL='curl -sS --max-time 120 -H "x-api-key: $K"'

# --- sanity: the three paths are what they claim ----------------------------------------------
log "checking the three paths"
got="$(sh -c "curl -sS --max-time 10 $BARE_TLS -H \"x-api-key: \$K\" $INT/key")" ||
    die "bare curl to $INT failed"
[[ "$got" == "$K" ]] || die "bare: the server got '$got' as the key"
# shellcheck disable=SC2086
got="$("$JAIL" $FLAGS -- sh -c "curl -sS --max-time 10 -H \"x-api-key: \$K\" $INT/key; \
echo \"\$K\"; curl -sS --max-time 10 -H \"x-api-key: \$K\" $TUN/key")" ||
    die "a jailed curl failed: $got"
mapfile -t lines <<<"$got"
[[ "${lines[0]}" == "$K" ]] || die "intercepted: the server got '${lines[0]}', not the value"
[[ "${lines[1]}" == jail-placeholder-* ]] || die "inside, K is '${lines[1]}', not a placeholder"
[[ "${lines[2]}" == "${lines[1]}" ]] || die "tunnel: the server got '${lines[2]}', not the placeholder"

# --- measurements -----------------------------------------------------------------------------
OUT="$ROOT/target/bench/secrets/$(date +%Y%m%d-%H%M%S)"
mkdir -p "$OUT"
HF=(hyperfine -N --style basic --warmup "$WARMUP" --runs "$RUNS")
J="$JAIL $FLAGS --"

# row NAME COMMAND: a hyperfine command for the arrays below.
rows=()
row() { rows+=(-n "$1" "$2"); }
measure() { # measure FILE: runs the rows collected so far, then forgets them
    "${HF[@]}" --export-json "$OUT/$1.json" "${rows[@]}" >&2
    rows=()
}

log "start-up: jail with these flags and nothing to do"
row start "$J true"
measure startup

# curl expands [1-N] into N URLs and sends them one after another on one connection; with
# "Connection: close" the server closes after each, so each request has its connect, its CONNECT
# and its TLS handshakes (two on the intercepted path).
for mode in keepalive close; do
    extra=""
    [[ "$mode" == close ]] && extra='-H "Connection: close"'
    log "latency: $N requests of 1 byte in one curl ($mode)"
    row bare "sh -c '$CURL $extra $BARE_TLS \"$INT/small?[1-$N]\" >/dev/null'"
    row tunnel "$J sh -c '$CURL $extra \"$TUN/small?[1-$N]\" >/dev/null'"
    row intercepted "$J sh -c '$CURL $extra \"$INT/small?[1-$N]\" >/dev/null'"
    measure "latency-$mode"
    # Per request, as curl times each (connect and handshakes in it when the connection is new).
    for path in bare tunnel intercepted; do
        for _ in $(seq "$SAMPLES"); do
            w="-o /dev/null -w '%{time_total}\n'"
            case "$path" in
            bare) sh -c "$CURL $extra $w $BARE_TLS \"$INT/small?[1-$N]\"" ;;
            tunnel) $J sh -c "$CURL $extra $w \"$TUN/small?[1-$N]\"" ;;
            intercepted) $J sh -c "$CURL $extra $w \"$INT/small?[1-$N]\"" ;;
            esac
        done >"$OUT/requests-$mode-$path.txt"
    done
done

log "throughput: a ${MIB} MiB download"
row bare "sh -c '$CURL $BARE_TLS -o /dev/null $INT/bytes/$BYTES'"
row tunnel "$J sh -c '$CURL -o /dev/null $TUN/bytes/$BYTES'"
row intercepted "$J sh -c '$CURL -o /dev/null $INT/bytes/$BYTES'"
measure download

# No "Expect: 100-continue": its wait is a round trip, not throughput.
log "throughput: a ${MIB} MiB upload"
up="-H Expect: -T $WORK/upload -o /dev/null"
row bare "sh -c '$CURL $BARE_TLS $up $INT/upload'"
row tunnel "$J sh -c '$CURL $up $TUN/upload'"
row intercepted "$J sh -c '$CURL $up $INT/upload'"
measure upload

# --- report -----------------------------------------------------------------------------------
python3 - "$OUT" "$N" "$MIB" "$RUNS" "$SAMPLES" <<'PY' | tee "$OUT/summary.md"
import json, statistics, sys
out, n, mib, runs, samples = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]

def medians(name):
    return {r["command"]: statistics.median(r["times"]) for r in json.load(open(f"{out}/{name}.json"))["results"]}

start = medians("startup")["start"]
paths = ["bare", "tunnel", "intercepted"]
print(f"jail start-up with these flags: {start*1000:.1f} ms (median of {runs}); "
      "the jailed rows below have it taken off")
def net(path, t):  # the time of the work itself: the jailed rows less jail's start-up
    return t if path == "bare" else t - start

print(f"\n### latency: {n} sequential 1-byte requests in one curl (median of {runs} runs)\n")
print("| connection | path | per request, ms | × bare | × tunnel | p50 ms | p99 ms |")
print("|---|---|---|---|---|---|---|")
for mode in ["keepalive", "close"]:
    m = medians(f"latency-{mode}")
    per = {p: net(p, m[p]) / n * 1000 for p in paths}
    for p in paths:
        times = sorted(float(l) * 1000 for l in open(f"{out}/requests-{mode}-{p}.txt") if l.strip())
        p50 = statistics.median(times)
        p99 = times[min(len(times) - 1, int(round(0.99 * (len(times) - 1))))]
        label = "keep-alive" if mode == "keepalive" else "new per request"
        print(f"| {label} | {p} | {per[p]:.3f} | {per[p]/per['bare']:.2f} | "
              f"{per[p]/per['tunnel']:.2f} | {p50:.3f} | {p99:.3f} |")
print(f"\nper request: (hyperfine median − start-up) / {n}, curl's start included; "
      f"p50/p99: curl's time_total of each request over {samples} runs")

print(f"\n### throughput: {mib} MiB (median of {runs} runs, start-up taken off)\n")
print("| direction | path | MiB/s | × bare | × tunnel |")
print("|---|---|---|---|---|")
for d in ["download", "upload"]:
    m = medians(d)
    rate = {p: mib / net(p, m[p]) for p in paths}
    for p in paths:
        print(f"| {d} | {p} | {rate[p]:.0f} | {rate[p]/rate['bare']:.2f} | {rate[p]/rate['tunnel']:.2f} |")
PY
printf '\nraw data: %s\n' "$OUT" >&2
