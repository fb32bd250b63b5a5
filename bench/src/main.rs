//! Side-by-side benchmark runner: runs a scenario's contenders alternately (A B A B ...), prints
//! medians, min–max and ratios to a baseline, and writes JSON, CSV and an SVG plot.

mod exec;
mod metric;
mod plot;
mod report;
mod runner;
mod scenario;
mod stats;
mod template;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Benchmark haul against its peers, side by side.
#[derive(Parser, Debug)]
#[command(name = "haul-bench", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run a scenario file and write its results.
    Run {
        /// The scenario (TOML).
        scenario: PathBuf,
        /// Repetitions per contender (overrides the scenario).
        #[arg(long)]
        reps: Option<u32>,
        /// Directory for the JSON, CSV and SVG results.
        #[arg(long, default_value = "bench/results")]
        out: PathBuf,
        /// The haul binary [default: `haul` next to this executable].
        #[arg(long)]
        haul: Option<PathBuf>,
        /// Namespace prefix of the netem pair (passed as `--prefix` to `haul netem up/down`) and
        /// state directory `/run/haul-netem-PREFIX` (`--state` of every `haul netem` call), so
        /// benchmarks with different prefixes can run at the same time.
        #[arg(long, value_name = "PREFIX")]
        netem_prefix: Option<String>,
        /// Replaces one of the scenario's `[vars]` for this run (repeatable); the value may
        /// use the built-in variables, like the scenario's own.
        #[arg(long = "var", value_name = "KEY=VALUE", value_parser = parse_var)]
        vars: Vec<(String, String)>,
    },
    /// List the scenarios in a directory.
    List {
        /// Directory of scenario files.
        #[arg(default_value = "bench/scenarios")]
        dir: PathBuf,
    },
    /// Exit 0 if a TCP connection to ADDR succeeds (readiness probe inside a netem host).
    #[command(hide = true)]
    ProbeTcp {
        /// `host:port`.
        addr: String,
    },
}

fn parse_var(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
        _ => Err(format!("expected KEY=VALUE, got {s:?}")),
    }
}

fn main() -> ExitCode {
    match real_main() {
        Ok(code) => code,
        Err(e) => {
            eprintln!("haul-bench: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn real_main() -> Result<ExitCode> {
    match Cli::parse().command {
        Command::Run {
            scenario,
            reps,
            out,
            haul,
            netem_prefix,
            vars,
        } => {
            exec::catch_stop_signals().context("cannot install signal handlers")?;
            let haul = match haul {
                Some(h) => h,
                None => default_haul()?,
            };
            let report = runner::run(
                &scenario,
                &runner::Options {
                    reps,
                    haul,
                    netem_prefix,
                    vars,
                },
            )?;
            print!("{}", report.table());
            std::fs::create_dir_all(&out)
                .with_context(|| format!("cannot create {}", out.display()))?;
            let stamp: String = report
                .started_at
                .chars()
                .filter(|c| !matches!(c, '-' | ':'))
                .collect();
            let stem = format!("{}-{stamp}", report.scenario);
            report
                .write_files(&out, &stem)
                .with_context(|| format!("cannot write results to {}", out.display()))?;
            let svg = out.join(format!("{stem}.svg"));
            plot::write_svg(&report, &svg)
                .with_context(|| format!("cannot write {}", svg.display()))?;
            println!(
                "wrote {}/{stem}.{{json,csv,svg}} and {stem}-summary.csv",
                out.display()
            );
            let any_ok = report.summary.iter().any(|s| s.ok > 0);
            Ok(if any_ok {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            })
        }
        Command::List { dir } => {
            list(&dir)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::ProbeTcp { addr } => Ok(if exec::tcp_ready(&addr) {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        }),
    }
}

/// `haul` in the same directory as this executable (both build into the same target dir).
fn default_haul() -> Result<PathBuf> {
    let me = std::env::current_exe().context("cannot locate haul-bench itself")?;
    Ok(me.with_file_name("haul"))
}

fn list(dir: &Path) -> Result<()> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("cannot read {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    paths.sort();
    for p in paths {
        match scenario::Scenario::load(&p) {
            Ok(s) => {
                let names: Vec<&str> = s.contenders.iter().map(|c| c.name.as_str()).collect();
                let topo = s
                    .topology()
                    .unwrap_or_else(|e| scenario::Topology::Pair(vec![e]));
                let topo = match topo {
                    scenario::Topology::Loopback => "loopback".to_owned(),
                    scenario::Topology::Pair(a) => a.join(" "),
                };
                println!(
                    "{}\n  {}\n  topology: {topo}; contenders: {}\n  {}",
                    s.name,
                    s.description,
                    names.join(", "),
                    p.display()
                );
            }
            Err(e) => println!("{}: INVALID: {e}", p.display()),
        }
    }
    Ok(())
}
