//! Fuzzes the server's whole session machine (`server::Session`: the login and the transfers
//! together) with a client's commands and a driver's decisions. The first byte sets the
//! configuration; the bytes up to the first `0xFF` are the control channel (`LineBuffer` and
//! `Command::parse` read them); the bytes after it are the driver's decisions, taken one per
//! step while the machine waits for the driver (0 when they run out, the plain path): answer
//! (TLS handshake, credential check, listener, the next step of a transfer), hand over the next
//! command early (pipelined), or inject `ABOR` into a running transfer.
//!
//! It may not panic; every command gets exactly one final reply, in order (a reply, `Forward`
//! of that command, or `Verify` whose verdict brings it), a transfer's `150` / `125` comes first
//! and its final reply before anything for a later command, and `ABOR` during a transfer brings
//! the transfer's `426` (`226` if it completed) and then its own `226`, ahead of the commands
//! held; a data channel is refused exactly when the settings before the transfer (`PROT`,
//! `PORT` / `PASV`, `MODE`) call for it; nothing follows `Close`;
//! no transfer starts while another runs; `held()` never exceeds the unanswered commands;
//! before the `230` no `Transfer`, `Listen` or `Active` appears.

#![no_main]

use std::collections::VecDeque;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use haul_proto::command::{ProtLevel, Restart, TransferMode};
use haul_proto::hostport::format_port;
use haul_proto::server::{
    is_data_command, DataConfig, LoginConfig, Outcome, Passive, ServerAction, Session, TransferOp,
    Verdict, GREETING,
};
use haul_proto::{Command, Reply};
use libfuzzer_sys::fuzz_target;

#[path = "server_machine/answers.rs"]
mod answers;
#[path = "server_machine/input.rs"]
mod input;
#[path = "common/server.rs"]
mod server_common;
use input::{canonical, expected_op, is_login_family, is_server_command, is_transfer, Decisions};
use server_common::commands;

/// The control connection's peer.
const CLIENT: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// The `Transfer` action came.
    Start,
    /// `data_channel_ready` said yes.
    Ready,
    /// `transfer_opening` said yes.
    Opened,
    /// The driver reported the end (or the machine refused the data channel).
    Ended,
}

/// The running transfer, as the driver sees it.
#[derive(Debug)]
struct Xfer {
    stage: Stage,
    sending: bool,
    reused: bool,
    /// The `Abort` action came.
    abort: bool,
    /// Its `150` / `125` came.
    prelim: bool,
    /// The final reply due without `ABOR`.
    expect: u16,
}

/// The driver, with what it knows of the session from the replies so far.
struct Harness {
    s: Session,
    cfg: DataConfig,
    own: bool,
    /// Commands handed over and not yet answered, oldest first.
    fed: VecDeque<Command>,
    logged_in: bool,
    closed: bool,
    /// `Close` may come now.
    close_ok: bool,
    /// `Close` must come now.
    close_due: bool,
    mode: TransferMode,
    prot_p: bool,
    setup: bool,
    rest: Option<Restart>,
    /// A `Verify` awaits its verdict.
    verify: Option<(String, String)>,
    /// The verdict was given: the next reply is its, with this code.
    verdict_due: Option<u16>,
    /// A rejected login: a `421` may follow (the failure limit).
    rejected: bool,
    /// `234` was the last reply: `StartTls` may come.
    auth_ok: bool,
    /// A TLS handshake awaits its end.
    tls: bool,
    listen: Option<Passive>,
    /// The listener's answer: the next reply is the passive command's.
    listened: Option<Result<SocketAddr, ()>>,
    /// `Active` came: the next reply is the 200 of its command.
    active: bool,
    xfer: Option<Xfer>,
    /// The transfer's final reply after `ABOR` came: `ABOR`'s 226 is next.
    abor_due: bool,
}

impl Harness {
    fn new(ctl: u8) -> Harness {
        let login = LoginConfig {
            require_tls: ctl & 1 != 0,
            tls_available: ctl & 2 != 0,
            max_failures: u32::from(ctl >> 6) + 1,
        };
        let cfg = DataConfig {
            max_parallelism: usize::from(ctl >> 2 & 7) + 1,
            require_tls: login.require_tls,
        };
        let mut s = Session::new(login, cfg, CLIENT);
        let own = ctl & 0x20 != 0;
        s.set_own_transfers(own);
        assert_eq!(
            s.poll_action(),
            Some(ServerAction::Reply(Reply::new(220, GREETING)))
        );
        Harness {
            s,
            cfg,
            own,
            fed: VecDeque::new(),
            logged_in: false,
            closed: false,
            close_ok: false,
            close_due: false,
            mode: TransferMode::Stream,
            prot_p: false,
            setup: false,
            rest: None,
            verify: None,
            verdict_due: None,
            rejected: false,
            auth_ok: false,
            tls: false,
            listen: None,
            listened: None,
            active: false,
            xfer: None,
            abor_due: false,
        }
    }

    fn running(&self) -> bool {
        self.xfer.as_ref().is_some_and(|x| x.stage != Stage::Ended)
    }

    /// The machine waits for the driver.
    fn waiting(&self) -> bool {
        self.verify.is_some() || self.tls || self.listen.is_some() || self.running()
    }

    /// Hands over one command.
    fn feed(&mut self, c: Command) {
        if self.tls {
            // Clear text during the handshake ends the session.
            self.close_ok = true;
        }
        if c == Command::Abor && self.running() {
            // It reaches the transfer ahead of the commands held: answered right after it.
            self.fed.insert(1, c.clone());
        } else {
            self.fed.push_back(c.clone());
        }
        self.s.handle_command(c);
    }

    /// Hands over a command while the machine waits (pipelined).
    fn feed_early(&mut self, c: Command) {
        self.feed(c)
    }

    /// Takes every action due and checks it.
    fn drain(&mut self) {
        while let Some(a) = self.s.poll_action() {
            assert!(!self.closed, "{a:?} after Close");
            assert!(
                !self.close_due || a == ServerAction::Close,
                "{a:?} instead of Close"
            );
            if !matches!(a, ServerAction::Reply(_)) {
                self.rejected = false;
            }
            if a != ServerAction::Close {
                self.close_ok = false;
            }
            if !matches!(a, ServerAction::StartTls | ServerAction::Close) {
                self.auth_ok = false;
            }
            match a {
                ServerAction::Reply(r) => self.reply(r),
                ServerAction::Defer(r) => {
                    assert_eq!(r.code, 226, "{r}");
                    self.final_reply(r, true);
                }
                ServerAction::StartTls => {
                    assert!(std::mem::take(&mut self.auth_ok), "StartTls without 234");
                    self.tls = true;
                    // Commands handed over before the handshake close the session.
                    self.close_due = !self.fed.is_empty();
                }
                ServerAction::Verify { user, pass } => {
                    assert!(!self.logged_in && self.verify.is_none());
                    assert_eq!(self.fed.front(), Some(&Command::Pass(pass.clone())));
                    self.verify = Some((user, pass));
                }
                ServerAction::Forward(c) => self.forward(c),
                ServerAction::Close => {
                    assert!(self.close_ok || self.close_due, "an unexpected Close");
                    self.closed = true;
                }
                other => self.data_action(other),
            }
        }
    }

    /// A `Forward`: the driver answers the command itself.
    fn forward(&mut self, c: Command) {
        assert!(
            self.xfer.is_none() && self.listen.is_none(),
            "{c} forwarded"
        );
        assert_eq!(
            self.fed.pop_front().as_ref(),
            Some(&c),
            "Forward out of order"
        );
        if !self.logged_in {
            assert!(is_server_command(&c), "{c} forwarded before the login");
            return;
        }
        assert!(!is_login_family(&c), "{c} forwarded");
        if is_data_command(&c) {
            assert!(
                self.own
                    && matches!(
                        c,
                        Command::Retr(_) | Command::Eret { .. } | Command::Stor(_)
                    ),
                "{c} forwarded"
            );
            assert_eq!(self.s.transfers().take_rest(), self.rest.take());
        }
    }

    /// `DropCached`, `DropData`, `Active`, `Listen`, `Transfer`, `Abort`.
    fn data_action(&mut self, a: ServerAction) {
        if a == ServerAction::Abort {
            let x = self.xfer.as_mut().expect("Abort outside a transfer");
            assert!(x.stage != Stage::Ended && !x.abort, "Abort again");
            assert_eq!(self.fed.get(1), Some(&Command::Abor), "Abort without ABOR");
            x.abort = true;
            return;
        }
        assert!(self.logged_in, "{a:?} before the login");
        assert!(self.xfer.is_none(), "{a:?} during a transfer");
        assert!(self.listen.is_none(), "{a:?} while a listener is awaited");
        let front = self.fed.front().expect("a data action for no command");
        match a {
            ServerAction::DropCached => {
                assert!(
                    matches!(front, Command::Mode(m) if *m != self.mode),
                    "{front}"
                )
            }
            ServerAction::DropData => {
                assert!(matches!(
                    front,
                    Command::Port(_) | Command::Eprt(_) | Command::Spor(_)
                ));
                self.setup = false;
            }
            ServerAction::Active(addrs) => {
                let want = match front {
                    Command::Port(a) | Command::Eprt(a) => vec![*a],
                    Command::Spor(v) => v.clone(),
                    other => panic!("Active for {other}"),
                };
                assert_eq!(addrs, want);
                assert!(!addrs.is_empty() && addrs.len() <= self.cfg.max_parallelism);
                for a in &addrs {
                    assert!(a.port() >= 1024 && canonical(a.ip()) == CLIENT, "{a}");
                }
                self.setup = true;
                self.active = true;
            }
            ServerAction::Listen(k) => {
                let want = match front {
                    Command::Pasv => Passive::Pasv,
                    Command::Epsv => Passive::Epsv,
                    Command::Spas => Passive::Spas,
                    other => panic!("Listen for {other}"),
                };
                assert_eq!(k, want);
                self.listen = Some(k);
                self.setup = false;
            }
            ServerAction::Transfer(t) => {
                assert_eq!(Some(&t.op), expected_op(front).as_ref(), "{front}");
                let plut = matches!(
                    front,
                    Command::Retr(_) | Command::Eret { .. } | Command::Stor(_)
                );
                assert!(!self.own || !plut, "{front} not forwarded");
                assert_eq!(t.restart, self.rest.take());
                assert_eq!(t.mode, self.mode);
                self.xfer = Some(Xfer {
                    stage: Stage::Start,
                    sending: !matches!(t.op, TransferOp::Receive { .. }),
                    reused: false,
                    abort: false,
                    prelim: false,
                    expect: 0,
                });
            }
            other => panic!("unknown action {other:?}"),
        }
    }

    fn reply(&mut self, r: Reply) {
        if r.code < 200 {
            let x = self.xfer.as_mut().expect("a 1yz outside a transfer");
            assert!(
                x.stage == Stage::Opened && !x.prelim && !x.abort,
                "{r}: {x:?}"
            );
            assert_eq!(r.code, if x.reused { 125 } else { 150 });
            x.prelim = true;
            return;
        }
        assert!(r.code < 600, "{r}");
        if std::mem::take(&mut self.rejected) && r.code == 421 {
            self.close_due = true;
            return;
        }
        self.final_reply(r, false)
    }

    /// A final reply (`deferred`: a `Defer`): it answers the oldest command.
    fn final_reply(&mut self, r: Reply, deferred: bool) {
        let c = self
            .fed
            .pop_front()
            .unwrap_or_else(|| panic!("{r}: a reply to nothing"));
        if std::mem::take(&mut self.abor_due) {
            assert!(c == Command::Abor && r.code == 226, "{c} got {r} for ABOR");
            return;
        }
        if let Some(code) = self.verdict_due.take() {
            assert!(matches!(c, Command::Pass(_)), "{c}: {r}");
            assert_eq!(r.code, code);
            self.logged_in = code == 230;
            self.rejected = code == 530;
            self.close_ok = code == 421;
            return;
        }
        if let Some(x) = self.xfer.take() {
            assert!(is_transfer(&c), "{c} got {r} during a transfer");
            assert_eq!(x.stage, Stage::Ended, "{c} answered while it runs: {r}");
            if x.abort {
                assert!(r.code == 426 || (r.code == 226 && x.expect == 226), "{r}");
                assert!(!deferred);
                self.abor_due = true;
            } else {
                assert_eq!((r.code, deferred), (x.expect, x.expect == 226), "{r}");
            }
            return;
        }
        assert!(!deferred, "{c}: deferred {r}");
        let active = std::mem::take(&mut self.active);
        if !self.logged_in {
            assert!(is_login_family(&c) || r.code == 530, "{c}: {r}");
        }
        match c {
            Command::Pasv | Command::Epsv | Command::Spas => self.passive_reply(&c, &r),
            Command::Port(_) | Command::Eprt(_) | Command::Spor(_) if self.logged_in => {
                assert_eq!(r.code == 200, active, "{c}: {r}");
            }
            Command::Mode(m) if r.code == 200 => self.mode = m,
            Command::Rest(x) if r.code == 350 => self.rest = Some(x),
            Command::Prot(p) if r.code == 200 => self.prot_p = p == ProtLevel::Private,
            Command::Quit => {
                assert_eq!(r.code, 221);
                self.close_due = true;
            }
            Command::Auth(_) if r.code == 234 => {
                self.auth_ok = true;
                self.close_ok = true;
            }
            Command::Abor => assert!(r.code == 226 || !self.logged_in, "{r}"),
            c => assert!(!is_transfer(&c) || !self.logged_in, "{c}: {r}"),
        }
    }

    /// The reply to `PASV`, `EPSV` or `SPAS`.
    fn passive_reply(&mut self, c: &Command, r: &Reply) {
        let Some(l) = self.listened.take() else {
            return assert!(!self.logged_in && r.code == 530, "{c}: {r}");
        };
        let Ok(addr) = l else {
            return assert_eq!(r.code, 425, "{c}: {r}");
        };
        let text = r.lines.join("\n");
        let want = match c {
            Command::Pasv => (227, format_port(&addr)),
            Command::Spas => (229, format_port(&addr)),
            _ => (229, format!("|||{}|", addr.port())),
        };
        assert!(r.code == want.0 && text.contains(&want.1), "{c}: {r}");
        self.setup = true;
    }

    /// What must hold between steps.
    fn check(&mut self) {
        assert!(self.s.held() <= self.fed.len(), "{} held", self.s.held());
        if self.closed {
            return;
        }
        assert!(!self.close_due, "no Close");
        assert!(self.verdict_due.is_none() && self.listened.is_none() && !self.abor_due);
        assert!(!self.xfer.as_ref().is_some_and(|x| x.stage == Stage::Ended));
        let t = self.s.transfer_state();
        assert_eq!(t.in_transfer(), self.running());
        assert_eq!(t.is_busy(), self.running() || self.listen.is_some());
        assert_eq!(self.s.login_state().is_logged_in(), self.logged_in);
    }

    /// The end of the input: everything answered, or nothing after `Close`.
    fn finish(mut self) {
        if !self.closed {
            assert!(!self.waiting());
            assert!(self.fed.is_empty(), "unanswered: {:?}", self.fed);
            return;
        }
        self.s.handle_command(Command::Noop);
        self.s.login().tls_established();
        self.s.login().handle_verified(Verdict::Accepted);
        self.s.transfers().listening(Err("late".into()));
        self.s.transfers().transfer_done(Outcome::Complete);
        assert!(self.s.poll_action().is_none(), "an action after Close");
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&ctl, rest)) = data.split_first() else {
        return;
    };
    let (text, decisions) = match rest.iter().position(|&b| b == 0xFF) {
        Some(i) => (&rest[..i], &rest[i + 1..]),
        None => (rest, &[][..]),
    };
    let mut cmds = VecDeque::from(commands(text));
    let mut d = Decisions(decisions);
    let mut h = Harness::new(ctl);
    while !h.closed {
        if !h.waiting() {
            let Some(c) = cmds.pop_front() else { break };
            h.feed(c);
        } else {
            let b = d.next();
            match b & 3 {
                1 if !cmds.is_empty() => {
                    let c = cmds.pop_front().expect("a command");
                    h.feed_early(c);
                }
                2 if h.running() => h.feed_early(Command::Abor),
                _ => h.answer(b >> 2),
            }
        }
        h.drain();
        h.check();
    }
    h.finish();
});
