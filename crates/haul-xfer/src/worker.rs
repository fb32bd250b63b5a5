//! The three kinds of worker the engine runs, one per control session (two for third-party):
//! each takes batches of files, moves them pipelined, verifies them, and journals restart state.

use std::sync::Arc;

use haul_proto::RangeSet;
use haul_transport::mode_e::Progress;

use crate::checksum::Algorithm;
use crate::engine::{choose_alg, Clock, Ctx, Run};
use crate::error::XferError;
use crate::plan::Job;
use crate::session::{DataParams, Session};
use crate::url::RemoteUrl;

mod download;
mod repair;
mod third_party;
mod upload;

pub(crate) use download::download;
pub(crate) use third_party::third_party;
pub(crate) use upload::upload;

/// The zero source and null sink paths (as Globus names them).
pub const DEV_ZERO: &str = "/dev/zero";
/// See [`DEV_ZERO`].
pub const DEV_NULL: &str = "/dev/null";

/// Whether a server path names the zero source: [`DEV_ZERO`], or a nested URL (a route through
/// relays, docs/relay.md) whose innermost path is it, so memory-to-memory runs can be relayed.
pub fn is_dev_zero(path: &str) -> bool {
    innermost(path) == DEV_ZERO
}

/// Whether a server path names the null sink, as [`is_dev_zero`] does for the zero source.
pub fn is_dev_null(path: &str) -> bool {
    innermost(path) == DEV_NULL
}

/// The path at the end of a chain of nested URLs (`/ftp://b/ftp://a/dev/zero` → `/dev/zero`).
fn innermost(mut path: &str) -> &str {
    while haul_proto::nested::is_nested(path) {
        let url = path.trim_start_matches('/');
        let after_scheme = url.find("://").map_or(url.len(), |i| i + 3);
        match url[after_scheme..].find('/') {
            Some(i) => path = &url[after_scheme + i..],
            None => return "/",
        }
    }
    path
}

/// Opens a session to `url` with the transfer's TLS, PASV and data-timeout settings.
fn open(ctx: &Ctx<'_>, url: &RemoteUrl) -> Result<Session, XferError> {
    let mut s = match ctx.opts().spare.take(url) {
        Some(mut s) => {
            s.set_pasv_address(ctx.opts().pasv);
            s
        }
        None => Session::open(url, ctx.opts().tls.as_ref(), ctx.opts().pasv)?,
    };
    s.set_data_timeout(ctx.opts().data_timeout);
    s.set_plut_start(ctx.opts().plut_start);
    if let Some(stack) = ctx.opts().transport.net_stack() {
        s.set_net_stack(stack)?;
    }
    if let Some(leg) = ctx.opts().relay_leg {
        s.set_relay_leg(&leg)?;
    }
    Ok(s)
}

fn params(ctx: &Ctx<'_>) -> DataParams {
    DataParams {
        parallelism: ctx.parallelism(),
        tcp_buffer: ctx.opts().tcp_buffer,
        block: ctx.opts().block,
    }
}

fn compare(
    ctx: &Ctx<'_>,
    job: &Job,
    tries: u32,
    alg: Algorithm,
    src: &str,
    dst: &str,
) -> Result<bool, XferError> {
    if src == dst {
        return Ok(true);
    }
    let e = XferError::ChecksumMismatch {
        path: job.dst.clone(),
        alg: alg.name().into(),
        expected: src.into(),
        actual: dst.into(),
    };
    ctx.mismatch(job.clone(), tries, e)?;
    Ok(false)
}

/// Reports the item of `batch` that its error `e` stopped it at (the first that `clock` did not
/// see end; `of` gives its job and run) as failed, and gives `e` back.
fn failed_at<T>(
    ctx: &Ctx<'_>,
    batch: &[T],
    clock: &Clock,
    e: XferError,
    of: impl Fn(&T, usize) -> (&Job, Run),
) -> XferError {
    let k = clock.failed_at();
    if let Some(item) = batch.get(k) {
        let (job, run) = of(item, k);
        ctx.file_failed(job, run, &e);
    }
    e
}

fn with_have(p: &Arc<Progress>, have: &Option<RangeSet>) {
    if let (Some(h), Ok(mut r)) = (have, p.ranges.lock()) {
        *r = h.clone();
    }
}

/// The checksum algorithm of a session to one server: none when its first batch only reads
/// `/dev/zero`, else the one [`choose_alg`] picks from what the server offers.
fn session_alg(
    ctx: &Ctx<'_>,
    sess: &Session,
    batch: &[(Job, u32)],
) -> Result<Option<Algorithm>, XferError> {
    if batch.iter().all(|(j, _)| is_dev_zero(&j.src)) {
        return Ok(None);
    }
    choose_alg(ctx.opts(), &sess.ctl.features)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_zero_source_and_null_sink_are_found_through_relays() {
        assert!(is_dev_zero("/dev/zero"));
        assert!(is_dev_zero("/ftp://origin:2811/dev/zero"));
        assert!(is_dev_zero("/ftp://b:2811/haul://user@a:2811/dev/zero"));
        assert!(is_dev_null("ftp://b:2811/dev/null"));
        assert!(!is_dev_zero("/ftp://origin:2811/dev/zero/x"));
        assert!(!is_dev_zero("/data/dev/zero"));
        assert!(!is_dev_zero("/ftp://origin:2811"));
        assert!(!is_dev_null("/dev/zero"));
    }
}
