//! PLUT over real UDP: the blocking IO loops around `haul-plut`'s sans-IO `Sender` and
//! `Receiver`. One thread per end. The sender fills a batch of datagrams from `poll_transmit`
//! until pacing says wait, sends it with one `sendmmsg` (as UDP GSO super-datagrams where the
//! kernel offers `UDP_SEGMENT`, see `gso.rs`), drains ACKs with `recvmmsg`, and waits for the
//! next pacing slot by sleeping in `ppoll` (the pacer catches up after a late wake-up, so it
//! need not spin). The receiver reads `recvmmsg` batches into preallocated buffers (coalesced
//! by UDP GRO where the kernel offers it, split back into datagrams in `gro.rs`) with the
//! kernel's receive time of each datagram (`SO_TIMESTAMPNS`, which the goodput the rate
//! control runs on is measured by), feeds them to the state machine (whose in-order writer
//! goes through a write-behind buffer) and sends its ACKs. `HAUL_PLUT_OFFLOAD=0` (or
//! [`Tuning::offload`] false) forces plain `sendmmsg` / `recvmmsg`.
//! Socket buffers are enlarged (forced past `rmem_max` when running as root). Nothing is
//! allocated per datagram.
//!
//! The receiver binds and tells the sender its address over the control channel; it accepts
//! datagrams only from the first address that sends it a valid datagram of its session, and
//! answers there.
//!
//! [`StreamSender`] and [`StreamReceiver`] run the same IO for a byte stream whose length the
//! sender fixes only when it ends (`haul profile`'s data channels), one call at a time.

mod adapt;
mod batch;
mod filter;
mod gro;
mod gso;
pub mod params;
pub use filter::only_from;
#[cfg(test)]
mod offload_tests;
mod stream;
mod trace;

use std::io;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::time::Duration;

use haul_plut::{Config, ReceiverStats, SenderStats, Verdict};

use crate::io::{Sink, Source};
use crate::mode_e::Progress;
use batch::{Clock, Woke};
use gro::RecvBatch;
use gso::SendBatch;

pub use haul_plut::wire::{DEFAULT_MDS, JUMBO_MDS, MAX_MDS};
pub use stream::{StreamPoll, StreamReceiver, StreamSender};

/// A PLUT transfer failed.
#[derive(Debug, thiserror::Error)]
pub enum PlutError {
    /// The session configuration is invalid.
    #[error("PLUT configuration: {0}")]
    Config(#[from] haul_plut::ConfigError),
    /// A socket, source or sink operation failed.
    #[error("PLUT {what}: {source}")]
    Io {
        /// What was being done.
        what: &'static str,
        /// The error.
        source: io::Error,
    },
    /// Nothing usable arrived from the peer for too long.
    #[error("PLUT peer {peer} silent for {secs} s ({done} of {len} bytes done)")]
    Silent {
        /// The peer (or "unknown" before its first datagram).
        peer: String,
        /// Seconds of silence.
        secs: u64,
        /// Bytes acknowledged (sender) or received (receiver).
        done: u64,
        /// Bytes in the transfer.
        len: u64,
    },
}

fn io_err(what: &'static str) -> impl FnOnce(io::Error) -> PlutError {
    move |source| PlutError::Io { what, source }
}

/// Floor of the RTT the sender uses: on loopback the real one (tens of µs) would make ACK
/// intervals hold a datagram or two, too few to measure goodput by.
const MIN_RTT: u64 = 2_000_000;

/// Sending time the pacer may catch up after the IO thread was descheduled (see
/// `Config::max_burst_time`): 32 datagrams are only 0.4 ms at 1 Gb/s, and a thread sharing a
/// busy 2-core host with its peer and an emulator is often away longer.
const MAX_BURST_TIME: u64 = 2_000_000;
/// ... or a tenth of the RTT, if more: such a thread is often away 3–10 ms, and a tenth of an
/// RTT adds at most a tenth of the bandwidth-delay product to the bottleneck queue.
const MAX_BURST_RTT: f64 = 0.1;

/// When the IO thread should wake for the pacing slot `next` (from `poll_transmit`'s
/// `poll_timeout`) at `now`: slots more than 1 ms away are waited for exactly; nearer ones are
/// gathered into a batch worth `batch_period` (at most `max_burst` datagrams, or `segments`,
/// one GSO super-datagram's, if more), which the pacer lets a late poll send back to back.
fn wake_at(
    sender: &haul_plut::Sender,
    cfg: &Config,
    tuning: &Tuning,
    segments: usize,
    now: u64,
    next: u64,
) -> u64 {
    if next > now + 1_000_000 {
        return next;
    }
    let gap = cfg.mds as f64 / sender.rate().max(1.0) * 1e9;
    let period = tuning.batch_period.as_nanos() as f64;
    let most = f64::from(cfg.max_burst).max(segments as f64);
    next + ((period / gap).floor().min(most - 1.0).max(0.0) * gap) as u64
}

/// Default [`Tuning::receive_nap`], µs: 100 µs is 85 datagrams of 1472 bytes at 10 Gb/s, two
/// GRO messages, and a twentieth of the shortest ACK interval (the 2 ms RTT floor).
const RECEIVE_NAP_US: u64 = 100;

/// IO-layer settings (the protocol's own tunables are in [`Config`]).
#[derive(Debug, Clone)]
pub struct Tuning {
    /// SO_SNDBUF / SO_RCVBUF to ask for, bytes.
    pub socket_buffer: usize,
    /// Datagrams per `sendmmsg` / `recvmmsg`.
    pub batch: usize,
    /// Target time between the sender's wake-ups; it sends what pacing allows at each.
    pub batch_period: Duration,
    /// The pacer spins, instead of sleeping, this long before a deadline (0 by default: the
    /// pacer catches up after a late wake-up, and spinning took CPU the emulator and the
    /// other end need on a 2-core host).
    pub spin: Duration,
    /// Give up when nothing usable arrives from the peer for this long.
    pub idle_timeout: Duration,
    /// The receiver answers stray datagrams for this quiet time after completing, so a sender
    /// whose final ACK was lost still finishes.
    pub linger: Duration,
    /// While DATA is flowing, the receiver sleeps this long between batches (at most until its
    /// next timer) instead of waiting for the socket to become readable: a receiver woken for
    /// every few datagrams costs both ends a task switch each time (the sender's `sendmmsg`
    /// does the wake-up on loopback), and the socket buffer holds far more than this. 0 waits
    /// for readability as when idle.
    pub receive_nap: Duration,
    /// Use UDP GSO when sending and UDP GRO when receiving where the kernel offers them (a
    /// refused GSO send falls back to plain datagrams for good). Default true unless the
    /// environment sets `HAUL_PLUT_OFFLOAD` to `0`, `off`, `no` or `false`.
    pub offload: bool,
}

/// Whether the environment leaves GSO / GRO on (`HAUL_PLUT_OFFLOAD`, see [`Tuning::offload`]).
fn offload_from_env() -> bool {
    offload_setting(std::env::var("HAUL_PLUT_OFFLOAD").ok().as_deref())
}

/// Whether a `HAUL_PLUT_OFFLOAD` value (or its absence) leaves GSO / GRO on.
fn offload_setting(v: Option<&str>) -> bool {
    match v {
        None => true,
        Some(v) => !matches!(
            v.trim().to_ascii_lowercase().as_str(),
            "0" | "off" | "no" | "false"
        ),
    }
}

impl Default for Tuning {
    fn default() -> Self {
        Tuning {
            socket_buffer: 64 << 20,
            batch: 32,
            batch_period: Duration::from_micros(150),
            spin: Duration::ZERO,
            idle_timeout: Duration::from_secs(30),
            linger: Duration::from_millis(150),
            receive_nap: Duration::from_micros(RECEIVE_NAP_US),
            offload: offload_from_env(),
        }
    }
}

/// What one end of a transfer did.
#[derive(Debug, Clone, Default)]
pub struct Stats {
    /// Wall-clock seconds from the first datagram handled to the end.
    pub elapsed_s: f64,
    /// CPU seconds (user + system) of the IO thread.
    pub cpu_s: f64,
    /// The sender's counters (sending end).
    pub sender: Option<SenderStats>,
    /// The receiver's counters (receiving end).
    pub receiver: Option<ReceiverStats>,
    /// `sendmmsg` calls that carried DATA.
    pub send_batches: u64,
    /// The sender's DATA went out as GSO super-datagrams to the end (sending end).
    pub gso: bool,
    /// The receiver's socket coalesced datagrams with GRO (receiving end).
    pub gro: bool,
}

/// A session configuration for datagrams of `mds` bytes, a NIC rate of `nic_rate` bytes/s and
/// file data buffers of about `buffer_bytes`: window and send buffer are sized in datagrams from
/// it, so jumbo or loopback-sized datagrams do not multiply memory.
pub fn config(session: u64, mds: usize, nic_rate: f64, buffer_bytes: usize) -> Config {
    let mds = mds.clamp(576 - 28, MAX_MDS);
    let per = mds.max(1);
    let window = (buffer_bytes / per).clamp(1024, 65_536);
    Config {
        session,
        mds,
        nic_rate,
        initial_rate: nic_rate / 16.0,
        send_buffer: (window / 4).max(256),
        window,
        max_burst: 32,
        max_burst_time: MAX_BURST_TIME,
        max_burst_rtt: MAX_BURST_RTT,
        min_rtt: MIN_RTT,
        ..Config::default()
    }
}

/// The largest datagram that fits the path MTU towards `peer` (`IP_MTU` of a connected UDP
/// socket; loopback gives 65536), capped at [`MAX_MDS`].
pub fn path_mds(peer: IpAddr) -> io::Result<usize> {
    let local: IpAddr = if peer.is_ipv4() {
        [0, 0, 0, 0].into()
    } else {
        std::net::Ipv6Addr::UNSPECIFIED.into()
    };
    let s = UdpSocket::bind((local, 0))?;
    s.connect((peer, 9))?;
    let (level, opt, overhead) = if peer.is_ipv4() {
        (libc::IPPROTO_IP, libc::IP_MTU, 28)
    } else {
        (libc::IPPROTO_IPV6, libc::IPV6_MTU, 48)
    };
    let mut mtu: libc::c_int = 0;
    let mut len = size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: valid fd, an int-sized out buffer and its length.
    let r = unsafe {
        libc::getsockopt(
            s.as_raw_fd(),
            level,
            opt,
            (&mut mtu as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((mtu as usize)
        .saturating_sub(overhead)
        .clamp(576 - overhead, MAX_MDS))
}

/// Binds a UDP socket at `addr` with large buffers (see [`Tuning::socket_buffer`]).
pub fn bind(addr: SocketAddr, tuning: &Tuning) -> io::Result<UdpSocket> {
    let s = UdpSocket::bind(addr)?;
    enlarge_buffers(&s, tuning.socket_buffer);
    Ok(s)
}

/// Sets SO_SNDBUF / SO_RCVBUF, forcing past the sysctl limits when allowed (root).
fn enlarge_buffers(s: &UdpSocket, bytes: usize) {
    let v = libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX);
    for (force, plain) in [
        (libc::SO_SNDBUFFORCE, libc::SO_SNDBUF),
        (libc::SO_RCVBUFFORCE, libc::SO_RCVBUF),
    ] {
        let set = |opt| crate::socket::set_int(s, libc::SOL_SOCKET, opt, v).is_ok();
        if !set(force) && !set(plain) {
            tracing::debug!(bytes, "PLUT socket buffer not enlarged");
        }
    }
}

/// Sends `len` bytes of `src`, starting at `base`, to the receiver at `peer` over `sock`
/// (which this call connects to `peer`). Returns when the receiver acknowledged every byte.
#[allow(clippy::too_many_arguments)]
pub fn send(
    sock: &UdpSocket,
    peer: SocketAddr,
    src: &dyn Source,
    base: u64,
    len: u64,
    cfg: &Config,
    tuning: &Tuning,
    progress: &Progress,
) -> Result<Stats, PlutError> {
    sock.connect(peer)
        .map_err(io_err("connecting the data socket"))?;
    let mut sender = haul_plut::Sender::new(cfg.clone(), len)?;
    let src = adapt::ReadAhead::new(src, base, len);
    batch::tight_timer_slack();
    let cpu0 = batch::thread_cpu();
    let clock = Clock::start();
    let mut out = SendBatch::new(sock, cfg.mds, tuning.batch, tuning.offload);
    let mut acks = RecvBatch::new(sock, cfg.mds, 64, false);
    acks.enable_timestamps(sock);
    let spin = tuning.spin.as_nanos() as u64;
    let idle = tuning.idle_timeout.as_nanos() as u64;
    let payload = cfg.payload() as u64;
    let mut last_heard = 0;
    let mut stats = Stats::default();
    let mut tr = trace::SendTrace::new();
    while !sender.is_done() {
        progress.check().map_err(io_err("sending DATA"))?;
        let now = clock.now();
        tr.tick(now, &sender, cfg.mds, stats.send_batches);
        if drain_acks(sock, &mut acks, &clock, &mut sender, now)? {
            last_heard = now;
        }
        if sender.is_done() {
            break;
        }
        if now.saturating_sub(last_heard) > idle {
            return Err(PlutError::Silent {
                peer: peer.to_string(),
                secs: tuning.idle_timeout.as_secs(),
                done: first_sent(&sender, payload).min(len),
                len,
            });
        }
        if sender.poll_timeout().is_some_and(|t| t <= now) {
            sender.handle_timeout(now);
        }
        let n = fill_batch(&mut sender, &mut out, now, &src)?;
        if n > 0 {
            stats.send_batches += out.send(sock, n).map_err(io_err("sending DATA"))?;
            let first = first_sent(&sender, payload);
            progress
                .bytes
                .store(first.min(len), std::sync::atomic::Ordering::Relaxed);
            continue;
        }
        // Wake when a batch worth `batch_period` of pacing slots is due (the pacer lets late
        // polls catch up in a burst), or at the RTO, or when an ACK arrives.
        let Some(next) = sender.poll_timeout() else {
            batch::readable(sock, 10_000_000).map_err(io_err("waiting for ACKs"))?;
            continue;
        };
        let deadline = wake_at(&sender, cfg, tuning, out.segments(), now, next);
        if batch::wait(sock, &clock, deadline, spin).map_err(io_err("pacing"))? == Woke::Readable {
            continue;
        }
        tr.woke(deadline, clock.now());
    }
    progress
        .bytes
        .store(len, std::sync::atomic::Ordering::Relaxed);
    stats.elapsed_s = clock.now() as f64 / 1e9;
    stats.cpu_s = batch::thread_cpu() - cpu0;
    stats.sender = Some(sender.stats());
    stats.gso = out.gso();
    Ok(stats)
}

/// Hands every ACK waiting on `sock` to `sender`, reading until a batch comes back short;
/// returns whether any was accepted.
fn drain_acks(
    sock: &UdpSocket,
    acks: &mut RecvBatch,
    clock: &Clock,
    sender: &mut haul_plut::Sender,
    now: u64,
) -> Result<bool, PlutError> {
    let mut heard = false;
    loop {
        let n = acks.recv(sock).map_err(io_err("receiving ACKs"))?;
        let offset = if n > 0 { clock.realtime_offset() } else { 0 };
        for i in 0..n {
            let at = batch::arrival(acks.stamp(i), offset, now);
            if sender.handle_datagram_received(now, at, acks.get(i)) == Verdict::Accepted {
                heard = true;
            }
        }
        if !acks.full() {
            return Ok(heard);
        }
    }
}

/// Fills `out` with the datagrams pacing lets `sender` send at `now`; returns how many.
fn fill_batch(
    sender: &mut haul_plut::Sender,
    out: &mut SendBatch,
    now: u64,
    src: &impl haul_plut::Source,
) -> Result<usize, PlutError> {
    let mut n = 0;
    while n < out.capacity() {
        match sender
            .poll_transmit(now, out.slot(n), src)
            .map_err(io_err("reading the source"))?
        {
            Some(len) => {
                out.set_len(n, len);
                n += 1;
            }
            None => break,
        }
    }
    Ok(n)
}

/// Bytes of the file `sender` has sent at least once (`payload` bytes per datagram).
fn first_sent(sender: &haul_plut::Sender, payload: u64) -> u64 {
    let s = sender.stats();
    s.datagrams_sent.saturating_sub(s.retransmits) * payload
}

/// Receives `len` bytes into `sink` at `base + offset` over `sock`, from the first address
/// that sends a valid datagram of `cfg.session`. Returns once every byte is written and the
/// sender had time to hear the final ACK.
pub fn receive(
    sock: &UdpSocket,
    sink: &dyn Sink,
    base: u64,
    len: u64,
    cfg: &Config,
    tuning: &Tuning,
    progress: &Progress,
) -> Result<Stats, PlutError> {
    let mut recv = haul_plut::Receiver::new(cfg.clone(), len)?;
    let mut writer = adapt::WriteBehind::new(sink, base, len, progress);
    let cpu0 = batch::thread_cpu();
    let clock = Clock::start();
    let mut inb = RecvBatch::new(sock, cfg.mds, tuning.batch.max(8), tuning.offload);
    inb.enable_timestamps(sock);
    let mut ack = vec![0u8; cfg.mds];
    let idle = tuning.idle_timeout.as_nanos() as u64;
    let mut peer: Option<SocketAddr> = None;
    let mut last_heard = 0;
    let mut foreign_src = 0u64;
    let mut first: Option<u64> = None;
    let mut completed_at: Option<u64> = None;
    let mut tr = trace::RecvTrace::new();
    let mut napper = batch::Napper::new(tuning.receive_nap);
    loop {
        progress.check().map_err(io_err("receiving DATA"))?;
        let now = clock.now();
        tr.tick(now, &recv, cfg.payload());
        let n = inb.recv(sock).map_err(io_err("receiving DATA"))?;
        let offset = if n > 0 { clock.realtime_offset() } else { 0 };
        for i in 0..n {
            let from = inb.source(i);
            if peer.is_some() && from != peer {
                foreign_src += 1;
                continue;
            }
            // The kernel's receive time: how late this thread got to the datagram must not
            // move the goodput window the sender's rate control is measured by.
            let at = batch::arrival(inb.stamp(i), offset, now);
            tr.arrived(at, now, inb.stamp(i).is_some());
            let v = recv
                .handle_datagram(at, inb.get(i), &mut writer)
                .map_err(io_err("writing the sink"))?;
            if matches!(v, Verdict::Accepted | Verdict::Duplicate) {
                last_heard = now;
                first.get_or_insert(now);
                lock_peer(sock, &mut peer, from)?;
            }
        }
        if recv.poll_timeout().is_some_and(|t| t <= now) {
            recv.handle_timeout(now);
        }
        if recv.is_complete() && completed_at.is_none() {
            writer.flush().map_err(io_err("writing the sink"))?;
            completed_at = Some(now);
        }
        let repeat = if completed_at == Some(now) { 3 } else { 1 };
        send_acks(sock, &mut recv, &mut ack, now, peer.is_some(), repeat)?;
        if let Some(done) = completed_at {
            if now.saturating_sub(last_heard.max(done)) >= tuning.linger.as_nanos() as u64 {
                break;
            }
        } else if now.saturating_sub(last_heard) > idle {
            let who = peer.map_or_else(|| "unknown".to_string(), |p| p.to_string());
            return Err(PlutError::Silent {
                peer: who,
                secs: tuning.idle_timeout.as_secs(),
                done: recv.stats().delivered,
                len,
            });
        }
        if inb.full() {
            continue;
        }
        let wake = receive_wait(&recv, completed_at.is_some(), now, tuning);
        napper
            .wait(sock, now, n, wake)
            .map_err(io_err("waiting for DATA"))?;
    }
    if foreign_src > 0 {
        tracing::debug!(foreign_src, "PLUT datagrams from other addresses dropped");
    }
    let mut rs = recv.stats();
    rs.foreign += foreign_src;
    Ok(Stats {
        elapsed_s: (clock.now() - first.unwrap_or(0)) as f64 / 1e9,
        cpu_s: batch::thread_cpu() - cpu0,
        sender: None,
        receiver: Some(rs),
        send_batches: 0,
        gso: false,
        gro: inb.gro(),
    })
}

/// Locks the receiver onto `from`, the sender of a valid datagram, unless it has a peer.
fn lock_peer(
    sock: &UdpSocket,
    peer: &mut Option<SocketAddr>,
    from: Option<SocketAddr>,
) -> Result<(), PlutError> {
    if peer.is_none() {
        if let Some(addr) = from {
            sock.connect(addr)
                .map_err(io_err("connecting the data socket"))?;
            *peer = Some(addr);
        }
    }
    Ok(())
}

/// Takes every ACK `recv` has due at `now` and, once the peer is known, sends each `repeat`
/// times.
fn send_acks(
    sock: &UdpSocket,
    recv: &mut haul_plut::Receiver,
    ack: &mut [u8],
    now: u64,
    peer_known: bool,
    repeat: usize,
) -> Result<(), PlutError> {
    while let Some(m) = recv.poll_transmit(now, ack).map_err(|e| PlutError::Io {
        what: "encoding an ACK",
        source: io::Error::other(e.to_string()),
    })? {
        if peer_known {
            for _ in 0..repeat {
                // A lost ACK is recovered by the protocol; a full buffer is not fatal.
                let _ = sock.send(&ack[..m]);
            }
        }
    }
    Ok(())
}

/// How long the receiver may wait for DATA at `now`, nanoseconds (at most 10 ms): until its
/// next timer, or a quarter of the linger time once `completed`.
fn receive_wait(recv: &haul_plut::Receiver, completed: bool, now: u64, tuning: &Tuning) -> u64 {
    let wake = match (completed, recv.poll_timeout()) {
        (true, _) => tuning.linger.as_nanos() as u64 / 4,
        (false, Some(t)) => t.saturating_sub(now).max(1),
        (false, None) => 10_000_000,
    };
    wake.min(10_000_000)
}
