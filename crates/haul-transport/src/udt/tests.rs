use std::io::{ErrorKind, Read, Write};
use std::net::SocketAddr;
use std::thread;
use std::time::{Duration, Instant};

use super::*;

fn loopback() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

#[test]
fn bytes_arrive_in_order_and_close_reads_as_end() {
    let l = UdtListener::bind(loopback(), &Options::default()).unwrap();
    let at = l.local_addr();
    assert_ne!(at.port(), 0);
    let data: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
    let sent = data.clone();
    let t = thread::spawn(move || {
        let mut s = UdtStream::connect(at, None, &Options::with_buffers(Some(4 << 20))).unwrap();
        s.write_all(&sent).unwrap();
        s.close().unwrap();
    });
    let (mut c, peer) = l.accept_timeout(Duration::from_secs(10)).unwrap();
    assert!(peer.ip().is_loopback());
    assert!(c.perfmon().is_some());
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut got = Vec::new();
    c.read_to_end(&mut got).unwrap();
    t.join().unwrap();
    assert!(got == data, "{} bytes of {}", got.len(), data.len());
}

#[test]
fn accept_and_read_wait_no_longer_than_asked() {
    let l = UdtListener::bind(loopback(), &Options::default()).unwrap();
    let t0 = Instant::now();
    let e = l.accept_timeout(Duration::from_millis(100)).err().unwrap();
    assert_eq!(e.kind(), ErrorKind::TimedOut);
    assert!(t0.elapsed() < Duration::from_secs(5));
    let at = l.local_addr();
    let t = thread::spawn(move || UdtStream::connect(at, None, &Options::default()).unwrap());
    let (mut c, _) = l.accept_timeout(Duration::from_secs(10)).unwrap();
    let _client = t.join().unwrap();
    c.set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let e = c.read(&mut [0u8; 16]).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::TimedOut);
}

#[test]
fn a_cut_ends_a_blocked_read() {
    let l = UdtListener::bind(loopback(), &Options::default()).unwrap();
    let at = l.local_addr();
    let t = thread::spawn(move || UdtStream::connect(at, None, &Options::default()).unwrap());
    let (mut c, _) = l.accept_timeout(Duration::from_secs(10)).unwrap();
    let _client = t.join().unwrap();
    let cutter = c.cutter();
    let t0 = Instant::now();
    let reader = thread::spawn(move || c.read(&mut [0u8; 16]));
    thread::sleep(Duration::from_millis(100));
    cutter.cut();
    let r = reader.join().unwrap();
    assert!(matches!(r, Ok(0) | Err(_)), "{r:?}");
    assert!(t0.elapsed() < Duration::from_secs(5));
}

#[test]
fn an_oversized_option_is_a_clear_error() {
    let o = Options {
        sndbuf: Some(u64::MAX),
        ..Options::default()
    };
    let e = UdtListener::bind(loopback(), &o).err().unwrap();
    assert!(e.to_string().contains("UDT_SNDBUF"), "{e}");
}
