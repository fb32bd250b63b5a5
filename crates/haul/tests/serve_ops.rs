//! Operating `haul serve` as the real binary: SIGHUP reloads the users file mid-transfer,
//! SIGTERM drains (new connections refused, the running transfer finishes, or, past
//! `--drain-timeout`, is cut and resumes), and a real Prometheus scrapes `--metrics`.
mod common;

use common::haul::*;

use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// A `haul serve` child with its stdout lines read and its stderr lines on a channel.
struct Server {
    child: Child,
    addr: String,
    metrics: Option<String>,
    log: mpsc::Receiver<String>,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    fn start(root: &Path, extra: &[&str]) -> Server {
        let mut child = Command::new(env!("CARGO_BIN_EXE_haul"))
            .args(["serve", "--no-history", "--listen", "127.0.0.1:0", "--root"])
            .arg(root)
            .args(extra)
            .env("HAUL_LOG", "warn,haul::cmd::serve::signals=info")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start haul serve");
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        let addr = line
            .trim()
            .strip_prefix("haul serve: listening on ")
            .unwrap_or_else(|| panic!("listen line: {line:?}"))
            .to_string();
        let metrics = extra.contains(&"--metrics").then(|| {
            let mut line = String::new();
            out.read_line(&mut line).unwrap();
            line.trim()
                .strip_prefix("haul serve: metrics on http://")
                .and_then(|s| s.strip_suffix("/metrics"))
                .unwrap_or_else(|| panic!("metrics line: {line:?}"))
                .to_string()
        });
        let (tx, log) = mpsc::channel();
        let err = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for l in BufReader::new(err).lines().map_while(Result::ok) {
                eprintln!("serve: {l}");
                let _ = tx.send(l);
            }
        });
        Server {
            child,
            addr,
            metrics,
            log,
        }
    }

    fn signal(&self, sig: &str) {
        let ok = Command::new("kill")
            .args([sig, &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(ok.success(), "kill {sig}");
    }

    /// Waits for a log line containing `what`.
    fn logged(&self, what: &str, limit: Duration) {
        let until = Instant::now() + limit;
        loop {
            let left = until.saturating_duration_since(Instant::now());
            match self.log.recv_timeout(left) {
                Ok(l) if l.contains(what) => return,
                Ok(_) => {}
                Err(_) => panic!("the server never logged {what:?}"),
            }
        }
    }

    /// The server's exit status, waiting at most `limit`.
    fn exits_within(&mut self, limit: Duration) -> std::process::ExitStatus {
        let until = Instant::now() + limit;
        loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                return s;
            }
            assert!(Instant::now() < until, "haul serve still running");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// An argon2 line for `name` with `password`, from `haul serve --hash-password`.
fn user_line(name: &str, password: &str) -> String {
    let mut c = Command::new(env!("CARGO_BIN_EXE_haul"))
        .args(["serve", "--hash-password"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    c.stdin
        .take()
        .unwrap()
        .write_all(format!("{password}\n").as_bytes())
        .unwrap();
    let out = c.wait_with_output().unwrap();
    assert!(out.status.success());
    format!(
        "{name}:{}:rw\n",
        String::from_utf8(out.stdout).unwrap().trim()
    )
}

fn write_private(path: &Path, text: &str) {
    // Written beside and renamed over, as an operator's tools do.
    let tmp = path.with_extension("new");
    fs::write(&tmp, text).unwrap();
    fs::set_permissions(&tmp, fs::Permissions::from_mode(0o600)).unwrap();
    fs::rename(&tmp, path).unwrap();
}

/// `haul cp` with the history and restart state of the test's `dir`.
fn haul_cp(dir: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_haul"));
    c.arg("cp")
        .arg("--history")
        .arg(dir.join("h.sqlite"))
        .env("XDG_STATE_HOME", dir.join("state"));
    c
}

/// Starts a rate-capped `haul cp SRC DST` (about `secs` seconds for `size` bytes).
fn slow_cp(src: &str, dst: &str, size: usize, secs: u64, dir: &Path) -> Child {
    let rate = format!("{}B/s", size as u64 / secs);
    haul_cp(dir)
        .args(["-p", "2", "--max-rate", &rate, src, dst])
        .stdout(Stdio::null())
        .spawn()
        .unwrap()
}

/// A temporary directory with an empty served `root` and a source file of `size` random bytes.
fn fixture(size: usize, seed: u64) -> (tempfile::TempDir, PathBuf, PathBuf, Vec<u8>) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    fs::create_dir(&root).unwrap();
    let data = random_bytes(size, seed);
    let src = dir.path().join("src.bin");
    fs::write(&src, &data).unwrap();
    (dir, root, src, data)
}

/// Waits until `path` holds at least `bytes` while `cp` still runs.
fn under_way(path: &Path, bytes: u64, cp: &mut Child) {
    let until = Instant::now() + Duration::from_secs(30);
    while fs::metadata(path).map_or(0, |m| m.len()) < bytes {
        assert!(cp.try_wait().unwrap().is_none(), "the copy ended too soon");
        assert!(Instant::now() < until, "{} never grew", path.display());
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn login(addr: &str, user: &str, pass: &str) -> String {
    let mut c = RawControl::connect(addr);
    c.cmd(&format!("USER {user}"));
    c.cmd(&format!("PASS {pass}"))
}

#[test]
fn sighup_reloads_users_without_dropping_a_transfer() {
    let size = 16 << 20;
    let (dir, root, src, data) = fixture(size, 7);
    let users = dir.path().join("users");
    let alice = user_line("alice", "pw-a");
    write_private(&users, &alice);
    let srv = Server::start(&root, &["--users", users.to_str().unwrap()]);
    assert!(login(&srv.addr, "bob", "pw-b").starts_with("530"));

    let url = format!("ftp://alice:pw-a@{}/up.bin", srv.addr);
    let mut cp = slow_cp(src.to_str().unwrap(), &url, size, 4, dir.path());
    under_way(&root.join(".up.bin.haul-part"), 1 << 20, &mut cp);

    write_private(&users, &format!("{alice}{}", user_line("bob", "pw-b")));
    srv.signal("-HUP");
    srv.logged("reloaded", Duration::from_secs(10));
    assert!(login(&srv.addr, "bob", "pw-b").starts_with("230"));
    assert!(
        cp.try_wait().unwrap().is_none(),
        "the copy was not running during the reload"
    );

    assert!(
        cp.wait().unwrap().success(),
        "the copy failed across the reload"
    );
    assert!(
        fs::read(root.join("up.bin")).unwrap() == data,
        "bytes differ"
    );

    // A broken users file keeps the users in force.
    write_private(&users, "carol:not-a-hash:rw\n");
    srv.signal("-HUP");
    srv.logged("reload failed", Duration::from_secs(10));
    assert!(login(&srv.addr, "bob", "pw-b").starts_with("230"));
}

#[test]
fn sigterm_drains_refuses_new_sessions_and_lets_the_transfer_finish() {
    let size = 12 << 20;
    let (dir, root, src, data) = fixture(size, 8);
    let mut srv = Server::start(
        &root,
        &["--anonymous", "--anonymous-write", "--drain-timeout", "60"],
    );
    let idle = RawControl::connect(&srv.addr);
    let url = format!("ftp://{}/up.bin", srv.addr);
    let mut cp = slow_cp(src.to_str().unwrap(), &url, size, 4, dir.path());
    under_way(&root.join(".up.bin.haul-part"), 1 << 20, &mut cp);

    srv.signal("-TERM");
    srv.logged("draining", Duration::from_secs(10));
    let refused = TcpStream::connect(&srv.addr);
    assert!(
        refused.is_err(),
        "a new connection was accepted while draining"
    );
    // The idle session is told and closed.
    let mut idle = idle;
    assert!(idle.reply().starts_with("421"));
    assert!(
        cp.try_wait().unwrap().is_none(),
        "the copy ended before the drain began"
    );

    assert!(
        cp.wait().unwrap().success(),
        "the copy failed during the drain"
    );
    assert!(
        fs::read(root.join("up.bin")).unwrap() == data,
        "bytes differ"
    );
    assert!(srv.exits_within(Duration::from_secs(15)).success());
}

#[test]
fn drain_timeout_closes_the_transfer_and_it_resumes() {
    let size = 24 << 20;
    let (dir, root, src, data) = fixture(size, 9);
    let flags = ["--anonymous", "--anonymous-write", "--drain-timeout", "1"];
    let mut srv = Server::start(&root, &flags);
    let url = format!("ftp://{}/up.bin", srv.addr);
    let mut cp = slow_cp(src.to_str().unwrap(), &url, size, 20, dir.path());
    under_way(&root.join(".up.bin.haul-part"), 1 << 20, &mut cp);
    let t0 = Instant::now();
    srv.signal("-TERM");
    assert!(srv.exits_within(Duration::from_secs(15)).success());
    assert!(
        t0.elapsed() < Duration::from_secs(10),
        "drain took {:?}",
        t0.elapsed()
    );
    assert!(
        !cp.wait().unwrap().success(),
        "a 20 s copy cannot finish in 1 s"
    );
    assert!(!root.join("up.bin").exists());

    let srv = Server::start(&root, &flags);
    let url = format!("ftp://{}/up.bin", srv.addr);
    let out = haul_cp(dir.path())
        .args(["--resume", "-p", "2", src.to_str().unwrap(), &url])
        .output()
        .unwrap();
    common::globus::assert_success(&out, "haul cp --resume");
    assert!(
        fs::read(root.join("up.bin")).unwrap() == data,
        "bytes differ"
    );
}

/// The prometheus binary, if installed.
fn prometheus() -> Option<PathBuf> {
    ["/usr/bin/prometheus", "/usr/local/bin/prometheus"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
}

/// A Prometheus server scraping `target` every second, killed on drop.
struct Prometheus(Child, String);

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start_prometheus(bin: &Path, dir: &Path, target: &str) -> Prometheus {
    let cfg = dir.join("prometheus.yml");
    fs::write(
        &cfg,
        format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n  - job_name: haul\n    static_configs:\n      - targets: ['{target}']\n"
        ),
    )
    .unwrap();
    let port = common::globus::free_port();
    let web = format!("127.0.0.1:{port}");
    let child = Command::new(bin)
        .arg(format!("--config.file={}", cfg.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.join("tsdb").display()
        ))
        .arg(format!("--web.listen-address={web}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start prometheus");
    Prometheus(child, web)
}

#[test]
fn prometheus_scrapes_the_bytes_of_a_transfer() {
    let Some(bin) = prometheus() else {
        eprintln!("SKIP prometheus_scrapes_the_bytes_of_a_transfer: no prometheus binary (apt-get install prometheus; scripts/test.sh does)");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    fs::create_dir(&root).unwrap();
    let size = 3 << 20;
    fs::write(root.join("f"), random_bytes(size, 10)).unwrap();
    let srv = Server::start(&root, &["--anonymous", "--metrics", "127.0.0.1:0"]);
    let metrics = srv.metrics.clone().unwrap();
    let dst = dir.path().join("f.copy");
    let out = cp(
        &[&format!("ftp://{}/f", srv.addr), dst.to_str().unwrap()],
        &dir.path().join("h.sqlite"),
    );
    assert!(out.status.success());
    let text = http_get(&metrics, "/metrics");
    assert!(text.contains("haul_serve_transfers_total"), "{text}");

    let prom = start_prometheus(&bin, dir.path(), &metrics);
    let query = "/api/v1/query?query=haul_serve_bytes_total%7Bdirection%3D%22sent%22%7D";
    let until = Instant::now() + Duration::from_secs(60);
    let value = loop {
        let body = if TcpStream::connect(&prom.1).is_ok() {
            http_get(&prom.1, query)
        } else {
            String::new()
        };
        let v: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
        if let Some(x) = v["data"]["result"][0]["value"][1].as_str() {
            break x.to_string();
        }
        assert!(
            Instant::now() < until,
            "prometheus never had the metric: {body}"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(
        value.parse::<f64>().unwrap(),
        size as f64,
        "bytes sent, as Prometheus has them"
    );
}
