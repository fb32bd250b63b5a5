//! Results of a run: raw samples, per-contender summaries, the table, and JSON / CSV files.

use crate::scenario::{Scenario, Topology};
use crate::stats::{ratio, spread, Spread};
use serde::Serialize;
use std::fmt::Write as _;
use std::path::Path;

/// One repetition of one contender.
#[derive(Debug, Clone, Serialize)]
pub struct RunRecord {
    /// Contender name.
    pub contender: String,
    /// Repetition index, from 0.
    pub rep: u32,
    /// Scaled metric value; `None` when the run failed.
    pub value: Option<f64>,
    /// Wall-clock seconds.
    pub elapsed_s: f64,
    /// Peak RSS of the command's process tree, KiB.
    pub peak_rss_kib: u64,
    /// Why the run failed.
    pub error: Option<String>,
}

/// Statistics of one contender over all repetitions.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    /// Contender name.
    pub contender: String,
    /// Successful runs.
    pub ok: usize,
    /// Failed runs.
    pub failed: usize,
    /// Median, min and max of the successful values.
    pub value: Option<Spread>,
    /// This contender's median divided by the baseline's.
    pub ratio: Option<f64>,
    /// Median peak RSS of the successful runs, KiB.
    pub median_peak_rss_kib: Option<f64>,
}

/// Everything one run of a scenario produced.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// Scenario name.
    pub scenario: String,
    /// Scenario description.
    pub description: String,
    /// `loopback` or the netem pair arguments.
    pub topology: String,
    /// Label of the values.
    pub unit: String,
    /// Baseline contender.
    pub baseline: String,
    /// Repetitions per contender.
    pub repetitions: u32,
    /// Start time, RFC 3339 UTC.
    pub started_at: String,
    /// The haul binary used.
    pub haul: String,
    /// Every repetition, in the order run.
    pub runs: Vec<RunRecord>,
    /// One entry per contender, in scenario order.
    pub summary: Vec<Summary>,
}

impl Report {
    /// Builds the report and its summaries from the raw runs.
    pub fn new(s: &Scenario, topology: &Topology, reps: u32, started_at: String, haul: &Path, runs: Vec<RunRecord>) -> Report {
        let names: Vec<String> = s.contenders.iter().map(|c| c.name.clone()).collect();
        Report {
            scenario: s.name.clone(),
            description: s.description.clone(),
            topology: match topology {
                Topology::Loopback => "loopback".into(),
                Topology::Pair(args) => args.join(" "),
            },
            unit: s.unit.clone(),
            baseline: s.baseline.clone(),
            repetitions: reps,
            started_at,
            haul: haul.display().to_string(),
            summary: summarize(&names, &s.baseline, &runs),
            runs,
        }
    }

    /// The human-readable results table.
    pub fn table(&self) -> String {
        let mut t = format!(
            "{} ({}): {} repetitions, alternating; ratio = median / median of {}\n",
            self.scenario, self.topology, self.repetitions, self.baseline
        );
        let unit = if self.unit.is_empty() { String::new() } else { format!(" ({})", self.unit) };
        let header = ["contender".to_owned(), "ok".into(), format!("median{unit}"), "min – max".into(), "ratio".into(), "rss MiB".into()];
        let mut rows = vec![header];
        for s in &self.summary {
            let (median, range) = match s.value {
                Some(v) => (fmt_num(v.median), format!("{} – {}", fmt_num(v.min), fmt_num(v.max))),
                None => ("-".into(), "-".into()),
            };
            let ratio = s.ratio.map_or("-".into(), |r| format!("{r:.3}"));
            let rss = s.median_peak_rss_kib.map_or("-".into(), |k| format!("{:.1}", k / 1024.0));
            rows.push([s.contender.clone(), format!("{}/{}", s.ok, s.ok + s.failed), median, range, ratio, rss]);
        }
        let mut widths = [0usize; 6];
        for row in &rows {
            for (w, cell) in widths.iter_mut().zip(row) {
                *w = (*w).max(cell.chars().count());
            }
        }
        for row in &rows {
            let cells: Vec<String> = row
                .iter()
                .zip(widths)
                .enumerate()
                .map(|(i, (c, w))| if i == 0 { format!("{c:<w$}") } else { format!("{c:>w$}") })
                .collect();
            let _ = writeln!(t, "{}", cells.join("  "));
        }
        t
    }

    /// Writes `<stem>.json`, `<stem>.csv` (raw runs) and `<stem>-summary.csv`.
    pub fn write_files(&self, dir: &Path, stem: &str) -> std::io::Result<()> {
        let json = serde_json::to_string_pretty(self).map_err(std::io::Error::other)?;
        std::fs::write(dir.join(format!("{stem}.json")), json + "\n")?;
        let mut raw = String::from("scenario,contender,rep,value,unit,elapsed_s,peak_rss_kib,error\n");
        for r in &self.runs {
            let value = r.value.map_or(String::new(), |v| v.to_string());
            let error = r.error.as_deref().unwrap_or("");
            let _ = writeln!(raw, "{},{},{},{value},{},{},{},{}", csv(&self.scenario), csv(&r.contender), r.rep, csv(&self.unit), r.elapsed_s, r.peak_rss_kib, csv(error));
        }
        std::fs::write(dir.join(format!("{stem}.csv")), raw)?;
        let mut sum = String::from("scenario,contender,ok,failed,median,min,max,ratio,median_peak_rss_kib,unit\n");
        for s in &self.summary {
            let opt = |v: Option<f64>| v.map_or(String::new(), |v| v.to_string());
            let _ = writeln!(
                sum,
                "{},{},{},{},{},{},{},{},{},{}",
                csv(&self.scenario), csv(&s.contender), s.ok, s.failed,
                opt(s.value.map(|v| v.median)), opt(s.value.map(|v| v.min)), opt(s.value.map(|v| v.max)),
                opt(s.ratio), opt(s.median_peak_rss_kib), csv(&self.unit)
            );
        }
        std::fs::write(dir.join(format!("{stem}-summary.csv")), sum)
    }
}

/// Per-contender statistics, in `names` order, with ratios to `baseline`.
pub fn summarize(names: &[String], baseline: &str, runs: &[RunRecord]) -> Vec<Summary> {
    let mut out: Vec<Summary> = names
        .iter()
        .map(|name| {
            let mine: Vec<&RunRecord> = runs.iter().filter(|r| &r.contender == name).collect();
            let values: Vec<f64> = mine.iter().filter_map(|r| r.value).collect();
            let rss: Vec<f64> = mine.iter().filter(|r| r.value.is_some()).map(|r| r.peak_rss_kib as f64).collect();
            Summary {
                contender: name.clone(),
                ok: values.len(),
                failed: mine.len() - values.len(),
                value: spread(&values),
                ratio: None,
                median_peak_rss_kib: spread(&rss).map(|s| s.median),
            }
        })
        .collect();
    let base = out.iter().find(|s| s.contender == baseline).and_then(|s| s.value).map(|v| v.median);
    for s in &mut out {
        s.ratio = match (s.value, base) {
            (Some(v), Some(b)) => ratio(v.median, b),
            _ => None,
        };
    }
    out
}

/// Quotes a CSV field when it needs it.
fn csv(field: &str) -> String {
    if field.contains([',', '"', '\n']) {
        format!("\"{}\"", field.replace('"', "\"\""))
    } else {
        field.to_owned()
    }
}

/// Four significant digits, without exponent for everyday magnitudes.
fn fmt_num(v: f64) -> String {
    let mag = if v == 0.0 { 0 } else { v.abs().log10().floor() as i32 };
    if (-3..6).contains(&mag) {
        format!("{:.*}", (3 - mag).max(0) as usize, v)
    } else {
        format!("{v:.3e}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(c: &str, rep: u32, value: Option<f64>) -> RunRecord {
        RunRecord { contender: c.into(), rep, value, elapsed_s: 1.0, peak_rss_kib: 2048, error: value.is_none().then(|| "boom".into()) }
    }

    #[test]
    fn summaries_ratio_to_baseline_and_count_failures() {
        let runs = vec![run("a", 0, Some(1.0)), run("b", 0, Some(3.0)), run("a", 1, Some(3.0)), run("b", 1, None), run("a", 2, Some(2.0)), run("b", 2, Some(5.0))];
        let s = summarize(&["a".into(), "b".into()], "a", &runs);
        assert_eq!(s[0].ratio, Some(1.0));
        assert_eq!(s[1].value.map(|v| v.median), Some(4.0));
        assert_eq!(s[1].ratio, Some(2.0));
        assert_eq!((s[1].ok, s[1].failed), (2, 1));
        assert_eq!(s[1].median_peak_rss_kib, Some(2048.0));
    }

    #[test]
    fn no_ratio_without_baseline_values() {
        let s = summarize(&["a".into(), "b".into()], "a", &[run("a", 0, None), run("b", 0, Some(1.0))]);
        assert_eq!(s[1].ratio, None);
        assert!(s[0].value.is_none());
    }

    #[test]
    fn csv_quoting_and_number_format() {
        assert_eq!(csv("plain"), "plain");
        assert_eq!(csv("a,\"b\""), "\"a,\"\"b\"\"\"");
        assert_eq!(fmt_num(9.41234), "9.412");
        assert_eq!(fmt_num(123.456), "123.5");
        assert_eq!(fmt_num(2.5e9), "2.500e9");
    }
}
