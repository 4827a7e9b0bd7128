//! Lifetimes as people write them: `90s`, `30m`, `2h`, `1d`.

use std::fmt;

/// The longest lifetime accepted: a year (a longer one is a typo more
/// often than a plan, and keeps every sum far from overflow).
pub const MAX_SECS: u64 = 365 * 86_400;

/// A duration that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "`{}` is not a duration; expected a whole number and a unit, s, m, h or d (90s, 30m, 2h, 1d), at least 1s and at most 365d",
    corral_sandbox_core::text::Shown(.0)
)]
pub struct DurationError(pub String);

/// Seconds in `text` (`90s`, `30m`, `2h`, `1d`).
pub fn parse_secs(text: &str) -> Result<u64, DurationError> {
    let bad = || DurationError(text.to_owned());
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).ok_or_else(bad)?;
    let (digits, unit) = t.split_at(split);
    if digits.is_empty() {
        return Err(bad());
    }
    let n: u64 = digits.parse().map_err(|_| bad())?;
    let scale = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => return Err(bad()),
    };
    match n.checked_mul(scale) {
        Some(s) if (1..=MAX_SECS).contains(&s) => Ok(s),
        _ => Err(bad()),
    }
}

/// `secs` the way [`parse_secs`] reads it back, in the largest unit that
/// divides it (`7200` is `2h`, `90` is `90s`).
pub fn show_secs(secs: u64) -> impl fmt::Display {
    Shown(secs)
}

struct Shown(u64);

impl fmt::Display for Shown {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = self.0;
        for (unit, scale) in [("d", 86_400), ("h", 3600), ("m", 60)] {
            if s > 0 && s.is_multiple_of(scale) {
                return write!(f, "{}{unit}", s / scale);
            }
        }
        write!(f, "{s}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_each_unit() {
        assert_eq!(parse_secs("90s"), Ok(90));
        assert_eq!(parse_secs("30m"), Ok(1800));
        assert_eq!(parse_secs("2h"), Ok(7200));
        assert_eq!(parse_secs("1d"), Ok(86_400));
        assert_eq!(parse_secs(" 3s "), Ok(3));
        assert_eq!(parse_secs("365d"), Ok(MAX_SECS));
    }

    #[test]
    fn refuses_what_it_cannot_read_whole() {
        for bad in [
            "",
            "s",
            "90",
            "1.5h",
            "-5m",
            "5 m",
            "5M",
            "2w",
            "0s",
            "366d",
            "1h30m",
            "five",
            "99999999999999999999s",
        ] {
            let e = parse_secs(bad).unwrap_err();
            assert!(e.to_string().contains("90s, 30m, 2h, 1d"), "{bad}: {e}");
        }
    }

    #[test]
    fn shows_what_it_reads_back() {
        for (secs, shown) in [
            (90, "90s"),
            (1800, "30m"),
            (7200, "2h"),
            (86_400, "1d"),
            (3, "3s"),
        ] {
            assert_eq!(show_secs(secs).to_string(), shown);
            assert_eq!(parse_secs(shown), Ok(secs));
        }
    }
}
