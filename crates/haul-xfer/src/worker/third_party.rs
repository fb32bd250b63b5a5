//! Server-to-server transfers: this host drives both control channels; the data flows between
//! the servers.

use haul_proto::Command;
use haul_transport::mode_e::Progress;

use super::{compare, is_dev_null, is_dev_zero, open};
use crate::checksum::Algorithm;
use crate::engine::{Ctx, Run, Transport};
use crate::error::XferError;
use crate::plan::Job;
use crate::session::Session;
use crate::url::RemoteUrl;

/// Drives a server-to-server transfer: STORs to the destination (passive), RETRs to the source
/// (active, it connects to the destination), pipelined like Globus does.
pub(crate) fn third_party(
    ctx: &Ctx<'_>,
    a: &RemoteUrl,
    b: &RemoteUrl,
    idx: usize,
) -> Result<(), XferError> {
    if ctx.opts().transport == Transport::Plut {
        return Err(XferError::Usage(
            "PLUT is not available for server-to-server transfers; use --transport tcp".into(),
        ));
    }
    let Some(mut batch) = ctx.next_batch(idx) else {
        return Ok(());
    };
    let mut src = open(ctx, a)?;
    let mut dst = open(ctx, b)?;
    let alg = shared_alg(ctx, &src, &dst, &batch)?;
    ctx.set_alg(alg);
    let mut configured = 0;
    loop {
        let p = ctx.parallelism();
        if configured != p {
            connect(&mut src, &mut dst, p)?;
            configured = p;
        }
        send_batch(&mut src, &mut dst, &batch)?;
        for (job, tries) in batch {
            let began = std::time::Instant::now();
            let (id, progress) = ctx.track(None);
            let r = third_party_one(&mut src, &mut dst, &job, &progress);
            ctx.untrack(id, job.size);
            let run = || Run {
                bytes: progress.bytes(),
                elapsed_s: began.elapsed().as_secs_f64(),
                resumed: false,
            };
            ctx.or_failed(&job, run(), r)?;
            let checksum = match alg {
                Some(x) => {
                    let v = verify(ctx, &mut src, &mut dst, &job, tries, x);
                    match ctx.or_failed(&job, run(), v)? {
                        Some(digest) => Some((x, digest)),
                        None => continue,
                    }
                }
                None => None,
            };
            ctx.file_done(
                &job,
                run(),
                checksum.as_ref().map(|(a, d)| (*a, d.as_str())),
            );
        }
        match ctx.next_batch(idx) {
            Some(b) => batch = b,
            None => break,
        }
    }
    src.quit();
    dst.quit();
    Ok(())
}

/// Asks both servers for `job`'s digest with `alg`: the digest when they match, None when the
/// file went back to the queue after a first mismatch.
fn verify(
    ctx: &Ctx<'_>,
    src: &mut Session,
    dst: &mut Session,
    job: &Job,
    tries: u32,
    alg: Algorithm,
) -> Result<Option<String>, XferError> {
    let s = src.cksm(alg, &job.src)?;
    let d = dst.cksm(alg, &job.dst)?;
    Ok(compare(ctx, job, tries, alg, &s, &d)?.then_some(s))
}

/// The checksum algorithm of a server-to-server session: none when verification is off or the
/// first batch only reads `/dev/zero` or writes `/dev/null`, else the user's, else the first
/// that both servers offer.
fn shared_alg(
    ctx: &Ctx<'_>,
    src: &Session,
    dst: &Session,
    batch: &[(Job, u32)],
) -> Result<Option<Algorithm>, XferError> {
    let mem = batch
        .iter()
        .all(|(j, _)| is_dev_zero(&j.src) || is_dev_null(&j.dst));
    if mem || !ctx.opts().verify {
        return Ok(None);
    }
    if let Some(x) = ctx.opts().checksum {
        return Ok(Some(x));
    }
    [
        Algorithm::Xxhc,
        Algorithm::Xxh128,
        Algorithm::Md5,
        Algorithm::Adler32,
        Algorithm::Crc32c,
    ]
    .into_iter()
    .find(|x| src.ctl.features.has_cksm(x.name()) && dst.ctl.features.has_cksm(x.name()))
    .map(Some)
    .ok_or_else(|| {
        XferError::Usage("the two servers share no checksum algorithm; pass --no-verify".into())
    })
}

/// Puts both servers in MODE E with `p` streams per file, the source sending to the
/// destination's passive port.
fn connect(src: &mut Session, dst: &mut Session, p: u32) -> Result<(), XferError> {
    dst.set_mode_e()?;
    // The destination's control peer with its PASV port (unless PASV addresses are
    // trusted): a destination cannot have the source connect to a third host.
    let addr = dst.pasv()?;
    src.set_mode_e()?;
    src.ctl.ok(&Command::Opts {
        command: "RETR".into(),
        options: format!("Parallelism={p},{p},{p};"),
    })?;
    src.ctl.ok(&Command::Port(addr))?;
    Ok(())
}

/// Sends a batch's commands without waiting for replies: every STOR (or ESTO) to the
/// destination first, a file's STOR after an `ALLO` of its size (as Globus clients send it),
/// then every RETR (or ERET) to the source.
fn send_batch(src: &mut Session, dst: &mut Session, batch: &[(Job, u32)]) -> Result<(), XferError> {
    for (job, _) in batch {
        if is_dev_zero(&job.src) {
            dst.ctl.send(&Command::Esto {
                offset: 0,
                path: job.dst.clone(),
            })?;
        } else {
            dst.ctl.send(&Command::Allo(job.size))?;
            dst.ctl.send(&Command::Stor(job.dst.clone()))?;
        }
    }
    for (job, _) in batch {
        if is_dev_zero(&job.src) {
            src.ctl.send(&Command::Eret {
                offset: 0,
                length: job.size,
                path: job.src.clone(),
            })?;
        } else {
            src.ctl.send(&Command::Retr(job.src.clone()))?;
        }
    }
    Ok(())
}

fn third_party_one(
    src: &mut Session,
    dst: &mut Session,
    job: &Job,
    progress: &Progress,
) -> Result<(), XferError> {
    let stor = Command::Stor(job.dst.clone());
    let retr = Command::Retr(job.src.clone());
    if !is_dev_zero(&job.src) {
        // Advisory: only "no space" says the copy cannot succeed.
        let allo = Command::Allo(job.size);
        let r = dst.ctl.final_reply(&mut |_| {})?;
        if r.code == 452 {
            return Err(XferError::from_reply(&dst.ctl.name, &allo, &r));
        }
    }
    let r = dst.ctl.final_reply(&mut |_| {})?;
    if !r.is_preliminary() {
        return Err(XferError::from_reply(&dst.ctl.name, &stor, &r));
    }
    let r = src.ctl.final_reply(&mut |_| {})?;
    if !r.is_preliminary() {
        return Err(XferError::from_reply(&src.ctl.name, &retr, &r));
    }
    let r = src.ctl.final_reply(&mut |_| {})?;
    if !r.is_success() {
        return Err(XferError::from_reply(&src.ctl.name, &retr, &r));
    }
    let r = dst.ctl.final_reply(&mut |m| {
        if let Some(pm) = haul_proto::PerfMarker::from_lines(&m.lines) {
            progress
                .bytes
                .store(pm.stripe_bytes, std::sync::atomic::Ordering::Relaxed);
        }
    })?;
    if !r.is_success() {
        return Err(XferError::from_reply(&dst.ctl.name, &stor, &r));
    }
    progress
        .bytes
        .store(job.size, std::sync::atomic::Ordering::Relaxed);
    Ok(())
}
