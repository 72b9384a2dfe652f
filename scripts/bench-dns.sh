#!/usr/bin/env bash
# Queries per second on loopback: `resolvelab dns` versus dnsmasq serving the same name,
# both driven by the same dnsperf command, interleaved in one run (docs/bench/dns.md).
#
#   scripts/bench-dns.sh            # 3 rounds x 10 s per server
#   ROUNDS=5 SECS=20 scripts/bench-dns.sh
#   BUILD=0 scripts/bench-dns.sh   # use the existing target/release/resolvelab
#
# Needs: dnsperf and dnsmasq (Debian: apt-get install dnsperf dnsmasq-base). Loopback only.
set -euo pipefail

ROUNDS=${ROUNDS:-3}
SECS=${SECS:-10}
CLIENTS=${CLIENTS:-4}
OUTSTANDING=${OUTSTANDING:-200}
RL_ADDR=127.0.55.1
DM_ADDR=127.0.55.2
PORT=${PORT:-5301}
NAME=bench.test.local

for tool in dnsperf dnsmasq; do
  command -v "$tool" >/dev/null || { echo "bench-dns: $tool is missing (apt-get install dnsperf dnsmasq-base)" >&2; exit 2; }
done

cd "$(dirname "$0")/.."
TARGET=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')
# SERVER=example benchmarks the same library through `cargo xtask dns-serve` (for when
# the full binary does not build); the default is the real `resolvelab dns`.
if [ "${SERVER:-cli}" = example ]; then
  [ "${BUILD:-1}" = 1 ] && cargo build --release -q -p xtask
  serve() { exec "$TARGET/release/xtask" dns-serve "$RL_ADDR:$PORT" "$NAME=$MODE" ${1:+"$1"}; }
  WHAT="cargo xtask dns-serve (resolvelab-dns library)"
else
  [ "${BUILD:-1}" = 1 ] && cargo build --release -q -p resolvelab
  serve() { exec "$TARGET/release/resolvelab" dns --listen "$RL_ADDR:$PORT" --name "$NAME=$MODE" ${1:+--log "$1"}; }
  WHAT="resolvelab dns"
fi

WORK=$(mktemp -d)
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

echo "$NAME A" > "$WORK/queries.txt"

start_resolvelab() { # $1 = query log file or ""
  serve "$1" >"$WORK/rl.out" 2>"$WORK/rl.err" &
  RL_PID=$!
  PIDS+=("$RL_PID")
  for _ in $(seq 100); do grep -q listening "$WORK/rl.out" 2>/dev/null && return; sleep 0.05; done
  echo "bench-dns: resolvelab dns did not start: $(cat "$WORK/rl.err")" >&2; exit 1
}

start_dnsmasq() {
  dnsmasq --keep-in-foreground --no-resolv --no-hosts --no-poll --bind-interfaces \
    --listen-address="$DM_ADDR" --port="$PORT" --host-record="$NAME,127.0.0.20" \
    --local-ttl=1 --user=root --pid-file="$WORK/dnsmasq.pid" --log-facility="$WORK/dnsmasq.log" &
  DM_PID=$!
  PIDS+=("$DM_PID")
  for _ in $(seq 100); do dig +short +time=1 +tries=1 @"$DM_ADDR" -p "$PORT" "$NAME" A >/dev/null 2>&1 && return; sleep 0.05; done
  echo "bench-dns: dnsmasq did not start" >&2; exit 1
}

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; } # utime + stime of the server process

perf() { # $1 = server address, $2 = server pid → prints "qps lost cpu-µs-per-query"
  local t0 t1 done
  t0=$(cpu_ticks "$2")
  dnsperf -s "$1" -p "$PORT" -d "$WORK/queries.txt" -l "$SECS" -c "$CLIENTS" -T 1 -q "$OUTSTANDING" >"$WORK/perf.out" 2>&1
  t1=$(cpu_ticks "$2")
  done=$(awk '/Queries completed:/ {print $3}' "$WORK/perf.out")
  printf '%s %s %s\n' "$(awk '/Queries per second:/ {print $4}' "$WORK/perf.out")" \
    "$(awk '/Queries lost:/ {print $3}' "$WORK/perf.out")" \
    "$(python3 -c "print(f'{($t1 - $t0) / $(getconf CLK_TCK) * 1e6 / max($done, 1):.2f}')")"
}

median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

MODE=static:127.0.0.20
start_dnsmasq
start_resolvelab ""
echo "round  server                       qps     lost  server CPU µs/query"
RL=() ; DM=() ; RLC=() ; DMC=()
for r in $(seq "$ROUNDS"); do
  read -r q l c < <(perf "$RL_ADDR" "$RL_PID"); RL+=("$q"); RLC+=("$c")
  printf '%-6s %-24s %10.0f %8s %10s\n' "$r" "resolvelab dns" "$q" "$l" "$c"
  read -r q l c < <(perf "$DM_ADDR" "$DM_PID"); DM+=("$q"); DMC+=("$c")
  printf '%-6s %-24s %10.0f %8s %10s\n' "$r" "dnsmasq $(dnsmasq --version | awk 'NR==1{print $3}')" "$q" "$l" "$c"
done
kill -TERM "$RL_PID"; wait "$RL_PID" 2>/dev/null || true

# The lab's configuration: alternate answers and the query log on.
MODE=alternate:127.0.0.20,127.0.0.30
start_resolvelab "$WORK/dns.jsonl"
RLL=() ; RLLC=()
for r in $(seq "$ROUNDS"); do
  read -r q l c < <(perf "$RL_ADDR" "$RL_PID"); RLL+=("$q"); RLLC+=("$c")
  printf '%-6s %-24s %10.0f %8s %10s\n' "$r" "resolvelab alt+log" "$q" "$l" "$c"
done
kill -TERM "$RL_PID"; wait "$RL_PID" 2>/dev/null || true
LOGGED=$(($(wc -l < "$WORK/dns.jsonl") - 1))

rl=$(printf '%s\n' "${RL[@]}" | median)
dm=$(printf '%s\n' "${DM[@]}" | median)
rll=$(printf '%s\n' "${RLL[@]}" | median)
rlc=$(printf '%s\n' "${RLC[@]}" | median)
dmc=$(printf '%s\n' "${DMC[@]}" | median)
rllc=$(printf '%s\n' "${RLLC[@]}" | median)
echo
echo "median qps: resolvelab dns $rl, dnsmasq $dm, resolvelab alternate+log $rll ($LOGGED lines logged)"
echo "median server CPU per query: resolvelab dns ${rlc} µs, dnsmasq ${dmc} µs, resolvelab alternate+log ${rllc} µs"
python3 -c "print(f'qps ratio resolvelab/dnsmasq: {float($rl)/float($dm):.2f}x   alternate+log/dnsmasq: {float($rll)/float($dm):.2f}x')"
python3 -c "print(f'CPU-efficiency ratio (dnsmasq µs / resolvelab µs): {float($dmc)/float($rlc):.2f}x   alternate+log: {float($dmc)/float($rllc):.2f}x')"
echo "server: $WHAT; dnsperf -c $CLIENTS -T 1 -q $OUTSTANDING -l $SECS, $ROUNDS rounds, $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
