#!/usr/bin/env python3
"""Summary of a bench/relay-netem.sh run (the split-TCP relay on the emulated chain a - b - c).

Usage: relay-netem-summary.py OUT_DIR
Prints markdown on stdout; writes OUT_DIR/runs-derived.csv (one row per run with the emulator's
counters and the senders' TCP state folded in) and OUT_DIR/summary.json.

Definitions:
  goodput      file size * 8 / (client start to exit), Mbit/s: the thesis's metric (§5.2.2)
  ratio        median goodput of the row / median goodput of haul-direct (or globus-url-copy)
  paired       median over rounds of relay / direct within the same round (runs 30-60 s apart)
  cross        synthetic cross traffic on a-b, direction a->b, during the run: accepted into the
               queue (cross_bytes) and dropped (cross_drops x 1500 B), Mbit/s over the wall time;
               util = (accepted + dropped) / link rate, the offered load the run saw
  q-drops      real (not synthetic) packets dropped by the full queue of a->b (and b->c)
  srtt, cwnd   medians over the 1 s `ss -tin` samples of the run's sending data sockets (bytes
               acked > 1 MB): in a (the origin: direct path or first leg) and in b (the relay's
               second leg); retrans = segments retransmitted by those sockets (last sample)
  leg1 (relay) the relay's own log of its fetch from the origin (`relay leg done`, Mbit/s)
  after 2 s    haul's own 1 s throughput samples from t = 2 s to the end (t = 0 when haul's
               transfer clock starts, after login): bytes after 2 s / (duration - 2 s). This
               leaves out the start (data-channel set-up over the 100 ms path, slow start), so it
               is nearer the thesis's 4 GB steady state than the whole-run goodput; haul only
"""

import csv
import json
import re
import statistics
import sys
from pathlib import Path

THESIS = {  # §5.2.4, Fig. 5.3: goodput in Mbit/s at 10:90 latency, single streams
    "t70": {"direct": 19.6, "split": 26.4, "gain": 35},
    "t90": {"direct": 4.42, "split": 11.1, "gain": 151},
}
ORDER = ["haul-direct", "haul-relay", "haul-direct-b", "haul-relay-b", "guc-direct", "leg-ab",
         "leg-bc"]
LABEL = {
    "haul-direct": "`haul cp` direct",
    "haul-relay": "`haul cp` through the relay on b",
    "guc-direct": "`globus-url-copy` direct",
    "leg-ab": "first leg alone (b fetches from a)",
    "leg-bc": "second leg alone (c fetches from b)",
    "haul-direct-b": "`haul cp` direct, build B (SRC_HAUL_B)",
    "haul-relay-b": "`haul cp` through build B's relay on b",
}


def med(v):
    v = [x for x in v if x is not None]
    return statistics.median(v) if v else None


def fmt(x, nd=1):
    return "–" if x is None else f"{x:.{nd}f}"


def link_dir(stats, name, d):
    for link in stats:
        if link["name"] == name:
            return link[d]
    return None


def netem_delta(runs_dir: Path, name: str, wall: float):
    try:
        s0 = json.loads((runs_dir / f"{name}.stats0.json").read_text())
        s1 = json.loads((runs_dir / f"{name}.stats1.json").read_text())
    except (OSError, ValueError):
        return {}
    out = {}
    for link, key in (("a-b", "ab"), ("b-c", "bc")):
        a, b = link_dir(s0, link, "ab"), link_dir(s1, link, "ab")
        if not a or not b:
            continue
        d = {k: b["stats"][k] - a["stats"][k] for k in b["stats"]}
        rate = b["params"].get("rate")
        out[f"{key}_q_drops"] = d["drop_queue"]
        out[f"{key}_loss_drops"] = d["drop_loss"]
        out[f"{key}_tx_mbps"] = d["tx_bytes"] * 8 / wall / 1e6
        out[f"{key}_rx_packets"] = d["rx_packets"]
        if key == "ab":
            acc = d["cross_bytes"] * 8 / wall / 1e6
            dropped = d["cross_drops"] * 1500 * 8 / wall / 1e6
            out["cross_acc_mbps"] = acc
            out["cross_drop_mbps"] = dropped
            out["cross_util"] = (acc + dropped) / (rate * 8 / 1e6) if rate else None
            out["ab_max_queue_bytes"] = b["stats"]["max_queue_bytes"]
    return out


SS_RTT = re.compile(r"\brtt:([0-9.]+)/")
SS_CWND = re.compile(r"\bcwnd:(\d+)")
SS_ACKED = re.compile(r"\bbytes_acked:(\d+)")
SS_RETR = re.compile(r"\bretrans:\d+/(\d+)")


def ss_summary(path: Path):
    """Per sending host (a, b): median srtt (ms), median cwnd, retransmitted segments."""
    try:
        text = path.read_text()
    except OSError:
        return {}
    host = None
    per = {"a": {"rtt": [], "cwnd": [], "retr": {}}, "b": {"rtt": [], "cwnd": [], "retr": {}}}
    peer = None
    for line in text.splitlines():
        if line.startswith("# "):
            host = line.split()[2]
            continue
        if not line.startswith(("\t", " ")):
            f = line.split()
            peer = (f[2], f[3]) if len(f) >= 4 and f[0].isdigit() else None
            continue
        if host not in per:
            continue
        m = SS_ACKED.search(line)
        if not m or int(m.group(1)) < 1_000_000:
            continue
        r, c, t = SS_RTT.search(line), SS_CWND.search(line), SS_RETR.search(line)
        if r:
            per[host]["rtt"].append(float(r.group(1)))
        if c:
            per[host]["cwnd"].append(int(c.group(1)))
        per[host]["retr"][peer] = int(t.group(1)) if t else 0
    out = {}
    for h, v in per.items():
        out[f"{h}_srtt_ms"] = med(v["rtt"])
        out[f"{h}_cwnd"] = med(v["cwnd"])
        out[f"{h}_retrans"] = sum(v["retr"].values()) if v["retr"] else None
    return out


def relay_legs(log: Path):
    try:
        text = log.read_text()
    except OSError:
        return []
    text = re.sub(r"\x1b\[[0-9;]*m", "", text)
    return [float(m) for m in re.findall(r"relay leg done.*?mbit_s=([0-9.]+)", text)]


def main():
    out = Path(sys.argv[1])
    cfg = json.loads((out / "config.json").read_text())
    rows = list(csv.DictReader(open(out / "runs.csv")))
    derived = []
    for r in rows:
        wall = float(r["wall_s"])
        d = dict(r)
        rd = out / r["scenario"] / "runs"
        name = f"{r['contender']}-r{r['rep']}"
        d.update(netem_delta(rd, name, wall))
        d.update(ss_summary(rd / f"{name}.ss.txt"))
        try:
            j = json.loads((rd / f"{name}.out").read_text())
            d["haul_mbps"] = j.get("throughput_bps", 0) / 1e6
            d["haul_s"] = j.get("duration_s")
            late = [x for x in j.get("samples", []) if x["t_s"] > 2.0 + 1e-3]
            if late and j["duration_s"] > 3.0:
                d["after2s_mbps"] = sum(x["bytes"] for x in late) * 8 / (j["duration_s"] - 2.0) / 1e6
        except (OSError, ValueError):
            pass
        d["netem_cpu_pct"] = 100 * float(r["netem_cpu_s"]) / wall
        d["relay_cpu_pct"] = 100 * float(r["relay_cpu_s"]) / wall
        derived.append(d)
    keys = []
    for d in derived:
        for k in d:
            if k not in keys:
                keys.append(k)
    with open(out / "runs-derived.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys)
        w.writeheader()
        for d in derived:
            w.writerow(d)

    scenarios = []
    for d in derived:
        if d["scenario"] not in scenarios:
            scenarios.append(d["scenario"])
    summary = {"config": cfg, "scenarios": {}}
    print(f"# relay-netem {cfg['started_utc']}\n")
    print(f"haul: `{cfg['haul_version']}` (git {cfg.get('git_head')}, working tree dirty: "
          f"{cfg.get('git_dirty')}); {cfg['globus_url_copy']}; kernel {cfg['kernel']}, "
          f"{cfg['nproc']} cores; TCP {cfg['congestion']}, tcp_rmem/tcp_wmem max {cfg['rmem_max']} B.\n")
    for s in scenarios:
        rs = [d for d in derived if d["scenario"] == s]
        ok = [d for d in rs if d["rc"] == "0"]
        conts = [c for c in ORDER if any(d["contender"] == c for d in rs)]
        g = {c: [float(d["goodput_mbps"]) for d in ok if d["contender"] == c] for c in conts}
        m = {c: med(v) for c, v in g.items()}
        base = m.get("haul-direct")
        gbase = m.get("guc-direct")
        topo = (out / s / "topology.toml").read_text().splitlines()
        desc = " ".join(l.lstrip("# ") for l in topo if l.startswith("#"))
        streams = rs[0]["streams"]
        size = int(rs[0]["bytes"])
        print(f"## {s}: {desc}\n")
        print(f"{size / 2**20:.0f} MiB per run, {streams} TCP stream(s) per leg, "
              f"{max(int(d['rep']) for d in rs)} rounds; failed runs: "
              f"{sum(1 for d in rs if d['rc'] != '0')}.\n")
        print("| contender | runs | goodput Mbit/s, median | min – max | / haul direct | / globus-url-copy "
              "| after 2 s, Mbit/s | cross util. a→b | q-drops a→b | q-drops b→c | srtt a / b, ms | cwnd a / b | retrans a / b "
              "| emulator CPU % | relay CPU % |")
        print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        sc = {"contenders": {}}
        for c in conts:
            v = g[c]
            cr = [d for d in ok if d["contender"] == c]
            col = lambda k: med([float(d[k]) for d in cr if d.get(k) not in (None, "")])
            util = col("cross_util")
            row = {
                "runs": len(v), "median_mbps": m[c], "min": min(v) if v else None,
                "max": max(v) if v else None, "all": v,
                "vs_direct": m[c] / base if base and m[c] else None,
                "vs_guc": m[c] / gbase if gbase and m[c] else None,
                "cross_util": util, "ab_q_drops": col("ab_q_drops"), "bc_q_drops": col("bc_q_drops"),
                "a_srtt_ms": col("a_srtt_ms"), "b_srtt_ms": col("b_srtt_ms"),
                "a_cwnd": col("a_cwnd"), "b_cwnd": col("b_cwnd"),
                "a_retrans": col("a_retrans"), "b_retrans": col("b_retrans"),
                "netem_cpu_pct": col("netem_cpu_pct"), "relay_cpu_pct": col("relay_cpu_pct"),
                "host_busy_pct": col("host_busy_pct"), "after2s_mbps": col("after2s_mbps"),
            }
            sc["contenders"][c] = row
            rng = f"{row['min']:.1f} – {row['max']:.1f}" if v else "–"
            print(f"| {LABEL[c]} | {len(v)} | **{fmt(m[c])}** | {rng} | {fmt(row['vs_direct'], 2)} | "
                  f"{fmt(row['vs_guc'], 2)} | {fmt(row['after2s_mbps'])} | {fmt(util * 100 if util is not None else None, 0)} % | "
                  f"{fmt(row['ab_q_drops'], 0)} | {fmt(row['bc_q_drops'], 0)} | "
                  f"{fmt(row['a_srtt_ms'])} / {fmt(row['b_srtt_ms'])} | {fmt(row['a_cwnd'], 0)} / "
                  f"{fmt(row['b_cwnd'], 0)} | {fmt(row['a_retrans'], 0)} / {fmt(row['b_retrans'], 0)} | "
                  f"{fmt(row['netem_cpu_pct'], 0)} | "
                  f"{fmt(row['relay_cpu_pct'], 1) if c == 'haul-relay' else '–'} |")
        # Paired ratios within a round.
        pairs = {}
        for d in ok:
            pairs.setdefault(d["rep"], {})[d["contender"]] = float(d["goodput_mbps"])
        pr = [p["haul-relay"] / p["haul-direct"] for p in pairs.values()
              if "haul-relay" in p and "haul-direct" in p]
        sc["paired_relay_over_direct"] = pr
        legs = relay_legs(out / s / "relay.log")
        sc["relay_leg1_mbps"] = legs
        print()
        if base and m.get("haul-relay"):
            gain = 100 * (m["haul-relay"] / base - 1)
            sc["gain_pct"] = gain
            print(f"Relay over direct (medians): **{m['haul-relay'] / base:.2f}×** ({gain:+.0f} %); "
                  f"per round: {', '.join(f'{x:.2f}' for x in pr)} (median {fmt(med(pr), 2)}).")
        a2 = {c: sc["contenders"][c]["after2s_mbps"] for c in conts}
        if a2.get("haul-direct") and a2.get("haul-relay"):
            print(f"After 2 s (haul's samples): relay / direct {a2['haul-relay'] / a2['haul-direct']:.2f}×.")
        if gbase and m.get("haul-relay"):
            print(f"Relay over globus-url-copy direct: {m['haul-relay'] / gbase:.2f}×.")
        if legs:
            print(f"The relay's first leg (its log): {', '.join(f'{x:.1f}' for x in legs)} Mbit/s.")
        if s in THESIS:
            t = THESIS[s]
            print(f"Thesis (IP-TNE, 4 GB, single streams): direct {t['direct']}, split {t['split']} "
                  f"Mbit/s, {t['gain']:+d} %.")
        print()
        summary["scenarios"][s] = sc
    (out / "summary.json").write_text(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
