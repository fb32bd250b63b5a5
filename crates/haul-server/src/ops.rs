//! Operating a running server: what `SIGHUP` reloads (the users file, the TLS certificate and
//! key, and whatever a [`Reload`] hook adds, such as a grid-mapfile), and the drain that
//! `SIGTERM` starts (no new sessions; running transfers finish; the rest is closed after a
//! bound). [`ServerOps`] is the handle a signal thread holds; the policy of which signal does
//! what stays with the caller.

use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use crate::auth::{open_private, Users};
use crate::config::ServerConfig;
use crate::journal::ServerEvent;
use crate::server::Registry;
use crate::session::Shared;
use crate::ServerError;

/// The parts of a server that `SIGHUP` replaces; sessions read them when they need them.
#[derive(Debug)]
pub struct Live {
    /// Named users (none without a users file).
    pub users: Arc<Users>,
    /// TLS configuration, if AUTH TLS is offered.
    pub tls: Option<Arc<rustls::ServerConfig>>,
    /// GSI material (host credential, CAs, grid-mapfile), if AUTH GSSAPI is offered.
    pub gsi: Option<Arc<crate::gsi::GsiServer>>,
}

impl Live {
    /// Loads the users file, TLS and GSI material `cfg` names; `before`, on a reload, lends its
    /// password verifier threads to the new users.
    pub fn load(cfg: &ServerConfig, before: Option<&Live>) -> Result<Live, ServerError> {
        let users = match (cfg.users.as_deref(), before) {
            (Some(path), Some(b)) => Arc::new(b.users.reload(path)?),
            (Some(path), None) => Arc::new(Users::load(path)?),
            (None, Some(b)) => b.users.clone(),
            (None, None) => Arc::new(Users::parse("", "(no users file)")?),
        };
        let tls = match &cfg.tls {
            Some((cert, key)) => {
                open_private(key, "TLS key")?;
                Some(haul_transport::tls::server_config(cert, key)?)
            }
            None => None,
        };
        let gsi = match &cfg.gsi {
            Some(s) => Some(Arc::new(
                crate::gsi::GsiServer::load(s)
                    .map_err(|e| ServerError::Config(format!("GSI: {e}")))?,
            )),
            None => None,
        };
        Ok(Live { users, tls, gsi })
    }
}

/// Something else a server reloads on `SIGHUP` (a grid-mapfile, say): the hook keeps its own
/// current state, behind its own lock, and replaces it only when the new one loaded whole.
pub trait Reload: Send + Sync + std::fmt::Debug {
    /// What it reloads, for logs (`grid-mapfile /etc/grid-security/grid-mapfile`).
    fn what(&self) -> String;
    /// Loads it again; on an error the state in force stays.
    fn reload(&self) -> Result<(), String>;
}

/// What a reload changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reloaded {
    /// Named users now.
    pub users: usize,
    /// Whether TLS is offered.
    pub tls: bool,
    /// The [`Reload`] hooks that failed, with why (they keep their old state).
    pub failed_hooks: Vec<String>,
}

/// The operator's handle on a running server: reload, drain, close. Cheap to clone.
#[derive(Clone)]
pub struct ServerOps {
    pub(crate) shared: Arc<Shared>,
    pub(crate) stop: Arc<AtomicBool>,
    pub(crate) active: Arc<AtomicUsize>,
    pub(crate) registry: Arc<Registry>,
    pub(crate) addr: SocketAddr,
    /// Set (and notified) once the accept loop has closed the control port.
    pub(crate) closed: Arc<(Mutex<bool>, Condvar)>,
}

impl std::fmt::Debug for ServerOps {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerOps")
            .field("addr", &self.addr)
            .finish()
    }
}

/// How often a drain looks whether every session has ended.
const DRAIN_POLL: Duration = Duration::from_millis(50);

impl ServerOps {
    /// Loads the users file, the TLS certificate and key, and the [`Reload`] hooks again. On
    /// an error in the users file or TLS material nothing changes and the error says what is
    /// wrong; running sessions and transfers are never touched.
    pub fn reload(&self) -> Result<Reloaded, ServerError> {
        let shared = &self.shared;
        let result = Live::load(&shared.cfg, Some(&shared.live()));
        let live = match result {
            Ok(l) => l,
            Err(e) => {
                shared.event(ServerEvent::Reloaded { ok: false });
                return Err(e);
            }
        };
        let done = Reloaded {
            users: live.users.len(),
            tls: live.tls.is_some(),
            failed_hooks: shared
                .cfg
                .reloaders
                .iter()
                .filter_map(|h| h.reload().err().map(|e| format!("{}: {e}", h.what())))
                .collect(),
        };
        *shared.live.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(live);
        shared.event(ServerEvent::Reloaded {
            ok: done.failed_hooks.is_empty(),
        });
        Ok(done)
    }

    /// Starts draining: the control port closes at once (new clients are refused by the
    /// kernel); a session gets `421` and closes at its next command that would start a
    /// transfer, or when its client is silent for a moment; running transfers go on.
    pub fn drain(&self) {
        self.shared.draining.store(true, Ordering::SeqCst);
        self.stop_accepting();
        // Return once the port is closed (while the accept loop runs, at most a moment).
        let (lock, cv) = &*self.closed;
        let closed = lock.lock().unwrap_or_else(|p| p.into_inner());
        let _ = cv.wait_timeout_while(closed, Duration::from_secs(2), |c| !*c);
    }

    /// The accept loop has closed the control port.
    pub(crate) fn port_closed(&self) {
        let (lock, cv) = &*self.closed;
        *lock.lock().unwrap_or_else(|p| p.into_inner()) = true;
        cv.notify_all();
    }

    /// Makes the accept loop return (and so drop the listener).
    pub(crate) fn stop_accepting(&self) {
        if !self.stop.swap(true, Ordering::SeqCst) {
            // Wake the blocking accept so it sees the flag.
            let _ = TcpStream::connect_timeout(&wake_addr(self.addr), Duration::from_secs(1));
        }
    }

    /// Control sessions open now.
    pub fn sessions(&self) -> usize {
        self.active.load(Ordering::SeqCst)
    }

    /// Waits until every session has ended, at most `limit`; whether they all did.
    pub fn wait_idle(&self, limit: Duration) -> bool {
        let until = Instant::now() + limit;
        while self.sessions() > 0 {
            if Instant::now() >= until {
                return false;
            }
            std::thread::sleep(DRAIN_POLL);
        }
        true
    }

    /// Closes every session's control connection, which ends its transfer at once (the
    /// client resumes from its restart markers).
    pub fn close_all(&self) {
        if let Ok(r) = self.registry.lock() {
            for s in r.values() {
                let _ = s.shutdown(std::net::Shutdown::Both);
            }
        }
    }
}

/// Where to connect to wake an accept on `addr`: loopback for a wildcard address.
fn wake_addr(addr: SocketAddr) -> SocketAddr {
    match addr {
        SocketAddr::V4(a) if a.ip().is_unspecified() => {
            SocketAddr::from((std::net::Ipv4Addr::LOCALHOST, a.port()))
        }
        SocketAddr::V6(a) if a.ip().is_unspecified() => {
            SocketAddr::from((std::net::Ipv6Addr::LOCALHOST, a.port()))
        }
        other => other,
    }
}
