#!/usr/bin/env python3
"""Listing and copying a directory while other clients upload into it (a finding of the load
campaign's soak, see bench/load-campaign.py). One `haul serve`; 3 uploader processes loop
`STOR up/uN-K` (1000 bytes, MODE S, 20 names each, so part files appear and are renamed over
their targets all the time). Meanwhile:
  1. MLSD /up in a loop for --seconds: how many listings fail, and with what reply;
  2. `haul cp -r ftp://.../up DIR`, --copies times: how many fail, and why.

Usage: bench/load-campaign-live-dir.py [--haul BIN] [--seconds 20] [--copies 100]
"""
import argparse
import collections
import importlib.util
import multiprocessing
import os
import re
import shutil
import socket
import subprocess
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("load_campaign", os.path.join(HERE, "load-campaign.py"))
lc = importlib.util.module_from_spec(spec)
spec.loader.exec_module(lc)


def uploader(port, n):
    c = lc.Ctl("127.0.0.1", port)
    c.login()
    c.cmd("TYPE I")
    k = 0
    while True:
        r = c.cmd("PASV")
        dport = lc.pasv_port(r[1])
        c.send(f"STOR up/u{n}-{k % 20}")
        d = socket.create_connection(("127.0.0.1", dport))
        d.sendall(b"x" * 1000)
        d.close()
        r = c.reply()
        while r and r[0] < 200:
            r = c.reply()
        k += 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--haul", default=os.environ.get("HAUL_BIN", os.path.join(lc.REPO, "target/release/haul")))
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--copies", type=int, default=100)
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="haul-live-dir-")
    os.makedirs(os.path.join(work, "root", "up"))
    p = subprocess.Popen([a.haul, "serve", "--root", os.path.join(work, "root"), "--listen", "127.0.0.1:0", "--anonymous",
                          "--anonymous-write"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    port = int(re.search(r":(\d+)", p.stdout.readline().decode()).group(1))
    procs = [multiprocessing.Process(target=uploader, args=(port, n), daemon=True) for n in range(3)]
    try:
        for q in procs:
            q.start()
        time.sleep(1)
        c = lc.Ctl("127.0.0.1", port)
        c.login()
        c.cmd("TYPE I")
        replies, t = collections.Counter(), time.time()
        while time.time() - t < a.seconds:
            r = c.cmd("PASV")
            d = socket.create_connection(("127.0.0.1", lc.pasv_port(r[1])))
            r = c.cmd("MLSD up")
            if r[0] in (125, 150):
                while d.recv(65536):
                    pass
                r = c.reply()
                while r and r[0] < 200:
                    r = c.reply()
            d.close()
            replies["226 (listed)" if r[0] == 226 else r[1][:90]] += 1
        c.close()
        print(f"1. MLSD /up for {a.seconds:.0f} s while 3 clients upload into it ({sum(replies.values())} listings):")
        for k, n in replies.most_common():
            print(f"   {n:6}  {k}")
        outcomes, env = collections.Counter(), dict(os.environ, XDG_DATA_HOME=work, XDG_STATE_HOME=work)
        for i in range(a.copies):
            dst = os.path.join(work, f"out{i}")
            r = subprocess.run([a.haul, "cp", "-q", "-r", f"ftp://127.0.0.1:{port}/up", dst], capture_output=True, text=True, env=env)
            if r.returncode == 0:
                outcomes["exit 0 (copied and verified)"] += 1
            else:
                last = r.stderr.strip().splitlines()[-1] if r.stderr.strip() else ""
                # One line per cause: the file names differ from run to run.
                last = re.sub(r"127\.0\.0\.1:\d+", "HOST", last)
                last = re.sub(r"/up/u\d+-\d+", "/up/<name>", re.sub(r"/up/\.u\d+-\d+\.haul-part", "/up/.<name>.haul-part", last))
                outcomes[f"exit {r.returncode}: {last[:150]}"] += 1
            shutil.rmtree(dst, ignore_errors=True)
        print(f"2. haul cp -r ftp://.../up, {a.copies} times while 3 clients upload into it:")
        for k, n in outcomes.most_common():
            print(f"   {n:6}  {k}")
    finally:
        for q in procs:
            q.terminate()
        p.terminate()
        p.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
