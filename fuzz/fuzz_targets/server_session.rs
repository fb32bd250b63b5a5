//! Fuzzes the server's command dispatch end to end: each input is the control-channel bytes of
//! one session with a real `haul_server` (in-process, see `server_session/world.rs`), sent after
//! an anonymous login with write access and followed by `QUIT`. The harness plays the client's
//! data side (`server_session/data.rs`) and checks that:
//!
//! - the server never panics (libfuzzer-sys's panic hook aborts on a panic in any thread) and
//!   never hangs (a 20 s silence fails the input);
//! - every reply parses with `ReplyParser`, and markers with the client's marker parsers;
//! - every line the server reads gets exactly one final reply, in order, and the session ends
//!   exactly after `QUIT` (221) or an over-long line (500), with nothing cut mid-reply;
//! - PASV / EPSV / SPAS name the control connection's own address; a `DTOK` reply reads with
//!   the client's reader, and the server's own data connections then start with that token;
//! - the session thread is gone once its client has been answered;
//! - nothing outside the served root is created, changed or removed, and no data connection
//!   carries a byte of the file outside it (the root holds symlinks that lead there).

#![no_main]

#[path = "server_session/data.rs"]
mod data;
#[path = "server_session/world.rs"]
mod world;

use std::collections::VecDeque;
use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpStream};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use haul_proto::command::{RetrOptions, TransferMode};
use haul_proto::hostport::{find_epsv_port, find_in_reply};
use haul_proto::markers::parse_range_marker;
use haul_proto::{Command, LineBuffer, LineError, PerfMarker, Reply, ReplyParser, MAX_LINE};
use haul_transport::token::DataToken;
use libfuzzer_sys::fuzz_target;

use world::World;

/// What the harness sends before the fuzzed bytes.
const LOGIN: &[u8] = b"USER anonymous\r\nPASS fuzz@haul\r\n";
/// What it sends after them (the CRLF ends a last line left open).
const END: &[u8] = b"\r\nQUIT\r\n";
/// Longest silence of the server on the control connection before the input fails.
const HANG: Duration = Duration::from_secs(20);

static WORLD: OnceLock<World> = OnceLock::new();

/// One line as the server will read it.
#[derive(Debug)]
enum Line {
    /// A UTF-8 line and what `Command::parse` makes of it.
    Text(String, Option<Command>),
    /// A line over `MAX_LINE`: answered with 500, then the session closes.
    TooLong,
    /// A line that is not UTF-8: answered with 500.
    NotUtf8,
}

/// The lines the server reads from `stream`, up to the one that ends the session.
fn lines(stream: &[u8]) -> VecDeque<Line> {
    let mut b = LineBuffer::new(MAX_LINE);
    b.extend(stream);
    let mut out = VecDeque::new();
    loop {
        match b.next_line() {
            Ok(Some(l)) => {
                let cmd = Command::parse(&l).ok();
                let quit = matches!(cmd, Some(Command::Quit));
                out.push_back(Line::Text(l, cmd));
                if quit {
                    break;
                }
            }
            Ok(None) => break,
            Err(LineError::TooLong { .. }) => {
                out.push_back(Line::TooLong);
                break;
            }
            Err(LineError::NotUtf8) => out.push_back(Line::NotUtf8),
        }
    }
    out
}

/// How the server will make the next transfer's data connections.
enum Setup {
    None,
    Passive(SocketAddr),
    Active(Vec<SocketAddr>),
}

/// The client side of one session, as far as the harness follows it.
struct Client<'w> {
    world: &'w World,
    mode_e: bool,
    parallelism: usize,
    plut: bool,
    setup: Setup,
    peers: data::Peers,
}

const LOCALHOST: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

impl Client<'_> {
    /// A preliminary reply to `cmd`: a `150` / `125` starts the data side of a TCP transfer.
    fn preliminary(&mut self, cmd: Option<&Command>, r: &Reply) {
        match r.code {
            111 => assert!(
                parse_range_marker(&r.text()).is_some(),
                "unreadable restart marker {r}"
            ),
            112 => assert!(
                PerfMarker::from_lines(&r.lines).is_some(),
                "unreadable perf marker {r}"
            ),
            _ => {}
        }
        let Some(cmd) = cmd else { return };
        let upload = match cmd {
            Command::Stor(_) | Command::Appe(_) | Command::Esto { .. } => true,
            Command::Retr(_)
            | Command::Eret { .. }
            | Command::List(_)
            | Command::Nlst(_)
            | Command::Mlsd(_)
            | Command::Mlsr(_) => false,
            _ => return,
        };
        let listing = matches!(
            cmd,
            Command::List(_) | Command::Nlst(_) | Command::Mlsd(_) | Command::Mlsr(_)
        );
        if self.plut && !listing {
            return;
        }
        let e_payload = data::mode_e_payload();
        let payload = upload.then_some(if self.mode_e {
            &e_payload[..]
        } else {
            data::PAYLOAD
        });
        if r.code == 125 {
            self.peers.reuse(payload);
            return;
        }
        if r.code != 150 {
            return;
        }
        // As many connections as the server opens or waits for (datachan::Dial::open).
        let n = if self.mode_e && (!upload || matches!(self.setup, Setup::Active(_))) {
            self.parallelism.clamp(1, 4)
        } else {
            1
        };
        match &self.setup {
            Setup::None => {}
            Setup::Passive(a) => self.peers.connect(*a, n, payload, self.mode_e),
            Setup::Active(addrs) => {
                let ours: SocketAddr = world::ACTIVE.parse().expect("address");
                // The server connects in order and stops at the first failure; only connections
                // to the harness's port are certain to succeed.
                let expect = (0..n)
                    .take_while(|i| addrs[i % addrs.len()] == ours)
                    .count();
                let rx = self.world.active.lock().expect("active channel");
                for _ in 0..expect {
                    match rx.recv_timeout(Duration::from_secs(5)) {
                        Ok(s) => self.peers.start(s, false, payload, self.mode_e),
                        Err(_) => break,
                    }
                }
            }
        }
    }

    /// The final reply to `cmd`: follows what the server now holds.
    fn completed(&mut self, cmd: &Command, r: &Reply) {
        let ok = r.is_success();
        match cmd {
            Command::Mode(m) if ok => {
                let e = *m == TransferMode::Extended;
                if e != self.mode_e {
                    self.peers.forget_reusable();
                }
                self.mode_e = e;
            }
            Command::Opts { command, options } if ok && command == "RETR" => {
                if let Some(p) = RetrOptions::parse(options).ok().and_then(|o| o.parallelism) {
                    self.parallelism = p as usize;
                }
            }
            Command::Unknown { verb, .. } if ok && verb == "DTOK" => {
                // As the client reads it (haul_xfer::session::data), and the raw bytes it stands for.
                let text = r.text();
                let hex = text.trim().strip_prefix("DTOK ").unwrap_or_default();
                assert!(
                    DataToken::from_hex(hex).is_some(),
                    "unreadable DTOK reply {r}"
                );
                let mut t = [0u8; 16];
                for (i, b) in t.iter_mut().enumerate() {
                    *b = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).expect("hex");
                }
                self.peers.token = Some(t);
                self.peers.forget_reusable();
            }
            Command::Opts { command, .. } if ok && command == "HAUL" => {
                self.plut = r.text().contains("use PLUT")
            }
            Command::Pasv
            | Command::Epsv
            | Command::Spas
            | Command::Port(_)
            | Command::Eprt(_)
            | Command::Spor(_) => {
                self.setup = Setup::None;
                self.peers.forget_reusable();
                let text = r.text();
                self.setup = match (cmd, r.code) {
                    (Command::Pasv, 227) | (Command::Spas, 229) => {
                        let a = find_in_reply(&text).expect("PASV / SPAS reply names an address");
                        assert_eq!(
                            a.ip(),
                            LOCALHOST,
                            "{r}: not the control connection's address"
                        );
                        Setup::Passive(a)
                    }
                    (Command::Epsv, 229) => {
                        let p = find_epsv_port(&text).expect("EPSV reply names a port");
                        Setup::Passive(SocketAddr::new(LOCALHOST, p))
                    }
                    (Command::Port(a), 200) | (Command::Eprt(a), 200) => Setup::Active(vec![*a]),
                    (Command::Spor(v), 200) => Setup::Active(v.clone()),
                    _ => Setup::None,
                };
            }
            _ => {}
        }
    }
}

/// Runs one session and checks its transcript; returns what the data connections carried.
fn session(world: &World, input: &[u8]) -> Vec<Vec<u8>> {
    let stream = [LOGIN, input, END].concat();
    let mut pending = lines(&stream);
    let mut c = TcpStream::connect(world::CONTROL).expect("connect control");
    c.set_read_timeout(Some(HANG)).expect("timeout");
    c.write_all(&stream).expect("send the session");
    let mut client = Client {
        world,
        mode_e: false,
        parallelism: 1,
        plut: false,
        setup: Setup::None,
        peers: Default::default(),
    };
    let mut parser = ReplyParser::new();
    let mut transcript = Vec::new();
    let mut buf = [0u8; 8192];
    let mut seen = 0usize;
    let mut ended = false;
    loop {
        let n = match c.read(&mut buf) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => 0,
            // libFuzzer's SIGALRM (its -timeout check) interrupts this thread's reads.
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => panic!(
                "control connection: {e} (server silent for {HANG:?}?); after {:?}",
                String::from_utf8_lossy(&transcript)
            ),
        };
        if n == 0 {
            break;
        }
        transcript.extend_from_slice(&buf[..n]);
        parser.extend(&buf[..n]);
        while let Some(r) = parser
            .next_reply()
            .unwrap_or_else(|e| panic!("malformed reply: {e}"))
        {
            assert!(
                !ended,
                "reply {r} after the session's last line was answered"
            );
            let head = pending
                .front()
                .unwrap_or_else(|| panic!("reply {r} to no line"));
            let cmd = match head {
                Line::Text(_, cmd) => cmd.as_ref(),
                _ => None,
            };
            match seen {
                0 => assert_eq!(r.code, 220, "greeting {r}"),
                1 => assert_eq!(r.code, 331, "reply to USER: {r}"),
                2 => assert_eq!(r.code, 230, "reply to PASS: {r}"),
                _ => {}
            }
            seen += 1;
            if seen == 1 {
                continue;
            }
            if r.is_preliminary() {
                client.preliminary(cmd, &r);
                continue;
            }
            let line = pending.pop_front().expect("head exists");
            if let Line::Text(_, Some(cmd)) = &line {
                client.completed(cmd, &r);
            }
            match &line {
                Line::Text(_, Some(Command::Quit)) => {
                    assert_eq!(r.code, 221, "reply to QUIT: {r}");
                    ended = true;
                }
                Line::TooLong => {
                    assert_eq!(r.code, 500, "reply to an over-long line: {r}");
                    ended = true;
                }
                _ => {}
            }
        }
    }
    let first = match pending.front() {
        Some(Line::Text(l, _)) => format!("{l:?}"),
        other => format!("{other:?}"),
    };
    assert!(
        ended,
        "session closed with {} line(s) unanswered, first {first}",
        pending.len()
    );
    assert!(
        transcript.ends_with(b"\r\n"),
        "session ended inside a reply: {:?}",
        String::from_utf8_lossy(&transcript)
    );
    client.peers.finish()
}

fuzz_target!(
    init: {
        WORLD.get_or_init(World::new);
    },
    |input: &[u8]| {
        let world = WORLD.get_or_init(World::new);
        world::reset(&world.root, &world.base).expect("reset the served root");
        let received = session(world, input);
        for (i, d) in received.iter().enumerate() {
            assert!(
                !d.windows(world::SECRET.len()).any(|w| w == world::SECRET),
                "data connection {i} carried the file outside the root"
            );
        }
        // Connections the server made to the active port that no transfer took.
        while let Ok(s) = world.active.lock().expect("active channel").try_recv() {
            drop(s);
        }
        let by = Instant::now() + Duration::from_secs(10);
        while world.server.sessions() > 0 {
            assert!(Instant::now() < by, "{} session(s) still open 10 s after the client was answered", world.server.sessions());
            std::thread::sleep(Duration::from_micros(50));
        }
        let now = world::outside_state(&world.base, &world.root).expect("read outside tree");
        assert_eq!(now, world.outside, "something outside the served root changed");
    }
);
