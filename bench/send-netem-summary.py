#!/usr/bin/env python3
"""Summary of a bench/send-netem.sh run: `haul send` against fixed choices on emulated paths.

Usage: send-netem-summary.py OUT_DIR
Prints Markdown on stdout and writes OUT_DIR/summary.md and OUT_DIR/summary.csv.

Definitions:
  wall        seconds from the client's start to its exit, as the driver measured it (for
              `haul send`: discovery, probing, planning, transfer and verification)
  goodput     bytes of the data set * 8 / wall, Mbit/s
  timeout     a run killed at the driver's TIMEOUT_S: its wall counts as >= TIMEOUT_S (its
              goodput as < size / TIMEOUT_S); a median that lands on such a run is a bound (>=, <)
  failed      a run that exited non-zero before its time was up, or whose bytes on disk differ
              from the data set's: counted, left out of the medians
  best fixed  of cp-default, cp-tune, cp-plut and cp-relay (those run), the one with the lowest
              median wall time
  ratio       best fixed's median wall / this row's median wall (>= 0.90 is the goal for
              send-cold, >= 0.95 for send-warm); vs guc: globus-url-copy's median wall / this
              row's (>= 1.00: never slower than globus-url-copy)
"""

import csv
import gzip
import json
import statistics
import sys
from pathlib import Path

ORDER = ["send-cold", "send-warm", "send-deadline", "cp-default", "cp-tune", "cp-plut", "cp-relay", "guc"]
FIXED = ["cp-default", "cp-tune", "cp-plut", "cp-relay"]
LABEL = {
    "send-cold": "`haul send`, empty history",
    "send-warm": "`haul send`, warm history",
    "send-deadline": "`haul send --deadline`, empty history",
    "cp-default": "`haul cp -r` (defaults)",
    "cp-tune": "`haul cp -r --tune`",
    "cp-plut": "`haul cp -r --transport plut`",
    "cp-relay": "`haul cp -r` through the relay in b",
    "guc": "`globus-url-copy -fast -cc 4 -p 4 -pp`",
}
GOAL = {"send-cold": 0.90, "send-warm": 0.95}


class Val:
    """A number that may be only a bound: kind '=' exact, '>=' lower bound, '<=' upper bound."""

    def __init__(self, x, kind="="):
        self.x, self.kind = x, kind

    def fmt(self, nd=1):
        if self.x is None:
            return "–"
        p = {"=": "", ">=": "≥", "<=": "≤", "<": "<", ">": ">"}[self.kind]
        return f"{p}{self.x:.{nd}f}"

    def csv(self, nd=3):
        if self.x is None:
            return ""
        p = {"=": "", ">=": ">=", "<=": "<=", "<": "<", ">": ">"}[self.kind]
        return f"{p}{self.x:.{nd}f}"


def median_censored(vals):
    """vals: (x, censored) with censored x a lower bound. The median and whether it is a bound."""
    if not vals:
        return Val(None)
    v = sorted(vals, key=lambda t: (t[0], t[1]))
    n = len(v)
    mid = v[(n - 1) // 2: n // 2 + 1]
    x = sum(t[0] for t in mid) / len(mid)
    return Val(x, ">=" if any(t[1] for t in mid) else "=")


def ratio(num: Val, den: Val):
    """num / den where both may be lower bounds (walls)."""
    if num.x is None or den.x is None or den.x <= 0:
        return Val(None)
    r = num.x / den.x
    a, b = num.kind, den.kind
    if a == "=" and b == "=":
        return Val(r)
    if a == ">=" and b == "=":
        return Val(r, ">=")
    if a == "=" and b == ">=":
        return Val(r, "<=")
    return Val(None)  # both bounds: unknown


def verdict(r: Val, goal):
    if r.x is None:
        return "unknown"
    if r.kind == "=":
        return "met" if r.x >= goal - 1e-9 else "missed"
    if r.kind == ">=":
        return "met" if r.x >= goal - 1e-9 else "unknown"
    return "missed" if r.x < goal else "unknown"


def fnum(x, nd=2):
    return "–" if x is None or x == "" else f"{float(x):.{nd}f}"


def read_json(p: Path):
    for q in (p, p.with_name(p.name + ".gz")):
        try:
            if q.suffix == ".gz":
                return json.loads(gzip.open(q, "rt").read())
            return json.loads(q.read_text())
        except (OSError, ValueError):
            continue
    return None


def ab_counters(runs: Path, name: str):
    s0, s1 = read_json(runs / f"{name}.stats0.json"), read_json(runs / f"{name}.stats1.json")
    if not isinstance(s0, list) or not isinstance(s1, list):
        return {}
    for a, b in zip(s0, s1):
        if a.get("name") == "a-b" and "ab" in a and "ab" in b:
            x, y = a["ab"]["stats"], b["ab"]["stats"]
            return {k: y[k] - x[k] for k in ("drop_loss", "drop_queue", "tx_bytes") if k in x and k in y}
    return {}


def main():
    out = Path(sys.argv[1])
    cfg = json.loads((out / "config.json").read_text())
    rows = list(csv.DictReader(open(out / "runs.csv")))
    md = []
    p = md.append
    p(f"# send-netem {cfg['started_utc']}\n")
    p(f"haul `{cfg['haul_version']}` (git {cfg.get('git_head')}, working tree dirty: {cfg.get('git_dirty')}, "
      f"binary sha256 {cfg.get('haul_sha256')}…); {cfg['globus_url_copy']}; kernel {cfg['kernel']}, "
      f"{cfg['nproc']} cores; TCP {cfg['congestion']}, tcp_rmem/tcp_wmem max {cfg['rmem_max']} B, "
      f"tcp_no_metrics_save=1; {cfg['reps']} rounds, timeout {cfg['timeout_s']} s, {cfg['gap_s']} s between runs; "
      f"destination {cfg['dest_root']} ({cfg['dest_fs']}); PLUT rate: "
      f"{cfg['plut_rate'] or 'haul cp default'}; load at start {cfg.get('load_at_start')}.\n")
    csv_rows = []
    scenarios = []
    for r in rows:
        if r["scenario"] not in scenarios:
            scenarios.append(r["scenario"])
    goals = []
    for s in scenarios:
        rs = [r for r in rows if r["scenario"] == s]
        runs_dir = out / s / "runs"
        topo = (out / s / "topology.toml").read_text().splitlines()
        desc = " ".join(l.lstrip("# ") for l in topo if l.startswith("#"))
        size = int(rs[0]["bytes_expected"])
        tmo = float(cfg["timeout_s"])
        p(f"## {s}: {desc}\n")
        nfiles = None
        w = read_json(out / s / "warmup.json")
        if w:
            nfiles = w.get("request", {}).get("files")
        p(f"{size / 2**30:.2f} GiB ({size} B){f' in {nfiles} files' if nfiles else ''}; "
          f"{max(int(r['rep']) for r in rs)} rounds.\n")
        conts = [c for c in ORDER if any(r["contender"] == c for r in rs)]
        stats = {}
        for c in conts:
            cr = [r for r in rs if r["contender"] == c]
            walls = [(float(r["wall_s"]) if r["status"] == "ok" else tmo, r["status"] == "timeout")
                     for r in cr if r["status"] in ("ok", "timeout")]
            gps = [(size * 8 / x / 1e6, cen) for x, cen in walls]
            mw = median_censored(walls)
            # Goodput falls as wall grows: its median is the wall median's image, a bound the other way.
            mg = Val(size * 8 / mw.x / 1e6, "<" if mw.kind == ">=" else "=") if mw.x else Val(None)
            cnt = [ab_counters(runs_dir, f"{c}-r{r['rep']}") for r in cr]
            dl = [x["drop_loss"] for x in cnt if "drop_loss" in x]
            dq = [x["drop_queue"] for x in cnt if "drop_queue" in x]
            stats[c] = {
                "runs": len(cr),
                "ok": sum(1 for r in cr if r["status"] == "ok"),
                "timeouts": sum(1 for r in cr if r["status"] == "timeout"),
                "failed": sum(1 for r in cr if r["status"] in ("fail", "short")),
                "wall": mw,
                "wall_min": Val(min(x for x, _ in walls), ">=" if all(cn for _, cn in walls) else "=") if walls else Val(None),
                "wall_max": Val(max(x for x, _ in walls), ">=" if any(cn for _, cn in walls) else "=") if walls else Val(None),
                "goodput": mg,
                "gp_min": Val(min(g for g, _ in gps), "<" if any(cn for _, cn in gps) else "=") if gps else Val(None),
                "gp_max": Val(max(g for g, _ in gps), "<" if all(cn for _, cn in gps) else "=") if gps else Val(None),
                "drop_loss": statistics.median(dl) if dl else None,
                "drop_queue": statistics.median(dq) if dq else None,
                "busy": statistics.median([float(r["host_busy_pct"]) for r in cr]) if cr else None,
                "arrived_max": max(float(r["arrived_mbps"]) for r in cr) if cr else None,
            }
        fixed = [c for c in FIXED if c in stats and stats[c]["wall"].x is not None]
        best = min(fixed, key=lambda c: (stats[c]["wall"].x, stats[c]["wall"].kind != "=")) if fixed else None
        guc = stats.get("guc", {}).get("wall", Val(None))
        p(f"Best fixed choice (lowest median wall of {', '.join(fixed)}): **{best or '–'}**.\n")
        p("| contender | ok / runs | timeouts | failed | wall s, median | wall min – max | goodput Mbit/s, median "
          "| goodput min – max | best fixed / this | guc / this | loss drops a→b | queue drops a→b | host busy % |")
        p("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        for c in conts:
            st = stats[c]
            rb = ratio(stats[best]["wall"], st["wall"]) if best else Val(None)
            rg = ratio(guc, st["wall"])
            st["vs_best"], st["vs_guc"] = rb, rg
            p(f"| {LABEL[c]} | {st['ok']} / {st['runs']} | {st['timeouts']} | {st['failed']} | **{st['wall'].fmt(1)}** | "
              f"{st['wall_min'].fmt(1)} – {st['wall_max'].fmt(1)} | **{st['goodput'].fmt(1)}** | "
              f"{st['gp_min'].fmt(1)} – {st['gp_max'].fmt(1)} | {rb.fmt(2)} | {rg.fmt(2)} | "
              f"{fnum(st['drop_loss'], 0)} | {fnum(st['drop_queue'], 0)} | {fnum(st['busy'], 0)} |")
            csv_rows.append({
                "scenario": s, "contender": c, "runs": st["runs"], "ok": st["ok"], "timeouts": st["timeouts"],
                "failed": st["failed"], "median_wall_s": st["wall"].csv(), "min_wall_s": st["wall_min"].csv(),
                "max_wall_s": st["wall_max"].csv(), "median_goodput_mbps": st["goodput"].csv(),
                "min_goodput_mbps": st["gp_min"].csv(), "max_goodput_mbps": st["gp_max"].csv(),
                "best_fixed": best or "", "best_fixed_over_this": rb.csv(), "guc_over_this": rg.csv(),
                "goal": GOAL.get(c, ""),
                "goal_vs_best": verdict(rb, GOAL[c]) if c in GOAL else "",
                "goal_vs_guc": verdict(rg, 1.0) if c in GOAL else "",
                "median_loss_drops_ab": st["drop_loss"] if st["drop_loss"] is not None else "",
                "median_queue_drops_ab": st["drop_queue"] if st["drop_queue"] is not None else "",
                "median_host_busy_pct": st["busy"] if st["busy"] is not None else "",
            })
        p("")
        for c in ("send-cold", "send-warm"):
            if c not in stats:
                continue
            st = stats[c]
            vb, vg = verdict(st["vs_best"], GOAL[c]), verdict(st["vs_guc"], 1.0)
            goals.append((s, c, st["vs_best"], vb, st["vs_guc"], vg))
            # Per round: the best fixed choice's wall / this one's, within the same round.
            per = []
            for r in sorted({r["rep"] for r in rs}, key=int):
                a = [x for x in rs if x["rep"] == r and x["contender"] == c]
                b = [x for x in rs if x["rep"] == r and x["contender"] == best]
                if a and b and a[0]["status"] == "ok" and b[0]["status"] == "ok":
                    per.append(float(b[0]["wall_s"]) / float(a[0]["wall_s"]))
            p(f"- {c}: best fixed ({best}) / {c} = **{st['vs_best'].fmt(2)}** (goal ≥ {GOAL[c]:.2f}: {vb}); "
              f"globus-url-copy / {c} = **{st['vs_guc'].fmt(2)}** (goal ≥ 1.00: {vg})"
              + (f"; per round vs {best}: {', '.join(f'{x:.2f}' for x in per)}" if per else "") + ".")
        p("")
        # What haul send did, run by run.
        sends = [r for r in rs if r["contender"].startswith("send-")]
        if sends or w:
            p("`haul send`, run by run (stages in seconds, from its JSON; probes: transport/streams "
              "bytes in seconds = Mbit/s):\n")
            p("| run | status | wall s | transport | predicted Mbit/s | achieved Mbit/s | discover | profile | plan "
              "| transfer | attempts | streams (settings) | probes | notes |")
            p("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
            items = []
            if w:
                items.append(("warm-up", None, w))
            for r in sorted(sends, key=lambda r: (r["contender"], int(r["rep"]))):
                items.append((f"{r['contender']}-r{r['rep']}", r, read_json(runs_dir / f"{r['contender']}-r{r['rep']}.out")))
            for name, r, j in items:
                if not j:
                    p(f"| {name} | {r['status'] if r else '?'} | {r['wall_s'] if r else '–'} | (no JSON) | | | | | | | | | | |")
                    continue
                stg = j.get("stages", {})
                pr = j.get("probes", [])
                probes = "; ".join(f"{x['stage'][0]}:{x['transport']}/{x['parallelism']} {x['bytes'] / 2**20:.0f} MiB "
                                   f"{x['seconds']:.1f} s = {x['bps'] / 1e6:.0f}" + (" ERR" if x.get("error") else "")
                                   for x in pr) or "none"
                att = j.get("attempts", [])
                stops = [("trial stopped: " if a.get("trial") else "re-planned: ") + a["stopped"]
                         for a in att if a.get("stopped")]
                dl = []
                if j.get("deadline_met") is not None:
                    dl = [f"deadline {'met' if j['deadline_met'] else 'MISSED'} ({fnum(j.get('total_s'), 1)} s)"]
                notes = "; ".join(dl + j.get("notes", []) + stops)
                ch = j.get("chosen") or {}
                tr = " → ".join(f"{a['transport']}{'' if a['route'] == 'direct' else ' ' + a['route']}"
                                f"{' (trial)' if a.get('trial') else ''}" for a in att) or ch.get("transport", "?")
                pb = ch.get("predicted_bps")
                ab = j.get("achieved_bps")
                sett = j.get("settings", {})
                wall = r["wall_s"] if r else "–"
                p(f"| {name} | {r['status'] if r else j.get('outcome', '?')} | {wall} | {tr} | "
                  f"{fnum(pb / 1e6 if pb else None, 0)} | {fnum(ab / 1e6 if ab else None, 0)} | "
                  f"{fnum(stg.get('discover_s'))} | {fnum(stg.get('profile_s'))} | {fnum(stg.get('plan_s'), 4)} | "
                  f"{fnum(stg.get('transfer_s'))} | {len(att)} | {sett.get('parallelism') or 'default'} "
                  f"({sett.get('source', '')}) | {probes} | {notes} |")
            p("")
        bad = [r for r in rs if r["status"] != "ok"]
        if bad:
            p("Runs that did not finish cleanly:\n")
            for r in bad:
                err = ""
                for q in (runs_dir / f"{r['contender']}-r{r['rep']}.err",):
                    try:
                        err = q.read_text(errors="replace").strip().replace("\n", " ")[-300:]
                    except OSError:
                        pass
                p(f"- {r['contender']}-r{r['rep']}: {r['status']} (rc {r['rc']}) after {r['wall_s']} s, "
                  f"{int(r.get('bytes_alloc') or r['bytes']) / 2**20:.0f} of {int(r['bytes_expected']) / 2**20:.0f} MiB written "
                  f"({r['arrived_mbps']} Mbit/s over the run){'; stderr: `' + err + '`' if err else ''}")
            p("")
    if goals:
        p("## Goals\n")
        p("| scenario | `haul send` | best fixed / send | goal | verdict | guc / send | ≥ 1.00 |")
        p("|---|---|---|---|---|---|---|")
        for s, c, rb, vb, rg, vg in goals:
            p(f"| {s} | {c} | {rb.fmt(2)} | ≥ {GOAL[c]:.2f} | {vb} | {rg.fmt(2)} | {vg} |")
        p("")
    text = "\n".join(md) + "\n"
    sys.stdout.write(text)
    (out / "summary.md").write_text(text)
    if csv_rows:
        with open(out / "summary.csv", "w", newline="") as f:
            wr = csv.DictWriter(f, fieldnames=list(csv_rows[0].keys()))
            wr.writeheader()
            wr.writerows(csv_rows)


if __name__ == "__main__":
    main()
