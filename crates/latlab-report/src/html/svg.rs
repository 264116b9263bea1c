//! A small SVG plotting kit: linear, logarithmic and "nines" axes, lines, steps, areas, points,
//! shaded bands and legends. Output is well-formed XML with every text escaped; coordinates are
//! rounded to 0.1 px so figures stay small and deterministic.

use std::fmt::Write;

/// Series colours (Tableau 10); series past ten reuse them with dashes.
const PALETTE: [&str; 10] = [
    "#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7",
    "#9c755f", "#bab0ac",
];

/// Colour and dash pattern of series `i`.
pub(crate) fn style(i: usize) -> (&'static str, Option<&'static str>) {
    let dash = match (i / PALETTE.len()) % 3 {
        0 => None,
        1 => Some("6 3"),
        _ => Some("2 2"),
    };
    (PALETTE[i % PALETTE.len()], dash)
}

/// The entity that stands for `c` in XML and HTML text and attribute values, for the five
/// characters that need one.
pub(crate) fn entity(c: char) -> Option<&'static str> {
    Some(match c {
        '&' => "&amp;",
        '<' => "&lt;",
        '>' => "&gt;",
        '"' => "&quot;",
        '\'' => "&#39;",
        _ => return None,
    })
}

/// Escape text for XML content and attribute values.
pub(crate) fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for ch in s.chars() {
        match (entity(ch), ch) {
            (Some(e), _) => out.push_str(e),
            // Characters XML 1.0 does not allow.
            (None, c) if (c as u32) < 0x20 && !matches!(c, '\t' | '\n' | '\r') => {
                out.push('\u{fffd}')
            }
            (None, c) => out.push(c),
        }
    }
    out
}

/// A coordinate with one decimal, without a trailing `.0`.
pub(crate) fn n(v: f64) -> String {
    let v = if v.is_finite() { v } else { 0.0 };
    let r = (v * 10.0).round() / 10.0;
    if r.fract() == 0.0 {
        format!("{r:.0}")
    } else {
        format!("{r:.1}")
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Scale {
    Linear,
    Log,
}

/// An axis: its range, scale, ticks and label.
#[derive(Debug, Clone)]
pub(crate) struct Axis {
    pub label: String,
    pub lo: f64,
    pub hi: f64,
    pub scale: Scale,
    pub ticks: Vec<(f64, String)>,
}

/// A "nice" step (1, 2 or 5 times a power of ten) giving about `target` intervals over `span`.
/// A span just over a round one (a 12.07 s run) takes that one's step, one interval more,
/// rather than the next step up, which would leave a fifth of the plot empty.
pub(crate) fn nice_step(span: f64, target: f64) -> f64 {
    if span <= 0.0 || !span.is_finite() {
        return 1.0;
    }
    let raw = span / target;
    let mag = 10f64.powf(raw.log10().floor());
    let f = raw / mag;
    let m = [1.0, 2.0, 5.0]
        .into_iter()
        .find(|&m| f <= m * 1.05)
        .unwrap_or(10.0);
    m * mag
}

/// A tick label: integers up to 9999 as they are, larger ones with k/M/G, fractions with the
/// decimals they need, and below 0.0001 as powers of ten (1e-7), which six decimals cannot hold.
pub(crate) fn tick_label(v: f64) -> String {
    let a = v.abs();
    if a == 0.0 {
        return "0".into();
    }
    if a < 1e-4 {
        return format!("{v:e}");
    }
    if a >= 1e4 {
        let (x, s) = if a >= 1e9 {
            (v / 1e9, "G")
        } else if a >= 1e6 {
            (v / 1e6, "M")
        } else {
            (v / 1e3, "k")
        };
        return format!("{}{s}", trim(x));
    }
    trim(v)
}

fn trim(v: f64) -> String {
    let s = format!("{v:.6}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    s.to_string()
}

impl Axis {
    /// A linear axis over `lo..hi` with nice ticks (the range is widened to them).
    pub fn linear(label: impl Into<String>, lo: f64, hi: f64) -> Axis {
        let (lo, hi) = if hi > lo { (lo, hi) } else { (lo, lo + 1.0) };
        let step = nice_step(hi - lo, 6.0);
        let lo = (lo / step).floor() * step;
        let hi = (hi / step).ceil() * step;
        Axis::linear_fixed(label, lo, hi, step)
    }

    /// A time axis from 0 to `hi` seconds, positions in seconds and ticks in seconds, minutes,
    /// hours or days as the span needs: a month of monitoring reads in days, not in millions of
    /// seconds. `what` names the origin; from hours up the label also says when it was (UTC),
    /// given `origin_unix_ns`.
    pub fn time(what: &str, hi: f64, origin_unix_ns: Option<u64>) -> Axis {
        let (unit, name) = if hi <= 300.0 {
            (1.0, "s")
        } else if hi <= 5.0 * 3600.0 {
            (60.0, "min")
        } else if hi <= 3.0 * 86_400.0 {
            (3600.0, "h")
        } else {
            (86_400.0, "days")
        };
        // Data that ends just past a tick (a sampler's last reading a few ms after a 1 s run)
        // ends the axis there, not a whole step on.
        let span = hi / unit;
        let step = nice_step(span, 6.0);
        let mut axis = if span > step && span - (span / step).floor() * step <= 0.1 * step {
            Axis::linear_fixed(String::new(), 0.0, span, step)
        } else {
            Axis::linear(String::new(), 0.0, span)
        };
        axis.lo *= unit;
        axis.hi *= unit;
        for tick in &mut axis.ticks {
            tick.0 *= unit;
        }
        axis.label = match origin_unix_ns {
            Some(ns) if unit >= 3600.0 => {
                let at = latlab_model::rfc3339_utc(ns);
                format!("{what} ({name}; 0 is {} {} UTC)", &at[..10], &at[11..16])
            }
            _ => format!("{what} ({name})"),
        };
        axis
    }

    /// A linear axis over exactly `lo..hi` with ticks every `step` (for percentages).
    pub fn linear_fixed(label: impl Into<String>, lo: f64, hi: f64, step: f64) -> Axis {
        let mut ticks = Vec::new();
        let mut k = 0.0;
        while lo + k * step <= hi + step * 1e-9 {
            let v = lo + k * step;
            ticks.push((v, tick_label(v)));
            k += 1.0;
        }
        Axis {
            label: label.into(),
            lo,
            hi,
            scale: Scale::Linear,
            ticks,
        }
    }

    /// A logarithmic axis over whole decades around `lo..hi` (both above zero).
    pub fn log(label: impl Into<String>, lo: f64, hi: f64) -> Axis {
        let lo = if lo > 0.0 && lo.is_finite() { lo } else { 1.0 };
        let hi = if hi > lo && hi.is_finite() {
            hi
        } else {
            lo * 10.0
        };
        let d_lo = lo.log10().floor() as i32;
        // Strictly above the highest value: a maximum of exactly 1000 is not drawn on the frame.
        let mut d_hi = hi.log10().floor() as i32 + 1;
        if d_hi <= d_lo {
            d_hi = d_lo + 1;
        }
        let ticks = (d_lo..=d_hi)
            .map(|d| {
                let v = 10f64.powi(d);
                (v, tick_label(v))
            })
            .collect();
        Axis {
            label: label.into(),
            lo: 10f64.powi(d_lo),
            hi: 10f64.powi(d_hi),
            scale: Scale::Log,
            ticks,
        }
    }

    /// The "nines" axis of a percentile spectrum: position `x = -log10(1 - q)`, ticks 0, 0.9,
    /// 0.99, … up to `max_x`.
    pub fn nines(label: impl Into<String>, max_x: f64) -> Axis {
        let top = max_x.ceil().max(1.0) as u32;
        let ticks = (0..=top)
            .map(|k| {
                // Past six nines, 1-1e-7 and so on: a row of nines would run into the next.
                let text = match k {
                    0 => "0".to_string(),
                    1..=6 => format!("0.{}", "9".repeat(k as usize)),
                    _ => format!("1-1e-{k}"),
                };
                (f64::from(k), text)
            })
            .collect();
        Axis {
            label: label.into(),
            lo: 0.0,
            hi: f64::from(top),
            scale: Scale::Linear,
            ticks,
        }
    }

    /// Position of `v` along the axis, 0 at `lo` and 1 at `hi`, clamped.
    pub fn frac(&self, v: f64) -> f64 {
        let f = match self.scale {
            Scale::Linear => (v - self.lo) / (self.hi - self.lo),
            Scale::Log => {
                let v = if v > 0.0 { v } else { self.lo };
                (v.log10() - self.lo.log10()) / (self.hi.log10() - self.lo.log10())
            }
        };
        if f.is_finite() {
            f.clamp(0.0, 1.0)
        } else {
            0.0
        }
    }
}

/// What a legend entry shows beside its label.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Mark {
    Line { width: f64 },
    Swatch,
    Dot,
    Square,
}

pub(crate) struct LegendItem {
    pub color: String,
    pub dash: Option<&'static str>,
    pub mark: Mark,
    pub label: String,
}

/// One chart: a plot area with two axes inside an SVG of fixed width, and a legend below it.
pub(crate) struct Chart {
    out: String,
    pub width: f64,
    pub left: f64,
    pub top: f64,
    pub plot_w: f64,
    pub plot_h: f64,
    pub x: Axis,
    pub y: Axis,
    title: String,
    legend: Vec<LegendItem>,
    /// Band labels, drawn over the data so no line runs through them.
    overlay: String,
}

pub(crate) const WIDTH: f64 = 760.0;
const LEFT: f64 = 64.0;
const RIGHT: f64 = 36.0;
const TOP: f64 = 28.0;
const LEGEND_MIN_COL: f64 = 90.0;

impl Chart {
    pub fn new(title: impl Into<String>, plot_h: f64, x: Axis, y: Axis) -> Chart {
        Chart {
            out: String::new(),
            width: WIDTH,
            left: LEFT,
            top: TOP,
            plot_w: WIDTH - LEFT - RIGHT,
            plot_h,
            x,
            y,
            title: title.into(),
            legend: Vec::new(),
            overlay: String::new(),
        }
    }

    pub fn px(&self, x: f64) -> f64 {
        self.left + self.x.frac(x) * self.plot_w
    }

    pub fn py(&self, y: f64) -> f64 {
        self.top + (1.0 - self.y.frac(y)) * self.plot_h
    }

    pub fn legend(&mut self, item: LegendItem) {
        self.legend.push(item);
    }

    /// A shaded vertical band from `x0` to `x1` with a label at its top.
    pub fn band(&mut self, x0: f64, x1: f64, fill: &str, label: &str) {
        let (a, b) = (self.px(x0), self.px(x1));
        let _ = write!(
            self.out,
            r#"<rect x="{}" y="{}" width="{}" height="{}" fill="{fill}" fill-opacity="0.5"/>"#,
            n(a),
            n(self.top),
            n((b - a).max(0.0)),
            n(self.plot_h)
        );
        if !label.is_empty() {
            // A white halo keeps the label readable where a line passes under it.
            let _ = write!(
                self.overlay,
                r##"<text x="{}" y="{}" font-size="10" fill="#555" stroke="#fff" stroke-width="3" stroke-opacity="0.85" paint-order="stroke">{}</text>"##,
                n(a + 3.0),
                n(self.top + 11.0),
                esc(label)
            );
        }
    }

    /// A polyline through the points; `None` breaks the line.
    pub fn line(
        &mut self,
        pts: &[Option<(f64, f64)>],
        color: &str,
        dash: Option<&str>,
        width: f64,
        opacity: f64,
    ) {
        let mut d = String::new();
        let mut pen = false;
        for p in pts {
            match p {
                Some((x, y)) => {
                    let _ = write!(
                        d,
                        "{}{} {}",
                        if pen { "L" } else { "M" },
                        n(self.px(*x)),
                        n(self.py(*y))
                    );
                    pen = true;
                }
                None => pen = false,
            }
        }
        self.path(&d, color, dash, width, opacity);
    }

    /// A step line: value `ys[i]` held from `xs[i]` to `xs[i + 1]` (`xs` has one more entry).
    /// `None` values break the line.
    pub fn steps(
        &mut self,
        xs: &[f64],
        ys: &[Option<f64>],
        color: &str,
        dash: Option<&str>,
        width: f64,
    ) {
        let mut d = String::new();
        let mut pen = false;
        let mut last_y = f64::NAN;
        for (i, y) in ys.iter().enumerate() {
            let (Some(y), Some(&x1)) = (y, xs.get(i + 1)) else {
                pen = false;
                continue;
            };
            let (px0, px1, py) = (n(self.px(xs[i])), n(self.px(x1)), self.py(*y));
            if pen {
                if n(py) != n(last_y) {
                    let _ = write!(d, "V{}", n(py));
                }
            } else {
                let _ = write!(d, "M{px0} {}", n(py));
                pen = true;
            }
            let _ = write!(d, "H{px1}");
            last_y = py;
        }
        self.path(&d, color, dash, width, 1.0);
    }

    fn path(&mut self, d: &str, color: &str, dash: Option<&str>, width: f64, opacity: f64) {
        if d.is_empty() {
            return;
        }
        let dash = dash.map_or_else(String::new, |d| format!(r#" stroke-dasharray="{d}""#));
        let op = if opacity < 1.0 {
            format!(r#" stroke-opacity="{opacity}""#)
        } else {
            String::new()
        };
        let _ = write!(
            self.out,
            r#"<path d="{d}" fill="none" stroke="{color}" stroke-width="{width}"{dash}{op} stroke-linejoin="round"/>"#
        );
    }

    /// A filled polygon (plot coordinates).
    pub fn area(&mut self, pts: &[(f64, f64)], fill: &str) {
        if pts.len() < 3 {
            return;
        }
        let mut d = String::new();
        for (i, (x, y)) in pts.iter().enumerate() {
            let _ = write!(
                d,
                "{}{} {}",
                if i == 0 { "M" } else { "L" },
                n(self.px(*x)),
                n(self.py(*y))
            );
        }
        let _ = write!(self.out, r#"<path d="{d}Z" fill="{fill}" stroke="none"/>"#);
    }

    /// A point marker.
    pub fn point(&mut self, x: f64, y: f64, color: &str, mark: Mark, title: &str) {
        let (px, py) = (n(self.px(x)), n(self.py(y)));
        let tip = if title.is_empty() {
            String::new()
        } else {
            format!("<title>{}</title>", esc(title))
        };
        match mark {
            Mark::Square => {
                let _ = write!(
                    self.out,
                    r#"<rect x="{}" y="{}" width="7" height="7" fill="{color}">{tip}</rect>"#,
                    n(self.px(x) - 3.5),
                    n(self.py(y) - 3.5)
                );
            }
            _ => {
                let _ = write!(
                    self.out,
                    r#"<circle cx="{px}" cy="{py}" r="3.5" fill="{color}">{tip}</circle>"#
                );
            }
        }
    }

    /// A straight segment in plot coordinates (error bars).
    pub fn segment(&mut self, a: (f64, f64), b: (f64, f64), color: &str, width: f64) {
        let _ = write!(
            self.out,
            r#"<line x1="{}" y1="{}" x2="{}" y2="{}" stroke="{color}" stroke-width="{width}"/>"#,
            n(self.px(a.0)),
            n(self.py(a.1)),
            n(self.px(b.0)),
            n(self.py(b.1))
        );
    }

    /// A text label at a plot position, shifted by `dx`, `dy` pixels.
    pub fn label(&mut self, x: f64, y: f64, dx: f64, dy: f64, text: &str) {
        let _ = write!(
            self.out,
            r#"<text x="{}" y="{}" font-size="10">{}</text>"#,
            n(self.px(x) + dx),
            n(self.py(y) + dy),
            esc(text)
        );
    }

    /// The finished SVG: frame, grid, ticks, labels, the drawn content and the legend.
    pub fn finish(self) -> String {
        // Legend columns as wide as the longest label needs (about 6.5 px a character at 11 px).
        let longest = self
            .legend
            .iter()
            .map(|i| i.label.chars().count())
            .max()
            .unwrap_or(0);
        let col_w = (longest as f64 * 6.5 + 36.0).clamp(LEGEND_MIN_COL, self.width - self.left);
        let cols = ((self.width - self.left) / col_w).floor().max(1.0) as usize;
        let rows = self.legend.len().div_ceil(cols);
        let axis_bottom = self.top + self.plot_h + 36.0;
        // A title longer than the chart is wide (a cell named by many parameters) goes on as
        // many lines as it needs, and the chart below moves down by the lines added.
        let title = wrap(
            &self.title,
            ((self.width - self.left) / TITLE_CHAR_W) as usize,
        );
        let below = (title.len().max(1) - 1) as f64 * 15.0;
        let height = below
            + axis_bottom
            + if rows > 0 {
                rows as f64 * 16.0 + 6.0
            } else {
                0.0
            };
        let mut s = String::new();
        let _ = write!(
            s,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{}" height="{}" viewBox="0 0 {} {}" font-family="sans-serif" font-size="11" role="img"><title>{}</title>"#,
            n(self.width),
            n(height),
            n(self.width),
            n(height),
            esc(&self.title)
        );
        for (i, line) in title.iter().enumerate() {
            let _ = write!(
                s,
                r#"<text x="{}" y="{}" font-size="12" font-weight="bold">{}</text>"#,
                n(self.left),
                n(16.0 + i as f64 * 15.0),
                esc(line)
            );
        }
        if below > 0.0 {
            let _ = write!(s, r#"<g transform="translate(0 {})">"#, n(below));
        }
        let (l, t, w, h) = (self.left, self.top, self.plot_w, self.plot_h);
        let _ = write!(
            s,
            r##"<rect x="{}" y="{}" width="{}" height="{}" fill="#fff" stroke="#999"/>"##,
            n(l),
            n(t),
            n(w),
            n(h)
        );
        // Grid and tick labels.
        for (v, text) in &self.x.ticks {
            let px = l + self.x.frac(*v) * w;
            let _ = write!(
                s,
                r##"<line x1="{0}" y1="{1}" x2="{0}" y2="{2}" stroke="#e4e4e4"/><text x="{0}" y="{3}" text-anchor="middle">{4}</text>"##,
                n(px),
                n(t),
                n(t + h),
                n(t + h + 14.0),
                esc(text)
            );
        }
        for (v, text) in &self.y.ticks {
            let py = t + (1.0 - self.y.frac(*v)) * h;
            let _ = write!(
                s,
                r##"<line x1="{0}" y1="{1}" x2="{2}" y2="{1}" stroke="#e4e4e4"/><text x="{3}" y="{4}" text-anchor="end">{5}</text>"##,
                n(l),
                n(py),
                n(l + w),
                n(l - 4.0),
                n(py + 4.0),
                esc(text)
            );
        }
        let _ = write!(
            s,
            r#"<text x="{}" y="{}" text-anchor="middle">{}</text>"#,
            n(l + w / 2.0),
            n(t + h + 30.0),
            esc(&self.x.label)
        );
        let _ = write!(
            s,
            r#"<text transform="translate(14 {}) rotate(-90)" text-anchor="middle">{}</text>"#,
            n(t + h / 2.0),
            esc(&self.y.label)
        );
        s.push_str(&self.out);
        s.push_str(&self.overlay);
        let _ = write!(
            s,
            r##"<rect x="{}" y="{}" width="{}" height="{}" fill="none" stroke="#999"/>"##,
            n(l),
            n(t),
            n(w),
            n(h)
        );
        self.draw_legend(&mut s, (l, axis_bottom), cols, col_w);
        if below > 0.0 {
            s.push_str("</g>");
        }
        s.push_str("</svg>");
        s
    }

    /// The legend in `cols` columns of `col_w` from `(x0, y0)`: each item's mark and label.
    fn draw_legend(&self, s: &mut String, (x0, y0): (f64, f64), cols: usize, col_w: f64) {
        for (i, item) in self.legend.iter().enumerate() {
            let x = x0 + (i % cols) as f64 * col_w;
            let y = y0 + (i / cols) as f64 * 16.0 + 10.0;
            match item.mark {
                Mark::Line { width } => {
                    let dash = item
                        .dash
                        .map_or_else(String::new, |d| format!(r#" stroke-dasharray="{d}""#));
                    let _ = write!(
                        s,
                        r#"<line x1="{}" y1="{}" x2="{}" y2="{}" stroke="{}" stroke-width="{width}"{dash}/>"#,
                        n(x),
                        n(y - 4.0),
                        n(x + 18.0),
                        n(y - 4.0),
                        item.color
                    );
                }
                Mark::Swatch => {
                    let _ = write!(
                        s,
                        r#"<rect x="{}" y="{}" width="18" height="9" fill="{}"/>"#,
                        n(x),
                        n(y - 9.0),
                        item.color
                    );
                }
                Mark::Dot => {
                    let _ = write!(
                        s,
                        r#"<circle cx="{}" cy="{}" r="3.5" fill="{}"/>"#,
                        n(x + 9.0),
                        n(y - 4.0),
                        item.color
                    );
                }
                Mark::Square => {
                    let _ = write!(
                        s,
                        r#"<rect x="{}" y="{}" width="7" height="7" fill="{}"/>"#,
                        n(x + 5.5),
                        n(y - 7.5),
                        item.color
                    );
                }
            }
            let _ = write!(
                s,
                r#"<text x="{}" y="{}">{}</text>"#,
                n(x + 24.0),
                n(y),
                esc(&item.label)
            );
        }
    }
}

/// About the width of a character of a bold 12 px title, in px (a little over the mean, so a
/// line rather ends early than runs past the edge).
const TITLE_CHAR_W: f64 = 7.4;

/// `text` in lines of at most `width` characters, broken at spaces (a word longer than a line
/// stands alone on its line).
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    for word in text.split(' ') {
        match lines.last_mut() {
            Some(line) if line.chars().count() + 1 + word.chars().count() <= width => {
                line.push(' ');
                line.push_str(word);
            }
            _ => lines.push(word.to_string()),
        }
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_and_numbers() {
        assert_eq!(
            esc("a<b & \"c\" 'd'>"),
            "a&lt;b &amp; &quot;c&quot; &#39;d&#39;&gt;"
        );
        assert_eq!(esc("x\u{1}y"), "x\u{fffd}y");
        assert_eq!(n(1.04), "1");
        assert_eq!(n(1.25), "1.3");
        assert_eq!(n(f64::NAN), "0");
    }

    /// A run of a minute reads in seconds as before; a month of monitoring in days, with the
    /// date its 0 stands for, not in millions of seconds.
    #[test]
    fn a_time_axis_takes_the_unit_its_span_needs() {
        let labels = |a: &Axis| a.ticks.iter().map(|t| t.1.clone()).collect::<Vec<_>>();
        let minute = Axis::time("t", 60.0, Some(0));
        assert_eq!(minute.label, "t (s)");
        assert_eq!(minute.hi, 60.0);
        let month = Axis::time("t", 30.0 * 86_400.0, Some(1_795_000_000_000_000_000));
        assert_eq!(month.label, "t (days; 0 is 2026-11-18 11:06 UTC)");
        assert_eq!(month.hi, 30.0 * 86_400.0);
        assert_eq!(labels(&month), ["0", "5", "10", "15", "20", "25", "30"]);
        assert_eq!(month.ticks[1].0, 5.0 * 86_400.0);
        let hours = Axis::time("t", 10.0 * 3600.0, None);
        assert_eq!(hours.label, "t (h)");
        assert_eq!(labels(&hours), ["0", "2", "4", "6", "8", "10"]);
        // A 1 s run whose last sampler reading came 3 ms after it: the axis ends there, with
        // its last tick at 1, not a step on at 1.2.
        let run = Axis::time("t", 1.003, None);
        assert_eq!(run.hi, 1.003);
        assert_eq!(labels(&run), ["0", "0.2", "0.4", "0.6", "0.8", "1"]);
        // Past a tenth of a step, the axis goes on to the next tick.
        assert!((Axis::time("t", 1.05, None).hi - 1.2).abs() < 1e-9);
    }

    /// A long title goes on two lines within the chart's width, and the chart moves down
    /// under it (it ran past the right edge: "…latency histogram per CPU, 4 repeats p").
    #[test]
    fn a_long_title_is_wrapped_and_the_chart_moves_down() {
        let chart = |title: &str| {
            let mut c = Chart::new(
                title,
                100.0,
                Axis::linear("x", 0.0, 1.0),
                Axis::linear("y", 0.0, 1.0),
            );
            c.steps(&[0.0, 1.0], &[Some(0.5)], "#000", None, 1.0);
            c.finish()
        };
        let short = chart("short");
        let name = "load=none; profile=sleep-states-per-core; interval=200us; policy=fifo";
        let long = chart(&format!(
            "{name}: latency histogram per CPU, 4 repeats pooled"
        ));
        let titles: Vec<&str> = long
            .split(r#"font-weight="bold">"#)
            .skip(1)
            .filter_map(|t| t.split('<').next())
            .collect();
        assert_eq!(titles.len(), 2, "{long}");
        let room = ((WIDTH - LEFT) / TITLE_CHAR_W) as usize;
        assert!(
            titles.iter().all(|t| t.chars().count() <= room),
            "{titles:?}"
        );
        assert!(titles[1].ends_with("4 repeats pooled"), "{titles:?}");
        assert!(!short.contains("<g transform"));
        assert!(
            long.contains(r#"<g transform="translate(0 15)">"#),
            "{long}"
        );
        let height = |svg: &str| -> Option<f64> {
            svg.split("height=\"")
                .nth(1)?
                .split('"')
                .next()?
                .parse()
                .ok()
        };
        assert_eq!(height(&long), height(&short).map(|h| h + 15.0));
        assert_eq!(wrap("a bb ccc", 4), ["a bb", "ccc"]);
        assert_eq!(wrap("abcdefgh x", 4), ["abcdefgh", "x"]);
    }

    #[test]
    fn axes() {
        let a = Axis::linear("x", 0.0, 37.0);
        assert_eq!((a.lo, a.hi), (0.0, 40.0));
        assert_eq!(a.ticks.len(), 5);
        let a = Axis::log("y", 3.0, 2_000.0);
        assert_eq!((a.lo, a.hi), (1.0, 10_000.0));
        assert_eq!(
            a.ticks.iter().map(|t| t.1.as_str()).collect::<Vec<_>>(),
            ["1", "10", "100", "1000", "10k"]
        );
        assert!((a.frac(100.0) - 0.5).abs() < 1e-12);
        assert_eq!(a.frac(0.0), 0.0);
        let a = Axis::nines("q", 3.2);
        assert_eq!(a.ticks[3].1, "0.999");
        assert_eq!(a.hi, 4.0);
        let many = Axis::nines("q", 10.0);
        assert_eq!(many.ticks[6].1, "0.999999");
        assert_eq!(many.ticks[7].1, "1-1e-7");
        assert_eq!(tick_label(0.001), "0.001");
        assert_eq!(tick_label(2_500_000.0), "2.5M");
        assert_eq!(tick_label(0.000_001), "1e-6", "six decimals would print 0");
        assert_eq!(tick_label(1e-10), "1e-10");
        assert_eq!(nice_step(37.0, 6.0), 10.0);
        // A 12.07 s run: steps of 2 up to 14 s, not of 5 up to 15 s.
        assert_eq!(nice_step(12.07, 6.0), 2.0);
        assert_eq!(Axis::linear("t", 0.0, 12.07).hi, 14.0);
        // A maximum of exactly a power of ten gets a decade above it, not the frame.
        for hi in [1_000.0, 999.9, 1_000.1] {
            let a = Axis::log("y", 10.0, hi);
            assert!(a.frac(hi) < 1.0, "{hi}: {}", a.hi);
        }
        assert_eq!(Axis::log("y", 10.0, 1_000.0).hi, 10_000.0);
    }

    /// A band's label is drawn after the lines, with a halo, so a line never crosses it.
    #[test]
    fn band_labels_lie_over_the_data() {
        let mut c = Chart::new(
            "t",
            100.0,
            Axis::linear("x", 0.0, 10.0),
            Axis::linear("y", 0.0, 10.0),
        );
        c.band(0.0, 5.0, "#eee", "memory");
        c.line(
            &[Some((0.0, 9.9)), Some((10.0, 9.9))],
            "#00f",
            None,
            1.0,
            1.0,
        );
        let svg = c.finish();
        let line = svg.find("<path").expect("the line");
        let label = svg.find(">memory<").expect("the label");
        assert!(line < label, "{svg}");
        assert!(svg.contains(r#"paint-order="stroke">memory<"#), "{svg}");
    }
}
