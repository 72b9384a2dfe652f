#!/usr/bin/env bash
# Generate docs/FIDELITY.md: every library scenario and variant on the real nginx and on the
# simulated one (`--engine sim`), side by side through `resolvelab sim fidelity`.
#
# Usage:
#   scripts/fidelity.sh                             # runs `resolvelab run --all` first (~35 min)
#   scripts/fidelity.sh --lab-runs /tmp/runs-all    # reuse an existing real-nginx `run --all`
#   scripts/fidelity.sh --lab-runs DIR --bin target/release/resolvelab --out docs/FIDELITY.md
#
# For every real-nginx run directory in the lab runs (one per scenario/variant, one per
# repetition for `repeat` scenarios) the model replays *that run's own* scenario.toml (the
# resolved scenario, as it was when the lab ran) with the same seed, the same loopback /24 and the
# same load start (RESOLVELAB_SIM_EPOCH_US = the lab's load_start_us: same phase of nginx's
# one-second clock). Only the part between the GENERATED markers of the output is rewritten;
# the hand-written explanations around it are kept. Needs python3 (to read the JSON results).
set -euo pipefail

usage() {
    sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'
    exit "${1:-0}"
}

LAB_RUNS=""
OUT="docs/FIDELITY.md"
BIN=""
SIM_OUT=""
while [ $# -gt 0 ]; do
    case "$1" in
        --lab-runs) LAB_RUNS="$2"; shift 2 ;;
        --out) OUT="$2"; shift 2 ;;
        --bin) BIN="$2"; shift 2 ;;
        --sim-out) SIM_OUT="$2"; shift 2 ;;
        -h|--help) usage 0 ;;
        *) echo "fidelity.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done

cd "$(dirname "$0")/.."
command -v python3 > /dev/null || { echo "fidelity.sh: python3 is required (it reads the JSON results); install it" >&2; exit 2; }
if [ -z "$BIN" ]; then
    cargo build -q -p resolvelab
    BIN=target/debug/resolvelab
fi
[ -x "$BIN" ] || { echo "fidelity.sh: $BIN is not an executable (build it or pass --bin)" >&2; exit 2; }

if [ -z "$LAB_RUNS" ]; then
    LAB_RUNS="runs/fidelity-lab-$(date -u +%Y%m%dT%H%M%SZ)"
    echo "fidelity.sh: running every library scenario on real nginx into $LAB_RUNS (about 35 minutes)" >&2
    # Exit status 1 only means some expectation was not held; the comparison still applies.
    "$BIN" run --all --out "$LAB_RUNS" -q || [ $? -eq 1 ]
fi
[ -d "$LAB_RUNS" ] || { echo "fidelity.sh: --lab-runs $LAB_RUNS is not a directory" >&2; exit 2; }
SIM_OUT="${SIM_OUT:-$(mktemp -d "${TMPDIR:-/tmp}/fidelity-sim.XXXXXX")}"
mkdir -p "$SIM_OUT"

# The run's verdict status by the current checker (re-analyzed without touching the directory:
# lab evidence may have been judged by an older checker).
verdict_status() {
    local st
    st="$("$BIN" analyze "$1" --format json --no-write 2>/dev/null \
        | grep -o '"status": *"[^"]*"' | head -n 1 | sed 's/.*: *"//; s/"$//' || true)"
    echo "${st:-no verdict}"
}

# A top-level field of a pretty-printed run.json (string quotes removed).
field() {
    sed -n "s/^  \"$2\": \(.*\)$/\1/p" "$1/run.json" | head -n 1 | sed 's/,$//; s/^"//; s/"$//'
}

# One row's inputs to the pooled first-pick check, read from JSON (never from the Markdown):
# "LAB MODEL EXPECTED" = the lab's and the model's generation-race-first-pick counts
# (`sim fidelity --json-out`) and the model's expected number of races (`first_pick_expected` of
# the model run's sim.json). A missing file or class counts 0; a malformed file is an error.
first_pick() {
    python3 - "$1" "$2" <<'PY'
import json, sys

def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except FileNotFoundError:
        return {}

fid, sim = load(sys.argv[1]), load(sys.argv[2])
row = next((c for c in fid.get("classes", []) if c["class"] == "generation-race-first-pick"), {})
print(row.get("lab_count", 0), row.get("model_count", 0), repr(float(sim.get("first_pick_expected") or 0)))
PY
}

table=$(mktemp)
sections=$(mktemp)
trap 'rm -f "$table" "$sections"' EXIT
agree=0
fp_lab=0
fp_model=0
fp_expected=0
disagree=0
failed=0
for lab in "$LAB_RUNS"/*/; do
    lab="${lab%/}"
    [ -f "$lab/run.json" ] && [ -f "$lab/scenario.toml" ] || continue
    base="$(basename "$lab")"
    scenario="$(field "$lab" scenario)"
    variant="$(field "$lab" variant)"
    seed="$(field "$lab" seed)"
    start="$(field "$lab" load_start_us)"
    # "127.A.B.0/24", possibly followed by " in a private network namespace, …" ([host] netns).
    net="$(field "$lab" net | sed -n 's/^127\.\([0-9]*\)\.\([0-9]*\)\.0\/24\( .*\)\{0,1\}$/\1.\2/p')"
    status="$(verdict_status "$lab")"
    title="$scenario"
    [ "$variant" = "null" ] || title="$scenario [$variant]"
    title="$title — seed $seed"
    # The lab's resolved scenario, run once (`repeat` is the lab's loop over seeds, one
    # directory per repetition: each is compared with its own seed).
    mkdir -p "$SIM_OUT/$base"
    grep -v '^repeat = ' "$lab/scenario.toml" > "$SIM_OUT/$base/scenario.toml"
    netarg=()
    [ -n "$net" ] && netarg=(--net "$net")
    rc=0
    arrivals=""
    [ -f "$lab/load.jsonl" ] && arrivals="$lab/load.jsonl"
    RESOLVELAB_SIM_EPOCH_US="${start:-}" RESOLVELAB_SIM_ARRIVALS="$arrivals" "$BIN" run "$SIM_OUT/$base/scenario.toml" --engine sim \
        --seed "$seed" "${netarg[@]}" --out "$SIM_OUT/$base/runs" -q > "$SIM_OUT/$base/run.txt" 2>&1 || rc=$?
    sim="$(find "$SIM_OUT/$base/runs" -mindepth 1 -maxdepth 1 -type d 2>/dev/null | sort | head -n 1 || true)"
    if [ "$rc" -gt 1 ] || [ -z "$sim" ]; then
        failed=$((failed + 1))
        printf '| %s | `%s` | %s | – | **sim run failed**: %s |\n' "$title" "$base" "$status" \
            "$(tail -n 1 "$SIM_OUT/$base/run.txt" | tr '|' '/')" >> "$table"
        continue
    fi
    rc=0
    # One comparison, two renderings: the Markdown section and the same result as JSON.
    rm -f "$SIM_OUT/$base/fidelity.json"
    "$BIN" sim fidelity --lab "$lab" --sim "$sim" --name "$title" \
        --json-out "$SIM_OUT/$base/fidelity.json" > "$SIM_OUT/$base/fidelity.md" \
        2> "$SIM_OUT/$base/fidelity.err" || rc=$?
    cat "$SIM_OUT/$base/fidelity.err" >&2
    if [ "$rc" -eq 0 ]; then
        agree=$((agree + 1))
        result="agree"
    elif [ "$rc" -eq 1 ]; then
        disagree=$((disagree + 1))
        result="**DISAGREE** (see below)"
    else
        failed=$((failed + 1))
        result="**comparison failed**: $(tail -n 1 "$SIM_OUT/$base/fidelity.err" | tr '|' '/')"
    fi
    printf '| %s | `%s` | %s | %s | %s |\n' "$title" "$base" "$status" "$(verdict_status "$sim")" \
        "$result" >> "$table"
    { cat "$SIM_OUT/$base/fidelity.md"; echo; } >> "$sections"
    # First-pick races are rare (a few per hundred runs): pooled below over every row.
    fp="$(first_pick "$SIM_OUT/$base/fidelity.json" "$sim/sim.json")"
    read -r l m e <<< "$fp"
    fp_lab=$((fp_lab + l))
    fp_model=$((fp_model + m))
    fp_expected="$(awk -v a="$fp_expected" -v b="$e" 'BEGIN { printf "%.6f", a + b }')"
    echo "fidelity.sh: $title: $result" >&2
done

# The pooled first-pick check: the lab's races over every row against the model's expectation
# (the sum of each peer-list change's race probability), with the Poisson 95 % interval of that
# expectation. One run's count of a class this rare says little; the pool is what calibrates it.
fp_check="$(awk -v lab="$fp_lab" -v mu="$fp_expected" 'BEGIN {
    p = exp(-mu); c = p; k = 0; lo = -1
    while (1) {
        if (lo < 0 && c >= 0.025) lo = k
        if (c >= 0.975) { hi = k; break }
        k++; p = p * mu / k; c += p
    }
    printf "%d–%d: %s", lo, hi, (lab >= lo && lab <= hi) ? "agree" : "**DISAGREE**"
}')"

generated=$(mktemp)
{
    echo "<!-- BEGIN GENERATED by scripts/fidelity.sh — do not edit between these markers -->"
    echo
    echo "Generated on $(date -u +%Y-%m-%dT%H:%M:%SZ) by \`scripts/fidelity.sh --lab-runs $LAB_RUNS\`"
    echo "($("$BIN" --version 2>/dev/null | head -n 1 || echo resolvelab)). Lab: real nginx run directories; model:"
    echo "\`resolvelab run <lab scenario.toml> --engine sim\` with the lab run's seed, /24 and load start."
    echo
    echo "**$agree agree, $disagree disagree, $failed could not be compared.**"
    echo
    echo "| scenario | lab run | lab verdict | model verdict | model vs nginx |"
    echo "|---|---|---|---|---|"
    cat "$table"
    echo
    echo "**First-pick races pooled over every row** (too rare for one run: the model calibrates its"
    echo "window on the pool, [sim.md](sim.md)): lab $fp_lab, model $fp_model drawn, model expectation"
    echo "$(printf '%.2f' "$fp_expected") (Poisson 95 % interval $fp_check)."
    echo
    cat "$sections"
    echo "<!-- END GENERATED -->"
} > "$generated"

if [ -f "$OUT" ] && grep -q '^<!-- BEGIN GENERATED' "$OUT" && grep -q '^<!-- END GENERATED' "$OUT"; then
    awk -v gen="$generated" '
        /^<!-- BEGIN GENERATED/ { while ((getline line < gen) > 0) print line; skip = 1; next }
        /^<!-- END GENERATED/ { skip = 0; next }
        !skip { print }
    ' "$OUT" > "$OUT.tmp"
    mv "$OUT.tmp" "$OUT"
else
    {
        echo "# Fidelity: the simulated nginx against the real one"
        echo
        echo "Regenerate with \`scripts/fidelity.sh --lab-runs DIR\`. The rules are fixed in"
        echo "\`resolvelab_sim::nginx::fidelity\`: counts within each other's Poisson 95 % interval,"
        echo "burst durations within 10 %, the same classes present."
        echo
        cat "$generated"
        echo
        echo "## Disagreements, explained"
        echo
        echo "(hand-written: explain every DISAGREE above)"
    } > "$OUT"
fi
rm -f "$generated"
echo "fidelity.sh: $agree agree, $disagree disagree, $failed failed; wrote $OUT (model runs in $SIM_OUT)" >&2
