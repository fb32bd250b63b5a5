#!/usr/bin/env python3
"""Compares the tuned runs of several bench/retune-netem.sh result directories by build.

Usage: retune-netem-ab.py DIR...   (as bench/retune-netem-ab.sh leaves them)

The static runs of all directories are pooled: the new best is the median `steady` rate of
every static run with cross traffic, the old best that of every run without. Each tuned run is
then judged against the pooled new best with retune-netem-summary.py's own functions (t85: first
end of a 2 s window, wholly after the change, whose mean is >= 85% of the new best; held: the
same, staying so for the next 5 s), and the runs are grouped by the haul binary each directory's
config.json names. Each run's searches (the first and every re-tune's, counted from the converged
steps of its --json report) show whether a change made the tuner churn.
"""

import csv
import importlib.util
import json
import statistics
import sys
from pathlib import Path

# The definitions live in retune-netem-summary.py (a hyphenated name: loaded by path).
_spec = importlib.util.spec_from_file_location("retune_summary", Path(__file__).with_name("retune-netem-summary.py"))
summ = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(summ)


def main(dirs):
    if not dirs:
        sys.exit(__doc__)
    on, off, runs = [], [], {}
    for d in map(Path, dirs):
        summary = json.loads((d / "summary.json").read_text())
        for row in csv.DictReader((d / "static.csv").open()):
            (on if row["cross"] == "on" else off).append(float(row["steady_bps"]))
        for t in summary["tuned"]:
            runs.setdefault(summary["config"]["haul"], []).append((d, t))
    best = statistics.median(on)
    mb = lambda v: f"{v / 1e6:.0f}"
    print(f"pooled static runs: old best {mb(statistics.median(off))} Mb/s ({len(off)} runs), "
          f"new best {mb(best)} Mb/s ({len(on)} runs); 85% = {mb(summ.GOAL * best)}")
    for binary, rs in runs.items():
        print(binary)
        conv, pre, mid, whole, searches, first_ok, held_ok = [], [], [], [], [], 0, 0
        for d, t in rs:
            doc = json.loads((d / "tuned" / f"{t['name']}.json").read_text())
            ends, ok_at = summ.goal_windows(summ.clean(doc["samples"]), t["change_t"], best)
            first, held = summ.goal_times(ends, ok_at, t["change_t"])
            fmt = lambda v: "-" if v is None else f"{v:.1f}"
            # Searches that converged (the first one and every re-tune's), from the --json steps.
            searches.append(sum(1 for step in doc.get("tuning") or [] if step["converged"]))
            print(f"  {d.name} {t['name']}: first search {t['conv_t']:.1f} s (cc {t['conv_cc']}), "
                  f"{mb(t['pre_bps'])} Mb/s before the change, cc {t['cc_at_change']} at it; "
                  f">= 85% at {fmt(first)} s, held from {fmt(held)} s; [15, 30] s {mb(t['mean_15_30_bps'])} Mb/s "
                  f"= {t['mean_15_30_bps'] / best * 100:.0f}%; whole run {mb(t['throughput_bps'])} Mb/s; {searches[-1]} searches")
            conv.append(t["conv_t"])
            pre.append(t["pre_bps"])
            mid.append(t["mean_15_30_bps"])
            whole.append(t["throughput_bps"])
            first_ok += first is not None and first <= 15.0
            held_ok += held is not None and held <= 15.0
        med = statistics.median
        print(f"  medians: first search {med(conv):.1f} s ({sum(c <= 10.0 for c in conv)}/{len(rs)} within 10 s), "
              f"{mb(med(pre))} Mb/s before the change, [15, 30] s {mb(med(mid))} Mb/s ({med(mid) / best * 100:.0f}%), "
              f"whole run {mb(med(whole))} Mb/s; >= 85% within 15 s {first_ok}/{len(rs)}, held {held_ok}/{len(rs)}; "
              f"searches per run {med(searches):g} ({min(searches)}–{max(searches)})")


if __name__ == "__main__":
    main(sys.argv[1:])
