//! MODE E and stream mode over real loopback TCP connections, and large downloads written
//! around the page cache (`DirectFile`, with the writes behind the socket reads).

use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use haul_transport::io::{aligned, on_tmpfs, DirectFile, Sink, DIRECT_ALIGN};
use haul_transport::mode_e::{self, Acceptor, Progress};
use haul_transport::{socket, stream, Conn};
use rand::{Rng, SeedableRng};

struct ListenAcceptor(TcpListener);

impl Acceptor for ListenAcceptor {
    fn accept(&self, wait: Duration) -> std::io::Result<Option<Conn>> {
        match socket::accept_timeout(&self.0, wait) {
            Ok((c, _)) => Ok(Some(Box::new(c))),
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => Ok(None),
            Err(e) => Err(e),
        }
    }
}

fn data(len: usize, seed: u64) -> Vec<u8> {
    let mut r = rand::rngs::StdRng::seed_from_u64(seed);
    (0..len).map(|_| r.gen()).collect()
}

struct Mem(std::sync::Mutex<Vec<u8>>);

impl Sink for Mem {
    fn write_at(&self, buf: &[u8], offset: u64) -> std::io::Result<()> {
        let mut v = self.0.lock().unwrap();
        let end = offset as usize + buf.len();
        if v.len() < end {
            v.resize(end, 0);
        }
        v[offset as usize..end].copy_from_slice(buf);
        Ok(())
    }
}

#[test]
fn mode_e_parallel_with_reuse() {
    let l = socket::listen("127.0.0.1:0".parse().unwrap(), None).unwrap();
    let addr = l.local_addr().unwrap();
    let acceptor = ListenAcceptor(l);
    let streams = 4;
    let files = [data(3_000_017, 1), data(65_536, 2), data(0, 3)];
    let sender = std::thread::spawn(move || {
        let mut conns: Vec<Conn> = (0..streams)
            .map(|_| Box::new(socket::connect(addr, None, Duration::from_secs(5)).unwrap()) as Conn)
            .collect();
        for (i, f) in files.iter().enumerate() {
            let p = Progress::default();
            let last = i + 1 == files.len();
            mode_e::send(&mut conns, f, &[(0, f.len() as u64)], 64 * 1024, &p, last).unwrap();
            assert_eq!(p.bytes(), f.len() as u64);
        }
        files
    });
    let mut pool = Vec::new();
    let mut got = Vec::new();
    for i in 0..3 {
        let sink = Mem(Default::default());
        let p = Progress::default();
        let acc: Option<&dyn Acceptor> = if i == 0 { Some(&acceptor) } else { None };
        let r =
            mode_e::receive(std::mem::take(&mut pool), acc, &sink, &p, None, 64 * 1024).unwrap();
        pool = r.reusable;
        got.push((sink.0.into_inner().unwrap(), p.ranges()));
    }
    let files = sender.join().unwrap();
    for ((bytes, ranges), f) in got.iter().zip(files.iter()) {
        assert_eq!(bytes, f);
        assert!(ranges.covers(f.len() as u64));
    }
    assert!(pool.is_empty(), "the last transfer closed its connections");
}

#[test]
fn mode_e_partial_ranges_only() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let f = data(1_000_000, 7);
    let src = f.clone();
    let t = std::thread::spawn(move || {
        let mut conns: Vec<Conn> = vec![Box::new(TcpStream::connect(addr).unwrap())];
        let p = Progress::default();
        mode_e::send(
            &mut conns,
            &src,
            &[(100, 5000), (900_000, 1_000_000)],
            4096,
            &p,
            true,
        )
        .unwrap();
        p.bytes()
    });
    let (c, _) = l.accept().unwrap();
    let sink = Mem(Default::default());
    let p = Progress::default();
    mode_e::receive(vec![Box::new(c)], None, &sink, &p, Some(1_000_000), 4096).unwrap();
    assert_eq!(t.join().unwrap(), 4900 + 100_000);
    assert_eq!(p.ranges().ranges(), &[(100, 5000), (900_000, 1_000_000)]);
    let got = sink.0.into_inner().unwrap();
    assert_eq!(&got[100..5000], &f[100..5000]);
    assert_eq!(&got[900_000..], &f[900_000..]);
}

#[test]
fn mode_e_truncated_stream_is_an_error() {
    use std::io::Write;
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let t = std::thread::spawn(move || {
        let mut c = TcpStream::connect(addr).unwrap();
        c.write_all(&haul_proto::Header::data(0, 1000).encode())
            .unwrap();
        c.write_all(&[1u8; 10]).unwrap();
    });
    let (c, _) = l.accept().unwrap();
    t.join().unwrap();
    let sink = Mem(Default::default());
    let err = mode_e::receive(
        vec![Box::new(c)],
        None,
        &sink,
        &Progress::default(),
        None,
        4096,
    )
    .err()
    .expect("truncated block must fail");
    assert!(err.to_string().contains("truncated"), "{err}");
}

#[test]
fn stream_mode_round_trip() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let f = data(2_500_000, 9);
    let src = f.clone();
    let t = std::thread::spawn(move || {
        let c: Conn = Box::new(TcpStream::connect(addr).unwrap());
        stream::send(c, &src, 0, None, &Progress::default()).unwrap();
    });
    let (c, _) = l.accept().unwrap();
    let sink = Mem(Default::default());
    let n = stream::receive(Box::new(c), &sink, 0, &Progress::default()).unwrap();
    t.join().unwrap();
    assert_eq!(n, f.len() as u64);
    assert_eq!(sink.0.into_inner().unwrap(), f);
}

/// A file sent with `sendfile` (`ZeroCopyFile`) over four MODE E streams arrives whole, and a
/// source that must see the bytes (here a hashing one) still does.
#[test]
fn mode_e_zero_copy_file_round_trip() {
    use haul_transport::checksum::{Algorithm, Hasher, HashingSource};
    use haul_transport::io::ZeroCopyFile;
    use std::io::Write;
    let l = socket::listen("127.0.0.1:0".parse().unwrap(), None).unwrap();
    let addr = l.local_addr().unwrap();
    let acceptor = ListenAcceptor(l);
    let want = data(5_000_003, 9);
    let mut f = tempfile::tempfile().unwrap();
    f.write_all(&want).unwrap();
    let len = want.len() as u64;
    let sender = std::thread::spawn(move || {
        let mut conns: Vec<Conn> = (0..4)
            .map(|_| Box::new(socket::connect(addr, None, Duration::from_secs(5)).unwrap()) as Conn)
            .collect();
        let src = ZeroCopyFile(f);
        let hashing = HashingSource::new(&src, Algorithm::Xxhc);
        let p = Progress::default();
        mode_e::send(&mut conns, &hashing, &[(0, len)], 256 * 1024, &p, true).unwrap();
        hashing.finish(len).expect("every byte read once")
    });
    let sink = Mem(std::sync::Mutex::new(Vec::new()));
    let p = Progress::default();
    mode_e::receive(Vec::new(), Some(&acceptor), &sink, &p, Some(len), 1 << 20).unwrap();
    let digest = sender.join().unwrap();
    assert_eq!(*sink.0.lock().unwrap(), want);
    let mut h = Hasher::new(Algorithm::Xxhc);
    h.update(&want);
    assert_eq!(digest, h.finish_hex());
}

/// Sends `src` over four streams in blocks of `block` bytes to a receive into `sink`; the
/// receive's result and what it recorded.
fn send_and_receive(
    src: Vec<u8>,
    block: usize,
    sink: &dyn Sink,
) -> (std::io::Result<()>, Progress) {
    let l = socket::listen("127.0.0.1:0".parse().unwrap(), None).unwrap();
    let addr = l.local_addr().unwrap();
    let acceptor = ListenAcceptor(l);
    let len = src.len() as u64;
    let sender = std::thread::spawn(move || {
        let mut conns: Vec<Conn> = (0..4)
            .map(|_| Box::new(socket::connect(addr, None, Duration::from_secs(5)).unwrap()) as Conn)
            .collect();
        let p = Progress::default();
        // The receiver may stop early (a failed write); the sender then fails too.
        let _ = mode_e::send(&mut conns, &src, &[(0, len)], block, &p, true);
    });
    let p = Progress::default();
    let r = mode_e::receive(Vec::new(), Some(&acceptor), sink, &p, Some(len), 1 << 20);
    sender.join().unwrap();
    (r.map(|_| ()), p)
}

#[test]
fn the_alignment_rule() {
    let mut v = vec![0u8; 3 * DIRECT_ALIGN];
    let pad = v.as_ptr().align_offset(DIRECT_ALIGN);
    let a = &mut v[pad..pad + DIRECT_ALIGN];
    assert!(aligned(a, 0));
    assert!(aligned(a, 8192));
    assert!(!aligned(a, 100), "offset");
    assert!(!aligned(&a[..100], 0), "length");
    assert!(!aligned(&v[pad + 1..pad + 1 + DIRECT_ALIGN], 0), "address");
}

/// 9 MiB and a short tail, in the 256 KiB blocks haul's server sends, over four streams into
/// an `O_DIRECT` file: identical, every whole block written around the cache, the tail through
/// it, and every byte recorded as received.
#[test]
fn a_direct_file_receives_four_streams_whole() {
    let Some((_d, path, direct)) = direct_file() else {
        return;
    };
    let tail = 12_345;
    let want = data((9 << 20) + tail, 5);
    direct.reserve(want.len() as u64);
    assert!(direct.writes_wait(), "a receiver writes behind its reads");
    let (r, p) = send_and_receive(want.clone(), 256 * 1024, &direct);
    r.unwrap();
    assert!(p.ranges().covers(want.len() as u64));
    assert_eq!(p.bytes(), want.len() as u64);
    let around = direct.bytes_direct();
    drop(direct);
    assert!(std::fs::read(&path).unwrap() == want, "identical copy");
    let aligned_part = (want.len() / DIRECT_ALIGN * DIRECT_ALIGN) as u64;
    assert!(
        around >= aligned_part - (1 << 20),
        "{around} of {} bytes went around the cache",
        want.len()
    );
}

/// A reservation is made on disk when it leaves the file system its spare, and refused (the
/// file left as it was) when it would take the disk's last free space.
#[test]
fn a_reservation_is_bounded_by_the_free_space() {
    let Some((d, path, direct)) = direct_file() else {
        return;
    };
    let free = free_bytes(d.path());
    assert!(!direct.reserve(free), "all of the {free} free bytes");
    assert_eq!(
        std::fs::metadata(&path).unwrap().len(),
        0,
        "nothing reserved"
    );
    assert!(!direct.reserve(u64::MAX), "more than a file can be");
    if free < (4 << 30) {
        eprintln!("SKIP (the positive half): only {free} bytes free");
        return;
    }
    assert!(direct.reserve(64 << 20), "64 MiB of {free} free bytes");
    assert_eq!(std::fs::metadata(&path).unwrap().len(), 64 << 20);
}

/// A new file in a temporary directory opened as a [`DirectFile`]; None (after saying why)
/// where the directory's file system has no disk or refuses `O_DIRECT`.
fn direct_file() -> Option<(tempfile::TempDir, std::path::PathBuf, DirectFile)> {
    let d = tempfile::tempdir().unwrap();
    let path = d.path().join("out.bin");
    let file = std::fs::File::create(&path).unwrap();
    if on_tmpfs(&file) {
        eprintln!(
            "SKIP: {} is on tmpfs, where O_DIRECT has no disk to go to",
            d.path().display()
        );
        return None;
    }
    let Ok(direct) = DirectFile::open(file, &path) else {
        eprintln!("SKIP: {} refuses O_DIRECT", d.path().display());
        return None;
    };
    Some((d, path, direct))
}

/// The bytes available to an unprivileged writer on `dir`'s file system (`df`'s "Avail").
fn free_bytes(dir: &std::path::Path) -> u64 {
    let out = std::process::Command::new("df")
        .args(["--output=avail", "-B1"])
        .arg(dir)
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    text.lines().nth(1).unwrap().trim().parse().unwrap()
}

/// A sink whose writes wait (as `DirectFile`'s do), failing the write that covers one offset.
struct FailsAt {
    at: u64,
    written: AtomicU64,
}

impl Sink for FailsAt {
    fn write_at(&self, buf: &[u8], offset: u64) -> std::io::Result<()> {
        std::thread::sleep(Duration::from_millis(1));
        if (offset..offset + buf.len() as u64).contains(&self.at) {
            return Err(std::io::Error::other("disk full (injected)"));
        }
        self.written.fetch_add(buf.len() as u64, Ordering::Relaxed);
        Ok(())
    }

    fn writes_wait(&self) -> bool {
        true
    }
}

/// A write that fails behind the reader ends the receive with that error, and the run it held
/// is not recorded as received.
#[test]
fn a_failed_write_behind_the_reader_fails_the_receive() {
    let len = 16 << 20;
    let at = (5 << 20) + 7;
    let sink = FailsAt {
        at,
        written: AtomicU64::new(0),
    };
    let (r, p) = send_and_receive(data(len, 6), 256 * 1024, &sink);
    let e = r.expect_err("the write failed");
    assert!(e.to_string().contains("disk full"), "{e}");
    let held = p.ranges();
    assert!(
        !held.ranges().iter().any(|&(a, b)| (a..b).contains(&at)),
        "the failed run is not recorded: {:?}",
        held.ranges()
    );
    assert_eq!(
        p.bytes(),
        sink.written.load(Ordering::Relaxed),
        "only written runs count"
    );
}

/// Keeps what it is given in memory; its writes may claim to wait (as `DirectFile`'s do).
struct Held {
    mem: Mem,
    waits: bool,
}

impl Sink for Held {
    fn write_at(&self, buf: &[u8], offset: u64) -> std::io::Result<()> {
        self.mem.write_at(buf, offset)
    }

    fn writes_wait(&self) -> bool {
        self.waits
    }
}

/// A connection that breaks inside its second block: the receive fails, and the whole first
/// block (gathered with the second, which continues it) is still written and recorded, on the
/// reading thread or behind it.
#[test]
fn a_broken_block_keeps_the_blocks_before_it() {
    use haul_proto::mode_e::Header;
    use std::io::Write;
    for waits in [false, true] {
        let l = socket::listen("127.0.0.1:0".parse().unwrap(), None).unwrap();
        let addr = l.local_addr().unwrap();
        let want = data(50_000, 13);
        let body = want.clone();
        let sender = std::thread::spawn(move || {
            let mut s = TcpStream::connect(addr).unwrap();
            s.write_all(&Header::data(0, 20_000).encode()).unwrap();
            s.write_all(&body[..20_000]).unwrap();
            s.write_all(&Header::data(20_000, 30_000).encode()).unwrap();
            s.write_all(&body[20_000..20_100]).unwrap();
        });
        let (c, _) = l.accept().unwrap();
        sender.join().unwrap();
        let sink = Held {
            mem: Mem(Default::default()),
            waits,
        };
        let p = Progress::default();
        let r = mode_e::receive(vec![Box::new(c)], None, &sink, &p, Some(50_000), 1 << 20);
        assert!(r.is_err(), "writes_wait {waits}: the block was cut short");
        let got = sink.mem.0.into_inner().unwrap();
        assert!(
            got.len() >= 20_000,
            "writes_wait {waits}: {} bytes written",
            got.len()
        );
        assert_eq!(got[..20_000], want[..20_000], "writes_wait {waits}");
        assert!(
            p.ranges()
                .ranges()
                .first()
                .is_some_and(|&(a, b)| a == 0 && b >= 20_000),
            "writes_wait {waits}: {:?}",
            p.ranges().ranges()
        );
    }
}
