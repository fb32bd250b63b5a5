//! [`SiteCommand`]: the text of a `SITE` command, parsed. The subcommands that act on files or
//! the session as the Globus server has them (`CHMOD`, `CHGRP`, `UTIME`, `SETDISKSTACK`,
//! `WHOAMI`) are typed; any other is kept as its upper-cased name and argument.

use std::fmt;

use super::parse::{bad, fields};
use super::{CommandError, ModTime};

/// Most octal digits of a `SITE CHMOD` mode (`7777`).
const MAX_MODE_DIGITS: usize = 4;

/// A parsed `SITE` command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SiteCommand {
    /// `SITE CHMOD <octal mode> <path>`.
    Chmod {
        /// The mode bits, at most `0o7777`.
        mode: u32,
        /// The file or directory.
        path: String,
    },
    /// `SITE CHGRP <group> <path>`.
    Chgrp {
        /// A group name or number.
        group: String,
        /// The file or directory.
        path: String,
    },
    /// `SITE UTIME <YYYYMMDDHHMMSS> <path>`: sets the modification time (Globus's order of
    /// arguments).
    Utime {
        /// The new modification time, UTC.
        time: ModTime,
        /// The file or directory.
        path: String,
    },
    /// `SITE SETDISKSTACK <stack>`: the storage driver stack (`globus-url-copy -fsstack`).
    SetDiskStack(String),
    /// `SITE WHOAMI`: the name the session is logged in as.
    Whoami,
    /// Any other subcommand.
    Other {
        /// The upper-cased subcommand.
        sub: String,
        /// Everything after it.
        arg: String,
    },
}

impl SiteCommand {
    /// Parses the text after `SITE `.
    pub fn parse(text: &str) -> Result<SiteCommand, CommandError> {
        let text = text.trim_start();
        let (sub, arg) = text.split_once(' ').unwrap_or((text, ""));
        if sub.is_empty() {
            return Err(CommandError::MissingArgument("SITE"));
        }
        let upper = sub.to_ascii_uppercase();
        Ok(match upper.as_str() {
            "CHMOD" => {
                let (f, path) = path_after("SITE CHMOD", arg)?;
                SiteCommand::Chmod {
                    mode: octal_mode(f)?,
                    path,
                }
            }
            "CHGRP" => {
                let (f, path) = path_after("SITE CHGRP", arg)?;
                SiteCommand::Chgrp {
                    group: f.to_string(),
                    path,
                }
            }
            "UTIME" => {
                let (f, path) = path_after("SITE UTIME", arg)?;
                let time = ModTime::parse(f).map_err(|e| bad("SITE UTIME", e))?;
                SiteCommand::Utime { time, path }
            }
            "SETDISKSTACK" => match arg.trim() {
                "" => return Err(CommandError::MissingArgument("SITE SETDISKSTACK")),
                stack => SiteCommand::SetDiskStack(stack.to_string()),
            },
            "WHOAMI" if arg.trim().is_empty() => SiteCommand::Whoami,
            "WHOAMI" => return Err(bad("SITE WHOAMI", "takes no argument")),
            _ => SiteCommand::Other {
                sub: upper,
                arg: arg.to_string(),
            },
        })
    }
}

/// One field, then a non-empty path.
fn path_after<'a>(verb: &'static str, arg: &'a str) -> Result<(&'a str, String), CommandError> {
    let (f, path) = fields(verb, arg, 1)?;
    if path.is_empty() {
        return Err(CommandError::MissingArgument(verb));
    }
    Ok((f[0], path.to_string()))
}

/// An octal mode of one to four digits (`644`, `0755`).
fn octal_mode(s: &str) -> Result<u32, CommandError> {
    let ok = !s.is_empty()
        && s.len() <= MAX_MODE_DIGITS
        && s.bytes().all(|b| (b'0'..=b'7').contains(&b));
    match ok.then(|| u32::from_str_radix(s, 8)) {
        Some(Ok(m)) => Ok(m),
        _ => Err(bad(
            "SITE CHMOD",
            format!("{s:?} is not an octal mode of at most {MAX_MODE_DIGITS} digits"),
        )),
    }
}

/// The text after `SITE `, as it goes on the wire.
impl fmt::Display for SiteCommand {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SiteCommand::Chmod { mode, path } => write!(f, "CHMOD {mode:o} {path}"),
            SiteCommand::Chgrp { group, path } => write!(f, "CHGRP {group} {path}"),
            SiteCommand::Utime { time, path } => write!(f, "UTIME {time} {path}"),
            SiteCommand::SetDiskStack(s) => write!(f, "SETDISKSTACK {s}"),
            SiteCommand::Whoami => f.write_str("WHOAMI"),
            SiteCommand::Other { sub, arg } if arg.is_empty() => f.write_str(sub),
            SiteCommand::Other { sub, arg } => write!(f, "{sub} {arg}"),
        }
    }
}
