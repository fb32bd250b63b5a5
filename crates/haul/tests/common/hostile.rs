//! A fake GridFTP server for testing `haul cp` against a hostile peer. It speaks just enough of
//! the control protocol (220, USER/PASS, FEAT, TYPE, MODE, OPTS, SBUF, PORT/PASV, SIZE, MLST,
//! MLSD, RETR, STOR, CKSM, REST, MKD, QUIT) to serve an in-memory tree, and can be told to
//! misbehave: name a decoy "third host" in its PASV replies, inject a data connection from
//! another source address, send fewer bytes than it announced, list a directory that contains
//! itself forever. What it saw is kept in a [`Log`] for the test to check.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use haul_proto::hostport;
use haul_proto::mode_e::{Descriptor, Header, HEADER_LEN};
use haul_transport::mode_e::Progress;
use haul_transport::plut::{self, params};
use haul_xfer::checksum::{Algorithm, Hasher};

/// The address a test treats as another host: loopback, but not the control peer 127.0.0.1.
pub const OTHER_HOST: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 2);

/// How long the server waits for a data connection before giving up on a command.
const DATA_WAIT: Duration = Duration::from_secs(10);

/// An endless directory: every directory at or under `path` lists one subdirectory `d`, forever.
#[derive(Clone, Debug)]
pub struct Endless {
    /// Where the endless tree starts.
    pub path: String,
    /// Give every directory in it the same `Unique` fact, as a symlink loop would.
    pub same_unique: bool,
}

/// What the server serves and how it misbehaves.
#[derive(Clone, Debug, Default)]
pub struct Config {
    /// Files by absolute path; their parents are directories.
    pub files: BTreeMap<String, Vec<u8>>,
    /// Advertise this address (with the real data port) in PASV replies; a decoy listener there
    /// accepts and counts what connects.
    pub pasv_ip: Option<Ipv4Addr>,
    /// Before each RETR's data connection, connect from this address and send these bytes as
    /// the whole file.
    pub inject: Option<(Ipv4Addr, Vec<u8>)>,
    /// RETR sends only the first this many bytes of a file, then a complete EOF and `226`.
    pub short: Option<usize>,
    /// A directory that contains itself forever.
    pub endless: Option<Endless>,
    /// Every MLSD entry is listed twice.
    pub duplicate_entries: bool,
    /// RETR answers `150` and then sends nothing, on the data channel or the control one.
    pub stall: bool,
    /// Offer PLUT (`PLUT 1` in FEAT); with `inject`, a RETR over PLUT first sends the forged
    /// bytes from that address to the client's flow, then the real ones.
    pub plut: bool,
}

impl Config {
    /// A well-behaved server of one file, `data` at `path`, to change with struct update syntax.
    pub fn serving(path: &str, data: &[u8]) -> Config {
        let files = [(path.to_string(), data.to_vec())].into();
        Config {
            files,
            ..Config::default()
        }
    }
}

/// What the server saw.
#[derive(Debug, Default)]
pub struct Log {
    /// Addresses named by PORT commands.
    pub ports: Vec<SocketAddr>,
    /// Data connections the decoy listener accepted.
    pub decoy_hits: usize,
    /// Files stored, by path.
    pub stored: BTreeMap<String, Vec<u8>>,
    /// MLSD commands answered.
    pub listings: usize,
    /// Logins (PASS commands answered).
    pub logins: usize,
}

/// A running hostile server; its threads end with the test process.
pub struct Hostile {
    /// The control address.
    pub addr: SocketAddr,
    /// What it saw.
    pub log: Arc<Mutex<Log>>,
}

impl Hostile {
    /// `ftp://127.0.0.1:PORT/path`.
    pub fn url(&self, path: &str) -> String {
        format!("ftp://{}{path}", self.addr)
    }

    /// The log, locked.
    pub fn log(&self) -> std::sync::MutexGuard<'_, Log> {
        self.log.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Starts a server with `cfg` on a free port of 127.0.0.1.
pub fn start(cfg: Config) -> Hostile {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind control listener");
    let addr = l.local_addr().unwrap();
    let log = Arc::new(Mutex::new(Log::default()));
    let (cfg, shared) = (Arc::new(cfg), log.clone());
    std::thread::spawn(move || {
        for c in l.incoming().flatten() {
            let (cfg, log) = (cfg.clone(), shared.clone());
            std::thread::spawn(move || {
                let _ = Conn {
                    cfg,
                    log,
                    ctl: c,
                    port: None,
                    active: None,
                    plut: (None, None),
                    pasv: None,
                    data: Vec::new(),
                }
                .run();
            });
        }
    });
    Hostile { addr, log }
}

/// One control connection's state.
struct Conn {
    cfg: Arc<Config>,
    log: Arc<Mutex<Log>>,
    ctl: TcpStream,
    port: Option<SocketAddr>,
    /// The active data connection to `port`, kept across files.
    active: Option<TcpStream>,
    /// PLUT parameters (`OPTS HAUL`) and the flow of the next RETR (`PLUT PORT`).
    plut: (Option<params::Params>, Option<(SocketAddr, u64)>),
    /// The real passive listener and the decoy, if any.
    pasv: Option<(TcpListener, Option<TcpListener>)>,
    /// Accepted passive data connections, kept for the next STOR (the client reuses them).
    data: Vec<TcpStream>,
}

fn hex_md5(data: &[u8]) -> String {
    let mut h = Hasher::new(Algorithm::Md5);
    h.update(data);
    h.finish_hex()
}

/// Writes `data` as one MODE E transfer on `c`: blocks, then EOF (one EOD) + EOD. The
/// connection stays open for the next file, as real servers keep theirs: a new connection per
/// file could be taken for the file before it by a receiver still accepting.
fn send_mode_e(c: &mut TcpStream, data: &[u8]) -> std::io::Result<()> {
    for (i, chunk) in data.chunks(64 << 10).enumerate() {
        c.write_all(&Header::data((i * (64 << 10)) as u64, chunk.len() as u64).encode())?;
        c.write_all(chunk)?;
    }
    c.write_all(&Header::eof(1, true).encode())?;
    c.flush()
}

/// Reads MODE E blocks from `c` into `out` until this connection's EOD; returns the EOF count if
/// this connection carried it.
fn recv_mode_e(c: &mut TcpStream, out: &mut Vec<u8>) -> std::io::Result<Option<u64>> {
    let mut eof = None;
    loop {
        let mut raw = [0u8; HEADER_LEN];
        c.read_exact(&mut raw)?;
        let h = Header::decode(&raw).map_err(|e| std::io::Error::new(ErrorKind::InvalidData, e))?;
        if let Some(n) = h.eod_count() {
            eof = Some(n);
        } else if h.count > 0 {
            let end = (h.offset + h.count) as usize;
            if out.len() < end {
                out.resize(end, 0);
            }
            c.read_exact(&mut out[h.offset as usize..end])?;
        }
        if h.descriptor.has(Descriptor::EOD) {
            return Ok(eof);
        }
    }
}

impl Conn {
    fn reply(&mut self, text: &str) -> std::io::Result<()> {
        self.ctl.write_all(format!("{text}\r\n").as_bytes())
    }

    fn is_dir(&self, path: &str) -> bool {
        let p = path.trim_end_matches('/');
        self.cfg
            .endless
            .as_ref()
            .is_some_and(|e| p.starts_with(e.path.trim_end_matches('/')))
            || self
                .cfg
                .files
                .keys()
                .any(|f| f.starts_with(&format!("{p}/")))
    }

    fn run(mut self) -> std::io::Result<()> {
        self.ctl.set_nodelay(true)?;
        self.reply("220 hostile test server")?;
        let mut lines = BufReader::new(self.ctl.try_clone()?).lines();
        while let Some(line) = lines.next().transpose()? {
            let (verb, arg) = line.split_once(' ').unwrap_or((&line, ""));
            let arg = arg.trim().to_string();
            match verb.to_ascii_uppercase().as_str() {
                "USER" => self.reply("331 password please")?,
                "PASS" => {
                    self.log.lock().unwrap().logins += 1;
                    self.reply("230 logged in")?
                }
                "FEAT" if self.cfg.plut => {
                    self.reply("211-Features:\r\n CKSM MD5\r\n PLUT 1\r\n211 End")?
                }
                "FEAT" => self.reply("211-Features:\r\n CKSM MD5\r\n211 End")?,
                "OPTS" if arg.to_ascii_uppercase().starts_with("HAUL ") => {
                    self.plut.0 = params::parse_opts(&arg[5..]).map_err(std::io::Error::other)?;
                    self.reply("200 OK")?
                }
                "PLUT" => self.plut_port(&arg)?,
                "RETR" if self.plut.1.is_some() => self.retr_plut(&arg)?,
                "TYPE" | "MODE" | "OPTS" | "SBUF" | "NOOP" => self.reply("200 OK")?,
                "REST" => self.reply("350 restart noted")?,
                "MKD" => self.reply("257 created")?,
                "PORT" => {
                    let a = hostport::parse_port(&arg).map_err(std::io::Error::other)?;
                    self.port = Some(a);
                    self.active = None;
                    self.log.lock().unwrap().ports.push(a);
                    self.reply("200 PORT OK")?
                }
                "PASV" => self.pasv()?,
                "SIZE" => match self.cfg.files.get(&arg) {
                    Some(d) => self.reply(&format!("213 {}", d.len()))?,
                    None => self.reply("550 no such file")?,
                },
                "MLST" => self.mlst(&arg)?,
                "MLSD" => self.mlsd(&arg)?,
                "RETR" => self.retr(&arg)?,
                "STOR" => self.stor(&arg)?,
                "CKSM" => self.cksm(&arg)?,
                "QUIT" => return self.reply("221 bye"),
                _ => self.reply("502 not implemented here")?,
            }
        }
        Ok(())
    }

    fn pasv(&mut self) -> std::io::Result<()> {
        let real = TcpListener::bind("127.0.0.1:0")?;
        let port = real.local_addr()?.port();
        let decoy = match self.cfg.pasv_ip {
            Some(ip) => Some(TcpListener::bind((ip, port))?),
            None => None,
        };
        let shown = SocketAddr::new(
            IpAddr::V4(self.cfg.pasv_ip.unwrap_or(Ipv4Addr::LOCALHOST)),
            port,
        );
        self.pasv = Some((real, decoy));
        self.data.clear();
        self.reply(&format!(
            "227 Entering Passive Mode ({})",
            hostport::format_port(&shown)
        ))
    }

    /// Accepts one passive data connection on the real listener or the decoy (counted).
    fn accept(&mut self) -> std::io::Result<TcpStream> {
        let (real, decoy) = self
            .pasv
            .as_ref()
            .ok_or_else(|| std::io::Error::other("no PASV"))?;
        let deadline = Instant::now() + DATA_WAIT;
        for l in std::iter::once(real).chain(decoy) {
            l.set_nonblocking(true)?;
        }
        loop {
            for (i, l) in std::iter::once(real).chain(decoy).enumerate() {
                match l.accept() {
                    Ok((c, _)) => {
                        if i == 1 {
                            self.log.lock().unwrap().decoy_hits += 1;
                        }
                        c.set_nonblocking(false)?;
                        return Ok(c);
                    }
                    Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                    Err(e) => return Err(e),
                }
            }
            if Instant::now() > deadline {
                return Err(std::io::Error::new(
                    ErrorKind::TimedOut,
                    "no passive data connection",
                ));
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    fn facts(&self, path: &str) -> Option<String> {
        if let Some(d) = self.cfg.files.get(path) {
            return Some(format!("Type=file;Size={};", d.len()));
        }
        if !self.is_dir(path) {
            return None;
        }
        let unique = match &self.cfg.endless {
            Some(e) if e.same_unique && path.starts_with(&e.path) => "loop".to_string(),
            _ => path.to_string(),
        };
        Some(format!("Type=dir;Size=4096;Unique={unique};"))
    }

    fn mlst(&mut self, path: &str) -> std::io::Result<()> {
        match self.facts(path) {
            Some(f) => self.reply(&format!("250-Listing {path}\r\n {f} {path}\r\n250 End")),
            None => self.reply("550 no such file or directory"),
        }
    }

    fn mlsd(&mut self, dir: &str) -> std::io::Result<()> {
        let dir = dir.trim_end_matches('/');
        let mut names: Vec<String> = Vec::new();
        if self
            .cfg
            .endless
            .as_ref()
            .is_some_and(|e| dir.starts_with(&e.path))
        {
            names.push("d".to_string());
        }
        for f in self.cfg.files.keys() {
            if let Some(rest) = f.strip_prefix(&format!("{dir}/")) {
                let first = rest.split('/').next().unwrap_or(rest).to_string();
                if !names.contains(&first) {
                    names.push(first);
                }
            }
        }
        let mut body = String::new();
        for n in &names {
            let full = format!("{dir}/{n}");
            let facts = self
                .facts(&full)
                .unwrap_or_else(|| "Type=file;Size=0;".into());
            let times = if self.cfg.duplicate_entries { 2 } else { 1 };
            for _ in 0..times {
                body.push_str(&format!("{facts} {n}\r\n"));
            }
        }
        self.reply("150 listing")?;
        let mut c = self.accept()?;
        c.write_all(body.as_bytes())?;
        drop(c);
        self.log.lock().unwrap().listings += 1;
        self.reply("226 listed")
    }

    /// The bytes RETR sends for `path` (a prefix when told to send short).
    fn sent(&self, path: &str) -> Vec<u8> {
        let data = self.cfg.files.get(path).cloned().unwrap_or_default();
        match self.cfg.short {
            Some(n) => data[..n.min(data.len())].to_vec(),
            None => data,
        }
    }

    fn retr(&mut self, path: &str) -> std::io::Result<()> {
        let Some(to) = self.port else {
            return self.reply("425 no PORT");
        };
        if self.cfg.stall {
            return self.reply("150 sending, some day");
        }
        if !self.cfg.files.contains_key(path) {
            return self.reply("550 no such file");
        }
        self.reply("150 sending")?;
        if let (Some((ip, forged)), None) = (&self.cfg.inject, &self.active) {
            let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)?;
            s.bind(&SocketAddr::new(IpAddr::V4(*ip), 0).into())?;
            s.connect(&to.into())?;
            // The client may close it at once: what happens to these bytes is its business.
            let _ = send_mode_e(&mut s.into(), forged);
        }
        let mut c = match self.active.take() {
            Some(c) => c,
            None => TcpStream::connect(to)?,
        };
        send_mode_e(&mut c, &self.sent(path))?;
        self.active = Some(c);
        self.reply("226 transfer complete")
    }

    /// `PLUT PORT h1,h2,h3,h4,p1,p2 SESSION`: the flow the next RETR goes to.
    fn plut_port(&mut self, arg: &str) -> std::io::Result<()> {
        let w: Vec<&str> = arg.split_whitespace().collect();
        let bad = std::io::Error::other;
        let to = hostport::parse_port(w.get(1).unwrap_or(&"")).map_err(bad)?;
        let session = params::parse_session(w.get(2).unwrap_or(&"")).map_err(bad)?;
        self.plut.1 = Some((to, session));
        self.reply("200 PLUT PORT OK")
    }

    /// RETR over PLUT: the forged bytes from the injecting address first (given up on after a
    /// second without acknowledgements), then the real ones from 127.0.0.1.
    fn retr_plut(&mut self, path: &str) -> std::io::Result<()> {
        let (Some(p), Some((to, session))) = (self.plut.0, self.plut.1.take()) else {
            return self.reply("503 no PLUT flow");
        };
        self.reply("150 sending over PLUT")?;
        let cfg = plut::config(session, p.mds, p.rate, 16 << 20);
        let tuning = plut::Tuning {
            idle_timeout: Duration::from_secs(1),
            ..plut::Tuning::default()
        };
        let send = |from: Ipv4Addr, data: Vec<u8>| {
            let sock = plut::bind(SocketAddr::new(IpAddr::V4(from), 0), &tuning)?;
            let len = data.len() as u64;
            plut::send(
                &sock,
                to,
                &data,
                0,
                len,
                &cfg,
                &tuning,
                &Progress::default(),
            )
            .map_err(std::io::Error::other)
        };
        if let Some((ip, forged)) = &self.cfg.inject {
            let _ = send(*ip, forged.clone());
        }
        let _ = send(Ipv4Addr::LOCALHOST, self.sent(path));
        self.reply("226 transfer complete")
    }

    fn stor(&mut self, path: &str) -> std::io::Result<()> {
        self.reply("150 receiving")?;
        let mut out = Vec::new();
        let (mut eods, mut expected) = (0, None);
        let mut next = 0;
        while expected.is_none_or(|n| eods < n) {
            if next == self.data.len() {
                let c = self.accept()?;
                self.data.push(c);
            }
            if let Some(n) = recv_mode_e(&mut self.data[next], &mut out)? {
                expected = Some(n);
            }
            eods += 1;
            next += 1;
        }
        self.log
            .lock()
            .unwrap()
            .stored
            .insert(path.to_string(), out);
        self.reply("226 stored")
    }

    fn cksm(&mut self, arg: &str) -> std::io::Result<()> {
        let path = arg.splitn(4, ' ').nth(3).unwrap_or("").to_string();
        let stored = self.log.lock().unwrap().stored.get(&path).cloned();
        let data = stored.unwrap_or_else(|| self.sent(&path));
        self.reply(&format!("213 {}", hex_md5(&data)))
    }
}
