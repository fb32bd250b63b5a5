//! Fuzzes the client's reply input path: raw bytes into `ReplyParser`, fed whole and in
//! fuzzer-chosen chunks, which must yield the same replies and errors.

#![no_main]

use haul_proto::{Reply, ReplyError, ReplyParser};
use libfuzzer_sys::fuzz_target;

/// Every reply or error the parser yields, continuing past errors like a lenient reader.
fn replies(data: &[u8], chunk: usize) -> Vec<Result<Reply, ReplyError>> {
    let mut p = ReplyParser::new();
    let mut out = Vec::new();
    for c in data.chunks(chunk.max(1)) {
        p.extend(c);
        loop {
            match p.next_reply() {
                Ok(Some(r)) => out.push(Ok(r)),
                Ok(None) => break,
                Err(e) => out.push(Err(e)),
            }
        }
    }
    out
}

fuzz_target!(|data: &[u8]| {
    let Some((&ctl, rest)) = data.split_first() else {
        return;
    };
    let whole = replies(rest, rest.len());
    for r in whole.iter().flatten() {
        assert!((100..600).contains(&r.code), "code {} out of range", r.code);
        assert!(!r.lines.is_empty());
        // Re-encoding what was read must itself parse.
        let mut p = ReplyParser::new();
        p.extend(r.encode().as_bytes());
        let again = p
            .next_reply()
            .expect("re-encoded reply parses")
            .expect("re-encoded reply is complete");
        assert_eq!(again.code, r.code);
        assert_eq!(again.lines.len(), r.lines.len());
    }
    assert_eq!(
        replies(rest, usize::from(ctl) + 1),
        whole,
        "chunking changed the replies"
    );
});
