//! The control connection of one session: plain TCP, upgraded to TLS by `AUTH TLS`
//! (RFC 4217 §4), split into bounded lines with `haul_proto::LineBuffer`, and replies written
//! in RFC 959 §4.2 form.

use std::io::{self, Read, Write};
use std::net::{IpAddr, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use haul_proto::{LineBuffer, LineError, Reply, MAX_LINE};
use haul_transport::tls::{self, ServerStream};

enum Stream {
    Plain(TcpStream),
    Tls(Box<ServerStream>),
}

/// What reading the next control line gave.
pub enum Input {
    /// A complete line.
    Line(String),
    /// A line longer than `MAX_LINE`.
    TooLong,
    /// A line that is not UTF-8.
    NotUtf8,
    /// The peer closed the connection.
    Closed,
    /// Nothing arrived within the idle timeout.
    Idle,
}

/// One session's control connection.
pub struct Control {
    stream: Stream,
    tcp: TcpStream,
    lines: LineBuffer,
}

impl Control {
    /// Wraps an accepted control connection; reads time out after `idle`.
    pub fn new(tcp: TcpStream, idle: Duration) -> io::Result<Control> {
        tcp.set_read_timeout(Some(idle))?;
        tcp.set_write_timeout(Some(idle))?;
        tcp.set_nodelay(true)?;
        Ok(Control { stream: Stream::Plain(tcp.try_clone()?), tcp, lines: LineBuffer::new(MAX_LINE) })
    }

    /// The local address of the control connection (data listeners bind to its IP).
    pub fn local_ip(&self) -> io::Result<IpAddr> {
        Ok(self.tcp.local_addr()?.ip())
    }

    /// The client's IP on the control connection (PLUT data may only go there).
    pub fn peer_ip(&self) -> io::Result<IpAddr> {
        Ok(self.tcp.peer_addr()?.ip())
    }

    /// Whether the control channel is protected by TLS.
    pub fn is_tls(&self) -> bool {
        matches!(self.stream, Stream::Tls(_))
    }

    /// Writes one reply.
    pub fn send(&mut self, reply: &Reply) -> io::Result<()> {
        tracing::debug!(reply = %reply, "control reply");
        let bytes = reply.encode();
        match &mut self.stream {
            Stream::Plain(s) => s.write_all(bytes.as_bytes())?,
            Stream::Tls(s) => {
                s.write_all(bytes.as_bytes())?;
                s.flush()?;
            }
        }
        Ok(())
    }

    /// Writes a one-line reply.
    pub fn reply(&mut self, code: u16, text: impl Into<String>) -> io::Result<()> {
        self.send(&Reply::new(code, text))
    }

    /// Reads the next line, queueing any further pipelined lines in the buffer.
    pub fn next_line(&mut self) -> io::Result<Input> {
        let mut buf = [0u8; 4096];
        loop {
            match self.lines.next_line() {
                Ok(Some(l)) => return Ok(Input::Line(l)),
                Ok(None) => {}
                Err(LineError::TooLong { .. }) => return Ok(Input::TooLong),
                Err(LineError::NotUtf8) => return Ok(Input::NotUtf8),
            }
            let r = match &mut self.stream {
                Stream::Plain(s) => s.read(&mut buf),
                Stream::Tls(s) => s.read(&mut buf),
            };
            match r {
                Ok(0) => return Ok(Input::Closed),
                Ok(n) => self.lines.extend(&buf[..n]),
                Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {
                    return Ok(Input::Idle)
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(Input::Closed),
                Err(e) => return Err(e),
            }
        }
    }

    /// Runs the TLS handshake (after `234` was sent). Bytes pipelined after `AUTH TLS` in
    /// clear text are refused rather than trusted (RFC 4217 §4).
    pub fn upgrade(&mut self, cfg: Arc<rustls::ServerConfig>) -> io::Result<()> {
        if self.lines.pending() > 0 {
            return Err(io::Error::new(io::ErrorKind::InvalidData, "clear-text commands pipelined after AUTH TLS"));
        }
        let tls = tls::accept(cfg, self.tcp.try_clone()?)?;
        self.stream = Stream::Tls(Box::new(tls));
        Ok(())
    }

    /// Shuts the connection down both ways.
    pub fn close(&mut self) {
        if let Stream::Tls(s) = &mut self.stream {
            s.conn.send_close_notify();
            let _ = s.flush();
        }
        let _ = self.tcp.shutdown(std::net::Shutdown::Both);
    }
}
