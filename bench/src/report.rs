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
mod tests {
    use super::*;

    fn run(c: &str, rep: u32, value: Option<f64>) -> RunRecord {
        RunRecord {
            contender: c.into(),
            rep,
            value,
            elapsed_s: 1.0,
            peak_rss_kib: 2048,
            error: value.is_none().then(|| "boom".into()),
            extra: BTreeMap::new(),
            stdout: None,
        }
    }

    #[test]
    fn summaries_ratio_to_baseline_and_count_failures() {
        let runs = vec![
            run("a", 0, Some(1.0)),
            run("b", 0, Some(3.0)),
            run("a", 1, Some(3.0)),
            run("b", 1, None),
            run("a", 2, Some(2.0)),
            run("b", 2, Some(5.0)),
        ];
        let s = summarize(&["a".into(), "b".into()], "a", &runs);
        assert_eq!(s[0].ratio, Some(1.0));
        assert_eq!(s[1].value.map(|v| v.median), Some(4.0));
        assert_eq!(s[1].ratio, Some(2.0));
        assert_eq!((s[1].ok, s[1].failed), (2, 1));
        assert_eq!(s[1].median_peak_rss_kib, Some(2048.0));
    }

    #[test]
    fn no_ratio_without_baseline_values() {
        let s = summarize(
            &["a".into(), "b".into()],
            "a",
            &[run("a", 0, None), run("b", 0, Some(1.0))],
        );
        assert_eq!(s[1].ratio, None);
        assert!(s[0].value.is_none());
    }

    /// A fixed two-contender report (one failed run) for pinning the output format.
    fn legacy_report() -> Report {
        let runs = vec![
            run("a", 0, Some(9.41234)),
            run("b,x", 0, Some(2.5e9)),
            run("a", 1, Some(1.5)),
            run("b,x", 1, None),
        ];
        let summary = summarize(&["a".into(), "b,x".into()], "a", &runs);
        Report {
            scenario: "s".into(),
            description: "d".into(),
            topology: "loopback".into(),
            unit: "Gbit/s".into(),
            baseline: "a".into(),
            repetitions: 2,
            started_at: "2026-01-01T00:00:00Z".into(),
            haul: "/bin/haul".into(),
            runs,
            summary,
        }
    }

    /// The files of `r` written to a temp dir: JSON, run CSV, summary CSV.
    fn written(r: &Report) -> [String; 3] {
        let dir = tempfile::tempdir().expect("tempdir");
        r.write_files(dir.path(), "x").expect("write");
        ["x.json", "x.csv", "x-summary.csv"]
            .map(|f| std::fs::read_to_string(dir.path().join(f)).expect("read"))
    }

    #[test]
    fn output_without_record_is_unchanged() {
        // Byte for byte what the runner wrote before `record` existed (other tooling parses it).
        let r = legacy_report();
        let [json, raw, sum] = written(&r);
        assert_eq!(json, LEGACY_JSON);
        assert_eq!(raw, LEGACY_CSV);
        assert_eq!(sum, LEGACY_SUMMARY);
        assert_eq!(r.table(), LEGACY_TABLE);
        assert!(r.extra_names().is_empty());
    }

    #[test]
    fn record_values_become_columns_and_medians() {
        let mut r = legacy_report();
        let ex = |pairs: &[(&str, Option<f64>)]| {
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), *v))
                .collect::<BTreeMap<_, _>>()
        };
        r.runs[0].extra = ex(&[("retx", Some(3.0)), ("cpu", None)]);
        r.runs[2].extra = ex(&[("retx", Some(5.0)), ("cpu", Some(40.0))]);
        r.runs[1].extra = ex(&[("zz", Some(1.0))]);
        r.runs[3].extra = ex(&[("zz", Some(100.0))]); // failed run: kept in the run, not in the median
        let names: Vec<String> = r.summary.iter().map(|s| s.contender.clone()).collect();
        r.summary = summarize(&names, "a", &r.runs);
        assert_eq!(
            r.summary[0].median_extra,
            ex(&[("cpu", Some(40.0)), ("retx", Some(4.0))])
        );
        assert_eq!(r.summary[1].median_extra, ex(&[("zz", Some(1.0))]));
        assert_eq!(r.extra_names(), ["cpu", "retx", "zz"]);
        let [json, raw, sum] = written(&r);
        let lines: Vec<&str> = raw.lines().collect();
        assert_eq!(
            lines[0],
            "scenario,contender,rep,value,unit,elapsed_s,peak_rss_kib,error,cpu,retx,zz"
        );
        assert_eq!(lines[1], "s,a,0,9.41234,Gbit/s,1,2048,,,3,");
        assert_eq!(lines[2], "s,\"b,x\",0,2500000000,Gbit/s,1,2048,,,,1");
        assert_eq!(lines[4], "s,\"b,x\",1,,Gbit/s,1,2048,boom,,,100");
        let lines: Vec<&str> = sum.lines().collect();
        assert_eq!(lines[0], "scenario,contender,ok,failed,median,min,max,ratio,median_peak_rss_kib,unit,median_cpu,median_retx,median_zz");
        assert_eq!(lines[1], "s,a,2,0,5.45617,1.5,9.41234,1,2048,Gbit/s,40,4,");
        assert_eq!(
            lines[2],
            "s,\"b,x\",1,1,2500000000,2500000000,2500000000,458196867.033102,2048,Gbit/s,,,1"
        );
        let doc: serde_json::Value = serde_json::from_str(&json).expect("json");
        assert_eq!(
            doc["runs"][0]["extra"],
            serde_json::json!({"cpu": null, "retx": 3.0})
        );
        assert_eq!(
            doc["summary"][0]["median_extra"],
            serde_json::json!({"cpu": 40.0, "retx": 4.0})
        );
        let table = r.table();
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines[1], "contender   ok  median (Gbit/s)          min – max          ratio  rss MiB    cpu   retx     zz");
        assert_eq!(lines[2], "a          2/2            5.456      1.500 – 9.412          1.000      2.0  40.00  4.000      -");
        assert_eq!(lines[3], "b,x        1/2          2.500e9  2.500e9 – 2.500e9  458196867.033      2.0      -      -  1.000");
    }

    #[test]
    fn csv_quoting_and_number_format() {
        assert_eq!(csv("plain"), "plain");
        assert_eq!(csv("a,\"b\""), "\"a,\"\"b\"\"\"");
        assert_eq!(fmt_num(9.41234), "9.412");
        assert_eq!(fmt_num(123.456), "123.5");
        assert_eq!(fmt_num(2.5e9), "2.500e9");
    }

    /// The outputs of [`legacy_report`] as written before `record` existed.
    const LEGACY_JSON: &str = r#"{
  "scenario": "s",
  "description": "d",
  "topology": "loopback",
  "unit": "Gbit/s",
  "baseline": "a",
  "repetitions": 2,
  "started_at": "2026-01-01T00:00:00Z",
  "haul": "/bin/haul",
  "runs": [
    {
      "contender": "a",
      "rep": 0,
      "value": 9.41234,
      "elapsed_s": 1.0,
      "peak_rss_kib": 2048,
      "error": null
    },
    {
      "contender": "b,x",
      "rep": 0,
      "value": 2500000000.0,
      "elapsed_s": 1.0,
      "peak_rss_kib": 2048,
      "error": null
    },
    {
      "contender": "a",
      "rep": 1,
      "value": 1.5,
      "elapsed_s": 1.0,
      "peak_rss_kib": 2048,
      "error": null
    },
    {
      "contender": "b,x",
      "rep": 1,
      "value": null,
      "elapsed_s": 1.0,
      "peak_rss_kib": 2048,
      "error": "boom"
    }
  ],
  "summary": [
    {
      "contender": "a",
      "ok": 2,
      "failed": 0,
      "value": {
        "median": 5.45617,
        "min": 1.5,
        "max": 9.41234
      },
      "ratio": 1.0,
      "median_peak_rss_kib": 2048.0
    },
    {
      "contender": "b,x",
      "ok": 1,
      "failed": 1,
      "value": {
        "median": 2500000000.0,
        "min": 2500000000.0,
        "max": 2500000000.0
      },
      "ratio": 458196867.033102,
      "median_peak_rss_kib": 2048.0
    }
  ]
}
"#;
    const LEGACY_CSV: &str = r#"scenario,contender,rep,value,unit,elapsed_s,peak_rss_kib,error
s,a,0,9.41234,Gbit/s,1,2048,
s,"b,x",0,2500000000,Gbit/s,1,2048,
s,a,1,1.5,Gbit/s,1,2048,
s,"b,x",1,,Gbit/s,1,2048,boom
"#;
    const LEGACY_SUMMARY: &str = r#"scenario,contender,ok,failed,median,min,max,ratio,median_peak_rss_kib,unit
s,a,2,0,5.45617,1.5,9.41234,1,2048,Gbit/s
s,"b,x",1,1,2500000000,2500000000,2500000000,458196867.033102,2048,Gbit/s
"#;
    const LEGACY_TABLE: &str = r#"s (loopback): 2 repetitions, alternating; ratio = median / median of a
contender   ok  median (Gbit/s)          min – max          ratio  rss MiB
a          2/2            5.456      1.500 – 9.412          1.000      2.0
b,x        1/2          2.500e9  2.500e9 – 2.500e9  458196867.033      2.0
"#;
}
