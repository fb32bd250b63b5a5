//! Results of a run: raw samples, per-contender summaries, the table, and JSON / CSV files.

use crate::scenario::{Scenario, Topology};
use crate::stats::{ratio, spread, Spread};
use serde::Serialize;
use std::collections::BTreeMap;
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
    /// The contender's `record` values, unscaled; `None` when missing from this run. Empty (and
    /// left out of the JSON) for a contender without `record`.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: BTreeMap<String, Option<f64>>,
    /// The command's stdout, for a contender with `keep_stdout` (whether or not the run
    /// succeeded); written by [`Report::write_files`], not part of the JSON record.
    #[serde(skip)]
    pub stdout: Option<String>,
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
    /// Per `record` name, the median of its values over the successful runs that have one.
    /// Empty (and left out of the JSON) for a contender without `record`.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub median_extra: BTreeMap<String, Option<f64>>,
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
    pub fn new(
        s: &Scenario,
        topology: &Topology,
        reps: u32,
        started_at: String,
        haul: &Path,
        runs: Vec<RunRecord>,
    ) -> Report {
        let names: Vec<String> = s.contenders.iter().map(|c| c.name.clone()).collect();
        let mut summary = summarize(&names, &s.baseline, &runs);
        // A contender's record names appear in its summary even when it has no runs (--reps 0).
        for (sum, c) in summary.iter_mut().zip(&s.contenders) {
            for key in c.record.keys() {
                sum.median_extra.entry(key.clone()).or_insert(None);
            }
        }
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
            summary,
            runs,
        }
    }

    /// The `record` names of all contenders, sorted (the extra columns of tables and CSV files).
    pub fn extra_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .summary
            .iter()
            .flat_map(|s| s.median_extra.keys())
            .chain(self.runs.iter().flat_map(|r| r.extra.keys()))
            .cloned()
            .collect();
        names.sort();
        names.dedup();
        names
    }

    /// The human-readable results table; `record` medians follow the fixed columns.
    pub fn table(&self) -> String {
        let extra = self.extra_names();
        let mut t = format!(
            "{} ({}): {} repetitions, alternating; ratio = median / median of {}\n",
            self.scenario, self.topology, self.repetitions, self.baseline
        );
        let unit = if self.unit.is_empty() {
            String::new()
        } else {
            format!(" ({})", self.unit)
        };
        let mut header = vec![
            "contender".to_owned(),
            "ok".into(),
            format!("median{unit}"),
            "min – max".into(),
            "ratio".into(),
            "rss MiB".into(),
        ];
        header.extend(extra.iter().cloned());
        let mut rows = vec![header];
        for s in &self.summary {
            let (median, range) = match s.value {
                Some(v) => (
                    fmt_num(v.median),
                    format!("{} – {}", fmt_num(v.min), fmt_num(v.max)),
                ),
                None => ("-".into(), "-".into()),
            };
            let ratio = s.ratio.map_or("-".into(), |r| format!("{r:.3}"));
            let rss = s
                .median_peak_rss_kib
                .map_or("-".into(), |k| format!("{:.1}", k / 1024.0));
            let mut row = vec![
                s.contender.clone(),
                format!("{}/{}", s.ok, s.ok + s.failed),
                median,
                range,
                ratio,
                rss,
            ];
            row.extend(extra.iter().map(|k| {
                s.median_extra
                    .get(k)
                    .copied()
                    .flatten()
                    .map_or("-".into(), fmt_num)
            }));
            rows.push(row);
        }
        let mut widths = vec![0usize; rows[0].len()];
        for row in &rows {
            for (w, cell) in widths.iter_mut().zip(row) {
                *w = (*w).max(cell.chars().count());
            }
        }
        for row in &rows {
            let cells: Vec<String> = row
                .iter()
                .zip(&widths)
                .enumerate()
                .map(|(i, (c, &w))| {
                    if i == 0 {
                        format!("{c:<w$}")
                    } else {
                        format!("{c:>w$}")
                    }
                })
                .collect();
            let _ = writeln!(t, "{}", cells.join("  "));
        }
        t
    }

    /// Writes `<stem>.json`, `<stem>.csv` (raw runs) and `<stem>-summary.csv`; `record` values
    /// are extra columns after the fixed ones, named `<name>` and `median_<name>` respectively.
    pub fn write_files(&self, dir: &Path, stem: &str) -> std::io::Result<()> {
        let json = serde_json::to_string_pretty(self).map_err(std::io::Error::other)?;
        std::fs::write(dir.join(format!("{stem}.json")), json + "\n")?;
        let extra = self.extra_names();
        let opt = |v: Option<f64>| v.map_or(String::new(), |v| v.to_string());
        // Empty when there are no extras, so the lines stay as they were before `record`.
        let cells = |values: &BTreeMap<String, Option<f64>>| -> String {
            extra
                .iter()
                .map(|k| format!(",{}", opt(values.get(k).copied().flatten())))
                .collect()
        };
        let mut raw =
            String::from("scenario,contender,rep,value,unit,elapsed_s,peak_rss_kib,error");
        raw.extend(extra.iter().map(|k| format!(",{}", csv(k))));
        raw.push('\n');
        for r in &self.runs {
            let value = opt(r.value);
            let error = r.error.as_deref().unwrap_or("");
            let _ = writeln!(
                raw,
                "{},{},{},{value},{},{},{},{}{}",
                csv(&self.scenario),
                csv(&r.contender),
                r.rep,
                csv(&self.unit),
                r.elapsed_s,
                r.peak_rss_kib,
                csv(error),
                cells(&r.extra)
            );
        }
        std::fs::write(dir.join(format!("{stem}.csv")), raw)?;
        let mut sum = String::from(
            "scenario,contender,ok,failed,median,min,max,ratio,median_peak_rss_kib,unit",
        );
        sum.extend(
            extra
                .iter()
                .map(|k| format!(",{}", csv(&format!("median_{k}")))),
        );
        sum.push('\n');
        for s in &self.summary {
            let _ = writeln!(
                sum,
                "{},{},{},{},{},{},{},{},{},{}{}",
                csv(&self.scenario),
                csv(&s.contender),
                s.ok,
                s.failed,
                opt(s.value.map(|v| v.median)),
                opt(s.value.map(|v| v.min)),
                opt(s.value.map(|v| v.max)),
                opt(s.ratio),
                opt(s.median_peak_rss_kib),
                csv(&self.unit),
                cells(&s.median_extra)
            );
        }
        std::fs::write(dir.join(format!("{stem}-summary.csv")), sum)?;
        self.write_stdout(dir, stem)
    }

    /// Writes the kept stdout of each run to `<stem>-stdout/<contender>-rep<N>.txt` (reps from
    /// 1, as the progress lines count them; characters other than `[A-Za-z0-9._-]` in the
    /// contender's name become `_`). Nothing is created when no run kept its stdout.
    fn write_stdout(&self, dir: &Path, stem: &str) -> std::io::Result<()> {
        let kept: Vec<&RunRecord> = self.runs.iter().filter(|r| r.stdout.is_some()).collect();
        if kept.is_empty() {
            return Ok(());
        }
        let sub = dir.join(format!("{stem}-stdout"));
        std::fs::create_dir_all(&sub)?;
        for r in kept {
            let name: String = r
                .contender
                .chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() || "._-".contains(c) {
                        c
                    } else {
                        '_'
                    }
                })
                .collect();
            std::fs::write(
                sub.join(format!("{name}-rep{}.txt", r.rep + 1)),
                r.stdout.as_deref().unwrap_or_default(),
            )?;
        }
        Ok(())
    }
}

/// Per-contender statistics, in `names` order, with ratios to `baseline`.
pub fn summarize(names: &[String], baseline: &str, runs: &[RunRecord]) -> Vec<Summary> {
    let mut out: Vec<Summary> = names
        .iter()
        .map(|name| {
            let mine: Vec<&RunRecord> = runs.iter().filter(|r| &r.contender == name).collect();
            let values: Vec<f64> = mine.iter().filter_map(|r| r.value).collect();
            let rss: Vec<f64> = mine
                .iter()
                .filter(|r| r.value.is_some())
                .map(|r| r.peak_rss_kib as f64)
                .collect();
            let mut median_extra = BTreeMap::new();
            for key in mine.iter().flat_map(|r| r.extra.keys()) {
                if !median_extra.contains_key(key) {
                    let vals: Vec<f64> = mine
                        .iter()
                        .filter(|r| r.value.is_some())
                        .filter_map(|r| r.extra.get(key).copied().flatten())
                        .collect();
                    median_extra.insert(key.clone(), spread(&vals).map(|s| s.median));
                }
            }
            Summary {
                contender: name.clone(),
                ok: values.len(),
                failed: mine.len() - values.len(),
                value: spread(&values),
                ratio: None,
                median_peak_rss_kib: spread(&rss).map(|s| s.median),
                median_extra,
            }
        })
        .collect();
    let base = out
        .iter()
        .find(|s| s.contender == baseline)
        .and_then(|s| s.value)
        .map(|v| v.median);
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
    let mag = if v == 0.0 {
        0
    } else {
        v.abs().log10().floor() as i32
    };
    if (-3..6).contains(&mag) {
        format!("{:.*}", (3 - mag).max(0) as usize, v)
    } else {
        format!("{v:.3e}")
    }
}

#[cfg(test)]
mod tests;
