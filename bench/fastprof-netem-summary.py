#!/usr/bin/env python3
"""Summary of a bench/fastprof-netem.sh run: FastProf runs against the exhaustive sweep's best.

Usage: fastprof-netem-summary.py OUT_DIR   (prints a table; writes runs.csv and summary.json)

Definitions (all throughputs are haul profile's aggregate_bps of one PROBE_S-second probe):
  E_sweep   the best grid point of the exhaustive sweep (a single probe, like the tuner's best)
  E_re      mean of the re-measures of that grid point's setting (alternated with the runs')
  own       the tuner's own best probe (single probe); own / E_sweep compares like with like
  hit       first probe whose throughput is >= GOAL x E_sweep (1-based), from the trace
  re        one re-measure of the tuner's chosen setting; re / E_re compares like with like
A run "reaches" the goal when hit <= MAX_PROBES; "holds" when re >= GOAL x E_re. A re-measure
that took > 1.5 x PROBE_S ("stalled") is flagged and counted separately, never dropped.
"""

import csv
import json
import statistics
import sys
from pathlib import Path


# A probe "stalled" when it took longer than this many times its nominal duration (the receiver
# drained late); reported, never dropped from the counts above.
STALL = 1.5


def duration(path: Path):
    try:
        return float(json.loads(path.read_text())["duration_s"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def main() -> None:
    out = Path(sys.argv[1])
    cfg = json.loads((out / "config.json").read_text())
    goal, max_probes = float(cfg["goal"]), int(cfg["max_probes"])

    grid = []
    with open(out / "sweep" / "exhaustive.csv") as f:
        rows = list(csv.reader(f))
    for r in rows[1:]:
        if len(r) >= 9 and r[-1] == "" and r[4]:
            grid.append((int(float(r[0])), int(float(r[1])), float(r[4])))
    errors = sum(1 for r in rows[1:] if len(r) >= 9 and r[-1] != "")
    e_block, e_buf, e_sweep = max(grid, key=lambda g: g[2])
    frac_goal = sum(1 for g in grid if g[2] >= goal * e_sweep) / len(grid)

    remeasure = {}
    with open(out / "remeasure.csv") as f:
        for r in csv.DictReader(f):
            remeasure[r["label"]] = float(r["aggregate_bps"]) if r["aggregate_bps"] else None
    e_res = [v for k, v in remeasure.items() if k.startswith("exhaustive-") and v is not None]
    e_re = statistics.mean(e_res) if e_res else float("nan")

    walls = {}
    runs_txt = out / "tune" / "runs.txt"
    if runs_txt.exists():
        for line in runs_txt.read_text().split("\n"):
            if line.strip():
                i, seed, rc, wall = line.split()
                walls[int(i)] = (int(seed), int(rc), float(wall))

    runs = []
    for i in sorted(walls):
        seed, rc, wall = walls[i]
        n = f"{i:02d}"
        row = {"run": i, "seed": seed, "exit": rc, "wall_s": wall, "probes": 0, "stop": None, "own_bps": None,
               "block": None, "buffer": None, "hit": None, "re_bps": None}
        try:
            t = json.loads((out / "tune" / f"run-{n}.json").read_text())
        except (OSError, ValueError):
            runs.append(row)
            continue
        probes = t["trace"]["probes"]
        row["probes"] = len(probes)
        row["stop"] = t["trace"].get("stop")
        if t.get("best"):
            row["own_bps"] = t["best"]["y"]
            row["block"] = t["best_params"].get("block")
            row["buffer"] = t["best_params"].get("buffer")
        row["hit"] = next((k + 1 for k, p in enumerate(probes) if p["y"] >= goal * e_sweep), None)
        row["first_bps"] = probes[0]["y"] if probes else None
        row["re_bps"] = remeasure.get(f"run-{n}")
        row["re_duration_s"] = duration(out / "remeasure" / f"run-{n}.json")
        runs.append(row)

    probe_s = float(cfg["probe_s"])

    def stalled(d):
        return d is not None and d > STALL * probe_s

    def ratio(a, b):
        return None if a is None or not b else a / b

    for r in runs:
        r["own_ratio"] = ratio(r["own_bps"], e_sweep)
        r["re_ratio"] = ratio(r["re_bps"], e_re)
        r["re_ratio_sweep"] = ratio(r["re_bps"], e_sweep)
        r["reached"] = r["hit"] is not None and r["hit"] <= max_probes
        r["holds"] = r["re_ratio"] is not None and r["re_ratio"] >= goal
        r["re_stalled"] = stalled(r.get("re_duration_s"))

    with open(out / "runs.csv", "w", newline="") as f:
        cols = ["run", "seed", "exit", "wall_s", "probes", "stop", "hit", "block", "buffer", "first_bps", "own_bps",
                "own_ratio", "re_bps", "re_duration_s", "re_ratio", "re_ratio_sweep", "reached", "holds", "re_stalled"]
        w = csv.DictWriter(f, fieldnames=cols, extrasaction="ignore")
        w.writeheader()
        w.writerows(runs)

    n = len(runs)
    probes = [r["probes"] for r in runs if r["probes"]]
    hits = [r["hit"] for r in runs if r["hit"] is not None]
    summary = {
        "config": cfg,
        "grid_points": len(grid),
        "grid_errors": errors,
        "grid_fraction_at_goal": frac_goal,
        "exhaustive_best": {"block": e_block, "buffer": e_buf, "sweep_bps": e_sweep, "remeasured_bps": e_res,
                            "remeasured_mean_bps": e_re},
        "runs": n,
        "reached": sum(r["reached"] for r in runs),
        "holds": sum(r["holds"] for r in runs),
        "remeasures_stalled": sum(r["re_stalled"] for r in runs),
        "holds_among_unstalled": sum(r["holds"] for r in runs if not r["re_stalled"]),
        "exhaustive_remeasures_stalled": sum(stalled(duration(out / "remeasure" / f"{k}.json")) for k in remeasure if k.startswith("exhaustive-")),
        "first_probe_at_goal": sum(1 for r in runs if r["hit"] == 1),
        "probes_mean": statistics.mean(probes) if probes else None,
        "probes_max": max(probes) if probes else None,
        "hit_mean": statistics.mean(hits) if hits else None,
        "hit_median": statistics.median(hits) if hits else None,
        "hit_max": max(hits) if hits else None,
        "own_ratio_min": min((r["own_ratio"] for r in runs if r["own_ratio"] is not None), default=None),
        "re_ratio_min": min((r["re_ratio"] for r in runs if r["re_ratio"] is not None), default=None),
        "re_ratio_median": statistics.median([r["re_ratio"] for r in runs if r["re_ratio"] is not None] or [0]),
        "tune_wall_s": sum(r["wall_s"] for r in runs),
        "per_run": runs,
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")

    mb = lambda v: "-" if v is None else f"{v / 1e6:.1f}"  # noqa: E731
    rt = lambda v: "-" if v is None else f"{v:.3f}"  # noqa: E731
    print(f"path: {cfg['rtt']} RTT, {cfg['rate']}, loss {cfg['loss']}, MTU {cfg['mtu']}; {cfg['transport']} "
          f"({cfg['congestion']}), {cfg['probe_s']} s probes; box block {cfg['block_range_payloads']} x "
          f"{int(cfg['packet']) - 16} B, buffer {cfg['buffer_range']}{' (exp)' if int(cfg['buffer_exp']) else ''}")
    print(f"exhaustive: {len(grid)} points ({errors} errors), best block {e_block} buffer {e_buf}: "
          f"E_sweep {mb(e_sweep)} Mbit/s; re-measured {len(e_res)}x: "
          f"{', '.join(mb(v) for v in e_res)} -> E_re {mb(e_re)} Mbit/s; "
          f"{100 * frac_goal:.0f}% of grid points >= {goal} E_sweep")
    print(f"{'run':>3} {'seed':>4} {'probes':>6} {'stop':>14} {'hit':>4} {'block':>6} {'buffer':>9} "
          f"{'own Mb/s':>8} {'own/Esw':>7} {'re Mb/s':>8} {'re/Ere':>7} {'re/Esw':>7}")
    for r in runs:
        print(f"{r['run']:>3} {r['seed']:>4} {r['probes']:>6} {str(r['stop']):>14} {r['hit'] or '-':>4} "
              f"{r['block'] or '-':>6} {r['buffer'] or '-':>9} {mb(r['own_bps']):>8} {rt(r['own_ratio']):>7} "
              f"{mb(r['re_bps']):>8} {rt(r['re_ratio']):>7} {rt(r['re_ratio_sweep']):>7}")
    print(f"reached >= {goal} E_sweep within <= {max_probes} probes: {summary['reached']}/{n}; "
          f"re-measured choice >= {goal} E_re: {summary['holds']}/{n}; "
          f"first (random) probe already >= {goal} E_sweep: {summary['first_probe_at_goal']}/{n}")
    print(f"re-measures that stalled (took > {STALL} x {probe_s:g} s): {summary['remeasures_stalled']} of the runs', "
          f"{summary['exhaustive_remeasures_stalled']} of the exhaustive best's; "
          f"unstalled re-measured choices >= {goal} E_re: {summary['holds_among_unstalled']}/{n - summary['remeasures_stalled']}")
    print(f"probes per run: mean {rt(summary['probes_mean'])}, max {summary['probes_max']}; "
          f"probes to reach: mean {rt(summary['hit_mean'])}, median {summary['hit_median']}, max {summary['hit_max']}; "
          f"tune wall time {summary['tune_wall_s']:.0f} s")


if __name__ == "__main__":
    main()
