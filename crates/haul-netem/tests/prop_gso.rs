//! Properties of cutting offload packets into wire packets (`haul_netem::gso`): for any TCP or
//! UDP offload packet the wire packets carry the payload once, in order, with valid IPv4 and
//! TCP/UDP checksums, consecutive TCP sequence numbers and the flags where they belong; any
//! bytes at all are either refused or cut without a panic.

use haul_netem::gso::{checksum, Layout, VnetHdr, VNET_LEN};
use proptest::prelude::*;

/// An IPv4 offload packet: `tcp` or UDP, IP ID `id`, TCP sequence `seq` and flags `flags`.
fn packet(tcp: bool, id: u16, seq: u32, flags: u8, payload: &[u8]) -> Vec<u8> {
    let l4 = if tcp { 20 } else { 8 };
    let mut p = vec![0u8; 20 + l4];
    p[0] = 0x45;
    p[2..4].copy_from_slice(&((20 + l4 + payload.len()) as u16).to_be_bytes());
    p[4..6].copy_from_slice(&id.to_be_bytes());
    p[8] = 64;
    p[9] = if tcp { 6 } else { 17 };
    p[12..16].copy_from_slice(&[10, 78, 0, 1]);
    p[16..20].copy_from_slice(&[10, 78, 0, 2]);
    if tcp {
        p[24..28].copy_from_slice(&seq.to_be_bytes());
        p[32] = 5 << 4;
        p[33] = flags;
    }
    p.extend_from_slice(payload);
    p
}

fn pseudo_sum(p: &[u8]) -> u32 {
    let w = |i: usize| u32::from(u16::from_be_bytes([p[i], p[i + 1]]));
    w(12) + w(14) + w(16) + w(18) + u32::from(p[9]) + (p.len() - 20) as u32
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn wire_packets_carry_the_payload_once_with_valid_headers(
        tcp in any::<bool>(),
        id in any::<u16>(),
        seq in any::<u32>(),
        flags in any::<u8>(),
        len in 2usize..60_000,
        mss in 1u16..9_000,
        seed in any::<u8>(),
    ) {
        let payload: Vec<u8> = (0..len).map(|i| (i as u8).wrapping_mul(31) ^ seed).collect();
        let pkt = packet(tcp, id, seq, flags, &payload);
        let vnet = VnetHdr { flags: 1, gso_type: if tcp { 1 } else { 5 }, gso_size: mss, ..Default::default() };
        let lay = Layout::of(&vnet, &pkt);
        prop_assert_eq!(lay.is_some(), len > usize::from(mss));
        let Some(lay) = lay else { return Ok(()) };
        let n = lay.segments();
        prop_assert_eq!(n, len.div_ceil(usize::from(mss)));
        let mut data = Vec::new();
        for i in 0..n {
            let mut s = Vec::new();
            lay.segment(&pkt, i, &mut s);
            prop_assert_eq!(s.len(), lay.wire_len(i));
            prop_assert_eq!(usize::from(u16::from_be_bytes([s[2], s[3]])), s.len());
            prop_assert_eq!(checksum(0, &s[..20]), 0);
            prop_assert_eq!(checksum(pseudo_sum(&s), &s[20..]), 0);
            prop_assert_eq!(u16::from_be_bytes([s[4], s[5]]), id.wrapping_add(i as u16));
            if tcp {
                let got = u32::from_be_bytes(s[24..28].try_into().unwrap());
                prop_assert_eq!(got, seq.wrapping_add((i * usize::from(mss)) as u32));
                let mut want = flags;
                if i + 1 < n { want &= !0x09; }
                if i > 0 { want &= !0x80; }
                prop_assert_eq!(s[33], want);
                data.extend_from_slice(&s[40..]);
            } else {
                prop_assert_eq!(usize::from(u16::from_be_bytes([s[24], s[25]])), s.len() - 20);
                data.extend_from_slice(&s[28..]);
            }
        }
        prop_assert_eq!(data, payload);
    }

    #[test]
    fn any_frame_is_refused_or_cut_without_panic(
        frame in proptest::collection::vec(any::<u8>(), 0..3_000),
        kind in prop_oneof![Just(0u8), Just(1), Just(5), Just(0x81), any::<u8>()],
        mss in any::<u16>(),
    ) {
        let mut frame = frame;
        if frame.len() > VNET_LEN + 20 {
            // Often a plausible IPv4 header, so that the cutting is reached.
            frame[VNET_LEN] = 0x45;
            frame[1] = kind;
            frame[4..6].copy_from_slice(&mss.to_le_bytes());
            let tot = (frame.len() - VNET_LEN) as u16;
            frame[VNET_LEN + 2..VNET_LEN + 4].copy_from_slice(&tot.to_be_bytes());
        }
        let Some(h) = VnetHdr::parse(&frame) else { return Ok(()) };
        let pkt = &frame[VNET_LEN..];
        if let Some(lay) = Layout::of(&h, pkt) {
            let mut wire = 0;
            for i in 0..lay.segments() {
                let mut s = Vec::new();
                lay.segment(pkt, i, &mut s);
                prop_assert_eq!(s.len(), lay.wire_len(i));
                wire += s.len() - lay.header_len();
            }
            prop_assert_eq!(wire + lay.header_len(), pkt.len());
        }
    }
}
