//! Pipelined MODE E downloads: we listen and send `PORT`, then keep up to a window of files'
//! `REST`/`RETR` (or `ERET`)/`CKSM` commands in flight, as haul-proto's sans-IO [`Transfers`]
//! sequences them, receiving each file while the server sends it and hashing our copy on the
//! way in or while the server hashes its own.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use haul_proto::client::{Direction, FileEvent, FileOp, Transfers};
use haul_proto::Command;
use haul_transport::io::Sink;
use haul_transport::mode_e;
use haul_transport::net::DataListener;

use super::data::ListenAcceptor;
use super::early::{EarlyAccept, EarlySpec};
use super::{item_at, DataParams, DataState, GetItem, ItemResult, Session};
use crate::checksum::chunked::ChunkList;
use crate::checksum::{Algorithm, HashingSink};
use crate::error::XferError;

/// Files larger than this are hashed while they arrive.
const FOLLOW_MIN: u64 = 8 << 20;

/// Our digest of a downloaded file, computed on another thread (which may have panicked).
type LocalDigest = std::thread::Result<Result<String, XferError>>;

/// What [`Transfers`] is to do for `it`.
fn get_op(it: &GetItem<'_>) -> FileOp {
    FileOp {
        direction: Direction::Get,
        path: it.path.clone(),
        eret: it.eret,
        restart: it.have.clone(),
        cksm: it.cksm.map(|(alg, _)| alg.name().to_string()),
        allocate: None,
    }
}

/// The command that fetches `it`: `ERET P` for a partial read, else `RETR`.
pub(super) fn retr_of(it: &GetItem<'_>) -> Command {
    match it.eret {
        Some((offset, length)) => Command::Eret {
            offset,
            length,
            path: it.path.clone(),
        },
        None => Command::Retr(it.path.clone()),
    }
}

impl Session {
    /// Ensures the session is set up to download with `p` streams. What it must ask for
    /// (`MODE E`, `DTOK`, `OPTS RETR`, `SBUF`, `PORT`) goes out as one batch: one round trip,
    /// where asking one at a time took up to five.
    pub(super) fn ready_download(&mut self, p: &DataParams) -> Result<(), XferError> {
        if let DataState::Download { parallelism, .. } = &self.data {
            if *parallelism == p.parallelism {
                return self.set_mode_e();
            }
        }
        let mut cmds = vec![(
            Command::Opts {
                command: "RETR".into(),
                options: format!("Parallelism={0},{0},{0};", p.parallelism),
            },
            None,
        )];
        if let Some(b) = p.tcp_buffer {
            cmds.push((Command::Sbuf(b as u64), None));
        }
        let local = SocketAddr::new(self.ctl.local.ip(), 0);
        let listener = DataListener::bind(self.stack, local, p.tcp_buffer)
            .map_err(|e| XferError::io("data listener", e))?;
        let addr = listener
            .local_addr()
            .map_err(|e| XferError::io("data listener", e))?;
        let port = if addr.is_ipv4() {
            Command::Port(addr)
        } else {
            Command::Eprt(addr)
        };
        cmds.push((port, None));
        self.ready_data(cmds)?;
        // Under GSI the server's connections are accepted and authenticated as they come:
        // a Globus server does that before its 150 (see `early`).
        let early = match self.tls.clone().filter(|t| t.gsi().is_some()) {
            Some(tls) => Some(
                EarlyAccept::start(EarlySpec {
                    listener: listener
                        .try_clone()
                        .map_err(|e| XferError::io("data listener", e))?,
                    tls,
                    host: self.url.host.clone(),
                    peer: self.ctl.peer.ip(),
                    token: self.token,
                    timeout: self.data_timeout,
                })
                .map_err(|e| XferError::io("data listener", e))?,
            ),
            None => None,
        };
        self.data = DataState::Download {
            listener,
            early,
            parallelism: p.parallelism,
            cached: Vec::new(),
        };
        Ok(())
    }

    /// Downloads `items` in order with the commands of up to `depth` files in flight
    /// (pipelining), as haul-proto's [`Transfers`] sequences them.
    ///
    /// `leave` is asked after each item: when it says yes and items remain, the results so far
    /// are returned (fewer than `items`) and the rest were not received. The commands already
    /// sent for them are still pending at the server, so the session is then spent: close it
    /// (drop it; [`Session::quit`] does only that) and give the rest to another session. This is
    /// how a lowered concurrency takes effect after a session's current file rather than after
    /// its whole batch.
    ///
    /// `done` is called as each item ends (its data moved and, when asked, both checksums in
    /// hand), so after an error the number of calls is the index of the item that failed.
    pub fn get_many(
        &mut self,
        items: &[GetItem<'_>],
        p: &DataParams,
        depth: usize,
        leave: &dyn Fn() -> bool,
        done: &mut dyn FnMut(),
    ) -> Result<Vec<ItemResult>, XferError> {
        self.usable()?;
        self.ready_download(p)?;
        let mut t = Transfers::new(depth);
        for it in items {
            t.push(get_op(it));
        }
        let mut results = Vec::with_capacity(items.len());
        while !t.is_done() {
            self.send_get(&mut t)?;
            results.push(self.finish_get(&mut t, items)?);
            done();
            if results.len() < items.len() && leave() {
                self.abandoned = true;
                break;
            }
        }
        Ok(results)
    }

    /// Writes the commands the window allows: for each file `REST` with the ranges held, `RETR`
    /// or `ERET`, and `CKSM` when its checksum is wanted.
    fn send_get(&mut self, t: &mut Transfers) -> Result<(), XferError> {
        self.ctl.send_due(t)
    }

    /// Reads replies until the oldest file in flight is done, receiving it when its transfer
    /// starts, checking that all of it arrived and, when asked, getting both checksums. The
    /// first refusal of any of its commands fails the batch.
    fn finish_get(
        &mut self,
        t: &mut Transfers,
        items: &[GetItem<'_>],
    ) -> Result<ItemResult, XferError> {
        let mut ready = None;
        let mut res = ItemResult::default();
        loop {
            match self.ctl.transfer_event(t)? {
                FileEvent::DataStart { file, .. } => {
                    let (digest, chunks) = self.receive_hashing(item_at(items, file)?)?;
                    ready = digest;
                    res.local_chunks = chunks;
                }
                FileEvent::Moved { file } => {
                    let item = item_at(items, file)?;
                    self.check_complete(item)?;
                    if let Some((alg, local)) = item.cksm {
                        let (server, mine) = self.cksm_pair(t, alg, local, ready.take())?;
                        res.server_cksm = server;
                        res.local_cksm = Some(mine);
                    }
                }
                FileEvent::Done { .. } => return Ok(res),
                FileEvent::Failed { command, reply, .. } => {
                    return Err(XferError::from_reply(&self.ctl.name, &command, &reply));
                }
                // A sending server's markers say nothing about what we hold.
                FileEvent::RestartMarker { .. }
                | FileEvent::Perf { .. }
                | FileEvent::Checksum { .. }
                | FileEvent::Aborted { .. } => {}
            }
        }
    }

    /// Receives one file, hashing it on the way in when its checksum is wanted; returns our
    /// digest if that already gave it.
    ///
    /// XXHC, and small files: the bytes are hashed as they are written (each chunk, or the
    /// whole small file, comes in order on one stream), so the digest is ready with the last
    /// byte and the file is never read back. Large files with a digest of the whole byte
    /// stream: our copy is hashed as its contiguous prefix grows, on another core.
    fn receive_hashing(
        &mut self,
        item: &GetItem<'_>,
    ) -> Result<(Option<LocalDigest>, Option<ChunkList>), XferError> {
        let in_order = item.len.is_some_and(|l| l <= FOLLOW_MIN)
            || item.cksm.is_some_and(|(a, _)| a == Algorithm::Xxhc);
        let inline = item
            .cksm
            .filter(|_| in_order && item.have.is_none())
            .map(|(alg, local)| HashingSink::new(item.sink, alg, local));
        // Our copy is hashed on another core as its prefix grows whenever the bytes are not
        // hashed as they land (large files with a whole-stream digest; resumed files).
        let follow = item.cksm.filter(|_| inline.is_none());
        let finished = AtomicBool::new(false);
        let prefix = || item.progress.prefix();
        let (prefix, finished) = (&prefix, &finished);
        let sink: &dyn Sink = match &inline {
            Some(h) => h,
            None => item.sink,
        };
        // Tests corrupt one received byte (at the offset given) before it is hashed, as a
        // fault past TCP's own checksum would.
        #[cfg(feature = "failpoints")]
        let flip = crate::failpoint::number("xfer::flip_received_byte")
            .map(|at| crate::failpoint::Flip::new(sink, at));
        #[cfg(feature = "failpoints")]
        let sink: &dyn Sink = match &flip {
            Some(f) => f,
            None => sink,
        };
        let (got, followed) = std::thread::scope(|s| {
            let follower = follow.map(|(alg, local)| {
                s.spawn(move || crate::checksum::follow(local, alg, prefix, finished))
            });
            let got = self.receive_into(item, sink);
            finished.store(true, Ordering::Release);
            (got, follower.map(|h| h.join()))
        });
        got?;
        let (hashed, chunks) = match (inline, item.len) {
            (Some(h), Some(len)) => h.finish_full(len).unzip(),
            _ => (None, None),
        };
        Ok((followed.or(hashed.map(|d| Ok(Ok(d)))), chunks.flatten()))
    }

    /// Reads the replies up to the server's digest of the file just moved (its queued `CKSM`),
    /// hashing our copy at `local` meanwhile unless `ready` already holds its digest; returns
    /// the server's digest and ours.
    fn cksm_pair(
        &mut self,
        t: &mut Transfers,
        alg: Algorithm,
        local: &Path,
        ready: Option<LocalDigest>,
    ) -> Result<(Option<String>, String), XferError> {
        let (reply, mine) = std::thread::scope(|s| {
            let h = ready
                .is_none()
                .then(|| s.spawn(move || crate::checksum::checksum_path(local, alg)));
            (self.cksm_event(t), h.map(|h| h.join()))
        });
        let server = reply?;
        let joined = ready
            .or(mine)
            .ok_or_else(|| XferError::Usage("no local checksum was computed".into()))?;
        let mine =
            joined.unwrap_or_else(|_| Err(XferError::Usage("checksum thread panicked".into())))?;
        Ok((server, mine))
    }

    /// Reads replies until the server's digest of the file whose data just moved.
    fn cksm_event(&mut self, t: &mut Transfers) -> Result<Option<String>, XferError> {
        loop {
            match self.ctl.transfer_event(t)? {
                FileEvent::Checksum { digest, .. } => return Ok(Some(digest.to_ascii_lowercase())),
                FileEvent::Failed { command, reply, .. } => {
                    return Err(XferError::from_reply(&self.ctl.name, &command, &reply));
                }
                FileEvent::RestartMarker { .. } | FileEvent::Perf { .. } => {}
                ev => {
                    return Err(XferError::Internal(format!(
                        "{ev:?} while waiting for a checksum"
                    )))
                }
            }
        }
    }

    /// Fails unless the ranges received plus those already held cover the whole of what was
    /// asked for: MODE E ends when the announced EODs have arrived, which a server can announce
    /// after sending only part of a file.
    fn check_complete(&self, item: &GetItem<'_>) -> Result<(), XferError> {
        let Some(len) = item.len else { return Ok(()) };
        let mut held = item.progress.ranges();
        if let Some(h) = &item.have {
            held.union(h);
        }
        let missing = held.missing(len);
        if missing.is_empty() {
            return Ok(());
        }
        let missing = missing
            .iter()
            .map(|(a, b)| format!("{a}-{b}"))
            .collect::<Vec<_>>()
            .join(",");
        Err(XferError::Incomplete {
            host: self.ctl.name.clone(),
            path: item.path.clone(),
            missing,
            len,
        })
    }

    /// Receives one file's MODE E data into `sink` over the cached data connections and any the
    /// server opens, keeping the reusable ones for the next file.
    pub(super) fn receive_into(
        &mut self,
        item: &GetItem<'_>,
        sink: &dyn Sink,
    ) -> Result<(), XferError> {
        let tls = self.tls.clone();
        let host = self.url.host.clone();
        let DataState::Download {
            listener,
            early,
            cached,
            ..
        } = &mut self.data
        else {
            return Err(XferError::Usage(
                "session is not set up for downloads".into(),
            ));
        };
        let tls = tls.as_ref().map(|t| (t, host.as_str()));
        let acceptor = ListenAcceptor::new(
            listener,
            early.as_ref(),
            tls,
            self.ctl.peer.ip(),
            self.token,
            item.progress,
            self.data_timeout,
        );
        let got = mode_e::receive(
            std::mem::take(cached),
            Some(&acceptor),
            sink,
            item.progress,
            item.len,
            haul_transport::DEFAULT_BLOCK,
        )
        .map_err(|e| XferError::io(&format!("receiving {}", item.path), e))?;
        *cached = got.reusable;
        Ok(())
    }
}
