//! Runs a scenario: topology up, servers started, contenders alternated A B A B, everything torn down.

use crate::exec::{self, Background};
use crate::metric::Observed;
use crate::report::{Report, RunRecord};
use crate::scenario::{Contender, Metrics, Scenario, Topology};
use crate::template::{render, Vars};
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Seconds a netem or probe helper command may take.
const HELPER_TIMEOUT: Duration = Duration::from_secs(60);

/// Command-line choices of one run.
#[derive(Debug, Clone)]
pub struct Options {
    /// Overrides the scenario's repetitions.
    pub reps: Option<u32>,
    /// The haul binary (`{haul}`).
    pub haul: PathBuf,
    /// Namespace prefix of the netem pair (`haul netem up/down --prefix`); also selects a state
    /// directory of its own, so two benchmarks with different prefixes do not collide.
    pub netem_prefix: Option<String>,
    /// `--var KEY=VALUE`: replaces the scenario's variable KEY (which must exist).
    pub vars: Vec<(String, String)>,
}

/// The leading arguments of every `haul netem` call: `netem` and, with a prefix, `--state DIR`.
fn netem_base(haul: &Path, prefix: Option<&str>) -> Vec<String> {
    let mut v = vec![haul.display().to_string(), "netem".into()];
    if let Some(p) = prefix {
        v.extend(["--state".into(), netem_state_dir(p)]);
    }
    v
}

/// `/run/haul-netem-<prefix without trailing dashes>`: a sibling of the default state directory
/// (not inside it: `haul netem down` removes its whole state directory).
pub fn netem_state_dir(prefix: &str) -> String {
    format!("/run/haul-netem-{}", prefix.trim_end_matches('-'))
}

/// A prefix is non-empty `[A-Za-z0-9_-]` (it names namespaces and a state directory).
pub fn check_netem_prefix(prefix: &str) -> Result<()> {
    let ok = !prefix.trim_end_matches('-').is_empty()
        && prefix
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-'));
    if !ok {
        bail!("--netem-prefix {prefix:?}: use [A-Za-z0-9_-] with at least one letter or digit");
    }
    Ok(())
}

/// Where and how commands execute.
struct Env {
    topology: Topology,
    /// `haul netem` and its global options.
    netem: Vec<String>,
    vars: Vars,
}

impl Env {
    /// `argv` as run on `host` (directly on loopback, via `haul netem run` on a pair).
    fn on_host(&self, host: &str, argv: Vec<String>) -> Vec<String> {
        match self.topology {
            Topology::Loopback => argv,
            Topology::Pair(_) => {
                let mut v = self.netem.clone();
                v.extend(["run".into(), host.into(), "--".into()]);
                v.extend(argv);
                v
            }
        }
    }

    /// The shell command template `cmd`, rendered, as run on `host`.
    fn shell(&self, host: &str, cmd: &str, vars: &Vars) -> Result<Vec<String>> {
        let rendered = render(cmd, vars)?;
        Ok(self.on_host(host, vec!["sh".into(), "-c".into(), rendered]))
    }
}

/// Runs a helper command and returns its trimmed stdout, failing on a non-zero exit.
fn helper(argv: &[String]) -> Result<String> {
    let out = exec::run(argv, HELPER_TIMEOUT)
        .with_context(|| format!("cannot run {}", argv.join(" ")))?;
    if !out.status.success() {
        bail!(
            "{} failed ({}): {}",
            argv.join(" "),
            out.status,
            out.stderr.trim()
        );
    }
    Ok(out.stdout.trim().to_owned())
}

/// Brings the netem pair down when dropped.
struct NetemPair {
    /// `haul netem [--state DIR] down [--prefix P]`.
    down: Vec<String>,
}

impl Drop for NetemPair {
    fn drop(&mut self) {
        cleanup(&self.down);
    }
}

/// Runs a clean-up command to its end even after a stop signal; a failure is only a warning.
fn cleanup(argv: &[String]) {
    match exec::run_to_end(argv, HELPER_TIMEOUT) {
        Ok(out) if out.status.success() => {}
        Ok(out) => eprintln!(
            "haul-bench: warning: {} failed ({}): {}",
            argv.join(" "),
            out.status,
            out.stderr.trim()
        ),
        Err(e) => eprintln!("haul-bench: warning: cannot run {}: {e}", argv.join(" ")),
    }
}

/// Runs the scenario at `path` and returns its report (not yet written).
pub fn run(path: &Path, opts: &Options) -> Result<Report> {
    let scenario = Scenario::load(path)?;
    let metrics = scenario.validate()?;
    let topology = scenario.topology().map_err(anyhow::Error::msg)?;
    let reps = opts.reps.unwrap_or(scenario.repetitions);
    if let Some(p) = &opts.netem_prefix {
        check_netem_prefix(p)?;
    }
    let uses_haul = matches!(topology, Topology::Pair(_))
        || scenario
            .contenders
            .iter()
            .any(|c| c.command.contains("{haul}"));
    if uses_haul && !opts.haul.is_file() {
        bail!(
            "haul binary not found at {} (build it with `cargo build --release -p haul` or pass --haul PATH)",
            opts.haul.display()
        );
    }
    let tmp = tempfile::Builder::new()
        .prefix("haul-bench-")
        .tempdir()
        .context("cannot create temp dir")?;
    let netem = netem_base(&opts.haul, opts.netem_prefix.as_deref());
    let prefix_args: Vec<String> = opts
        .netem_prefix
        .iter()
        .flat_map(|p| ["--prefix".to_owned(), p.clone()])
        .collect();
    let mut env = Env {
        topology: topology.clone(),
        netem: netem.clone(),
        vars: Vars::new(),
    };
    let haul_s = opts.haul.display().to_string();
    let _pair = match &topology {
        Topology::Loopback => {
            env.vars.insert("addr_a".into(), "127.0.0.1".into());
            env.vars.insert("addr_b".into(), "127.0.0.1".into());
            None
        }
        Topology::Pair(args) => {
            let mut up = netem.clone();
            up.extend(["up".into(), "--pair".into()]);
            up.extend(prefix_args.iter().cloned());
            up.extend(args.iter().cloned());
            eprintln!("haul-bench: {}", up.join(" "));
            helper(&up)?;
            let mut down = netem.clone();
            down.push("down".into());
            down.extend(prefix_args.iter().cloned());
            let pair = NetemPair { down };
            for h in ["a", "b"] {
                let mut addr = netem.clone();
                addr.extend(["addr".into(), h.into()]);
                let addr = helper(&addr)?;
                env.vars.insert(format!("addr_{h}"), addr);
            }
            Some(pair)
        }
    };
    env.vars.insert("haul".into(), haul_s);
    // `haul netem` with this run's state directory, so a contender or setup command can change
    // the running link (`{netem} set a-b --rate 5gbit`) or read its counters.
    env.vars.insert("netem".into(), netem.join(" "));
    env.vars
        .insert("tmp".into(), tmp.path().display().to_string());
    let bench = std::env::current_exe().context("cannot locate haul-bench itself")?;
    env.vars.insert("bench".into(), bench.display().to_string());
    for (k, _) in &opts.vars {
        if !scenario.vars.contains_key(k) {
            bail!(
                "--var {k}: scenario {} has no variable {k:?}",
                scenario.name
            );
        }
    }
    for (k, v) in &scenario.vars {
        if env.vars.contains_key(k) {
            bail!(
                "scenario {}: variable {k:?} shadows a built-in variable",
                scenario.name
            );
        }
        let v = opts
            .vars
            .iter()
            .rev()
            .find(|(o, _)| o == k)
            .map_or(v, |(_, o)| o);
        let value = render(v, &env.vars).with_context(|| format!("variable {k:?}"))?;
        env.vars.insert(k.clone(), value);
    }

    let started_at = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
    let mut servers = Vec::new();
    for s in &scenario.setup {
        let argv = env.shell(&s.host, &s.command, &env.vars)?;
        let log = tmp.path().join(format!("setup-{}.log", s.name));
        eprintln!("haul-bench: setup {}: {}", s.name, argv.join(" "));
        let mut bg = Background::spawn(&argv, &log)
            .with_context(|| format!("cannot start setup {:?}", s.name))?;
        if let Some(addr) = &s.wait_tcp {
            let addr = render(addr, &env.vars)?;
            wait_ready(
                &env,
                &bench,
                &s.host,
                &addr,
                s.ready_timeout_s,
                &mut bg,
                &log,
            )
            .with_context(|| format!("setup {:?} never accepted connections on {addr}", s.name))?;
        }
        servers.push(bg);
    }

    let mut runs = Vec::new();
    // A stop signal ends the loop with an error; teardown, servers and the netem pair are still
    // cleaned up below (and by the guards' drops) before it is returned.
    let measured = (|| -> Result<()> {
        for rep in 0..reps {
            for (c, metrics) in scenario.contenders.iter().zip(&metrics) {
                exec::check_stop()?;
                let r = run_once(&env, c, metrics, rep)?;
                match (&r.value, &r.error) {
                    (Some(v), _) if r.extra.is_empty() => eprintln!(
                        "haul-bench: rep {}/{reps} {:<20} {v:.4} {}",
                        rep + 1,
                        c.name,
                        scenario.unit
                    ),
                    (Some(v), _) => {
                        let extra: Vec<String> = r
                            .extra
                            .iter()
                            .map(|(k, x)| {
                                format!("{k}={}", x.map_or("-".into(), |x| x.to_string()))
                            })
                            .collect();
                        eprintln!(
                            "haul-bench: rep {}/{reps} {:<20} {v:.4} {} {}",
                            rep + 1,
                            c.name,
                            scenario.unit,
                            extra.join(" ")
                        );
                    }
                    (None, Some(e)) => eprintln!(
                        "haul-bench: rep {}/{reps} {:<20} FAILED: {e}",
                        rep + 1,
                        c.name
                    ),
                    (None, None) => {}
                }
                runs.push(r);
            }
        }
        Ok(())
    })();

    for t in &scenario.teardown {
        let argv = env.shell(&t.host, &t.command, &env.vars)?;
        cleanup(&argv);
    }
    drop(servers);
    measured?;
    Ok(Report::new(
        &scenario, &topology, reps, started_at, &opts.haul, runs,
    ))
}

/// Polls `addr` from `host` until it accepts a connection, the server exits, or time runs out.
fn wait_ready(
    env: &Env,
    bench: &Path,
    host: &str,
    addr: &str,
    timeout_s: f64,
    bg: &mut Background,
    log: &Path,
) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs_f64(timeout_s.max(0.0));
    let probe = env.on_host(
        host,
        vec![bench.display().to_string(), "probe-tcp".into(), addr.into()],
    );
    loop {
        let ready = match env.topology {
            Topology::Loopback => exec::tcp_ready(addr),
            Topology::Pair(_) => exec::run(&probe, HELPER_TIMEOUT)
                .map(|o| o.status.success())
                .unwrap_or(false),
        };
        if ready {
            return Ok(());
        }
        if let Some(status) = bg.exited() {
            let text = std::fs::read_to_string(log).unwrap_or_default();
            bail!("server exited ({status}): {}", text.trim());
        }
        if Instant::now() >= deadline {
            bail!("timed out after {timeout_s}s");
        }
        exec::check_stop()?;
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Runs one repetition of one contender; a failing command is a failed sample, not an error.
/// The `record` values are read whenever the command succeeded; one that is missing is `None`
/// (with a warning) and does not fail the run.
fn run_once(env: &Env, c: &Contender, metrics: &Metrics, rep: u32) -> Result<RunRecord> {
    let mut vars = env.vars.clone();
    vars.insert("rep".into(), rep.to_string());
    let bytes = match &c.bytes {
        None => None,
        Some(toml::Value::Integer(n)) => {
            Some(u64::try_from(*n).context("bytes must be non-negative")?)
        }
        Some(toml::Value::String(s)) => {
            let text = render(s, &vars)?;
            Some(text.trim().parse::<u64>().with_context(|| {
                format!("contender {:?}: bytes {text:?} is not an integer", c.name)
            })?)
        }
        Some(other) => bail!(
            "contender {:?}: bytes must be an integer or a string, not {other}",
            c.name
        ),
    };
    let timeout = Duration::from_secs_f64(c.timeout_s);
    let extra = metrics
        .record
        .iter()
        .map(|(k, _)| (k.clone(), None))
        .collect();
    let mut record = RunRecord {
        contender: c.name.clone(),
        rep,
        value: None,
        elapsed_s: 0.0,
        peak_rss_kib: 0,
        error: None,
        extra,
        stdout: None,
    };
    if let Some(before) = &c.before {
        let argv = env.shell(&c.host, before, &vars)?;
        if let Err(e) = helper(&argv) {
            record.error = Some(format!("before: {e:#}"));
            return Ok(record);
        }
    }
    let argv = env.shell(&c.host, &c.command, &vars)?;
    let out =
        exec::run(&argv, timeout).with_context(|| format!("cannot run contender {:?}", c.name))?;
    record.elapsed_s = out.elapsed_s;
    record.peak_rss_kib = out.peak_rss_kib;
    if out.timed_out {
        record.error = Some(format!("killed after {}s timeout", c.timeout_s));
    } else if !out.status.success() {
        let text = if out.stderr.trim().is_empty() {
            &out.stdout
        } else {
            &out.stderr
        };
        let tail: String = text
            .trim()
            .lines()
            .last()
            .unwrap_or("")
            .chars()
            .take(200)
            .collect();
        record.error = Some(format!("{}: {tail}", out.status));
    } else {
        let obs = Observed {
            stdout: &out.stdout,
            elapsed_s: out.elapsed_s,
            peak_rss_kib: out.peak_rss_kib,
            bytes,
        };
        match metrics.main.extract(obs) {
            Ok(v) => record.value = Some(v * c.scale),
            Err(e) => record.error = Some(e.to_string()),
        }
        for (key, m) in &metrics.record {
            match m.extract(obs) {
                Ok(v) => {
                    record.extra.insert(key.clone(), Some(v));
                }
                Err(e) => eprintln!(
                    "haul-bench: warning: rep {} {}: record {key}: {e}",
                    rep + 1,
                    c.name
                ),
            }
        }
    }
    record.stdout = c.keep_stdout.then_some(out.stdout);
    Ok(record)
}

#[cfg(test)]
mod tests {
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
        let json: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(out.path().join("r.json")).expect("read"),
        )
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
        let json: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(out.path().join("k.json")).expect("read"),
        )
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
}
