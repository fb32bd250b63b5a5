//! Asking servers for what they share (`SITE BTC`, `SITE BTC ALL`): a login, one command, the
//! addresses the control connection had. Shared by the client's gathering (`gather`) and the
//! registry's polls (`registry`).

use std::net::{IpAddr, SocketAddr};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use haul_xfer::session::Session;
use haul_xfer::tls::ClientTls;
use haul_xfer::{PasvAddress, RemoteUrl, XferError};

/// One question: the `SITE` command it asks (a haul server gets it with the login) and what
/// reads its answer from the logged-in session (None when the server does not offer it).
pub(crate) type Request<T> = (
    &'static str,
    fn(&mut Session) -> Result<Option<T>, XferError>,
);

/// One server's answer, with the addresses the control connection had.
pub(crate) struct Asked<T> {
    /// The server's address as this end reached it.
    pub peer: Option<SocketAddr>,
    /// This end's address as the server saw it.
    pub local: Option<IpAddr>,
    /// The answer (None: the server does not offer it); Err: why it could not be asked,
    /// redacted.
    pub answer: Result<Option<T>, String>,
    /// The logged-in session, when the asker keeps it (to carry a transfer next).
    pub session: Option<Session>,
}

impl<T> Asked<T> {
    fn failed(why: &str) -> Asked<T> {
        Asked {
            peer: None,
            local: None,
            answer: Err(why.to_string()),
            session: None,
        }
    }
}

/// Logs into `url` (TLS or GSI from `tls` where its scheme asks for it) and sends `request`,
/// which asks `SITE <site>`: a haul server gets that with the login. With `keep`, a session
/// that answered is kept in the answer instead of quit.
pub(crate) fn ask<T>(
    url: &RemoteUrl,
    tls: Option<&ClientTls>,
    (site, request): Request<T>,
    keep: bool,
) -> Asked<T> {
    let tls = if url.tls || url.gsi { tls } else { None };
    let mut s = match Session::open_asking(url, tls, PasvAddress::ControlPeer, site) {
        Ok(s) => s,
        Err(e) => return Asked::failed(&crate::redact(&e.to_string())),
    };
    let (peer, local) = (Some(s.ctl.peer), Some(s.ctl.local.ip()));
    let answer = request(&mut s).map_err(|e| crate::redact(&e.to_string()));
    let session = if keep && answer.is_ok() && s.reusable() {
        Some(s)
    } else {
        s.quit();
        None
    };
    Asked {
        peer,
        local,
        answer,
        session,
    }
}

/// Asks every one of `urls` at once, each on a thread of its own, and waits at most `within`
/// in all: a server that has not answered by then counts as failed, and its thread ends on its
/// own at the connection's timeouts. One answer per URL, in order; with `keep`, each with its
/// session ([`ask`]).
pub(crate) fn ask_all<T: Send + 'static>(
    urls: &[RemoteUrl],
    tls: Option<&ClientTls>,
    (within, keep): (Duration, bool),
    request: Request<T>,
) -> Vec<Asked<T>> {
    let (tx, rx) = mpsc::channel();
    for (i, url) in urls.iter().enumerate() {
        let (answer, url, tls) = (tx.clone(), url.clone(), tls.cloned());
        let spawned = std::thread::Builder::new()
            .name("haul-ask".into())
            .spawn(move || {
                let _ = answer.send((i, ask(&url, tls.as_ref(), request, keep)));
            });
        if let Err(e) = spawned {
            let _ = tx.send((i, Asked::failed(&format!("no thread to ask it: {e}"))));
        }
    }
    drop(tx);
    let mut out: Vec<Option<Asked<T>>> = urls.iter().map(|_| None).collect();
    let deadline = Instant::now() + within;
    while let Some(left) = deadline.checked_duration_since(Instant::now()) {
        match rx.recv_timeout(left) {
            Ok((i, a)) => out[i] = Some(a),
            Err(_) => break,
        }
    }
    let late = format!("no answer within {} s", within.as_secs());
    out.into_iter()
        .map(|a| a.unwrap_or_else(|| Asked::failed(&late)))
        .collect()
}
