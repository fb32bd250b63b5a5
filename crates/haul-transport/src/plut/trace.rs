//! Debug traces of a running PLUT transfer, for finding where a real path loses goodput: every
//! `TRACE_EVERY` the sender logs the commanded rate against the rate it actually put on the
//! wire and the controller's state; the receiver logs what it received, how late it handled
//! datagrams after the kernel received them, and the host's UDP receive-buffer drops. Enabled
//! with `HAUL_LOG=haul_transport::plut::trace=debug`; costs one branch per loop turn when off.

use haul_plut::control::robbins_monro::RmPhase;
use haul_plut::{Nanos, RateController, Receiver, Sender};

/// Interval between trace lines.
const TRACE_EVERY: Nanos = 100_000_000;

/// True when trace lines are wanted.
fn enabled() -> bool {
    tracing::enabled!(target: "haul_transport::plut::trace", tracing::Level::DEBUG)
}

/// The sender's trace state.
pub(super) struct SendTrace {
    on: bool,
    next: Nanos,
    at: Nanos,
    datagrams: u64,
    retransmits: u64,
    batches: u64,
    /// Largest lateness of a wake-up behind its pacing deadline since the last line, ns.
    late: Nanos,
}

impl SendTrace {
    pub(super) fn new() -> SendTrace {
        SendTrace {
            on: enabled(),
            next: 0,
            at: 0,
            datagrams: 0,
            retransmits: 0,
            batches: 0,
            late: 0,
        }
    }

    /// Notes how late a paced wake-up was.
    pub(super) fn woke(&mut self, deadline: Nanos, now: Nanos) {
        if self.on {
            self.late = self.late.max(now.saturating_sub(deadline));
        }
    }

    /// Logs a line if one is due.
    pub(super) fn tick(&mut self, now: Nanos, s: &Sender, mds: usize, batches: u64) {
        if !self.on || now < self.next {
            return;
        }
        let st = s.stats();
        let dt = now.saturating_sub(self.at).max(1) as f64 / 1e9;
        let sent = st.datagrams_sent - self.datagrams;
        let rtx = st.retransmits - self.retransmits;
        // Wire rates in datagram bytes (the controller's unit) as Mbit/s.
        let mbps = |datagrams: u64| datagrams as f64 * mds as f64 * 8e-6 / dt;
        let m = s.last_measurement();
        let (phase, base, target, bottleneck, lavg, k) = match s.controller() {
            RateController::RobbinsMonro(c) => {
                let phase = match c.phase() {
                    RmPhase::Probe => "probe",
                    RmPhase::Drain => "drain",
                    RmPhase::Stabilize => "stab",
                };
                (
                    phase,
                    c.base_loss(),
                    c.excess_target(),
                    c.bottleneck(),
                    c.loss_avg().unwrap_or(f64::NAN),
                    c.steps(),
                )
            }
            RateController::Aret(_) => ("aret", 0.0, 0.0, 0.0, f64::NAN, 0),
        };
        tracing::debug!(
            target: "haul_transport::plut::trace",
            "send t={:.3} cmd={:.1} sent={:.1} new={:.1} rtx={} m.send={:.1} m.offered={:.1} m.goodput={:.1} m.xhat={:.4} shortfall={:.4} lavg={:.4} base={:.4} tgt={:.4} C={:.1} k={} phase={} srtt_ms={:.2} queue={:.3} batches={} late_us={} acks={} steps={}",
            now as f64 / 1e9,
            s.rate() * 8e-6,
            mbps(sent),
            mbps(sent - rtx),
            rtx,
            m.send_rate * 8e-6,
            m.offered_rate * 8e-6,
            m.goodput * 8e-6,
            m.retransmit_fraction,
            if m.offered_rate > 0.0 { 1.0 - m.goodput / m.offered_rate } else { f64::NAN },
            lavg,
            base,
            target,
            bottleneck * 8e-6,
            k,
            phase,
            s.srtt() as f64 / 1e6,
            m.queue_delay,
            batches - self.batches,
            self.late / 1000,
            st.acks,
            st.control_steps,
        );
        self.next = now + TRACE_EVERY;
        self.at = now;
        self.datagrams = st.datagrams_sent;
        self.retransmits = st.retransmits;
        self.batches = batches;
        self.late = 0;
    }
}

/// The receiver's trace state.
pub(super) struct RecvTrace {
    on: bool,
    next: Nanos,
    at: Nanos,
    accepted: u64,
    duplicates: u64,
    /// Largest delay between a datagram's kernel receive time and its handling, ns.
    lag: Nanos,
    /// Datagrams that carried a kernel receive time.
    stamped: u64,
}

impl RecvTrace {
    pub(super) fn new() -> RecvTrace {
        RecvTrace {
            on: enabled(),
            next: 0,
            at: 0,
            accepted: 0,
            duplicates: 0,
            lag: 0,
            stamped: 0,
        }
    }

    /// Notes a datagram received by the kernel at `at` and handled at `now`.
    pub(super) fn arrived(&mut self, at: Nanos, now: Nanos, stamped: bool) {
        if self.on {
            self.lag = self.lag.max(now.saturating_sub(at));
            self.stamped += u64::from(stamped);
        }
    }

    /// Logs a line if one is due.
    pub(super) fn tick(&mut self, now: Nanos, r: &Receiver, payload: usize) {
        if !self.on || now < self.next {
            return;
        }
        let st = r.stats();
        let dt = now.saturating_sub(self.at).max(1) as f64 / 1e9;
        let (rcvbuf, inerr) = udp_errors().unwrap_or((0, 0));
        tracing::debug!(
            target: "haul_transport::plut::trace",
            "recv t={:.3} goodput={:.1} dup={} ack_rtts={:.3} acks={} rcvbuf_errors={} in_errors={} lag_us={} stamped={}",
            now as f64 / 1e9,
            (st.accepted - self.accepted) as f64 * payload as f64 * 8e-6 / dt,
            st.duplicates - self.duplicates,
            r.ack_interval(),
            st.acks,
            rcvbuf,
            inerr,
            self.lag / 1000,
            self.stamped,
        );
        self.next = now + TRACE_EVERY;
        self.at = now;
        self.accepted = st.accepted;
        self.duplicates = st.duplicates;
        self.lag = 0;
        self.stamped = 0;
    }
}

/// `Udp: RcvbufErrors` and `InErrors` of this network namespace (`/proc/net/snmp`).
fn udp_errors() -> Option<(u64, u64)> {
    let text = std::fs::read_to_string("/proc/net/snmp").ok()?;
    let mut lines = text.lines().filter(|l| l.starts_with("Udp:"));
    let (names, values) = (lines.next()?, lines.next()?);
    let field = |want: &str| {
        names
            .split_whitespace()
            .position(|n| n == want)
            .and_then(|i| values.split_whitespace().nth(i)?.parse().ok())
    };
    Some((field("RcvbufErrors")?, field("InErrors")?))
}
