//! Property tests of the control-line splitter: how the peer's bytes are chunked never changes
//! the lines (or errors) read, and no line longer than the bound is ever returned.

mod common;

use haul_proto::{LineBuffer, LineError};
use proptest::prelude::*;

/// Everything the buffer yields until it has no complete line left.
fn drain(b: &mut LineBuffer, out: &mut Vec<Result<String, LineError>>) {
    loop {
        match b.next_line() {
            Ok(Some(l)) => out.push(Ok(l)),
            Ok(None) => return,
            Err(e) => out.push(Err(e)),
        }
    }
}

/// A control stream: lines of mixed length and content, CRLF / LF / CR-only / no terminators.
fn stream() -> impl Strategy<Value = Vec<u8>> {
    let line = prop_oneof![
        "[ -~]{0,12}".prop_map(String::into_bytes),
        "[ -~]{10,40}".prop_map(String::into_bytes),
        prop::collection::vec(any::<u8>(), 0..20),
        "\\PC{0,8}".prop_map(String::into_bytes),
    ];
    let end = prop_oneof![
        Just(&b"\r\n"[..]),
        Just(&b"\n"[..]),
        Just(&b"\r"[..]),
        Just(&b""[..])
    ];
    prop::collection::vec((line, end), 0..12).prop_map(|v| {
        v.into_iter()
            .flat_map(|(mut l, e)| {
                l.extend_from_slice(e);
                l
            })
            .collect()
    })
}

proptest! {
    #[test]
    fn chunking_does_not_change_lines(data in stream(), limit in 0usize..24, cuts in common::cuts(16)) {
        let mut whole = LineBuffer::new(limit);
        whole.extend(&data);
        let mut expect = Vec::new();
        drain(&mut whole, &mut expect);

        let mut split = LineBuffer::new(limit);
        let mut got = Vec::new();
        for c in common::chunks(&data, &cuts) {
            split.extend(c);
            drain(&mut split, &mut got);
        }
        prop_assert_eq!(&got, &expect, "limit {}, chunks {:?}", limit, common::chunks(&data, &cuts));
        for l in got.iter().flatten() {
            prop_assert!(l.len() <= limit, "line {:?} exceeds limit {}", l, limit);
            prop_assert!(!l.contains('\n'));
        }
    }

    #[test]
    fn lines_within_limit_come_back_exactly(
        lines in prop::collection::vec("[^\r\n]{0,20}", 0..10),
        crlf in any::<bool>(),
        cuts in common::cuts(16),
    ) {
        let end = if crlf { "\r\n" } else { "\n" };
        let data: String = lines.iter().map(|l| format!("{l}{end}")).collect();
        let limit = lines.iter().map(String::len).max().unwrap_or(0);
        let mut b = LineBuffer::new(limit);
        let mut got = Vec::new();
        for c in common::chunks(data.as_bytes(), &cuts) {
            b.extend(c);
            drain(&mut b, &mut got);
        }
        let expect: Vec<Result<String, LineError>> = lines.into_iter().map(Ok).collect();
        prop_assert_eq!(got, expect);
        prop_assert_eq!(b.pending(), 0);
    }

    #[test]
    fn pending_stays_bounded(data in prop::collection::vec(any::<u8>(), 0..400), limit in 0usize..64, cuts in common::cuts(32)) {
        let mut b = LineBuffer::new(limit);
        let mut sink = Vec::new();
        for c in common::chunks(&data, &cuts) {
            b.extend(c);
            drain(&mut b, &mut sink);
            prop_assert!(b.pending() <= limit + 1, "{} bytes held with limit {}", b.pending(), limit);
        }
    }
}
