//! The driver of the session machine's data-channel actions: it drops and sets up data
//! channels, opens listeners, and runs transfers (`transfer` sends files and listings, `upload`
//! receives files), reporting each step back to the machine, which decides every reply. PLUT's
//! transfers, which the machine forwards, are run by `plut_transfer`.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::Ordering;

use haul_proto::server::{Outcome, ServerAction, Transfer, TransferOp};
use haul_proto::{Command, Reply};
use haul_transport::net::DataListener;

use super::Session;
use crate::datachan::Setup;
use crate::journal::{Direction, ServedTransfer};
use crate::vfs::Target;

/// What the running transfer moved, for the journal.
#[derive(Debug, Default)]
pub(crate) struct Meter {
    /// Its data phase began (`150` / `125` sent).
    pub(crate) opened: bool,
    /// Payload bytes moved.
    pub(crate) bytes: u64,
    /// Data connections used.
    pub(crate) streams: usize,
    /// How it ended.
    pub(crate) outcome: Option<Result<(), String>>,
    /// The next hop of a relayed transfer.
    pub(crate) next_hop: Option<String>,
}

impl Session<'_> {
    /// Performs one data-channel action of the session machine.
    pub(super) fn data_action(&mut self, action: ServerAction) -> io::Result<()> {
        match action {
            ServerAction::DropCached => self.data.drop_cached(),
            ServerAction::DropData => self.data.drop_all(),
            ServerAction::Active(addrs) => {
                self.data.drop_all();
                self.data.setup = Setup::Active(addrs);
            }
            ServerAction::Listen(_) => {
                self.data.drop_all();
                let listening = self.listen();
                self.machine.transfers().listening(listening);
            }
            ServerAction::Transfer(t) => self.run_transfer(t)?,
            // ABOR reaches a transfer through the watch (`finish`), which has already cut it.
            ServerAction::Abort => {}
            other => tracing::warn!(action = ?other, "unexpected action of the session machine"),
        }
        Ok(())
    }

    /// Listens for the client's data connections on the control connection's address.
    fn listen(&mut self) -> Result<SocketAddr, String> {
        let ip = self.ctl.local_ip().map_err(|e| e.to_string())?;
        let (stack, sbuf) = (self.data.stack, self.sbuf());
        let l = self
            .bind_passive(ip, |a| DataListener::bind(stack, a, sbuf))
            .map_err(|e| e.to_string())?;
        let addr = l.local_addr().map_err(|e| e.to_string())?;
        self.data.setup = Setup::Passive(l);
        Ok(addr)
    }

    /// Binds a passive data socket on `ip` with `bind`: in `--data-ports` when set (the first
    /// free port from where the last search left off, so ports are used in turn), on any port
    /// otherwise.
    pub(crate) fn bind_passive<T>(
        &self,
        ip: IpAddr,
        bind: impl Fn(SocketAddr) -> io::Result<T>,
    ) -> io::Result<T> {
        let Some((low, high)) = self.shared.cfg.data_ports else {
            return bind(SocketAddr::new(ip, 0));
        };
        let n = u32::from(high.saturating_sub(low)) + 1;
        let start = self.shared.next_port.fetch_add(1, Ordering::Relaxed);
        for i in 0..n {
            let port = low + ((start.wrapping_add(i)) % n) as u16;
            match bind(SocketAddr::new(ip, port)) {
                Err(e) if e.kind() == io::ErrorKind::AddrInUse => {}
                other => return other,
            }
        }
        Err(io::Error::new(
            io::ErrorKind::AddrInUse,
            format!("every data port in --data-ports {low}-{high} is in use"),
        ))
    }

    /// The socket buffer size of new data connections (`SBUF`).
    pub(crate) fn sbuf(&self) -> Option<usize> {
        self.machine.transfer_state().sbuf().map(|n| n as usize)
    }

    /// Runs one transfer the machine started; every path ends it with an outcome.
    fn run_transfer(&mut self, t: Transfer) -> io::Result<()> {
        self.meter = Meter::default();
        let (started, t0) = (std::time::SystemTime::now(), std::time::Instant::now());
        let (direction, path, listing) = match &t.op {
            TransferOp::Send { path, .. } => (Direction::Sent, path.clone(), false),
            TransferOp::Receive { path, .. } => (Direction::Received, path.clone(), false),
            TransferOp::List { path, .. } => {
                (Direction::Sent, path.clone().unwrap_or_default(), true)
            }
        };
        // The virtual devices (`/dev/zero`, `/dev/null`) and listings are memory, not disk.
        let memory = listing || !matches!(self.resolve(&path), Target::Path(_));
        if self.relay_transfer(&t)? {
            self.meter.next_hop = self.hop.as_ref().map(|h| h.name());
        } else {
            match t.op {
                TransferOp::Send { path, range } => self.cmd_retr(&path, range, t.restart)?,
                TransferOp::Receive { path, kind } => {
                    self.cmd_stor(&path, kind, t.restart, t.allocate)?
                }
                TransferOp::List { path, kind } => self.cmd_listing(path.as_deref(), kind)?,
            }
        }
        self.ensure_outcome()?;
        let (Some(journal), Some(outcome)) = (
            self.shared.cfg.journal.clone(),
            self.meter.outcome.take().filter(|_| self.meter.opened),
        ) else {
            return Ok(());
        };
        let memory = memory || self.meter.next_hop.is_some();
        journal.record(ServedTransfer {
            started,
            elapsed_s: t0.elapsed().as_secs_f64(),
            direction,
            path,
            local: self.ctl.local_addr()?,
            peer: self.peer,
            user: self.user_name.clone(),
            bytes: self.meter.bytes,
            streams: self.meter.streams,
            transport: self.data.stack.as_str(),
            memory,
            next_hop: self.meter.next_hop.take(),
            outcome,
        });
        Ok(())
    }

    /// Ends a transfer that its driver left without an outcome (a bug) with `426`.
    fn ensure_outcome(&mut self) -> io::Result<()> {
        if self.machine.transfer_state().in_transfer() {
            tracing::error!("a transfer ended without an outcome");
            self.finish(Outcome::Failed("internal error: no outcome".into()))?;
        }
        Ok(())
    }

    /// Whether the running transfer can have a data channel (cached MODE E connections or a
    /// set-up, protected if it must be); if not, the refusal has been sent.
    pub(crate) fn data_ready(&mut self) -> io::Result<bool> {
        let reused = !self.data.cached.is_empty();
        let ready = self.machine.transfers().data_channel_ready(reused);
        self.write_replies().map(|()| ready)
    }

    /// The transfer is about to move data: its `150` or `125` goes out now. False when it
    /// cannot go on (no data channel; the refusal has been sent).
    pub(crate) fn opening(&mut self, reused: bool, sending: bool) -> io::Result<bool> {
        let go = self.machine.transfers().transfer_opening(reused, sending);
        self.meter.opened |= go;
        self.write_replies().map(|()| go)
    }

    /// The transfer ended: an `ABOR` the client sent meanwhile is taken first, so that the
    /// replies say the transfer was aborted.
    pub(crate) fn finish(&mut self, outcome: Outcome) -> io::Result<()> {
        self.meter.outcome = Some(match &outcome {
            Outcome::Complete => Ok(()),
            Outcome::Refused(r) => Err(r.text()),
            Outcome::NoConnection(e) | Outcome::Failed(e) => Err(e.clone()),
        });
        if self.ctl.take_abor() {
            self.machine.handle_command(Command::Abor);
        }
        self.machine.transfers().transfer_done(outcome);
        self.write_replies()
    }

    /// Answers the command being handled: during a transfer as its refusal, otherwise at once.
    pub(crate) fn answer(&mut self, code: u16, text: impl Into<String>) -> io::Result<()> {
        let r = Reply::new(code, text);
        if self.machine.transfer_state().in_transfer() {
            self.finish(Outcome::Refused(r))
        } else {
            self.ctl.send(&r)
        }
    }

    /// Writes the replies the data-transfer machine queued.
    fn write_replies(&mut self) -> io::Result<()> {
        while let Some(a) = self.machine.transfers().poll_action() {
            match a {
                ServerAction::Reply(r) => self.ctl.send(&r)?,
                ServerAction::Defer(r) => self.ctl.defer(&r),
                other => self.data_action(other)?,
            }
        }
        Ok(())
    }
}
