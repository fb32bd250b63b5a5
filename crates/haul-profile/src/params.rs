//! The control set θ of one profiling run (000 §3): transport, block size l, packet size m,
//! buffers, streams P, duration d or byte count, plus TPG's extras (multi-NIC pairs, CPU
//! affinity, bandwidth cap). The client sends it to the server in the PARAMS message.

use std::net::IpAddr;
use std::time::Duration;

use haul_transport::channel::ChannelParams;
use serde::{Deserialize, Serialize};

use crate::{ProfileError, Result};

/// UDT's data-packet header, bytes: payload = m − 16 (000 §3).
pub const UDT_HEADER: u64 = 16;
/// IP + UDP headers: UDT_MSS = m + 28.
pub use haul_transport::channel::IP_UDP_HEADER;
/// Default UDT/UDP packet size m (UDT_MSS 1500 − 28, Table I of 001).
pub const DEFAULT_PACKET: u32 = 1472;
/// Default TCP block size: iperf3's 128 KiB.
pub const DEFAULT_TCP_BLOCK: u64 = 128 * 1024;
/// Default UDT block multiplier k in l = k(m − 16) − 1.
pub const DEFAULT_UDT_K: u64 = 10;
/// Largest block accepted.
pub const MAX_BLOCK: u64 = 64 << 20;
/// Most streams accepted.
pub const MAX_STREAMS: u32 = 128;

/// The protocol profiled on the data channels (`tcp`, `udp`, `udt`, `plut`).
pub use haul_transport::channel::Kind as TransportKind;

/// One NIC-to-NIC connection: a stream's source and destination addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct NicPair {
    /// Local address the client binds the stream to.
    pub src: IpAddr,
    /// Server address the stream connects to (the server listens there).
    pub dst: IpAddr,
}

/// Parses a multi-NIC file: one `SRC DST` pair per line, `#` comments and blank lines ignored.
pub fn parse_nic_file(text: &str) -> Result<Vec<NicPair>> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let mut it = line.split_whitespace();
        let bad = |r: &str| ProfileError::param("--nics", format!("line {}: {r}: {line:?}", i + 1));
        let (Some(s), Some(d), None) = (it.next(), it.next(), it.next()) else {
            return Err(bad("expected `SRC_IP DST_IP`"));
        };
        let src = s.parse().map_err(|_| bad("bad source address"))?;
        let dst = d.parse().map_err(|_| bad("bad destination address"))?;
        out.push(NicPair { src, dst });
    }
    Ok(out)
}

/// TCP socket options (congestion control, MSS, pacing): the ones every TCP data socket of haul
/// takes.
pub use haul_transport::socket::TcpOptions;

/// UDT4 socket options, PLUT's controller and PLUT options: settings of the data channels.
pub use haul_transport::channel::{PlutController, PlutOptions, UdtOptions};

/// θ: every setting of one profiling run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ProfileParams {
    /// Data-channel protocol.
    pub transport: TransportKind,
    /// Parallel streams P (one thread each).
    pub streams: u32,
    /// Profiling duration d, seconds (ignored when `bytes` is set).
    pub duration_s: f64,
    /// Total bytes to send across all streams instead of a duration.
    pub bytes: Option<u64>,
    /// Block size l: bytes per application send/recv call (transport default when absent).
    pub block: Option<u64>,
    /// Packet size m: UDT_MSS − 28 for UDT, datagram size for UDP and PLUT.
    pub packet: Option<u32>,
    /// Socket buffer for TCP (`-w`), the UDP blast and the PLUT sockets, bytes.
    pub buffer: Option<u64>,
    /// Aggregate bandwidth cap, bits per second (UDP default: 1 Gb/s).
    pub rate_bps: Option<u64>,
    /// Report interval, seconds (0 = no interval lines).
    pub interval_s: f64,
    /// Receiver idle timeout, seconds.
    pub idle_timeout_s: f64,
    /// Multi-NIC profiling: stream i uses `nics[i % len]`.
    pub nics: Vec<NicPair>,
    /// CPU affinity: stream i's thread is pinned to `affinity[i % len]`.
    pub affinity: Vec<usize>,
    /// TCP options.
    pub tcp: TcpOptions,
    /// UDT options.
    pub udt: UdtOptions,
    /// PLUT options.
    pub plut: PlutOptions,
}

impl Default for ProfileParams {
    fn default() -> Self {
        ProfileParams {
            transport: TransportKind::Tcp,
            streams: 1,
            duration_s: 10.0,
            bytes: None,
            block: None,
            packet: None,
            buffer: None,
            rate_bps: None,
            interval_s: 1.0,
            idle_timeout_s: 5.0,
            nics: Vec::new(),
            affinity: Vec::new(),
            tcp: TcpOptions::default(),
            udt: UdtOptions::default(),
            plut: PlutOptions::default(),
        }
    }
}

/// l = k(m − 16) − 1, TPG's default block form (Eq. 3.3 of 000).
pub fn udt_block(k: u64, packet: u32) -> u64 {
    (k * (u64::from(packet).saturating_sub(UDT_HEADER)))
        .saturating_sub(1)
        .max(1)
}

impl ProfileParams {
    /// What the data channels take from θ: l and m in effect, `-w`, the bandwidth cap per
    /// stream, the idle timeout, and the TCP, UDT and PLUT options.
    pub fn channel(&self) -> ChannelParams {
        ChannelParams {
            block: self.block_size(),
            packet: self.packet_size(),
            buffer: self.buffer,
            rate: self.rate_per_stream().map(|bps| bps / 8.0),
            idle_timeout: Duration::try_from_secs_f64(self.idle_timeout_s).ok(),
            tcp: self.tcp.clone(),
            udt: self.udt.clone(),
            plut: self.plut.clone(),
        }
    }

    /// Packet size m in effect.
    pub fn packet_size(&self) -> u32 {
        self.packet.unwrap_or(DEFAULT_PACKET)
    }

    /// UDT payload per packet, m − 16 (000 §3).
    pub fn udt_payload(&self) -> u64 {
        u64::from(self.packet_size()).saturating_sub(UDT_HEADER)
    }

    /// Block size l in effect.
    pub fn block_size(&self) -> u64 {
        self.block.unwrap_or(match self.transport {
            TransportKind::Tcp | TransportKind::Plut => DEFAULT_TCP_BLOCK,
            TransportKind::Udp => u64::from(self.packet_size()),
            TransportKind::Udt => udt_block(DEFAULT_UDT_K, self.packet_size()),
        })
    }

    /// Bandwidth cap per stream in bits per second, if any (UDP defaults to 1 Gb/s in total).
    pub fn rate_per_stream(&self) -> Option<f64> {
        let total = match (self.rate_bps, self.transport) {
            (Some(r), _) => Some(r),
            (None, TransportKind::Udp) => Some(1_000_000_000),
            _ => None,
        };
        total
            .filter(|r| *r > 0)
            .map(|r| r as f64 / f64::from(self.streams.max(1)))
    }

    /// The UDT block-size warning: an exact multiple of the payload m − 16 leaves no irregular
    /// last packet to trigger an immediate ACK, and UDT falls back to 10 ms timer ACKs (000 §3).
    #[allow(clippy::manual_is_multiple_of)] // rust-version 1.80 predates is_multiple_of
    pub fn block_warning(&self) -> Option<String> {
        let l = self.block_size();
        let p = self.udt_payload();
        (self.transport == TransportKind::Udt && p > 0 && l % p == 0).then(|| {
            format!(
                "block size {l} is an exact multiple ({}x) of the UDT payload {p} (m - 16): UDT throughput \
                 collapses; use l = k(m-16)-1 such as {}",
                l / p,
                udt_block((l / p).max(1), self.packet_size())
            )
        })
    }

    /// Checks ranges and consistency; names the offending flag.
    pub fn validate(&self) -> Result<()> {
        if self.streams == 0 || self.streams > MAX_STREAMS {
            return Err(ProfileError::param(
                "-P",
                format!("{} streams (1..={MAX_STREAMS})", self.streams),
            ));
        }
        if self.bytes.is_none()
            && !(self.duration_s.is_finite()
                && self.duration_s > 0.0
                && self.duration_s <= 86_400.0)
        {
            return Err(ProfileError::param(
                "-t",
                format!("duration {} s (0 < d <= 86400)", self.duration_s),
            ));
        }
        if self.bytes == Some(0) {
            return Err(ProfileError::param("-n", "byte count must be positive"));
        }
        let l = self.block_size();
        if l == 0 || l > MAX_BLOCK {
            return Err(ProfileError::param(
                "-l",
                format!("block size {l} (1..={MAX_BLOCK})"),
            ));
        }
        let m = self.packet_size();
        if !(64..=65_000).contains(&m) {
            return Err(ProfileError::param(
                "-M",
                format!("packet size {m} (64..=65000)"),
            ));
        }
        if self.transport == TransportKind::Udp && l < 16 {
            return Err(ProfileError::param(
                "-l",
                "UDP blocks carry a 16-byte sequence header: need >= 16",
            ));
        }
        if !(self.interval_s.is_finite() && self.interval_s >= 0.0) {
            return Err(ProfileError::param(
                "-i",
                format!("interval {}", self.interval_s),
            ));
        }
        if !(self.idle_timeout_s.is_finite() && self.idle_timeout_s > 0.0) {
            return Err(ProfileError::param(
                "--idle-timeout",
                format!("{}", self.idle_timeout_s),
            ));
        }
        if let Some(cc) = &self.tcp.congestion {
            if cc.is_empty()
                || cc.len() > 15
                || !cc.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
            {
                return Err(ProfileError::param(
                    "--congestion",
                    format!("{cc:?} is not a congestion-control name"),
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tpg_block_examples() {
        // 89,559 = 10·8,956 − 1 and 179,119 = 20·8,956 − 1 (000 §3).
        assert_eq!(udt_block(10, 8972), 89_559);
        assert_eq!(udt_block(20, 8972), 179_119);
        assert_eq!(udt_block(1, 1472), 1455);
    }

    #[test]
    fn block_warning_fires_only_on_exact_multiples_for_udt() {
        let mut p = ProfileParams {
            transport: TransportKind::Udt,
            packet: Some(8972),
            block: Some(89_560),
            ..Default::default()
        };
        let w = p.block_warning().expect("warning");
        assert!(
            w.contains("exact multiple (10x)") && w.contains("89559"),
            "{w}"
        );
        p.block = Some(89_559);
        assert!(p.block_warning().is_none());
        p.block = None;
        assert!(
            p.block_warning().is_none(),
            "the default block follows k(m-16)-1"
        );
        p.transport = TransportKind::Tcp;
        p.block = Some(89_560);
        assert!(p.block_warning().is_none());
    }

    #[test]
    fn channel_params_carry_theta() {
        let mut p = ProfileParams {
            transport: TransportKind::Plut,
            streams: 4,
            rate_bps: Some(4_000_000_000),
            buffer: Some(1 << 20),
            ..Default::default()
        };
        p.plut.session = Some(7);
        let c = p.channel();
        assert_eq!(c.rate, Some(125e6), "-b is shared by the streams");
        assert_eq!((c.block, c.packet), (DEFAULT_TCP_BLOCK, DEFAULT_PACKET));
        assert_eq!(c.buffer, Some(1 << 20));
        assert_eq!(c.idle_timeout, Some(Duration::from_secs(5)));
        assert_eq!(c.plut, p.plut);
        p.transport = TransportKind::Udt;
        p.rate_bps = None;
        let c = p.channel();
        assert_eq!(c.rate, None);
        assert_eq!(c.block, udt_block(DEFAULT_UDT_K, DEFAULT_PACKET));
    }

    #[test]
    fn nic_file_parses_and_rejects() {
        let v = parse_nic_file("# pairs\n10.0.0.1 10.0.0.2\n\n::1 ::1 # v6\n").expect("parse");
        assert_eq!(v.len(), 2);
        assert!(parse_nic_file("10.0.0.1\n").is_err());
        assert!(parse_nic_file("10.0.0.1 nope\n").is_err());
    }

    #[test]
    fn validation_names_the_flag() {
        let p = ProfileParams {
            streams: 0,
            ..Default::default()
        };
        assert!(p.validate().unwrap_err().to_string().contains("-P"));
        let p = ProfileParams {
            tcp: TcpOptions {
                congestion: Some("bbr;rm".into()),
                ..Default::default()
            },
            ..Default::default()
        };
        assert!(p.validate().is_err());
        assert!(ProfileParams::default().validate().is_ok());
    }
}
