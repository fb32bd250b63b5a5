//! Turning a `haul cp SRC DST` request into the list of files to move: walking local trees and
//! remote trees (MLSD), and mapping each source path to its destination path.

use std::path::{Path, PathBuf};

use crate::error::XferError;
use crate::session::Session;

/// One file to move.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Job {
    /// Source path (local path, or absolute path on the source server).
    pub src: String,
    /// Destination path (local path, or absolute path on the destination server).
    pub dst: String,
    /// Size in bytes.
    pub size: u64,
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

/// Files of a local tree, with paths relative to `root`; directories listed first in `dirs`.
pub fn walk_local(root: &Path, files: &mut Vec<(PathBuf, u64)>, dirs: &mut Vec<PathBuf>) -> Result<(), XferError> {
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        let dir = root.join(&rel);
        let rd = std::fs::read_dir(&dir).map_err(|e| XferError::io(&dir.display().to_string(), e))?;
        let mut entries: Vec<_> = rd.filter_map(Result::ok).collect();
        entries.sort_by_key(|e| e.file_name());
        for e in entries {
            let p = rel.join(e.file_name());
            let md = e.metadata().map_err(|err| XferError::io(&e.path().display().to_string(), err))?;
            if md.is_dir() {
                dirs.push(p.clone());
                stack.push(p);
            } else if md.is_file() {
                files.push((p, md.len()));
            }
        }
    }
    Ok(())
}

/// Files of a remote tree under `root` (relative names), and its subdirectories.
pub fn walk_remote(s: &mut Session, root: &str, files: &mut Vec<(String, u64)>, dirs: &mut Vec<String>) -> Result<(), XferError> {
    let mut stack = vec![String::new()];
    while let Some(rel) = stack.pop() {
        let dir = if rel.is_empty() { root.to_string() } else { rjoin(root, &rel) };
        for e in s.mlsd(&dir)? {
            let p = if rel.is_empty() { e.name.clone() } else { rjoin(&rel, &e.name) };
            if e.is_dir {
                dirs.push(p.clone());
                stack.push(p);
            } else {
                files.push((p, e.size));
            }
        }
    }
    Ok(())
}

/// The destination of a single file: into `dst` when it names a directory, else `dst` itself.
pub fn single_dst(src_name: &str, dst: &str, dst_is_dir: bool) -> String {
    if dst_is_dir || dst.ends_with('/') {
        rjoin(dst, rbase(src_name))
    } else {
        dst.to_string()
    }
}


/// Plans `cp SRC DST`: the route and the files, creating destination directories on the way.
pub fn plan(
    src: &crate::Endpoint,
    dst: &crate::Endpoint,
    recursive: bool,
    len: Option<u64>,
    tls: Option<&crate::tls::ClientTls>,
) -> Result<(crate::Route, Vec<Job>), XferError> {
    use crate::{Endpoint, Route, DEV_ZERO};
    let zero_len = || len.ok_or_else(|| XferError::Usage("reading /dev/zero needs --len BYTES".into()));
    match (src, dst) {
        (Endpoint::Local(_), Endpoint::Local(_)) => {
            Err(XferError::Usage("both SRC and DST are local; one side must be ftp:// or haul://".into()))
        }
        (Endpoint::Remote(s), Endpoint::Local(d)) => {
            let d_str = d.display().to_string();
            if s.path == DEV_ZERO {
                return Ok((Route::Download(s.clone()), vec![Job { src: s.path.clone(), dst: d_str, size: zero_len()? }]));
            }
            let mut sess = Session::open(s, tls)?;
            let (is_dir, size) = sess.stat(&s.path)?;
            let jobs = if is_dir {
                if !recursive {
                    return Err(XferError::Usage(format!("{s} is a directory; use -r")));
                }
                let (mut files, mut dirs) = (Vec::new(), Vec::new());
                walk_remote(&mut sess, &s.path, &mut files, &mut dirs)?;
                for dir in dirs {
                    let p = d.join(&dir);
                    std::fs::create_dir_all(&p).map_err(|e| XferError::io(&p.display().to_string(), e))?;
                }
                std::fs::create_dir_all(d).map_err(|e| XferError::io(&d_str, e))?;
                files.into_iter().map(|(rel, size)| Job { src: rjoin(&s.path, &rel), dst: d.join(rel).display().to_string(), size }).collect()
            } else {
                vec![Job { src: s.path.clone(), dst: single_dst(&s.path, &d_str, d.is_dir()), size }]
            };
            sess.quit();
            Ok((Route::Download(s.clone()), jobs))
        }
        (Endpoint::Local(sp), Endpoint::Remote(d)) => {
            let s_str = sp.display().to_string();
            if s_str == DEV_ZERO {
                return Ok((Route::Upload(d.clone()), vec![Job { src: s_str, dst: d.path.clone(), size: zero_len()? }]));
            }
            let md = std::fs::metadata(sp).map_err(|e| XferError::io(&s_str, e))?;
            let mut sess = Session::open(d, tls)?;
            let jobs = if md.is_dir() {
                if !recursive {
                    return Err(XferError::Usage(format!("{s_str} is a directory; use -r")));
                }
                let (mut files, mut dirs) = (Vec::new(), Vec::new());
                walk_local(sp, &mut files, &mut dirs)?;
                sess.mkdir(&d.path)?;
                dirs.sort();
                for dir in dirs {
                    sess.mkdir(&rjoin(&d.path, &dir.to_string_lossy()))?;
                }
                files
                    .into_iter()
                    .map(|(rel, size)| Job { src: sp.join(&rel).display().to_string(), dst: rjoin(&d.path, &rel.to_string_lossy()), size })
                    .collect()
            } else {
                let dst_is_dir = sess.stat(&d.path).map(|(dir, _)| dir).unwrap_or(false);
                vec![Job { src: s_str.clone(), dst: single_dst(&s_str, &d.path, dst_is_dir), size: md.len() }]
            };
            sess.quit();
            Ok((Route::Upload(d.clone()), jobs))
        }
        (Endpoint::Remote(s), Endpoint::Remote(d)) => {
            if s.path == DEV_ZERO {
                return Ok((Route::ThirdParty(s.clone(), d.clone()), vec![Job { src: s.path.clone(), dst: d.path.clone(), size: zero_len()? }]));
            }
            let mut ss = Session::open(s, tls)?;
            let mut ds = Session::open(d, tls)?;
            let (is_dir, size) = ss.stat(&s.path)?;
            let jobs = if is_dir {
                if !recursive {
                    return Err(XferError::Usage(format!("{s} is a directory; use -r")));
                }
                let (mut files, mut dirs) = (Vec::new(), Vec::new());
                walk_remote(&mut ss, &s.path, &mut files, &mut dirs)?;
                ds.mkdir(&d.path)?;
                dirs.sort();
                for dir in dirs {
                    ds.mkdir(&rjoin(&d.path, &dir))?;
                }
                files.into_iter().map(|(rel, size)| Job { src: rjoin(&s.path, &rel), dst: rjoin(&d.path, &rel), size }).collect()
            } else {
                let dst_is_dir = ds.stat(&d.path).map(|(dir, _)| dir).unwrap_or(false);
                vec![Job { src: s.path.clone(), dst: single_dst(&s.path, &d.path, dst_is_dir), size }]
            };
            ss.quit();
            ds.quit();
            Ok((Route::ThirdParty(s.clone(), d.clone()), jobs))
        }
    }
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
    fn walks_local_tree() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("s/t")).unwrap();
        std::fs::write(d.path().join("a"), b"12").unwrap();
        std::fs::write(d.path().join("s/t/b"), b"123").unwrap();
        let (mut f, mut dirs) = (Vec::new(), Vec::new());
        walk_local(d.path(), &mut f, &mut dirs).unwrap();
        f.sort();
        assert_eq!(f, vec![(PathBuf::from("a"), 2), (PathBuf::from("s/t/b"), 3)]);
        assert_eq!(dirs.len(), 2);
    }
}
