#!/usr/bin/env bash
# Lint scaling, side by side with gixy-ng on the same generated configurations (written up in
# docs/bench/lint.md): N upstreams, each proxied by its own location, every 16th one resolving
# at run time, for N in SIZES. Wall time and peak RSS of each tool, with the host's steal share.
# gixy-ng is installed by this script into a private venv (pinned), never by hand.
#
# Usage: scripts/bench-lint.sh       Env: SIZES="1000 16000 100000" ROUNDS=3 GIXY_TIMEOUT=600
#        BIN=target/release/resolvelab OUT=target/bench-lint
set -euo pipefail
cd "$(dirname "$0")/.."

SIZES=${SIZES:-"1000 16000 100000"}
ROUNDS=${ROUNDS:-3}
GIXY_TIMEOUT=${GIXY_TIMEOUT:-600}
BIN=${BIN:-target/release/resolvelab}
OUT=${OUT:-target/bench-lint}
GIXY_VERSION=0.2.59
mkdir -p "$OUT"
[ -x "$BIN" ] || cargo build --release --bin resolvelab
if [ ! -x "$OUT/venv/bin/gixy" ]; then
  python3 -m venv "$OUT/venv"
  "$OUT/venv/bin/pip" install --quiet "gixy-ng==$GIXY_VERSION"
fi
GIXY="$OUT/venv/bin/gixy"

gen() { # N → a whole nginx.conf
  python3 - "$1" <<'EOF'
import sys
n = int(sys.argv[1])
print("events {}\nhttp {\n    resolver 127.0.0.53 valid=5s ipv6=off;\n    resolver_timeout 3s;")
for i in range(n):
    if i % 16 == 0:
        print(f"    upstream u{i} {{ zone u{i} 64k; server app{i}.example.internal:80 resolve max_fails=0; keepalive 8; }}")
    else:
        print(f"    upstream u{i} {{ server 10.{i >> 16 & 255}.{i >> 8 & 255}.{i & 255}:80; keepalive 8; }}")
print("    server {\n        listen 80;\n        proxy_http_version 1.1;\n        proxy_set_header Connection \"\";")
for i in range(n):
    print(f"        location /u{i}/ {{ proxy_pass http://u{i}; }}")
print("    }\n}")
EOF
}

steal() { awk '/^cpu /{print $9, $2+$3+$4+$5+$6+$7+$8+$9}' /proc/stat; }
measure() { # cmd… → "seconds maxrss_kib steal%" (or "timeout - steal%")
  local s0 t0 s1 t1 rc
  read -r s0 t0 < <(steal)
  local n0 n1
  n0=$(date +%s%N)
  set +e
  /usr/bin/time -f '%M' -o "$OUT/time.txt" timeout "$GIXY_TIMEOUT" "$@" > /dev/null 2>&1
  rc=$?
  set -e
  n1=$(date +%s%N)
  read -r s1 t1 < <(steal)
  local st
  st=$(awk -v a="$s0" -v b="$s1" -v c="$t0" -v d="$t1" 'BEGIN{ if (d>c) printf "%.1f", 100*(b-a)/(d-c); else print "0.0" }')
  if [ "$rc" -eq 124 ]; then
    echo "timeout - $st"
  else
    echo "$(awk -v a="$n0" -v b="$n1" 'BEGIN{printf "%.3f", (b-a)/1e9}') $(tail -1 "$OUT/time.txt") $st"
  fi
}

echo "| upstreams | round | resolvelab s | resolvelab MiB | gixy-ng s | gixy-ng MiB | gixy-ng / resolvelab | steal % |"
echo "|---:|---:|---:|---:|---:|---:|---:|---:|"
for n in $SIZES; do
  conf="$OUT/nginx-$n.conf"
  [ -f "$conf" ] || gen "$n" > "$conf"
  for r in $(seq 1 "$ROUNDS"); do
    read -r rs rk rst < <(measure "$BIN" lint --fail-on error --nginx-version 1.28.3 "$conf")
    read -r gs gk gst < <(measure "$GIXY" "$conf")
    ratio=$(awk -v g="$gs" -v s="$rs" -v lim="$GIXY_TIMEOUT" 'BEGIN{ if (g=="timeout") printf "> %.0fx", lim/s; else printf "%.0fx", g/s }')
    gmib=$([ "$gk" = "-" ] && echo "-" || awk -v k="$gk" 'BEGIN{printf "%.0f", k/1024}')
    echo "| $n | $r | $rs | $(awk -v k="$rk" 'BEGIN{printf "%.0f", k/1024}') | $gs | $gmib | $ratio | $rst / $gst |"
  done
done
