//! The grid-mapfile: which local accounts a certificate identity may act as. Each line is a
//! subject, quoted when it holds spaces (`"/O=Grid/CN=Jane Doe"`, with `\"` and `\\` escapes
//! inside quotes), then a comma-separated list of account names; the first is the default
//! account. `#` starts a comment line. Found as the Globus tools find it: `GRIDMAP`, else
//! `/etc/grid-security/grid-mapfile`.

use std::path::{Path, PathBuf};

/// A grid-mapfile that could not be read.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum GridmapError {
    /// The file could not be read.
    #[error("grid-mapfile {path}: {reason}")]
    Read {
        /// The file.
        path: String,
        /// The IO error's words.
        reason: String,
    },
    /// A line is malformed.
    #[error("grid-mapfile line {line}: {reason}")]
    Line {
        /// 1-based line.
        line: usize,
        /// What is wrong.
        reason: String,
    },
}

/// The parsed map, in file order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Gridmap {
    entries: Vec<(String, Vec<String>)>,
}

/// Longest line accepted.
const MAX_LINE: usize = 16 * 1024;

/// Whether `name` is a plausible account name (what `USER` may carry to select one).
fn valid_account(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b'@'))
}

/// Splits a line into its subject and the rest.
fn subject_of(line: &str) -> Result<(String, &str), String> {
    if let Some(rest) = line.strip_prefix('"') {
        let mut out = String::new();
        let mut chars = rest.char_indices();
        while let Some((i, c)) = chars.next() {
            match c {
                '\\' => match chars.next() {
                    Some((_, e @ ('"' | '\\'))) => out.push(e),
                    Some((_, e)) => {
                        out.push('\\');
                        out.push(e);
                    }
                    None => return Err("unterminated escape".into()),
                },
                '"' => return Ok((out, &rest[i + 1..])),
                c => out.push(c),
            }
        }
        Err("unterminated quoted subject".into())
    } else {
        let end = line.find(char::is_whitespace).unwrap_or(line.len());
        Ok((line[..end].to_string(), &line[end..]))
    }
}

impl Gridmap {
    /// Where the Globus tools look: `GRIDMAP`, else `/etc/grid-security/grid-mapfile`.
    pub fn default_path() -> PathBuf {
        std::env::var_os("GRIDMAP")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("/etc/grid-security/grid-mapfile"))
    }

    /// Reads and parses `path`.
    pub fn load(path: &Path) -> Result<Gridmap, GridmapError> {
        let text = std::fs::read_to_string(path).map_err(|e| GridmapError::Read {
            path: path.display().to_string(),
            reason: e.to_string(),
        })?;
        Gridmap::parse(&text)
    }

    /// Parses a grid-mapfile's text.
    pub fn parse(text: &str) -> Result<Gridmap, GridmapError> {
        let mut map = Gridmap::default();
        for (i, raw) in text.lines().enumerate() {
            let err = |reason: String| GridmapError::Line {
                line: i + 1,
                reason,
            };
            if raw.len() > MAX_LINE {
                return Err(err(format!("longer than {MAX_LINE} bytes")));
            }
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let (subject, rest) = subject_of(line).map_err(err)?;
            if !subject.starts_with('/') {
                return Err(err(format!("subject {subject:?} does not start with '/'")));
            }
            let accounts: Vec<String> = rest
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect();
            if accounts.is_empty() {
                return Err(err(format!("no account for {subject}")));
            }
            if let Some(bad) = accounts.iter().find(|a| !valid_account(a)) {
                return Err(err(format!("account name {bad:?} is not valid")));
            }
            map.entries.push((subject, accounts));
        }
        Ok(map)
    }

    /// The accounts `identity` may use, default first (the first line naming it).
    pub fn accounts(&self, identity: &str) -> Option<&[String]> {
        self.entries
            .iter()
            .find(|(s, _)| crate::name::same_subject(s, identity))
            .map(|(_, a)| a.as_slice())
    }

    /// The account a login as `requested` maps `identity` to: the default one for
    /// `:globus-mapping:` (or an empty name), else `requested` if the map allows it.
    pub fn map(&self, identity: &str, requested: &str) -> Option<String> {
        let accounts = self.accounts(identity)?;
        if requested.is_empty() || requested == ":globus-mapping:" {
            return accounts.first().cloned();
        }
        accounts.iter().find(|a| *a == requested).cloned()
    }

    /// Number of subjects mapped.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether nothing is mapped.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAP: &str = "# users\n\
        \"/O=Grid/OU=haul test/CN=Test User\" alice,bob\n\
        /O=Grid/CN=host/example.org  svc\n\
        \"/O=Grid/CN=Quote \\\"Q\\\"\" q\n";

    #[test]
    fn maps_identities_to_accounts() {
        let m = Gridmap::parse(MAP).unwrap();
        assert_eq!(m.len(), 3);
        let id = "/O=Grid/OU=haul test/CN=Test User";
        assert_eq!(m.map(id, ":globus-mapping:").as_deref(), Some("alice"));
        assert_eq!(m.map(id, "").as_deref(), Some("alice"));
        assert_eq!(m.map(id, "bob").as_deref(), Some("bob"));
        assert_eq!(m.map(id, "mallory"), None);
        assert_eq!(m.map("/O=Grid/CN=Someone", ""), None);
        assert_eq!(
            m.map("/O=Grid/CN=host/example.org", "").as_deref(),
            Some("svc")
        );
        assert_eq!(m.map("/O=Grid/CN=Quote \"Q\"", "").as_deref(), Some("q"));
    }

    #[test]
    fn refuses_malformed_lines_by_number() {
        for (text, line) in [
            ("\"/O=Grid/CN=x alice", 1),
            ("# c\n/O=Grid/CN=x", 2),
            ("O=Grid alice", 1),
            ("/O=Grid/CN=x al ice;rm", 1),
        ] {
            match Gridmap::parse(text) {
                Err(GridmapError::Line { line: l, .. }) => assert_eq!(l, line, "{text}"),
                other => panic!("{text}: {other:?}"),
            }
        }
    }
}
