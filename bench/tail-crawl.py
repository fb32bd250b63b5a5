#!/usr/bin/env python3
"""How long each tuned transfer crawled at its end, and what its tuner's first sample read.

Reads the `haul cp --json` summaries that `haul-bench run` keeps (`keep_stdout`, in
bench/results/<run>-stdout/<contender>-repN.txt) or that bench/drain-trace.sh writes
(<OUTDIR>/<name>-rN.json), and prints for each transfer:

- mid: the median of its throughput samples from 10 s in to 15 s before the end (its steady rate);
- crawl: seconds from the last sample at half of `mid` or more to the end of the transfer, i.e.
  how long the last files or pieces moved at under half the steady rate;
- first: the throughput the search's first sample reported for its first level (Mbit/s).

Then, per contender (the file name up to `-rep`/`-r`), the median and mean crawl and the median
first sample.

Usage: python3 bench/tail-crawl.py DIR [DIR ...]
"""
import glob
import json
import os
import re
import statistics as st
import sys


def contender(path):
    name = os.path.basename(path)
    return re.sub(r"-(rep|r)[0-9]+\.(txt|json)$", "", name)


def main(dirs):
    if not dirs:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    by = {}
    firsts = {}
    for d in dirs:
        for f in sorted(glob.glob(os.path.join(d, "*.txt")) + glob.glob(os.path.join(d, "*.json"))):
            try:
                j = json.load(open(f))
            except (ValueError, OSError):
                continue
            if "samples" not in j:
                continue
            s, T = j["samples"], j["duration_s"]
            steady = [x["bps"] for x in s if 10 < x["t_s"] < T - 15]
            if not steady:
                continue
            mid = st.median(steady)
            last = max((x["t_s"] for x in s if x["bps"] >= 0.5 * mid), default=0.0)
            crawl = T - last
            by.setdefault(contender(f), []).append(crawl)
            steps = j.get("tuning") or []
            first = steps[0]["estimate_bps"] / 1e6 if steps else None
            if first is not None:
                firsts.setdefault(contender(f), []).append(first)
            shown = f"{first:.0f}" if first is not None else "-"
            print(f"{f}: {T:.1f} s, {j['throughput_bps'] / 1e6:.1f} Mbit/s, mid {mid / 1e6:.0f}, crawl {crawl:.1f} s, pieces {j.get('pieces')}, first sample {shown}")
    for k, v in sorted(by.items()):
        fs = firsts.get(k, [])
        first = f", first sample median {st.median(fs):.0f} Mbit/s {sorted(round(x) for x in fs)}" if fs else ""
        print(f"{k}: n {len(v)}, crawl median {st.median(v):.2f} s, mean {st.mean(v):.2f} s, {sorted(round(x, 1) for x in v)}{first}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
