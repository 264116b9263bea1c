//! latlab's output formats: text for the terminal and files other tools read unchanged.
//!
//! Every writer takes a finished [`RunResult`](latlab_model::RunResult) (and its options) and
//! returns the text as a `String`; the caller decides where it goes. The crate is pure: no I/O, no
//! clock, no system access, so every format is tested with golden files.
//!
//! - [`summary_table`]: the fixed-width table `latlab measure` prints at the end of a run
//!   ([`latency_table`]: the table alone, for `-q`).
//! - [`samples_text`] / [`loads_text`]: what the run cost (power, frequency, idle residency) and
//!   the throughput of the loads beside it.
//! - [`histfile`]: cyclictest's `-h N -q` / `--histfile` histogram text (rt-tests 2.4 layout), so
//!   OSADL's `mklatencyplot.bash` and other gnuplot scripts run unchanged.
//! - [`cyclictest_json`] / [`cyclictest_json_with_range`]: cyclictest's `--json` file (rt-tests 2.4
//!   layout), for programs that parse it.
//! - [`html_report`]: one self-contained HTML file over [`ReportInput`] (cells of repeated runs):
//!   systems and a diff of every setting that differs, statistics per cell, CPU and run, the
//!   spread across repeats, comparisons with their support (Mann-Whitney U on the repeats), cost
//!   and load throughput, and inline SVG plots (histograms, percentile spectra, latency, idle
//!   residency, frequency and power over time, trade-offs).
//!   The report opens with its findings: supported differences, the largest open ones, the
//!   warnings a reader must know and the known signatures the numbers fit.
//! - [`report_text`] / [`report_markdown`] / [`report_json`] / [`report_csv`]: the same content
//!   without plots ([`ReportFormat`] picks one by name); [`compare_text`]: two cells side by side.
//! - [`run_csv`] / [`histogram_csv`] / [`windows_csv`] / [`spikes_csv`]: one run as CSV.
//!
//! - [`gate`]: `--max-latency`, `--max-p99`, `--max-missed` against a run; [`junit`]: JUnit XML
//!   of runs and checks.
//!
//! cyclictest files count in whole microseconds, truncated: a sample of 1 999 ns is in the 1 µs
//! bucket, as cyclictest's `diff / 1000` puts it.

mod cost;
mod cyclictest_hist;
mod cyclictest_json;
mod sysinfo;
mod text;
mod us;

pub use analysis::MISSED_SELECTION_PCT;
pub use cost::{loads_text, samples_text};
pub use cyclictest_hist::{HIST_MAX_US, histfile, histfile_rows};
pub use cyclictest_json::{RT_TESTS_VERSION, cyclictest_json, cyclictest_json_with_range};
pub use sysinfo::sysinfo_text;
pub use text::{LOWER_BOUND_NOTE, latency_table, summary_table};

// Pass/fail limits of a run and the JUnit XML that CI systems read.
pub mod gate;
pub mod junit;

// Reports over cells of repeated runs: HTML, text, Markdown, JSON, CSV, and `latlab compare`.
mod analysis;
mod compare;
mod content;
mod csv;
mod doc;
mod findings;
mod flatten;
mod html;
mod input;
mod mann_whitney;
mod numfmt;
mod pareto;
mod table_formats;

pub use analysis::{ALPHA, MIN_REPEATS, run_power_w, run_throughput};
pub use compare::compare_text;
pub use csv::{histogram_csv, report_csv, run_csv, spikes_csv, windows_csv};
pub use html::html_report;
pub use input::{CellInput, ReportInput};
pub use mann_whitney::{MannWhitney, mann_whitney};
pub use numfmt::p_value as format_p_value;
pub use pareto::pareto_front;
pub use table_formats::{
    REPORT_SCHEMA, REPORT_SCHEMA_VERSION, ReportFormat, report_json, report_markdown, report_text,
};
