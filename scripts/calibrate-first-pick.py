#!/usr/bin/env python3
"""Calibrate the simulator's `first_pick_window_us` from real-nginx run directories.

Usage: scripts/calibrate-first-pick.py RUNS_DIR [RUNS_DIR ...]

A first-pick generation race needs a request in a worker that does not resolve (nginx 1.28
resolves every name in worker 0) to sit between its snapshot and its first pick at the moment
the resolving worker changes the peer list. Where a change falls relative to those requests is
random at the microsecond scale, so each change catches one with probability ≈ rate × window.
Over many runs the number of races is Poisson with mean window × exposure, where

    exposure = Σ over peer-list changes (`"changed":true` answers in dns.jsonl) of the request
               rate around the change (requests sent within ±0.5 s, per second) × (workers−1)/workers

(the share of requests the other workers take when client connections are spread evenly). The
maximum-likelihood window is races / exposure; its 95 % interval is the exact Poisson interval
of the race count over the same exposure. Runs with one worker (no other worker to race) or
without `resolve` are skipped; a run directory seen twice (copied evidence sets) counts once.
The races are the `generation-race-first-pick` requests of each run's verdict.json.
"""
import bisect
import gzip
import json
import os
import re
import sys

# Exact Poisson 95 % interval of the mean for small counts (chi-square quantiles / 2).
POISSON_95 = {0: (0.0, 3.689), 1: (0.0253, 5.572), 2: (0.242, 7.225), 3: (0.619, 8.767),
              4: (1.090, 10.242), 5: (1.623, 11.668)}


def opened(path):
    if os.path.exists(path):
        return open(path)
    if os.path.exists(path + ".gz"):
        return gzip.open(path + ".gz", "rt")
    return None


def main(dirs):
    if not dirs:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    seen, exposure, races, runs = set(), 0.0, 0, 0
    for parent in dirs:
        for name in sorted(os.listdir(parent)):
            d = os.path.join(parent, name)
            if name in seen or not os.path.isdir(d):
                continue
            conf, dns, load = (opened(os.path.join(d, f)) for f in ("nginx.conf", "dns.jsonl", "load.jsonl"))
            verdict = os.path.join(d, "verdict.json")
            if not (conf and dns and load and os.path.exists(verdict)):
                continue
            text = conf.read()
            m = re.search(r"worker_processes\s+(\d+)", text)
            workers = int(m.group(1)) if m else 1
            if " resolve" not in text or workers < 2:
                continue
            seen.add(name)
            changes = [json.loads(line)["t_us"] for line in dns if '"changed":true' in line]
            sent = sorted(r["sent_us"] for r in map(json.loads, load) if r.get("sent_us"))
            e = sum(bisect.bisect_right(sent, t + 500_000) - bisect.bisect_left(sent, t - 500_000)
                    for t in changes) * (workers - 1) / workers
            v = json.load(open(verdict))
            n = sum(c["requests"] for c in v.get("classes", []) if c["class"] == "generation-race-first-pick")
            exposure += e
            races += n
            runs += 1
            if n:
                print(f"{d}: {n} first-pick race(s), exposure {e:.0f}")
    if exposure == 0:
        print("no run with a peer-list change, two workers and a load was found", file=sys.stderr)
        return 1
    lo, hi = POISSON_95.get(races, (races - 1.96 * races ** 0.5, races + 1.96 * races ** 0.5))
    print(f"runs: {runs}, peer-list-change exposure: {exposure:.0f} requests/s × changes, "
          f"first-pick races: {races}")
    print(f"first_pick_window_us = {races / exposure * 1e6:.2f} "
          f"(95 % interval {lo / exposure * 1e6:.2f} … {hi / exposure * 1e6:.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
