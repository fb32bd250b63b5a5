//! Network namespaces: create, delete, list by prefix, run code or commands inside one, and
//! write its sysctls.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};

/// Where `ip netns` keeps its named namespaces.
const NETNS_DIR: &str = "/run/netns";

/// Runs `ip ARGS…`, failing with the command line and its stderr.
pub fn ip(args: &[&str]) -> Result<()> {
    let cmd_line = format!("ip {}", args.join(" "));
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| Error::Command {
            cmd: cmd_line.clone(),
            detail: e.to_string(),
        })?;
    if out.status.success() {
        Ok(())
    } else {
        Err(Error::Command {
            cmd: cmd_line,
            detail: format!(
                "{}: {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ),
        })
    }
}

/// Creates the named namespace.
pub fn add(name: &str) -> Result<()> {
    ip(&["netns", "add", name])
}

/// How long processes in a namespace being deleted get to exit after SIGTERM, before SIGKILL.
const TERM_GRACE: Duration = Duration::from_secs(2);

/// Deletes the named namespace after ending the processes inside it ([`kill_all`]): deleting
/// only the name would leave them running in a namespace nobody can reach.
pub fn del(name: &str) -> Result<()> {
    let ended = kill_all(name)?;
    if ended > 0 {
        tracing::info!("ended {ended} process(es) running in namespace {name}");
    }
    ip(&["netns", "del", name])
}

/// The processes inside namespace `name` (`ip netns pids`), never this one.
pub fn pids(name: &str) -> Result<Vec<i32>> {
    let cmd = format!("ip netns pids {name}");
    let out = Command::new("ip")
        .args(["netns", "pids", name])
        .output()
        .map_err(|e| Error::Command {
            cmd: cmd.clone(),
            detail: e.to_string(),
        })?;
    if !out.status.success() {
        let detail = format!(
            "{}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
        return Err(Error::Command { cmd, detail });
    }
    let me = std::process::id() as i32;
    Ok(String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .filter(|&p| p != me)
        .collect())
}

fn signal(pids: &[i32], sig: libc::c_int) {
    for &p in pids {
        // SAFETY: kill(2) on a pid just listed inside the namespace being deleted.
        unsafe { libc::kill(p, sig) };
    }
}

/// Waits up to `limit` for namespace `name` to hold no process; returns those still there.
fn wait_empty(name: &str, limit: Duration) -> Result<Vec<i32>> {
    let end = Instant::now() + limit;
    loop {
        let left = pids(name)?;
        if left.is_empty() || Instant::now() >= end {
            return Ok(left);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Ends every process inside namespace `name`: SIGTERM, up to [`TERM_GRACE`] to exit, then
/// SIGKILL for those left. Returns how many there were.
pub fn kill_all(name: &str) -> Result<usize> {
    let first = pids(name)?;
    if first.is_empty() {
        return Ok(0);
    }
    signal(&first, libc::SIGTERM);
    let left = wait_empty(name, TERM_GRACE)?;
    if !left.is_empty() {
        tracing::warn!(
            "SIGKILL to {} process(es) in namespace {name} that outlived SIGTERM",
            left.len()
        );
        signal(&left, libc::SIGKILL);
        let stuck = wait_empty(name, TERM_GRACE)?;
        if !stuck.is_empty() {
            let e = std::io::Error::other("still running after SIGKILL");
            return Err(Error::sys(
                format!("ending processes {stuck:?} in namespace {name}"),
                e,
            ));
        }
    }
    Ok(first.len())
}

/// Names of the existing namespaces starting with `prefix`.
pub fn list(prefix: &str) -> Vec<String> {
    let Ok(dir) = std::fs::read_dir(NETNS_DIR) else {
        return Vec::new();
    };
    let mut v: Vec<String> = dir
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.starts_with(prefix))
        .collect();
    v.sort();
    v
}

/// Deletes every namespace whose name starts with `prefix`; returns the names deleted.
pub fn del_prefix(prefix: &str) -> Result<Vec<String>> {
    let names = list(prefix);
    for n in &names {
        del(n)?;
    }
    Ok(names)
}

/// Checks that namespaces can be created here (root, `ip` present) by adding and deleting a
/// probe namespace; the error says why not.
pub fn available() -> Result<()> {
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let probe = format!("haulprobe-{}-{n}", std::process::id());
    add(&probe)?;
    del(&probe)
}

/// Runs `f` on a thread that has entered namespace `name`; sockets and devices it creates live
/// in that namespace.
pub fn enter<T, F>(name: &str, f: F) -> Result<T>
where
    F: FnOnce() -> T + Send,
    T: Send,
{
    let path = Path::new(NETNS_DIR).join(name);
    let file = File::open(&path)
        .map_err(|e| Error::sys(format!("open namespace {}", path.display()), e))?;
    std::thread::scope(|s| {
        s.spawn(|| {
            // SAFETY: setns on a valid namespace fd affects only this thread.
            if unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
                return Err(Error::sys(
                    format!("setns into {name}"),
                    std::io::Error::last_os_error(),
                ));
            }
            Ok(f())
        })
        .join()
        .map_err(|_| Error::Config(format!("thread in namespace {name} panicked")))?
    })
}

/// Lets namespaces choose any congestion control the kernel has: a namespace may only select
/// algorithms in the host's `tcp_allowed_congestion_control`, which here lists `reno bbr` but
/// not `cubic`. Adds the available ones to the allowed list; removes nothing.
pub fn allow_all_congestion_controls() -> Result<()> {
    let avail = "/proc/sys/net/ipv4/tcp_available_congestion_control";
    let allowed = "/proc/sys/net/ipv4/tcp_allowed_congestion_control";
    let a =
        std::fs::read_to_string(avail).map_err(|e| Error::sys(format!("reading {avail}"), e))?;
    let cur = std::fs::read_to_string(allowed)
        .map_err(|e| Error::sys(format!("reading {allowed}"), e))?;
    if a.split_whitespace()
        .all(|x| cur.split_whitespace().any(|y| y == x))
    {
        return Ok(());
    }
    std::fs::write(allowed, a.trim()).map_err(|e| Error::sys(format!("writing {allowed}"), e))
}

/// Writes `value` to sysctl `key` (dotted, e.g. `net.ipv4.tcp_rmem`) inside namespace `ns`.
/// Keys absent or read-only in a namespace (not namespaced on this kernel) are skipped when
/// `optional`.
pub fn sysctls(ns: &str, settings: &[(&str, String, bool)]) -> Result<()> {
    enter(ns, || {
        for (key, value, optional) in settings {
            let path = format!("/proc/sys/{}", key.replace('.', "/"));
            match std::fs::write(&path, value) {
                Ok(()) => {}
                Err(e)
                    if *optional
                        && matches!(
                            e.kind(),
                            std::io::ErrorKind::NotFound | std::io::ErrorKind::PermissionDenied
                        ) => {}
                Err(e) => {
                    return Err(Error::sys(
                        format!("sysctl {key}={value} in namespace {ns}"),
                        e,
                    ))
                }
            }
        }
        Ok(())
    })?
}
