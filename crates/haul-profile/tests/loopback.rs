//! End-to-end profiling runs over loopback: TCP (1 and 4 streams), UDP blast, UDT4, PLUT, error paths,
//! and a side-by-side run with iperf3 (printed, not asserted: agreement is a benchmark).

use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::time::Duration;

use haul_profile::driver::ClientOptions;
use haul_profile::{run_client, ProfileError, ProfileParams, Server, TransportKind};

/// Starts a server on a free loopback port that serves runs until the test process exits.
fn server() -> String {
    let s = Server::bind("127.0.0.1:0".parse::<SocketAddr>().expect("addr")).expect("bind");
    let addr = s.local_addr().expect("addr").to_string();
    std::thread::spawn(move || {
        s.serve(|r| {
            if let Err((c, e)) = r {
                eprintln!("server: run from {c:?} failed: {e}");
            }
        })
    });
    addr
}

fn params(t: TransportKind) -> ProfileParams {
    ProfileParams {
        transport: t,
        duration_s: 1.0,
        interval_s: 0.5,
        ..Default::default()
    }
}

#[test]
fn tcp_one_stream_reports_intervals_and_tcp_info() {
    let srv = server();
    let r = run_client(params(TransportKind::Tcp), ClientOptions::new(&srv)).expect("run");
    assert_eq!(r.streams.len(), 1);
    assert_eq!(r.received_bytes, r.sent_bytes, "TCP delivers every byte");
    assert!(r.aggregate_bps > 1e8, "{} b/s on loopback", r.aggregate_bps);
    assert!(!r.intervals.is_empty());
    assert!(r.streams[0].rtt_ms.is_some() && r.streams[0].retransmits.is_some());
    let v: serde_json::Value = serde_json::from_str(&r.to_json()).expect("json");
    assert!(v["aggregate_bps"].as_f64().is_some_and(|x| x > 0.0));
    // The server resets: a second run on the same server works.
    run_client(params(TransportKind::Tcp), ClientOptions::new(&srv)).expect("second run");
}

#[test]
fn tcp_four_streams_move_an_exact_byte_count() {
    let srv = server();
    let p = ProfileParams {
        streams: 4,
        bytes: Some(48 << 20),
        block: Some(100_000),
        ..params(TransportKind::Tcp)
    };
    let r = run_client(p, ClientOptions::new(&srv)).expect("run");
    assert_eq!(r.streams.len(), 4);
    assert_eq!(r.received_bytes, 48 << 20);
    let sum: f64 = r.streams.iter().map(|s| s.avg_bps).sum();
    assert!(
        (sum - r.aggregate_bps).abs() < 1.0,
        "Eq. 3.2: G is the sum of the stream averages"
    );
    assert!(r.streams.iter().all(|s| s.received_bytes == 12 << 20));
}

#[test]
fn udp_blast_paces_and_counts_loss() {
    let srv = server();
    let p = ProfileParams {
        rate_bps: Some(200_000_000),
        packet: Some(1400),
        ..params(TransportKind::Udp)
    };
    let r = run_client(p, ClientOptions::new(&srv)).expect("run");
    let s = &r.streams[0];
    let got = s.packets_received.expect("received count");
    let lost = s.lost_packets.expect("loss count");
    assert!(got > 0);
    assert!(
        r.sender_bps < 2.4e8,
        "paced near 200 Mb/s, got {}",
        r.sender_bps
    );
    assert!(r.received_bytes <= r.sent_bytes);
    assert!(got + lost <= r.sent_bytes / 1400 + 1);
}

#[test]
fn udt_loopback_delivers_every_byte() {
    if !haul_profile::transport::udt_available() {
        eprintln!("skipped: haul-profile was built without UDT4 (libudt-dev not installed)");
        return;
    }
    let srv = server();
    let p = ProfileParams {
        bytes: Some(32 << 20),
        ..params(TransportKind::Udt)
    };
    let r = run_client(p, ClientOptions::new(&srv)).expect("run");
    assert_eq!(r.received_bytes, 32 << 20);
    assert!(r.streams[0].rtt_ms.is_some());
    assert!(r.warnings.is_empty(), "default block follows k(m-16)-1");
}

#[test]
fn udt_exact_multiple_block_is_reported_as_a_warning() {
    if !haul_profile::transport::udt_available() {
        eprintln!("skipped: haul-profile was built without UDT4 (libudt-dev not installed)");
        return;
    }
    let srv = server();
    let p = ProfileParams {
        bytes: Some(4 << 20),
        packet: Some(1472),
        block: Some(10 * 1456),
        ..params(TransportKind::Udt)
    };
    let r = run_client(p, ClientOptions::new(&srv)).expect("run");
    assert_eq!(r.warnings.len(), 1, "{:?}", r.warnings);
    assert!(r.warnings[0].contains("exact multiple"));
}

#[test]
fn server_failure_reaches_the_client_as_an_error_message() {
    let srv = server();
    let mut p = params(TransportKind::Tcp);
    p.tcp.congestion = Some("nosuchcc".into());
    let e = run_client(p, ClientOptions::new(&srv)).unwrap_err();
    assert!(
        matches!(e, ProfileError::Remote(ref m) if m.contains("nosuchcc")),
        "{e}"
    );
    // And the server is still usable.
    run_client(params(TransportKind::Tcp), ClientOptions::new(&srv)).expect("after an error");
}

/// Every PLUT stream delivered exactly what its sender sent, checked byte for byte.
fn assert_plut_exact(r: &haul_profile::ProfileReport) {
    assert!(r.aggregate_bps > 0.0, "{} b/s", r.aggregate_bps);
    assert!(r.sent_bytes > 0);
    assert_eq!(
        r.received_bytes, r.sent_bytes,
        "PLUT delivers every byte sent, and no more"
    );
    for s in &r.streams {
        assert!(
            s.sent_bytes > 0 && s.received_bytes == s.sent_bytes,
            "stream {}: sent {} received {}",
            s.id,
            s.sent_bytes,
            s.received_bytes
        );
        assert!(
            s.rtt_ms.is_some()
                && s.retransmits.is_some()
                && s.packets_received.is_some_and(|n| n > 0)
        );
    }
}

#[test]
fn plut_one_stream_for_a_duration_delivers_exactly_what_was_sent() {
    let srv = server();
    let r = run_client(params(TransportKind::Plut), ClientOptions::new(&srv)).expect("run");
    assert_eq!(r.streams.len(), 1);
    assert_plut_exact(&r);
    assert!(r.aggregate_bps > 1e7, "{} b/s on loopback", r.aggregate_bps);
    assert!(!r.intervals.is_empty());
    assert!(
        r.params.plut.session.is_some(),
        "the client drew a session id and the server accepted it"
    );
    let v: serde_json::Value = serde_json::from_str(&r.to_json()).expect("json");
    assert!(v["aggregate_bps"].as_f64().is_some_and(|x| x > 0.0));
}

#[test]
fn plut_two_streams_with_tsunami_and_jumbo_datagrams() {
    let srv = server();
    let mut p = ProfileParams {
        streams: 2,
        packet: Some(8972),
        block: Some(100_000),
        ..params(TransportKind::Plut)
    };
    p.plut.controller = haul_profile::params::PlutController::Tsunami;
    let r = run_client(p, ClientOptions::new(&srv)).expect("run");
    assert_eq!(r.streams.len(), 2);
    assert_plut_exact(&r);
    // An exact byte count over two streams, one of them ending inside a datagram.
    let p = ProfileParams {
        streams: 2,
        bytes: Some((24 << 20) + 1),
        ..params(TransportKind::Plut)
    };
    let r = run_client(p, ClientOptions::new(&srv)).expect("byte-count run");
    assert_plut_exact(&r);
    assert_eq!(r.received_bytes, (24 << 20) + 1);
}

#[test]
fn plut_bad_datagram_size_is_rejected_naming_the_flag() {
    let p = ProfileParams {
        packet: Some(100),
        ..params(TransportKind::Plut)
    };
    let e = run_client(p, ClientOptions::new("127.0.0.1:9")).unwrap_err();
    assert!(e.to_string().contains("-M"), "{e}");
}

#[test]
fn side_by_side_with_iperf3_on_loopback() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("port");
        l.local_addr().expect("addr").port()
    };
    let iperf = Command::new("iperf3")
        .args(["-s", "-1", "-p", &port.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn();
    let Ok(mut iperf) = iperf else {
        eprintln!("skipped: iperf3 is not installed");
        return;
    };
    let srv = server();
    let p = ProfileParams {
        duration_s: 2.0,
        ..params(TransportKind::Tcp)
    };
    let haul = run_client(p, ClientOptions::new(&srv)).expect("haul run");
    let mut out = None;
    for _ in 0..50 {
        let o = Command::new("iperf3")
            .args(["-c", "127.0.0.1", "-p", &port.to_string(), "-t", "2", "-J"])
            .output()
            .expect("iperf3 client");
        if o.status.success() {
            out = Some(o.stdout);
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = iperf.kill();
    let _ = iperf.wait();
    let out = out.expect("iperf3 client never connected");
    let v: serde_json::Value = serde_json::from_slice(&out).expect("iperf3 JSON");
    let ip = v["end"]["sum_received"]["bits_per_second"]
        .as_f64()
        .expect("iperf3 rate");
    println!(
        "loopback TCP, 1 stream, 2 s: haul profile {:.2} Gb/s, iperf3 {:.2} Gb/s, ratio {:.3}",
        haul.aggregate_bps / 1e9,
        ip / 1e9,
        haul.aggregate_bps / ip
    );
    assert!(haul.aggregate_bps > 0.0 && ip > 0.0);
}
