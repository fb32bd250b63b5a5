//! Data connections accepted and authenticated as they arrive, before the server's `150`.
//! A Globus server under GSI authenticates the data connections of a `RETR` (`DCAU`) before
//! it answers `150`, so a client that waits for the `150` to accept them never answers the
//! handshake and both ends wait. Under GSI a download session therefore runs this acceptor
//! for as long as its listener lives: it takes the server's connections (from the control
//! connection's peer only), runs the GSI handshake (one thread per connection) and checks the
//! session's data token, and hands the ready connections to the receive over a channel.

use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use haul_transport::net::DataListener;
use haul_transport::token::DataToken;
use haul_transport::Conn;

use super::data::prepare;
use crate::tls::ClientTls;

/// How often the background accept looks at its stop flag.
const POLL: Duration = Duration::from_millis(100);

/// Most connections handshaking or ready and not yet taken at once (the most streams a
/// transfer asks for): beyond it a server's further connections are closed, so a hostile
/// server cannot make the client hold a thread and a socket per connection it opens.
const MAX_OUTSTANDING: usize = 64;

/// What the background acceptor needs.
pub(super) struct EarlySpec {
    pub listener: DataListener,
    pub tls: ClientTls,
    pub host: String,
    pub peer: IpAddr,
    pub token: Option<DataToken>,
    pub timeout: Duration,
}

/// The background acceptor of one download listener; stopped when dropped.
pub(super) struct EarlyAccept {
    /// Behind a lock: the receive's streams share the acceptor.
    rx: Mutex<Receiver<std::io::Result<Conn>>>,
    stop: Arc<AtomicBool>,
    /// Connections accepted whose result is not yet taken.
    outstanding: Arc<AtomicUsize>,
}

impl std::fmt::Debug for EarlyAccept {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("EarlyAccept")
    }
}

impl EarlyAccept {
    /// Starts accepting on `spec.listener`.
    pub(super) fn start(spec: EarlySpec) -> std::io::Result<EarlyAccept> {
        let (tx, rx) = mpsc::channel();
        let stop = Arc::new(AtomicBool::new(false));
        let outstanding = Arc::new(AtomicUsize::new(0));
        let (flag, count) = (stop.clone(), outstanding.clone());
        std::thread::Builder::new()
            .name("gsi-accept".into())
            .spawn(move || run(spec, &flag, &count, &tx))?;
        Ok(EarlyAccept {
            rx: Mutex::new(rx),
            stop,
            outstanding,
        })
    }

    /// The next ready connection, waiting at most `wait`: None when none came.
    pub(super) fn next(&self, wait: Duration) -> std::io::Result<Option<Conn>> {
        let rx = self
            .rx
            .lock()
            .map_err(|_| std::io::Error::other("acceptor state poisoned"))?;
        match rx.recv_timeout(wait) {
            Ok(r) => {
                self.outstanding.fetch_sub(1, Ordering::AcqRel);
                r.map(Some)
            }
            Err(RecvTimeoutError::Timeout) => Ok(None),
            Err(RecvTimeoutError::Disconnected) => Err(std::io::Error::other(
                "the data-connection acceptor stopped",
            )),
        }
    }
}

impl Drop for EarlyAccept {
    /// Stops the acceptor without waiting for it: it sees the flag within [`POLL`] and ends,
    /// closing its handle on the listener, and the session's end is not held up meanwhile.
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
    }
}

fn run(
    spec: EarlySpec,
    stop: &AtomicBool,
    outstanding: &AtomicUsize,
    tx: &mpsc::Sender<std::io::Result<Conn>>,
) {
    let spec = Arc::new(spec);
    while !stop.load(Ordering::Acquire) {
        match spec.listener.accept_timeout(POLL) {
            Ok((c, from)) if from.ip() == spec.peer => {
                if outstanding.load(Ordering::Acquire) >= MAX_OUTSTANDING {
                    tracing::warn!(
                        "closed a data connection from {from}: {MAX_OUTSTANDING} already wait"
                    );
                    drop(c);
                    continue;
                }
                outstanding.fetch_add(1, Ordering::AcqRel);
                // Each connection's handshake on its own thread: the server opens them side
                // by side, and each costs round trips and a signature.
                let (sp, out) = (spec.clone(), tx.clone());
                let ready = move || {
                    let tls = Some((&sp.tls, sp.host.as_str()));
                    let r = prepare(c, tls, true, sp.timeout).and_then(|mut conn| {
                        if let Some(t) = sp.token {
                            t.check(&mut conn, sp.timeout)?;
                        }
                        Ok(conn)
                    });
                    // A connection that failed its handshake fails the receive, which says
                    // why (the server's data-channel identity, say), rather than stalling it.
                    let _ = out.send(r);
                };
                if let Err(e) = std::thread::Builder::new()
                    .name("gsi-handshake".into())
                    .spawn(ready)
                {
                    let _ = tx.send(Err(e));
                    return;
                }
            }
            Ok((c, from)) => {
                tracing::warn!(
                    "closed a data connection from {from}: only the server {} may connect",
                    spec.peer
                );
                drop(c);
            }
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {}
            Err(e) => {
                // The listener itself broke.
                outstanding.fetch_add(1, Ordering::AcqRel);
                let _ = tx.send(Err(e));
                return;
            }
        }
    }
}
