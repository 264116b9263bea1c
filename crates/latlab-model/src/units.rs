//! Typed values parsed once at the edge: durations and CPU lists.

use std::fmt;

/// A parse error: names the problem and the accepted form, fit for a one-line message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{problem} (accepted: {accepted})")]
pub struct ParseError {
    pub problem: String,
    pub accepted: &'static str,
}

const DURATION_FORM: &str =
    "a number with a unit ns, us, ms, s, m, h or d, e.g. 100us, 1.5ms, 30s, 2h";
/// The same, where a bare number is nanoseconds, microseconds or seconds (the options that say
/// so).
const DURATION_FORM_NS: &str =
    "a number of ns, or with a unit ns, us, ms, s, m, h or d, e.g. 50000, 50us";
const DURATION_FORM_US: &str =
    "a number of us, or with a unit ns, us, ms, s, m, h or d, e.g. 50, 100us, 1.5ms";
const DURATION_FORM_S: &str =
    "a number of seconds, or with a unit ns, us, ms, s, m, h or d, e.g. 30, 1.5ms, 30s, 2h";
const CPU_LIST_FORM: &str = "CPU numbers and ranges, e.g. 0-3,6 or 0-7:2";

/// Largest CPU number a list may name.
pub const MAX_CPU: u32 = 8191;

/// The units of a duration, longest first, in nanoseconds.
const DURATION_UNITS: [(u64, &str); 7] = [
    (86_400_000_000_000, "d"),
    (3_600_000_000_000, "h"),
    (60_000_000_000, "m"),
    (1_000_000_000, "s"),
    (1_000_000, "ms"),
    (1_000, "us"),
    (1, "ns"),
];

/// Parse a duration into nanoseconds. `default_unit` applies to a bare number (`None`: a unit is
/// required). Fractions are allowed (`1.5ms`); the result must be a whole number of nanoseconds
/// and fit in 64 bits.
pub fn parse_duration(text: &str, default_unit: Option<&str>) -> Result<u64, ParseError> {
    let err = |problem: String| ParseError {
        problem,
        accepted: match default_unit {
            Some("ns") => DURATION_FORM_NS,
            Some("us") => DURATION_FORM_US,
            Some("s") => DURATION_FORM_S,
            _ => DURATION_FORM,
        },
    };
    let s = text.trim();
    if s.is_empty() {
        return Err(err("empty duration".into()));
    }
    if let Some(rest) = s.strip_prefix('-') {
        // `-5ms` is a negative duration; `-x` no duration at all.
        return Err(err(if parse_duration(rest, default_unit).is_ok() {
            format!("duration {s:?} is negative")
        } else {
            format!("{s:?} is not a duration")
        }));
    }
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let unit = match (unit.trim(), default_unit) {
        ("", Some(d)) => d,
        ("", None) => return Err(err(format!("duration {s:?} has no unit"))),
        (u, _) => u,
    };
    let name = match unit {
        "µs" => "us",
        "sec" => "s",
        "min" => "m",
        u => u,
    };
    let Some(&(scale, _)) = DURATION_UNITS.iter().find(|(_, n)| *n == name) else {
        return Err(err(format!("unknown unit {unit:?} in duration {s:?}")));
    };
    let (int_part, frac_part) = match num.split_once('.') {
        Some((i, f)) => (i, f),
        None => (num, ""),
    };
    if int_part.is_empty() && frac_part.is_empty() || frac_part.contains('.') {
        return Err(err(format!("{s:?} is not a number with a unit")));
    }
    let overflow = || err(format!("duration {s:?} is too long"));
    let int: u64 = if int_part.is_empty() {
        0
    } else {
        int_part.parse().map_err(|_| overflow())?
    };
    let mut total = int.checked_mul(scale).ok_or_else(overflow)?;
    if !frac_part.is_empty() {
        // Exact decimal arithmetic: digits beyond the scale must be zero.
        let mut place = scale;
        for (i, c) in frac_part.char_indices() {
            let digit = u64::from(c.to_digit(10).unwrap_or(0));
            if !place.is_multiple_of(10) {
                if digit != 0 || frac_part[i..].chars().any(|c| c != '0') {
                    return Err(err(format!("duration {s:?} is finer than a nanosecond")));
                }
                break;
            }
            place /= 10;
            total = total.checked_add(digit * place).ok_or_else(overflow)?;
        }
    }
    Ok(total)
}

/// Format nanoseconds with the largest unit that keeps it short and exact where possible.
pub fn format_duration(ns: u64) -> String {
    if ns == 0 {
        return "0s".into();
    }
    for (scale, name) in DURATION_UNITS {
        if ns.is_multiple_of(scale) {
            return format!("{}{name}", ns / scale);
        }
    }
    format!("{ns}ns")
}

/// A length of time for people, short and to the tenth of a second at most: `20.3s`, `3m02s`,
/// `2h03m` (plans, searches, the runs of `db list`).
pub fn format_elapsed(ns: u64) -> String {
    let s = ns / 1_000_000_000;
    if s >= 3600 {
        format!("{}h{:02}m", s / 3600, (s % 3600) / 60)
    } else if s >= 60 {
        format!("{}m{:02}s", s / 60, s % 60)
    } else {
        format!("{:.1}s", ns as f64 / 1e9)
    }
}

/// Nanoseconds as microseconds with `decimals` (at most 3) decimals, rounded half up in integer
/// arithmetic (no binary rounding of an f64): `format_us(31_250, 1)` is `31.3`. The one µs format
/// of every table, report and line latlab prints.
pub fn format_us(ns: u64, decimals: u32) -> String {
    let decimals = decimals.min(3);
    let unit = 10u64.pow(3 - decimals);
    let scaled = ns / unit + u64::from(ns % unit >= unit.div_ceil(2) && unit > 1);
    if decimals == 0 {
        return scaled.to_string();
    }
    let frac = 10u64.pow(decimals);
    format!(
        "{}.{:0width$}",
        scaled / frac,
        scaled % frac,
        width = decimals as usize
    )
}

/// A rate (finite, not negative) with three significant digits and a k/M/G suffix from 10 000
/// up (`48.2`, `3100`, `152M`): the one rate format of `latlab load` and the reports.
pub fn format_rate(v: f64) -> String {
    let (v, suffix) = if v >= 1e9 {
        (v / 1e9, "G")
    } else if v >= 1e6 {
        (v / 1e6, "M")
    } else if v >= 1e4 {
        (v / 1e3, "k")
    } else {
        (v, "")
    };
    let prec = if v >= 100.0 {
        0
    } else if v >= 10.0 {
        1
    } else {
        2
    };
    format!("{v:.prec$}{suffix}")
}

impl std::str::FromStr for CpuList {
    type Err = ParseError;
    fn from_str(s: &str) -> Result<CpuList, ParseError> {
        CpuList::parse(s)
    }
}

/// A sorted set of CPU numbers, parsed from the kernel's list format (`0-3,6`, `0-7:2`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CpuList(Vec<u32>);

impl CpuList {
    pub fn parse(text: &str) -> Result<CpuList, ParseError> {
        let err = |problem: String| ParseError {
            problem,
            accepted: CPU_LIST_FORM,
        };
        let s = text.trim();
        if s.is_empty() {
            return Err(err("empty CPU list".into()));
        }
        if let Some(rest) = s.strip_prefix('-') {
            return Err(err(if rest.starts_with(|c: char| c.is_ascii_digit()) {
                format!("{s:?}: CPU numbers are not negative")
            } else {
                format!("{s:?} is not a CPU number")
            }));
        }
        let num = |t: &str| -> Result<u32, ParseError> {
            let t = t.trim();
            let n: u32 = t
                .parse()
                .map_err(|_| err(format!("{t:?} is not a CPU number in {s:?}")))?;
            if n > MAX_CPU {
                return Err(err(format!("CPU {n} is beyond {MAX_CPU}")));
            }
            Ok(n)
        };
        let mut cpus = Vec::new();
        for part in s.split(',') {
            let (range, stride) = match part.split_once(':') {
                Some((r, st)) => {
                    let st = num(st)?;
                    if st == 0 {
                        return Err(err(format!("stride 0 in {part:?}")));
                    }
                    (r, st)
                }
                None => (part, 1),
            };
            match range.split_once('-') {
                Some((a, b)) => {
                    let (a, b) = (num(a)?, num(b)?);
                    if a > b {
                        return Err(err(format!("range {range:?} runs backwards")));
                    }
                    cpus.extend((a..=b).step_by(stride as usize));
                }
                None => {
                    if stride != 1 {
                        return Err(err(format!("stride without a range in {part:?}")));
                    }
                    cpus.push(num(range)?);
                }
            }
        }
        cpus.sort_unstable();
        cpus.dedup();
        Ok(CpuList(cpus))
    }

    pub fn from_cpus(mut cpus: Vec<u32>) -> CpuList {
        cpus.sort_unstable();
        cpus.dedup();
        CpuList(cpus)
    }

    pub fn cpus(&self) -> &[u32] {
        &self.0
    }

    /// The list as a sentence names it: `CPU 1`, `CPUs 0-3`.
    pub fn phrase(&self) -> String {
        if self.0.len() == 1 {
            format!("CPU {self}")
        } else {
            format!("CPUs {self}")
        }
    }
    /// Why this list cannot be used where `online` are the online CPUs: it is empty, or names a
    /// CPU absent or offline (each with the accepted form); `None` when every CPU is online.
    /// The one wording of measure, trace, load and tune.
    pub fn not_within(&self, online: &CpuList) -> Option<String> {
        if self.is_empty() {
            return Some("empty CPU list (accepted: CPU numbers and ranges, e.g. 0-3,6)".into());
        }
        self.0
            .iter()
            .find(|c| !online.contains(**c))
            .map(|c| format!("CPU {c} is absent or offline (accepted: online CPUs {online})"))
    }

    /// The CPUs of this list outside `others`, in order (the online CPUs not measured: where
    /// latlab's own threads go).
    pub fn except(&self, others: &[u32]) -> Vec<u32> {
        self.cpus()
            .iter()
            .copied()
            .filter(|c| !others.contains(c))
            .collect()
    }

    pub fn contains(&self, cpu: u32) -> bool {
        self.0.binary_search(&cpu).is_ok()
    }
    pub fn len(&self) -> usize {
        self.0.len()
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// `CPU 3` or `CPUs 0-3,6`, as a sentence names them.
    pub fn named(&self) -> String {
        format!("{} {self}", if self.0.len() == 1 { "CPU" } else { "CPUs" })
    }
}

/// `word` as a shell reads it back: as it is when it holds only characters a shell passes
/// through, else in single quotes.
pub fn shell_word(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_./:=,@%+-".contains(c));
    if plain {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

/// A path in a command latlab prints to be copied: absolute (a relative one would name another
/// file once the user changes directory), as a shell reads it back.
pub fn shell_path(path: &std::path::Path) -> String {
    let path = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    shell_word(&path.display().to_string())
}

/// `1 run`, `2 runs`: a count with its noun.
pub fn plural(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

impl fmt::Display for CpuList {
    /// The kernel's compact form: `0-3,6`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        let mut i = 0;
        while i < self.0.len() {
            let start = self.0[i];
            let mut end = start;
            while i + 1 < self.0.len() && self.0[i + 1] == end + 1 {
                i += 1;
                end = self.0[i];
            }
            parts.push(if start == end {
                start.to_string()
            } else {
                format!("{start}-{end}")
            });
            i += 1;
        }
        f.write_str(&parts.join(","))
    }
}

/// The property the fuzz target checks (also run on stable by the unit tests): parsing arbitrary
/// bytes never panics, and whatever parses formats back to the same value.
#[doc(hidden)]
pub fn fuzz_check(data: &[u8]) {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(ns) = parse_duration(s, Some("us")) {
        assert_eq!(parse_duration(&format_duration(ns), None), Ok(ns));
    }
    if let Ok(list) = CpuList::parse(s) {
        assert_eq!(CpuList::parse(&list.to_string()), Ok(list));
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// A printed command reads back as the words it was made of.
    #[test]
    fn a_word_is_quoted_only_where_a_shell_would_split_or_expand_it() {
        assert_eq!(shell_word("/tmp/a-b_c.db"), "/tmp/a-b_c.db");
        assert_eq!(shell_word("my runs.db"), "'my runs.db'");
        assert_eq!(shell_word("it's$x"), r"'it'\''s$x'");
        assert_eq!(shell_word(""), "''");
        assert_eq!(shell_path(std::path::Path::new("/a b/c")), "'/a b/c'");
    }

    #[test]
    fn a_cpu_list_is_named_in_the_singular_or_the_plural() {
        assert_eq!(CpuList::parse("1").unwrap().phrase(), "CPU 1");
        assert_eq!(CpuList::parse("0-3,6").unwrap().phrase(), "CPUs 0-3,6");
    }

    #[test]
    fn elapsed_times_are_short() {
        for (ns, text) in [
            (300_000_000, "0.3s"),
            (20_340_000_000, "20.3s"),
            (125_000_000_000, "2m05s"),
            (3_725_000_000_000, "1h02m"),
        ] {
            assert_eq!(format_elapsed(ns), text, "{ns}");
        }
    }

    #[test]
    fn rates_have_three_significant_digits_and_a_suffix_from_ten_thousand() {
        for (v, text) in [
            (0.0, "0.00"),
            (48.2, "48.2"),
            (999.0, "999"),
            (3_100.0, "3100"),
            (12_345.0, "12.3k"),
            (1.5e6, "1.50M"),
            (152_300_000.0, "152M"),
            (2.5e9, "2.50G"),
        ] {
            assert_eq!(format_rate(v), text, "{v}");
        }
    }

    #[test]
    fn microseconds_round_half_up_in_integers() {
        for (ns, d, want) in [
            (0, 1, "0.0"),
            (999, 1, "1.0"),
            (12_345, 1, "12.3"),
            (1_234_567, 1, "1234.6"),
            (250, 1, "0.3"),
            (31_250, 1, "31.3"),
            (1_150, 1, "1.2"),
            (125, 2, "0.13"),
            (1_234_567, 2, "1234.57"),
            (900_000, 2, "900.00"),
            (1_499, 0, "1"),
            (1_500, 0, "2"),
            (12_345, 3, "12.345"),
        ] {
            assert_eq!(format_us(ns, d), want, "{ns} ns, {d} decimals");
        }
    }

    #[test]
    fn durations() {
        let ok = [
            ("10us", 10_000),
            ("100us", 100_000),
            ("1ms", 1_000_000),
            ("1.5ms", 1_500_000),
            ("30s", 30_000_000_000),
            ("5m", 300_000_000_000),
            ("2h", 7_200_000_000_000),
            ("1d", 86_400_000_000_000),
            ("250ns", 250),
            ("0.5us", 500),
            (".5s", 500_000_000),
            ("7µs", 7_000),
            ("2sec", 2_000_000_000),
            ("3min", 180_000_000_000),
            (" 3s ", 3_000_000_000),
        ];
        for (s, want) in ok {
            assert_eq!(parse_duration(s, None), Ok(want), "{s}");
        }
        assert_eq!(parse_duration("1000", Some("us")), Ok(1_000_000));
        assert_eq!(parse_duration("60", Some("s")), Ok(60_000_000_000));
    }

    #[test]
    fn bad_durations_name_the_problem() {
        for s in [
            "",
            "ms",
            "10",
            "10xs",
            "1.2.3s",
            "-5s",
            "1.5ns",
            "0.0001us",
            "99999999999999d",
            "1e3s",
        ] {
            let e = parse_duration(s, None).unwrap_err();
            assert!(e.to_string().contains("accepted:"), "{s}: {e}");
        }
    }

    #[test]
    fn durations_format_back() {
        for ns in [1, 999, 1000, 1_500_000, 30_000_000_000, 86_400_000_000_000] {
            assert_eq!(parse_duration(&format_duration(ns), None), Ok(ns));
        }
        assert_eq!(format_duration(100_000), "100us");
    }

    #[test]
    fn cpu_lists() {
        assert_eq!(
            CpuList::parse("0-3,6").unwrap().except(&[1, 6, 9]),
            [0, 2, 3]
        );
        assert_eq!(CpuList::parse("0-3,6").unwrap().cpus(), &[0, 1, 2, 3, 6]);
        assert_eq!(CpuList::parse("0-7:2").unwrap().cpus(), &[0, 2, 4, 6]);
        assert_eq!(CpuList::parse("3,1,1").unwrap().cpus(), &[1, 3]);
        assert_eq!(CpuList::parse("0-3,6").unwrap().to_string(), "0-3,6");
        assert_eq!(CpuList::parse("5").unwrap().to_string(), "5");
    }

    #[test]
    fn bad_cpu_lists() {
        for s in [
            "", "a", "3-1", "0-", "-1", "1,,2", "0-3:0", "4:2", "9000", "0-99999",
        ] {
            let e = CpuList::parse(s).unwrap_err();
            assert!(e.to_string().contains("accepted:"), "{s}: {e}");
        }
    }

    /// The fuzz target's property, run on stable over random inputs: parsing never panics, and a
    /// parsed value formats back to the same value.
    #[test]
    fn random_inputs_never_panic_and_round_trip() {
        let alphabet: Vec<char> = "0123456789.,-: usmhdnµx".chars().collect();
        let mut state = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..200_000 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let len = (state % 12) as usize;
            let s: String = (0..len)
                .map(|i| alphabet[((state >> (i * 5)) % alphabet.len() as u64) as usize])
                .collect();
            crate::units::fuzz_check(s.as_bytes());
        }
    }
}
