//! Control-channel commands: parsing a client's line into a typed [`Command`] and writing a
//! typed command back out. Covers RFC 959, FEAT/OPTS (RFC 2389), SIZE/MDTM/REST/MLSD/MLST
//! (RFC 3659), AUTH/PBSZ/PROT (RFC 4217), the GridFTP extensions of GFD.020, and what the
//! Globus server adds: MLSR, MFMT (draft-somers-ftp-mfxx) and the `SITE` subcommands of
//! [`SiteCommand`].

use std::fmt;
use std::net::SocketAddr;

use thiserror::Error;

use crate::hostport;
use crate::markers::RangeSet;

mod parse;
mod site;
mod time;

use parse::{bad, num};
pub use site::SiteCommand;
pub use time::ModTime;

/// A command line could not be understood.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum CommandError {
    /// The line was empty.
    #[error("empty command")]
    Empty,
    /// The verb is not alphabetic or is too long.
    #[error("malformed command verb {0:?}")]
    BadVerb(String),
    /// The verb needs an argument that was not given.
    #[error("{0} needs an argument")]
    MissingArgument(&'static str),
    /// An argument could not be parsed.
    #[error("bad argument to {verb}: {reason}")]
    BadArgument {
        /// The command's verb.
        verb: &'static str,
        /// What was wrong with the argument.
        reason: String,
    },
}

/// Representation type (TYPE).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransferType {
    /// TYPE A.
    Ascii,
    /// TYPE I.
    Image,
}

/// Transfer mode (MODE).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransferMode {
    /// MODE S: stream mode, one connection, end of file by close.
    Stream,
    /// MODE E: GridFTP extended block mode.
    Extended,
}

/// Data-channel protection level (PROT, RFC 4217).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProtLevel {
    /// PROT C: clear.
    Clear,
    /// PROT S: safe (integrity only).
    Safe,
    /// PROT E: confidential.
    Confidential,
    /// PROT P: private (integrity and confidentiality).
    Private,
}

/// Data-channel authentication (GFD.020 `DCAU`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Dcau {
    /// `N`: none.
    None,
    /// `A`: the peer must present the session's own identity (the default under GSI).
    SelfId,
    /// `S`: the peer must present this subject.
    Subject(String),
}

/// The REST argument: a byte offset (stream mode) or a restart-marker range list (MODE E).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Restart {
    /// A plain offset.
    Offset(u64),
    /// Ranges already held by the receiver.
    Ranges(RangeSet),
}

/// A parsed control-channel command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// USER name.
    User(String),
    /// PASS password.
    Pass(String),
    /// ACCT account.
    Acct(String),
    /// CWD path.
    Cwd(String),
    /// CDUP.
    Cdup,
    /// QUIT.
    Quit,
    /// REIN.
    Rein,
    /// PORT h1,h2,h3,h4,p1,p2.
    Port(SocketAddr),
    /// EPRT |af|addr|port|.
    Eprt(SocketAddr),
    /// PASV.
    Pasv,
    /// EPSV [ALL|af].
    Epsv,
    /// SPAS (GFD.020 striped passive).
    Spas,
    /// SPOR hostport hostport ... (GFD.020 striped port).
    Spor(Vec<SocketAddr>),
    /// TYPE.
    Type(TransferType),
    /// MODE.
    Mode(TransferMode),
    /// STRU F.
    Stru(char),
    /// RETR path.
    Retr(String),
    /// STOR path.
    Stor(String),
    /// APPE path.
    Appe(String),
    /// ERET P offset length path (GFD.020 partial retrieve).
    Eret {
        /// Start of the range.
        offset: u64,
        /// Length of the range.
        length: u64,
        /// File to read.
        path: String,
    },
    /// ESTO A offset path (GFD.020 adjusted store).
    Esto {
        /// Offset in the file where the data goes.
        offset: u64,
        /// File to write.
        path: String,
    },
    /// ALLO size.
    Allo(u64),
    /// REST offset-or-ranges.
    Rest(Restart),
    /// RNFR path.
    Rnfr(String),
    /// RNTO path.
    Rnto(String),
    /// ABOR.
    Abor,
    /// DELE path.
    Dele(String),
    /// RMD path.
    Rmd(String),
    /// MKD path.
    Mkd(String),
    /// PWD.
    Pwd,
    /// LIST [path].
    List(Option<String>),
    /// NLST [path].
    Nlst(Option<String>),
    /// MLSD [path].
    Mlsd(Option<String>),
    /// MLST [path].
    Mlst(Option<String>),
    /// MLSR [path]: MLSD of a whole tree, as the Globus server lists it.
    Mlsr(Option<String>),
    /// MFMT time path (draft-somers-ftp-mfxx): set a file's modification time.
    Mfmt {
        /// The new modification time, UTC.
        time: ModTime,
        /// The file or directory.
        path: String,
    },
    /// SIZE path.
    Size(String),
    /// MDTM path.
    Mdtm(String),
    /// SITE text (passed through).
    Site(String),
    /// SYST.
    Syst,
    /// STAT [path].
    Stat(Option<String>),
    /// HELP [topic].
    Help(Option<String>),
    /// NOOP.
    Noop,
    /// FEAT.
    Feat,
    /// OPTS command options.
    Opts {
        /// The command whose options are set (upper-cased).
        command: String,
        /// The option text after the command.
        options: String,
    },
    /// AUTH mechanism (RFC 4217; `GSSAPI` for GSI, RFC 2228).
    Auth(String),
    /// ADAT base64 security token (RFC 2228).
    Adat(String),
    /// PBSZ size.
    Pbsz(u64),
    /// PROT level.
    Prot(ProtLevel),
    /// SBUF size (GFD.020 TCP buffer size).
    Sbuf(u64),
    /// DCAU mode [subject] (GFD.020 data-channel authentication).
    Dcau(String),
    /// CKSM algorithm offset length path (GFD.020 checksum; length -1 means to the end).
    Cksm {
        /// Algorithm name, upper-cased.
        algorithm: String,
        /// Start of the range.
        offset: u64,
        /// Length, or None for "to the end" (-1 on the wire).
        length: Option<u64>,
        /// File to checksum.
        path: String,
    },
    /// Any other verb, kept so the server can answer 500/502 naming it.
    Unknown {
        /// The upper-cased verb.
        verb: String,
        /// Everything after the verb.
        arg: String,
    },
}

impl Command {
    /// Parses one control line (without its CRLF).
    pub fn parse(line: &str) -> Result<Command, CommandError> {
        let line = line.trim_end_matches(['\r', '\n']);
        let line = line.trim_start();
        if line.is_empty() {
            return Err(CommandError::Empty);
        }
        let (verb, arg) = match line.find(' ') {
            Some(i) => (&line[..i], &line[i + 1..]),
            None => (line, ""),
        };
        if verb.len() > 8 || !verb.bytes().all(|b| b.is_ascii_alphabetic()) {
            return Err(CommandError::BadVerb(verb.chars().take(16).collect()));
        }
        let upper = verb.to_ascii_uppercase();
        // Families are disjoint; a verb none of them knows is kept as `Unknown`.
        let families = [
            parse::access,
            parse::transfer_params,
            parse::service,
            parse::rfc_extensions,
            parse::gridftp,
        ];
        for family in families {
            if let Some(cmd) = family(&upper, arg)? {
                return Ok(cmd);
            }
        }
        Ok(Command::Unknown {
            verb: upper,
            arg: arg.to_string(),
        })
    }

    /// The command's verb as sent on the wire.
    pub fn verb(&self) -> &str {
        match self {
            Command::User(_) => "USER",
            Command::Pass(_) => "PASS",
            Command::Acct(_) => "ACCT",
            Command::Cwd(_) => "CWD",
            Command::Cdup => "CDUP",
            Command::Quit => "QUIT",
            Command::Rein => "REIN",
            Command::Port(_) => "PORT",
            Command::Eprt(_) => "EPRT",
            Command::Pasv => "PASV",
            Command::Epsv => "EPSV",
            Command::Spas => "SPAS",
            Command::Spor(_) => "SPOR",
            Command::Type(_) => "TYPE",
            Command::Mode(_) => "MODE",
            Command::Stru(_) => "STRU",
            Command::Retr(_) => "RETR",
            Command::Stor(_) => "STOR",
            Command::Appe(_) => "APPE",
            Command::Eret { .. } => "ERET",
            Command::Esto { .. } => "ESTO",
            Command::Allo(_) => "ALLO",
            Command::Rest(_) => "REST",
            Command::Rnfr(_) => "RNFR",
            Command::Rnto(_) => "RNTO",
            Command::Abor => "ABOR",
            Command::Dele(_) => "DELE",
            Command::Rmd(_) => "RMD",
            Command::Mkd(_) => "MKD",
            Command::Pwd => "PWD",
            Command::List(_) => "LIST",
            Command::Nlst(_) => "NLST",
            Command::Mlsd(_) => "MLSD",
            Command::Mlst(_) => "MLST",
            Command::Mlsr(_) => "MLSR",
            Command::Mfmt { .. } => "MFMT",
            Command::Size(_) => "SIZE",
            Command::Mdtm(_) => "MDTM",
            Command::Site(_) => "SITE",
            Command::Syst => "SYST",
            Command::Stat(_) => "STAT",
            Command::Help(_) => "HELP",
            Command::Noop => "NOOP",
            Command::Feat => "FEAT",
            Command::Opts { .. } => "OPTS",
            Command::Auth(_) => "AUTH",
            Command::Adat(_) => "ADAT",
            Command::Pbsz(_) => "PBSZ",
            Command::Prot(_) => "PROT",
            Command::Sbuf(_) => "SBUF",
            Command::Dcau(_) => "DCAU",
            Command::Cksm { .. } => "CKSM",
            Command::Unknown { verb, .. } => verb,
        }
    }
}

fn write_opt(f: &mut fmt::Formatter<'_>, verb: &str, a: &Option<String>) -> fmt::Result {
    match a {
        Some(a) => write!(f, "{verb} {a}"),
        None => f.write_str(verb),
    }
}

/// Writes the command as it goes on the wire, without the CRLF.
impl fmt::Display for Command {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let v = self.verb();
        match self {
            Command::User(a)
            | Command::Pass(a)
            | Command::Acct(a)
            | Command::Cwd(a)
            | Command::Retr(a)
            | Command::Stor(a)
            | Command::Appe(a)
            | Command::Rnfr(a)
            | Command::Rnto(a)
            | Command::Dele(a)
            | Command::Rmd(a)
            | Command::Mkd(a)
            | Command::Size(a)
            | Command::Mdtm(a)
            | Command::Site(a)
            | Command::Auth(a)
            | Command::Adat(a)
            | Command::Dcau(a) => write!(f, "{v} {a}"),
            Command::Cdup
            | Command::Quit
            | Command::Rein
            | Command::Pasv
            | Command::Epsv
            | Command::Spas
            | Command::Abor
            | Command::Pwd
            | Command::Syst
            | Command::Noop
            | Command::Feat => f.write_str(v),
            Command::Port(a) => write!(f, "PORT {}", hostport::format_port(a)),
            Command::Eprt(a) => write!(f, "EPRT {}", hostport::format_eprt(a)),
            Command::Spor(addrs) => {
                f.write_str("SPOR")?;
                for a in addrs {
                    write!(f, " {}", hostport::format_port(a))?;
                }
                Ok(())
            }
            Command::Type(TransferType::Ascii) => f.write_str("TYPE A"),
            Command::Type(TransferType::Image) => f.write_str("TYPE I"),
            Command::Mode(TransferMode::Stream) => f.write_str("MODE S"),
            Command::Mode(TransferMode::Extended) => f.write_str("MODE E"),
            Command::Stru(c) => write!(f, "STRU {c}"),
            Command::Eret {
                offset,
                length,
                path,
            } => write!(f, "ERET P {offset} {length} {path}"),
            Command::Esto { offset, path } => write!(f, "ESTO A {offset} {path}"),
            Command::Mfmt { time, path } => write!(f, "MFMT {time} {path}"),
            Command::Allo(n) | Command::Pbsz(n) | Command::Sbuf(n) => write!(f, "{v} {n}"),
            Command::Rest(Restart::Offset(n)) => write!(f, "REST {n}"),
            Command::Rest(Restart::Ranges(r)) => write!(f, "REST {r}"),
            Command::List(a)
            | Command::Nlst(a)
            | Command::Mlsd(a)
            | Command::Mlst(a)
            | Command::Mlsr(a)
            | Command::Stat(a)
            | Command::Help(a) => write_opt(f, v, a),
            Command::Opts { command, options } if options.is_empty() => write!(f, "OPTS {command}"),
            Command::Opts { command, options } => write!(f, "OPTS {command} {options}"),
            Command::Prot(l) => {
                let c = match l {
                    ProtLevel::Clear => 'C',
                    ProtLevel::Safe => 'S',
                    ProtLevel::Confidential => 'E',
                    ProtLevel::Private => 'P',
                };
                write!(f, "PROT {c}")
            }
            Command::Cksm {
                algorithm,
                offset,
                length,
                path,
            } => match length {
                Some(l) => write!(f, "CKSM {algorithm} {offset} {l} {path}"),
                None => write!(f, "CKSM {algorithm} {offset} -1 {path}"),
            },
            Command::Unknown { verb, arg } if arg.is_empty() => f.write_str(verb),
            Command::Unknown { verb, arg } => write!(f, "{verb} {arg}"),
        }
    }
}

/// Options of `OPTS RETR` (GFD.020), e.g. `Parallelism=4,4,4;`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RetrOptions {
    /// Starting parallelism (the first of the three numbers), if given.
    pub parallelism: Option<u32>,
    /// Every `key=value` pair, in order.
    pub pairs: Vec<(String, String)>,
}

impl RetrOptions {
    /// Parses the option text after `OPTS RETR`.
    pub fn parse(s: &str) -> Result<RetrOptions, CommandError> {
        let mut out = RetrOptions::default();
        for item in s.split(';').map(str::trim).filter(|i| !i.is_empty()) {
            let (k, v) = item
                .split_once('=')
                .ok_or_else(|| bad("OPTS", format!("option {item:?} is not key=value")))?;
            if k.trim().eq_ignore_ascii_case("Parallelism") {
                let first = v.split(',').next().unwrap_or("");
                let n = num("OPTS", first)?;
                if n == 0 || n > 1024 {
                    return Err(bad(
                        "OPTS",
                        format!("parallelism {n} out of range 1..=1024"),
                    ));
                }
                out.parallelism = Some(n as u32);
            }
            out.pairs.push((k.trim().to_string(), v.trim().to_string()));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests;
