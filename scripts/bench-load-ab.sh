#!/usr/bin/env bash
# Rate accuracy of two resolvelab binaries side by side: the same open-loop command
# (5,000 rps for 10 s, 512 connections, RATE_THREADS lanes) against one `resolvelab backend`,
# the two binaries alternating in pairs (A B, B A, …) so both see similar neighbours, with the
# host's steal time of each run. Loopback only; every run is bounded (10 s).
#
# Usage: scripts/bench-load-ab.sh NEW_BIN OLD_BIN      (ROUNDS=6 RATE_THREADS=$(nproc) OUT=…)
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: $0 NEW_BIN OLD_BIN" >&2; exit 2; }
NEW=$1 OLD=$2
ROUNDS=${ROUNDS:-6}
RATE_THREADS=${RATE_THREADS:-$(nproc)}
OUT=${OUT:-target/bench-load-ab}
mkdir -p "$OUT"
# steal and total ticks of all CPUs, from /proc/stat
ticks() { awk '/^cpu /{print $9, $2+$3+$4+$5+$6+$7+$8+$9}' /proc/stat; }
"$NEW" backend --listen 127.0.0.20:18080 --name b1 --duration 1800s >/dev/null 2>&1 &
backend=$!
trap 'kill $backend 2>/dev/null || true' EXIT
for _ in $(seq 1 50); do (exec 3<>/dev/tcp/127.0.0.20/18080) 2>/dev/null && break; sleep 0.1; done
echo "| pair | engine | steal % | achieved | schedule lag p50 / p99 / max µs | generator lag p99 µs |"
echo "|---|---|---|---|---|---|"
for r in $(seq 1 "$ROUNDS"); do
    order="new old"; [ $((r % 2)) = 0 ] && order="old new"
    for which in $order; do
        bin=$NEW; [ "$which" = old ] && bin=$OLD
        read -r s0 t0 < <(ticks)
        "$bin" load http://127.0.0.20:18080/ --rate 5000 --duration 10s --connections 512 -q \
            --summary json --threads "$RATE_THREADS" > "$OUT/$which-$r.json"
        read -r s1 t1 < <(ticks)
        python3 - "$OUT/$which-$r.json" "$r" "$which" "$s0" "$t0" "$s1" "$t1" <<'PY'
import json, sys
f, r, which, s0, t0, s1, t1 = sys.argv[1:]
s = json.load(open(f))
l, d = s["schedule_lag"], s.get("dispatch_lag") or {}
steal = 100 * (int(s1) - int(s0)) / max(1, int(t1) - int(t0))
err = (s["achieved_rps"] / 5000 - 1) * 100
print(f"| {r} | {which} | {steal:.1f} | {err:+.3f} % | {l['p50_us']} / {l['p99_us']} / {l['max_us']} | {d.get('p99_us', '–')} |")
PY
    done
done
