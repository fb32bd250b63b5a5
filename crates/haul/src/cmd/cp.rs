//! `haul cp SRC DST`: plan the files, run the engine with a progress bar, verify, record the
//! transfer in the history store, and print a summary (or JSON).

mod args;
mod plan;
mod progress;
mod report;
mod watch;

use std::process::ExitCode;

use haul_xfer::{Endpoint, RemoteUrl};

pub use args::{Args, Watchdog};
pub use watch::falling_behind;

/// Runs `haul cp`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let done = copy(args)?;
    report::print(&done.args, &done.opts, &done.summary, &done.tuning)?;
    Ok(ExitCode::SUCCESS)
}

/// A finished copy: what was asked (with the route's URLs), the options in effect, what moved
/// and the live tuner's steps.
pub struct Copied {
    /// The arguments, with the source and destination the route chose.
    pub args: Args,
    /// The engine's options.
    pub opts: haul_xfer::Options,
    /// What moved.
    pub summary: haul_xfer::Summary,
    /// The live tuner's steps (empty without `--tune`).
    pub tuning: Vec<haul_xfer::autotune::TuneStep>,
    /// Set when the watchdog stopped the copy: the summary is then what had moved by then.
    pub stopped: Option<watch::Stopped>,
}

/// Copies, verifies and records in the history, printing nothing but the progress (the bar,
/// or with `--progress json` the events, the `end` one whatever the outcome): `haul cp`
/// without its summary, for `haul send`.
pub fn copy(mut args: Args) -> anyhow::Result<Copied> {
    let events = progress::Events::for_args(&args);
    args.events = events.clone();
    let r = routed(args);
    if let Some(e) = events {
        e.end(&r);
    }
    r
}

/// [`copy`] on the route `--route` names or chooses. With `--route auto`, a copy that falls far
/// behind its route's prediction while the other route is predicted faster
/// ([`falling_behind`] over `--reroute-window`) is stopped and continues, once, on the other
/// route from what arrived (`--resume`): through the best chain when it went direct below
/// the threshold, direct when it went through relays.
fn routed(mut args: Args) -> anyhow::Result<Copied> {
    let (src, dst) = (args.src.clone(), args.dst.clone());
    let (s, d, chosen, sessions) = crate::cmd::route::for_cp(
        &src,
        &dst,
        &args.route,
        &args.route_choice,
        &args.history,
        &args.ca,
    )?;
    let other = chosen.as_ref().and_then(other_route);
    let watch = args.watchdog.is_none() && args.reroute_window > 0.0;
    if let (Some(r), Some((_, alt_bps, _)), true) = (&chosen, &other, watch) {
        let mut behind = falling_behind(r.predicted_bps, *alt_bps, args.reroute_window);
        args.watchdog = Some(Watchdog(Box::new(move |x| behind(x))));
    }
    let first = copy_with(args, (s, d, chosen), sessions)?;
    let (Some(stop), Some((relays, _, legs_bps))) = (&first.stopped, other) else {
        return Ok(first);
    };
    let mut args = first.args;
    let ids: Vec<&str> = relays.iter().map(String::as_str).collect();
    let urls = crate::cmd::route::relay_urls(ids, &src, &dst)?;
    let refs: Vec<&RemoteUrl> = urls.iter().collect();
    let (s, d) = crate::cmd::route::through_route(&src, &dst, &refs)?;
    if !args.quiet && !args.json {
        eprintln!("haul cp: re-routing: {}", stop.why);
    }
    args.rerouted = Some(serde_json::json!({
        "from": crate::cmd::route(&args.src),
        "why": stop.why,
        "bytes": first.summary.bytes,
        "seconds": first.summary.duration_s,
    }));
    args.chosen = (!relays.is_empty()).then(|| (relays.clone(), legs_bps));
    (args.watchdog, args.resume) = (None, true);
    args.only = Some(stop.missing.iter().cloned().collect());
    let mut then = copy_with(args, (s, d, None), Vec::new())?;
    let (a, b) = (&first.summary, &mut then.summary);
    b.files += a.files;
    b.verified += a.verified;
    b.bytes += a.bytes;
    b.duration_s += a.duration_s;
    Ok(then)
}

/// The route a `--route auto` copy would re-route to: the best chain when it went direct under
/// the threshold, direct when it went through relays; with its prediction as judged (what the
/// copy is compared with) and its narrowest leg before discounts and risk (what is recorded).
fn other_route(r: &haul_overlay::route::Route) -> Option<(Vec<String>, f64, f64)> {
    use haul_overlay::route::Reason;
    match &r.reason {
        Reason::BelowThreshold {
            best_chain,
            chain_bps,
            legs_bps,
            ..
        } => {
            let relays = best_chain.get(1..best_chain.len().saturating_sub(1))?;
            (!relays.is_empty()).then(|| (relays.to_vec(), *chain_bps, *legs_bps))
        }
        _ if !r.relays().is_empty() => r.direct_bps.map(|d| (Vec::new(), d, d)),
        _ => None,
    }
}

/// One copy on the route already resolved: its source, destination and the route `--route
/// auto` chose.
fn copy_with(
    mut args: Args,
    (src, dst, chosen): (String, String, Option<haul_overlay::route::Route>),
    sessions: Vec<haul_xfer::session::Session>,
) -> anyhow::Result<Copied> {
    if let Some(r) = &chosen {
        tracing::info!(hops = ?r.hops, predicted_bps = r.predicted_bps, "route chosen");
        if !r.relays().is_empty() {
            // A relay's overhead is learned against the legs' own predictions (`learn_discount`),
            // so the record must not carry the discounts and risk it was chosen with.
            let legs_bps = r.legs_bps().unwrap_or(r.predicted_bps);
            args.chosen = Some((r.relays().to_vec(), legs_bps));
        }
    }
    (args.src, args.dst) = (src, dst);
    let src = Endpoint::parse(&args.src)?;
    let dst = Endpoint::parse(&args.dst)?;
    let tls = plan::client_tls(&args, &src, &dst)?;
    let mut opts = plan::options(&args, tls)?;
    // The route chooser's logins to the first hops carry the copy (`--route auto`).
    for s in sessions {
        opts.spare.park(s);
    }
    opts.clustering = plan::clustering(&args, &src, &dst, &opts);
    opts.plut_start = plan::plut_start(&args, &src, &dst, &opts);
    if let Some(s) = opts.plut_start {
        tracing::info!(
            start_bps = s * 8,
            "PLUT starts from the rate history gives this path"
        );
    }
    let started_at = report::now_unix();
    let tune = args.tune.then(|| watch::tune_config(&args, &src, &dst));
    let mut tuning = Vec::new();
    let mut stopped = None;
    let planned = match args.planned.take() {
        Some(p) => Ok(*p),
        None => haul_xfer::plan::plan(&src, &dst, &plan::plan_options(&args, &opts)),
    };
    let result = planned.and_then(|(route, mut jobs)| {
        if let Some(only) = &args.only {
            jobs.retain(|j| only.contains(&j.dst));
        }
        watch::transfer(
            &mut args,
            &opts,
            route,
            jobs,
            tune,
            &mut tuning,
            &mut stopped,
        )
    });
    report::record(
        &args,
        &src,
        &dst,
        &opts,
        started_at,
        (&result, &stopped),
        &tuning,
    );
    let summary = result?;
    Ok(Copied {
        args,
        opts,
        summary,
        tuning,
        stopped,
    })
}

/// `haul cp` arguments from words, as on its command line after `haul cp` (for `haul send`,
/// which runs copies with the settings it chose).
pub fn args_from<I, T>(words: I) -> anyhow::Result<Args>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    use clap::Parser;
    #[derive(clap::Parser)]
    struct Cp {
        #[command(flatten)]
        args: Args,
    }
    let words = std::iter::once(std::ffi::OsString::from("haul-cp"))
        .chain(words.into_iter().map(Into::into));
    Ok(Cp::try_parse_from(words)?.args)
}

#[cfg(test)]
mod tests;
