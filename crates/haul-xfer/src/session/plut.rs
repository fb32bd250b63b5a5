//! PLUT data channels for a client session (docs/protocol.md, "PLUT data channels"): the
//! session is switched once with `OPTS HAUL Transport=plut;Mds=N;Rate=B;`, then every file is
//! its own UDP flow with a fresh random session id — downloads bind a socket and announce it
//! with `PLUT PORT`, uploads ask the server for one with `PLUT PASV`. Files go one after
//! another (no pipelining of RETR/STOR over PLUT); `CKSM` still rides behind each transfer.
//! PLUT moves whole files (or an ERET range): restart ranges are not used.

use std::net::{IpAddr, SocketAddr, UdpSocket};

use haul_proto::{hostport, Command};
use haul_transport::plut::{self, params, Tuning};

use super::get::retr_of;
use super::{cksm_of, GetItem, ItemResult, PutItem, Session};
use crate::error::XferError;

/// File data each PLUT end buffers, bytes.
const BUFFER_BYTES: usize = 96 << 20;

fn plut_cmd(arg: String) -> Command {
    Command::Unknown {
        verb: "PLUT".into(),
        arg,
    }
}

fn plut_err(what: &str, e: plut::PlutError) -> XferError {
    XferError::io(what, std::io::Error::other(e.to_string()))
}

/// Lets only datagrams from `peer` reach `sock` (see [`plut::only_from`]).
fn only_from(sock: &UdpSocket, peer: IpAddr) -> Result<(), XferError> {
    plut::only_from(sock, peer).map_err(|e| XferError::io("PLUT socket filter", e))
}

impl Session {
    /// Selects PLUT for this session's transfers, with datagrams sized to the path MTU and the
    /// sender's NIC rate `rate` (bytes/s; default 10 Gb/s).
    pub(super) fn ready_plut(&mut self, rate: Option<u64>) -> Result<params::Params, XferError> {
        let (p, ahead) = self.select_plut(rate)?;
        self.replies_ahead(&ahead)?;
        Ok(p)
    }

    /// As [`Session::ready_plut`], without waiting: the `OPTS` it sent (if the session had not
    /// switched yet) is returned, for [`Session::replies_ahead`] to read its reply once the
    /// transfer's own commands are on their way.
    fn select_plut(
        &mut self,
        rate: Option<u64>,
    ) -> Result<(params::Params, Vec<Command>), XferError> {
        if let Some(p) = self.plut {
            return Ok((p, Vec::new()));
        }
        if haul_proto::nested::is_nested(&self.url.path) {
            return Err(XferError::Usage(
                "PLUT is not carried through relays (a nested URL); use --transport tcp".into(),
            ));
        }
        if !self.ctl.features.plut {
            return Err(XferError::Usage(format!(
                "{} does not offer PLUT (no `PLUT 1` in FEAT); use --transport tcp",
                self.ctl.name
            )));
        }
        let mds = plut::path_mds(self.ctl.peer.ip()).unwrap_or(plut::DEFAULT_MDS);
        let p = params::Params {
            mds,
            rate: rate.map_or(params::DEFAULT_RATE, |r| r as f64),
            // Servers that do not say they take a starting rate would refuse the key.
            start: self
                .plut_start
                .filter(|_| self.ctl.features.plut_start)
                .map(|s| s as f64),
        };
        let opts = Command::Opts {
            command: "HAUL".into(),
            options: params::format_opts(&p),
        };
        self.ctl.send(&opts)?;
        // Accepted or not, the session is switched from here on: a refusal ends it.
        self.plut = Some(p);
        Ok((p, vec![opts]))
    }

    /// Reads the replies to `sent`, commands written ahead of the current one, in order: each
    /// must succeed. On a failure the replies to what was sent after it are still due, so the
    /// session is closed rather than reused.
    fn replies_ahead(&mut self, sent: &[Command]) -> Result<(), XferError> {
        for cmd in sent {
            let r = self.ctl.final_reply(&mut |_| {});
            match r {
                Ok(r) if r.is_success() => {}
                Ok(r) => {
                    self.abandoned = true;
                    return Err(XferError::from_reply(&self.ctl.name, cmd, &r));
                }
                Err(e) => {
                    self.abandoned = true;
                    return Err(e);
                }
            }
        }
        Ok(())
    }

    /// Downloads `items` one at a time over PLUT; `done` is called as each ends, as with
    /// [`Session::get_many`].
    pub fn get_plut(
        &mut self,
        items: &[GetItem<'_>],
        rate: Option<u64>,
        done: &mut dyn FnMut(),
    ) -> Result<Vec<ItemResult>, XferError> {
        let (p, mut ahead) = self.select_plut(rate)?;
        let mut results = Vec::with_capacity(items.len());
        for item in items {
            results.push(self.get_plut_item(item, &p, std::mem::take(&mut ahead), &|| {})?);
            done();
        }
        self.replies_ahead(&ahead)?;
        Ok(results)
    }

    /// Downloads one item over PLUT, calling `started` on the server's 150, before any byte.
    /// `ahead` were sent before (the `OPTS` that switched the session): their replies are
    /// read after this item's commands are sent, so one round trip covers them all.
    pub(super) fn get_plut_item(
        &mut self,
        item: &GetItem<'_>,
        p: &params::Params,
        mut ahead: Vec<Command>,
        started: &dyn Fn(),
    ) -> Result<ItemResult, XferError> {
        let tuning = Tuning {
            idle_timeout: self.data_timeout,
            ..Tuning::default()
        };
        let len = match (item.eret, item.len) {
            (Some((_, l)), _) | (None, Some(l)) => l,
            (None, None) => {
                return Err(XferError::Usage(format!(
                    "{}: PLUT needs the file's length",
                    item.path
                )))
            }
        };
        let session: u64 = rand::random();
        let sock = plut::bind(SocketAddr::new(self.ctl.local.ip(), 0), &tuning)
            .map_err(|e| XferError::io("PLUT socket", e))?;
        only_from(&sock, self.ctl.peer.ip())?;
        let addr = sock
            .local_addr()
            .map_err(|e| XferError::io("PLUT socket", e))?;
        let port = plut_cmd(format!(
            "PORT {} {session:016x}",
            hostport::format_port(&addr)
        ));
        let retr = retr_of(item);
        let cksm = item.cksm.map(|(alg, _)| cksm_of(alg, &item.path));
        self.ctl.send_all([&port, &retr].into_iter().chain(&cksm))?;
        ahead.push(port);
        self.replies_ahead(&ahead)?;
        let r = self.ctl.final_reply(&mut |_| {})?;
        if !r.is_preliminary() {
            return Err(XferError::from_reply(&self.ctl.name, &retr, &r));
        }
        started();
        let cfg = p.config(session, BUFFER_BYTES);
        // Hash our copy as its prefix grows, as over TCP.
        let finished = std::sync::atomic::AtomicBool::new(false);
        let prefix = || item.progress.prefix();
        let (prefix, finished) = (&prefix, &finished);
        let (got, mine) = std::thread::scope(|s| {
            let follower = item.cksm.map(|(alg, local)| {
                s.spawn(move || crate::checksum::follow(local, alg, prefix, finished))
            });
            let got = plut::receive(&sock, item.sink, 0, len, &cfg, &tuning, item.progress);
            finished.store(true, std::sync::atomic::Ordering::Release);
            (got, follower.map(|h| h.join()))
        });
        let stats = got.map_err(|e| plut_err(&format!("receiving {}", item.path), e))?;
        tracing::debug!(path = %item.path, ?stats, "PLUT receive done");
        let r = self.ctl.final_reply(&mut |_| {})?;
        if !r.is_success() {
            return Err(XferError::from_reply(&self.ctl.name, &retr, &r));
        }
        let mut res = ItemResult::default();
        if let (Some((alg, _)), Some(mine)) = (item.cksm, mine) {
            let r = self.ctl.final_reply(&mut |_| {})?;
            if r.code != 213 {
                return Err(XferError::from_reply(
                    &self.ctl.name,
                    &cksm_of(alg, &item.path),
                    &r,
                ));
            }
            res.server_cksm = crate::checksum::parse_cksm_reply(&r);
            res.local_cksm =
                Some(mine.unwrap_or_else(|_| {
                    Err(XferError::Usage("checksum thread panicked".into()))
                })?);
        }
        Ok(res)
    }

    /// Uploads `items` one at a time over PLUT; `done` is called as each ends, as with
    /// [`Session::get_many`].
    pub fn put_plut(
        &mut self,
        items: &[PutItem<'_>],
        rate: Option<u64>,
        done: &mut dyn FnMut(),
    ) -> Result<Vec<ItemResult>, XferError> {
        let (p, mut ahead) = self.select_plut(rate)?;
        let tuning = Tuning {
            idle_timeout: self.data_timeout,
            ..Tuning::default()
        };
        let mut results = Vec::with_capacity(items.len());
        for item in items {
            // PASV, STOR and CKSM (and the session's OPTS) go in one round trip.
            let session: u64 = rand::random();
            let pasv = plut_cmd(format!("PASV {session:016x} {}", item.len));
            let stor = Command::Stor(item.path.clone());
            let cksm = item.cksm.map(|alg| cksm_of(alg, &item.path));
            self.ctl.send_all([&pasv, &stor].into_iter().chain(&cksm))?;
            self.replies_ahead(&std::mem::take(&mut ahead))?;
            let r = self.ctl.final_reply(&mut |_| {})?;
            if r.code != 227 {
                self.abandoned = true;
                return Err(XferError::from_reply(&self.ctl.name, &pasv, &r));
            }
            let offered =
                hostport::find_in_reply(&r.text()).ok_or_else(|| XferError::Protocol {
                    host: self.ctl.name.clone(),
                    reply: r.to_string(),
                })?;
            let peer = self.data_addr(offered);
            let r = self.ctl.final_reply(&mut |_| {})?;
            if !r.is_preliminary() {
                return Err(XferError::from_reply(&self.ctl.name, &stor, &r));
            }
            let sock = plut::bind(SocketAddr::new(self.ctl.local.ip(), 0), &tuning)
                .map_err(|e| XferError::io("PLUT socket", e))?;
            let cfg = p.config(session, BUFFER_BYTES);
            let ctl = &mut self.ctl;
            let (reply, sent) = std::thread::scope(|s| {
                let h = s.spawn(|| {
                    plut::send(
                        &sock,
                        peer,
                        item.src,
                        0,
                        item.len,
                        &cfg,
                        &tuning,
                        item.progress,
                    )
                });
                (ctl.final_reply(&mut |_| {}), h.join())
            });
            let r = reply?;
            let stats = sent
                .unwrap_or_else(|_| {
                    Err(plut::PlutError::Io {
                        what: "sending",
                        source: std::io::Error::other("sender thread panicked"),
                    })
                })
                .map_err(|e| plut_err(&format!("sending {}", item.path), e))?;
            tracing::debug!(path = %item.path, ?stats, "PLUT send done");
            if !r.is_success() {
                return Err(XferError::from_reply(&self.ctl.name, &stor, &r));
            }
            let mut res = ItemResult {
                markers: item.progress.ranges(),
                ..ItemResult::default()
            };
            if let Some(alg) = item.cksm {
                res.server_cksm = self.cksm_reply(alg, &item.path)?;
            }
            results.push(res);
            done();
        }
        Ok(results)
    }
}
