#!/usr/bin/env bash
# Generate docs/STALE-ADDRESS.md: every setup of the stale-address scenario on the real nginx and
# on the model, with how long nginx kept sending to the old address and what it cost.
#
# Usage:
#   scripts/stale-address-table.sh                         # runs the scenario on real nginx (~3 min)
#   scripts/stale-address-table.sh --lab-runs DIR          # reuse run directories (e.g. of run --all)
#   scripts/stale-address-table.sh --bin target/release/resolvelab --out docs/STALE-ADDRESS.md
#
# "Time to follow" is from the move (the timeline's DNS change) to the end of the last failed
# request; "never" when the failures last to the end of the load (nothing made nginx resolve
# the name again). Needs python3 (to read the run directories).
set -euo pipefail

usage() {
    sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'
    exit "${1:-0}"
}

LAB_RUNS=""
OUT="docs/STALE-ADDRESS.md"
BIN=""
while [ $# -gt 0 ]; do
    case "$1" in
        --lab-runs) LAB_RUNS="$2"; shift 2 ;;
        --out) OUT="$2"; shift 2 ;;
        --bin) BIN="$2"; shift 2 ;;
        -h|--help) usage 0 ;;
        *) echo "stale-address-table.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done

cd "$(dirname "$0")/.."
command -v python3 > /dev/null || { echo "stale-address-table.sh: python3 is required; install it" >&2; exit 2; }
if [ -z "$BIN" ]; then
    cargo build -q --release -p resolvelab
    BIN=target/release/resolvelab
fi
WORK=$(mktemp -d "${TMPDIR:-/tmp}/stale-table.XXXXXX")
if [ -z "$LAB_RUNS" ]; then
    LAB_RUNS="$WORK/lab"
    echo "stale-address-table.sh: running stale-address on real nginx into $LAB_RUNS (about 3 minutes)" >&2
    "$BIN" run stale-address --out "$LAB_RUNS" -q || [ $? -eq 1 ]
fi
"$BIN" run stale-address --engine sim --out "$WORK/sim" -q > /dev/null || [ $? -eq 1 ]

python3 - "$LAB_RUNS" "$WORK/sim" "$OUT" "$BIN" <<'EOF'
import glob, json, os, subprocess, sys

lab, sim, out, binary = sys.argv[1:5]

SETUPS = {
    "base": "`server app.test.local:8080;` in an upstream (resolved at start)",
    "reload": "the same, `nginx -s reload` 10 s after the move",
    "proxy-pass": "`proxy_pass http://app.test.local:8080;` (resolved at start)",
    "variable": "`set $backend …; proxy_pass http://$backend:8080;` + `resolver … valid=5s` (per request)",
    "variable-servfail": "the same, the resolver answering SERVFAIL for 6 s after the move",
    "variable-no-resolver": "`set $backend …; proxy_pass http://$backend:8080;` without a `resolver` (the advice half applied)",
    "resolve": "`server app.test.local:8080 resolve;` + `resolver … valid=5s` (nginx >= 1.27.3)",
}

def without_dns(d):
    """The classes from the access and error logs and the config only (production without a
    DNS history): `class` count (confidence)."""
    p = subprocess.run([binary, "diagnose", "--format", "json", "--log-format", "lab",
                        "--access", os.path.join(d, "access.log"),
                        "--error", os.path.join(d, "error.log"),
                        "--nginx-conf", os.path.join(d, "nginx.conf")],
                       capture_output=True, text=True)
    try:
        incs = json.loads(p.stdout).get("incidents", [])
    except ValueError:
        return "(diagnose failed)"
    by = {}
    for i in incs:
        c = by.setdefault(i["class"], [0, 0.0])
        c[0] += i["count"]
        c[1] = max(c[1], i.get("confidence") or 0.0)
    return ", ".join(f"`{k}` {n} ({conf:g})" for k, (n, conf) in sorted(by.items())) or "none"

def runs(root):
    found = {}
    for d in sorted(glob.glob(os.path.join(root, "stale-address*"))):
        try:
            run = json.load(open(os.path.join(d, "run.json")))
        except (OSError, ValueError):
            continue
        # Judged by this checker, without touching the directory (lab evidence may be older).
        p = subprocess.run([binary, "analyze", d, "--format", "json", "--no-write"],
                           capture_output=True, text=True)
        try:
            verdict = json.loads(p.stdout)
        except ValueError:
            continue
        found[run.get("variant") or "base"] = (d, run, verdict)
    return found

def events(d):
    evs = []
    for line in open(os.path.join(d, "events.jsonl")):
        e = json.loads(line)
        if "kind" in e:
            evs.append(e)
    return evs

def measure(d, run, verdict):
    evs = events(d)
    load_start = run["load_start_us"]
    load_end = next((e["t_us"] for e in evs if e["kind"] == "phase" and e.get("target") == "load" and e.get("note") == "end"), None)
    # The timeline's change (the model also logs each name's first mode, before the load).
    move = next(e["t_us"] for e in evs if e["kind"] == "dns-mode" and e["t_us"] > load_start)
    incs = verdict.get("incidents", [])
    failed = verdict["client"]["errors"]
    if not incs:
        return failed, "0 s", "none"
    last_end = max(i["end_ms"] for i in incs) * 1000
    classes = ", ".join(sorted({f"`{i['class']}` {sum(j['count'] for j in incs if j['class'] == i['class'])}" for i in incs}))
    end = load_end or (load_start + int(30e6))
    if end - last_end < 1_000_000:
        follow = f"never (failing at the end, {(end - move) / 1e6:.1f} s after the move)"
    else:
        follow = f"{(last_end - move) / 1e6:.1f} s"
    return failed, follow, classes

L, S = runs(lab), runs(sim)
rows = []
for v, setup in SETUPS.items():
    if v not in L:
        print(f"stale-address-table.sh: no real-nginx run of `{v}` in {lab}", file=sys.stderr)
        sys.exit(1)
    lf, lt, lc = measure(*L[v])
    sf, st, _ = measure(*S[v]) if v in S else ("—", "—", "")
    held = L[v][2].get("summary", "")
    nd = without_dns(L[v][0])
    rows.append(f"| `{v}` | {setup} | {lt} | {lf} | {lc} | {nd} | {st} | {sf} | {held} |")

stamp = os.path.basename(next(iter(L.values()))[0])
text = f"""# Stale addresses: each way nginx uses a name, after the backend moves

Generated by `scripts/stale-address-table.sh` from the `stale-address` scenario
(`resolvelab run stale-address`, real nginx 1.28; the model: `--engine sim`, same seed). At 10 s the
authority answers b2's address instead of b1's and b1's old address refuses connections, as a
restarted pod's does; 200 requests/s for 30 s, no upstream keep-alive. "Time to follow" runs from
the move to the end of the last failed request. The checker's classes come twice: from the run
directory (its DNS log: an answer history), and from the access and error logs and `nginx.conf`
alone (`resolvelab diagnose --access … --error … --nginx-conf …`), as production without a DNS
history would give them. Lab runs: `{stamp}` and its siblings.

| variant | setup | time to follow (real nginx) | failed requests | classes (checker, run directory) | classes without a DNS history (confidence) | time to follow (model) | failed (model) | expectations |
|---|---|---:|---:|---|---|---:|---:|---|
""" + "\n".join(rows) + """

What it shows: a name resolved at start (an upstream `server` line without `resolve`, or
`proxy_pass` to a name) is a pin — every request after the move fails until someone reloads
nginx, and a reload ends it at once. A variable `proxy_pass` follows the name within the
resolver's `valid=`, but trades the pin for failures of its own: every request whose lookup
fails is a 502 (`dns-request-failure`), where a `resolve` upstream would have kept its peers.
`server … resolve` follows within valid + 1 s. `resolvelab lint` flags the first two setups
(`resolve-once`) at the line that pins the name; `resolvelab diagnose` names the failures
`stale-address` — decided from an answer history (the lab's, or `resolvelab dns watch` in
production), probable without one where the configuration pins the name. Where it does not
(a variable `proxy_pass`, `resolve`), the logs alone show refused connections to an address
that served before: `upstream-failure`, with the report saying it cannot tell a failed backend
from one that moved and is followed within `valid=`, and the command that would decide it.
"""
open(out, "w").write(text)
print(f"stale-address-table.sh: wrote {out}", file=sys.stderr)
EOF
rm -rf "$WORK"
