//! Control-channel replies: formatting single- and multi-line replies (RFC 959 §4.2) and an
//! incremental parser a client feeds with the bytes it reads.

use std::fmt;

use thiserror::Error;

use crate::line::{LineBuffer, LineError};

/// A reply could not be parsed.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum ReplyError {
    /// The line did not start with a three-digit code.
    #[error("malformed reply line {0:?}")]
    Malformed(String),
    /// A multi-line reply grew beyond the line bound.
    #[error("reply has more than {0} lines")]
    TooManyLines(usize),
    /// The line itself was bad.
    #[error(transparent)]
    Line(#[from] LineError),
}

/// A reply: a three-digit code and one or more lines of text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    /// The reply code, 100..=599.
    pub code: u16,
    /// The text lines (without codes).
    pub lines: Vec<String>,
}

impl Reply {
    /// A single-line reply.
    pub fn new(code: u16, text: impl Into<String>) -> Reply {
        Reply {
            code,
            lines: vec![text.into()],
        }
    }

    /// A multi-line reply.
    pub fn multi(code: u16, lines: Vec<String>) -> Reply {
        Reply { code, lines }
    }

    /// 1yz: positive preliminary.
    pub fn is_preliminary(&self) -> bool {
        (100..200).contains(&self.code)
    }

    /// 2yz: positive completion.
    pub fn is_success(&self) -> bool {
        (200..300).contains(&self.code)
    }

    /// 3yz: positive intermediate.
    pub fn is_intermediate(&self) -> bool {
        (300..400).contains(&self.code)
    }

    /// 4yz or 5yz.
    pub fn is_error(&self) -> bool {
        self.code >= 400
    }

    /// All lines joined with a space.
    pub fn text(&self) -> String {
        self.lines.join(" ")
    }

    /// The wire form including CRLFs.
    pub fn encode(&self) -> String {
        let mut s = String::new();
        let n = self.lines.len().max(1);
        for i in 0..n {
            let line = self.lines.get(i).map(String::as_str).unwrap_or("");
            let sep = if i + 1 == n { ' ' } else { '-' };
            if i == 0 || i + 1 == n {
                s.push_str(&format!("{}{sep}{line}\r\n", self.code));
            } else if line.starts_with(|c: char| c.is_ascii_digit()) {
                // RFC 959: an inner line starting with digits must not look like the end line.
                s.push_str(&format!(" {line}\r\n"));
            } else {
                s.push_str(line);
                s.push_str("\r\n");
            }
        }
        s
    }
}

impl fmt::Display for Reply {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.code, self.text())
    }
}

fn code_of(line: &str) -> Option<(u16, u8)> {
    let b = line.as_bytes();
    if b.len() < 3 || !b[..3].iter().all(u8::is_ascii_digit) {
        return None;
    }
    let code = line[..3].parse::<u16>().ok()?;
    if !(100..600).contains(&code) {
        return None;
    }
    Some((code, b.get(3).copied().unwrap_or(b' ')))
}

/// Incremental reply parser.
#[derive(Debug)]
pub struct ReplyParser {
    lines: LineBuffer,
    partial: Option<Reply>,
    max_lines: usize,
}

impl Default for ReplyParser {
    fn default() -> Self {
        ReplyParser::new()
    }
}

impl ReplyParser {
    /// A parser with haul's line-length and line-count bounds.
    pub fn new() -> Self {
        ReplyParser {
            lines: LineBuffer::new(crate::MAX_LINE),
            partial: None,
            max_lines: 10_000,
        }
    }

    /// Appends bytes read from the server.
    pub fn extend(&mut self, data: &[u8]) {
        self.lines.extend(data);
    }

    /// True when every byte given has been returned as a reply (or an error): nothing is
    /// buffered, not even part of a reply. A client checks this after `234` to `AUTH TLS`, since
    /// bytes buffered then were sent in plaintext before the handshake.
    pub fn is_idle(&self) -> bool {
        self.partial.is_none() && self.lines.pending() == 0
    }

    /// The next complete reply, if the bytes so far hold one.
    pub fn next_reply(&mut self) -> Result<Option<Reply>, ReplyError> {
        while let Some(line) = self.lines.next_line()? {
            match self.partial.as_mut() {
                None => {
                    let (code, sep) =
                        code_of(&line).ok_or_else(|| ReplyError::Malformed(line.clone()))?;
                    let text = line.get(4..).unwrap_or("").to_string();
                    if sep == b'-' {
                        self.partial = Some(Reply::multi(code, vec![text]));
                    } else if sep == b' ' || line.len() == 3 {
                        return Ok(Some(Reply::new(code, text)));
                    } else {
                        return Err(ReplyError::Malformed(line));
                    }
                }
                Some(p) => {
                    if let Some((code, b' ')) = code_of(&line) {
                        if code == p.code {
                            p.lines.push(line.get(4..).unwrap_or("").to_string());
                            return Ok(self.partial.take());
                        }
                    }
                    if p.lines.len() >= self.max_lines {
                        self.partial = None;
                        return Err(ReplyError::TooManyLines(self.max_lines));
                    }
                    let inner = match code_of(&line) {
                        Some((c, b'-')) if c == p.code => line[4..].to_string(),
                        _ => line,
                    };
                    p.lines.push(inner);
                }
            }
        }
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn single_and_multi_line() {
        let mut p = ReplyParser::new();
        p.extend(b"220 Ready\r\n211-Features:\r\n MODE E\r\n PARALLEL\r\n211 End\r\n");
        assert_eq!(p.next_reply().unwrap(), Some(Reply::new(220, "Ready")));
        let r = p.next_reply().unwrap().unwrap();
        assert_eq!(r.code, 211);
        assert_eq!(r.lines, vec!["Features:", " MODE E", " PARALLEL", "End"]);
        assert_eq!(p.next_reply().unwrap(), None);
    }

    #[test]
    fn encode_parse_round_trip() {
        let r = Reply::multi(
            112,
            vec!["Perf Marker".into(), " Timestamp: 1".into(), "End.".into()],
        );
        let mut p = ReplyParser::new();
        p.extend(r.encode().as_bytes());
        assert_eq!(p.next_reply().unwrap(), Some(r));
    }

    #[test]
    fn rejects_garbage() {
        let mut p = ReplyParser::new();
        p.extend(b"hello\r\n");
        assert!(matches!(p.next_reply(), Err(ReplyError::Malformed(_))));
    }
}
