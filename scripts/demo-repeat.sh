#!/usr/bin/env bash
# The README's main command must not fail one time in three: run `resolvelab demo` N times in a
# row (default 20) and count the exit statuses, with the load average and the hypervisor's steal
# share of each run. Written up in docs/BENCHMARKS.md ("demo robustness").
#
# Usage: scripts/demo-repeat.sh            Env: N=20 BIN=target/release/resolvelab OUT=target/demo-repeat
set -euo pipefail
cd "$(dirname "$0")/.."

N=${N:-20}
BIN=${BIN:-target/release/resolvelab}
OUT=${OUT:-target/demo-repeat}
[ -x "$BIN" ] || cargo build --release --bin resolvelab
mkdir -p "$OUT"

steal() { awk '/^cpu /{print $9, $2+$3+$4+$5+$6+$7+$8+$9}' /proc/stat; }
ok=0
fail=0
printf '%-4s %-6s %-8s %-7s %s\n' run exit load1 steal% verdict
for i in $(seq 1 "$N"); do
  read -r s0 t0 < <(steal)
  set +e
  "$BIN" demo --out "$OUT" > "$OUT/demo-$i.log" 2>&1
  rc=$?
  set -e
  read -r s1 t1 < <(steal)
  st=$(awk -v a="$s0" -v b="$s1" -v c="$t0" -v d="$t1" 'BEGIN{ if (d>c) printf "%.1f", 100*(b-a)/(d-c); else print "0.0" }')
  load=$(cut -d' ' -f1 /proc/loadavg)
  verdict=$(grep -m1 '^verdict:' "$OUT/demo-$i.log" || echo "(no verdict line)")
  printf '%-4s %-6s %-8s %-7s %s\n' "$i" "$rc" "$load" "$st" "$verdict"
  if [ "$rc" -eq 0 ]; then ok=$((ok + 1)); else fail=$((fail + 1)); fi
done
echo "demo: $ok of $N runs exited 0 ($fail failed) on $(date -u +%Y-%m-%d), $(nproc) cores"
[ "$fail" -eq 0 ]
