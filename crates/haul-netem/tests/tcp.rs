//! Fidelity with TCP against the Mathis estimate MSS·√(3/2)/(RTT·√p), capped by the link rate,
//! on 1 Gb/s, 50 ms, 0.01% loss: Reno under periodic loss (the formula's own assumptions) and
//! Linux CUBIC under Bernoulli loss must both land within ±30%.
//!
//! The estimate describes the loss-driven equilibrium (~122 packets here, a 35th of the BDP).
//! Slow start overshoots it by 40×, and at one loss every ~4 s CUBIC takes 20–30 s to decay back:
//! over the first 18 s it averages 1.6–2.3× Mathis. So the sender's buffer is locked at about
//! 3× the equilibrium window in flight, which bounds the overshoot without binding in
//! equilibrium (the test checks that); the flow warms up for 20 s and is measured for 30 s.

mod common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use haul_netem::{DirParams, LossModel, Topology};

fn set_cc(s: &TcpStream, cc: &str) {
    // SAFETY: TCP_CONGESTION takes a name buffer of the given length.
    let r = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            cc.as_ptr().cast(),
            cc.len() as u32,
        )
    };
    assert_eq!(
        r,
        0,
        "TCP_CONGESTION {cc}: {}",
        std::io::Error::last_os_error()
    );
}

/// Locks the send buffer at `bytes` (the kernel doubles it for bookkeeping). FORCE (root, as
/// every namespace test is) so that `net.core.wmem_max` cannot silently shrink it.
fn set_sndbuf(s: &TcpStream, bytes: i32) {
    // SAFETY: setsockopt with a valid int option value.
    let r = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_SNDBUFFORCE,
            (&bytes as *const i32).cast(),
            4,
        )
    };
    assert_eq!(r, 0, "SO_SNDBUFFORCE: {}", std::io::Error::last_os_error());
}

/// The sender's congestion window and packets in flight (TCP_INFO).
fn cwnd(s: &TcpStream) -> (u32, u32) {
    // SAFETY: tcp_info is plain data; the kernel fills at most `len` bytes.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = size_of::<libc::tcp_info>() as u32;
    // SAFETY: `info` and `len` outlive the call; the kernel writes at most `len` bytes.
    let r = unsafe {
        libc::getsockopt(
            s.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut info as *mut libc::tcp_info).cast(),
            &mut len,
        )
    };
    assert_eq!(r, 0, "TCP_INFO: {}", std::io::Error::last_os_error());
    (info.tcpi_snd_cwnd, info.tcpi_unacked)
}

fn mss(s: &TcpStream) -> f64 {
    let mut v: i32 = 0;
    let mut len = 4u32;
    // SAFETY: TCP_MAXSEG writes one int.
    unsafe {
        libc::getsockopt(
            s.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_MAXSEG,
            (&mut v as *mut i32).cast(),
            &mut len,
        )
    };
    v as f64
}

/// Runs one flow a→b with congestion control `cc`; returns measured / Mathis at the configured
/// loss probability (the ratio at the loss rate the flow saw while measured, model drops /
/// packets on a→b, is printed beside it).
fn flow_vs_mathis(prefix: &str, cc: &str, loss: LossModel) -> Option<f64> {
    let (rate, rtt, p): (f64, f64, f64) = (1e9 / 8.0, 0.05, 1e-4);
    let params = DirParams {
        rate: Some(rate),
        delay: rtt / 2.0,
        loss,
        ..Default::default()
    };
    let tb = common::testbed(prefix, &Topology::pair(1500, params))?;
    // No `common::serial()`: a flow near 30 Mb/s costs the forwarder and both stacks a few
    // percent of a core, so these tests run side by side.
    let b = tb.addr("b").unwrap();
    let listener = tb
        .enter("b", || TcpListener::bind((b, 5201)))
        .unwrap()
        .unwrap();
    let (warmup, total) = (Duration::from_secs(20), Duration::from_secs(50));
    let server = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().expect("accept");
        let mut buf = vec![0u8; 1 << 20];
        let start = Instant::now();
        let (mut counted, mut t_from) = (0u64, None);
        loop {
            let n = s.read(&mut buf).expect("read");
            if n == 0 {
                break;
            }
            let el = start.elapsed();
            if el >= warmup {
                t_from.get_or_insert(el);
                counted += n as u64;
            }
        }
        (counted, start.elapsed() - t_from.unwrap_or_default())
    });
    let mut client = tb
        .enter("a", || TcpStream::connect((b, 5201)))
        .unwrap()
        .expect("connect");
    set_cc(&client, cc);
    let mss = mss(&client);
    let w_mathis = 1.5f64.sqrt() / p.sqrt(); // packets
                                             // About 3× the equilibrium window in flight: the kernel doubles the value, and skb overhead
                                             // takes some of that.
    set_sndbuf(&client, (2.0 * w_mathis * mss) as i32);
    let chunk = vec![7u8; 64 << 10];
    let start = Instant::now();
    // Slow start runs into the cap during the warm-up, so the most packets in flight then is
    // what the cap allows (cwnd itself may grow to twice that in slow start); the measured
    // part's largest window must stay clear of it.
    let (mut cap, mut cwnd_max) = (0, 0);
    let ab = |tb: &haul_netem::Testbed| {
        let st = &tb.stats()[0].ab.stats;
        (st.drop_loss, st.rx_packets)
    };
    let mut at_warmup = None;
    while start.elapsed() < total {
        client.write_all(&chunk).expect("write");
        let (w, in_flight) = cwnd(&client);
        if start.elapsed() < warmup {
            cap = cap.max(in_flight);
        } else {
            at_warmup.get_or_insert_with(|| ab(&tb));
            cwnd_max = cwnd_max.max(w);
        }
    }
    drop(client);
    let (bytes, span) = server.join().unwrap();
    let measured = bytes as f64 * 8.0 / span.as_secs_f64();
    let mathis = |p: f64| (mss * 8.0 * 1.5f64.sqrt() / (rtt * p.sqrt())).min(rate * 8.0);
    let (lost, packets) = ab(&tb);
    let (lost0, packets0) = at_warmup.expect("the flow ran past its warm-up");
    let (lost, packets) = (lost - lost0, packets - packets0);
    let p_seen = lost.max(1) as f64 / packets as f64;
    let ratio = measured / mathis(p);
    eprintln!(
        "{cc} {loss:?}: {:.1} Mb/s; Mathis {:.1} Mb/s at p = {p}, ratio {:.2}; {lost} losses in \
         {packets} packets measured (p = {p_seen:.2e}): Mathis {:.1} Mb/s, ratio {:.2}; MSS {mss}, \
         largest cwnd {cwnd_max} packets (equilibrium {w_mathis:.0}, cap {cap} in flight)",
        measured / 1e6,
        mathis(p) / 1e6,
        ratio,
        mathis(p_seen) / 1e6,
        measured / mathis(p_seen),
    );
    // Losses, not the buffer cap, must be what holds the window.
    assert!(
        (cwnd_max as f64) < 0.8 * cap as f64,
        "cwnd reached {cwnd_max} packets, near the buffer cap of {cap} in flight"
    );
    Some(ratio)
}

/// Holds one flow to ±30% of the Mathis estimate (skips without namespaces).
fn assert_near_mathis(prefix: &str, cc: &str, loss: LossModel, what: &str) {
    let Some(r) = flow_vs_mathis(prefix, cc, loss) else {
        return;
    };
    assert!(
        (0.7..=1.3).contains(&r),
        "{what} at {r:.2}× the Mathis estimate"
    );
}

#[test]
fn reno_matches_mathis_under_periodic_loss() {
    assert_near_mathis(
        "hnt-reno-",
        "reno",
        LossModel::Periodic { n: 10_000 },
        "Reno",
    );
}

#[test]
fn cubic_matches_mathis_under_periodic_loss() {
    assert_near_mathis(
        "hnt-cubp-",
        "cubic",
        LossModel::Periodic { n: 10_000 },
        "CUBIC under periodic loss",
    );
}

/// Random losses come at uneven intervals and CUBIC's window grows convexly in the long ones, so
/// CUBIC averages above the periodic-loss figure: 1.23–1.24× here (model seed 1, five runs),
/// 0.96–1.19× in 30 s windows of `iperf3 -C cubic` runs with other seeds. With one loss every
/// ~4 s the measured 30 s hold only ~8 loss events; the ratio at the loss rate the flow saw
/// is printed beside it.
#[test]
fn cubic_under_random_loss_is_near_mathis() {
    assert_near_mathis(
        "hnt-cubic-",
        "cubic",
        LossModel::Bernoulli { p: 1e-4 },
        "CUBIC under random loss",
    );
}
