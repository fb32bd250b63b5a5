//! Fuzzes the MODE E data path: raw bytes into `BlockDecoder` in fuzzer-chosen chunk sizes.
//! Data must stay inside the range its header declared, follow on from the previous event, and
//! chunking must not change the events, the error, or `finish()`.

#![no_main]

use haul_proto::{BlockDecoder, BlockEvent, Descriptor, Header, ModeEError};
use libfuzzer_sys::fuzz_target;

/// Headers, payload bytes placed by offset (coalesced), and how the stream ended.
#[derive(Debug, PartialEq)]
struct Outcome {
    headers: Vec<Header>,
    data: Vec<(u64, Vec<u8>)>,
    end: Result<(), ModeEError>,
}

fn decode(stream: &[u8], sizes: &[u8]) -> Outcome {
    let mut d = BlockDecoder::new();
    let mut out = Outcome {
        headers: Vec::new(),
        data: Vec::new(),
        end: Ok(()),
    };
    // Next payload offset and end of the current block's range.
    let mut expect: Option<(u64, u64)> = None;
    let mut rest = stream;
    let mut i = 0;
    while !rest.is_empty() {
        let size = sizes
            .get(i % sizes.len().max(1))
            .map_or(rest.len(), |&s| usize::from(s) + 1);
        i += 1;
        let (mut input, tail) = rest.split_at(size.min(rest.len()));
        rest = tail;
        loop {
            let (n, ev) = match d.decode(input) {
                Ok(x) => x,
                Err(e) => {
                    out.end = Err(e);
                    return out;
                }
            };
            assert!(n <= input.len());
            match ev {
                Some(BlockEvent::Header(h)) => {
                    assert!(expect.is_none(), "header before the previous payload ended");
                    if h.descriptor.has(Descriptor::EOF) {
                        assert_eq!(h.count, 0, "EOF block with data");
                    } else if h.count > 0 {
                        expect =
                            Some((h.offset, h.offset.checked_add(h.count).expect("validated")));
                    }
                    out.headers.push(h);
                }
                Some(BlockEvent::Data { offset, bytes }) => {
                    let (next, end) = expect.expect("data without a header");
                    assert_eq!(offset, next, "data out of sequence");
                    assert!(!bytes.is_empty() && bytes.len() == n);
                    let stop = offset + bytes.len() as u64;
                    assert!(stop <= end, "data {offset}..{stop} beyond block end {end}");
                    expect = (stop < end).then_some((stop, end));
                    match out.data.last_mut() {
                        Some((o, b)) if *o + b.len() as u64 == offset => b.extend_from_slice(bytes),
                        _ => out.data.push((offset, bytes.to_vec())),
                    }
                }
                None if n == 0 => break,
                None => assert_eq!(n, input.len(), "partial header left input unconsumed"),
            }
            input = &input[n..];
        }
    }
    out.end = d.finish();
    if expect.is_some() {
        assert!(
            matches!(out.end, Err(ModeEError::Truncated { .. })),
            "ended inside a payload: {:?}",
            out.end
        );
    }
    out
}

fuzz_target!(|data: &[u8]| {
    let Some((&k, rest)) = data.split_first() else {
        return;
    };
    let k = usize::from(k & 0x0f).min(rest.len());
    let (sizes, stream) = rest.split_at(k);
    let whole = decode(stream, &[]);
    assert_eq!(
        decode(stream, sizes),
        whole,
        "chunking changed the decoding"
    );
});
