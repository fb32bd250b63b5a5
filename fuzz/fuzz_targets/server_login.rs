//! Fuzzes the server's login machine with a client's bytes: `LineBuffer` splits them into
//! lines, `Command::parse` reads them, and a `server::Login` takes each command, driven as the
//! server drives it (the first byte sets `require_tls`, `tls_available`, the failure limit and
//! whether TLS handshakes fail). It may not panic; every command gets exactly one answer, in
//! order (a reply, `Forward` of that command, or `Verify` whose verdict gets the reply);
//! nothing follows `Close`; before the login only the login and server commands run.

#![no_main]

use std::collections::VecDeque;

use haul_proto::server::{Login, LoginConfig, ServerAction, GREETING};
use haul_proto::{Command, Reply};
use libfuzzer_sys::fuzz_target;

#[path = "common/server.rs"]
mod server_common;
use server_common::{commands, verdict};

/// Runs the driver loop; returns whether the session closed.
fn drive(
    s: &mut Login,
    fed: &mut VecDeque<Command>,
    tls_fails: bool,
    logged_in: &mut bool,
) -> bool {
    let mut verdict_due = false;
    let mut rejected = false;
    while let Some(a) = s.poll_action() {
        match a {
            ServerAction::Reply(r) => {
                assert!((200..600).contains(&r.code), "{r}");
                if verdict_due {
                    verdict_due = false;
                    rejected = r.code == 530;
                    *logged_in = r.code == 230;
                    continue;
                }
                if std::mem::take(&mut rejected) && r.code == 421 {
                    continue;
                }
                let c = fed.pop_front().expect("a reply to a command");
                let login = matches!(
                    c,
                    Command::User(_)
                        | Command::Pass(_)
                        | Command::Auth(_)
                        | Command::Pbsz(_)
                        | Command::Prot(_)
                        | Command::Quit
                );
                assert!(login || (!*logged_in && r.code == 530), "{c}: {r}");
            }
            ServerAction::Forward(c) => {
                assert_eq!(fed.pop_front().as_ref(), Some(&c));
                let server = matches!(
                    c,
                    Command::Feat
                        | Command::Syst
                        | Command::Noop
                        | Command::Help(_)
                        | Command::Opts { .. }
                );
                assert!(*logged_in || server, "{c} forwarded before the login");
            }
            ServerAction::Verify { user, pass } => {
                assert_eq!(fed.pop_front(), Some(Command::Pass(pass.clone())));
                verdict_due = true;
                s.handle_verified(verdict(&user, &pass).0);
            }
            ServerAction::StartTls => {
                assert!(fed.is_empty());
                if tls_fails {
                    s.tls_failed();
                } else {
                    s.tls_established();
                    assert!(s.is_tls());
                }
            }
            ServerAction::Close => {
                assert!(s.poll_action().is_none(), "an action after Close");
                assert!(s.is_closed());
                return true;
            }
            other => panic!("the login machine never asks for {other:?}"),
        }
    }
    assert!(!verdict_due && !s.is_closed());
    assert_eq!(s.is_logged_in(), *logged_in);
    false
}

fuzz_target!(|data: &[u8]| {
    let Some((&ctl, rest)) = data.split_first() else {
        return;
    };
    let cfg = LoginConfig {
        require_tls: ctl & 1 != 0,
        tls_available: ctl & 2 != 0,
        max_failures: u32::from(ctl >> 4 & 3) + 1,
    };
    let tls_fails = ctl & 4 != 0;
    let mut s = Login::new(cfg);
    assert_eq!(
        s.poll_action(),
        Some(ServerAction::Reply(Reply::new(220, GREETING)))
    );
    let mut fed = VecDeque::new();
    let mut logged_in = false;
    for c in commands(rest) {
        fed.push_back(c.clone());
        s.handle_command(c);
        if drive(&mut s, &mut fed, tls_fails, &mut logged_in) {
            s.handle_command(Command::Noop);
            assert!(s.poll_action().is_none(), "an action after Close");
            return;
        }
        assert!(fed.is_empty(), "unanswered: {fed:?}");
        assert!(s.failures() < cfg.max_failures);
    }
});
