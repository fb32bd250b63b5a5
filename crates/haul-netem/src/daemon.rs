//! The background daemon behind `haul netem`: its state directory (topology, state, pid, log),
//! the unix control socket (`stats`, `set`, `down`), starting it and cleaning up after it,
//! also after a crash.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::net::Ipv4Addr;
use std::os::unix::net::{UnixListener, UnixStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::netns;
use crate::params::DirPatch;
use crate::testbed::{LinkReport, Options, Testbed};
use crate::topology::{Dir, Topology};

/// Where `haul netem` keeps its state.
pub const STATE_DIR: &str = "/run/haul-netem";

const TOPOLOGY: &str = "topology.json";
const STATE: &str = "state.json";
const PID: &str = "daemon.pid";
const SOCKET: &str = "control.sock";
const LOG: &str = "daemon.log";

static STOP: AtomicBool = AtomicBool::new(false);

/// What the daemon was asked to bring up.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Request {
    /// Namespace prefix.
    pub prefix: String,
    /// The topology.
    pub topology: Topology,
}

/// A running testbed as recorded by its daemon.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct State {
    /// The daemon's process id.
    pub pid: u32,
    /// Namespace prefix.
    pub prefix: String,
    /// The topology as brought up.
    pub topology: Topology,
    /// Host name → namespace name.
    pub namespaces: BTreeMap<String, String>,
    /// Host name → address.
    pub addrs: BTreeMap<String, Ipv4Addr>,
}

/// A control-socket command.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "lowercase")]
pub enum Control {
    /// Report parameters and counters.
    Stats,
    /// Change a link's parameters.
    Set {
        /// Link name `a-b`.
        link: String,
        /// Direction, or both when absent.
        dir: Option<Dir>,
        /// The change.
        patch: Box<DirPatch>,
    },
    /// Tear down and exit.
    Down,
}

/// A control-socket answer.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Reply {
    /// The error, if the command failed.
    pub error: Option<String>,
    /// Link reports (for `stats`).
    pub stats: Option<Vec<LinkReport>>,
}

fn state_err(path: &Path, e: impl std::fmt::Display) -> Error {
    Error::State {
        path: path.to_path_buf(),
        reason: e.to_string(),
    }
}

fn write_json<T: Serialize>(path: &Path, v: &T) -> Result<()> {
    let text = serde_json::to_string_pretty(v).map_err(|e| state_err(path, e))?;
    std::fs::write(path, text).map_err(|e| state_err(path, e))
}

fn read_json<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<T> {
    let text = std::fs::read_to_string(path).map_err(|e| state_err(path, e))?;
    serde_json::from_str(&text).map_err(|e| state_err(path, e))
}

/// Reads the state of the running testbed in `dir`.
pub fn load_state(dir: &Path) -> Result<State> {
    let path = dir.join(STATE);
    if !path.exists() {
        return Err(state_err(&path, "no testbed is up (run `haul netem up`)"));
    }
    read_json(&path)
}

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::Relaxed);
}

/// The daemon's body: brings up the topology requested in `dir`, serves the control socket
/// until `down` or SIGTERM/SIGINT, then tears everything down.
pub fn serve(dir: &Path) -> Result<()> {
    let req: Request = read_json(&dir.join(TOPOLOGY))?;
    // SAFETY: the handler only stores to an atomic.
    unsafe {
        libc::signal(
            libc::SIGTERM,
            on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t,
        );
        libc::signal(
            libc::SIGINT,
            on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t,
        );
    }
    let tb = Testbed::up(&req.topology, Options::with_prefix(&req.prefix))?;
    let sock = dir.join(SOCKET);
    let _ = std::fs::remove_file(&sock);
    let listener =
        UnixListener::bind(&sock).map_err(|e| Error::sys(format!("bind {}", sock.display()), e))?;
    listener
        .set_nonblocking(true)
        .map_err(|e| Error::sys("control socket non-blocking", e))?;
    let hosts = &req.topology.hosts;
    let state = State {
        pid: std::process::id(),
        prefix: req.prefix.clone(),
        topology: req.topology.clone(),
        namespaces: hosts
            .iter()
            .map(|h| Ok((h.clone(), tb.namespace(h)?)))
            .collect::<Result<_>>()?,
        addrs: hosts
            .iter()
            .map(|h| Ok((h.clone(), tb.addr(h)?)))
            .collect::<Result<_>>()?,
    };
    write_json(&dir.join(STATE), &state)?;
    tracing::info!("testbed up: {:?}", state.namespaces);
    while !STOP.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((conn, _)) => {
                if let Err(e) = handle(&tb, conn) {
                    tracing::warn!("control connection: {e}");
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(20))
            }
            Err(e) => return Err(Error::sys("accept on control socket", e)),
        }
    }
    let _ = std::fs::remove_file(dir.join(STATE));
    let _ = std::fs::remove_file(&sock);
    tb.down()
}

fn handle(tb: &Testbed, conn: UnixStream) -> std::io::Result<()> {
    conn.set_nonblocking(false)?;
    conn.set_read_timeout(Some(Duration::from_secs(5)))?;
    let mut line = String::new();
    BufReader::new(&conn).read_line(&mut line)?;
    let reply = match serde_json::from_str::<Control>(&line) {
        Err(e) => Reply {
            error: Some(format!("bad request: {e}")),
            ..Default::default()
        },
        Ok(Control::Stats) => Reply {
            stats: Some(tb.stats()),
            ..Default::default()
        },
        Ok(Control::Set { link, dir, patch }) => match tb.set(&link, dir, &patch) {
            Ok(()) => Reply::default(),
            Err(e) => Reply {
                error: Some(e.to_string()),
                ..Default::default()
            },
        },
        Ok(Control::Down) => {
            STOP.store(true, Ordering::Relaxed);
            Reply::default()
        }
    };
    let mut text = serde_json::to_string(&reply).map_err(std::io::Error::other)?;
    text.push('\n');
    (&conn).write_all(text.as_bytes())
}

/// Sends one command to the daemon in `dir` and returns its reply (errors become `Err`).
pub fn control(dir: &Path, cmd: &Control) -> Result<Reply> {
    let sock = dir.join(SOCKET);
    let conn = UnixStream::connect(&sock).map_err(|e| {
        Error::Control(format!(
            "connect {} (is a testbed up?): {e}",
            sock.display()
        ))
    })?;
    conn.set_read_timeout(Some(Duration::from_secs(10)))
        .map_err(|e| Error::Control(e.to_string()))?;
    let mut text = serde_json::to_string(cmd).map_err(|e| Error::Control(e.to_string()))?;
    text.push('\n');
    (&conn)
        .write_all(text.as_bytes())
        .map_err(|e| Error::Control(format!("send: {e}")))?;
    let mut line = String::new();
    BufReader::new(&conn)
        .read_line(&mut line)
        .map_err(|e| Error::Control(format!("receive: {e}")))?;
    let reply: Reply = serde_json::from_str(&line)
        .map_err(|e| Error::Control(format!("bad reply {line:?}: {e}")))?;
    match reply.error {
        Some(e) => Err(Error::Control(e)),
        None => Ok(reply),
    }
}

fn alive(pid: u32) -> bool {
    // Only a process whose command line mentions netem counts (pids are reused after a crash).
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|c| String::from_utf8_lossy(&c).contains("netem"))
        .unwrap_or(false)
}

fn recorded_pid(dir: &Path) -> Option<u32> {
    std::fs::read_to_string(dir.join(PID))
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// Starts `daemon` (a command that ends up calling [`serve`] on `dir`) for `topology` and waits
/// until the testbed is up. Fails if one is already running.
pub fn start(dir: &Path, prefix: &str, topology: &Topology, mut daemon: Command) -> Result<State> {
    topology.validate()?;
    if let Some(pid) = recorded_pid(dir).filter(|&p| alive(p)) {
        return Err(Error::Config(format!(
            "a testbed is already up (daemon pid {pid}); run `haul netem down` first"
        )));
    }
    cleanup(dir, prefix)?;
    std::fs::create_dir_all(dir).map_err(|e| state_err(dir, e))?;
    write_json(
        &dir.join(TOPOLOGY),
        &Request {
            prefix: prefix.into(),
            topology: topology.clone(),
        },
    )?;
    let log_path = dir.join(LOG);
    let log = std::fs::File::create(&log_path).map_err(|e| state_err(&log_path, e))?;
    let log2 = log.try_clone().map_err(|e| state_err(&log_path, e))?;
    daemon.stdin(Stdio::null()).stdout(log).stderr(log2);
    // SAFETY: setsid is async-signal-safe; it detaches the daemon from the terminal's session.
    unsafe {
        daemon.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
    let mut child = daemon.spawn().map_err(|e| Error::Command {
        cmd: format!("{daemon:?}"),
        detail: e.to_string(),
    })?;
    std::fs::write(dir.join(PID), child.id().to_string())
        .map_err(|e| state_err(&dir.join(PID), e))?;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if dir.join(STATE).exists() && dir.join(SOCKET).exists() {
            return load_state(dir);
        }
        let exited = child
            .try_wait()
            .map_err(|e| Error::sys("wait for netem daemon", e))?;
        if exited.is_some() || Instant::now() > deadline {
            let log = std::fs::read_to_string(&log_path).unwrap_or_default();
            let _ = child.kill();
            let _ = cleanup(dir, prefix);
            return Err(Error::Command {
                cmd: "netem daemon".into(),
                detail: format!("did not come up ({exited:?}); log:\n{}", log.trim()),
            });
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Stops the daemon of `dir` (politely, then by signal) and deletes every namespace carrying
/// `prefix` and the state directory. Safe to run after a crash or when nothing is up;
/// returns the namespaces deleted.
pub fn cleanup(dir: &Path, prefix: &str) -> Result<Vec<String>> {
    if let Some(pid) = recorded_pid(dir) {
        let _ = control(dir, &Control::Down);
        let deadline = Instant::now() + Duration::from_secs(5);
        while alive(pid) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        for sig in [libc::SIGTERM, libc::SIGKILL] {
            if alive(pid) {
                // SAFETY: signalling the recorded daemon, checked to be a netem process.
                unsafe { libc::kill(pid as i32, sig) };
                std::thread::sleep(Duration::from_millis(300));
            }
        }
    }
    let removed = netns::del_prefix(prefix)?;
    if dir.exists() {
        std::fs::remove_dir_all(dir).map_err(|e| state_err(dir, e))?;
    }
    Ok(removed)
}

/// The default state directory.
pub fn state_dir() -> PathBuf {
    PathBuf::from(STATE_DIR)
}
