use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use super::*;

fn transfer(user: &str, peer: [u8; 4], bytes: u64, outcome: Result<(), String>) -> ServedTransfer {
    ServedTransfer {
        started: SystemTime::now(),
        elapsed_s: 2.0,
        direction: Direction::Sent,
        path: "/f".into(),
        local: SocketAddr::from(([127, 0, 0, 1], 2811)),
        peer: IpAddr::from(peer),
        user: user.into(),
        bytes,
        streams: 1,
        transport: "tcp",
        memory: false,
        next_hop: None,
        outcome,
    }
}

#[test]
fn counts_bytes_outcomes_and_sessions() {
    let m = Metrics::new(8);
    m.event(ServerEvent::SessionOpened);
    m.event(ServerEvent::SessionOpened);
    m.event(ServerEvent::SessionClosed);
    m.event(ServerEvent::LoginFailed);
    m.record(transfer("alice", [10, 0, 0, 1], 1000, Ok(())));
    m.record(transfer(
        "alice",
        [10, 0, 0, 1],
        24,
        Err("No space left".into()),
    ));
    let text = m.encode();
    for want in [
        "haul_serve_sessions 1",
        "haul_serve_sessions_opened_total 2",
        r#"haul_serve_bytes_total{direction="sent"} 1024"#,
        r#"haul_serve_user_bytes_total{user="alice",direction="sent"} 1024"#,
        r#"haul_serve_peer_bytes_total{peer="10.0.0.1",direction="sent"} 1024"#,
        r#"haul_serve_transfers_total{direction="sent",outcome="ok"} 1"#,
        r#"haul_serve_transfers_total{direction="sent",outcome="failed"} 1"#,
        r#"haul_serve_errors_total{cause="disk_full"} 1"#,
        r#"haul_serve_errors_total{cause="login"} 1"#,
        // 1000 bytes in 2 s = 4000 b/s: below the first bucket (1 Mb/s).
        r#"haul_serve_transfer_throughput_bits_per_second_bucket{le="1000000.0",direction="sent"} 1"#,
    ] {
        assert!(text.contains(want), "{want} not in\n{text}");
    }
}

#[test]
fn users_and_peers_past_the_bound_count_as_other() {
    let m = Metrics::new(2);
    for i in 0..5u8 {
        m.record(transfer(&format!("u{i}"), [10, 0, 0, i], 10, Ok(())));
    }
    let text = m.encode();
    assert!(text.contains(r#"user="u0""#) && text.contains(r#"user="u1""#));
    assert!(!text.contains(r#"user="u2""#), "{text}");
    assert!(
        text.contains(r#"haul_serve_user_bytes_total{user="other",direction="sent"} 30"#),
        "{text}"
    );
    assert!(text.contains(r#"haul_serve_peer_bytes_total{peer="other",direction="sent"} 30"#));
}

#[test]
fn causes_are_few() {
    assert_eq!(cause("No space left on device"), "disk_full");
    assert_eq!(cause("no byte moved for 60 s"), "timeout");
    assert_eq!(cause("/x: No such file or directory"), "path");
    assert_eq!(cause("Data connection closed: reset by peer"), "connection");
    assert_eq!(cause("something new"), "other");
}

fn endpoint(limits: HttpLimits) -> (SocketAddr, Arc<Metrics>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let m = Arc::new(Metrics::new(4));
    serve_http(l, m.clone(), limits).unwrap();
    (addr, m)
}

fn get(addr: SocketAddr, request: &[u8]) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(request).unwrap();
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out
}

#[test]
fn http_serves_metrics_and_refuses_the_rest() {
    let (addr, m) = endpoint(HttpLimits::default());
    m.event(ServerEvent::SessionOpened);
    let ok = get(addr, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
    assert!(ok.starts_with("HTTP/1.1 200 OK\r\n"), "{ok}");
    assert!(
        ok.contains("haul_serve_sessions 1") && ok.ends_with("# EOF\n"),
        "{ok}"
    );
    assert!(get(addr, b"GET / HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 404"));
    assert!(get(addr, b"POST /metrics HTTP/1.1\r\n\r\n").starts_with("HTTP/1.1 405"));
    let big = format!("GET /metrics HTTP/1.1\r\nX: {}\r\n\r\n", "a".repeat(9000));
    assert!(get(addr, big.as_bytes()).starts_with("HTTP/1.1 431"));
}

#[test]
fn http_drops_a_silent_client_after_its_timeout() {
    let (addr, _) = endpoint(HttpLimits {
        connections: 1,
        head: 8192,
        timeout: Duration::from_millis(300),
    });
    let t0 = Instant::now();
    // A client that sends half a request holds the only slot until the timeout, then is closed.
    let mut silent = TcpStream::connect(addr).unwrap();
    silent.write_all(b"GET /metrics HTTP/1.1\r\n").unwrap();
    let mut buf = [0u8; 16];
    silent
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    assert_eq!(silent.read(&mut buf).unwrap_or(0), 0);
    assert!(t0.elapsed() >= Duration::from_millis(250));
    // The slot is free again.
    let ok = get(addr, b"GET /metrics HTTP/1.1\r\n\r\n");
    assert!(ok.starts_with("HTTP/1.1 200"), "{ok}");
}
