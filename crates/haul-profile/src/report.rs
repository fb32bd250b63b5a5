//! Results of one profiling run: per-stream averages ū_i and the aggregate G (Eqs. 3.1–3.2 of
//! 000), iperf3-style text, JSON with `aggregate_bps` at the top level, and the history record.

use serde::{Deserialize, Serialize};

use crate::params::ProfileParams;
use crate::tpg::{SideReport, VERSION};

/// Bytes moved by every stream in one report interval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Interval {
    /// Interval start, seconds since PROFILING_START.
    pub start_s: f64,
    /// Interval end.
    pub end_s: f64,
    /// Bytes sent per stream in the interval.
    pub stream_bytes: Vec<u64>,
    /// Sum over streams.
    pub bytes: u64,
    /// Aggregate rate over the interval, bits per second.
    pub bps: f64,
}

/// One stream's results from both sides.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StreamResult {
    /// Stream index (from 1, as iperf3 prints IDs).
    pub id: usize,
    /// Source address of the data channel.
    pub src: String,
    /// Destination address of the data channel.
    pub dst: String,
    /// Bytes the client sent.
    pub sent_bytes: u64,
    /// Bytes the server received.
    pub received_bytes: u64,
    /// ū_i: average received throughput, bits per second (Eq. 3.1 of 000).
    pub avg_bps: f64,
    /// Sender-side rate, bits per second.
    pub sender_bps: f64,
    /// Smoothed RTT at the sender, milliseconds (TCP_INFO / UDT perfmon).
    pub rtt_ms: Option<f64>,
    /// Retransmissions at the sender.
    pub retransmits: Option<u64>,
    /// Datagrams the receiver got (UDP).
    pub packets_received: Option<u64>,
    /// Datagrams lost (UDP: from sequence numbers; UDT: sender loss reports).
    pub lost_packets: Option<u64>,
}

/// The full result of one `haul profile run`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProfileReport {
    /// G(θ): aggregate received throughput, bits per second (Eq. 3.2 of 000).
    pub aggregate_bps: f64,
    /// Aggregate sender throughput, bits per second.
    pub sender_bps: f64,
    /// Control protocol version.
    pub protocol_version: u16,
    /// The server as given.
    pub server: String,
    /// Start, Unix seconds.
    pub started_at: f64,
    /// ΔT of Eq. 3.1: the longer of the sender's and the receiver's measured durations, seconds.
    pub duration_s: f64,
    /// Bytes sent in total.
    pub sent_bytes: u64,
    /// Bytes received in total.
    pub received_bytes: u64,
    /// θ as accepted by the server.
    pub params: ProfileParams,
    /// Block size l in effect.
    pub block_size: u64,
    /// Warnings (e.g. the UDT block-size rule).
    pub warnings: Vec<String>,
    /// Per-stream results.
    pub streams: Vec<StreamResult>,
    /// Sender-side interval samples.
    pub intervals: Vec<Interval>,
}

impl ProfileReport {
    /// Combines both sides' results. `addrs` are each stream's (src, dst).
    #[allow(clippy::too_many_arguments)]
    pub fn build(
        server: &str,
        params: ProfileParams,
        started_at: f64,
        sender: &SideReport,
        receiver: &SideReport,
        addrs: &[(String, String)],
        intervals: Vec<Interval>,
        warnings: Vec<String>,
    ) -> ProfileReport {
        let dt = sender.duration_s.max(receiver.duration_s);
        let rate = |bytes: u64, secs: f64| {
            if secs > 0.0 {
                bytes as f64 * 8.0 / secs
            } else {
                0.0
            }
        };
        let streams: Vec<StreamResult> = sender
            .streams
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let r = receiver.streams.get(i).cloned().unwrap_or_default();
                let (src, dst) = addrs.get(i).cloned().unwrap_or_default();
                StreamResult {
                    id: i + 1,
                    src,
                    dst,
                    sent_bytes: s.bytes,
                    received_bytes: r.bytes,
                    // Eq. 3.1 of 000: ū_i = ∫ S_i dx / ΔT.
                    avg_bps: rate(r.bytes, dt),
                    sender_bps: rate(s.bytes, sender.duration_s),
                    rtt_ms: s.rtt_ms.or(r.rtt_ms),
                    retransmits: s.retransmits,
                    packets_received: r.packets,
                    lost_packets: r.lost.or(s.lost),
                }
            })
            .collect();
        let sent_bytes = streams.iter().map(|s| s.sent_bytes).sum();
        let received_bytes = streams.iter().map(|s| s.received_bytes).sum();
        ProfileReport {
            // Eq. 3.2 of 000: G(θ) = Σ_i ū_i.
            aggregate_bps: streams.iter().map(|s| s.avg_bps).sum(),
            sender_bps: rate(sent_bytes, sender.duration_s),
            protocol_version: VERSION,
            server: server.to_string(),
            started_at,
            duration_s: dt,
            sent_bytes,
            received_bytes,
            block_size: params.block_size(),
            params,
            warnings,
            streams,
            intervals,
        }
    }

    /// The report as pretty JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_default()
    }

    /// The history record (kind `profile`).
    pub fn to_record(&self) -> haul_store::TransferRecord {
        let p = &self.params;
        haul_store::TransferRecord {
            id: None,
            kind: "profile".into(),
            started_at: self.started_at,
            duration_s: self.duration_s,
            source: "haul profile run".into(),
            destination: self.server.clone(),
            source_host: "local".into(),
            destination_host: self.server.clone(),
            params: haul_store::Params {
                parallelism: Some(p.streams),
                tcp_buffer: p.buffer,
                block_size: Some(self.block_size),
                transport: Some(p.transport.to_string()),
                extra: serde_json::json!({ "profile": p, "aggregate_bps": self.aggregate_bps, "sender_bps": self.sender_bps }),
                ..Default::default()
            },
            files: 0,
            bytes: self.received_bytes,
            outcome: haul_store::Outcome::Ok,
            error: None,
            samples: self
                .intervals
                .iter()
                .map(|i| haul_store::Sample {
                    t_s: i.end_s,
                    bytes: i.bytes,
                    bps: i.bps,
                })
                .collect(),
        }
    }
}

/// `1.10 GBytes` in iperf3's style (binary units).
pub fn fmt_bytes(b: u64) -> String {
    let v = b as f64;
    if v >= (1u64 << 30) as f64 {
        format!("{:.2} GBytes", v / (1u64 << 30) as f64)
    } else if v >= (1u64 << 20) as f64 {
        format!("{:.1} MBytes", v / (1u64 << 20) as f64)
    } else {
        format!("{:.1} KBytes", v / 1024.0)
    }
}

/// `9.41 Gbits/sec` in iperf3's style (decimal units).
pub fn fmt_rate(bps: f64) -> String {
    if bps >= 1e9 {
        format!("{:.2} Gbits/sec", bps / 1e9)
    } else if bps >= 1e6 {
        format!("{:.1} Mbits/sec", bps / 1e6)
    } else {
        format!("{:.1} Kbits/sec", bps / 1e3)
    }
}

/// The column header of interval lines.
pub fn header() -> String {
    "[ ID] Interval           Transfer     Bitrate".to_string()
}

/// iperf3-style lines for one interval (one per stream, plus `[SUM]` with several streams).
pub fn interval_lines(iv: &Interval) -> Vec<String> {
    let dt = (iv.end_s - iv.start_s).max(1e-9);
    let line = |id: String, b: u64| {
        format!(
            "[{id}] {:6.2}-{:<6.2} sec  {:>12}  {:>15}",
            iv.start_s,
            iv.end_s,
            fmt_bytes(b),
            fmt_rate(b as f64 * 8.0 / dt)
        )
    };
    let mut out: Vec<String> = iv
        .stream_bytes
        .iter()
        .enumerate()
        .map(|(i, b)| line(format!("{:3}", i + 1), *b))
        .collect();
    if iv.stream_bytes.len() > 1 {
        out.push(line("SUM".into(), iv.bytes));
    }
    out
}

/// iperf3-style summary: sender and receiver line per stream, RTT / retransmits / loss.
pub fn summary_lines(r: &ProfileReport) -> Vec<String> {
    let d = r.duration_s;
    let mut out = vec![
        "- - - - - - - - - - - - - - - - - - - - - - - - -".to_string(),
        format!("{}  Retr  RTT", header()),
    ];
    let opt = |v: Option<u64>| v.map_or("-".to_string(), |x| x.to_string());
    for s in &r.streams {
        let rtt = s.rtt_ms.map_or("-".to_string(), |v| format!("{v:.2}ms"));
        out.push(format!(
            "[{:3}] {:6.2}-{:<6.2} sec  {:>12}  {:>15}  {:>4}  {rtt}  sender",
            s.id,
            0.0,
            d,
            fmt_bytes(s.sent_bytes),
            fmt_rate(s.sender_bps),
            opt(s.retransmits)
        ));
        let loss = match (s.lost_packets, s.packets_received) {
            (Some(l), Some(n)) if l + n > 0 => format!(
                "  lost {l}/{} ({:.2}%)",
                l + n,
                100.0 * l as f64 / (l + n) as f64
            ),
            _ => String::new(),
        };
        out.push(format!(
            "[{:3}] {:6.2}-{:<6.2} sec  {:>12}  {:>15}              receiver{loss}",
            s.id,
            0.0,
            d,
            fmt_bytes(s.received_bytes),
            fmt_rate(s.avg_bps)
        ));
    }
    if r.streams.len() > 1 {
        out.push(format!(
            "[SUM] {:6.2}-{:<6.2} sec  {:>12}  {:>15}              sender",
            0.0,
            d,
            fmt_bytes(r.sent_bytes),
            fmt_rate(r.sender_bps)
        ));
        out.push(format!(
            "[SUM] {:6.2}-{:<6.2} sec  {:>12}  {:>15}              receiver",
            0.0,
            d,
            fmt_bytes(r.received_bytes),
            fmt_rate(r.aggregate_bps)
        ));
    }
    out.extend(r.warnings.iter().map(|w| format!("warning: {w}")));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tpg::StreamSide;

    #[test]
    fn aggregate_is_the_sum_of_stream_averages() {
        let side = |b: [u64; 2], d: f64| SideReport {
            streams: b
                .iter()
                .map(|&bytes| StreamSide {
                    bytes,
                    seconds: d,
                    ..Default::default()
                })
                .collect(),
            duration_s: d,
        };
        let r = ProfileReport::build(
            "h:1",
            ProfileParams {
                streams: 2,
                ..Default::default()
            },
            0.0,
            &side([1000, 3000], 2.0),
            &side([1000, 2000], 1.0),
            &[],
            vec![],
            vec![],
        );
        assert_eq!(r.duration_s, 2.0);
        assert_eq!(r.streams[0].avg_bps, 4000.0);
        assert_eq!(r.streams[1].avg_bps, 8000.0);
        assert_eq!(r.aggregate_bps, 12_000.0);
        let v: serde_json::Value = serde_json::from_str(&r.to_json()).expect("json");
        assert_eq!(v["aggregate_bps"], 12_000.0);
        assert_eq!(r.to_record().kind, "profile");
        assert!(summary_lines(&r).iter().any(|l| l.starts_with("[SUM]")));
    }
}
