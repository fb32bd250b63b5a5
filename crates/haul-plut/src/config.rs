//! Session configuration shared by both ends. The control channel agrees on the session id,
//! the file length and the maximum datagram size; the rest are local tunables. Every value the
//! paper leaves open is a field here, with haul's choice as the default (see `docs/plut.md`).

use crate::control::{RateControl, SpsaParams};
use crate::wire::{ACK_FIXED_LEN, DATA_HEADER_LEN, DEFAULT_MDS, MAX_MDS, RANGE_LEN};
use crate::Nanos;
use std::cmp::Ordering;
use thiserror::Error;

/// An invalid configuration value.
#[derive(Debug, Clone, Error, PartialEq)]
pub enum ConfigError {
    /// The maximum datagram size cannot hold a header plus one byte, or an ACK with one range.
    #[error("PLUT maximum datagram size {0} outside {min}..={MAX_MDS}", min = min_mds())]
    Mds(usize),
    /// A rate, count or duration that must be positive is not.
    #[error("PLUT parameter {name} must be positive, got {value}")]
    NotPositive {
        /// Parameter name.
        name: &'static str,
        /// Its value.
        value: f64,
    },
    /// γ of the Robbins–Monro gain is outside (0.5, 1) or β outside [0, 1].
    #[error("PLUT Robbins-Monro parameter {name} = {value} outside {range}")]
    OutOfRange {
        /// Parameter name.
        name: &'static str,
        /// Its value.
        value: f64,
        /// The allowed range.
        range: &'static str,
    },
}

fn min_mds() -> usize {
    (DATA_HEADER_LEN + 1).max(ACK_FIXED_LEN + RANGE_LEN)
}

/// Configuration of one PLUT session.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// Session id (a random nonce agreed over the control channel); datagrams carrying another
    /// id are dropped.
    pub session: u64,
    /// Maximum datagram size (UDP payload): 1472 by default, 8972 with jumbo frames.
    pub mds: usize,
    /// NIC rate B of Eq. 1, bytes/s: the sender never paces faster.
    pub nic_rate: f64,
    /// Source rate the controller starts from, bytes/s.
    pub initial_rate: f64,
    /// The source-rate controller.
    pub rate_control: RateControl,
    /// The receiver's ACK-interval SPSA.
    pub ack_interval: SpsaParams,
    /// Receiver idle time before a TNT/TMO, in RTTs.
    pub ack_timeout_rtts: f64,
    /// Floor of the receiver's ACK timeout.
    pub min_ack_timeout: Nanos,
    /// RTT assumed before the first sample.
    pub initial_rtt: Nanos,
    /// Floor of RTT samples (0: none). On sub-millisecond paths (loopback) it keeps ACK
    /// intervals and control steps long enough to measure goodput over many datagrams.
    pub min_rtt: Nanos,
    /// Datagrams preallocated in the sender's DQ.
    pub send_buffer: usize,
    /// Most datagrams beyond the receiver's next expected one that may be in flight or held
    /// for reordering (flow-control window; also caps the sender's heap growth).
    pub window: usize,
    /// Datagrams the pacer may send back to back to catch up after a late poll.
    pub max_burst: u32,
    /// Sending time the pacer may catch up after a late poll, if that is more than
    /// `max_burst` datagrams (0: only `max_burst`). A thread that is descheduled for longer
    /// than its catch-up allowance loses that sending time for good, so on a busy host a
    /// credit of a few datagrams (32 at 1 Gb/s is 0.4 ms) leaves the achieved rate below the
    /// commanded one; a credit in time keeps the average rate at any rate.
    pub max_burst_time: Nanos,
    /// ... or this fraction of the smoothed RTT, if that is more (0: off). A burst of a tenth
    /// of an RTT adds a tenth of the bandwidth-delay product to the bottleneck queue at most.
    pub max_burst_rtt: f64,
    /// First transmissions a rate-control step must cover (besides lasting one RTT).
    pub min_step_datagrams: u64,
    /// Most ACK datagrams one acknowledgement may take when its loss list is long.
    pub max_ack_datagrams: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            session: 0,
            mds: DEFAULT_MDS,
            nic_rate: 125e6,
            initial_rate: 125e6 / 16.0,
            rate_control: RateControl::default(),
            ack_interval: SpsaParams::default(),
            ack_timeout_rtts: 2.0,
            min_ack_timeout: 10_000_000,
            initial_rtt: 100_000_000,
            min_rtt: 0,
            send_buffer: 4096,
            window: 65_536,
            max_burst: 16,
            max_burst_time: 0,
            max_burst_rtt: 0.0,
            min_step_datagrams: 200,
            max_ack_datagrams: 16,
        }
    }
}

impl Config {
    /// Payload bytes per DATA datagram.
    pub fn payload(&self) -> usize {
        self.mds.saturating_sub(DATA_HEADER_LEN)
    }

    /// Number of DATA datagrams a file of `len` bytes takes.
    pub fn datagrams(&self, len: u64) -> u64 {
        len.div_ceil(self.payload().max(1) as u64)
    }

    /// Checks every value; both state machines call this on construction.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !(min_mds()..=MAX_MDS).contains(&self.mds) {
            return Err(ConfigError::Mds(self.mds));
        }
        let positive = [
            ("nic_rate", self.nic_rate),
            ("initial_rate", self.initial_rate),
            ("ack_timeout_rtts", self.ack_timeout_rtts),
            ("initial_rtt", self.initial_rtt as f64),
            ("send_buffer", self.send_buffer as f64),
            ("window", self.window as f64),
            ("max_burst", f64::from(self.max_burst)),
            ("ack_interval.min", self.ack_interval.min),
            ("ack_interval.d", self.ack_interval.d),
        ];
        for (name, value) in positive {
            // Written so NaN fails too.
            if !(value > 0.0 && value.is_finite()) {
                return Err(ConfigError::NotPositive { name, value });
            }
        }
        if !(self.max_burst_rtt >= 0.0 && self.max_burst_rtt.is_finite()) {
            return Err(ConfigError::OutOfRange {
                name: "max_burst_rtt",
                value: self.max_burst_rtt,
                range: "[0, ∞)",
            });
        }
        if !matches!(
            self.ack_interval.max.partial_cmp(&self.ack_interval.min),
            Some(Ordering::Greater | Ordering::Equal)
        ) {
            let value = self.ack_interval.max;
            return Err(ConfigError::OutOfRange {
                name: "ack_interval.max",
                value,
                range: "[ack_interval.min, ∞)",
            });
        }
        if let RateControl::RobbinsMonro(p) = self.rate_control {
            if !(p.gamma > 0.5 && p.gamma < 1.0) {
                return Err(ConfigError::OutOfRange {
                    name: "gamma",
                    value: p.gamma,
                    range: "(0.5, 1)",
                });
            }
            if !(0.0..=1.0).contains(&p.beta) {
                return Err(ConfigError::OutOfRange {
                    name: "beta",
                    value: p.beta,
                    range: "[0, 1]",
                });
            }
            if !(p.b > 0.0 && p.b < 1.0) {
                return Err(ConfigError::OutOfRange {
                    name: "b",
                    value: p.b,
                    range: "(0, 1)",
                });
            }
            if !(p.drain > 0.0 && p.drain <= 1.0) {
                return Err(ConfigError::OutOfRange {
                    name: "drain",
                    value: p.drain,
                    range: "(0, 1]",
                });
            }
            for (name, value) in [
                ("probe_gain", p.probe_gain),
                ("loss_target", p.loss_target),
                ("settle_tolerance", p.settle_tolerance),
            ] {
                if !(value > 0.0 && value.is_finite()) {
                    return Err(ConfigError::NotPositive { name, value });
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control::RmParams;

    #[test]
    fn defaults_are_valid_and_bad_values_are_named() {
        assert_eq!(Config::default().validate(), Ok(()));
        assert_eq!(Config::default().payload(), 1432);
        assert_eq!(
            Config {
                mds: 40,
                ..Config::default()
            }
            .validate(),
            Err(ConfigError::Mds(40))
        );
        let rc = RateControl::RobbinsMonro(RmParams {
            gamma: 0.5,
            ..RmParams::default()
        });
        assert!(matches!(
            Config {
                rate_control: rc,
                ..Config::default()
            }
            .validate(),
            Err(ConfigError::OutOfRange { name: "gamma", .. })
        ));
        assert!(matches!(
            Config {
                nic_rate: f64::NAN,
                ..Config::default()
            }
            .validate(),
            Err(ConfigError::NotPositive {
                name: "nic_rate",
                ..
            })
        ));
    }
}
