//! `haul plan` and `haul send`: the integrated pipeline of 000 §1 (Fig. 1.1). A request (source,
//! destination, optional size, start, deadline, target rate, cost cap, requirements, weights) is
//! planned by the TSWOP planner over what haul can learn of the two ends and the path (the
//! transports both ends offer, direct and relayed routes with their predictions, operator-priced
//! relays), the chosen transport is profiled on the path when the history has no recent
//! measurement of it, the data moves with the tuned settings and the live concurrency search, and
//! everything is recorded for the next plan. `haul plan` stops after the plan and moves nothing.

mod facts;
mod probe;
mod report;
mod request;
mod routes;
mod settings;
mod steady;
mod trial;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context;
use haul_plan::workflow::{self, Workflow};

pub use request::RequestArgs;

/// Arguments of `haul plan`.
#[derive(clap::Args, Debug)]
pub struct PlanArgs {
    #[command(flatten)]
    pub request: RequestArgs,
    /// Print the plan as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `haul send`.
#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(flatten)]
    pub request: RequestArgs,
    /// Most time profiling may take before the transfer, a duration such as 20s (default: a
    /// tenth of the transfer's predicted time, at most 30 s; transfers smaller than four
    /// 32 MiB warm-up probes per unknown transport are not probed). 0 profiles nothing:
    /// transports without history are planned as unknown.
    #[arg(long, value_parser = super::parse_seconds)]
    pub profile_budget: Option<f64>,
    /// Re-plan when the copy's rate over this window stays under half its prediction while
    /// another workflow is predicted faster (judged after half a window more); 0 never
    /// re-plans.
    #[arg(long, value_parser = super::parse_seconds, default_value = "10s", value_name = "DURATION")]
    pub replan_window: f64,
    /// Print the report as JSON on stdout.
    #[arg(long)]
    pub json: bool,
    /// Print nothing but errors.
    #[arg(short, long)]
    pub quiet: bool,
}

/// Time spent in each stage of `haul send`, seconds.
#[derive(Debug, Default, Clone, serde::Serialize)]
pub struct Stages {
    /// Waiting for the request's earliest start.
    pub wait_s: f64,
    /// Asking the ends and relays, listing the source, reading the history.
    pub discover_s: f64,
    /// Memory-to-memory probes and FastProf.
    pub profile_s: f64,
    /// Solving the TSWOP instance.
    pub plan_s: f64,
    /// The transfer, verification included.
    pub transfer_s: f64,
}

/// Runs `haul plan`.
pub fn run_plan(args: PlanArgs) -> anyhow::Result<ExitCode> {
    let req = args.request.request()?;
    let t = Instant::now();
    let mut found = facts::discover(&req, &args.request, false)?;
    routes::split_threshold(&mut found, args.request.route.threshold);
    let discover_s = t.elapsed().as_secs_f64();
    let wf = workflow::plan(&req, &found.facts).context("planning")?;
    report::print_plan(&req, &found, &wf, discover_s, args.json)?;
    Ok(match wf.chosen {
        Ok(_) => ExitCode::SUCCESS,
        Err(_) => ExitCode::from(super::exit::REFUSED),
    })
}

/// The request as it stands after the stages so far: the deadline is what is left of it (the
/// wait, the discovery and the probes have used the rest), and the start is now.
fn remaining(req: &haul_plan::request::Request, st: &Stages) -> haul_plan::request::Request {
    let mut r = req.clone();
    r.start_after_s = None;
    let used = st.wait_s + st.discover_s + st.profile_s;
    // A deadline already past is kept just above zero, so that the plan refuses it with the
    // predicted time rather than as a malformed request.
    r.deadline_s = req.deadline_s.map(|d| (d - used).max(1e-3));
    r
}

/// Runs `haul send`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let req = args.request.request()?;
    let mut stages = Stages::default();
    if let Some(s) = req.start_after_s {
        if !args.quiet && !args.json {
            eprintln!("haul send: waiting {s:.0} s for the request's earliest start");
        }
        std::thread::sleep(std::time::Duration::from_secs_f64(s));
        stages.wait_s = s;
    }
    let t = Instant::now();
    let mut found = facts::discover(&req, &args.request, true)?;
    stages.discover_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let must_predict = req.deadline_s.is_some() || req.target_bps.is_some();
    // Unknown relayed routes of a large transfer are tried on the real data, TCP direct too.
    let trials = trial::wanted(&found, args.profile_budget);
    let (mut probes, budget) = probe::unknown_transports(
        &mut found,
        &args.request,
        (args.profile_budget, must_predict),
        trials.then_some("tcp"),
    );
    let start = if trials {
        stages.profile_s = t.elapsed().as_secs_f64();
        trial::run(&args, &req, &remaining(&req, &stages), &mut found)?
    } else {
        probes.extend(probe::unknown_routes(
            &mut found,
            &args.request,
            args.profile_budget,
        ));
        trial::Start::default()
    };
    routes::split_threshold(&mut found, args.request.route.threshold);
    // A trial that ran on as the copy moved data after the plan chose it: transfer time.
    stages.profile_s = t.elapsed().as_secs_f64() - start.moved_s;
    stages.transfer_s = start.moved_s;
    let t = Instant::now();
    let wf = workflow::plan(&remaining(&req, &stages), &found.facts).context("planning")?;
    stages.plan_s = t.elapsed().as_secs_f64();
    let chosen = match &wf.chosen {
        Ok(c) => c.clone(),
        Err(why) => {
            report::print_refusal(&req, &found, &wf, why, &stages, args.json)?;
            return Ok(ExitCode::from(super::exit::REFUSED));
        }
    };
    let t = Instant::now();
    let left = (budget - stages.profile_s).max(0.0);
    let settings = probe::tune(&found, &chosen, &args.request, left, &mut probes);
    stages.profile_s += t.elapsed().as_secs_f64();
    let t = Instant::now();
    let (copied, attempts, wf) = transfer(&args, &req, &mut found, (wf, start), &settings)?;
    stages.transfer_s += t.elapsed().as_secs_f64();
    let out = report::Sent {
        req: &req,
        found: &found,
        wf: &wf,
        chosen: &chosen,
        settings: &settings,
        probes: &probes,
        copied: &copied,
        attempts: &attempts,
        stages: &stages,
    };
    out.print(args.json, args.quiet)?;
    Ok(ExitCode::SUCCESS)
}

/// Re-plans per `haul send`.
const MAX_REPLANS: usize = 2;

/// One copy of a `haul send`: the first, or one after a re-plan.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Attempt {
    /// The route's name.
    pub route: String,
    /// The transport.
    pub transport: String,
    /// The plan's prediction, bits per second.
    pub predicted_bps: Option<f64>,
    /// Files that arrived (verified).
    pub files: u64,
    /// Bytes moved.
    pub bytes: u64,
    /// Seconds.
    pub seconds: f64,
    /// Why it was stopped, when it was.
    pub stopped: Option<String>,
    /// A trial of the route on the real data before the plan.
    pub trial: bool,
}

/// Stops a copy that falls far behind its prediction while another workflow is predicted
/// faster than it gets ([`super::cp::falling_behind`] over `window` seconds), or that falls
/// behind a `rival` measured on the real data ([`trial::losing`]). None when neither can apply.
fn watchdog(
    (predicted, alternative): (Option<f64>, Option<f64>),
    rival: Option<f64>,
    window: f64,
) -> Option<super::cp::Watchdog> {
    let behind = predicted.zip(alternative);
    if behind.is_none() && rival.is_none() {
        return None;
    }
    let mut slow = behind.map(|(p, a)| super::cp::falling_behind(p, a, window));
    let (_, dog) = steady::watched(move |st, s| {
        slow.as_mut()
            .and_then(|f| f(s))
            .or_else(|| rival.and_then(|r| trial::losing(st, r)))
    });
    Some(dog)
}

/// The best prediction of a runnable combination other than `c`.
fn alternative(wf: &Workflow, c: &workflow::Combination) -> Option<f64> {
    best_other(wf, c, |_| true)
}

/// The best prediction of a runnable combination other than `c` that `keep` accepts.
fn best_other(
    wf: &Workflow,
    c: &workflow::Combination,
    keep: impl Fn(&workflow::Combination) -> bool,
) -> Option<f64> {
    wf.combinations
        .iter()
        .filter(|o| (o.route, o.transport) != (c.route, c.transport))
        .filter(|o| matches!(o.verdict, workflow::Verdict::LowerProfit) && keep(o))
        .filter_map(|o| o.predicted_bps)
        .reduce(f64::max)
}

/// A stopped copy's live rate as an estimate.
fn live_estimate(s: &haul_xfer::Summary) -> workflow::Estimate {
    workflow::Estimate {
        bps: s.mean_bps(),
        source: format!(
            "live: {} over {:.1} s, then stopped",
            super::human_rate(s.mean_bps()),
            s.duration_s
        ),
    }
}

/// Sets `est` where the plan reads combination `(route, transport)`'s rate: a relayed route's
/// own estimate, or the transport's on the direct route.
fn set_estimate(
    found: &mut facts::Found,
    (route, transport): (usize, usize),
    est: workflow::Estimate,
) {
    if found.facts.routes[route].relays.is_empty() {
        found.facts.transports[transport].estimate = Some(est);
    } else {
        found.facts.routes[route].estimate = Some(est);
    }
}

/// The copies of a `haul send`: the planned one, watched; when it falls far behind its
/// prediction and another workflow promises more, it is stopped, its live rate replaces the
/// estimate it was planned on, the request is planned again, and the files it still owed
/// continue from what arrived (`--resume`) on the new plan's route and transport. Returns the
/// last copy (its summary counting every attempt), the attempts and the plan in force.
fn transfer(
    args: &Args,
    req: &haul_plan::request::Request,
    found: &mut facts::Found,
    (mut wf, start): (Workflow, trial::Start),
    settings: &probe::Settings,
) -> anyhow::Result<(super::cp::Copied, Vec<Attempt>, Workflow)> {
    let mut attempts: Vec<Attempt> = start.attempts;
    let mut only = start.only;
    if let Some(copied) = start.finished {
        return Ok((finish(copied, &attempts), attempts, wf));
    }
    loop {
        let chosen = wf.chosen.clone().map_err(|e| anyhow::anyhow!(e))?;
        let first = attempts
            .iter()
            .find(|a| !a.trial)
            .map(|a| a.transport.clone());
        let same = first
            .as_deref()
            .is_none_or(|t| t == found.facts.transports[chosen.transport].name);
        // Trials are not re-plans.
        let replans = attempts.iter().filter(|a| !a.trial).count();
        let dog = (replans < MAX_REPLANS && args.replan_window > 0.0)
            .then(|| {
                watchdog(
                    (chosen.predicted_bps, alternative(&wf, &chosen)),
                    trial::rival(&found.facts, &wf, &chosen),
                    args.replan_window,
                )
            })
            .flatten();
        let mut copied = copy(
            args,
            req,
            found,
            wf.solver,
            &chosen,
            settings.clone().only_if(same),
            (dog, only.take()),
        )?;
        let s = &copied.summary;
        attempts.push(Attempt {
            route: found.facts.routes[chosen.route].name.clone(),
            transport: found.facts.transports[chosen.transport].name.clone(),
            predicted_bps: chosen.predicted_bps,
            files: s.files,
            bytes: s.bytes,
            seconds: s.duration_s,
            stopped: copied.stopped.as_ref().map(|x| x.why.clone()),
            trial: false,
        });
        let Some(stop) = copied.stopped.take() else {
            return Ok((finish(copied, &attempts), attempts, wf));
        };
        set_estimate(found, (chosen.route, chosen.transport), live_estimate(s));
        if !args.quiet && !args.json {
            eprintln!("haul send: re-planning: {}", stop.why);
        }
        // What is left must move either way: the re-plan looks for the fastest way to finish,
        // without the deadline and target that would refuse it.
        let mut rest = req.clone();
        (rest.deadline_s, rest.target_bps, rest.start_after_s) = (None, None, None);
        wf = workflow::plan(&rest, &found.facts).context("re-planning")?;
        if wf.chosen.is_err() {
            // Nothing else can run: continue on the same workflow, unwatched.
            wf.chosen = Ok(chosen);
        }
        only = Some(stop.missing.into_iter().collect());
    }
}

/// The last copy of a send with the totals of every attempt (the last one included).
fn finish(mut copied: super::cp::Copied, attempts: &[Attempt]) -> super::cp::Copied {
    let done = &attempts[..attempts.len().saturating_sub(1)];
    copied.summary.files += done.iter().map(|a| a.files).sum::<u64>();
    copied.summary.verified += done.iter().map(|a| a.files).sum::<u64>();
    copied.summary.bytes += done.iter().map(|a| a.bytes).sum::<u64>();
    copied.summary.duration_s += done.iter().map(|a| a.seconds).sum::<f64>();
    copied
}

/// One copy on `chosen`'s route and transport with `settings`, the live concurrency search
/// for many files over TCP, recorded as kind `send` with the plan beside it; with `only`, just
/// those files, continuing from what arrived.
pub(super) fn copy(
    args: &Args,
    req: &haul_plan::request::Request,
    found: &mut facts::Found,
    solver: &str,
    chosen: &workflow::Combination,
    settings: probe::Settings,
    (dog, only): (
        Option<super::cp::Watchdog>,
        Option<std::collections::HashSet<String>>,
    ),
) -> anyhow::Result<super::cp::Copied> {
    let (src, dst) = &found.urls[chosen.route];
    let transport = &found.facts.transports[chosen.transport].name;
    let mut words: Vec<String> = vec![src.clone(), dst.clone(), "-r".into()];
    words.extend(["--transport".into(), transport.clone()]);
    words.extend(settings.words());
    if transport == "tcp" && found.files > 1 {
        words.push("--tune".into());
    }
    if only.is_some() {
        words.push("--resume".into());
    }
    words.extend(args.request.common_words());
    if args.quiet || args.json {
        words.push("-q".into());
    }
    let mut cp = super::cp::args_from(&words).context("the planned copy's settings")?;
    if found.facts.routes[chosen.route].relays.is_empty() {
        // The first direct copy reuses the discovery's listing.
        cp.planned = found.planned.take();
    }
    cp.kind = Some("send");
    cp.watchdog = dog;
    cp.only = only;
    cp.send = Some(serde_json::json!({
        "route": found.facts.routes[chosen.route].name,
        "transport": transport,
        "predicted_bps": chosen.predicted_bps,
        "predicted_s": chosen.predicted_s,
        "solver": solver,
        "deadline_s": req.deadline_s,
    }));
    tracing::info!(?words, "haul send: copying");
    super::cp::copy(cp)
}

/// The history database a request reads and writes.
fn history_path(p: &Option<PathBuf>) -> PathBuf {
    p.clone().unwrap_or_else(haul_store::Store::default_path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plan_sees_what_is_left_of_the_deadline() {
        let mut req = haul_plan::request::Request::new("ftp://a/x", "/tmp/x");
        (req.start_after_s, req.deadline_s) = (Some(5.0), Some(60.0));
        let st = Stages {
            wait_s: 5.0,
            discover_s: 2.0,
            profile_s: 3.0,
            ..Stages::default()
        };
        let r = remaining(&req, &st);
        assert_eq!((r.start_after_s, r.deadline_s), (None, Some(50.0)));
        assert_eq!(r.window_s(), Some(50.0));
        // Past already: kept just above zero, so the plan refuses it with its prediction.
        req.deadline_s = Some(8.0);
        assert_eq!(remaining(&req, &st).deadline_s, Some(1e-3));
        assert!(remaining(&req, &st).validate().is_ok());
    }
}
