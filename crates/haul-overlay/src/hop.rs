//! A relaying client session's next hop: a logged-in haul-xfer session that carries out the
//! commands and transfers the server hands over, with the next leg's own parallelism and
//! buffer size. A transfer that fails leaves the session unusable (replies may still be due on
//! it), so the next command opens a fresh one. Each transfer's leg throughput is logged.

use std::time::{Duration, Instant};

use haul_proto::command::Restart;
use haul_proto::server::ListKind;
use haul_proto::{Command, RangeSet, Reply};
use haul_server::relay::{FileFetch, FileStore, Hop};
use haul_transport::mode_e::Progress;
use haul_transport::pump::{Framing, Pump};
use haul_xfer::session::{DataParams, Fetch, Session};
use haul_xfer::{RemoteUrl, XferError};

use crate::redact;
use crate::relay::{LegParams, Slot};

/// What makes two next hops the same session: scheme, user, host and port.
pub(crate) fn hop_key(url: &RemoteUrl) -> String {
    let user = url.user.as_deref().unwrap_or("anonymous");
    format!("{} as {user}", url.server(false))
}

/// The ranges a client's `REST` says it holds.
fn held(r: &Option<Restart>) -> Option<RangeSet> {
    match r {
        None => None,
        Some(Restart::Ranges(set)) => Some(set.clone()),
        Some(Restart::Offset(o)) => {
            let mut set = RangeSet::default();
            set.insert(0, *o);
            Some(set)
        }
    }
}

/// A relaying client session's next hop.
pub struct NextHopSession {
    key: String,
    name: String,
    /// None once a failure left it unusable.
    session: Option<Session>,
    leg: LegParams,
    /// The XXHC digest the next hop gave for the file just stored (see
    /// `Session::store_from`): the path, and the digest, for the client's `CKSM` after it.
    stored_digest: Option<(String, String)>,
    /// Its place among the relay's sessions.
    _slot: Slot,
}

impl NextHopSession {
    /// A next hop over a logged-in `session`.
    pub(crate) fn new(
        key: String,
        name: String,
        mut session: Session,
        leg: LegParams,
        data_timeout: Duration,
        slot: Slot,
    ) -> NextHopSession {
        session.set_data_timeout(data_timeout);
        NextHopSession {
            key,
            name,
            session: Some(session),
            leg,
            stored_digest: None,
            _slot: slot,
        }
    }

    /// The reply for the client when the next hop failed: its own refusal code when it refused,
    /// else 451; the text names the next hop and never a password.
    fn failure(&mut self, e: &XferError) -> Reply {
        // Replies may still be due on the session: it cannot carry another command.
        if let Some(s) = self.session.take() {
            drop(s);
        }
        let code = match e {
            XferError::Refused { reply, .. } => reply
                .get(..3)
                .and_then(|c| c.parse::<u16>().ok())
                .filter(|c| (400..600).contains(c))
                .unwrap_or(451),
            _ => 451,
        };
        Reply::new(
            code,
            format!("Relay: next hop {}: {}", self.name, redact(&e.to_string())),
        )
    }

    fn session(&mut self) -> Result<&mut Session, Reply> {
        let name = self.name.clone();
        self.session
            .as_mut()
            .ok_or_else(|| Reply::new(451, format!("Relay: the session to {name} was lost.")))
    }

    /// The next leg's data settings: the client's `OPTS RELAY` over the relay's configuration.
    fn params(&self, streams: u32, asked: &haul_proto::nested::NextLeg) -> DataParams {
        DataParams {
            parallelism: streams.max(1),
            tcp_buffer: asked.tcp_buffer.map(|b| b as usize).or(self.leg.tcp_buffer),
            block: haul_transport::DEFAULT_BLOCK,
        }
    }

    /// Logs one leg's throughput.
    fn log_leg(&self, what: &str, path: &str, bytes: u64, started: Instant, streams: u32) {
        let secs = started.elapsed().as_secs_f64();
        let mbit = if secs > 0.0 {
            bytes as f64 * 8.0 / secs / 1e6
        } else {
            0.0
        };
        tracing::info!(
            next_hop = %self.name,
            what,
            path = %redact(path),
            bytes,
            secs = format_args!("{secs:.3}"),
            mbit_s = format_args!("{mbit:.1}"),
            streams,
            "relay leg done"
        );
    }
}

impl Hop for NextHopSession {
    fn name(&self) -> String {
        self.name.clone()
    }

    fn feat(&mut self, inner: &str) -> Reply {
        if haul_proto::nested::is_nested(inner) {
            return self.command(&Command::Site(format!("RELAY FEAT {inner}")));
        }
        // The login asked already: no round trip to the next hop for it again.
        let cached = self.session.as_ref().and_then(|s| s.feat_reply().cloned());
        cached.unwrap_or_else(|| self.command(&Command::Feat))
    }

    fn reusable_for(&self, key: &str) -> bool {
        self.session.is_some() && self.key == key
    }

    fn command(&mut self, cmd: &Command) -> Reply {
        if let Some(digest) = self.stored_digest_for(cmd) {
            return Reply::new(213, digest);
        }
        let s = match self.session() {
            Ok(s) => s,
            Err(r) => return r,
        };
        match s.command(cmd) {
            Ok(r) => r,
            Err(e) => self.failure(&e),
        }
    }

    fn listing(&mut self, path: Option<&str>, kind: ListKind) -> Result<Vec<u8>, Reply> {
        let p = path.map(str::to_string);
        let cmd = match kind {
            ListKind::List => Command::List(p),
            ListKind::Nlst => Command::Nlst(p),
            ListKind::Mlsd => Command::Mlsd(p),
            ListKind::Mlsr => Command::Mlsr(p),
        };
        let r = self.session()?.listing(&cmd);
        r.map_err(|e| self.failure(&e))
    }

    fn fetch(
        &mut self,
        f: &FileFetch,
        pump: &Pump,
        progress: &Progress,
        started: &(dyn Fn() + Sync),
    ) -> Result<(), Reply> {
        let streams = match f.in_order {
            true => 1,
            false => f.leg.parallelism.unwrap_or(self.leg.parallelism),
        };
        let p = self.params(streams, &f.leg);
        let fetch = Fetch {
            path: &f.path,
            eret: f.eret,
            restart: held(&f.restart),
        };
        let t = Instant::now();
        // PLUT for the long lossy leg when the relay's configuration says so: whole files
        // and ERET ranges, to a client that takes blocks in any order.
        let plut = self
            .leg
            .plut_rate
            .filter(|_| !f.in_order && f.restart.is_none());
        let s = self.session()?;
        let r = if let Some(rate) = plut {
            s.fetch_plut(&fetch, pump, progress, (rate > 0).then_some(rate), &|| {
                started()
            })
        } else if f.in_order {
            s.fetch_stream(&fetch, pump, progress, &|| started())
        } else {
            s.fetch_into(&fetch, pump, progress, &p, &|| started())
        };
        let what = if plut.is_some() {
            "fetch over PLUT"
        } else {
            "fetch"
        };
        match r {
            Ok(()) => {
                self.log_leg(what, &f.path, progress.bytes(), t, streams);
                Ok(())
            }
            Err(e) => Err(self.failure(&e)),
        }
    }

    fn store(
        &mut self,
        st: &FileStore,
        pump: &Pump,
        started: &(dyn Fn() + Sync),
    ) -> Result<(), Reply> {
        let streams = st.leg.parallelism.unwrap_or(self.leg.parallelism);
        let p = self.params(streams, &st.leg);
        let progress = Progress::default();
        let send = |conns: &mut [haul_transport::Conn]| {
            pump.drain(conns, Framing::Extended { close: false }, &progress)
        };
        let t = Instant::now();
        self.stored_digest = None;
        let r = self.session()?.store_from(
            &st.path,
            held(&st.restart),
            st.allocate,
            &p,
            &|| started(),
            &send,
        );
        match r {
            Ok(digest) => {
                self.log_leg("store", &st.path, progress.bytes(), t, streams);
                self.stored_digest = digest.map(|d| (st.path.clone(), d));
                Ok(())
            }
            Err(e) => Err(self.failure(&e)),
        }
    }
}

impl NextHopSession {
    /// The digest the next hop already gave for `cmd`, when it asks for the whole file just
    /// stored as XXHC: the answer, once (any other command forgets it).
    fn stored_digest_for(&mut self, cmd: &Command) -> Option<String> {
        let (path, digest) = self.stored_digest.take()?;
        match cmd {
            Command::Cksm {
                algorithm,
                offset: 0,
                length: None,
                path: p,
            } if algorithm.eq_ignore_ascii_case("XXHC") && *p == path => Some(digest),
            _ => None,
        }
    }
}

impl Drop for NextHopSession {
    fn drop(&mut self) {
        if let Some(s) = self.session.take() {
            s.quit();
        }
    }
}
