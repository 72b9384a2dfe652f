#!/usr/bin/env bash
# Benchmarks of `resolvelab load`, written up in docs/bench/load.md. Loopback only, every step bounded.
#
#   1. rate accuracy: `resolvelab load --rate 5000 --duration 10s` against `resolvelab backend`
#      (targets: achieved within ±0.5 % of the target, schedule lag p99 < 1 ms), RATE_ROUNDS
#      times at normal priority and, as root, as often with --realtime, with the load average
#      and the hypervisor's steal time of each run;
#   2. max throughput against one nginx (return 200, 1 worker): wrk, oha and
#      `resolvelab load --rate max`, 64 connections, DURATION each, ROUNDS rounds alternating the order
#      (targets: ≥ 0.9× wrk, ≥ 1.0× oha), with CPU time per request of each tool and of nginx;
#   3. (CALLGRIND=1) user-space instructions per request of each tool, a count the neighbours
#      cannot disturb.
#
# Usage: scripts/bench-load.sh            (needs: wrk — apt-get install wrk; oha optional: cargo install oha)
# Env:   ROUNDS=10 DURATION=5s THREADS=1 RATE_ROUNDS=3 OHA=/path/to/oha OUT=target/bench-load
#        RATE_THREADS=N (lanes of the rate test; default: the CLI's default, one per core)
#        BIN=/path/to/resolvelab (ROUNDS=0 / RATE_ROUNDS=0 skip a part)
#        NICE="nice -n -10" (applied to every tool and server alike)
#        CALLGRIND=1 adds 3. user-space instructions per request of each tool (needs valgrind;
#        ROUNDS=0 skips the timed rounds)
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS=${ROUNDS:-10}
DURATION=${DURATION:-5s}
THREADS=${THREADS:-1}
RATE_THREADS=${RATE_THREADS:-$(nproc)}
OUT=${OUT:-target/bench-load}
OHA=${OHA:-$(command -v oha || ls /tmp/oha-root/bin/oha 2>/dev/null || true)}
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
echo "- $(uname -sr); $($B --version | sed -n 1p); wrk $(wrk -v 2>&1 | head -1 | awk '{print $2}'); oha: ${OHA:-not available}"
echo

# ---------------------------------------------------------------- 1. rate accuracy
# Steal time: on a VM the host may not run our vCPUs at all for milliseconds, which no
# priority inside the guest can help; each run reports the share of CPU time stolen.
cpu_ticks() { awk '/^cpu / {print $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9, $9}' /proc/stat; }
steal_since() { # "total steal" before -> steal % since
    local now; now=$(cpu_ticks)
    awk -v a="$1" -v b="$now" 'BEGIN {split(a, x, " "); split(b, y, " "); t = y[1] - x[1];
        printf "%.1f", (t > 0 ? 100 * (y[2] - x[2]) / t : 0)}'
}
RATE_ROUNDS=${RATE_ROUNDS:-3}
rate_report() {
python3 - "$1" "$2" <<'EOF'
import json, sys
s = json.load(open(sys.argv[1]))
err = (s["achieved_rps"] / s["target_rps"] - 1) * 100
l, d = s["schedule_lag"], s["dispatch_lag"]
print(f"| {sys.argv[1].rsplit('/', 1)[-1][:-5]} | {sys.argv[2]} | {s['achieved_rps']:.2f}/s ({err:+.3f} %) "
      f"| {l['p50_us']} / {l['p99_us']} / {l['max_us']} | {d['p50_us']} / {d['p99_us']} / {d['max_us']} "
      f"| {s['classes']['c2xx']} / {s['requests']} |")
EOF
}
if [ "$RATE_ROUNDS" -gt 0 ]; then
    echo "## rate accuracy: 5000 rps for 10 s against resolvelab backend, $RATE_THREADS load thread(s)"
    echo
    echo "| run | load avg / steal % | achieved (vs 5000/s) | schedule lag p50 / p99 / max µs | generator lag p50 / p99 / max µs | 2xx / requests |"
    echo "|---|---|---|---|---|---|"
    $NICE $B backend --listen 127.0.0.20:18080 --name b1 --duration 600s >/dev/null 2>&1 &
    pids+=($!)
    wait_port 127.0.0.20 18080
    for r in $(seq 1 "$RATE_ROUNDS"); do
        modes="normal"
        # --realtime (SCHED_FIFO) needs root; the two alternate so both see similar neighbours.
        [ "$(id -u)" = 0 ] && modes="normal realtime"
        [ $((r % 2)) = 0 ] && [ "$(id -u)" = 0 ] && modes="realtime normal"
        for mode in $modes; do
            flag=""; [ "$mode" = realtime ] && flag="--realtime"
            load=$(cut -d" " -f1 /proc/loadavg); c0=$(cpu_ticks)
            $NICE $B load http://127.0.0.20:18080/ --rate 5000 --duration 10s --connections 512 -q $flag \
                --summary json --out "$OUT/rate-$mode-$r.jsonl" --threads "$RATE_THREADS" >"$OUT/rate-$mode-$r.json"
            rate_report "$OUT/rate-$mode-$r.json" "$load / $(steal_since "$c0")"
        done
    done
    echo
fi

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

# The nginx worker: its CPU time per request shows what each client's request pattern costs the
# server, which on a shared 2-core machine is CPU the client cannot have.
NGX_WORKER=""
for _ in $(seq 1 50); do
    NGX_WORKER=$(awk '{print $1}' "/proc/${pids[-1]}/task/${pids[-1]}/children" 2>/dev/null || true)
    [ -n "$NGX_WORKER" ] && break
    sleep 0.1
done
ngx_cpu() { if [ -n "$NGX_WORKER" ]; then awk '{print $14 + $15}' "/proc/$NGX_WORKER/stat"; else echo 0; fi; }
TICKS=$(getconf CLK_TCK)

# Each run prints "rps user_s sys_s nginx_s" (CPU seconds of the tool from GNU time, and of the
# nginx worker): CPU per request depends less on how busy the shared machine was than
# requests per second do.
timed() { /usr/bin/time -f "%U %S" -o "$OUT/time.txt" "$@"; }
ngx_since() { awk -v a="$1" -v b="$(ngx_cpu)" -v t="$TICKS" 'BEGIN {print (b - a) / t}'; }
run_wrk() {
    local n0 r; n0=$(ngx_cpu)
    r=$(timed $NICE wrk -t"$THREADS" -c64 -d"$DURATION" "$URL" | awk '/Requests\/sec/ {print $2}')
    echo "$r $(cat "$OUT/time.txt") $(ngx_since "$n0")"
}
run_oha() {
    local n0 r; n0=$(ngx_cpu)
    r=$(TOKIO_WORKER_THREADS=$THREADS timed $NICE "$OHA" -c 64 -z "$DURATION" --no-tui --output-format json "$URL" \
        | python3 -c 'import json,sys; print(json.load(sys.stdin)["summary"]["requestsPerSec"])')
    echo "$r $(cat "$OUT/time.txt") $(ngx_since "$n0")"
}
run_us() {
    local n0 r; n0=$(ngx_cpu)
    r=$(timed $NICE $B load "$URL" --rate max --connections 64 --duration "$DURATION" -q --summary json --threads "$THREADS" \
        | python3 -c 'import json,sys; s=json.load(sys.stdin); print(s["throughput_rps"])')
    echo "$r $(cat "$OUT/time.txt") $(ngx_since "$n0")"
}

echo "## max throughput: 64 connections, $DURATION per run, nginx 1 worker (return 200), $THREADS thread(s) per tool"
echo
echo "rps = requests/s; µs/req = CPU time (user + sys) of the tool per request, the user part in brackets;"
echo "nginx µs/req = CPU time of the nginx worker per request during that tool's run; load = 1-minute load average;"
echo "steal % = share of the machine's CPU time the hypervisor gave to other guests during the round."
echo
rm -f "$OUT/rounds.txt"
echo "| round | load / steal % | wrk rps | oha rps | resolvelab rps | wrk µs/req | oha µs/req | resolvelab µs/req | nginx µs/req (wrk / oha / resolvelab) | rps vs wrk | rps vs oha |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
secs=${DURATION%s}
for r in $(seq 1 "$ROUNDS"); do
    load=$(cut -d" " -f1 /proc/loadavg); c0=$(cpu_ticks)
    # Alternate the order so no tool always runs on a warmer (or busier) machine.
    if [ $((r % 2)) = 1 ]; then
        w=$(run_wrk); o=$(if [ -n "$OHA" ]; then run_oha; else echo "0 0 0 0"; fi); u=$(run_us)
    else
        u=$(run_us); o=$(if [ -n "$OHA" ]; then run_oha; else echo "0 0 0 0"; fi); w=$(run_wrk)
    fi
    st=$(steal_since "$c0")
    echo "$load $w $o $u $st" >>"$OUT/rounds.txt"
    python3 - "$r" "$secs" $load $w $o $u $st <<'EOF'
import sys
r, secs = sys.argv[1], float(sys.argv[2])
v = list(map(float, sys.argv[3:17]))
load, (w, o, u) = v[0], (v[1:5], v[5:9], v[9:13])
def per(t):
    n = t[0] * secs
    return f"{(t[1] + t[2]) / n * 1e6:.1f} ({t[1] / n * 1e6:.1f})" if n > 0 else "n/a"
def ngx(t):
    return f"{t[3] / (t[0] * secs) * 1e6:.1f}" if t[0] > 0 else "n/a"
print(f"| {r} | {load:.1f} / {v[13]:.1f} | {w[0]:.0f} | {o[0]:.0f} | {u[0]:.0f} | {per(w)} | {per(o)} | {per(u)} | "
      f"{ngx(w)} / {ngx(o)} / {ngx(u)} | {u[0] / w[0]:.3f} | " + (f"{u[0] / o[0]:.3f}" if o[0] else "n/a") + " |")
EOF
done
# Medians: the machine is shared, single rounds swing; the median of paired ratios is robust.
[ "$ROUNDS" -gt 0 ] && python3 - "$OUT/rounds.txt" "$secs" <<'EOF'
import statistics, sys
rows = [list(map(float, l.split())) for l in open(sys.argv[1]) if l.strip()]
secs = float(sys.argv[2])
med = statistics.median
def tool(i):  # tool i's columns: rps, user s, sys s, nginx s
    return [r[1 + 4 * i:5 + 4 * i] for r in rows if r[1 + 4 * i] > 0]
def cpu(i):
    t = tool(i)
    if not t:
        return "n/a"
    tot = med([(x[1] + x[2]) / (x[0] * secs) * 1e6 for x in t])
    usr = med([x[1] / (x[0] * secs) * 1e6 for x in t])
    return f"{tot:.1f} ({usr:.1f})"
def ngx(i):
    t = tool(i)
    return f"{med([x[3] / (x[0] * secs) * 1e6 for x in t]):.1f}" if t else "n/a"
def rps(i):
    t = tool(i)
    return f"{med([x[0] for x in t]):.0f}" if t else "n/a"
vs_w = med([r[9] / r[1] for r in rows if r[1] > 0])
vs_o = [r[9] / r[5] for r in rows if r[5] > 0]
print(f"| **median** | **{med([r[0] for r in rows]):.1f} / {med([r[13] for r in rows]):.1f}** | **{rps(0)}** | **{rps(1)}** | **{rps(2)}** | "
      f"**{cpu(0)}** | **{cpu(1)}** | **{cpu(2)}** | **{ngx(0)} / {ngx(1)} / {ngx(2)}** | **{vs_w:.3f}** | **"
      + (f"{med(vs_o):.3f}" if vs_o else "n/a") + "** |")
EOF
echo
echo "- load average after the run: $(cut -d" " -f1-3 /proc/loadavg)"

# ---------------------------------------------------------------- 3. instructions per request (optional)
# CALLGRIND=1: user-space instructions per request of each tool under valgrind's callgrind (one
# thread each, same nginx). Unlike time, an instruction count does not depend on what the
# neighbours do. Runs of 1 s and 3 s are subtracted so start-up costs cancel out.
if [ "${CALLGRIND:-0}" = 1 ] && command -v valgrind >/dev/null; then
    cg() { # label, then the command; the command prints its request count on stdout
        local label=$1; shift
        local n1 n3 i1 i3
        n1=$("$@" 1 2>/dev/null); i1=$(grep -m1 '^summary:' "$OUT/cg.out" | awk '{print $2}')
        n3=$("$@" 3 2>/dev/null); i3=$(grep -m1 '^summary:' "$OUT/cg.out" | awk '{print $2}')
        awk -v l="$label" -v n1="$n1" -v n3="$n3" -v i1="$i1" -v i3="$i3" \
            'BEGIN {printf "| %s | %.0f |\n", l, (i3 - i1) / (n3 - n1)}'
    }
    vg() { valgrind --tool=callgrind --callgrind-out-file="$OUT/cg.out" "$@"; }
    cg_wrk() { vg wrk -t1 -c64 -d"$1"s "$URL" | awk '/requests in/ {print $1}'; }
    cg_oha() {
        TOKIO_WORKER_THREADS=1 vg "$OHA" -c 64 -z "$1"s --no-tui --output-format json "$URL" \
            | python3 -c 'import json,sys; s=json.load(sys.stdin)["summary"]; print(round(s["requestsPerSec"] * s["total"]))'
    }
    cg_us() {
        vg $B load "$URL" --rate max --connections 64 --duration "$1"s -q --summary json --threads 1 \
            | python3 -c 'import json,sys; print(json.load(sys.stdin)["requests"])'
    }
    echo
    echo "## user-space instructions per request (callgrind, 64 connections, 1 thread)"
    echo
    echo "| tool | instructions / request |"
    echo "|---|---|"
    cg wrk cg_wrk
    if [ -n "$OHA" ]; then cg oha cg_oha; fi
    cg resolvelab cg_us
fi
