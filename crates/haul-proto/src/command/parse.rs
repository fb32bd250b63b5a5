//! Parsing of a control line's argument, one function per command family. Each family
//! function takes the upper-cased verb and the raw argument and returns `Ok(None)` for a verb
//! outside its family.

use super::{Command, CommandError, ModTime, ProtLevel, Restart, TransferMode, TransferType};
use crate::hostport;
use crate::markers::RangeSet;

/// The argument as a string, or an error naming `verb` if it is empty.
fn need(verb: &'static str, arg: &str) -> Result<String, CommandError> {
    if arg.is_empty() {
        Err(CommandError::MissingArgument(verb))
    } else {
        Ok(arg.to_string())
    }
}

/// The argument as a string, or `None` if it is empty.
fn opt(arg: &str) -> Option<String> {
    if arg.is_empty() {
        None
    } else {
        Some(arg.to_string())
    }
}

/// The argument as a non-negative integer, or an error naming `verb`.
pub(super) fn num(verb: &'static str, s: &str) -> Result<u64, CommandError> {
    s.trim()
        .parse::<u64>()
        .map_err(|_| CommandError::BadArgument {
            verb,
            reason: format!("{s:?} is not a non-negative integer"),
        })
}

/// A [`CommandError::BadArgument`] for `verb`.
pub(super) fn bad(verb: &'static str, reason: impl Into<String>) -> CommandError {
    CommandError::BadArgument {
        verb,
        reason: reason.into(),
    }
}

/// Splits `n` whitespace-separated fields off the front of `s`, returning them and the rest.
pub(super) fn fields<'a>(
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

/// Parses the RFC 959 access-control commands (USER, PASS, ACCT, CWD, CDUP, QUIT, REIN).
pub(super) fn access(verb: &str, arg: &str) -> Result<Option<Command>, CommandError> {
    Ok(Some(match verb {
        "USER" => Command::User(need("USER", arg)?),
        "PASS" => Command::Pass(arg.to_string()),
        "ACCT" => Command::Acct(need("ACCT", arg)?),
        "CWD" => Command::Cwd(need("CWD", arg)?),
        "XCWD" => Command::Cwd(need("CWD", arg)?),
        "CDUP" | "XCUP" => Command::Cdup,
        "QUIT" => Command::Quit,
        "REIN" => Command::Rein,
        _ => return Ok(None),
    }))
}

/// Parses the transfer-parameter commands: RFC 959's PORT, PASV, TYPE, MODE and STRU, and
/// RFC 2428's EPRT and EPSV.
pub(super) fn transfer_params(verb: &str, arg: &str) -> Result<Option<Command>, CommandError> {
    Ok(Some(match verb {
        "PORT" => Command::Port(hostport::parse_port(arg).map_err(|e| bad("PORT", e))?),
        "EPRT" => Command::Eprt(hostport::parse_eprt(arg).map_err(|e| bad("EPRT", e))?),
        "PASV" => Command::Pasv,
        "EPSV" => Command::Epsv,
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
        _ => return Ok(None),
    }))
}

/// Parses the RFC 959 service commands (RETR, STOR, ALLO, REST, RNFR, LIST, SITE, ...).
pub(super) fn service(verb: &str, arg: &str) -> Result<Option<Command>, CommandError> {
    Ok(Some(match verb {
        "RETR" => Command::Retr(need("RETR", arg)?),
        "STOR" => Command::Stor(need("STOR", arg)?),
        "APPE" => Command::Appe(need("APPE", arg)?),
        "ALLO" => {
            let n = arg
                .split_whitespace()
                .next()
                .ok_or(CommandError::MissingArgument("ALLO"))?;
            Command::Allo(num("ALLO", n)?)
        }
        "REST" => Command::Rest(restart(arg)?),
        "RNFR" => Command::Rnfr(need("RNFR", arg)?),
        "RNTO" => Command::Rnto(need("RNTO", arg)?),
        "ABOR" => Command::Abor,
        "DELE" => Command::Dele(need("DELE", arg)?),
        "RMD" | "XRMD" => Command::Rmd(need("RMD", arg)?),
        "MKD" | "XMKD" => Command::Mkd(need("MKD", arg)?),
        "PWD" | "XPWD" => Command::Pwd,
        "LIST" => Command::List(opt(strip_list_flags(arg))),
        "NLST" => Command::Nlst(opt(strip_list_flags(arg))),
        "SITE" => Command::Site(need("SITE", arg)?),
        "SYST" => Command::Syst,
        "STAT" => Command::Stat(opt(arg)),
        "HELP" => Command::Help(opt(arg)),
        "NOOP" => Command::Noop,
        _ => return Ok(None),
    }))
}

/// Parses the REST argument: a range list if it has `-` or `,`, else a plain offset.
fn restart(arg: &str) -> Result<Restart, CommandError> {
    let a = arg.trim();
    if a.is_empty() {
        return Err(CommandError::MissingArgument("REST"));
    }
    if a.contains('-') || a.contains(',') {
        Ok(Restart::Ranges(
            RangeSet::parse(a).map_err(|e| bad("REST", e.to_string()))?,
        ))
    } else {
        Ok(Restart::Offset(num("REST", a)?))
    }
}

/// Parses the later RFC extensions: FEAT and OPTS (RFC 2389), SIZE, MDTM, MLSD and MLST
/// (RFC 3659), AUTH, PBSZ and PROT (RFC 4217), MFMT (draft-somers-ftp-mfxx), and the Globus
/// server's recursive MLSD, MLSR.
pub(super) fn rfc_extensions(verb: &str, arg: &str) -> Result<Option<Command>, CommandError> {
    Ok(Some(match verb {
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
        "SIZE" => Command::Size(need("SIZE", arg)?),
        "MDTM" => Command::Mdtm(need("MDTM", arg)?),
        "MLSD" => Command::Mlsd(opt(arg)),
        "MLST" => Command::Mlst(opt(arg)),
        "MLSR" => Command::Mlsr(opt(arg)),
        "MFMT" => {
            let (f, path) = fields("MFMT", arg, 1)?;
            Command::Mfmt {
                time: ModTime::parse(f[0]).map_err(|e| bad("MFMT", e))?,
                path: need("MFMT", path)?,
            }
        }
        "AUTH" => Command::Auth(need("AUTH", arg)?.trim().to_ascii_uppercase()),
        "ADAT" => Command::Adat(need("ADAT", arg)?.trim().to_string()),
        "PBSZ" => Command::Pbsz(num("PBSZ", &need("PBSZ", arg)?)?),
        "PROT" => match arg.trim().to_ascii_uppercase().as_str() {
            "C" => Command::Prot(ProtLevel::Clear),
            "S" => Command::Prot(ProtLevel::Safe),
            "E" => Command::Prot(ProtLevel::Confidential),
            "P" => Command::Prot(ProtLevel::Private),
            "" => return Err(CommandError::MissingArgument("PROT")),
            other => return Err(bad("PROT", format!("unknown level {other}"))),
        },
        _ => return Ok(None),
    }))
}

/// Parses the GridFTP extensions of GFD.020 (SPAS, SPOR, ERET, ESTO, SBUF, DCAU, CKSM).
pub(super) fn gridftp(verb: &str, arg: &str) -> Result<Option<Command>, CommandError> {
    Ok(Some(match verb {
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
        _ => return Ok(None),
    }))
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
