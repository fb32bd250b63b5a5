//! Replays FastProf and its baselines on the synthetic ANL–UChicago-like table and prints the
//! Markdown table for docs/tuning.md. Run: `cargo run -p haul-tune --release --example replay`.

use haul_tune::exhaustive::Exhaustive;
use haul_tune::kw::KieferWolfowitz;
use haul_tune::random_walk::{self, RandomWalk};
use haul_tune::replay::{replay, ReplayStats};
use haul_tune::spsa::{Gains, Spsa, SpsaConfig, Start};
use haul_tune::surface::{anl_uchicago_like, Noise, TEN_GBPS};
use haul_tune::tabu::{self, Tabu};
use haul_tune::{Space, Stopping, TuneError};

const RUNS: usize = 5000;
const SEED: u64 = 2016;

fn row(s: &ReplayStats) {
    println!(
        "| {} | {:.2} | {:.1} | {:.1} | {} |",
        s.optimizer,
        s.mean_throughput * 8.0 / 1e9,
        s.pct_meeting,
        s.mean_probes,
        s.max_probes
    );
}

fn table(c: f64, r: usize, m: Option<usize>) -> Result<(), TuneError> {
    let surface = anl_uchicago_like(7);
    let noise = Noise::default();
    let space = Space::block_buffer();
    let stop = Stopping::new(Some(TEN_GBPS))
        .gain_ratio(c)
        .patience(r)
        .budget(m);
    let goal = c * TEN_GBPS;
    let m_text = m.map_or("∞".to_string(), |m| m.to_string());
    println!("\n𝒞 = {c}, ℛ = {r}, ℳ = {m_text}, {RUNS} runs, noise σ = 3%\n");
    println!("| optimizer | mean throughput (Gb/s) | % meeting 𝒞 | mean probes | max probes |");
    println!("|---|---|---|---|---|");
    let spsa = |seed| Spsa::new(space.clone(), SpsaConfig::new(stop.clone()), seed);
    row(&replay(spsa, &surface, noise, RUNS, SEED, goal)?);
    let mut text = SpsaConfig::new(stop.clone());
    text.restart_from_best = false;
    let spsa_text = |seed| Spsa::new(space.clone(), text.clone(), seed);
    let mut s = replay(spsa_text, &surface, noise, RUNS, SEED, goal)?;
    s.optimizer = "fastprof (text variant)".into();
    row(&s);
    let rw = |seed| {
        RandomWalk::new(
            space.clone(),
            Start::Random,
            random_walk::DEFAULT_STEP,
            stop.clone(),
            seed,
        )
    };
    row(&replay(rw, &surface, noise, RUNS, SEED, goal)?);
    let tb = |seed| {
        Tabu::new(
            space.clone(),
            Start::Random,
            tabu::DEFAULT_STEP,
            tabu::DEFAULT_TENURE,
            stop.clone(),
            seed,
        )
    };
    row(&replay(tb, &surface, noise, RUNS, SEED, goal)?);
    let kw = |seed| {
        KieferWolfowitz::new(
            space.clone(),
            Gains::default(),
            Start::Random,
            stop.clone(),
            seed,
        )
    };
    row(&replay(kw, &surface, noise, RUNS, SEED, goal)?);
    let ex = |_| Exhaustive::new(space.clone(), vec![25, 513], None);
    let ex_stats = replay(
        |s| ex(s).expect("grid matches the 2-D space"),
        &surface,
        noise,
        20,
        SEED,
        goal,
    )?;
    row(&ex_stats);
    Ok(())
}

fn main() -> Result<(), TuneError> {
    table(0.90, 30, None)?;
    table(0.90, 30, Some(60))?;
    table(0.95, 30, Some(60))?;
    Ok(())
}
