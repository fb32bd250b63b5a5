//! Times the route chooser on a dense graph: every ordered pair of hosts among a source, a
//! destination and N relays (default 500) has a predicted leg, so |E| ≈ (N + 2)².
//!
//! ```sh
//! cargo run --release -p haul-overlay --example route_scale -- [RELAYS] [RUNS]
//! ```
//!
//! Prints the median over RUNS (default 11) of: building the graph, the widest-path search
//! (`choose`) with 1, 2 and 3 relays allowed, and the brute-force enumeration (`brute_force`)
//! with 1 and 2, which it also checks the search against.

use std::hint::black_box;
use std::time::{Duration, Instant};

use haul_overlay::route::{brute_force, choose, Candidate, Graph, Leg, Route, RouteParams};

/// A small xorshift generator, so the graph is the same on every run.
struct Rng(u64);

impl Rng {
    /// A uniform number in [0, 1).
    fn next(&mut self) -> f64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// The legs among `h0` (source), `h1` (destination) and `h2..` (relays) placed at random in a
/// unit square, the source and destination at the middles of opposite sides: a leg's throughput
/// falls with its length, as TCP's does with RTT (002 §2.2), ±30 % noise, 2 % of legs down, and
/// each leg has a recent error of 0–30 %. So
/// chains of shorter legs win, as in the thesis, and the search has work to do.
fn legs(relays: usize, rng: &mut Rng) -> Vec<Leg> {
    let n = relays + 2;
    let mut at = vec![(0.0, 0.5), (1.0, 0.5)];
    at.extend((0..relays).map(|_| (rng.next(), rng.next())));
    let mut legs = Vec::with_capacity(n * (n - 1));
    for u in 0..n {
        for v in (0..n).filter(|&v| v != u) {
            let dist = f64::hypot(at[u].0 - at[v].0, at[u].1 - at[v].1);
            let bps = match rng.next() < 0.02 {
                true => 0.0,
                false => 1e9 / (0.05 + dist) * (0.7 + 0.6 * rng.next()),
            };
            legs.push(Leg {
                from: format!("h{u}"),
                to: format!("h{v}"),
                bps,
                age_s: 3600.0,
                samples: 5,
                err_pct: Some(30.0 * rng.next()),
            });
        }
    }
    legs
}

/// The median wall time of `runs` (at least 1) calls of `f`, and its last result.
fn median<T>(runs: usize, mut f: impl FnMut() -> T) -> (Duration, T) {
    let mut time = || {
        let t = Instant::now();
        let out = black_box(f());
        (t.elapsed(), out)
    };
    let (first, mut out) = time();
    let mut times = vec![first];
    for _ in 1..runs {
        let (t, o) = time();
        times.push(t);
        out = o;
    }
    times.sort_unstable();
    (times[times.len() / 2], out)
}

/// Prints one timing line.
fn report(what: &str, t: Duration, r: &Route) {
    println!(
        "{what:<28} {:>10.3} ms   route {:?} at {:.3} Gb/s",
        t.as_secs_f64() * 1e3,
        r.hops,
        r.predicted_bps / 1e9
    );
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let relays: usize = args.next().map_or(Ok(500), |a| a.parse())?;
    let runs: usize = args.next().map_or(Ok(11), |a| a.parse())?;
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let legs = legs(relays, &mut rng);
    let candidates: Vec<Candidate> = (2..relays + 2)
        .map(|i| Candidate {
            host: format!("h{i}"),
            discount: 0.9 + 0.1 * rng.next(),
        })
        .collect();
    println!(
        "{relays} relays, {} legs, median of {runs} runs",
        legs.len()
    );

    let mut copies = vec![legs.clone(); runs.max(1)];
    let (t, graph) = median(runs, || Graph::new(copies.pop().unwrap_or_default()));
    let graph = graph?;
    println!("{:<28} {:>10.3} ms", "Graph::new", t.as_secs_f64() * 1e3);

    let mut widest = Vec::new();
    for max_relays in 1..=3 {
        let p = RouteParams {
            max_relays,
            ..RouteParams::default()
        };
        let (t, r) = median(runs, || choose(&graph, "h0", "h1", &candidates, &p));
        let r = r?;
        report(&format!("choose, max_relays {max_relays}"), t, &r);
        widest.push(r);
    }
    for max_relays in 1..=2 {
        let p = RouteParams {
            max_relays,
            ..RouteParams::default()
        };
        let (t, r) = median(runs.min(3), || {
            brute_force(&graph, "h0", "h1", &candidates, &p)
        });
        let r = r?;
        report(&format!("brute_force, max_relays {max_relays}"), t, &r);
        let agree = r.predicted_bps == widest[max_relays - 1].predicted_bps;
        println!(
            "{:<28} {}",
            "",
            if agree {
                "agrees with choose"
            } else {
                "DISAGREES"
            }
        );
    }
    Ok(())
}
