//! Profiling within a time budget, through the GridFTP servers themselves: short memory-to-memory
//! copies (`/dev/zero` on the sending server or here, `/dev/null` on the receiving one), which
//! haul and Globus servers both serve, so no profiling daemon is needed. A transport the history
//! has not measured recently is probed once with haul's defaults (a warm-up copy, then one sized
//! to the budget); the chosen TCP transport is then tuned with FastProf (000 §4: SPSA, here over
//! the stream count) from the history's best point when there is one. Every probe is recorded
//! in the history as kind `probe`, so the next plan starts from it.

use haul_plan::workflow::{Combination, Estimate};
use haul_tune::space::{Axis, Space};
use haul_tune::spsa::{Spsa, SpsaConfig, Start};
use haul_tune::{Optimizer, Stopping};

use super::facts::Found;
pub use super::settings::Settings;
use super::steady::watched;
use super::RequestArgs;
use crate::cmd::{human_bytes, human_rate};

/// The warm-up probe: enough to open the connections and leave slow start, or
/// [`warm_s`] seconds on a slow path.
pub const WARM_BYTES: u64 = 32 << 20;
/// The shortest and longest time limit of a warm-up probe, and the round trips it spans
/// between them: 20 round trips take TCP's slow start to 1 Gb/s on a 100 ms path (2 s).
const WARM_S: (f64, f64, f64) = (1.5, 3.0, 20.0);

/// A warm-up probe's time limit on this path.
fn warm_s(found: &Found) -> f64 {
    (WARM_S.2 * found.rtt_s.unwrap_or(1.0)).clamp(WARM_S.0, WARM_S.1)
}
/// The most one probe moves.
const MAX_PROBE_BYTES: u64 = 4 << 30;
/// The least and most seconds one sized probe aims at.
const PROBE_S: (f64, f64) = (2.0, 5.0);
/// The most an automatic profiling budget is.
const MAX_AUTO_BUDGET_S: f64 = 30.0;
/// A transfer of fewer bytes than this many warm-up probes is not worth probing for.
pub const SMALL_TRANSFER_PROBES: u64 = 4;
/// A lead of the fastest transport's warm-up over the next that longer probes are not asked to
/// confirm. Warm-ups understate (slow start, PLUT's session set-up), but a lead this large held:
/// on the emulated 1 Gb/s, 100 ms, 0.1 % loss path the warm-ups read TCP 75 and PLUT 147 Mb/s,
/// the longer probes 36 and 474 (bench/results/send-netem-20261126T105217Z, lossy, cold);
/// the re-plan watchdog remains for a lead that does not hold.
const DECISIVE: f64 = 1.5;
/// The most FastProf probes.
const MAX_TUNE_PROBES: usize = 8;
/// FastProf's stream range.
const MAX_STREAMS: u32 = 32;
/// The streams haul cp uses by default.
const DEFAULT_STREAMS: u32 = 4;

/// One memory-to-memory probe.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ProbeRun {
    /// `estimate` (a transport without history) or `fastprof`.
    pub stage: &'static str,
    /// The transport probed.
    pub transport: String,
    /// Streams.
    pub parallelism: u32,
    /// Bytes moved.
    pub bytes: u64,
    /// Seconds from the copy's start to its end.
    pub seconds: f64,
    /// Bits per second (0 when it failed).
    pub bps: f64,
    /// Why it failed.
    pub error: Option<String>,
}

/// The profiling budget in seconds for a transfer predicted at `bps`: `--profile-budget`, or a
/// tenth of the transfer's predicted time, at most 30 s (none while nothing predicts it).
pub fn budget(found: &Found, flag: Option<f64>, bps: Option<f64>) -> f64 {
    if let Some(b) = flag {
        return b.max(0.0);
    }
    match (found.facts.size, bps) {
        (Some(n), Some(b)) if b > 0.0 => (n as f64 * 8.0 / b / 10.0).min(MAX_AUTO_BUDGET_S),
        (None, _) => MAX_AUTO_BUDGET_S / 3.0,
        _ => 0.0,
    }
}

/// The best rate any transport is estimated at.
pub fn best_bps(found: &Found) -> Option<f64> {
    found
        .facts
        .transports
        .iter()
        .filter_map(|t| t.estimate.as_ref().map(|e| e.bps))
        .reduce(f64::max)
}

/// What one probe runs: along which route of the plan, over which transport, with how many
/// streams, for how many bytes or seconds, and the rate it must keep within reach of.
struct Spec<'a> {
    stage: &'static str,
    route: usize,
    transport: &'a str,
    p: u32,
    len: u64,
    secs: f64,
    /// The best rate known so far: a probe decisively behind it stops early.
    beat: Option<f64>,
}

/// The least time, and round trips, after the first byte before a probe may be judged behind.
const JUDGE_AFTER: (f64, f64) = (1.0, 10.0);

/// One probe: memory to memory along `spec.route` over `spec.transport` with `spec.p`
/// streams, `spec.len` bytes or `spec.secs` seconds, whichever ends first, or sooner when its
/// rate falls [`DECISIVE`]ly behind `spec.beat` (a probe stopped early is a measurement, not a
/// failure). Its rate is that of the second half of its time after the first byte
/// ([`Steady::late_bps`]).
fn probe(found: &Found, a: &RequestArgs, spec: Spec<'_>) -> ProbeRun {
    let (src, dst) = found.probe_urls[spec.route].clone();
    let mut words = vec![src, dst, "-q".into(), "--len".into(), spec.len.to_string()];
    words.extend([
        "--transport".into(),
        spec.transport.into(),
        "-p".into(),
        spec.p.to_string(),
    ]);
    words.extend([
        "--data-timeout".into(),
        "30".into(),
        "--sample-ms".into(),
        "100".into(),
    ]);
    words.extend(a.common_words());
    let judge = JUDGE_AFTER
        .0
        .max(JUDGE_AFTER.1 * found.rtt_s.unwrap_or(0.0));
    let (secs, beat) = (spec.secs, spec.beat);
    let run = crate::cmd::cp::args_from(&words).and_then(|mut cp| {
        cp.kind = Some("probe");
        let (steady, dog) = watched(move |st, s| {
            if s.t_s >= secs {
                return Some(format!("the probe's {secs:.1} s are up"));
            }
            match (beat, st.bps()) {
                (Some(b), Some(r)) if st.seconds() >= judge && r * DECISIVE < b => Some(format!(
                    "{} after {:.1} s, decisively behind {}",
                    human_rate(r),
                    st.seconds(),
                    human_rate(b)
                )),
                _ => None,
            }
        });
        cp.watchdog = Some(dog);
        crate::cmd::cp::copy(cp).map(|c| (c, steady))
    });
    let mut out = ProbeRun {
        stage: spec.stage,
        transport: spec.transport.into(),
        parallelism: spec.p,
        bytes: 0,
        seconds: 0.0,
        bps: 0.0,
        error: None,
    };
    match run {
        Ok((c, steady)) => {
            out.bytes = c.summary.bytes;
            out.seconds = c.summary.duration_s;
            out.bps = steady
                .borrow()
                .late_bps()
                .unwrap_or_else(|| c.summary.mean_bps());
        }
        Err(e) => out.error = Some(format!("{e:#}")),
    }
    tracing::info!(?out, "haul send: probe");
    out
}

/// Bytes for a probe of about `secs` seconds at `bps`, with room to run faster: the probe's
/// time limit ends it first when the path is as slow as `bps` says.
fn sized(bps: f64, secs: f64) -> u64 {
    ((bps / 8.0 * secs * 2.0) as u64).clamp(WARM_BYTES, MAX_PROBE_BYTES)
}

/// Probes every direct transport without a recent estimate: a warm-up copy each, then, within
/// the budget (`flag`, or a tenth of the time predicted from the warm-ups), one copy sized to
/// the budget each. Small transfers are not probed unless `must_predict` (a deadline or target
/// rate to check). A transport whose probe fails is dropped from the plan with a note. Returns
/// the probes and the budget.
pub fn unknown_transports(
    found: &mut Found,
    a: &RequestArgs,
    (flag, must_predict): (Option<f64>, bool),
    skip: Option<&str>,
) -> (Vec<ProbeRun>, f64) {
    let mut unknown: Vec<usize> = (0..found.facts.transports.len())
        .filter(|&i| found.facts.transports[i].estimate.is_none())
        .filter(|&i| Some(found.facts.transports[i].name.as_str()) != skip)
        .collect();
    // On many files a transport whose cost per file caps it goes last (so it need not be
    // probed once another outruns its cap); else PLUT's warm-up is short (32 MiB at its rate),
    // and probed first it lets a TCP warm-up that falls decisively behind stop early (a long
    // lossy path).
    unknown.sort_by(|&i, &j| {
        let key = |k: usize| {
            let cap = if found.facts.files > 1 {
                cap_bps(found, k)
            } else {
                f64::INFINITY
            };
            (cap, found.facts.transports[k].name == "plut")
        };
        key(j)
            .partial_cmp(&key(i))
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    let small = found
        .facts
        .size
        .is_some_and(|n| n < SMALL_TRANSFER_PROBES * WARM_BYTES * unknown.len() as u64);
    // With one transport known, probing the others is worth it only if its budget allows a
    // probe of its shortest length.
    let known = best_bps(found).map(|b| budget(found, flag, Some(b)));
    let cheap = known.is_some_and(|b| b < PROBE_S.0) && flag.is_none();
    // A deadline or a target rate can only be checked against a prediction: warm-ups at least.
    let (small, cheap) = (small && !must_predict, cheap && !must_predict);
    if unknown.is_empty() || flag == Some(0.0) || ((small || cheap) && flag.is_none()) {
        if (small || cheap) && !unknown.is_empty() {
            found.notes.push(format!(
                "{}: transports without history are planned as unknown",
                if small {
                    "too small to be worth probing"
                } else {
                    "probing would cost more than it could save"
                }
            ));
        }
        return (Vec::new(), budget(found, flag, best_bps(found)));
    }
    let (mut runs, mut warm, dropped) = warm_ups(found, a, &unknown);
    let budget = budget(found, flag, best_bps(found));
    let spent: f64 = runs.iter().map(|r| r.seconds).sum();
    let per = ((budget - spent) / warm.len().max(1) as f64).min(PROBE_S.1);
    keep_for_longer_probes(found, &mut warm, flag, must_predict);
    if per >= PROBE_S.0 {
        for (i, w) in warm {
            let spec = Spec {
                stage: "estimate",
                route: 0,
                transport: &w.transport,
                p: DEFAULT_STREAMS,
                len: sized(w.bps, per),
                secs: per,
                beat: None,
            };
            let run = probe(found, a, spec);
            if run.error.is_none() && run.bps > 0.0 {
                set_estimate(found, i, &run);
            }
            runs.push(run);
        }
    }
    for i in dropped.into_iter().rev() {
        found.facts.transports.remove(i);
    }
    (runs, budget)
}

/// Which warm-up transports still get a longer probe: none when only one transport is left to
/// plan or the warm-ups were decisive, except the leader when a deadline or target must be
/// checked against its prediction.
fn keep_for_longer_probes(
    found: &mut Found,
    warm: &mut Vec<(usize, ProbeRun)>,
    flag: Option<f64>,
    must_predict: bool,
) {
    let decisive = decisive(found);
    // With one transport left to plan (the others capped or failed), longer probes have
    // nothing to decide, unless a deadline or target needs its prediction.
    let rivals = found
        .facts
        .transports
        .iter()
        .filter(|t| t.estimate.is_some())
        .count();
    if rivals < 2 && !must_predict && flag.is_none() {
        warm.clear();
    }
    if let Some(lead) = decisive.filter(|_| flag.is_none()) {
        found.notes.push(format!(
            "the warm-ups were decisive (the fastest at {lead:.1}x the next, on these files): \
             no longer probes{}",
            if must_predict {
                " but the fastest, for the deadline or target"
            } else {
                ""
            }
        ));
        // A deadline or target is checked against the leader's prediction: it gets the
        // longer probe the others no longer need.
        if must_predict {
            let best = best_bps(found);
            warm.retain(|(i, _)| {
                let t = &found.facts.transports[*i];
                t.estimate.as_ref().map(|e| e.bps) == best
            });
        } else {
            warm.clear();
        }
    }
}

/// The warm-up probes of the transports `unknown`, in order, each judged against the
/// estimates before it: the probes, the transports measured (with their warm-up) and those whose
/// probe failed. A transport its cost per file rules out is not probed, with a note.
fn warm_ups(
    found: &mut Found,
    a: &RequestArgs,
    unknown: &[usize],
) -> (Vec<ProbeRun>, Vec<(usize, ProbeRun)>, Vec<usize>) {
    let (mut runs, mut warm, mut dropped) = (Vec::new(), Vec::new(), Vec::new());
    for &i in unknown {
        let name = found.facts.transports[i].name.clone();
        let beat = beat_for(found, i);
        if beat == Some(f64::INFINITY) {
            found.notes.push(format!(
                "{name}: not probed: its cost per file alone ({} files) takes longer than the \
                 best estimate needs for the whole transfer",
                found.facts.files
            ));
            continue;
        }
        let spec = Spec {
            stage: "estimate",
            route: 0,
            transport: &name,
            p: DEFAULT_STREAMS,
            len: WARM_BYTES,
            secs: warm_s(found),
            beat,
        };
        let run = probe(found, a, spec);
        runs.push(run.clone());
        match &run.error {
            Some(e) => {
                found
                    .notes
                    .push(format!("{name}: probe failed, not planned: {e}"));
                dropped.push(i);
            }
            None => {
                set_estimate(found, i, &run);
                warm.push((i, run));
            }
        }
    }
    (runs, warm, dropped)
}

/// Probes each relayed route nothing predicts: one warm-up copy through the relays (TCP, the
/// source server's `/dev/zero` fetched by the first relay and passed on), stopped early when it
/// falls decisively behind the best direct estimate. A route whose probe fails is dropped with
/// a note; small transfers (as for transports) and `--profile-budget 0` probe nothing.
pub fn unknown_routes(found: &mut Found, a: &RequestArgs, flag: Option<f64>) -> Vec<ProbeRun> {
    let unknown = super::routes::unknown(found);
    let small = found
        .facts
        .size
        .is_some_and(|n| n < SMALL_TRANSFER_PROBES * WARM_BYTES * unknown.len() as u64);
    if unknown.is_empty() || flag == Some(0.0) || (small && flag.is_none()) {
        if small && !unknown.is_empty() {
            found.notes.push(
                "too small to be worth probing: relayed routes without history are planned \
                 as unknown"
                    .into(),
            );
        }
        return Vec::new();
    }
    let direct = super::routes::best_direct_bps(&found.facts);
    let mut runs = Vec::new();
    let mut dropped = Vec::new();
    for i in unknown {
        let spec = Spec {
            stage: "route",
            route: i,
            transport: "tcp",
            p: DEFAULT_STREAMS,
            len: WARM_BYTES,
            secs: warm_s(found),
            beat: direct,
        };
        let run = probe(found, a, spec);
        let r = &mut found.facts.routes[i];
        match &run.error {
            Some(e) => {
                found
                    .notes
                    .push(format!("{}: probe failed, not planned: {e}", r.name));
                dropped.push(i);
            }
            None => {
                r.estimate = Some(Estimate {
                    bps: run.bps,
                    source: format!(
                        "probe: {} memory to memory through the relay in {:.2} s just now ({})",
                        human_bytes(run.bytes),
                        run.seconds,
                        human_rate(run.bps)
                    ),
                });
            }
        }
        runs.push(run);
    }
    for i in dropped.into_iter().rev() {
        super::routes::drop_route(found, i);
    }
    runs
}

/// The most transport `i` could deliver on these files at any raw rate: its cost per file alone
/// (infinite without one, or without a known size).
fn cap_bps(found: &Found, i: usize) -> f64 {
    let f = &found.facts;
    let pf = f.transports[i].per_file_s * f.files.max(1) as f64;
    match f.size {
        Some(n) if pf > 0.0 => n as f64 * 8.0 / pf,
        _ => f64::INFINITY,
    }
}

/// The raw rate transport `i` must reach on the direct route to be within reach of the best
/// other estimate on these files (its cost per file counted), when there is one; infinite when
/// its cost per file alone takes longer.
fn beat_for(found: &Found, i: usize) -> Option<f64> {
    let facts = &found.facts;
    let direct = facts.routes.first()?;
    let best = (0..facts.transports.len())
        .filter(|&j| j != i)
        .filter_map(|j| haul_plan::workflow::effective_bps(facts, direct, &facts.transports[j]))
        .reduce(f64::max)?;
    let pf = facts.transports[i].per_file_s * facts.files.max(1) as f64;
    match facts.size {
        Some(n) if n > 0 && pf > 0.0 => {
            let bits = n as f64 * 8.0;
            let left = bits / best - pf;
            // Infinite: no raw rate can make up for its cost per file.
            Some(if left > 0.0 {
                bits / left
            } else {
                f64::INFINITY
            })
        }
        _ => Some(best),
    }
}

/// How far the fastest transport leads the next on this request's files (each one's
/// estimate slowed by its cost per file), when it leads by [`DECISIVE`] or more: longer probes
/// could not change the choice.
fn decisive(found: &Found) -> Option<f64> {
    let direct = found.facts.routes.first()?;
    let mut rates: Vec<f64> = found
        .facts
        .transports
        .iter()
        .filter_map(|t| haul_plan::workflow::effective_bps(&found.facts, direct, t))
        .collect();
    rates.sort_by(|a, b| b.total_cmp(a));
    match rates[..] {
        [a, b, ..] if b > 0.0 && a / b >= DECISIVE => Some(a / b),
        _ => None,
    }
}

/// A transport's estimate from a probe, with haul cp's default streams as its known settings.
fn set_estimate(found: &mut Found, i: usize, run: &ProbeRun) {
    found.facts.transports[i].estimate = Some(Estimate {
        bps: run.bps,
        source: format!(
            "probe: {} memory to memory in {:.2} s just now ({})",
            human_bytes(run.bytes),
            run.seconds,
            human_rate(run.bps)
        ),
    });
    let known = found.best.entry(run.transport.clone()).or_default();
    known.parallelism = Some(run.parallelism);
    known.source = format!("the probe's ({})", human_rate(run.bps));
}

/// The settings of the fastest recent transfer of `transport` on this pair, haul cp's defaults
/// when there is none: what a copy that is not tuned runs with.
pub fn from_history(found: &Found, transport: &str) -> Settings {
    let known = found.best.get(transport).cloned().unwrap_or_default();
    Settings {
        parallelism: known.parallelism,
        tcp_buffer: known.tcp_buffer,
        source: if known.source.is_empty() {
            "nothing known of this pair".into()
        } else {
            known.source
        },
    }
}

/// The settings for the chosen workflow: for TCP on the direct route with time left, FastProf
/// over the stream count from the history's best (or a random start, as 000 §4.5.3 does without
/// one), keeping the best point measured; otherwise the history's best settings.
pub fn tune(
    found: &Found,
    chosen: &Combination,
    a: &RequestArgs,
    left: f64,
    runs: &mut Vec<ProbeRun>,
) -> Settings {
    let t = &found.facts.transports[chosen.transport];
    let known = found.best.get(&t.name).cloned().unwrap_or_default();
    let from_history = from_history(found, &t.name);
    let rate = t.estimate.as_ref().map_or(0.0, |e| e.bps);
    let per = PROBE_S.0.max(left / MAX_TUNE_PROBES as f64).min(PROBE_S.1);
    let probes = ((left / per) as usize).min(MAX_TUNE_PROBES);
    if t.name != "tcp"
        || !found.facts.routes[chosen.route].relays.is_empty()
        || probes < 2
        || rate <= 0.0
    {
        return from_history;
    }
    let space = Space::new(vec![Axis::streams(MAX_STREAMS)]);
    let start = match known.parallelism {
        Some(p) => Start::At(space.to_iterate(&[f64::from(p)])),
        None => Start::Random,
    };
    let mut cfg = SpsaConfig::new(Stopping::new(None).budget(Some(probes)));
    cfg.start = start;
    // The thesis's gains assume y of about 10 units at the link's rate (Gb/s on 10 Gb/s).
    cfg.gain_unit = Some(rate / 10.0);
    let mut opt = Spsa::new(space, cfg, crate::cmd::now_unix() as u64);
    let len = sized(rate, per);
    let (mut best_p, mut best_bps) = (known.parallelism.unwrap_or(DEFAULT_STREAMS), rate);
    // The budget is wall time: each probe's set-up (logins, data connections) counts too.
    let t0 = std::time::Instant::now();
    while let Some(pt) = opt.ask() {
        if t0.elapsed().as_secs_f64() + per > left {
            break;
        }
        let p = (opt.space().to_real(&pt)[0].round() as u32).clamp(1, MAX_STREAMS);
        let spec = Spec {
            stage: "fastprof",
            route: chosen.route,
            transport: &t.name,
            p,
            len,
            secs: per,
            beat: None,
        };
        let run = probe(found, a, spec);
        if run.bps > best_bps {
            (best_p, best_bps) = (p, run.bps);
        }
        let y = run.bps;
        runs.push(run);
        if opt.tell(&pt, y).is_err() {
            break;
        }
    }
    Settings {
        parallelism: Some(best_p),
        tcp_buffer: known.tcp_buffer,
        source: format!(
            "FastProf: best of {} probes ({})",
            runs.iter().filter(|r| r.stage == "fastprof").count(),
            human_rate(best_bps)
        ),
    }
}
