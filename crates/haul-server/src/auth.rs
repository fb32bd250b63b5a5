//! Logins: anonymous (`anonymous` / `ftp`, only when enabled) and named users from a password
//! file whose lines are `name:<argon2 PHC hash>:rw|ro[,third-party][,relay]`. Passwords are stored only
//! as salted argon2id hashes and checked with argon2's constant-time verifier. An unknown name
//! costs the same verification as a known one (against a decoy hash), so the answer's timing
//! does not tell which names exist, and at most [`Users::VERIFIERS`] verifications (each takes
//! about 19 MiB and tens of milliseconds) run at once, server-wide, on verifier threads of their
//! own: the rest wait their turn.
//! A users file that others than its owner may write is refused.

use std::collections::HashMap;
use std::io::Read;
use std::path::Path;
use std::sync::{mpsc, Arc, Mutex};

use argon2::password_hash::SaltString;
use argon2::{Argon2, PasswordHash, PasswordHasher};

/// The users file could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum UsersError {
    /// The file could not be read.
    #[error("users file {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// The IO error.
        source: std::io::Error,
    },
    /// A line is malformed.
    #[error("users file {path} line {line}: {reason}")]
    Line {
        /// The file.
        path: String,
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        reason: String,
    },
    /// A password could not be hashed.
    #[error("hashing password: {0}")]
    Hash(String),
}

/// What a logged-in user may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Access {
    /// May create, change and delete files.
    pub write: bool,
    /// May have data connections with hosts other than its own (third-party transfers).
    pub third_party: bool,
    /// May use this server as a relay (nested URLs), when it relays at all.
    pub relay: bool,
}

#[derive(Debug, Clone)]
struct Entry {
    hash: String,
    access: Access,
}

/// Named users with their password hashes.
#[derive(Debug)]
pub struct Users {
    entries: HashMap<String, Entry>,
    /// A hash of a random password, verified in place of an unknown user's.
    decoy: String,
    /// Work for the verifier threads.
    jobs: mpsc::Sender<Job>,
}

/// One password to check against one PHC hash; the answer goes back on `reply`.
#[derive(Debug)]
struct Job {
    hash: String,
    password: String,
    reply: mpsc::SyncSender<bool>,
}

/// Checks `password` against the PHC string `phc` in `memory` (grown to the hash's memory cost
/// once, then reused: no allocation per verification), comparing in constant time.
fn verify_with(memory: &mut Vec<argon2::Block>, phc: &str, password: &[u8]) -> bool {
    let Ok(hash) = PasswordHash::new(phc) else {
        return false;
    };
    let (Some(salt), Some(expected)) = (hash.salt, hash.hash) else {
        return false;
    };
    let (Ok(alg), Ok(params)) = (
        argon2::Algorithm::try_from(hash.algorithm),
        argon2::Params::try_from(&hash),
    ) else {
        return false;
    };
    let Ok(version) = argon2::Version::try_from(hash.version.unwrap_or(0x13)) else {
        return false;
    };
    if memory.len() < params.block_count() {
        memory.resize(params.block_count(), argon2::Block::default());
    }
    let mut salt_buf = [0u8; 64];
    let Ok(salt) = salt.decode_b64(&mut salt_buf) else {
        return false;
    };
    let mut out = vec![0u8; expected.len()];
    Argon2::new(alg, version, params)
        .hash_password_into_with_memory(password, salt, &mut out, &mut memory[..])
        .is_ok()
        && argon2::password_hash::Output::new(&out).is_ok_and(|o| o == expected)
}

/// Starts the verifier threads, which end when `Users` (the last sender) is dropped. Only
/// these threads run argon2, so its 19 MiB working memory lives in their few allocator arenas
/// instead of one per session thread.
fn verifiers() -> mpsc::Sender<Job> {
    let (tx, rx) = mpsc::channel::<Job>();
    let rx = Arc::new(Mutex::new(rx));
    for i in 0..Users::VERIFIERS {
        let rx = rx.clone();
        let spawned = std::thread::Builder::new()
            .name(format!("haul-verify-{i}"))
            .spawn(move || {
                let mut memory = Vec::new();
                loop {
                    let job = match rx.lock().unwrap_or_else(|p| p.into_inner()).recv() {
                        Ok(j) => j,
                        Err(_) => return,
                    };
                    let _ = job.reply.send(verify_with(
                        &mut memory,
                        &job.hash,
                        job.password.as_bytes(),
                    ));
                }
            });
        if let Err(e) = spawned {
            tracing::error!(error = %e, "cannot start a password verifier thread");
        }
    }
    tx
}

/// Opens a file that must not be writable by its group or others (a users file, a TLS key):
/// whoever could write it could log in as anyone, or be the server. The mode is read from the
/// handle that is then read, so the file checked is the file used.
pub fn open_private(path: &Path, what: &str) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::PermissionsExt;
    let f = std::fs::File::open(path)?;
    let mode = f.metadata()?.permissions().mode();
    if mode & 0o022 != 0 {
        return Err(std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            format!(
                "{what} {} is writable by its group or others (mode {:o}); run chmod go-w on it",
                path.display(),
                mode & 0o777
            ),
        ));
    }
    Ok(f)
}

/// The text of a users file that only its owner may write.
fn read_private(path: &Path) -> Result<String, UsersError> {
    let mut text = String::new();
    open_private(path, "users file")
        .and_then(|mut f| f.read_to_string(&mut text))
        .map_err(|source| UsersError::Read {
            path: path.display().to_string(),
            source,
        })?;
    Ok(text)
}

impl Users {
    /// Loads a users file.
    pub fn load(path: &Path) -> Result<Users, UsersError> {
        Users::parse(&read_private(path)?, &path.display().to_string())
    }

    /// Parses users-file text; `path` only names the source in errors.
    pub fn parse(text: &str, path: &str) -> Result<Users, UsersError> {
        Users::with_verifiers(parse_entries(text, path)?, verifiers())
    }

    /// Loads the users file again (`SIGHUP`): the new users share this one's verifier threads,
    /// so the bound on verifications at once holds across a reload.
    pub fn reload(&self, path: &Path) -> Result<Users, UsersError> {
        Users::with_verifiers(
            parse_entries(&read_private(path)?, &path.display().to_string())?,
            self.jobs.clone(),
        )
    }

    /// Users with these entries, a fresh decoy hash and the verifier threads behind `jobs`.
    fn with_verifiers(
        entries: HashMap<String, Entry>,
        jobs: mpsc::Sender<Job>,
    ) -> Result<Users, UsersError> {
        let mut random = [0u8; 24];
        std::fs::File::open("/dev/urandom")
            .and_then(|mut f| f.read_exact(&mut random))
            .map_err(|e| UsersError::Hash(format!("reading /dev/urandom: {e}")))?;
        let decoy = hash_password(
            &random
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect::<String>(),
        )?;
        Ok(Users {
            entries,
            decoy,
            jobs,
        })
    }

    /// How many named users there are.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no named user may log in.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// The entries of users-file text; `path` only names the source in errors.
fn parse_entries(text: &str, path: &str) -> Result<HashMap<String, Entry>, UsersError> {
    let mut entries = HashMap::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let err = |reason: String| UsersError::Line {
            path: path.to_string(),
            line: i + 1,
            reason,
        };
        let (name, rest) = line
            .split_once(':')
            .ok_or_else(|| err("expected name:hash:rw|ro".into()))?;
        let (hash, perm) = rest
            .rsplit_once(':')
            .ok_or_else(|| err("expected name:hash:rw|ro".into()))?;
        if name.is_empty() {
            return Err(err("empty user name".into()));
        }
        PasswordHash::new(hash).map_err(|e| err(format!("bad password hash: {e}")))?;
        let mut flags = perm.split(',');
        let write = match flags.next() {
            Some("rw") => true,
            Some("ro") => false,
            other => {
                return Err(err(format!(
                    "permission {:?} is not rw or ro",
                    other.unwrap_or_default()
                )))
            }
        };
        let (mut third_party, mut relay) = (false, false);
        for f in flags {
            match f {
                "third-party" => third_party = true,
                "relay" => relay = true,
                other => {
                    return Err(err(format!(
                        "unknown permission {other:?} (known: third-party, relay)"
                    )))
                }
            }
        }
        entries.insert(
            name.to_string(),
            Entry {
                hash: hash.to_string(),
                access: Access {
                    write,
                    third_party,
                    relay,
                },
            },
        );
    }
    Ok(entries)
}

impl Users {
    /// Password verifications that may run at once, server-wide (the verifier threads).
    pub const VERIFIERS: usize = 2;

    /// Checks a password; the user's access when it matches. Unknown names cost the same.
    pub fn verify(&self, name: &str, password: &str) -> Option<Access> {
        let entry = self.entries.get(name);
        let hash = entry.map_or(self.decoy.clone(), |e| e.hash.clone());
        let (reply, answer) = mpsc::sync_channel(1);
        self.jobs
            .send(Job {
                hash,
                password: password.to_string(),
                reply,
            })
            .ok()?;
        let ok = answer.recv().unwrap_or(false);
        entry.filter(|_| ok).map(|e| e.access)
    }

    /// The access the file gives `name`, without a password (a GSI identity mapped to it by
    /// the grid-mapfile has authenticated already).
    pub fn access(&self, name: &str) -> Option<Access> {
        self.entries.get(name).map(|e| e.access)
    }
}

/// Hashes a password with argon2id and a fresh random salt, as a PHC string.
pub fn hash_password(password: &str) -> Result<String, UsersError> {
    let mut bytes = [0u8; 16];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .map_err(|e| UsersError::Hash(format!("reading /dev/urandom: {e}")))?;
    let salt = SaltString::encode_b64(&bytes).map_err(|e| UsersError::Hash(e.to_string()))?;
    Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .map(|h| h.to_string())
        .map_err(|e| UsersError::Hash(e.to_string()))
}

/// Whether `name` is one of the anonymous login names (RFC 1635).
pub fn is_anonymous(name: &str) -> bool {
    name.eq_ignore_ascii_case("anonymous") || name.eq_ignore_ascii_case("ftp")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_then_verify() {
        let h = hash_password("s3cret").unwrap();
        assert!(h.starts_with("$argon2id$"));
        let users = Users::parse(
            &format!("alice:{h}:rw\nbob:{h}:ro,third-party,relay\n"),
            "t",
        )
        .unwrap();
        assert_eq!(
            users.verify("alice", "s3cret"),
            Some(Access {
                write: true,
                third_party: false,
                relay: false
            })
        );
        assert_eq!(
            users.verify("bob", "s3cret"),
            Some(Access {
                write: false,
                third_party: true,
                relay: true
            })
        );
        assert_eq!(users.verify("alice", "wrong"), None);
        assert_eq!(users.verify("carol", "s3cret"), None);
    }

    #[test]
    fn rejects_bad_lines() {
        assert!(matches!(
            Users::parse("alice:plain:rw", "t"),
            Err(UsersError::Line { line: 1, .. })
        ));
        let h = hash_password("x").unwrap();
        assert!(matches!(
            Users::parse(&format!("\nalice:{h}:admin"), "t"),
            Err(UsersError::Line { line: 2, .. })
        ));
    }
}
