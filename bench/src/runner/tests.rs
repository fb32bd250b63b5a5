use super::*;

/// Runs the scenario `text` on loopback (with `/bin/true` as haul) and returns its report.
fn run_scenario(text: &str) -> Report {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("s.toml");
    std::fs::write(&path, text).expect("write");
    let opts = Options {
        reps: None,
        haul: PathBuf::from("/bin/true"),
        netem_prefix: None,
        vars: vec![],
    };
    run(&path, &opts).expect("run")
}

#[test]
fn netem_prefix_selects_prefix_and_state_dir() {
    assert_eq!(netem_state_dir("hfp-"), "/run/haul-netem-hfp");
    let base = netem_base(Path::new("/x/haul"), Some("hfp-"));
    assert_eq!(base, ["/x/haul", "netem", "--state", "/run/haul-netem-hfp"]);
    assert_eq!(netem_base(Path::new("/x/haul"), None), ["/x/haul", "netem"]);
    assert!(check_netem_prefix("bench_2-").is_ok());
    for bad in ["", "-", "a/b", "../x", "a b"] {
        assert!(check_netem_prefix(bad).is_err(), "{bad:?}");
    }
}

#[test]
fn var_overrides_a_scenario_variable_and_unknown_ones_are_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("v.toml");
    std::fs::write(
        &path,
        "name = \"v\"\nrepetitions = 1\nbaseline = \"e\"\nunit = \"n\"\n[vars]\nx = \"1\"\n\n[[contender]]\nname = \"e\"\ncommand = \"echo {x}\"\nmetric = \"regex:(\\\\d+)\"\n",
    )
    .expect("write");
    let opts = |vars: Vec<(String, String)>| Options {
        reps: None,
        haul: PathBuf::from("/bin/true"),
        netem_prefix: None,
        vars,
    };
    let value = |r: Report| r.runs.first().and_then(|r| r.value);
    assert_eq!(value(run(&path, &opts(vec![])).expect("run")), Some(1.0));
    assert_eq!(
        value(run(&path, &opts(vec![("x".into(), "42".into())])).expect("run")),
        Some(42.0)
    );
    let err = run(&path, &opts(vec![("y".into(), "2".into())])).expect_err("unknown variable");
    assert!(err.to_string().contains("no variable \"y\""), "{err}");
}

#[test]
fn record_reads_extra_metrics_from_the_same_run() {
    let report = run_scenario(
        r#"
name = "r"
repetitions = 2
baseline = "j"
[[contender]]
name = "j"
command = "echo '{{\"a\": 1, \"b\": {{\"c\": 7}}}}'"
metric = "json:a"
scale = 10
record = { c = "json:b.c", gone = "json:b.nope" }
[[contender]]
name = "plain"
command = "echo '{{\"a\": 2}}'"
metric = "json:a"
[[contender]]
name = "bad"
command = "echo '{{\"b\": {{\"c\": 5}}}}'"
metric = "json:a"
[contender.record]
c = "json:b.c"
"#,
    );
    assert_eq!(report.runs.len(), 6);
    let j = &report.runs[0];
    assert_eq!(
        (j.contender.as_str(), j.value, j.error.as_deref()),
        ("j", Some(10.0), None),
        "a missing extra does not fail the run"
    );
    let want: std::collections::BTreeMap<String, Option<f64>> =
        [("c".to_owned(), Some(7.0)), ("gone".to_owned(), None)].into();
    assert_eq!(j.extra, want, "extras are not scaled");
    assert_eq!(report.runs[3].extra, want);
    assert_eq!(
        (report.runs[1].value, report.runs[1].extra.len()),
        (Some(2.0), 0)
    );
    let bad = &report.runs[2];
    assert!(
        bad.value.is_none()
            && bad
                .error
                .as_deref()
                .is_some_and(|e| e.contains("JSON has no a")),
        "{bad:?}"
    );
    assert_eq!(
        bad.extra.get("c"),
        Some(&Some(5.0)),
        "extras are read even when the main metric is missing"
    );
    assert_eq!(report.summary[0].median_extra, want);
    assert_eq!(
        report.summary[2].median_extra.get("c"),
        Some(&None),
        "no successful run, no median"
    );

    let out = tempfile::tempdir().expect("tempdir");
    report.write_files(out.path(), "r").expect("write");
    let raw = std::fs::read_to_string(out.path().join("r.csv")).expect("read");
    let rows: Vec<Vec<&str>> = raw.lines().map(|l| l.split(',').collect()).collect();
    assert_eq!(
        rows[0],
        [
            "scenario",
            "contender",
            "rep",
            "value",
            "unit",
            "elapsed_s",
            "peak_rss_kib",
            "error",
            "c",
            "gone"
        ]
    );
    assert!(rows.iter().all(|r| r.len() == 10), "{raw}");
    assert_eq!(
        (rows[1][1], rows[1][3], rows[1][8], rows[1][9]),
        ("j", "10", "7", "")
    );
    assert_eq!(
        (rows[2][1], rows[2][3], rows[2][8], rows[2][9]),
        ("plain", "2", "", "")
    );
    assert_eq!(
        (rows[3][1], rows[3][3], rows[3][8], rows[3][9]),
        ("bad", "", "5", "")
    );
    let sum = std::fs::read_to_string(out.path().join("r-summary.csv")).expect("read");
    let rows: Vec<Vec<&str>> = sum.lines().map(|l| l.split(',').collect()).collect();
    assert_eq!(
        rows[0][8..],
        ["median_peak_rss_kib", "unit", "median_c", "median_gone"]
    );
    assert_eq!((rows[1][1], rows[1][10], rows[1][11]), ("j", "7", ""));
    assert_eq!((rows[3][1], rows[3][10], rows[3][11]), ("bad", "", ""));
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.path().join("r.json")).expect("read"))
            .expect("json");
    assert_eq!(
        json["runs"][0]["extra"],
        serde_json::json!({"c": 7.0, "gone": null})
    );
    assert!(json["runs"][1].get("extra").is_none());
    let table = report.table();
    let rows: Vec<Vec<&str>> = table
        .lines()
        .skip(1)
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert!(
        rows[0].ends_with(&["ratio", "rss", "MiB", "c", "gone"]),
        "{table}"
    );
    assert!(
        rows[1].ends_with(&["7.000", "-"]) && rows[2].ends_with(&["-", "-"]),
        "{table}"
    );
}

#[test]
fn keep_stdout_writes_each_run_of_that_contender_only() {
    let report = run_scenario(
        r#"
name = "k"
repetitions = 2
baseline = "kept run/1"
[[contender]]
name = "kept run/1"
command = "echo '{{\"a\": {rep}}}'"
metric = "json:a"
keep_stdout = true
[[contender]]
name = "failing"
command = "echo partial; exit 3"
metric = "json:a"
keep_stdout = true
[[contender]]
name = "dropped"
command = "echo '{{\"a\": 1}}'"
metric = "json:a"
"#,
    );
    let out = tempfile::tempdir().expect("tempdir");
    report.write_files(out.path(), "k").expect("write");
    let sub = out.path().join("k-stdout");
    let mut names: Vec<String> = std::fs::read_dir(&sub)
        .expect("stdout dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "failing-rep1.txt",
            "failing-rep2.txt",
            "kept_run_1-rep1.txt",
            "kept_run_1-rep2.txt"
        ]
    );
    let read = |n: &str| std::fs::read_to_string(sub.join(n)).expect("read");
    assert_eq!(read("kept_run_1-rep2.txt"), "{\"a\": 1}\n");
    assert_eq!(
        read("failing-rep1.txt"),
        "partial\n",
        "a failed run's output is kept too"
    );
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.path().join("k.json")).expect("read"))
            .expect("json");
    assert!(
        json["runs"]
            .as_array()
            .expect("runs")
            .iter()
            .all(|r| r.get("stdout").is_none()),
        "stdout stays out of the JSON record"
    );

    // Without any kept output no directory is made.
    let none = tempfile::tempdir().expect("tempdir");
    let mut report = report;
    report.runs.iter_mut().for_each(|r| r.stdout = None);
    report.write_files(none.path(), "k").expect("write");
    assert!(!none.path().join("k-stdout").exists());
}
