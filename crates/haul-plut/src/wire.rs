//! PLUT wire format: every datagram starts with a 12-byte common header (version, type, flags,
//! reserved, 64-bit session id), then a DATA header and payload or an ACK frame with its loss
//! list. All integers are big-endian. Parsing checks every bound and returns a typed error; it
//! never panics and never allocates. The layout is documented byte by byte in `docs/plut.md`.

use thiserror::Error;

/// Wire-format version carried in byte 0 of every datagram.
pub const VERSION: u8 = 1;
/// Length of the header shared by DATA and ACK datagrams.
pub const COMMON_LEN: usize = 12;
/// Length of a DATA datagram's header (common header included); the payload follows.
pub const DATA_HEADER_LEN: usize = 40;
/// Length of an ACK frame without its loss ranges.
pub const ACK_FIXED_LEN: usize = 68;
/// Bytes taken by one loss range (start, end) in an ACK frame.
pub const RANGE_LEN: usize = 16;
/// Default maximum datagram size: MTU 1500 − IP header 20 − UDP header 8.
pub const DEFAULT_MDS: usize = 1472;
/// Maximum datagram size with 9000-byte jumbo frames.
pub const JUMBO_MDS: usize = 8972;
/// Largest datagram size haul accepts (UDP over IPv4 limit).
pub const MAX_MDS: usize = 65507;

/// Datagram type byte of a DATA datagram.
const TYPE_DATA: u8 = 1;
/// Datagram type byte of an ACK datagram.
const TYPE_ACK: u8 = 2;

/// DATA flag: this datagram is a retransmission.
pub const FLAG_RETRANSMIT: u8 = 0x01;
/// ACK flag: the loss list stops early; nothing is implied about datagrams after its last range.
pub const FLAG_TRUNCATED: u8 = 0x01;

/// Why a datagram was rejected by the parser.
#[derive(Debug, Clone, Copy, Error, PartialEq, Eq)]
pub enum WireError {
    /// Fewer bytes than the fixed header of the claimed type.
    #[error("PLUT datagram truncated: {got} bytes, need at least {need}")]
    Truncated {
        /// Bytes received.
        got: usize,
        /// Bytes the header needs.
        need: usize,
    },
    /// The version byte is not [`VERSION`].
    #[error("unsupported PLUT version {0}")]
    Version(u8),
    /// The type byte is neither DATA nor ACK.
    #[error("unknown PLUT datagram type {0}")]
    Type(u8),
    /// A flag or reserved bit that must be zero was set.
    #[error("reserved PLUT header bits set (flags 0x{flags:02x}, reserved 0x{reserved:04x})")]
    Reserved {
        /// The flags byte.
        flags: u8,
        /// The reserved bytes, or'ed together.
        reserved: u16,
    },
    /// The DATA length field disagrees with the datagram's size.
    #[error("PLUT DATA length field {field} but {actual} payload bytes present")]
    Length {
        /// Length the header claims.
        field: usize,
        /// Payload bytes actually present.
        actual: usize,
    },
    /// offset + length overflows 64 bits.
    #[error("PLUT DATA at offset {0} overflows")]
    Overflow(u64),
    /// The ACK kind byte is not NXT, RXM, TNT or TMO.
    #[error("unknown PLUT ACK kind {0}")]
    AckKind(u8),
    /// The ACK's range count disagrees with its kind or with the datagram's size.
    #[error("PLUT ACK {kind:?} with {count} loss ranges in {len} bytes")]
    RangeCount {
        /// The ACK's kind.
        kind: AckKind,
        /// Ranges it claims.
        count: usize,
        /// Datagram length.
        len: usize,
    },
    /// next_expected > list_start > high, or a loss range is empty, unsorted, or outside
    /// [list_start, high).
    #[error("PLUT ACK loss list inconsistent at range {index} ({start}..{end}, next {next}, high {high})")]
    Ranges {
        /// Index of the offending range (or 0 for the next/high check).
        index: usize,
        /// Range start.
        start: u64,
        /// Range end (exclusive).
        end: u64,
        /// The ACK's next-expected sequence number.
        next: u64,
        /// The ACK's one-past-highest sequence number.
        high: u64,
    },
    /// The output buffer is too small for the datagram being encoded.
    #[error("buffer of {got} bytes too small for a {need}-byte PLUT datagram")]
    BufferTooSmall {
        /// Buffer length.
        got: usize,
        /// Bytes needed.
        need: usize,
    },
}

/// The four acknowledgement kinds of 004 §V-A.2.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AckKind {
    /// Periodic ACK, every datagram so far received in continuity.
    Nxt,
    /// Periodic ACK with holes: carries the loss list.
    Rxm,
    /// Timeout (nothing received for a while), no holes.
    Tnt,
    /// Timeout with holes: carries the loss list.
    Tmo,
}

impl AckKind {
    fn to_byte(self) -> u8 {
        match self {
            AckKind::Nxt => 1,
            AckKind::Rxm => 2,
            AckKind::Tnt => 3,
            AckKind::Tmo => 4,
        }
    }

    fn from_byte(b: u8) -> Result<AckKind, WireError> {
        match b {
            1 => Ok(AckKind::Nxt),
            2 => Ok(AckKind::Rxm),
            3 => Ok(AckKind::Tnt),
            4 => Ok(AckKind::Tmo),
            other => Err(WireError::AckKind(other)),
        }
    }

    /// True for the kinds that carry a loss list (RXM, TMO).
    pub fn has_losses(self) -> bool {
        matches!(self, AckKind::Rxm | AckKind::Tmo)
    }

    /// The kind for a periodic (`timeout == false`) or timeout ACK, with or without holes.
    pub fn select(timeout: bool, holes: bool) -> AckKind {
        match (timeout, holes) {
            (false, false) => AckKind::Nxt,
            (false, true) => AckKind::Rxm,
            (true, false) => AckKind::Tnt,
            (true, true) => AckKind::Tmo,
        }
    }
}

/// The header of a DATA datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataHeader {
    /// Session the datagram belongs to.
    pub session: u64,
    /// Datagram sequence number, from 0.
    pub seq: u64,
    /// Byte offset of the payload in the file.
    pub offset: u64,
    /// Sender clock (low 32 bits of microseconds) when sent, echoed in ACKs for RTT samples.
    pub timestamp: u32,
    /// The sender's smoothed RTT in microseconds, which the receiver uses as its RTT unit.
    pub rtt_us: u32,
    /// Payload length.
    pub len: u16,
    /// Set on retransmissions.
    pub retransmit: bool,
}

impl DataHeader {
    /// Writes the header into `buf[..DATA_HEADER_LEN]`; the payload goes after it.
    pub fn encode(&self, buf: &mut [u8]) -> Result<(), WireError> {
        let (need, got) = (DATA_HEADER_LEN, buf.len());
        let b = buf
            .get_mut(..need)
            .ok_or(WireError::BufferTooSmall { got, need })?;
        put_common(
            b,
            TYPE_DATA,
            if self.retransmit { FLAG_RETRANSMIT } else { 0 },
            self.session,
        );
        b[12..20].copy_from_slice(&self.seq.to_be_bytes());
        b[20..28].copy_from_slice(&self.offset.to_be_bytes());
        b[28..32].copy_from_slice(&self.timestamp.to_be_bytes());
        b[32..36].copy_from_slice(&self.rtt_us.to_be_bytes());
        b[36..38].copy_from_slice(&self.len.to_be_bytes());
        b[38..40].fill(0);
        Ok(())
    }
}

/// Receiver state and measurements carried by every ACK.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AckHeader {
    /// Session the ACK belongs to.
    pub session: u64,
    /// NXT, RXM, TNT or TMO.
    pub kind: AckKind,
    /// ACK counter, increasing; the sender ignores ACKs not newer than the last it used.
    pub ack_seq: u32,
    /// Every datagram below this sequence number has been received.
    pub next_expected: u64,
    /// One past the highest sequence number received.
    pub high: u64,
    /// Goodput the receiver measured over its last ACK interval, bytes per second.
    pub goodput: u64,
    /// Timestamp of the most recent DATA datagram received.
    pub echo_ts: u32,
    /// Microseconds between that datagram's arrival and this ACK.
    pub echo_delay_us: u32,
    /// Microseconds over which `goodput` was measured (the receiver's last ACK interval).
    pub interval_us: u32,
    /// Receiver reorder-buffer occupancy, parts per million of its window.
    pub occupancy_ppm: u32,
    /// The loss list did not fit: datagrams past its last range may be missing too.
    pub truncated: bool,
    /// The loss list describes [list_start, high); a long list is split over several ACKs,
    /// each starting where the previous one stopped.
    pub list_start: u64,
}

/// A parsed ACK: the header and its validated loss list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ack<'a> {
    /// The fixed fields.
    pub header: AckHeader,
    raw_ranges: &'a [u8],
}

impl<'a> Ack<'a> {
    /// The loss ranges `[start, end)` in increasing order.
    pub fn losses(&self) -> impl Iterator<Item = (u64, u64)> + 'a {
        self.raw_ranges
            .chunks_exact(RANGE_LEN)
            .map(|c| (be64(&c[..8]), be64(&c[8..])))
    }

    /// Number of loss ranges.
    pub fn range_count(&self) -> usize {
        self.raw_ranges.len() / RANGE_LEN
    }
}

/// A parsed datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Datagram<'a> {
    /// File data.
    Data(DataHeader, &'a [u8]),
    /// An acknowledgement.
    Ack(Ack<'a>),
}

impl<'a> Datagram<'a> {
    /// Parses and validates one datagram.
    pub fn parse(b: &'a [u8]) -> Result<Datagram<'a>, WireError> {
        if b.len() < COMMON_LEN {
            return Err(WireError::Truncated {
                got: b.len(),
                need: COMMON_LEN,
            });
        }
        if b[0] != VERSION {
            return Err(WireError::Version(b[0]));
        }
        let (ty, flags, reserved, session) = (b[1], b[2], b[3], be64(&b[4..12]));
        match ty {
            TYPE_DATA => parse_data(b, flags, reserved, session),
            TYPE_ACK => parse_ack(b, flags, reserved, session),
            other => Err(WireError::Type(other)),
        }
    }

    /// The session id the datagram claims.
    pub fn session(&self) -> u64 {
        match self {
            Datagram::Data(h, _) => h.session,
            Datagram::Ack(a) => a.header.session,
        }
    }
}

fn parse_data(b: &[u8], flags: u8, reserved: u8, session: u64) -> Result<Datagram<'_>, WireError> {
    if b.len() < DATA_HEADER_LEN {
        return Err(WireError::Truncated {
            got: b.len(),
            need: DATA_HEADER_LEN,
        });
    }
    let tail = u16::from_be_bytes([b[38], b[39]]);
    if flags & !FLAG_RETRANSMIT != 0 || reserved != 0 || tail != 0 {
        return Err(WireError::Reserved {
            flags,
            reserved: u16::from(reserved) | tail,
        });
    }
    let h = DataHeader {
        session,
        seq: be64(&b[12..20]),
        offset: be64(&b[20..28]),
        timestamp: be32(&b[28..32]),
        rtt_us: be32(&b[32..36]),
        len: u16::from_be_bytes([b[36], b[37]]),
        retransmit: flags & FLAG_RETRANSMIT != 0,
    };
    let payload = &b[DATA_HEADER_LEN..];
    if payload.len() != usize::from(h.len) {
        return Err(WireError::Length {
            field: usize::from(h.len),
            actual: payload.len(),
        });
    }
    if h.offset.checked_add(u64::from(h.len)).is_none() {
        return Err(WireError::Overflow(h.offset));
    }
    Ok(Datagram::Data(h, payload))
}

fn parse_ack(b: &[u8], flags: u8, reserved: u8, session: u64) -> Result<Datagram<'_>, WireError> {
    if b.len() < ACK_FIXED_LEN {
        return Err(WireError::Truncated {
            got: b.len(),
            need: ACK_FIXED_LEN,
        });
    }
    if flags & !FLAG_TRUNCATED != 0 || reserved != 0 || b[13] != 0 {
        return Err(WireError::Reserved {
            flags,
            reserved: u16::from(reserved) | u16::from(b[13]),
        });
    }
    let kind = AckKind::from_byte(b[12])?;
    let count = usize::from(u16::from_be_bytes([b[14], b[15]]));
    let raw_ranges = &b[ACK_FIXED_LEN..];
    if raw_ranges.len() != count * RANGE_LEN || kind.has_losses() != (count > 0) {
        return Err(WireError::RangeCount {
            kind,
            count,
            len: b.len(),
        });
    }
    let header = AckHeader {
        session,
        kind,
        ack_seq: be32(&b[16..20]),
        next_expected: be64(&b[20..28]),
        high: be64(&b[28..36]),
        goodput: be64(&b[36..44]),
        echo_ts: be32(&b[44..48]),
        echo_delay_us: be32(&b[48..52]),
        interval_us: be32(&b[52..56]),
        occupancy_ppm: be32(&b[56..60]),
        truncated: flags & FLAG_TRUNCATED != 0,
        list_start: be64(&b[60..68]),
    };
    let ack = Ack { header, raw_ranges };
    let (next, high) = (header.next_expected, header.high);
    let bad = |index, start, end| WireError::Ranges {
        index,
        start,
        end,
        next,
        high,
    };
    if next > header.list_start || header.list_start > high {
        return Err(bad(0, header.list_start, high));
    }
    let mut floor = header.list_start;
    for (index, (start, end)) in ack.losses().enumerate() {
        // Ranges are non-empty, sorted, separated and inside [list_start, high).
        let separated = index == 0 || start > floor;
        if start < floor || !separated || end <= start || end > high {
            return Err(bad(index, start, end));
        }
        floor = end;
    }
    Ok(Datagram::Ack(ack))
}

/// Encodes an ACK with its loss ranges into `buf`, returning the datagram length. The kind
/// must agree with whether `losses` is empty; ranges must be sorted and inside [next, high).
pub fn encode_ack(
    h: &AckHeader,
    losses: &[(u64, u64)],
    buf: &mut [u8],
) -> Result<usize, WireError> {
    let count = losses.len();
    if h.kind.has_losses() != (count > 0) || count > usize::from(u16::MAX) {
        return Err(WireError::RangeCount {
            kind: h.kind,
            count,
            len: ACK_FIXED_LEN + count * RANGE_LEN,
        });
    }
    let (need, got) = (ACK_FIXED_LEN + count * RANGE_LEN, buf.len());
    let b = buf
        .get_mut(..need)
        .ok_or(WireError::BufferTooSmall { got, need })?;
    put_common(
        b,
        TYPE_ACK,
        if h.truncated { FLAG_TRUNCATED } else { 0 },
        h.session,
    );
    b[12] = h.kind.to_byte();
    b[13] = 0;
    // count ≤ u16::MAX was checked above.
    b[14..16].copy_from_slice(&(count as u16).to_be_bytes());
    b[16..20].copy_from_slice(&h.ack_seq.to_be_bytes());
    b[20..28].copy_from_slice(&h.next_expected.to_be_bytes());
    b[28..36].copy_from_slice(&h.high.to_be_bytes());
    b[36..44].copy_from_slice(&h.goodput.to_be_bytes());
    b[44..48].copy_from_slice(&h.echo_ts.to_be_bytes());
    b[48..52].copy_from_slice(&h.echo_delay_us.to_be_bytes());
    b[52..56].copy_from_slice(&h.interval_us.to_be_bytes());
    b[56..60].copy_from_slice(&h.occupancy_ppm.to_be_bytes());
    b[60..68].copy_from_slice(&h.list_start.to_be_bytes());
    for (c, (start, end)) in b[ACK_FIXED_LEN..].chunks_exact_mut(RANGE_LEN).zip(losses) {
        c[..8].copy_from_slice(&start.to_be_bytes());
        c[8..].copy_from_slice(&end.to_be_bytes());
    }
    Ok(need)
}

/// Loss ranges that fit in one ACK of at most `mds` bytes.
pub fn max_ranges(mds: usize) -> usize {
    (mds.saturating_sub(ACK_FIXED_LEN) / RANGE_LEN).min(usize::from(u16::MAX))
}

fn put_common(b: &mut [u8], ty: u8, flags: u8, session: u64) {
    b[0] = VERSION;
    b[1] = ty;
    b[2] = flags;
    b[3] = 0;
    b[4..12].copy_from_slice(&session.to_be_bytes());
}

fn be64(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(b);
    u64::from_be_bytes(a)
}

fn be32(b: &[u8]) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(b);
    u32::from_be_bytes(a)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ack(kind: AckKind) -> AckHeader {
        AckHeader {
            session: 7,
            kind,
            ack_seq: 3,
            next_expected: 10,
            high: 40,
            goodput: 1_000_000,
            echo_ts: 5,
            echo_delay_us: 6,
            interval_us: 7,
            occupancy_ppm: 8,
            truncated: true,
            list_start: 10,
        }
    }

    #[test]
    fn ack_round_trip_and_range_checks() {
        let mut buf = [0u8; 200];
        let n = encode_ack(&ack(AckKind::Rxm), &[(10, 12), (20, 40)], &mut buf).unwrap();
        let Ok(Datagram::Ack(a)) = Datagram::parse(&buf[..n]) else {
            panic!("not an ack")
        };
        assert_eq!(a.header, ack(AckKind::Rxm));
        assert_eq!(a.losses().collect::<Vec<_>>(), vec![(10, 12), (20, 40)]);
        // Adjacent ranges, a range past `high`, and an NXT with losses are all rejected.
        for (kind, r) in [
            (AckKind::Rxm, [(10, 12), (12, 14)]),
            (AckKind::Tmo, [(10, 12), (30, 41)]),
        ] {
            let n = encode_ack(&ack(kind), &r, &mut buf).unwrap();
            assert!(matches!(
                Datagram::parse(&buf[..n]),
                Err(WireError::Ranges { index: 1, .. })
            ));
        }
        assert!(encode_ack(&ack(AckKind::Nxt), &[(10, 11)], &mut buf).is_err());
    }

    #[test]
    fn data_length_must_match() {
        let h = DataHeader {
            session: 1,
            seq: 2,
            offset: 3,
            timestamp: 4,
            rtt_us: 5,
            len: 3,
            retransmit: true,
        };
        let mut buf = [0u8; 44];
        h.encode(&mut buf).unwrap();
        assert_eq!(
            Datagram::parse(&buf[..43]).unwrap(),
            Datagram::Data(h, &[0, 0, 0])
        );
        assert_eq!(
            Datagram::parse(&buf),
            Err(WireError::Length {
                field: 3,
                actual: 4
            })
        );
        buf[0] = 9;
        assert_eq!(Datagram::parse(&buf), Err(WireError::Version(9)));
    }
}
