//! Property tests of the MODE E decoder: arbitrary bytes never panic it or make it place data
//! outside the block being read, any valid block sequence decodes to exactly what was encoded
//! however it is chunked, and a stream cut inside a block is reported as truncated.

mod common;

use haul_proto::mode_e::MAX_BLOCK;
use haul_proto::{BlockDecoder, BlockEvent, Descriptor, Header, ModeEError, HEADER_LEN};
use proptest::prelude::*;

/// What a decoder produced from one stream.
#[derive(Debug, Default, PartialEq)]
struct Decoded {
    headers: Vec<Header>,
    data: Vec<(u64, Vec<u8>)>,
}

/// Feeds `chunks` through one decoder, checking on the way that every `Data` event lies inside
/// the range the last header declared and follows the previous one. Returns the events and
/// the first error, if any.
fn run(chunks: &[&[u8]]) -> Result<(Decoded, Result<(), ModeEError>), TestCaseError> {
    let mut d = BlockDecoder::new();
    let mut out = Decoded::default();
    // Where the next payload byte of the current block must go, and where the block ends.
    let mut expect: Option<(u64, u64)> = None;
    for chunk in chunks {
        let mut input: &[u8] = chunk;
        loop {
            let (n, ev) = match d.decode(input) {
                Ok(x) => x,
                Err(e) => return Ok((out, Err(e))),
            };
            prop_assert!(n <= input.len());
            match ev {
                Some(BlockEvent::Header(h)) => {
                    prop_assert!(
                        expect.is_none(),
                        "header {h:?} before the previous payload ended"
                    );
                    prop_assert!(h.count <= MAX_BLOCK);
                    if h.descriptor.has(Descriptor::EOF) {
                        prop_assert_eq!(h.count, 0);
                    } else if h.count > 0 {
                        expect = Some((h.offset, h.offset + h.count));
                    }
                    out.headers.push(h);
                }
                Some(BlockEvent::Data { offset, bytes }) => {
                    let Some((next, end)) = expect else {
                        return Err(TestCaseError::fail(format!(
                            "data at {offset} without a header"
                        )));
                    };
                    prop_assert_eq!(offset, next);
                    prop_assert!(!bytes.is_empty());
                    prop_assert_eq!(bytes.len(), n);
                    let stop = offset + bytes.len() as u64;
                    prop_assert!(stop <= end, "data {offset}..{stop} beyond block end {end}");
                    expect = (stop < end).then_some((stop, end));
                    out.data.push((offset, bytes.to_vec()));
                }
                None if n == 0 => break,
                None => prop_assert_eq!(
                    n,
                    input.len(),
                    "partial header consumed only part of the input"
                ),
            }
            input = &input[n..];
        }
    }
    Ok((out, d.finish()))
}

/// One block of a valid stream, before encoding.
#[derive(Debug, Clone)]
enum Block {
    /// Payload at an offset, with optional EOD/CLOSE bits.
    Data {
        offset: u64,
        payload: Vec<u8>,
        flags: u8,
    },
    /// An empty EOD block.
    Eod,
    /// An EOF block announcing this many EODs.
    Eof { eods: u64, with_eod: bool },
}

impl Block {
    fn header(&self) -> Header {
        match self {
            Block::Data {
                offset,
                payload,
                flags,
            } => Header {
                descriptor: Descriptor(*flags),
                count: payload.len() as u64,
                offset: *offset,
            },
            Block::Eod => Header::eod(),
            Block::Eof { eods, with_eod } => Header::eof(*eods, *with_eod),
        }
    }

    fn payload(&self) -> &[u8] {
        match self {
            Block::Data { payload, .. } => payload,
            _ => &[],
        }
    }
}

/// A file placed at a base offset, its bytes cut into pieces that are shuffled (as parallel
/// streams deliver them) and interleaved with empty, EOD and EOF blocks.
#[derive(Debug, Clone)]
struct Stream {
    base: u64,
    file: Vec<u8>,
    blocks: Vec<Block>,
}

fn stream() -> impl Strategy<Value = Stream> {
    let base = prop_oneof![
        Just(0u64),
        any::<u64>().prop_map(|b| b >> 1),
        Just(u64::MAX - 4096)
    ];
    (
        base,
        prop::collection::vec(any::<u8>(), 0..600),
        prop::collection::vec(1usize..80, 1..40),
    )
        .prop_flat_map(|(base, file, sizes)| {
            let mut pieces = Vec::new();
            let mut at = 0;
            for s in sizes.into_iter().cycle() {
                if at >= file.len() {
                    break;
                }
                let end = (at + s).min(file.len());
                pieces.push((at, end));
                at = end;
            }
            let flag = prop_oneof![Just(0u8), Just(Descriptor::EOD), Just(Descriptor::CLOSE)];
            let flags = prop::collection::vec(flag, pieces.len());
            let extra = prop_oneof![
                Just(Block::Eod),
                Just(Block::Data {
                    offset: base,
                    payload: Vec::new(),
                    flags: 0
                }),
                (1u64..=65536, any::<bool>())
                    .prop_map(|(eods, with_eod)| Block::Eof { eods, with_eod }),
            ];
            (
                Just((base, file, pieces)),
                flags,
                prop::collection::vec(extra, 0..4),
            )
        })
        .prop_flat_map(|((base, file, pieces), flags, extras)| {
            let mut blocks: Vec<Block> = pieces
                .iter()
                .zip(flags)
                .map(|(&(a, b), flags)| Block::Data {
                    offset: base + a as u64,
                    payload: file[a..b].to_vec(),
                    flags,
                })
                .collect();
            blocks.extend(extras);
            (Just((base, file)), Just(blocks).prop_shuffle())
        })
        .prop_map(|((base, file), blocks)| Stream { base, file, blocks })
}

fn encode(blocks: &[Block]) -> Vec<u8> {
    let mut s = Vec::new();
    for b in blocks {
        s.extend_from_slice(&b.header().encode());
        s.extend_from_slice(b.payload());
    }
    s
}

/// Stream positions that fall strictly inside a block (header or payload).
fn inside_positions(blocks: &[Block]) -> Vec<usize> {
    let mut out = Vec::new();
    let mut at = 0;
    for b in blocks {
        let len = HEADER_LEN + b.payload().len();
        out.extend(at + 1..at + len);
        at += len;
    }
    out
}

proptest! {
    #[test]
    fn arbitrary_bytes_never_escape_the_block(data in prop::collection::vec(any::<u8>(), 0..400), cuts in common::cuts(16)) {
        let _ = run(&common::chunks(&data, &cuts))?;
    }

    #[test]
    fn header_like_bytes_never_escape_the_block(
        heads in prop::collection::vec(
            (prop_oneof![Just(0u8), Just(8), Just(0x40), Just(0x48), Just(4), any::<u8>()],
             prop_oneof![0u64..64, any::<u64>()],
             prop_oneof![0u64..64, any::<u64>(), Just(u64::MAX)],
             prop::collection::vec(any::<u8>(), 0..64)),
            0..8),
        cuts in common::cuts(16),
    ) {
        let mut s = Vec::new();
        for (d, count, offset, tail) in heads {
            s.push(d);
            s.extend_from_slice(&count.to_be_bytes());
            s.extend_from_slice(&offset.to_be_bytes());
            s.extend_from_slice(&tail);
        }
        let _ = run(&common::chunks(&s, &cuts))?;
    }

    #[test]
    fn valid_blocks_decode_exactly(st in stream(), cuts in common::cuts(32)) {
        let wire = encode(&st.blocks);
        let (got, end) = run(&common::chunks(&wire, &cuts))?;
        prop_assert_eq!(end, Ok(()));
        let headers: Vec<Header> = st.blocks.iter().map(Block::header).collect();
        prop_assert_eq!(&got.headers, &headers);

        // Reassemble the file by offset; every byte must land exactly once.
        let mut rebuilt = vec![None::<u8>; st.file.len()];
        for (off, bytes) in &got.data {
            let start = (off - st.base) as usize;
            for (i, &byte) in bytes.iter().enumerate() {
                prop_assert_eq!(rebuilt[start + i], None, "byte {} written twice", start + i);
                rebuilt[start + i] = Some(byte);
            }
        }
        let rebuilt: Option<Vec<u8>> = rebuilt.into_iter().collect();
        prop_assert_eq!(rebuilt, Some(st.file));
    }

    #[test]
    fn truncation_inside_a_block_is_reported(st in stream(), pick in any::<prop::sample::Index>(), cuts in common::cuts(8)) {
        let wire = encode(&st.blocks);
        let inside = inside_positions(&st.blocks);
        prop_assume!(!inside.is_empty());
        let cut = inside[pick.index(inside.len())];
        let (_, end) = run(&common::chunks(&wire[..cut], &cuts))?;
        prop_assert!(matches!(end, Err(ModeEError::Truncated { missing }) if missing > 0), "cut at {cut}: {end:?}");
    }

    #[test]
    fn truncation_at_a_block_boundary_is_clean(st in stream(), keep in any::<prop::sample::Index>()) {
        let k = keep.index(st.blocks.len() + 1);
        let (got, end) = run(&[&encode(&st.blocks[..k])])?;
        prop_assert_eq!(end, Ok(()));
        prop_assert_eq!(got.headers.len(), k);
    }
}
