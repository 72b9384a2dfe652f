#!/usr/bin/env bash
# `resolvelab verify` on the seed's production configuration (examples/production.conf, one
# upstream): wall time of every event on real nginx, of every event with the fixes' A/B, and of
# `--quick` (the model), with the host's steal share beside each. Targets (docs/BENCHMARKS.md):
# all events < 5 min, with A/B < 15 min, --quick < 10 s, on 2 cores at the default scale.
#
#   scripts/bench-verify.sh [QUICK_REPS]        # writes docs/bench/verify.md
set -euo pipefail
cd "$(dirname "$0")/.."
REPS=${1:-3}
cargo build -q --release -p resolvelab
BIN=target/release/resolvelab
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT

cpu() { awk '/^cpu /{s=0; for(i=2;i<=NF;i++) s+=$i; print $9, s}' /proc/stat; }
steal_pct() { awk -v a="$1" -v b="$2" 'BEGIN{printf "%.1f", b ? 100*a/b : 0}'; }

# measure LABEL ARGS... → one table row: wall seconds, steal %, exit status, what the card says
rows=""
measure() {
  local label=$1; shift
  read -r s0 t0 < <(cpu)
  local a b rc=0
  a=$(date +%s.%N)
  "$BIN" verify --nginx-conf examples/production.conf --format json -o "$OUT/card.json" \
    --out "$OUT/runs-$RANDOM" "$@" 2>"$OUT/err" || rc=$?
  b=$(date +%s.%N)
  read -r s1 t1 < <(cpu)
  local runs
  runs=$(python3 -c 'import json,sys; c=json.load(open(sys.argv[1])); t=c["targets"][0]; print(len([o for o in t["outcomes"] if "skipped" not in o]) + sum(len(f["rows"]) for f in t["fixes"]))' "$OUT/card.json")
  cp "$OUT/card.json" "${CARDS:-/tmp}/bench-verify-card-$(echo "$label" | tr -c 'a-z0-9' '-').json"
  rows+="| $label | $(awk -v a="$a" -v b="$b" 'BEGIN{printf "%.1f", b-a}') | $runs | $(steal_pct $((s1 - s0)) $((t1 - t0))) | $rc |\n"
}

for _ in $(seq "$REPS"); do measure "--quick (the model), every event and fix" --quick; done
measure "real nginx 1.28.3, every event, no fixes" --no-fixes
measure "real nginx 1.28.3, every event and the fixes' A/B"

{
  echo "# Benchmark: \`resolvelab verify\` on one upstream"
  echo
  echo "\`scripts/bench-verify.sh $REPS\` on $(date -u +%Y-%m-%d), release build, this 2-core machine:"
  echo "examples/production.conf (the seed's upstream \`be\`, one GSLB name, valid=5s), 200 requests/s."
  echo "Targets: every event on real nginx < 5 min; with the fixes' A/B < 15 min; \`--quick\` < 10 s."
  echo
  echo "| what | wall s | runs played | steal % | exit |"
  echo "|---|---:|---:|---:|---:|"
  printf "%b" "$rows"
  echo
  echo "A real-nginx run lasts as long as its timeline (25–40 s of load at this re-query period, plus"
  echo "nginx's start and the checker); the wall time is the sum of the runs, played one after the"
  echo "other. The A/B replays each replayable fix on the events its mechanism acts on that failed"
  echo "(or missed their injection) before it (\`fixes::acts_on\`)."
} > docs/bench/verify.md
cat docs/bench/verify.md
