//! The IO forwarder of one link direction: reads packets from one TUN device, asks the
//! direction's model for their fate, and writes them to the other TUN device at their release
//! time. Waiting is a hybrid: `ppoll` until shortly before a release, then spinning.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use crate::model::{DirModel, Verdict};
use crate::tun::Tun;

/// Packets due this soon are released now, nanoseconds. Releasing a little early in batches
/// keeps the average rate exact and the delay error far below the 0.3 ms bound, while a
/// forwarder that spun until each exact release time took a whole core from the endpoints
/// on a 2-core machine.
const EARLY_NS: u64 = 25_000;
/// Spin instead of sleeping when the next release is closer than this, nanoseconds.
const SPIN_NS: u64 = 5_000;
/// Longest sleep, so that a stop request is seen promptly, nanoseconds.
const MAX_SLEEP_NS: u64 = 20_000_000;
/// Packets read per turn before releasing due ones.
const BATCH: usize = 64;

/// Now on CLOCK_MONOTONIC, nanoseconds.
pub fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The model of a direction plus the settings the forwarder needs to re-derive it.
#[derive(Debug)]
pub struct Shared {
    /// The direction's model (locked per packet; `stats` and `set` lock it too).
    pub model: Mutex<DirModel>,
    /// Packets the forwarder failed to write to the egress device.
    pub write_errors: std::sync::atomic::AtomicU64,
}

struct Pending {
    at: u64,
    buf: Vec<u8>,
    len: usize,
}

/// Forwards packets from `input` to `output` through `shared`'s model until `stop` is set.
pub fn run(
    input: Arc<Tun>,
    output: Arc<Tun>,
    shared: Arc<Shared>,
    mtu: usize,
    stop: Arc<AtomicBool>,
) {
    // SAFETY: PR_SET_TIMERSLACK only changes this thread's timer slack (1 ns: precise sleeps).
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1, 0, 0, 0) };
    let mut pending: VecDeque<Pending> = VecDeque::new();
    let mut pool: Vec<Vec<u8>> = Vec::new();
    let cap = mtu + 64;
    while !stop.load(Ordering::Relaxed) {
        let mut now = now_ns();
        while pending.front().is_some_and(|p| p.at <= now + EARLY_NS) {
            if let Some(p) = pending.pop_front() {
                if output.send(&p.buf[..p.len]).is_err() {
                    shared.write_errors.fetch_add(1, Ordering::Relaxed);
                }
                pool.push(p.buf);
            }
        }
        let mut got = 0;
        while got < BATCH {
            let mut buf = pool.pop().unwrap_or_else(|| vec![0; cap]);
            match input.recv(&mut buf) {
                Ok(Some(len)) => {
                    got += 1;
                    now = now_ns();
                    let verdict = match shared.model.lock() {
                        Ok(mut m) => m.on_packet(len, now),
                        Err(_) => return,
                    };
                    match verdict {
                        Verdict::Drop(_) => pool.push(buf),
                        Verdict::Deliver(at, dup) => {
                            if let Some(at2) = dup {
                                let mut copy = pool.pop().unwrap_or_else(|| vec![0; cap]);
                                copy[..len].copy_from_slice(&buf[..len]);
                                insert(
                                    &mut pending,
                                    Pending {
                                        at: at2,
                                        buf: copy,
                                        len,
                                    },
                                );
                            }
                            insert(&mut pending, Pending { at, buf, len });
                        }
                    }
                }
                Ok(None) => {
                    pool.push(buf);
                    break;
                }
                Err(e) => {
                    tracing::error!(device = input.name(), "read failed: {e}");
                    return;
                }
            }
        }
        if got > 0 {
            continue;
        }
        let wait = pending.front().map_or(MAX_SLEEP_NS, |p| {
            p.at.saturating_sub(now_ns() + EARLY_NS).min(MAX_SLEEP_NS)
        });
        if wait > SPIN_NS {
            poll_in(input.fd(), wait - SPIN_NS);
        } else {
            std::hint::spin_loop();
        }
    }
}

/// Inserts in release order; the common case (not earlier than the last) is a push.
fn insert(q: &mut VecDeque<Pending>, p: Pending) {
    if q.back().is_none_or(|b| b.at <= p.at) {
        q.push_back(p);
    } else {
        let i = q.partition_point(|x| x.at <= p.at);
        q.insert(i, p);
    }
}

/// Waits until `fd` is readable or `ns` nanoseconds pass.
fn poll_in(fd: i32, ns: u64) {
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    let ts = libc::timespec {
        tv_sec: (ns / 1_000_000_000) as _,
        tv_nsec: (ns % 1_000_000_000) as _,
    };
    // SAFETY: one valid pollfd, a valid timespec, no signal mask.
    unsafe { libc::ppoll(&mut pfd, 1, &ts, std::ptr::null()) };
}
