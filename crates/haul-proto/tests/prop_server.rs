//! Property tests of the server's login machine: arbitrary command sequences, verdicts and TLS
//! outcomes never panic it, every command gets exactly one answer, in order (a reply, or
//! `Forward` of that very command, or `Verify` whose verdict gets the reply), nothing comes
//! after `Close`, and nothing runs before the login but the login and server commands.

use std::collections::VecDeque;

use haul_proto::server::{Login, LoginConfig, ServerAction, Verdict, GREETING};
use haul_proto::{Command, Reply};
use proptest::prelude::*;

/// What the driver does next.
#[derive(Debug, Clone)]
enum Event {
    Command(Command),
    Verdict(u8),
    TlsEstablished,
    TlsFailed,
}

const LINES: [&str; 24] = [
    "USER alice",
    "USER anonymous",
    "PASS pw",
    "PASS ",
    "AUTH TLS",
    "AUTH SSL",
    "AUTH GSSAPI",
    "PBSZ 0",
    "PROT P",
    "PROT C",
    "PROT S",
    "QUIT",
    "FEAT",
    "SYST",
    "NOOP",
    "HELP",
    "OPTS UTF8 ON",
    "PWD",
    "TYPE I",
    "RETR f",
    "REIN",
    "ACCT x",
    "SITE HELP",
    "XYZZY",
];

fn command() -> impl Strategy<Value = Command> {
    prop_oneof![
        4 => prop::sample::select(&LINES[..]).prop_map(|l| Command::parse(l).unwrap()),
        1 => "[A-Za-z]{3,4}( [ -~]{0,12})?"
            .prop_filter_map("parses", |l| Command::parse(&l).ok()),
    ]
}

fn event() -> impl Strategy<Value = Event> {
    prop_oneof![
        8 => command().prop_map(Event::Command),
        2 => any::<u8>().prop_map(Event::Verdict),
        1 => Just(Event::TlsEstablished),
        1 => Just(Event::TlsFailed),
    ]
}

fn config() -> impl Strategy<Value = LoginConfig> {
    (any::<bool>(), any::<bool>(), 1u32..5).prop_map(|(require_tls, tls_available, max)| {
        LoginConfig {
            require_tls,
            tls_available,
            gsi_available: false,
            max_failures: max,
        }
    })
}

/// The driver's view, checking each action against the commands it fed.
#[derive(Default)]
struct Check {
    unanswered: VecDeque<Command>,
    verdict_due: bool,
    rejected: bool,
    closed: bool,
    logged_in: bool,
}

impl Check {
    fn take(&mut self, s: &mut Login) {
        while let Some(a) = s.poll_action() {
            assert!(!self.closed, "{a:?} after Close");
            match a {
                ServerAction::Reply(r) => self.reply(r),
                ServerAction::Forward(c) => {
                    assert_eq!(self.unanswered.pop_front(), Some(c.clone()));
                    let server = matches!(
                        c,
                        Command::Feat
                            | Command::Syst
                            | Command::Noop
                            | Command::Help(_)
                            | Command::Opts { .. }
                    );
                    assert!(self.logged_in || server, "{c:?} forwarded before the login");
                }
                ServerAction::Verify { user: _, pass } => {
                    let c = self.unanswered.pop_front();
                    assert_eq!(c, Some(Command::Pass(pass)));
                    assert!(!self.logged_in);
                    self.verdict_due = true;
                }
                ServerAction::StartTls => {
                    assert!(self.unanswered.is_empty(), "StartTls with commands queued");
                }
                ServerAction::Close => self.closed = true,
                other => panic!("the login machine never asks for {other:?}"),
            }
        }
        assert_eq!(s.is_closed(), self.closed);
        assert_eq!(s.is_logged_in(), self.logged_in);
    }

    fn reply(&mut self, r: Reply) {
        assert!((200..600).contains(&r.code), "{r}");
        if self.verdict_due {
            self.verdict_due = false;
            self.rejected = r.code == 530;
            self.logged_in = r.code == 230;
            return;
        }
        if self.rejected && r.code == 421 {
            self.rejected = false;
            return;
        }
        self.rejected = false;
        let c = self.unanswered.pop_front().expect("a reply to a command");
        match &c {
            Command::User(_) => assert!(matches!(r.code, 331 | 503 | 530), "{c}: {r}"),
            Command::Pass(_) => assert!(matches!(r.code, 503 | 530), "{c}: {r}"),
            Command::Quit => assert_eq!(r, Reply::new(221, "Goodbye.")),
            Command::Auth(_) => assert!(matches!(r.code, 234 | 502 | 503 | 504), "{c}: {r}"),
            Command::Pbsz(_) => assert_eq!(r.code, 200),
            Command::Prot(_) => assert!(matches!(r.code, 200 | 503 | 536), "{c}: {r}"),
            _ => {
                assert!(
                    !self.logged_in,
                    "{c} answered by the login machine after login"
                );
                assert_eq!(r, Reply::new(530, "Please login with USER and PASS."));
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn every_command_gets_one_answer(cfg in config(), events in prop::collection::vec(event(), 0..40)) {
        let mut s = Login::new(cfg);
        assert_eq!(
            s.poll_action(),
            Some(ServerAction::Reply(Reply::new(220, GREETING)))
        );
        let mut ck = Check::default();
        for e in events {
            match e {
                Event::Command(c) => {
                    if !ck.closed {
                        ck.unanswered.push_back(c.clone());
                    }
                    s.handle_command(c);
                }
                Event::Verdict(v) => s.handle_verified(match v % 3 {
                    0 => Verdict::Accepted,
                    1 => Verdict::Rejected,
                    _ => Verdict::Refused(Reply::new(421, "Too many sessions.")),
                }),
                Event::TlsEstablished => s.tls_established(),
                Event::TlsFailed => s.tls_failed(),
            }
            ck.take(&mut s);
        }
        // Settle what is pending: a verdict, then a handshake.
        s.handle_verified(Verdict::Accepted);
        ck.take(&mut s);
        s.tls_established();
        ck.take(&mut s);
        if !ck.closed && !s.is_verifying() {
            prop_assert!(ck.unanswered.is_empty(), "unanswered: {:?}", ck.unanswered);
        }
        prop_assert!(s.failures() <= cfg.max_failures);
    }
}
