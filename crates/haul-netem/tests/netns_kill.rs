//! Deleting a namespace ends the processes inside it (what `haul netem run` starts), instead of
//! leaving them running in a namespace nobody can reach any more: SIGTERM first, SIGKILL for
//! those that ignore it.

use std::os::unix::process::ExitStatusExt;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use haul_netem::netns;

/// Polls `f` until it holds, for at most `limit`.
fn within(limit: Duration, f: impl Fn() -> bool) -> bool {
    let end = Instant::now() + limit;
    while !f() {
        if Instant::now() > end {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    true
}

/// The signal that ended `child` within `limit`; a child still running then is killed and
/// reported as None.
fn ended_by(child: &mut Child, limit: Duration) -> Option<i32> {
    let end = Instant::now() + limit;
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s.signal();
        }
        if Instant::now() > end {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn comm(pid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .unwrap_or_default()
        .trim()
        .to_string()
}

#[test]
fn deleting_a_namespace_ends_the_processes_inside() {
    if let Err(e) = netns::available() {
        eprintln!("skipping: network namespaces unavailable (need root and iproute2): {e}");
        return;
    }
    let ns = format!("hnt-kill-{}", std::process::id());
    netns::add(&ns).unwrap();
    let run = |cmd: &[&str]| {
        Command::new("ip")
            .args(["netns", "exec", &ns])
            .args(cmd)
            .spawn()
            .unwrap()
    };
    let mut polite = run(&["sleep", "1000"]);
    // Ignores SIGTERM (an ignored signal stays ignored across exec).
    let mut stubborn = run(&["sh", "-c", "trap '' TERM; exec sleep 1000"]);
    assert!(
        within(Duration::from_secs(10), || comm(polite.id()) == "sleep"
            && comm(stubborn.id()) == "sleep"),
        "the two processes did not start in {ns}"
    );
    netns::del(&ns).unwrap();
    let (p, s) = (
        ended_by(&mut polite, Duration::from_secs(5)),
        ended_by(&mut stubborn, Duration::from_secs(5)),
    );
    assert_eq!(
        p,
        Some(libc::SIGTERM),
        "a process was left running in the deleted namespace"
    );
    assert_eq!(
        s,
        Some(libc::SIGKILL),
        "a process ignoring SIGTERM was left running"
    );
    assert!(!netns::list(&ns).contains(&ns));
}
