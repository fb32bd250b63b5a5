//! The GSO send batch and the GRO receive batch over real loopback sockets: a GSO send of N
//! segments arrives as N PLUT datagrams the protocol core accepts, with GRO or without; a
//! coalesced receive is split at the segment size (a shorter last segment included); a send
//! the kernel refuses downgrades to plain datagrams and loses none; the switch turns both off.

use std::net::UdpSocket;
use std::time::{Duration, Instant};

use haul_plut::wire::DataHeader;
use haul_plut::Verdict;

use super::gro::RecvBatch;
use super::gso::SendBatch;
use super::{config, offload_setting, DEFAULT_MDS};

const SESSION: u64 = 0x6750_6f00;

fn pair() -> (UdpSocket, UdpSocket) {
    // Buffers as the IO layer sets them: a default receive buffer holds fewer than 100
    // datagrams of 1472 bytes.
    let tuning = super::Tuning::default();
    let rx = super::bind("127.0.0.1:0".parse().expect("address"), &tuning).expect("bind");
    let tx = super::bind("127.0.0.1:0".parse().expect("address"), &tuning).expect("bind");
    tx.connect(rx.local_addr().expect("address"))
        .expect("connect");
    (tx, rx)
}

/// Byte `o` of the test file.
fn byte(o: u64) -> u8 {
    (o % 253) as u8
}

/// Writes DATA datagrams `0..n` of a file of `len` bytes into the batch; returns their lengths.
fn fill(batch: &mut SendBatch, n: usize, len: u64) -> Vec<usize> {
    let payload = config(SESSION, DEFAULT_MDS, 1e9, 1 << 20).payload();
    (0..n)
        .map(|i| {
            let offset = (i * payload) as u64;
            let take = (len - offset).min(payload as u64) as usize;
            let h = DataHeader {
                session: SESSION,
                seq: i as u64,
                offset,
                timestamp: 0,
                rtt_us: 2000,
                len: take as u16,
                retransmit: false,
            };
            let slot = batch.slot(i);
            h.encode(slot).expect("encode");
            for (k, b) in slot[40..40 + take].iter_mut().enumerate() {
                *b = byte(offset + k as u64);
            }
            batch.set_len(i, 40 + take);
            40 + take
        })
        .collect()
}

/// Receives until `want` datagrams arrived (or 5 s passed); returns each datagram's length and
/// how many messages carried more than one.
fn receive(
    rx: &UdpSocket,
    batch: &mut RecvBatch,
    want: usize,
    core: &mut haul_plut::Receiver,
) -> (Vec<usize>, usize, Vec<u8>) {
    let (mut lens, mut coalesced, mut sink) = (Vec::new(), 0, Vec::new());
    let give_up = Instant::now() + Duration::from_secs(5);
    while lens.len() < want && Instant::now() < give_up {
        let n = batch.recv(rx).expect("recv");
        coalesced += batch.coalesced();
        for i in 0..n {
            let d = batch.get(i);
            lens.push(d.len());
            let v = core.handle_datagram(1, d, &mut sink).expect("sink");
            assert_eq!(v, Verdict::Accepted, "datagram {} rejected", lens.len() - 1);
        }
        if n == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    (lens, coalesced, sink)
}

/// Sends `n` datagrams of a file of `len` bytes through a batch asking for GSO and receives
/// them with or without GRO; checks every datagram and byte arrived.
fn round_trip(n: usize, len: u64, gro: bool, refuse_gso: bool) -> (SendBatch, RecvBatch, usize) {
    let (tx, rx) = pair();
    if refuse_gso {
        // The kernel refuses a GSO send with EINVAL on a socket without UDP checksums.
        crate::socket::set_int(&tx, libc::SOL_SOCKET, libc::SO_NO_CHECK, 1).expect("SO_NO_CHECK");
    }
    // GRO is on before anything arrives: the kernel splits what it queued without it.
    let mut inb = RecvBatch::new(&rx, DEFAULT_MDS, 8, gro);
    let mut out = SendBatch::new(&tx, DEFAULT_MDS, 32, true);
    assert!(out.capacity() >= n);
    let sent = fill(&mut out, n, len);
    out.send(&tx, n).expect("send");
    let cfg = config(SESSION, DEFAULT_MDS, 1e9, 1 << 20);
    let mut core = haul_plut::Receiver::new(cfg, len).expect("receiver");
    let (lens, coalesced, sink) = receive(&rx, &mut inb, n, &mut core);
    assert_eq!(lens.len(), sent.len(), "every datagram arrived");
    assert_eq!(lens, sent, "every datagram arrived whole, in order");
    assert_eq!(sink.len() as u64, len);
    assert!(
        sink.iter().enumerate().all(|(o, &b)| b == byte(o as u64)),
        "every byte arrived intact"
    );
    assert!(core.is_complete());
    (out, inb, coalesced)
}

fn gso_offered() -> bool {
    let (tx, _rx) = pair();
    let on = SendBatch::new(&tx, DEFAULT_MDS, 32, true).gso();
    if !on {
        eprintln!("skipped: this kernel offers no UDP GSO");
    }
    on
}

#[test]
fn a_gso_send_of_n_segments_arrives_as_n_plut_datagrams() {
    if !gso_offered() {
        return;
    }
    // 100 datagrams, the last one short: three super-datagrams (44 + 44 + 12) with GSO.
    let len = 99 * 1432 + 700;
    let (out, inb, coalesced) = round_trip(100, len, false, false);
    assert!(out.gso(), "GSO stayed on");
    assert!(!inb.gro());
    assert_eq!(
        coalesced, 0,
        "without GRO the kernel splits super-datagrams"
    );
}

#[test]
fn a_gro_receive_is_split_at_the_segment_size() {
    if !gso_offered() {
        return;
    }
    let len = 99 * 1432 + 700;
    let (out, inb, coalesced) = round_trip(100, len, true, false);
    assert!(out.gso());
    assert!(inb.gro(), "the kernel turned GRO on");
    assert!(
        coalesced >= 1,
        "on loopback a GSO super-datagram reaches a GRO socket whole"
    );
}

#[test]
fn a_refused_gso_send_downgrades_to_plain_datagrams_and_loses_none() {
    if !gso_offered() {
        return;
    }
    let len = 60 * 1432;
    let (out, _, coalesced) = round_trip(60, len, true, true);
    assert!(!out.gso(), "the refusal turned GSO off for good");
    assert_eq!(coalesced, 0);
}

#[test]
fn the_switch_turns_offload_off() {
    let (tx, rx) = pair();
    let out = SendBatch::new(&tx, DEFAULT_MDS, 32, false);
    assert!(!out.gso());
    assert_eq!(out.capacity(), 32);
    assert!(!RecvBatch::new(&rx, DEFAULT_MDS, 8, false).gro());
    assert!(offload_setting(None));
    assert!(offload_setting(Some("1")));
    for off in ["0", "off", "OFF", "no", "false "] {
        assert!(!offload_setting(Some(off)), "{off}");
    }
}

#[test]
fn datagrams_too_large_to_segment_go_plain() {
    let (tx, _rx) = pair();
    assert!(!SendBatch::new(&tx, 65_000, 32, true).gso());
}
