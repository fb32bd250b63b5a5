//! `haul cp SRC DST`: plan the files, run the engine with a progress bar, verify, record the
//! transfer in the history store, and print a summary (or JSON).

mod args;
mod plan;
mod report;
mod watch;

use std::process::ExitCode;

use haul_xfer::Endpoint;

pub use args::Args;

/// Runs `haul cp`.
pub fn run(mut args: Args) -> anyhow::Result<ExitCode> {
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
    let started_at = report::now_unix();
    let tune = args.tune.then(|| watch::tune_config(&args, &src, &dst));
    let mut tuning = Vec::new();
    let result = haul_xfer::plan::plan(&src, &dst, &plan::plan_options(&args, &opts))
        .and_then(|(route, jobs)| watch::transfer(&args, &opts, route, jobs, tune, &mut tuning));
    report::record(&args, &src, &dst, &opts, started_at, &result, &tuning);
    let summary = result?;
    report::print(&args, &opts, &summary, &tuning)?;
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests;
