#!/usr/bin/env python3
"""The Python regex baseline of scripts/bench-diagnose.sh: parse every lab-format access-log line
with one compiled regex and count 502s and `no live upstreams` (last hop is a group name)."""
import re
import sys

LAB = re.compile(
    rb'^(\d+\.\d+) (\d{3}) "([^"]*)" "([^"]*)" (\S+) (\S+) (\d+) (\d+) "([^"]*)" "([^"]*)" "([^"]*)" (\S+)$'
)


def main(path):
    n = bad = e502 = nlu = 0
    with open(path, "rb") as f:
        for line in f:
            m = LAB.match(line.rstrip(b"\n"))
            if m is None:
                bad += 1
                continue
            n += 1
            if m.group(2) == b"502":
                e502 += 1
                last = m.group(3).rsplit(b", ", 1)[-1]
                if b":" not in last:
                    nlu += 1
    print(f"lines={n} malformed={bad} s502={e502} nlu={nlu}")


if __name__ == "__main__":
    main(sys.argv[1])
