//! Trials on the real data: when relayed routes are unknown, short memory-to-memory probes judge
//! them badly (a relay adds a login to the origin and a second slow start, and a few seconds of a
//! path with cross traffic say little), and their bytes are thrown away. So a large transfer
//! is instead started on each candidate in turn, TCP direct first, then each unknown relayed
//! route, for [`TRIAL_S`] seconds after its first byte each, and every byte that arrives is
//! kept: the next trial and the planned copy continue from it (`--resume`). Each candidate's
//! steady rate (after the first byte) becomes its estimate, measured the same way on the same
//! data, so the plan compares like with like; a trial costs only its set-up and ramp.
//!
//! The last trial is not stopped when the plan, given its rate, would choose it (its route is
//! relayed, so the planned copy would run with the same settings): it becomes the copy, and its
//! set-up and ramp are not paid twice. A few seconds of a path with bursty cross traffic can
//! still rank two routes wrongly (two trials within 0.3 % of each other did, in
//! bench/results/send-netem-20261202T101845Z), so a copy chosen over a rival measured on the
//! real data is judged against it ([`losing`]) and re-planned when it falls clearly behind.

use std::cell::Cell;
use std::collections::HashSet;
use std::rc::Rc;
use std::time::Instant;

use haul_plan::request::Request;
use haul_plan::workflow::{self, Combination, Estimate, Facts, Verdict, Workflow};

use super::facts::Found;
use super::probe::{from_history, Settings, SMALL_TRANSFER_PROBES, WARM_BYTES};
use super::routes::unknown;
use super::steady::{watched, Steady};
use super::{copy, Args, Attempt};
use crate::cmd::human_rate;

/// Seconds of data each trial runs for, at least; longer on long paths ([`TRIAL_RTTS`]).
const TRIAL_S: f64 = 5.0;
/// Round trips of data each trial spans, at least.
const TRIAL_RTTS: f64 = 40.0;
/// Seconds of its own data (from its first byte) after which a copy chosen over a measured
/// rival is judged against it, on its mean rate since that byte.
const CONTEST_S: f64 = 20.0;
/// How far the rival's measured rate must be above the copy's mean for a re-plan.
const CONTEST_MARGIN: f64 = 1.2;

/// Where the planned copy starts: the trials' attempts, the files still owed, or the copy that
/// finished the transfer during a trial.
#[derive(Default)]
pub struct Start {
    /// The trials, in order.
    pub attempts: Vec<Attempt>,
    /// Destinations still owed (None: all of them, nothing was tried).
    pub only: Option<HashSet<String>>,
    /// A trial that moved everything.
    pub finished: Option<crate::cmd::cp::Copied>,
    /// Seconds the last trial ran on as the copy, after the plan chose it.
    pub moved_s: f64,
}

/// Whether to try routes on the real data: some relayed route is unknown, TCP is planned, and
/// the transfer is large enough to be probed at all (as for probes: four warm-ups' worth per
/// candidate); `--profile-budget 0` tries nothing.
pub fn wanted(found: &Found, flag: Option<f64>) -> bool {
    let n = unknown(found).len() as u64;
    n > 0
        && flag != Some(0.0)
        && found.facts.transports.iter().any(|t| t.name == "tcp")
        && found
            .facts
            .size
            .is_some_and(|s| s >= SMALL_TRANSFER_PROBES * WARM_BYTES * (n + 1))
}

/// Runs the trials (see the module) and sets each candidate's estimate from its trial. `plan`
/// is the request as the plan after the trials will see it (what is left of the deadline now).
pub fn run(args: &Args, req: &Request, plan: &Request, found: &mut Found) -> anyhow::Result<Start> {
    let tcp = found
        .facts
        .transports
        .iter()
        .position(|t| t.name == "tcp")
        .expect("wanted() checked");
    let secs = TRIAL_S.max(TRIAL_RTTS * found.rtt_s.unwrap_or(0.0));
    let candidates: Vec<usize> = std::iter::once(0).chain(unknown(found)).collect();
    let mut start = Start::default();
    for (k, &route) in candidates.iter().enumerate() {
        let chosen = Combination {
            route,
            transport: tcp,
            profit: 0.0,
            cost: u64::from(found.facts.routes[route].cost),
            predicted_bps: None,
            predicted_s: None,
            verdict: Verdict::Chosen,
        };
        // The last, relayed, may become the copy: it runs with the copy's settings.
        let judge = (k + 1 == candidates.len() && route != 0).then(|| Judge {
            facts: found.facts.clone(),
            plan: plan.clone(),
            since: Instant::now(),
            route,
            tcp,
        });
        let settings = match judge {
            Some(_) => from_history(found, "tcp"),
            None => Settings {
                parallelism: None,
                tcp_buffer: None,
                source: String::new(),
            },
        };
        let kept = Rc::new(Cell::new(None));
        let (steady, dog) = watched(trial_dog(secs, judge, kept.clone()));
        let mut copied = copy(
            args,
            req,
            found,
            "trial",
            &chosen,
            settings,
            (Some(dog), start.only.take()),
        )?;
        let s = &copied.summary;
        let name = found.facts.routes[route].name.clone();
        let kept: Option<(f64, Instant)> = kept.get();
        start.attempts.push(Attempt {
            route: name.clone(),
            transport: "tcp".into(),
            predicted_bps: kept.map(|k| k.0),
            files: s.files,
            bytes: s.bytes,
            seconds: s.duration_s,
            stopped: copied.stopped.as_ref().map(|x| x.why.clone()),
            trial: kept.is_none(),
        });
        let est = match kept {
            // It ran on as the copy: its trial's rate, unless it was stopped behind its rival.
            Some((bps, at)) => {
                start.moved_s = at.elapsed().as_secs_f64();
                match &copied.stopped {
                    None => trial_estimate(bps, secs, &name),
                    Some(_) => super::live_estimate(s),
                }
            }
            None => {
                let st = steady.borrow();
                let bps = st.bps().unwrap_or_else(|| s.mean_bps());
                trial_estimate(bps, st.seconds(), &name)
            }
        };
        tracing::info!(route = %name, bps = est.bps, kept = kept.is_some(), "haul send: trial");
        settle(found, (route, tcp), est);
        match copied.stopped.take() {
            Some(stop) => start.only = Some(stop.missing.into_iter().collect()),
            None => {
                start.finished = Some(copied);
                break;
            }
        }
    }
    Ok(start)
}

/// Sets what a trial measured as the estimate of its route (direct: of TCP on it).
fn settle(found: &mut Found, (route, tcp): (usize, usize), est: Estimate) {
    if route == 0 {
        let known = found.best.entry("tcp".into()).or_default();
        known.source = format!("haul cp's defaults, tried ({})", human_rate(est.bps));
    }
    super::set_estimate(found, (route, tcp), est);
}

/// A trial's estimate of route `name`: `bps` over its `secs` after the first byte.
fn trial_estimate(bps: f64, secs: f64, name: &str) -> Estimate {
    Estimate {
        bps,
        source: format!(
            "trial: {secs:.1} s of the real copy {} just now ({})",
            if name == "direct" { "direct" } else { name },
            human_rate(bps)
        ),
    }
}

/// A trial's watchdog: stops it `secs` after its first byte, unless `judge` says the plan
/// would choose it; then it runs on as the copy (its rate then and the time go to `kept`),
/// judged against its rival ([`losing`]).
fn trial_dog(
    secs: f64,
    mut judge: Option<Judge>,
    kept: Rc<Cell<Option<(f64, Instant)>>>,
) -> impl FnMut(&Steady, &haul_xfer::engine::Sample) -> Option<String> + 'static {
    let mut rival = None;
    move |st, _| {
        if st.seconds() < secs {
            return None;
        }
        if kept.get().is_some() {
            return rival.and_then(|r| losing(st, r));
        }
        let bps = st.bps()?;
        match judge.as_mut().and_then(|j| j.chooses(bps)) {
            Some(r) => {
                tracing::info!(
                    bps,
                    rival = r,
                    "haul send: the last trial runs on as the copy"
                );
                kept.set(Some((bps, Instant::now())));
                rival = r;
                None
            }
            None => Some(format!("the trial's {secs:.1} s are up")),
        }
    }
}

/// What the last trial needs to ask the plan whether it would choose it.
struct Judge {
    facts: Facts,
    plan: Request,
    since: Instant,
    route: usize,
    tcp: usize,
}

impl Judge {
    /// With the trial's rate `bps`, whether the plan chooses its route and TCP; then the rival
    /// it is judged against from here on (None: no measured rival).
    fn chooses(&mut self, bps: f64) -> Option<Option<f64>> {
        let name = self.facts.routes[self.route].name.clone();
        self.facts.routes[self.route].estimate = Some(trial_estimate(bps, 0.0, &name));
        let mut req = self.plan.clone();
        let used = self.since.elapsed().as_secs_f64();
        req.deadline_s = req.deadline_s.map(|d| (d - used).max(1e-3));
        let wf = workflow::plan(&req, &self.facts).ok()?;
        let c = wf.chosen.as_ref().ok()?;
        ((c.route, c.transport) == (self.route, self.tcp)).then(|| rival(&self.facts, &wf, c))
    }
}

/// Whether a combination's estimate was measured on the real data (a trial, or a copy's live
/// rate before a re-plan).
fn measured(facts: &Facts, c: &Combination) -> bool {
    let est = workflow::combined_estimate(&facts.routes[c.route], &facts.transports[c.transport]);
    est.is_some_and(|e| e.source.starts_with("trial:") || e.source.starts_with("live:"))
}

/// The best predicted rate of a runnable combination other than `chosen` that was measured on
/// the real data (trials, live copies): the rival a copy chosen by such measurements is judged
/// against.
pub fn rival(facts: &Facts, wf: &Workflow, chosen: &Combination) -> Option<f64> {
    super::best_other(wf, chosen, |o| measured(facts, o))
}

/// Why a copy should give way to a rival measured at `rival` b/s: once it has moved
/// [`CONTEST_S`] seconds of data, its mean rate since its first byte is under the rival's by
/// more than [`CONTEST_MARGIN`]. Over that span bursts of cross traffic that ranked two short
/// trials wrongly average out.
pub fn losing(st: &Steady, rival: f64) -> Option<String> {
    let bps = st.bps()?;
    (st.seconds() >= CONTEST_S && bps * CONTEST_MARGIN < rival).then(|| {
        format!(
            "{} over {:.0} s, under the {} another route or transport measured on this data",
            human_rate(bps),
            st.seconds(),
            human_rate(rival)
        )
    })
}

#[cfg(test)]
mod tests {
    use haul_plan::workflow::{RouteOption, TransportOption};
    use haul_xfer::engine::Sample;

    use super::*;

    /// Direct and one relay, TCP only, 256 MiB; `direct` and `relay` estimates as given.
    fn facts(direct: Option<(f64, &str)>, relay: Option<(f64, &str)>) -> Facts {
        let est = |e: Option<(f64, &str)>| {
            e.map(|(bps, source)| Estimate {
                bps,
                source: source.into(),
            })
        };
        let route = |name: &str, relays: Vec<String>, estimate| RouteOption {
            name: name.into(),
            relays,
            estimate,
            encrypted: false,
            cost: 0,
        };
        Facts {
            routes: vec![
                route("direct", vec![], None),
                route("via r:2811", vec!["r:2811".into()], est(relay)),
            ],
            transports: vec![TransportOption {
                name: "tcp".into(),
                estimate: est(direct),
                encrypted: false,
                relayable: true,
                per_file_s: 0.0,
            }],
            size: Some(256 << 20),
            files: 1,
            setup_s: 0.0,
        }
    }

    /// Feeds samples every 100 ms at `bps` over `span` (seconds) to `dog`; when and why it stops.
    fn feed(
        dog: &mut impl FnMut(&Steady, &Sample) -> Option<String>,
        st: &mut Steady,
        span: (f64, f64),
        bps: f64,
    ) -> Option<(f64, String)> {
        let mut t = span.0;
        while t < span.1 {
            t += 0.1;
            let s = Sample {
                t_s: t,
                bytes: (bps / 8.0 * 0.1) as u64,
                bps,
            };
            st.add(&s);
            if let Some(why) = dog(st, &s) {
                return Some((t, why));
            }
        }
        None
    }

    fn judge(direct_bps: f64) -> Judge {
        Judge {
            facts: facts(
                Some((direct_bps, "trial: 5.0 s of the real copy direct")),
                None,
            ),
            plan: Request::new("ftp://a:2811/f", "/tmp/f"),
            since: Instant::now(),
            route: 1,
            tcp: 0,
        }
    }

    #[test]
    fn a_trial_without_a_judge_stops_when_its_time_is_up() {
        let kept = Rc::new(Cell::new(None));
        let mut dog = trial_dog(5.0, None, kept.clone());
        let mut st = Steady::default();
        let (t, why) = feed(&mut dog, &mut st, (0.0, 30.0), 30e6).expect("stopped");
        assert!((t - 5.1).abs() < 0.15, "{t}");
        assert!(why.contains("5.0 s are up"), "{why}");
        assert!(kept.get().is_none());
    }

    #[test]
    fn the_last_trial_runs_on_when_the_plan_would_choose_it_and_yields_when_it_falls_behind() {
        // It leads direct's trial (20 Mb/s): it runs on as the copy, its rival direct.
        let kept = Rc::new(Cell::new(None));
        let mut dog = trial_dog(5.0, Some(judge(20e6)), kept.clone());
        let mut st = Steady::default();
        assert_eq!(feed(&mut dog, &mut st, (0.0, 10.0), 30e6), None);
        let (bps, _) = kept.get().expect("kept");
        assert!((bps - 30e6).abs() < 1e6, "{bps}");
        // Then it slows to 5 Mb/s: its mean since the first byte falls under 20 / 1.2 Mb/s
        // after 21.4 s, and it gives way.
        let (t, why) = feed(&mut dog, &mut st, (10.0, 60.0), 5e6).expect("yields");
        assert!(t > 21.0 && t < 22.0, "{t}");
        assert!(why.contains("under"), "{why}");
    }

    #[test]
    fn the_last_trial_stops_when_the_plan_would_choose_another() {
        let kept = Rc::new(Cell::new(None));
        let mut dog = trial_dog(5.0, Some(judge(40e6)), kept.clone());
        let mut st = Steady::default();
        let (t, _) = feed(&mut dog, &mut st, (0.0, 30.0), 30e6).expect("stopped");
        assert!(t < 5.5, "{t}");
        assert!(kept.get().is_none());
    }

    #[test]
    fn a_copy_is_judged_against_its_rival_only_after_enough_data() {
        let mut st = Steady::default();
        let mut dog = |st: &Steady, _: &Sample| losing(st, 13e6);
        // 10 Mb/s against 13: behind by more than the margin, but only judged after 20 s.
        let (t, _) = feed(&mut dog, &mut st, (0.0, 60.0), 10e6).expect("judged");
        assert!((t - 20.1).abs() < 0.15, "{t}");
        let mut st = Steady::default();
        let mut dog = |st: &Steady, _: &Sample| losing(st, 11e6);
        assert_eq!(
            feed(&mut dog, &mut st, (0.0, 60.0), 10e6),
            None,
            "within the margin"
        );
    }

    #[test]
    fn only_rivals_measured_on_the_real_data_count() {
        let req = Request::new("ftp://a:2811/f", "/tmp/f");
        for (source, counts) in [
            ("trial: 5.0 s of the real copy direct just now", true),
            ("live: 20 Mb/s over 30 s, then stopped", true),
            ("prediction: direct leg", false),
            ("history: median of 5 copies", false),
        ] {
            let f = facts(Some((20e6, source)), Some((30e6, "trial: via r")));
            let wf = workflow::plan(&req, &f).unwrap();
            let c = wf.chosen.as_ref().unwrap();
            assert_eq!(c.route, 1, "{source}");
            assert_eq!(rival(&f, &wf, c), counts.then_some(20e6), "{source}");
        }
    }
}
