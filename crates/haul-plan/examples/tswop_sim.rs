//! Reproduces the TSWOP simulation of §2.7 of 000 — DPMS against RGMS on the thesis's random
//! instances under both cost-cap rules (C_RGMS and Eq. 2.14) — and times DPMS on
//! ⟨10,000, 100, d⟩. Prints Markdown for docs/planner.md and bench/results/.
//! Run: `cargo run --release -p haul-plan --example tswop_sim [timing|grid]`.

use std::time::Instant;

use haul_plan::{
    cost_cap, cpms, dpms, generate, rgms, CapRule, GenParams, Instance, PlanError, Weights,
};
use rand::rngs::StdRng;
use rand::SeedableRng;

const MODULES: [usize; 4] = [1_000, 2_500, 5_000, 10_000];
const ZONES: [usize; 4] = [10, 25, 50, 100];
const DENSITIES: [f64; 4] = [0.25, 0.5, 0.75, 1.0];
const SEEDS: u64 = 5;
/// The thesis's Figs. 2.12 / 2.15 run K up to 1,000; a smaller supplement at |M| = 10,000.
const LONG_ZONES: [usize; 4] = [100, 250, 500, 1_000];
const LONG_SEEDS: u64 = 3;
const TIMING_RUNS: usize = 11;

/// One instance's results: profits of RGMS (no cap), DPMS under both rules, CPMS, and the caps.
struct Run {
    rgms: f64,
    dpms_rgms_cap: f64,
    dpms_quarter: f64,
    cpms: f64,
    cap_rgms: u64,
    cap_quarter: u64,
}

fn run_one(modules: usize, zones: usize, d: f64, seed: u64) -> Result<Run, PlanError> {
    let mut rng = StdRng::seed_from_u64(seed);
    let inst = generate(&GenParams::new(modules, zones, d)?, &mut rng);
    let w = Weights::ones(1);
    let greedy = rgms(&inst, &w, None, &mut rng)?;
    let cap_quarter = cost_cap(CapRule::QuarterMax, &inst, &w, &mut rng)?;
    let capped = dpms(&inst, &w, greedy.cost)?;
    assert!(
        capped.profit >= greedy.profit,
        "DPMS below RGMS under C_RGMS"
    );
    Ok(Run {
        rgms: greedy.profit,
        dpms_rgms_cap: capped.profit,
        dpms_quarter: dpms(&inst, &w, cap_quarter)?.profit,
        cpms: cpms(&inst, &w)?.profit,
        cap_rgms: greedy.cost,
        cap_quarter,
    })
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Median over seeds of each field of interest.
struct Cell {
    gain_rgms_cap: f64,
    gain_quarter: f64,
    gain_cpms: f64,
    rgms: f64,
    dpms_rgms_cap: f64,
    dpms_quarter: f64,
    cpms: f64,
    cap_rgms: f64,
    cap_quarter: f64,
}

fn cell(modules: usize, zones: usize, d: f64, seeds: u64) -> Result<Cell, PlanError> {
    let base = (modules as u64) << 32 | (zones as u64) << 8 | (d * 100.0) as u64;
    let runs: Vec<Run> = (0..seeds)
        .map(|s| run_one(modules, zones, d, base.wrapping_mul(31).wrapping_add(s)))
        .collect::<Result<_, _>>()?;
    let med = |f: &dyn Fn(&Run) -> f64| median(runs.iter().map(f).collect());
    Ok(Cell {
        gain_rgms_cap: med(&|r| r.dpms_rgms_cap / r.rgms - 1.0),
        gain_quarter: med(&|r| r.dpms_quarter / r.rgms - 1.0),
        gain_cpms: med(&|r| r.cpms / r.rgms - 1.0),
        rgms: med(&|r| r.rgms),
        dpms_rgms_cap: med(&|r| r.dpms_rgms_cap),
        dpms_quarter: med(&|r| r.dpms_quarter),
        cpms: med(&|r| r.cpms),
        cap_rgms: med(&|r| r.cap_rgms as f64),
        cap_quarter: med(&|r| r.cap_quarter as f64),
    })
}

/// One number read off a grid cell.
type Metric = fn(&Cell) -> f64;

fn pct(x: f64) -> String {
    format!("{:+.0}%", x * 100.0)
}

/// Runs the grid and prints one improvement table per cap rule, then the profit tables.
fn grid() -> Result<(), PlanError> {
    let mut cells = Vec::new();
    for &d in &DENSITIES {
        for &m in &MODULES {
            for &k in &ZONES {
                cells.push(((d, m, k), cell(m, k, d, SEEDS)?));
            }
        }
    }
    let header: Vec<String> = ZONES.iter().map(|k| format!("K = {k}")).collect();
    let tables: [(String, Metric); 3] = [
        (format!("DPMS over RGMS, {}", CapRule::Rgms.name()), |c| {
            c.gain_rgms_cap
        }),
        (
            format!("DPMS over RGMS, {}", CapRule::QuarterMax.name()),
            |c| c.gain_quarter,
        ),
        (
            "CPMS over RGMS: the most any planner can gain, with or without a cap".into(),
            |c| c.gain_cpms,
        ),
    ];
    for (title, gain) in tables {
        println!("\n### {title} (median of {SEEDS} seeds)\n");
        println!("| d | \\|M\\| | {} |", header.join(" | "));
        println!("|---|---|{}", "---|".repeat(ZONES.len()));
        for row in cells.chunks(ZONES.len()) {
            let (d, m, _) = row[0].0;
            let vals: Vec<String> = row.iter().map(|(_, c)| pct(gain(c))).collect();
            println!("| {d} | {m} | {} |", vals.join(" | "));
        }
        let all: Vec<f64> = cells.iter().map(|(_, c)| gain(c)).collect();
        let lo = all.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = all.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        println!(
            "\nOver the grid: min {}, median {}, max {}.",
            pct(lo),
            pct(median(all)),
            pct(hi)
        );
    }
    println!("\n### Median profits and caps at K = 100 (Figs. 2.10 and 2.13 of 000)\n");
    profit_header();
    for ((d, m, k), c) in &cells {
        if *k == 100 {
            profit_row(&format!("{d} | {m} | {k}"), c);
        }
    }
    println!("\n### Median profits and caps at |M| = 10,000 (Figs. 2.11 and 2.14 of 000)\n");
    profit_header();
    for ((d, m, k), c) in &cells {
        if *m == 10_000 {
            profit_row(&format!("{d} | {m} | {k}"), c);
        }
    }
    Ok(())
}

fn profit_header() {
    println!("| d | \\|M\\| | K | RGMS | DPMS @ C_RGMS | DPMS @ Eq. 2.14 | CPMS | C_RGMS | Eq. 2.14 cap |");
    println!("|---|---|---|---|---|---|---|---|---|");
}

fn profit_row(key: &str, c: &Cell) {
    println!(
        "| {key} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} |",
        c.rgms, c.dpms_rgms_cap, c.dpms_quarter, c.cpms, c.cap_rgms, c.cap_quarter
    );
}

/// The thesis's K range of Figs. 2.12 / 2.15 (100–1,000) at |M| = 10,000.
fn long_zones() -> Result<(), PlanError> {
    println!(
        "\n### DPMS over RGMS for K = 100–1,000 at |M| = 10,000 (median of {LONG_SEEDS} seeds)\n"
    );
    println!("| d | K | C_RGMS rule | Eq. 2.14 rule | median C_RGMS | median Eq. 2.14 cap |");
    println!("|---|---|---|---|---|---|");
    for d in [0.25, 1.0] {
        for &k in &LONG_ZONES {
            let c = cell(10_000, k, d, LONG_SEEDS)?;
            println!(
                "| {d} | {k} | {} | {} | {:.0} | {:.0} |",
                pct(c.gain_rgms_cap),
                pct(c.gain_quarter),
                c.cap_rgms,
                c.cap_quarter
            );
        }
    }
    Ok(())
}

/// This thread's time on a CPU so far, in ns (Linux `schedstat`), so a busy machine shows up as
/// wall time above CPU time.
fn cpu_ns() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    stat.split_whitespace().next()?.parse().ok()
}

/// Median wall time, max wall time and median CPU time of `runs` DPMS calls, in milliseconds.
fn time_dpms(inst: &Instance, cap: u64, runs: usize) -> Result<(f64, f64, String), PlanError> {
    let w = Weights::ones(1);
    let mut wall = Vec::with_capacity(runs);
    let mut cpu = Vec::with_capacity(runs);
    for _ in 0..runs {
        let (t, c) = (Instant::now(), cpu_ns());
        let plan = dpms(inst, &w, cap)?;
        wall.push(t.elapsed().as_secs_f64() * 1e3);
        if let (Some(a), Some(b)) = (c, cpu_ns()) {
            cpu.push(b.saturating_sub(a) as f64 / 1e6);
        }
        assert!(plan.cost <= cap);
    }
    let max = wall.iter().copied().fold(0.0, f64::max);
    let cpu = if cpu.len() == runs {
        format!("{:.1}", median(cpu))
    } else {
        "n/a".into()
    };
    Ok((median(wall), max, cpu))
}

/// Times DPMS on ⟨10,000, 100, d⟩ under both caps (Fig. 2.16 of 000 uses C_RGMS).
fn timing() -> Result<(), PlanError> {
    println!("\n### DPMS time on ⟨|M| = 10,000, K = 100, d⟩ ({TIMING_RUNS} runs each)\n");
    println!("| d | \\|E\\| | rule | C_max | median wall ms | max wall ms | median CPU ms |");
    println!("|---|---|---|---|---|---|---|");
    for &d in DENSITIES.iter().rev() {
        let mut rng = StdRng::seed_from_u64(2016);
        let inst = generate(&GenParams::new(10_000, 100, d)?, &mut rng);
        let w = Weights::ones(1);
        for rule in [CapRule::Rgms, CapRule::QuarterMax] {
            let cap = cost_cap(rule, &inst, &w, &mut rng)?;
            let (med, max, cpu) = time_dpms(&inst, cap, TIMING_RUNS)?;
            println!(
                "| {d} | {} | {} | {cap} | {med:.1} | {max:.1} | {cpu} |",
                inst.edge_count(),
                rule.name()
            );
        }
    }
    Ok(())
}

/// `tswop_sim` runs everything; `tswop_sim timing` or `tswop_sim grid` runs one part.
fn main() -> Result<(), PlanError> {
    let part = std::env::args().nth(1).unwrap_or_default();
    let t = Instant::now();
    if part != "grid" {
        timing()?;
    }
    if part != "timing" {
        grid()?;
        long_zones()?;
    }
    println!("\n(whole run: {:.0} s)", t.elapsed().as_secs_f64());
    Ok(())
}
