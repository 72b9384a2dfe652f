#!/usr/bin/env bash
# `resolvelab watch` benchmark (issue #48): follow throughput on a backlog, CPU at a busy
# nginx's rate, and peak memory, beside `resolvelab diagnose` of the same lines and beside
# mtail (Debian 12's, fetched and cached by `cargo xtask provisioned mtail`) running a program
# that counts the same lines by status and upstream — the peer users deploy today, which
# knows nothing of causes.
#   1. catch-up: LINES `upstreaminfo`-preset lines (ingress-nginx's format, 30 % failing,
#      `cargo xtask gen-preset-log`): `watch --from-start`, timed until /metrics counts them
#      all; `diagnose` of the same files; `mtail --one_shot` on the same file; REPS times;
#   2. live: a writer appends RATE lines/s for SECS s to one growing file that watch and mtail
#      both follow; each one's CPU (utime + stime from /proc) over that time, REPS times;
#   3. lag: a writer appends LAG_RATE lab-format lines/s (`cargo xtask gen-lab-log`, each
#      batch of 100 ms stamped with the time it is written) for SECS s while watch follows with
#      `--interval 100ms`; /metrics' resolvelab_lag_seconds (the newest request read → now)
#      sampled every 100 ms: its p50/p99/max, REPS times.
# Steal share from /proc/stat beside each figure. Writes docs/bench/watch.md.
#
#   scripts/bench-watch.sh [LINES] [REPS]      defaults: 2,000,000 lines, 3 repetitions
set -euo pipefail
LINES=${1:-2000000}
REPS=${2:-3}
RATE=5000
LAG_RATE=100000
SECS=30
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=${BENCH_DIR:-/tmp/resolvelab-bench-watch}
OUT="$ROOT/docs/bench/watch.md"
BIN="$ROOT/target/release/resolvelab"
PORT=${PORT:-19479}
mkdir -p "$WORK"
(cd "$ROOT" && cargo build --release -q -p resolvelab -p xtask)
cd "$WORK"
[ -f access.log ] || (cd "$ROOT" && cargo xtask gen-preset-log upstreaminfo "$WORK/access.log" "$LINES" 0.3 300 >/dev/null)
READ=(--log-format upstreaminfo --tz-offset +00:00)
MTAIL=$(cd "$ROOT" && cargo xtask provisioned mtail)
mkdir -p progs
cp "$ROOT/scripts/upstreaminfo.mtail" progs/nginx.mtail
MPORT=$((PORT + 1))

cpu() { awk '/^cpu /{s=0; for(i=2;i<=NF;i++) s+=$i; print $9, s}' /proc/stat; }
steal_pct() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.1f", b ? 100*a/b : 0}'; }
counted() { curl -s "127.0.0.1:$PORT/metrics" | awk '/^resolvelab_requests_total/ {s+=$2} END {print s+0}'; }
rss_mb() { awk '/VmHWM/{printf "%.0f", $2/1024}' "/proc/$1/status"; }

rows=""
for r in $(seq "$REPS"); do
  read -r s0 t0 < <(cpu)
  start=$(date +%s.%N)
  /usr/bin/time -f "%M" -o diag.rss "$BIN" diagnose --access access.log --error error.log "${READ[@]}" --format json > diag.json
  d=$(echo "$(date +%s.%N) - $start" | bc)
  read -r s1 t1 < <(cpu)
  rows+="| diagnose (batch) | $r | $(printf %.2f "$d") | $(awk -v l="$LINES" -v d="$d" 'BEGIN{printf "%.0f", l/d/1000}') | $(( $(cat diag.rss) / 1024 )) | $(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["incidents"]))' diag.json) incidents | $(steal_pct $((s1 - s0)) $((t1 - t0))) |\n"

  read -r s0 t0 < <(cpu)
  "$BIN" watch --access access.log --error error.log "${READ[@]}" --from-start \
    --listen "127.0.0.1:$PORT" --duration 600s --events events.jsonl 2> watch.err & P=$!
  start=$(date +%s.%N)
  for _ in $(seq 3000); do [ "$(counted)" = "$LINES" ] && break; sleep 0.05; done
  d=$(echo "$(date +%s.%N) - $start" | bc)
  read -r s1 t1 < <(cpu)
  rss=$(rss_mb $P)
  # Stopped, it classes and emits the window still open: then its incidents against diagnose's.
  kill "$P"; wait "$P" 2>/dev/null || true
  rows+="| watch, backlog | $r | $(printf %.2f "$d") | $(awk -v l="$LINES" -v d="$d" 'BEGIN{printf "%.0f", l/d/1000}') | $rss | $(python3 "$ROOT/scripts/incidents-agree.py" diag.json events.jsonl) | $(steal_pct $((s1 - s0)) $((t1 - t0))) |\n"

  read -r s0 t0 < <(cpu)
  start=$(date +%s.%N)
  /usr/bin/time -f "%M" -o mtail.rss "$MTAIL" --one_shot --one_shot_format=prometheus \
    --progs progs --logs access.log > mtail.out 2> mtail.err
  d=$(echo "$(date +%s.%N) - $start" | bc)
  read -r s1 t1 < <(cpu)
  n=$(awk '/^nginx_requests_total/ {s+=$2} END {print s+0}' mtail.out)
  [ "$n" = "$LINES" ] || { echo "mtail counted $n of $LINES lines"; exit 1; }
  rows+="| mtail 3.0.0~rc50 \`--one_shot\` (counts by status and upstream) | $r | $(printf %.2f "$d") | $(awk -v l="$LINES" -v d="$d" 'BEGIN{printf "%.0f", l/d/1000}') | $(( $(cat mtail.rss) / 1024 )) | (no causes) | $(steal_pct $((s1 - s0)) $((t1 - t0))) |\n"
done

head -200000 access.log > src.log
cat > feed.py <<'PY'
import sys, time
src = open(sys.argv[1]).read().splitlines(True)
out = open(sys.argv[2], 'a')
rate, secs = int(sys.argv[3]), float(sys.argv[4])
per, i, k, t0 = rate // 10, 0, 0, time.time()
while time.time() - t0 < secs:
    out.write(''.join(src[i:i + per])); out.flush()
    i = (i + per) % (len(src) - per); k += 1
    time.sleep(max(0, t0 + k * 0.1 - time.time()))
PY
live=""
hz=$(getconf CLK_TCK)
ticks() { awk '{print $14+$15}' "/proc/$1/stat"; }
for r in $(seq "$REPS"); do
  : > live.log; : > live.err
  "$BIN" watch --access live.log --error live.err "${READ[@]}" --listen "127.0.0.1:$PORT" \
    --duration 600s 2> watch.err & P=$!
  "$MTAIL" --progs progs --logs live.log --port "$MPORT" --address 127.0.0.1 2> mtail.err & Q=$!
  sleep 2
  read -r s0 t0 < <(cpu)
  a0=$(ticks $P); b0=$(ticks $Q)
  python3 feed.py src.log live.log "$RATE" "$SECS"
  a1=$(ticks $P); b1=$(ticks $Q)
  read -r s1 t1 < <(cpu)
  st=$(steal_pct $((s1 - s0)) $((t1 - t0)))
  pct() { awk -v c="$1" -v hz="$hz" -v s="$SECS" 'BEGIN{printf "%.2f", 100*c/hz/s}'; }
  sleep 3
  fed=$(wc -l < live.log)
  wn=$(counted)
  mn=$(curl -s "127.0.0.1:$MPORT/metrics" | awk '/^nginx_requests_total/ {s+=$2} END {print s+0}')
  live+="| $r | watch | $(pct $((a1 - a0))) | $(rss_mb $P) | $wn of $fed | $st |\n"
  live+="| $r | mtail | $(pct $((b1 - b0))) | $(rss_mb $Q) | $mn of $fed | $st |\n"
  kill "$P" "$Q"; wait "$P" "$Q" 2>/dev/null || true
done

# In a folder of its own: the generator writes an error.log beside its log.
mkdir -p lag
[ -f lag/lab.log ] || (cd "$ROOT" && cargo xtask gen-lab-log "$WORK/lag/lab.log" 400000 >/dev/null)
cat > stamp.py <<'PY'
import sys, time
src = [l.split(' ', 1)[1] for l in open(sys.argv[1]).read().splitlines(True)]
out = open(sys.argv[2], 'a')
rate, secs = int(sys.argv[3]), float(sys.argv[4])
per, i, k, t0 = rate // 10, 0, 0, time.time()
while time.time() - t0 < secs:
    stamp = '%.3f ' % time.time()
    out.write(''.join(stamp + l for l in src[i:i + per])); out.flush()
    i = (i + per) % (len(src) - per); k += 1
    time.sleep(max(0, t0 + k * 0.1 - time.time()))
PY
lag=""
for r in $(seq "$REPS"); do
  : > lag.log; : > lag.err
  "$BIN" watch --access lag.log --error lag.err --log-format lab --tz-offset +00:00 \
    --interval 100ms --listen "127.0.0.1:$PORT" --duration 600s 2> watch.err & P=$!
  sleep 1
  read -r s0 t0 < <(cpu)
  python3 stamp.py lag/lab.log lag.log "$LAG_RATE" "$SECS" & W=$!
  : > lag.samples
  while kill -0 "$W" 2>/dev/null; do
    curl -s "127.0.0.1:$PORT/metrics" | awk '/^resolvelab_lag_seconds/ {print $2}' >> lag.samples
    sleep 0.1
  done
  read -r s1 t1 < <(cpu)
  fed=$(wc -l < lag.log)
  written=$(awk -v f="$fed" -v s="$SECS" 'BEGIN{printf "%.0f", f/s/1000}')
  stats=$(sort -g lag.samples | awk '{v[NR]=$1} END {i50=int(NR*0.5)+1; i99=int(NR*0.99)+1; if (i99>NR) i99=NR; printf "%.3f | %.3f | %.3f", v[i50], v[i99], v[NR]}')
  lag+="| $r | $written | $stats | $(wc -l < lag.samples) | $(steal_pct $((s1 - s0)) $((t1 - t0))) |\n"
  kill "$P"; wait "$P" 2>/dev/null || true
done

{
  echo "# \`resolvelab watch\` benchmark"
  echo
  echo "Generated by \`scripts/bench-watch.sh $LINES $REPS\` on $(date -u +%Y-%m-%dT%H:%MZ) ($(nproc) cores; resolvelab $("$BIN" --version | head -1 | awk '{print $2}'))."
  # What else ran, said by whoever runs it (BENCH_NOTE="beside …").
  [ -z "${BENCH_NOTE:-}" ] || echo "$BENCH_NOTE"
  echo "Input: $LINES lines of \`cargo xtask gen-preset-log upstreaminfo\` (ingress-nginx's format, 30 % failing) with its error log. mtail's program:"
  echo
  echo '```'
  cat progs/nginx.mtail
  echo '```'
  echo
  echo "## Catch-up: a backlog read from the start"
  echo
  echo "\`watch --from-start\`, timed until \`/metrics\` counts every request; \`diagnose\` of the same files and \`mtail --one_shot\` on the same access log beside it. Incidents: watch's (\`--events\`, the window still open classed when it is stopped) that are \`diagnose\`'s — the same start, upstream, class, count and confidence —, and how many of each cite an error line."
  echo
  echo "| what | run | wall s | k lines/s | peak RSS MB | incidents | steal % |"
  echo "|---|---|---|---|---|---|---|"
  printf "%b" "$rows"
  echo
  echo "## Live: $RATE lines/s appended for $SECS s, watch and mtail following the same file"
  echo
  echo "| run | tool | CPU, % of one core | peak RSS MB | lines counted 3 s after the writer stopped | steal % |"
  echo "|---|---|---|---|---|---|"
  printf "%b" "$live"
  echo
  echo "## Lag at $LAG_RATE lines/s (asked), \`--interval 100ms\`"
  echo
  echo "resolvelab_lag_seconds sampled every 100 ms while the writer runs: from the newest request read (its \`\$msec\`, stamped when its batch was written) to the tick that published it (a scrape sees it up to one interval later)."
  echo
  echo "| run | k lines/s written | lag p50 s | lag p99 s | lag max s | samples | steal % |"
  echo "|---|---|---|---|---|---|---|"
  printf "%b" "$lag"
} > "$OUT"
echo "wrote $OUT"
