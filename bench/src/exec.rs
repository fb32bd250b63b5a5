//! Running commands: timed foreground runs with peak RSS (`wait4`), background servers, TCP probes.

use std::fs::File;
use std::io::{self, Read};
use std::net::{TcpStream, ToSocketAddrs};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The first SIGINT / SIGTERM / SIGHUP received, 0 if none.
static STOP_SIGNAL: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_stop_signal(sig: libc::c_int) {
    // An atomic store is async-signal-safe.
    let _ = STOP_SIGNAL.compare_exchange(0, sig, Ordering::SeqCst, Ordering::SeqCst);
}

/// Catches SIGINT, SIGTERM and SIGHUP, so that the runner can stop its commands, servers and
/// netem pair instead of dying with them still running (they are in their own process groups,
/// so a terminal's Ctrl-C never reaches them).
pub fn catch_stop_signals() -> io::Result<()> {
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: a zeroed sigaction with a valid handler and an empty mask; the handler only
        // stores to an atomic.
        let r = unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_stop_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut())
        };
        if r != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// The stop signal received so far, if any.
pub fn stop_signal() -> Option<i32> {
    match STOP_SIGNAL.load(Ordering::SeqCst) {
        0 => None,
        s => Some(s),
    }
}

/// An error if a stop signal has arrived.
pub fn check_stop() -> io::Result<()> {
    stop_signal().map_or(Ok(()), |sig| Err(interrupted(sig)))
}

fn interrupted(sig: i32) -> io::Error {
    io::Error::new(
        io::ErrorKind::Interrupted,
        format!("interrupted by signal {sig}"),
    )
}

/// How a foreground command ended.
#[derive(Debug, Clone)]
pub struct RunOutput {
    /// Captured standard output.
    pub stdout: String,
    /// Captured standard error.
    pub stderr: String,
    /// Exit status.
    pub status: ExitStatus,
    /// Wall-clock seconds from spawn to exit.
    pub elapsed_s: f64,
    /// Peak RSS of the process and its waited-for descendants, KiB.
    pub peak_rss_kib: u64,
    /// The command was killed after its timeout.
    pub timed_out: bool,
}

fn command(argv: &[String]) -> io::Result<Command> {
    let (prog, args) = argv
        .split_first()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "empty command"))?;
    let mut cmd = Command::new(prog);
    cmd.args(args).stdin(Stdio::null()).process_group(0);
    Ok(cmd)
}

/// Waits for `pid` with `wait4`, returning its status and peak RSS in KiB.
fn wait4(pid: libc::pid_t) -> io::Result<(ExitStatus, u64)> {
    let mut status: libc::c_int = 0;
    // SAFETY: an all-zero rusage is a valid value of this plain C struct.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: `status` and `usage` are valid for writes; `pid` is our own child.
        let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
        if r == pid {
            return Ok((
                ExitStatus::from_raw(status),
                u64::try_from(usage.ru_maxrss).unwrap_or(0),
            ));
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
}

/// Sends `signal` to the process group led by `pid`.
fn kill_group(pid: u32, signal: libc::c_int) {
    if let Ok(pid) = libc::pid_t::try_from(pid) {
        // SAFETY: kill has no memory-safety preconditions; a stale group only yields ESRCH.
        unsafe { libc::kill(-pid, signal) };
    }
}

fn read_all(mut r: impl Read + Send + 'static) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = r.read_to_end(&mut buf);
        String::from_utf8_lossy(&buf).into_owned()
    })
}

/// Runs `argv` to completion (killing its process group after `timeout`, or at once when a
/// stop signal arrives: then the result is an `Interrupted` error), capturing output.
pub fn run(argv: &[String], timeout: Duration) -> io::Result<RunOutput> {
    run_inner(argv, timeout, true)
}

/// [`run`] for clean-up commands: a stop signal does not cut them short.
pub fn run_to_end(argv: &[String], timeout: Duration) -> io::Result<RunOutput> {
    run_inner(argv, timeout, false)
}

fn run_inner(argv: &[String], timeout: Duration, interruptible: bool) -> io::Result<RunOutput> {
    let mut cmd = command(argv)?;
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let start = Instant::now();
    let mut child = cmd.spawn()?;
    let pid = child.id();
    let stdout = child.stdout.take().map(read_all);
    let stderr = child.stderr.take().map(read_all);
    let raw_pid = libc::pid_t::try_from(pid).map_err(|_| io::Error::other("pid out of range"))?;
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send((wait4(raw_pid), Instant::now()));
    });
    let deadline = start + timeout;
    let (waited, timed_out) = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left.min(Duration::from_millis(100))) {
            Ok(w) => break (w, false),
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                return Err(io::Error::other("waiter thread vanished"))
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                let stop = if interruptible { stop_signal() } else { None };
                if stop.is_some() || left.is_zero() {
                    kill_group(pid, libc::SIGKILL);
                    let w = rx
                        .recv()
                        .map_err(|_| io::Error::other("waiter thread vanished"))?;
                    if let Some(sig) = stop {
                        return Err(interrupted(sig));
                    }
                    break (w, true);
                }
            }
        }
    };
    let ((status, peak_rss_kib), end) = (waited.0?, waited.1);
    // The group may still hold stray descendants keeping the pipes open; end them.
    kill_group(pid, libc::SIGKILL);
    let join = |h: Option<std::thread::JoinHandle<String>>| {
        h.and_then(|h| h.join().ok()).unwrap_or_default()
    };
    Ok(RunOutput {
        stdout: join(stdout),
        stderr: join(stderr),
        status,
        elapsed_s: (end - start).as_secs_f64(),
        peak_rss_kib,
        timed_out,
    })
}

/// A server running in the background in its own process group; stopped on drop.
#[derive(Debug)]
pub struct Background {
    child: Child,
}

impl Background {
    /// Starts `argv` with stdout and stderr appended to `log`.
    pub fn spawn(argv: &[String], log: &Path) -> io::Result<Background> {
        let out = File::create(log)?;
        let err = out.try_clone()?;
        let child = command(argv)?.stdout(out).stderr(err).spawn()?;
        Ok(Background { child })
    }

    /// The exit status if the server has already exited.
    pub fn exited(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().ok().flatten()
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        kill_group(self.child.id(), libc::SIGTERM);
        let deadline = Instant::now() + Duration::from_secs(3);
        while Instant::now() < deadline {
            if self.exited().is_some() {
                kill_group(self.child.id(), libc::SIGKILL);
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        kill_group(self.child.id(), libc::SIGKILL);
        let _ = self.child.wait();
    }
}

/// Whether a TCP connection to `addr` (`host:port`) succeeds within a second.
pub fn tcp_ready(addr: &str) -> bool {
    let Ok(addrs) = addr.to_socket_addrs() else {
        return false;
    };
    addrs
        .into_iter()
        .any(|a| TcpStream::connect_timeout(&a, Duration::from_secs(1)).is_ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(cmd: &str) -> Vec<String> {
        vec!["sh".into(), "-c".into(), cmd.into()]
    }

    #[test]
    fn captures_output_status_and_rss() {
        let out = run(
            &sh("echo hi; echo err >&2; exit 3"),
            Duration::from_secs(10),
        )
        .expect("run");
        assert_eq!(out.stdout, "hi\n");
        assert_eq!(out.stderr, "err\n");
        assert_eq!(out.status.code(), Some(3));
        assert!(out.peak_rss_kib > 0);
        assert!(!out.timed_out);
    }

    #[test]
    fn kills_after_timeout() {
        let out = run(&sh("sleep 30"), Duration::from_millis(200)).expect("run");
        assert!(out.timed_out);
        assert!(out.elapsed_s < 10.0);
    }

    #[test]
    fn refuses_unreachable_port() {
        assert!(!tcp_ready("127.0.0.1:1"));
        assert!(!tcp_ready("not an address"));
    }
}
