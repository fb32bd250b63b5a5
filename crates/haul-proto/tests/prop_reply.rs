//! Property tests of the reply parser: arbitrary bytes never panic it, and every reply haul
//! encodes parses back the same however the bytes are chunked.

mod common;

use haul_proto::{Reply, ReplyParser};
use proptest::prelude::*;

/// Reply text: printable, any script, no line terminators.
fn text() -> impl Strategy<Value = String> {
    prop_oneof!["[ -~]{0,30}", "\\PC{0,16}", "[0-9]{3}[ -]?[ -~]{0,10}"]
}

fn reply() -> impl Strategy<Value = Reply> {
    (100u16..600, prop::collection::vec(text(), 1..8))
        .prop_map(|(code, lines)| Reply::multi(code, lines))
}

/// What a reply reads back as: RFC 959 makes `encode` pad inner lines that start with a digit
/// with one space, so they cannot be mistaken for the end line.
fn as_received(r: &Reply) -> Reply {
    let n = r.lines.len();
    let lines = r
        .lines
        .iter()
        .enumerate()
        .map(|(i, l)| {
            let inner = i > 0 && i + 1 < n;
            if inner && l.starts_with(|c: char| c.is_ascii_digit()) {
                format!(" {l}")
            } else {
                l.clone()
            }
        })
        .collect();
    Reply::multi(r.code, lines)
}

/// Feeds `chunks` in order and collects every reply (stopping at the first error).
fn parse_chunks(chunks: &[&[u8]]) -> Result<Vec<Reply>, haul_proto::ReplyError> {
    let mut p = ReplyParser::new();
    let mut out = Vec::new();
    for c in chunks {
        p.extend(c);
        while let Some(r) = p.next_reply()? {
            out.push(r);
        }
    }
    Ok(out)
}

proptest! {
    #[test]
    fn arbitrary_bytes_never_panic(data in prop::collection::vec(any::<u8>(), 0..512), cuts in common::cuts(16)) {
        let mut p = ReplyParser::new();
        for c in common::chunks(&data, &cuts) {
            p.extend(c);
            // Errors are fine; keep going the way a lenient reader would.
            for _ in 0..data.len() + 1 {
                match p.next_reply() {
                    Ok(None) => break,
                    Ok(Some(r)) => prop_assert!((100..600).contains(&r.code) && !r.lines.is_empty()),
                    Err(_) => {}
                }
            }
        }
    }

    #[test]
    fn reply_like_bytes_never_panic(
        lines in prop::collection::vec("([1-6][0-9]{2}[ -]?)?[\\PC]{0,10}", 0..12),
        cuts in common::cuts(16),
    ) {
        let data: String = lines.iter().map(|l| format!("{l}\r\n")).collect();
        let _ = parse_chunks(&common::chunks(data.as_bytes(), &cuts));
    }

    #[test]
    fn encode_parse_round_trip(replies in prop::collection::vec(reply(), 1..5), cuts in common::cuts(24)) {
        let wire: String = replies.iter().map(Reply::encode).collect();
        let got = parse_chunks(&common::chunks(wire.as_bytes(), &cuts));
        let expect: Vec<Reply> = replies.iter().map(as_received).collect();
        prop_assert_eq!(got, Ok(expect), "wire {:?}", wire);
    }

    #[test]
    fn plain_replies_round_trip_exactly(
        code in 100u16..600,
        lines in prop::collection::vec("[a-zA-Z ][ -~]{0,20}", 1..6),
    ) {
        let r = Reply::multi(code, lines);
        prop_assert_eq!(parse_chunks(&[r.encode().as_bytes()]), Ok(vec![r]));
    }
}
