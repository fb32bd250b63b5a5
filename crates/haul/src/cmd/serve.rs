//! `haul serve`: run the GridFTP server of `haul-server` on a directory tree, or
//! (`--hash-password`) print the argon2 hash line for a users file.

use std::io::{BufRead, Write};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use haul_server::{Server, ServerConfig};

mod gsi;
mod journal;
mod predict;
mod relay;

/// Arguments of `haul serve`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Directory served as `/`.
    #[arg(long, required_unless_present = "hash_password")]
    root: Option<PathBuf>,
    /// Control address to listen on (port 0 picks a free port).
    #[arg(long, default_value = "127.0.0.1:2811")]
    listen: SocketAddr,
    /// Allow anonymous logins (`anonymous` / `ftp`), read-only unless --anonymous-write.
    #[arg(long)]
    anonymous: bool,
    /// Let anonymous users write.
    #[arg(long, requires = "anonymous")]
    anonymous_write: bool,
    /// Send files' pages to plain TCP data connections with sendfile (no copy at this end).
    #[arg(long)]
    sendfile: bool,
    /// Users file: lines `name:<argon2 hash>:rw|ro[,third-party][,relay]` (see --hash-password).
    #[arg(long)]
    users: Option<PathBuf>,
    /// PEM certificate chain enabling AUTH TLS.
    #[arg(long, requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// PEM private key for --tls-cert.
    #[arg(long, requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// Most concurrent control sessions.
    #[arg(long, default_value_t = 64)]
    max_sessions: usize,
    /// Most concurrent control sessions from one client address.
    #[arg(long, default_value_t = 48)]
    max_sessions_per_ip: usize,
    /// Most concurrent logged-in sessions of one named user.
    #[arg(long, default_value_t = 48)]
    max_sessions_per_user: usize,
    /// Seconds from connecting to a completed login.
    #[arg(long, default_value_t = 30)]
    login_timeout: u64,
    /// Refuse logins before AUTH TLS, and data connections without PROT P.
    #[arg(long, requires = "tls_cert")]
    require_tls: bool,
    /// Seconds a session may stay idle before it is closed.
    #[arg(long, default_value_t = 300)]
    idle_timeout: u64,
    /// Seconds a data phase may go without moving a byte (waiting for its connection included).
    #[arg(long, default_value_t = 60)]
    data_timeout: u64,
    /// Most data connections one transfer may open or accept (OPTS RETR Parallelism, SPOR).
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u64).range(1..=1024))]
    max_parallelism: u64,
    /// Read a password from stdin and print its argon2id hash for a users file, then exit.
    #[arg(long)]
    hash_password: bool,
    /// History database each served transfer is recorded in (default:
    /// $XDG_DATA_HOME/haul/history.sqlite, as haul cp).
    #[arg(long)]
    history: Option<PathBuf>,
    /// Record no history.
    #[arg(long, conflicts_with = "history")]
    no_history: bool,
    #[command(flatten)]
    relay: relay::RelayArgs,
    #[command(flatten)]
    gsi: gsi::GsiArgs,
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
    let root = args.root.context("--root is required")?;
    let mut cfg = ServerConfig::new(root);
    cfg.listen = args.listen;
    cfg.anonymous = args.anonymous;
    cfg.anonymous_write = args.anonymous_write;
    cfg.sendfile = args.sendfile;
    cfg.users = args.users;
    cfg.tls = args.tls_cert.zip(args.tls_key);
    cfg.gsi = args.gsi.build();
    cfg.max_sessions = args.max_sessions.max(1);
    cfg.max_sessions_per_ip = args.max_sessions_per_ip.max(1);
    cfg.max_sessions_per_user = args.max_sessions_per_user.max(1);
    cfg.login_timeout = Duration::from_secs(args.login_timeout.max(1));
    cfg.require_tls = args.require_tls;
    cfg.idle_timeout = Duration::from_secs(args.idle_timeout.max(1));
    cfg.data_timeout = Duration::from_secs(args.data_timeout.max(1));
    cfg.max_parallelism = args.max_parallelism as usize;
    if let Some(r) = args.relay.build(cfg.data_timeout)? {
        cfg.relay = Some(r);
    }
    if !args.no_history {
        let path = args.history.unwrap_or_else(haul_store::Store::default_path);
        match journal::HistoryJournal::start(path.clone()) {
            Ok(j) => {
                cfg.journal = Some(j);
                cfg.predictions = Some(std::sync::Arc::new(predict::HistoryPredictions::new(path)));
            }
            Err(e) => tracing::warn!("served transfers not recorded in {}: {e}", path.display()),
        }
    }
    if !cfg.anonymous && cfg.users.is_none() && cfg.gsi.is_none() {
        tracing::warn!("neither --anonymous nor --users given: nobody can log in");
    }
    let server = Server::bind(cfg)?;
    let addr = server.local_addr()?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "haul serve: listening on {addr}")?;
    out.flush()?;
    drop(out);
    server.run()?;
    Ok(ExitCode::SUCCESS)
}
