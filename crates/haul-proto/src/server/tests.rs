//! The server's login machine, path by path, and in memory against the client's `Login`.

use super::*;
use crate::command::{ProtLevel, TransferType};
use crate::{Command, LoginError, Reply};

fn cfg(require_tls: bool, tls_available: bool) -> LoginConfig {
    LoginConfig {
        require_tls,
        tls_available,
        gsi_available: false,
        ..LoginConfig::default()
    }
}

fn cmd(line: &str) -> Command {
    Command::parse(line).expect("a valid command")
}

/// Every action due.
fn drain(s: &mut Login) -> Vec<ServerAction> {
    std::iter::from_fn(|| s.poll_action()).collect()
}

fn reply(code: u16, text: &str) -> ServerAction {
    ServerAction::Reply(Reply::new(code, text))
}

/// A machine past its greeting.
fn greeted(cfg: LoginConfig) -> Login {
    let mut s = Login::new(cfg);
    assert_eq!(drain(&mut s), vec![reply(220, GREETING)]);
    s
}

/// Feeds one command line; the actions it caused.
fn send(s: &mut Login, line: &str) -> Vec<ServerAction> {
    s.handle_command(cmd(line));
    drain(s)
}

fn logged_in(cfg: LoginConfig) -> Login {
    let mut s = greeted(cfg);
    send(&mut s, "USER alice");
    send(&mut s, "PASS pw");
    s.handle_verified(Verdict::Accepted);
    assert_eq!(drain(&mut s), vec![reply(230, "User alice logged in.")]);
    s
}

#[test]
fn greeting_names_the_version() {
    assert!(GREETING.starts_with("haul GridFTP server "));
    assert!(GREETING.ends_with(" ready."));
    assert!(GREETING.contains(env!("CARGO_PKG_VERSION")));
}

#[test]
fn user_then_pass_verifies_then_logs_in() {
    let mut s = greeted(LoginConfig::default());
    assert_eq!(
        send(&mut s, "USER alice"),
        vec![reply(331, "Password required for alice.")]
    );
    let a = send(&mut s, "PASS secret");
    assert_eq!(
        a,
        vec![ServerAction::Verify {
            user: "alice".into(),
            pass: "secret".into()
        }]
    );
    assert!(
        !format!("{:?}", a[0]).contains("secret"),
        "password in Debug"
    );
    assert!(s.is_verifying() && !s.is_logged_in());
    s.handle_verified(Verdict::Accepted);
    assert_eq!(drain(&mut s), vec![reply(230, "User alice logged in.")]);
    assert_eq!(s.user(), Some("alice"));
    assert_eq!(
        send(&mut s, "USER bob"),
        vec![reply(503, "Already logged in.")]
    );
    assert_eq!(
        send(&mut s, "PASS x"),
        vec![reply(503, "Already logged in.")]
    );
}

#[test]
fn anonymous_gets_331_and_is_verified_like_any_user() {
    let mut s = greeted(LoginConfig::default());
    assert_eq!(
        send(&mut s, "USER anonymous"),
        vec![reply(331, "Password required for anonymous.")]
    );
    assert!(matches!(
        send(&mut s, "PASS guest@").as_slice(),
        [ServerAction::Verify { user, .. }] if user == "anonymous"
    ));
}

#[test]
fn pass_without_user_is_503_and_a_failed_pass_uses_the_user_up() {
    let mut s = greeted(LoginConfig::default());
    assert_eq!(
        send(&mut s, "PASS x"),
        vec![reply(503, "Login with USER first.")]
    );
    send(&mut s, "USER alice");
    send(&mut s, "PASS wrong");
    s.handle_verified(Verdict::Rejected);
    assert_eq!(drain(&mut s), vec![reply(530, "Login incorrect.")]);
    assert_eq!(s.failures(), 1);
    assert_eq!(
        send(&mut s, "PASS x"),
        vec![reply(503, "Login with USER first.")]
    );
}

#[test]
fn failed_login_limit_closes() {
    let mut s = greeted(LoginConfig::default());
    for n in 1..=MAX_LOGIN_FAILURES {
        send(&mut s, "USER alice");
        send(&mut s, "PASS wrong");
        s.handle_verified(Verdict::Rejected);
        let mut want = vec![reply(530, "Login incorrect.")];
        if n == MAX_LOGIN_FAILURES {
            want.push(reply(
                421,
                "Too many failed logins; closing control connection.",
            ));
            want.push(ServerAction::Close);
        }
        assert_eq!(drain(&mut s), want);
    }
    assert!(s.is_closed());
    assert_eq!(send(&mut s, "NOOP"), vec![]);
}

#[test]
fn refused_verdict_replies_and_closes() {
    let mut s = greeted(LoginConfig::default());
    send(&mut s, "USER alice");
    send(&mut s, "PASS pw");
    let r = Reply::new(
        421,
        "Too many sessions for alice (limit 1); try again later.",
    );
    s.handle_verified(Verdict::Refused(r.clone()));
    assert_eq!(
        drain(&mut s),
        vec![ServerAction::Reply(r), ServerAction::Close]
    );
    assert!(!s.is_logged_in());
}

#[test]
fn commands_during_verification_wait_for_the_verdict() {
    let mut s = greeted(LoginConfig::default());
    send(&mut s, "USER alice");
    send(&mut s, "PASS pw");
    assert_eq!(send(&mut s, "PWD"), vec![]);
    assert_eq!(send(&mut s, "NOOP"), vec![]);
    s.handle_verified(Verdict::Accepted);
    assert_eq!(
        drain(&mut s),
        vec![
            reply(230, "User alice logged in."),
            ServerAction::Forward(Command::Pwd),
            ServerAction::Forward(Command::Noop),
        ]
    );
    // A verdict nobody asked for is ignored.
    s.handle_verified(Verdict::Rejected);
    assert_eq!(drain(&mut s), vec![]);
}

#[test]
fn before_login_only_the_login_and_server_commands_run() {
    let mut s = greeted(LoginConfig::default());
    for line in [
        "PWD",
        "RETR f",
        "TYPE I",
        "REIN",
        "ACCT a",
        "SITE HELP",
        "XYZZY",
    ] {
        assert_eq!(
            send(&mut s, line),
            vec![reply(530, "Please login with USER and PASS.")],
            "{line}"
        );
    }
    for line in ["FEAT", "SYST", "NOOP", "HELP", "OPTS UTF8 ON"] {
        assert_eq!(send(&mut s, line), vec![ServerAction::Forward(cmd(line))]);
    }
    let mut s = logged_in(LoginConfig::default());
    for line in ["PWD", "RETR f", "TYPE I", "SITE HELP", "XYZZY"] {
        assert_eq!(send(&mut s, line), vec![ServerAction::Forward(cmd(line))]);
    }
}

#[test]
fn quit_says_goodbye_and_closes() {
    let mut s = greeted(LoginConfig::default());
    assert_eq!(
        send(&mut s, "QUIT"),
        vec![reply(221, "Goodbye."), ServerAction::Close]
    );
    assert!(s.is_closed());
}

#[test]
fn auth_tls_and_protection() {
    let mut s = greeted(cfg(false, false));
    assert_eq!(
        send(&mut s, "AUTH TLS"),
        vec![reply(
            502,
            "AUTH not available: this server has no TLS certificate."
        )]
    );
    let mut s = greeted(cfg(false, true));
    assert_eq!(
        send(&mut s, "AUTH GSSAPI"),
        vec![reply(
            504,
            "AUTH GSSAPI not available: this server has no GSI host credential."
        )]
    );
    assert_eq!(send(&mut s, "PBSZ 0"), vec![reply(200, "PBSZ=0")]);
    assert_eq!(
        send(&mut s, "PROT P"),
        vec![reply(503, "PROT P needs AUTH TLS or GSSAPI first.")]
    );
    assert_eq!(
        send(&mut s, "AUTH TLS"),
        vec![reply(234, "AUTH TLS successful."), ServerAction::StartTls]
    );
    s.tls_established();
    assert!(s.is_tls());
    assert_eq!(
        send(&mut s, "AUTH TLS"),
        vec![reply(503, "Control connection already protected.")]
    );
    assert_eq!(
        send(&mut s, "PROT P"),
        vec![reply(200, "Protection level set to P.")]
    );
    assert!(s.prot_private());
    assert_eq!(
        send(&mut s, "PROT S"),
        vec![reply(536, "PROT S needs GSSAPI (gsiftp).")]
    );
    assert_eq!(
        send(&mut s, "PROT C"),
        vec![reply(200, "Protection level set to C.")]
    );
    assert!(!s.prot_private());
    s.handle_command(Command::Prot(ProtLevel::Confidential));
    assert_eq!(
        drain(&mut s)[0],
        reply(536, "Only PROT C, S (GSI) and P are supported.")
    );
}

#[test]
fn clear_text_after_auth_tls_or_a_failed_handshake_closes() {
    let mut s = greeted(cfg(false, true));
    send(&mut s, "AUTH TLS");
    assert_eq!(send(&mut s, "USER alice"), vec![ServerAction::Close]);
    let mut s = greeted(cfg(false, true));
    send(&mut s, "AUTH TLS");
    s.tls_failed();
    assert_eq!(drain(&mut s), vec![ServerAction::Close]);
    assert!(!s.is_tls());
    // Pipelined behind a PASS, then AUTH TLS with more clear text behind it.
    let mut s = greeted(cfg(false, true));
    send(&mut s, "USER alice");
    send(&mut s, "PASS pw");
    send(&mut s, "AUTH TLS");
    send(&mut s, "NOOP");
    s.handle_verified(Verdict::Accepted);
    assert_eq!(
        drain(&mut s),
        vec![
            reply(230, "User alice logged in."),
            reply(234, "AUTH TLS successful."),
            ServerAction::Close
        ]
    );
}

#[test]
fn require_tls_refuses_user_and_pass_in_clear() {
    let text = "This server requires TLS: send AUTH TLS before logging in.";
    let mut s = greeted(cfg(true, true));
    assert_eq!(send(&mut s, "USER alice"), vec![reply(530, text)]);
    assert_eq!(send(&mut s, "PASS pw"), vec![reply(530, text)]);
    assert_eq!(
        send(&mut s, "PWD"),
        vec![reply(530, "Please login with USER and PASS.")]
    );
    send(&mut s, "AUTH TLS");
    s.tls_established();
    assert_eq!(
        send(&mut s, "USER alice"),
        vec![reply(331, "Password required for alice.")]
    );
}

// In memory: the client's `Login` against the server's.

/// The harness's user table: alice / wonderland, and anonymous names with any password.
fn check(user: &str, pass: &str) -> Verdict {
    let anonymous = user.eq_ignore_ascii_case("anonymous") || user.eq_ignore_ascii_case("ftp");
    if anonymous || (user == "alice" && pass == "wonderland") {
        Verdict::Accepted
    } else {
        Verdict::Rejected
    }
}

/// What the harness answers for the driver.
fn answer(c: &Command) -> Reply {
    match c {
        Command::Feat => Reply::multi(
            211,
            vec![
                "Extensions supported:".into(),
                " MODE E".into(),
                " CKSM SHA256,MD5".into(),
                "End".into(),
            ],
        ),
        Command::Type(TransferType::Image) => Reply::new(200, "Type set to I."),
        _ => Reply::new(502, "Not implemented here."),
    }
}

/// How an in-memory session ended.
#[derive(Debug)]
struct Outcome {
    client: Result<(), LoginError>,
    server_logged_in: bool,
    tls: bool,
    closed: bool,
}

/// Runs `client` against a server configured by `cfg`, the commands going over the wire as
/// text, until the client finishes or fails or the server closes.
fn run(mut client: crate::Login, cfg: LoginConfig) -> (Outcome, crate::Login) {
    let mut server = Login::new(cfg);
    let (mut client_tls, mut server_tls) = (false, false);
    for _ in 0..100 {
        while let Some(a) = server.poll_action() {
            let r = match a {
                ServerAction::Reply(r) => r,
                ServerAction::Forward(c) => answer(&c),
                ServerAction::StartTls => {
                    server_tls = true;
                    continue;
                }
                ServerAction::Verify { user, pass } => {
                    server.handle_verified(check(&user, &pass));
                    continue;
                }
                ServerAction::Close => {
                    let o = outcome(&server, Ok(()), true);
                    return (o, client);
                }
                other => panic!("the login machine never asks for {other:?}"),
            };
            let wire = r.encode();
            let mut p = crate::ReplyParser::new();
            p.extend(wire.as_bytes());
            let r = p.next_reply().expect("parses").expect("complete");
            if let Err(e) = client.handle_reply(r) {
                return (outcome(&server, Err(e), false), client);
            }
        }
        if let Some(crate::Action::StartTls) = client.poll_action() {
            client_tls = true;
        }
        if client_tls && server_tls {
            client.tls_established();
            server.tls_established();
            (client_tls, server_tls) = (false, false);
        }
        if client.is_done() {
            return (outcome(&server, Ok(()), false), client);
        }
        if let Some(c) = client.poll_transmit() {
            server.handle_command(cmd(&c.to_string()));
        }
    }
    panic!("the session did not end: {server:?}, {client:?}");
}

fn outcome(s: &Login, client: Result<(), LoginError>, closed: bool) -> Outcome {
    Outcome {
        client,
        server_logged_in: s.is_logged_in(),
        tls: s.is_tls(),
        closed,
    }
}

#[test]
fn in_memory_plain_login() {
    let (o, c) = run(
        crate::Login::new("alice", "wonderland", false),
        cfg(false, true),
    );
    assert!(o.client.is_ok() && c.is_done(), "{o:?}");
    assert!(o.server_logged_in && !o.tls && !o.closed);
    assert!(c.features().has_cksm("SHA256"));
}

#[test]
fn in_memory_tls_login() {
    let (o, c) = run(
        crate::Login::new("alice", "wonderland", true),
        cfg(true, true),
    );
    assert!(o.client.is_ok() && c.is_done(), "{o:?}");
    assert!(o.server_logged_in && o.tls);
}

#[test]
fn in_memory_wrong_password_is_an_auth_error() {
    let (o, _) = run(
        crate::Login::new("alice", "looking-glass", true),
        cfg(false, true),
    );
    match o.client {
        Err(LoginError::Auth(r)) => assert_eq!(r, Reply::new(530, "Login incorrect.")),
        other => panic!("{other:?}"),
    }
    assert!(!o.server_logged_in && !o.closed);
}

#[test]
fn in_memory_anonymous() {
    let (o, c) = run(
        crate::Login::new("anonymous", "guest@", false),
        cfg(false, false),
    );
    assert!(o.client.is_ok() && c.is_done(), "{o:?}");
    assert!(o.server_logged_in);
}

#[test]
fn in_memory_require_tls_without_tls_names_the_cause() {
    let (o, _) = run(
        crate::Login::new("alice", "wonderland", false),
        cfg(true, true),
    );
    let Err(LoginError::Auth(r)) = &o.client else {
        panic!("{o:?}");
    };
    assert_eq!(r.code, 530);
    assert!(r.text().contains("requires TLS"), "{r}");
    assert!(!o.server_logged_in);
}

#[test]
fn in_memory_tls_client_against_a_server_without_a_certificate() {
    let (o, _) = run(
        crate::Login::new("alice", "wonderland", true),
        cfg(false, false),
    );
    match o.client {
        Err(LoginError::Refused { command, reply }) => {
            assert_eq!(command, Command::Auth("TLS".into()));
            assert_eq!(reply.code, 502);
        }
        other => panic!("{other:?}"),
    }
}

fn gsi_cfg() -> LoginConfig {
    LoginConfig {
        gsi_available: true,
        ..LoginConfig::default()
    }
}

#[test]
fn gssapi_exchange_then_protected_login_as_the_mapped_account() {
    let mut s = greeted(gsi_cfg());
    assert_eq!(
        send(&mut s, "ADAT AAAA"),
        vec![reply(503, "ADAT needs AUTH GSSAPI first.")]
    );
    assert_eq!(
        send(&mut s, "AUTH GSSAPI"),
        vec![
            reply(334, "Using authentication type GSSAPI; ADAT must follow."),
            ServerAction::StartGss
        ]
    );
    assert_eq!(
        send(&mut s, "ADAT Y2xpZW50"),
        vec![ServerAction::Adat("Y2xpZW50".into())]
    );
    // A command pipelined behind an ADAT waits for its answer.
    assert!(send(&mut s, "PBSZ 1048576").is_empty());
    s.adat_result(AdatReply::Continue("c2VydmVy".into()));
    assert_eq!(
        drain(&mut s),
        vec![reply(335, "ADAT=c2VydmVy"), reply(200, "PBSZ=0")]
    );
    assert_eq!(send(&mut s, "ADAT bGFzdA==").len(), 1);
    s.adat_result(AdatReply::Done(None));
    assert_eq!(
        drain(&mut s),
        vec![
            reply(235, "GSSAPI Authentication successful."),
            ServerAction::ProtectControl
        ]
    );
    assert!(s.is_gsi());
    assert_eq!(
        send(&mut s, "PBSZ 1048576"),
        vec![reply(200, "PBSZ=1048576")]
    );
    assert_eq!(
        send(&mut s, "PROT S"),
        vec![reply(200, "Protection level set to S.")]
    );
    assert!(s.prot_private());
    assert_eq!(
        send(&mut s, "AUTH GSSAPI"),
        vec![reply(503, "Control connection already protected.")]
    );
    send(&mut s, "USER :globus-mapping:");
    assert_eq!(
        send(&mut s, "PASS dummy"),
        vec![ServerAction::Verify {
            user: ":globus-mapping:".into(),
            pass: "dummy".into()
        }]
    );
    s.handle_verified(Verdict::AcceptedAs("alice".into()));
    assert_eq!(drain(&mut s), vec![reply(230, "User alice logged in.")]);
    assert_eq!(s.user(), Some("alice"));
}

#[test]
fn a_failed_gssapi_exchange_is_a_failed_login() {
    let mut s = greeted(gsi_cfg());
    send(&mut s, "AUTH GSSAPI");
    send(&mut s, "ADAT AAAA");
    s.adat_result(AdatReply::Failed("certificate expired".into()));
    assert_eq!(
        drain(&mut s),
        vec![reply(
            535,
            "GSSAPI authentication failed: certificate expired"
        )]
    );
    assert!(!s.is_gsi());
    assert_eq!(
        send(&mut s, "ADAT AAAA"),
        vec![reply(503, "ADAT needs AUTH GSSAPI first.")]
    );
    // Without a host credential GSI is not offered at all.
    let mut plain = greeted(LoginConfig::default());
    assert_eq!(
        send(&mut plain, "AUTH GSSAPI")[0].clone(),
        reply(
            504,
            "AUTH GSSAPI not available: this server has no GSI host credential."
        )
    );
    assert_eq!(
        send(&mut plain, "PROT S"),
        vec![reply(536, "PROT S needs GSSAPI (gsiftp).")]
    );
}
