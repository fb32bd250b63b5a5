#!/usr/bin/env python3
"""Pool several WAN study runs: per threshold, the splits the chooser would take (predicted
gain over t), their average improvement over direct with a 95 % interval, the median, and the
share slower than direct.

    python3 bench/wan-study-pool.py bench/results/wan-study-A bench/results/wan-study-B ...

Reads each run's evaluations.csv (written by bench/wan-study-summary.py); failed pairs are left
out, as in the per-run summary.
"""
import csv
import math
import statistics
import sys


def main():
    runs = sys.argv[1:]
    if not runs:
        sys.exit(__doc__)
    rows = []
    for r in runs:
        with open(f"{r}/evaluations.csv") as f:
            for x in csv.DictReader(f):
                if x["failed"] != "True":
                    rows.append((float(x["pred_gain_pct"]), float(x["impr"])))
    print(f"{len(runs)} runs, {len(rows)} splits evaluated\n")
    print("| threshold | splits taken | average improvement (95 % CI) | median | slower than direct |")
    print("|---|---|---|---|---|")
    for t in (0, 25, 50, 100):
        v = [i for g, i in rows if g > t]
        if not v:
            print(f"| {t} % | 0 | – | – | – |")
            continue
        ci = 1.96 * statistics.stdev(v) / math.sqrt(len(v)) if len(v) > 1 else float("nan")
        slower = sum(1 for i in v if i < 0)
        print(
            f"| {t} % | {len(v)} | {statistics.fmean(v):+.1f} % (± {ci:.1f}) | "
            f"{statistics.median(v):+.1f} % | {100 * slower / len(v):.1f} % ({slower}) |"
        )


if __name__ == "__main__":
    main()
