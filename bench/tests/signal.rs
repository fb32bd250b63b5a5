//! A stop signal to `haul-bench run` stops the running contender and the setup servers (which
//! live in their own process groups, out of a terminal's Ctrl-C) and still runs the teardown.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Waits up to `secs` for `path` to hold a pid.
fn read_pid(path: &Path, secs: f64) -> i32 {
    let end = Instant::now() + Duration::from_secs_f64(secs);
    loop {
        if let Some(pid) = std::fs::read_to_string(path)
            .ok()
            .and_then(|s| s.trim().parse().ok())
        {
            return pid;
        }
        assert!(Instant::now() < end, "{} never appeared", path.display());
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Whether `pid` is a live process (not gone, not a zombie).
fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            stat.rsplit(')')
                .next()
                .and_then(|rest| rest.split_whitespace().next())
                != Some("Z")
        }
        Err(_) => false,
    }
}

fn stops_everything_on(signal: i32) {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().display();
    let scenario = dir.path().join("sig.toml");
    std::fs::write(
        &scenario,
        format!(
            r#"name = "sig"
repetitions = 3
baseline = "slow"
unit = "s"
[[setup]]
name = "server"
command = "echo $$ > {d}/server.pid && exec sleep 1000"
[[contender]]
name = "slow"
command = "echo $$ > {d}/contender.pid && exec sleep 1000"
metric = "elapsed"
timeout_s = 2000
[[teardown]]
command = "touch {d}/torn-down"
"#
        ),
    )
    .unwrap();
    let mut bench = Command::new(env!("CARGO_BIN_EXE_haul-bench"))
        .args([
            "run",
            &scenario.display().to_string(),
            "--out",
            &format!("{d}/out"),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let server = read_pid(&dir.path().join("server.pid"), 20.0);
    let contender = read_pid(&dir.path().join("contender.pid"), 20.0);
    assert!(alive(server) && alive(contender));
    // SAFETY: kill has no memory-safety preconditions; the pid is our own child.
    unsafe { libc::kill(bench.id() as i32, signal) };
    let end = Instant::now() + Duration::from_secs(15);
    let status = loop {
        if let Some(s) = bench.try_wait().unwrap() {
            break s;
        }
        assert!(
            Instant::now() < end,
            "haul-bench still running 15 s after signal {signal}"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let stderr = std::io::read_to_string(bench.stderr.take().unwrap()).unwrap();
    assert!(!status.success(), "exit status {status}");
    assert!(
        stderr.contains(&format!("interrupted by signal {signal}")),
        "stderr: {stderr}"
    );
    assert!(
        !alive(contender),
        "the contender (pid {contender}) outlived haul-bench"
    );
    assert!(
        !alive(server),
        "the setup server (pid {server}) outlived haul-bench"
    );
    assert!(
        dir.path().join("torn-down").exists(),
        "teardown did not run"
    );
}

#[test]
fn sigterm_stops_contender_servers_and_runs_teardown() {
    stops_everything_on(libc::SIGTERM);
}

#[test]
fn sigint_stops_contender_servers_and_runs_teardown() {
    stops_everything_on(libc::SIGINT);
}
