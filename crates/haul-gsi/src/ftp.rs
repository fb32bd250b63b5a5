//! RFC 2228 on the control channel, as Globus frames it. Security tokens travel base64-encoded
//! in `ADAT <token>` commands and `335 ADAT=<token>` / `235 ADAT=<token>` replies. Once the
//! context is established every command comes as `ENC <token>` (or `MIC`, or `CONF`), the
//! token wrapping the command line with its CRLF; every reply line is wrapped on its own and
//! sent as `632-<token>` (continuation lines) or `632 <token>` (the last), which the client
//! unwraps and joins into the plain reply.

use base64::engine::general_purpose::STANDARD;
use base64::Engine;

use crate::context::{Context, ContextError};

/// Largest token accepted in one line, decoded (a control line is bounded anyway; this bounds
/// what one `ADAT` may make the context parse).
pub const MAX_TOKEN: usize = 64 * 1024;

/// A control line that could not be read as protected.
#[derive(Debug, thiserror::Error)]
pub enum FtpError {
    /// The base64 is malformed or too long.
    #[error("bad security token: {0}")]
    Token(String),
    /// The context refused the token.
    #[error("{0}")]
    Context(#[from] ContextError),
    /// The unwrapped text is not a line.
    #[error("protected command is not a text line")]
    NotText,
}

/// How a command was protected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protection {
    /// `MIC`: integrity.
    Mic,
    /// `ENC`: integrity and confidentiality.
    Enc,
    /// `CONF`: confidentiality.
    Conf,
}

impl Protection {
    /// The reply code for replies to a command protected this way (RFC 2228: 631 integrity,
    /// 632 integrity and confidentiality, 633 confidentiality). Globus wraps every reply with
    /// TLS records, which are encrypted: 632 unless the command came as `CONF`.
    pub fn reply_code(self) -> u16 {
        match self {
            Protection::Conf => 633,
            Protection::Mic | Protection::Enc => 632,
        }
    }
}

/// Splits a protected command line into its protection and base64 token.
pub fn protected_command(line: &str) -> Option<(Protection, &str)> {
    let (verb, arg) = line.split_once(' ').unwrap_or((line, ""));
    let p = if verb.eq_ignore_ascii_case("ENC") {
        Protection::Enc
    } else if verb.eq_ignore_ascii_case("MIC") {
        Protection::Mic
    } else if verb.eq_ignore_ascii_case("CONF") {
        Protection::Conf
    } else {
        return None;
    };
    Some((p, arg.trim()))
}

/// Decodes a base64 token, bounded by [`MAX_TOKEN`].
pub fn decode(token: &str) -> Result<Vec<u8>, FtpError> {
    if token.len() > MAX_TOKEN / 3 * 4 + 4 {
        return Err(FtpError::Token(format!("longer than {MAX_TOKEN} bytes")));
    }
    STANDARD
        .decode(token.trim())
        .map_err(|e| FtpError::Token(e.to_string()))
}

/// Encodes a token.
pub fn encode(token: &[u8]) -> String {
    STANDARD.encode(token)
}

/// Unwraps a protected command's token into the command line(s) it carries, without line
/// ends (a client may wrap several lines in one token; Globus wraps one).
pub fn unwrap_command(ctx: &mut Context, token: &str) -> Result<Vec<String>, FtpError> {
    let plain = ctx.unwrap(&decode(token)?)?;
    let text = std::str::from_utf8(&plain).map_err(|_| FtpError::NotText)?;
    let text = text.trim_end_matches('\0');
    Ok(text
        .split("\r\n")
        .flat_map(|l| l.split('\n'))
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect())
}

/// Wraps an encoded reply (`NNN text\r\n` or a multi-line reply) line by line: every line
/// becomes `CODE-<token>\r\n`, the last `CODE <token>\r\n`.
pub fn wrap_reply(ctx: &mut Context, code: u16, reply: &str) -> Result<String, FtpError> {
    let lines: Vec<&str> = reply
        .split_inclusive("\r\n")
        .filter(|l| !l.is_empty())
        .collect();
    let mut out = String::new();
    for (i, line) in lines.iter().enumerate() {
        let sep = if i + 1 == lines.len() { ' ' } else { '-' };
        let token = ctx.wrap(line.as_bytes())?;
        out.push_str(&format!("{code}{sep}{}\r\n", encode(&token)));
    }
    Ok(out)
}

/// Reads a protected reply line (`63x-token` or `63x token`): the token and whether it is the
/// last line of the reply.
pub fn protected_reply(line: &str) -> Option<(&str, bool)> {
    let b = line.as_bytes();
    if b.len() < 4 || !matches!(&b[..3], b"631" | b"632" | b"633") {
        return None;
    }
    // The first four bytes are ASCII, so byte 4 is a character boundary.
    let rest = line.get(4..)?;
    match b[3] {
        b' ' => Some((rest, true)),
        b'-' => Some((rest, false)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_protected_commands() {
        assert_eq!(
            protected_command("ENC FwMD"),
            Some((Protection::Enc, "FwMD"))
        );
        assert_eq!(protected_command("mic abc"), Some((Protection::Mic, "abc")));
        assert_eq!(protected_command("CONF x"), Some((Protection::Conf, "x")));
        assert_eq!(protected_command("RETR x"), None);
        assert_eq!(protected_command("ENC"), Some((Protection::Enc, "")));
    }

    #[test]
    fn reads_protected_replies() {
        assert_eq!(protected_reply("632 abc"), Some(("abc", true)));
        assert_eq!(protected_reply("631-abc"), Some(("abc", false)));
        assert_eq!(protected_reply("230 ok"), None);
        assert_eq!(protected_reply("632"), None);
        assert_eq!(protected_reply("632x"), None);
    }

    #[test]
    fn tokens_are_bounded() {
        assert!(decode(&"A".repeat(MAX_TOKEN * 2)).is_err());
        assert!(decode("not base64!").is_err());
        assert_eq!(decode(&encode(b"hello")).unwrap(), b"hello");
    }
}
