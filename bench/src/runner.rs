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

    /// Sets `addr_a` and `addr_b`: loopback's, or those of a netem pair brought up here with
    /// namespace prefix `prefix` (and taken down when the returned guard drops).
    fn bring_up(&mut self, prefix: Option<&str>) -> Result<Option<NetemPair>> {
        let Topology::Pair(args) = &self.topology else {
            self.vars.insert("addr_a".into(), "127.0.0.1".into());
            self.vars.insert("addr_b".into(), "127.0.0.1".into());
            return Ok(None);
        };
        let prefix_args: Vec<String> = prefix
            .iter()
            .flat_map(|p| ["--prefix".to_owned(), (*p).to_owned()])
            .collect();
        let mut up = self.netem.clone();
        up.extend(["up".into(), "--pair".into()]);
        up.extend(prefix_args.iter().cloned());
        up.extend(args.iter().cloned());
        eprintln!("haul-bench: {}", up.join(" "));
        helper(&up)?;
        let mut down = self.netem.clone();
        down.push("down".into());
        down.extend(prefix_args);
        let pair = NetemPair { down };
        for h in ["a", "b"] {
            let mut addr = self.netem.clone();
            addr.extend(["addr".into(), h.into()]);
            let addr = helper(&addr)?;
            self.vars.insert(format!("addr_{h}"), addr);
        }
        Ok(Some(pair))
    }

    /// Sets the built-in variables `haul`, `netem`, `tmp` and `bench`; returns haul-bench's own
    /// path (`{bench}`).
    fn add_builtin_vars(&mut self, haul: &Path, tmp: &Path) -> Result<PathBuf> {
        self.vars.insert("haul".into(), haul.display().to_string());
        // `haul netem` with this run's state directory, so a contender or setup command can
        // change the running link (`{netem} set a-b --rate 5gbit`) or read its counters.
        self.vars.insert("netem".into(), self.netem.join(" "));
        self.vars.insert("tmp".into(), tmp.display().to_string());
        let bench = std::env::current_exe().context("cannot locate haul-bench itself")?;
        self.vars
            .insert("bench".into(), bench.display().to_string());
        Ok(bench)
    }

    /// Adds the scenario's variables, each rendered with the variables set so far; `overrides`
    /// (`--var`, the last of a key winning) replace their values and must name existing ones.
    fn add_scenario_vars(
        &mut self,
        scenario: &Scenario,
        overrides: &[(String, String)],
    ) -> Result<()> {
        for (k, _) in overrides {
            if !scenario.vars.contains_key(k) {
                bail!(
                    "--var {k}: scenario {} has no variable {k:?}",
                    scenario.name
                );
            }
        }
        for (k, v) in &scenario.vars {
            if self.vars.contains_key(k) {
                bail!(
                    "scenario {}: variable {k:?} shadows a built-in variable",
                    scenario.name
                );
            }
            let v = overrides
                .iter()
                .rev()
                .find(|(o, _)| o == k)
                .map_or(v, |(_, o)| o);
            let value = render(v, &self.vars).with_context(|| format!("variable {k:?}"))?;
            self.vars.insert(k.clone(), value);
        }
        Ok(())
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
    check_haul(&scenario, &topology, &opts.haul)?;
    let tmp = tempfile::Builder::new()
        .prefix("haul-bench-")
        .tempdir()
        .context("cannot create temp dir")?;
    let mut env = Env {
        topology: topology.clone(),
        netem: netem_base(&opts.haul, opts.netem_prefix.as_deref()),
        vars: Vars::new(),
    };
    let _pair = env.bring_up(opts.netem_prefix.as_deref())?;
    let bench = env.add_builtin_vars(&opts.haul, tmp.path())?;
    env.add_scenario_vars(&scenario, &opts.vars)?;

    let started_at = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
    let servers = start_setup(&env, &scenario, &bench, tmp.path())?;
    // A stop signal ends the measurements with an error; teardown, servers and the netem pair
    // are still cleaned up below (and by the guards' drops) before it is returned.
    let measured = measure(&env, &scenario, &metrics, reps);
    for t in &scenario.teardown {
        let argv = env.shell(&t.host, &t.command, &env.vars)?;
        cleanup(&argv);
    }
    drop(servers);
    let runs = measured?;
    Ok(Report::new(
        &scenario, &topology, reps, started_at, &opts.haul, runs,
    ))
}

/// Fails when the scenario needs the haul binary (a netem pair, or `{haul}` in a contender's
/// command) and `haul` is not a file.
fn check_haul(scenario: &Scenario, topology: &Topology, haul: &Path) -> Result<()> {
    let uses_haul = matches!(topology, Topology::Pair(_))
        || scenario
            .contenders
            .iter()
            .any(|c| c.command.contains("{haul}"));
    if uses_haul && !haul.is_file() {
        bail!(
            "haul binary not found at {} (build it with `cargo build --release -p haul` or pass --haul PATH)",
            haul.display()
        );
    }
    Ok(())
}

/// Starts the scenario's setup commands in the background (logging to `tmp/setup-<name>.log`),
/// waiting for each one's `wait_tcp` address to accept connections.
fn start_setup(
    env: &Env,
    scenario: &Scenario,
    bench: &Path,
    tmp: &Path,
) -> Result<Vec<Background>> {
    let mut servers = Vec::new();
    for s in &scenario.setup {
        let argv = env.shell(&s.host, &s.command, &env.vars)?;
        let log = tmp.join(format!("setup-{}.log", s.name));
        eprintln!("haul-bench: setup {}: {}", s.name, argv.join(" "));
        let mut bg = Background::spawn(&argv, &log)
            .with_context(|| format!("cannot start setup {:?}", s.name))?;
        if let Some(addr) = &s.wait_tcp {
            let addr = render(addr, &env.vars)?;
            wait_ready(env, bench, &s.host, &addr, s.ready_timeout_s, &mut bg, &log).with_context(
                || format!("setup {:?} never accepted connections on {addr}", s.name),
            )?;
        }
        servers.push(bg);
    }
    Ok(servers)
}

/// Runs every contender `reps` times, alternating, and prints a progress line after each run;
/// a stop signal ends it with an error.
fn measure(
    env: &Env,
    scenario: &Scenario,
    metrics: &[Metrics],
    reps: u32,
) -> Result<Vec<RunRecord>> {
    let mut runs = Vec::new();
    for rep in 0..reps {
        for (c, metrics) in scenario.contenders.iter().zip(metrics) {
            exec::check_stop()?;
            let r = run_once(env, c, metrics, rep)?;
            print_progress(&r, reps, &scenario.unit);
            runs.push(r);
        }
    }
    Ok(runs)
}

/// Prints the progress line of one run: its value (and `record` values), or why it failed.
fn print_progress(r: &RunRecord, reps: u32, unit: &str) {
    let (rep, name) = (r.rep + 1, &r.contender);
    match (&r.value, &r.error) {
        (Some(v), _) if r.extra.is_empty() => {
            eprintln!("haul-bench: rep {rep}/{reps} {name:<20} {v:.4} {unit}")
        }
        (Some(v), _) => {
            let extra: Vec<String> = r
                .extra
                .iter()
                .map(|(k, x)| format!("{k}={}", x.map_or("-".into(), |x| x.to_string())))
                .collect();
            eprintln!(
                "haul-bench: rep {rep}/{reps} {name:<20} {v:.4} {unit} {}",
                extra.join(" ")
            );
        }
        (None, Some(e)) => eprintln!("haul-bench: rep {rep}/{reps} {name:<20} FAILED: {e}"),
        (None, None) => {}
    }
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
mod tests;
