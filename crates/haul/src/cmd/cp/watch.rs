//! Running the planned transfer: the progress bar, and the live concurrency tuner that
//! starts from the history's best for the host pair.

use std::io::IsTerminal;
use std::sync::mpsc;
use std::time::Duration;

use haul_store::Store;
use haul_xfer::autotune::{self, Tunable};
use haul_xfer::plan::Job;
use haul_xfer::{Endpoint, Options, Route, Summary, Transfer, XferError};

use super::args::Args;
use super::plan::piece_bytes;
use super::progress::{Events, Mode};

/// A copy falls behind when its rate over the last window is under this share of its
/// prediction ([`falling_behind`]).
const BEHIND_FRACTION: f64 = 0.5;
/// ... and the alternative is predicted at more than this many times what it gets.
const BEHIND_MARGIN: f64 = 1.2;

/// The rule `haul send` re-plans and `haul cp --route auto` re-routes by: a copy whose rate
/// over the last `window` seconds stays under half its `predicted` rate while the
/// `alternative` (another workflow or route) is predicted at more than 1.2× what it gets.
/// The first 1.5 windows (connections, slow start) are not judged. Fed every sample; says why
/// when the copy should stop.
pub fn falling_behind(
    predicted: f64,
    alternative: f64,
    window: f64,
) -> impl FnMut(&haul_xfer::engine::Sample) -> Option<String> {
    let mut seen: std::collections::VecDeque<(f64, u64)> = Default::default();
    move |s| {
        seen.push_back((s.t_s, s.bytes));
        while seen.front().is_some_and(|(t, _)| *t <= s.t_s - window) {
            seen.pop_front();
        }
        if s.t_s < 1.5 * window {
            return None;
        }
        let live = seen.iter().map(|x| x.1).sum::<u64>() as f64 * 8.0 / window;
        (live < BEHIND_FRACTION * predicted && alternative > live * BEHIND_MARGIN).then(|| {
            format!(
                "{:.1} Mbit/s over the last {window:.0} s, under half the predicted {:.1} Mbit/s, \
                 while another workflow is predicted at {:.1} Mbit/s",
                live / 1e6,
                predicted / 1e6,
                alternative / 1e6
            )
        })
    }
}

/// Why a copy was stopped by its watchdog, and the files it still owed.
#[derive(Debug, Clone)]
pub struct Stopped {
    /// The watchdog's reason.
    pub why: String,
    /// Destinations of the files that did not arrive.
    pub missing: Vec<String>,
}

/// Starts the transfer of `jobs` and follows it to its end, with a progress bar on a terminal
/// and the tuner driving it when `tune` is set; the tuner's steps are left in `tuning`. A
/// watchdog that stops the copy makes the result what had moved by then, with `stopped` set.
pub(super) fn transfer(
    args: &mut Args,
    opts: &Options,
    route: Route,
    jobs: Vec<Job>,
    tune: Option<(autotune::AutoTuneConfig, bool)>,
    tuning: &mut Vec<autotune::TuneStep>,
    stopped: &mut Option<Stopped>,
) -> Result<Summary, XferError> {
    let total: u64 = jobs.iter().map(|j| j.size).sum();
    let files = jobs.len();
    let piece = piece_bytes(args.piece_size, opts.clustering.as_ref(), &jobs);
    let started = std::time::Instant::now();
    let events = args.events.clone();
    // The planned files, to report those the transfer stops before as skipped.
    let planned = if events.is_some() {
        jobs.clone()
    } else {
        Vec::new()
    };
    if let Some(e) = &events {
        e.start(args, opts, files, total);
    }
    let t = Transfer::observed(
        route,
        jobs,
        Options {
            piece,
            ..opts.clone()
        },
        events.as_ref().map(|e| e.observer()),
    );
    let bar = (args.progress == Mode::Auto
        && !args.quiet
        && !args.json
        && std::io::stderr().is_terminal())
    .then(|| progress_bar(total, files));
    let view = Watched {
        t: &t,
        bar: bar.as_ref(),
        events: events.as_deref(),
        total,
        dog: std::cell::RefCell::new(args.watchdog.take()),
        why: std::cell::RefCell::new(None),
    };
    match tune {
        Some((cfg, from_history)) => {
            let cfg = at_clusters(cfg, &t, from_history, args.tune_floor);
            let steps = autotune::drive(&view, &cfg, opts.sample_interval.as_secs_f64());
            match steps {
                Ok(s) => *tuning = s,
                Err(e) if view.why.borrow().is_none() => return Err(e),
                Err(_) => {}
            }
        }
        None => {
            // The engine's sample channel closes when it ends, which wakes this at once: a
            // plain sleep here held every copy's exit up to 100 ms after its last byte.
            while !view.finished() {
                view.show();
                match t.samples().recv_timeout(Duration::from_millis(100)) {
                    Ok(s) => view.watch(&s),
                    Err(mpsc::RecvTimeoutError::Disconnected) => break,
                    Err(mpsc::RecvTimeoutError::Timeout) => {}
                }
            }
        }
    }
    args.watchdog = view.dog.into_inner();
    let why = view.why.into_inner();
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    // Every session has left: the files owed now are those that will not arrive.
    let missing = t.missing();
    let skipped = |why: &str| {
        if let Some(e) = &events {
            e.skipped(&planned, &missing, why);
        }
    };
    let Some(why) = why else {
        let r = t.wait();
        skipped("the transfer stopped before this file was moved and verified");
        return r;
    };
    let bytes = t.bytes();
    let r = t.wait();
    skipped(&format!("the copy was stopped: {why}"));
    match r {
        Err(XferError::Stopped(_)) | Ok(_) => {}
        Err(e) => return Err(e),
    }
    *stopped = Some(Stopped {
        why,
        missing: missing.clone(),
    });
    let arrived = (files - missing.len().min(files)) as u64;
    Ok(stopped_summary(arrived, bytes, started, opts.verify))
}

/// The summary of a copy its watchdog stopped after `arrived` files and `bytes`.
fn stopped_summary(arrived: u64, bytes: u64, started: std::time::Instant, verify: bool) -> Summary {
    Summary {
        files: arrived,
        bytes,
        duration_s: started.elapsed().as_secs_f64(),
        // A file arrives only once verified, when verification is on.
        verified: if verify { arrived } else { 0 },
        retransferred: 0,
        chunks_resent_bytes: 0,
        checksum: None,
        samples: Vec::new(),
        clusters: Vec::new(),
        pieces: 0,
    }
}

/// A progress bar over `total` bytes in `files` files.
fn progress_bar(total: u64, files: usize) -> indicatif::ProgressBar {
    let b = indicatif::ProgressBar::new(total);
    let style = indicatif::ProgressStyle::with_template(&format!(
        "{{spinner}} {files} files [{{bar:30}}] {{bytes}}/{{total_bytes}} {{binary_bytes_per_sec}} ETA {{eta}}"
    ))
    .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar());
    b.set_style(style);
    b
}

/// The running transfer as the tuner, the progress bar and the watchdog see it.
struct Watched<'a> {
    t: &'a Transfer,
    bar: Option<&'a indicatif::ProgressBar>,
    /// `--progress json`: each sample becomes an `interval` event.
    events: Option<&'a Events>,
    total: u64,
    dog: std::cell::RefCell<Option<super::args::Watchdog>>,
    why: std::cell::RefCell<Option<String>>,
}

impl Watched<'_> {
    /// Shows a sample to the events and the watchdog; stops the transfer when the watchdog
    /// says so.
    fn watch(&self, s: &haul_xfer::engine::Sample) {
        if let Some(e) = self.events {
            e.interval(s, self.t.active(), self.t.channels());
        }
        if self.why.borrow().is_some() {
            return;
        }
        let verdict = self.dog.borrow_mut().as_mut().and_then(|d| (d.0)(s));
        if let Some(why) = verdict {
            tracing::info!("stopping the copy: {why}");
            self.t.abort(&why);
            *self.why.borrow_mut() = Some(why);
        }
    }

    /// Moves the progress bar, if any, to the bytes moved so far.
    fn show(&self) {
        if let Some(b) = self.bar {
            b.set_position(self.t.bytes().min(self.total));
        }
    }
}

impl Tunable for Watched<'_> {
    fn set_concurrency(&self, n: u32) {
        tracing::info!("tuner: concurrency {n}");
        self.t.set_concurrency(n);
    }
    fn next_sample(&self, wait: Duration) -> Option<haul_xfer::engine::Sample> {
        self.show();
        let s = self.t.next_sample(wait);
        if let Some(s) = &s {
            self.watch(s);
        }
        s
    }
    fn finished(&self) -> bool {
        self.t.is_finished()
    }
    fn observe_bandwidth(&self, bps: f64) {
        self.t.observe_bandwidth(bps);
    }
    fn channels(&self) -> Option<u32> {
        Some(self.t.channels())
    }
}

/// The tuner's settings: start from the best concurrency this host pair has seen (true when
/// the history had one).
pub(super) fn tune_config(
    args: &Args,
    src: &Endpoint,
    dst: &Endpoint,
) -> (autotune::AutoTuneConfig, bool) {
    let mut cfg = autotune::AutoTuneConfig::default();
    cfg.search.cap = args.tune_cap.max(1);
    cfg.search.utility = args.tune_utility;
    cfg.estimate = args.tune_estimate;
    let path = args.history.clone().unwrap_or_else(Store::default_path);
    let best = Store::open(&path).ok().and_then(|s| {
        s.best_for_host_pair(&crate::cmd::host_id(src), &crate::cmd::host_id(dst), "cp")
            .ok()
            .flatten()
    });
    match best.and_then(|r| r.params.concurrency) {
        Some(c) => {
            cfg.search.start = c.clamp(1, cfg.search.cap);
            (cfg, true)
        }
        None => (cfg, false),
    }
}

/// The search does not go below the number of file-size clusters (or `--tune-floor`): the
/// smallest concurrency at which Multi-Cluster runs every cluster at once, one channel each
/// (Alg. 1 of 003). Below it a level is measured on whichever clusters its channels happen to
/// carry: on the mixed benchmark one channel on a big file reads 750–800 Mb/s and the same
/// channel on small files 400–550. Without history the search also starts there rather than at
/// 1. Without clustering both stay at 1.
fn at_clusters(
    mut cfg: autotune::AutoTuneConfig,
    t: &Transfer,
    from_history: bool,
    floor: Option<u32>,
) -> autotune::AutoTuneConfig {
    let clusters = t.clusters().0.len() as u32;
    // ConcurrencySearch::new clamps both into [1, cap], the start to at least the floor.
    cfg.search.floor = floor.unwrap_or(clusters);
    if !from_history {
        cfg.search.start = cfg.search.start.max(clusters);
        if clusters > 1 {
            tracing::info!("tuner: no history for this host pair; starting at {clusters} channels, one per cluster");
        }
    }
    cfg
}
