use super::*;

/// Datagrams `poll_transmit` lets out at once after the sender was not polled for `away`.
fn burst_after(max_burst_time: Nanos, max_burst_rtt: f64, away: Nanos) -> usize {
    // 100 Mb/s in 1472-byte datagrams: one every 117.76 µs; the RTT is the initial 100 ms.
    let cfg = Config {
        initial_rate: 12.5e6,
        max_burst: 4,
        max_burst_time,
        max_burst_rtt,
        ..Config::default()
    };
    let data = vec![7u8; 4 << 20];
    let mut s = Sender::new(cfg.clone(), data.len() as u64).expect("config");
    let mut buf = vec![0u8; cfg.mds];
    assert!(s
        .poll_transmit(0, &mut buf, &data[..])
        .expect("source")
        .is_some());
    let mut n = 0;
    while s
        .poll_transmit(away, &mut buf, &data[..])
        .expect("source")
        .is_some()
    {
        n += 1;
    }
    n
}

#[test]
fn time_with_nothing_to_send_earns_no_burst() {
    // 100 Mb/s, a 2 ms catch-up credit (17 datagrams), and a window of 64 datagrams that
    // fills in 7.5 ms; the ACK that opens it again comes at 150 ms.
    let cfg = Config {
        initial_rate: 12.5e6,
        max_burst: 4,
        max_burst_time: 2_000_000,
        max_burst_rtt: 0.0,
        window: 64,
        send_buffer: 64,
        ..Config::default()
    };
    let data = vec![7u8; 1 << 20];
    let mut s = Sender::new(cfg.clone(), data.len() as u64).expect("config");
    let mut r = crate::Receiver::new(cfg.clone(), data.len() as u64).expect("config");
    let mut buf = vec![0u8; cfg.mds];
    let mut sink = Vec::new();
    let mut now = 0;
    let mut sent = 0;
    while now < 100_000_000 {
        while let Some(n) = s.poll_transmit(now, &mut buf, &data[..]).expect("source") {
            r.handle_datagram(now, &buf[..n], &mut sink).expect("sink");
            sent += 1;
        }
        now += 100_000;
    }
    assert_eq!(sent, 64, "the window stops the sender");
    now = 150_000_000;
    r.handle_timeout(now);
    let n = r
        .poll_transmit(now, &mut buf)
        .expect("ack")
        .expect("an ACK is due");
    assert!(matches!(
        s.handle_datagram(now, &buf[..n]),
        Verdict::Accepted
    ));
    let mut burst = 0;
    while s
        .poll_transmit(now, &mut buf, &data[..])
        .expect("source")
        .is_some()
    {
        burst += 1;
    }
    assert_eq!(burst, 1, "paced from the ACK on, not a 2 ms burst");
}

#[test]
fn a_slow_sender_still_takes_control_steps() {
    // 15 datagrams a second (a rate cut to the floor with large datagrams): the 200
    // datagrams of `min_step_datagrams` would take 13 s; a step ends after ~1 s instead.
    let cfg = Config {
        initial_rate: 15.0 * 1472.0,
        ..Config::default()
    };
    let data = vec![7u8; 1 << 20];
    let mut s = Sender::new(cfg.clone(), data.len() as u64).expect("config");
    let mut r = crate::Receiver::new(cfg.clone(), data.len() as u64).expect("config");
    let (mut buf, mut ack, mut sink) = (vec![0u8; cfg.mds], vec![0u8; cfg.mds], Vec::new());
    let ms = 1_000_000;
    for t in 0..3_000 {
        let now = t * ms;
        while let Some(n) = s.poll_transmit(now, &mut buf, &data[..]).expect("source") {
            r.handle_datagram(now, &buf[..n], &mut sink).expect("sink");
        }
        r.handle_timeout(now);
        while let Some(n) = r.poll_transmit(now, &mut ack).expect("ack") {
            s.handle_datagram(now, &ack[..n]);
        }
        s.handle_timeout(now);
    }
    assert!(
        s.stats().control_steps >= 1,
        "no control step in 3 s at 15 datagrams/s"
    );
}

#[test]
fn a_late_poll_catches_up_the_allowed_time() {
    // Only the datagram credit: 4 datagrams (0.47 ms) of a 10 ms absence are made up.
    assert_eq!(burst_after(0, 0.0, 10_000_000), 5);
    // A 2 ms credit makes up 2 ms worth (16 gaps), and no more.
    assert_eq!(burst_after(2_000_000, 0.0, 10_000_000), 17);
    // An absence shorter than the credit is made up in full: every slot in 1 ms.
    assert_eq!(burst_after(2_000_000, 0.0, 1_000_000), 8);
    // A tenth of the 100 ms RTT (10 ms, 84 gaps) beats the 2 ms.
    assert_eq!(burst_after(2_000_000, 0.1, 50_000_000), 85);
}
