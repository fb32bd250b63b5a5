//! Unit tests of the client machines: each login path and the pipeline's matching.

use super::*;
use crate::{Command, Reply, ReplyParser};

/// Plays a server script against a login: each reply is fed after the commands and actions the
/// login had due. Returns every command written and the result of the last reply.
fn play(login: &mut Login, script: &[&str]) -> (Vec<String>, Result<(), LoginError>) {
    let mut sent = Vec::new();
    let mut parser = ReplyParser::new();
    for s in script {
        drain(login, &mut sent);
        parser.extend(format!("{s}\r\n").as_bytes());
        let r = parser.next_reply().unwrap().unwrap();
        if let Err(e) = login.handle_reply(r) {
            return (sent, Err(e));
        }
    }
    drain(login, &mut sent);
    (sent, Ok(()))
}

fn drain(login: &mut Login, sent: &mut Vec<String>) {
    loop {
        if let Some(a) = login.poll_action() {
            // A stand-in GSS context: its tokens name the step that made them.
            match a {
                Action::StartTls => {
                    sent.push("<tls>".into());
                    login.tls_established();
                }
                Action::StartGss => {
                    sent.push("<gss>".into());
                    login.adat("t0".into());
                }
                Action::Adat(t) => login.adat(format!("after-{t}")),
                Action::GssDone(t) => {
                    sent.push(format!("<protect {t:?}>"));
                    login.gss_established();
                }
            }
        } else if let Some(c) = login.poll_transmit() {
            sent.push(c.to_string());
        } else {
            return;
        }
    }
}

const FEAT: &str = "211-Extensions\r\n HAUL 1\r\n CKSM MD5;ADLER32\r\n DTOK\r\n211 End";

#[test]
fn plain_login() {
    let mut l = Login::new("alice", "secret", false);
    let (sent, res) = play(
        &mut l,
        &["220 hi", "331 pass?", "230 in", FEAT, "200 binary"],
    );
    res.unwrap();
    assert_eq!(sent, ["USER alice", "PASS secret", "FEAT", "TYPE I"]);
    assert!(l.is_done() && !l.is_failed());
    let f = l.features();
    assert!(f.haul && f.dtok && !f.plut && !f.auth_tls);
    assert_eq!(f.cksm, ["MD5", "ADLER32"]);
    assert!(!format!("{l:?}").contains("secret"));
}

#[test]
fn tls_login() {
    let mut l = Login::new("u", "p", true);
    let script = [
        "220 hi", "234 go", "200 pbsz", "200 prot", "331 p", "230 in", "211 x", "200 i",
    ];
    let (sent, res) = play(&mut l, &script);
    res.unwrap();
    let want = [
        "AUTH TLS", "<tls>", "PBSZ 0", "PROT P", "USER u", "PASS p", "FEAT", "TYPE I",
    ];
    assert_eq!(sent, want);
    assert!(l.is_done());
}

#[test]
fn gsi_login() {
    let mut l = Login::gsi(None, None);
    let script = [
        "220 hi",
        "334 ADAT must follow",
        "335 ADAT=s1",
        "335 ADAT=s2",
        "235 ADAT=s3",
        "331 pass",
        "230 in",
        "211 x",
        "200 i",
    ];
    let (sent, res) = play(&mut l, &script);
    res.unwrap();
    let want = [
        "AUTH GSSAPI",
        "<gss>",
        "ADAT t0",
        "ADAT after-s1",
        "ADAT after-s2",
        "<protect Some(\"s3\")>",
        "USER :globus-mapping:",
        "PASS dummy",
        "FEAT",
        "TYPE I",
    ];
    assert_eq!(sent, want);
    assert!(l.is_done());
    // A 235 without a token, and a named account.
    let mut l = Login::gsi(Some("alice".into()), None);
    let (sent, res) = play(&mut l, &["220 hi", "334 go", "235 done", "230 in"]);
    res.unwrap();
    assert_eq!(sent[3..5], ["<protect None>", "USER alice"]);
}

#[test]
fn gsi_refusals_end_the_login() {
    let mut l = Login::gsi(None, None);
    let (_, res) = play(&mut l, &["220 hi", "502 AUTH not available"]);
    assert!(
        matches!(&res, Err(LoginError::Refused { command, .. }) if command.to_string() == "AUTH GSSAPI"),
        "{res:?}"
    );
    let mut l = Login::gsi(None, None);
    let (_, res) = play(&mut l, &["220 hi", "334 go", "535 bad token"]);
    assert!(
        matches!(&res, Err(LoginError::Refused { reply, .. }) if reply.code == 535),
        "{res:?}"
    );
    assert!(l.is_failed());
    // A reply while the driver holds the context's next token answers nothing.
    let mut l = Login::gsi(None, None);
    l.handle_reply(Reply::new(220, "hi")).unwrap();
    assert_eq!(l.poll_transmit(), Some(Command::Auth("GSSAPI".into())));
    l.handle_reply(Reply::new(334, "go")).unwrap();
    assert_eq!(l.poll_action(), Some(Action::StartGss));
    assert!(l.handle_reply(Reply::new(235, "early")).is_err());
}

#[test]
fn no_command_before_the_handshake() {
    let mut l = Login::new("u", "p", true);
    let (sent, res) = play(&mut l, &["220 hi", "234 go"]);
    res.unwrap();
    assert_eq!(sent, ["AUTH TLS", "<tls>", "PBSZ 0"]);
    let mut l = Login::new("u", "p", true);
    l.handle_reply(Reply::new(220, "hi")).unwrap();
    assert_eq!(l.poll_transmit(), Some(Command::Auth("TLS".into())));
    l.handle_reply(Reply::new(234, "go")).unwrap();
    assert_eq!(l.poll_transmit(), None);
    assert_eq!(l.poll_action(), Some(Action::StartTls));
    // A reply before the handshake ended is injected plaintext.
    let e = l.handle_reply(Reply::new(200, "pbsz")).unwrap_err();
    assert!(matches!(e, LoginError::Unexpected(_)));
    l.tls_established();
    assert_eq!(l.poll_transmit(), None);
    assert!(l.is_failed());
}

#[test]
fn parser_idle_only_when_nothing_is_buffered() {
    let mut p = ReplyParser::new();
    assert!(p.is_idle());
    p.extend(b"234 go\r\n\x16\x03");
    assert!(p.next_reply().unwrap().is_some());
    assert!(!p.is_idle());
    let mut p = ReplyParser::new();
    p.extend(b"211-a\r\n");
    assert!(p.next_reply().unwrap().is_none());
    assert!(!p.is_idle());
}

#[test]
fn tls_refused() {
    let mut l = Login::new("u", "p", true);
    let (_, res) = play(&mut l, &["220 hi", "500 no AUTH"]);
    let e = res.unwrap_err();
    assert_eq!(
        e,
        LoginError::Refused {
            command: Command::Auth("TLS".into()),
            reply: Reply::new(500, "no AUTH")
        }
    );
    assert!(l.is_failed() && l.poll_transmit().is_none());
}

#[test]
fn logged_in_right_after_user() {
    for code in ["230 welcome", "202 superfluous"] {
        let mut l = Login::new("anonymous", "haul@", false);
        let (sent, res) = play(&mut l, &["220 hi", code, "500 no FEAT", "200 ok"]);
        res.unwrap();
        assert_eq!(sent, ["USER anonymous", "FEAT", "TYPE I"]);
        assert!(l.is_done());
        assert_eq!(*l.features(), crate::Features::default());
    }
}

#[test]
fn auth_failure_after_pass_and_after_user() {
    let mut l = Login::new("u", "bad", false);
    let (_, res) = play(&mut l, &["220 hi", "331 p", "530 Login incorrect."]);
    assert_eq!(
        res.unwrap_err(),
        LoginError::Auth(Reply::new(530, "Login incorrect."))
    );
    let mut l = Login::new("nobody", "x", false);
    let (sent, res) = play(&mut l, &["220 hi", "530 no such user"]);
    assert!(matches!(res.unwrap_err(), LoginError::Auth(_)));
    assert_eq!(sent, ["USER nobody"]);
    assert!(l.is_failed() && !l.is_done());
}

#[test]
fn other_login_replies_are_protocol_errors() {
    for script in [
        &["220 hi", "332 account?"][..],
        &["220 hi", "331 p", "331 again"],
    ] {
        let mut l = Login::new("u", "p", false);
        let (_, res) = play(&mut l, script);
        assert!(matches!(res.unwrap_err(), LoginError::Unexpected(_)));
    }
}

#[test]
fn bad_greeting() {
    for g in ["421 too many users", "230 eh", "120 wait", "530 no"] {
        let mut l = Login::new("u", "p", false);
        let (sent, res) = play(&mut l, &[g, "421 x"]);
        let e = res.unwrap_err();
        assert!(matches!(e, LoginError::Greeting(_)), "{g}: {e}");
        assert!(sent.is_empty());
        assert!(e.reply().code != 120);
    }
}

#[test]
fn service_ready_later() {
    let mut l = Login::new("u", "p", false);
    let script = [
        "120 ready in 5 minutes",
        "120 soon",
        "220 hi",
        "230 in",
        FEAT,
        "200 ok",
    ];
    let (sent, res) = play(&mut l, &script);
    res.unwrap();
    assert_eq!(sent, ["USER u", "FEAT", "TYPE I"]);
}

#[test]
fn type_refused_and_markers_skipped() {
    let mut l = Login::new("u", "p", false);
    let script = [
        "220 hi",
        "112-Perf\r\n Stripe: 0\r\n112 End",
        "230 in",
        "211 x",
        "504 no",
    ];
    let (_, res) = play(&mut l, &script);
    assert_eq!(
        res.unwrap_err(),
        LoginError::Refused {
            command: Command::Type(crate::command::TransferType::Image),
            reply: Reply::new(504, "no")
        }
    );
}

#[test]
fn replies_after_the_end_are_unexpected() {
    let mut l = Login::new("u", "p", false);
    let (_, res) = play(&mut l, &["220 hi", "230 in", "211 x", "200 ok", "200 more"]);
    assert!(matches!(res.unwrap_err(), LoginError::Unexpected(_)));
    // A reply to a command the driver has not written yet answers nothing either.
    let mut l = Login::new("u", "p", false);
    l.handle_reply(Reply::new(220, "hi")).unwrap();
    assert!(l.handle_reply(Reply::new(230, "in")).is_err());
}

#[test]
fn pipeline_matches_markers_and_preliminaries() {
    let mut p = Pipeline::new();
    for t in ["REST", "RETR a", "CKSM a", "RETR b"] {
        p.push(t);
    }
    let replies = [
        (350, "REST"),
        (150, "RETR a"),
        (111, "RETR a"),
        (112, "RETR a"),
        (226, "RETR a"),
        (213, "CKSM a"),
        (125, "RETR b"),
        (112, "RETR b"),
        (550, "RETR b"),
    ];
    for (code, tag) in replies {
        let ev = p.handle_reply(Reply::new(code, "x")).unwrap();
        assert_eq!(*ev.tag(), tag, "{code}");
        assert_eq!(ev.reply().code, code);
        match code {
            111 | 112 => assert!(matches!(ev, Event::Marker { .. })),
            100..=199 => assert!(matches!(ev, Event::Preliminary { .. })),
            _ => assert!(matches!(ev, Event::Final { .. })),
        }
    }
    assert!(p.is_empty());
}

#[test]
fn pipeline_unsolicited() {
    let mut p: Pipeline<u64> = Pipeline::new();
    let r = Reply::new(421, "timeout");
    assert_eq!(
        p.handle_reply(r.clone()),
        Err(PipelineError::Unsolicited(r))
    );
    assert!(p.handle_reply(Reply::new(112, "m")).is_err());
    p.push(7);
    assert_eq!(p.front(), Some(&7));
    assert_eq!(p.len(), 1);
    let ev = p.handle_reply(Reply::new(200, "ok")).unwrap();
    assert_eq!(
        ev,
        Event::Final {
            tag: 7,
            reply: Reply::new(200, "ok")
        }
    );
    assert!(p.handle_reply(Reply::new(226, "late")).is_err());
    assert!(p.is_empty());
}

const HAUL_HI: &str = "220 haul GridFTP server 0.1.0 ready.";

#[test]
fn a_haul_server_gets_the_login_in_one_burst() {
    let mut l = Login::new("alice", "secret", false);
    // Every command goes out before the first reply to any of them is read; the greeting is
    // the server machine's own, so the two cannot drift apart unnoticed.
    let hi = format!("220 {}", crate::server::GREETING);
    let (sent, res) = play(&mut l, &[hi.as_str()]);
    res.unwrap();
    assert_eq!(sent, ["USER alice", "PASS secret", "FEAT", "TYPE I"]);
    let (more, res) = play(&mut l, &["331 pass?", "230 in", FEAT, "200 binary"]);
    res.unwrap();
    assert!(more.is_empty(), "{more:?}");
    assert!(l.is_done() && l.features().haul);
}

#[test]
fn a_haul_server_over_tls_gets_the_login_in_one_burst_after_the_handshake() {
    let mut l = Login::new("u", "p", true);
    let script = [
        HAUL_HI, "234 go", "200 pbsz", "200 prot", "331 p", "230 in", "211 x", "200 i",
    ];
    let (sent, res) = play(&mut l, &script[..2]);
    res.unwrap();
    let want = [
        "AUTH TLS", "<tls>", "PBSZ 0", "PROT P", "USER u", "PASS p", "FEAT", "TYPE I",
    ];
    assert_eq!(sent, want);
    let (more, res) = play(&mut l, &script[2..]);
    res.unwrap();
    assert!(more.is_empty() && l.is_done(), "{more:?}");
}

#[test]
fn a_burst_login_answers_every_reply_in_order() {
    // Logged in by USER: the PASS sent with it is answered 503 or 230, and the login goes on.
    for pass in ["503 Already logged in.", "230 in"] {
        let mut l = Login::new("anonymous", "haul@", false);
        let script = [HAUL_HI, "230 welcome", "112 marker", pass, FEAT, "200 ok"];
        let (_, res) = play(&mut l, &script);
        res.unwrap();
        assert!(l.is_done(), "{pass}");
    }
    // A refused password fails the login at its own reply, whatever follows it.
    let mut l = Login::new("u", "bad", false);
    let (_, res) = play(&mut l, &[HAUL_HI, "331 p", "530 Login incorrect.", "530 x"]);
    assert!(matches!(res.unwrap_err(), LoginError::Auth(_)));
    assert!(l.is_failed() && l.poll_transmit().is_none());
    let mut l = Login::new("nobody", "x", false);
    let (_, res) = play(&mut l, &[HAUL_HI, "530 no such user"]);
    assert!(matches!(res.unwrap_err(), LoginError::Auth(_)));
    // Logged in by USER, then anything but 2xx or 503 to PASS is out of protocol.
    let mut l = Login::new("u", "p", false);
    let (_, res) = play(&mut l, &[HAUL_HI, "230 in", "331 p"]);
    assert!(matches!(res.unwrap_err(), LoginError::Unexpected(_)));
}

#[test]
fn a_gsi_login_to_a_haul_server_keeps_one_command_at_a_time() {
    let mut l = Login::gsi(None, None);
    let script = [HAUL_HI, "334 go", "235 ADAT=s1", "331 pass"];
    let (sent, res) = play(&mut l, &script);
    res.unwrap();
    assert_eq!(
        sent.last().map(String::as_str),
        Some("PASS dummy"),
        "{sent:?}"
    );
    assert!(!sent.iter().any(|c| c == "FEAT"), "{sent:?}");
}
