#!/usr/bin/env python3
"""Summary of a bench/retune-netem.sh run: live re-tuning after cross traffic starts mid-transfer.

Usage: retune-netem-summary.py OUT_DIR
Prints a table; writes summary.json, static.csv, samples.csv (every tuned run's 200 ms samples
with the concurrency in force) and retune.svg (throughput and concurrency vs time) into OUT_DIR.

Definitions (throughput in bit/s; t is transfer time, 0 = the engine started):
  steady     a static run's mean over its samples with WARM_S <= t <= tail start, where the tail
             starts when all but cc x pp files' bytes have moved (the file queue is empty and
             sessions drop out as their last batch ends): slow start and the draining tail are
             left out. The whole-run rate (bytes * 8 / duration) is reported next to it.
  old best   the highest per-level median of steady over the static runs without cross traffic
  new best   the same with the cross traffic on from the start
  change     transfer time of `haul netem set ... --cross-sources N` (midpoint of the command)
  conv       t of the first search step marked converged (the first search, from scratch)
  t85        first t >= change + 2 s at which the mean of the samples in (t - 2 s, t] is
             >= 0.85 x new best, minus change (the window lies wholly after the change, so the
             smallest possible value is 2 s)
  t85 held   the same, but the 2 s rolling mean must stay >= 0.85 x new best for the next
             HOLD_S = 5 s (None: never within the run)
  share      share of the 2 s windows ending in (change + 15 s, change + 30 s] that are >= 85%
  frac15-30  mean of the samples in (change + 15 s, change + 30 s] / new best
  pre        mean of the samples in (change - 15 s, change] / old best (how good the first
             search's choice was before the change)
  cross      cross traffic accepted into the b->a queue during the run after the change (netem
             stats cross_bytes), and the share of the configured rate it is; drops are counted too
"""

import csv
import datetime as dt
import json
import re
import statistics
import sys
from pathlib import Path

WARM_S = 3.0
TAIL_S = 3.0
GOAL = 0.85
ROLL_S = 2.0
HOLD_S = 5.0


def rate_bps(s: str) -> float:
    """'5mbit', '1gbit', '1Gb/s', '400Mb/s' -> bit/s."""
    m = re.fullmatch(r"\s*([0-9.]+)\s*([a-zA-Z]*)(/s)?\s*", s)
    if not m:
        raise ValueError(s)
    u = m.group(2).lower()
    u = {"b": "bit", "kb": "kbit", "mb": "mbit", "gb": "gbit", "tb": "tbit"}.get(u, u)
    mult = {"": 1, "bit": 1, "kbit": 1e3, "mbit": 1e6, "gbit": 1e9, "tbit": 1e12}
    return float(m.group(1)) * mult[u]


def ba_stats(path: Path) -> dict:
    v = json.loads(path.read_text())
    links = v if isinstance(v, list) else v.get("links", [v])
    for link in links:
        if link.get("name") == "a-b":
            return link["ba"]["stats"]
    return links[0]["ba"]["stats"]


def clean(samples: list) -> list:
    """The engine's samples with each byte count read as signed 64-bit (the engine's counter went
    backwards once, which wraps in its u64 subtraction) and the interval each covers."""
    out, prev = [], 0.0
    for x in samples:
        b = x["bytes"]
        if b >= 2**63:
            b -= 2**64
        d = x["t_s"] - prev
        out.append({"t_s": x["t_s"], "bytes": b, "dt": d, "bps": b * 8 / d if d > 0 else 0.0, "raw_bps": x["bps"]})
        prev = x["t_s"]
    return out


def tail_start(samples: list, total_bytes: float, tail_bytes: float) -> float:
    """Transfer time at which the bytes moved first reach total - tail_bytes: from then on the
    queue of files is empty and sessions drop out as their last batch ends."""
    done = 0
    for s in samples:
        done += s["bytes"]
        if done >= total_bytes - tail_bytes:
            return s["t_s"]
    return samples[-1]["t_s"] if samples else 0.0


def steady(samples: list, total_bytes: float, tail_bytes: float) -> float:
    """Mean of the samples with WARM_S <= t <= the tail's start (else <= T - TAIL_S)."""
    if not samples:
        return float("nan")
    cut = tail_start(samples, total_bytes, tail_bytes)
    xs = [s for s in samples if WARM_S <= s["t_s"] <= cut]
    if len(xs) < 10:
        xs = [s for s in samples if WARM_S <= s["t_s"] <= samples[-1]["t_s"] - TAIL_S]
    if len(xs) < 3:
        xs = samples
    return mean_rate(xs)


def mean_rate(xs: list) -> float:
    """Bytes over time of a run of samples (each covers dt before its t), bit/s."""
    d = sum(x["dt"] for x in xs)
    return sum(x["bytes"] for x in xs) * 8 / d if d > 0 else float("nan")


def window_mean(samples: list, lo: float, hi: float) -> float:
    return mean_rate([s for s in samples if lo < s["t_s"] <= hi + 1e-6])


def goal_windows(samples: list, change: float, best: float):
    """The ends of the 2 s rolling windows wholly after `change` (cleaned samples), and for each
    whether its mean reaches GOAL x `best`."""
    ends = [s["t_s"] for s in samples if s["t_s"] >= change + ROLL_S - 1e-9]
    return ends, {t: window_mean(samples, t - ROLL_S, t) >= GOAL * best for t in ends}


def goal_times(ends: list, ok_at: dict, change: float):
    """(t85, t85 held) after `change` from goal_windows(): the first window end that reaches the
    goal, and the first from which every window end in the next HOLD_S does (None: never)."""
    first = next((t - change for t in ends if ok_at[t]), None)
    for t in ends:
        span = [u for u in ends if t <= u <= t + HOLD_S + 1e-9]
        if span and span[-1] >= t + HOLD_S - 0.25 and all(ok_at[u] for u in span):
            return first, t - change
    return first, None


def log_concurrency(log: Path, start: float) -> list:
    """(t, cc) of every `tuner: concurrency N` line, t relative to the transfer start."""
    out = []
    for line in log.read_text(errors="replace").splitlines():
        line = re.sub(r"\x1b\[[0-9;]*m", "", line)
        m = re.match(r"(\S+)\s.*tuner: concurrency (\d+)", line)
        if not m:
            continue
        ts = m.group(1)
        t = dt.datetime.fromisoformat(ts.replace("Z", "+00:00")[:26] + ("+00:00" if ts.endswith("Z") else "")).timestamp()
        out.append((t - start, int(m.group(2))))
    return out


def fmt_mb(x: float) -> str:
    return f"{x / 1e6:.0f}"


def main() -> None:
    out = Path(sys.argv[1])
    cfg = json.loads((out / "config.json").read_text())
    cross_cfg_bps = cfg["cross_sources"] * rate_bps(cfg["cross_rate"]) * 0.5
    link_bps = rate_bps(cfg["rate"])
    dt_s = cfg["sample_ms"] / 1000.0

    # Static grid.
    static = []
    for f in sorted((out / "static").glob("static-*.json")):
        if f.name.endswith((".stats0.json", ".stats1.json")):
            continue
        m = re.match(r"static-c(\d+)-(on|off)-r(\d+)\.json", f.name)
        if not m:
            continue
        try:
            v = json.loads(f.read_text())
        except json.JSONDecodeError:
            continue
        v["samples"] = clean(v["samples"])
        cl = v.get("clusters") or []
        level = int(m.group(1))
        pp = max((c.get("pipelining", 1) for c in cl), default=1)
        tail_bytes = level * pp * v["bytes"] / max(v["files"], 1)
        row = {"level": level, "cross": m.group(2), "round": int(m.group(3)),
               "steady_bps": steady(v["samples"], v["bytes"], tail_bytes), "whole_bps": v["throughput_bps"],
               "duration_s": v["duration_s"], "files": v["files"],
               "tail_start_s": tail_start(v["samples"], v["bytes"], tail_bytes)}
        row["p"] = ",".join(str(c.get("parallelism", c.get("p", "?"))) for c in cl) if cl else ""
        row["pp"] = ",".join(str(c.get("pipelining", c.get("pp", "?"))) for c in cl) if cl else ""
        s0, s1 = f.with_name(f.stem + ".stats0.json"), f.with_name(f.stem + ".stats1.json")
        if s0.exists() and s1.exists():
            a, b = ba_stats(s0), ba_stats(s1)
            row["cross_bps"] = (b["cross_bytes"] - a["cross_bytes"]) * 8 / max(v["duration_s"], 1e-9)
            row["queue_drops"] = b["drop_queue"] - a["drop_queue"]
            row["loss_drops"] = b["drop_loss"] - a["drop_loss"]
        static.append(row)
    with open(out / "static.csv", "w", newline="") as fh:
        keys = ["level", "cross", "round", "files", "duration_s", "tail_start_s", "steady_bps", "whole_bps", "cross_bps", "queue_drops", "loss_drops", "p", "pp"]
        w = csv.DictWriter(fh, fieldnames=keys, extrasaction="ignore")
        w.writeheader()
        for r in sorted(static, key=lambda r: (r["cross"], r["level"], r["round"])):
            w.writerow(r)

    grid = {}
    for r in static:
        grid.setdefault((r["cross"], r["level"]), []).append(r)
    med = {k: statistics.median(x["steady_bps"] for x in rs) for k, rs in grid.items()}
    best = {}
    for c in ("off", "on"):
        ks = [k for k in med if k[0] == c]
        if ks:
            k = max(ks, key=lambda k: med[k])
            best[c] = (k[1], med[k])
    old_best = best.get("off", (None, float("nan")))
    new_best = best.get("on", (None, float("nan")))

    lines = []
    p = lines.append
    p(f"retune-netem: {cfg['rtt']} RTT, {cfg['rate']}, loss {cfg['loss']}, MTU {cfg['mtu']}, {cfg['congestion']}; "
      f"{cfg['tuned_files']} x {cfg['file_size'] / 2**20:.0f} MiB per tuned run; cross traffic {cfg['cross_sources']} "
      f"Pareto on/off sources x {cfg['cross_rate']} (on {cfg['cross_on']}, off {cfg['cross_off']}) = "
      f"{cross_cfg_bps / 1e6:.0f} Mb/s configured mean on b->a at t = {cfg['change_s']} s")
    p("")
    levels = sorted({r["level"] for r in static})
    if levels:
        p("Static runs (haul cp -r --clusters mc -c N; steady Mb/s per round, median; whole-run median in brackets)")
        p(f"{'cc':>4} | {'no cross':<34} | {'cross on from the start':<34}")
        for l in levels:
            cells = []
            for c in ("off", "on"):
                rs = sorted(grid.get((c, l), []), key=lambda r: r["round"])
                if not rs:
                    cells.append(f"{'-':<34}")
                    continue
                per = " ".join(fmt_mb(r["steady_bps"]) for r in rs)
                whole = statistics.median(r["whole_bps"] for r in rs)
                cells.append(f"{per:<16} med {fmt_mb(med[(c, l)]):>4} ({fmt_mb(whole):>4})".ljust(34))
            p(f"{l:>4} | {cells[0]} | {cells[1]}")
        ps = sorted({r["p"] for r in static if r.get("p")})
        pps = sorted({r["pp"] for r in static if r.get("pp")})
        p(f"clusters' parallelism p = {'/'.join(ps) or '?'}, pipelining pp = {'/'.join(pps) or '?'}")
        cr = [r["cross_bps"] for r in static if r["cross"] == "on" and "cross_bps" in r]
        if cr:
            p(f"cross traffic accepted during static 'on' runs: median {fmt_mb(statistics.median(cr))} Mb/s "
              f"(min {fmt_mb(min(cr))}, max {fmt_mb(max(cr))}) = {statistics.median(cr) / link_bps:.0%} of the link")
        p(f"old best (no cross): {fmt_mb(old_best[1])} Mb/s at cc {old_best[0]}; "
          f"new best (cross on): {fmt_mb(new_best[1])} Mb/s at cc {new_best[0]}; 85% of new best = {fmt_mb(GOAL * new_best[1])} Mb/s")
        p("")

    # Tuned runs.
    runs = []
    sample_rows = []
    for f in sorted((out / "tuned").glob("tuned-r*.json")):
        if not re.fullmatch(r"tuned-r\d+\.json", f.name):
            continue
        name = f.stem
        meta = json.loads((out / "tuned" / f"{name}.meta.json").read_text())
        try:
            v = json.loads(f.read_text())
        except json.JSONDecodeError:
            runs.append({"name": name, "error": f"no JSON (exit {meta.get('rc')})"})
            continue
        v["samples"] = clean(v["samples"])
        samples, steps = v["samples"], v["tuning"]
        start = meta["transfer_start"]
        change = None
        if meta.get("change_begin") and start:
            change = (meta["change_begin"] + meta["change_end"]) / 2 - start
        ccs = log_concurrency(out / "tuned" / f"{name}.log", start) if start else []
        # Searches: a new one starts at the first step and after every converged step.
        searches, cur = [], []
        for s in steps:
            cur.append(s)
            if s["converged"]:
                searches.append(cur)
                cur = []
        if cur:
            searches.append(cur)
        # Start time of each search: its first step's t minus its readings and the settle sample;
        # the log's set_concurrency times are exact where they exist.
        def search_start(i: int) -> float:
            if i == 0:
                return 0.0
            first = searches[i][0]
            prev_end = searches[i - 1][-1]["t_s"]
            cands = [t for t, _ in ccs if prev_end < t <= first["t_s"]]
            return cands[0] if cands else first["t_s"] - (first["readings"] + 1) * dt_s
        info = []
        for i, sr in enumerate(searches):
            conv = sr[-1] if sr[-1]["converged"] else None
            info.append({"start": search_start(i), "steps": len(sr),
                         "conv_t": conv["t_s"] if conv else None, "cc": conv["next"] if conv else None,
                         "path": [s["concurrency"] for s in sr]})
        r = {"name": name, "duration_s": v["duration_s"], "throughput_bps": v["throughput_bps"], "files": v["files"],
             "change_t": change, "searches": info, "steps": len(steps)}
        r["conv_t"] = info[0]["conv_t"] if info else None
        r["conv_cc"] = info[0]["cc"] if info else None
        if change is not None:
            r["retunes_before_change"] = sum(1 for s in info[1:] if s["start"] < change)
            after = [s for s in info if s["start"] >= change]
            r["retunes_after_change"] = len(after)
            if after:
                a = after[0]
                r["first_retune_after_s"] = a["start"] - change
                r["first_retune_conv_after_s"] = (a["conv_t"] - change) if a["conv_t"] is not None else None
                r["first_retune_cc"] = a["cc"]
                r["first_retune_path"] = a["path"]
            # cc in force just before the change, and at change + 15 s / + 30 s.
            def cc_at(t: float):
                c = None
                for tt, cc in ccs:
                    if tt <= t:
                        c = cc
                return c
            r["cc_at_change"] = cc_at(change)
            r["cc_at_change_15"] = cc_at(change + 15)
            r["cc_at_change_30"] = cc_at(change + 30)
            ends, ok_at = goal_windows(samples, change, new_best[1])
            r["t85_s"], r["t85_hold_s"] = goal_times(ends, ok_at, change)
            win = [t for t in ends if change + 15 < t <= change + 30 + 1e-6]
            r["share_85_15_30"] = sum(ok_at[t] for t in win) / len(win) if win else None
            r["frac_15_30"] = window_mean(samples, change + 15, change + 30) / new_best[1]
            r["mean_15_30_bps"] = window_mean(samples, change + 15, change + 30)
            r["pre_frac"] = window_mean(samples, change - 15, change) / old_best[1]
            r["pre_bps"] = window_mean(samples, change - 15, change)
            r["covers_30s"] = samples[-1]["t_s"] >= change + 30 if samples else False
            cl = v.get("clusters") or []
            pp = max((c.get("pipelining", 1) for c in cl), default=1)
            cc_end = ccs[-1][1] if ccs else 32
            r["tail_start_s"] = tail_start(samples, v["bytes"], cc_end * pp * v["bytes"] / max(v["files"], 1))
            r["window_before_tail"] = r["tail_start_s"] >= change + 30
            s1, s2 = out / "tuned" / f"{name}.stats1.json", out / "tuned" / f"{name}.stats2.json"
            if s1.exists() and s2.exists():
                a, b = ba_stats(s1), ba_stats(s2)
                span = meta["end"] - meta["change_end"]
                r["cross_bps"] = (b["cross_bytes"] - a["cross_bytes"]) * 8 / span
                r["cross_drop_pkts"] = b["cross_drops"] - a["cross_drops"]
                r["cross_span_s"] = span
        runs.append(r)
        for s in samples:
            c = None
            for tt, cc in ccs:
                if tt <= s["t_s"]:
                    c = cc
            sample_rows.append({"run": name, "t_s": f"{s['t_s']:.3f}", "bytes": s["bytes"], "bps": f"{s['bps']:.0f}", "concurrency": c if c is not None else "",
                                "cross_on": int(change is not None and s["t_s"] > change)})
        r["_samples"] = samples
        r["_ccs"] = ccs

    with open(out / "samples.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=["run", "t_s", "bytes", "bps", "concurrency", "cross_on"])
        w.writeheader()
        w.writerows(sample_rows)

    def f1(x, nd=1, suffix=""):
        return "-" if x is None else f"{x:.{nd}f}{suffix}"

    if runs:
        p("Tuned runs (haul cp -r --tune --sample-ms 200, fresh history; cross traffic on at 'change')")
        p(f"{'run':<9} {'conv s':>6} {'cc':>3} {'pre%old':>7} {'retunes<chg':>11} {'change s':>8} {'cross Mb/s':>10} "
          f"{'retune +s':>9} {'settled +s':>10} {'cc':>3} {'t85 s':>6} {'held':>5} {'share':>5} {'15-30 %new':>10} {'Mb/s':>5} {'end s':>6}")
        for r in runs:
            if "error" in r:
                p(f"{r['name']:<9} {r['error']}")
                continue
            p(f"{r['name']:<9} {f1(r['conv_t']):>6} {r['conv_cc'] or '-':>3} {f1(100 * r.get('pre_frac', float('nan')), 0):>7} "
              f"{r.get('retunes_before_change', '-'):>11} {f1(r['change_t'], 2):>8} {f1((r.get('cross_bps') or 0) / 1e6, 0):>10} "
              f"{f1(r.get('first_retune_after_s')):>9} {f1(r.get('first_retune_conv_after_s')):>10} {r.get('first_retune_cc') or '-':>3} "
              f"{f1(r.get('t85_s')):>6} {f1(r.get('t85_hold_s')):>5} {f1(None if r.get('share_85_15_30') is None else 100 * r['share_85_15_30'], 0, '%'):>5} {f1(100 * r.get('frac_15_30', float('nan')), 0):>10} {fmt_mb(r.get('mean_15_30_bps', float('nan'))):>5} "
              f"{f1(r['duration_s']):>6}")
        p("")
        for r in runs:
            if "error" in r:
                continue
            p(f"{r['name']}: searches " + "; ".join(
                f"from {s['start']:.1f} s: {'->'.join(map(str, s['path']))} => cc {s['cc']} at {f1(s['conv_t'])} s" for s in r["searches"]))
        ok = [r for r in runs if "error" not in r and r.get("change_t") is not None]
        if ok:
            conv = [r["conv_t"] for r in ok if r["conv_t"] is not None]
            t85 = [r["t85_s"] for r in ok]
            p("")
            p(f"Fast convergence (first search settles within 10 s): {sum(1 for c in conv if round(c, 1) <= 10)}/{len(ok)} runs (t rounded to 0.1 s) "
              f"(times {', '.join(f1(c) for c in conv)} s)")
            p(f"Re-tuning (>= 85% of the new best within 15 s of the change, 2 s rolling): "
              f"{sum(1 for t in t85 if t is not None and t <= 15)}/{len(ok)} runs first reach it (t85 {', '.join(f1(t) for t in t85)} s); "
              f"{sum(1 for r in ok if r['t85_hold_s'] is not None and r['t85_hold_s'] <= 15)}/{len(ok)} reach it and hold it {HOLD_S:.0f} s "
              f"(t85 held {', '.join(f1(r['t85_hold_s']) for r in ok)} s); "
              f"mean over [15 s, 30 s] after the change: {', '.join(f1(100 * r['frac_15_30'], 0) + '%' for r in ok)} of the new best")
            cb = [r["cross_bps"] for r in ok if "cross_bps" in r]
            if cb:
                p(f"Cross traffic accepted after the change: {', '.join(fmt_mb(c) for c in cb)} Mb/s "
                  f"({', '.join(f'{c / link_bps:.0%}' for c in cb)} of the link; configured mean {fmt_mb(cross_cfg_bps)} Mb/s); "
                  f"cross packets dropped by the full queue: {', '.join(str(r.get('cross_drop_pkts', '-')) for r in ok)}")
            if not all(r.get("window_before_tail") for r in ok):
                p("WARNING: in some run the draining tail (files queue empty) starts before change + 30 s: "
                  + ", ".join(f"{r['name']} tail at {r['tail_start_s']:.1f} s" for r in ok))
            if not all(r["covers_30s"] for r in ok):
                p("WARNING: a run ended before change + 30 s; its [15, 30] mean is over fewer samples")

    text = "\n".join(lines)
    print(text)
    summary = {"config": cfg, "definitions": {"warm_s": WARM_S, "tail_s": TAIL_S, "goal": GOAL, "roll_s": ROLL_S},
               "old_best": {"cc": old_best[0], "bps": old_best[1]}, "new_best": {"cc": new_best[0], "bps": new_best[1]},
               "static_median_bps": {f"{c}-{l}": m for (c, l), m in sorted(med.items())},
               "tuned": [{k: v for k, v in r.items() if not k.startswith("_")} for r in runs]}
    (out / "summary.json").write_text(json.dumps(summary, indent=1, default=str))
    svg(out / "retune.svg", [r for r in runs if "error" not in r], old_best[1], new_best[1], cfg)


def svg(path: Path, runs: list, old_best: float, new_best: float, cfg: dict) -> None:
    """Hand-written SVG: one panel per tuned run, throughput (left axis) and concurrency (right)."""
    if not runs:
        return
    W, H, ml, mr, mt, mb = 900, 230, 60, 50, 28, 32
    tmax = max(r["_samples"][-1]["t_s"] for r in runs if r["_samples"])
    ymax = max(max(s["bps"] for s in r["_samples"]) for r in runs if r["_samples"])
    ymax = max(ymax, old_best if old_best == old_best else 0) * 1.05
    ccmax = 32
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H * len(runs) + 30}" font-family="sans-serif" font-size="11">',
             '<rect width="100%" height="100%" fill="white"/>',
             f'<text x="{ml}" y="16" font-size="13">haul cp --tune on {cfg["rtt"]} / {cfg["rate"]} / loss {cfg["loss"]}: '
             f'throughput (grey 200 ms, blue 2 s rolling), concurrency (orange, right axis); cross traffic on at the red line</text>']
    for i, r in enumerate(runs):
        y0 = 30 + i * H
        pw, ph = W - ml - mr, H - mt - mb
        X = lambda t: ml + pw * t / tmax
        Y = lambda b: y0 + mt + ph * (1 - b / ymax)
        C = lambda c: y0 + mt + ph * (1 - c / ccmax)
        parts.append(f'<rect x="{ml}" y="{y0 + mt}" width="{pw}" height="{ph}" fill="none" stroke="#888"/>')
        parts.append(f'<text x="{ml}" y="{y0 + mt - 6}">{r["name"]}: first search settled at {r["conv_t"]} s (cc {r["conv_cc"]}); '
                     f't85 = {r.get("t85_s")} s; [15,30] s mean = {100 * r.get("frac_15_30", 0):.0f}% of the new best</text>')
        step = 200e6 if ymax > 600e6 else 100e6
        b = 0.0
        while b <= ymax:
            parts.append(f'<line x1="{ml}" x2="{ml + pw}" y1="{Y(b):.1f}" y2="{Y(b):.1f}" stroke="#eee"/>'
                         f'<text x="{ml - 4}" y="{Y(b) + 4:.1f}" text-anchor="end">{b / 1e6:.0f}</text>')
            b += step
        for c in (0, 8, 16, 24, 32):
            parts.append(f'<text x="{ml + pw + 4}" y="{C(c) + 4:.1f}" fill="#d62">{c}</text>')
        t = 0
        while t <= tmax:
            parts.append(f'<text x="{X(t):.1f}" y="{y0 + mt + ph + 14}" text-anchor="middle">{t}</text>')
            t += 10
        parts.append(f'<text x="{ml - 44}" y="{y0 + mt + ph / 2}" transform="rotate(-90 {ml - 44} {y0 + mt + ph / 2})" text-anchor="middle">Mb/s</text>')
        if i == len(runs) - 1:
            parts.append(f'<text x="{ml + pw / 2}" y="{y0 + H - 4}" text-anchor="middle">transfer time (s)</text>')
        for val, col, lab in ((old_best, "#393", "old best"), (new_best, "#939", "new best"), (0.85 * new_best, "#c6c", "85% new best")):
            if val == val:
                parts.append(f'<line x1="{ml}" x2="{ml + pw}" y1="{Y(val):.1f}" y2="{Y(val):.1f}" stroke="{col}" stroke-dasharray="4 3"/>'
                             f'<text x="{ml + pw - 4}" y="{Y(val) - 3:.1f}" text-anchor="end" fill="{col}">{lab}</text>')
        s = r["_samples"]
        parts.append('<polyline fill="none" stroke="#bbb" stroke-width="0.8" points="' +
                     " ".join(f"{X(x['t_s']):.1f},{Y(x['bps']):.1f}" for x in s) + '"/>')
        roll = []
        for k, x in enumerate(s):
            w = [y["bps"] for y in s[max(0, k - 9):k + 1]]
            roll.append((x["t_s"], sum(w) / len(w)))
        parts.append('<polyline fill="none" stroke="#26c" stroke-width="1.5" points="' +
                     " ".join(f"{X(a):.1f},{Y(b):.1f}" for a, b in roll) + '"/>')
        pts, last = [], None
        for tt, cc in r["_ccs"]:
            if last is not None:
                pts.append(f"{X(max(tt, 0)):.1f},{C(last):.1f}")
            pts.append(f"{X(max(tt, 0)):.1f},{C(cc):.1f}")
            last = cc
        if last is not None:
            pts.append(f"{X(s[-1]['t_s']):.1f},{C(last):.1f}")
            parts.append(f'<polyline fill="none" stroke="#d62" stroke-width="1.2" points="{" ".join(pts)}"/>')
        if r.get("change_t") is not None:
            xc = X(r["change_t"])
            parts.append(f'<line x1="{xc:.1f}" x2="{xc:.1f}" y1="{y0 + mt}" y2="{y0 + mt + ph}" stroke="red"/>')
            for d in (15, 30):
                xd = X(r["change_t"] + d)
                parts.append(f'<line x1="{xd:.1f}" x2="{xd:.1f}" y1="{y0 + mt}" y2="{y0 + mt + ph}" stroke="red" stroke-dasharray="2 3"/>')
    parts.append("</svg>")
    path.write_text("\n".join(parts))


if __name__ == "__main__":
    main()
