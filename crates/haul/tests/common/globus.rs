//! Test harness for interoperating with the real Globus programs
//! (`globus-gridftp-server`, `globus-url-copy`). See `docs/globus-interop.md`.
//!
//! ```ignore
//! mod common;
//! use common::globus::*;
//! if let Some(why) = globus_available() { eprintln!("skipping: {why}"); return; }
//! let dir = tempfile::tempdir().unwrap();
//! let srv = GlobusServer::start(dir.path()).unwrap();
//! let out = globus_url_copy(&["-p", "8", &srv.url("f"), "file:///tmp/x"]);
//! ```
#![allow(dead_code)]

use std::fs;
use std::io::{BufRead, BufReader, Read};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

/// How long `globus_url_copy` may run before it is killed.
pub const GUC_TIMEOUT: Duration = Duration::from_secs(120);
/// How long to wait for a server to print its port and accept connections.
const START_TIMEOUT: Duration = Duration::from_secs(20);

const SERVER_CANDIDATES: &[&str] = &[
    "/usr/sbin/globus-gridftp-server",
    "/usr/local/sbin/globus-gridftp-server",
    "/usr/bin/globus-gridftp-server",
];

fn in_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// Path of the `globus-gridftp-server` binary, if installed.
pub fn globus_server_bin() -> Option<PathBuf> {
    in_path("globus-gridftp-server").or_else(|| {
        SERVER_CANDIDATES
            .iter()
            .map(PathBuf::from)
            .find(|p| p.is_file())
    })
}

/// Path of the `globus-url-copy` binary, if installed.
pub fn globus_url_copy_bin() -> Option<PathBuf> {
    in_path("globus-url-copy").or_else(|| {
        let p = PathBuf::from("/usr/bin/globus-url-copy");
        p.is_file().then_some(p)
    })
}

/// True when the Globus programs are missing (or `HAUL_SKIP_GLOBUS` is set): prints why, naming
/// `test`, and the caller returns without running.
pub fn skip_without_globus(test: &str) -> bool {
    match globus_available() {
        Some(why) => {
            eprintln!("skipping {test}: {why}");
            true
        }
        None => false,
    }
}

/// `None` if both Globus programs are usable; `Some(reason)` to print when skipping.
/// Set `HAUL_SKIP_GLOBUS=1` to force skipping.
pub fn globus_available() -> Option<String> {
    if std::env::var_os("HAUL_SKIP_GLOBUS").is_some_and(|v| !v.is_empty() && v != "0") {
        return Some("HAUL_SKIP_GLOBUS is set".into());
    }
    if globus_url_copy_bin().is_none() {
        return Some("globus-url-copy not found (install globus-gass-copy-progs)".into());
    }
    if globus_server_bin().is_none() {
        return Some(
            "globus-gridftp-server not found (install globus-gridftp-server-progs)".into(),
        );
    }
    None
}

/// A free TCP port on 127.0.0.1 (bound then released; small race, fine for tests).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("bind 127.0.0.1:0")
}

pub fn euid() -> u32 {
    // No libc dependency: read the effective uid from /proc.
    fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(2))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(u32::MAX)
}

/// (uid, gid) of `nobody` from /etc/passwd.
fn nobody_ids() -> Option<(u32, u32)> {
    let pw = fs::read_to_string("/etc/passwd").ok()?;
    pw.lines().find_map(|l| {
        let f: Vec<&str> = l.split(':').collect();
        (f.len() >= 4 && f[0] == "nobody")
            .then(|| Some((f[2].parse().ok()?, f[3].parse().ok()?)))?
    })
}

/// Make `path` (recursively) readable and writable by the anonymous user the server
/// runs as (`nobody` when we are root). Call it again after creating files in the
/// served tree after the server started, if the server has to overwrite/write into them.
pub fn share_tree(path: &Path) -> std::io::Result<()> {
    let ids = if euid() == 0 { nobody_ids() } else { None };
    fn walk(p: &Path, ids: Option<(u32, u32)>) -> std::io::Result<()> {
        let md = fs::symlink_metadata(p)?;
        if md.file_type().is_symlink() {
            return Ok(());
        }
        if let Some((u, g)) = ids {
            std::os::unix::fs::chown(p, Some(u), Some(g))?;
        }
        if md.is_dir() {
            fs::set_permissions(p, fs::Permissions::from_mode(0o777))?;
            for e in fs::read_dir(p)? {
                walk(&e?.path(), ids)?;
            }
        } else if md.is_file() {
            let m = md.permissions().mode() & 0o7777;
            fs::set_permissions(p, fs::Permissions::from_mode(m | 0o666))?;
        }
        Ok(())
    }
    walk(path, ids)?;
    // Every ancestor must be traversable by `nobody` (tempdirs are created 0700).
    for anc in path.ancestors().skip(1) {
        if anc.as_os_str().is_empty() || anc == Path::new("/") {
            continue;
        }
        if let Ok(md) = fs::metadata(anc) {
            let m = md.permissions().mode();
            if m & 0o001 == 0 {
                let _ = fs::set_permissions(anc, fs::Permissions::from_mode((m & 0o7777) | 0o001));
            }
        }
    }
    Ok(())
}

static SEQ: AtomicUsize = AtomicUsize::new(0);

/// A `globus-gridftp-server` on 127.0.0.1 in anonymous mode (no GSI), serving `root`.
/// Killed (with its forked per-connection children) on drop.
pub struct GlobusServer {
    child: Child,
    port: u16,
    root: PathBuf,
    log: PathBuf,
    stderr_log: PathBuf,
}

impl GlobusServer {
    /// Start a server whose home dir is `root` (made accessible to `nobody` when root).
    pub fn start(root: &Path) -> std::io::Result<GlobusServer> {
        Self::start_with(root, &[])
    }

    /// Like `start`, with extra server arguments (e.g. `["-bs", "65536"]`).
    pub fn start_with(root: &Path, extra: &[&str]) -> std::io::Result<GlobusServer> {
        use std::io::{Error, ErrorKind};
        let bin = globus_server_bin()
            .ok_or_else(|| Error::new(ErrorKind::NotFound, "globus-gridftp-server not found"))?;
        let root = fs::canonicalize(root)?;
        share_tree(&root)?;

        let n = SEQ.fetch_add(1, Ordering::Relaxed);
        let base = std::env::temp_dir().join(format!("haul-globus-{}-{}", std::process::id(), n));
        let log = base.with_extension("log");
        let stderr_log = base.with_extension("stderr");
        let stderr_file = fs::File::create(&stderr_log)?;

        let mut cmd = Command::new(bin);
        // -c /dev/null: ignore /etc/gridftp.conf. Default mode is foreground + fork per
        // connection, which is what we want (never -debug: as root it serves one connection).
        cmd.args(["-c", "/dev/null", "-aa"]);
        if euid() == 0 {
            cmd.args(["-anonymous-user", "nobody"]);
        }
        cmd.args([
            "-p",
            "0",
            "-control-interface",
            "127.0.0.1",
            "-data-interface",
            "127.0.0.1",
        ])
        .arg("-home-dir")
        .arg(&root)
        .args(["-d", "ALL", "-logfile"])
        .arg(&log)
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::from(stderr_file))
        // own process group, so Drop can kill the forked session children too
        .process_group(0);
        let mut child = cmd.spawn()?;

        // The server prints "Server listening at localhost:PORT" on stdout.
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, rx) = mpsc::channel::<u16>();
        thread::spawn(move || {
            let mut tx = Some(tx);
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Some(t) = tx.as_ref() {
                    if let Some(rest) = line.trim().strip_prefix("Server listening at ") {
                        if let Some(p) = rest.rsplit(':').next().and_then(|p| p.parse().ok()) {
                            let _ = t.send(p);
                            tx = None;
                        }
                    }
                }
            }
        });

        let mut server = GlobusServer {
            child,
            port: 0,
            root,
            log,
            stderr_log,
        };
        let deadline = Instant::now() + START_TIMEOUT;
        let port = loop {
            match rx.recv_timeout(Duration::from_millis(100)) {
                Ok(p) => break p,
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    return Err(Error::other(format!(
                        "globus-gridftp-server exited before listening\n{}",
                        server.diagnostics()
                    )));
                }
            }
            if let Ok(Some(st)) = server.child.try_wait() {
                return Err(Error::other(format!(
                    "globus-gridftp-server exited ({st})\n{}",
                    server.diagnostics()
                )));
            }
            if Instant::now() > deadline {
                return Err(Error::new(
                    ErrorKind::TimedOut,
                    format!(
                        "globus-gridftp-server did not report a port\n{}",
                        server.diagnostics()
                    ),
                ));
            }
        };
        server.port = port;

        // Poll-connect until it accepts (it normally already does when it prints the port).
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        loop {
            if TcpStream::connect_timeout(&addr, Duration::from_millis(500)).is_ok() {
                break;
            }
            if Instant::now() > deadline {
                return Err(Error::new(
                    ErrorKind::TimedOut,
                    format!(
                        "globus-gridftp-server not accepting on {addr}\n{}",
                        server.diagnostics()
                    ),
                ));
            }
            thread::yield_now();
        }
        Ok(server)
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// The served root (canonicalized).
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// `ftp://127.0.0.1:PORT/<abs path of root/rel>`. Globus URL paths are absolute
    /// filesystem paths; a trailing `/` in `rel` is kept (needed for directory URLs).
    pub fn url(&self, rel: &str) -> String {
        let trimmed = rel.trim_start_matches('/');
        let mut p = self.root.join(trimmed).to_string_lossy().into_owned();
        if rel.ends_with('/') && !p.ends_with('/') {
            p.push('/');
        }
        if trimmed.is_empty() && !p.ends_with('/') {
            p.push('/');
        }
        format!("ftp://127.0.0.1:{}{}", self.port, p)
    }

    /// Server log (`-d ALL -logfile`), includes every command/reply of every session.
    pub fn log_path(&self) -> &Path {
        &self.log
    }

    pub fn log_contents(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Last part of the log and stderr, for assertion messages.
    pub fn diagnostics(&self) -> String {
        let tail = |s: String| {
            let lines: Vec<&str> = s.lines().collect();
            lines[lines.len().saturating_sub(80)..].join("\n")
        };
        format!(
            "--- globus-gridftp-server log ({}) tail ---\n{}\n--- stderr ---\n{}",
            self.log.display(),
            tail(self.log_contents()),
            tail(fs::read_to_string(&self.stderr_log).unwrap_or_default())
        )
    }
}

impl Drop for GlobusServer {
    fn drop(&mut self) {
        let pid = self.child.id();
        // Kill the whole process group we created (server + forked session children).
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{pid}")])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        let _ = self.child.kill();
        let _ = self.child.wait();
        if !thread::panicking() {
            let _ = fs::remove_file(&self.log);
            let _ = fs::remove_file(&self.stderr_log);
        } else {
            eprintln!("{}", self.diagnostics());
        }
    }
}

/// Run `globus-url-copy ARGS`, killing it after `GUC_TIMEOUT` (120 s).
/// On timeout the returned status is the killed status and stderr ends with a note.
pub fn globus_url_copy(args: &[&str]) -> Output {
    globus_url_copy_timeout(args, GUC_TIMEOUT)
}

pub fn globus_url_copy_timeout(args: &[&str], timeout: Duration) -> Output {
    let bin = globus_url_copy_bin().unwrap_or_else(|| PathBuf::from("globus-url-copy"));
    let mut cmd = Command::new(bin);
    cmd.args(args);
    let (mut out, timed_out) = run_killed_after(cmd, timeout);
    if timed_out {
        out.stderr.extend_from_slice(
            format!("\n[harness] globus-url-copy killed after {timeout:?}: {args:?}\n").as_bytes(),
        );
    }
    out
}

/// Runs `cmd` with its output captured, killing it after `limit`; the output and whether it
/// was killed.
pub fn run_killed_after(mut cmd: Command, limit: Duration) -> (Output, bool) {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {cmd:?}: {e}"));
    let mut so = child.stdout.take().unwrap();
    let mut se = child.stderr.take().unwrap();
    let to = thread::spawn(move || {
        let mut v = Vec::new();
        let _ = so.read_to_end(&mut v);
        v
    });
    let te = thread::spawn(move || {
        let mut v = Vec::new();
        let _ = se.read_to_end(&mut v);
        v
    });
    let deadline = Instant::now() + limit;
    let mut timed_out = false;
    let status = loop {
        if let Some(st) = child.try_wait().expect("wait") {
            break st;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            timed_out = true;
            break child.wait().expect("wait");
        }
        thread::sleep(Duration::from_millis(10));
    };
    let out = Output {
        status,
        stdout: to.join().unwrap_or_default(),
        stderr: te.join().unwrap_or_default(),
    };
    (out, timed_out)
}

/// `file:///abs/path` URL for a local path (made absolute).
pub fn file_url(p: &Path) -> String {
    let abs = if p.is_absolute() {
        p.to_path_buf()
    } else {
        std::env::current_dir().unwrap().join(p)
    };
    format!("file://{}", abs.display())
}

/// Panic with stdout/stderr if `out` is not a success.
pub fn assert_success(out: &Output, what: &str) {
    assert!(
        out.status.success(),
        "{what} failed: {}\n--- stdout ---\n{}\n--- stderr ---\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Ends a gfal2 script once its work is done and checked: flush, then leave without running
/// the libraries' exit handlers. The Globus GSI stack under gfal2 now and then aborts in its
/// teardown (`free(): invalid pointer`, SIGABRT) after everything succeeded and "ok" was
/// printed; what the test checks (the script's asserts, the files at both ends) is already
/// done by then.
pub const GFAL2_EXIT: &str =
    "\nimport os as _os, sys as _sys\n_sys.stdout.flush()\n_sys.stderr.flush()\n_os._exit(0)\n";

/// A Python interpreter that can `import gfal2` with its gridftp plugin loaded, or why not.
/// (`/usr/bin/python3` first: a `python3` earlier on PATH, a pyenv one say, lacks the Debian
/// package's module.)
pub fn gfal2_python() -> Result<String, String> {
    let probe = "import gfal2, sys\n\
                 names = gfal2.creat_context().get_plugin_names()\n\
                 sys.exit(0 if any(n.startswith('gridftp') for n in names) else 3)";
    let mut why = Vec::new();
    for py in ["/usr/bin/python3", "python3"] {
        match Command::new(py).args(["-c", probe]).output() {
            Ok(o) if o.status.success() => return Ok(py.to_string()),
            Ok(o) if o.status.code() == Some(3) => why.push(format!(
                "{py}: gfal2 has no gridftp plugin (gfal2-plugin-gridftp)"
            )),
            Ok(o) => why.push(format!(
                "{py}: cannot import gfal2 (python3-gfal2): {}",
                String::from_utf8_lossy(&o.stderr).trim()
            )),
            Err(e) => why.push(format!("{py}: {e}")),
        }
    }
    Err(why.join("; "))
}

/// [`gfal2_python`], or None after printing why `test` is skipped.
pub fn gfal2_or_skip(test: &str) -> Option<String> {
    match gfal2_python() {
        Ok(py) => Some(py),
        Err(why) => {
            eprintln!("skipping {test}: {why}");
            None
        }
    }
}
