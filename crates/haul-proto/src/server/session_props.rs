//! [`Session`] under random command sequences (a vocabulary of plausible commands, addresses
//! sometimes foreign or privileged) and random driver outcomes, with the invariants of the fuzz
//! target `server_machine` (written again here: the two share nothing). Every command gets
//! exactly one final reply, in order (`ABOR` during a transfer: the transfer's `426` or `226`,
//! then its own `226`, ahead of the commands held); a `150` / `125` is followed by its final
//! reply before anything else; a data channel is refused exactly when the settings before the
//! transfer call for it; no transfer starts while one runs; `held()` never exceeds the
//! unanswered commands; no data action before the `230`; nothing after `Close`.

use std::collections::VecDeque;
use std::mem::take;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use proptest::prelude::*;

use super::*;
use crate::command::{ProtLevel, Restart, TransferMode};
use crate::{Command, Reply};

const CLIENT: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum Stage {
    #[default]
    Start,
    Ready,
    Opened,
    Ended,
}

/// The running transfer as the driver sees it.
#[derive(Debug, Default)]
struct Xfer {
    stage: Stage,
    sending: bool,
    reused: bool,
    /// `Abort` came.
    abort: bool,
    /// Its `150` / `125` came.
    prelim: bool,
    /// The final reply due without `ABOR`.
    expect: u16,
}

/// What the driver knows from the replies so far.
#[derive(Debug, Default)]
struct Model {
    fed: VecDeque<Command>,
    logged_in: bool,
    closed: bool,
    close_ok: bool,
    close_due: bool,
    mode_e: bool,
    prot_p: bool,
    setup: bool,
    rest: Option<Restart>,
    verify: Option<(String, String)>,
    verdict: Option<u16>,
    rejected: bool,
    auth_ok: bool,
    tls: bool,
    listen: bool,
    listened: Option<bool>,
    active: bool,
    xfer: Option<Xfer>,
    abor_due: bool,
}

struct Driver {
    s: Session,
    cfg: DataConfig,
    own: bool,
    m: Model,
}

fn is_transfer(c: &Command) -> bool {
    let verbs = [
        "RETR", "ERET", "STOR", "APPE", "ESTO", "LIST", "NLST", "MLSD",
    ];
    verbs.contains(&c.verb())
}

fn is_login_family(c: &Command) -> bool {
    ["USER", "PASS", "AUTH", "PBSZ", "PROT", "QUIT"].contains(&c.verb())
}

/// The transfers a driver with its own transport (PLUT) runs itself.
fn is_plut(c: &Command) -> bool {
    ["RETR", "ERET", "STOR"].contains(&c.verb())
}

/// The user table: `alice` / `pw`, anonymous with anything, `full` refused.
fn verdict(user: &str, pass: &str) -> (Verdict, u16) {
    match user {
        "alice" if pass == "pw" => (Verdict::Accepted, 230),
        "anonymous" => (Verdict::Accepted, 230),
        "full" => (Verdict::Refused(Reply::new(421, "Too many sessions.")), 421),
        _ => (Verdict::Rejected, 530),
    }
}

impl Driver {
    fn running(&self) -> bool {
        self.m
            .xfer
            .as_ref()
            .is_some_and(|x| x.stage != Stage::Ended)
    }

    fn waiting(&self) -> bool {
        self.m.verify.is_some() || self.m.tls || self.m.listen || self.running()
    }

    /// Hands over a command; `ABOR` during a transfer is answered right after it.
    fn feed(&mut self, c: Command) {
        self.m.close_ok |= self.m.tls;
        if c == Command::Abor && self.running() {
            self.m.fed.insert(1, c.clone());
        } else {
            self.m.fed.push_back(c.clone());
        }
        self.s.handle_command(c);
    }

    fn drain(&mut self) {
        while let Some(a) = self.s.poll_action() {
            let m = &mut self.m;
            assert!(!m.closed, "{a:?} after Close");
            assert!(!m.close_due || a == ServerAction::Close, "{a:?}, not Close");
            m.rejected &= matches!(a, ServerAction::Reply(_));
            m.close_ok &= a == ServerAction::Close;
            m.auth_ok &= matches!(a, ServerAction::StartTls | ServerAction::Close);
            match a {
                ServerAction::Reply(r) => self.reply(r, false),
                ServerAction::Defer(r) => self.reply(r, true),
                ServerAction::StartTls => {
                    assert!(take(&mut m.auth_ok), "StartTls without 234");
                    m.tls = true;
                    m.close_due = !m.fed.is_empty();
                }
                ServerAction::Verify { user, pass } => {
                    assert!(!m.logged_in && m.verify.is_none());
                    assert_eq!(m.fed.front(), Some(&Command::Pass(pass.clone())));
                    m.verify = Some((user, pass));
                }
                ServerAction::Forward(c) => {
                    assert!(m.xfer.is_none() && !m.listen, "{c} forwarded while busy");
                    assert_eq!(m.fed.pop_front().as_ref(), Some(&c), "Forward out of order");
                    if !m.logged_in {
                        let server = ["FEAT", "SYST", "NOOP", "HELP", "OPTS"].contains(&c.verb());
                        assert!(server, "{c} forwarded before the login");
                    } else if is_data_command(&c) {
                        assert!(self.own && is_plut(&c), "{c} forwarded");
                        assert_eq!(self.s.transfers().take_rest(), m.rest.take());
                    }
                    assert!(!is_login_family(&c), "{c} forwarded");
                }
                ServerAction::Close => {
                    assert!(m.close_ok || m.close_due, "an unexpected Close");
                    m.closed = true;
                }
                ServerAction::Abort => {
                    let x = m.xfer.as_mut().expect("Abort outside a transfer");
                    assert!(x.stage != Stage::Ended && !x.abort);
                    assert_eq!(m.fed.get(1), Some(&Command::Abor));
                    x.abort = true;
                }
                other => self.data_action(other),
            }
        }
    }

    /// `DropCached`, `DropData`, `Active`, `Listen`, `Transfer`.
    fn data_action(&mut self, a: ServerAction) {
        let m = &mut self.m;
        assert!(m.logged_in, "{a:?} before the login");
        assert!(m.xfer.is_none() && !m.listen, "{a:?} while busy");
        let front = m.fed.front().expect("a data action for no command");
        let mode_e = matches!(front, Command::Mode(TransferMode::Extended));
        match a {
            ServerAction::DropCached => {
                assert!(matches!(front, Command::Mode(_)) && mode_e != m.mode_e)
            }
            ServerAction::DropData => m.setup = false,
            ServerAction::Active(addrs) => {
                let want = match front {
                    Command::Port(a) | Command::Eprt(a) => vec![*a],
                    Command::Spor(v) => v.clone(),
                    other => panic!("Active for {other}"),
                };
                assert_eq!(addrs, want);
                assert!(addrs.len() <= self.cfg.max_parallelism);
                let v4 = |a: &SocketAddr| match a.ip() {
                    IpAddr::V6(v6) => v6.to_ipv4_mapped().map(IpAddr::V4),
                    v4 => Some(v4),
                };
                assert!(addrs
                    .iter()
                    .all(|a| a.port() >= 1024 && v4(a) == Some(CLIENT)));
                (m.setup, m.active) = (true, true);
            }
            ServerAction::Listen(_) => {
                assert!(matches!(
                    front,
                    Command::Pasv | Command::Epsv | Command::Spas
                ));
                (m.listen, m.setup) = (true, false);
            }
            ServerAction::Transfer(t) => {
                assert!(
                    is_transfer(front) && !(self.own && is_plut(front)),
                    "{front}"
                );
                assert_eq!(t.restart, m.rest.take());
                assert_eq!(t.mode == TransferMode::Extended, m.mode_e);
                let sending = !matches!(t.op, TransferOp::Receive { .. });
                m.xfer = Some(Xfer {
                    sending,
                    ..Xfer::default()
                });
            }
            other => panic!("unknown action {other:?}"),
        }
    }

    /// A reply (`deferred`: a `Defer`): a 1yz of the transfer, or the final reply of the
    /// oldest command.
    fn reply(&mut self, r: Reply, deferred: bool) {
        let m = &mut self.m;
        if r.code < 200 {
            let x = m.xfer.as_mut().expect("a 1yz outside a transfer");
            assert!(
                x.stage == Stage::Opened && !x.prelim && !x.abort,
                "{r}: {x:?}"
            );
            assert_eq!(r.code, if x.reused { 125 } else { 150 });
            x.prelim = true;
            return;
        }
        assert!(r.code < 600, "{r}");
        if take(&mut m.rejected) && r.code == 421 {
            m.close_due = true;
            return;
        }
        let c = m
            .fed
            .pop_front()
            .unwrap_or_else(|| panic!("{r}: a reply to nothing"));
        if take(&mut m.abor_due) {
            return assert!(c == Command::Abor && r.code == 226, "{c}: {r}");
        }
        if let Some(code) = m.verdict.take() {
            assert!(matches!(c, Command::Pass(_)) && r.code == code, "{c}: {r}");
            (m.logged_in, m.rejected, m.close_ok) = (code == 230, code == 530, code == 421);
            return;
        }
        if let Some(x) = m.xfer.take() {
            assert!(is_transfer(&c), "{c} got {r} during a transfer");
            assert_eq!(x.stage, Stage::Ended, "{c} answered while it runs: {r}");
            if x.abort {
                let ok = r.code == 426 || (r.code == 226 && x.expect == 226);
                assert!(ok && !deferred, "{c} aborted: {r}");
                m.abor_due = true;
            } else {
                assert_eq!((r.code, deferred), (x.expect, x.expect == 226), "{c}: {r}");
            }
            return;
        }
        assert!(!deferred, "{c}: deferred {r}");
        let active = take(&mut m.active);
        assert!(
            m.logged_in || is_login_family(&c) || r.code == 530,
            "{c}: {r}"
        );
        match c {
            Command::Pasv | Command::Epsv | Command::Spas => match m.listened.take() {
                Some(true) => {
                    assert!(r.code == 227 || r.code == 229, "{c}: {r}");
                    m.setup = true;
                }
                Some(false) => assert_eq!(r.code, 425),
                None => assert!(!m.logged_in && r.code == 530),
            },
            Command::Port(_) | Command::Eprt(_) | Command::Spor(_) if m.logged_in => {
                assert_eq!(r.code == 200, active, "{c}: {r}")
            }
            Command::Mode(md) if r.code == 200 => m.mode_e = md == TransferMode::Extended,
            Command::Rest(x) if r.code == 350 => m.rest = Some(x),
            Command::Prot(p) if r.code == 200 => m.prot_p = p == ProtLevel::Private,
            Command::Quit => m.close_due = r.code == 221,
            Command::Auth(_) if r.code == 234 => (m.auth_ok, m.close_ok) = (true, true),
            Command::Abor => assert!(r.code == 226 || !m.logged_in, "{r}"),
            c => assert!(!is_transfer(&c) || !m.logged_in, "{c}: {r}"),
        }
    }

    /// Answers what the machine waits for, as decision `sub` says.
    fn answer(&mut self, sub: u8) {
        let m = &mut self.m;
        if let Some((user, pass)) = m.verify.take() {
            let (v, code) = verdict(&user, &pass);
            m.verdict = Some(code);
            self.s.login().handle_verified(v);
        } else if take(&mut m.tls) {
            if sub & 1 != 0 {
                m.close_due = true;
                self.s.login().tls_failed();
            } else {
                self.s.login().tls_established();
            }
        } else if take(&mut m.listen) {
            m.listened = Some(sub & 1 == 0);
            let r = match sub & 1 {
                0 => Ok(SocketAddr::new(CLIENT, 1024 + u16::from(sub))),
                _ => Err("no free port".to_string()),
            };
            self.s.transfers().listening(r);
        } else {
            self.step(sub);
        }
    }

    /// The next step of the running transfer.
    fn step(&mut self, sub: u8) {
        let Some(x) = &self.m.xfer else { return };
        let reused = sub & 8 != 0 && self.m.mode_e;
        let outcome = match (x.stage, sub & 7) {
            (Stage::Start, 5) | (Stage::Ready, 6) | (Stage::Opened, 3) => {
                Outcome::Refused(Reply::new(550, "No such file."))
            }
            (Stage::Start | Stage::Ready, 7) | (Stage::Opened, 2) => {
                Outcome::NoConnection("refused".into())
            }
            (Stage::Opened, 1) => Outcome::Failed("reset".into()),
            (Stage::Opened, _) => Outcome::Complete,
            (Stage::Start, 6) | (Stage::Ready, _) => return self.channel(true, reused),
            (Stage::Start, _) => return self.channel(false, reused),
            (Stage::Ended, _) => return,
        };
        let x = self.m.xfer.as_mut().expect("a transfer");
        x.stage = Stage::Ended;
        x.expect = match &outcome {
            Outcome::Refused(r) => r.code,
            Outcome::NoConnection(_) => 425,
            Outcome::Failed(_) => 426,
            Outcome::Complete => 226,
        };
        self.s.transfers().transfer_done(outcome);
    }

    /// `data_channel_ready`, or `transfer_opening` (`open`), with the answer the settings
    /// before the transfer call for.
    fn channel(&mut self, open: bool, reused: bool) {
        let (m, cfg) = (&mut self.m, self.cfg);
        let x = m.xfer.as_mut().expect("a transfer");
        if x.stage == Stage::Start {
            x.reused = reused;
        }
        let protected = !cfg.require_tls || m.prot_p;
        let want = x.stage == Stage::Ready || protected && (m.setup || x.reused && m.mode_e);
        let got = if open {
            self.s.transfers().transfer_opening(x.reused, x.sending)
        } else {
            self.s.transfers().data_channel_ready(x.reused)
        };
        assert_eq!(got, want, "data channel (PROT P: {})", m.prot_p);
        x.stage = match (want, open) {
            (true, true) => Stage::Opened,
            (true, false) => Stage::Ready,
            (false, _) => Stage::Ended,
        };
        x.expect = if protected { 425 } else { 521 };
    }

    /// What must hold between steps.
    fn check(&self) {
        let m = &self.m;
        assert!(self.s.held() <= m.fed.len(), "{} held", self.s.held());
        if m.closed {
            return;
        }
        assert!(!m.close_due && m.verdict.is_none() && m.listened.is_none() && !m.abor_due);
        assert!(!m.xfer.as_ref().is_some_and(|x| x.stage == Stage::Ended));
        let t = self.s.transfer_state();
        assert_eq!(t.in_transfer(), self.running());
        assert_eq!(t.is_busy(), self.running() || m.listen);
        assert_eq!(self.s.login_state().is_logged_in(), m.logged_in);
    }
}

/// One session: `cmds` handed over one by one, `decisions` taken while the machine waits (0
/// once they run out): answer, hand over the next command early, or inject `ABOR`.
fn run(login: LoginConfig, cfg: DataConfig, own: bool, cmds: &[Command], decisions: &[u8]) {
    let mut s = Session::new(login, cfg, CLIENT);
    s.set_own_transfers(own);
    let greeting = ServerAction::Reply(Reply::new(220, GREETING));
    assert_eq!(s.poll_action(), Some(greeting));
    let mut d = Driver {
        s,
        cfg,
        own,
        m: Model::default(),
    };
    let mut cmds = cmds.iter().cloned();
    let mut decisions = decisions.iter().copied();
    let mut next = cmds.next();
    while !d.m.closed {
        if !d.waiting() {
            let Some(c) = next.take() else { break };
            d.feed(c);
            next = cmds.next();
        } else {
            let b = decisions.next().unwrap_or(0);
            match (b & 3, next.take()) {
                (1, Some(c)) => {
                    d.feed(c);
                    next = cmds.next();
                }
                (2, c) if d.running() => {
                    next = c;
                    d.feed(Command::Abor);
                }
                (_, c) => {
                    next = c;
                    d.answer(b >> 2);
                }
            }
        }
        d.drain();
        d.check();
    }
    if !d.m.closed {
        assert!(
            !d.waiting() && d.m.fed.is_empty(),
            "unanswered: {:?}",
            d.m.fed
        );
        return;
    }
    d.s.handle_command(Command::Noop);
    d.s.login().handle_verified(Verdict::Accepted);
    d.s.transfers().transfer_done(Outcome::Complete);
    assert_eq!(d.s.poll_action(), None, "an action after Close");
}

/// A plausible command line.
fn line() -> impl Strategy<Value = String> {
    let host = prop_oneof![3 => Just([127, 0, 0, 1]), 1 => Just([192, 0, 2, 9])];
    let port = || prop_oneof![4 => 1024u16.., 1 => 1u16..1024];
    let hp = (host, port()).prop_map(|(h, p)| {
        let [a, b, c, d] = h;
        format!("{a},{b},{c},{d},{},{}", p >> 8, p & 255)
    });
    let eprt = (any::<bool>(), port()).prop_map(|(v6, p)| match v6 {
        true => format!("EPRT |2|::ffff:127.0.0.1|{p}|"),
        false => format!("EPRT |1|127.0.0.1|{p}|"),
    });
    let path = prop::sample::select(vec!["f", "d/g", "a b"]);
    let xfer = prop::sample::select(vec!["RETR", "STOR", "APPE", "LIST", "MLSD"]);
    let words = "USER alice|USER bob|USER anonymous|USER full|PASS pw|PASS x|AUTH TLS|PROT P|\
        PROT C|PBSZ 0|MODE E|MODE S|TYPE I|PASV|EPSV|SPAS|ABOR|NOOP|FEAT|SIZE f|QUIT|REST 100|\
        REST 0-9,20-29";
    let word = prop::sample::select(words.split('|').collect::<Vec<_>>());
    prop_oneof![
        6 => word.prop_map(String::from),
        4 => (xfer, path.clone()).prop_map(|(v, p)| format!("{v} {p}")),
        1 => (0u64..100, 1u64..100, path.clone()).prop_map(|(o, l, p)| format!("ERET P {o} {l} {p}")),
        1 => (0u64..100, path).prop_map(|(o, p)| format!("ESTO A {o} {p}")),
        2 => hp.clone().prop_map(|a| format!("PORT {a}")),
        1 => eprt,
        1 => prop::collection::vec(hp, 1..4).prop_map(|v| format!("SPOR {}", v.join(" "))),
        1 => (0u64..1 << 31).prop_map(|n| format!("SBUF {n}")),
    ]
}

/// A login first (none, plain, or over TLS with `PROT P`), then `n` commands of the vocabulary.
fn session() -> impl Strategy<Value = Vec<Command>> {
    let prefix = prop::sample::select(vec![
        &[][..],
        &["USER alice", "PASS pw"][..],
        &["AUTH TLS", "USER alice", "PASS pw", "PBSZ 0", "PROT P"][..],
    ]);
    (prefix, prop::collection::vec(line(), 0..40)).prop_map(|(p, rest)| {
        let lines = p.iter().map(|l| l.to_string()).chain(rest);
        lines
            .map(|l| Command::parse(&l).expect("a valid line"))
            .collect()
    })
}

proptest! {
    #[test]
    fn every_command_gets_one_final_reply_in_order(
        (require_tls, tls_available, own) in (any::<bool>(), any::<bool>(), any::<bool>()),
        (max_parallelism, max_failures) in (1usize..=8, 1u32..=4),
        cmds in session(),
        decisions in prop::collection::vec(any::<u8>(), 0..64),
    ) {
        let login = LoginConfig { require_tls, tls_available, gsi_available: false, max_failures };
        let data = DataConfig { max_parallelism, require_tls };
        run(login, data, own, &cmds, &decisions);
    }
}

/// A logged-in session (over TLS with `PROT P` when `tls`).
fn ready_session(tls: bool) -> Session {
    let login = LoginConfig {
        require_tls: tls,
        tls_available: tls,
        gsi_available: false,
        ..LoginConfig::default()
    };
    let data = DataConfig {
        max_parallelism: 4,
        require_tls: tls,
    };
    let mut s = Session::new(login, data, CLIENT);
    let lines: &[&str] = if tls {
        &["AUTH TLS", "USER alice", "PASS pw", "PROT P"]
    } else {
        &["USER alice", "PASS pw"]
    };
    for l in lines {
        s.handle_command(Command::parse(l).expect("a valid line"));
        while let Some(a) = s.poll_action() {
            match a {
                ServerAction::StartTls => s.login().tls_established(),
                ServerAction::Verify { .. } => s.login().handle_verified(Verdict::Accepted),
                _ => {}
            }
        }
    }
    s
}

#[test]
fn a_second_abor_is_answered_after_the_first() {
    let mut s = ready_session(false);
    s.handle_command(Command::Retr("f".into()));
    assert!(matches!(s.poll_action(), Some(ServerAction::Transfer(_))));
    s.handle_command(Command::Abor);
    assert_eq!(s.poll_action(), Some(ServerAction::Abort));
    s.handle_command(Command::Abor);
    // The transfer's reply comes first, then one 226 for each ABOR.
    assert_eq!(s.poll_action(), None, "a reply before the transfer's");
    s.transfers().transfer_done(Outcome::Failed("cut".into()));
    let codes: Vec<u16> = std::iter::from_fn(|| s.poll_action())
        .map(|a| match a {
            ServerAction::Reply(r) => r.code,
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(codes, [426, 226, 226]);
}

#[test]
fn prot_pipelined_after_a_transfer_does_not_apply_to_it() {
    let mut s = ready_session(true);
    s.handle_command(Command::Pasv);
    assert!(matches!(s.poll_action(), Some(ServerAction::Listen(_))));
    s.handle_command(Command::Retr("f".into()));
    s.handle_command(Command::Prot(ProtLevel::Clear));
    s.transfers().listening(Ok(SocketAddr::new(CLIENT, 5001)));
    assert!(matches!(s.poll_action(), Some(ServerAction::Reply(r)) if r.code == 227));
    assert!(matches!(s.poll_action(), Some(ServerAction::Transfer(_))));
    // RETR came while PROT P was in force; the later PROT C applies only after it.
    assert!(s.transfers().data_channel_ready(false));
}
