//! Pipelined MODE E uploads: we send `PASV` and connect, then keep up to a window of
//! `REST`/`STOR`/`CKSM` commands in flight, sending each file while reading the server's
//! restart markers.

use haul_proto::command::Restart;
use haul_proto::{Command, Reply};
use haul_transport::mode_e;
use haul_transport::net::RawConn;

use super::data::{self, prepare};
use super::{cksm_of, DataParams, DataState, ItemResult, PutItem, Session};
use crate::error::XferError;

impl Session {
    /// Ensures the session is set up to upload with `p` streams.
    fn ready_upload(&mut self, p: &DataParams) -> Result<(), XferError> {
        self.set_mode_e()?;
        if let DataState::Upload { cached, pending } = &self.data {
            if cached.len() + pending.len() == p.parallelism as usize {
                return Ok(());
            }
        }
        if let Some(b) = p.tcp_buffer {
            self.ctl.ok(&Command::Sbuf(b as u64))?;
        }
        self.data_token()?;
        let addr = self.pasv()?;
        let mut pending = Vec::with_capacity(p.parallelism as usize);
        for _ in 0..p.parallelism {
            pending.push(
                RawConn::connect(self.stack, addr, p.tcp_buffer, self.data_timeout)
                    .map_err(|e| XferError::io(&self.ctl.name, e))?,
            );
        }
        // The server accepts (and does its TLS handshake) only once a STOR runs, so the
        // connections are wrapped after the first 150 reply, in `send_data`.
        self.data = DataState::Upload {
            cached: Vec::new(),
            pending,
        };
        Ok(())
    }

    /// Uploads `items` in order with up to `depth` commands in flight (pipelining).
    pub fn put_many(
        &mut self,
        items: &[PutItem<'_>],
        p: &DataParams,
        depth: usize,
    ) -> Result<Vec<ItemResult>, XferError> {
        self.ready_upload(p)?;
        let depth = depth.max(1);
        let mut results = Vec::with_capacity(items.len());
        let mut sent = 0;
        for (i, item) in items.iter().enumerate() {
            while sent < items.len() && sent < i + depth {
                self.send_put(&items[sent])?;
                sent += 1;
            }
            results.push(self.finish_put(item, p.block)?);
        }
        Ok(results)
    }

    /// Sends the commands for one file: `REST` with the ranges the server holds, `STOR`, and
    /// `CKSM` when its checksum is wanted.
    fn send_put(&mut self, it: &PutItem<'_>) -> Result<(), XferError> {
        if let Some(h) = &it.have {
            self.ctl.send(&Command::Rest(Restart::Ranges(h.clone())))?;
        }
        self.ctl.send(&Command::Stor(it.path.clone()))?;
        if let Some(alg) = it.cksm {
            self.ctl.send(&cksm_of(alg, &it.path))?;
        }
        Ok(())
    }

    /// Reads the replies to one file's commands and sends the file in MODE E blocks of `block`
    /// bytes; the result holds the ranges the server reported written and, when asked, its
    /// checksum.
    fn finish_put(&mut self, item: &PutItem<'_>, block: usize) -> Result<ItemResult, XferError> {
        if let Some(h) = &item.have {
            self.rest_reply(h)?;
        }
        let stor = Command::Stor(item.path.clone());
        let r = self.ctl.final_reply(&mut |_| {})?;
        if !r.is_preliminary() {
            return Err(XferError::from_reply(&self.ctl.name, &stor, &r));
        }
        let r = self.send_data(item, block)?;
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
        Ok(res)
    }

    /// Sends the ranges of `item` the server lacks on the data connections (readying those
    /// opened before the first `STOR`) and returns the `STOR`'s final reply.
    fn send_data(&mut self, item: &PutItem<'_>, block: usize) -> Result<Reply, XferError> {
        let ranges: Vec<(u64, u64)> = match &item.have {
            Some(h) => h.missing(item.len),
            None => vec![(0, item.len)],
        };
        let tls = self.tls.clone();
        let host = self.url.host.clone();
        let DataState::Upload { cached, pending } = &mut self.data else {
            return Err(XferError::Usage("session is not set up for uploads".into()));
        };
        // Each connection carries the token right after its TLS handshake: the server
        // checks one connection's token before it accepts (and handshakes) the next.
        for raw in pending.drain(..) {
            let mut conn = prepare(
                raw,
                tls.as_ref().map(|t| (t, host.as_str())),
                self.data_timeout,
            )
            .map_err(|e| XferError::io(&host, e))?;
            data::present(&mut conn, self.token).map_err(|e| XferError::io(&host, e))?;
            cached.push(conn);
        }
        // Send on the data connections while reading 111/112 markers on the control
        // connection, so restart markers are journaled as they arrive.
        let ctl = &mut self.ctl;
        let (reply, sent) = std::thread::scope(|s| {
            let h =
                s.spawn(|| mode_e::send(cached, item.src, &ranges, block, item.progress, false));
            let reply = ctl.final_reply(&mut |m| {
                if m.code == 111 {
                    if let (Some(rs), Ok(mut have)) = (
                        haul_proto::markers::parse_range_marker(&m.text()),
                        item.progress.ranges.lock(),
                    ) {
                        have.union(&rs);
                    }
                }
            });
            (reply, h.join())
        });
        let r = reply?;
        sent.unwrap_or_else(|_| Err(std::io::Error::other("sender panicked")))
            .map_err(|e| XferError::io(&format!("sending {}", item.path), e))?;
        Ok(r)
    }
}
