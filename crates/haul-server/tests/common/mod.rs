//! Test helpers: an in-process server, a raw control client and MODE E data helpers.
#![allow(dead_code)]

use std::fs::File;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::thread::JoinHandle;
use std::time::Duration;

use haul_proto::{Reply, ReplyParser};
use haul_server::{Server, ServerConfig, ServerHandle};
use haul_transport::mode_e::{self, Progress};
use haul_transport::{socket, Conn};

/// Starts a server on `root` with an ephemeral port, after `tweak` adjusts the config.
pub fn server(root: &Path, tweak: impl FnOnce(&mut ServerConfig)) -> ServerHandle {
    let mut cfg = ServerConfig::new(root);
    cfg.listen = "127.0.0.1:0".parse().unwrap();
    cfg.anonymous = true;
    cfg.anonymous_write = true;
    cfg.marker_interval = Duration::from_millis(50);
    tweak(&mut cfg);
    Server::spawn(cfg).expect("server starts")
}

/// A raw control-channel client.
pub struct Ctl {
    pub s: TcpStream,
    p: ReplyParser,
}

impl Ctl {
    /// Connects and returns the client with the greeting consumed.
    pub fn connect(addr: SocketAddr) -> Ctl {
        Ctl::from_stream(TcpStream::connect(addr).expect("connect control"))
    }

    /// A client on a connected stream, with the greeting consumed.
    pub fn from_stream(s: TcpStream) -> Ctl {
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let mut c = Ctl::from_stream_raw(s);
        let r = c.reply();
        assert_eq!(r.code, 220, "greeting: {r}");
        c
    }

    /// A client on a connected stream, nothing read yet.
    pub fn from_stream_raw(s: TcpStream) -> Ctl {
        Ctl {
            s,
            p: ReplyParser::new(),
        }
    }

    /// Connects and logs in anonymously.
    pub fn anon(addr: SocketAddr) -> Ctl {
        let mut c = Ctl::connect(addr);
        c.login("anonymous", "test@");
        c
    }

    /// USER + PASS, expecting 230.
    pub fn login(&mut self, user: &str, pass: &str) {
        assert_eq!(self.cmd(&format!("USER {user}")).code, 331);
        let r = self.cmd(&format!("PASS {pass}"));
        assert_eq!(r.code, 230, "login: {r}");
    }

    /// Writes raw bytes.
    pub fn raw(&mut self, b: &[u8]) {
        self.s.write_all(b).unwrap();
    }

    /// Sends one command line.
    pub fn send(&mut self, line: &str) {
        self.raw(format!("{line}\r\n").as_bytes());
    }

    /// Reads the next reply (of any kind), or None at end of stream.
    pub fn try_reply(&mut self) -> Option<Reply> {
        let mut buf = [0u8; 4096];
        loop {
            if let Some(r) = self.p.next_reply().expect("well-formed reply") {
                return Some(r);
            }
            match self.s.read(&mut buf) {
                Ok(0) => return None,
                Ok(n) => self.p.extend(&buf[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return None,
                Err(e) => panic!("reading reply: {e}"),
            }
        }
    }

    /// Reads the next reply.
    pub fn reply(&mut self) -> Reply {
        self.try_reply()
            .expect("server closed the control connection")
    }

    /// Sends a command and returns its reply.
    pub fn cmd(&mut self, line: &str) -> Reply {
        self.send(line);
        self.reply()
    }

    /// Reads replies up to the first that is not preliminary; returns (preliminary, final).
    pub fn finish(&mut self) -> (Vec<Reply>, Reply) {
        let mut pre = Vec::new();
        loop {
            let r = self.reply();
            if r.is_preliminary() {
                pre.push(r);
            } else {
                return (pre, r);
            }
        }
    }

    /// PASV; the address to connect to.
    pub fn pasv(&mut self) -> SocketAddr {
        let r = self.cmd("PASV");
        assert_eq!(r.code, 227, "{r}");
        haul_proto::hostport::find_in_reply(&r.text()).expect("address in 227")
    }

    /// Listens locally and sends PORT; returns the listener.
    pub fn port(&mut self) -> TcpListener {
        let l = socket::listen("127.0.0.1:0".parse().unwrap(), None).unwrap();
        let a = l.local_addr().unwrap();
        let r = self.cmd(&format!("PORT {}", haul_proto::hostport::format_port(&a)));
        assert_eq!(r.code, 200, "{r}");
        l
    }

    /// True once the server has closed the connection (after any remaining replies).
    pub fn is_closed(&mut self) -> bool {
        while self.try_reply().is_some() {}
        true
    }
}

/// Deterministic pseudo-random bytes.
pub fn random_bytes(n: usize, mut seed: u64) -> Vec<u8> {
    let mut v = Vec::with_capacity(n + 8);
    while v.len() < n {
        seed ^= seed >> 12;
        seed ^= seed << 25;
        seed ^= seed >> 27;
        v.extend_from_slice(&seed.wrapping_mul(0x2545_F491_4F6C_DD1D).to_le_bytes());
    }
    v.truncate(n);
    v
}

/// Accepts `n` connections on `l` (the server connects for RETR).
pub fn accept_n(l: &TcpListener, n: usize) -> Vec<Conn> {
    (0..n)
        .map(|_| {
            Box::new(
                socket::accept_timeout(l, Duration::from_secs(20))
                    .expect("server connects")
                    .0,
            ) as Conn
        })
        .collect()
}

/// Receives one MODE E transfer from `conns` into a new file at `out`, in a thread.
pub fn receive_into(conns: Vec<Conn>, out: &Path) -> JoinHandle<std::io::Result<Vec<Conn>>> {
    let f = File::create(out).unwrap();
    std::thread::spawn(move || {
        let p = Progress::default();
        mode_e::receive(conns, None, &f, &p, None, 1 << 20).map(|r| r.reusable)
    })
}

/// Connects `n` data connections to `addr` (the client sends for STOR).
pub fn connect_n(addr: SocketAddr, n: usize) -> Vec<Conn> {
    (0..n)
        .map(|_| Box::new(socket::connect(addr, None, Duration::from_secs(5)).unwrap()) as Conn)
        .collect()
}

/// Sends `data` over `conns` in MODE E in a thread; returns the connections afterwards.
pub fn send_bytes(
    mut conns: Vec<Conn>,
    data: Vec<u8>,
    block: usize,
) -> JoinHandle<std::io::Result<Vec<Conn>>> {
    std::thread::spawn(move || {
        let src = Mem(data);
        let len = src.0.len() as u64;
        mode_e::send(
            &mut conns,
            &src,
            &[(0, len)],
            block,
            &Progress::default(),
            false,
        )
        .map(|()| conns)
    })
}

/// An in-memory source.
pub struct Mem(pub Vec<u8>);

impl haul_transport::io::Source for Mem {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
        let s = (offset as usize).min(self.0.len());
        let n = buf.len().min(self.0.len() - s);
        buf[..n].copy_from_slice(&self.0[s..s + n]);
        Ok(n)
    }
}

/// Waits (polling, at most 20 s) until `done` holds; false if it never did.
pub fn eventually(mut done: impl FnMut() -> bool) -> bool {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while std::time::Instant::now() < deadline {
        if done() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    done()
}

/// A TCP connection to `to` made from the loopback address `from` (all of 127.0.0.0/8 is
/// loopback, so tests can be clients at several addresses).
pub fn connect_from(from: [u8; 4], to: SocketAddr) -> TcpStream {
    let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    s.bind(&SocketAddr::from((from, 0)).into()).unwrap();
    s.connect(&to.into()).unwrap();
    s.into()
}
