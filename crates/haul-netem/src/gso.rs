//! Segmentation offload through the emulator's TUN devices, as a pure layer.
//!
//! With `IFF_VNET_HDR` and TCP/UDP segmentation offload switched on, the kernel hands a TUN
//! reader one large packet where the wire would carry several (a GSO packet: up to 64 KiB with
//! a `virtio_net_hdr` in front saying how to cut it), and accepts such packets when they are
//! written back. The forwarder then pays one read, one write and one pass through the receiving
//! stack for several wire packets. The link model still decides the fate of every wire packet:
//! [`Layout`] says how many there are and how long each is on the wire, and [`Layout::segment`]
//! cuts out one of them, with its own IPv4 and TCP/UDP headers and full checksums, for the rare
//! packet whose segments do not all share one fate (one lost, one duplicated).
//!
//! Only IPv4 is offloaded (the testbed's namespaces have IPv6 off); any other packet is one
//! wire packet.

/// Bytes of the `virtio_net_hdr` in front of every packet on a `IFF_VNET_HDR` device.
pub const VNET_LEN: usize = 10;
/// `VIRTIO_NET_HDR_F_NEEDS_CSUM`: the checksum is partial, to be completed downstream.
const F_NEEDS_CSUM: u8 = 1;
/// `VIRTIO_NET_HDR_GSO_NONE`.
const GSO_NONE: u8 = 0;
/// `VIRTIO_NET_HDR_GSO_TCPV4`.
const GSO_TCPV4: u8 = 1;
/// `VIRTIO_NET_HDR_GSO_UDP_L4` (UDP segmentation, `UDP_SEGMENT`).
const GSO_UDP_L4: u8 = 5;
/// `VIRTIO_NET_HDR_GSO_ECN`, or-ed into the type.
const GSO_ECN: u8 = 0x80;
const TCP: u8 = 6;
const UDP: u8 = 17;

/// The `virtio_net_hdr` (native byte order, little-endian on the supported targets).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct VnetHdr {
    /// `VIRTIO_NET_HDR_F_*`.
    pub flags: u8,
    /// `VIRTIO_NET_HDR_GSO_*`.
    pub gso_type: u8,
    /// Length of the headers, a hint.
    pub hdr_len: u16,
    /// Payload bytes per segment.
    pub gso_size: u16,
    /// Where the partial checksum starts.
    pub csum_start: u16,
    /// Where the checksum is stored, from `csum_start`.
    pub csum_offset: u16,
}

impl VnetHdr {
    /// Reads the header in front of a packet; `None` when the buffer is shorter than one.
    pub fn parse(b: &[u8]) -> Option<VnetHdr> {
        let b = b.get(..VNET_LEN)?;
        let u16_at = |i: usize| u16::from_le_bytes([b[i], b[i + 1]]);
        Some(VnetHdr {
            flags: b[0],
            gso_type: b[1],
            hdr_len: u16_at(2),
            gso_size: u16_at(4),
            csum_start: u16_at(6),
            csum_offset: u16_at(8),
        })
    }

    /// Writes the header into the first [`VNET_LEN`] bytes of `out`.
    pub fn write(&self, out: &mut [u8]) {
        out[0] = self.flags;
        out[1] = self.gso_type;
        out[2..4].copy_from_slice(&self.hdr_len.to_le_bytes());
        out[4..6].copy_from_slice(&self.gso_size.to_le_bytes());
        out[6..8].copy_from_slice(&self.csum_start.to_le_bytes());
        out[8..10].copy_from_slice(&self.csum_offset.to_le_bytes());
    }

    /// Whether the packet behind this header carries a partial checksum.
    pub fn needs_csum(&self) -> bool {
        self.flags & F_NEEDS_CSUM != 0
    }
}

/// How one GSO packet is cut into wire packets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    proto: u8,
    ip_hl: usize,
    hdr_len: usize,
    payload: usize,
    mss: usize,
}

impl Layout {
    /// The layout of `pkt` (the IP packet, without the vnet header) under `vnet`. `None` when
    /// the packet is one wire packet: no segmentation asked for, a kind this layer does not
    /// cut, headers that do not add up, or a payload that fits one segment.
    pub fn of(vnet: &VnetHdr, pkt: &[u8]) -> Option<Layout> {
        let proto = match vnet.gso_type & !GSO_ECN {
            GSO_NONE => return None,
            GSO_TCPV4 => TCP,
            GSO_UDP_L4 => UDP,
            _ => return None,
        };
        if pkt.len() < 20 || pkt[0] >> 4 != 4 || pkt[9] != proto {
            return None;
        }
        let ip_hl = usize::from(pkt[0] & 0x0f) * 4;
        let tot_len = usize::from(u16::from_be_bytes([pkt[2], pkt[3]]));
        if ip_hl < 20 || tot_len != pkt.len() {
            return None;
        }
        let l4_hl = if proto == TCP {
            usize::from(*pkt.get(ip_hl + 12)? >> 4) * 4
        } else {
            8
        };
        let hdr_len = ip_hl + l4_hl;
        let mss = usize::from(vnet.gso_size);
        if l4_hl < 8 || hdr_len > pkt.len() || mss == 0 {
            return None;
        }
        let payload = pkt.len() - hdr_len;
        (payload > mss).then_some(Layout {
            proto,
            ip_hl,
            hdr_len,
            payload,
            mss,
        })
    }

    /// The bytes of IPv4 and TCP/UDP headers every wire packet carries.
    pub fn header_len(&self) -> usize {
        self.hdr_len
    }

    /// The number of wire packets.
    pub fn segments(&self) -> usize {
        self.payload.div_ceil(self.mss)
    }

    fn data_len(&self, i: usize) -> usize {
        self.mss.min(self.payload - i * self.mss)
    }

    /// The length of wire packet `i` (headers included).
    pub fn wire_len(&self, i: usize) -> usize {
        self.hdr_len + self.data_len(i)
    }

    /// Appends wire packet `i` of `pkt` to `out`: the headers with lengths, IPv4 ID, TCP
    /// sequence number and flags of that segment, and full IPv4 and TCP/UDP checksums.
    pub fn segment(&self, pkt: &[u8], i: usize, out: &mut Vec<u8>) {
        let (ip_hl, last) = (self.ip_hl, i + 1 == self.segments());
        let dlen = self.data_len(i);
        let start = out.len();
        out.extend_from_slice(&pkt[..self.hdr_len]);
        let from = self.hdr_len + i * self.mss;
        out.extend_from_slice(&pkt[from..from + dlen]);
        let p = &mut out[start..];
        let tot = (self.hdr_len + dlen) as u16;
        p[2..4].copy_from_slice(&tot.to_be_bytes());
        let id = u16::from_be_bytes([p[4], p[5]]).wrapping_add(i as u16);
        p[4..6].copy_from_slice(&id.to_be_bytes());
        p[10..12].fill(0);
        let ip_sum = checksum(0, &p[..ip_hl]);
        p[10..12].copy_from_slice(&ip_sum.to_be_bytes());
        let l4_len = p.len() - ip_hl;
        let csum_at = if self.proto == TCP {
            let seq = u32::from_be_bytes([p[ip_hl + 4], p[ip_hl + 5], p[ip_hl + 6], p[ip_hl + 7]]);
            let seq = seq.wrapping_add((i * self.mss) as u32);
            p[ip_hl + 4..ip_hl + 8].copy_from_slice(&seq.to_be_bytes());
            if !last {
                p[ip_hl + 13] &= !0x09; // FIN, PSH: the last segment's
            }
            if i > 0 {
                p[ip_hl + 13] &= !0x80; // CWR: the first segment's
            }
            ip_hl + 16
        } else {
            p[ip_hl + 4..ip_hl + 6].copy_from_slice(&(l4_len as u16).to_be_bytes());
            ip_hl + 6
        };
        p[csum_at..csum_at + 2].fill(0);
        let mut pseudo = sum_words(0, &p[12..20]);
        pseudo += u32::from(self.proto) + l4_len as u32;
        let mut l4_sum = checksum(pseudo, &p[ip_hl..]);
        if self.proto == UDP && l4_sum == 0 {
            l4_sum = 0xffff;
        }
        p[csum_at..csum_at + 2].copy_from_slice(&l4_sum.to_be_bytes());
    }
}

/// Adds `b` as big-endian 16-bit words (an odd last byte padded with zero) to `acc`.
fn sum_words(mut acc: u32, b: &[u8]) -> u32 {
    let mut words = b.chunks_exact(2);
    for w in &mut words {
        acc += u32::from(u16::from_be_bytes([w[0], w[1]]));
        acc = (acc & 0xffff) + (acc >> 16);
    }
    if let [x] = words.remainder() {
        acc += u32::from(*x) << 8;
    }
    acc
}

/// The Internet checksum (RFC 1071) of `b`, starting from the partial sum `acc`.
pub fn checksum(acc: u32, b: &[u8]) -> u16 {
    let mut s = sum_words(acc, b);
    while s >> 16 != 0 {
        s = (s & 0xffff) + (s >> 16);
    }
    !(s as u16)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An IPv4/TCP GSO packet from 10.0.0.1:1000 to 10.0.0.2:2000 carrying `payload`.
    fn tcp_packet(payload: &[u8], flags: u8) -> Vec<u8> {
        let mut p = vec![0u8; 40];
        p[0] = 0x45;
        p[2..4].copy_from_slice(&((40 + payload.len()) as u16).to_be_bytes());
        p[4..6].copy_from_slice(&0xfffeu16.to_be_bytes());
        p[6] = 0x40;
        p[8] = 64;
        p[9] = TCP;
        p[12..16].copy_from_slice(&[10, 0, 0, 1]);
        p[16..20].copy_from_slice(&[10, 0, 0, 2]);
        p[20..22].copy_from_slice(&1000u16.to_be_bytes());
        p[22..24].copy_from_slice(&2000u16.to_be_bytes());
        p[24..28].copy_from_slice(&0xffff_ff00u32.to_be_bytes());
        p[32] = 5 << 4;
        p[33] = flags;
        p.extend_from_slice(payload);
        p
    }

    fn gso(kind: u8, mss: u16) -> VnetHdr {
        VnetHdr {
            flags: F_NEEDS_CSUM,
            gso_type: kind,
            gso_size: mss,
            ..Default::default()
        }
    }

    #[test]
    fn vnet_header_round_trips() {
        let h = VnetHdr {
            flags: 1,
            gso_type: GSO_TCPV4 | GSO_ECN,
            hdr_len: 52,
            gso_size: 1448,
            csum_start: 34,
            csum_offset: 16,
        };
        let mut b = [0u8; VNET_LEN];
        h.write(&mut b);
        assert_eq!(VnetHdr::parse(&b), Some(h));
        assert_eq!(VnetHdr::parse(&b[..9]), None);
    }

    #[test]
    fn tcp_segments_carry_consecutive_sequence_numbers_and_valid_checksums() {
        let payload: Vec<u8> = (0..3500u32).map(|i| (i * 7) as u8).collect();
        let pkt = tcp_packet(&payload, 0x80 | 0x18 | 0x01); // CWR, PSH+ACK, FIN
        let lay = Layout::of(&gso(GSO_TCPV4, 1448), &pkt).unwrap();
        assert_eq!(lay.segments(), 3);
        assert_eq!(
            (0..3).map(|i| lay.wire_len(i)).collect::<Vec<_>>(),
            [1488, 1488, 644]
        );
        let mut data = Vec::new();
        for i in 0..3 {
            let mut s = Vec::new();
            lay.segment(&pkt, i, &mut s);
            assert_eq!(s.len(), lay.wire_len(i));
            assert_eq!(checksum(0, &s[..20]), 0, "IPv4 header checksum");
            let pseudo = sum_words(0, &s[12..20]) + 6 + (s.len() - 20) as u32;
            assert_eq!(checksum(pseudo, &s[20..]), 0, "TCP checksum");
            let seq = u32::from_be_bytes(s[24..28].try_into().unwrap());
            assert_eq!(seq, 0xffff_ff00u32.wrapping_add(i as u32 * 1448));
            assert_eq!(
                u16::from_be_bytes([s[4], s[5]]),
                0xfffeu16.wrapping_add(i as u16)
            );
            let want = match i {
                0 => 0x80 | 0x10,
                1 => 0x10,
                _ => 0x18 | 0x01,
            };
            assert_eq!(s[33], want, "flags of segment {i}");
            data.extend_from_slice(&s[40..]);
        }
        assert_eq!(data, payload);
    }

    #[test]
    fn udp_segments_are_datagrams_of_their_own() {
        let mut pkt = tcp_packet(&[], 0);
        pkt.truncate(28);
        pkt[9] = UDP;
        pkt.extend((0..3000u32).map(|i| i as u8));
        let tot = pkt.len() as u16;
        pkt[2..4].copy_from_slice(&tot.to_be_bytes());
        let lay = Layout::of(&gso(GSO_UDP_L4, 1472), &pkt).unwrap();
        assert_eq!(lay.segments(), 3);
        for i in 0..3 {
            let mut s = Vec::new();
            lay.segment(&pkt, i, &mut s);
            let ulen = usize::from(u16::from_be_bytes([s[24], s[25]]));
            assert_eq!(ulen, s.len() - 20);
            let pseudo = sum_words(0, &s[12..20]) + 17 + ulen as u32;
            assert_eq!(checksum(pseudo, &s[20..]), 0, "UDP checksum");
        }
    }

    #[test]
    fn packets_that_are_not_cut_have_no_layout() {
        let pkt = tcp_packet(&[0; 3000], 0x10);
        assert_eq!(Layout::of(&VnetHdr::default(), &pkt), None, "no GSO");
        assert_eq!(Layout::of(&gso(GSO_TCPV4, 3000), &pkt), None, "one segment");
        assert_eq!(Layout::of(&gso(GSO_UDP_L4, 1000), &pkt), None, "TCP as UDP");
        assert_eq!(Layout::of(&gso(GSO_TCPV4, 0), &pkt), None, "zero MSS");
        assert_eq!(
            Layout::of(&gso(GSO_TCPV4, 1000), &pkt[..100]),
            None,
            "short"
        );
        assert_eq!(Layout::of(&gso(4, 1000), &pkt), None, "IPv6 kind");
    }
}
