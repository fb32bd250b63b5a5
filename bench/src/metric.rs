//! How a contender's result is read: a JSON path or regex on stdout, elapsed time, or peak RSS.

use regex::Regex;

/// A metric specification that does not parse, or a result that cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum MetricError {
    /// The `metric = "..."` string is malformed.
    #[error("metric {spec:?}: {reason}")]
    Spec {
        /// The specification as written.
        spec: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The command ran but its output does not contain the metric.
    #[error("{0}")]
    Missing(String),
}

/// Where the number comes from.
#[derive(Debug, Clone)]
pub enum Metric {
    /// `json:<dotted.path>`: a number in the JSON document on stdout (array indices are numbers).
    Json(Vec<String>),
    /// `regex:<pattern>`: the first capture group of the last match on stdout.
    Regex(Regex),
    /// `elapsed`: `bytes * 8 / wall-clock seconds`, i.e. bits per second.
    Elapsed,
    /// `peak_rss`: peak resident memory of the command's process tree, KiB.
    PeakRss,
}

/// What one run of a command produced, as far as metrics care.
#[derive(Debug, Clone, Copy)]
pub struct Observed<'a> {
    /// Standard output.
    pub stdout: &'a str,
    /// Wall-clock seconds.
    pub elapsed_s: f64,
    /// Peak RSS of the process tree, KiB.
    pub peak_rss_kib: u64,
    /// Bytes the contender moves (for `elapsed`).
    pub bytes: Option<u64>,
}

impl Metric {
    /// Parses `json:a.b`, `regex:(\d+)`, `elapsed` or `peak_rss`.
    pub fn parse(spec: &str) -> Result<Metric, MetricError> {
        let bad = |reason: String| MetricError::Spec {
            spec: spec.to_owned(),
            reason,
        };
        if let Some(path) = spec.strip_prefix("json:") {
            if path.is_empty() || path.split('.').any(str::is_empty) {
                return Err(bad("empty path component".into()));
            }
            Ok(Metric::Json(path.split('.').map(str::to_owned).collect()))
        } else if let Some(pattern) = spec.strip_prefix("regex:") {
            let re = Regex::new(pattern).map_err(|e| bad(e.to_string()))?;
            if re.captures_len() != 2 {
                return Err(bad(format!(
                    "needs exactly one capture group, has {}",
                    re.captures_len() - 1
                )));
            }
            Ok(Metric::Regex(re))
        } else if spec == "elapsed" {
            Ok(Metric::Elapsed)
        } else if spec == "peak_rss" {
            Ok(Metric::PeakRss)
        } else {
            Err(bad(
                "expected json:<path>, regex:<pattern>, elapsed or peak_rss".into(),
            ))
        }
    }

    /// The raw value (before the contender's `scale`).
    pub fn extract(&self, obs: Observed<'_>) -> Result<f64, MetricError> {
        match self {
            Metric::Json(path) => json_number(obs.stdout, path),
            Metric::Regex(re) => {
                let caps = re.captures_iter(obs.stdout).last().ok_or_else(|| {
                    MetricError::Missing(format!("regex {:?} does not match stdout", re.as_str()))
                })?;
                let text = caps.get(1).map_or("", |m| m.as_str());
                text.trim().parse().map_err(|_| {
                    MetricError::Missing(format!(
                        "regex {:?} captured {text:?}, not a number",
                        re.as_str()
                    ))
                })
            }
            Metric::Elapsed => {
                let bytes = obs.bytes.ok_or_else(|| {
                    MetricError::Missing("metric elapsed needs bytes = N on the contender".into())
                })?;
                if obs.elapsed_s <= 0.0 {
                    return Err(MetricError::Missing("elapsed time is zero".into()));
                }
                Ok(bytes as f64 * 8.0 / obs.elapsed_s)
            }
            Metric::PeakRss => Ok(obs.peak_rss_kib as f64),
        }
    }
}

fn json_number(stdout: &str, path: &[String]) -> Result<f64, MetricError> {
    let doc: serde_json::Value = serde_json::from_str(stdout.trim())
        .map_err(|e| MetricError::Missing(format!("stdout is not one JSON document: {e}")))?;
    let mut node = &doc;
    for (i, key) in path.iter().enumerate() {
        let next = match (node, key.parse::<usize>()) {
            (serde_json::Value::Array(items), Ok(idx)) => items.get(idx),
            _ => node.get(key.as_str()),
        };
        node = next
            .ok_or_else(|| MetricError::Missing(format!("JSON has no {}", path[..=i].join("."))))?;
    }
    node.as_f64().ok_or_else(|| {
        MetricError::Missing(format!("JSON {} is {node}, not a number", path.join(".")))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obs(stdout: &str) -> Observed<'_> {
        Observed {
            stdout,
            elapsed_s: 2.0,
            peak_rss_kib: 4096,
            bytes: Some(1000),
        }
    }

    #[test]
    fn json_paths_with_array_indices() {
        let m = Metric::parse("json:end.streams.1.bps").expect("parse");
        let out = r#"{"end":{"streams":[{"bps":1},{"bps":2.5e9}]}}"#;
        assert_eq!(m.extract(obs(out)).expect("value"), 2.5e9);
        let e = Metric::parse("json:end.nope")
            .expect("parse")
            .extract(obs(out))
            .expect_err("missing");
        assert!(e.to_string().contains("end.nope"), "{e}");
        assert!(Metric::parse("json:a..b").is_err());
    }

    #[test]
    fn regex_takes_last_match() {
        let m = Metric::parse(r"regex:([\d.]+) Gbits/sec").expect("parse");
        let out = "[  5] 0-1 s 9.1 Gbits/sec\n[  5] 0-10 s 9.4 Gbits/sec receiver\n";
        assert_eq!(m.extract(obs(out)).expect("value"), 9.4);
        assert!(m.extract(obs("nothing")).is_err());
        assert!(Metric::parse("regex:no groups").is_err());
        assert!(Metric::parse("regex:(a)(b)").is_err());
    }

    #[test]
    fn elapsed_and_rss() {
        assert_eq!(
            Metric::parse("elapsed")
                .expect("parse")
                .extract(obs(""))
                .expect("value"),
            4000.0
        );
        let no_bytes = Observed {
            bytes: None,
            ..obs("")
        };
        assert!(Metric::parse("elapsed")
            .expect("parse")
            .extract(no_bytes)
            .is_err());
        assert_eq!(
            Metric::parse("peak_rss")
                .expect("parse")
                .extract(obs(""))
                .expect("value"),
            4096.0
        );
        assert!(Metric::parse("speed").is_err());
    }
}
