//! Splits a control-channel byte stream into lines (CRLF, tolerating a bare LF) with a hard
//! length bound, so a peer cannot make the reader buffer without limit.

use thiserror::Error;

/// A line could not be taken from the control stream.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum LineError {
    /// The peer sent more than the allowed number of bytes without a line end.
    #[error("control line longer than {limit} bytes")]
    TooLong {
        /// The bound that was exceeded.
        limit: usize,
    },
    /// The line is not valid UTF-8.
    #[error("control line is not valid UTF-8")]
    NotUtf8,
}

/// Accumulates bytes and yields complete lines without their terminator.
#[derive(Debug)]
pub struct LineBuffer {
    buf: Vec<u8>,
    limit: usize,
    /// Bytes at the start of `buf` already scanned for a newline.
    scanned: usize,
    /// An over-long line was reported before its end arrived; its rest is dropped up to the
    /// next newline so it is never taken for a line of its own.
    discarding: bool,
}

impl LineBuffer {
    /// A buffer that rejects lines longer than `limit` bytes.
    pub fn new(limit: usize) -> Self {
        LineBuffer {
            buf: Vec::new(),
            limit,
            scanned: 0,
            discarding: false,
        }
    }

    /// Appends bytes read from the peer.
    pub fn extend(&mut self, data: &[u8]) {
        self.buf.extend_from_slice(data);
    }

    /// Bytes held that do not yet form a complete line.
    pub fn pending(&self) -> usize {
        self.buf.len()
    }

    /// Takes the next complete line, if any. An over-long line yields one `TooLong` and is
    /// then skipped through its newline; a line that is not UTF-8 yields `NotUtf8`.
    pub fn next_line(&mut self) -> Result<Option<String>, LineError> {
        loop {
            let Some(rel) = self.buf[self.scanned..].iter().position(|&b| b == b'\n') else {
                self.scanned = self.buf.len();
                if self.discarding {
                    self.buf.clear();
                    self.scanned = 0;
                } else if self.buf.len() > self.limit + 1 {
                    // Longer than a line plus the CR of its terminator: cannot become valid.
                    self.buf.clear();
                    self.scanned = 0;
                    self.discarding = true;
                    return Err(LineError::TooLong { limit: self.limit });
                }
                return Ok(None);
            };
            let end = self.scanned + rel;
            let mut line: Vec<u8> = self.buf.drain(..=end).collect();
            self.scanned = 0;
            if std::mem::take(&mut self.discarding) {
                continue;
            }
            line.pop();
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            if line.len() > self.limit {
                return Err(LineError::TooLong { limit: self.limit });
            }
            return String::from_utf8(line)
                .map(Some)
                .map_err(|_| LineError::NotUtf8);
        }
    }
}

impl LineBuffer {
    /// Where the first complete line for which `pred` holds lies in the buffer (start, end
    /// including its newline); none while the rest of an over-long line is being dropped.
    fn find_line(&self, pred: impl Fn(&str) -> bool) -> Option<(usize, usize)> {
        if self.discarding {
            return None;
        }
        let mut start = 0;
        for (i, &b) in self.buf.iter().enumerate() {
            if b != b'\n' {
                continue;
            }
            let line = &self.buf[start..i];
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            if std::str::from_utf8(line).is_ok_and(&pred) {
                return Some((start, i + 1));
            }
            start = i + 1;
        }
        None
    }

    /// True when a complete line held satisfies `pred`.
    pub fn contains_line(&self, pred: impl Fn(&str) -> bool) -> bool {
        self.find_line(pred).is_some()
    }

    /// Takes the first complete line held that satisfies `pred` out of the buffer, wherever
    /// it is among the lines held (the others keep their order); true if one was taken. For
    /// commands that act at once, such as `ABOR` (RFC 959 §4.1.3).
    pub fn remove_line(&mut self, pred: impl Fn(&str) -> bool) -> bool {
        let Some((start, end)) = self.find_line(pred) else {
            return false;
        };
        self.buf.drain(start..end);
        self.scanned = 0;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_is_taken_from_among_the_others() {
        let mut b = LineBuffer::new(100);
        b.extend(b"CKSM MD5 0 -1 f\r\nabor\r\nNOOP\nABOR");
        let abor = |l: &str| l.trim().eq_ignore_ascii_case("ABOR");
        assert!(b.contains_line(abor));
        assert!(b.remove_line(abor));
        assert!(
            !b.contains_line(abor),
            "the unterminated ABOR is not a line yet"
        );
        assert_eq!(b.next_line().unwrap().as_deref(), Some("CKSM MD5 0 -1 f"));
        assert_eq!(b.next_line().unwrap().as_deref(), Some("NOOP"));
        b.extend(b"\r\n");
        assert_eq!(b.next_line().unwrap().as_deref(), Some("ABOR"));
    }

    #[test]
    fn splits_crlf_and_lf() {
        let mut b = LineBuffer::new(100);
        b.extend(b"USER a\r\nPASS b\nNO");
        assert_eq!(b.next_line().unwrap().as_deref(), Some("USER a"));
        assert_eq!(b.next_line().unwrap().as_deref(), Some("PASS b"));
        assert_eq!(b.next_line().unwrap(), None);
        b.extend(b"OP\r\n");
        assert_eq!(b.next_line().unwrap().as_deref(), Some("NOOP"));
    }

    #[test]
    fn bounds_length() {
        let mut b = LineBuffer::new(8);
        b.extend(b"0123456789");
        assert_eq!(b.next_line(), Err(LineError::TooLong { limit: 8 }));
        // The rest of the over-long line is dropped, not read as a line of its own.
        b.extend(b"DELE x\r\nok\r\n");
        assert_eq!(b.next_line().unwrap().as_deref(), Some("ok"));
        assert_eq!(b.next_line().unwrap(), None);
        b.extend(b"01234567\r");
        assert_eq!(
            b.next_line().unwrap(),
            None,
            "a full-length line may still get its LF"
        );
        b.extend(b"\n");
        assert_eq!(b.next_line().unwrap().as_deref(), Some("01234567"));
    }

    #[test]
    fn rejects_bad_utf8() {
        let mut b = LineBuffer::new(8);
        b.extend(b"\xff\xfe\r\n");
        assert_eq!(b.next_line(), Err(LineError::NotUtf8));
    }
}
