//! Helpers shared by the integration tests that run the real `haul` binary.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};

/// Reproducible pseudo-random bytes (xorshift64*).
pub fn random_bytes(n: usize, mut seed: u64) -> Vec<u8> {
    let mut v = Vec::with_capacity(n + 8);
    while v.len() < n {
        seed ^= seed >> 12;
        seed ^= seed << 25;
        seed ^= seed >> 27;
        v.extend_from_slice(&seed.wrapping_mul(0x2545_F491_4F6C_DD1D).to_le_bytes());
    }
    v.truncate(n);
    v
}

/// Marks `path` as last written an hour ago: settled, so a haul server may hash it as it
/// sends it and answer the `CKSM` from that digest.
#[allow(dead_code)]
pub fn settle(path: &Path) {
    std::fs::File::options()
        .write(true)
        .open(path)
        .unwrap()
        .set_modified(std::time::SystemTime::now() - std::time::Duration::from_secs(3600))
        .unwrap();
}

/// A `haul serve` child on a free loopback port, killed on drop.
pub struct Serve {
    child: Child,
    /// `127.0.0.1:PORT` as the server printed it.
    pub addr: String,
}

impl Serve {
    /// Kills the server now (SIGKILL), as a crash would.
    #[allow(dead_code)]
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `haul serve --root ROOT` with `extra` flags and waits for its listen line.
pub fn serve(root: &Path, extra: &[&str]) -> Serve {
    let (child, addr) = listening(serve_command(root, extra), "haul serve: listening on ");
    Serve { child, addr }
}

/// As [`serve`], with Prometheus metrics on a port of the server's choosing: the server and
/// the metrics endpoint's `host:port`.
pub fn serve_with_metrics(root: &Path, extra: &[&str]) -> (Serve, String) {
    let mut cmd = serve_command(root, extra);
    cmd.args(["--metrics", "127.0.0.1:0"]);
    let (child, mut found) = listening_lines(
        cmd,
        &[
            "haul serve: listening on ",
            "haul serve: metrics on http://",
        ],
    );
    let metrics = found.pop().expect("metrics line");
    let metrics = metrics
        .strip_suffix("/metrics")
        .unwrap_or(&metrics)
        .to_string();
    let addr = found.pop().expect("listen line");
    (Serve { child, addr }, metrics)
}

/// `haul serve --listen 127.0.0.1:0 --root ROOT EXTRA`, without history unless asked.
fn serve_command(root: &Path, extra: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_haul"));
    cmd.args(["serve", "--listen", "127.0.0.1:0", "--root"])
        .arg(root)
        .args(extra);
    // Servers under test keep no history unless the test asks for one.
    if !extra.contains(&"--history") {
        cmd.arg("--no-history");
    }
    cmd
}

/// `haul serve --anonymous` over `root` that relays for loopback clients anonymously.
pub fn relay_for_loopback(root: &Path) -> Serve {
    serve(
        root,
        &[
            "--anonymous",
            "--relay-allow",
            "127.0.0.1",
            "--relay-anonymous",
        ],
    )
}

/// An `XDG_CONFIG_HOME` under `dir` whose `haul/services.toml` prices `relay` at 0.
pub fn services_config(dir: &Path, relay: &str) -> std::path::PathBuf {
    let config = dir.join("config");
    std::fs::create_dir_all(config.join("haul")).unwrap();
    std::fs::write(
        config.join("haul/services.toml"),
        format!("[[relay]]\naddress = \"{relay}\"\ncost = 0\n"),
    )
    .unwrap();
    config
}

/// Starts `haul serve --listen IP:0 --anonymous --root ROOT --history DB` with `extra` flags:
/// a server on its own loopback address (127.0.0.2, …), so that hosts are told apart by
/// address as servers name their peers.
pub fn serve_history_on(ip: &str, root: &Path, db: &Path, extra: &[&str]) -> Serve {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_haul"));
    cmd.args([
        "serve",
        "--listen",
        &format!("{ip}:0"),
        "--anonymous",
        "--root",
    ])
    .arg(root)
    .arg("--history")
    .arg(db)
    .args(extra);
    let (child, addr) = listening(cmd, "haul serve: listening on ");
    Serve { child, addr }
}

/// Seeds the history `db` with three transfers of 64 MiB that `server` served to `peer` at
/// `mbit` Mbit/s, ten minutes apart, the newest ending `newest_age_s` seconds ago.
pub fn seed_served(db: &Path, server: &str, peer: &str, mbit: f64, newest_age_s: f64) {
    use haul_store::{Outcome, Params, Store, TransferRecord};
    let mut store = Store::open(db).unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    for k in 0..3 {
        let bytes = 64u64 << 20;
        let duration_s = bytes as f64 * 8.0 / (mbit * 1e6);
        store
            .insert(&TransferRecord {
                id: None,
                kind: "serve".into(),
                started_at: now - newest_age_s - 600.0 * k as f64 - duration_s,
                duration_s,
                source: "/f.bin".into(),
                destination: peer.into(),
                source_host: server.into(),
                destination_host: peer.into(),
                params: Params::default(),
                files: 1,
                bytes,
                outcome: Outcome::Ok,
                error: None,
                samples: Vec::new(),
            })
            .unwrap();
    }
}

/// An origin and a relay whose shared predictions make the chain the better route: the origin
/// (127.0.0.2) serves `f.bin` and is predicted at 10 Mbit/s to the client (127.0.0.1) and 200
/// to the relay (127.0.0.3), which relays to it anonymously and is predicted at 150 to the
/// client. Their histories are seeded before they start: the records name peers by address,
/// so the ports are not needed.
pub struct Chain {
    /// The origin.
    pub origin: Serve,
    /// The relay.
    pub relay: Serve,
    /// Their roots and histories.
    _dirs: [tempfile::TempDir; 3],
}

impl Chain {
    /// Starts both, with `data` as the origin's `f.bin`.
    pub fn start(data: &[u8]) -> Chain {
        let [o, r, h] = [(); 3].map(|_| tempfile::tempdir().unwrap());
        let (odb, rdb) = (h.path().join("o.sqlite"), h.path().join("r.sqlite"));
        std::fs::write(o.path().join("f.bin"), data).unwrap();
        seed_served(&odb, "127.0.0.2:2811", "127.0.0.1", 10.0, 60.0);
        seed_served(&odb, "127.0.0.2:2811", "127.0.0.3", 200.0, 60.0);
        seed_served(&rdb, "127.0.0.3:2811", "127.0.0.1", 150.0, 60.0);
        let origin = serve_history_on("127.0.0.2", o.path(), &odb, &[]);
        let relay = ["--relay-allow", "127.0.0.2", "--relay-anonymous"];
        let relay = serve_history_on("127.0.0.3", r.path(), &rdb, &relay);
        Chain {
            origin,
            relay,
            _dirs: [o, r, h],
        }
    }
}

/// Runs `haul route ARGS --json --history HIST`, which must succeed; its JSON report and its
/// standard error.
pub fn route_json(args: &[&str], hist: &Path) -> (serde_json::Value, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_haul"))
        .arg("route")
        .args(args)
        .arg("--json")
        .arg("--history")
        .arg(hist)
        .output()
        .expect("run haul route");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "haul route {args:?}: {stderr}");
    (serde_json::from_slice(&out.stdout).unwrap(), stderr)
}

/// Starts `cmd`, a haul server, and reads the address from its first line, `PREFIX ADDR`.
pub fn listening(cmd: Command, prefix: &str) -> (Child, String) {
    let (child, mut found) = listening_lines(cmd, &[prefix]);
    (child, found.remove(0))
}

/// Starts `cmd`, a haul server, and reads one line per prefix from its output, in order,
/// each `PREFIX VALUE`; returns the values.
pub fn listening_lines(mut cmd: Command, prefixes: &[&str]) -> (Child, Vec<String>) {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the server");
    let mut out = BufReader::new(child.stdout.take().expect("stdout"));
    let found = prefixes
        .iter()
        .map(|prefix| {
            let mut line = String::new();
            out.read_line(&mut line).expect("the server's line");
            line.trim()
                .strip_prefix(prefix)
                .unwrap_or_else(|| panic!("expected {prefix:?}, got {line:?}"))
                .to_string()
        })
        .collect();
    (child, found)
}

/// Runs `haul cp ARGS --history HISTORY`, echoing its output for failure diagnosis.
pub fn cp(args: &[&str], history: &Path) -> Output {
    cp_env(args, history, &[])
}

/// [`cp`] with extra environment variables (`HAUL_LOG`, say).
pub fn cp_env(args: &[&str], history: &Path, env: &[(&str, &str)]) -> Output {
    let out = Command::new(env!("CARGO_BIN_EXE_haul"))
        .arg("cp")
        .args(args)
        .arg("--history")
        .arg(history)
        .envs(env.iter().copied())
        .output()
        .expect("run haul cp");
    eprintln!(
        "haul cp {args:?}: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// [`cp`] that must end within `limit`: a run still going then is killed and the test fails,
/// so a client that loops forever on hostile input cannot hang the suite.
pub fn cp_within(args: &[&str], history: &Path, limit: std::time::Duration) -> Output {
    cp_within_env(args, history, limit, &[])
}

/// [`cp_within`] with these environment variables set.
pub fn cp_within_env(
    args: &[&str],
    history: &Path,
    limit: std::time::Duration,
    env: &[(&str, &str)],
) -> Output {
    let child = Command::new(env!("CARGO_BIN_EXE_haul"))
        .arg("cp")
        .args(args)
        .arg("--history")
        .arg(history)
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run haul cp");
    let pid = child.id().to_string();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || tx.send(child.wait_with_output()));
    let (out, late) = match rx.recv_timeout(limit) {
        Ok(out) => (out, false),
        Err(_) => {
            // Killing our late child ends its wait, which then hands over what it printed.
            let _ = Command::new("kill").args(["-KILL", &pid]).status();
            (rx.recv().expect("the waiting thread reports"), true)
        }
    };
    let out = out.expect("wait for haul cp");
    eprintln!(
        "haul cp {args:?}: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!late, "haul cp {args:?} still running after {limit:?}");
    out
}

/// A raw control connection to a server, for tests that speak the protocol themselves.
pub struct RawControl {
    s: std::net::TcpStream,
    p: haul_proto::ReplyParser,
}

impl RawControl {
    /// Connects and reads the greeting.
    pub fn connect(addr: &str) -> RawControl {
        let s = std::net::TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(std::time::Duration::from_secs(30)))
            .unwrap();
        let mut c = RawControl {
            s,
            p: haul_proto::ReplyParser::new(),
        };
        c.reply();
        c
    }

    /// The next reply, as `CODE text`.
    pub fn reply(&mut self) -> String {
        let r = self.next_reply();
        format!("{} {}", r.code, r.text())
    }

    /// Sends one command line and returns its reply, parsed.
    pub fn request(&mut self, line: &str) -> haul_proto::Reply {
        use std::io::Write;
        self.s.write_all(format!("{line}\r\n").as_bytes()).unwrap();
        self.next_reply()
    }

    /// The next reply.
    pub fn next_reply(&mut self) -> haul_proto::Reply {
        use std::io::Read;
        let mut buf = [0u8; 4096];
        loop {
            if let Some(r) = self.p.next_reply().unwrap() {
                return r;
            }
            let n = self.s.read(&mut buf).unwrap();
            assert!(n > 0, "server closed the control connection");
            self.p.extend(&buf[..n]);
        }
    }

    /// Sends one command line and returns its reply.
    pub fn cmd(&mut self, line: &str) -> String {
        let r = self.request(line);
        format!("{} {}", r.code, r.text())
    }
}

/// `haul send SRC DST --history HIST --json EXTRA` with `env` set, echoing its stderr for
/// failure diagnosis; its JSON report (null when stdout is not JSON).
pub fn send_json(
    src: &str,
    dst: &Path,
    hist: &Path,
    extra: &[&str],
    env: &[(&str, &str)],
) -> (Output, serde_json::Value) {
    let out = Command::new(env!("CARGO_BIN_EXE_haul"))
        .args(["send", src])
        .arg(dst)
        .arg("--history")
        .arg(hist)
        .arg("--json")
        .args(extra)
        .envs(env.iter().copied())
        .output()
        .expect("run haul send");
    eprintln!(
        "haul send {extra:?}: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let j = serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null);
    (out, j)
}

/// The body of `GET PATH` from an HTTP server at `addr` (a `--metrics` endpoint).
pub fn http_get(addr: &str, path: &str) -> String {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out.split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default()
}

/// A counter or gauge's value in Prometheus text from `haul serve --metrics` (0 when absent).
pub fn metric(text: &str, name: &str) -> f64 {
    text.lines()
        .filter_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
        .next()
        .unwrap_or(0.0)
}
