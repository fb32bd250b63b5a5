//! Scenario files: the topology, servers, contenders and metrics of one benchmark, as TOML data.

use crate::metric::Metric;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::Path;

/// The default number of repetitions of each contender.
const DEFAULT_REPETITIONS: u32 = 5;

/// A scenario file, as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Short name; also the stem of the result files.
    pub name: String,
    /// One or two sentences on what is compared and why.
    #[serde(default)]
    pub description: String,
    /// `"loopback"` or `{ pair = "<haul netem up --pair arguments>" }`.
    #[serde(default)]
    pub topology: TopologySpec,
    /// Times each contender runs (A B A B ...).
    #[serde(default = "default_repetitions")]
    pub repetitions: u32,
    /// The contender whose median the others are divided by.
    pub baseline: String,
    /// Label of the (scaled) metric values, e.g. `Gbit/s`.
    #[serde(default)]
    pub unit: String,
    /// User variables for templates; their values may use the built-in variables.
    #[serde(default)]
    pub vars: BTreeMap<String, String>,
    /// Background servers, started before the first repetition.
    #[serde(default)]
    pub setup: Vec<Setup>,
    /// Commands run once after the last repetition.
    #[serde(default)]
    pub teardown: Vec<Step>,
    /// The commands compared.
    #[serde(rename = "contender", default)]
    pub contenders: Vec<Contender>,
}

fn default_repetitions() -> u32 {
    DEFAULT_REPETITIONS
}

/// The topology as written: a name or a netem pair.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(untagged)]
pub enum TopologySpec {
    /// Only `"loopback"` is accepted.
    Named(String),
    /// Two namespaces joined by an emulated link.
    Pair {
        /// Arguments to `haul netem up --pair`, e.g. `--rtt 100ms --rate 1gbit`.
        pair: String,
    },
}

impl Default for TopologySpec {
    fn default() -> Self {
        TopologySpec::Named("loopback".into())
    }
}

/// Where commands run.
#[derive(Debug, Clone, PartialEq)]
pub enum Topology {
    /// Everything on this host, `{addr_a}` = `{addr_b}` = 127.0.0.1.
    Loopback,
    /// `haul netem up --pair <args>`; commands run in host `a` or `b`.
    Pair(Vec<String>),
}

/// A background server.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Setup {
    /// Label used in logs (`{tmp}/setup-<name>.log`).
    pub name: String,
    /// Netem host to run on (ignored on loopback; default `b`).
    #[serde(default = "host_b")]
    pub host: String,
    /// Shell command (template).
    pub command: String,
    /// Wait until a TCP connect to `addr:port` (template) succeeds from the same host.
    pub wait_tcp: Option<String>,
    /// Seconds to wait for readiness before failing.
    #[serde(default = "default_ready_timeout")]
    pub ready_timeout_s: f64,
}

fn host_b() -> String {
    "b".into()
}

fn host_a() -> String {
    "a".into()
}

fn default_ready_timeout() -> f64 {
    10.0
}

/// A one-shot command.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Step {
    /// Netem host to run on (ignored on loopback; default `a`).
    #[serde(default = "host_a")]
    pub host: String,
    /// Shell command (template).
    pub command: String,
}

/// One of the commands compared.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Contender {
    /// Name shown in tables, plots and files.
    pub name: String,
    /// Netem host to run on (ignored on loopback; default `a`).
    #[serde(default = "host_a")]
    pub host: String,
    /// Shell command (template), run with `sh -c`.
    pub command: String,
    /// Shell command (template) run before each repetition, untimed.
    pub before: Option<String>,
    /// How to read the result: `json:<path>`, `regex:<pattern>`, `elapsed` or `peak_rss`.
    pub metric: String,
    /// Factor applied to the raw metric (e.g. `1e-9` for bit/s → Gbit/s).
    #[serde(default = "one")]
    pub scale: f64,
    /// Bytes moved per run (for `elapsed`); an integer or a template such as `"{bytes}"`.
    pub bytes: Option<toml::Value>,
    /// Seconds before a run is killed and counted as failed.
    #[serde(default = "default_timeout")]
    pub timeout_s: f64,
    /// Extra metrics read from the same run, name → spec in the `metric` syntax (unscaled); a
    /// missing extra value is recorded as missing and does not fail the run.
    #[serde(default)]
    pub record: BTreeMap<String, String>,
    /// Keep each run's stdout next to the results (`<stem>-stdout/<contender>-rep<N>.txt`), so
    /// that a slow run's own report (e.g. `haul cp --json`'s per-interval samples and tuning
    /// steps) can be read after the fact.
    #[serde(default)]
    pub keep_stdout: bool,
}

/// The parsed metrics of one contender.
#[derive(Debug, Clone)]
pub struct Metrics {
    /// The main metric (`metric`), which decides whether a run succeeded.
    pub main: Metric,
    /// The extra metrics (`record`), sorted by name.
    pub record: Vec<(String, Metric)>,
}

/// Column names of the per-run CSV, which a `record` name must not repeat (this also keeps
/// `median_<name>` distinct from the summary's `median_peak_rss_kib`).
const RESERVED_RECORD_NAMES: [&str; 8] = [
    "scenario",
    "contender",
    "rep",
    "value",
    "unit",
    "elapsed_s",
    "peak_rss_kib",
    "error",
];

fn one() -> f64 {
    1.0
}

fn default_timeout() -> f64 {
    300.0
}

/// Why a scenario file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    /// The file cannot be read.
    #[error("scenario {path}: {source}")]
    Read {
        /// File path.
        path: String,
        /// I/O error.
        source: std::io::Error,
    },
    /// The file is not valid scenario TOML.
    #[error("scenario {path}: {source}")]
    Parse {
        /// File path.
        path: String,
        /// TOML error (with line and column).
        source: toml::de::Error,
    },
    /// The scenario is well-formed but inconsistent.
    #[error("scenario {name}: {reason}")]
    Invalid {
        /// Scenario name.
        name: String,
        /// What is wrong.
        reason: String,
    },
}

impl Scenario {
    /// Reads and validates a scenario file.
    pub fn load(path: &Path) -> Result<Scenario, ScenarioError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| ScenarioError::Read {
            path: shown.clone(),
            source,
        })?;
        let s: Scenario = toml::from_str(&text).map_err(|source| ScenarioError::Parse {
            path: shown,
            source,
        })?;
        s.validate()?;
        Ok(s)
    }

    /// Checks names, metrics and the topology; returns the parsed metrics of each contender.
    pub fn validate(&self) -> Result<Vec<Metrics>, ScenarioError> {
        let bad = |reason: String| ScenarioError::Invalid {
            name: self.name.clone(),
            reason,
        };
        if self.name.is_empty()
            || !self
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            return Err(bad(format!(
                "name {:?} must be non-empty [A-Za-z0-9_-]",
                self.name
            )));
        }
        if self.repetitions == 0 {
            return Err(bad("repetitions must be at least 1".into()));
        }
        if self.contenders.is_empty() {
            return Err(bad("no [[contender]] entries".into()));
        }
        for (i, c) in self.contenders.iter().enumerate() {
            if self.contenders[..i].iter().any(|o| o.name == c.name) {
                return Err(bad(format!("contender {:?} appears twice", c.name)));
            }
            if !(c.scale.is_finite() && c.timeout_s > 0.0) {
                return Err(bad(format!(
                    "contender {:?}: scale must be finite and timeout_s positive",
                    c.name
                )));
            }
            for key in c.record.keys() {
                if key.is_empty()
                    || !key
                        .chars()
                        .all(|ch| ch.is_ascii_alphanumeric() || ch == '_')
                {
                    return Err(bad(format!(
                        "contender {:?}: record name {key:?} must be non-empty [A-Za-z0-9_]",
                        c.name
                    )));
                }
                if RESERVED_RECORD_NAMES.contains(&key.as_str()) {
                    return Err(bad(format!(
                        "contender {:?}: record name {key:?} is taken by a result column ({})",
                        c.name,
                        RESERVED_RECORD_NAMES.join(", ")
                    )));
                }
            }
        }
        if !self.contenders.iter().any(|c| c.name == self.baseline) {
            return Err(bad(format!(
                "baseline {:?} is not a contender",
                self.baseline
            )));
        }
        self.topology().map_err(bad)?;
        self.contenders
            .iter()
            .map(|c| {
                let main = Metric::parse(&c.metric)
                    .map_err(|e| bad(format!("contender {:?}: {e}", c.name)))?;
                let record = c
                    .record
                    .iter()
                    .map(|(key, spec)| {
                        Metric::parse(spec).map(|m| (key.clone(), m)).map_err(|e| {
                            bad(format!("contender {:?}: record {key:?}: {e}", c.name))
                        })
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                Ok(Metrics { main, record })
            })
            .collect()
    }

    /// The topology, checked.
    pub fn topology(&self) -> Result<Topology, String> {
        match &self.topology {
            TopologySpec::Named(n) if n == "loopback" => Ok(Topology::Loopback),
            TopologySpec::Named(n) => Err(format!(
                "unknown topology {n:?} (use \"loopback\" or {{ pair = \"...\" }})"
            )),
            TopologySpec::Pair { pair } => {
                let args: Vec<String> = pair.split_whitespace().map(str::to_owned).collect();
                if args.is_empty() {
                    return Err("topology pair has no arguments".into());
                }
                Ok(Topology::Pair(args))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OK: &str = r#"
        name = "t"
        baseline = "one"
        topology = { pair = "--rtt 100ms --rate 1gbit" }
        [[setup]]
        name = "srv"
        command = "iperf3 -s"
        wait_tcp = "{addr_b}:5201"
        [[contender]]
        name = "one"
        command = "iperf3 -c {addr_b} -J"
        metric = "json:end.sum_received.bits_per_second"
        scale = 1e-9
        [[contender]]
        name = "two"
        command = "true"
        metric = "elapsed"
        bytes = 1000
    "#;

    #[test]
    fn parses_a_full_scenario() {
        let s: Scenario = toml::from_str(OK).expect("parse");
        assert_eq!(s.repetitions, DEFAULT_REPETITIONS);
        assert_eq!(
            s.topology(),
            Ok(Topology::Pair(vec![
                "--rtt".into(),
                "100ms".into(),
                "--rate".into(),
                "1gbit".into()
            ]))
        );
        assert_eq!(s.setup[0].host, "b");
        assert_eq!(s.contenders[0].host, "a");
        assert_eq!(s.validate().expect("valid").len(), 2);
    }

    #[test]
    fn loopback_is_the_default_and_other_names_are_refused() {
        let s: Scenario = toml::from_str(
            "name='x'\nbaseline='a'\n[[contender]]\nname='a'\ncommand='true'\nmetric='elapsed'",
        )
        .expect("parse");
        assert_eq!(s.topology(), Ok(Topology::Loopback));
        let s: Scenario = toml::from_str("name='x'\nbaseline='a'\ntopology='wan'\n[[contender]]\nname='a'\ncommand='true'\nmetric='elapsed'").expect("parse");
        assert!(s.validate().is_err());
    }

    #[test]
    fn inconsistent_scenarios_are_refused() {
        let missing_baseline = OK.replace("baseline = \"one\"", "baseline = \"three\"");
        let e = toml::from_str::<Scenario>(&missing_baseline)
            .expect("parse")
            .validate()
            .expect_err("invalid");
        assert!(e.to_string().contains("three"), "{e}");
        let bad_metric = OK.replace("metric = \"elapsed\"", "metric = \"fast\"");
        assert!(toml::from_str::<Scenario>(&bad_metric)
            .expect("parse")
            .validate()
            .is_err());
        let dup = OK.replace("name = \"two\"", "name = \"one\"");
        assert!(toml::from_str::<Scenario>(&dup)
            .expect("parse")
            .validate()
            .is_err());
        assert!(toml::from_str::<Scenario>(&OK.replace("scale = 1e-9", "scael = 1")).is_err());
    }

    #[test]
    fn record_parses_inline_and_as_a_subtable() {
        let s: Scenario = toml::from_str(OK).expect("parse");
        assert!(s.contenders.iter().all(|c| c.record.is_empty()));
        assert!(s
            .validate()
            .expect("valid")
            .iter()
            .all(|m| m.record.is_empty()));
        let inline = OK.replace("scale = 1e-9", "scale = 1e-9\nrecord = { retransmits = \"json:end.streams.0.sender.retransmits\", cpu = 'regex:cpu (\\d+)' }");
        let s: Scenario = toml::from_str(&inline).expect("parse");
        let m = s.validate().expect("valid");
        let names: Vec<&str> = m[0].record.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(names, ["cpu", "retransmits"]);
        assert!(
            matches!(&m[0].record[1].1, Metric::Json(p) if p.join(".") == "end.streams.0.sender.retransmits")
        );
        assert!(matches!(&m[0].record[0].1, Metric::Regex(re) if re.as_str() == r"cpu (\d+)"));
        assert!(m[1].record.is_empty());
        let table = format!("{OK}\n[contender.record]\nrss = \"peak_rss\"\nt = \"elapsed\"\n");
        let s: Scenario = toml::from_str(&table).expect("parse");
        assert_eq!(
            s.contenders[1].record.keys().collect::<Vec<_>>(),
            ["rss", "t"]
        );
        let m = s.validate().expect("valid");
        assert!(
            matches!(m[1].record.as_slice(), [(a, Metric::PeakRss), (b, Metric::Elapsed)] if a == "rss" && b == "t")
        );
        assert!(
            toml::from_str::<Scenario>(&format!("{OK}\n[contender.record]\nn = 3\n")).is_err(),
            "a spec must be a string"
        );
    }

    #[test]
    fn bad_record_specs_and_names_are_refused() {
        let with = |record: &str| {
            let text = format!("{OK}\n[contender.record]\n{record}\n");
            toml::from_str::<Scenario>(&text)
                .expect("parse")
                .validate()
                .expect_err("invalid")
                .to_string()
        };
        let e = with("cpu = \"regex:no group\"");
        assert!(
            e.contains("contender \"two\"")
                && e.contains("record \"cpu\"")
                && e.contains("capture group"),
            "{e}"
        );
        let e = with("ok = \"json:a\"\nretx = \"fast\"");
        assert!(
            e.contains("contender \"two\"")
                && e.contains("record \"retx\"")
                && e.contains("\"fast\""),
            "{e}"
        );
        assert!(with("x = \"json:a..b\"").contains("record \"x\""));
        let e = with("\"cpu time\" = \"elapsed\"");
        assert!(
            e.contains("record name \"cpu time\"") && e.contains("[A-Za-z0-9_]"),
            "{e}"
        );
        assert!(with("\"\" = \"elapsed\"").contains("record name \"\""));
        assert!(with("\"a-b\" = \"elapsed\"").contains("record name \"a-b\""));
        let e = with("value = \"elapsed\"");
        assert!(
            e.contains("record name \"value\"") && e.contains("result column"),
            "{e}"
        );
        assert!(with("peak_rss_kib = \"peak_rss\"").contains("record name \"peak_rss_kib\""));
    }
}
