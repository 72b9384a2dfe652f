#!/usr/bin/env python3
"""How many of `watch`'s incidents (an --events file) are `diagnose`'s (its --format json) —
the same start, upstream, class, count and confidence — and how many of each quote an error
line. Used by scripts/bench-watch.sh; prints one table cell.

    scripts/incidents-agree.py diag.json events.jsonl
"""
import json
import sys


def outline(i):
    return (i["start_ms"], i["upstream"], i["class"], i["count"], i["confidence"])


def cites_error(i):
    return any("error" in e["at"].rsplit(":", 1)[0] for e in i["evidence"])


def main():
    batch = json.load(open(sys.argv[1]))["incidents"]
    watched = [
        e["incident"]
        for e in map(json.loads, filter(str.strip, open(sys.argv[2])))
        if e.get("event") == "incident"
    ]
    theirs = {outline(i) for i in batch}
    same = sum(outline(i) in theirs for i in watched)
    print(
        f"{same} of {len(watched)} are diagnose's ({len(batch)} in all); "
        f"{sum(map(cites_error, watched))} and {sum(map(cites_error, batch))} cite an error line"
    )


if __name__ == "__main__":
    main()
