//! PLUT transfers over loopback with UDP GSO / GRO on, off (the `Tuning::offload` switch), and
//! with GSO refused by the kernel in mid-transfer setup (a socket without UDP checksums, on
//! which every GSO send fails with EINVAL): each file arrives byte-exact, and the stats say
//! which path carried it.

use std::fs::File;
use std::net::UdpSocket;
use std::time::Duration;

use haul_transport::mode_e::Progress;
use haul_transport::plut::{self, Stats, Tuning};
use haul_transport::socket::set_int;
use rand::{Rng, SeedableRng};

const RATE: f64 = 1.25e9;

/// Whether this kernel offers UDP GSO and GRO (Linux 4.18 and 5.0 on).
fn offered() -> bool {
    let s = UdpSocket::bind("127.0.0.1:0").unwrap();
    let on = set_int(&s, libc::SOL_UDP, libc::UDP_SEGMENT, 0).is_ok()
        && set_int(&s, libc::SOL_UDP, libc::UDP_GRO, 1).is_ok();
    if !on {
        eprintln!("skipped: this kernel offers no UDP GSO / GRO");
    }
    on
}

/// Moves a random file of `len` bytes in datagrams of `mds` bytes; `refuse_gso` takes UDP
/// checksums off the sending socket first. Returns both ends' stats after checking the copy.
fn transfer(len: usize, mds: usize, offload: bool, refuse_gso: bool) -> (Stats, Stats) {
    let dir = tempfile::tempdir().unwrap();
    let mut bytes = vec![0u8; len];
    rand::rngs::StdRng::seed_from_u64(len as u64).fill(&mut bytes[..]);
    std::fs::write(dir.path().join("src"), &bytes).unwrap();
    let src = File::open(dir.path().join("src")).unwrap();
    let dst = File::create(dir.path().join("dst")).unwrap();
    let tuning = Tuning {
        idle_timeout: Duration::from_secs(20),
        offload,
        ..Tuning::default()
    };
    let cfg = plut::config(0x00ff_10ad, mds, RATE, 64 << 20);
    let rx = plut::bind("127.0.0.1:0".parse().unwrap(), &tuning).unwrap();
    let tx = plut::bind("127.0.0.1:0".parse().unwrap(), &tuning).unwrap();
    if refuse_gso {
        set_int(&tx, libc::SOL_SOCKET, libc::SO_NO_CHECK, 1).expect("SO_NO_CHECK");
    }
    let addr = rx.local_addr().unwrap();
    let (pr, ps) = (Progress::default(), Progress::default());
    let (sent, got) = std::thread::scope(|s| {
        let r = s.spawn(|| plut::receive(&rx, &dst, 0, len as u64, &cfg, &tuning, &pr));
        let t = s.spawn(|| plut::send(&tx, addr, &src, 0, len as u64, &cfg, &tuning, &ps));
        (
            t.join().unwrap().expect("send"),
            r.join().unwrap().expect("receive"),
        )
    });
    drop(dst);
    assert!(
        std::fs::read(dir.path().join("dst")).unwrap() == bytes,
        "file arrived byte-exact"
    );
    eprintln!("sender {sent:?}\nreceiver {got:?}");
    (sent, got)
}

#[test]
fn with_gso_and_gro_a_file_arrives_exact() {
    if !offered() {
        return;
    }
    let (s, r) = transfer((48 << 20) + 4321, plut::DEFAULT_MDS, true, false);
    assert!(s.gso, "the sender kept GSO on");
    assert!(r.gro, "the receiver coalesced with GRO");
    let st = s.sender.unwrap();
    assert!(
        st.datagrams_sent > 2 * s.send_batches,
        "several datagrams per sendmmsg: {} in {}",
        st.datagrams_sent,
        s.send_batches
    );
}

#[test]
fn with_offload_off_a_file_arrives_exact_over_plain_datagrams() {
    let (s, r) = transfer((16 << 20) + 99, plut::DEFAULT_MDS, false, false);
    assert!(!s.gso && !r.gro, "the switch forced the plain path");
}

#[test]
fn when_the_kernel_refuses_gso_the_sender_falls_back_and_the_file_arrives_exact() {
    if !offered() {
        return;
    }
    let (s, r) = transfer((16 << 20) + 7, plut::DEFAULT_MDS, true, true);
    assert!(!s.gso, "the refused GSO send turned GSO off");
    assert!(r.gro);
}

#[test]
fn jumbo_datagrams_go_through_gso_too() {
    if !offered() {
        return;
    }
    let (s, r) = transfer((24 << 20) + 1, plut::JUMBO_MDS, true, false);
    assert!(s.gso && r.gro);
}
