//! `haul serve`'s settings, from its flags and its config file (`--config FILE`, TOML), in one
//! place: [`Opts`] is both the flags (clap) and the file's keys (serde), so every flag is a key
//! of the same name with `_` for `-` (`--max-sessions-per-ip` is `max_sessions_per_ip`), and
//! the relay flags (`--relay-X`) are the keys of a `[relay]` table (the `--relay-config` file's
//! format). The file is read first (an unknown key is an error naming the key and the file),
//! the flags given are laid over it ([`merge`]), and [`Settings::derive`] turns the result into
//! the server's configuration with the defaults, in one function.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use haul_server::ServerConfig;
use serde::{Deserialize, Serialize};

use super::relay::{RelayArgs, RelayFile};

/// The flags of `haul serve` that are also config-file keys.
#[derive(clap::Args, Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Opts {
    /// Directory served as `/`.
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub root: Option<PathBuf>,
    /// Control address to listen on (port 0 picks a free port) [default: 127.0.0.1:2811].
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub listen: Option<SocketAddr>,
    /// Allow anonymous logins (`anonymous` / `ftp`), read-only unless --anonymous-write.
    #[arg(long)]
    #[serde(default, skip_serializing_if = "is_false")]
    pub anonymous: bool,
    /// Let anonymous users write.
    #[arg(long)]
    #[serde(default, skip_serializing_if = "is_false")]
    pub anonymous_write: bool,
    /// Send files' pages to plain TCP data connections with sendfile (no copy at this end).
    #[arg(long)]
    #[serde(default, skip_serializing_if = "is_false")]
    pub sendfile: bool,
    /// Write large uploads (an `ALLO` of 64 MiB or more, with a pipelined `CKSM XXHC`, as
    /// `haul cp` sends them) to local disks through the page cache, as other uploads are,
    /// instead of around it (`O_DIRECT`).
    #[arg(long)]
    #[serde(default, skip_serializing_if = "is_false")]
    pub no_direct_io: bool,
    /// Users file: lines `name:<argon2 hash>:rw|ro[,third-party][,relay]` (see --hash-password);
    /// reloaded on SIGHUP.
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub users: Option<PathBuf>,
    /// PEM certificate chain enabling AUTH TLS (with --tls-key); reloaded on SIGHUP.
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls_cert: Option<PathBuf>,
    /// PEM private key for --tls-cert; reloaded on SIGHUP.
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls_key: Option<PathBuf>,
    /// GSI host certificate (default: $X509_USER_CERT, else /etc/grid-security/hostcert.pem);
    /// GSI is offered whenever the host credential exists; reloaded on SIGHUP.
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gsi_cert: Option<PathBuf>,
    /// GSI host key (default: $X509_USER_KEY, else /etc/grid-security/hostkey.pem).
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gsi_key: Option<PathBuf>,
    /// Trusted CA directory (default: $X509_CERT_DIR, else /etc/grid-security/certificates).
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gsi_cert_dir: Option<PathBuf>,
    /// grid-mapfile (default: $GRIDMAP, else /etc/grid-security/grid-mapfile); reloaded on
    /// SIGHUP.
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gridmap: Option<PathBuf>,
    /// Mapped GSI accounts the users file does not list may only read (default: read-write).
    #[arg(long)]
    #[serde(default, skip_serializing_if = "is_false")]
    pub gsi_read_only: bool,
    /// Most proxy certificates accepted in a GSI client's chain [default: 10].
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gsi_max_proxies: Option<usize>,
    /// Do not offer GSI even if a host credential is present.
    #[arg(long)]
    #[serde(default, skip_serializing_if = "is_false")]
    pub no_gsi: bool,
    /// Refuse logins before AUTH TLS, and data connections without PROT P.
    #[arg(long)]
    #[serde(default, skip_serializing_if = "is_false")]
    pub require_tls: bool,
    /// Most concurrent control sessions [default: 64].
    #[arg(long, value_name = "N")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_sessions: Option<usize>,
    /// Most concurrent control sessions from one client address [default: 48].
    #[arg(long, value_name = "N")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_sessions_per_ip: Option<usize>,
    /// Most concurrent logged-in sessions of one named user [default: 48].
    #[arg(long, value_name = "N")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_sessions_per_user: Option<usize>,
    /// Seconds from connecting to a completed login [default: 30].
    #[arg(long, value_name = "SECS")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub login_timeout: Option<u64>,
    /// Seconds a session may stay idle before it is closed [default: 300].
    #[arg(long, value_name = "SECS")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idle_timeout: Option<u64>,
    /// Seconds a data phase may go without moving a byte (waiting for its connection included)
    /// [default: 60].
    #[arg(long, value_name = "SECS")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data_timeout: Option<u64>,
    /// Most data connections one transfer may open or accept (OPTS RETR Parallelism, SPOR),
    /// 1 to 1024 [default: 64].
    #[arg(long, value_name = "N")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_parallelism: Option<u64>,
    /// Ports for passive data connections (PASV, SPAS, PLUT PASV), LOW-HIGH, for the firewall
    /// [default: any port the kernel gives].
    #[arg(long, value_name = "LOW-HIGH", value_parser = parse_ports)]
    #[serde(default, skip_serializing_if = "Option::is_none", with = "ports_serde")]
    pub data_ports: Option<(u16, u16)>,
    /// On SIGTERM or SIGINT: seconds running transfers get to finish before the remaining
    /// sessions are closed [default: 60].
    #[arg(long, value_name = "SECS")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub drain_timeout: Option<u64>,
    /// Serve Prometheus metrics at http://ADDR/metrics [default: off].
    #[arg(long, value_name = "ADDR")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metrics: Option<SocketAddr>,
    /// Most distinct users, and client addresses, the metrics label; the rest count as
    /// `other` [default: 32].
    #[arg(long, value_name = "N")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metrics_labels: Option<usize>,
    /// History database each served transfer is recorded in (default:
    /// $XDG_DATA_HOME/haul/history.sqlite, as haul cp).
    #[arg(long)]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub history: Option<PathBuf>,
    /// Record no history.
    #[arg(long)]
    #[serde(default, skip_serializing_if = "is_false")]
    pub no_history: bool,
    /// Also be an aggregating registry: poll these haul servers' `SITE BTC` every
    /// --registry-interval and answer `SITE BTC ALL` with what they said. HOST:PORT or
    /// ftp://HOST:PORT (haul:// with --relay-ca), comma-separated; logins as the relay's
    /// `[[credentials]]` give, else anonymous (docs/relay.md).
    #[arg(long, value_delimiter = ',', value_name = "HOST:PORT,...")]
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub registry_gather: Vec<String>,
    /// Seconds between a registry's polls of each server [default: 60].
    #[arg(long, value_name = "SECS")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub registry_interval: Option<u64>,
    /// Scheduled probes (off by default): every --probe-interval, download --probe-bytes of
    /// `/dev/zero` from each of these haul or GridFTP servers to `/dev/null`, one at a time,
    /// and record each in the history (kind `probe`), so `SITE BTC` predicts legs nobody used
    /// lately. HOST:PORT or ftp://HOST:PORT, comma-separated; logins as the relay's
    /// `[[credentials]]` give, else anonymous (docs/relay.md).
    #[arg(long, value_delimiter = ',', value_name = "HOST:PORT,...")]
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub probe: Vec<String>,
    /// Time between rounds of scheduled probes, e.g. 30m [default: 1h].
    #[arg(long, value_name = "DURATION")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub probe_interval: Option<String>,
    /// Bytes each scheduled probe moves, e.g. 256MiB [default: 64MiB].
    #[arg(long, value_name = "SIZE")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub probe_bytes: Option<String>,
    /// The relay flags; in the config file, the `[relay]` table.
    #[command(flatten)]
    #[serde(skip)]
    pub relay: RelayArgs,
    /// The config file's `[relay]` table.
    #[arg(skip)]
    #[serde(rename = "relay", skip_serializing_if = "Option::is_none")]
    pub relay_table: Option<RelayFile>,
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// `--data-ports LOW-HIGH` (a single port is `P-P`).
pub fn parse_ports(s: &str) -> Result<(u16, u16), String> {
    let bad = || format!("{s:?}: expected LOW-HIGH, ports from 1 to 65535, LOW <= HIGH");
    let (low, high) = s.split_once('-').ok_or_else(bad)?;
    let (low, high): (u16, u16) = (
        low.trim().parse().map_err(|_| bad())?,
        high.trim().parse().map_err(|_| bad())?,
    );
    if low == 0 || low > high {
        return Err(bad());
    }
    Ok((low, high))
}

/// `data_ports = "LOW-HIGH"` in the config file.
mod ports_serde {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &Option<(u16, u16)>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            Some((l, h)) => s.serialize_str(&format!("{l}-{h}")),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<(u16, u16)>, D::Error> {
        let s = String::deserialize(d)?;
        super::parse_ports(&s)
            .map(Some)
            .map_err(serde::de::Error::custom)
    }
}

/// Reads a config file: its keys, or an error naming the file (and the unknown key, line and
/// column). A file with next-hop passwords (`[[relay.credentials]]`) must not be readable by
/// others.
pub fn read(path: &Path) -> anyhow::Result<Opts> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading --config {}", path.display()))?;
    let opts: Opts = toml::from_str(&text)
        .map_err(|e| anyhow::anyhow!("config file {}: {}", path.display(), e.to_string().trim()))?;
    if let Some(r) = &opts.relay_table {
        super::relay::check_private(path, r)?;
    }
    Ok(opts)
}

/// The flags given laid over the file's keys: a key is used only where its flag is absent
/// (a boolean flag can turn a key on, not off).
pub fn merge(flags: Opts, file: Opts) -> anyhow::Result<Opts> {
    let table = |o: &Opts| -> anyhow::Result<toml::Table> {
        match toml::Value::try_from(o)? {
            toml::Value::Table(t) => Ok(t),
            _ => anyhow::bail!("settings are not a table"),
        }
    };
    let mut merged = table(&file)?;
    merged.extend(table(&flags)?);
    let mut opts: Opts = toml::Value::Table(merged).try_into()?;
    opts.relay = flags.relay;
    Ok(opts)
}

/// Everything `haul serve` runs with, derived from the merged flags and keys.
#[derive(Debug)]
pub struct Settings {
    /// The server's configuration (without its journal, predictions and relay).
    pub server: ServerConfig,
    /// Where the metrics are served, if anywhere.
    pub metrics: Option<SocketAddr>,
    /// Distinct users and addresses the metrics label.
    pub metrics_labels: usize,
    /// How long a drain lets transfers run.
    pub drain_timeout: Duration,
    /// The history database, unless `no_history`.
    pub history: Option<PathBuf>,
    /// The relay flags and the `[relay]` table with the file it came from.
    pub relay: (RelayArgs, Option<(RelayFile, PathBuf)>),
    /// The servers an aggregating registry polls (none: it is no registry), and how often.
    pub registry: (Vec<String>, Duration),
    /// The servers scheduled probes download from (none: no probes), how often, how much.
    pub probes: super::probe::Plan,
}

impl Settings {
    /// The settings of merged `opts` (`config`: the file they came from, for errors), with
    /// every default applied and every contradiction refused.
    pub fn derive(o: Opts, config: Option<&Path>) -> anyhow::Result<Settings> {
        let root = o
            .root
            .context("--root (or `root` in the --config file) is required")?;
        anyhow::ensure!(
            o.anonymous || !o.anonymous_write,
            "--anonymous-write needs --anonymous"
        );
        anyhow::ensure!(
            o.tls_cert.is_some() == o.tls_key.is_some(),
            "--tls-cert and --tls-key go together"
        );
        let parallelism = o.max_parallelism.unwrap_or(64);
        anyhow::ensure!(
            (1..=1024).contains(&parallelism),
            "--max-parallelism {parallelism}: expected 1 to 1024"
        );
        let secs = |v: Option<u64>, default: u64| Duration::from_secs(v.unwrap_or(default).max(1));
        let mut cfg = ServerConfig::new(root);
        cfg.listen = o
            .listen
            .unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], 2811)));
        cfg.anonymous = o.anonymous;
        cfg.anonymous_write = o.anonymous_write;
        cfg.sendfile = o.sendfile;
        cfg.direct_io = !o.no_direct_io;
        cfg.users = o.users;
        cfg.tls = o.tls_cert.zip(o.tls_key);
        cfg.gsi = super::gsi::settings(super::gsi::GsiOpts {
            cert: o.gsi_cert,
            key: o.gsi_key,
            cert_dir: o.gsi_cert_dir,
            gridmap: o.gridmap,
            read_only: o.gsi_read_only,
            max_proxies: o.gsi_max_proxies,
            off: o.no_gsi,
        })?;
        cfg.require_tls = o.require_tls;
        cfg.max_sessions = o.max_sessions.unwrap_or(64).max(1);
        cfg.max_sessions_per_ip = o.max_sessions_per_ip.unwrap_or(48).max(1);
        cfg.max_sessions_per_user = o.max_sessions_per_user.unwrap_or(48).max(1);
        cfg.login_timeout = secs(o.login_timeout, 30);
        cfg.idle_timeout = secs(o.idle_timeout, 300);
        cfg.data_timeout = secs(o.data_timeout, 60);
        cfg.max_parallelism = parallelism as usize;
        cfg.data_ports = o.data_ports;
        let probes = probe_plan(o.probe, &o.probe_interval, &o.probe_bytes)?;
        anyhow::ensure!(
            probes.peers.is_empty() || !o.no_history,
            "--probe records its probes in the history: it does not go with --no-history"
        );
        let table = o
            .relay_table
            .map(|t| (t, config.map(Path::to_path_buf).unwrap_or_default()));
        Ok(Settings {
            server: cfg,
            metrics: o.metrics,
            metrics_labels: o.metrics_labels.unwrap_or(32),
            drain_timeout: secs(o.drain_timeout, 60),
            history: (!o.no_history)
                .then(|| o.history.unwrap_or_else(haul_store::Store::default_path)),
            relay: (o.relay, table),
            registry: (o.registry_gather, secs(o.registry_interval, 60)),
            probes,
        })
    }
}

/// The scheduled probes of `--probe`, `--probe-interval` (default 1 h, at least 1 s) and
/// `--probe-bytes` (default 64 MiB, at least 1 MiB: less says more about set-up than
/// throughput, and predictions leave it out).
fn probe_plan(
    peers: Vec<String>,
    interval: &Option<String>,
    bytes: &Option<String>,
) -> anyhow::Result<super::probe::Plan> {
    let interval = match interval {
        Some(t) => haul_units::parse_duration(t)
            .map_err(|e| anyhow::anyhow!("--probe-interval {t:?}: {}", e.why))?,
        None => 3600.0,
    };
    let bytes = match bytes {
        Some(b) => crate::cmd::parse_bytes(b).map_err(|e| anyhow::anyhow!("--probe-bytes: {e}"))?,
        None => 64 << 20,
    };
    anyhow::ensure!(
        interval >= 1.0,
        "--probe-interval: at least 1s between rounds of probes"
    );
    anyhow::ensure!(bytes >= 1 << 20, "--probe-bytes: at least 1MiB");
    Ok(super::probe::Plan {
        peers,
        interval: Duration::from_secs_f64(interval),
        bytes,
    })
}

#[cfg(test)]
mod tests;
