//! Wall-clock formatting without a time zone database: results are stamped in UTC.

const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

/// A Unix time in seconds as its UTC date and time of day: `((year, month, day), (hour, minute,
/// second), days since the epoch)`.
fn utc(unix_s: u64) -> ((i64, u32, u32), (u64, u64, u64), u64) {
    let days = unix_s / 86_400;
    let rem = unix_s % 86_400;
    (
        civil_from_days(days as i64),
        (rem / 3600, (rem % 3600) / 60, rem % 60),
        days,
    )
}

/// Format nanoseconds since the Unix epoch as RFC 3339 UTC with microseconds,
/// e.g. `2026-11-22T15:45:04.123456Z`.
pub fn rfc3339_utc(unix_ns: u64) -> String {
    let micros = (unix_ns % 1_000_000_000) / 1000;
    let ((y, m, d), (h, mi, s), _) = utc(unix_ns / 1_000_000_000);
    format!("{y:04}-{m:02}-{d:02}T{h:02}:{mi:02}:{s:02}.{micros:06}Z")
}

/// `strftime("%a, %d %b %Y %T %z")` of a Unix time in seconds, in UTC, e.g.
/// `Sun, 22 Nov 2026 15:45:04 +0000` (cyclictest's `start_time`).
pub fn rfc2822_utc(unix_s: u64) -> String {
    const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    let ((y, m, d), (h, mi, s), days) = utc(unix_s);
    format!(
        "{}, {d:02} {} {y} {h:02}:{mi:02}:{s:02} +0000",
        DAYS[(days % 7) as usize],
        MONTHS[(m - 1) as usize],
    )
}

/// An RFC 2822 time as [`rfc2822_utc`] writes it, in any zone (`Sun, 22 Nov 2026 17:49:19 +0100`),
/// to nanoseconds since the Unix epoch; `None` for another text or a time before the epoch.
pub fn parse_rfc2822(text: &str) -> Option<u64> {
    let parts: Vec<&str> = text.split_whitespace().collect();
    let [_, day, month, year, hms, zone] = parts.as_slice() else {
        return None;
    };
    let month = MONTHS.iter().position(|m| m == month)? as u32 + 1;
    let (day, year): (u32, i64) = (day.parse().ok()?, year.parse().ok()?);
    let mut t = hms.split(':').map(|x| x.parse::<i64>().ok());
    let (h, m, s) = (t.next()??, t.next()??, t.next()??);
    let sign = if zone.starts_with('-') { -1 } else { 1 };
    let z: i64 = zone.trim_start_matches(['+', '-']).parse().ok()?;
    let offset = sign * ((z / 100) * 3600 + (z % 100) * 60);
    let secs = days_from_civil(year, month, day) * 86_400 + h * 3600 + m * 60 + s - offset;
    u64::try_from(secs).ok().map(|s| s * 1_000_000_000)
}

/// A proleptic Gregorian date to days since 1970-01-01: the inverse of [`civil_from_days`]
/// (Howard Hinnant's algorithm).
pub fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let (month, day) = (i64::from(month), i64::from(day));
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Days since 1970-01-01 to a proleptic Gregorian date `(year, month 1–12, day 1–31)` (Howard
/// Hinnant's algorithm).
pub fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_instants() {
        assert_eq!(rfc3339_utc(0), "1970-01-01T00:00:00.000000Z");
        // 2000-02-29 (leap day) 12:34:56.789012
        assert_eq!(
            rfc3339_utc(951_827_696_789_012_345),
            "2000-02-29T12:34:56.789012Z"
        );
        assert_eq!(
            rfc3339_utc(1_795_362_304_000_000_000),
            "2026-11-22T15:45:04.000000Z"
        );
    }

    #[test]
    fn rfc2822_dates_and_back() {
        for (s, text) in [
            (0, "Thu, 01 Jan 1970 00:00:00 +0000"),
            // 2000-02-29 12:34:56 (a leap day, a Tuesday)
            (951_827_696, "Tue, 29 Feb 2000 12:34:56 +0000"),
            (1_795_362_304, "Sun, 22 Nov 2026 15:45:04 +0000"),
            // 2100-03-01 (2100 is not a leap year), a Monday
            (4_107_542_400, "Mon, 01 Mar 2100 00:00:00 +0000"),
        ] {
            assert_eq!(rfc2822_utc(s), text);
            assert_eq!(parse_rfc2822(text), Some(s * 1_000_000_000), "{text}");
        }
        assert_eq!(parse_rfc2822("Thu, 01 Jan 1970 01:00:00 +0100"), Some(0));
        assert_eq!(parse_rfc2822("Thu, 01 Jan 1970 00:00:00 +0100"), None);
        assert_eq!(parse_rfc2822("yesterday"), None);
        for days in [-1000, 0, 11_016, 20_000, 50_000] {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days);
        }
    }
}
