//! Link parameters: the per-direction model settings (`DirParams`), their partial form used by
//! topology files, `up` flags and `set` (`DirPatch`), and the human-unit serde wrappers.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::error::{Error, Result};
use crate::units;

/// How the drop-tail queue in front of the rate limiter is bounded.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum QueueLimit {
    /// One bandwidth-delay product of the link (at least 16 MTU-sized packets).
    #[default]
    Bdp,
    /// At most this many bytes queued.
    Bytes(u64),
    /// At most this many packets queued.
    Packets(u64),
}

/// A packet loss model.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case", tag = "model")]
pub enum LossModel {
    /// No loss.
    #[default]
    None,
    /// Each packet is lost independently with probability `p`.
    Bernoulli {
        /// Loss probability.
        p: f64,
    },
    /// Two-state Markov chain (Gilbert–Elliott): `p` good→bad, `r` bad→good per packet;
    /// a packet is lost with `1 - k` in the good state and `1 - h` in the bad state.
    GilbertElliott {
        /// Probability of moving from good to bad.
        p: f64,
        /// Probability of moving from bad to good.
        r: f64,
        /// Probability of delivery in the bad state.
        h: f64,
        /// Probability of delivery in the good state.
        k: f64,
    },
    /// Every `n`-th packet is lost.
    Periodic {
        /// Period in packets (≥ 1).
        n: u64,
    },
}

/// Pareto on/off cross-traffic sources sharing a direction's bottleneck.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct CrossTraffic {
    /// Number of independent sources.
    pub sources: u32,
    /// Sending rate of one source while on, bytes per second.
    pub rate: f64,
    /// Pareto shape of the on and off durations.
    pub shape: f64,
    /// Mean on duration, seconds.
    pub mean_on: f64,
    /// Mean off duration, seconds.
    pub mean_off: f64,
    /// Packet size, bytes.
    pub packet: u32,
}

impl Default for CrossTraffic {
    fn default() -> Self {
        CrossTraffic {
            sources: 0,
            rate: 5e6 / 8.0,
            shape: 1.4,
            mean_on: 1.5,
            mean_off: 1.5,
            packet: 1500,
        }
    }
}

/// The model parameters of one direction of a link. Seconds, bytes, bytes per second.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, Default)]
pub struct DirParams {
    /// One-way propagation delay, seconds.
    pub delay: f64,
    /// Uniform jitter added to the delay, ± seconds (never reorders).
    pub jitter: f64,
    /// Bottleneck rate, bytes per second; `None` is unlimited.
    pub rate: Option<f64>,
    /// Drop-tail queue bound.
    pub queue: QueueLimit,
    /// Loss model, applied after the queue (on the wire).
    pub loss: LossModel,
    /// Probability that a packet is held back by `reorder_gap` so later packets overtake it.
    pub reorder: f64,
    /// Extra delay of a reordered packet, seconds.
    pub reorder_gap: f64,
    /// Probability that a packet is delivered twice.
    pub duplicate: f64,
    /// Cross traffic competing for the rate.
    pub cross: CrossTraffic,
}

impl DirParams {
    /// Checks ranges: probabilities in [0, 1], non-negative times, positive rates.
    pub fn validate(&self, what: &str) -> Result<()> {
        let bad = |m: String| Err(Error::Config(format!("{what}: {m}")));
        let prob = |name: &str, p: f64| -> Result<()> {
            if (0.0..=1.0).contains(&p) {
                Ok(())
            } else {
                bad(format!("{name} {p} is not a probability"))
            }
        };
        if !(self.delay >= 0.0 && self.jitter >= 0.0 && self.reorder_gap >= 0.0) {
            return bad("delay, jitter and reorder gap must be non-negative".into());
        }
        if let Some(r) = self.rate {
            if r.is_nan() || r <= 0.0 {
                return bad(format!("rate {r} must be positive"));
            }
        }
        prob("reorder", self.reorder)?;
        prob("duplicate", self.duplicate)?;
        match self.loss {
            LossModel::None => {}
            LossModel::Bernoulli { p } => prob("loss", p)?,
            LossModel::GilbertElliott { p, r, h, k } => {
                for (n, v) in [("p", p), ("r", r), ("h", h), ("k", k)] {
                    prob(n, v)?;
                }
            }
            LossModel::Periodic { n } => {
                if n == 0 {
                    return bad("periodic loss period must be at least 1".into());
                }
            }
        }
        match self.queue {
            QueueLimit::Bytes(0) | QueueLimit::Packets(0) => {
                return bad("queue limit is zero".into())
            }
            _ => {}
        }
        let c = &self.cross;
        if c.sources > 0
            && !(c.rate > 0.0
                && c.shape > 1.0
                && c.mean_on > 0.0
                && c.mean_off > 0.0
                && c.packet >= 20)
        {
            return bad(
                "cross traffic needs rate > 0, shape > 1, positive means, packet >= 20".into(),
            );
        }
        Ok(())
    }
}

/// A duration in seconds, written as `100ms` (a bare number is seconds).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Dur(pub f64);
/// A rate in bytes per second, written as `1gbit` (a bare number is bytes per second).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rate(pub f64);
/// A probability, written as `0.01%` or `0.0001`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Prob(pub f64);
/// A size in bytes, written as `64k` or `9000`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Size(pub u64);

#[derive(Deserialize)]
#[serde(untagged)]
enum NumOrStr {
    Num(f64),
    Str(String),
}

macro_rules! human {
    ($t:ident, $inner:ty, $parse:path, $fmt:expr) => {
        impl<'de> Deserialize<'de> for $t {
            fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
                match NumOrStr::deserialize(d)? {
                    NumOrStr::Num(n) => Ok($t(n as $inner)),
                    NumOrStr::Str(s) => $parse(&s).map($t).map_err(serde::de::Error::custom),
                }
            }
        }
        impl Serialize for $t {
            fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
                let f: fn($inner) -> String = $fmt;
                s.serialize_str(&f(self.0))
            }
        }
        impl std::str::FromStr for $t {
            type Err = Error;
            fn from_str(s: &str) -> Result<Self> {
                $parse(s).map($t)
            }
        }
    };
}
human!(Dur, f64, units::parse_duration, units::fmt_duration);
human!(Rate, f64, units::parse_rate, units::fmt_rate);
human!(Prob, f64, units::parse_prob, |p| format!("{}%", p * 100.0));
human!(Size, u64, units::parse_size, |b| b.to_string());

/// Gilbert–Elliott parameters in human form.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct GePatch {
    /// Good→bad transition probability.
    pub p: Prob,
    /// Bad→good transition probability.
    pub r: Prob,
    /// Delivery probability in the bad state (default 0).
    #[serde(default = "zero_prob")]
    pub h: Prob,
    /// Delivery probability in the good state (default 1).
    #[serde(default = "one_prob")]
    pub k: Prob,
}

fn zero_prob() -> Prob {
    Prob(0.0)
}
fn one_prob() -> Prob {
    Prob(1.0)
}

/// A partial change of `DirParams` in human units: the fields of a topology file's link,
/// of `haul netem up --pair` and of `haul netem set`. Unset fields keep their value.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DirPatch {
    /// Round-trip time; sets the one-way delay to half of it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rtt: Option<Dur>,
    /// One-way delay.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delay: Option<Dur>,
    /// Uniform ± jitter.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub jitter: Option<Dur>,
    /// Bottleneck rate.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate: Option<Rate>,
    /// Queue bound in bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queue: Option<Size>,
    /// Queue bound in packets.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queue_packets: Option<u64>,
    /// Bernoulli loss probability (0 turns loss off).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub loss: Option<Prob>,
    /// Gilbert–Elliott loss.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub loss_ge: Option<GePatch>,
    /// Periodic loss: every n-th packet.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub loss_every: Option<u64>,
    /// Reordering probability.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reorder: Option<Prob>,
    /// Extra delay of a reordered packet.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reorder_gap: Option<Dur>,
    /// Duplication probability.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duplicate: Option<Prob>,
    /// Number of Pareto on/off cross-traffic sources.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cross_sources: Option<u32>,
    /// Rate of one cross-traffic source while on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cross_rate: Option<Rate>,
    /// Pareto shape of on/off periods.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cross_shape: Option<f64>,
    /// Mean on period.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cross_on: Option<Dur>,
    /// Mean off period.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cross_off: Option<Dur>,
    /// Cross-traffic packet size.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cross_packet: Option<Size>,
}

impl DirPatch {
    /// Applies the set fields to `p` (later fields win: `delay` over `rtt`).
    pub fn apply(&self, p: &mut DirParams) {
        if let Some(Dur(r)) = self.rtt {
            p.delay = r / 2.0;
        }
        if let Some(Dur(d)) = self.delay {
            p.delay = d;
        }
        if let Some(Dur(j)) = self.jitter {
            p.jitter = j;
        }
        if let Some(Rate(r)) = self.rate {
            p.rate = Some(r);
        }
        if let Some(Size(b)) = self.queue {
            p.queue = QueueLimit::Bytes(b);
        }
        if let Some(n) = self.queue_packets {
            p.queue = QueueLimit::Packets(n);
        }
        if let Some(Prob(l)) = self.loss {
            p.loss = if l == 0.0 {
                LossModel::None
            } else {
                LossModel::Bernoulli { p: l }
            };
        }
        if let Some(g) = self.loss_ge {
            p.loss = LossModel::GilbertElliott {
                p: g.p.0,
                r: g.r.0,
                h: g.h.0,
                k: g.k.0,
            };
        }
        if let Some(n) = self.loss_every {
            p.loss = LossModel::Periodic { n };
        }
        if let Some(Prob(r)) = self.reorder {
            p.reorder = r;
            if p.reorder_gap == 0.0 {
                p.reorder_gap = 1e-3;
            }
        }
        if let Some(Dur(g)) = self.reorder_gap {
            p.reorder_gap = g;
        }
        if let Some(Prob(d)) = self.duplicate {
            p.duplicate = d;
        }
        let c = &mut p.cross;
        if let Some(n) = self.cross_sources {
            c.sources = n;
        }
        if let Some(Rate(r)) = self.cross_rate {
            c.rate = r;
        }
        if let Some(s) = self.cross_shape {
            c.shape = s;
        }
        if let Some(Dur(d)) = self.cross_on {
            c.mean_on = d;
        }
        if let Some(Dur(d)) = self.cross_off {
            c.mean_off = d;
        }
        if let Some(Size(s)) = self.cross_packet {
            c.packet = s as u32;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patch_from_toml_applies() {
        let patch: DirPatch =
            toml::from_str("rtt = \"100ms\"\nrate = \"1gbit\"\nloss = \"0.01%\"\nqueue = \"1M\"\ncross_sources = 3")
                .unwrap();
        let mut p = DirParams::default();
        patch.apply(&mut p);
        assert_eq!(p.delay, 0.05);
        assert_eq!(p.rate, Some(125e6));
        assert_eq!(p.loss, LossModel::Bernoulli { p: 1e-4 });
        assert_eq!(p.queue, QueueLimit::Bytes(1 << 20));
        assert_eq!(p.cross.sources, 3);
        p.validate("test").unwrap();
    }

    #[test]
    fn bad_values_are_rejected() {
        assert!(toml::from_str::<DirPatch>("rate = \"fast\"").is_err());
        assert!(toml::from_str::<DirPatch>("bogus = 1").is_err());
        let p = DirParams {
            loss: LossModel::Periodic { n: 0 },
            ..Default::default()
        };
        assert!(p.validate("x").is_err());
    }

    #[test]
    fn patch_roundtrips_json() {
        let patch = DirPatch {
            delay: Some(Dur(0.02)),
            loss: Some(Prob(0.001)),
            ..Default::default()
        };
        let s = serde_json::to_string(&patch).unwrap();
        let back: DirPatch = serde_json::from_str(&s).unwrap();
        let (mut a, mut b) = (DirParams::default(), DirParams::default());
        patch.apply(&mut a);
        back.apply(&mut b);
        assert_eq!(a, b);
    }
}
