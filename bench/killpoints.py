#!/usr/bin/env python3
"""Kill-point campaign: SIGKILL `haul cp`, `haul serve` or both at random points of a 4 GiB
transfer, resume with `haul cp --resume` until haul reports success, and check the destination
byte for byte (SHA-256 computed here, independently of haul) against the source.

Python 3 standard library only. See bench/killpoints.sh for the usual invocation.

Per iteration (directions alternate: even iterations download, odd ones upload):
  1. the destination, its part file and restart journals are removed;
  2. `haul cp -p P --resume --json SRC DST` starts (the first run has no journal, so it is a
     fresh transfer); after a random delay, uniform in [lo, hi] x the calibrated duration of an
     uninterrupted transfer in that direction, the client, the server or both get SIGKILL (the
     kind comes from a per-direction shuffled deck of {client, server, both}, so the kinds are
     balanced; both: the two are killed back to back in random order);
  3. with probability --second-kill the first resume is killed too (kind drawn at random, delay
     uniform over its expected duration), so resume-of-a-resume is exercised;
  4. a killed server is restarted on the same port (upload journals are keyed by host:port);
     `haul cp --resume` runs again until it exits 0 (a resume that fails without being killed is
     retried after a back-off, at most --max-failed-resumes times);
  5. on exit 0: the JSON summary must say verified_files=1; the destination's size and SHA-256
     must equal the source's; no part file or journal may be left. Any difference stops the
     campaign with the evidence kept (see --keep-going).
A kill is "delivered" only if the client was still running when it landed; a transfer that
finished before its kill point counts as a run without a kill (logged, not counted).
"""

import argparse
import csv
import datetime as dt
import glob
import hashlib
import json
import os
import platform
import random
import shutil
import signal
import subprocess
import sys
import time

GiB = 1 << 30
CHUNK = 16 << 20


# ---------------------------------------------------------------- helpers

def now():
    return time.monotonic()


def utc_stamp():
    return dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")


def sha256_file(path, limit=None):
    h = hashlib.sha256()
    n = 0
    with open(path, "rb", buffering=0) as f:
        while True:
            b = f.read(CHUNK)
            if not b:
                break
            h.update(b)
            n += len(b)
    return h.hexdigest(), n


def ranges_covered(text):
    """Bytes covered by a GFD.020 range list `a-b,c-d` (end exclusive), as haul journals it."""
    total = 0
    for part in text.strip().split(","):
        part = part.strip()
        if not part:
            continue
        a, b = part.split("-", 1)
        total += int(b) - int(a)
    return total


def read_text(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


def file_info(path):
    try:
        st = os.lstat(path)
        return {"size": st.st_size, "alloc": st.st_blocks * 512}
    except OSError:
        return None


def tail(path, n=2000):
    try:
        with open(path, "rb") as f:
            f.seek(0, 2)
            size = f.tell()
            f.seek(max(0, size - n))
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


def git(repo, *args):
    try:
        return subprocess.run(["git", "-C", repo, *args], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def diff_summary(src, dst, size, block=4096, max_ranges=20):
    """Counts differing bytes between two files and lists the first differing 4 KiB-aligned ranges."""
    differing = 0
    ranges = []
    off = 0
    with open(src, "rb") as a, open(dst, "rb") as b:
        while True:
            x = a.read(CHUNK)
            y = b.read(CHUNK)
            if not x and not y:
                break
            if x != y:
                n = max(len(x), len(y))
                for i in range(0, n, block):
                    xa, ya = x[i:i + block], y[i:i + block]
                    if xa != ya:
                        d = sum(1 for p, q in zip(xa, ya) if p != q) + abs(len(xa) - len(ya))
                        differing += d
                        s = off + i
                        if ranges and ranges[-1][1] == s:
                            ranges[-1][1] = s + max(len(xa), len(ya))
                        elif len(ranges) < max_ranges:
                            ranges.append([s, s + max(len(xa), len(ya))])
            off += max(len(x), len(y))
    return {"differing_bytes": differing, "first_differing_ranges": ranges}


# ---------------------------------------------------------------- the campaign

class Campaign:
    def __init__(self, a):
        self.a = a
        self.rng = random.Random(a.seed)
        self.work = os.path.abspath(a.work)
        self.root = os.path.join(self.work, "root")          # served as /
        self.local = os.path.join(self.work, "local")        # client side
        self.state = os.path.join(self.work, "state")        # XDG_STATE_HOME (upload journals)
        # Per campaign: a log is never read back from an earlier campaign's file.
        self.logs = os.path.join(self.work, "logs", a.started)
        self.hist = os.path.join(self.work, "history.sqlite")
        for d in (self.root, self.local, self.state, self.logs):
            os.makedirs(d, exist_ok=True)
        self.src = os.path.join(self.root, "src")            # the source, served and read
        self.local_src = os.path.join(self.local, "src")     # hard link: the upload's source path
        self.dl_dst = os.path.join(self.local, "dst")
        self.up_dst = os.path.join(self.root, "up")
        self.out = a.out
        os.makedirs(self.out, exist_ok=True)
        self.runlog = open(os.path.join(self.out, "run.log"), "a")
        self.server = None
        self.server_n = 0
        self.port = a.port
        self.client_n = 0
        self.decks = {"download": [], "upload": []}
        self.records = []
        self.stop = False

    def log(self, msg):
        line = f"[{dt.datetime.now(dt.timezone.utc).strftime('%H:%M:%S')}] {msg}"
        print(line, flush=True)
        self.runlog.write(line + "\n")
        self.runlog.flush()

    # ------------------------------------------------------------ source

    def make_source(self):
        a = self.a
        meta_path = self.src + ".meta.json"
        meta = None
        if os.path.exists(self.src) and os.path.exists(meta_path):
            with open(meta_path) as f:
                meta = json.load(f)
            if meta.get("size") != a.size or meta.get("seed") != a.seed or meta.get("generator") != a.source_gen:
                meta = None
        if meta is None:
            self.log(f"generating a {a.size} B source ({a.source_gen}, seed {a.seed}) at {self.src}")
            t = now()
            h = hashlib.sha256()
            tmp = self.src + ".tmp"
            proc = None
            if a.source_gen == "aes-ctr":
                # The AES-128-CTR keystream of a seed-derived key: deterministic, incompressible,
                # non-repeating (2^128 blocks), and fast.
                key = hashlib.sha256(f"haul-killpoints-{a.seed}".encode()).hexdigest()[:32]
                proc = subprocess.Popen(["openssl", "enc", "-aes-128-ctr", "-K", key, "-iv", "0" * 32, "-nosalt", "-in", "/dev/zero"],
                                        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
                stream = proc.stdout
            elif a.source_gen == "urandom":
                stream = open("/dev/urandom", "rb")
            else:
                r = random.Random(a.seed)

                class R:
                    def read(self, n):
                        return r.randbytes(n)
                stream = R()
            left = a.size
            with open(tmp, "wb") as f:
                while left:
                    b = stream.read(min(CHUNK, left))
                    if not b:
                        raise RuntimeError("source generator ended early")
                    f.write(b)
                    h.update(b)
                    left -= len(b)
            if proc:
                proc.kill()
                proc.wait()
            os.replace(tmp, self.src)
            meta = {"size": a.size, "seed": a.seed, "generator": a.source_gen, "sha256": h.hexdigest(),
                    "generated_s": round(now() - t, 1)}
            with open(meta_path, "w") as f:
                json.dump(meta, f)
        self.log(f"hashing the source independently of haul (SHA-256, Python hashlib)")
        t = now()
        digest, n = sha256_file(self.src)
        if n != a.size or digest != meta["sha256"]:
            raise RuntimeError(f"source {self.src} changed: {n} B {digest}, expected {a.size} B {meta['sha256']}")
        self.hash_s = now() - t
        self.src_sha = digest
        self.log(f"source sha256 {digest} ({n} B, hashed in {self.hash_s:.1f} s)")
        if os.path.exists(self.local_src):
            os.unlink(self.local_src)
        os.link(self.src, self.local_src)
        return meta

    # ------------------------------------------------------------ server

    def start_server(self):
        self.server_n += 1
        logp = os.path.join(self.logs, f"server-{self.server_n:04d}.log")
        listen = f"127.0.0.1:{self.port or 0}"
        env = dict(os.environ)
        env.setdefault("HAUL_LOG", self.a.server_log)
        for attempt in range(50):
            logf = open(logp, "ab")
            seen = logf.tell()
            p = subprocess.Popen([self.a.bin, "serve", "--root", self.root, "--listen", listen, "--anonymous", "--anonymous-write"],
                                 stdout=logf, stderr=logf, env=env)
            logf.close()
            deadline = now() + 15
            addr = None
            while now() < deadline and p.poll() is None:
                for line in (read_text(logp) or "")[seen:].splitlines():
                    if "haul serve: listening on" in line:
                        addr = line.rsplit(" ", 1)[1]
                if addr:
                    break
                time.sleep(0.02)
            if addr:
                self.server = p
                self.port = int(addr.rsplit(":", 1)[1])
                return
            if p.poll() is None:
                p.kill()
                p.wait()
            self.log(f"server did not start (attempt {attempt + 1}): {tail(logp, 400)!r}")
            time.sleep(1)
        raise RuntimeError("haul serve does not start")

    def kill_server(self):
        self.server.send_signal(signal.SIGKILL)
        self.server.wait()
        self.server = None

    def stop_server(self):
        if self.server and self.server.poll() is None:
            self.server.send_signal(signal.SIGTERM)
            try:
                self.server.wait(10)
            except subprocess.TimeoutExpired:
                self.server.kill()
                self.server.wait()
        self.server = None

    # ------------------------------------------------------------ client

    def urls(self, direction):
        base = f"ftp://127.0.0.1:{self.port}"
        if direction == "download":
            return f"{base}/src", self.dl_dst
        return self.local_src, f"{base}/up"

    def start_client(self, direction, tag):
        self.client_n += 1
        src, dst = self.urls(direction)
        cmd = [self.a.bin, "cp", "-p", str(self.a.parallelism), "--resume", "--json", "--history", self.hist, *self.a.cp_arg, src, dst]
        env = dict(os.environ)
        env["XDG_STATE_HOME"] = self.state
        if self.a.client_log:
            env["HAUL_LOG"] = self.a.client_log
        else:
            env.pop("HAUL_LOG", None)
        out = os.path.join(self.logs, f"client-{self.client_n:05d}-{tag}.json")
        err = os.path.join(self.logs, f"client-{self.client_n:05d}-{tag}.err")
        fo, fe = open(out, "wb"), open(err, "wb")
        p = subprocess.Popen(cmd, stdout=fo, stderr=fe, env=env)
        fo.close()
        fe.close()
        return p, cmd, out, err

    # ------------------------------------------------------------ restart state

    def paths(self, direction):
        if direction == "download":
            part = self.dl_dst + ".haul-part"
            return {"dst": self.dl_dst, "part": part, "journals": [part + ".ranges"], "extra": [part + ".ranges.tmp", part + ".tmp"]}
        part = os.path.join(self.root, ".up.haul-part")
        js = sorted(glob.glob(os.path.join(self.state, "haul", "resume", "*")))
        return {"dst": self.up_dst, "part": part, "journals": [j for j in js if j.endswith(".ranges")],
                "extra": [j for j in js if not j.endswith(".ranges")]}

    def snapshot(self, direction):
        p = self.paths(direction)
        held = 0
        jtext = []
        for j in p["journals"]:
            t = read_text(j)
            if t is not None:
                jtext.append(t.strip())
                try:
                    held += ranges_covered(t)
                except ValueError:
                    pass
        part = file_info(p["part"])
        dst_exists = os.path.exists(p["dst"])
        # Where the transfer was: no part file yet, data moving, all data in the part file
        # (verification or the rename pending), or the final name already there.
        if dst_exists:
            phase = "final-name"
        elif part is None:
            phase = "no-part-file"
        elif part["alloc"] < self.a.size:
            phase = "data"
        else:
            phase = "data-complete"
        return {"journal_bytes": held, "journal": ";".join(jtext)[:4000],
                "part_size": part["size"] if part else None, "part_alloc": part["alloc"] if part else None,
                "dst_exists": dst_exists, "phase": phase}

    def clean(self, direction):
        p = self.paths(direction)
        for f in [p["dst"], p["part"], *p["journals"], *p["extra"]]:
            try:
                os.unlink(f)
            except FileNotFoundError:
                pass

    def leftovers(self, direction):
        """Restart state left behind, and any file haul left in the served root or the client's
        directory besides the source and the destination."""
        p = self.paths(direction)
        out = [f for f in [p["part"], *p["journals"], *p["extra"]] if os.path.lexists(f)]
        expected = {self.src, self.src + ".meta.json", self.local_src, self.dl_dst, self.up_dst}
        for d in (self.root, self.local):
            out += [os.path.join(d, n) for n in sorted(os.listdir(d)) if os.path.join(d, n) not in expected and os.path.join(d, n) not in out]
        return out

    # ------------------------------------------------------------ one run of haul cp, maybe killed

    def run(self, direction, tag, kill=None, timeout=None):
        """Runs haul cp once. kill: None or (kind, delay_s). Returns the attempt's record."""
        if self.server is None or self.server.poll() is not None:
            if self.server is not None:
                self.log(f"server exited by itself (rc {self.server.returncode}); restarting")
                self.server = None
            self.start_server()
        before = self.snapshot(direction)
        t0 = now()
        p, cmd, outp, errp = self.start_client(direction, tag)
        rec = {"tag": tag, "held_before": before["journal_bytes"], "part_alloc_before": before["part_alloc"],
               "kill_planned": kill[0] if kill else None, "kill_delay_s": round(kill[1], 3) if kill else None,
               "killed": None, "rc": None, "timed_out": False}
        timeout = timeout or self.a.run_timeout
        delivered = False
        if kill:
            kind, delay = kill[0], kill[1]
            anchor = kill[2] if len(kill) > 2 else "start"
            t_anchor = t0
            if anchor == "data-complete":
                # Tail kills: the delay counts from the moment every byte is in the receiver's
                # part file (or the final name appeared), so they land in verification and renaming.
                part, dstp = self.paths(direction)["part"], self.paths(direction)["dst"]
                while p.poll() is None:
                    fi = file_info(part)
                    if (fi and fi["alloc"] >= self.a.size) or os.path.exists(dstp):
                        break
                    time.sleep(0.005)
                t_anchor = now()
                rec["data_complete_at_s"] = round(t_anchor - t0, 3)
            while p.poll() is None and now() - t_anchor < delay:
                time.sleep(0.005)
            if p.poll() is None:
                at = now() - t0
                order = []
                if kind == "client":
                    order = ["client"]
                elif kind == "server":
                    order = ["server"]
                else:
                    order = ["client", "server"] if self.rng.random() < 0.5 else ["server", "client"]
                for who in order:
                    if who == "client":
                        p.send_signal(signal.SIGKILL)
                    else:
                        self.kill_server()
                delivered = True
                rec["killed"] = kind
                rec["kill_order"] = "+".join(order)
                rec["kill_at_s"] = round(at, 3)
                if kind == "server":
                    # The client must notice on its own.
                    try:
                        p.wait(self.a.client_notice_timeout)
                        rec["client_exit_after_server_kill_s"] = round(now() - t0 - at, 3)
                    except subprocess.TimeoutExpired:
                        rec["client_hung_after_server_kill"] = True
                        self.log(f"  !! client still running {self.a.client_notice_timeout} s after the server was killed; killing it")
                        p.send_signal(signal.SIGKILL)
                p.wait()
                rec["exit_at_s"] = round(now() - t0, 3)
                snap = self.snapshot(direction)
                rec["at_kill"] = snap
                if snap["dst_exists"]:
                    # The final name appeared: it must already be the whole, right file.
                    d, n = sha256_file(self.paths(direction)["dst"])
                    rec["dst_at_kill_ok"] = (d == self.src_sha and n == self.a.size)
                    if not rec["dst_at_kill_ok"]:
                        rec["dst_at_kill_sha256"] = d
                        rec["dst_at_kill_size"] = n
        if not delivered:
            # Watch for the moment every byte is in the receiver's part file (or the final name
            # appeared): calibration derives the verification tail from it.
            part, dstp = self.paths(direction)["part"], self.paths(direction)["dst"]
            while p.poll() is None and now() - t0 < timeout:
                if "data_complete_at_s" not in rec:
                    fi = file_info(part)
                    if (fi and fi["alloc"] >= self.a.size) or os.path.exists(dstp):
                        rec["data_complete_at_s"] = round(now() - t0, 3)
                time.sleep(0.005)
            if p.poll() is None:
                rec["timed_out"] = True
                self.log(f"  !! {tag} still running after {timeout} s; killing it")
                p.send_signal(signal.SIGKILL)
            p.wait()
        rec["rc"] = p.returncode
        rec["duration_s"] = rec.get("exit_at_s", round(now() - t0, 3))
        rec["stderr_tail"] = tail(errp, 1500).strip()
        rec["client_log"] = os.path.basename(errp)
        if p.returncode == 0:
            try:
                with open(outp) as f:
                    j = json.load(f)
                rec["json"] = {k: j.get(k) for k in ("outcome", "files", "bytes", "duration_s", "throughput_bps", "verification",
                                                      "verified_files", "unverified_files", "retransferred_files", "checksum", "pieces")}
            except (OSError, ValueError) as e:
                rec["json_error"] = str(e)
        return rec

    # ------------------------------------------------------------ calibration

    def calibrate(self):
        self.cal = {}
        for direction in ("download", "upload"):
            ds, tails = [], []
            for k in range(self.a.calibration_runs):
                self.clean(direction)
                r = self.run(direction, f"cal-{direction}-{k}")
                if r["rc"] != 0:
                    raise RuntimeError(f"calibration {direction} failed: rc {r['rc']}: {r['stderr_tail']}")
                d, n = sha256_file(self.paths(direction)["dst"])
                ok = d == self.src_sha and n == self.a.size
                self.log(f"calibration {direction} {k}: {r['duration_s']:.1f} s wall (every byte at the receiver at {r.get('data_complete_at_s')} s), haul says {r['json']['duration_s']:.1f} s, "
                         f"{r['json']['bytes']} B, verified_files {r['json']['verified_files']}, sha256 {'ok' if ok else 'MISMATCH'}")
                if not ok:
                    raise RuntimeError(f"calibration {direction}: destination differs from the source")
                ds.append(r["duration_s"])
                tails.append(r["duration_s"] - r.get("data_complete_at_s", r["duration_s"]))
                self.clean(direction)
            # The median: a run slowed by a neighbour's burst should not stretch the kill window.
            self.cal[direction] = {"runs_s": ds, "mean_s": sorted(ds)[len(ds) // 2],
                                   "tails_s": [round(t, 3) for t in tails], "tail_s": sorted(tails)[len(tails) // 2]}
        return self.cal

    # ------------------------------------------------------------ one iteration

    def next_kind(self, direction):
        deck = self.decks[direction]
        if not deck:
            deck.extend(["client", "server", "both"])
            self.rng.shuffle(deck)
        return deck.pop()

    def iteration(self, i):
        a = self.a
        direction = "download" if i % 2 == 0 else "upload"
        self.clean(direction)
        T = self.cal[direction]["mean_s"]
        kinds = [self.next_kind(direction)]
        if a.kill_phase == "tail":
            # Within the calibrated tail (verification and rename) with a 20% margin, or --tail-window.
            w = a.tail_window if a.tail_window else max(0.05, 1.2 * self.cal[direction]["tail_s"])
            delays = [self.rng.uniform(0, w)]
        else:
            delays = [self.rng.uniform(a.kill_lo, a.kill_hi) * T]
        second = self.rng.random() < a.second_kill
        if second:
            kinds.append(self.rng.choice(["client", "server", "both"]))
            delays.append(None)  # drawn when the first resume starts (depends on what is held)
        second_u = self.rng.uniform(a.kill_lo, a.kill_hi)
        rec = {"iteration": i, "direction": direction, "planned_kills": kinds, "attempts": []}
        t_iter = now()
        failed_resumes = 0
        k = 0
        success = None
        while True:
            kill = None
            if k < len(kinds):
                d = delays[k]
                if d is None:
                    held = self.snapshot(direction)["journal_bytes"]
                    missing = 1 - held / a.size
                    d = second_u * T * max(missing, 0.25)
                    delays[k] = d
                kill = (kinds[k], d, "data-complete" if k == 0 and a.kill_phase == "tail" else "start")
            tag = f"i{i:03d}-{'first' if k == 0 else 'resume' + str(k)}"
            r = self.run(direction, tag, kill)
            rec["attempts"].append(r)
            desc = f"  {tag}: rc {r['rc']} after {r['duration_s']:.1f} s, held before {r['held_before']}"
            if r["killed"]:
                desc += (f"; killed {r['killed']} ({r['kill_order']}) at {r['kill_at_s']:.2f} s, journal {r['at_kill']['journal_bytes']}"
                         f" B, part alloc {r['at_kill']['part_alloc']}, phase {r['at_kill']['phase']}")
                if "client_exit_after_server_kill_s" in r:
                    desc += f", client exited {r['client_exit_after_server_kill_s']:.2f} s after the server kill"
            elif kill:
                desc += f"; finished before its {kill[0]} kill at {kill[1]:.2f} s"
            if r["rc"] == 0 and "json" in r:
                desc += f"; moved {r['json']['bytes']} B, retransferred {r['json']['retransferred_files']}"
            self.log(desc)
            if r.get("dst_at_kill_ok") is False:
                rec["result"] = "BAD-VISIBLE-DST"
                self.log(f"  !! the destination's final name held a wrong file at a kill")
                break
            k += 1
            if r["rc"] == 0:
                success = r
                break
            if not r["killed"]:
                failed_resumes += 1
                self.log(f"  resume failed without a kill (rc {r['rc']}): {r['stderr_tail'][-300:]!r}")
                if failed_resumes > a.max_failed_resumes:
                    rec["result"] = "GAVE-UP"
                    break
                time.sleep(min(2 ** (failed_resumes - 1), 10))
        rec["wall_s"] = round(now() - t_iter, 1)
        kills = [x for x in rec["attempts"] if x["killed"]]
        rec["kills_delivered"] = len(kills)
        rec["kills_missed"] = sum(1 for x in rec["attempts"] if x["kill_planned"] and not x["killed"])
        rec["runs"] = len(rec["attempts"])
        rec["resumes"] = len(rec["attempts"]) - 1
        rec["failed_resumes"] = failed_resumes
        if success:
            j = success.get("json") or {}
            dst = self.paths(direction)["dst"]
            t = now()
            digest, n = sha256_file(dst) if os.path.exists(dst) else (None, 0)
            rec["hash_s"] = round(now() - t, 1)
            rec["dst_size"] = n
            rec["dst_sha256"] = digest
            rec["size_ok"] = n == a.size
            rec["hash_ok"] = digest == self.src_sha
            rec["verified_files"] = j.get("verified_files")
            rec["retransferred_files"] = j.get("retransferred_files")
            rec["final_bytes_moved"] = j.get("bytes")
            rec["final_held_before"] = success["held_before"]
            # Bytes the successful run moved beyond the gaps its journal named (re-sent bytes).
            if j.get("bytes") is not None:
                rec["final_resent"] = j["bytes"] - (a.size - success["held_before"])
            rec["leftovers"] = self.leftovers(direction)
            if rec["size_ok"] and rec["hash_ok"] and j.get("verified_files") == 1 and not rec["leftovers"]:
                rec["result"] = "ok"
            elif not (rec["size_ok"] and rec["hash_ok"]):
                rec["result"] = "MISMATCH"
            elif j.get("verified_files") != 1:
                rec["result"] = "NOT-VERIFIED"
            else:
                rec["result"] = "LEFTOVERS"
        rec.setdefault("result", "FAILED")
        first_kill = kills[0] if kills else None
        self.log(f"iteration {i} {direction}: {rec['result']}; kills {[x['killed'] for x in kills]}, "
                 f"resumes {rec['resumes']}, wall {rec['wall_s']} s"
                 + (f", first kill at {first_kill['kill_at_s']:.2f} s / {first_kill['at_kill']['journal_bytes']} B journaled" if first_kill else ""))
        if rec["result"] != "ok":
            self.evidence(rec)
        return rec

    def evidence(self, rec):
        """Keeps what is needed to explain a bad iteration: logs, restart-state sizes, a diff."""
        i = rec["iteration"]
        direction = rec["direction"]
        ev = os.path.join(self.out, f"evidence-i{i:03d}")
        os.makedirs(ev, exist_ok=True)
        p = self.paths(direction)
        info = {"paths": p, "snapshot": self.snapshot(direction), "leftovers": self.leftovers(direction),
                "files": {f: file_info(f) for f in [p["dst"], p["part"], *p["journals"]]},
                "journals": {f: read_text(f) for f in p["journals"]}}
        if rec["result"] == "MISMATCH" and os.path.exists(p["dst"]):
            self.log("  computing the byte diff against the source ...")
            info["diff"] = diff_summary(self.src, p["dst"], self.a.size)
            keep = os.path.join(self.work, f"bad-dst-i{i:03d}")
            os.replace(p["dst"], keep)
            info["kept_dst"] = keep
        with open(os.path.join(ev, "evidence.json"), "w") as f:
            json.dump({"iteration": rec, "state": info}, f, indent=1)
        for x in rec["attempts"]:
            src = os.path.join(self.logs, x["client_log"])
            if os.path.exists(src):
                shutil.copy(src, ev)
        for s in sorted(glob.glob(os.path.join(self.logs, "server-*.log")))[-3:]:
            shutil.copy(s, ev)
        self.log(f"  evidence in {ev}")

    # ------------------------------------------------------------ output

    CSV_FIELDS = ["iteration", "direction", "result", "kills_delivered", "kill_kinds", "kill_at_s", "kill_journal_bytes",
                  "kill_part_alloc", "kill_phase", "kills_missed", "resumes", "failed_resumes", "final_held_before", "final_bytes_moved",
                  "final_resent", "retransferred_files", "verified_files", "dst_size", "size_ok", "hash_ok", "leftovers", "wall_s"]

    def write(self, meta):
        rows = []
        for r in self.records:
            kills = [x for x in r["attempts"] if x["killed"]]
            rows.append({
                "iteration": r["iteration"], "direction": r["direction"], "result": r["result"],
                "kills_delivered": r["kills_delivered"],
                # One entry per kill, separated by ';'. "both:server+client" names the order.
                "kill_kinds": ";".join(f"both:{x['kill_order']}" if x["killed"] == "both" else x["killed"] for x in kills),
                "kill_at_s": ";".join(f"{x['kill_at_s']:.2f}" for x in kills),
                "kill_journal_bytes": ";".join(str(x["at_kill"]["journal_bytes"]) for x in kills),
                "kill_part_alloc": ";".join(str(x["at_kill"]["part_alloc"]) for x in kills),
                "kill_phase": ";".join(x["at_kill"]["phase"] for x in kills),
                "kills_missed": r["kills_missed"], "resumes": r["resumes"], "failed_resumes": r["failed_resumes"],
                "final_held_before": r.get("final_held_before"), "final_bytes_moved": r.get("final_bytes_moved"),
                "final_resent": r.get("final_resent"), "retransferred_files": r.get("retransferred_files"),
                "verified_files": r.get("verified_files"), "dst_size": r.get("dst_size"), "size_ok": r.get("size_ok"),
                "hash_ok": r.get("hash_ok"), "leftovers": ";".join(r.get("leftovers") or []), "wall_s": r["wall_s"],
            })
        with open(os.path.join(self.out, "iterations.csv"), "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=self.CSV_FIELDS)
            w.writeheader()
            w.writerows(rows)
        with open(os.path.join(self.out, "iterations.json"), "w") as f:
            json.dump(self.records, f, indent=1)
        s = self.summary()
        with open(os.path.join(self.out, "summary.json"), "w") as f:
            json.dump({"meta": meta, "summary": s}, f, indent=1)
        with open(os.path.join(self.out, "summary.md"), "w") as f:
            f.write(self.table(meta, s))
        return s

    def summary(self):
        R = self.records
        att = [x for r in R for x in r["attempts"]]
        kills = [x for x in att if x["killed"]]
        by = lambda k: sum(1 for x in kills if x["killed"] == k)
        dirkill = lambda d, k: sum(1 for r in R if r["direction"] == d for x in r["attempts"] if x["killed"] == k)
        notice = [x["client_exit_after_server_kill_s"] for x in kills if "client_exit_after_server_kill_s" in x]
        done = [r for r in R if "dst_size" in r]
        rcs = {}
        for x in kills:
            if x["killed"] == "server":
                rcs[str(x["rc"])] = rcs.get(str(x["rc"]), 0) + 1
        failed_rcs = {}
        for x in att:
            if not x["killed"] and x["rc"] != 0:
                failed_rcs[str(x["rc"])] = failed_rcs.get(str(x["rc"]), 0) + 1
        resent = [r["final_resent"] for r in R if r.get("final_resent") is not None]
        # Bytes the receiver had written at a kill that its journal did not name yet (the journal
        # is saved once per sample interval; upload journals follow the server's 111 markers):
        # the resume sends them again.
        unjournaled = sorted(max(0, (x["at_kill"]["part_alloc"] or 0) - x["at_kill"]["journal_bytes"]) for x in kills)
        busy = [x for x in att if not x["killed"] and x["rc"] != 0 and "another upload to this file is in progress" in x.get("stderr_tail", "")]
        return {
            "iterations": len(R),
            "downloads": sum(1 for r in R if r["direction"] == "download"),
            "uploads": sum(1 for r in R if r["direction"] == "upload"),
            "kill_points": len(kills),
            "kills_client": by("client"), "kills_server": by("server"), "kills_both": by("both"),
            "kills_by_direction": {d: {k: dirkill(d, k) for k in ("client", "server", "both")} for d in ("download", "upload")},
            "kills_missed_transfer_already_done": sum(r["kills_missed"] for r in R),
            "iterations_with_2_kills": sum(1 for r in R if r["kills_delivered"] >= 2),
            "kill_at_fraction_of_calibrated": [round(x["kill_at_s"] / self.cal[r["direction"]]["mean_s"], 3) for r in R for x in r["attempts"] if x["killed"]],
            "kills_with_data_journaled": sum(1 for x in kills if x["at_kill"]["journal_bytes"] > 0),
            "kills_by_phase": {ph: sum(1 for x in kills if x["at_kill"]["phase"] == ph) for ph in ("no-part-file", "data", "data-complete", "final-name")},
            "kills_after_final_name_appeared": sum(1 for x in kills if x["at_kill"]["dst_exists"]),
            "resumes": sum(r["resumes"] for r in R),
            "failed_resumes_without_kill": sum(r["failed_resumes"] for r in R),
            "failed_resume_exit_codes": failed_rcs,
            "failed_resumes_450_upload_in_progress": len(busy),
            "unjournaled_bytes_at_kill_median": unjournaled[len(unjournaled) // 2] if unjournaled else None,
            "unjournaled_bytes_at_kill_max": unjournaled[-1] if unjournaled else None,
            "unjournaled_bytes_at_kill_total": sum(unjournaled),
            "client_exit_codes_after_server_kill": rcs,
            "client_exit_after_server_kill_s_max": max(notice) if notice else None,
            "client_hangs_after_server_kill": sum(1 for x in kills if x.get("client_hung_after_server_kill")),
            "runs_timed_out": sum(1 for x in att if x["timed_out"]),
            "succeeded": sum(1 for r in R if r["result"] == "ok"),
            "bytes_compared": sum(r["dst_size"] for r in done),
            "mismatches": sum(1 for r in R if r["result"] == "MISMATCH"),
            "size_mismatches": sum(1 for r in done if not r["size_ok"]),
            "hash_mismatches": sum(1 for r in done if not r["hash_ok"]),
            "wrong_file_under_final_name_at_a_kill": sum(1 for x in kills if x.get("dst_at_kill_ok") is False),
            "not_verified": sum(1 for r in R if r["result"] == "NOT-VERIFIED"),
            "retransferred_after_checksum_mismatch": sum((r.get("retransferred_files") or 0) for r in R),
            "leftover_restart_files": sum(1 for r in R if r.get("leftovers")),
            "failures": sum(1 for r in R if r["result"] not in ("ok",)),
            "final_run_resent_bytes_total": sum(resent),
            "final_run_resent_bytes_max": max(resent) if resent else None,
            "final_run_bytes_moved_total": sum((r.get("final_bytes_moved") or 0) for r in R),
            "wall_s": round(sum(r["wall_s"] for r in R), 1),
        }

    def table(self, meta, s):
        G = lambda b: f"{b / GiB:,.2f} GiB"
        rows = [
            ("iterations (downloads / uploads)", f"{s['iterations']} ({s['downloads']} / {s['uploads']})"),
            ("kill points delivered", s["kill_points"]),
            ("  client / server / both", f"{s['kills_client']} / {s['kills_server']} / {s['kills_both']}"),
            ("  download: client / server / both", "{client} / {server} / {both}".format(**s["kills_by_direction"]["download"])),
            ("  upload: client / server / both", "{client} / {server} / {both}".format(**s["kills_by_direction"]["upload"])),
            ("  iterations killed twice (first resume killed too)", s["iterations_with_2_kills"]),
            ("  planned kills not delivered (the run had ended first)", s["kills_missed_transfer_already_done"]),
            ("  kills with data journaled / after the final name appeared", f"{s['kills_with_data_journaled']} / {s['kills_after_final_name_appeared']}"),
            ("  phase at kill: no part file / data / data complete / final name", "{no-part-file} / {data} / {data-complete} / {final-name}".format(**s["kills_by_phase"])),
            ("resumes (haul cp --resume runs after the first)", s["resumes"]),
            ("  resumes that failed without a kill (exit codes)", f"{s['failed_resumes_without_kill']} {s['failed_resume_exit_codes'] or ''}"),
            ("    of which `450 another upload to this file is in progress`", s.get("failed_resumes_450_upload_in_progress")),
            ("client exit codes after a server-only kill", s["client_exit_codes_after_server_kill"]),
            ("  slowest client exit after a server-only kill", f"{s['client_exit_after_server_kill_s_max']} s"),
            ("client hangs / runs timed out", f"{s['client_hangs_after_server_kill']} / {s['runs_timed_out']}"),
            ("transfers completed and verified by haul", s["succeeded"]),
            ("bytes compared (SHA-256 of destination vs source)", f"{s['bytes_compared']:,} B ({G(s['bytes_compared'])})"),
            ("destinations differing in size / hash", f"{s['size_mismatches']} / {s['hash_mismatches']}"),
            ("wrong file under the final name at a kill", s["wrong_file_under_final_name_at_a_kill"]),
            ("files re-sent after a checksum mismatch (haul's own check)", s["retransferred_after_checksum_mismatch"]),
            ("restart files left after success", s["leftover_restart_files"]),
            ("bytes written but not yet journaled at a kill: median / max", f"{(s.get('unjournaled_bytes_at_kill_median') or 0) / 2**20:,.0f} MiB / {(s.get('unjournaled_bytes_at_kill_max') or 0) / 2**20:,.0f} MiB"),
            ("final resume: bytes moved / beyond the journal's gaps", f"{G(s['final_run_bytes_moved_total'])} / {s['final_run_resent_bytes_total']:,} B (max {s['final_run_resent_bytes_max']})"),
            ("failures (any iteration not ok)", s["failures"]),
            ("time in iterations (transfers and resumes, without hashing)", f"{s['wall_s'] / 60:.1f} min"),
            ("campaign elapsed (calibration and SHA-256 included)", f"{meta.get('elapsed_s', 0) / 60:.1f} min"),
        ]
        w = max(len(r[0]) for r in rows)
        mode = ("first kill of each iteration at a random point of the calibrated duration" if meta.get("kill_phase", "any") == "any"
                else "first kill of each iteration within " + (f"{meta['tail_window_s']} s" if meta.get("tail_window_s") else "1.2 x the calibrated verification tail")
                + " after the receiver held every byte")
        out = [f"# Kill-point campaign {meta['started_utc']} ({mode})", "",
               f"haul {meta['haul_head']} (crates at {meta['haul_crates_commit']}), binary sha256 {meta['bin_sha256'][:16]}…, "
               f"{meta['size']:,} B source (sha256 {meta['source_sha256'][:16]}…), -p {meta['parallelism']}, seed {meta['seed']}", "",
               f"| {'what'.ljust(w)} | value |", f"|{'-' * (w + 2)}|-------|"]
        out += [f"| {k.ljust(w)} | {v} |" for k, v in rows]
        return "\n".join(out) + "\n"


def summarize(d):
    with open(os.path.join(d, "summary.json")) as f:
        meta = json.load(f)["meta"]
    c = Campaign.__new__(Campaign)
    with open(os.path.join(d, "iterations.json")) as f:
        c.records = json.load(f)
    c.cal = meta["calibration"]
    c.out = d
    s = c.write(meta)
    print(c.table(meta, s))
    return 0


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    repo = os.path.dirname(here)
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=os.environ.get("HAUL_BIN", os.path.join(repo, "target/release/haul")),
                    help="haul binary (env HAUL_BIN; default target/release/haul of this repo); copied into --work first")
    ap.add_argument("--work", default=os.environ.get("KILLPOINTS_WORK", "/tmp/haul-killpoints"),
                    help="scratch directory: source, server root, destinations, logs (default /tmp/haul-killpoints)")
    ap.add_argument("--out", default=None, help="results directory (default bench/results/killpoints-<UTC date>-<short commit>)")
    ap.add_argument("--size", type=int, default=4 * GiB, help="source size in bytes (default 4 GiB)")
    ap.add_argument("--seed", type=int, default=20261124)
    ap.add_argument("--source-gen", choices=["aes-ctr", "urandom", "python"], default="aes-ctr" if shutil.which("openssl") else "python",
                    help="source bytes: AES-128-CTR keystream of a seed-derived key via openssl (default), /dev/urandom, or Python's seeded Mersenne Twister (slow)")
    ap.add_argument("--iterations", type=int, default=100, help="at least this many iterations (default 100)")
    ap.add_argument("--min-kills", type=int, default=100, help="keep going past --iterations until this many kills were delivered (default 100)")
    ap.add_argument("--max-iterations", type=int, default=None, help="hard cap (default 2 x --iterations)")
    ap.add_argument("-p", "--parallelism", type=int, default=4)
    ap.add_argument("--cp-arg", action="append", default=[], help="extra haul cp argument (repeatable)")
    ap.add_argument("--port", type=int, default=0, help="server port (default: one picked at the first start, kept for restarts)")
    ap.add_argument("--second-kill", type=float, default=0.3, help="probability that the first resume is killed too (default 0.3)")
    ap.add_argument("--kill-lo", type=float, default=0.02, help="kill delay, lowest fraction of the calibrated duration")
    ap.add_argument("--kill-hi", type=float, default=0.98, help="kill delay, highest fraction of the calibrated duration")
    ap.add_argument("--kill-phase", choices=["any", "tail"], default="any",
                    help="any: the first kill of an iteration lands at a random point of the calibrated duration (default); "
                         "tail: at a random delay in [0, --tail-window] after the receiver holds every byte, i.e. during "
                         "verification, the rename and the journal's removal (later kills stay time-based)")
    ap.add_argument("--tail-window", type=float, default=None,
                    help="seconds after data completion for --kill-phase tail (default: 1.2 x the calibrated time from data completion to exit)")
    ap.add_argument("--calibration-runs", type=int, default=3, help="uninterrupted runs per direction; the median sets the kill window")
    ap.add_argument("--max-failed-resumes", type=int, default=8)
    ap.add_argument("--run-timeout", type=float, default=900, help="seconds one haul cp may run before it counts as hung")
    ap.add_argument("--client-notice-timeout", type=float, default=180, help="seconds the client may keep running after a server-only kill")
    ap.add_argument("--server-log", default="info", help="HAUL_LOG for haul serve (default info)")
    ap.add_argument("--client-log", default="", help="HAUL_LOG for haul cp (default: unset)")
    ap.add_argument("--keep-going", action="store_true", help="do not stop at a mismatch")
    ap.add_argument("--summarize", metavar="RESULTS_DIR", help="only rebuild iterations.csv, summary.md and summary.json of a finished campaign from its iterations.json")
    a = ap.parse_args()
    a.max_iterations = a.max_iterations or 2 * a.iterations
    if a.summarize:
        return summarize(a.summarize)

    head = git(repo, "rev-parse", "--short", "HEAD") or "unknown"
    started = utc_stamp()
    a.started = started
    if a.out is None:
        a.out = os.path.join(here, "results", f"killpoints-{started[:8]}-{head}")
    if not os.access(a.bin, os.X_OK):
        sys.exit(f"haul binary not found: {a.bin} (set HAUL_BIN or --bin)")
    os.makedirs(a.work, exist_ok=True)
    # A copy, so a rebuild of target/ cannot change the binary mid-campaign.
    binc = os.path.join(os.path.abspath(a.work), "haul")
    shutil.copy2(a.bin, binc)
    bin_sha, _ = sha256_file(binc)
    orig_bin = a.bin
    a.bin = binc

    c = Campaign(a)
    meta = {
        "started_utc": started, "command": " ".join(sys.argv), "bin": orig_bin, "bin_sha256": bin_sha,
        "haul_head": git(repo, "rev-parse", "HEAD"), "haul_branch": git(repo, "rev-parse", "--abbrev-ref", "HEAD"),
        "haul_crates_commit": git(repo, "log", "-1", "--format=%H", "--", "crates", "Cargo.toml", "Cargo.lock"),
        "haul_dirty": bool(git(repo, "status", "--porcelain", "--", "crates", "Cargo.toml", "Cargo.lock")),
        "size": a.size, "seed": a.seed, "source_gen": a.source_gen, "parallelism": a.parallelism, "cp_args": a.cp_arg,
        "second_kill": a.second_kill, "kill_window": [a.kill_lo, a.kill_hi], "kill_phase": a.kill_phase, "tail_window_s": a.tail_window,
        "host": {"kernel": platform.release(), "cpus": os.cpu_count(), "python": platform.python_version(),
                 "loadavg_at_start": os.getloadavg()},
        "hash": "SHA-256 (Python hashlib) of the source and of every destination, computed outside haul",
    }
    c.log(f"kill-point campaign: {meta['command']}")
    c.log(f"binary {orig_bin} (sha256 {bin_sha[:16]}), haul HEAD {meta['haul_head']}, results {a.out}")
    t_start = now()
    try:
        smeta = c.make_source()
        meta["source_sha256"] = c.src_sha
        meta["source"] = smeta
        meta["source_hash_s"] = round(c.hash_s, 1)
        c.start_server()
        meta["port"] = c.port
        c.log(f"haul serve on 127.0.0.1:{c.port}")
        meta["calibration"] = c.calibrate()
        i = 0
        while i < a.max_iterations:
            kills = sum(r["kills_delivered"] for r in c.records)
            if i >= a.iterations and kills >= a.min_kills:
                break
            rec = c.iteration(i)
            c.records.append(rec)
            meta["elapsed_s"] = round(now() - t_start, 1)
            c.write(meta)
            if rec["result"] in ("MISMATCH", "BAD-VISIBLE-DST") and not a.keep_going:
                c.log("STOPPING: a destination differs from the source")
                break
            c.clean(rec["direction"])
            i += 1
        c.log("re-hashing the source (it must not have changed)")
        d, n = sha256_file(c.src)
        meta["source_unchanged_at_end"] = d == c.src_sha and n == a.size
    finally:
        c.stop_server()
        meta["ended_utc"] = utc_stamp()
        meta["elapsed_s"] = round(now() - t_start, 1)
        meta["loadavg_at_end"] = os.getloadavg()
        if c.records:
            s = c.write(meta)
            print()
            print(c.table(meta, s))
    return 0 if c.records and all(r["result"] == "ok" for r in c.records) else 1


if __name__ == "__main__":
    sys.exit(main())
