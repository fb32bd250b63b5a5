//! One grammar for the units of every flag of every `haul` command, and of the emulator's
//! topology files. Internally haul works in bytes, bits or bytes per second, and seconds; these
//! parsers are the only place human units are read.
//!
//! - **Sizes** are bytes. `K`, `M`, `G`, `T` (any case, optionally `KiB`, `MiB`, …) are powers of
//!   1024; `KB`, `MB`, `GB`, `TB` are powers of 1000, as in GNU coreutils: `64k` = 65,536,
//!   `4MiB` = 4,194,304, `1G` = 1,073,741,824, `1GB` = 1,000,000,000.
//! - **Rates** need a unit that says bits or bytes. Bits per second: `bit`, `kbit`, `mbit`,
//!   `gbit`, `tbit` (any case, also with `/s`: `Gbit/s`), `bps`, `kbps`, `Mbps`, `Gbps`, `Tbps`, or `b/s`, `kb/s`, `Mb/s`,
//!   `Gb/s`, `Tb/s` with a lower-case `b`; decimal, so `10gbit` = 10¹⁰ bit/s. Bytes per second:
//!   `B/s`, `kB/s`, `MB/s`, `GB/s`, `TB/s` (decimal: `125MB/s` = 1 Gbit/s) or `KiB/s`, `MiB/s`,
//!   `GiB/s`, `TiB/s` (binary). A bare number or a bare prefix (`100`, `100M`) is refused as
//!   ambiguous, and so is `MBps`.
//! - **Durations**: `ns`, `us` (or `µs`), `ms`, `s`, `m` (or `min`), `h`, `d`, `w`; `0` needs no
//!   unit.
//!
//! Numbers are decimal, with an optional fraction and exponent (`1.5G`, `5e8bit`), never
//! negative; a space may stand between number and unit.

use std::fmt;

/// A unit string that is not in the grammar; the message names the input and what would parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{input:?}: {why}")]
pub struct UnitError {
    /// What was given.
    pub input: String,
    /// What is wrong with it, and what to write instead.
    pub why: String,
}

fn err(input: &str, why: impl Into<String>) -> UnitError {
    UnitError {
        input: input.to_string(),
        why: why.into(),
    }
}

/// A number as written: its value, and its digits when it is a plain integer (so that sizes up
/// to `u64::MAX` parse exactly, which an `f64` would round).
struct Number {
    value: f64,
    integer: Option<u128>,
}

/// Splits `text` into a number and the unit after it.
fn split(text: &str, what: &str) -> Result<(Number, String), UnitError> {
    let t = text.trim();
    let b = t.as_bytes();
    let digits = |mut i: usize| {
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        i
    };
    let int_end = digits(0);
    let mut end = int_end;
    if end < b.len() && b[end] == b'.' {
        end = digits(end + 1);
    }
    if end < b.len() && (b[end] == b'e' || b[end] == b'E') {
        let mut j = end + 1;
        if j < b.len() && (b[j] == b'+' || b[j] == b'-') {
            j += 1;
        }
        // An exponent only when digits follow: `5e8bit` is 5·10⁸ bit, `1e` is not a number.
        if j < b.len() && b[j].is_ascii_digit() {
            end = digits(j);
        }
    }
    let (num, unit) = t.split_at(end);
    if num.is_empty() || num == "." {
        return Err(err(
            text,
            format!("expected a {what}: a number, then a unit"),
        ));
    }
    let value: f64 = num
        .parse()
        .map_err(|_| err(text, format!("{num:?} is not a number")))?;
    if !value.is_finite() {
        return Err(err(text, "the number is too large"));
    }
    let integer = (end == int_end).then(|| num.parse::<u128>().ok()).flatten();
    Ok((Number { value, integer }, unit.trim().to_string()))
}

/// Parses a size in bytes: `9000`, `64k`, `4MiB`, `1G`, `1.5GiB`, `1GB` (see the module doc).
pub fn parse_size(text: &str) -> Result<u64, UnitError> {
    let (n, unit) = split(text, "size")?;
    let scale: u64 = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "ki" | "kib" => 1 << 10,
        "m" | "mi" | "mib" => 1 << 20,
        "g" | "gi" | "gib" => 1 << 30,
        "t" | "ti" | "tib" => 1 << 40,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        "tb" => 1_000_000_000_000,
        _ => {
            return Err(err(
                text,
                format!(
                    "unknown size unit {unit:?}: use K, M, G, T or KiB, MiB, GiB, TiB (powers of \
                     1024) or KB, MB, GB, TB (powers of 1000)"
                ),
            ))
        }
    };
    let too_large = || err(text, "too large for a size in bytes");
    match n.integer {
        Some(i) => u64::try_from(i.checked_mul(u128::from(scale)).ok_or_else(too_large)?)
            .map_err(|_| too_large()),
        None => {
            let v = (n.value * scale as f64).round();
            // u64::MAX as f64 rounds up to 2^64, which does not fit.
            if v >= u64::MAX as f64 {
                return Err(too_large());
            }
            Ok(v as u64)
        }
    }
}

/// A data rate. Built only by [`parse_rate`] or from a number with its unit, so that no caller
/// can mistake bits for bytes.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd)]
pub struct Rate {
    bits_per_sec: f64,
}

impl Rate {
    /// A rate of `b` bits per second.
    pub fn from_bits_per_sec(b: f64) -> Rate {
        Rate { bits_per_sec: b }
    }

    /// A rate of `b` bytes per second.
    pub fn from_bytes_per_sec(b: f64) -> Rate {
        Rate {
            bits_per_sec: b * 8.0,
        }
    }

    /// Bits per second.
    pub fn bits_per_sec(self) -> f64 {
        self.bits_per_sec
    }

    /// Bytes per second.
    pub fn bytes_per_sec(self) -> f64 {
        self.bits_per_sec / 8.0
    }
}

impl fmt::Display for Rate {
    /// Decimal bits per second with three significant digits: `1 Gbit/s`, `12.5 Mbit/s`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.bits_per_sec;
        let (v, u) = [
            (1e12, "Tbit/s"),
            (1e9, "Gbit/s"),
            (1e6, "Mbit/s"),
            (1e3, "kbit/s"),
        ]
        .into_iter()
        .find(|&(s, _)| b >= s)
        .map_or((b, "bit/s"), |(s, u)| (b / s, u));
        write!(f, "{} {u}", trim_zeros(&format!("{v:.3}")))
    }
}

fn trim_zeros(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

/// The multiplier of a decimal prefix: "" 1, k/K 10³, m/M 10⁶, g/G 10⁹, t/T 10¹².
fn decimal(prefix: &str) -> Option<f64> {
    match prefix {
        "" => Some(1.0),
        "k" | "K" => Some(1e3),
        "m" | "M" => Some(1e6),
        "g" | "G" => Some(1e9),
        "t" | "T" => Some(1e12),
        _ => None,
    }
}

/// Parses a rate that says whether it counts bits or bytes: `100mbit`, `10Gb/s`, `1Gbps`,
/// `125MB/s`, `1GiB/s` (see the module doc). `100M` is refused as ambiguous.
pub fn parse_rate(text: &str) -> Result<Rate, UnitError> {
    let (n, unit) = split(text, "rate")?;
    let v = n.value;
    let lower = unit.to_ascii_lowercase();
    let bits = |m: f64| Ok(Rate::from_bits_per_sec(v * m));
    let bytes = |m: f64| Ok(Rate::from_bytes_per_sec(v * m));
    if let Some(p) = lower
        .strip_suffix("bit")
        .or_else(|| lower.strip_suffix("bit/s"))
        .and_then(decimal)
    {
        return bits(p);
    }
    if let Some(p) = unit.strip_suffix("bps").and_then(decimal) {
        return bits(p);
    }
    if let Some(p) = unit.strip_suffix("b/s").and_then(decimal) {
        return bits(p);
    }
    if let Some(p) = unit.strip_suffix("iB/s") {
        let m = match p {
            "K" | "k" => 1024f64,
            "M" => 1024f64.powi(2),
            "G" => 1024f64.powi(3),
            "T" => 1024f64.powi(4),
            _ => return Err(unknown_rate(text, &unit)),
        };
        return bytes(m);
    }
    if let Some(p) = unit.strip_suffix("B/s").and_then(decimal) {
        return bytes(p);
    }
    if decimal(&unit).is_some() || unit.ends_with("Bps") {
        return Err(err(
            text,
            "ambiguous: say whether the rate counts bits or bytes, as in 100mbit or 10Gb/s \
             (bits per second) or 125MB/s (bytes per second)",
        ));
    }
    Err(unknown_rate(text, &unit))
}

fn unknown_rate(text: &str, unit: &str) -> UnitError {
    err(
        text,
        format!(
            "unknown rate unit {unit:?}: use bit, kbit, mbit, gbit, tbit, Mbps or Gb/s (bits per \
             second), or B/s, kB/s, MB/s, GB/s, MiB/s, GiB/s (bytes per second)"
        ),
    )
}

/// Parses a duration into seconds: `100ms`, `1.5s`, `250us`, `30m`, `24h`, `7d`, `2w`; `0` alone.
pub fn parse_duration(text: &str) -> Result<f64, UnitError> {
    let (n, unit) = split(text, "duration")?;
    let scale = match unit.to_ascii_lowercase().as_str() {
        "" if n.value == 0.0 => 1.0,
        "" => return Err(err(text, "missing unit: use ns, us, ms, s, m, h, d or w")),
        "ns" => 1e-9,
        "us" | "µs" => 1e-6,
        "ms" => 1e-3,
        "s" | "sec" => 1.0,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        "d" => 86400.0,
        "w" => 604800.0,
        _ => {
            return Err(err(
                text,
                format!("unknown duration unit {unit:?}: use ns, us, ms, s, m, h, d or w"),
            ))
        }
    };
    Ok(n.value * scale)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_binary_by_letter_decimal_by_kb() {
        assert_eq!(parse_size("65536"), Ok(65536));
        assert_eq!(parse_size("64k"), Ok(64 << 10));
        assert_eq!(parse_size("64K"), Ok(64 << 10));
        assert_eq!(parse_size("4MiB"), Ok(4 << 20));
        assert_eq!(parse_size("1G"), Ok(1 << 30));
        assert_eq!(parse_size("1.5GiB"), Ok(3 << 29));
        assert_eq!(parse_size("1GB"), Ok(1_000_000_000));
        assert_eq!(parse_size("2 TB"), Ok(2_000_000_000_000));
        assert_eq!(parse_size("9000B"), Ok(9000));
        assert_eq!(parse_size("18446744073709551615"), Ok(u64::MAX));
        assert!(parse_size("18446744073709551616").is_err());
        assert!(parse_size("16777216T").is_err(), "2^64 bytes");
        assert!(parse_size("4X").is_err());
        assert!(parse_size("").is_err());
        assert!(parse_size("-1").is_err());
        assert!(parse_size("M").is_err());
    }

    #[test]
    fn rates_say_bits_or_bytes() {
        let b = |s: &str| parse_rate(s).map(Rate::bits_per_sec);
        assert_eq!(b("10gbit"), Ok(1e10));
        assert_eq!(b("100mbit"), Ok(1e8));
        assert_eq!(b("1Gbit"), Ok(1e9));
        assert_eq!(b("10Gb/s"), Ok(1e10));
        assert_eq!(b("1Gbps"), Ok(1e9));
        assert_eq!(b("5e8bit"), Ok(5e8));
        assert_eq!(b("125MB/s"), Ok(1e9));
        assert_eq!(b("1GiB/s"), Ok(8.0 * (1u64 << 30) as f64));
        assert_eq!(b("0bit"), Ok(0.0));
        for ambiguous in ["100M", "100", "1G", "10MBps"] {
            let e = parse_rate(ambiguous).unwrap_err();
            assert!(e.why.contains("ambiguous"), "{ambiguous}: {e}");
        }
        assert!(parse_rate("10 furlongs")
            .unwrap_err()
            .why
            .contains("unknown rate unit"));
        assert!(parse_rate("1XiB/s").is_err());
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("100ms"), Ok(0.1));
        assert_eq!(parse_duration("1.5s"), Ok(1.5));
        assert_eq!(parse_duration("30m"), Ok(1800.0));
        assert_eq!(parse_duration("24h"), Ok(86400.0));
        assert_eq!(parse_duration("7d"), Ok(604800.0));
        assert_eq!(parse_duration("2w"), Ok(1209600.0));
        assert_eq!(parse_duration("0"), Ok(0.0));
        assert!(parse_duration("5").is_err());
        assert!(parse_duration("5y").is_err());
    }

    #[test]
    fn rates_print_in_bits() {
        assert_eq!(Rate::from_bits_per_sec(1e9).to_string(), "1 Gbit/s");
        assert_eq!(
            Rate::from_bytes_per_sec(1.5625e6).to_string(),
            "12.5 Mbit/s"
        );
        assert_eq!(Rate::from_bits_per_sec(999.0).to_string(), "999 bit/s");
    }

    #[test]
    fn errors_name_the_input() {
        let e = parse_size("4X").unwrap_err().to_string();
        assert!(e.starts_with("\"4X\": unknown size unit"), "{e}");
    }
}
