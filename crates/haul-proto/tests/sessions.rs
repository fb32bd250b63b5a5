//! The client's session machines (`Login`, `client::Transfers`) against the server's
//! (`server::Session`) in memory, deterministically: every command and reply crosses as wire
//! text through `Command::parse` and `ReplyParser`, the server's files live in a map, and the
//! data channel is a queue of blocks the harness moves between the two drivers. Pipelining,
//! restart, checksums, errors and `ABOR`, both directions.

use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddr;

use haul_proto::client::{Direction, FileEvent, FileOp, Transfers};
use haul_proto::command::Restart;
use haul_proto::server::{
    DataConfig, LoginConfig, Outcome, ServerAction, Session, TransferOp, Verdict,
};
use haul_proto::{Action, Command, Login, RangeSet, Reply, ReplyParser};

/// Bytes per block on the simulated data channel.
const BLOCK: usize = 100;

/// A file's content, distinct per name.
fn content(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

/// The digest the harness's server answers `CKSM` with.
fn digest(b: &[u8]) -> String {
    let sum = b
        .iter()
        .fold(0u64, |a, &x| a.wrapping_mul(131).wrapping_add(u64::from(x)));
    format!("{sum:016x}")
}

/// The simulated data connections: each transfer's blocks (offset, bytes), in transfer order,
/// as MODE E carries one transfer after another on the same connections.
#[derive(Default)]
struct Wire {
    transfers: VecDeque<Vec<(u64, Vec<u8>)>>,
}

impl Wire {
    /// Queues one transfer of `ranges` of `src`, last block first (MODE E blocks may arrive in
    /// any order).
    fn send(&mut self, src: &[u8], ranges: &[(u64, u64)]) {
        let mut blocks = Vec::new();
        for &(a, b) in ranges {
            let mut at = a;
            while at < b {
                let end = b.min(at + BLOCK as u64);
                blocks.push((at, src[at as usize..end as usize].to_vec()));
                at = end;
            }
        }
        blocks.reverse();
        self.transfers.push_back(blocks);
    }

    /// Whether a whole transfer is waiting to be received.
    fn ready(&self) -> bool {
        !self.transfers.is_empty()
    }

    /// Receives the oldest transfer into `dst` (grown as needed); the ranges written.
    fn receive(&mut self, dst: &mut Vec<u8>) -> RangeSet {
        let mut got = RangeSet::new();
        for (at, b) in self.transfers.pop_front().expect("a transfer was sent") {
            let end = at as usize + b.len();
            if dst.len() < end {
                dst.resize(end, 0);
            }
            dst[at as usize..end].copy_from_slice(&b);
            got.insert(at, end as u64);
        }
        got
    }
}

/// A transfer the harness's server has started and not yet finished.
enum Running {
    /// Sending `path`; the data is queued at once unless `path` is held (then never: the
    /// client's `ABOR` cuts it).
    Send {
        path: String,
        ranges: Vec<(u64, u64)>,
        src: Vec<u8>,
    },
    /// Receiving into `path`, held ranges kept when restarting.
    Receive { path: String, restart: bool },
}

/// The server side: the machine, its driver, a file map and the control bytes it wrote.
struct Server {
    s: Session,
    files: BTreeMap<String, Vec<u8>>,
    out: String,
    running: Option<Running>,
    cached: bool,
    /// The file whose send is held until cut (for `ABOR`).
    hold: Option<String>,
    /// Data bytes the server sent or received.
    moved: u64,
    closed: bool,
}

impl Server {
    fn new() -> Server {
        let data = DataConfig {
            max_parallelism: 4,
            require_tls: false,
        };
        let client = "192.0.2.7".parse().unwrap();
        Server {
            s: Session::new(LoginConfig::default(), data, client),
            files: BTreeMap::new(),
            out: String::new(),
            running: None,
            cached: false,
            hold: None,
            moved: 0,
            closed: false,
        }
    }

    /// Takes one command line off the wire.
    fn line(&mut self, line: &str, wire: &mut Wire) {
        let cmd = Command::parse(line).expect("the client writes commands that parse");
        self.s.handle_command(cmd);
        self.perform(wire);
    }

    /// Performs the machine's actions.
    fn perform(&mut self, wire: &mut Wire) {
        while let Some(a) = self.s.poll_action() {
            match a {
                ServerAction::Reply(r) | ServerAction::Defer(r) => self.out += &r.encode(),
                ServerAction::Verify { user, pass } => {
                    let ok = user == "alice" && pass == "pw";
                    let v = if ok {
                        Verdict::Accepted
                    } else {
                        Verdict::Rejected
                    };
                    self.s.login().handle_verified(v);
                }
                ServerAction::Forward(c) => self.out += &self.answer(&c).encode(),
                ServerAction::Listen(_) => {
                    self.cached = false;
                    let at: SocketAddr = "192.0.2.1:50000".parse().unwrap();
                    self.s.transfers().listening(Ok(at));
                }
                ServerAction::Active(_) | ServerAction::DropData | ServerAction::DropCached => {
                    self.cached = false
                }
                ServerAction::Transfer(t) => self.start(t, wire),
                ServerAction::Abort => {
                    self.running = None;
                    self.s
                        .transfers()
                        .transfer_done(Outcome::Failed("aborted by the client (ABOR)".into()));
                }
                ServerAction::StartTls
                | ServerAction::StartGss
                | ServerAction::Adat(_)
                | ServerAction::ProtectControl => panic!("no TLS or GSI in this harness"),
                ServerAction::Close => self.closed = true,
            }
        }
    }

    /// The driver's answer to a forwarded command.
    fn answer(&self, c: &Command) -> Reply {
        match c {
            Command::Feat => Reply::multi(
                211,
                vec![
                    "Extensions supported:".into(),
                    " MODE E".into(),
                    "End".into(),
                ],
            ),
            Command::Cksm { path, .. } => match self.files.get(path) {
                Some(b) => Reply::new(213, digest(b)),
                None => Reply::new(550, format!("{path}: No such file or directory")),
            },
            Command::Noop => Reply::new(200, "NOOP command successful."),
            _ => Reply::new(502, "Not implemented here."),
        }
    }

    /// Starts a transfer as haul serve does: the file first, then the data channel, then 150.
    fn start(&mut self, t: haul_proto::server::Transfer, wire: &mut Wire) {
        let (running, sending) = match t.op {
            TransferOp::Send { path, range } => {
                let Some(src) = self.files.get(&path).cloned() else {
                    let r = Reply::new(550, format!("{path}: No such file or directory"));
                    return self.s.transfers().transfer_done(Outcome::Refused(r));
                };
                let len = src.len() as u64;
                let ranges = match (range, t.restart) {
                    (Some((o, l)), _) => vec![(o.min(len), (o + l).min(len))],
                    (None, None) => vec![(0, len)],
                    (None, Some(Restart::Offset(o))) => vec![(o.min(len), len)],
                    (None, Some(Restart::Ranges(r))) => r.missing(len),
                };
                (Running::Send { path, ranges, src }, true)
            }
            TransferOp::Receive { path, .. } if path.starts_with("ro/") => {
                let r = Reply::new(550, format!("{path}: Permission denied"));
                return self.s.transfers().transfer_done(Outcome::Refused(r));
            }
            TransferOp::Receive { path, .. } => {
                let restart = t.restart.is_some();
                (Running::Receive { path, restart }, false)
            }
            TransferOp::List { .. } => panic!("no listings in this harness"),
        };
        if !self.s.transfers().transfer_opening(self.cached, sending) {
            return;
        }
        self.running = Some(running);
        self.step(wire);
    }

    /// Moves a running transfer on: a send queues its data (unless held), a receive finishes
    /// once the client's data is all there.
    fn step(&mut self, wire: &mut Wire) {
        match self.running.take() {
            Some(Running::Send { path, ranges, src }) if self.hold.as_ref() != Some(&path) => {
                self.moved += ranges.iter().map(|(a, b)| b - a).sum::<u64>();
                wire.send(&src, &ranges);
                self.done();
            }
            Some(Running::Receive { path, restart }) if wire.ready() => {
                let mut file = if restart {
                    self.files.get(&path).cloned().unwrap_or_default()
                } else {
                    Vec::new()
                };
                let got = wire.receive(&mut file);
                self.moved += got.covered();
                if let Some(&(_, end)) = got.ranges().last() {
                    self.out += &Reply::new(111, format!("Range Marker 0-{end}")).encode();
                }
                self.files.insert(path, file);
                self.done();
            }
            other => self.running = other,
        }
    }

    fn done(&mut self) {
        self.cached = true;
        self.s.transfers().transfer_done(Outcome::Complete);
    }
}

/// The client side: its machines, the files it holds, and what happened to each file.
struct Client {
    t: Transfers,
    ops: Vec<FileOp>,
    parser: ReplyParser,
    local: Vec<Vec<u8>>,
    events: Vec<FileEvent>,
}

/// A download of `path` with its checksum.
fn get(path: &str) -> FileOp {
    FileOp {
        cksm: Some("MD5".into()),
        ..FileOp::new(Direction::Get, path)
    }
}

/// An upload to `path` with its checksum.
fn put(path: &str) -> FileOp {
    FileOp {
        cksm: Some("MD5".into()),
        ..FileOp::new(Direction::Put, path)
    }
}

/// Logs `alice` in with the client's `Login` against the server's `Session`; the server past
/// the login.
fn logged_in(server: &mut Server, wire: &mut Wire) -> ReplyParser {
    let mut login = Login::new("alice", "pw", false);
    let mut parser = ReplyParser::new();
    server.perform(wire);
    for _ in 0..50 {
        while let Some(c) = login.poll_transmit() {
            server.line(&c.to_string(), wire);
        }
        assert!(login.poll_action().is_none(), "{:?}", Action::StartTls);
        parser.extend(std::mem::take(&mut server.out).as_bytes());
        while let Some(r) = parser.next_reply().unwrap() {
            login.handle_reply(r).expect("the login succeeds");
        }
        if login.is_done() {
            return parser;
        }
    }
    panic!("the login did not finish");
}

/// Runs the files `ops` through a logged-in session with a window of `window`, the client's
/// held bytes per file in `local`; `abort_at` aborts that file once its data starts.
fn run(server: &mut Server, ops: Vec<FileOp>, local: Vec<Vec<u8>>, window: usize) -> Client {
    run_with(server, ops, local, window, None)
}

fn run_with(
    server: &mut Server,
    ops: Vec<FileOp>,
    local: Vec<Vec<u8>>,
    window: usize,
    abort_at: Option<usize>,
) -> Client {
    let mut wire = Wire::default();
    let parser = logged_in(server, &mut wire);
    server.line("MODE E", &mut wire);
    server.line("PASV", &mut wire);
    let mut c = Client {
        t: Transfers::new(window),
        ops: ops.clone(),
        parser,
        local,
        events: Vec::new(),
    };
    // The MODE and PASV replies.
    c.parser.extend(std::mem::take(&mut server.out).as_bytes());
    while c.parser.next_reply().unwrap().is_some() {}
    for op in ops {
        c.t.push(op);
    }
    let mut most_in_flight = 0;
    for _ in 0..10_000 {
        while let Some(cmd) = c.t.poll_command() {
            server.line(&cmd.to_string(), &mut wire);
        }
        most_in_flight = most_in_flight.max(c.t.in_flight());
        server.step(&mut wire);
        server.perform(&mut wire);
        c.parser.extend(std::mem::take(&mut server.out).as_bytes());
        while let Some(r) = c.parser.next_reply().unwrap() {
            let first = c.t.handle_reply(r).expect("replies in sequence");
            let more = std::iter::from_fn(|| c.t.poll_event());
            for e in first.into_iter().chain(more).collect::<Vec<_>>() {
                c.event(&e, &mut wire, abort_at, server);
                c.events.push(e);
            }
        }
        if c.t.is_done() {
            assert!(most_in_flight <= window, "window {window} exceeded");
            assert_eq!(server.s.held(), 0);
            assert!(server.running.is_none());
            return c;
        }
    }
    panic!("the transfers did not finish: {:?}", c.events);
}

impl Client {
    /// The driver's part of an event: move data, or abort.
    fn event(&mut self, e: &FileEvent, wire: &mut Wire, abort_at: Option<usize>, s: &mut Server) {
        let FileEvent::DataStart { file, .. } = *e else {
            return;
        };
        if abort_at == Some(file) {
            let abor = self.t.abort().expect("a transfer is in its data phase");
            s.line(&abor.to_string(), wire);
            return;
        }
        let op = self.ops[file].clone();
        match op.direction {
            Direction::Get => {
                wire.receive(&mut self.local[file]);
            }
            Direction::Put => {
                let src = &self.local[file];
                let len = src.len() as u64;
                let ranges = match &op.restart {
                    Some(h) => h.missing(len),
                    None => vec![(0, len)],
                };
                wire.send(src, &ranges);
            }
        }
    }

    fn done(&self, file: usize) -> bool {
        self.events.contains(&FileEvent::Done { file })
    }
}

/// The digest each `Done` file got.
fn checksums(c: &Client) -> BTreeMap<usize, String> {
    c.events
        .iter()
        .filter_map(|e| match e {
            FileEvent::Checksum { file, digest } => Some((*file, digest.clone())),
            _ => None,
        })
        .collect()
}

#[test]
fn pipelined_downloads_with_checksums_and_a_missing_file() {
    let mut server = Server::new();
    let names = ["a", "b", "gone", "c", "d", "e"];
    for (i, n) in names.iter().enumerate() {
        if *n != "gone" {
            server
                .files
                .insert(n.to_string(), content(i as u8, 250 + 97 * i));
        }
    }
    let ops: Vec<FileOp> = names.iter().map(|n| get(n)).collect();
    let c = run(&mut server, ops, vec![Vec::new(); names.len()], 3);
    let sums = checksums(&c);
    for (i, n) in names.iter().enumerate() {
        if *n == "gone" {
            assert!(
                c.events
                    .iter()
                    .any(|e| matches!(e, FileEvent::Failed { file, reply, .. }
                    if *file == i && reply.code == 550)),
                "{:?}",
                c.events
            );
            assert!(!c.done(i));
            continue;
        }
        assert!(c.done(i), "{n}: {:?}", c.events);
        assert_eq!(&c.local[i], &server.files[*n], "{n} arrived byte for byte");
        assert_eq!(
            sums[&i],
            digest(&server.files[*n]),
            "{n}: the server's digest"
        );
    }
}

#[test]
fn a_restarted_download_moves_only_the_missing_ranges() {
    let mut server = Server::new();
    let full = content(9, 1000);
    server.files.insert("big".into(), full.clone());
    let mut held = RangeSet::new();
    held.insert(0, 250);
    held.insert(600, 700);
    let mut local = vec![0u8; 1000];
    local[..250].copy_from_slice(&full[..250]);
    local[600..700].copy_from_slice(&full[600..700]);
    let op = FileOp {
        restart: Some(held),
        ..get("big")
    };
    let c = run(&mut server, vec![op], vec![local], 2);
    assert!(c.done(0), "{:?}", c.events);
    assert_eq!(c.local[0], full);
    assert_eq!(server.moved, 1000 - 350, "only what was missing moved");
}

#[test]
fn pipelined_uploads_with_markers_and_a_restart() {
    let mut server = Server::new();
    let files: Vec<Vec<u8>> = (0..4)
        .map(|i| content(40 + i, 300 + 211 * i as usize))
        .collect();
    // The server holds the first 200 bytes of `u3` from an earlier, cut upload.
    server.files.insert("u3".into(), files[3][..200].to_vec());
    let mut held = RangeSet::new();
    held.insert(0, 200);
    let mut ops: Vec<FileOp> = (0..4).map(|i| put(&format!("u{i}"))).collect();
    ops[3].restart = Some(held);
    let c = run(&mut server, ops, files.clone(), 2);
    let sums = checksums(&c);
    for (i, f) in files.iter().enumerate() {
        let name = format!("u{i}");
        assert!(c.done(i), "{name}: {:?}", c.events);
        assert_eq!(&server.files[&name], f, "{name} stored byte for byte");
        assert_eq!(sums[&i], digest(f));
        assert!(c
            .events
            .iter()
            .any(|e| matches!(e, FileEvent::RestartMarker { file, ranges }
            if *file == i && ranges.covers(f.len() as u64))));
    }
    let total: usize = files.iter().map(Vec::len).sum();
    assert_eq!(
        server.moved,
        total as u64 - 200,
        "the restart sent only the rest"
    );
}

#[test]
fn abor_cuts_one_download_and_the_pipeline_goes_on() {
    let mut server = Server::new();
    for (i, n) in ["x", "y", "z"].iter().enumerate() {
        server.files.insert(n.to_string(), content(i as u8, 500));
    }
    server.hold = Some("y".into());
    let ops = vec![get("x"), get("y"), get("z")];
    let c = run_with(&mut server, ops, vec![Vec::new(); 3], 3, Some(1));
    assert!(c.done(0) && c.done(2), "{:?}", c.events);
    assert!(
        c.events.contains(&FileEvent::Aborted { file: 1 }),
        "{:?}",
        c.events
    );
    assert!(!c.done(1));
    assert_eq!(c.local[0], server.files["x"]);
    assert_eq!(c.local[2], server.files["z"]);
}

#[test]
fn a_refused_upload_fails_alone() {
    let mut server = Server::new();
    let files = vec![content(1, 100), content(2, 100), content(3, 100)];
    // The harness's server refuses uploads under `ro/` before any data moves.
    let ops = vec![put("a"), put("ro/b"), put("c")];
    let c = run(&mut server, ops, files.clone(), 3);
    assert!(c.done(0) && c.done(2), "{:?}", c.events);
    assert!(
        c.events.iter().any(
            |e| matches!(e, FileEvent::Failed { file: 1, command, reply }
            if reply.code == 550 && *command == Command::Stor("ro/b".into()))
        ),
        "{:?}",
        c.events
    );
    assert!(!c.done(1));
    assert!(
        !server.files.contains_key("ro/b"),
        "nothing stored for the refused file"
    );
    assert_eq!(server.files["a"], files[0]);
    assert_eq!(server.files["c"], files[2]);
    assert_eq!(server.moved, 200, "the refused file's bytes never moved");
}
