#!/usr/bin/env python3
"""Summary of a bench/wan-study.sh run (the split-TCP overlay's WAN study, seed 002 §5.3-5.4,
issue 25).

Usage: wan-study-summary.py OUT_DIR
Prints markdown on stdout; writes OUT_DIR/summary.csv (one row per threshold and relay count),
OUT_DIR/pairs.csv (one row per ordered host pair the chooser split) and OUT_DIR/summary.json.

Definitions:
  goodput       file bytes * 8 / (client command start to exit), Mbit/s (thesis §5.2.2)
  predicted     `haul route --threshold 0 --json` at the destination just before the two copies:
                gain = (predicted chain - predicted direct) / predicted direct
  improvement   (split goodput - direct goodput) / direct goodput * 100, per back-to-back pair
                (one split, one direct, same file, alternating which went first)
  at t          the splits the chooser would take at threshold t: predicted gain > t (strictly,
                as haul_overlay::route decides); a split chosen because direct had no prediction
                (gain null) counts at every threshold, as haul takes it at every threshold
  slower        improvement < 0
  helps         on the paths where splitting helps: the ordered host pairs whose mean improvement
                over their evaluations at t is > 0
A pair where either copy failed is counted under `failed` and left out of the averages.
"""

import csv
import json
import math
import statistics
import sys
from collections import defaultdict
from pathlib import Path

THRESHOLDS = [0, 25, 50, 100]
THESIS = {  # Table 5.5 and §5.3.7 (D2D median, single split): avg / share slower
    0: "48 % avg, 33 % slower",
    50: "> 130 % avg, 13 % slower",
}


def fnum(x):
    try:
        return float(x)
    except (TypeError, ValueError):
        return None


def fmt(x, nd=1, pct=False):
    if x is None:
        return "–"
    if isinstance(x, float) and math.isinf(x):
        return "∞"
    return f"{x:.{nd}f}" + (" %" if pct else "")


def mean(v):
    return statistics.fmean(v) if v else None


def med(v):
    return statistics.median(v) if v else None


def ci95(v):
    return 1.96 * statistics.stdev(v) / math.sqrt(len(v)) if len(v) > 1 else None


def load(out: Path):
    rows = list(csv.DictReader(open(out / "runs.csv")))
    for r in rows:
        for k in ("bytes", "rc", "wall_s", "goodput_mbps", "pred_direct_mbps", "pred_split_mbps", "pred_gain"):
            r[k] = fnum(r.get(k))
    return rows


def pairs_of(rows):
    """The evaluation's back-to-back pairs: one dict per route query that split."""
    by = defaultdict(list)
    for r in rows:
        if r["phase"] == "eval":
            by[r["idx"]].append(r)
    out = []
    for idx, rs in by.items():
        split = [r for r in rs if r["route"] != "direct"]
        direct = [r for r in rs if r["route"] == "direct"]
        if not split or not direct:
            continue
        s, d = split[0], direct[0]
        g = s["pred_gain"]
        p = {
            "idx": int(idx),
            "round": s["round"],
            "pair": s["pair"],
            "src": s["src"],
            "dst": s["dst"],
            "route": s["route"],
            "relays": len(s["route"].split("+")),
            "first": "split" if s["order"] == "1" else "direct",
            "bytes": s["bytes"],
            "pred_gain_pct": math.inf if g is None else 100 * g,
            "pred_direct": s["pred_direct_mbps"],
            "pred_split": s["pred_split_mbps"],
            "split_mbps": s["goodput_mbps"],
            "direct_mbps": d["goodput_mbps"],
            "failed": s["rc"] != 0 or d["rc"] != 0,
            "split_rc": int(s["rc"]),
            "direct_rc": int(d["rc"]),
        }
        p["impr"] = None if p["failed"] else 100 * (p["split_mbps"] - p["direct_mbps"]) / p["direct_mbps"]
        out.append(p)
    return sorted(out, key=lambda p: p["idx"])


def stats_for(sel):
    ok = [p for p in sel if not p["failed"]]
    imp = [p["impr"] for p in ok]
    pg = [p["pred_gain_pct"] for p in ok if not math.isinf(p["pred_gain_pct"])]
    return {
        "n": len(ok),
        "failed": len(sel) - len(ok),
        "no_direct_pred": sum(1 for p in sel if math.isinf(p["pred_gain_pct"])),
        "avg_impr": mean(imp),
        "ci95": ci95(imp),
        "median_impr": med(imp),
        "slower_pct": 100 * sum(1 for x in imp if x < 0) / len(imp) if imp else None,
        "avg_pred": mean(pg),
        "median_pred": med(pg),
        "split_slower_than_pred_median": med([p["split_mbps"] / p["pred_split"] for p in ok if p["pred_split"]]),
        "direct_vs_pred_median": med([p["direct_mbps"] / p["pred_direct"] for p in ok if p["pred_direct"]]),
    }


def helps(sel):
    """Per ordered pair: the mean improvement over its evaluations; the pairs where it is > 0."""
    by = defaultdict(list)
    for p in sel:
        if not p["failed"]:
            by[p["pair"]].append(p["impr"])
    good = {k for k, v in by.items() if mean(v) > 0}
    bad = {k: len(v) for k, v in by.items() if mean(v) <= 0}
    on = [p for p in sel if p["pair"] in good]
    return good, bad, stats_for(on), len(by)


def main():
    out = Path(sys.argv[1])
    rows = load(out)
    cfg = json.loads((out / "config.json").read_text()) if (out / "config.json").exists() else {}
    hist = [r for r in rows if r["phase"] == "history"]
    routes = [r for r in rows if r["phase"] == "route"]
    pairs = pairs_of(rows)
    summary = {"config": cfg, "thresholds": {}, "history": {}}
    p = print

    p(f"# WAN study {cfg.get('started_utc', out.name)}\n")
    p(f"{cfg.get('haul_version', 'haul ?')} (git {cfg.get('git_head', '?')}), {cfg.get('nproc', '?')} cores, "
      f"kernel {cfg.get('kernel', '?')}; {cfg.get('streams', '?')} stream(s) per leg; files {cfg.get('sizes', '?')}.\n")

    # --- history phase
    okh = [r for r in hist if r["rc"] == 0]
    per_pair = defaultdict(int)
    for r in okh:
        per_pair[(r["src"], r["dst"])] += 1
    nodes = (cfg.get("hosts", "") + " " + cfg.get("relays", "")).split()
    allpairs = [(s, d) for s in nodes for d in nodes if s != d]
    counts = [per_pair.get(k, 0) for k in allpairs]
    h = {
        "transfers": len(hist),
        "ok": len(okh),
        "failed": len(hist) - len(okh),
        "pairs": len(allpairs),
        "pairs_ge5": sum(1 for c in counts if c >= 5),
        "min_per_pair": min(counts) if counts else 0,
        "median_per_pair": med(counts),
        "wall_s": (max(r["t_start"] + r["wall_s"] for r in map(lambda r: {**r, "t_start": float(r["t_start"])}, hist))
                   - min(float(r["t_start"]) for r in hist)) if hist else 0,
    }
    summary["history"] = h
    p("## History phase\n")
    p(f"{h['transfers']} transfers ({h['ok']} ok, {h['failed']} failed) in {h['wall_s'] / 60:.1f} min; "
      f"successful ones per ordered pair: min {h['min_per_pair']}, median {fmt(h['median_per_pair'], 0)}; "
      f"{h['pairs_ge5']} of {h['pairs']} ordered pairs have ≥ 5.\n")
    if nodes:
        gp = defaultdict(list)
        for r in okh:
            if r["bad"] != "1":
                gp[(r["src"], r["dst"])].append(r["goodput_mbps"])
        p("Median history goodput per ordered pair, Mbit/s, outside the bad period (row: source, column: destination):\n")
        p("| src \\ dst | " + " | ".join(nodes) + " |")
        p("|---|" + "---|" * len(nodes))
        for s in nodes:
            p(f"| {s} | " + " | ".join("·" if s == d else fmt(med(gp.get((s, d), [])), 1) for d in nodes) + " |")
        p("")
        bad_link = cfg.get("bad_link", "")
        bh = bad_link.split("-")[0] if bad_link else None
        if bh:
            inb = [r["goodput_mbps"] for r in okh if r["bad"] == "1" and bh in (r["src"], r["dst"])]
            outb = [r["goodput_mbps"] for r in okh if r["bad"] != "1" and bh in (r["src"], r["dst"])]
            fb = sum(1 for r in hist if r["rc"] != 0 and r["bad"] == "1" and bh in (r["src"], r["dst"]))
            p(f"Bad period ({bad_link} {cfg.get('bad_set', '')}): transfers to or from {bh} ran at median "
              f"{fmt(med(inb))} Mbit/s ({len(inb)} ok, {fb} failed) against {fmt(med(outb))} Mbit/s outside it "
              f"({len(outb)}).\n")
            summary["history"]["bad"] = {"median_in": med(inb), "n_in": len(inb), "failed_in": fb,
                                         "median_out": med(outb), "n_out": len(outb)}

    # --- route queries
    n_split = sum(1 for r in routes if r["route"] not in ("direct", "error"))
    n_err = sum(1 for r in routes if r["route"] == "error")
    p("## Evaluation phase\n")
    p(f"{len(routes)} route queries (`haul route --threshold 0`): {n_split} chose relays, "
      f"{len(routes) - n_split - n_err} direct, {n_err} failed. {len(pairs)} split/direct pairs ran back to back.\n")
    reasons = defaultdict(int)
    for r in routes:
        reasons[r.get("reason") or ""] += 1
    summary["route_reasons"] = dict(reasons)

    # --- thresholds
    p("### Per threshold (splits the chooser would take: predicted gain > t)\n")
    p("| threshold | relays | splits | failed | no direct pred. | avg pred. gain | median pred. | avg actual impr. | 95 % CI ± | median actual | slower than direct | split / its pred. (median) | direct / its pred. (median) |")
    p("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    csv_rows = []
    for t in THRESHOLDS:
        for nrel in ("all", 1, 2):
            sel = [q for q in pairs if q["pred_gain_pct"] > t and (nrel == "all" or q["relays"] == nrel)]
            if nrel != "all" and not sel:
                continue
            s = stats_for(sel)
            summary["thresholds"].setdefault(str(t), {})[str(nrel)] = s
            csv_rows.append({"threshold_pct": t, "relays": nrel, **s})
            p(f"| {t} % | {nrel} | {s['n']} | {s['failed']} | {s['no_direct_pred']} | {fmt(s['avg_pred'], 1, True)} | "
              f"{fmt(s['median_pred'], 1, True)} | **{fmt(s['avg_impr'], 1, True)}** | {fmt(s['ci95'], 1)} | "
              f"{fmt(s['median_impr'], 1, True)} | **{fmt(s['slower_pct'], 1, True)}** | "
              f"{fmt(s['split_slower_than_pred_median'], 2)} | {fmt(s['direct_vs_pred_median'], 2)} |")
    p("")
    p("Thesis (Table 5.5, §5.3.7; D2D median, one relay): t = 0: 48 % average, 33 % slower; t = 50 %: "
      "> 130 % average, 13 % slower. Issue goal at t = 50 %: average ≥ 130 %, ≤ 5 % slower.\n")

    p("### On the paths where splitting helps\n")
    p("| threshold | pairs with a split | pairs worse on average (their splits) | splits on helpful pairs | avg actual impr. there | median there | slower there |")
    p("|---|---|---|---|---|---|---|")
    for t in THRESHOLDS:
        sel = [q for q in pairs if q["pred_gain_pct"] > t]
        good, bad, s, npairs = helps(sel)
        summary["thresholds"].setdefault(str(t), {})["helps"] = {"pairs": npairs, "good": sorted(good), "bad": bad, **s}
        csv_rows.append({"threshold_pct": t, "relays": "helps", **s})
        p(f"| {t} % | {npairs} | {len(bad)} ({sum(bad.values())}) | {s['n']} | {fmt(s['avg_impr'], 1, True)} | "
          f"{fmt(s['median_impr'], 1, True)} | {fmt(s['slower_pct'], 1, True)} |")
    p("")

    # --- per pair
    by = defaultdict(list)
    for q in pairs:
        by[q["pair"]].append(q)
    p("### Per ordered host pair (every evaluated split)\n")
    p("| pair | splits | routes | avg pred. gain | avg actual impr. | slower | direct Mbit/s (median) | split Mbit/s (median) |")
    p("|---|---|---|---|---|---|---|---|")
    prow = []
    for k in sorted(by, key=lambda k: -(mean([q["impr"] for q in by[k] if not q["failed"]]) or -1e9)):
        qs = by[k]
        ok = [q for q in qs if not q["failed"]]
        pg = [q["pred_gain_pct"] for q in qs if not math.isinf(q["pred_gain_pct"])]
        r = {
            "pair": k,
            "splits": len(qs),
            "failed": len(qs) - len(ok),
            "routes": "/".join(sorted({q["route"] for q in qs})),
            "avg_pred_gain_pct": mean(pg),
            "avg_impr_pct": mean([q["impr"] for q in ok]),
            "slower": sum(1 for q in ok if q["impr"] < 0),
            "direct_mbps": med([q["direct_mbps"] for q in ok]),
            "split_mbps": med([q["split_mbps"] for q in ok]),
        }
        prow.append(r)
        p(f"| {k} | {r['splits']}{' (' + str(r['failed']) + ' failed)' if r['failed'] else ''} | {r['routes']} | "
          f"{fmt(r['avg_pred_gain_pct'], 0, True)} | {fmt(r['avg_impr_pct'], 0, True)} | {r['slower']} | "
          f"{fmt(r['direct_mbps'])} | {fmt(r['split_mbps'])} |")
    p("")
    order = defaultdict(list)
    for q in pairs:
        if not q["failed"]:
            order[q["first"]].append(q["impr"])
    p(f"Order effect: split first: mean improvement {fmt(mean(order['split']), 1, True)} ({len(order['split'])}); "
      f"direct first: {fmt(mean(order['direct']), 1, True)} ({len(order['direct'])}).\n")

    with open(out / "summary.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(csv_rows[0].keys()) if csv_rows else ["threshold_pct"])
        w.writeheader()
        for r in csv_rows:
            w.writerow(r)
    with open(out / "pairs.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(prow[0].keys()) if prow else ["pair"])
        w.writeheader()
        for r in prow:
            w.writerow(r)
    with open(out / "evaluations.csv", "w", newline="") as fh:
        keys = ["idx", "round", "pair", "route", "relays", "first", "bytes", "pred_direct", "pred_split",
                "pred_gain_pct", "direct_mbps", "split_mbps", "impr", "failed", "split_rc", "direct_rc"]
        w = csv.DictWriter(fh, fieldnames=keys, extrasaction="ignore")
        w.writeheader()
        for q in pairs:
            w.writerow(q)
    summary["pairs"] = prow
    (out / "summary.json").write_text(json.dumps(summary, indent=1, default=str))


if __name__ == "__main__":
    main()
