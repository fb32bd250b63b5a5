//! Human units at the edge: parsing and printing durations, rates, sizes and probabilities.
//! Internally everything is seconds (f64), bytes per second (f64), bytes (u64) and a fraction in [0, 1].

use crate::error::{Error, Result};

/// Parses a duration such as `100ms`, `1.5s`, `250us`, `0` into seconds (`haul_units`).
pub fn parse_duration(text: &str) -> Result<f64> {
    haul_units::parse_duration(text).map_err(|e| Error::parse("duration", text, e.why))
}

/// Parses a link rate such as `1gbit`, `100mbit`, `10Gb/s`, `5e8bit` into bytes per second
/// (`haul_units`: bits or bytes per second, said by the unit); zero is refused.
pub fn parse_rate(text: &str) -> Result<f64> {
    let r = haul_units::parse_rate(text).map_err(|e| Error::parse("rate", text, e.why))?;
    if r.bits_per_sec() == 0.0 {
        return Err(Error::parse("rate", text, "must be positive"));
    }
    Ok(r.bytes_per_sec())
}

/// Parses a size such as `9000`, `64k`, `4MiB`, `1M` into bytes (`haul_units`: K, M, G are
/// powers of 1024, KB, MB, GB powers of 1000).
pub fn parse_size(text: &str) -> Result<u64> {
    haul_units::parse_size(text).map_err(|e| Error::parse("size", text, e.why))
}

/// The number at the start of `s`, and the rest.
fn split_number(s: &str) -> (&str, &str) {
    let end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-' || c == '+'))
        .unwrap_or(s.len());
    (&s[..end], s[end..].trim())
}

fn number(what: &'static str, text: &str, num: &str) -> Result<f64> {
    let v: f64 = num
        .parse()
        .map_err(|_| Error::parse(what, text, "expected a number followed by a unit"))?;
    if !v.is_finite() || v < 0.0 {
        return Err(Error::parse(
            what,
            text,
            "must be a finite, non-negative number",
        ));
    }
    Ok(v)
}

/// Parses a probability given as `0.01%` or as a fraction `0.0001`.
pub fn parse_prob(text: &str) -> Result<f64> {
    let t = text.trim();
    let (num, unit) = split_number(t);
    let v = number("probability", text, num)?;
    let p = match unit {
        "%" => v / 100.0,
        "" => v,
        _ => {
            return Err(Error::parse(
                "probability",
                text,
                "use a fraction or a percentage",
            ))
        }
    };
    if p > 1.0 {
        return Err(Error::parse("probability", text, "must be at most 100%"));
    }
    Ok(p)
}

/// Formats seconds as a short human duration (`100ms`, `1.5s`, `250us`).
pub fn fmt_duration(secs: f64) -> String {
    if secs >= 1.0 {
        format!("{}s", trim(secs))
    } else if secs >= 1e-3 {
        format!("{}ms", trim(secs * 1e3))
    } else if secs == 0.0 {
        "0".to_string()
    } else {
        format!("{}us", trim(secs * 1e6))
    }
}

/// Formats bytes per second as bits (`1gbit`, `100mbit`).
pub fn fmt_rate(bytes_per_sec: f64) -> String {
    let bits = bytes_per_sec * 8.0;
    if bits >= 1e9 {
        format!("{}gbit", trim(bits / 1e9))
    } else if bits >= 1e6 {
        format!("{}mbit", trim(bits / 1e6))
    } else if bits >= 1e3 {
        format!("{}kbit", trim(bits / 1e3))
    } else {
        format!("{}bit", trim(bits))
    }
}

fn trim(v: f64) -> String {
    let s = format!("{v:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("100ms").unwrap(), 0.1);
        assert_eq!(parse_duration("1.5s").unwrap(), 1.5);
        assert!((parse_duration("250us").unwrap() - 250e-6).abs() < 1e-15);
        assert_eq!(parse_duration("0").unwrap(), 0.0);
        assert!(parse_duration("100").is_err());
        assert!(parse_duration("-1ms").is_err());
        assert!(parse_duration("fast").is_err());
        assert_eq!(fmt_duration(0.1), "100ms");
    }

    #[test]
    fn rates() {
        assert_eq!(parse_rate("1gbit").unwrap(), 125e6);
        assert_eq!(parse_rate("100Mbit").unwrap(), 12.5e6);
        assert_eq!(parse_rate("10Gb/s").unwrap(), 1.25e9);
        assert_eq!(parse_rate("1gbps").unwrap(), 125e6);
        assert_eq!(
            parse_rate("125MB/s").unwrap(),
            125e6,
            "bytes per second, said by the B"
        );
        assert!(parse_rate("1G").is_err(), "ambiguous: bits or bytes?");
        assert!(parse_rate("0gbit").is_err());
        assert_eq!(fmt_rate(125e6), "1gbit");
    }

    #[test]
    fn sizes_and_probs() {
        assert_eq!(parse_size("9000").unwrap(), 9000);
        assert_eq!(parse_size("64k").unwrap(), 65536);
        assert_eq!(parse_size("4MiB").unwrap(), 4 << 20);
        assert!(parse_size("4x").is_err());
        assert!((parse_prob("0.01%").unwrap() - 1e-4).abs() < 1e-15);
        assert_eq!(parse_prob("0.5").unwrap(), 0.5);
        assert!(parse_prob("150%").is_err());
    }
}
