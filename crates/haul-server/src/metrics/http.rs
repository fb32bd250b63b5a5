//! The metrics endpoint: a minimal HTTP/1.1 responder for `GET /metrics`, on threads of its
//! own. Everything is bounded: connections at once (more are closed unread), the request head's
//! size, and the time to read it and to write the answer. One request per connection
//! (`Connection: close`); the body is rendered fresh for each scrape.

use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::Metrics;

/// The bounds of the metrics endpoint.
#[derive(Debug, Clone, Copy)]
pub struct HttpLimits {
    /// Connections served at once; more are closed at once.
    pub connections: usize,
    /// Largest request head (request line and headers), bytes.
    pub head: usize,
    /// Time to read a request head, and separately to write the answer.
    pub timeout: Duration,
}

impl Default for HttpLimits {
    fn default() -> HttpLimits {
        HttpLimits {
            connections: 4,
            head: 8192,
            timeout: Duration::from_secs(5),
        }
    }
}

/// Serves `metrics` at `GET /metrics` on `listener` until the process ends.
pub fn serve(
    listener: TcpListener,
    metrics: Arc<Metrics>,
    limits: HttpLimits,
) -> io::Result<JoinHandle<()>> {
    let busy = Arc::new(AtomicUsize::new(0));
    std::thread::Builder::new()
        .name("haul-metrics".into())
        .spawn(move || {
            for conn in listener.incoming() {
                let Ok(tcp) = conn else { continue };
                if busy.fetch_add(1, Ordering::SeqCst) >= limits.connections {
                    busy.fetch_sub(1, Ordering::SeqCst);
                    drop(tcp);
                    continue;
                }
                let (busy, metrics) = (busy.clone(), metrics.clone());
                let spawned = std::thread::Builder::new()
                    .name("haul-metrics-conn".into())
                    .spawn(move || {
                        let mut tcp = tcp;
                        if let Err(e) = answer(&mut tcp, &metrics, &limits) {
                            tracing::debug!(error = %e, "metrics request");
                        }
                        // The slot is free before the client sees the close.
                        busy.fetch_sub(1, Ordering::SeqCst);
                        drop(tcp);
                    });
                if spawned.is_err() {
                    tracing::warn!("cannot start a metrics connection thread");
                }
            }
        })
}

/// Reads one request head and answers it.
fn answer(tcp: &mut TcpStream, metrics: &Metrics, limits: &HttpLimits) -> io::Result<()> {
    let head = read_head(tcp, limits)?;
    tcp.set_write_timeout(Some(limits.timeout))?;
    let line = head.lines().next().unwrap_or_default();
    let mut words = line.split(' ');
    let (method, target) = (
        words.next().unwrap_or_default(),
        words.next().unwrap_or("/"),
    );
    let path = target.split('?').next().unwrap_or_default();
    let (status, kind, body) = match (method, path) {
        ("GET", "/metrics") => (
            "200 OK",
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
            metrics.encode(),
        ),
        ("GET", _) => ("404 Not Found", "text/plain", "try /metrics\n".to_string()),
        _ => (
            "405 Method Not Allowed",
            "text/plain",
            "only GET\n".to_string(),
        ),
    };
    let reply = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    tcp.write_all(reply.as_bytes())?;
    tcp.flush()?;
    let _ = tcp.shutdown(std::net::Shutdown::Write);
    Ok(())
}

/// The request head, up to its blank line, within the size and time bounds.
fn read_head(tcp: &mut TcpStream, limits: &HttpLimits) -> io::Result<String> {
    let until = Instant::now() + limits.timeout;
    let mut head = Vec::with_capacity(512);
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "request head too slow",
            ));
        }
        tcp.set_read_timeout(Some(left))?;
        let n = tcp.read(&mut buf)?;
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        head.extend_from_slice(&buf[..n]);
        if head.len() > limits.head {
            let _ = tcp.write_all(
                b"HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            );
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "request head too large",
            ));
        }
    }
    Ok(String::from_utf8_lossy(&head).into_owned())
}
