#!/usr/bin/env python3
"""Reads bench/drain-trace.sh's output directories: for each tuned run, every step down of the
concurrency (t: old -> new: seconds until no more sessions ran than the new level; None if the
level rose again first or the run ended), the run's throughput, and per build the median and
maximum of the step-down waits in the first 20 s (the search; later steps are re-tunes).

Usage: python3 bench/drain-trace.py DIR [DIR...]
"""
import glob
import gzip
import json
import re
import statistics
import sys

ANSI = re.compile(r"\x1b\[[0-9;]*m")


def lines(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        yield from f


def trace(path):
    """(t_s, level, sessions running) per engine trace line."""
    rows = []
    for line in lines(path):
        line = ANSI.sub("", line)
        if "sessions" not in line or "level=" not in line:
            continue
        t = float(re.search(r"t_s=([0-9.]+)", line).group(1))
        level = int(re.search(r"level=(\d+)", line).group(1))
        running = len(line.split("sessions ", 1)[1].split(" t_s=")[0].split())
        rows.append((t, level, running))
    return rows


def drains(rows):
    out, prev = [], None
    for i, (t, level, running) in enumerate(rows):
        if prev is not None and level < prev and running > level:
            end = None
            for t2, level2, running2 in rows[i:]:
                if level2 > level:
                    break
                if running2 <= level2:
                    end = round(t2 - t, 1)
                    break
            out.append((round(t, 1), prev, level, end))
        prev = level
    return out


def main():
    waits = {}
    for d in sys.argv[1:]:
        for log in sorted(glob.glob(d + "/*-r*.log*")):
            name = log.split("/")[-1].split(".log")[0]
            build = name.rsplit("-r", 1)[0]
            try:
                with open(f"{d}/{name}.json") as f:
                    mbps = json.load(f)["throughput_bps"] / 1e6
            except (OSError, ValueError, KeyError):
                mbps = float("nan")
            ds = drains(trace(log))
            print(f"{name:10} {mbps:6.1f} Mbit/s  " + " ".join(f"{t}:{a}->{b}:{w}" for t, a, b, w in ds))
            waits.setdefault(build, []).extend(w for t, _, _, w in ds if t < 20 and w is not None)
    for build, ws in sorted(waits.items()):
        if ws:
            print(f"{build}: {len(ws)} step-downs in the first 20 s, wait median {statistics.median(ws):.1f} s, max {max(ws):.1f} s")


if __name__ == "__main__":
    main()
