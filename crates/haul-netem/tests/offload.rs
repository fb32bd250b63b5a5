//! Segmentation offload through the emulator: TCP and UDP offload packets cross a lossy,
//! duplicating link intact where their wire packets share one fate and cut into correct wire
//! packets where they do not. Each test checks the bytes that arrive, the receiving kernel's
//! checksum-error counters, and the forwarder's counters (so it fails if offload is not in
//! effect at all).

mod common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream, UdpSocket};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use haul_netem::{DirParams, LossModel, Testbed, Topology};

/// The `InCsumErrors` counters of TCP and UDP in `host`'s namespace (`/proc/thread-self/net/snmp`: `/proc/net` is the main thread's namespace).
fn csum_errors(tb: &Testbed, host: &str) -> u64 {
    let text = tb
        .enter(host, || {
            std::fs::read_to_string("/proc/thread-self/net/snmp")
        })
        .unwrap()
        .unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let mut total = 0;
    for pair in lines.chunks(2) {
        let [names, values] = pair else { continue };
        if !(names.starts_with("Tcp:") || names.starts_with("Udp:")) {
            continue;
        }
        for (n, v) in names.split_whitespace().zip(values.split_whitespace()) {
            if n == "InCsumErrors" {
                total += v.parse::<u64>().unwrap();
            }
        }
    }
    total
}

/// 10 ms each way (so the offload budget, 1 % of the RTT, holds several wire packets).
fn lossy(rate_bps: f64, p: f64) -> DirParams {
    DirParams {
        rate: Some(rate_bps / 8.0),
        delay: 0.01,
        loss: LossModel::Bernoulli { p },
        duplicate: 0.001,
        ..Default::default()
    }
}

/// The byte at offset `i` of the test stream.
fn pattern(i: u64) -> u8 {
    (i.wrapping_mul(2_654_435_761) >> 13) as u8
}

#[test]
fn tcp_stream_arrives_intact_through_a_lossy_offloading_link() {
    let Some(tb) = common::testbed("hnt-tso-", &Topology::pair(1500, lossy(500e6, 0.0005))) else {
        return;
    };
    let _g = common::serial();
    let b = tb.addr("b").unwrap();
    let listener = tb
        .enter("b", || TcpListener::bind((b, 7100)))
        .unwrap()
        .unwrap();
    const LEN: u64 = 24 << 20;
    let rx = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mut buf = vec![0u8; 1 << 16];
        let (mut at, mut bad) = (0u64, 0u64);
        loop {
            let n = s.read(&mut buf).unwrap();
            if n == 0 {
                return (at, bad);
            }
            bad += (0..n).filter(|&k| buf[k] != pattern(at + k as u64)).count() as u64;
            at += n as u64;
        }
    });
    let mut tx = tb
        .enter("a", || TcpStream::connect((b, 7100)))
        .unwrap()
        .unwrap();
    let t0 = Instant::now();
    let mut chunk = vec![0u8; 1 << 16];
    let mut at = 0u64;
    while at < LEN {
        for (k, x) in chunk.iter_mut().enumerate() {
            *x = pattern(at + k as u64);
        }
        tx.write_all(&chunk).unwrap();
        at += chunk.len() as u64;
    }
    drop(tx);
    let (got, bad) = rx.join().unwrap();
    let st = &tb.stats()[0];
    eprintln!(
        "{LEN} bytes in {:.1} s; a>b: {} offload frames whole, {} cut, {} lost, {} duplicated",
        t0.elapsed().as_secs_f64(),
        st.ab.offload_frames,
        st.ab.split_frames,
        st.ab.stats.drop_loss,
        st.ab.stats.duplicated
    );
    assert_eq!((got, bad), (LEN, 0), "bytes received, bytes that differ");
    assert!(st.ab.offload_frames > 0, "no offload packet crossed whole");
    assert!(st.ab.split_frames > 0, "no offload packet was cut");
    assert_eq!(csum_errors(&tb, "b") + csum_errors(&tb, "a"), 0);
    tb.down().unwrap();
}

/// `UDP_SEGMENT` (linux/udp.h).
const UDP_SEGMENT: libc::c_int = 103;

#[test]
fn udp_segmentation_offload_is_cut_into_datagrams_and_lost_one_by_one() {
    let Some(tb) = common::testbed("hnt-uso-", &Topology::pair(1500, lossy(1e9, 0.002))) else {
        return;
    };
    let _g = common::serial();
    let (a, b) = (tb.addr("a").unwrap(), tb.addr("b").unwrap());
    let rx = tb
        .enter("b", || UdpSocket::bind((b, 7200)))
        .unwrap()
        .unwrap();
    common::force_rcvbuf(rx.as_raw_fd(), 64 << 20);
    let tx = tb.enter("a", || UdpSocket::bind((a, 0))).unwrap().unwrap();
    tx.connect((b, 7200)).unwrap();
    const SEG: usize = 1400;
    const PER: usize = 8;
    const SENDS: usize = 4000;
    let seg = SEG as libc::c_int;
    // SAFETY: setsockopt with a valid int option value.
    let r = unsafe {
        libc::setsockopt(
            tx.as_raw_fd(),
            libc::SOL_UDP,
            UDP_SEGMENT,
            &seg as *const libc::c_int as *const libc::c_void,
            4,
        )
    };
    assert_eq!(r, 0, "UDP_SEGMENT: {}", std::io::Error::last_os_error());
    let recv = std::thread::spawn(move || {
        rx.set_read_timeout(Some(Duration::from_millis(500)))
            .unwrap();
        let mut seen = vec![false; SENDS * PER];
        let mut buf = [0u8; 2048];
        let mut bad = 0;
        while let Ok(n) = rx.recv(&mut buf) {
            let id = u32::from_be_bytes(buf[..4].try_into().unwrap()) as usize;
            if n != SEG || id >= seen.len() || buf[4..n].iter().any(|&x| x != id as u8) {
                bad += 1;
            } else {
                seen[id] = true;
            }
        }
        (seen.iter().filter(|&&s| s).count(), bad)
    });
    let mut buf = vec![0u8; SEG * PER];
    let start = Instant::now();
    for s in 0..SENDS {
        // 8 datagrams of 1428 wire bytes every 200 us: 457 Mbit/s, below the link rate.
        common::wait_until(start + Duration::from_micros(200 * s as u64));
        for (k, d) in buf.chunks_mut(SEG).enumerate() {
            let id = s * PER + k;
            d.fill(id as u8);
            d[..4].copy_from_slice(&(id as u32).to_be_bytes());
        }
        tx.send(&buf).unwrap();
    }
    let (got, bad) = recv.join().unwrap();
    let st = &tb.stats()[0].ab;
    let n = SENDS * PER;
    eprintln!(
        "{n} datagrams in {SENDS} sends: {got} arrived, {bad} malformed; model lost {}, \
         {} offload frames whole, {} cut",
        st.stats.drop_loss, st.offload_frames, st.split_frames
    );
    assert_eq!(bad, 0, "datagrams of the wrong size or content");
    assert_eq!(
        st.stats.rx_packets, n as u64,
        "the model saw every wire datagram"
    );
    assert_eq!(
        got as u64,
        n as u64 - st.stats.drop_loss - st.stats.drop_queue,
        "every datagram the model kept arrived, and only those"
    );
    assert!(st.stats.drop_loss > 0 && st.split_frames > 0);
    assert!(st.offload_frames > 0, "no offload packet crossed whole");
    assert_eq!(csum_errors(&tb, "b"), 0);
    tb.down().unwrap();
}
