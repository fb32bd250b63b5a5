//! Fidelity: the RTT measured through a link is within 2% or 0.3 ms of the configured value,
//! from 1 ms to 400 ms, changing the delay on the running link between measurements. The
//! endpoints busy-poll (with `yield_now`), so their own wake-ups do not count as link delay.

mod common;

use std::net::UdpSocket;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use haul_netem::params::Dur;
use haul_netem::{DirParams, DirPatch, Topology};

#[test]
fn rtt_matches_configuration_from_1ms_to_400ms() {
    let topo = Topology::pair(
        1500,
        DirParams {
            rate: Some(125e6),
            ..Default::default()
        },
    );
    let Some(tb) = common::testbed("hnt-rtt-", &topo) else {
        return;
    };
    let _g = common::serial();
    let b = tb.addr("b").unwrap();
    let server = tb
        .enter("b", || UdpSocket::bind((b, 7000)))
        .unwrap()
        .unwrap();
    let client = tb
        .enter("a", || UdpSocket::bind((tb.addr("a").unwrap(), 0)))
        .unwrap()
        .unwrap();
    server.set_nonblocking(true).unwrap();
    client.set_nonblocking(true).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let stop2 = stop.clone();
    let echo = std::thread::spawn(move || {
        let mut buf = [0u8; 2048];
        while !stop2.load(Ordering::Relaxed) {
            match server.recv_from(&mut buf) {
                Ok((n, from)) => {
                    let _ = server.send_to(&buf[..n], from);
                }
                Err(_) => std::thread::yield_now(),
            }
        }
    });
    for (rtt_ms, probes) in [(1.0, 50), (10.0, 30), (100.0, 12), (400.0, 6)] {
        let patch = DirPatch {
            rtt: Some(Dur(rtt_ms / 1e3)),
            ..Default::default()
        };
        tb.set("a-b", None, &patch).unwrap();
        let mut samples = Vec::new();
        for seq in 0..probes + 1u32 {
            let t0 = Instant::now();
            client.send_to(&seq.to_be_bytes(), (b, 7000)).unwrap();
            let mut buf = [0u8; 64];
            loop {
                match client.recv_from(&mut buf) {
                    Ok((n, _)) if n == 4 && buf[..4] == seq.to_be_bytes() => break,
                    Ok(_) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                        assert!(
                            t0.elapsed() < Duration::from_secs(2),
                            "echo reply within 2 s"
                        );
                        std::thread::yield_now();
                    }
                    Err(e) => panic!("recv: {e}"),
                }
            }
            // The first probe may have been sent before the new delay applied to both ways.
            if seq > 0 {
                samples.push(t0.elapsed().as_secs_f64() * 1e3);
            }
        }
        samples.sort_by(f64::total_cmp);
        // The delay the emulator adds is judged by the fastest probe, as ping's minimum judges
        // a path. Both endpoints busy-poll their sockets: on this VM a thread woken from a
        // blocking recv on an idle vCPU adds 50-100 us per hop, which is the host's latency,
        // not the emulator's. With blocking endpoints the 10 ms step read medians of 10.25-10.34
        // ms and failed twice in clean-clone CI (10.315, 10.323); with busy-polling endpoints
        // it reads 10.13-10.18. An emulator that delays too little or too much still fails,
        // since every probe, the fastest included, then misses.
        let min = samples[0];
        let median = samples[samples.len() / 2];
        let tol = (rtt_ms * 0.02).max(0.3);
        eprintln!(
            "rtt {rtt_ms} ms: min {min:.3}, median {median:.3} ms over {} probes (tolerance {tol} ms)",
            samples.len()
        );
        assert!(
            (min - rtt_ms).abs() <= tol,
            "configured {rtt_ms} ms, fastest probe {min:.3} ms (median {median:.3})"
        );
    }
    stop.store(true, Ordering::Relaxed);
    echo.join().unwrap();
    tb.down().unwrap();
}
