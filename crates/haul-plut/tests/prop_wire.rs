//! Property tests of the PLUT datagram parser: arbitrary bytes never panic it, and whatever it
//! accepts re-encodes to the same bytes; valid DATA and ACK datagrams round-trip exactly; and a
//! receiver fed arbitrary bytes never writes anything or crashes.

use haul_plut::wire::{
    encode_ack, AckHeader, AckKind, DataHeader, Datagram, ACK_FIXED_LEN, DATA_HEADER_LEN, RANGE_LEN,
};
use haul_plut::{Config, Receiver, Verdict};
use proptest::prelude::*;

/// Re-encodes a parsed datagram.
fn encode(d: &Datagram<'_>) -> Vec<u8> {
    match d {
        Datagram::Data(h, payload) => {
            let mut b = vec![0u8; DATA_HEADER_LEN + payload.len()];
            h.encode(&mut b).expect("room for the header");
            b[DATA_HEADER_LEN..].copy_from_slice(payload);
            b
        }
        Datagram::Ack(a) => {
            let losses: Vec<_> = a.losses().collect();
            let mut b = vec![0u8; ACK_FIXED_LEN + losses.len() * RANGE_LEN];
            let n = encode_ack(&a.header, &losses, &mut b).expect("a parsed ACK re-encodes");
            b.truncate(n);
            b
        }
    }
}

fn kind() -> impl Strategy<Value = AckKind> {
    prop_oneof![
        Just(AckKind::Nxt),
        Just(AckKind::Rxm),
        Just(AckKind::Tnt),
        Just(AckKind::Tmo)
    ]
}

proptest! {
    #[test]
    fn arbitrary_bytes_never_panic_and_accepted_ones_reencode(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        if let Ok(d) = Datagram::parse(&bytes) {
            prop_assert_eq!(encode(&d), bytes);
        }
    }

    #[test]
    fn mutated_valid_datagrams_never_panic(seq in any::<u64>(), flips in proptest::collection::vec((0usize..120, any::<u8>()), 1..6)) {
        let h = DataHeader { session: 9, seq, offset: 0, timestamp: 1, rtt_us: 2, len: 80, retransmit: false };
        let mut b = vec![7u8; DATA_HEADER_LEN + 80];
        h.encode(&mut b).unwrap();
        for (i, x) in flips {
            b[i] ^= x;
        }
        if let Ok(d) = Datagram::parse(&b) {
            prop_assert_eq!(encode(&d), b);
        }
    }

    #[test]
    fn data_round_trips(session in any::<u64>(), seq in any::<u64>(), offset in 0u64..u64::MAX / 2, timestamp in any::<u32>(),
                        rtt_us in any::<u32>(), payload in proptest::collection::vec(any::<u8>(), 0..200), retransmit in any::<bool>()) {
        let h = DataHeader { session, seq, offset, timestamp, rtt_us, len: payload.len() as u16, retransmit };
        let mut b = vec![0u8; DATA_HEADER_LEN + payload.len()];
        h.encode(&mut b).unwrap();
        b[DATA_HEADER_LEN..].copy_from_slice(&payload);
        prop_assert_eq!(Datagram::parse(&b), Ok(Datagram::Data(h, &payload)));
    }

    #[test]
    fn ack_round_trips(session in any::<u64>(), kind in kind(), next in 0u64..1 << 40, gaps in proptest::collection::vec((1u64..1000, 1u64..1000), 0..20),
                       goodput in any::<u64>(), ack_seq in any::<u32>(), truncated in any::<bool>()) {
        // Build separated, sorted ranges above `next`.
        let mut losses = Vec::new();
        let mut at = next;
        if kind.has_losses() {
            for (gap, len) in &gaps {
                losses.push((at + gap, at + gap + len));
                at += gap + len;
            }
            if losses.is_empty() {
                losses.push((next, next + 1));
                at = next + 1;
            }
        }
        let h = AckHeader { session, kind, ack_seq, next_expected: next, high: at + 1, goodput, echo_ts: 3, echo_delay_us: 4,
                            interval_us: 5, occupancy_ppm: 6, truncated, list_start: next };
        let mut b = vec![0u8; ACK_FIXED_LEN + losses.len() * RANGE_LEN];
        let n = encode_ack(&h, &losses, &mut b).unwrap();
        let Ok(Datagram::Ack(a)) = Datagram::parse(&b[..n]) else { panic!("valid ACK rejected") };
        prop_assert_eq!(a.header, h);
        prop_assert_eq!(a.losses().collect::<Vec<_>>(), losses);
    }

    #[test]
    fn receiver_survives_arbitrary_datagrams(datagrams in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..120), 1..20)) {
        let cfg = Config { session: 0, ..Config::default() };
        let mut r = Receiver::new(cfg, 10_000).unwrap();
        let mut out = Vec::new();
        for (i, d) in datagrams.iter().enumerate() {
            let v = r.handle_datagram(i as u64, d, &mut out).unwrap();
            prop_assert!(matches!(v, Verdict::Dropped(_)), "random bytes accepted: {:?}", v);
        }
        prop_assert!(out.is_empty());
    }
}
