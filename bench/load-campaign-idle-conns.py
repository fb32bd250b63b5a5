#!/usr/bin/env python3
"""What silent data connections cost `haul serve`: N sessions (each from its own loopback address,
logged in as anonymous) each send `MODE E`, `PASV`, `STOR` and open C data connections to the
passive port that never send a byte. Prints the server's RSS, threads and fds as the sessions
add up, after they all close, and over several rounds (is the memory reused or does it grow?).
A follow-up of bench/load-campaign.py, whose many-conns clients showed most of the server's
peak RSS.

Usage: bench/load-campaign-idle-conns.py [--haul BIN] [--sessions 32] [--conns 64] [--rounds 3]
"""
import argparse
import importlib.util
import os
import re
import shutil
import subprocess
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("load_campaign", os.path.join(HERE, "load-campaign.py"))
lc = importlib.util.module_from_spec(spec)
spec.loader.exec_module(lc)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--haul", default=os.environ.get("HAUL_BIN", os.path.join(lc.REPO, "target/release/haul")))
    ap.add_argument("--sessions", type=int, default=32)
    ap.add_argument("--conns", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="haul-idle-conns-")
    os.makedirs(os.path.join(work, "up"))
    args = [a.haul, "serve", "--root", work, "--listen", "127.0.0.1:0", "--anonymous", "--anonymous-write",
            "--max-sessions", str(a.sessions + 8), "--max-sessions-per-ip", str(a.sessions + 8)]
    print("server:", " ".join(os.path.basename(x) if x == a.haul else x for x in args[1:]))
    p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    port = int(re.search(r":(\d+)", p.stdout.readline().decode()).group(1))
    time.sleep(0.5)

    def show(label):
        rss, hwm, threads, fds, _ = lc.read_proc(p.pid)
        print(f"{label:44} RSS {rss / 1024:7.1f} MiB  VmHWM {hwm / 1024:7.1f} MiB  threads {threads:5}  fds {fds:5}", flush=True)

    show("idle server")
    marks = {1, 2, 4, 8, 16, 32, 64, 128, a.sessions}
    try:
        for rnd in range(a.rounds):
            held = []
            for k in range(a.sessions):
                ip = lc.hostile_ip(k, 3)
                c = lc.Ctl(ip, port)
                if not c.login():
                    raise SystemExit(f"login refused: {c.events}")
                dport = lc.stor_setup(c, f"up/r{rnd}-{k}")
                held.append((c, [lc.data_conn(ip, dport) for _ in range(a.conns)]))
                time.sleep(0.5)
                if k + 1 in marks:
                    show(f"round {rnd}: {k + 1} sessions x {a.conns} silent conns")
            for c, conns in held:
                for s in conns:
                    s.close()
                c.close()
            time.sleep(3)
            show(f"round {rnd}: all closed, 3 s later")
    finally:
        p.terminate()
        p.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
