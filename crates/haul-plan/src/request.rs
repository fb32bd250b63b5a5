//! The user request r (§1 of 000): what to move, by when, how fast, at what cost, under which
//! requirements, and how much each profit term weighs. Read from a TOML file for repeated jobs
//! ([`Request::from_toml`]); the command line sets or overrides each field.

use serde::Deserialize;

/// A transfer request: the n-tuple r of 000 §1 with the weight vector α.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// Source: a URL or a local path.
    pub src: String,
    /// Destination: a URL or a local path.
    pub dst: String,
    /// Bytes to move, when the user knows it (otherwise the planner's caller lists the source).
    pub size: Option<u64>,
    /// Earliest start, seconds after the request is made.
    pub start_after_s: Option<f64>,
    /// Latest finish, seconds after the request is made.
    pub deadline_s: Option<f64>,
    /// Target rate B, bits per second: routes and transports predicted below it are refused.
    pub target_bps: Option<f64>,
    /// Cost cap C_max in the integer units of the operator's service costs.
    pub cost_cap: Option<u32>,
    /// What every chosen module must satisfy.
    pub require: Requirements,
    /// α: the weights of the profit terms.
    pub weights: TermWeights,
}

/// Requirements r_8.. of 000 §1: a module that fails one is never chosen (its term is 0).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Requirements {
    /// Every byte must arrive (all of haul's transports are reliable; kept for requests that
    /// name it).
    pub reliable: bool,
    /// Data must be encrypted on every network leg.
    pub encrypted: bool,
    /// The share of bytes that may be lost, in [0, 1]. A reliable transport meets any value.
    pub loss_tolerance: f64,
}

impl Default for Requirements {
    fn default() -> Self {
        Requirements {
            reliable: true,
            encrypted: false,
            loss_tolerance: 0.0,
        }
    }
}

/// α for the profit terms the planner computes (Eq. 2.3 of 000).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TermWeights {
    /// Predicted rate over the target (or over the best candidate without a target).
    pub rate: f64,
    /// How much of the transfer fits before the deadline (present only with a deadline).
    pub deadline: f64,
}

impl Default for TermWeights {
    fn default() -> Self {
        TermWeights {
            rate: 1.0,
            deadline: 1.0,
        }
    }
}

/// A request that does not make sense, with the field that is wrong.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RequestError {
    /// The TOML text does not parse, or names a field that does not exist.
    #[error("request file: {0}")]
    Toml(String),
    /// A field's value is out of range or in the wrong unit.
    #[error("request field {field}: {why}")]
    Field {
        /// The field's name as the file and the flags spell it.
        field: &'static str,
        /// What is wrong with it.
        why: String,
    },
}

fn field(field: &'static str, why: impl Into<String>) -> RequestError {
    RequestError::Field {
        field,
        why: why.into(),
    }
}

/// The request file as written: units as text, every field optional.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RequestFile {
    src: Option<String>,
    dst: Option<String>,
    size: Option<String>,
    start_after: Option<String>,
    deadline: Option<String>,
    rate: Option<String>,
    cost_cap: Option<u32>,
    #[serde(default)]
    require: RequireFile,
    #[serde(default)]
    weights: WeightsFile,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RequireFile {
    reliable: Option<bool>,
    encrypted: Option<bool>,
    loss_tolerance: Option<f64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct WeightsFile {
    rate: Option<f64>,
    deadline: Option<f64>,
}

/// One field of a request as text, for [`Request::set`]: what a flag or a file line gives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    /// `size`: bytes, e.g. `1T`.
    Size,
    /// `start_after`: a duration, e.g. `10m`.
    StartAfter,
    /// `deadline`: a duration from the request, e.g. `30m`.
    Deadline,
    /// `rate`: a rate, e.g. `5gbit`.
    Rate,
}

impl Request {
    /// A request to move `src` to `dst` with nothing else asked.
    pub fn new(src: impl Into<String>, dst: impl Into<String>) -> Request {
        Request {
            src: src.into(),
            dst: dst.into(),
            size: None,
            start_after_s: None,
            deadline_s: None,
            target_bps: None,
            cost_cap: None,
            require: Requirements::default(),
            weights: TermWeights::default(),
        }
    }

    /// Reads a request file. `src` and `dst` may be left out when the command line gives them
    /// (`None` here); every other field is optional.
    pub fn from_toml(
        text: &str,
        src: Option<&str>,
        dst: Option<&str>,
    ) -> Result<Request, RequestError> {
        let f: RequestFile = toml::from_str(text)
            .map_err(|e| RequestError::Toml(e.to_string().trim_end().to_string()))?;
        let src = src
            .map(str::to_string)
            .or(f.src)
            .ok_or_else(|| field("src", "missing: give it in the file or on the command line"))?;
        let dst = dst
            .map(str::to_string)
            .or(f.dst)
            .ok_or_else(|| field("dst", "missing: give it in the file or on the command line"))?;
        let mut r = Request::new(src, dst);
        for (k, v) in [
            (Field::Size, f.size),
            (Field::StartAfter, f.start_after),
            (Field::Deadline, f.deadline),
            (Field::Rate, f.rate),
        ] {
            if let Some(v) = v {
                r.set(k, &v)?;
            }
        }
        r.cost_cap = f.cost_cap;
        r.require.reliable = f.require.reliable.unwrap_or(true);
        r.require.encrypted = f.require.encrypted.unwrap_or(false);
        r.require.loss_tolerance = f.require.loss_tolerance.unwrap_or(0.0);
        r.weights.rate = f.weights.rate.unwrap_or(1.0);
        r.weights.deadline = f.weights.deadline.unwrap_or(1.0);
        r.validate()?;
        Ok(r)
    }

    /// Sets one field from its text, in the units of haul's flags.
    pub fn set(&mut self, which: Field, text: &str) -> Result<(), RequestError> {
        match which {
            Field::Size => {
                self.size =
                    Some(haul_units::parse_size(text).map_err(|e| field("size", e.to_string()))?)
            }
            Field::StartAfter => {
                self.start_after_s = Some(
                    haul_units::parse_duration(text)
                        .map_err(|e| field("start_after", e.to_string()))?,
                )
            }
            Field::Deadline => {
                self.deadline_s = Some(
                    haul_units::parse_duration(text)
                        .map_err(|e| field("deadline", e.to_string()))?,
                )
            }
            Field::Rate => {
                let r = haul_units::parse_rate(text).map_err(|e| field("rate", e.to_string()))?;
                self.target_bps = Some(r.bits_per_sec());
            }
        }
        Ok(())
    }

    /// Checks that the fields agree with each other and are in range.
    pub fn validate(&self) -> Result<(), RequestError> {
        if self.src.trim().is_empty() {
            return Err(field("src", "empty"));
        }
        if self.dst.trim().is_empty() {
            return Err(field("dst", "empty"));
        }
        if let Some(d) = self.deadline_s {
            if !(d.is_finite() && d > 0.0) {
                return Err(field("deadline", "must be a positive duration"));
            }
            if d <= self.start_after_s.unwrap_or(0.0) {
                return Err(field(
                    "deadline",
                    format!(
                        "{d} s is not after the earliest start ({} s)",
                        self.start_after_s.unwrap_or(0.0)
                    ),
                ));
            }
        }
        if let Some(s) = self.start_after_s {
            if !(s.is_finite() && s >= 0.0) {
                return Err(field("start_after", "must be a duration of 0 or more"));
            }
        }
        if let Some(b) = self.target_bps {
            if !(b.is_finite() && b > 0.0) {
                return Err(field("rate", "must be a positive rate"));
            }
        }
        let t = self.require.loss_tolerance;
        if !(0.0..=1.0).contains(&t) {
            return Err(field(
                "loss_tolerance",
                format!("{t} is not a share in [0, 1]"),
            ));
        }
        for (name, w) in [
            ("weights.rate", self.weights.rate),
            ("weights.deadline", self.weights.deadline),
        ] {
            if !(w.is_finite() && w >= 0.0) {
                return Err(field(name, format!("{w} is not a weight of 0 or more")));
            }
        }
        Ok(())
    }

    /// The time the transfer may take: deadline minus earliest start, when there is a deadline.
    pub fn window_s(&self) -> Option<f64> {
        self.deadline_s
            .map(|d| d - self.start_after_s.unwrap_or(0.0))
    }
}
