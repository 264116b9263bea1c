//! The live terminal view: per-thread figures redrawn once per window (at most 10 times a
//! second), only when stdout is a terminal.

use latlab_measure::Live;
use latlab_model::units::format_us;
use std::io::Write;
use std::time::{Duration, Instant};

pub struct LiveView {
    lines_drawn: usize,
    last: Option<Instant>,
}

impl LiveView {
    pub fn new() -> LiveView {
        LiveView {
            lines_drawn: 0,
            last: None,
        }
    }

    pub fn draw(&mut self, live: &Live) {
        // The start, before any sample: nothing to show yet.
        if live.threads.iter().all(|t| t.count == 0 && t.missed == 0) {
            return;
        }
        if self
            .last
            .is_some_and(|t| t.elapsed() < Duration::from_millis(100))
        {
            return;
        }
        self.last = Some(Instant::now());
        let mut out = String::new();
        if self.lines_drawn > 0 {
            out.push_str(&format!("\x1b[{}A", self.lines_drawn));
        }
        let mut lines = vec![format!(
            "{:<10} {:>12} {:>8} {:>10} {:>10} {:>10} {:>10}   elapsed {:.0} s (µs; Ctrl-C stops)",
            "thread",
            "samples",
            "missed",
            "min",
            "avg",
            "max",
            "last win",
            live.elapsed_ns as f64 / 1e9
        )];
        for t in &live.threads {
            lines.push(format!(
                "{:<10} {:>12} {:>8} {:>10} {:>10} {:>10} {:>10}",
                t.label,
                t.count,
                t.missed,
                format_us(t.min, 1),
                format_us(t.mean.round() as u64, 1),
                format_us(t.max, 1),
                format_us(t.window_max, 1)
            ));
        }
        for l in &lines {
            out.push_str("\x1b[2K");
            out.push_str(l);
            out.push('\n');
        }
        self.lines_drawn = lines.len();
        let mut stdout = std::io::stdout().lock();
        let _ = stdout.write_all(out.as_bytes());
        let _ = stdout.flush();
    }
}
