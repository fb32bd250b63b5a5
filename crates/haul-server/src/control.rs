//! The control connection of one session: plain TCP, upgraded to TLS by `AUTH TLS`
//! (RFC 4217 §4), split into bounded lines with `haul_proto::LineBuffer`, and replies written
//! in RFC 959 §4.2 form.
//!
//! Replies that end a step of a pipelined exchange (`226` after a transfer, a `213` digest that
//! was ready at once) may be deferred: they go out with the next reply, or before the session
//! waits for input, so a pipelining client gets `226`, `213` and the next `125` in one segment
//! instead of three.

use std::io::{self, Read, Write};
use std::net::{IpAddr, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

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
    /// Under GSI, a command that was not wrapped (`ENC`/`MIC`/`CONF`).
    Unprotected,
    /// Under GSI, a wrapped command that would not unwrap; the context may be out of step.
    BadToken(String),
}

/// Most unwrapped commands held ahead of the session under GSI.
const MAX_UNWRAPPED: usize = 64;

/// The GSS context protecting a control connection (RFC 2228), and the commands it unwrapped
/// that the session has not taken yet.
struct Gss {
    ctx: haul_gsi::Context,
    /// 632 or 633, by how the last command came.
    code: u16,
    unwrapped: std::collections::VecDeque<Input>,
}

/// Tells whether a session's client has closed its control connection.
#[derive(Clone, Copy)]
pub struct ClientWatch(std::os::fd::RawFd);

impl ClientWatch {
    /// True if the peer closed or reset the connection, waiting up to `wait` for that.
    pub fn gone(&self, wait: Duration) -> bool {
        let mut p = libc::pollfd {
            fd: self.0,
            events: libc::POLLIN | libc::POLLRDHUP,
            revents: 0,
        };
        let ms = wait.as_millis().min(i32::MAX as u128) as i32;
        // SAFETY: one valid pollfd.
        if unsafe { libc::poll(&mut p, 1, ms) } <= 0 {
            return false;
        }
        if p.revents & (libc::POLLRDHUP | libc::POLLHUP | libc::POLLERR) != 0 {
            return true;
        }
        let mut b = [0u8; 1];
        // SAFETY: a valid socket and a one-byte buffer.
        let n = unsafe {
            libc::recv(
                self.0,
                b.as_mut_ptr().cast(),
                1,
                libc::MSG_PEEK | libc::MSG_DONTWAIT,
            )
        };
        n == 0 || (n < 0 && io::Error::last_os_error().kind() != io::ErrorKind::WouldBlock)
    }
}

/// One session's control connection.
pub struct Control {
    stream: Stream,
    tcp: TcpStream,
    lines: LineBuffer,
    /// The input [`Control::peek_line`] took from `lines`, not yet handed out.
    peeked: Option<Input>,
    /// Encoded replies not yet written.
    out: Vec<u8>,
    /// Under GSI: the context every command and reply passes through.
    gss: Option<Gss>,
}

impl Control {
    /// Wraps an accepted control connection; reads time out after `idle`.
    pub fn new(tcp: TcpStream, idle: Duration) -> io::Result<Control> {
        tcp.set_read_timeout(Some(idle))?;
        tcp.set_write_timeout(Some(idle))?;
        tcp.set_nodelay(true)?;
        Ok(Control {
            stream: Stream::Plain(tcp.try_clone()?),
            tcp,
            lines: LineBuffer::new(MAX_LINE),
            peeked: None,
            out: Vec::new(),
            gss: None,
        })
    }

    /// The local address of the control connection (data listeners bind to its IP).
    pub fn local_ip(&self) -> io::Result<IpAddr> {
        Ok(self.tcp.local_addr()?.ip())
    }

    /// The server's end of the control connection.
    pub fn local_addr(&self) -> io::Result<std::net::SocketAddr> {
        self.tcp.local_addr()
    }

    /// The client's IP on the control connection (PLUT data may only go there).
    pub fn peer_ip(&self) -> io::Result<IpAddr> {
        Ok(self.tcp.peer_addr()?.ip())
    }

    /// True if the client has closed (or reset) the control connection, waiting up to `wait`
    /// for the close to arrive. Commands it sent meanwhile stay queued, unread.
    pub fn client_gone(&self, wait: Duration) -> bool {
        self.watcher().gone(wait)
    }

    /// A handle that tells, from any thread, whether the client has left (valid while this
    /// control connection is open).
    pub fn watcher(&self) -> ClientWatch {
        use std::os::fd::AsRawFd;
        ClientWatch(self.tcp.as_raw_fd())
    }

    /// Whether the control channel is protected by TLS.
    pub fn is_tls(&self) -> bool {
        matches!(self.stream, Stream::Tls(_))
    }

    /// Writes one reply, together with any deferred ones.
    pub fn send(&mut self, reply: &Reply) -> io::Result<()> {
        self.defer(reply);
        self.flush()
    }

    /// Queues one reply, to be written with the next [`Control::send`] or [`Control::flush`]
    /// (at the latest when the session next waits for a command).
    pub fn defer(&mut self, reply: &Reply) {
        tracing::debug!(reply = %reply, "control reply");
        let text = reply.encode();
        match &mut self.gss {
            None => self.out.extend_from_slice(text.as_bytes()),
            Some(g) => match haul_gsi::ftp::wrap_reply(&mut g.ctx, g.code, &text) {
                Ok(w) => self.out.extend_from_slice(w.as_bytes()),
                Err(e) => tracing::warn!(error = %e, "reply could not be wrapped; dropped"),
            },
        }
    }

    /// From now on every command must arrive wrapped by `ctx` and every reply leaves wrapped
    /// (after `235`, RFC 2228).
    pub fn protect(&mut self, ctx: haul_gsi::Context) {
        self.gss = Some(Gss {
            ctx,
            code: 632,
            unwrapped: Default::default(),
        });
    }

    /// Whether the control channel is protected by GSI.
    pub fn is_gsi(&self) -> bool {
        self.gss.is_some()
    }

    /// Under GSI: unwraps the complete lines already received, up to [`MAX_UNWRAPPED`] held.
    fn unwrap_lines(&mut self) {
        let Some(g) = &mut self.gss else { return };
        while g.unwrapped.len() < MAX_UNWRAPPED {
            let line = match self.lines.next_line() {
                Ok(Some(l)) => l,
                Ok(None) => break,
                Err(LineError::TooLong { .. }) => {
                    g.unwrapped.push_back(Input::TooLong);
                    continue;
                }
                Err(LineError::NotUtf8) => {
                    g.unwrapped.push_back(Input::NotUtf8);
                    continue;
                }
            };
            match haul_gsi::ftp::protected_command(&line) {
                None => g.unwrapped.push_back(Input::Unprotected),
                Some((p, token)) => match haul_gsi::ftp::unwrap_command(&mut g.ctx, token) {
                    Ok(cmds) => {
                        g.code = p.reply_code();
                        g.unwrapped.extend(cmds.into_iter().map(Input::Line));
                    }
                    Err(e) => g.unwrapped.push_back(Input::BadToken(e.to_string())),
                },
            }
        }
    }

    /// Writes the deferred replies, if any.
    pub fn flush(&mut self) -> io::Result<()> {
        if self.out.is_empty() {
            return Ok(());
        }
        let r = match &mut self.stream {
            Stream::Plain(s) => s.write_all(&self.out),
            Stream::Tls(s) => s.write_all(&self.out).and_then(|()| s.flush()),
        };
        self.out.clear();
        r
    }

    /// Writes a one-line reply.
    pub fn reply(&mut self, code: u16, text: impl Into<String>) -> io::Result<()> {
        self.send(&Reply::new(code, text))
    }

    /// Defers a one-line reply (see [`Control::defer`]).
    pub fn defer_reply(&mut self, code: u16, text: impl Into<String>) {
        self.defer(&Reply::new(code, text))
    }

    /// Takes a complete line already buffered, if any.
    fn buffered(&mut self) -> Option<Input> {
        if let Some(i) = self.peeked.take() {
            return Some(i);
        }
        if self.gss.is_some() {
            self.unwrap_lines();
            return self.gss.as_mut().and_then(|g| g.unwrapped.pop_front());
        }
        match self.lines.next_line() {
            Ok(Some(l)) => Some(Input::Line(l)),
            Ok(None) => None,
            Err(LineError::TooLong { .. }) => Some(Input::TooLong),
            Err(LineError::NotUtf8) => Some(Input::NotUtf8),
        }
    }

    /// Reads the next line, queueing any further pipelined lines in the buffer. The whole line
    /// must arrive by `deadline` (a client trickling bytes does not reset it): `Idle` otherwise.
    pub fn next_line(&mut self, deadline: Instant) -> io::Result<Input> {
        let mut buf = [0u8; 4096];
        loop {
            if let Some(i) = self.buffered() {
                return Ok(i);
            }
            // About to wait for the client: it may be waiting for what was deferred.
            self.flush()?;
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(Input::Idle);
            }
            self.tcp
                .set_read_timeout(Some(left.max(Duration::from_millis(1))))?;
            let r = match &mut self.stream {
                Stream::Plain(s) => s.read(&mut buf),
                Stream::Tls(s) => s.read(&mut buf),
            };
            match r {
                Ok(0) => return Ok(Input::Closed),
                Ok(n) => self.lines.extend(&buf[..n]),
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) =>
                {
                    return Ok(Input::Idle)
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(Input::Closed),
                Err(e) => return Err(e),
            }
        }
    }

    /// The next command line if the client has already sent it, without waiting for one: a
    /// line already buffered, or (on a plain connection) one already in the socket.
    pub fn peek_line(&mut self) -> Option<&str> {
        if self.peeked.is_none() {
            let mut next = self.buffered();
            if next.is_none() && self.fill_now() {
                next = self.buffered();
            }
            self.peeked = next;
        }
        match &self.peeked {
            Some(Input::Line(l)) => Some(l),
            _ => None,
        }
    }

    /// Reads what the client has already sent, without waiting (plain connections only: a TLS
    /// record cannot be read in part); true if anything arrived. Reads nothing while a line's
    /// worth ([`haul_proto::MAX_LINE`]) is already held, so a client pipelining commands during
    /// a long transfer leaves them in the socket (and TCP's flow control), not in memory.
    fn fill_now(&mut self) -> bool {
        let Stream::Plain(s) = &self.stream else {
            return false;
        };
        if self.lines.pending() >= MAX_LINE {
            return false;
        }
        let mut buf = [0u8; 4096];
        use std::os::fd::AsRawFd;
        // SAFETY: a valid socket and a writable buffer of the given length.
        let n = unsafe {
            libc::recv(
                s.as_raw_fd(),
                buf.as_mut_ptr().cast(),
                buf.len(),
                libc::MSG_DONTWAIT,
            )
        };
        if n > 0 {
            self.lines.extend(&buf[..n as usize]);
        }
        n > 0
    }

    /// True when the client has already sent `ABOR`, as its next command or behind other
    /// pipelined ones (RFC 959 §4.1.3: `ABOR` acts at once).
    pub fn abor_pending(&mut self) -> bool {
        if matches!(&self.peeked, Some(Input::Line(l)) if is_abor(l)) {
            return true;
        }
        self.fill_now();
        if self.gss.is_some() {
            self.unwrap_lines();
            return self.gss.as_ref().is_some_and(|g| {
                g.unwrapped
                    .iter()
                    .any(|i| matches!(i, Input::Line(l) if is_abor(l)))
            });
        }
        self.lines.contains_line(is_abor)
    }

    /// Takes an `ABOR` the client has already sent (see [`Control::abor_pending`]) out of the
    /// lines it sent; true when one was taken.
    pub fn take_abor(&mut self) -> bool {
        if matches!(&self.peeked, Some(Input::Line(l)) if is_abor(l)) {
            self.peeked = None;
            return true;
        }
        self.fill_now();
        if let Some(g) = &mut self.gss {
            let at = g
                .unwrapped
                .iter()
                .position(|i| matches!(i, Input::Line(l) if is_abor(l)));
            return at.is_some_and(|i| g.unwrapped.remove(i).is_some());
        }
        self.lines.remove_line(is_abor)
    }

    /// Runs the TLS handshake (after `234` was sent). Bytes pipelined after `AUTH TLS` in
    /// clear text are refused rather than trusted (RFC 4217 §4).
    pub fn upgrade(&mut self, cfg: Arc<rustls::ServerConfig>) -> io::Result<()> {
        self.flush()?;
        if self.lines.pending() > 0 || self.peeked.is_some() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "clear-text commands pipelined after AUTH TLS",
            ));
        }
        let tls = tls::accept(cfg, self.tcp.try_clone()?)?;
        self.stream = Stream::Tls(Box::new(tls));
        Ok(())
    }

    /// Shuts the connection down both ways.
    pub fn close(&mut self) {
        let _ = self.flush();
        if let Stream::Tls(s) = &mut self.stream {
            s.conn.send_close_notify();
            let _ = s.flush();
        }
        let _ = self.tcp.shutdown(std::net::Shutdown::Both);
    }
}

/// Whether a command line is `ABOR`.
fn is_abor(line: &str) -> bool {
    line.trim().eq_ignore_ascii_case("ABOR")
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::net::{TcpListener, TcpStream};

    use super::*;

    /// A client that pipelines far more than a line while a transfer runs: the watch's look for
    /// `ABOR` holds at most a line and one read of it.
    #[test]
    fn looking_for_abor_buffers_at_most_a_line() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut client = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let mut ctl = Control::new(l.accept().unwrap().0, Duration::from_secs(5)).unwrap();
        client.write_all(&b"NOOP\r\n".repeat(50_000)).unwrap();
        client.write_all(b"ABOR\r\n").unwrap();
        std::thread::sleep(Duration::from_millis(100));
        for _ in 0..1000 {
            assert!(!ctl.abor_pending(), "the ABOR lies beyond what may be held");
        }
        assert!(
            ctl.lines.pending() < MAX_LINE + 4096,
            "{}",
            ctl.lines.pending()
        );
        // The lines are still there, in order, for the session to read.
        let deadline = Instant::now() + Duration::from_secs(5);
        assert!(matches!(ctl.next_line(deadline).unwrap(), Input::Line(l) if l == "NOOP"));
    }
}
