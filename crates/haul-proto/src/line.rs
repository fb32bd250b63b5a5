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
}

impl LineBuffer {
    /// A buffer that rejects lines longer than `limit` bytes.
    pub fn new(limit: usize) -> Self {
        LineBuffer { buf: Vec::new(), limit, scanned: 0 }
    }

    /// Appends bytes read from the peer.
    pub fn extend(&mut self, data: &[u8]) {
        self.buf.extend_from_slice(data);
    }

    /// Bytes held that do not yet form a complete line.
    pub fn pending(&self) -> usize {
        self.buf.len()
    }

    /// Takes the next complete line, if any. After an error the buffer is cleared.
    pub fn next_line(&mut self) -> Result<Option<String>, LineError> {
        let nl = self.buf[self.scanned..].iter().position(|&b| b == b'\n');
        match nl {
            None => {
                self.scanned = self.buf.len();
                if self.buf.len() > self.limit {
                    self.buf.clear();
                    self.scanned = 0;
                    return Err(LineError::TooLong { limit: self.limit });
                }
                Ok(None)
            }
            Some(rel) => {
                let end = self.scanned + rel;
                let mut line: Vec<u8> = self.buf.drain(..=end).collect();
                self.scanned = 0;
                line.pop();
                if line.last() == Some(&b'\r') {
                    line.pop();
                }
                if line.len() > self.limit {
                    return Err(LineError::TooLong { limit: self.limit });
                }
                String::from_utf8(line).map(Some).map_err(|_| LineError::NotUtf8)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        b.extend(b"ok\r\n");
        assert_eq!(b.next_line().unwrap().as_deref(), Some("ok"));
    }

    #[test]
    fn rejects_bad_utf8() {
        let mut b = LineBuffer::new(8);
        b.extend(b"\xff\xfe\r\n");
        assert_eq!(b.next_line(), Err(LineError::NotUtf8));
    }
}
