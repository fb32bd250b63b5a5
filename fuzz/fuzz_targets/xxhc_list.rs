//! `CKSM XXHC-LIST` replies, which a client reads from servers it does not control after a
//! checksum mismatch: no input panics the parser, what it accepts fits the file it describes,
//! and it writes back to lines that read the same.
#![no_main]

use haul_transport::checksum::chunked::{chunks, ListWindow, MAX_LIST};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let lines: Vec<String> = text.split('\n').map(str::to_string).collect();
    if let Ok(w) = ListWindow::parse(&lines) {
        assert!(w.digests.len() as u64 <= MAX_LIST);
        assert!(w.first + w.digests.len() as u64 <= chunks(w.len));
        assert_eq!(ListWindow::parse(&w.to_lines()), Ok(w));
    }
});
