//! Trials on the real data: when relayed routes are unknown, short memory-to-memory probes judge
//! them badly (a relay adds a login to the origin and a second slow start, and a few seconds of a
//! path with cross traffic say little), and their bytes are thrown away. So a large transfer
//! is instead started on each candidate in turn, TCP direct first, then each unknown relayed
//! route, for [`TRIAL_S`] seconds after its first byte each, and every byte that arrives is
//! kept: the next trial and the planned copy continue from it (`--resume`). Each candidate's
//! steady rate (after the first byte) becomes its estimate, measured the same way on the same
//! data, so the plan compares like with like; a trial costs only its set-up and ramp.

use std::collections::HashSet;

use haul_plan::workflow::{Combination, Estimate, Verdict};

use super::facts::Found;
use super::probe::{Settings, SMALL_TRANSFER_PROBES, WARM_BYTES};
use super::routes::unknown;
use super::steady::watched;
use super::{copy, Args, Attempt};
use crate::cmd::human_rate;

/// Seconds of data each trial runs for, at least; longer on long paths ([`TRIAL_RTTS`]).
const TRIAL_S: f64 = 5.0;
/// Round trips of data each trial spans, at least.
const TRIAL_RTTS: f64 = 40.0;

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

/// Runs the trials (see the module) and sets each candidate's estimate from its trial.
pub fn run(
    args: &Args,
    req: &haul_plan::request::Request,
    found: &mut Found,
) -> anyhow::Result<Start> {
    let tcp = found
        .facts
        .transports
        .iter()
        .position(|t| t.name == "tcp")
        .expect("wanted() checked");
    let secs = TRIAL_S.max(TRIAL_RTTS * found.rtt_s.unwrap_or(0.0));
    let mut start = Start::default();
    for route in std::iter::once(0).chain(unknown(found)) {
        let chosen = Combination {
            route,
            transport: tcp,
            profit: 0.0,
            cost: u64::from(found.facts.routes[route].cost),
            predicted_bps: None,
            predicted_s: None,
            verdict: Verdict::Chosen,
        };
        let (steady, dog) = watched(move |st, _| {
            (st.seconds() >= secs).then(|| format!("the trial's {secs:.1} s are up"))
        });
        let defaults = Settings {
            parallelism: None,
            tcp_buffer: None,
            source: String::new(),
        };
        let mut copied = copy(
            args,
            req,
            found,
            "trial",
            &chosen,
            defaults,
            (Some(dog), start.only.take()),
        )?;
        let s = &copied.summary;
        let bps = steady.borrow().bps().unwrap_or_else(|| s.mean_bps());
        let name = found.facts.routes[route].name.clone();
        start.attempts.push(Attempt {
            route: name.clone(),
            transport: "tcp".into(),
            predicted_bps: None,
            files: s.files,
            bytes: s.bytes,
            seconds: s.duration_s,
            stopped: copied.stopped.as_ref().map(|x| x.why.clone()),
            trial: true,
        });
        let est = Estimate {
            bps,
            source: format!(
                "trial: {:.1} s of the real copy {} just now ({})",
                steady.borrow().seconds(),
                if route == 0 { "direct" } else { &name },
                human_rate(bps)
            ),
        };
        tracing::info!(route = %name, bps, "haul send: trial");
        if route == 0 {
            found.facts.transports[tcp].estimate = Some(est);
            let known = found.best.entry("tcp".into()).or_default();
            known.source = format!("haul cp's defaults, tried ({})", human_rate(bps));
        } else {
            found.facts.routes[route].estimate = Some(est);
        }
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
