//! The accept loop: one thread per control session, bounded by `max_sessions` (over the limit
//! a client gets `421` and is closed), and a handle for running a server in-process.

use std::collections::HashMap;
use std::io::Write;
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::RwLock;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use crate::config::ServerConfig;
use crate::control::Control;
use crate::journal::ServerEvent;
use crate::ops::{Live, ServerOps};
use crate::session::{Session, Shared};
use crate::vfs::Root;
use crate::ServerError;

/// Live sessions' control sockets, so shutdown can close them.
pub(crate) type Registry = Mutex<HashMap<u64, TcpStream>>;

/// A bound GridFTP server.
pub struct Server {
    listener: TcpListener,
    /// Sessions open per client address.
    per_ip: Arc<Mutex<HashMap<IpAddr, usize>>>,
    ops: ServerOps,
}

/// A server running on a background thread; stops on drop.
pub struct ServerHandle {
    ops: ServerOps,
    thread: Option<JoinHandle<()>>,
}

/// Decrements the session counts and forgets the socket when a session ends.
struct SessionGuard {
    id: u64,
    ip: IpAddr,
    active: Arc<AtomicUsize>,
    per_ip: Arc<Mutex<HashMap<IpAddr, usize>>>,
    registry: Arc<Registry>,
}

impl Drop for SessionGuard {
    fn drop(&mut self) {
        self.active.fetch_sub(1, Ordering::SeqCst);
        let mut m = self.per_ip.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = m.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                m.remove(&self.ip);
            }
        }
        drop(m);
        if let Ok(mut r) = self.registry.lock() {
            r.remove(&self.id);
        }
    }
}

/// Answers a connection that cannot be served with `line` and closes it.
fn refuse(mut tcp: TcpStream, line: &str) {
    let _ = tcp.set_write_timeout(Some(std::time::Duration::from_secs(1)));
    let _ = tcp.write_all(line.as_bytes());
    let _ = tcp.shutdown(std::net::Shutdown::Both);
}

impl Server {
    /// Checks the configuration, loads users and TLS material, and binds the control port.
    pub fn bind(cfg: ServerConfig) -> Result<Server, ServerError> {
        let root_err = |reason: String| ServerError::Root {
            path: cfg.root.display().to_string(),
            reason,
        };
        match std::fs::metadata(&cfg.root) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => return Err(root_err("not a directory".into())),
            Err(e) => return Err(root_err(e.to_string())),
        }
        let vfs = Root::new(&cfg.root).map_err(|e| root_err(e.to_string()))?;
        let live = Live::load(&cfg, None)?;
        if live.gsi.is_some() && cfg.relay.is_some() {
            crate::gsi::warm_relay_keys();
        }
        if cfg.require_tls && live.tls.is_none() {
            return Err(ServerError::Config(
                "--require-tls needs --tls-cert and --tls-key".into(),
            ));
        }
        let listener = TcpListener::bind(cfg.listen).map_err(|source| ServerError::Bind {
            addr: cfg.listen,
            source,
        })?;
        let addr = listener.local_addr()?;
        Ok(Server {
            listener,
            ops: ServerOps {
                shared: Arc::new(Shared {
                    cfg,
                    vfs,
                    live: RwLock::new(Arc::new(live)),
                    draining: AtomicBool::new(false),
                    next_port: Default::default(),
                    writers: Default::default(),
                    failures: Default::default(),
                    per_user: Default::default(),
                }),
                stop: Arc::new(AtomicBool::new(false)),
                active: Arc::new(AtomicUsize::new(0)),
                registry: Arc::new(Mutex::new(HashMap::new())),
                addr,
                closed: Default::default(),
            },
            per_ip: Default::default(),
        })
    }

    /// The operator's handle: reload, drain, close (for a signal thread).
    pub fn ops(&self) -> ServerOps {
        self.ops.clone()
    }

    /// The address the control port is bound to.
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        Ok(self.ops.addr)
    }

    /// Serves until stopped or drained (forever when run directly); the control port closes
    /// when it returns, while the sessions still open go on.
    pub fn run(self) -> Result<(), ServerError> {
        let next_id = AtomicU64::new(0);
        for conn in self.listener.incoming() {
            if self.ops.stop.load(Ordering::SeqCst) {
                break;
            }
            let tcp = match conn {
                Ok(t) => t,
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    continue;
                }
            };
            self.admit(tcp, next_id.fetch_add(1, Ordering::Relaxed));
        }
        let ops = self.ops.clone();
        drop(self);
        ops.port_closed();
        Ok(())
    }

    fn admit(&self, tcp: TcpStream, id: u64) {
        let Ok(peer) = tcp.peer_addr() else { return };
        let ops = &self.ops;
        let cfg = &ops.shared.cfg;
        let (max, per_ip) = (cfg.max_sessions, cfg.max_sessions_per_ip);
        if ops.active.fetch_add(1, Ordering::SeqCst) >= max {
            ops.active.fetch_sub(1, Ordering::SeqCst);
            tracing::warn!(%peer, max, "session limit reached");
            ops.shared.event(ServerEvent::Refused("max_sessions"));
            refuse(
                tcp,
                &format!("421 Too many sessions (limit {max}); try again later.\r\n"),
            );
            return;
        }
        {
            let mut m = self.per_ip.lock().unwrap_or_else(|p| p.into_inner());
            let n = m.entry(peer.ip()).or_insert(0);
            if *n >= per_ip {
                drop(m);
                ops.active.fetch_sub(1, Ordering::SeqCst);
                tracing::warn!(%peer, per_ip, "session limit per address reached");
                ops.shared
                    .event(ServerEvent::Refused("max_sessions_per_ip"));
                refuse(
                    tcp,
                    &format!(
                        "421 Too many sessions from {} (limit {per_ip}); try again later.\r\n",
                        peer.ip()
                    ),
                );
                return;
            }
            *n += 1;
        }
        let guard = SessionGuard {
            id,
            ip: peer.ip(),
            active: ops.active.clone(),
            per_ip: self.per_ip.clone(),
            registry: ops.registry.clone(),
        };
        if let (Ok(mut r), Ok(c)) = (ops.registry.lock(), tcp.try_clone()) {
            r.insert(id, c);
        }
        let shared = ops.shared.clone();
        let spawned = std::thread::Builder::new()
            .name(format!("haul-session-{id}"))
            .spawn(move || {
                tracing::info!(%peer, "session start");
                shared.event(ServerEvent::SessionOpened);
                let result = Control::new(tcp, shared.cfg.idle_timeout)
                    .and_then(|ctl| Session::new(&shared, ctl)?.run());
                // Free the slot before the client sees the close, so it may reconnect at once.
                drop(guard);
                shared.event(ServerEvent::SessionClosed);
                match result {
                    Ok(mut ctl) => {
                        ctl.close();
                        tracing::info!(%peer, "session end")
                    }
                    Err(e) => tracing::info!(%peer, error = %e, "session ended with error"),
                }
            });
        if let Err(e) = spawned {
            tracing::error!(error = %e, "cannot start session thread");
        }
    }

    /// Binds and runs the server on a background thread.
    pub fn spawn(cfg: ServerConfig) -> Result<ServerHandle, ServerError> {
        let server = Server::bind(cfg)?;
        let ops = server.ops();
        let thread = std::thread::Builder::new()
            .name("haul-server".into())
            .spawn(move || {
                if let Err(e) = server.run() {
                    tracing::error!(error = %e, "server stopped");
                }
            })?;
        Ok(ServerHandle {
            ops,
            thread: Some(thread),
        })
    }
}

impl ServerHandle {
    /// The control address (with the real port when port 0 was asked for).
    pub fn addr(&self) -> SocketAddr {
        self.ops.addr
    }

    /// Control sessions open now (each one's slot is freed when its thread is done with it).
    pub fn sessions(&self) -> usize {
        self.ops.sessions()
    }

    /// The operator's handle: reload, drain, close.
    pub fn ops(&self) -> ServerOps {
        self.ops.clone()
    }

    /// Stops accepting, closes live sessions and waits for the accept loop to end.
    pub fn shutdown(mut self) {
        self.stop_now();
    }

    fn stop_now(&mut self) {
        self.ops.stop_accepting();
        self.ops.close_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for ServerHandle {
    fn drop(&mut self) {
        self.stop_now();
    }
}
