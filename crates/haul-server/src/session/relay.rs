//! A session's commands on nested URLs, carried out on the next hop by the server's
//! [`Relay`](crate::relay::Relay): the next hop's reply goes back for commands without data;
//! for transfers, the next hop's data phase starts first (so a refusal there is this
//! transfer's refusal, and nothing moves), then the client's, with a [`Pump`] between the
//! legs. A transfer completes only when both legs did: the next hop's `226` comes before ours.

use std::io;
use std::sync::mpsc;

use haul_proto::command::{Restart, TransferMode};
use haul_proto::server::{ListKind, Outcome, Transfer, TransferOp, WriteKind};
use haul_proto::{Command, Reply};
use haul_transport::mode_e::Progress;
use haul_transport::pump::Framing;

use super::Session;
use crate::relay::{is_nested, DelegatedGsi, FileFetch, FileStore, Hop, PumpGrant, RelayUser};

/// The path of a command without data that a relay carries out, if it names one.
fn command_path(cmd: &Command) -> Option<&str> {
    match cmd {
        Command::Size(p)
        | Command::Mdtm(p)
        | Command::Mlst(Some(p))
        | Command::Stat(Some(p))
        | Command::Mkd(p)
        | Command::Rmd(p)
        | Command::Dele(p)
        | Command::Cksm { path: p, .. } => Some(p),
        _ => None,
    }
}

/// `cmd` with its path replaced by `inner`, the path on the next hop.
fn with_path(cmd: &Command, inner: String) -> Command {
    match cmd {
        Command::Size(_) => Command::Size(inner),
        Command::Mdtm(_) => Command::Mdtm(inner),
        Command::Mlst(_) => Command::Mlst(Some(inner)),
        Command::Stat(_) => Command::Stat(Some(inner)),
        Command::Mkd(_) => Command::Mkd(inner),
        Command::Rmd(_) => Command::Rmd(inner),
        Command::Dele(_) => Command::Dele(inner),
        Command::Cksm {
            algorithm,
            offset,
            length,
            ..
        } => Command::Cksm {
            algorithm: algorithm.clone(),
            offset: *offset,
            length: *length,
            path: inner,
        },
        other => other.clone(),
    }
}

/// The path a transfer names.
fn transfer_path(t: &Transfer) -> Option<&str> {
    match &t.op {
        TransferOp::Send { path, .. } | TransferOp::Receive { path, .. } => Some(path),
        TransferOp::List { path, .. } => path.as_deref(),
    }
}

impl Session<'_> {
    /// Carries out a command without data on the next hop when its path is nested; false when
    /// it is not.
    pub(super) fn relay_command(&mut self, cmd: &Command) -> io::Result<bool> {
        let Some(path) = command_path(cmd).filter(|p| is_nested(p)) else {
            return Ok(false);
        };
        let path = path.to_string();
        let Some(inner) = self.next_hop(&path)? else {
            return Ok(true);
        };
        let Some(hop) = self.hop.as_mut() else {
            return Ok(true);
        };
        let r = hop.command(&with_path(cmd, inner));
        self.ctl.send(&r)?;
        Ok(true)
    }

    /// Runs a transfer on the next hop when its path is nested; false when it is not.
    pub(super) fn relay_transfer(&mut self, t: &Transfer) -> io::Result<bool> {
        if !transfer_path(t).is_some_and(is_nested) {
            return Ok(false);
        }
        let path = transfer_path(t).unwrap_or_default().to_string();
        let Some(inner) = self.next_hop(&path)? else {
            return Ok(true);
        };
        match &t.op {
            TransferOp::Send { range, .. } => {
                let f = FileFetch {
                    path: inner,
                    eret: *range,
                    restart: t.restart.clone(),
                    in_order: self.mode() == TransferMode::Stream,
                    leg: self.next_leg,
                };
                self.relay_send(&f)?;
            }
            TransferOp::Receive {
                kind: WriteKind::Stor,
                ..
            } => {
                let s = FileStore {
                    path: inner,
                    restart: t.restart.clone(),
                    allocate: t.allocate,
                    leg: self.next_leg,
                };
                self.relay_receive(&s)?;
            }
            TransferOp::Receive { .. } => {
                self.answer(
                    504,
                    "A relay stores whole files only (STOR), not APPE or ESTO.",
                )?;
            }
            TransferOp::List { kind, .. } => self.relay_listing(&inner, *kind)?,
        }
        Ok(true)
    }

    /// `OPTS RELAY Parallelism=N;TcpBuffer=B;`: the next leg's streams and socket buffers for
    /// this session's relayed transfers (haul extension), within the server's limits.
    pub(super) fn relay_opts(&mut self, options: &str) -> io::Result<()> {
        if self.shared.cfg.relay.is_none() {
            return self
                .ctl
                .reply(501, "OPTS RELAY: this server does not relay.");
        }
        match haul_proto::nested::NextLeg::parse(options) {
            Ok(leg) => {
                let max = self.shared.cfg.max_parallelism as u32;
                if leg.parallelism.is_some_and(|p| p > max) {
                    return self.ctl.reply(
                        501,
                        format!("OPTS RELAY: over this server's limit of {max} streams."),
                    );
                }
                self.next_leg = leg;
                self.ctl
                    .reply(200, format!("OPTS RELAY: next leg {}", leg.format()))
            }
            Err(e) => self.ctl.reply(501, format!("OPTS RELAY: {e}.")),
        }
    }

    /// `SITE RELAY FEAT <nested path>`: the FEAT reply of the server at the end of the chain,
    /// so a client can choose what the origin offers (its checksum algorithms, say).
    pub(super) fn cmd_relay(&mut self, arg: &str) -> io::Result<()> {
        let (sub, path) = arg.split_once(' ').unwrap_or((arg, ""));
        let path = path.trim();
        if !sub.eq_ignore_ascii_case("FEAT") || !is_nested(path) {
            return self.ctl.reply(501, "Usage: SITE RELAY FEAT <nested URL>.");
        }
        let Some(inner) = self.next_hop(path)? else {
            return Ok(());
        };
        let r = match self.hop.as_mut() {
            Some(hop) => hop.feat(&inner),
            None => Reply::new(451, "Relay: the next hop was lost."),
        };
        self.ctl.send(&r)
    }

    /// Opens the next hop `path` names (or keeps the one open); the path on it, or None when
    /// refused (the refusal has been answered).
    fn next_hop(&mut self, path: &str) -> io::Result<Option<String>> {
        let Some(relay) = self.shared.cfg.relay.clone() else {
            self.answer(
                550,
                "This server does not relay: nested URLs need a server started with --relay-allow.",
            )?;
            return Ok(None);
        };
        let access = self.access;
        let user = RelayUser {
            name: self.user_name.clone(),
            anonymous: self.anonymous,
            may_relay: access.is_some_and(|a| a.relay),
            peer: self.peer,
            gsi: self
                .gsi
                .delegated
                .clone()
                .zip(self.shared.gsi())
                .map(|(credential, g)| DelegatedGsi {
                    credential,
                    // The delegated chain is one proxy deeper than the client's own.
                    policy: g.policy.delegated(),
                }),
        };
        match relay.open(&user, path, self.hop.take()) {
            Ok((hop, inner)) => {
                self.hop = Some(hop);
                Ok(Some(inner))
            }
            Err(r) => {
                tracing::warn!(user = %user.name, reply = %r, "relay refused");
                self.answer(r.code, r.text())?;
                Ok(None)
            }
        }
    }

    /// The session's next hop, taken for a transfer (given back by the caller).
    fn take_hop(&mut self) -> io::Result<Option<Box<dyn Hop>>> {
        let hop = self.hop.take();
        if hop.is_none() {
            self.answer(451, "Relay: the next hop was lost.")?;
        }
        Ok(hop)
    }

    /// A pump within the relay's memory and the next hop, for one transfer; None when refused
    /// (the refusal has been answered).
    fn relay_start(&mut self) -> io::Result<Option<(PumpGrant, Box<dyn Hop>)>> {
        let Some(relay) = self.shared.cfg.relay.clone() else {
            return Ok(None);
        };
        let grant = match relay.pump() {
            Ok(g) => g,
            Err(r) => return self.answer(r.code, r.text()).map(|()| None),
        };
        Ok(self.take_hop()?.map(|hop| (grant, hop)))
    }

    /// RETR / ERET of a nested path: the next hop sends into the pump, which we drain to the
    /// client.
    fn relay_send(&mut self, f: &FileFetch) -> io::Result<()> {
        let Some((grant, mut hop)) = self.relay_start()? else {
            return Ok(());
        };
        let pump = &grant.pump;
        let (tx, rx) = mpsc::channel::<()>();
        let progress = Progress::default();
        std::thread::scope(|s| {
            let fetcher = s.spawn(|| {
                let started = move || {
                    let _ = tx.send(());
                };
                let r = hop.fetch(f, pump, &progress, &started);
                match &r {
                    Ok(()) => pump.close(),
                    Err(reply) => pump.fail(reply.text()),
                }
                r
            });
            let began = rx.recv().is_ok();
            let moved = if began {
                Some(self.send_with(&|conns, extended, progress| {
                    pump.drain(conns, framing(extended), progress)
                }))
            } else {
                None
            };
            let fetched = fetcher
                .join()
                .unwrap_or_else(|_| Err(Reply::new(451, "Relay: the next hop's reader panicked.")));
            match (moved, fetched) {
                (Some(m), _) => m.map(drop),
                (None, Err(r)) => self.answer(r.code, r.text()),
                (None, Ok(())) => self.answer(451, "Relay: the next hop sent no data phase."),
            }
        })?;
        self.hop = Some(hop);
        Ok(())
    }

    /// STOR of a nested path: we receive into the pump, which the next hop's leg drains.
    fn relay_receive(&mut self, st: &FileStore) -> io::Result<()> {
        let Some((grant, mut hop)) = self.relay_start()? else {
            return Ok(());
        };
        let pump = &grant.pump;
        let stream_start = match (&st.restart, self.mode()) {
            (Some(Restart::Offset(o)), TransferMode::Stream) => *o,
            _ => 0,
        };
        let (tx, rx) = mpsc::channel::<()>();
        std::thread::scope(|s| {
            let storer = s.spawn(|| {
                let started = move || {
                    let _ = tx.send(());
                };
                let r = hop.store(st, pump, &started);
                if let Err(reply) = &r {
                    pump.fail(reply.text());
                }
                r
            });
            let began = rx.recv().is_ok();
            let got = if began {
                let got = self.receive_into(pump, 0, stream_start, false)?;
                match &got {
                    Ok(_) => pump.close(),
                    Err(Some(e)) => pump.fail(format!("receiving leg: {e}")),
                    Err(None) => pump.fail("receiving leg: no data connection"),
                }
                Some(got)
            } else {
                None
            };
            let stored = storer
                .join()
                .unwrap_or_else(|_| Err(Reply::new(451, "Relay: the next hop's sender panicked.")));
            match (got, stored) {
                (None, Err(r)) => self.answer(r.code, r.text()),
                (None, Ok(())) => self.answer(451, "Relay: the next hop opened no data phase."),
                // No data connection: the outcome was reported.
                (Some(Err(None)), _) => Ok(()),
                (Some(Err(Some(e))), _) => self.finish(Outcome::Failed(e.to_string())),
                (Some(Ok(_)), Err(r)) => self.finish(Outcome::Failed(r.text())),
                (Some(Ok(_)), Ok(())) => self.finish(Outcome::Complete),
            }
        })?;
        self.hop = Some(hop);
        Ok(())
    }

    /// LIST / NLST / MLSD of a nested path: the next hop's listing, sent as ours.
    fn relay_listing(&mut self, inner: &str, kind: ListKind) -> io::Result<()> {
        let Some(mut hop) = self.take_hop()? else {
            return Ok(());
        };
        let listed = hop.listing(Some(inner), kind);
        self.hop = Some(hop);
        match listed {
            Ok(bytes) => self.send_bytes(bytes),
            Err(r) => self.answer(r.code, r.text()),
        }
    }
}

/// How the client's leg frames what the pump delivers.
fn framing(extended: bool) -> Framing {
    if extended {
        Framing::Extended { close: false }
    } else {
        Framing::Stream
    }
}
