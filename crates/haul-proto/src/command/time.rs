//! [`ModTime`]: a file time as `YYYYMMDDHHMMSS` in UTC (RFC 3659 §2.3), the form `MDTM`
//! replies with and `MFMT` and `SITE UTIME` take, with its conversion to and from Unix seconds.

use std::fmt;

/// A UTC civil time to the second, as RFC 3659's `time-val` writes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct ModTime {
    /// The year (0–9999 when parsed; a file's time may lie further out).
    pub year: i64,
    /// The month, 1–12.
    pub month: u32,
    /// The day of the month, 1–31.
    pub day: u32,
    /// The hour, 0–23.
    pub hour: u32,
    /// The minute, 0–59.
    pub minute: u32,
    /// The second, 0–59.
    pub second: u32,
}

/// Days in `month` of `year` (proleptic Gregorian calendar).
fn days_in_month(year: i64, month: u32) -> u32 {
    match month {
        4 | 6 | 9 | 11 => 30,
        2 if year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) => 29,
        2 => 28,
        _ => 31,
    }
}

impl ModTime {
    /// Parses `YYYYMMDDHHMMSS`, optionally followed by `.` and fractions of a second, which are
    /// dropped (RFC 3659 §2.3). Every field must be in range: there is no 30 February.
    pub fn parse(s: &str) -> Result<ModTime, String> {
        let (whole, frac) = s.split_once('.').unwrap_or((s, "0"));
        let digits = |t: &str| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit());
        if whole.len() != 14 || !digits(whole) || !digits(frac) {
            return Err(format!("{s:?} is not a time of the form YYYYMMDDHHMMSS"));
        }
        // Fourteen ASCII digits: every slice below is digits and parses.
        let field = |a: usize, b: usize| whole[a..b].parse::<u32>().unwrap_or(0);
        let t = ModTime {
            year: i64::from(field(0, 4)),
            month: field(4, 6),
            day: field(6, 8),
            hour: field(8, 10),
            minute: field(10, 12),
            second: field(12, 14),
        };
        let out = if !(1..=12).contains(&t.month) {
            Some("month")
        } else if t.day < 1 || t.day > days_in_month(t.year, t.month) {
            Some("day")
        } else if t.hour > 23 {
            Some("hour")
        } else if t.minute > 59 {
            Some("minute")
        } else if t.second > 59 {
            Some("second")
        } else {
            None
        };
        match out {
            Some(what) => Err(format!("{s:?}: the {what} is out of range")),
            None => Ok(t),
        }
    }

    /// The UTC civil time of Unix seconds.
    pub fn from_unix(secs: i64) -> ModTime {
        let days = secs.div_euclid(86_400);
        let sod = secs.rem_euclid(86_400);
        // Days-to-civil conversion of H. Hinnant, "chrono-Compatible Low-Level Date Algorithms".
        let z = days + 719_468;
        let era = z.div_euclid(146_097);
        let doe = z - era * 146_097;
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
        let mp = (5 * doy + 2) / 153;
        let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
        let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
        ModTime {
            year: yoe + era * 400 + i64::from(month <= 2),
            month,
            day,
            hour: (sod / 3600) as u32,
            minute: (sod % 3600 / 60) as u32,
            second: (sod % 60) as u32,
        }
    }

    /// Unix seconds of this time (negative before 1970).
    pub fn unix_seconds(&self) -> i64 {
        // Civil-to-days conversion of the same paper.
        let y = self.year - i64::from(self.month <= 2);
        let era = y.div_euclid(400);
        let yoe = y - era * 400;
        let m = i64::from(self.month);
        let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(self.day) - 1;
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
        let days = era * 146_097 + doe - 719_468;
        days * 86_400
            + i64::from(self.hour) * 3600
            + i64::from(self.minute) * 60
            + i64::from(self.second)
    }
}

/// `YYYYMMDDHHMMSS`.
impl fmt::Display for ModTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:04}{:02}{:02}{:02}{:02}{:02}",
            self.year, self.month, self.day, self.hour, self.minute, self.second
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_times() {
        let t = ModTime::parse("20000229000000").unwrap();
        assert_eq!(t.unix_seconds(), 951_782_400);
        assert_eq!(ModTime::from_unix(951_782_400), t);
        let t = ModTime::from_unix(1_700_000_000);
        assert_eq!(t.to_string(), "20231114221320");
        assert_eq!(ModTime::from_unix(0).to_string(), "19700101000000");
        assert_eq!(
            ModTime::parse("20200102030405.123").unwrap().to_string(),
            "20200102030405"
        );
    }

    #[test]
    fn refuses_what_is_not_a_time() {
        for bad in [
            "",
            "2020010203040",
            "202001020304050",
            "20201302030405",
            "20200230030405",
            "20190229000000",
            "20200100000000",
            "20200101240000",
            "20200101006000",
            "20200101000060",
            "2020010100000x",
            "+2020010100000",
            "20200101000000.",
            "20200101000000.x",
        ] {
            assert!(ModTime::parse(bad).is_err(), "{bad:?} parsed");
        }
    }
}
