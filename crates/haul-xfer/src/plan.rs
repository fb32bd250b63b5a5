//! Turning a `haul cp SRC DST` request into the list of files to move: walking local and remote
//! trees ([`crate::walk`]), and mapping each source path to its destination path.

use std::path::Path;
use std::time::Duration;

use crate::error::XferError;
use crate::session::{PasvAddress, Session};
use crate::tls::ClientTls;
use crate::url::RemoteUrl;
use crate::walk::{walk_local, walk_remote, WalkLimits};
use crate::worker::is_dev_zero;

/// One file to move.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Job {
    /// Source path (local path, or absolute path on the source server).
    pub src: String,
    /// Destination path (local path, or absolute path on the destination server).
    pub dst: String,
    /// Size in bytes (of the piece, for a piece).
    pub size: u64,
    /// Set when this job moves one byte range of a file that was split across channels.
    pub piece: Option<Piece>,
}

/// One byte range of a split file: fetched with `ERET P offset size`, written at `offset` of
/// the destination's `.part` file; the file is verified whole once its last piece lands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Piece {
    /// Where the range starts in the file.
    pub offset: u64,
    /// The whole file's size.
    pub whole: u64,
}

impl Job {
    /// A whole file.
    pub fn new(src: impl Into<String>, dst: impl Into<String>, size: u64) -> Job {
        Job {
            src: src.into(),
            dst: dst.into(),
            size,
            piece: None,
        }
    }

    /// The whole file this job is (a piece's file, unsplit).
    pub fn whole(&self) -> Job {
        match self.piece {
            Some(p) => Job::new(self.src.clone(), self.dst.clone(), p.whole),
            None => self.clone(),
        }
    }
}

/// The pieces a file of `size` bytes is cut into with pieces of `piece` bytes: none (the file
/// moves whole) unless it holds at least two. The last piece takes the remainder, so it is
/// between one and two pieces long: no short tail piece pays a command round trip for little.
pub fn pieces(size: u64, piece: u64) -> Vec<(u64, u64)> {
    let n = piece_count(size, piece);
    (0..n)
        .map(|i| (i * piece, if i + 1 == n { size - i * piece } else { piece }))
        .collect()
}

/// How many pieces [`pieces`] cuts a file into: 0 (it moves whole) or at least 2.
pub fn piece_count(size: u64, piece: u64) -> u64 {
    match size.checked_div(piece) {
        Some(n) if n >= 2 => n,
        _ => 0,
    }
}

/// Cuts `job` into its pieces (see [`pieces`]), or returns it whole.
pub fn split(job: Job, piece: u64) -> Vec<Job> {
    let cut = pieces(job.size, piece);
    if cut.is_empty() || job.piece.is_some() {
        return vec![job];
    }
    let whole = job.size;
    cut.into_iter()
        .map(|(offset, size)| Job {
            src: job.src.clone(),
            dst: job.dst.clone(),
            size,
            piece: Some(Piece { offset, whole }),
        })
        .collect()
}

/// Joins a remote directory and a name.
pub fn rjoin(dir: &str, name: &str) -> String {
    if dir.ends_with('/') {
        format!("{dir}{name}")
    } else {
        format!("{dir}/{name}")
    }
}

fn rbase(p: &str) -> &str {
    p.trim_end_matches('/').rsplit('/').next().unwrap_or(p)
}

/// The destination of a single file: into `dst` when it names a directory, else `dst` itself.
pub fn single_dst(src_name: &str, dst: &str, dst_is_dir: bool) -> String {
    if dst_is_dir || dst.ends_with('/') {
        rjoin(dst, rbase(src_name))
    } else {
        dst.to_string()
    }
}

/// What `cp` asked for, as planning needs it.
#[derive(Debug, Clone, Default)]
pub struct PlanOptions {
    /// Copy directory trees (`-r`).
    pub recursive: bool,
    /// Bytes to read from `/dev/zero`.
    pub len: Option<u64>,
    /// TLS roots for `haul://` URLs.
    pub tls: Option<ClientTls>,
    /// Where listings' data connections go after `PASV`.
    pub pasv: PasvAddress,
    /// Bounds of `-r` walks.
    pub limits: WalkLimits,
    /// Create missing parent directories of the destination (`--mkdir`).
    pub mkdir: bool,
    /// How long a listing's data channel may stay silent (None: the session's default).
    pub data_timeout: Option<Duration>,
    /// Where planning sessions are left logged in for the transfer's workers (the engine's
    /// [`crate::Options::spare`]); with a pool of its own they are closed when it drops.
    pub spare: std::sync::Arc<crate::session::Spare>,
}

/// Makes sure the local directory `dir` exists: with `mkdir` it is created with its missing
/// parents, else its absence is an error naming it (as `cp` does).
fn local_dir(dir: &Path, mkdir: bool) -> Result<(), XferError> {
    let name = || dir.display().to_string();
    if dir.as_os_str().is_empty() || dir.is_dir() {
        return Ok(());
    }
    if mkdir {
        return std::fs::create_dir_all(dir).map_err(|e| XferError::io(&name(), e));
    }
    let e = std::io::Error::new(
        std::io::ErrorKind::NotFound,
        "no such directory (--mkdir creates missing parents)",
    );
    Err(XferError::io(&name(), e))
}

/// Makes the missing remote directories above `path`, one `MKD` each (`--mkdir`).
fn remote_parents(sess: &mut Session, path: &str) -> Result<(), XferError> {
    let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
    let mut at = String::new();
    for p in &parts[..parts.len().saturating_sub(1)] {
        at = rjoin(if at.is_empty() { "/" } else { &at }, p);
        if !sess.stat(&at).is_ok_and(|(dir, _)| dir) {
            sess.mkdir(&at)?;
        }
    }
    Ok(())
}

/// Plans `cp SRC DST`: the route and the files, creating destination directories on the way.
pub fn plan(
    src: &crate::Endpoint,
    dst: &crate::Endpoint,
    opts: &PlanOptions,
) -> Result<(crate::Route, Vec<Job>), XferError> {
    use crate::{Endpoint, Route};
    match (src, dst) {
        (Endpoint::Local(_), Endpoint::Local(_)) => Err(XferError::Usage(
            "both SRC and DST are local; one side must be ftp:// or haul://".into(),
        )),
        (Endpoint::Remote(s), Endpoint::Local(d)) => {
            Ok((Route::Download(s.clone()), plan_download(s, d, opts)?))
        }
        (Endpoint::Local(s), Endpoint::Remote(d)) => {
            Ok((Route::Upload(d.clone()), plan_upload(s, d, opts)?))
        }
        (Endpoint::Remote(s), Endpoint::Remote(d)) => Ok((
            Route::ThirdParty(s.clone(), d.clone()),
            plan_third_party(s, d, opts)?,
        )),
    }
}

/// Opens a planning session to `url` with the options' TLS, PASV and data-timeout settings,
/// or takes one parked for it (the route chooser's, `haul cp --route auto`).
fn open(url: &RemoteUrl, opts: &PlanOptions) -> Result<Session, XferError> {
    let mut s = match opts.spare.take(url) {
        Some(mut s) => {
            s.set_pasv_address(opts.pasv);
            s
        }
        None => Session::open(url, opts.tls.as_ref(), opts.pasv)?,
    };
    if let Some(t) = opts.data_timeout {
        s.set_data_timeout(t);
    }
    Ok(s)
}

/// How many bytes to read from `/dev/zero`: `--len`, which such a source requires.
fn zero_len(opts: &PlanOptions) -> Result<u64, XferError> {
    opts.len
        .ok_or_else(|| XferError::Usage("reading /dev/zero needs --len BYTES".into()))
}

/// The files of a download from `s` to the local `d`, creating local directories on the way.
fn plan_download(s: &RemoteUrl, d: &Path, opts: &PlanOptions) -> Result<Vec<Job>, XferError> {
    let d_str = d.display().to_string();
    if is_dev_zero(&s.path) {
        local_dir(d.parent().unwrap_or(Path::new("")), opts.mkdir)?;
        return Ok(vec![Job::new(s.path.clone(), d_str, zero_len(opts)?)]);
    }
    let mut sess = open(s, opts)?;
    let (is_dir, size) = sess.stat(&s.path)?;
    let jobs = if is_dir {
        if !opts.recursive {
            return Err(XferError::Usage(format!("{s} is a directory; use -r")));
        }
        let (tree, extra) = walk_remote(&mut sess, &s.path, opts.limits, &|| open(s, opts))?;
        extra.into_iter().for_each(|x| opts.spare.park(x));
        local_dir(d.parent().unwrap_or(Path::new("")), opts.mkdir)?;
        for p in std::iter::once(d.to_path_buf()).chain(tree.dirs.iter().map(|dir| d.join(dir))) {
            std::fs::create_dir_all(&p).map_err(|e| XferError::io(&p.display().to_string(), e))?;
        }
        tree.files
            .into_iter()
            .map(|(rel, size)| {
                Job::new(
                    rjoin(&s.path, &rel),
                    d.join(rel).display().to_string(),
                    size,
                )
            })
            .collect()
    } else {
        let to = single_dst(&s.path, &d_str, d.is_dir());
        local_dir(Path::new(&to).parent().unwrap_or(Path::new("")), opts.mkdir)?;
        vec![Job::new(s.path.clone(), to, size)]
    };
    opts.spare.park(sess);
    Ok(jobs)
}

/// The files of an upload from the local `sp` to `d`, creating remote directories on the way.
fn plan_upload(sp: &Path, d: &RemoteUrl, opts: &PlanOptions) -> Result<Vec<Job>, XferError> {
    let s_str = sp.display().to_string();
    if is_dev_zero(&s_str) {
        return Ok(vec![Job::new(s_str, d.path.clone(), zero_len(opts)?)]);
    }
    let md = std::fs::metadata(sp).map_err(|e| XferError::io(&s_str, e))?;
    let mut sess = open(d, opts)?;
    let jobs = if md.is_dir() {
        if !opts.recursive {
            return Err(XferError::Usage(format!("{s_str} is a directory; use -r")));
        }
        let tree = walk_local(sp, opts.limits)?;
        if opts.mkdir {
            remote_parents(&mut sess, &d.path)?;
        }
        sess.mkdir(&d.path)?;
        for dir in tree.dirs {
            sess.mkdir(&rjoin(&d.path, &dir.to_string_lossy()))?;
        }
        tree.files
            .into_iter()
            .map(|(rel, size)| {
                Job::new(
                    sp.join(&rel).display().to_string(),
                    rjoin(&d.path, &rel.to_string_lossy()),
                    size,
                )
            })
            .collect()
    } else {
        let dst_is_dir = sess.stat(&d.path).map(|(dir, _)| dir).unwrap_or(false);
        let to = single_dst(&s_str, &d.path, dst_is_dir);
        if opts.mkdir {
            remote_parents(&mut sess, &to)?;
        }
        vec![Job::new(s_str.clone(), to, md.len())]
    };
    opts.spare.park(sess);
    Ok(jobs)
}

/// The files of a server-to-server copy from `s` to `d`, creating `d`'s directories.
fn plan_third_party(
    s: &RemoteUrl,
    d: &RemoteUrl,
    opts: &PlanOptions,
) -> Result<Vec<Job>, XferError> {
    if is_dev_zero(&s.path) {
        return Ok(vec![Job::new(
            s.path.clone(),
            d.path.clone(),
            zero_len(opts)?,
        )]);
    }
    let mut ss = open(s, opts)?;
    let mut ds = open(d, opts)?;
    let (is_dir, size) = ss.stat(&s.path)?;
    let jobs = if is_dir {
        if !opts.recursive {
            return Err(XferError::Usage(format!("{s} is a directory; use -r")));
        }
        let (tree, extra) = walk_remote(&mut ss, &s.path, opts.limits, &|| open(s, opts))?;
        extra.into_iter().for_each(|x| opts.spare.park(x));
        if opts.mkdir {
            remote_parents(&mut ds, &d.path)?;
        }
        ds.mkdir(&d.path)?;
        for dir in tree.dirs {
            ds.mkdir(&rjoin(&d.path, &dir))?;
        }
        tree.files
            .into_iter()
            .map(|(rel, size)| Job::new(rjoin(&s.path, &rel), rjoin(&d.path, &rel), size))
            .collect()
    } else {
        let dst_is_dir = ds.stat(&d.path).map(|(dir, _)| dir).unwrap_or(false);
        let to = single_dst(&s.path, &d.path, dst_is_dir);
        if opts.mkdir {
            remote_parents(&mut ds, &to)?;
        }
        vec![Job::new(s.path.clone(), to, size)]
    };
    opts.spare.park(ss);
    opts.spare.park(ds);
    Ok(jobs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_destinations() {
        assert_eq!(single_dst("/a/b/f.dat", "/x", true), "/x/f.dat");
        assert_eq!(single_dst("/a/b/f.dat", "/x/", false), "/x/f.dat");
        assert_eq!(single_dst("f.dat", "/x/g", false), "/x/g");
        assert_eq!(rjoin("/", "a"), "/a");
    }

    #[test]
    fn files_under_two_pieces_move_whole_and_the_last_piece_takes_the_rest() {
        assert!(pieces(2 * 100 - 1, 100).is_empty());
        assert!(pieces(1000, 0).is_empty(), "0 turns splitting off");
        assert_eq!(pieces(200, 100), [(0, 100), (100, 100)]);
        assert_eq!(pieces(399, 100), [(0, 100), (100, 100), (200, 199)]);
        let parts = split(Job::new("s", "d", 250), 100);
        assert_eq!(parts.len(), 2);
        assert_eq!(
            parts[1].piece,
            Some(Piece {
                offset: 100,
                whole: 250
            })
        );
        assert_eq!(parts[1].size, 150);
        assert_eq!(parts[1].whole(), Job::new("s", "d", 250));
        assert_eq!(
            split(parts[0].clone(), 10),
            vec![parts[0].clone()],
            "a piece is not cut again"
        );
    }

    proptest::proptest! {
        /// Pieces tile the file exactly: contiguous from 0, each at least one piece long and
        /// under two, summing to the size.
        #[test]
        fn pieces_tile_the_file(size in 0u64..1 << 40, piece in 1u64..1 << 32) {
            let v = pieces(size, piece);
            if size / piece < 2 {
                proptest::prop_assert!(v.is_empty());
            } else {
                let mut at = 0;
                for &(off, len) in &v {
                    proptest::prop_assert_eq!(off, at);
                    proptest::prop_assert!(len >= piece && len < 2 * piece);
                    at += len;
                }
                proptest::prop_assert_eq!(at, size);
                proptest::prop_assert_eq!(v.len() as u64, size / piece);
            }
        }
    }
}
