//! Number formats shared by the report writers.

/// Nanoseconds as µs with one decimal, rounded half up: 31_250 -> `31.3` (the model's one µs
/// format at the precision every report table uses).
pub(crate) fn us(ns: u64) -> String {
    latlab_model::units::format_us(ns, 1)
}

/// A nanosecond value held as `f64` (a mean, a standard deviation, a median of repeats) as µs with
/// one decimal: rounded to whole nanoseconds first, then as [`us`].
pub(crate) fn us_f(ns: f64) -> String {
    if !ns.is_finite() || ns < 0.0 {
        return "-".into();
    }
    us(ns.round() as u64)
}

/// A signed nanosecond difference as µs with one decimal and an explicit sign.
pub(crate) fn us_signed(ns: f64) -> String {
    if !ns.is_finite() {
        return "-".into();
    }
    let v = us(ns.abs().round() as u64);
    if v == "0.0" {
        v
    } else if ns < 0.0 {
        format!("-{v}")
    } else {
        format!("+{v}")
    }
}

/// Nanoseconds as seconds with one decimal.
pub(crate) fn secs(ns: u64) -> String {
    format!("{:.1}", ns as f64 / 1e9)
}

/// Nanoseconds as seconds with three decimals, truncated in integer arithmetic (`10.002`): a
/// run's measured length, in the summary and the runs table alike.
pub(crate) fn secs3(ns: u64) -> String {
    format!(
        "{}.{:03}",
        ns / 1_000_000_000,
        (ns % 1_000_000_000) / 1_000_000
    )
}

/// A relative difference in percent with one decimal and a sign.
pub(crate) fn percent_signed(p: f64) -> String {
    if !p.is_finite() {
        return "-".into();
    }
    let s = format!("{p:.1}");
    if s == "0.0" || s == "-0.0" {
        "0.0 %".into()
    } else if p > 0.0 {
        format!("+{s} %")
    } else {
        format!("{s} %")
    }
}

/// A rate with three significant digits and a k/M/G suffix (as the loads summary).
pub(crate) fn si(v: f64) -> String {
    if !v.is_finite() {
        return "-".into();
    }
    let sign = if v < 0.0 { "-" } else { "" };
    format!("{sign}{}", latlab_model::units::format_rate(v.abs()))
}

/// A p-value: three significant decimals, `< 0.001` below.
pub fn p_value(p: f64) -> String {
    if p < 0.001 {
        "< 0.001".into()
    } else if p < 0.01 {
        format!("{p:.4}")
    } else {
        format!("{p:.3}")
    }
}

/// A U statistic: an integer, or with `.5` for ties.
pub(crate) fn u_stat(u: f64) -> String {
    if u.fract() == 0.0 {
        format!("{u:.0}")
    } else {
        format!("{u:.1}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        assert_eq!(us(31_250), "31.3");
        assert_eq!(us(49), "0.0");
        assert_eq!(us_f(12_349.6), "12.4");
        assert_eq!(us_f(f64::NAN), "-");
        assert_eq!(us_signed(-1_500.0), "-1.5");
        assert_eq!(us_signed(20.0), "0.0");
        assert_eq!(us_signed(2_000.0), "+2.0");
        assert_eq!(percent_signed(3.44), "+3.4 %");
        assert_eq!(percent_signed(-0.04), "0.0 %");
        assert_eq!(percent_signed(-12.0), "-12.0 %");
        assert_eq!(si(123_456.0), "123k");
        assert_eq!(si(1.5e6), "1.50M");
        assert_eq!(si(-42.0), "-42.0");
        assert_eq!(p_value(0.1), "0.100");
        assert_eq!(p_value(0.0286), "0.029");
        assert_eq!(p_value(0.0052), "0.0052");
        assert_eq!(p_value(0.00001), "< 0.001");
        assert_eq!(u_stat(0.0), "0");
        assert_eq!(u_stat(4.5), "4.5");
        assert_eq!(secs(2_500_000_000), "2.5");
    }
}
