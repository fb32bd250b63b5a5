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
