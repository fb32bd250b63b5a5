//! The driver's answers in `server_machine`: the verdict, the TLS handshake, the listener and
//! the steps of a transfer, each checked against what the machine does.

use std::net::SocketAddr;

use haul_proto::command::TransferMode;
use haul_proto::server::Outcome;
use haul_proto::Reply;

use super::server_common::verdict;
use super::{Harness, Stage, CLIENT};

impl Harness {
    /// Answers what the machine waits for: `sub` is the decision.
    pub(crate) fn answer(&mut self, sub: u8) {
        if let Some((user, pass)) = self.verify.take() {
            let (v, code) = verdict(&user, &pass);
            self.verdict_due = Some(code);
            self.s.login().handle_verified(v);
        } else if std::mem::take(&mut self.tls) {
            if sub & 1 != 0 {
                self.close_due = true;
                self.s.login().tls_failed();
            } else {
                self.s.login().tls_established();
                assert!(self.s.login_state().is_tls());
            }
        } else if self.listen.take().is_some() {
            let r = if sub & 1 == 0 {
                let port = 1024 + u16::from(sub >> 1) * 997;
                Ok(SocketAddr::new(CLIENT, port))
            } else {
                Err(())
            };
            self.listened = Some(r);
            self.s
                .transfers()
                .listening(r.map_err(|()| "no free port".into()));
        } else {
            self.step_transfer(sub);
        }
    }

    /// Whether the running transfer may have a data channel.
    fn channel_ok(&self, reused: bool) -> bool {
        let protected = !self.cfg.require_tls || self.prot_p;
        protected && (self.setup || (reused && self.mode == TransferMode::Extended))
    }

    /// The machine's refusal when it has no data channel.
    fn channel_refusal(&self) -> u16 {
        if self.cfg.require_tls && !self.prot_p {
            521
        } else {
            425
        }
    }

    /// The next step of the running transfer.
    fn step_transfer(&mut self, sub: u8) {
        let Some(x) = &self.xfer else {
            return;
        };
        let reused = sub & 8 != 0 && self.mode == TransferMode::Extended;
        let outcome = match (x.stage, sub & 7) {
            (Stage::Start, 5) | (Stage::Ready, 6) | (Stage::Opened, 3) => {
                Outcome::Refused(Reply::new(550, "No such file."))
            }
            (Stage::Start | Stage::Ready, 7) | (Stage::Opened, 2) => {
                Outcome::NoConnection("refused".into())
            }
            (Stage::Opened, 1) => Outcome::Failed("reset".into()),
            (Stage::Opened, _) => Outcome::Complete,
            (Stage::Start, 6) | (Stage::Ready, _) => return self.opening(reused),
            (Stage::Start, _) => return self.ready(reused),
            (Stage::Ended, _) => return,
        };
        let x = self.xfer.as_mut().expect("a transfer");
        x.stage = Stage::Ended;
        x.expect = match &outcome {
            Outcome::Refused(r) => r.code,
            Outcome::NoConnection(_) => 425,
            Outcome::Failed(_) => 426,
            Outcome::Complete => 226,
        };
        self.s.transfers().transfer_done(outcome);
    }

    /// `data_channel_ready`, at the transfer's start.
    fn ready(&mut self, reused: bool) {
        let want = self.channel_ok(reused);
        let refusal = self.channel_refusal();
        let got = self.s.transfers().data_channel_ready(reused);
        assert_eq!(got, want, "data_channel_ready (PROT P: {})", self.prot_p);
        let x = self.xfer.as_mut().expect("a transfer");
        x.reused = reused;
        if want {
            x.stage = Stage::Ready;
        } else {
            x.stage = Stage::Ended;
            x.expect = refusal;
        }
    }

    /// `transfer_opening`, after `data_channel_ready` or instead of it.
    fn opening(&mut self, reused: bool) {
        let refusal = self.channel_refusal();
        let x = self.xfer.as_ref().expect("a transfer");
        let (reused, sending) = match x.stage {
            Stage::Start => (reused, x.sending),
            _ => (x.reused, x.sending),
        };
        let want = x.stage == Stage::Ready || self.channel_ok(reused);
        let got = self.s.transfers().transfer_opening(reused, sending);
        assert_eq!(got, want, "transfer_opening (PROT P: {})", self.prot_p);
        let x = self.xfer.as_mut().expect("a transfer");
        x.reused = reused;
        if want {
            x.stage = Stage::Opened;
        } else {
            x.stage = Stage::Ended;
            x.expect = refusal;
        }
    }
}
