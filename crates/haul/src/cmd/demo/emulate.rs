//! `haul demo` on the emulator (as root): the same dataset sent over two emulated paths, a
//! clean one and a long lossy one, each from a cold history, so that the plan is seen to choose
//! differently: TCP where TCP does well, PLUT where loss cripples TCP. Every part is the real
//! one, as separate processes: `haul netem up --pair`, `haul serve` inside host `a`,
//! `haul send` inside host `b`.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use anyhow::Context;

/// One emulated path of the demo.
struct DemoPath {
    name: &'static str,
    flags: &'static [&'static str],
    /// What is sent over it, each from a cold history: `""` the whole dataset, else a
    /// subdirectory.
    sends: &'static [&'static str],
}

const PATHS: [DemoPath; 2] = [
    DemoPath {
        name: "clean: 1 Gb/s, RTT 20 ms, no loss",
        flags: &["--rate", "1gbit", "--rtt", "20ms"],
        sends: &[""],
    },
    DemoPath {
        name: "long and lossy: 1 Gb/s, RTT 100 ms, 0.1 % loss",
        flags: &["--rate", "1gbit", "--rtt", "100ms", "--loss", "0.1%"],
        // Many small files favour TCP with many connections; two big ones, PLUT.
        sends: &["", "large"],
    },
];

const PREFIX: &str = "hdemo-";

/// True when this process runs as root (network namespaces need it).
pub fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(2).map(|e| e == "0"))
        })
        .unwrap_or(false)
}

/// The testbed of one path; taken down when dropped.
struct Testbed {
    exe: PathBuf,
    state: PathBuf,
    server: Option<Child>,
}

impl Testbed {
    fn netem(&self, args: &[&str]) -> Command {
        let mut c = Command::new(&self.exe);
        c.arg("netem").arg("--state").arg(&self.state).args(args);
        c
    }

    fn up(exe: &Path, work: &Path, flags: &[&str]) -> anyhow::Result<Testbed> {
        let tb = Testbed {
            exe: exe.to_path_buf(),
            state: work.join("netem-state"),
            server: None,
        };
        let _ = tb.netem(&["down", "--prefix", PREFIX]).output();
        let out = tb
            .netem(&["up", "--pair", "--prefix", PREFIX])
            .args(flags)
            .output()
            .context("haul netem up")?;
        if !out.status.success() {
            anyhow::bail!("haul netem up: {}", String::from_utf8_lossy(&out.stderr));
        }
        for host in ["a", "b"] {
            // Long paths need socket buffers past the default 6 MiB.
            let _ = tb
                .netem(&["run", host, "--", "sysctl", "-qw"])
                .args([
                    "net.ipv4.tcp_rmem=4096 131072 67108864",
                    "net.ipv4.tcp_wmem=4096 16384 67108864",
                    "net.core.rmem_max=67108864",
                    "net.core.wmem_max=67108864",
                ])
                .output();
        }
        Ok(tb)
    }

    /// Starts `haul serve` over `root` in host a; returns its address.
    fn serve(&mut self, root: &Path) -> anyhow::Result<String> {
        let out = self
            .netem(&["addr", "a"])
            .output()
            .context("haul netem addr")?;
        let ip = String::from_utf8_lossy(&out.stdout).trim().to_string();
        let listen = format!("{ip}:2811");
        let mut child = self
            .netem(&["run", "a", "--"])
            .arg(&self.exe)
            .args([
                "serve",
                "--anonymous",
                "--no-history",
                "--listen",
                &listen,
                "--root",
            ])
            .arg(root)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .context("starting haul serve in host a")?;
        let mut line = String::new();
        if let Some(out) = child.stdout.take() {
            BufReader::new(out).read_line(&mut line)?;
        }
        self.server = Some(child);
        if !line.contains("listening on") {
            anyhow::bail!("haul serve in host a did not start: {line:?}");
        }
        Ok(listen)
    }
}

impl Drop for Testbed {
    fn drop(&mut self) {
        if let Some(mut c) = self.server.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = self.netem(&["down", "--prefix", PREFIX]).output();
    }
}

/// Sends `src` over each emulated path from a cold history, printing each report; returns
/// whether every copy matched the source, or `None` when the emulator cannot start here (no
/// `ip` command, no namespaces): the demo then runs on loopback.
pub fn run(src: &Path, work: &Path, json: bool) -> anyhow::Result<Option<bool>> {
    let exe = std::env::current_exe().context("finding the haul binary")?;
    let mut all_same = true;
    for (i, path) in PATHS.iter().enumerate() {
        if !json {
            println!("\nhaul demo: path {}: {}", i + 1, path.name);
        }
        let mut tb = match Testbed::up(&exe, work, path.flags) {
            Ok(tb) => tb,
            Err(e) if i == 0 => {
                eprintln!("haul demo: the emulator cannot start here ({e:#}); on loopback instead");
                return Ok(None);
            }
            Err(e) => return Err(e),
        };
        let addr = tb.serve(src)?;
        for (j, sub) in path.sends.iter().enumerate() {
            if !json {
                let what = if sub.is_empty() {
                    "the whole dataset".to_string()
                } else {
                    format!("{sub}/ alone")
                };
                println!("haul demo: sending {what}, cold");
            }
            let dst = work.join(format!("destination-{}-{}", i + 1, j + 1));
            let hist = work.join(format!("history-{}-{}.sqlite", i + 1, j + 1));
            let _ = std::fs::remove_dir_all(&dst);
            let _ = std::fs::remove_file(&hist);
            let mut send = tb.netem(&["run", "b", "--"]);
            send.arg(&exe)
                .args(["send", &format!("ftp://{addr}/{sub}")])
                .arg(&dst)
                .arg("--history")
                .arg(&hist)
                // A budget, so that even the demo's small dataset is probed on each path.
                .args(["--profile-budget", "6s"]);
            if json {
                send.arg("--json");
            }
            let status = send.status().context("running haul send in host b")?;
            if !status.success() {
                anyhow::bail!("haul send over the {} path failed ({status})", path.name);
            }
            let same = super::trees_equal(&src.join(sub), &dst)?;
            all_same &= same;
            if !json {
                println!(
                    "haul demo: the copy {} the source byte for byte",
                    if same { "matches" } else { "DOES NOT match" }
                );
            }
        }
    }
    Ok(Some(all_same))
}
