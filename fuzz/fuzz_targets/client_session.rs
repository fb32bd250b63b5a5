//! Fuzzes the client's session machines with a server's bytes: `ReplyParser` splits them into
//! replies, which go to a `Login` (driven like `Control::connect` drives it: plain, TLS, or
//! GSI with a stand-in context whose every token is `t`) and to
//! a `Pipeline` of pipelined commands. Neither may panic. The login writes its commands one at a
//! time (but `TYPE I`, which goes with `FEAT`, and the whole login in one burst after a haul
//! server's greeting, never under GSI), in protocol order, nothing after failing or finishing, and ends only after `TYPE I`; the
//! pipeline gives each command at most one final reply, in push order, names the oldest command
//! for markers and preliminaries, and calls a reply unsolicited only when nothing is outstanding.

#![no_main]

use haul_proto::{Action, Event, Login, Pipeline, Reply};
use libfuzzer_sys::fuzz_target;

/// The commands a login may write, in the only order it may write them.
const ORDER: [&str; 7] = [
    "AUTH TLS", "PBSZ 0", "PROT P", "USER u", "PASS p", "FEAT", "TYPE I",
];

/// The same for a GSI login (any number of `ADAT t` in a row count as one).
const GSI_ORDER: [&str; 6] = [
    "AUTH GSSAPI",
    "ADAT t",
    "USER :globus-mapping:",
    "PASS dummy",
    "FEAT",
    "TYPE I",
];

#[path = "common/replies.rs"]
mod common;
use common::replies;

/// Writes what the login has due, as `Control::connect` does; returns the commands written.
fn due(login: &mut Login, sent: &mut Vec<String>) -> usize {
    let mut n = 0;
    loop {
        if let Some(a) = login.poll_action() {
            let last = sent.last().map(String::as_str);
            match a {
                Action::StartTls => {
                    assert_eq!(last, Some("AUTH TLS"));
                    login.tls_established();
                }
                Action::StartGss => {
                    assert_eq!(last, Some("AUTH GSSAPI"));
                    login.adat("t".into());
                }
                Action::Adat(_) => {
                    assert_eq!(last, Some("ADAT t"));
                    login.adat("t".into());
                }
                Action::GssDone(_) => {
                    assert_eq!(last, Some("ADAT t"));
                    login.gss_established();
                }
            }
        } else if let Some(c) = login.poll_transmit() {
            sent.push(c.to_string());
            n += 1;
        } else {
            return n;
        }
    }
}

fn check_login(mode: u8, rs: &[Reply]) {
    let (tls, gsi) = (mode == 1, mode == 2);
    let mut login = if gsi {
        Login::gsi(None, None)
    } else {
        Login::new("u", "p", tls)
    };
    let mut sent = Vec::new();
    let mut ended = false;
    let mut haul = None;
    for r in rs {
        let n = due(&mut login, &mut sent);
        // One command at a time, but for `TYPE I`, which goes out with `FEAT`, and a haul
        // server's burst.
        let feat_type = n == 2 && sent.ends_with(&["FEAT".to_string(), "TYPE I".to_string()]);
        let burst =
            haul == Some(true) && !gsi && n <= 6 && sent.last().is_some_and(|c| c == "TYPE I");
        assert!(
            n <= 1 || feat_type || burst,
            "{n} commands outstanding at once: {sent:?}"
        );
        if r.code == 220 && haul.is_none() {
            haul = Some(r.text().starts_with("haul GridFTP server "));
        }
        assert!(!ended || n == 0, "written after the end: {sent:?}");
        let was_done = login.is_done();
        match login.handle_reply(r.clone()) {
            Ok(()) => assert!(!ended && !was_done, "{r} accepted after the end"),
            Err(e) => {
                assert!(login.is_failed() && !login.is_done());
                assert_eq!(e.reply(), r);
            }
        }
        ended = login.is_failed() || login.is_done();
    }
    due(&mut login, &mut sent);
    let order: &[&str] = if gsi { &GSI_ORDER } else { &ORDER };
    let mut at = 0;
    let mut squeezed = sent.clone();
    squeezed.dedup_by(|a, b| a == "ADAT t" && b == "ADAT t");
    for c in &squeezed {
        let i = order[at..].iter().position(|o| o == c);
        at += i.unwrap_or_else(|| panic!("{c} out of order in {sent:?}")) + 1;
    }
    if !tls {
        assert!(!sent.iter().any(|c| c == "AUTH TLS"));
    }
    if !gsi {
        assert!(!sent.iter().any(|c| c.starts_with("AUTH GSSAPI")));
    }
    if login.is_done() {
        assert_eq!(sent.last().map(String::as_str), Some("TYPE I"));
    }
}

fn check_pipeline(pushes: u8, rs: &[Reply]) {
    let mut p = Pipeline::new();
    let mut pushed = 0u64;
    let mut next = 0u64;
    for _ in 0..pushes % 16 {
        p.push(pushed);
        pushed += 1;
    }
    for (i, r) in rs.iter().enumerate() {
        // Some drivers push as they go: one more command every fourth reply.
        if pushes & 0x80 != 0 && i % 4 == 3 {
            p.push(pushed);
            pushed += 1;
        }
        let front = p.front().copied();
        match p.handle_reply(r.clone()) {
            Ok(Event::Final { tag, reply }) => {
                assert_eq!(tag, next, "final out of order");
                assert!(!reply.is_preliminary());
                next += 1;
            }
            Ok(ev) => {
                assert_eq!(Some(*ev.tag()), front);
                assert!(ev.reply().is_preliminary());
            }
            Err(_) => assert!(front.is_none(), "unsolicited with {front:?} outstanding"),
        }
        assert_eq!(p.len() as u64, pushed - next);
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&ctl, rest)) = data.split_first() else {
        return;
    };
    let rs = replies(rest);
    check_login(ctl % 3, &rs);
    check_pipeline(ctl >> 1 | (ctl & 0x80), &rs);
});
