//! The server's session machine past the login: the settings of the next transfer, the
//! data-channel set-up, and each transfer's reply sequence, with pipelining and `ABOR`.

use std::net::{IpAddr, SocketAddr};

use super::*;
use crate::command::Restart;
use crate::{Command, RangeSet, Reply};

const CLIENT: &str = "192.0.2.7";

fn cmd(line: &str) -> Command {
    Command::parse(line).expect("a valid command")
}

fn reply(code: u16, text: &str) -> ServerAction {
    ServerAction::Reply(Reply::new(code, text))
}

fn drain(s: &mut Session) -> Vec<ServerAction> {
    std::iter::from_fn(|| s.poll_action()).collect()
}

fn send(s: &mut Session, line: &str) -> Vec<ServerAction> {
    s.handle_command(cmd(line));
    drain(s)
}

fn session(require_tls: bool) -> Session {
    let login = LoginConfig::default();
    let data = DataConfig {
        max_parallelism: 4,
        require_tls,
    };
    let mut s = Session::new(login, data, CLIENT.parse::<IpAddr>().unwrap());
    drain(&mut s);
    s
}

/// A session logged in as `alice`.
fn logged_in() -> Session {
    let mut s = session(false);
    send(&mut s, "USER alice");
    send(&mut s, "PASS pw");
    s.login().handle_verified(Verdict::Accepted);
    assert_eq!(drain(&mut s), vec![reply(230, "User alice logged in.")]);
    s
}

/// A logged-in session in MODE E with a passive listener at `addr`.
fn passive(addr: &str) -> Session {
    let mut s = logged_in();
    send(&mut s, "MODE E");
    assert_eq!(
        send(&mut s, "PASV"),
        vec![ServerAction::Listen(Passive::Pasv)]
    );
    s.transfers().listening(Ok(addr.parse().unwrap()));
    assert_eq!(
        drain(&mut s),
        vec![reply(227, "Entering Passive Mode (192,0,2,1,195,80)")]
    );
    s
}

/// Runs the transfer just started to its end as a driver would: data channel, `150`, outcome.
fn finish(s: &mut Session, outcome: Outcome) -> Vec<ServerAction> {
    assert!(s.transfer_state().in_transfer());
    assert!(s.transfers().transfer_opening(false, true));
    s.transfers().transfer_done(outcome);
    drain(s)
}

fn retr(path: &str, restart: Option<Restart>) -> ServerAction {
    ServerAction::Transfer(Transfer {
        op: TransferOp::Send {
            path: path.into(),
            range: None,
        },
        restart,
        allocate: None,
        mode: crate::command::TransferMode::Extended,
    })
}

#[test]
fn settings_are_answered_by_the_machine() {
    let mut s = logged_in();
    assert_eq!(send(&mut s, "TYPE I"), vec![reply(200, "Type set.")]);
    assert_eq!(
        send(&mut s, "MODE E"),
        vec![ServerAction::DropCached, reply(200, "Mode set to E.")]
    );
    assert_eq!(send(&mut s, "MODE E"), vec![reply(200, "Mode set to E.")]);
    assert_eq!(
        send(&mut s, "SBUF 1048576"),
        vec![reply(200, "SBUF Command Successful.")]
    );
    assert_eq!(s.transfer_state().sbuf(), Some(1 << 20));
    assert_eq!(
        send(&mut s, "SBUF 10")[0],
        reply(501, "SBUF 10 out of range 4096..=1073741824.")
    );
    assert_eq!(
        s.transfer_state().sbuf(),
        Some(1 << 20),
        "a refused SBUF changes nothing"
    );
    assert_eq!(send(&mut s, "DCAU N"), vec![reply(200, "DCAU N.")]);
    assert_eq!(
        send(&mut s, "DCAU A")[0].clone(),
        reply(
            504,
            "DCAU A needs GSI (gsiftp://); haul protects ftp:// data channels with PROT P."
        )
    );
}

#[test]
fn port_reaches_only_the_client_unless_third_party_is_allowed() {
    let mut s = logged_in();
    let mine: SocketAddr = format!("{CLIENT}:5000").parse().unwrap();
    assert_eq!(
        send(&mut s, &format!("EPRT |1|{CLIENT}|5000|")),
        vec![
            ServerAction::Active(vec![mine]),
            reply(200, "EPRT Command successful.")
        ]
    );
    let refused = send(&mut s, "PORT 198,51,100,1,19,136");
    assert_eq!(refused[0], ServerAction::DropData);
    assert!(
        matches!(&refused[1], ServerAction::Reply(r) if r.code == 501),
        "{refused:?}"
    );
    let privileged = send(&mut s, "PORT 192,0,2,7,0,25");
    assert!(
        matches!(&privileged[1], ServerAction::Reply(r) if r.code == 501 && r.text().contains("privileged"))
    );
    // The refused PORT dropped the set-up: a transfer now has no data channel.
    assert_eq!(send(&mut s, "RETR f"), vec![retr_stream("f")]);
    assert!(!s.transfers().data_channel_ready(false));
    assert_eq!(
        drain(&mut s),
        vec![reply(
            425,
            "Can't open data connection: send PORT, EPRT, SPOR, PASV, EPSV or SPAS first."
        )]
    );
    s.transfers().set_third_party(true);
    let other: SocketAddr = "198.51.100.1:5000".parse().unwrap();
    assert_eq!(
        send(&mut s, "PORT 198,51,100,1,19,136"),
        vec![
            ServerAction::Active(vec![other]),
            reply(200, "PORT Command successful.")
        ]
    );
    let many =
        "SPOR 192,0,2,7,19,136 192,0,2,7,19,137 192,0,2,7,19,138 192,0,2,7,19,139 192,0,2,7,19,140";
    assert!(
        matches!(&send(&mut s, many)[1], ServerAction::Reply(r) if r.code == 501 && r.text().contains("between 1 and 4"))
    );
}

fn retr_stream(path: &str) -> ServerAction {
    ServerAction::Transfer(Transfer {
        op: TransferOp::Send {
            path: path.into(),
            range: None,
        },
        restart: None,
        allocate: None,
        mode: crate::command::TransferMode::Stream,
    })
}

#[test]
fn passive_listener_failure_is_425() {
    let mut s = logged_in();
    assert_eq!(
        send(&mut s, "EPSV"),
        vec![ServerAction::Listen(Passive::Epsv)]
    );
    s.handle_command(cmd("NOOP"));
    assert_eq!(drain(&mut s), vec![], "NOOP waits for the listener");
    s.transfers().listening(Err("no ports".into()));
    assert_eq!(
        drain(&mut s),
        vec![
            reply(425, "Can't open data connection: no ports"),
            ServerAction::Forward(Command::Noop)
        ]
    );
}

#[test]
fn a_transfer_sends_150_then_a_deferred_226() {
    let mut s = passive("192.0.2.1:50000");
    assert_eq!(send(&mut s, "RETR f"), vec![retr("f", None)]);
    assert!(s.transfers().transfer_opening(false, true));
    assert_eq!(drain(&mut s), vec![reply(150, "Beginning transfer.")]);
    s.transfers().transfer_done(Outcome::Complete);
    assert_eq!(
        drain(&mut s),
        vec![ServerAction::Defer(Reply::new(226, "Transfer Complete."))]
    );
    // Cached MODE E connections carry the next one without a new set-up: 125.
    assert_eq!(send(&mut s, "RETR g"), vec![retr("g", None)]);
    assert!(s.transfers().transfer_opening(true, true));
    assert_eq!(
        drain(&mut s),
        vec![reply(
            125,
            "Beginning transfer; reusing existing data connection."
        )]
    );
}

#[test]
fn rest_applies_to_the_next_transfer_only() {
    let mut s = passive("192.0.2.1:50000");
    assert_eq!(
        send(&mut s, "REST 0-100,200-300"),
        vec![reply(
            350,
            "Restart Marker OK. Send STORE or RETR to initiate transfer."
        )]
    );
    let mut held = RangeSet::new();
    held.insert(0, 100);
    held.insert(200, 300);
    assert_eq!(
        send(&mut s, "RETR f"),
        vec![retr("f", Some(Restart::Ranges(held)))]
    );
    finish(&mut s, Outcome::Complete);
    assert_eq!(send(&mut s, "RETR f"), vec![retr("f", None)]);
}

#[test]
fn pipelined_commands_wait_for_the_transfer_and_keep_their_order() {
    let mut s = passive("192.0.2.1:50000");
    for line in ["RETR a", "CKSM MD5 0 -1 a", "RETR b", "NOOP"] {
        s.handle_command(cmd(line));
    }
    assert_eq!(drain(&mut s), vec![retr("a", None)]);
    assert!(s.held() <= 3);
    let after_a = finish(&mut s, Outcome::Complete);
    assert_eq!(
        after_a,
        vec![
            reply(150, "Beginning transfer."),
            ServerAction::Defer(Reply::new(226, "Transfer Complete.")),
            ServerAction::Forward(cmd("CKSM MD5 0 -1 a")),
            retr("b", None),
        ]
    );
    let after_b = finish(&mut s, Outcome::Failed("connection reset".into()));
    assert_eq!(
        after_b,
        vec![
            reply(150, "Beginning transfer."),
            reply(426, "Data connection closed: connection reset"),
            ServerAction::Forward(Command::Noop),
        ]
    );
    assert_eq!(s.held(), 0);
}

#[test]
fn a_refused_transfer_gets_its_reply_and_the_next_runs() {
    let mut s = passive("192.0.2.1:50000");
    s.handle_command(cmd("RETR missing"));
    s.handle_command(cmd("RETR f"));
    assert_eq!(drain(&mut s), vec![retr("missing", None)]);
    s.transfers().transfer_done(Outcome::Refused(Reply::new(
        550,
        "missing: No such file or directory",
    )));
    assert_eq!(
        drain(&mut s),
        vec![
            reply(550, "missing: No such file or directory"),
            retr("f", None)
        ]
    );
}

#[test]
fn abor_during_a_transfer_gets_426_then_226() {
    let mut s = passive("192.0.2.1:50000");
    assert_eq!(send(&mut s, "RETR f"), vec![retr("f", None)]);
    assert!(s.transfers().transfer_opening(false, true));
    drain(&mut s);
    assert_eq!(send(&mut s, "ABOR"), vec![ServerAction::Abort]);
    s.transfers()
        .transfer_done(Outcome::Failed("aborted by the client (ABOR)".into()));
    assert_eq!(
        drain(&mut s),
        vec![
            reply(
                426,
                "Transfer aborted: Data connection closed: aborted by the client (ABOR)"
            ),
            reply(226, "ABOR command successful."),
        ]
    );
    assert_eq!(
        send(&mut s, "ABOR"),
        vec![reply(
            226,
            "ABOR command successful; no transfer in progress."
        )]
    );
}

#[test]
fn abor_that_loses_the_race_with_the_end_gets_226_twice() {
    let mut s = passive("192.0.2.1:50000");
    send(&mut s, "RETR f");
    assert!(s.transfers().transfer_opening(false, true));
    drain(&mut s);
    s.handle_command(Command::Abor);
    assert_eq!(drain(&mut s), vec![ServerAction::Abort]);
    s.transfers().transfer_done(Outcome::Complete);
    assert_eq!(
        drain(&mut s),
        vec![
            reply(226, "Transfer Complete."),
            reply(226, "ABOR command successful.")
        ]
    );
}

#[test]
fn protected_data_is_required_when_configured() {
    let mut s = session(true);
    s.login().handle_command(cmd("NOOP"));
    drain(&mut s);
    // require_tls refuses the login itself without TLS; the data machine refuses transfers
    // without PROT P on its own too.
    s.transfers().handle_command(cmd("PORT 192,0,2,7,19,136"));
    drain(&mut s);
    s.transfers().handle_command(cmd("STOR f"));
    assert!(matches!(drain(&mut s)[..], [ServerAction::Transfer(_)]));
    assert!(!s.transfers().data_channel_ready(false));
    assert_eq!(
        drain(&mut s),
        vec![reply(
            521,
            "Data connections must be protected on this server: send PROT P."
        )]
    );
    s.transfers().set_prot_private(true);
    s.transfers().handle_command(cmd("STOR f"));
    drain(&mut s);
    assert!(s.transfers().data_channel_ready(false));
}

#[test]
fn nothing_reaches_the_data_machine_before_the_login() {
    let mut s = session(false);
    for line in ["PASV", "RETR f", "MODE E", "ABOR"] {
        assert_eq!(
            send(&mut s, line),
            vec![reply(530, "Please login with USER and PASS.")]
        );
    }
}

#[test]
fn own_transfers_are_forwarded() {
    let mut s = logged_in();
    s.set_own_transfers(true);
    assert_eq!(
        send(&mut s, "RETR f"),
        vec![ServerAction::Forward(cmd("RETR f"))]
    );
    assert_eq!(
        send(&mut s, "STOR f"),
        vec![ServerAction::Forward(cmd("STOR f"))]
    );
    assert_eq!(send(&mut s, "APPE f")[0], retr_append("f"));
    s.transfers()
        .transfer_done(Outcome::Refused(Reply::new(550, "f: Permission denied")));
    assert_eq!(drain(&mut s), vec![reply(550, "f: Permission denied")]);
    send(&mut s, "REST 10");
    assert_eq!(s.transfers().take_rest(), Some(Restart::Offset(10)));
}

fn retr_append(path: &str) -> ServerAction {
    ServerAction::Transfer(Transfer {
        op: TransferOp::Receive {
            path: path.into(),
            kind: WriteKind::Appe,
        },
        restart: None,
        allocate: None,
        mode: crate::command::TransferMode::Stream,
    })
}

#[test]
fn dcau_a_is_the_default_under_gsi_and_s_names_a_subject() {
    use crate::server::Dcau;
    let mut s = logged_in();
    assert_eq!(s.transfer_state().dcau(), &Dcau::None);
    s.transfers().set_gsi(true);
    assert_eq!(s.transfer_state().dcau(), &Dcau::SelfId);
    assert_eq!(
        send(&mut s, "DCAU S /O=Grid/CN=Jane Doe"),
        vec![reply(200, "DCAU S /O=Grid/CN=Jane Doe.")]
    );
    assert_eq!(
        s.transfer_state().dcau(),
        &Dcau::Subject("/O=Grid/CN=Jane Doe".into())
    );
    assert_eq!(
        send(&mut s, "DCAU S")[0].clone(),
        reply(501, "DCAU S needs a subject.")
    );
    assert_eq!(send(&mut s, "DCAU N"), vec![reply(200, "DCAU N.")]);
    assert_eq!(s.transfer_state().dcau(), &Dcau::None);
    assert_eq!(
        send(&mut s, "DCAU X")[0].clone(),
        reply(501, "DCAU X: the mode must be N, A or S.")
    );
    // Setting GSI again does not undo an explicit DCAU N.
    s.transfers().set_gsi(true);
    assert_eq!(s.transfer_state().dcau(), &Dcau::None);
}

/// `ALLO n` is remembered for the next transfer only, which carries it; a second `ALLO`
/// replaces the first, and a transfer without one carries none.
#[test]
fn allo_goes_with_the_next_transfer_only() {
    let mut s = passive("192.0.2.1:50000");
    assert_eq!(
        send(&mut s, "ALLO 100"),
        vec![reply(200, "ALLO command successful.")]
    );
    assert_eq!(
        send(&mut s, "ALLO 3000000 R 512"),
        vec![reply(200, "ALLO command successful.")]
    );
    let stor = |allocate| {
        ServerAction::Transfer(Transfer {
            op: TransferOp::Receive {
                path: "f".into(),
                kind: WriteKind::Stor,
            },
            restart: None,
            allocate,
            mode: crate::command::TransferMode::Extended,
        })
    };
    assert_eq!(send(&mut s, "STOR f"), vec![stor(Some(3_000_000))]);
    finish(&mut s, Outcome::Complete);
    assert_eq!(send(&mut s, "STOR f"), vec![stor(None)]);
}
