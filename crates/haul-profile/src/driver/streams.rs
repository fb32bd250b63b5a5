//! The per-stream worker threads: a blocking sender per stream (duration d or a byte quota,
//! optional pacing to the bandwidth cap) and a receiver per stream that returns on the final
//! block, an idle timeout, or the stop flag after the sender finished (000 §3).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::params::ProfileParams;
use crate::tpg::StreamSide;
use crate::transport::{Channel, Recv, POLL};
use crate::Result;

/// Live byte counters, one per stream, read by the interval reporter.
pub type Counters = Arc<Vec<AtomicU64>>;

/// New zeroed counters for `n` streams.
pub fn counters(n: usize) -> Counters {
    Arc::new((0..n).map(|_| AtomicU64::new(0)).collect())
}

/// Pins the calling thread to `cpu` (best effort: a failure is logged, not fatal).
pub fn pin_to_cpu(cpu: usize) {
    // SAFETY: cpu_set_t is plain data; CPU_SET bounds-checks `cpu` against the set size.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if cpu >= libc::CPU_SETSIZE as usize {
            tracing::warn!(cpu, "CPU index out of range; affinity not set");
            return;
        }
        libc::CPU_SET(cpu, &mut set);
        if libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &set) != 0 {
            tracing::warn!(cpu, error = %std::io::Error::last_os_error(), "sched_setaffinity failed");
        }
    }
}

fn pin_stream(p: &ProfileParams, i: usize) {
    if !p.affinity.is_empty() {
        pin_to_cpu(p.affinity[i % p.affinity.len()]);
    }
}

/// What one sender has to do.
pub struct SendJob {
    /// Stream index.
    pub index: usize,
    /// The connected channel.
    pub channel: Box<dyn Channel>,
    /// Byte quota, or `None` for the duration.
    pub quota: Option<u64>,
}

/// The block every sender sends (l bytes): byte i is i mod 251.
pub use crate::transport::test_block;

/// Byte quota of stream `i` when `total` bytes are split over `n` streams.
pub fn quota(total: u64, n: usize, i: usize) -> u64 {
    let n = n.max(1) as u64;
    total / n + u64::from((i as u64) < total % n)
}

/// Runs one sender to completion; `stop` aborts it early (another stream failed).
pub fn run_sender(
    p: &ProfileParams,
    mut job: SendJob,
    start: Instant,
    counters: &Counters,
    stop: &AtomicBool,
) -> Result<StreamSide> {
    pin_stream(p, job.index);
    let l = p.block_size() as usize;
    let block = test_block(l);
    let deadline = start + Duration::from_secs_f64(p.duration_s);
    let rate_bytes = p.rate_per_stream().map(|bps| bps / 8.0);
    let mut sent: u64 = 0;
    let result = loop {
        if stop.load(Ordering::Relaxed) {
            break Ok(());
        }
        let n = match job.quota {
            Some(q) if sent >= q => break Ok(()),
            Some(q) => (q - sent).min(l as u64) as usize,
            None if Instant::now() >= deadline => break Ok(()),
            None => l,
        };
        if let Err(e) = job.channel.send(&block[..n]) {
            break Err(e);
        }
        sent += n as u64;
        counters[job.index].fetch_add(n as u64, Ordering::Relaxed);
        if let Some(r) = rate_bytes {
            // Pace to the cap: block k may leave no earlier than sent/r after the start.
            let due = start + Duration::from_secs_f64(sent as f64 / r);
            let now = Instant::now();
            if due > now {
                std::thread::sleep(due - now);
            }
        }
    };
    let seconds = start.elapsed().as_secs_f64();
    let perf = job.channel.perfmon();
    let closed = job.channel.close();
    drop(job.channel);
    result?;
    closed?;
    Ok(StreamSide {
        bytes: sent,
        seconds,
        rtt_ms: perf.rtt_ms,
        retransmits: perf.retransmits,
        packets: perf.packets,
        lost: None,
    })
}

/// Runs one receiver until the final block, the idle timeout, or `stop` plus a quiet poll.
pub fn run_receiver(
    p: &ProfileParams,
    index: usize,
    mut ch: Box<dyn Channel>,
    start: Instant,
    counters: &Counters,
    stop: &AtomicBool,
) -> Result<StreamSide> {
    pin_stream(p, index);
    let mut buf = vec![0u8; (p.block_size() as usize).max(65_536)];
    let idle_limit = Duration::from_secs_f64(p.idle_timeout_s);
    let mut bytes = 0u64;
    let mut last = None;
    let mut idle = Duration::ZERO;
    loop {
        match ch.recv(&mut buf)? {
            Recv::Data(n) => {
                bytes += n as u64;
                counters[index].fetch_add(n as u64, Ordering::Relaxed);
                last = Some(Instant::now());
                idle = Duration::ZERO;
            }
            Recv::Idle => {
                idle += POLL;
                if stop.load(Ordering::Relaxed) || idle >= idle_limit {
                    break;
                }
            }
            Recv::Eof => break,
        }
    }
    let perf = ch.perfmon();
    let seconds = last.map_or(0.0, |t| t.duration_since(start).as_secs_f64());
    Ok(StreamSide {
        bytes,
        seconds,
        rtt_ms: perf.rtt_ms,
        retransmits: perf.retransmits,
        packets: perf.packets,
        lost: perf.lost,
    })
}

#[cfg(test)]
mod tests {
    use super::quota;

    #[test]
    fn quotas_split_the_total_exactly() {
        let total = 1_000_003;
        let sum: u64 = (0..4).map(|i| quota(total, 4, i)).sum();
        assert_eq!(sum, total);
        assert_eq!(quota(10, 3, 0), 4);
        assert_eq!(quota(10, 3, 2), 3);
    }
}
