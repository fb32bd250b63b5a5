//! `haul demo`: haul's main job on an embedded default. It starts a haul server on loopback in
//! this process, generates a sample dataset of mixed file sizes, and runs `haul send` on it: the
//! plan (route and transport from what the server offers and the history knows), the probes,
//! the transfer with the tuned settings and the live concurrency search, verification of every
//! file end to end, the record in the history store, and the report. As root it runs on the
//! emulator instead (`demo/emulate.rs`): a clean and a long lossy path, where the plan chooses
//! differently.

mod emulate;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use haul_server::{Server, ServerConfig};

use super::{human_bytes, human_rate, parse_bytes};

/// Arguments of `haul demo`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Total size of the generated dataset.
    #[arg(long, value_parser = parse_bytes, default_value = "256M")]
    pub size: u64,
    /// Work directory (default: a fresh directory under the system temp dir, removed after).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// History database (default: $XDG_DATA_HOME/haul/history.sqlite).
    #[arg(long)]
    pub history: Option<PathBuf>,
    /// Print a JSON summary.
    #[arg(long)]
    pub json: bool,
    /// Stay on loopback even as root (as root the demo runs on the emulator: a clean and a
    /// long lossy path, in network namespaces).
    #[arg(long)]
    pub loopback: bool,
}

/// Fills a file with seeded pseudo-random bytes (xorshift64*), fast and reproducible.
fn write_random(path: &Path, len: u64, mut seed: u64) -> std::io::Result<()> {
    use std::io::Write;
    let mut f = std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(path)?);
    let mut left = len;
    let mut buf = vec![0u8; 1 << 16];
    seed |= 1;
    while left > 0 {
        for chunk in buf.chunks_mut(8) {
            seed ^= seed >> 12;
            seed ^= seed << 25;
            seed ^= seed >> 27;
            let v = seed.wrapping_mul(0x2545_F491_4F6C_DD1D).to_le_bytes();
            chunk.copy_from_slice(&v[..chunk.len()]);
        }
        let n = left.min(buf.len() as u64) as usize;
        f.write_all(&buf[..n])?;
        left -= n as u64;
    }
    f.flush()
}

/// Mixed sizes like a real dataset: many small files, some medium, a few large ones.
fn generate(root: &Path, total: u64) -> anyhow::Result<(u64, u64)> {
    let (mut files, mut bytes) = (0u64, 0u64);
    let plan = [
        (0.15, 200u64, "small"),
        (0.25, 20, "medium"),
        (0.60, 2, "large"),
    ];
    for (share, count, name) in plan {
        let dir = root.join(name);
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let per = ((total as f64 * share) / count as f64) as u64;
        for i in 0..count {
            // Vary sizes ±50% around the class mean.
            let len = per / 2 + (per * ((i * 7919) % 101)) / 100;
            let p = dir.join(format!("{name}-{i:04}.dat"));
            write_random(&p, len, i * 31 + count)
                .with_context(|| format!("writing {}", p.display()))?;
            files += 1;
            bytes += len;
        }
    }
    Ok((files, bytes))
}

/// Runs `haul demo`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let (work, cleanup) = match &args.dir {
        Some(d) => (d.clone(), false),
        None => (
            std::env::temp_dir().join(format!("haul-demo-{}", std::process::id())),
            true,
        ),
    };
    let src = work.join("source");
    let dst = work.join("destination");
    let _ = std::fs::remove_dir_all(&dst);
    std::fs::create_dir_all(&src).with_context(|| format!("creating {}", src.display()))?;
    if !args.json {
        println!(
            "haul demo: generating a {} dataset in {}",
            human_bytes(args.size),
            src.display()
        );
    }
    let (files, bytes) = generate(&src, args.size)?;
    if !args.loopback && emulate::is_root() {
        if !args.json {
            println!(
                "haul demo: {files} files ({}); as root, on the emulator (--loopback to stay on loopback)",
                human_bytes(bytes)
            );
        }
        if let Some(same) = emulate::run(&src, &work, args.json)? {
            if cleanup {
                let _ = std::fs::remove_dir_all(&work);
            }
            if !same {
                anyhow::bail!("demo destination differs from the source");
            }
            return Ok(ExitCode::SUCCESS);
        }
    }
    let mut cfg = ServerConfig::new(&src);
    cfg.listen = "127.0.0.1:0".parse()?;
    cfg.anonymous = true;
    let server = Server::spawn(cfg).context("starting the in-process haul server")?;
    let url = format!("ftp://{}/", server.addr());
    if !args.json {
        println!("haul demo: server on {url}; haul send plans, profiles, moves, verifies and records {files} files ({})", human_bytes(bytes));
    }
    // A budget, so that even this small dataset shows the probes and FastProf.
    let mut words = vec![
        url,
        dst.display().to_string(),
        "--profile-budget".into(),
        "3s".into(),
    ];
    if let Some(h) = &args.history {
        words.push("--history".into());
        words.push(h.display().to_string());
    }
    if args.json {
        words.push("--json".into());
    }
    let send = <SendOnly as clap::Parser>::try_parse_from(
        std::iter::once("haul".to_string()).chain(words),
    )?;
    let started = std::time::Instant::now();
    let code = super::send::run(send.send)?;
    let secs = started.elapsed().as_secs_f64();
    server.shutdown();
    let same = trees_equal(&src, &dst)?;
    if !args.json {
        println!(
            "haul demo: {} in {:.2} s ({}); destination {} the source byte for byte",
            human_bytes(bytes),
            secs,
            human_rate(bytes as f64 * 8.0 / secs.max(1e-9)),
            if same { "matches" } else { "DOES NOT match" }
        );
    }
    if cleanup {
        let _ = std::fs::remove_dir_all(&work);
    }
    if !same {
        anyhow::bail!("demo destination differs from the source");
    }
    Ok(code)
}

#[derive(clap::Parser)]
struct SendOnly {
    #[command(flatten)]
    send: super::send::Args,
}

/// Compares two trees file by file.
pub fn trees_equal(a: &Path, b: &Path) -> anyhow::Result<bool> {
    for e in std::fs::read_dir(a).with_context(|| format!("reading {}", a.display()))? {
        let e = e?;
        let other = b.join(e.file_name());
        if e.file_type()?.is_dir() {
            if !trees_equal(&e.path(), &other)? {
                return Ok(false);
            }
        } else if std::fs::read(e.path())? != std::fs::read(&other).unwrap_or_default() {
            return Ok(false);
        }
    }
    Ok(true)
}
