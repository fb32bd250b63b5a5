//! MODE E, GridFTP's extended block mode (GFD.020 §3): every block carries a 17-byte header
//! (8-bit descriptor, 64-bit byte count, 64-bit offset, big-endian) so blocks may arrive out of
//! order on several parallel connections and are placed by offset. A block whose descriptor has
//! EOF carries, in its offset field, the number of EODs (data connections) the receiver must see.

use thiserror::Error;

/// Length of a MODE E block header.
pub const HEADER_LEN: usize = 17;

/// Largest payload haul accepts in one block (a sender may choose any size up to this).
pub const MAX_BLOCK: u64 = 1 << 30;

/// Descriptor bits of a block header (GFD.020).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Descriptor(pub u8);

impl Descriptor {
    /// End of record (unused by GridFTP file transfers).
    pub const EOR: u8 = 0x80;
    /// End of file: the offset field holds the EOD count.
    pub const EOF: u8 = 0x40;
    /// Suspected errors in the data.
    pub const ERRORS: u8 = 0x20;
    /// The block is a restart marker.
    pub const RESTART: u8 = 0x10;
    /// End of data on this connection.
    pub const EOD: u8 = 0x08;
    /// The sender will close this connection.
    pub const CLOSE: u8 = 0x04;

    /// True when every bit of `flag` is set.
    pub fn has(self, flag: u8) -> bool {
        self.0 & flag == flag
    }
}

/// A block could not be decoded.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum ModeEError {
    /// A descriptor bit haul does not implement was set.
    #[error("unsupported MODE E descriptor 0x{0:02x}")]
    UnsupportedDescriptor(u8),
    /// The byte count is larger than haul accepts in one block.
    #[error("MODE E block of {0} bytes exceeds the {MAX_BLOCK}-byte limit")]
    BlockTooLarge(u64),
    /// offset + count overflows.
    #[error("MODE E block at offset {offset} with {count} bytes overflows")]
    Overflow {
        /// The block's offset.
        offset: u64,
        /// The block's byte count.
        count: u64,
    },
    /// An EOF block carried data or an EOD count of zero.
    #[error("malformed MODE E EOF block (count {count}, EOD count {eods})")]
    BadEof {
        /// Bytes claimed by the EOF block.
        count: u64,
        /// The EOD count it carried.
        eods: u64,
    },
    /// The stream ended in the middle of a block.
    #[error("MODE E stream truncated inside a block ({missing} bytes missing)")]
    Truncated {
        /// Bytes that were still expected.
        missing: u64,
    },
}

/// A decoded block header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// Descriptor bits.
    pub descriptor: Descriptor,
    /// Payload bytes that follow the header.
    pub count: u64,
    /// Offset of the payload in the file; for EOF blocks, the EOD count.
    pub offset: u64,
}

impl Header {
    /// A data block header.
    pub fn data(offset: u64, count: u64) -> Header {
        Header {
            descriptor: Descriptor(0),
            count,
            offset,
        }
    }

    /// An empty EOD block, the last block on one connection.
    pub fn eod() -> Header {
        Header {
            descriptor: Descriptor(Descriptor::EOD),
            count: 0,
            offset: 0,
        }
    }

    /// An EOF block announcing `eods` data connections; GridFTP senders send it once, on one
    /// connection, usually together with that connection's EOD.
    pub fn eof(eods: u64, with_eod: bool) -> Header {
        let d = Descriptor::EOF | if with_eod { Descriptor::EOD } else { 0 };
        Header {
            descriptor: Descriptor(d),
            count: 0,
            offset: eods,
        }
    }

    /// Writes the 17-byte wire form.
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        b[0] = self.descriptor.0;
        b[1..9].copy_from_slice(&self.count.to_be_bytes());
        b[9..17].copy_from_slice(&self.offset.to_be_bytes());
        b
    }

    /// Reads and validates the 17-byte wire form.
    pub fn decode(b: &[u8; HEADER_LEN]) -> Result<Header, ModeEError> {
        let mut c = [0u8; 8];
        c.copy_from_slice(&b[1..9]);
        let count = u64::from_be_bytes(c);
        c.copy_from_slice(&b[9..17]);
        let offset = u64::from_be_bytes(c);
        let h = Header {
            descriptor: Descriptor(b[0]),
            count,
            offset,
        };
        h.validate()?;
        Ok(h)
    }

    /// The number of EODs announced, when this is an EOF block.
    pub fn eod_count(&self) -> Option<u64> {
        self.descriptor.has(Descriptor::EOF).then_some(self.offset)
    }

    fn validate(&self) -> Result<(), ModeEError> {
        let d = self.descriptor.0;
        let known = Descriptor::EOF | Descriptor::EOD | Descriptor::CLOSE;
        if d & !known != 0 {
            return Err(ModeEError::UnsupportedDescriptor(d));
        }
        if self.count > MAX_BLOCK {
            return Err(ModeEError::BlockTooLarge(self.count));
        }
        if self.descriptor.has(Descriptor::EOF) {
            if self.count != 0 || self.offset == 0 || self.offset > 65536 {
                return Err(ModeEError::BadEof {
                    count: self.count,
                    eods: self.offset,
                });
            }
        } else if self.offset.checked_add(self.count).is_none() {
            return Err(ModeEError::Overflow {
                offset: self.offset,
                count: self.count,
            });
        }
        Ok(())
    }
}

/// What the streaming decoder found in the bytes it was given.
#[derive(Debug, PartialEq, Eq)]
pub enum BlockEvent<'a> {
    /// A complete header was read (data follows as `Data` events when `count > 0`).
    Header(Header),
    /// Payload bytes placed at `offset` in the file.
    Data {
        /// File offset of the first byte.
        offset: u64,
        /// The bytes.
        bytes: &'a [u8],
    },
}

/// Incremental decoder for one data connection's MODE E byte stream; it never buffers payload.
#[derive(Debug, Default)]
pub struct BlockDecoder {
    header: [u8; HEADER_LEN],
    have: usize,
    /// Payload bytes still to come in the current block, and where they go.
    remaining: u64,
    next_offset: u64,
}

impl BlockDecoder {
    /// A decoder at the start of a stream.
    pub fn new() -> Self {
        BlockDecoder::default()
    }

    /// Decodes from `input`, returning the bytes consumed and at most one event. Call again with
    /// the unconsumed rest until it consumes nothing.
    pub fn decode<'a>(
        &mut self,
        input: &'a [u8],
    ) -> Result<(usize, Option<BlockEvent<'a>>), ModeEError> {
        if self.remaining > 0 {
            if input.is_empty() {
                return Ok((0, None));
            }
            let n = (self.remaining.min(input.len() as u64)) as usize;
            let ev = BlockEvent::Data {
                offset: self.next_offset,
                bytes: &input[..n],
            };
            self.remaining -= n as u64;
            self.next_offset += n as u64;
            return Ok((n, Some(ev)));
        }
        let take = (HEADER_LEN - self.have).min(input.len());
        self.header[self.have..self.have + take].copy_from_slice(&input[..take]);
        self.have += take;
        if self.have < HEADER_LEN {
            return Ok((take, None));
        }
        self.have = 0;
        let h = Header::decode(&self.header)?;
        if !h.descriptor.has(Descriptor::EOF) {
            self.remaining = h.count;
            self.next_offset = h.offset;
        }
        Ok((take, Some(BlockEvent::Header(h))))
    }

    /// Checks that the stream may end here (not inside a header or a payload).
    pub fn finish(&self) -> Result<(), ModeEError> {
        if self.remaining > 0 {
            return Err(ModeEError::Truncated {
                missing: self.remaining,
            });
        }
        if self.have > 0 {
            return Err(ModeEError::Truncated {
                missing: (HEADER_LEN - self.have) as u64,
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every header and every (offset, bytes) data chunk of a decoded stream.
    type Decoded = (Vec<Header>, Vec<(u64, Vec<u8>)>);

    fn decode_all(mut input: &[u8]) -> Result<Decoded, ModeEError> {
        let mut d = BlockDecoder::new();
        let mut heads = Vec::new();
        let mut data = Vec::new();
        loop {
            let (n, ev) = d.decode(input)?;
            input = &input[n..];
            match ev {
                Some(BlockEvent::Header(h)) => heads.push(h),
                Some(BlockEvent::Data { offset, bytes }) => data.push((offset, bytes.to_vec())),
                None if n == 0 => break,
                None => {}
            }
        }
        d.finish()?;
        Ok((heads, data))
    }

    #[test]
    fn header_round_trip() {
        for h in [
            Header::data(1 << 40, 65536),
            Header::eod(),
            Header::eof(8, true),
        ] {
            assert_eq!(Header::decode(&h.encode()).unwrap(), h);
        }
        assert_eq!(Header::eof(4, false).eod_count(), Some(4));
    }

    #[test]
    fn decodes_blocks_out_of_order() {
        let mut s = Vec::new();
        s.extend_from_slice(&Header::data(5, 3).encode());
        s.extend_from_slice(b"fgh");
        s.extend_from_slice(&Header::data(0, 5).encode());
        s.extend_from_slice(b"abcde");
        s.extend_from_slice(&Header::eof(1, true).encode());
        let (heads, data) = decode_all(&s).unwrap();
        assert_eq!(heads.len(), 3);
        assert_eq!(data, vec![(5, b"fgh".to_vec()), (0, b"abcde".to_vec())]);
    }

    #[test]
    fn rejects_bad_headers_and_truncation() {
        let mut b = Header::data(0, 1).encode();
        b[0] = Descriptor::RESTART;
        assert_eq!(
            Header::decode(&b),
            Err(ModeEError::UnsupportedDescriptor(0x10))
        );
        assert!(matches!(
            Header::decode(&Header::data(u64::MAX, 2).encode()),
            Err(ModeEError::Overflow { .. })
        ));
        assert!(matches!(
            Header::decode(&Header::data(0, MAX_BLOCK + 1).encode()),
            Err(ModeEError::BlockTooLarge(_))
        ));
        let mut s = Header::data(0, 10).encode().to_vec();
        s.extend_from_slice(b"abc");
        assert_eq!(decode_all(&s), Err(ModeEError::Truncated { missing: 7 }));
        assert_eq!(
            decode_all(&s[..5]),
            Err(ModeEError::Truncated { missing: 12 })
        );
    }
}
