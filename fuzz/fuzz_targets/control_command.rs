//! Fuzzes the server's command input path: raw bytes split into lines by `LineBuffer` (in
//! fuzzer-chosen chunks, compared with feeding them whole) and every line, plus the whole input
//! decoded lossily, through `Command::parse`, and the text of every `SITE` command through
//! `SiteCommand::parse`.

#![no_main]

use haul_proto::command::SiteCommand;
use haul_proto::{Command, LineBuffer, LineError};
use libfuzzer_sys::fuzz_target;

/// Parses a line and checks what a parsed command promises.
fn check_command(line: &str) {
    if let Ok(cmd) = Command::parse(line) {
        let wire = cmd.to_string();
        assert!(
            wire.starts_with(cmd.verb()),
            "{wire:?} does not start with {}",
            cmd.verb()
        );
        if let Command::Site(text) = &cmd {
            check_site(text);
        }
    }
}

/// Parses a `SITE` text; what parses writes out as text that parses back to the same.
fn check_site(text: &str) {
    if let Ok(site) = SiteCommand::parse(text) {
        let wire = site.to_string();
        assert_eq!(
            SiteCommand::parse(&wire).as_ref(),
            Ok(&site),
            "{text:?} wrote out as {wire:?}"
        );
    }
}

/// Every line (or error) the buffer yields after each chunk.
fn lines(data: &[u8], limit: usize, chunk: usize) -> Vec<Result<String, LineError>> {
    let mut b = LineBuffer::new(limit);
    let mut out = Vec::new();
    for c in data.chunks(chunk.max(1)) {
        b.extend(c);
        loop {
            match b.next_line() {
                Ok(Some(l)) => out.push(Ok(l)),
                Ok(None) => break,
                Err(e) => out.push(Err(e)),
            }
        }
        assert!(
            b.pending() <= limit + 1,
            "{} bytes held with limit {limit}",
            b.pending()
        );
    }
    out
}

fuzz_target!(|data: &[u8]| {
    check_command(&String::from_utf8_lossy(data));
    let Some((&ctl, rest)) = data.split_first() else {
        return;
    };
    let limit = usize::from(ctl & 0x3f);
    let chunk = usize::from(ctl >> 6) * 7 + 1;
    let whole = lines(rest, limit, rest.len());
    assert_eq!(
        lines(rest, limit, chunk),
        whole,
        "chunking changed the lines"
    );
    for l in whole.iter().flatten() {
        assert!(
            l.len() <= limit && !l.contains('\n'),
            "bad line {l:?} with limit {limit}"
        );
        check_command(l);
    }
    for l in lines(rest, haul_proto::MAX_LINE, rest.len())
        .iter()
        .flatten()
    {
        check_command(l);
    }
});
