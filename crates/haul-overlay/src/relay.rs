//! The relay (002's split-DSI module): who may relay, to which next hops, how many relay
//! sessions and how much buffer memory at once, and the next hop's session for each relaying
//! client session (`hop.rs`). `haul serve --relay-allow` builds one from its flags and
//! config file and hands it to the server, which calls it for every command on a nested URL.

use std::collections::HashMap;
use std::net::ToSocketAddrs;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use haul_proto::Reply;
use haul_server::relay::{Hop, PumpGrant, Relay as RelayHook, RelayUser};
use haul_transport::pump::Pump;
use haul_xfer::tls::ClientTls;
use haul_xfer::PasvAddress;

use crate::allow::AllowList;
use crate::hop::{hop_key, NextHopSession};
use crate::nested::{nested, NextHop};

/// The data-channel settings of a relay's next leg.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LegParams {
    /// TCP streams (MODE E parallelism) to the next hop.
    pub parallelism: u32,
    /// Socket buffer size of the next leg's data connections (None: kernel autotuning).
    pub tcp_buffer: Option<usize>,
    /// Downloads from this next hop go over PLUT, sent at up to this many bytes/s (None: TCP).
    pub plut_rate: Option<u64>,
}

impl Default for LegParams {
    fn default() -> Self {
        LegParams {
            parallelism: 4,
            tcp_buffer: None,
            plut_rate: None,
        }
    }
}

/// Credentials the relay uses for one next hop when the nested URL names none.
#[derive(Clone, PartialEq, Eq)]
pub struct Credential {
    /// The next hop's host, as nested URLs name it.
    pub host: String,
    /// Its control port.
    pub port: u16,
    /// The user name there.
    pub user: String,
    /// The password there (never logged).
    pub pass: String,
}

impl Credential {
    /// Gives `url`, when it names no user, the first of `creds` for its host and port.
    pub fn fill(creds: &[Credential], url: &mut haul_xfer::RemoteUrl) {
        if url.user.is_some() {
            return;
        }
        if let Some(c) = creds
            .iter()
            .find(|c| c.host.eq_ignore_ascii_case(&url.host) && c.port == url.port)
        {
            url.user = Some(c.user.clone());
            url.pass = Some(c.pass.clone());
        }
    }
}

impl std::fmt::Debug for Credential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}@{}:{} (password hidden)",
            self.user, self.host, self.port
        )
    }
}

/// A relay's configuration.
#[derive(Debug, Clone)]
pub struct RelayConfig {
    /// The next hops it may connect to (`--relay-allow`).
    pub allow: AllowList,
    /// Anonymous users may relay (`--relay-anonymous`).
    pub anonymous: bool,
    /// Most relaying client sessions at once (`--relay-sessions`).
    pub max_sessions: usize,
    /// Most relaying sessions of one user at once (`--relay-sessions-per-user`).
    pub max_per_user: usize,
    /// Buffer memory of all relayed transfers together (`--relay-memory`).
    pub memory: usize,
    /// Buffer memory of one relayed transfer (`--relay-buffer`).
    pub buffer: usize,
    /// The next leg's data-channel settings.
    pub leg: LegParams,
    /// Next hops whose downloads go over PLUT (`--relay-plut`), at `plut_rate` bytes/s.
    pub plut: Option<AllowList>,
    /// The rate PLUT legs are sent at (`--relay-plut-rate`; None: PLUT's default).
    pub plut_rate: Option<u64>,
    /// Credentials per next hop (config file only).
    pub credentials: Vec<Credential>,
    /// CA certificates that `haul://` next hops must chain to (`--relay-ca`).
    pub ca: Option<PathBuf>,
    /// How long a next hop's data channel may stay silent.
    pub data_timeout: Duration,
}

impl RelayConfig {
    /// A relay to the next hops `allow` names, with the default limits.
    pub fn new(allow: AllowList) -> RelayConfig {
        RelayConfig {
            allow,
            anonymous: false,
            max_sessions: 16,
            max_per_user: 4,
            memory: 512 << 20,
            buffer: 32 << 20,
            leg: LegParams::default(),
            plut: None,
            plut_rate: None,
            credentials: Vec::new(),
            ca: None,
            data_timeout: Duration::from_secs(60),
        }
    }
}

/// Relaying sessions now: in all, and per user.
#[derive(Debug, Default)]
pub(crate) struct Counts {
    total: usize,
    per_user: HashMap<String, usize>,
}

/// One relaying session's place among the counted ones, given back when dropped.
pub(crate) struct Slot {
    counts: Arc<Mutex<Counts>>,
    user: String,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut c = self.counts.lock().unwrap_or_else(|p| p.into_inner());
        c.total = c.total.saturating_sub(1);
        if let Some(n) = c.per_user.get_mut(&self.user) {
            *n -= 1;
            if *n == 0 {
                c.per_user.remove(&self.user);
            }
        }
    }
}

/// The relay `haul serve` calls for commands on nested URLs.
#[derive(Debug)]
pub struct Relay {
    cfg: RelayConfig,
    tls: Option<ClientTls>,
    counts: Arc<Mutex<Counts>>,
    /// Buffer memory granted to running transfers.
    used: Arc<AtomicUsize>,
}

/// The relay could not be set up.
#[derive(Debug, thiserror::Error)]
#[error("relay: {0}")]
pub struct RelayError(String);

impl Relay {
    /// A relay with `cfg`; fails if its CA file cannot be read.
    pub fn new(cfg: RelayConfig) -> Result<Relay, RelayError> {
        let tls = match &cfg.ca {
            Some(ca) => Some(
                ClientTls::from_ca_file(ca)
                    .map_err(|e| RelayError(format!("--relay-ca {}: {e}", ca.display())))?,
            ),
            None => None,
        };
        if cfg.buffer == 0 || cfg.memory < cfg.buffer {
            return Err(RelayError(format!(
                "--relay-memory ({} bytes) must hold at least one --relay-buffer ({} bytes)",
                cfg.memory, cfg.buffer
            )));
        }
        Ok(Relay {
            cfg,
            tls,
            counts: Default::default(),
            used: Default::default(),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &RelayConfig {
        &self.cfg
    }

    /// Checks that `user` may relay at all.
    fn may_relay(&self, user: &RelayUser) -> Result<(), Reply> {
        if user.may_relay {
            return Ok(());
        }
        Err(Reply::new(
            550,
            if user.anonymous {
                "Relaying is not open to anonymous users here (the server needs --relay-anonymous)."
                    .to_string()
            } else {
                format!(
                    "User {} may not relay: the users file gives it no `relay` permission.",
                    user.name
                )
            },
        ))
    }

    /// Takes a place among the relaying sessions for `user`.
    fn slot(&self, user: &str) -> Result<Slot, Reply> {
        let mut c = self.counts.lock().unwrap_or_else(|p| p.into_inner());
        if c.total >= self.cfg.max_sessions {
            return Err(Reply::new(
                450,
                format!(
                    "Relay busy: {} relaying sessions already (--relay-sessions {}); try again later.",
                    c.total, self.cfg.max_sessions
                ),
            ));
        }
        let mine = c.per_user.get(user).copied().unwrap_or(0);
        if mine >= self.cfg.max_per_user {
            return Err(Reply::new(
                450,
                format!(
                    "Relay busy for {user}: {mine} relaying sessions already (--relay-sessions-per-user {}); try again later.",
                    self.cfg.max_per_user
                ),
            ));
        }
        c.total += 1;
        *c.per_user.entry(user.to_string()).or_insert(0) += 1;
        Ok(Slot {
            counts: self.counts.clone(),
            user: user.to_string(),
        })
    }

    /// The next hop's URL with the credentials to use there: the nested URL's, else the
    /// configuration's for that host and port, else anonymous.
    fn with_credentials(&self, mut hop: NextHop) -> NextHop {
        Credential::fill(&self.cfg.credentials, &mut hop.url);
        hop
    }

    /// GSI on a `gsiftp://` next hop: the relay authenticates there with the credential `user`
    /// delegated to it, through a proxy of it with an RSA key (so the next hop sees the user,
    /// maps and checks the user), and delegates onward in turn. A client that did not log in
    /// with GSI, or delegated nothing, is refused.
    fn act_for(user: &RelayUser, name: &str) -> Result<ClientTls, Reply> {
        let Some(d) = &user.gsi else {
            return Err(Reply::new(
                550,
                format!("Next hop {name} is gsiftp://: log in to this relay over gsiftp:// and delegate a credential (as globus-url-copy and haul cp do) for it to act for you there."),
            ));
        };
        // Presented through a proxy with an RSA key: a Globus next hop cannot accept a
        // delegation from the delegated credential's P-256 key (haul_server::gsi::relay_key).
        let cred = match haul_server::gsi::relay_key() {
            Some(key) => d
                .credential
                .proxy_with_key(key, RELAY_PROXY_SECS)
                .map_err(|e| Reply::new(451, format!("Next hop {name}: {e}.")))?,
            None => {
                tracing::warn!(next_hop = %name, "no RSA key ready: presenting the delegated credential itself, which a Globus next hop cannot delegate from");
                d.credential.clone()
            }
        };
        let gsi = haul_xfer::gsi::ClientGsi::from_credential(cred, d.policy.delegated()).map_err(
            |e| {
                Reply::new(
                    550,
                    format!("Next hop {name}: the delegated credential: {e}."),
                )
            },
        )?;
        Ok(ClientTls::default().with_gsi(gsi))
    }

    /// Connects and logs in to `hop` for `user`, where the allow-list lets it.
    fn connect(&self, user: &RelayUser, hop: &NextHop) -> Result<NextHopSession, Reply> {
        let name = hop.url.server(false);
        let addrs: Vec<_> = (hop.url.host.as_str(), hop.url.port)
            .to_socket_addrs()
            .map(Iterator::collect)
            .unwrap_or_default();
        let addr = self
            .cfg
            .allow
            .check(&hop.url.host, hop.url.port, &addrs)
            .map_err(|e| Reply::new(550, format!("{e}.")))?;
        let gsi_tls;
        let tls = match (hop.url.tls, &self.tls) {
            _ if hop.url.gsi => {
                gsi_tls = Self::act_for(user, &name)?;
                Some(&gsi_tls)
            }
            (false, _) => None,
            (true, Some(t)) => Some(t),
            (true, None) => {
                return Err(Reply::new(
                    550,
                    format!("Next hop {name} is haul:// (TLS), and this relay has no --relay-ca to check it with."),
                ))
            }
        };
        let slot = self.slot(&user.name)?;
        let session =
            haul_xfer::session::Session::open_at(&hop.url, &[addr], tls, PasvAddress::ControlPeer)
                .map_err(|e| {
                    Reply::new(
                        451,
                        format!("Relay: next hop {name}: {}", crate::redact(&e.to_string())),
                    )
                })?;
        let mut leg = self.cfg.leg;
        let plut = self
            .cfg
            .plut
            .as_ref()
            .is_some_and(|l| l.allows(&hop.url.host, addr));
        if plut {
            leg.plut_rate = Some(self.cfg.plut_rate.unwrap_or(0));
        }
        tracing::info!(user = %user.name, client = %user.peer, next_hop = %name, plut, "relay session opened");
        Ok(NextHopSession::new(
            hop_key(&hop.url),
            name,
            session,
            leg,
            self.cfg.data_timeout,
            slot,
        ))
    }
}

/// How long the proxy a relay presents to a `gsiftp://` next hop is valid (cut to the
/// delegated credential's own end).
const RELAY_PROXY_SECS: i64 = 12 * 3600;

impl RelayHook for Relay {
    fn anonymous_may_relay(&self) -> bool {
        self.cfg.anonymous
    }

    fn open(
        &self,
        user: &RelayUser,
        path: &str,
        cached: Option<Box<dyn Hop>>,
    ) -> Result<(Box<dyn Hop>, String), Reply> {
        self.may_relay(user)?;
        let hop = match nested(path) {
            Some(Ok(h)) => self.with_credentials(h),
            Some(Err(e)) => return Err(Reply::new(501, format!("{e}."))),
            None => return Err(Reply::new(501, "Not a nested URL.")),
        };
        let inner = hop.url.path.clone();
        let key = hop_key(&hop.url);
        if let Some(c) = cached {
            if c.reusable_for(&key) {
                return Ok((c, inner));
            }
            // Another hop: the old session goes first, and its place with it.
            drop(c);
        }
        let s = self.connect(user, &hop)?;
        Ok((Box::new(s), inner))
    }

    fn pump(&self) -> Result<PumpGrant, Reply> {
        let want = self.cfg.buffer;
        let granted = self
            .used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |u| {
                (u + want <= self.cfg.memory).then_some(u + want)
            })
            .is_ok();
        if !granted {
            return Err(Reply::new(
                451,
                format!(
                    "Relay busy: its buffer memory (--relay-memory {} bytes) is taken by other transfers; try again later.",
                    self.cfg.memory
                ),
            ));
        }
        let used = self.used.clone();
        Ok(PumpGrant::new(
            Pump::new(want),
            Box::new(move || {
                used.fetch_sub(want, Ordering::AcqRel);
            }),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn relay(memory: usize, buffer: usize, sessions: usize, per_user: usize) -> Relay {
        let mut cfg = RelayConfig::new("127.0.0.1".parse().expect("allow-list"));
        (cfg.memory, cfg.buffer) = (memory, buffer);
        (cfg.max_sessions, cfg.max_per_user) = (sessions, per_user);
        Relay::new(cfg).expect("relay")
    }

    #[test]
    fn buffer_memory_is_granted_up_to_the_cap_and_given_back() {
        let r = relay(3 << 20, 1 << 20, 4, 4);
        let grants: Vec<_> = (0..3).map(|_| r.pump().expect("room")).collect();
        let e = r
            .pump()
            .err()
            .expect("the fourth pump exceeds --relay-memory");
        assert_eq!(e.code, 451);
        assert!(e.text().contains("--relay-memory"), "{e}");
        drop(grants);
        assert!(
            r.pump().is_ok(),
            "memory is given back when pumps are dropped"
        );
    }

    #[test]
    fn sessions_are_capped_in_all_and_per_user_and_given_back() {
        let r = relay(1 << 20, 1 << 20, 3, 2);
        let a1 = r.slot("alice").expect("first");
        let _a2 = r.slot("alice").expect("second");
        let e = r.slot("alice").err().expect("alice's third");
        assert!(e.text().contains("--relay-sessions-per-user"), "{e}");
        let _b1 = r.slot("bob").expect("bob's first");
        let e = r.slot("carol").err().expect("the fourth in all");
        assert!(e.text().contains("--relay-sessions 3"), "{e}");
        drop(a1);
        assert!(r.slot("carol").is_ok(), "a dropped slot is given back");
    }

    #[test]
    fn a_relay_needs_memory_for_one_buffer() {
        let mut cfg = RelayConfig::new("127.0.0.1".parse().expect("allow-list"));
        (cfg.memory, cfg.buffer) = (1 << 20, 2 << 20);
        assert!(Relay::new(cfg).is_err());
    }
}
