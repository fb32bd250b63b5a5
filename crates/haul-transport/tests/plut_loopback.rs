//! PLUT over real loopback UDP: file to file and zero to null, byte-exact, and datagrams from a
//! foreign address or session injected while a transfer runs are dropped without harm.

use std::fs::File;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use haul_transport::io::{Null, Zero};
use haul_transport::mode_e::Progress;
use haul_transport::plut::{self, Stats, Tuning};
use rand::{Rng, SeedableRng};

fn data(len: usize, seed: u64) -> Vec<u8> {
    let mut r = rand::rngs::StdRng::seed_from_u64(seed);
    let mut v = vec![0u8; len];
    r.fill(&mut v[..]);
    v
}

const RATE: f64 = 1.25e9;

/// Runs one transfer; `during` runs on a third thread while it is in flight.
fn transfer(
    src: &dyn haul_transport::io::Source,
    sink: &dyn haul_transport::io::Sink,
    len: u64,
    mds: usize,
    session: u64,
    during: impl FnOnce(SocketAddr, &AtomicBool, &Progress) + Send,
) -> (Stats, Stats) {
    let tuning = Tuning {
        idle_timeout: Duration::from_secs(20),
        ..Tuning::default()
    };
    let cfg = plut::config(session, mds, RATE, 64 << 20);
    let rx = plut::bind("127.0.0.1:0".parse().unwrap(), &tuning).unwrap();
    let tx = plut::bind("127.0.0.1:0".parse().unwrap(), &tuning).unwrap();
    let addr = rx.local_addr().unwrap();
    let (pr, ps) = (Progress::default(), Progress::default());
    let done = AtomicBool::new(false);
    std::thread::scope(|s| {
        let r = s.spawn(|| plut::receive(&rx, sink, 0, len, &cfg, &tuning, &pr));
        let t = s.spawn(|| plut::send(&tx, addr, src, 0, len, &cfg, &tuning, &ps));
        let d = s.spawn(|| during(addr, &done, &pr));
        let sent = t.join().unwrap().expect("send");
        let got = r.join().unwrap().expect("receive");
        done.store(true, Ordering::Relaxed);
        d.join().unwrap();
        assert_eq!(pr.bytes(), len);
        assert_eq!(ps.bytes(), len);
        (sent, got)
    })
}

#[test]
fn file_to_file_64mib_is_exact() {
    let dir = tempfile::tempdir().unwrap();
    let len = 64 << 20;
    let bytes = data(len, 7);
    std::fs::write(dir.path().join("src"), &bytes).unwrap();
    let src = File::open(dir.path().join("src")).unwrap();
    let dst = File::options()
        .write(true)
        .create(true)
        .truncate(true)
        .open(dir.path().join("dst"))
        .unwrap();
    let (s, r) = transfer(
        &src,
        &dst,
        len as u64,
        plut::JUMBO_MDS,
        0x1234_5678_9abc_def0,
        |_, _, _| {},
    );
    drop(dst);
    eprintln!("file: sender {s:?}\nreceiver {r:?}");
    assert!(
        std::fs::read(dir.path().join("dst")).unwrap() == bytes,
        "file arrived byte-exact"
    );
}

#[test]
fn zero_to_null_with_odd_length() {
    let len = (48 << 20) + 12_345;
    let (s, r) = transfer(&Zero, &Null, len, 65_507, 42, |_, _, _| {});
    eprintln!("zero: sender {s:?}\nreceiver {r:?}");
    assert_eq!(r.receiver.unwrap().delivered, len);
}

#[test]
fn foreign_datagrams_are_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let len = 24 << 20;
    let bytes = data(len, 9);
    std::fs::write(dir.path().join("src"), &bytes).unwrap();
    let src = File::open(dir.path().join("src")).unwrap();
    let dst = File::options()
        .write(true)
        .create(true)
        .truncate(true)
        .open(dir.path().join("dst"))
        .unwrap();
    let session = 0xfeed_beef;
    let (_, r) = transfer(
        &src,
        &dst,
        len as u64,
        1472,
        session,
        |addr, done, progress| {
            let evil = UdpSocket::bind("127.0.0.1:0").unwrap();
            // A plausible DATA datagram of this session (from another address) and of another session.
            let forged = |sess: u64| {
                let mut d = vec![0u8; 1472];
                let h = haul_plut::wire::DataHeader {
                    session: sess,
                    seq: 0,
                    offset: 0,
                    timestamp: 0,
                    rtt_us: 100,
                    len: 1432,
                    retransmit: false,
                };
                h.encode(&mut d).unwrap();
                d[40..].fill(0xee);
                d
            };
            let (same, other) = (forged(session), forged(session ^ 1));
            let mut sent = 0;
            while !done.load(Ordering::Relaxed) && sent < 20_000 {
                // Same-session datagrams from elsewhere only once the real sender was heard: the
                // session id is the secret, and the receiver locks onto its first valid source.
                let same_ok = progress.bytes() > 0;
                let _ = evil.send_to(
                    if sent % 2 == 0 || !same_ok {
                        &other
                    } else {
                        &same
                    },
                    addr,
                );
                let _ = evil.send_to(b"garbage", addr);
                sent += 1;
                if sent % 64 == 0 {
                    std::thread::sleep(Duration::from_micros(200));
                }
            }
            assert!(sent > 0);
        },
    );
    drop(dst);
    let rs = r.receiver.unwrap();
    eprintln!("foreign: receiver {rs:?}");
    assert!(
        rs.foreign + rs.malformed > 0,
        "the injected datagrams were seen and dropped"
    );
    assert!(
        std::fs::read(dir.path().join("dst")).unwrap() == bytes,
        "file arrived byte-exact"
    );
}
