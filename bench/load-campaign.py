#!/usr/bin/env python3
"""Load campaign against one `haul serve` (hardening issue): 300 honest `haul cp` clients at once,
each moving several files (downloads, uploads, `-r` trees, a round trip), every one verified by
haul (CKSM) and again here (SHA-256 of what landed against the source), while 100 hostile slow
clients from other loopback addresses try to hold the server's sessions, threads and memory.
Samples the server's RSS (VmRSS, and VmHWM at the end), threads and open fds, and records what
each hostile client saw. Writes raw results and a summary under
bench/results/load-campaign-<UTC time>-<haul commit>/ and prints the summary table.

Traffic stays on loopback (127.0.0.0/8): honest clients come from 127.0.0.1 (haul cp cannot bind a
source address), hostile client k from 127.0.1.(k+1) (then 127.0.2.x, ...). Every loop is bounded:
a hostile client stops when the honest clients are done (after at least --hostile-min-s), after
--hostile-max-attempts attempts, or at --hostile-cap-s; an honest haul cp is killed after
--cp-timeout-s.

Server configuration (every flag that is not the default, and why):
  --listen 127.0.0.1:0          an ephemeral port (printed on stdout)
  --anonymous --anonymous-write half the honest clients are anonymous; uploads need write
  --users FILE                  the other half log in as `loader` (argon2 on the two verifier
                                threads, shared with the hostile wrong-password clients)
  --max-sessions 1000           300 honest haul cp x up to 2 control sessions (-c 2, the default)
                                + 100 hostile sessions + reconnects, with room to spare
  --max-sessions-per-ip 700     the 300 honest clients all come from 127.0.0.1 (600 sessions)
  --max-sessions-per-user 400   the 150 `loader` clients hold up to 300 sessions
Kept at their defaults, on purpose (these are what the hostile clients test): --login-timeout 30,
--data-timeout 60, --idle-timeout 300, --max-parallelism 64.

Usage: bench/load-campaign.py [--haul BIN] [--honest 300] [--hostile 100] [--out DIR] ...
       (HAUL_BIN also names the binary; default target/release/haul of this repository)
"""
import argparse
import collections
import csv
import datetime
import gzip
import hashlib
import json
import os
import random
import re
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PASSWORD = "load-campaign-pw"
USER = "loader"

# --------------------------------------------------------------------------------------------
# Dataset


def log_uniform(rng, lo, hi):
    import math
    return int(math.exp(rng.uniform(math.log(lo), math.log(hi))))


def write_file(path, size, rng):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        left = size
        while left:
            n = min(left, 1 << 20)
            f.write(rng.randbytes(n))
            left -= n


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            b = f.read(1 << 20)
            if not b:
                break
            h.update(b)
    return h.hexdigest()


def tree_hashes(root):
    """{relative path: sha256} of every regular file under root; None if root is missing."""
    if not os.path.isdir(root):
        return None
    out = {}
    for d, _, files in os.walk(root):
        for n in files:
            p = os.path.join(d, n)
            out[os.path.relpath(p, root)] = sha256(p)
    return out


def make_dataset(work, rng, n_pub, n_trees, n_up, n_uptrees):
    """Server root (pub/: n_pub files 4 KiB-8 MiB, log-uniform; trees/tK: 12 files in 3 dirs;
    up/: the upload area) and the local upload sources (upsrc/, uptrees/)."""
    root = os.path.join(work, "root")
    meta = {"pub": {}, "trees": {}, "upsrc": {}, "uptrees": {}}
    for i in range(n_pub):
        size = log_uniform(rng, 4 << 10, 8 << 20)
        rel = f"pub/f{i:03d}"
        write_file(os.path.join(root, rel), size, rng)
        meta["pub"][rel] = size
    for t in range(n_trees):
        for j in range(12):
            rel = f"trees/t{t}/d{j % 3}/g{j:02d}"
            write_file(os.path.join(root, rel), log_uniform(rng, 4 << 10, 256 << 10), rng)
        meta["trees"][f"trees/t{t}"] = 12
    os.makedirs(os.path.join(root, "up", "hostile"), exist_ok=True)
    for i in range(n_up):
        rel = f"upsrc/u{i:03d}"
        size = log_uniform(rng, 4 << 10, 8 << 20)
        write_file(os.path.join(work, rel), size, rng)
        meta["upsrc"][rel] = size
    for t in range(n_uptrees):
        for j in range(12):
            rel = f"uptrees/v{t}/e{j % 3}/h{j:02d}"
            write_file(os.path.join(work, rel), log_uniform(rng, 4 << 10, 256 << 10), rng)
        meta["uptrees"][f"uptrees/v{t}"] = 12
    # The served files must look settled (mtime older than the server's 2 s "racy" window) so
    # the server may hash a file while sending it: as on any real server.
    old = time.time() - 3600
    for d, _, files in os.walk(root):
        for n in files:
            os.utime(os.path.join(d, n), (old, old))
    return root, meta


# --------------------------------------------------------------------------------------------
# Server and its sampler


def read_proc(pid):
    """(VmRSS KiB, VmHWM KiB, threads, fds, cpu seconds) of pid, or None once it is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            st = f.read()
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        fds = len(os.listdir(f"/proc/{pid}/fd"))
    except (FileNotFoundError, ProcessLookupError):
        return None
    val = lambda k: int(re.search(rf"^{k}:\s+(\d+)", st, re.M).group(1))
    tick = os.sysconf("SC_CLK_TCK")
    cpu = (int(fields[11]) + int(fields[12])) / tick
    return val("VmRSS"), val("VmHWM"), val("Threads"), fds, cpu


def control_sessions(port):
    """Established TCP connections whose local port is the server's control port."""
    want = f":{port:04X} "
    n = 0
    for path in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(path) as f:
                next(f)
                for line in f:
                    parts = line.split(None, 4)
                    if parts[3] == "01" and (parts[1] + " ").endswith(want):
                        n += 1
        except OSError:
            pass
    return n


class Sampler(threading.Thread):
    def __init__(self, pid, t0, interval, counters, port):
        super().__init__(daemon=True)
        self.pid, self.t0, self.interval, self.counters, self.port = pid, t0, interval, counters, port
        self.rows = []
        self.stop = threading.Event()

    def run(self):
        while not self.stop.is_set():
            r = read_proc(self.pid)
            if r is None:
                break
            c = self.counters.snapshot()
            self.rows.append((round(time.time() - self.t0, 2), *r, c.get("cp_running", 0), c.get("hostile_open", 0),
                              control_sessions(self.port)))
            self.stop.wait(self.interval)

    def peak(self, i):
        return max((r[i] for r in self.rows), default=0)


class Counters:
    def __init__(self):
        self.lock = threading.Lock()
        self.v = collections.Counter()

    def add(self, k, n=1):
        with self.lock:
            self.v[k] += n

    def snapshot(self):
        with self.lock:
            return dict(self.v)


def start_server(haul, root, users, extra, log_path):
    args = [haul, "serve", "--root", root, "--listen", "127.0.0.1:0", "--anonymous", "--anonymous-write",
            "--users", users, "--max-sessions", "1000", "--max-sessions-per-ip", "700",
            "--max-sessions-per-user", "400"] + extra
    env = dict(os.environ, HAUL_LOG=os.environ.get("HAUL_LOG_SERVE", "info"), NO_COLOR="1")
    log = open(log_path, "wb")
    p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=log, env=env)
    line = p.stdout.readline().decode()
    m = re.search(r"listening on 127\.0\.0\.1:(\d+)", line)
    if not m:
        p.kill()
        raise SystemExit(f"server did not start: {line!r}; see {log_path}")
    return p, int(m.group(1)), args


# --------------------------------------------------------------------------------------------
# Honest clients


def plan_honest(n, rng, meta, n_trees, n_uptrees, wave):
    """Each client's steps: (kind, src, dst, what to check), one haul cp each, run in order.
    Kinds by index: 40% get (6 files), 30% put (6 files), 10% rget (two 12-file trees), 10% rput
    (two 12-file trees), 10% round trip (put two files, get each back). Odd clients log in as
    `loader`, even ones as anonymous. Wave k writes under up/wk/ and clients/wk/."""
    pub = sorted(meta["pub"])
    ups = sorted(meta["upsrc"])
    plans = []
    for i in range(n):
        k = i % 10
        steps = []
        c = f"w{wave}/c{i:03d}"
        if k < 4:
            for f in rng.sample(pub, 6):
                steps.append(("get", f, f"{c}/{os.path.basename(f)}"))
        elif k < 7:
            for f in rng.sample(ups, 6):
                steps.append(("put", f, f"up/{c}/{os.path.basename(f)}"))
        elif k == 7:
            for j, t in enumerate(rng.sample(range(n_trees), 2)):
                steps.append(("rget", f"trees/t{t}", f"{c}/tree{j}"))
        elif k == 8:
            for j, t in enumerate(rng.sample(range(n_uptrees), 2)):
                steps.append(("rput", f"uptrees/v{t}", f"up/{c}/tree{j}"))
        else:
            for j, f in enumerate(rng.sample(ups, 2)):
                steps.append(("put", f, f"up/{c}/rt{j}"))
                steps.append(("get", f"up/{c}/rt{j}", f"{c}/rt{j}-back", f))
        plans.append({"client": i, "wave": wave, "user": USER if i % 2 else "anonymous", "steps": steps})
    return plans


def honest_client(cfg, plan, results, counters, go):
    i = plan["client"]
    cdir = os.path.join(cfg.work, "clients", f"w{plan['wave']}", f"c{i:03d}")
    os.makedirs(cdir, exist_ok=True)
    env = dict(os.environ, XDG_DATA_HOME=os.path.join(cdir, ".data"), XDG_STATE_HOME=os.path.join(cdir, ".state"),
               NO_COLOR="1")
    auth = f"{USER}:{PASSWORD}@" if plan["user"] == USER else "anonymous@"
    url = lambda p: f"ftp://{auth}127.0.0.1:{cfg.port}/{p}"
    go.wait()
    for n, step in enumerate(plan["steps"]):
        kind, src, dst = step[:3]
        if kind in ("get", "rget"):
            s, d = url(src), os.path.join(cfg.work, "clients", dst)
            os.makedirs(os.path.dirname(d), exist_ok=True)
        else:
            s, d = os.path.join(cfg.work, src), url(dst)
        args = [cfg.haul, "cp", "-q", "--json"] + (["-r"] if kind in ("rget", "rput") else []) + (
            ["--mkdir"] if kind in ("put", "rput") else []) + [s, d]
        rec = {"wave": plan["wave"], "client": i, "step": n, "kind": kind, "user": plan["user"], "src": src, "dst": dst,
               "t_start": round(time.time() - cfg.t0, 2)}
        counters.add("cp_running")
        t = time.time()
        try:
            p = subprocess.run(args, capture_output=True, env=env, timeout=cfg.cp_timeout_s)
            rc, out, err = p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")
        except subprocess.TimeoutExpired as e:
            rc, out, err = "timeout", (e.stdout or b"").decode(errors="replace"), (e.stderr or b"").decode(errors="replace")
        counters.add("cp_running", -1)
        rec.update(duration_s=round(time.time() - t, 2), rc=rc, stderr=err.strip()[-600:])
        try:
            j = json.loads(out)
        except ValueError:
            j = {}
        rec.update(files=j.get("files"), bytes=j.get("bytes"), verification=j.get("verification"),
                   verified_files=j.get("verified_files"), unverified_files=j.get("unverified_files"),
                   retransferred=j.get("retransferred_files"))
        rec["haul_verified"] = rc == 0 and j.get("verification") == "checksum" and j.get("unverified_files") == 0 \
            and (j.get("files") or 0) > 0 and j.get("verified_files") == j.get("files")
        rec["script_check"] = check_step(cfg, step)
        rec["verified"] = rec["haul_verified"] and rec["script_check"] == "ok"
        rec["reason"] = "" if rec["verified"] else reason_of(rec)
        results.append(rec)


def check_step(cfg, step):
    """'ok' when what landed is byte-for-byte the source (SHA-256), else what is wrong."""
    kind, src, dst = step[:3]
    if kind == "get":
        want = cfg.hashes.get(step[3] if len(step) > 3 else src)
        got_path = os.path.join(cfg.work, "clients", dst)
        if not os.path.isfile(got_path):
            return "missing"
        if os.path.exists(got_path + ".haul-part"):
            return "part file left"
        return "ok" if sha256(got_path) == want else "content differs"
    if kind == "put":
        got_path = os.path.join(cfg.root, dst)
        if not os.path.isfile(got_path):
            return "missing on server"
        d, b = os.path.split(got_path)
        if os.path.exists(os.path.join(d, f".{b}.haul-part")):
            return "part file left on server"
        return "ok" if sha256(got_path) == cfg.hashes[src] else "content differs"
    if kind == "rget":
        want, got = cfg.tree_hashes[src], tree_hashes(os.path.join(cfg.work, "clients", dst))
    else:
        want, got = cfg.tree_hashes[src], tree_hashes(os.path.join(cfg.root, dst))
    if got is None:
        return "tree missing"
    if set(got) != set(want):
        return f"tree differs: missing {sorted(set(want) - set(got))[:3]}, extra {sorted(set(got) - set(want))[:3]}"
    bad = [p for p in want if want[p] != got[p]]
    return "ok" if not bad else f"content differs: {bad[:3]}"


def reason_of(rec):
    if rec["rc"] == "timeout":
        return "haul cp killed after the timeout"
    if rec["rc"] != 0:
        last = rec["stderr"].splitlines()[-1] if rec["stderr"] else ""
        return f"exit {rec['rc']}: {last}"
    if not rec["haul_verified"]:
        return f"haul did not verify every file: verification={rec['verification']} verified={rec['verified_files']}/{rec['files']}"
    return f"script check: {rec['script_check']}"


# --------------------------------------------------------------------------------------------
# Hostile clients


class Ctl:
    """A raw control connection from a chosen loopback source address."""

    def __init__(self, src_ip, port, timeout=120):
        self.t0 = time.time()
        self.src_ip = src_ip
        self.s = socket.create_connection(("127.0.0.1", port), timeout=10, source_address=(src_ip, 0))
        self.s.settimeout(timeout)
        self.buf = b""
        self.events = []

    def ev(self, what):
        self.events.append((round(time.time() - self.t0, 2), what))

    def line(self):
        while b"\r\n" not in self.buf:
            try:
                b = self.s.recv(4096)
            except (ConnectionResetError, BrokenPipeError):
                b = b""
            if not b:
                return None
            self.buf += b
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line.decode(errors="replace")

    def reply(self):
        """(code, text of the last line) of the next reply; None when the server closed."""
        first = self.line()
        if first is None:
            self.ev("closed by server")
            return None
        code = first[:3]
        last = first
        if len(first) > 3 and first[3] == "-":
            while True:
                last = self.line()
                if last is None:
                    self.ev("closed by server mid-reply")
                    return None
                if last.startswith(code + " "):
                    break
        self.ev(last[:120])
        return int(code), last

    def send(self, text, record=True):
        try:
            self.s.sendall(text.encode() + b"\r\n")
        except OSError as e:
            self.ev(f"send failed: {e}")
            return False
        if record:
            self.ev(f"> {text if not text.startswith('PASS') else 'PASS ****'}")
        return True

    def cmd(self, text):
        return self.reply() if self.send(text) else None

    def login(self, user="anonymous", pw="x@"):
        if not self.reply():
            return False
        r = self.cmd(f"USER {user}")
        if r and r[0] == 331:
            r = self.cmd(f"PASS {pw}")
        return bool(r and r[0] == 230)

    def wait_close(self, limit):
        """Reads until the server closes or limit seconds pass; the last reply line seen."""
        end = time.time() + limit
        last = None
        while time.time() < end:
            self.s.settimeout(max(0.1, end - time.time()))
            try:
                r = self.reply()
            except socket.timeout:
                return last, False
            if r is None:
                return last, True
            last = r
        return last, False

    def close(self):
        try:
            self.s.close()
        except OSError:
            pass


def pasv_port(text):
    m = re.search(r"\((\d+),(\d+),(\d+),(\d+),(\d+),(\d+)\)", text)
    return int(m.group(5)) * 256 + int(m.group(6)) if m else None


def data_conn(src_ip, port):
    return socket.create_connection(("127.0.0.1", port), timeout=10, source_address=(src_ip, 0))


def mode_e_header(desc, count, offset):
    return struct.pack(">BQQ", desc, count, offset)


def stor_setup(c, name):
    """Logged in: TYPE I, MODE E, PASV, STOR; the passive port (None if refused)."""
    c.cmd("TYPE I")
    c.cmd("MODE E")
    r = c.cmd("PASV")
    if not r or r[0] != 227:
        return None
    port = pasv_port(r[1])
    if not c.send(f"STOR {name}"):
        return None
    return port


def until_closed_or(c, stop, limit):
    """Waits (reading replies) until the server's final reply to the transfer, its close, stop,
    or limit seconds. Returns (last reply, how it ended)."""
    end = time.time() + limit
    last = None
    while time.time() < end and not stop.is_set():
        c.s.settimeout(1.0)
        try:
            r = c.reply()
        except socket.timeout:
            continue
        if r is None:
            return last, "closed"
        last = r
        if r[0] >= 200 and r[0] not in (111, 112):
            return last, "reply"
    return last, "client stopped, no final reply yet" if stop.is_set() else "client gave up, no final reply"


def h_noop_nologin(c, stop, ctx):
    """Never logs in: a NOOP every 3 s. Expect 421 at the login deadline (30 s)."""
    c.reply()
    while not stop.is_set() and time.time() - c.t0 < 120:
        c.s.settimeout(10)
        if not c.send("NOOP", record=False):
            break
        try:
            r = c.reply()
        except socket.timeout:
            r = ("timeout",)
        if r is None or r[0] == 421:
            break
        # Three seconds to the next NOOP, still reading: the 421 is seen when it comes.
        c.s.settimeout(3)
        try:
            r = c.reply()
            if r is None or r[0] == 421:
                break
        except socket.timeout:
            pass
    return closing(c)


def h_drip_nologin(c, stop, ctx):
    """Never logs in: `USER anonymous` trickled one byte every 2.5 s, the first 2 s after the
    greeting. Expect 421 at the login deadline (30 s from connecting)."""
    c.reply()
    stop.wait(2)
    line = b"USER anonymous\r\n"
    for i, b in enumerate(line):
        if stop.is_set() or time.time() - c.t0 > 120:
            break
        try:
            c.s.sendall(bytes([b]))
        except OSError:
            c.ev(f"send failed after {i} bytes")
            break
        if i == 0:
            c.ev("first byte sent")
            ctx["extra"]["first_byte_s"] = round(time.time() - c.t0, 2)
        c.s.settimeout(2.5)
        try:
            r = c.reply()
        except socket.timeout:
            continue
        if r is None or r[0] == 421:
            break
    return closing(c)


def closing(c):
    """What ended the attempt: the server's 421 (and when) or something else."""
    closes = [(t, e) for t, e in c.events if e.startswith("421") or e.startswith("closed")]
    if closes:
        t, e = closes[0]
        return f"server: {e[:60]}", t
    return "client stopped (server still holding)", round(time.time() - c.t0, 2)


def h_pasv_idle(c, stop, ctx):
    """Logs in, PASV, then nothing at all (never connects). Held until the idle timeout (300 s)
    or the end of the campaign."""
    if not c.login():
        return "login failed", None
    r = c.cmd("PASV")
    if not r or r[0] != 227:
        return f"PASV refused: {r}", None
    last, closed = None, False
    while not closed and not stop.is_set() and ctx["cap_left"]() > 0:
        last, closed = c.wait_close(1.0)
    if closed:
        return f"server: {last[1][:60] if last else 'closed'}", round(time.time() - c.t0, 2)
    return "client stopped (server still holding)", round(time.time() - c.t0, 2)


def h_stor_noconnect(c, stop, ctx):
    """Logs in, PASV, STOR, never connects. Expect 150 then 426/425 after --data-timeout (60 s)."""
    if not c.login():
        return "login failed", None
    name = f"up/hostile/noconn-{ctx['id']}-{ctx['attempt']}"
    if stor_setup(c, name) is None:
        return "STOR setup refused", None
    t = time.time()
    last, how = until_closed_or(c, stop, 150)
    return outcome(last, how, t)


def outcome(last, how, t):
    if how == "reply":
        return f"server: {last[0]} {last[1][4:70]}", round(time.time() - t, 2)
    if how == "closed":
        return "server closed the connection", round(time.time() - t, 2)
    return how, round(time.time() - t, 2)


def h_partial_block(c, stop, ctx):
    """STOR in MODE E, connects, sends a 17-byte header announcing 1 MiB and 1000 bytes of it,
    stalls. Expect 426 after the data timeout."""
    if not c.login():
        return "login failed", None
    port = stor_setup(c, f"up/hostile/partial-{ctx['id']}-{ctx['attempt']}")
    if port is None:
        return "STOR setup refused", None
    d = data_conn(c.src_ip, port)
    d.sendall(mode_e_header(0, 1 << 20, 0) + b"\0" * 1000)
    c.ev("partial block sent")
    t = time.time()
    last, how = until_closed_or(c, stop, 150)
    d.close()
    return outcome(last, how, t)


def h_extra_eods(c, stop, ctx):
    """STOR in MODE E on one connection: a 4 KiB block, then EOF+EOD announcing 4 EODs (only one
    will ever come); keeps the connection open. Expect 426 after the data timeout."""
    if not c.login():
        return "login failed", None
    port = stor_setup(c, f"up/hostile/eods-{ctx['id']}-{ctx['attempt']}")
    if port is None:
        return "STOR setup refused", None
    d = data_conn(c.src_ip, port)
    d.sendall(mode_e_header(0, 4096, 0) + b"x" * 4096 + mode_e_header(0x40 | 0x08, 0, 4))
    c.ev("block + EOF(4 EODs) + 1 EOD sent")
    t = time.time()
    last, how = until_closed_or(c, stop, 150)
    d.close()
    return outcome(last, how, t)


def h_wrong_password(c, stop, ctx):
    """USER loader / USER nobody-k with wrong passwords until the server closes the session.
    Records each 530's delay (the back-off)."""
    if not c.reply():
        return "no greeting", None
    delays = []
    for k in range(10):
        if stop.is_set():
            break
        user = USER if k % 2 == 0 else f"nobody{ctx['id']}"
        r = c.cmd(f"USER {user}")
        if not r or r[0] != 331:
            break
        t = time.time()
        c.s.settimeout(60)
        r = c.cmd(f"PASS wrong-{k}")
        delays.append(round(time.time() - t, 2))
        if r is None or r[0] == 230:
            break
        if r[0] == 530:
            # The 421 after the third failure may follow.
            c.s.settimeout(0.5)
            try:
                more = c.reply()
            except socket.timeout:
                more = ()
            if more is None or (more and more[0] == 421):
                break
    ctx["extra"]["delays"] = delays
    if any(e.startswith("230") for _, e in c.events):
        return "LOGGED IN with a wrong password (bug)", round(time.time() - c.t0, 2)
    closes = [e for _, e in c.events if e.startswith("421") or e.startswith("closed")]
    if not closes:
        return f"client stopped, session open after {len(delays)} failed logins", round(time.time() - c.t0, 2)
    return f"server: {closes[0][:45]} after {len(delays)} failed logins", round(time.time() - c.t0, 2)


def h_many_conns(c, stop, ctx):
    """STOR in MODE E, then 100 data connections to the passive port from its own address and 10
    from a foreign one; sends nothing. Counts the connections the server closed within 3 s.
    Expect: the foreign ones and those over --max-parallelism (64) closed, 426 after 60 s."""
    if not c.login():
        return "login failed", None
    port = stor_setup(c, f"up/hostile/many-{ctx['id']}-{ctx['attempt']}")
    if port is None:
        return "STOR setup refused", None
    t = time.time()
    own, foreign = [], []
    for _ in range(100):
        try:
            own.append(data_conn(c.src_ip, port))
        except OSError as e:
            c.ev(f"own connect failed: {e}")
            break
    for _ in range(10):
        try:
            foreign.append(data_conn(ctx["foreign_ip"], port))
        except OSError as e:
            c.ev(f"foreign connect failed: {e}")
            break
    time.sleep(3)

    def closed(s):
        s.setblocking(False)
        try:
            return s.recv(1) == b""
        except BlockingIOError:
            return False
        except OSError:
            return True
        finally:
            s.setblocking(True)

    n_own = sum(closed(s) for s in own)
    n_for = sum(closed(s) for s in foreign)
    c.ev(f"after 3 s: {n_own}/{len(own)} own and {n_for}/{len(foreign)} foreign connections closed by the server")
    ctx["extra"].update(own_closed=n_own, own=len(own), foreign_closed=n_for, foreign=len(foreign))
    last, how = until_closed_or(c, stop, 150)
    for s in own + foreign:
        s.close()
    res, dt = outcome(last, how, t)
    return f"{res}; closed within 3 s: own {n_own}/{len(own)}, foreign {n_for}/{len(foreign)}", dt


def h_port_elsewhere(c, stop, ctx):
    """PORT/EPRT naming another address (127.0.0.1, where a bait listener waits, and 10.255.0.1),
    and a privileged port of its own; then RETR. Expect 501 for each, 425 for the RETR, and no
    connection at the bait."""
    if not c.login():
        return "login failed", None
    bp = ctx["bait_port"]
    codes = []
    for cmd in (f"PORT 127,0,0,1,{bp >> 8},{bp & 255}", "EPRT |1|10.255.0.1|5000|",
                "PORT " + c.src_ip.replace(".", ",") + ",0,21", f"EPRT |1|127.0.0.1|{bp}|"):
        r = c.cmd(cmd)
        codes.append(r[0] if r else None)
        r = c.cmd("RETR pub/f000")
        codes.append(r[0] if r else None)
        if r and r[0] in (125, 150):
            until_closed_or(c, stop, 70)
    c.cmd("QUIT")
    ctx["extra"]["codes"] = codes
    refused = all(x == 501 for x in codes[0::2]) and all(x in (425, 503) for x in codes[1::2])
    return ("all refused" if refused else f"NOT refused: {codes}"), round(time.time() - c.t0, 2)


HOSTILE_KINDS = [  # (name, share of the hostile clients, function)
    ("noop-nologin", 13, h_noop_nologin),
    ("drip-nologin", 13, h_drip_nologin),
    ("pasv-idle", 12, h_pasv_idle),
    ("stor-noconnect", 12, h_stor_noconnect),
    ("partial-block", 12, h_partial_block),
    ("extra-eods", 12, h_extra_eods),
    ("wrong-password", 12, h_wrong_password),
    ("many-conns", 8, h_many_conns),
    ("port-elsewhere", 6, h_port_elsewhere),
]


def hostile_ip(k, block):
    return f"127.0.{block + k // 250}.{k % 250 + 1}"


def hostile_client(cfg, k, kind, fn, stop, results, counters):
    ip = hostile_ip(k, 1)
    for attempt in range(cfg.hostile_max_attempts):
        if stop.is_set() or time.time() - cfg.t0 > cfg.hostile_cap_s:
            break
        ctx = {"id": k, "attempt": attempt, "extra": {}, "bait_port": cfg.bait_port,
               "foreign_ip": hostile_ip(k, 101), "cap_left": lambda: cfg.hostile_cap_s - (time.time() - cfg.t0)}
        rec = {"client": k, "kind": kind, "ip": ip, "attempt": attempt, "t_start": round(time.time() - cfg.t0, 2)}
        c = None
        counters.add("hostile_open")
        try:
            c = Ctl(ip, cfg.port)
            res, dt = fn(c, stop, ctx)
        except Exception as e:  # noqa: BLE001 - a hostile client's own failure is a result too
            res, dt = f"client error: {type(e).__name__}: {e}", None
        finally:
            counters.add("hostile_open", -1)
            if c:
                c.close()
        rec.update(outcome=res, seconds=dt, duration_s=round(time.time() - cfg.t0 - rec["t_start"], 2),
                   extra=ctx["extra"], events=c.events if c else [])
        results.append(rec)
        stop.wait(1.0)


class LoginProbe(threading.Thread):
    """Every 2 s, from 127.0.0.1 like the honest clients: connect, time the greeting, log in (as
    `loader`, argon2 on the shared verifier threads, or anonymous, alternately), time the 230,
    QUIT. Shows what a new honest client waits for under the load."""

    def __init__(self, cfg):
        super().__init__(daemon=True)
        self.cfg = cfg
        self.rows = []
        self.stop = threading.Event()

    def run(self):
        n = 0
        while not self.stop.is_set():
            user = USER if n % 2 == 0 else "anonymous"
            t = time.time()
            row = {"t_s": round(t - self.cfg.t0, 2), "user": user}
            try:
                c = Ctl("127.0.0.1", self.cfg.port, timeout=120)
                row["connect_s"] = round(time.time() - t, 4)
                r = c.reply()
                row["greeting_s"] = round(time.time() - t, 4)
                r = c.cmd(f"USER {user}")
                r = c.cmd(f"PASS {PASSWORD if user == USER else 'probe@'}")
                row["login_s"] = round(time.time() - t, 4)
                row["reply"] = r[0] if r else None
                c.cmd("QUIT")
                c.close()
            except OSError as e:
                row["error"] = str(e)
            self.rows.append(row)
            n += 1
            self.stop.wait(2)


class Bait(threading.Thread):
    """A listener on 127.0.0.1 that the port-elsewhere clients name in PORT: any connection to it
    would be a bounce."""

    def __init__(self):
        super().__init__(daemon=True)
        self.s = socket.socket()
        self.s.bind(("127.0.0.1", 0))
        self.s.listen(16)
        self.s.settimeout(0.5)
        self.port = self.s.getsockname()[1]
        self.hits = []
        self.stop = threading.Event()

    def run(self):
        while not self.stop.is_set():
            try:
                conn, addr = self.s.accept()
                self.hits.append(addr)
                conn.close()
            except socket.timeout:
                pass


# --------------------------------------------------------------------------------------------
# Reporting


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p / 100 * len(xs)))] if xs else None


def summarize_probe(rows, waves):
    """Greeting and login latency of the probe, during the honest waves and outside them."""
    spans = [(w["t_start"], w["t_start"] + w["wall_s"]) for w in waves]
    out = {}
    for user in (USER, "anonymous"):
        for when in ("during waves", "between/after waves"):
            rs = [r for r in rows if r["user"] == user and any(a <= r["t_s"] <= b for a, b in spans) == (when == "during waves")]
            ok = [r for r in rs if r.get("reply") == 230]
            st = lambda k: {"median": statistics.median(r[k] for r in ok), "p95": pct([r[k] for r in ok], 95),
                            "max": max(r[k] for r in ok)} if ok else None
            out[f"{user}, {when}"] = {"probes": len(rs), "logged_in": len(ok), "greeting_s": st("greeting_s"), "login_s": st("login_s"),
                                      "failed": [r for r in rs if r.get("reply") != 230][:5]}
    return out


def summarize_hostile(recs):
    by = collections.defaultdict(list)
    for r in recs:
        by[r["kind"]].append(r)
    out = {}
    for kind, _, _ in HOSTILE_KINDS:
        rs = by.get(kind, [])
        outcomes = collections.Counter(re.sub(r"\d+/\d+", "n/n", r["outcome"]) if kind == "many-conns" else r["outcome"] for r in rs)
        secs = [r["seconds"] for r in rs if isinstance(r["seconds"], (int, float)) and r["outcome"].startswith("server")]
        k = {"clients": len({r["client"] for r in rs}), "attempts": len(rs), "outcomes": dict(outcomes.most_common()),
             "seconds_to_server_end": {"min": min(secs), "median": statistics.median(secs), "max": max(secs)} if secs else None}
        if kind == "wrong-password":
            ds = [d for r in rs for d in r["extra"].get("delays", [])]
            k["530_delay_s"] = {"min": min(ds), "median": statistics.median(ds), "max": max(ds), "n": len(ds)} if ds else None
        if kind == "many-conns":
            k["own_closed_within_3s"] = dict(collections.Counter(f"{r['extra']['own_closed']}/{r['extra']['own']}" for r in rs if "own" in r["extra"]))
            k["foreign_closed_within_3s"] = dict(collections.Counter(f"{r['extra']['foreign_closed']}/{r['extra']['foreign']}" for r in rs if "foreign" in r["extra"]))
        if kind == "drip-nologin":
            fb = [r["seconds"] - r["extra"]["first_byte_s"] for r in rs if r["outcome"].startswith("server") and "first_byte_s" in r["extra"]]
            k["seconds_from_first_byte"] = {"min": min(fb), "max": max(fb)} if fb else None
        out[kind] = k
    return out


def table(summary):
    s = summary
    h = s["honest"]
    lines = []
    lines.append(f"load campaign {s['run_id']}  (haul {s['haul_commit']}, {s['date_utc']})")
    lines.append(f"server: {' '.join(s['server_args'][1:])}")
    lines.append("")
    lines.append("honest (all waves)        | clients/wave | transfers started | completed | verified | failed | files verified | bytes | haul cp s med/max")
    lines.append("--------------------------|--------------|-------------------|-----------|----------|--------|----------------|-------|------------------")
    for kind, v in h["by_kind"].items():
        lines.append(f"{kind:25} | {v['clients']:12} | {v['started']:17} | {v['completed']:9} | {v['verified']:8} | {v['failed']:6} | {v['files_verified']:14} | "
                     f"{v['bytes'] / 1e6:.0f} MB | {v['cp_median_s']:.1f}/{v['cp_max_s']:.1f}")
    t = h["total"]
    lines.append(f"{'all':25} | {t['clients']:12} | {t['started']:17} | {t['completed']:9} | {t['verified']:8} | {t['failed']:6} | {t['files_verified']:14} | "
                 f"{t['bytes'] / 1e6:.0f} MB | {h['cp_median_s']:.1f}/{h['cp_max_s']:.1f}")
    lines.append(f"at once (peaks): {s['server']['haul_cp_running_peak']} haul cp processes, {s['server']['hostile_open_peak']} hostile control connections, "
                 f"{s['server']['control_sessions_peak']} established control connections at the server")
    lines.append("")
    lines.append("wave | transfers | verified | wall s | server peak RSS MiB | peak threads | peak fds | peak control conns | RSS/threads/fds after the wave")
    lines.append("-----|-----------|----------|--------|---------------------|--------------|----------|--------------------|-------------------------------")
    for w in s["waves"]:
        a = w["settled"]
        lines.append(f"{w['wave']:4} | {w['transfers']:9} | {w['verified']:8} | {w['wall_s']:6.1f} | {w['rss_peak_mib']:19.1f} | {w['threads_peak']:12} | "
                     f"{w['fds_peak']:8} | {w['control_sessions_peak']:18} | {a['rss_mib']:.1f} MiB / {a['threads']} / {a['fds']} ({a['after_s']:.0f} s later)")
    lines.append("")
    lines.append("login probe (every 2 s from 127.0.0.1)  | probes | logged in | greeting s med/p95/max | login (230) s med/p95/max")
    for k, v in s["login_probe"].items():
        g, l = v["greeting_s"], v["login_s"]
        f3 = lambda x: f"{x['median']:.3f}/{x['p95']:.3f}/{x['max']:.3f}" if x else "-"
        lines.append(f"{k:39} | {v['probes']:6} | {v['logged_in']:9} | {f3(g):22} | {f3(l)}")
    lines.append("")
    lines.append(f"honest wall time {h['wall_s']:.1f} s (first start to last end, all waves); haul cp duration median {h['cp_median_s']:.1f} s, p95 {h['cp_p95_s']:.1f} s, max {h['cp_max_s']:.1f} s")
    if h["failures"]:
        lines.append("failures:")
        for f in h["failures"][:20]:
            lines.append(f"  c{f['client']:03d} step {f['step']} {f['kind']}: {f['reason']}")
    lines.append("")
    lines.append("hostile clients  | clients | attempts | what happened (attempts)                              | s to server's end (min/med/max)")
    lines.append("-----------------|---------|----------|-------------------------------------------------------|--------------------------------")
    for kind, v in s["hostile"].items():
        oc = "; ".join(f"{k} x{n}" for k, n in v["outcomes"].items())
        t = v["seconds_to_server_end"]
        ts = f"{t['min']:.1f}/{t['median']:.1f}/{t['max']:.1f}" if t else "-"
        lines.append(f"{kind:16} | {v['clients']:7} | {v['attempts']:8} | {oc} | {ts}")
        if v.get("own_closed_within_3s"):
            lines.append(f"{'':16} |         |          | data connections closed within 3 s: own {v['own_closed_within_3s']}, foreign {v['foreign_closed_within_3s']}")
        if v.get("530_delay_s"):
            d = v["530_delay_s"]
            lines.append(f"{'':16} |         |          | 530 delays: {d['n']} answers, {d['min']:.2f}/{d['median']:.2f}/{d['max']:.2f} s min/med/max")
    lines.append(f"bounce bait on 127.0.0.1: {s['bait_hits']} connections")
    lines.append("")
    sv = s["server"]
    lines.append(f"server: peak RSS (VmHWM) {sv['vmhwm_mib']:.1f} MiB, sampled RSS peak {sv['rss_peak_mib']:.1f} MiB, "
                 f"threads peak {sv['threads_peak']}, fds peak {sv['fds_peak']}, CPU {sv['cpu_s']:.0f} s; "
                 f"baseline {sv['baseline']['rss_mib']:.1f} MiB / {sv['baseline']['threads']} threads / {sv['baseline']['fds']} fds")
    lines.append(f"after the clients left: {sv['after']['rss_mib']:.1f} MiB RSS, {sv['after']['threads']} threads, {sv['after']['fds']} fds "
                 f"({sv['drain_s']} s to drain); server alive: {sv['alive']}; post-run probe: {sv['probe']}")
    lines.append(f"server log: {sv['log']}")
    lines.append(f"total wall time {s['wall_s']:.0f} s")
    return "\n".join(lines)


def short_commit():
    try:
        return subprocess.run(["git", "-C", REPO, "log", "-1", "--format=%h", "--", "crates", "Cargo.toml", "Cargo.lock"],
                              capture_output=True, text=True, check=True).stdout.strip() or "unknown"
    except (subprocess.CalledProcessError, FileNotFoundError):
        return "unknown"


# --------------------------------------------------------------------------------------------


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--haul", default=os.environ.get("HAUL_BIN", os.path.join(REPO, "target/release/haul")))
    ap.add_argument("--honest", type=int, default=300)
    ap.add_argument("--hostile", type=int, default=100)
    ap.add_argument("--work", default="/var/tmp/haul-load-campaign", help="scratch directory (emptied first, removed after unless --keep)")
    ap.add_argument("--out", help="results directory (default bench/results/load-campaign-<UTC time>-<commit>)")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--pub-files", type=int, default=200)
    ap.add_argument("--cp-timeout-s", type=float, default=1200)
    ap.add_argument("--waves", type=int, default=3, help="waves of --honest clients, one after the other (does memory come back?)")
    ap.add_argument("--settle-s", type=float, default=5, help="pause after each wave before reading the server's RSS")
    ap.add_argument("--hostile-min-s", type=float, default=330,
                    help="hostile clients run at least this long: every timeout fires, the 300 s idle timeout too")
    ap.add_argument("--hostile-cap-s", type=float, default=1500)
    ap.add_argument("--hostile-max-attempts", type=int, default=60)
    ap.add_argument("--sample-s", type=float, default=0.25)
    ap.add_argument("--serve-arg", action="append", default=[], help="extra `haul serve` argument (repeatable; smoke tests only)")
    cfg = ap.parse_args()
    cfg.haul = os.path.abspath(cfg.haul)
    if not os.access(cfg.haul, os.X_OK):
        raise SystemExit(f"no haul binary at {cfg.haul} (build with cargo build --release, or give --haul / HAUL_BIN)")
    now = datetime.datetime.now(datetime.timezone.utc)
    commit = short_commit()
    run_id = f"load-campaign-{now:%Y%m%dT%H%MZ}-{commit}"
    out = cfg.out or os.path.join(REPO, "bench", "results", run_id)
    os.makedirs(out, exist_ok=True)
    rng = random.Random(cfg.seed)

    shutil.rmtree(cfg.work, ignore_errors=True)
    os.makedirs(cfg.work)
    t = time.time()
    n_trees, n_uptrees = 8, 6
    cfg.root, meta = make_dataset(cfg.work, rng, cfg.pub_files, n_trees, 60, n_uptrees)
    cfg.hashes = {rel: sha256(os.path.join(cfg.root, rel)) for rel in meta["pub"]}
    cfg.hashes.update({rel: sha256(os.path.join(cfg.work, rel)) for rel in meta["upsrc"]})
    cfg.tree_hashes = {rel: tree_hashes(os.path.join(cfg.root, rel)) for rel in meta["trees"]}
    cfg.tree_hashes.update({rel: tree_hashes(os.path.join(cfg.work, rel)) for rel in meta["uptrees"]})
    dataset_mb = (sum(meta["pub"].values()) + sum(meta["upsrc"].values())) / 1e6
    print(f"dataset: {len(meta['pub'])} served files + {n_trees} trees, {len(meta['upsrc'])} upload files + {n_uptrees} trees, "
          f"{dataset_mb:.0f} MB, made in {time.time() - t:.0f} s", flush=True)

    hashed = subprocess.run([cfg.haul, "serve", "--hash-password"], input=PASSWORD + "\n", capture_output=True, text=True, check=True).stdout.strip()
    users = os.path.join(cfg.work, "users.txt")
    with open(users, "w") as f:
        f.write(f"{USER}:{hashed}:rw\n")
    os.chmod(users, 0o600)
    serve_log = os.path.join(cfg.work, "serve.log")
    server, cfg.port, server_args = start_server(cfg.haul, cfg.root, users, cfg.serve_arg, serve_log)
    version = subprocess.run([cfg.haul, "--version"], capture_output=True, text=True).stdout.strip()
    time.sleep(1.0)
    base = read_proc(server.pid)
    cfg.t0 = time.time()
    counters = Counters()
    sampler = Sampler(server.pid, cfg.t0, cfg.sample_s, counters, cfg.port)
    sampler.start()
    bait = Bait()
    bait.start()
    cfg.bait_port = bait.port
    print(f"server pid {server.pid} on 127.0.0.1:{cfg.port}: {base[0] / 1024:.1f} MiB, {base[2]} threads, {base[3]} fds", flush=True)

    # Hostile clients first, so they hold what they hold when the honest wave arrives.
    stop = threading.Event()
    hostile_recs = []
    kinds = []
    total_w = sum(w for _, w, _ in HOSTILE_KINDS)
    for name, w, fn in HOSTILE_KINDS:
        kinds += [(name, fn)] * round(w * cfg.hostile / total_w)
    kinds = (kinds + [HOSTILE_KINDS[0][::2]] * cfg.hostile)[:cfg.hostile]
    hostile = [threading.Thread(target=hostile_client, args=(cfg, k, name, fn, stop, hostile_recs, counters), daemon=True)
               for k, (name, fn) in enumerate(kinds)]
    for th in hostile:
        th.start()
    time.sleep(5)

    probe_thread = LoginProbe(cfg)
    probe_thread.start()
    honest_recs, plans, waves = [], [], []
    for wave in range(cfg.waves):
        wplans = plan_honest(cfg.honest, rng, meta, n_trees, n_uptrees, wave)
        plans += wplans
        go = threading.Event()
        honest = [threading.Thread(target=honest_client, args=(cfg, p, honest_recs, counters, go), daemon=True) for p in wplans]
        for th in honest:
            th.start()
        t_wave = time.time()
        n_before = len(sampler.rows)
        go.set()
        print(f"wave {wave}: {cfg.honest} honest clients started at t={t_wave - cfg.t0:.1f} s, {cfg.hostile} hostile running", flush=True)
        last_print = time.time()
        while any(th.is_alive() for th in honest):
            time.sleep(1)
            if time.time() - last_print > 15:
                last_print = time.time()
                r = sampler.rows[-1] if sampler.rows else None
                print(f"  t={time.time() - cfg.t0:6.0f} s  transfers done {len(honest_recs)}, haul cp running {counters.snapshot().get('cp_running', 0)}, "
                      f"server {r[1] / 1024 if r else 0:.0f} MiB / {r[3] if r else 0} threads / {r[4] if r else 0} fds / {r[8] if r else 0} control conns", flush=True)
        t_end = time.time()
        time.sleep(cfg.settle_s)
        during = sampler.rows[n_before:] or sampler.rows[-1:]
        r = read_proc(server.pid) or (0, 0, 0, 0, 0)
        mine = [x for x in honest_recs if x["wave"] == wave]
        waves.append({"wave": wave, "t_start": round(t_wave - cfg.t0, 1), "wall_s": round(t_end - t_wave, 1),
                      "transfers": sum(len(p["steps"]) for p in wplans), "verified": sum(x["verified"] for x in mine),
                      "rss_peak_mib": max(x[1] for x in during) / 1024, "threads_peak": max(x[3] for x in during),
                      "fds_peak": max(x[4] for x in during), "control_sessions_peak": max(x[8] for x in during),
                      "cp_running_peak": max(x[6] for x in during),
                      "settled": {"after_s": cfg.settle_s, "rss_mib": r[0] / 1024, "threads": r[2], "fds": r[3]}})
        w = waves[-1]
        print(f"wave {wave} done in {w['wall_s']} s: {w['verified']}/{w['transfers']} verified; peak {w['rss_peak_mib']:.0f} MiB, "
              f"{w['threads_peak']} threads, {w['control_sessions_peak']} control conns; {cfg.settle_s:.0f} s later "
              f"{w['settled']['rss_mib']:.0f} MiB, {w['settled']['threads']} threads", flush=True)
        if not cfg.keep:
            shutil.rmtree(os.path.join(cfg.work, "clients", f"w{wave}"), ignore_errors=True)
    t_honest_end = time.time()
    print(f"honest clients done at t={t_honest_end - cfg.t0:.1f} s", flush=True)
    while time.time() - cfg.t0 < cfg.hostile_min_s:
        time.sleep(1)
    stop.set()
    probe_thread.stop.set()
    for th in hostile:
        th.join(timeout=200)
    hostile_stuck = sum(th.is_alive() for th in hostile)
    t_clients_gone = time.time()

    # Drain: does the server give back what the clients held?
    drain_s = None
    while time.time() - t_clients_gone < 120:
        r = read_proc(server.pid)
        if r is None:
            break
        if r[2] <= base[2] and r[3] <= base[3] + 1:
            drain_s = round(time.time() - t_clients_gone, 1)
            break
        time.sleep(0.5)
    after = read_proc(server.pid)
    alive = server.poll() is None
    probe_dir = os.path.join(cfg.work, "probe")
    os.makedirs(probe_dir)
    pr = subprocess.run([cfg.haul, "cp", "-q", "--json", f"ftp://127.0.0.1:{cfg.port}/pub/f001", os.path.join(probe_dir, "f")],
                        capture_output=True, text=True, timeout=120,
                        env=dict(os.environ, XDG_DATA_HOME=probe_dir, XDG_STATE_HOME=probe_dir))
    probe = "ok" if pr.returncode == 0 and sha256(os.path.join(probe_dir, "f")) == cfg.hashes["pub/f001"] else f"FAILED rc={pr.returncode} {pr.stderr.strip()[-200:]}"
    end = read_proc(server.pid)
    sampler.stop.set()
    sampler.join()
    bait.stop.set()
    server.send_signal(signal.SIGTERM)
    try:
        server.wait(timeout=10)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()

    # Left behind in the upload area.
    parts = []
    for d, _, files in os.walk(os.path.join(cfg.root, "up")):
        parts += [os.path.relpath(os.path.join(d, n), cfg.root) for n in files if n.endswith(".haul-part")]
    with open(serve_log, "rb") as f:
        log_text = f.read().decode(errors="replace")
    log_counts = {k: log_text.count(k) for k in ("session start", "session end", "session ended with error", "login timeout",
                                                   "session limit", "login failed", "data connection from another host refused",
                                                   "over the per-transfer limit", "receive failed", "send failed", "panicked",
                                                   "cannot start session thread", "ERROR")}

    # Summaries.
    kinds_h = collections.OrderedDict()
    kind_of = lambda p: {0: "get", 1: "get", 2: "get", 3: "get", 4: "put", 5: "put", 6: "put", 7: "rget", 8: "rput", 9: "roundtrip"}[p % 10]
    started = collections.Counter()
    for p in plans:
        started[kind_of(p["client"])] += len(p["steps"])
    for k in ("get", "put", "rget", "rput", "roundtrip"):
        rs = [r for r in honest_recs if kind_of(r["client"]) == k]
        kinds_h[k] = {"clients": len({p["client"] for p in plans if kind_of(p["client"]) == k}), "started": started[k],
                      "completed": sum(r["rc"] == 0 for r in rs), "verified": sum(r["verified"] for r in rs),
                      "failed": started[k] - sum(r["verified"] for r in rs),
                      "files_verified": sum(r["verified_files"] or 0 for r in rs if r["verified"]),
                      "bytes": sum(r["bytes"] or 0 for r in rs),
                      "cp_median_s": statistics.median(r["duration_s"] for r in rs) if rs else 0,
                      "cp_max_s": max((r["duration_s"] for r in rs), default=0)}
    tot = {f: sum(v[f] for v in kinds_h.values()) for f in ("clients", "started", "completed", "verified", "failed", "files_verified", "bytes")}
    durs = [r["duration_s"] for r in honest_recs]
    failures = [{k: r[k] for k in ("client", "step", "kind", "user", "src", "dst", "rc", "reason", "stderr")} for r in honest_recs if not r["verified"]]
    rows = sampler.rows
    summary = {
        "run_id": run_id, "date_utc": now.strftime("%Y-%m-%d %H:%M UTC"), "haul_commit": commit, "haul_version": version,
        "haul_binary": cfg.haul, "haul_binary_sha256": sha256(cfg.haul),
        "script_commit": subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip(),
        "host": {"cpus": os.cpu_count(), "kernel": os.uname().release,
                 "loadavg_at_end": open("/proc/loadavg").read().split()[:3]},
        "server_args": [os.path.basename(a) if a == cfg.haul else a for a in server_args],
        "config": {k: getattr(cfg, k) for k in ("honest", "hostile", "waves", "settle_s", "seed", "pub_files", "cp_timeout_s", "hostile_min_s", "hostile_cap_s",
                                                  "hostile_max_attempts", "sample_s", "serve_arg")},
        "dataset_mb": round(dataset_mb, 1),
        "honest": {"by_kind": kinds_h, "total": tot, "wall_s": round(max((r["t_start"] + r["duration_s"] for r in honest_recs), default=0)
                                                                 - min((r["t_start"] for r in honest_recs), default=0), 1),
                   "cp_median_s": statistics.median(durs) if durs else 0, "cp_p95_s": pct(durs, 95) or 0, "cp_max_s": max(durs, default=0),
                   "failures": failures, "recorded": len(honest_recs)},
        "waves": waves,
        "login_probe": summarize_probe(probe_thread.rows, waves),
        "hostile": summarize_hostile(hostile_recs),
        "hostile_threads_stuck": hostile_stuck,
        "bait_hits": len(bait.hits),
        "upload_area_part_files": len(parts),
        "upload_area_part_files_honest": [p for p in parts if not p.startswith("up/hostile/")],
        "server": {"vmhwm_mib": (end or after or rows[-1][1:])[1] / 1024, "rss_peak_mib": max(r[1] for r in rows) / 1024,
                   "threads_peak": max(r[3] for r in rows), "fds_peak": max(r[4] for r in rows), "cpu_s": (end or after)[4],
                   "haul_cp_running_peak": max(r[6] for r in rows), "hostile_open_peak": max(r[7] for r in rows),
                   "control_sessions_peak": max(r[8] for r in rows),
                   "baseline": {"rss_mib": base[0] / 1024, "threads": base[2], "fds": base[3]},
                   "after": {"rss_mib": after[0] / 1024, "threads": after[2], "fds": after[3]} if after else None,
                   "drain_s": drain_s, "alive": alive, "exit_code": server.returncode, "probe": probe,
                   "log_counts": log_counts, "log": "serve.log.gz"},
        "wall_s": time.time() - cfg.t0,
    }
    with open(os.path.join(out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    with gzip.open(os.path.join(out, "honest.jsonl.gz"), "wt") as f:
        for r in sorted(honest_recs, key=lambda r: (r["client"], r["step"])):
            f.write(json.dumps(r) + "\n")
    with gzip.open(os.path.join(out, "hostile.jsonl.gz"), "wt") as f:
        for r in sorted(hostile_recs, key=lambda r: (r["client"], r["attempt"])):
            f.write(json.dumps(r) + "\n")
    with open(os.path.join(out, "server-samples.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["t_s", "rss_kib", "hwm_kib", "threads", "fds", "cpu_s", "haul_cp_running", "hostile_open", "control_sessions"])
        w.writerows(rows)
    with open(serve_log, "rb") as fi, gzip.open(os.path.join(out, "serve.log.gz"), "wb") as fo:
        shutil.copyfileobj(fi, fo)
    text = table(summary)
    with open(os.path.join(out, "summary.txt"), "w") as f:
        f.write(text + "\n")
    print()
    print(text)
    print(f"\nresults: {out}")
    if not cfg.keep:
        shutil.rmtree(cfg.work, ignore_errors=True)
    ok = tot["verified"] == tot["started"] and alive and probe == "ok"
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
