//! Wall-clock formatting without a time zone database: results are stamped in UTC.

/// Format nanoseconds since the Unix epoch as RFC 3339 UTC with microseconds,
/// e.g. `2026-11-22T15:45:04.123456Z`.
pub fn rfc3339_utc(unix_ns: u64) -> String {
    let secs = unix_ns / 1_000_000_000;
    let micros = (unix_ns % 1_000_000_000) / 1000;
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{micros:06}Z",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60
    )
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
}
