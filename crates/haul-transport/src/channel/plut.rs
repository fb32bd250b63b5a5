//! PLUT channels (004, `docs/plut.md`): every stream is one PLUT flow over [`crate::plut`]'s
//! stream API, whose batched `sendmmsg` / `recvmmsg` IO and pacer run in the stream's own
//! thread inside `send` and `recv`. The settings map to PLUT as m ([`ChannelParams::packet`]) →
//! MDS, [`ChannelParams::buffer`] → socket buffers, `plut.max_rate` (or
//! [`ChannelParams::rate`]) → the NIC rate B, `plut.initial_rate`, `plut.controller`; the
//! session id is `plut.session` (the profiling client's nonce from PARAMS). The stream carries
//! [`test_block`] of l bytes repeated, the receiver checks every byte against it, and `close`
//! ends the stream at exactly the bytes sent.

use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use haul_plut::control::AretParams;
use haul_plut::{Config, RateControl};

use super::{
    io_err, test_block, Channel, ChannelError, ChannelParams, Connector, Kind, Listener, Perf,
    PlutController, Recv, Result, Setting, POLL,
};
use crate::plut::{self as pio, PlutError, StreamReceiver, StreamSender, Tuning, MAX_MDS};

/// Data buffering of one flow, from which PLUT sizes its window (as haul's PLUT transfers).
const FLOW_BUFFER: usize = 96 << 20;
/// Smallest datagram: a 576-byte IP datagram less the IP and UDP headers (as `OPTS HAUL Mds`).
const MIN_MDS: usize = 576 - 28;

/// PLUT.
#[derive(Debug, Clone, Copy, Default)]
pub struct Plut;

/// NIC rate B of one stream, bytes/s.
fn nic_rate(p: &ChannelParams) -> f64 {
    match (p.plut.max_rate, p.rate) {
        (Some(b), _) => b as f64,
        (None, Some(r)) => r,
        (None, None) => pio::params::DEFAULT_RATE,
    }
}

/// The session configuration of every flow of the run.
fn flow_config(p: &ChannelParams) -> Result<Config> {
    let session = p.plut.session.ok_or_else(|| {
        ChannelError::setting(
            Setting::PlutSession,
            "missing from θ (the client draws one for each run)",
        )
    })?;
    let mut cfg = pio::config(session, p.packet as usize, nic_rate(p), FLOW_BUFFER);
    cfg.rate_control = match p.plut.controller {
        PlutController::Rm => RateControl::default(),
        PlutController::Tsunami => RateControl::Aret(AretParams::default()),
    };
    if let Some(r) = p.plut.initial_rate {
        cfg.initial_rate = r as f64;
    }
    cfg.validate()
        .map_err(|e| ChannelError::setting(Setting::Plut, e.to_string()))?;
    Ok(cfg)
}

fn tuning(p: &ChannelParams) -> Tuning {
    let default = Tuning::default();
    Tuning {
        socket_buffer: p.buffer.map_or(default.socket_buffer, |b| {
            usize::try_from(b).unwrap_or(usize::MAX)
        }),
        idle_timeout: p.idle_timeout.unwrap_or(default.idle_timeout),
        ..default
    }
}

fn plut_err(channel: SocketAddr) -> impl FnOnce(PlutError) -> ChannelError {
    move |source| ChannelError::Plut {
        channel: channel.to_string(),
        source,
    }
}

impl Connector for Plut {
    fn kind(&self) -> Kind {
        Kind::Plut
    }

    fn init(&self, p: &ChannelParams) -> Result<()> {
        let m = p.packet as usize;
        if !(MIN_MDS..=MAX_MDS).contains(&m) {
            return Err(ChannelError::setting(
                Setting::Packet,
                format!(
                    "PLUT datagram size {m} ({MIN_MDS}..={MAX_MDS}; 1472, or 8972 with jumbo frames)"
                ),
            ));
        }
        for (setting, v) in [
            (Setting::PlutInitialRate, p.plut.initial_rate),
            (Setting::PlutMaxRate, p.plut.max_rate),
        ] {
            if v == Some(0) {
                return Err(ChannelError::setting(setting, "rate must be positive"));
            }
        }
        flow_config(p).map(drop)
    }

    fn listen(&self, p: &ChannelParams, addr: SocketAddr) -> Result<Box<dyn Listener>> {
        let tuning = tuning(p);
        let sock = pio::bind(addr, &tuning).map_err(|e| io_err("bind PLUT", addr, e))?;
        let local = sock
            .local_addr()
            .map_err(|e| io_err("local address of", addr, e))?;
        let rx = StreamReceiver::new(
            sock,
            Check(Pattern::new(p.block)),
            &flow_config(p)?,
            &tuning,
        )
        .map_err(plut_err(local))?;
        Ok(Box::new(PlutListen {
            rx: Some(rx),
            local,
        }))
    }

    fn connect(
        &self,
        p: &ChannelParams,
        local: Option<IpAddr>,
        remote: SocketAddr,
        _timeout: Duration,
    ) -> Result<Box<dyn Channel>> {
        let tuning = tuning(p);
        let ip = local.unwrap_or(if remote.is_ipv4() {
            Ipv4Addr::UNSPECIFIED.into()
        } else {
            Ipv6Addr::UNSPECIFIED.into()
        });
        let bind = SocketAddr::new(ip, 0);
        let sock = pio::bind(bind, &tuning).map_err(|e| io_err("bind PLUT", bind, e))?;
        let tx = StreamSender::new(
            sock,
            remote,
            Pattern::new(p.block),
            &flow_config(p)?,
            &tuning,
        )
        .map_err(plut_err(remote))?;
        Ok(Box::new(PlutSend {
            tx,
            remote,
            block: p.block,
            checked: false,
            closed: false,
        }))
    }
}

/// The profile's test block of l bytes, repeated: byte o of a stream is block[o mod l].
struct Pattern {
    period: u64,
    /// The block repeated to l + the largest datagram, so every datagram's bytes are contiguous.
    bytes: Vec<u8>,
}

impl Pattern {
    fn new(l: u64) -> Pattern {
        let block = test_block(usize::try_from(l.max(1)).unwrap_or(1));
        let bytes = block
            .iter()
            .copied()
            .cycle()
            .take(block.len() + MAX_MDS)
            .collect();
        Pattern {
            period: block.len() as u64,
            bytes,
        }
    }

    /// Up to `len` bytes of the stream from `offset`.
    fn at(&self, offset: u64, len: usize) -> &[u8] {
        let start = (offset % self.period) as usize;
        &self.bytes[start..(start + len).min(self.bytes.len())]
    }
}

impl haul_plut::Source for Pattern {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        let src = self.at(offset, buf.len());
        buf[..src.len()].copy_from_slice(src);
        Ok(src.len())
    }
}

/// The receiver's sink: checks every delivered byte against the pattern.
struct Check(Pattern);

impl haul_plut::Sink for Check {
    fn write_at(&mut self, buf: &[u8], offset: u64) -> io::Result<()> {
        let mut done = 0;
        while done < buf.len() {
            let want = self.0.at(offset + done as u64, buf.len() - done);
            let got = &buf[done..done + want.len()];
            // Compare whole slices first (memcmp); look for the byte only on a mismatch.
            if got == want {
                done += want.len();
                continue;
            }
            if let Some(i) = got.iter().zip(want).position(|(a, b)| a != b) {
                let at = offset + (done + i) as u64;
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("stream byte {at} is {} where {} was sent", got[i], want[i]),
                ));
            }
            done += want.len();
        }
        Ok(())
    }
}

struct PlutListen {
    rx: Option<StreamReceiver<Check>>,
    local: SocketAddr,
}

impl Listener for PlutListen {
    fn port(&self) -> u16 {
        self.local.port()
    }

    /// Datagrams need no handshake: the bound socket is the channel (one accept per listener).
    fn accept(&mut self, _timeout: Duration) -> Result<Box<dyn Channel>> {
        let rx = self.rx.take().ok_or_else(|| {
            ChannelError::Usage(format!("PLUT port {} accepted twice", self.local.port()))
        })?;
        Ok(Box::new(PlutRecv {
            rx,
            local: self.local,
            reported: 0,
            pending: 0,
            ended: false,
        }))
    }
}

struct PlutSend {
    tx: StreamSender<Pattern>,
    remote: SocketAddr,
    /// Block size l, the pattern's period.
    block: u64,
    /// Whether the first block was checked against the pattern the flow sends.
    checked: bool,
    closed: bool,
}

impl Channel for PlutSend {
    /// The flow sends the pattern, so a block must be (a prefix of) the profile's test block;
    /// the first one is checked.
    fn send(&mut self, block: &[u8]) -> Result<()> {
        if !self.checked {
            if block.len() as u64 > self.block || block != test_block(block.len()) {
                return Err(ChannelError::Usage(
                    "PLUT profile channels carry the profile's test block only".into(),
                ));
            }
            self.checked = true;
        }
        self.tx
            .write(block.len() as u64)
            .map_err(plut_err(self.remote))
    }

    fn recv(&mut self, _buf: &mut [u8]) -> Result<Recv> {
        Err(ChannelError::Usage(
            "a PLUT profile channel sends or receives, not both".into(),
        ))
    }

    /// Ends the stream: returns once the receiver has every byte sent and knows the length.
    fn close(&mut self) -> Result<()> {
        if !self.closed {
            self.closed = true;
            self.tx.finish().map_err(plut_err(self.remote))?;
        }
        Ok(())
    }

    fn perfmon(&self) -> Perf {
        let s = self.tx.stats();
        Perf {
            rtt_ms: Some(self.tx.srtt() as f64 / 1e6),
            retransmits: Some(s.retransmits),
            packets: Some(s.datagrams_sent),
            lost: None,
        }
    }
}

struct PlutRecv {
    rx: StreamReceiver<Check>,
    local: SocketAddr,
    /// Stream bytes handed to the caller or pending.
    reported: u64,
    /// Delivered bytes not yet returned (a call returns at most `buf.len()`).
    pending: u64,
    ended: bool,
}

impl Channel for PlutRecv {
    fn send(&mut self, _block: &[u8]) -> Result<()> {
        Err(ChannelError::Usage(
            "a PLUT profile channel sends or receives, not both".into(),
        ))
    }

    fn recv(&mut self, buf: &mut [u8]) -> Result<Recv> {
        if self.pending == 0 && !self.ended {
            let s = self.rx.poll(POLL).map_err(plut_err(self.local))?;
            self.pending += s.delivered.saturating_sub(self.reported);
            self.reported = self.reported.max(s.delivered);
            self.ended = s.ended;
        }
        if self.pending > 0 {
            let n = self.pending.min(buf.len().max(1) as u64);
            self.pending -= n;
            return Ok(Recv::Data(n as usize));
        }
        Ok(if self.ended { Recv::Eof } else { Recv::Idle })
    }

    fn close(&mut self) -> Result<()> {
        Ok(())
    }

    fn perfmon(&self) -> Perf {
        let s = self.rx.stats();
        Perf {
            packets: Some(s.accepted),
            ..Perf::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use haul_plut::{Sink, Source};

    #[test]
    fn the_pattern_repeats_the_test_block_and_the_check_finds_a_changed_byte() {
        let p = Pattern::new(1000);
        let mut buf = vec![0u8; 3000];
        let n = p.read_at(&mut buf, 1990).expect("read");
        let block = test_block(1000);
        assert!(buf[..n]
            .iter()
            .enumerate()
            .all(|(i, &b)| b == block[(1990 + i) % 1000]));
        let mut check = Check(Pattern::new(1000));
        assert!(check.write_at(&buf[..n], 1990).is_ok());
        buf[7] ^= 1;
        let e = check.write_at(&buf[..n], 1990).unwrap_err();
        assert!(e.to_string().contains("stream byte 1997"), "{e}");
    }

    #[test]
    fn rates_and_datagram_sizes_are_checked() {
        let p = |f: fn(&mut ChannelParams)| {
            let mut p = ChannelParams::new(128 * 1024, 1472);
            p.plut.session = Some(1);
            f(&mut p);
            Plut.init(&p)
        };
        assert!(p(|_| {}).is_ok());
        assert!(p(|p| p.packet = 8972).is_ok());
        let setting = |e: ChannelError| match e {
            ChannelError::Setting { setting, .. } => Some(setting),
            _ => None,
        };
        assert_eq!(
            setting(p(|p| p.packet = 100).unwrap_err()),
            Some(Setting::Packet)
        );
        assert_eq!(
            setting(p(|p| p.plut.max_rate = Some(0)).unwrap_err()),
            Some(Setting::PlutMaxRate)
        );
        assert_eq!(
            setting(p(|p| p.plut.initial_rate = Some(0)).unwrap_err()),
            Some(Setting::PlutInitialRate)
        );
        assert_eq!(
            setting(p(|p| p.plut.session = None).unwrap_err()),
            Some(Setting::PlutSession)
        );
        let mut q = ChannelParams::new(128 * 1024, 1472);
        assert_eq!(nic_rate(&q), pio::params::DEFAULT_RATE);
        q.rate = Some(125e6);
        assert_eq!(nic_rate(&q), 125e6, "the channel's cap is its NIC rate");
        q.plut.max_rate = Some(1_000_000);
        assert_eq!(nic_rate(&q), 1e6);
    }
}
