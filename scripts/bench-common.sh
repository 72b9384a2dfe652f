# What every benchmark script starts with, sourced (`. "$(dirname "$0")/bench-common.sh"`):
#   bench_init NAME   ROOT (the repository), WORK (BENCH_DIR, default /tmp/resolvelab-bench-NAME,
#                     created), BIN (the release binary, built with xtask), and a check for
#                     /usr/bin/time, which the scripts take CPU and peak RSS from;
#   steal             "steal total" jiffies from /proc/stat: the host's share of CPU time over
#                     a measurement is the difference of two readings.
bench_init() {
  ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
  WORK=${BENCH_DIR:-/tmp/resolvelab-bench-$1}
  BIN="$ROOT/target/release/resolvelab"
  mkdir -p "$WORK"
  command -v /usr/bin/time >/dev/null || { echo "needs /usr/bin/time (apt-get install time)" >&2; exit 1; }
  (cd "$ROOT" && cargo build --release -q -p resolvelab -p xtask)
}

steal() { awk '/^cpu /{s=0; for(i=2;i<=NF;i++) s+=$i; print $9, s}' /proc/stat; }
