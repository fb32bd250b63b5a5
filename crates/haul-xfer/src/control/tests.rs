use std::io::{BufRead, BufReader};
use std::net::TcpListener;

use super::*;
use crate::error::ErrorKind;

/// A one-connection server that answers each line it reads with the next scripted reply,
/// after sending `greeting`. Returns the URL to reach it and the lines it read.
fn serve(
    greeting: &'static str,
    replies: &'static [&'static str],
) -> (RemoteUrl, std::thread::JoinHandle<Vec<String>>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let h = std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        s.write_all(greeting.as_bytes()).unwrap();
        let mut lines = Vec::new();
        let mut r = BufReader::new(s.try_clone().unwrap());
        for reply in replies {
            let mut line = String::new();
            if r.read_line(&mut line).unwrap_or(0) == 0 {
                break;
            }
            lines.push(line.trim_end().to_string());
            s.write_all(reply.as_bytes()).unwrap();
        }
        lines
    });
    let url = RemoteUrl {
        tls: false,
        gsi: false,
        user: Some("u".into()),
        pass: Some("p".into()),
        host: "127.0.0.1".into(),
        port,
        path: "/".into(),
    };
    (url, h)
}

fn connect(url: &RemoteUrl) -> Result<Control, XferError> {
    Control::connect(url, None, Duration::from_secs(5))
}

#[test]
fn logs_in_after_a_delayed_greeting() {
    const FEAT: &str = "211-Features\r\n HAUL 1\r\n CKSM MD5\r\n211 End\r\n";
    let (url, h) = serve(
        "120 in a minute\r\n220 ready\r\n",
        &["331 pass?\r\n", "230 in\r\n", FEAT, "200 I\r\n"],
    );
    let c = connect(&url).unwrap();
    assert!(c.features.haul && c.features.has_cksm("md5"));
    assert_eq!(h.join().unwrap(), ["USER u", "PASS p", "FEAT", "TYPE I"]);
}

#[test]
fn errors_keep_their_kinds() {
    let (url, _) = serve("421 too many\r\n", &[]);
    let e = connect(&url).err().unwrap();
    assert!(matches!(e, XferError::Protocol { .. }), "{e}");
    let (url, _) = serve("220 hi\r\n", &["331 p\r\n", "530 Login incorrect.\r\n"]);
    let e = connect(&url).err().unwrap();
    assert!(
        matches!(&e, XferError::Auth { user, .. } if user == "u"),
        "{e}"
    );
    assert_eq!(e.kind(), ErrorKind::AuthenticationFailed);
    let (url, _) = serve("220 hi\r\n", &["230 in\r\n", "500 ?\r\n", "504 no\r\n"]);
    let e = connect(&url).err().unwrap();
    assert!(
        matches!(&e, XferError::Refused { command, .. } if command == "TYPE I"),
        "{e}"
    );
}

#[test]
fn a_batch_reads_every_reply_and_names_the_first_refusal() {
    // After USER (230: no PASS), FEAT and TYPE I: MODE E wants exactly 200 (202 is
    // refused), OPTS any 2yz (500 is refused too, but MODE E came first), SBUF any 2yz.
    // Every reply is read, so the NOOP after the batch gets its own.
    let (url, h) = serve(
        "220 hi\r\n",
        &[
            "230 in\r\n",
            "211 none\r\n",
            "200 I\r\n",
            "202 not needed\r\n",
            "500 no\r\n",
            "200 ok\r\n",
            "200 noop\r\n",
        ],
    );
    let mut c = connect(&url).unwrap();
    let cmds = [
        (
            Command::Mode(haul_proto::command::TransferMode::Extended),
            Some(200),
        ),
        (
            Command::Opts {
                command: "RETR".into(),
                options: "Parallelism=2,2,2;".into(),
            },
            None,
        ),
        (Command::Sbuf(1 << 20), None),
    ];
    let e = c.batch(&cmds).err().unwrap();
    assert!(
        matches!(&e, XferError::Refused { command, .. } if command == "MODE E"),
        "{e}"
    );
    assert_eq!(c.ok(&Command::Noop).unwrap().text().trim(), "noop");
    let read = h.join().unwrap();
    assert_eq!(
        read[3..],
        [
            "MODE E",
            "OPTS RETR Parallelism=2,2,2;",
            "SBUF 1048576",
            "NOOP"
        ]
    );
}

#[test]
fn a_reply_read_with_no_command_outstanding_is_a_protocol_error() {
    // After login the server answers NOOP twice; the second 200 answers nothing.
    let (url, _) = serve(
        "220 hi\r\n",
        &[
            "230 in\r\n",
            "211 none\r\n",
            "200 I\r\n",
            "200 ok\r\n200 again\r\n",
        ],
    );
    let mut c = connect(&url).unwrap();
    assert_eq!(c.expect(&Command::Noop, 200).unwrap().code, 200);
    let r = c.reply();
    assert!(
        matches!(&r, Err(XferError::Protocol { reply, .. }) if reply.contains("no command")),
        "{r:?}"
    );
}

#[test]
fn a_question_goes_with_a_haul_servers_login_and_its_reply_is_read_once() {
    const FEAT: &str = "211-Features\r\n HAUL 1\r\n BTC\r\n211 End\r\n";
    let (url, h) = serve(
        "220 haul GridFTP server 0.1 ready\r\n",
        &[
            "331 pass?\r\n",
            "230 in\r\n",
            FEAT,
            "200 I\r\n",
            "211 the answer\r\n",
            "200 noop\r\n",
        ],
    );
    let addrs = resolve(&url).unwrap();
    let mut c = Control::login(
        &url,
        &addrs,
        None,
        Duration::from_secs(5),
        Some(Command::Site("BTC".into())),
    )
    .unwrap();
    let btc = Command::Site("BTC".into());
    assert!(!c.take_ahead(&Command::Site("BTC ALL".into())));
    assert!(c.take_ahead(&btc));
    assert!(!c.take_ahead(&btc), "the answer is read once");
    assert_eq!(
        c.final_reply(&mut |_| {}).unwrap().text().trim(),
        "the answer"
    );
    assert_eq!(c.ok(&Command::Noop).unwrap().text().trim(), "noop");
    assert_eq!(
        h.join().unwrap(),
        ["USER u", "PASS p", "FEAT", "TYPE I", "SITE BTC", "NOOP"]
    );
}

#[test]
fn a_question_nobody_reads_is_read_past_and_other_servers_never_get_it() {
    // Another server logs in one command at a time: the question is not sent.
    let (url, h) = serve(
        "220 hi\r\n",
        &[
            "331 pass?\r\n",
            "230 in\r\n",
            "211 none\r\n",
            "200 I\r\n",
            "200 noop\r\n",
        ],
    );
    let addrs = resolve(&url).unwrap();
    let ahead = Some(Command::Site("BTC".into()));
    let mut c = Control::login(&url, &addrs, None, Duration::from_secs(5), ahead).unwrap();
    assert!(!c.take_ahead(&Command::Site("BTC".into())));
    assert_eq!(c.ok(&Command::Noop).unwrap().text().trim(), "noop");
    assert_eq!(
        h.join().unwrap(),
        ["USER u", "PASS p", "FEAT", "TYPE I", "NOOP"]
    );
    // A haul server's answer that nobody takes is read before the next command's.
    let (url, _) = serve(
        "220 haul GridFTP server 0.1 ready\r\n",
        &[
            "230 in\r\n",
            "503 in already\r\n",
            "211 none\r\n",
            "200 I\r\n",
            "211 unread\r\n",
            "200 noop\r\n",
        ],
    );
    let addrs = resolve(&url).unwrap();
    let ahead = Some(Command::Site("BTC".into()));
    let mut c = Control::login(&url, &addrs, None, Duration::from_secs(5), ahead).unwrap();
    assert_eq!(c.ok(&Command::Noop).unwrap().text().trim(), "noop");
}
