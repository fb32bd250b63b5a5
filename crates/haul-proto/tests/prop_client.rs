//! Property tests of the client's session machines: hostile replies never panic `Login` or
//! `Pipeline`, a login never writes out of order or after failing, a well-behaved server always
//! gets a session, and a pipeline gives every command exactly one final reply, in order.

mod common;

use haul_proto::{Action, Command, Event, Features, Login, Pipeline, Reply, ReplyParser};
use proptest::prelude::*;

/// The commands a login may write, in the only order it may write them.
const ORDER: [&str; 7] = [
    "AUTH TLS", "PBSZ 0", "PROT P", "USER u", "PASS p", "FEAT", "TYPE I",
];

/// How a haul server greets: its clients send the whole login at once.
const HAUL_HI: &str = "haul GridFTP server 0.1.0 ready.";

/// Drives `login` as a client would: writes what is due, performs the handshake, then feeds one
/// reply. Checks the invariants after each step; returns the commands written.
fn drive(login: &mut Login, replies: impl IntoIterator<Item = Reply>) -> Vec<String> {
    let mut sent: Vec<String> = Vec::new();
    let mut outstanding = 0usize;
    let mut failed = false;
    // Before any greeting was read, nothing goes out; after a haul server's, the login may go
    // out in one burst.
    let mut greeted: Option<bool> = None;
    for r in replies {
        loop {
            if let Some(Action::StartTls) = login.poll_action() {
                assert!(!failed, "action after failing");
                assert_eq!(sent.last().map(String::as_str), Some("AUTH TLS"));
                login.tls_established();
            } else if let Some(c) = login.poll_transmit() {
                // One command at a time, but for `TYPE I` right behind `FEAT`.
                let paired = outstanding == 1
                    && sent.last().map(String::as_str) == Some("FEAT")
                    && c.to_string() == "TYPE I";
                let burst = greeted == Some(true) && outstanding < 6;
                assert!(
                    !failed && greeted.is_some() && (outstanding == 0 || paired || burst),
                    "{c} written while another was outstanding"
                );
                sent.push(c.to_string());
                outstanding += 1;
            } else {
                break;
            }
        }
        let was_done = login.is_done();
        let last = r.code >= 200 && greeted.is_some();
        if r.code == 220 && greeted.is_none() {
            greeted = Some(r.text().starts_with(HAUL_HI));
        }
        match login.handle_reply(r) {
            Ok(()) => assert!(!failed && !was_done, "a reply accepted after the end"),
            Err(e) => {
                failed = true;
                assert!(login.is_failed() && !login.is_done());
                assert!(e.reply().code >= 100 && !e.to_string().is_empty());
            }
        }
        if last {
            outstanding = outstanding.saturating_sub(1);
        }
    }
    let mut at = 0;
    for c in &sent {
        let i = ORDER[at..]
            .iter()
            .position(|o| o == c)
            .expect("written in order");
        at += i + 1;
    }
    if login.is_done() {
        assert_eq!(sent.last().map(String::as_str), Some("TYPE I"));
    }
    sent
}

/// Every reply in `data`, continuing past parse errors.
fn replies(chunks: &[&[u8]]) -> Vec<Reply> {
    let mut p = ReplyParser::new();
    let mut out = Vec::new();
    for c in chunks {
        p.extend(c);
        for _ in 0..c.len() + 1 {
            match p.next_reply() {
                Ok(Some(r)) => out.push(r),
                Ok(None) => break,
                Err(_) => {}
            }
        }
    }
    out
}

fn reply() -> impl Strategy<Value = Reply> {
    let code = prop_oneof![
        Just(120u16),
        Just(220),
        Just(234),
        Just(200),
        Just(331),
        Just(230),
        Just(530),
        Just(211),
        Just(111),
        Just(112),
        Just(150),
        100u16..600
    ];
    (code, prop::collection::vec("[ -~]{0,20}", 1..4)).prop_map(|(c, l)| Reply::multi(c, l))
}

proptest! {
    #[test]
    fn arbitrary_bytes_never_panic_the_login(data in prop::collection::vec(any::<u8>(), 0..512), cuts in common::cuts(16), tls: bool) {
        let mut l = Login::new("u", "p", tls);
        drive(&mut l, replies(&common::chunks(&data, &cuts)));
    }

    #[test]
    fn arbitrary_replies_after_a_haul_greeting_keep_the_login_in_order(rs in prop::collection::vec(reply(), 0..24), tls: bool) {
        let mut l = Login::new("u", "p", tls);
        drive(&mut l, std::iter::once(Reply::new(220, HAUL_HI)).chain(rs));
    }

    #[test]
    fn arbitrary_replies_never_panic_the_machines(rs in prop::collection::vec(reply(), 0..24), tls: bool, pushes in 0usize..8) {
        let mut l = Login::new("u", "p", tls);
        drive(&mut l, rs.clone());
        let mut p = Pipeline::new();
        for i in 0..pushes {
            p.push(i);
        }
        let mut next = 0;
        for r in rs {
            let before = p.front().copied();
            match p.handle_reply(r) {
                Ok(Event::Final { tag, .. }) => {
                    prop_assert_eq!(tag, next);
                    next += 1;
                }
                Ok(ev) => prop_assert_eq!(Some(*ev.tag()), before),
                Err(_) => prop_assert!(before.is_none()),
            }
        }
        prop_assert_eq!(p.len(), pushes - next);
    }

    /// N commands, each answered by any mix of markers and preliminaries then one final, give
    /// exactly N `Final` events in push order; the others name the command then oldest.
    #[test]
    fn n_finals_for_n_pushes(prelims in prop::collection::vec(prop::collection::vec(prop_oneof![Just(111u16), Just(112), 100u16..200], 0..4), 0..12), finals in prop::collection::vec(200u16..600, 12), early in 0usize..12) {
        let n = prelims.len();
        let mut p = Pipeline::new();
        // Some commands are pushed before any reply arrives, the rest as the driver goes.
        let early = early.min(n);
        for i in 0..early {
            p.push(i as u64);
        }
        let mut pushed = early;
        let mut got = Vec::new();
        for (i, pre) in prelims.iter().enumerate() {
            while pushed <= i {
                p.push(pushed as u64);
                pushed += 1;
            }
            for &c in pre {
                let ev = p.handle_reply(Reply::new(c, "m")).unwrap();
                prop_assert_eq!(*ev.tag(), i as u64);
                let is_final = matches!(ev, Event::Final { .. });
                prop_assert!(!is_final);
            }
            match p.handle_reply(Reply::new(finals[i], "done")).unwrap() {
                Event::Final { tag, reply } => {
                    prop_assert_eq!(reply.code, finals[i]);
                    got.push(tag);
                }
                ev => prop_assert!(false, "{:?}", ev),
            }
        }
        prop_assert_eq!(got, (0..n as u64).collect::<Vec<_>>());
        prop_assert!(p.is_empty());
        prop_assert!(p.handle_reply(Reply::new(226, "late")).is_err());
    }

    /// A server that follows the protocol, with any greeting delay, markers, login path and
    /// FEAT lines, in any chunking, always gets a session with the features it offered.
    #[test]
    fn a_good_server_always_gets_a_session(tls: bool, haul: bool, waits in 0usize..3, pass: bool, markers in 0usize..3, feat in prop::collection::vec(" ?(CKSM|HAUL|PLUT|DTOK|AUTH) [A-Za-z0-9:;, ]{0,20}", 0..5), cuts in common::cuts(8)) {
        let hi = if haul { HAUL_HI } else { "ready" };
        let mut wire = "120 soon\r\n".repeat(waits) + &format!("220 {hi}\r\n");
        if tls {
            wire += "234 go\r\n200 PBSZ=0\r\n200 P\r\n";
        }
        wire += &"112-Perf\r\n Stripe: 0\r\n112 End\r\n".repeat(markers);
        wire += if pass { "331 pass?\r\n230 in\r\n" } else { "230 in\r\n" };
        // The PASS a haul client sent with its USER gets its own reply.
        if haul && !pass {
            wire += "503 Already logged in.\r\n";
        }
        let feat_reply = Reply::multi(211, [vec!["Features:".to_string()], feat, vec!["End".into()]].concat());
        wire += &feat_reply.encode();
        wire += "200 binary\r\n";
        let mut l = Login::new("u", "p", tls);
        let sent = drive(&mut l, replies(&common::chunks(wire.as_bytes(), &cuts)));
        prop_assert!(l.is_done());
        let mut want = Vec::new();
        if tls {
            want.extend(["AUTH TLS", "PBSZ 0", "PROT P"]);
        }
        want.push("USER u");
        if pass || haul {
            want.push("PASS p");
        }
        want.extend(["FEAT", "TYPE I"]);
        prop_assert_eq!(sent, want);
        let features: &Features = l.features();
        prop_assert_eq!(features, &Features::parse(&feat_reply));
        prop_assert_eq!(l.poll_transmit(), None::<Command>);
    }
}
