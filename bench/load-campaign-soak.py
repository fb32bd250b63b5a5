#!/usr/bin/env python3
"""Session churn against one `haul serve`, to tell a per-session leak from allocator
fragmentation (the load campaign's RSS rose 1-2 MiB per wave). 16 client threads run --sessions
short sessions, alternating:
  download: anonymous, MODE E, OPTS RETR Parallelism=4, PORT, RETR a 300 kB file on 4 streams,
            CKSM, QUIT;
  upload:   `loader` (argon2) or anonymous, MODE E, PASV, STOR 16 kB on 4 connections (one
            announcing 4 EODs), then MODE S, PASV, MLSD of the upload directory, QUIT.
Prints the server's RSS and threads every tenth of the run. A leak grows with the sessions;
fragmentation does not.

Usage: bench/load-campaign-soak.py [--haul BIN] [--sessions 20000] [--threads 16]
"""
import argparse
import importlib.util
import os
import re
import shutil
import socket
import struct
import subprocess
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("load_campaign", os.path.join(HERE, "load-campaign.py"))
lc = importlib.util.module_from_spec(spec)
spec.loader.exec_module(lc)


def final(c):
    r = c.reply()
    while r and (r[0] < 200 or r[0] in (111, 112)):
        r = c.reply()
    return r


def download(port):
    c = lc.Ctl("127.0.0.1", port)
    c.login()
    for cmd in ("TYPE I", "MODE E", "OPTS RETR Parallelism=4,4,4;"):
        c.cmd(cmd)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    lport = listener.getsockname()[1]
    c.cmd(f"PORT 127,0,0,1,{lport >> 8},{lport & 255}")
    c.send("RETR pub/small")
    conns = [listener.accept()[0] for _ in range(4)]
    for s in conns:
        while True:  # blocks until this stream's EOD
            h = b""
            while len(h) < 17:
                x = s.recv(17 - len(h))
                if not x:
                    raise OSError("data connection closed early")
                h += x
            desc, count, _ = struct.unpack(">BQQ", h)
            while count:
                count -= len(s.recv(min(count, 65536)))
            if desc & 0x08:
                break
    r = final(c)
    ok = r and r[0] == 226 and c.cmd("CKSM XXH128 0 -1 pub/small")[0] == 213
    c.cmd("QUIT")
    c.close()
    for s in conns + [listener]:
        s.close()
    return ok


def upload(port, k):
    c = lc.Ctl("127.0.0.1", port)
    c.login(lc.USER, lc.PASSWORD) if k % 4 == 1 else c.login()
    c.cmd("TYPE I")
    c.cmd("MODE E")
    r = c.cmd("PASV")
    dport = lc.pasv_port(r[1])
    c.send(f"STOR up/f{k % 500}")
    conns = [socket.create_connection(("127.0.0.1", dport)) for _ in range(4)]
    data = os.urandom(4096)
    for i, s in enumerate(conns):
        last = lc.mode_e_header(0x08 | 0x40, 0, 4) if i == 0 else lc.mode_e_header(0x08, 0, 0)
        s.sendall(lc.mode_e_header(0, 4096, i * 4096) + data + last)
    ok = final(c)[0] == 226
    c.cmd("MODE S")
    r = c.cmd("PASV")
    d = socket.create_connection(("127.0.0.1", lc.pasv_port(r[1])))
    r = c.cmd("MLSD up")
    if r and r[0] in (125, 150):  # a 550 here is the vanishing-entry listing failure
        while d.recv(65536):
            pass
        final(c)
    d.close()
    c.cmd("QUIT")
    c.close()
    for s in conns:
        s.close()
    return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--haul", default=os.environ.get("HAUL_BIN", os.path.join(lc.REPO, "target/release/haul")))
    ap.add_argument("--sessions", type=int, default=20000)
    ap.add_argument("--threads", type=int, default=16)
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="haul-soak-")
    root = os.path.join(work, "root")
    os.makedirs(os.path.join(root, "pub"))
    os.makedirs(os.path.join(root, "up"))
    with open(os.path.join(root, "pub", "small"), "wb") as f:
        f.write(os.urandom(300_000))
    os.utime(os.path.join(root, "pub", "small"), (time.time() - 3600,) * 2)
    hashed = subprocess.run([a.haul, "serve", "--hash-password"], input=lc.PASSWORD + "\n", capture_output=True, text=True, check=True).stdout.strip()
    users = os.path.join(work, "users")
    with open(users, "w") as f:
        f.write(f"{lc.USER}:{hashed}:rw\n")
    os.chmod(users, 0o600)
    args = [a.haul, "serve", "--root", root, "--listen", "127.0.0.1:0", "--anonymous", "--anonymous-write", "--users", users,
            "--max-sessions", "200", "--max-sessions-per-ip", "200", "--max-sessions-per-user", "200"]
    print("server:", " ".join(os.path.basename(x) if x == a.haul else x for x in args[1:]))
    p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    port = int(re.search(r":(\d+)", p.stdout.readline().decode()).group(1))
    lock, state = threading.Lock(), {"next": 0, "ok": 0, "failed": 0, "errors": {}}

    def worker():
        while True:
            with lock:
                if state["next"] >= a.sessions:
                    return
                k = state["next"]
                state["next"] += 1
            try:
                ok = upload(port, k) if k % 2 else download(port)
                err = None
            except OSError as e:
                ok, err = False, f"{type(e).__name__}: {e}"
            with lock:
                state["ok" if ok else "failed"] += 1
                if err:
                    state["errors"][err] = state["errors"].get(err, 0) + 1

    def show(label):
        rss, hwm, threads, fds, cpu = lc.read_proc(p.pid)
        print(f"{label:22} RSS {rss / 1024:6.1f} MiB  VmHWM {hwm / 1024:6.1f} MiB  threads {threads:4}  fds {fds:4}  cpu {cpu:6.1f} s", flush=True)

    try:
        show("start")
        t = time.time()
        threads = [threading.Thread(target=worker, daemon=True) for _ in range(a.threads)]
        for th in threads:
            th.start()
        step = a.sessions // 10
        mark = step
        while any(th.is_alive() for th in threads):
            time.sleep(0.5)
            if state["ok"] + state["failed"] >= mark:
                show(f"{mark} sessions")
                mark += step
        time.sleep(1)
        show("end")
        print(f"{state['ok']} sessions ok, {state['failed']} failed in {time.time() - t:.0f} s; errors: {state['errors']}")
    finally:
        p.terminate()
        p.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
