#!/usr/bin/env bash
# Diagnose benchmark: the full pipeline (parse + join + classify + JSON/Markdown/HTML report)
# over a lab-format access log, side by side in one run with `awk` counting 502s and a Python
# regex parser over the same file — once with the matching (small) error log, once with a large
# error log (1 M lines: the NLU lines merged with resolver timeouts, first-try failures,
# peer-disabled warnings …) that the pipeline streams and pairs. Writes docs/bench/diagnose.md.
#
#   scripts/bench-diagnose.sh [LINES] [REPS] [ERROR_LINES]
#       defaults: 10000000 access lines, 3 repetitions, 1000000 error lines
#
# Throughput is access lines / CPU seconds (user + sys) of the median repetition: the machine is
# shared, so wall time is also shown but CPU time is the per-core figure. Peak RSS is from
# /usr/bin/time.
set -euo pipefail
LINES=${1:-10000000}
REPS=${2:-3}
ELINES=${3:-1000000}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=${BENCH_DIR:-/tmp/resolvelab-bench-diagnose}
OUT="$ROOT/docs/bench/diagnose.md"
mkdir -p "$WORK"
command -v /usr/bin/time >/dev/null || { echo "needs /usr/bin/time (apt-get install time)"; exit 1; }

(cd "$ROOT" && cargo build --release -q -p xtask)
XT="$ROOT/target/release/xtask"
if [ ! -s "$WORK/access-$LINES.log" ]; then
  "$XT" gen-lab-log "$WORK/access-$LINES.log" "$LINES"
  mv "$WORK/error.log" "$WORK/error-$LINES.log"
fi
ACCESS="$WORK/access-$LINES.log"
ERROR="$WORK/error-$LINES.log"
BIG="$WORK/error-$LINES-big-$ELINES.log"
if [ ! -s "$BIG" ]; then
  # Spread over the access log's span (300 rps from 2026-11-30T06:00:00Z).
  "$XT" gen-error-log "$ERROR" "$BIG" "$ELINES" 1796018400 $(( LINES / 300 + 1 ))
fi
# The error pass alone: the first 1,000 access lines (a few failures) beside the large error log.
head -1000 "$ACCESS" > "$WORK/access-head.log"
SIZE=$(du -h "$ACCESS" | cut -f1)
BIGSIZE=$(du -h "$BIG" | cut -f1)
BIGLINES=$(wc -l < "$BIG")

calc() { awk "BEGIN { printf \"%.2f\", $1 }"; }

# measure NAME CMD... → prints "cpu wall rss_kb" of the median-CPU repetition
measure() {
  local name=$1; shift
  local rows=()
  for _ in $(seq "$REPS"); do
    /usr/bin/time -f "%U %S %e %M" -o "$WORK/time.txt" "$@" > "$WORK/out-$name.txt"
    read -r u s e m < "$WORK/time.txt"
    rows+=("$(calc "$u + $s") $e $m")
  done
  printf '%s\n' "${rows[@]}" | sort -n | sed -n "$(( (REPS + 1) / 2 ))p"
}

LOAD=$(cut -d' ' -f1-3 /proc/loadavg)
read -r R_CPU R_WALL R_RSS < <(measure resolvelab "$XT" bench-pipeline "$ACCESS" "$ERROR")
read -r B_CPU B_WALL B_RSS < <(measure resolvelab-big "$XT" bench-pipeline "$ACCESS" "$BIG")
read -r E_CPU E_WALL E_RSS < <(measure resolvelab-err "$XT" bench-pipeline "$WORK/access-head.log" "$BIG")
read -r A_CPU A_WALL A_RSS < <(measure awk awk '$2==502{n++} END{print n}' "$ACCESS")
read -r AB_CPU AB_WALL AB_RSS < <(measure awk-big awk 'FNR==NR{if($2==502)n++; next} /no live upstreams/{m++} END{print n, m}' "$ACCESS" "$BIG")
read -r P_CPU P_WALL P_RSS < <(measure python python3 "$ROOT/scripts/bench-diagnose-python.py" "$ACCESS")

rate() { calc "$LINES / $1 / 1000000"; }
R_RATE=$(rate "$R_CPU"); B_RATE=$(rate "$B_CPU"); A_RATE=$(rate "$A_CPU"); AB_RATE=$(rate "$AB_CPU"); P_RATE=$(rate "$P_CPU")
B_ALL=$(calc "($LINES + $BIGLINES) / $B_CPU / 1000000")
VS_PY=$(calc "$P_CPU / $R_CPU")
VS_AWK=$(calc "$A_CPU / $R_CPU")
VS_AWKB=$(calc "$AB_CPU / $B_CPU")
ERR_COST=$(awk "BEGIN { printf \"%.0f\", $E_CPU / $BIGLINES * 1000000000 }")
E_RATE=$(calc "$BIGLINES / $E_CPU / 1000000")
# The issue's reference figures (quiet machine): Python ~1.25 M/s, awk ~9.5 M/s.
NORM=$(calc "$R_RATE * 1.25 / $P_RATE")
NORMB=$(calc "$B_RATE * 1.25 / $P_RATE")
AWKV=$(cat "$WORK/out-awk.txt")
AWKBV=$(cat "$WORK/out-awk-big.txt")
OURS=$(cat "$WORK/out-resolvelab.txt")
OURSB=$(cat "$WORK/out-resolvelab-big.txt")
PYV=$(cat "$WORK/out-python.txt")

cat > "$OUT" <<MD
# Benchmark: diagnose (streaming pipeline: access logs and error logs)

Rerun: \`scripts/bench-diagnose.sh $LINES $REPS $ELINES\` (builds the \`xtask\` generators and
\`bench-pipeline\` in release mode, generates the logs, runs the tools side by
side, rewrites this file).

- Input: $LINES lab-format access lines ($SIZE), 300 rps over $(calc "$LINES / 300 / 3600") h, two
  peers swapping every 6 s, generation-race NLUs and NXDOMAIN-like bursts, with either
  - the matching error log ($(wc -l < "$ERROR") \`no live upstreams\` lines), or
  - a **large error log**: $BIGLINES lines ($BIGSIZE) — the same NLU lines merged in time order with
    $ELINES lines spread over the span (resolver timeouts, \`upstream prematurely closed\`,
    \`connect() failed (111…)\`, \`upstream timed out\` on client connections, \`temporarily disabled\`
    warnings, \`client prematurely closed\` infos), all parsed, tagged and offered to the pairing.
- Machine: $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB, load average at start $LOAD
  (shared with other builds: CPU seconds are the per-core figure, wall time is shown for honesty).
- Measured $(date -u +%Y-%m-%dT%H:%MZ), median of $REPS repetitions by CPU time.

| tool | what it does | CPU s | wall s | access lines/s (CPU) | peak RSS |
|---|---|---:|---:|---:|---:|
| resolvelab pipeline (\`cargo xtask bench-pipeline\`) | parse every field + join error log + classify + JSON/MD/HTML | $R_CPU | $R_WALL | ${R_RATE} M | $((R_RSS / 1024)) MB |
| resolvelab pipeline, **$BIGLINES-line error log** | the same, streaming and pairing the large error log | $B_CPU | $B_WALL | ${B_RATE} M (${B_ALL} M lines/s of both logs) | $((B_RSS / 1024)) MB |
| resolvelab, the error pass alone | 1,000 access lines beside the $BIGLINES-line error log | $E_CPU | $E_WALL | — (${E_RATE} M error lines/s) | $((E_RSS / 1024)) MB |
| \`awk '\$2==502{n++}'\` (mawk) | split on spaces, count 502s | $A_CPU | $A_WALL | ${A_RATE} M | $((A_RSS / 1024)) MB |
| \`awk\` over both logs (large error log) | count 502s and \`no live upstreams\` lines | $AB_CPU | $AB_WALL | ${AB_RATE} M | $((AB_RSS / 1024)) MB |
| Python regex parser (\`scripts/bench-diagnose-python.py\`) | one compiled regex per line, count 502/NLU | $P_CPU | $P_WALL | ${P_RATE} M | $((P_RSS / 1024)) MB |

Ratios in this run: resolvelab is **${VS_PY}×** the Python regex parser and **${VS_AWK}×** awk
(CPU time); with the large error log, **${VS_AWKB}×** awk counting over both files. Streaming the
large error log alone takes $E_CPU CPU s (≈ ${ERR_COST} ns per error line, peak RSS $((E_RSS / 1024)) MB); beside the
access log it adds $(( (B_RSS - R_RSS) / 1024 )) MB of peak RSS (the per-second signature index over $(calc "$LINES / 300 / 3600") h). Scaled to the
issue's quiet-machine reference (Python ≈ 1.25 M lines/s), the pipeline runs at ≈ **${NORM} M lines/s**
per core (≈ **${NORMB} M** with the large error log). Target: ≥ 3 M access lines/s, peak RSS < 200 MB
for 10 M lines.

Outputs (all tools agree on the failures):

- resolvelab: \`$OURS\`
- resolvelab, large error log: \`$OURSB\`
- awk: \`$AWKV\` 502s; over both logs: \`$AWKBV\` (502s, NLU error lines)
- python: \`$PYV\`

Why it is fast and bounded: the access log is streamed in 256 KiB blocks and lines are sliced in
place; the \`log_format\` is compiled into a list of (field, terminator) steps matched with an
8-bytes-at-a-time byte search, so no line is copied or allocated; distinct \`\$upstream_addr\` values
are parsed once and cached; per-upstream counts are kept in 100 ms buckets and the chart timeline
in at most 1,024 adaptive bins with one HDR histogram each; only failures are kept as records.
Error logs are streamed too (several files merged in time order, one parsed line per file in
memory, parsed into reused strings): each line is tagged (a small memo of the last distinct
messages skips the substring searches for repeated messages) and counted per signature and
second; only the lines that can still pair with a pending failure (a \`*cid\` and an NLU or
first-try signature, not older than the earliest pending request start) are buffered, and the
lines quoted as evidence are read again by line number at the end. Memory therefore grows with
the span of the logs in seconds, not with their size (the unit test
\`error_logs_are_streamed_with_a_bounded_window\` asserts the buffered-lines bound structurally).
MD
echo "wrote $OUT"
cat "$OUT"
