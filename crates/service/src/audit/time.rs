//! Instants as people write them: RFC 3339 out, and `--since` in
//! (`90s`, `10m`, `2h`, `1d` ago, or an RFC 3339 UTC date-time).

use corral_sandbox_core::verify::Timestamp;

/// `at` as `YYYY-MM-DDTHH:MM:SS.mmmZ`.
pub fn rfc3339_millis(at: Timestamp) -> String {
    let ms = at.millis();
    let secs = ms / 1000;
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = civil_from_days(i64::try_from(days).unwrap_or(i64::MAX));
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        ms % 1000
    )
}

/// `--since` did not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "`{0}` is not a time: give an age (`90s`, `10m`, `2h`, `1d`) or a UTC date-time (`2026-12-01T10:00:00Z`)"
)]
pub struct SinceError(pub String);

/// The instant `text` names, relative to `now` for an age.
pub fn parse_since(text: &str, now: Timestamp) -> Result<Timestamp, SinceError> {
    let bad = || SinceError(text.to_owned());
    let t = text.trim();
    let age = t
        .char_indices()
        .last()
        .and_then(|(i, unit)| Some((t[..i].parse::<u64>().ok()?, unit)));
    if let Some((n, unit)) = age {
        let per: u64 = match unit {
            's' => 1_000,
            'm' => 60_000,
            'h' => 3_600_000,
            'd' => 86_400_000,
            _ => return Err(bad()),
        };
        return Ok(Timestamp(
            now.millis().saturating_sub(n.saturating_mul(per)),
        ));
    }
    parse_rfc3339(t).ok_or_else(bad)
}

/// `YYYY-MM-DDTHH:MM:SS[.fff]Z` (UTC only: an offset is refused rather
/// than guessed).
fn parse_rfc3339(t: &str) -> Option<Timestamp> {
    let t = t.strip_suffix('Z').or_else(|| t.strip_suffix('z'))?;
    let (date, clock) = t.split_once(['T', 't', ' '])?;
    let mut d = date.split('-');
    let y: i64 = d.next()?.parse().ok()?;
    let m: u32 = d.next()?.parse().ok()?;
    let day: u32 = d.next()?.parse().ok()?;
    if d.next().is_some() || !(1..=12).contains(&m) || !(1..=31).contains(&day) {
        return None;
    }
    let (hms, frac) = clock.split_once('.').unwrap_or((clock, ""));
    let mut c = hms.split(':');
    let h: u64 = c.next()?.parse().ok()?;
    let mi: u64 = c.next()?.parse().ok()?;
    let s: u64 = c.next()?.parse().ok()?;
    if c.next().is_some() || h > 23 || mi > 59 || s > 60 {
        return None;
    }
    let ms: u64 = if frac.is_empty() {
        0
    } else {
        if !frac.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        format!("{frac:0<3}")[..3].parse().ok()?
    };
    let days = u64::try_from(days_from_civil(y, m, day)).ok()?;
    Some(Timestamp(
        ((days * 86_400 + h * 3600 + mi * 60 + s) * 1000) + ms,
    ))
}

// Howard Hinnant's civil-calendar algorithms (proleptic Gregorian).
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = i64::from(m);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = u32::try_from(doy - (153 * mp + 2) / 5 + 1).unwrap_or(1);
    let m = u32::try_from(if mp < 10 { mp + 3 } else { mp - 9 }).unwrap_or(1);
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn known_instants() {
        assert_eq!(rfc3339_millis(Timestamp(0)), "1970-01-01T00:00:00.000Z");
        assert_eq!(
            rfc3339_millis(Timestamp(951_782_400_123)),
            "2000-02-29T00:00:00.123Z"
        );
        assert_eq!(
            parse_since("2000-02-29T00:00:00.123Z", Timestamp(0)),
            Ok(Timestamp(951_782_400_123))
        );
    }

    #[test]
    fn ages_count_back_from_now() {
        let now = Timestamp(10_000_000);
        assert_eq!(parse_since("90s", now), Ok(Timestamp(10_000_000 - 90_000)));
        assert_eq!(parse_since("2h", now), Ok(Timestamp(2_800_000)));
        assert_eq!(parse_since("3h", now), Ok(Timestamp(0)));
        assert_eq!(parse_since("1d", Timestamp(86_400_001)), Ok(Timestamp(1)));
    }

    #[test]
    fn bad_input_is_refused() {
        for t in [
            "",
            "10",
            "10x",
            "yesterday",
            "2026-13-01T00:00:00Z",
            "2026-12-01T10:00:00+01:00",
        ] {
            assert!(parse_since(t, Timestamp(0)).is_err(), "{t}");
        }
    }

    proptest! {
        #[test]
        fn printing_then_parsing_is_the_identity(ms in 0u64..8_000_000_000_000) {
            let t = Timestamp(ms);
            prop_assert_eq!(parse_since(&rfc3339_millis(t), Timestamp(0)), Ok(t));
        }
    }
}
