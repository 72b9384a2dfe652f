#!/usr/bin/env python3
"""Calibrate the simulator's `first_pick_window_us` from real-nginx run directories.

Usage: scripts/calibrate-first-pick.py [--bin RESOLVELAB] RUNS_DIR [RUNS_DIR ...]

A first-pick generation race needs a request in a worker that does not resolve (nginx 1.28
resolves every name in worker 0) to sit between its snapshot and its first pick at the moment
the resolving worker changes the peer list. Where a change falls relative to those requests is
random at the microsecond scale, so each change catches one with probability ≈ rate × window,
and over many runs the number of races is Poisson with mean window × exposure, where the
exposure is Σ over peer-list changes of the other workers' request rate.

The exposure is measured with the model itself, so that the calibrated window means the same
thing the model does with it: each lab run is replayed on `--engine sim` exactly as
scripts/fidelity.sh does (the lab's scenario.toml, seed, /24, load start and send times), and
the run's `sim.json` gives `first_pick_exposure_per_us`, the races it expects per µs of window.

The maximum-likelihood window is races / exposure; its 95 % interval is the exact Poisson
interval of the race count over the same exposure. The races are the
`generation-race-first-pick` requests of each lab run's verdict.json. A run directory seen
twice (copied evidence sets) counts once.
"""
import json
import os
import re
import subprocess
import sys
import tempfile

# Exact Poisson 95 % interval of the mean for small counts (chi-square quantiles / 2).
POISSON_95 = {0: (0.0, 3.689), 1: (0.0253, 5.572), 2: (0.242, 7.225), 3: (0.619, 8.767),
              4: (1.090, 10.242), 5: (1.623, 11.668)}


def field(run_json, key):
    v = run_json.get(key)
    return None if v is None else str(v)


def model_exposure(binary, lab, out):
    """The model's first-pick exposure (per µs) for a replay of this lab run (None if it cannot
    run)."""
    run = json.load(open(os.path.join(lab, "run.json")))
    os.makedirs(out, exist_ok=True)
    scenario = os.path.join(out, "scenario.toml")
    with open(os.path.join(lab, "scenario.toml")) as src, open(scenario, "w") as dst:
        dst.writelines(line for line in src if not line.startswith("repeat = "))
    env = dict(os.environ)
    env["RESOLVELAB_SIM_EPOCH_US"] = field(run, "load_start_us") or ""
    load = os.path.join(lab, "load.jsonl")
    env["RESOLVELAB_SIM_ARRIVALS"] = load if os.path.exists(load) else ""
    args = [binary, "run", scenario, "--engine", "sim", "--seed", field(run, "seed") or "1",
            "--out", os.path.join(out, "runs"), "-q"]
    m = re.match(r"127\.(\d+)\.(\d+)\.0/24", run.get("net") or "")
    if m:
        args += ["--net", f"{m.group(1)}.{m.group(2)}"]
    subprocess.run(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    runs = os.path.join(out, "runs")
    for d in sorted(os.listdir(runs)) if os.path.isdir(runs) else []:
        p = os.path.join(runs, d, "sim.json")
        if os.path.exists(p):
            return json.load(open(p)).get("first_pick_exposure_per_us", 0.0)
    return None


def main(argv):
    binary = "target/release/resolvelab"
    if argv[:1] == ["--bin"] and len(argv) > 1:
        binary, argv = argv[1], argv[2:]
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if argv else 2
    if not os.access(binary, os.X_OK):
        print(f"calibrate-first-pick.py: {binary} is not an executable (build it or pass --bin)",
              file=sys.stderr)
        return 2
    seen, exposure, races, runs, skipped = set(), 0.0, 0, 0, 0
    with tempfile.TemporaryDirectory() as tmp:
        for parent in argv:
            for name in sorted(os.listdir(parent)):
                lab = os.path.join(parent, name)
                if name in seen or not all(os.path.exists(os.path.join(lab, f)) for f in
                                           ("run.json", "scenario.toml", "verdict.json")):
                    continue
                seen.add(name)
                e = model_exposure(binary, lab, os.path.join(tmp, name))
                if e is None:
                    skipped += 1
                    continue
                v = json.load(open(os.path.join(lab, "verdict.json")))
                n = sum(c["requests"] for c in v.get("classes", [])
                        if c["class"] == "generation-race-first-pick")
                exposure += e
                races += n
                runs += 1
                if n:
                    print(f"{lab}: {n} first-pick race(s), model exposure {e:.4f} per µs")
    if exposure == 0:
        print("no run with a peer-list change and another worker was found", file=sys.stderr)
        return 1
    lo, hi = POISSON_95.get(races, (races - 1.96 * races ** 0.5, races + 1.96 * races ** 0.5))
    print(f"runs: {runs} ({skipped} the model cannot run), exposure: {exposure:.4f} expected races "
          f"per µs of window, first-pick races: {races}")
    print(f"first_pick_window_us = {races / exposure:.2f} "
          f"(95 % interval {lo / exposure:.2f} … {hi / exposure:.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
