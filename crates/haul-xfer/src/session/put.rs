//! Pipelined MODE E uploads: we send `PASV` and connect, then keep up to a window of files'
//! `REST`/`STOR`/`CKSM` commands in flight, as haul-proto's sans-IO [`Transfers`] sequences
//! them, sending each file while reading the server's restart markers.

use haul_proto::client::{Direction, FileEvent, FileOp, Transfers};
use haul_proto::{Command, RangeSet};
use haul_transport::mode_e::{self, Progress};
use haul_transport::net::RawConn;
use haul_transport::token::DataToken;

use super::data::{self, prepare};
use super::{item_at, DataParams, DataState, ItemResult, PutItem, Session};
use crate::control::Control;
use crate::error::XferError;
use crate::tls::ClientTls;

impl Session {
    /// Ensures the session is set up to upload with `p` streams.
    /// What it must ask for (`MODE E`, `SBUF`, `DTOK`, `PASV`) goes out as one batch.
    pub(super) fn ready_upload(&mut self, p: &DataParams) -> Result<(), XferError> {
        if let DataState::Upload {
            cached,
            pending,
            ahead,
        } = &self.data
        {
            let ahead = ahead.as_ref().map_or(0, |a| a.0);
            if cached.len() + pending.len() + ahead == p.parallelism as usize {
                return self.set_mode_e();
            }
        }
        let mut cmds = Vec::with_capacity(2);
        if let Some(b) = p.tcp_buffer {
            cmds.push((Command::Sbuf(b as u64), None));
        }
        cmds.push((Command::Pasv, Some(227)));
        let pasv = self.ready_data(cmds)?;
        let addr = self.pasv_reply(&pasv)?;
        let mut pending = Vec::with_capacity(p.parallelism as usize);
        for _ in 0..p.parallelism {
            pending.push(
                RawConn::connect(self.stack, addr, p.tcp_buffer, self.data_timeout)
                    .map_err(|e| XferError::io(&self.ctl.name, e))?,
            );
        }
        // The server accepts (and does its TLS handshake) only once a STOR runs, so the
        // connections are wrapped after the first 150 reply, in `send_data`. Under GSI a
        // Globus server answers 150 only once the connections are authenticated: their
        // handshakes run in the background from now on, and finish once the STOR is sent.
        let ahead = match self.tls.clone().filter(|t| t.gsi().is_some()) {
            Some(tls) => {
                let n = pending.len();
                let (host, token, timeout) = (self.url.host.clone(), self.token, self.data_timeout);
                let raws = std::mem::take(&mut pending);
                let h = std::thread::Builder::new()
                    .name("gsi-connect".into())
                    .spawn(move || ready_conns(raws, Some(&tls), &host, token, timeout))
                    .map_err(|e| XferError::io("data connections", e))?;
                Some((n, h))
            }
            None => None,
        };
        self.data = DataState::Upload {
            cached: Vec::new(),
            pending,
            ahead,
        };
        Ok(())
    }

    /// Uploads `items` in order with the commands of up to `depth` files in flight
    /// (pipelining), as haul-proto's [`Transfers`] sequences them; `done` is called as each
    /// item ends, as with [`Session::get_many`].
    pub fn put_many(
        &mut self,
        items: &[PutItem<'_>],
        p: &DataParams,
        depth: usize,
        done: &mut dyn FnMut(),
    ) -> Result<Vec<ItemResult>, XferError> {
        self.ready_upload(p)?;
        let mut t = Transfers::new(depth);
        for it in items {
            t.push(put_op(it));
        }
        let mut results = Vec::with_capacity(items.len());
        while !t.is_done() {
            self.send_put(&mut t)?;
            results.push(self.finish_put(&mut t, items, p.block)?);
            done();
        }
        Ok(results)
    }

    /// Writes the commands the window allows: for each file `REST` with the ranges the server
    /// holds, `STOR`, and `CKSM` when its checksum is wanted.
    fn send_put(&mut self, t: &mut Transfers) -> Result<(), XferError> {
        self.ctl.send_due(t)
    }

    /// Reads replies until the oldest file in flight is done, sending it in MODE E blocks of
    /// `block` bytes when its `STOR` starts; the result holds the ranges the server reported
    /// written and, when asked, its checksum. The first refusal of any of its commands fails
    /// the batch.
    fn finish_put(
        &mut self,
        t: &mut Transfers,
        items: &[PutItem<'_>],
        block: usize,
    ) -> Result<ItemResult, XferError> {
        let mut res = ItemResult::default();
        loop {
            match self.ctl.transfer_event(t)? {
                FileEvent::DataStart { file, .. } => {
                    let item = item_at(items, file)?;
                    self.send_data(t, item, block)?;
                    res.markers = item.progress.ranges();
                }
                FileEvent::RestartMarker { file, ranges } => {
                    hold(item_at(items, file)?.progress, &ranges);
                }
                FileEvent::Checksum { digest, .. } => {
                    res.server_cksm = Some(digest.to_ascii_lowercase());
                }
                FileEvent::Done { .. } => return Ok(res),
                FileEvent::Failed { command, reply, .. } => {
                    return Err(XferError::from_reply(&self.ctl.name, &command, &reply));
                }
                FileEvent::Moved { .. } | FileEvent::Perf { .. } | FileEvent::Aborted { .. } => {}
            }
        }
    }

    /// Sends the ranges of `item` the server lacks on the data connections (readying those
    /// opened before the first `STOR`) while reading the replies up to the `STOR`'s final one,
    /// journaling the server's restart markers as they arrive.
    fn send_data(
        &mut self,
        t: &mut Transfers,
        item: &PutItem<'_>,
        block: usize,
    ) -> Result<(), XferError> {
        let ranges: Vec<(u64, u64)> = match &item.have {
            Some(h) => h.missing(item.len),
            None => vec![(0, item.len)],
        };
        self.upload_conns()?;
        // Send on the data connections while reading 111/112 markers on the control
        // connection, so restart markers are journaled as they arrive.
        let (cached, ctl) = self.upload_parts()?;
        let (end, sent) = std::thread::scope(|s| {
            let h =
                s.spawn(|| mode_e::send(cached, item.src, &ranges, block, item.progress, false));
            (data_end(ctl, t, item.progress, &item.path), h.join())
        });
        let end = end?;
        sent.unwrap_or_else(|_| Err(std::io::Error::other("sender panicked")))
            .map_err(|e| XferError::io(&format!("sending {}", item.path), e))?;
        end
    }

    /// The upload's data connections, readied: those opened before the first `STOR` get their
    /// TLS handshake and token now.
    pub(super) fn upload_conns(&mut self) -> Result<(), XferError> {
        let tls = self.tls.clone();
        let host = self.url.host.clone();
        let DataState::Upload {
            cached,
            pending,
            ahead,
        } = &mut self.data
        else {
            return Err(XferError::Usage("session is not set up for uploads".into()));
        };
        if let Some((_, h)) = ahead.take() {
            let ready = h
                .join()
                .map_err(|_| XferError::Internal("data-connection set-up panicked".into()))?;
            cached.extend(ready.map_err(|e| XferError::io(&host, e))?);
        }
        let raws = std::mem::take(pending);
        let ready = ready_conns(raws, tls.as_ref(), &host, self.token, self.data_timeout)
            .map_err(|e| XferError::io(&host, e))?;
        cached.extend(ready);
        Ok(())
    }

    /// The upload's data connections and the control connection, borrowed together.
    pub(super) fn upload_parts(
        &mut self,
    ) -> Result<(&mut Vec<haul_transport::Conn>, &mut Control), XferError> {
        match &mut self.data {
            DataState::Upload { cached, .. } => Ok((cached, &mut self.ctl)),
            _ => Err(XferError::Usage("session is not set up for uploads".into())),
        }
    }
}

/// Readies upload connections in order: each carries the token right after its handshake
/// (TLS or GSI), since the server checks one connection's token before it accepts (and
/// handshakes) the next.
fn ready_conns(
    raws: Vec<RawConn>,
    tls: Option<&ClientTls>,
    host: &str,
    token: Option<DataToken>,
    timeout: std::time::Duration,
) -> std::io::Result<Vec<haul_transport::Conn>> {
    let mut out = Vec::with_capacity(raws.len());
    for raw in raws {
        let mut conn = prepare(raw, tls.map(|t| (t, host)), false, timeout)?;
        data::present(&mut conn, token)?;
        out.push(conn);
    }
    Ok(out)
}

/// What [`Transfers`] is to do for `it`.
fn put_op(it: &PutItem<'_>) -> FileOp {
    FileOp {
        direction: Direction::Put,
        path: it.path.clone(),
        eret: None,
        restart: it.have.clone(),
        cksm: it.cksm.map(|alg| alg.name().to_string()),
        allocate: Some(it.len),
    }
}

/// Adds the ranges a restart marker names to those the server holds of a file.
fn hold(progress: &Progress, ranges: &RangeSet) {
    if let Ok(mut have) = progress.ranges.lock() {
        have.union(ranges);
    }
}

/// Reads replies during the data phase of the upload of `path` up to its `STOR`'s final reply,
/// journaling restart markers in `progress`. Outer error: the control connection failed (or
/// replied out of sequence); inner: the server refused the transfer.
pub(super) fn data_end(
    ctl: &mut Control,
    t: &mut Transfers,
    progress: &Progress,
    path: &str,
) -> Result<Result<(), XferError>, XferError> {
    loop {
        match ctl.transfer_event(t)? {
            FileEvent::RestartMarker { ranges, .. } => hold(progress, &ranges),
            FileEvent::Perf { .. } => {}
            FileEvent::Moved { .. } => return Ok(Ok(())),
            FileEvent::Failed { command, reply, .. } => {
                return Ok(Err(XferError::from_reply(&ctl.name, &command, &reply)));
            }
            ev => return Err(XferError::Internal(format!("{ev:?} while sending {path}"))),
        }
    }
}
