#!/usr/bin/env bash
# Time slices benchmark (issue #47): one instance-hour at RATE requests/s with FAIL of them
# failing (`cargo xtask gen-preset-log main`, seeded, with its error log: 30 s outages every
# 100 s) diagnosed once, and as N slices (`diagnose --since/--until`), each given its own lines
# and CONTEXT seconds of logs on each side — what a log store's query per slice returns — and
# joined by `resolvelab merge`. Compares the CPU (user + system) of the slices with the one
# diagnosis, in the same run, and the merged partial with the one diagnosis's partial.
# Writes docs/bench/fleet-slices-context<CONTEXT>s.md.
#
#   scripts/bench-slices.sh [N] [CONTEXT] [REPS]     defaults: 6 slices, 60 s, 3 repetitions
#
# CPU and peak RSS from /usr/bin/time; the host's steal share over each repetition from
# /proc/stat. Cutting the slices' files is the log store's work, not timed. The files stay in
# BENCH_DIR (default /tmp/resolvelab-bench-slices).
set -euo pipefail
N=${1:-6}
CONTEXT=${2:-60}
REPS=${3:-3}
RATE=5000
FAIL=0.3
SECS=3600
LINES=$((RATE * SECS))
T0=1796018400 # the generator's first second
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=${BENCH_DIR:-/tmp/resolvelab-bench-slices}
OUT="$ROOT/docs/bench/fleet-slices-context${CONTEXT}s.md"
BIN="$ROOT/target/release/resolvelab"
mkdir -p "$WORK"
command -v /usr/bin/time >/dev/null || { echo "needs /usr/bin/time (apt-get install time)"; exit 1; }
(cd "$ROOT" && cargo build --release -q -p resolvelab -p xtask)
cd "$WORK"
[ -s access.log ] || "$ROOT/target/release/xtask" gen-preset-log main access.log "$LINES" "$FAIL" "$RATE"

steal() { awk '/^cpu /{s=0; for(i=2;i<=NF;i++) s+=$i; print $9, s}' /proc/stat; }
rfc() { date -u -d "@$1" +%FT%TZ; }
errtime() { date -u -d "@$1" '+%Y/%m/%d %H:%M:%S'; }
# cpu CMD…: "user+sys seconds, peak MB" of one run.
cpu() {
  /usr/bin/time -f '%U %S %M' -o time.txt "$@"
  awk '{printf "%.2f %.0f\n", $1 + $2, $3 / 1024}' time.txt
}

# compare A B: whether two partials say the same, but for the files they name (the slices
# read their own files): "the same", or the fields that differ.
compare() {
  python3 - "$1" "$2" <<'PY'
import json, re, sys
def strip(x):
    if isinstance(x, dict):
        return {k: strip(v) for k, v in x.items() if k not in ("at", "path", "text", "inputs", "parse")}
    if isinstance(x, list):
        return [strip(v) for v in x]
    return re.sub(r"s\d+/", "", x) if isinstance(x, str) else x
a, b = (json.load(open(p))["instances"] for p in sys.argv[1:3])
diff = sorted({k for n in a for k in a[n]
               if k not in ("inputs", "parse") and strip(a[n][k]) != strip(b.get(n, {}).get(k))})
print("the same but for the files named" if not diff else "differs: " + ", ".join(diff))
PY
}

# Slice k's files: its lines and CONTEXT s on each side (the log is in time order, one line
# every 1000/RATE ms, so access lines are cut by number; error lines by their time text, all
# slices in one pass).
STEP=$((SECS / N))
bounds=""
for k in $(seq 0 $((N - 1))); do
  s=$((T0 + k * STEP)) e=$((T0 + (k + 1) * STEP))
  lo=$(( s - CONTEXT < T0 ? T0 : s - CONTEXT )) hi=$((e + CONTEXT))
  mkdir -p "s$k"
  sed -n "$(((lo - T0) * RATE + 1)),$(((hi - T0) * RATE))p;$(((hi - T0) * RATE))q" access.log > "s$k/access.log"
  bounds+="$(errtime "$lo")|$(errtime "$hi")|s$k/error.log"$'\n'
  since[$k]=$(rfc "$s") till[$k]=$(rfc "$e")
done
printf '%s' "$bounds" | awk -F'|' 'NR == FNR { lo[NR] = $1; hi[NR] = $2; f[NR] = $3; n = NR; next }
  { t = substr($0, 1, 19); for (i = 1; i <= n; i++) if (t >= lo[i] && t < hi[i]) print > f[i] }' - error.log
# The first slice is open before, the last after: together they are the whole hour.
since[0]="" till[$((N - 1))]=""

rows=""
for r in $(seq "$REPS"); do
  read -r s0 t0 < <(steal)
  read -r whole_cpu whole_mb < <(cpu "$BIN" diagnose --access access.log --error error.log \
    --log-format main --tz-offset +00:00 --instance i-0000 --partial whole.json)
  total=0 peak=0
  for k in $(seq 0 $((N - 1))); do
    range=()
    [ -n "${since[$k]}" ] && range+=(--since "${since[$k]}")
    [ -n "${till[$k]}" ] && range+=(--until "${till[$k]}")
    read -r c mb < <(cpu "$BIN" diagnose --access "s$k/access.log" --error "s$k/error.log" \
      --log-format main --tz-offset +00:00 --instance i-0000 "${range[@]}" --partial "p$k.json")
    total=$(awk -v a="$total" -v b="$c" 'BEGIN{printf "%.2f", a + b}')
    peak=$(( mb > peak ? mb : peak ))
  done
  read -r merge_cpu merge_mb < <(cpu "$BIN" merge p*.json --partial merged.json)
  read -r s1 t1 < <(steal)
  st=$(awk -v a="$((s1 - s0))" -v b="$((t1 - t0))" 'BEGIN{printf "%.2f", b ? 100*a/b : 0}')
  ratio=$(awk -v a="$total" -v b="$whole_cpu" 'BEGIN{printf "%.3f", a / b}')
  same=$(compare merged.json whole.json)
  rows+="| $r | $whole_cpu | $whole_mb | $total | $peak | **${ratio}×** | $merge_cpu | $same | $st |"$'\n'
done

notes=$(python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))["instances"]["i-0000"]
print(sum(m["what"].startswith(("a slice", "context around")) for m in d["evidence"]["missing"]))' merged.json)
{
  echo "# Time slices of one instance: N diagnoses with context against one"
  echo
  echo "Generated by \`scripts/bench-slices.sh $N $CONTEXT $REPS\` on $(date -u +%Y-%m-%dT%H:%MZ) ($(nproc) cores), build $(cd "$ROOT" && git rev-parse --short HEAD)."
  echo "One instance-hour: \`cargo xtask gen-preset-log main access.log $LINES $FAIL $RATE\` ($LINES access"
  echo "lines, 30 s outages every 100 s, with its error log). $N slices of $STEP s, each given its own lines and"
  echo "$CONTEXT s of logs on each side (the first and last slice open-ended), diagnosed one after another with"
  echo "\`--since/--until\` into partials and joined with \`resolvelab merge\`. CPU is user + system time of each"
  echo "process (\`/usr/bin/time\`); the slices' sum against the one diagnosis, in the same repetition."
  echo
  echo "| run | one diagnosis CPU s | its peak MB | $N slices CPU s (sum) | slices' peak MB | slices / one | merge CPU s | merged partial vs one diagnosis's | steal % |"
  echo "|---:|---:|---:|---:|---:|---:|---:|---|---:|"
  printf '%s' "$rows"
  echo
  echo "Notes on missing context in the merged diagnosis (\`evidence.missing\`, \"What these logs can show\"): $notes."
  echo "The lines each slice reads beyond its own: $((2 * CONTEXT)) s of $STEP s (the first and last slice $CONTEXT s),"
  echo "$(awk -v n="$N" -v c="$CONTEXT" -v s="$STEP" 'BEGIN{printf "%.3f", (n * s + 2 * c * (n - 1)) / (n * s)}')× the lines of the hour in all."
} > "$OUT"
cat "$OUT"
