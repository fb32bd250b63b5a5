//! Logins: anonymous (`anonymous` / `ftp`, only when enabled) and named users from a password
//! file whose lines are `name:<argon2 PHC hash>:rw|ro`. Passwords are stored only as salted
//! argon2id hashes and checked with argon2's constant-time verifier.

use std::collections::HashMap;
use std::io::Read;
use std::path::Path;

use argon2::password_hash::SaltString;
use argon2::{Argon2, PasswordHash, PasswordHasher, PasswordVerifier};

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
}

#[derive(Debug, Clone)]
struct Entry {
    hash: String,
    access: Access,
}

/// Named users with their password hashes.
#[derive(Debug, Clone, Default)]
pub struct Users {
    entries: HashMap<String, Entry>,
}

impl Users {
    /// Loads a users file.
    pub fn load(path: &Path) -> Result<Users, UsersError> {
        let text = std::fs::read_to_string(path)
            .map_err(|source| UsersError::Read { path: path.display().to_string(), source })?;
        Users::parse(&text, &path.display().to_string())
    }

    /// Parses users-file text; `path` only names the source in errors.
    pub fn parse(text: &str, path: &str) -> Result<Users, UsersError> {
        let mut entries = HashMap::new();
        for (i, raw) in text.lines().enumerate() {
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let err = |reason: String| UsersError::Line { path: path.to_string(), line: i + 1, reason };
            let (name, rest) = line.split_once(':').ok_or_else(|| err("expected name:hash:rw|ro".into()))?;
            let (hash, perm) = rest.rsplit_once(':').ok_or_else(|| err("expected name:hash:rw|ro".into()))?;
            if name.is_empty() {
                return Err(err("empty user name".into()));
            }
            PasswordHash::new(hash).map_err(|e| err(format!("bad password hash: {e}")))?;
            let write = match perm {
                "rw" => true,
                "ro" => false,
                other => return Err(err(format!("permission {other:?} is not rw or ro"))),
            };
            entries.insert(name.to_string(), Entry { hash: hash.to_string(), access: Access { write } });
        }
        Ok(Users { entries })
    }

    /// Checks a password; the user's access when it matches.
    pub fn verify(&self, name: &str, password: &str) -> Option<Access> {
        let e = self.entries.get(name)?;
        let parsed = PasswordHash::new(&e.hash).ok()?;
        Argon2::default().verify_password(password.as_bytes(), &parsed).ok()?;
        Some(e.access)
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
        let users = Users::parse(&format!("alice:{h}:rw\nbob:{h}:ro\n"), "t").unwrap();
        assert_eq!(users.verify("alice", "s3cret"), Some(Access { write: true }));
        assert_eq!(users.verify("bob", "s3cret"), Some(Access { write: false }));
        assert_eq!(users.verify("alice", "wrong"), None);
        assert_eq!(users.verify("carol", "s3cret"), None);
    }

    #[test]
    fn rejects_bad_lines() {
        assert!(matches!(Users::parse("alice:plain:rw", "t"), Err(UsersError::Line { line: 1, .. })));
        let h = hash_password("x").unwrap();
        assert!(matches!(Users::parse(&format!("\nalice:{h}:admin"), "t"), Err(UsersError::Line { line: 2, .. })));
    }
}
