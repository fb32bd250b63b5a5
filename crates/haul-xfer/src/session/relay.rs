//! What a relay (haul-overlay) asks of the session to its next hop: one download into a sink
//! or one upload whose data another leg provides, each telling the relay when the next hop
//! opened its data phase (its 150 or 125) so that the relay answers its own client only then,
//! and a listing's raw bytes.

use haul_proto::client::{Direction, FileEvent, FileOp, Transfers};
use haul_proto::command::{Restart, TransferMode};
use haul_proto::{Command, RangeSet};
use haul_transport::io::Sink;
use haul_transport::mode_e::Progress;
use haul_transport::net::RawConn;
use haul_transport::Conn;

use super::data::{self, prepare};
use super::{DataParams, DataState, GetItem, Session};
use crate::error::XferError;

/// One file a relay fetches from its next hop.
pub struct Fetch<'a> {
    /// The path on the next hop.
    pub path: &'a str,
    /// `ERET P <offset> <length>` instead of `RETR`.
    pub eret: Option<(u64, u64)>,
    /// Ranges its client already holds (sent as `REST`).
    pub restart: Option<RangeSet>,
}

impl Session {
    /// Downloads `f` into `sink` with `p`'s streams, calling `started` once the next hop opened
    /// the data phase (before any byte). Fails with the next hop's refusal, or when the data
    /// or control connection fails.
    pub fn fetch_into(
        &mut self,
        f: &Fetch<'_>,
        sink: &dyn Sink,
        progress: &Progress,
        p: &DataParams,
        started: &dyn Fn(),
    ) -> Result<(), XferError> {
        self.usable()?;
        self.ready_download(p)?;
        let mut t = Transfers::new(1);
        t.push(FileOp {
            direction: Direction::Get,
            path: f.path.to_string(),
            eret: f.eret,
            restart: f.restart.clone(),
            cksm: None,
            allocate: None,
        });
        let item = GetItem {
            path: f.path.to_string(),
            sink,
            len: None,
            have: f.restart.clone(),
            eret: f.eret,
            cksm: None,
            progress,
        };
        self.ctl.send_due(&mut t)?;
        loop {
            match self.ctl.transfer_event(&mut t)? {
                FileEvent::DataStart { .. } => {
                    started();
                    self.receive_into(&item, sink)?;
                }
                FileEvent::Done { .. } => return Ok(()),
                FileEvent::Failed { command, reply, .. } => {
                    return Err(XferError::from_reply(&self.ctl.name, &command, &reply));
                }
                _ => {}
            }
        }
    }

    /// Downloads `f` into `sink` over PLUT (reliable UDP, sent at up to `rate` bytes/s), for a
    /// relay whose next leg is long and lossy; `started` is called on the next hop's 150.
    /// PLUT moves whole files or an ERET range: a restart is refused.
    pub fn fetch_plut(
        &mut self,
        f: &Fetch<'_>,
        sink: &dyn Sink,
        progress: &Progress,
        rate: Option<u64>,
        started: &dyn Fn(),
    ) -> Result<(), XferError> {
        self.usable()?;
        if f.restart.is_some() {
            return Err(XferError::Usage(
                "PLUT moves whole files: a restart goes over TCP".into(),
            ));
        }
        let len = match f.eret {
            Some(_) => None,
            None => Some(self.size(f.path)?),
        };
        let p = self.ready_plut(rate)?;
        let item = GetItem {
            path: f.path.to_string(),
            sink,
            len,
            have: None,
            eret: f.eret,
            cksm: None,
            progress,
        };
        self.get_plut_item(&item, &p, Vec::new(), started).map(drop)
    }

    /// Stores `path` (after `ALLO` with `allocate` and `REST` with `restart`, when given) with
    /// `p`'s streams: `started` is called once the next hop opened the data phase, then `send`
    /// moves the data on the data connections (ending with the EODs and the EOF). Fails with
    /// the next hop's refusal or `send`'s error.
    ///
    /// A whole new file to a next hop that offers XXHC gets `CKSM XXHC` pipelined behind its
    /// `STOR`, as `haul cp` sends it, so the next hop hashes the chunks as they land (and may
    /// write a large file around its page cache) instead of reading the file back when the
    /// client asks; the digest is returned, for the relay to answer that `CKSM` with.
    pub fn store_from(
        &mut self,
        path: &str,
        restart: Option<RangeSet>,
        allocate: Option<u64>,
        p: &DataParams,
        started: &dyn Fn(),
        send: &(dyn Fn(&mut [Conn]) -> std::io::Result<()> + Sync),
    ) -> Result<Option<String>, XferError> {
        self.usable()?;
        self.ready_upload(p)?;
        let xxhc = haul_transport::checksum::Algorithm::Xxhc.name();
        let cksm =
            (restart.is_none() && self.ctl.features.has_cksm(xxhc)).then(|| xxhc.to_string());
        let mut t = Transfers::new(1);
        t.push(FileOp {
            direction: Direction::Put,
            path: path.to_string(),
            eret: None,
            restart,
            cksm,
            allocate,
        });
        let mut digest = None;
        self.ctl.send_due(&mut t)?;
        let progress = Progress::default();
        loop {
            match self.ctl.transfer_event(&mut t)? {
                FileEvent::DataStart { .. } => {
                    started();
                    self.upload_conns()?;
                    let (conns, ctl) = self.upload_parts()?;
                    let (end, sent) = std::thread::scope(|s| {
                        let h = s.spawn(|| send(conns));
                        (super::put::data_end(ctl, &mut t, &progress, path), h.join())
                    });
                    let end = end?;
                    sent.unwrap_or_else(|_| Err(std::io::Error::other("sender panicked")))
                        .map_err(|e| XferError::io(&format!("sending {path}"), e))?;
                    end?;
                }
                FileEvent::Checksum { digest: d, .. } => digest = Some(d),
                FileEvent::Done { .. } => return Ok(digest),
                // The file landed; only the digest asked for on the way was refused: the
                // client's own CKSM goes to the next hop as it comes.
                FileEvent::Failed {
                    command: Command::Cksm { .. },
                    ..
                } => return Ok(None),
                FileEvent::Failed { command, reply, .. } => {
                    return Err(XferError::from_reply(&self.ctl.name, &command, &reply));
                }
                _ => {}
            }
        }
    }

    /// The raw bytes of a listing command (`LIST`, `NLST` or `MLSD`), received in stream mode
    /// over a passive connection.
    pub fn listing(&mut self, cmd: &Command) -> Result<Vec<u8>, XferError> {
        let sink = crate::listing::VecSink::default();
        self.stream_in(cmd, &sink, 0, &Progress::default(), &|| {})?;
        Ok(sink.into_bytes())
    }

    /// Downloads `f` in stream mode (RFC 959 MODE S: one connection, the bytes in order),
    /// for a relay whose client needs them in order. A restart must hold a prefix of the file
    /// (`REST <offset>`); a partial read (`ERET`) arrives from offset 0, as the client expects.
    pub fn fetch_stream(
        &mut self,
        f: &Fetch<'_>,
        sink: &dyn Sink,
        progress: &Progress,
        started: &dyn Fn(),
    ) -> Result<(), XferError> {
        if let Some((offset, length)) = f.eret {
            let cmd = Command::Eret {
                offset,
                length,
                path: f.path.to_string(),
            };
            return self.stream_in(&cmd, sink, 0, progress, started);
        }
        let offset = match &f.restart {
            None => 0,
            Some(r) => match r.ranges() {
                [] => 0,
                [(0, end)] => *end,
                _ => {
                    return Err(XferError::Usage(
                        "stream mode restarts from an offset only, not from scattered ranges"
                            .into(),
                    ))
                }
            },
        };
        if offset > 0 {
            self.ctl
                .expect(&Command::Rest(Restart::Offset(offset)), 350)?;
        }
        self.stream_in(
            &Command::Retr(f.path.to_string()),
            sink,
            offset,
            progress,
            started,
        )
    }

    /// Runs `cmd` in stream mode over a passive connection, writing what arrives into `sink`
    /// from `offset` on; `started` is called on the server's 150 / 125.
    fn stream_in(
        &mut self,
        cmd: &Command,
        sink: &dyn Sink,
        offset: u64,
        progress: &Progress,
        started: &dyn Fn(),
    ) -> Result<(), XferError> {
        self.usable()?;
        if self.mode_e {
            self.ctl.expect(&Command::Mode(TransferMode::Stream), 200)?;
            self.mode_e = false;
            self.data = DataState::None;
        }
        let token = self.data_token()?;
        let addr = self.pasv()?;
        let raw = RawConn::connect(self.stack, addr, None, self.data_timeout)
            .map_err(|e| XferError::io(&self.ctl.name, e))?;
        self.ctl.send(cmd)?;
        // The handshake runs while the reply is awaited: a Globus server under GSI
        // authenticates the connection before it answers 150. A refusal cuts it.
        let cut = raw.cutter().map_err(|e| XferError::io(&self.ctl.name, e))?;
        let (tls, host, timeout) = (self.tls.clone(), self.url.host.clone(), self.data_timeout);
        let (r, conn) = std::thread::scope(|s| {
            let tls = tls.as_ref().map(|t| (t, host.as_str()));
            let h = s.spawn(move || prepare(raw, tls, false, timeout));
            let r = self.ctl.reply();
            if !r.as_ref().is_ok_and(|r| r.is_preliminary()) {
                cut.cut();
            }
            (r, h.join())
        });
        let r = r?;
        if !r.is_preliminary() {
            return Err(XferError::from_reply(&self.ctl.name, cmd, &r));
        }
        started();
        let mut conn = conn
            .map_err(|_| XferError::Internal("data-connection set-up panicked".into()))?
            .map_err(|e| XferError::io(&self.ctl.name, e))?;
        data::present(&mut conn, token).map_err(|e| XferError::io(&self.ctl.name, e))?;
        haul_transport::stream::receive(conn, sink, offset, progress)
            .map_err(|e| XferError::io(&self.ctl.name, e))?;
        let r = self.ctl.final_reply(&mut |_| {})?;
        if !r.is_success() {
            return Err(XferError::from_reply(&self.ctl.name, cmd, &r));
        }
        Ok(())
    }

    /// Asks a relay for the next leg's settings (`OPTS RELAY`) when this session's path is a
    /// nested URL; a server that does not relay cannot, and the error says so.
    pub fn set_relay_leg(&mut self, leg: &haul_proto::nested::NextLeg) -> Result<(), XferError> {
        if !haul_proto::nested::is_nested(&self.url.path) {
            return Ok(());
        }
        if !self.ctl.features.relay {
            return Err(XferError::Usage(format!(
                "{} does not relay (no RELAY in FEAT): --relay-streams needs a haul relay",
                self.ctl.name
            )));
        }
        self.ctl.ok(&Command::Opts {
            command: "RELAY".into(),
            options: leg.format(),
        })?;
        Ok(())
    }

    /// The server's shared throughput predictions (`SITE BTC`), or None when it offers none.
    pub fn btc(&mut self) -> Result<Option<haul_proto::btc::Shared>, XferError> {
        let r = self.site_211(self.ctl.features.btc, "BTC")?;
        Ok(r.as_ref().map(haul_proto::btc::Shared::parse))
    }

    /// What an aggregating registry caches of other servers' predictions (`SITE BTC ALL`), or
    /// None when the server is no registry (no `BTCREG` in FEAT).
    pub fn btc_all(&mut self) -> Result<Option<haul_proto::btc::RegistryReply>, XferError> {
        let r = self.site_211(self.ctl.features.btc_registry, "BTC ALL")?;
        Ok(r.as_ref().map(haul_proto::btc::RegistryReply::parse))
    }

    /// `SITE <what>`'s 211 reply when the server offers it (`offered`, from its FEAT).
    fn site_211(
        &mut self,
        offered: bool,
        what: &str,
    ) -> Result<Option<haul_proto::Reply>, XferError> {
        let cmd = Command::Site(what.into());
        let r = if self.ctl.take_ahead(&cmd) {
            // Sent with the login (`Session::open_asking`): only its reply is left to read.
            self.ctl.final_reply(&mut |_| {})?
        } else if offered {
            self.command(&cmd)?
        } else {
            return Ok(None);
        };
        if !offered {
            return Ok(None);
        }
        if r.code != 211 {
            return Err(XferError::from_reply(&self.ctl.name, &cmd, &r));
        }
        Ok(Some(r))
    }

    /// Sends one command without data and returns its final reply, whatever it says (a relay
    /// passes it back to its client).
    pub fn command(&mut self, cmd: &Command) -> Result<haul_proto::Reply, XferError> {
        self.usable()?;
        self.ctl.send(cmd)?;
        self.ctl.final_reply(&mut |_| {})
    }
}
