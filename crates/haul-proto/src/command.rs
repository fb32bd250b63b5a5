//! Control-channel commands: parsing a client's line into a typed [`Command`] and writing a
//! typed command back out. Covers RFC 959, FEAT/OPTS (RFC 2389), SIZE/MDTM/REST/MLSD/MLST
//! (RFC 3659), AUTH/PBSZ/PROT (RFC 4217) and the GridFTP extensions of GFD.020.

use std::fmt;
use std::net::SocketAddr;

use thiserror::Error;

use crate::hostport;
use crate::markers::RangeSet;

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
    /// AUTH mechanism (RFC 4217).
    Auth(String),
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

fn need(verb: &'static str, arg: &str) -> Result<String, CommandError> {
    if arg.is_empty() {
        Err(CommandError::MissingArgument(verb))
    } else {
        Ok(arg.to_string())
    }
}

fn opt(arg: &str) -> Option<String> {
    if arg.is_empty() {
        None
    } else {
        Some(arg.to_string())
    }
}

fn num(verb: &'static str, s: &str) -> Result<u64, CommandError> {
    s.trim()
        .parse::<u64>()
        .map_err(|_| CommandError::BadArgument {
            verb,
            reason: format!("{s:?} is not a non-negative integer"),
        })
}

fn bad(verb: &'static str, reason: impl Into<String>) -> CommandError {
    CommandError::BadArgument {
        verb,
        reason: reason.into(),
    }
}

/// Splits `n` whitespace-separated fields off the front of `s`, returning them and the rest.
fn fields<'a>(
    verb: &'static str,
    s: &'a str,
    n: usize,
) -> Result<(Vec<&'a str>, &'a str), CommandError> {
    let mut out = Vec::with_capacity(n);
    let mut rest = s.trim_start();
    for _ in 0..n {
        let end = rest.find(' ').unwrap_or(rest.len());
        if end == 0 {
            return Err(bad(verb, format!("expected {n} fields before the path")));
        }
        out.push(&rest[..end]);
        rest = rest[end..].strip_prefix(' ').unwrap_or(&rest[end..]);
    }
    Ok((out, rest))
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
        let cmd = match upper.as_str() {
            "USER" => Command::User(need("USER", arg)?),
            "PASS" => Command::Pass(arg.to_string()),
            "ACCT" => Command::Acct(need("ACCT", arg)?),
            "CWD" => Command::Cwd(need("CWD", arg)?),
            "XCWD" => Command::Cwd(need("CWD", arg)?),
            "CDUP" | "XCUP" => Command::Cdup,
            "QUIT" => Command::Quit,
            "REIN" => Command::Rein,
            "PORT" => Command::Port(hostport::parse_port(arg).map_err(|e| bad("PORT", e))?),
            "EPRT" => Command::Eprt(hostport::parse_eprt(arg).map_err(|e| bad("EPRT", e))?),
            "PASV" => Command::Pasv,
            "EPSV" => Command::Epsv,
            "SPAS" => Command::Spas,
            "SPOR" => {
                let addrs = arg
                    .split_whitespace()
                    .map(hostport::parse_port)
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|e| bad("SPOR", e))?;
                if addrs.is_empty() {
                    return Err(CommandError::MissingArgument("SPOR"));
                }
                Command::Spor(addrs)
            }
            "TYPE" => {
                let t = arg.split_whitespace().next().unwrap_or("");
                match t.to_ascii_uppercase().as_str() {
                    "A" => Command::Type(TransferType::Ascii),
                    "I" | "L" => Command::Type(TransferType::Image),
                    "" => return Err(CommandError::MissingArgument("TYPE")),
                    other => return Err(bad("TYPE", format!("unsupported type {other}"))),
                }
            }
            "MODE" => match arg.trim().to_ascii_uppercase().as_str() {
                "S" => Command::Mode(TransferMode::Stream),
                "E" => Command::Mode(TransferMode::Extended),
                "" => return Err(CommandError::MissingArgument("MODE")),
                other => return Err(bad("MODE", format!("unsupported mode {other}"))),
            },
            "STRU" => match arg.trim().to_ascii_uppercase().as_str() {
                "F" => Command::Stru('F'),
                "" => return Err(CommandError::MissingArgument("STRU")),
                other => return Err(bad("STRU", format!("unsupported structure {other}"))),
            },
            "RETR" => Command::Retr(need("RETR", arg)?),
            "STOR" => Command::Stor(need("STOR", arg)?),
            "APPE" => Command::Appe(need("APPE", arg)?),
            "ERET" => {
                let (f, path) = fields("ERET", arg, 3)?;
                if !f[0].eq_ignore_ascii_case("P") {
                    return Err(bad("ERET", format!("unsupported module {}", f[0])));
                }
                Command::Eret {
                    offset: num("ERET", f[1])?,
                    length: num("ERET", f[2])?,
                    path: need("ERET", path)?,
                }
            }
            "ESTO" => {
                let (f, path) = fields("ESTO", arg, 2)?;
                if !f[0].eq_ignore_ascii_case("A") {
                    return Err(bad("ESTO", format!("unsupported module {}", f[0])));
                }
                Command::Esto {
                    offset: num("ESTO", f[1])?,
                    path: need("ESTO", path)?,
                }
            }
            "ALLO" => {
                let n = arg
                    .split_whitespace()
                    .next()
                    .ok_or(CommandError::MissingArgument("ALLO"))?;
                Command::Allo(num("ALLO", n)?)
            }
            "REST" => {
                let a = arg.trim();
                if a.is_empty() {
                    return Err(CommandError::MissingArgument("REST"));
                }
                if a.contains('-') || a.contains(',') {
                    Command::Rest(Restart::Ranges(
                        RangeSet::parse(a).map_err(|e| bad("REST", e.to_string()))?,
                    ))
                } else {
                    Command::Rest(Restart::Offset(num("REST", a)?))
                }
            }
            "RNFR" => Command::Rnfr(need("RNFR", arg)?),
            "RNTO" => Command::Rnto(need("RNTO", arg)?),
            "ABOR" => Command::Abor,
            "DELE" => Command::Dele(need("DELE", arg)?),
            "RMD" | "XRMD" => Command::Rmd(need("RMD", arg)?),
            "MKD" | "XMKD" => Command::Mkd(need("MKD", arg)?),
            "PWD" | "XPWD" => Command::Pwd,
            "LIST" => Command::List(opt(strip_list_flags(arg))),
            "NLST" => Command::Nlst(opt(strip_list_flags(arg))),
            "MLSD" => Command::Mlsd(opt(arg)),
            "MLST" => Command::Mlst(opt(arg)),
            "SIZE" => Command::Size(need("SIZE", arg)?),
            "MDTM" => Command::Mdtm(need("MDTM", arg)?),
            "SITE" => Command::Site(need("SITE", arg)?),
            "SYST" => Command::Syst,
            "STAT" => Command::Stat(opt(arg)),
            "HELP" => Command::Help(opt(arg)),
            "NOOP" => Command::Noop,
            "FEAT" => Command::Feat,
            "OPTS" => {
                let a = need("OPTS", arg)?;
                let (c, o) = match a.find(' ') {
                    Some(i) => (&a[..i], a[i + 1..].to_string()),
                    None => (a.as_str(), String::new()),
                };
                Command::Opts {
                    command: c.to_ascii_uppercase(),
                    options: o,
                }
            }
            "AUTH" => Command::Auth(need("AUTH", arg)?.trim().to_ascii_uppercase()),
            "PBSZ" => Command::Pbsz(num("PBSZ", &need("PBSZ", arg)?)?),
            "PROT" => match arg.trim().to_ascii_uppercase().as_str() {
                "C" => Command::Prot(ProtLevel::Clear),
                "S" => Command::Prot(ProtLevel::Safe),
                "E" => Command::Prot(ProtLevel::Confidential),
                "P" => Command::Prot(ProtLevel::Private),
                "" => return Err(CommandError::MissingArgument("PROT")),
                other => return Err(bad("PROT", format!("unknown level {other}"))),
            },
            "SBUF" => Command::Sbuf(num("SBUF", &need("SBUF", arg)?)?),
            "DCAU" => Command::Dcau(need("DCAU", arg)?.trim().to_string()),
            "CKSM" => {
                let (f, path) = fields("CKSM", arg, 3)?;
                let length = if f[2] == "-1" {
                    None
                } else {
                    Some(num("CKSM", f[2])?)
                };
                Command::Cksm {
                    algorithm: f[0].to_ascii_uppercase(),
                    offset: num("CKSM", f[1])?,
                    length,
                    path: need("CKSM", path)?,
                }
            }
            _ => Command::Unknown {
                verb: upper,
                arg: arg.to_string(),
            },
        };
        Ok(cmd)
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
            Command::Pbsz(_) => "PBSZ",
            Command::Prot(_) => "PROT",
            Command::Sbuf(_) => "SBUF",
            Command::Dcau(_) => "DCAU",
            Command::Cksm { .. } => "CKSM",
            Command::Unknown { verb, .. } => verb,
        }
    }
}

/// `ls`-style flags some clients put before the LIST path (`LIST -la dir`).
fn strip_list_flags(arg: &str) -> &str {
    let mut rest = arg.trim_start();
    while rest.starts_with('-') {
        let end = rest.find(' ').unwrap_or(rest.len());
        rest = rest[end..].trim_start();
    }
    rest
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
            Command::Allo(n) | Command::Pbsz(n) | Command::Sbuf(n) => write!(f, "{v} {n}"),
            Command::Rest(Restart::Offset(n)) => write!(f, "REST {n}"),
            Command::Rest(Restart::Ranges(r)) => write!(f, "REST {r}"),
            Command::List(a)
            | Command::Nlst(a)
            | Command::Mlsd(a)
            | Command::Mlst(a)
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
mod tests {
    use super::*;

    fn rt(line: &str) -> Command {
        let c = Command::parse(line).unwrap();
        assert_eq!(
            Command::parse(&c.to_string()).unwrap(),
            c,
            "round trip of {line}"
        );
        c
    }

    #[test]
    fn parses_core_commands() {
        assert_eq!(rt("USER anonymous"), Command::User("anonymous".into()));
        assert_eq!(rt("retr /a b/c.dat"), Command::Retr("/a b/c.dat".into()));
        assert_eq!(rt("TYPE I"), Command::Type(TransferType::Image));
        assert_eq!(rt("MODE E"), Command::Mode(TransferMode::Extended));
        assert_eq!(rt("PASV"), Command::Pasv);
        assert_eq!(
            rt("PORT 127,0,0,1,4,1"),
            Command::Port("127.0.0.1:1025".parse().unwrap())
        );
        assert_eq!(rt("REST 100"), Command::Rest(Restart::Offset(100)));
        assert_eq!(rt("LIST"), Command::List(None));
        assert_eq!(
            Command::parse("LIST -la dir").unwrap(),
            Command::List(Some("dir".into()))
        );
    }

    #[test]
    fn parses_gridftp_extensions() {
        assert_eq!(
            rt("ERET P 10 20 /x y"),
            Command::Eret {
                offset: 10,
                length: 20,
                path: "/x y".into()
            }
        );
        assert_eq!(
            rt("ESTO A 5 /f"),
            Command::Esto {
                offset: 5,
                path: "/f".into()
            }
        );
        assert_eq!(
            rt("CKSM md5 0 -1 /f"),
            Command::Cksm {
                algorithm: "MD5".into(),
                offset: 0,
                length: None,
                path: "/f".into()
            }
        );
        assert_eq!(rt("SBUF 4194304"), Command::Sbuf(4194304));
        assert_eq!(
            rt("SPOR 127,0,0,1,4,1 127,0,0,1,4,2"),
            Command::Spor(vec![
                "127.0.0.1:1025".parse().unwrap(),
                "127.0.0.1:1026".parse().unwrap()
            ])
        );
        let c = rt("OPTS RETR Parallelism=4,4,4;");
        let Command::Opts { command, options } = c else {
            panic!()
        };
        assert_eq!(command, "RETR");
        assert_eq!(RetrOptions::parse(&options).unwrap().parallelism, Some(4));
        assert_eq!(
            rt("REST 0-100,200-300"),
            Command::Rest(Restart::Ranges(RangeSet::parse("0-100,200-300").unwrap()))
        );
    }

    #[test]
    fn rejects_malformed() {
        assert_eq!(Command::parse(""), Err(CommandError::Empty));
        assert!(matches!(
            Command::parse("R3TR x"),
            Err(CommandError::BadVerb(_))
        ));
        assert_eq!(
            Command::parse("RETR"),
            Err(CommandError::MissingArgument("RETR"))
        );
        assert!(matches!(
            Command::parse("PORT 1,2,3"),
            Err(CommandError::BadArgument { .. })
        ));
        assert!(matches!(
            Command::parse("ERET P x 1 /f"),
            Err(CommandError::BadArgument { .. })
        ));
        assert!(matches!(
            Command::parse("CKSM MD5 0"),
            Err(CommandError::BadArgument { .. })
        ));
        assert!(RetrOptions::parse("Parallelism=0,0,0;").is_err());
        assert_eq!(
            Command::parse("XYZZY 1").unwrap(),
            Command::Unknown {
                verb: "XYZZY".into(),
                arg: "1".into()
            }
        );
    }
}
