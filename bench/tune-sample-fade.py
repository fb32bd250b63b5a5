#!/usr/bin/env python3
"""How well a live search's sample predicted what its level went on to carry.

Usage: tune-sample-fade.py LABEL 'GLOB' [LABEL 'GLOB' ...]

Each GLOB matches `haul cp -r --tune --json` reports (the tuned runs of bench/retune-netem.sh
keep them as tuned/tuned-rN.json; haul-bench's `keep_stdout` as <stem>-stdout/*.txt). For the
first level each run's search settled on, it compares the search's own sample of that level with
the mean of the 200 ms readings 0.4-1.4 s after convergence (the driver's first watch window)
and 5-10 s after it, and prints the median and range of the relative differences per label.
Runs whose settled level was never sampled (every probe around it not in effect) are skipped.
"""

import glob
import json
import statistics
import sys


def first_settled(path):
    try:
        doc = json.load(open(path))
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict):
        return None
    steps = doc.get("tuning") or []
    if not steps or not isinstance(steps[0], dict) or "converged" not in steps[0]:
        return None
    samples = doc["samples"]
    sampled = {}
    for s in steps:
        if not s.get("not_in_effect"):
            sampled[s["concurrency"]] = s["estimate_bps"]
        if s["converged"]:
            cc, t = s["next"], s["t_s"]
            est = sampled.get(cc)
            if not est:
                return None

            def mean(a, b):
                xs = [x["bps"] for x in samples if t + a < x["t_s"] <= t + b + 1e-6]
                return statistics.mean(xs) if xs else None

            first, later = mean(0.4, 1.4), mean(5.0, 10.0)
            if first is None or later is None:
                return None
            return cc, est, first / est - 1, later / est - 1
    return None


def main(args):
    if len(args) < 2 or len(args) % 2:
        sys.exit(__doc__)
    for label, pattern in zip(args[::2], args[1::2]):
        rows = [r for f in sorted(glob.glob(pattern)) if (r := first_settled(f))]
        if not rows:
            print(f"{label}: no runs")
            continue
        pct = lambda xs: f"median {statistics.median(xs) * 100:+.0f}% ({min(xs) * 100:+.0f}% to {max(xs) * 100:+.0f}%)"
        print(f"{label}: {len(rows)} runs, levels {sorted(r[0] for r in rows)}")
        print(f"  first 1 s after convergence vs sample: {pct([r[2] for r in rows])}")
        print(f"  5-10 s after convergence vs sample:    {pct([r[3] for r in rows])}")


if __name__ == "__main__":
    main(sys.argv[1:])
