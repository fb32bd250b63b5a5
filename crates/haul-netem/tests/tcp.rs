//! Fidelity with TCP against the Mathis estimate MSS·√(3/2)/(RTT·√p), capped by the link rate,
//! on 1 Gb/s, 50 ms, 0.01% loss. Reno under periodic loss (the formula's own assumptions) must
//! land within ±30%. Linux CUBIC under Bernoulli loss measures 1.5–2.1× Mathis on this kernel
//! (its window growth is not Reno's), so it is held to 0.7–3×.

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

/// Runs one flow a→b with congestion control `cc`; returns measured / Mathis.
fn flow_vs_mathis(prefix: &str, cc: &str, loss: LossModel) -> Option<f64> {
    let (rate, rtt, p): (f64, f64, f64) = (1e9 / 8.0, 0.05, 1e-4);
    let params = DirParams {
        rate: Some(rate),
        delay: rtt / 2.0,
        loss,
        ..Default::default()
    };
    let tb = common::testbed(prefix, &Topology::pair(1500, params))?;
    let _g = common::serial();
    let b = tb.addr("b").unwrap();
    let listener = tb
        .enter("b", || TcpListener::bind((b, 5201)))
        .unwrap()
        .unwrap();
    let (warmup, total) = (Duration::from_secs(3), Duration::from_secs(18));
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
    let chunk = vec![7u8; 1 << 20];
    let start = Instant::now();
    while start.elapsed() < total {
        client.write_all(&chunk).expect("write");
    }
    let mss = mss(&client);
    drop(client);
    let (bytes, span) = server.join().unwrap();
    let measured = bytes as f64 * 8.0 / span.as_secs_f64();
    let mathis = (mss * 8.0 * 1.5f64.sqrt() / (rtt * p.sqrt())).min(rate * 8.0);
    let st = &tb.stats()[0].ab.stats;
    eprintln!(
        "{cc} {loss:?}: {:.1} Mb/s, Mathis {:.1} Mb/s (MSS {mss}), ratio {:.2}; {} losses in {} packets",
        measured / 1e6,
        mathis / 1e6,
        measured / mathis,
        st.drop_loss,
        st.rx_packets
    );
    Some(measured / mathis)
}

#[test]
fn reno_matches_mathis_under_periodic_loss() {
    let Some(r) = flow_vs_mathis("hnt-reno-", "reno", LossModel::Periodic { n: 10_000 }) else {
        return;
    };
    assert!(
        (0.7..=1.3).contains(&r),
        "Reno at {r:.2}× the Mathis estimate"
    );
}

#[test]
fn cubic_under_random_loss_is_near_mathis() {
    let Some(r) = flow_vs_mathis("hnt-cubic-", "cubic", LossModel::Bernoulli { p: 1e-4 }) else {
        return;
    };
    assert!(
        (0.7..=3.0).contains(&r),
        "CUBIC at {r:.2}× the Mathis estimate"
    );
}
