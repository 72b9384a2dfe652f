#!/usr/bin/env bash
# `resolvelab watch` at a busy nginx's rate, sustained (issue #48: "< 2 % of one core at
# 5,000 lines/s"): a writer appends RATE lines/s of the `upstreaminfo` preset (30 % failing, in
# bursts: incident windows keep opening and closing) for SECS s to one growing file; watch
# follows it, and so does mtail (Debian's, `cargo xtask provisioned mtail`) counting the same
# lines by status and upstream, and — when BASE names another build of resolvelab — that build,
# all side by side in one run. Each one's CPU (utime + stime from /proc) per 30 s slice, its
# peak RSS, and the steal share beside each slice. REPS runs; writes docs/bench/watch-sustained.md.
#
# LOG_RATE=300 writes a log of 300 requests/s of log time at the same 5,000 lines/s: its log
# time runs 16.7 times faster than the clock (a harder case: windows open and close more
# often per second, each classed over more log); written to docs/bench/watch-sustained-log300.md.
#
#   scripts/bench-watch-sustained.sh [SECS] [REPS] [BASE]   defaults: 300 s, 3 runs, no base
set -euo pipefail
SECS=${1:-300}
REPS=${2:-3}
BASE=${3:-}
RATE=5000
LOG_RATE=${LOG_RATE:-$RATE}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=${BENCH_DIR:-/tmp/resolvelab-bench-watch-sustained}
OUT="$ROOT/docs/bench/watch-sustained.md"
[ "$LOG_RATE" = "$RATE" ] || OUT="$ROOT/docs/bench/watch-sustained-log$LOG_RATE.md"
BIN="$ROOT/target/release/resolvelab"
PORT=${PORT:-19579}
mkdir -p "$WORK"
(cd "$ROOT" && cargo build --release -q -p resolvelab -p xtask)
# The build measured: its commit, and whether the tree differed from it.
COMMIT=$(cd "$ROOT" && git rev-parse --short HEAD)$(cd "$ROOT" && git diff --quiet HEAD -- crates || echo ", with uncommitted changes")
cd "$WORK"
# Enough lines that the writer never wraps around (its times would go back).
SRC=src-$LOG_RATE-$SECS.log
[ -f "$SRC" ] || (cd "$ROOT" && cargo xtask gen-preset-log upstreaminfo "$WORK/$SRC" $((RATE * SECS + RATE * 10)) 0.3 "$LOG_RATE" >/dev/null)
READ=(--log-format upstreaminfo --tz-offset +00:00)
MTAIL=$(cd "$ROOT" && cargo xtask provisioned mtail)
mkdir -p progs
cp "$ROOT/scripts/upstreaminfo.mtail" progs/nginx.mtail
cat > feed.py <<'PY'
import sys, time
src = open(sys.argv[1])
out = open(sys.argv[2], 'a')
rate, secs = int(sys.argv[3]), float(sys.argv[4])
per, k, t0 = rate // 10, 0, time.time()
while time.time() - t0 < secs:
    out.write(''.join(src.readline() for _ in range(per))); out.flush()
    k += 1
    time.sleep(max(0, t0 + k * 0.1 - time.time()))
PY
hz=$(getconf CLK_TCK)
ticks() { awk '{print $14+$15}' "/proc/$1/stat"; }
cpu() { awk '/^cpu /{s=0; for(i=2;i<=NF;i++) s+=$i; print $9, s}' /proc/stat; }
rss_mb() { awk '/VmHWM/{printf "%.0f", $2/1024}' "/proc/$1/status"; }
counted() { curl -s "127.0.0.1:$1/metrics" | awk -v m="$2" '$0 ~ "^"m {s+=$2} END {print s+0}'; }
head_b="| run | slice (30 s) | watch (this build) | mtail |"
[ -n "$BASE" ] && head_b="| run | slice (30 s) | watch (this build) | mtail | watch ($(basename "$BASE")) |"
rows=""; ends=""
for r in $(seq "$REPS"); do
  : > live.log; : > live.err
  "$BIN" watch --access live.log --error live.err "${READ[@]}" --listen "127.0.0.1:$PORT" --duration 3600s 2> watch.err & P=$!
  "$MTAIL" --progs progs --logs live.log --port $((PORT + 1)) --address 127.0.0.1 2> mtail.err & Q=$!
  B=""
  if [ -n "$BASE" ]; then
    "$BASE" watch --access live.log --error live.err "${READ[@]}" --listen "127.0.0.1:$((PORT + 2))" --duration 3600s 2> base.err & B=$!
  fi
  sleep 2
  python3 feed.py "$SRC" live.log "$RATE" "$SECS" & F=$!
  read -r s0 t0 < <(cpu); a0=$(ticks $P); q0=$(ticks $Q); b0=0; [ -n "$B" ] && b0=$(ticks $B)
  for i in $(seq $((SECS / 30))); do
    sleep 30
    read -r s1 t1 < <(cpu); a1=$(ticks $P); q1=$(ticks $Q); b1=0; [ -n "$B" ] && b1=$(ticks $B)
    row=$(awk -v r="$r" -v i="$i" -v a=$((a1 - a0)) -v q=$((q1 - q0)) -v b=$((b1 - b0)) -v hz="$hz" -v base="$B" \
      -v s=$((s1 - s0)) -v t=$((t1 - t0)) 'BEGIN{
        printf "| %d | %d (steal %.2f %%) | %.2f %% | %.2f %% |", r, i, t ? 100*s/t : 0, 100*a/hz/30, 100*q/hz/30;
        if (base != "") printf " %.2f %% |", 100*b/hz/30; }')
    rows+="$row\n"; echo "$row"
    s0=$s1; t0=$t1; a0=$a1; q0=$q1; b0=$b1
  done
  wait $F || true
  sleep 3
  fed=$(wc -l < live.log)
  end="| $r | $fed | $(counted $PORT resolvelab_requests_total) ($(rss_mb $P) MB) | $(counted $((PORT + 1)) nginx_requests_total) ($(rss_mb $Q) MB) |"
  if [ -n "$B" ]; then
    end+=" $(counted $((PORT + 2)) resolvelab_requests_total) ($(rss_mb $B) MB) |"
    # The same lines, the same classes: this build's incidents and failures by class beside the base's.
    diff <(curl -s "127.0.0.1:$PORT/metrics" | grep -E '^resolvelab_(failed_requests|incidents)_total' | sort) \
         <(curl -s "127.0.0.1:$((PORT + 2))/metrics" | grep -E '^resolvelab_(failed_requests|incidents)_total' | sort) > classes.diff || true
    end+=" $(wc -l < classes.diff) |"
  fi
  ends+="$end\n"
  kill $P $Q $B 2>/dev/null; wait $P $Q $B 2>/dev/null || true
done
{
  echo "# watch at 5,000 lines/s, sustained"
  echo
  echo "Written by \`scripts/bench-watch-sustained.sh $SECS $REPS${BASE:+ BASE}\` on $(date -u +%Y-%m-%dT%H:%MZ) ($(nproc) cores; build of $COMMIT${BASE:+; base: $(basename "$BASE")}). A writer appends"
  echo "$RATE lines/s of the \`upstreaminfo\` preset ($LOG_RATE requests/s of log time, 30 % failing, in bursts) for $SECS s to one growing file that"
  echo "every process below follows; CPU is utime + stime over each 30 s slice, as a share of one core."
  echo
  echo "$head_b"
  echo "|---|---|---:|---:|$([ -n "$BASE" ] && echo '---:|')"
  printf "%b" "$rows"
  echo
  echo "Lines counted at the end (peak RSS):"
  echo
  if [ -n "$BASE" ]; then
    echo "| run | lines written | watch (this build) | mtail | watch (base) | lines of classes that differ from the base's |"
    echo "|---|---:|---:|---:|---:|---:|"
  else
    echo "| run | lines written | watch | mtail |"
    echo "|---|---:|---:|---:|"
  fi
  printf "%b" "$ends"
} > "$OUT"
echo "wrote $OUT"
