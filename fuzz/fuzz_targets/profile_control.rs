//! Fuzzes `haul profile`'s TPG control channel input path: raw bytes into the frame `Decoder`
//! (whole and in fuzzer-chosen chunks, which must agree), and into both sans-IO state machines,
//! which must fail with an error, never panic. Every decoded message must re-encode to a frame
//! that decodes to the same bytes again.

#![no_main]

use haul_profile::tpg::{Client, Decoder, Server};
use haul_profile::ProfileParams;
use libfuzzer_sys::fuzz_target;

/// The re-encoded bytes of every message decoded from `data` fed in `chunk`-byte pieces, and
/// the first error, if any (decoding stops there, as a session does).
fn decode(data: &[u8], chunk: usize) -> (Vec<Vec<u8>>, Option<String>) {
    let mut d = Decoder::new();
    let mut out = Vec::new();
    for c in data.chunks(chunk.max(1)) {
        d.feed(c);
        loop {
            match d.next_msg() {
                Ok(Some(m)) => out.push(m.to_bytes()),
                Ok(None) => break,
                Err(e) => return (out, Some(e.to_string())),
            }
        }
    }
    (out, None)
}

fuzz_target!(|data: &[u8]| {
    let Some((&ctl, rest)) = data.split_first() else {
        return;
    };
    let whole = decode(rest, rest.len());
    for frame in &whole.0 {
        let mut d = Decoder::new();
        d.feed(frame);
        let again = d
            .next_msg()
            .expect("a re-encoded frame decodes")
            .expect("and is complete");
        assert_eq!(&again.to_bytes(), frame, "re-encoding is stable");
    }
    assert_eq!(
        decode(rest, usize::from(ctl) + 1),
        whole,
        "chunking changed the messages"
    );
    let _ = Server::new().feed(rest);
    let _ = Client::new(ProfileParams::default()).feed(rest);
});
