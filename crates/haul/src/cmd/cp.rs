//! `haul cp SRC DST`: plan the files, run the engine with a progress bar, verify, record the
//! transfer in the history store, and print a summary (or JSON).

mod args;
mod plan;
mod progress;
mod report;
mod watch;

use std::process::ExitCode;

use haul_xfer::Endpoint;

pub use args::{Args, Watchdog};

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
    let r = copy_with(args);
    if let Some(e) = events {
        e.end(&r);
    }
    r
}

/// [`copy`], with the events already in `args`.
fn copy_with(mut args: Args) -> anyhow::Result<Copied> {
    let (src, dst, chosen) = crate::cmd::route::for_cp(
        &args.src,
        &args.dst,
        &args.route,
        &args.route_choice,
        &args.history,
        &args.ca,
    )?;
    if let Some(r) = &chosen {
        tracing::info!(hops = ?r.hops, predicted_bps = r.predicted_bps, "route chosen");
        if !r.relays().is_empty() {
            args.chosen = Some((r.relays().to_vec(), r.predicted_bps));
        }
    }
    (args.src, args.dst) = (src, dst);
    let src = Endpoint::parse(&args.src)?;
    let dst = Endpoint::parse(&args.dst)?;
    let tls = plan::client_tls(&args, &src, &dst)?;
    let mut opts = plan::options(&args, tls)?;
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
