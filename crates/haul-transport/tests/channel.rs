//! Measurement channels over loopback, without the profiler: a server end from
//! `Connector::listen` + `Listener::accept`, a client end from `Connector::connect`, one block
//! sent, everything received, then end of stream.

use std::net::SocketAddr;
use std::thread;
use std::time::Duration;

use haul_transport::channel::{
    self, test_block, Channel, ChannelError, ChannelParams, Kind, Perf, Recv, Setting,
};

const TIMEOUT: Duration = Duration::from_secs(10);

/// Sends `blocks` test blocks of `p.block` bytes from a client channel to a server channel and
/// returns the bytes the server received before end of stream, and the sender's statistics.
fn run(kind: Kind, p: &ChannelParams, blocks: usize) -> (u64, Perf) {
    let t = channel::for_kind(kind).expect("transport");
    assert_eq!(t.kind(), kind);
    t.init(p).expect("init");
    let mut l = t
        .listen(p, "127.0.0.1:0".parse().expect("addr"))
        .expect("listen");
    let remote = SocketAddr::from(([127, 0, 0, 1], l.port()));
    let client = thread::scope(|s| {
        let client = s.spawn(|| t.connect(p, None, remote, TIMEOUT).expect("connect"));
        let server = l.accept(TIMEOUT).expect("accept");
        (client.join().expect("client"), server)
    });
    let (mut tx, mut rx): (Box<dyn Channel>, Box<dyn Channel>) = client;
    let block = test_block(p.block as usize);
    let sender = thread::spawn(move || {
        for _ in 0..blocks {
            tx.send(&block).expect("send");
        }
        // Statistics before close, as the profiler takes them (UDT's close ends the socket).
        let perf = tx.perfmon();
        tx.close().expect("close");
        perf
    });
    let mut buf = vec![0u8; 65_536];
    let mut got = 0u64;
    let mut idle = 0;
    loop {
        match rx.recv(&mut buf).expect("recv") {
            Recv::Data(n) => got += n as u64,
            Recv::Eof => break,
            Recv::Idle if idle < 50 => idle += 1,
            Recv::Idle => panic!("{kind}: no end of stream after {got} bytes"),
        }
    }
    (got, sender.join().expect("sender"))
}

#[test]
fn tcp_delivers_every_byte_and_reports_tcp_info() {
    let p = ChannelParams {
        buffer: Some(1 << 20),
        ..ChannelParams::new(100_000, 1472)
    };
    let (got, perf) = run(Kind::Tcp, &p, 20);
    assert_eq!(got, 2_000_000);
    assert!(
        perf.rtt_ms.is_some() && perf.retransmits.is_some(),
        "{perf:?}"
    );
}

#[test]
fn udp_blast_ends_with_its_final_datagram() {
    let p = ChannelParams::new(1472, 1472);
    let (got, perf) = run(Kind::Udp, &p, 10);
    assert!(got <= 10 * 1472, "{got}");
    assert_eq!(perf.packets, Some(10));
}

#[test]
fn plut_delivers_the_test_pattern_exactly() {
    let mut p = ChannelParams::new(64 * 1024, 1472);
    p.plut.session = Some(42);
    p.rate = Some(200e6);
    let (got, perf) = run(Kind::Plut, &p, 16);
    assert_eq!(got, 16 * 64 * 1024);
    assert!(perf.packets.is_some_and(|n| n > 0), "{perf:?}");
}

#[test]
fn refused_settings_are_named() {
    let p = ChannelParams::new(1472, 8);
    match channel::for_kind(Kind::Udp).expect("udp").init(&p) {
        Err(ChannelError::Setting {
            setting: Setting::Packet,
            ..
        }) => {}
        r => panic!("{r:?}"),
    }
    if !channel::udt_available() {
        let e = channel::for_kind(Kind::Udt)
            .err()
            .expect("no UDT4 in this build");
        assert!(
            matches!(
                e,
                ChannelError::Unavailable {
                    kind: Kind::Udt,
                    ..
                }
            ),
            "{e}"
        );
    }
}

#[test]
fn udt_delivers_every_byte_when_built_in() {
    if !channel::udt_available() {
        eprintln!("skipped: built without UDT4");
        return;
    }
    // l = 10(m - 16) - 1, TPG's UDT block form.
    let p = ChannelParams::new(14_559, 1472);
    let (got, perf) = run(Kind::Udt, &p, 50);
    assert_eq!(got, 50 * 14_559);
    assert!(perf.rtt_ms.is_some(), "{perf:?}");
}
