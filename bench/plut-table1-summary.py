#!/usr/bin/env python3
"""Table I of the PLUT paper from a plut-table1 run: mean and standard deviation of goodput
per transport and transfer size, from haul-bench's per-run CSV.

Usage: bench/plut-table1-summary.py bench/results/plut-table1-STAMP.csv
"""
import csv
import statistics
import sys
from collections import defaultdict

SIZES = ["100M", "500M", "1G", "2G"]
LABEL = {"100M": "100 MiB", "500M": "500 MiB", "1G": "1 GiB", "2G": "2 GiB"}


def main(path):
    runs = defaultdict(list)
    rtx = defaultdict(list)
    failed = defaultdict(int)
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            transport, _, size = row["contender"].rpartition("-")
            if row["value"] == "" or row.get("error"):
                failed[(transport, size)] += 1
                continue
            runs[(transport, size)].append(float(row["value"]))
            if row.get("retransmits"):
                rtx[(transport, size)].append(float(row["retransmits"]))
    transports = sorted({t for t, _ in runs} | {t for t, _ in failed}, key=lambda t: ("plut", "tcp-bbr", "udt").index(t) if t in ("plut", "tcp-bbr", "udt") else 9)
    if not transports:
        sys.exit(f"{path}: no runs")
    head = "| size | " + " | ".join(f"{t} Mbit/s (mean ± sd, n)" for t in transports) + " | " + " | ".join(f"plut / {t}" for t in transports if t != "plut") + " |"
    print(head)
    print("|" + "---|" * (1 + len(transports) + len([t for t in transports if t != "plut"])))
    for size in SIZES:
        cells = []
        means = {}
        for t in transports:
            v = runs.get((t, size), [])
            if not v:
                cells.append(f"— ({failed.get((t, size), 0)} failed)")
                continue
            m = statistics.mean(v)
            means[t] = m
            sd = statistics.stdev(v) if len(v) > 1 else 0.0
            extra = f", {failed[(t, size)]} failed" if failed.get((t, size)) else ""
            cells.append(f"{m:.1f} ± {sd:.1f} ({len(v)}{extra})")
        ratios = []
        for t in transports:
            if t == "plut":
                continue
            ratios.append(f"{means['plut'] / means[t]:.2f}×" if "plut" in means and means.get(t) else "—")
        print(f"| {LABEL.get(size, size)} | " + " | ".join(cells) + " | " + " | ".join(ratios) + " |")
    if rtx:
        print()
        print("Retransmissions (median per run; PLUT: datagrams, TCP: segments, UDT: packets):")
        print()
        print("| size | " + " | ".join(transports) + " |")
        print("|" + "---|" * (1 + len(transports)))
        for size in SIZES:
            print(f"| {LABEL.get(size, size)} | " + " | ".join(f"{statistics.median(rtx[(t, size)]):.0f}" if rtx.get((t, size)) else "—" for t in transports) + " |")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
