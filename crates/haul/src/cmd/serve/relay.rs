//! `haul serve`'s relay flags and its relay config file (TOML), turned into a
//! [`haul_overlay::Relay`]. Flags override the file's keys.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use haul_overlay::{AllowList, Credential, Relay, RelayConfig};

/// The relay flags of `haul serve`.
#[derive(clap::Args, Debug, Default)]
pub struct RelayArgs {
    /// Relay commands on nested URLs (ftp://relay/ftp://origin/path) to these next hops only:
    /// HOST[:PORT], ADDR[:PORT] or NET/LEN[:PORT], comma-separated. Off unless given here or
    /// as `allow` in --relay-config.
    #[arg(long, value_name = "HOST[:PORT],...")]
    relay_allow: Option<String>,
    /// Let anonymous users relay (named users need `relay` in the users file).
    #[arg(long)]
    relay_anonymous: bool,
    /// Most relaying sessions at once [default: 16].
    #[arg(long, value_name = "N")]
    relay_sessions: Option<usize>,
    /// Most relaying sessions of one user at once [default: 4].
    #[arg(long, value_name = "N")]
    relay_sessions_per_user: Option<usize>,
    /// Buffer memory of all relayed transfers together, e.g. 512M [default: 512M].
    #[arg(long, value_name = "SIZE", value_parser = crate::cmd::parse_bytes)]
    relay_memory: Option<u64>,
    /// Buffer memory of one relayed transfer, e.g. 32M [default: 32M].
    #[arg(long, value_name = "SIZE", value_parser = crate::cmd::parse_bytes)]
    relay_buffer: Option<u64>,
    /// TCP streams on the next leg [default: 4].
    #[arg(long, value_name = "N")]
    relay_parallelism: Option<u32>,
    /// Socket buffer size of the next leg's data connections, e.g. 16M [default: autotuning].
    #[arg(long, value_name = "SIZE", value_parser = crate::cmd::parse_bytes)]
    relay_tcp_buffer: Option<u64>,
    /// Next hops whose downloads go over PLUT (reliable UDP) instead of TCP: the long lossy
    /// leg (same forms as --relay-allow; they must be allowed there too).
    #[arg(long, value_name = "HOST[:PORT],...")]
    relay_plut: Option<String>,
    /// The rate PLUT legs are sent at, e.g. 1gbit [default: PLUT's].
    #[arg(long, value_name = "RATE", value_parser = crate::cmd::parse_rate_bytes)]
    relay_plut_rate: Option<u64>,
    /// PEM CA certificates that haul:// next hops must chain to.
    #[arg(long, value_name = "FILE")]
    relay_ca: Option<PathBuf>,
    /// Relay config file (TOML): the keys above without `relay-`, plus `[[credentials]]`
    /// (host, port, user, pass) for next hops (see docs/relay.md).
    #[arg(long, value_name = "FILE")]
    relay_config: Option<PathBuf>,
}

/// Credentials for one next hop, in the config file.
#[derive(serde::Deserialize, serde::Serialize, Debug)]
#[serde(deny_unknown_fields)]
struct FileCredential {
    host: String,
    #[serde(default = "default_port")]
    port: u16,
    user: String,
    pass: String,
}

fn default_port() -> u16 {
    haul_xfer::url::DEFAULT_PORT
}

/// The relay config file (and the `[relay]` table of `haul serve --config`).
#[derive(serde::Deserialize, serde::Serialize, Default, Debug)]
#[serde(deny_unknown_fields)]
pub struct RelayFile {
    allow: Option<Vec<String>>,
    anonymous: Option<bool>,
    sessions: Option<usize>,
    sessions_per_user: Option<usize>,
    memory: Option<String>,
    buffer: Option<String>,
    parallelism: Option<u32>,
    tcp_buffer: Option<String>,
    plut: Option<Vec<String>>,
    plut_rate: Option<String>,
    ca: Option<PathBuf>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    credentials: Vec<FileCredential>,
}

fn size(key: &str, v: &str, file: &Path) -> anyhow::Result<u64> {
    haul_units::parse_size(v).with_context(|| format!("{}: {key} = {v:?}", file.display()))
}

/// Reads a relay config file, refusing one that others may read (it may hold passwords).
fn read_file(path: &Path) -> anyhow::Result<RelayFile> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading --relay-config {}", path.display()))?;
    let f: RelayFile =
        toml::from_str(&text).with_context(|| format!("--relay-config {}", path.display()))?;
    check_private(path, &f)?;
    Ok(f)
}

/// Refuses `path`, which holds `f`, when `f` has next-hop passwords and others may read it.
pub fn check_private(path: &Path, f: &RelayFile) -> anyhow::Result<()> {
    use std::os::unix::fs::MetadataExt;
    let mode = std::fs::metadata(path)?.mode();
    if !f.credentials.is_empty() && mode & 0o077 != 0 {
        anyhow::bail!(
            "{} holds passwords and others may read it (mode {:o}): chmod 600 it",
            path.display(),
            mode & 0o777
        );
    }
    Ok(())
}

/// What the relay flags and file give: the relay, when relaying is on, and the next-hop
/// credentials and CA, which the registry's polls use too.
pub struct Built {
    /// The relay; None when relaying is off.
    pub relay: Option<Arc<Relay>>,
    /// `[[credentials]]`, for next hops and polled servers.
    pub credentials: Vec<Credential>,
    /// `--relay-ca` / `ca`: CA certificates haul:// next hops and polled servers must chain to.
    pub ca: Option<PathBuf>,
}

impl RelayArgs {
    /// The relay these flags (and their config file, or else `table`: the `[relay]` table of
    /// the file named with it) describe, with their credentials and CA.
    pub fn build(
        self,
        data_timeout: Duration,
        table: Option<(RelayFile, PathBuf)>,
    ) -> anyhow::Result<Built> {
        let (mut file, fpath) = match (&self.relay_config, table) {
            (Some(p), _) => (read_file(p)?, p.clone()),
            (None, Some(t)) => t,
            (None, None) => Default::default(),
        };
        let credentials: Vec<Credential> = std::mem::take(&mut file.credentials)
            .into_iter()
            .map(|c| Credential {
                host: c.host,
                port: c.port,
                user: c.user,
                pass: c.pass,
            })
            .collect();
        let ca = self.relay_ca.clone().or(file.ca.clone());
        let relay = self.relay(file, &fpath, credentials.clone(), data_timeout)?;
        Ok(Built {
            relay,
            credentials,
            ca,
        })
    }

    /// The relay, None when relaying is off.
    fn relay(
        self,
        file: RelayFile,
        fpath: &Path,
        credentials: Vec<Credential>,
        data_timeout: Duration,
    ) -> anyhow::Result<Option<Arc<Relay>>> {
        let allow = match (&self.relay_allow, &file.allow) {
            (Some(a), _) => a.clone(),
            (None, Some(list)) => list.join(","),
            (None, None) => return Ok(None),
        };
        let allow: AllowList = allow
            .parse()
            .map_err(|e| anyhow::anyhow!("--relay-allow: {e}"))?;
        let mut cfg = RelayConfig::new(allow);
        cfg.anonymous = self.relay_anonymous || file.anonymous.unwrap_or(false);
        if let Some(n) = self.relay_sessions.or(file.sessions) {
            cfg.max_sessions = n.max(1);
        }
        if let Some(n) = self.relay_sessions_per_user.or(file.sessions_per_user) {
            cfg.max_per_user = n.max(1);
        }
        let memory = match (self.relay_memory, &file.memory) {
            (Some(m), _) => Some(m),
            (None, Some(m)) => Some(size("memory", m, fpath)?),
            _ => None,
        };
        if let Some(m) = memory {
            cfg.memory = m as usize;
        }
        let buffer = match (self.relay_buffer, &file.buffer) {
            (Some(b), _) => Some(b),
            (None, Some(b)) => Some(size("buffer", b, fpath)?),
            _ => None,
        };
        if let Some(b) = buffer {
            cfg.buffer = b as usize;
        }
        if let Some(p) = self.relay_parallelism.or(file.parallelism) {
            cfg.leg.parallelism = p.clamp(1, 64);
        }
        let tcp = match (self.relay_tcp_buffer, &file.tcp_buffer) {
            (Some(b), _) => Some(b),
            (None, Some(b)) => Some(size("tcp_buffer", b, fpath)?),
            _ => None,
        };
        cfg.leg.tcp_buffer = tcp.map(|b| b as usize);
        let plut = match (&self.relay_plut, &file.plut) {
            (Some(p), _) => Some(p.clone()),
            (None, Some(list)) => Some(list.join(",")),
            (None, None) => None,
        };
        cfg.plut = match plut {
            Some(p) => Some(
                p.parse()
                    .map_err(|e| anyhow::anyhow!("--relay-plut: {e}"))?,
            ),
            None => None,
        };
        cfg.plut_rate = match (self.relay_plut_rate, &file.plut_rate) {
            (Some(r), _) => Some(r),
            (None, Some(r)) => Some(
                crate::cmd::parse_rate_bytes(r)
                    .map_err(|e| anyhow::anyhow!("{}: plut_rate: {e}", fpath.display()))?,
            ),
            (None, None) => None,
        };
        cfg.ca = self.relay_ca.or(file.ca);
        cfg.credentials = credentials;
        cfg.data_timeout = data_timeout;
        tracing::info!(allow = %cfg.allow, anonymous = cfg.anonymous, "relaying on");
        Ok(Some(Arc::new(Relay::new(cfg)?)))
    }
}
