#!/usr/bin/env bash
# Benchmarks of `resolvelab load`, written up in docs/bench/load.md. Loopback only, every step bounded.
#
#   1. rate accuracy: `resolvelab load --rate 5000 --duration 10s` against `resolvelab backend`
#      (targets: achieved within ±0.5 % of the target, schedule lag p99 < 1 ms), once at normal
#      priority and once with --realtime (as root);
#   2. max throughput against one nginx (return 200, 1 worker): wrk, oha and
#      `resolvelab load --rate max`, 64 connections, DURATION each, ROUNDS rounds alternating the order
#      (targets: ≥ 0.9× wrk, ≥ 1.0× oha).
#
# Usage: scripts/bench-load.sh            (needs: wrk — apt-get install wrk; oha optional: cargo install oha)
# Env:   ROUNDS=10 DURATION=5s THREADS=1 OHA=/path/to/oha OUT=target/bench-load BIN=/path/to/resolvelab
#        NICE="nice -n -10" (applied to every tool and server alike)
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS=${ROUNDS:-10}
DURATION=${DURATION:-5s}
THREADS=${THREADS:-1}
OUT=${OUT:-target/bench-load}
OHA=${OHA:-$(command -v oha || true)}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)

if [ -z "${BIN:-}" ]; then
    cargo build --release -p resolvelab >&2
    # A private copy: a rebuild by someone else mid-benchmark cannot swap the binary under us.
    cp target/release/resolvelab "$OUT/resolvelab"
    BIN="$OUT/resolvelab"
fi
B=$BIN
NICE=${NICE:-}   # e.g. NICE="nice -n -10" (root) to shield the measurement from a busy machine

pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

wait_port() { # host port: poll until something accepts, 10 s at most
    for _ in $(seq 1 100); do
        if (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; then return 0; fi
        sleep 0.1
    done
    echo "nothing listens on $1:$2" >&2
    return 1
}

echo "## machine"
echo "- load average before the run: $(cut -d" " -f1-3 /proc/loadavg)"
echo "- $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
echo "- $(uname -sr); $($B --version | head -1 | sed 's/^/resolvelab /'); wrk $(wrk -v 2>&1 | head -1 | awk '{print $2}'); oha: ${OHA:-not available}"
echo

# ---------------------------------------------------------------- 1. rate accuracy
echo "## rate accuracy: 5000 rps for 10 s against resolvelab backend"
$NICE $B backend --listen 127.0.0.20:18080 --name b1 --duration 120s >/dev/null 2>&1 &
pids+=($!)
wait_port 127.0.0.20 18080
$NICE $B load http://127.0.0.20:18080/ --rate 5000 --duration 10s --connections 512 -q \
    --summary json --out "$OUT/rate.jsonl" --threads "$THREADS" >"$OUT/rate.json"
rate_report() {
python3 - "$1" <<'EOF'
import json, sys
s = json.load(open(sys.argv[1]))
err = (s["achieved_rps"] / s["target_rps"] - 1) * 100
print(f"- requests {s['requests']}, sent {s['sent']}, 2xx {s['classes']['c2xx']}, errors {s['classes']['errors']}")
print(f"- target {s['target_rps']:.2f}/s, achieved {s['achieved_rps']:.2f}/s ({err:+.3f} %)")
print(f"- schedule lag (sent − scheduled) p50 {s['schedule_lag']['p50_us']} µs, p99 {s['schedule_lag']['p99_us']} µs, max {s['schedule_lag']['max_us']} µs")
d = s["dispatch_lag"]
print(f"- generator lag (dispatch − scheduled) p50 {d['p50_us']} µs, p99 {d['p99_us']} µs, max {d['max_us']} µs")
print(f"- corrected latency p50 {s['latency']['p50_us']} µs, p99 {s['latency']['p99_us']} µs; uncorrected p99 {s['uncorrected']['p99_us']} µs")
EOF
}
echo "### default priority"
rate_report "$OUT/rate.json"
if [ "$(id -u)" = 0 ]; then
    # The same run with --realtime: SCHED_FIFO for the scheduler and workers, which shows how
    # much of the lag above is other processes holding the CPU.
    $NICE $B load http://127.0.0.20:18080/ --rate 5000 --duration 10s --connections 512 -q --realtime \
        --summary json --out "$OUT/rate-rt.jsonl" --threads "$THREADS" >"$OUT/rate-rt.json"
    echo "### --realtime"
    rate_report "$OUT/rate-rt.json"
fi
echo

# ---------------------------------------------------------------- 2. max throughput vs wrk / oha
NGINX=$($B nginx path)
ND="$OUT/nginx"
mkdir -p "$ND/logs"
cat >"$ND/nginx.conf" <<EOF
daemon off;
worker_processes 1;
pid $ND/nginx.pid;
error_log $ND/error.log warn;
$( [ "$(id -u)" = 0 ] && echo "user root;" )
events { worker_connections 4096; }
http {
    access_log off;
    client_body_temp_path $ND/client_body;
    proxy_temp_path $ND/proxy;
    fastcgi_temp_path $ND/fastcgi;
    uwsgi_temp_path $ND/uwsgi;
    scgi_temp_path $ND/scgi;
    keepalive_requests 10000000;
    server {
        listen 127.0.0.30:18081;
        location / { return 200 "hello\n"; }
    }
}
EOF
$NICE "$NGINX" -p "$ND" -c "$ND/nginx.conf" &
pids+=($!)
wait_port 127.0.0.30 18081
URL=http://127.0.0.30:18081/

# Each run prints "rps cpu_seconds" (user + system time of the tool, from GNU time): CPU per
# request does not depend on how busy the shared machine was, requests per second does.
timed() { /usr/bin/time -f "%U %S" -o "$OUT/time.txt" "$@"; }
cpu() { awk '{print $1 + $2}' "$OUT/time.txt"; }
run_wrk() {
    r=$(timed $NICE wrk -t"$THREADS" -c64 -d"$DURATION" "$URL" | awk '/Requests\/sec/ {print $2}')
    echo "$r $(cpu)"
}
run_oha() {
    r=$(TOKIO_WORKER_THREADS=$THREADS timed $NICE "$OHA" -c 64 -z "$DURATION" --no-tui --output-format json "$URL" \
        | python3 -c 'import json,sys; print(json.load(sys.stdin)["summary"]["requestsPerSec"])')
    echo "$r $(cpu)"
}
run_us() {
    r=$(timed $NICE $B load "$URL" --rate max --connections 64 --duration "$DURATION" -q --summary json --threads "$THREADS" \
        | python3 -c 'import json,sys; s=json.load(sys.stdin); print(s["throughput_rps"])')
    echo "$r $(cpu)"
}

echo "## max throughput: 64 connections, $DURATION per run, nginx 1 worker (return 200), $THREADS thread(s) per tool"
echo
echo "rps = requests/s; µs/req = CPU time (user + sys) of the tool per request."
echo
rm -f "$OUT/rounds.txt"
echo "| round | wrk rps | oha rps | resolvelab rps | wrk µs/req | oha µs/req | resolvelab µs/req | rps vs wrk | rps vs oha |"
echo "|---|---|---|---|---|---|---|---|---|"
secs=${DURATION%s}
for r in $(seq 1 "$ROUNDS"); do
    # Alternate the order so no tool always runs on a warmer (or busier) machine.
    if [ $((r % 2)) = 1 ]; then
        w=$(run_wrk); o=$([ -n "$OHA" ] && run_oha || echo "0 0"); u=$(run_us)
    else
        u=$(run_us); o=$([ -n "$OHA" ] && run_oha || echo "0 0"); w=$(run_wrk)
    fi
    echo "$w $o $u" >>"$OUT/rounds.txt"
    python3 - "$r" "$secs" $w $o $u <<'EOF'
import sys
r, secs = sys.argv[1], float(sys.argv[2])
w, wc, o, oc, u, uc = map(float, sys.argv[3:9])
per = lambda rps, c: f"{c / (rps * secs) * 1e6:.1f}" if rps > 0 else "n/a"
print(f"| {r} | {w:.0f} | {o:.0f} | {u:.0f} | {per(w, wc)} | {per(o, oc)} | {per(u, uc)} | {u / w:.3f} | " + (f"{u / o:.3f}" if o else "n/a") + " |")
EOF
done
# Medians: the machine is shared, single rounds swing; the median of paired ratios is robust.
python3 - "$OUT/rounds.txt" "$secs" <<'EOF'
import statistics, sys
rows = [list(map(float, l.split())) for l in open(sys.argv[1]) if l.strip()]
secs = float(sys.argv[2])
med = statistics.median
col = lambda i: med([r[i] for r in rows])
per = lambda i: med([r[i + 1] / (r[i] * secs) * 1e6 for r in rows if r[i] > 0]) if any(r[i] > 0 for r in rows) else 0
ro = med([r[4] / r[2] for r in rows if r[2] > 0]) if any(r[2] > 0 for r in rows) else None
print(f"| **median** | **{col(0):.0f}** | **{col(2):.0f}** | **{col(4):.0f}** | **{per(0):.1f}** | **{per(2):.1f}** | **{per(4):.1f}** | **{med([r[4] / r[0] for r in rows]):.3f}** | **" + (f"{ro:.3f}" if ro else "n/a") + "** |")
EOF
