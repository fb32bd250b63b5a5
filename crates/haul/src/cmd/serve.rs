//! `haul serve`: run the GridFTP server of `haul-server` on a directory tree, or
//! (`--hash-password`) print the argon2 hash line for a users file. Settings come from the
//! flags and `--config` (`config`); SIGHUP reloads and SIGTERM / SIGINT drain (`signals`);
//! `--metrics` serves Prometheus metrics; `--registry-gather` makes it an aggregating registry
//! of other servers' predictions (`registry`); `--probe` turns on scheduled probes (`probe`).

use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use haul_server::journal::{Tee, TransferLog};
use haul_server::metrics::Metrics;
use haul_server::Server;

mod config;
mod gsi;
mod journal;
mod predict;
mod probe;
mod registry;
mod relay;
mod signals;

/// Arguments of `haul serve`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Settings from a TOML file: every flag below is a key of the same name with `_` for `-`,
    /// the relay flags are the keys of its `[relay]` table; flags override keys (docs/serve.md).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Read a password from stdin and print its argon2id hash for a users file, then exit.
    #[arg(long)]
    hash_password: bool,
    #[command(flatten)]
    opts: Box<config::Opts>,
}

/// Runs `haul serve`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if args.hash_password {
        let mut line = String::new();
        std::io::stdin()
            .lock()
            .read_line(&mut line)
            .context("reading the password from stdin")?;
        let pw = line.trim_end_matches(['\r', '\n']);
        anyhow::ensure!(!pw.is_empty(), "empty password on stdin");
        println!("{}", haul_server::hash_password(pw)?);
        return Ok(ExitCode::SUCCESS);
    }
    let opts = match &args.config {
        Some(path) => config::merge(*args.opts, config::read(path)?)?,
        None => *args.opts,
    };
    let settings = config::Settings::derive(opts, args.config.as_deref())?;
    let mut cfg = settings.server;
    let (relay, table) = settings.relay;
    let built = relay.build(cfg.data_timeout, table)?;
    if let Some(r) = built.relay.clone() {
        cfg.relay = Some(r);
    }
    cfg.registry = registry::start(&settings.registry, &built)?;
    let history = settings.history.as_deref();
    probe::start(&settings.probes, &built, history, cfg.data_timeout)?;
    let mut logs: Vec<Arc<dyn TransferLog>> = Vec::new();
    if let Some(path) = settings.history.clone() {
        match journal::HistoryJournal::start(path.clone()) {
            Ok(j) => {
                logs.push(j);
                cfg.predictions = Some(Arc::new(predict::HistoryPredictions::new(path)));
            }
            Err(e) => tracing::warn!("served transfers not recorded in {}: {e}", path.display()),
        }
    }
    let metrics = match settings.metrics {
        Some(addr) => {
            let listener = std::net::TcpListener::bind(addr)
                .with_context(|| format!("--metrics {addr}: cannot listen"))?;
            let m = Arc::new(Metrics::new(settings.metrics_labels));
            logs.push(m.clone());
            Some((listener, m))
        }
        None => None,
    };
    cfg.journal = match logs.len() {
        0 => None,
        1 => logs.pop(),
        _ => Some(Arc::new(Tee(logs))),
    };
    if !cfg.anonymous && cfg.users.is_none() && cfg.gsi.is_none() {
        tracing::warn!("neither --anonymous nor --users given: nobody can log in");
    }
    let server = Server::bind(cfg)?;
    let addr = server.local_addr()?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "haul serve: listening on {addr}")?;
    if let Some((listener, m)) = metrics {
        writeln!(
            out,
            "haul serve: metrics on http://{}/metrics",
            listener.local_addr()?
        )?;
        haul_server::metrics::serve_http(listener, m, Default::default())?;
    }
    out.flush()?;
    drop(out);
    let ops = server.ops();
    signals::handle(ops.clone())?;
    server.run()?;
    signals::drain(&ops, settings.drain_timeout);
    Ok(ExitCode::SUCCESS)
}
