//! Globus signing-policy files (`<hash>.signing_policy` beside a CA certificate, the EACL form):
//! which subjects a CA may sign for. A line `access_id_CA X509 '<CA subject>'` opens a CA's
//! entry; `cond_subjects globus '"<pattern>" "<pattern>"'` lists the subject patterns it may
//! sign, where `*` matches any run of characters and `?` any one.

/// The subject patterns of each CA a policy file names.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SigningPolicy {
    /// (CA subject, the patterns it may sign).
    pub entries: Vec<(String, Vec<String>)>,
}

/// A policy file that could not be read as one.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("signing policy line {line}: {reason}")]
pub struct PolicyError {
    /// 1-based line.
    pub line: usize,
    /// What is wrong.
    pub reason: String,
}

/// The quoted strings of `s`: `'...'` groups, and inside them `"..."` items.
fn quoted(s: &str, q: char) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur: Option<String> = None;
    for c in s.chars() {
        match (&mut cur, c) {
            (None, c) if c == q => cur = Some(String::new()),
            (Some(v), c) if c == q => {
                out.push(std::mem::take(v));
                cur = None;
            }
            (Some(v), c) => v.push(c),
            (None, _) => {}
        }
    }
    out
}

impl SigningPolicy {
    /// Parses a policy file's text.
    pub fn parse(text: &str) -> Result<SigningPolicy, PolicyError> {
        let mut p = SigningPolicy::default();
        for (i, raw) in text.lines().enumerate() {
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let err = |reason: &str| PolicyError {
                line: i + 1,
                reason: reason.to_string(),
            };
            let word = line.split_whitespace().next().unwrap_or("");
            match word {
                "access_id_CA" => {
                    let ca = quoted(line, '\'');
                    let [ca] = ca.as_slice() else {
                        return Err(err("access_id_CA needs one quoted subject"));
                    };
                    p.entries.push((ca.clone(), Vec::new()));
                }
                "cond_subjects" => {
                    let Some(last) = p.entries.last_mut() else {
                        return Err(err("cond_subjects before any access_id_CA"));
                    };
                    for group in quoted(line, '\'') {
                        last.1.extend(quoted(&group, '"'));
                    }
                }
                "pos_rights" | "neg_rights" => {}
                _ => return Err(err(&format!("unknown keyword {word:?}"))),
            }
        }
        Ok(p)
    }

    /// The patterns for the CA `ca` (one-line subject), if the policy names it.
    pub fn patterns_for(&self, ca: &str) -> Option<Vec<&str>> {
        let mut found = None;
        for (c, pats) in &self.entries {
            if crate::name::same_subject(c, ca) {
                found
                    .get_or_insert_with(Vec::new)
                    .extend(pats.iter().map(String::as_str));
            }
        }
        found
    }
}

/// Whether `subject` matches the glob `pattern` (`*` any run, `?` any one character), case-blind.
pub fn glob_match(pattern: &str, subject: &str) -> bool {
    let p: Vec<char> = pattern.to_lowercase().chars().collect();
    let s: Vec<char> = subject.to_lowercase().chars().collect();
    // Iterative matcher with one backtrack point: linear in practice, never exponential.
    let (mut pi, mut si) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while si < s.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == s[si]) {
            pi += 1;
            si += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some((pi, si));
            pi += 1;
        } else if let Some((sp, ss)) = star {
            pi = sp + 1;
            si = ss + 1;
            star = Some((sp, ss + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = "# comment\n\
        access_id_CA   X509    '/O=Grid/OU=test/CN=Test CA'\n\
        pos_rights     globus  CA:sign\n\
        cond_subjects  globus  '\"/O=Grid/OU=test/*\" \"/O=Other/CN=?x\"'\n";

    #[test]
    fn parses_a_globus_policy() {
        let p = SigningPolicy::parse(FILE).unwrap();
        assert_eq!(
            p.patterns_for("/O=Grid/OU=test/CN=Test CA").unwrap(),
            vec!["/O=Grid/OU=test/*", "/O=Other/CN=?x"]
        );
        assert!(p.patterns_for("/O=Grid/CN=Another CA").is_none());
    }

    #[test]
    fn refuses_what_it_cannot_read() {
        assert_eq!(
            SigningPolicy::parse("cond_subjects globus '\"/x\"'")
                .unwrap_err()
                .line,
            1
        );
        assert!(SigningPolicy::parse("access_id_CA X509 /O=unquoted").is_err());
        assert!(SigningPolicy::parse("frobnicate").is_err());
    }

    #[test]
    fn globs() {
        assert!(glob_match("/O=Grid/*", "/O=Grid/OU=x/CN=y"));
        assert!(glob_match("/o=grid/*", "/O=Grid/CN=y"));
        assert!(!glob_match("/O=Grid/*", "/O=Other/CN=y"));
        assert!(glob_match("/CN=?x", "/CN=ax"));
        assert!(!glob_match("/CN=?x", "/CN=abx"));
        assert!(glob_match("*", ""));
        assert!(glob_match("a*b*c", "axxbyyc"));
        assert!(!glob_match("a*b*c", "axxbyy"));
    }
}
