//! The HTML report: one self-contained file (inline CSS and SVG, no script, nothing fetched), that
//! opens from disk and prints. The document is well-formed XML as well as HTML, so any XML parser
//! reads it (the tests parse it whole).

pub(crate) mod plots;
pub(crate) mod svg;

use std::fmt::Write;

use crate::analysis::Analysis;
use crate::content::{build, title};
use crate::doc::{Block, Table};
use crate::input::ReportInput;
use svg::esc;

const CSS: &str = "
:root { color-scheme: light; }
body { font: 14px/1.45 system-ui, -apple-system, 'Segoe UI', sans-serif; margin: 0; color: #222; background: #f4f4f4; }
main { max-width: 1240px; margin: 0 auto; padding: 1em 2em 3em; background: #fff; }
nav { max-width: 1240px; margin: 0 auto; padding: .6em 2em; background: #2f3b4c; color: #fff; font-size: 13px; }
nav a { color: #dfe8f5; text-decoration: none; margin-right: 1.1em; white-space: nowrap; }
h1 { font-size: 1.7em; margin: .4em 0; }
h2 { font-size: 1.3em; border-bottom: 2px solid #d6dde6; margin-top: 2.2em; padding-bottom: .15em; }
h3 { font-size: 1.05em; margin-top: 1.4em; }
table { border-collapse: collapse; font-size: 12.5px; margin: .5em 0; }
th, td { border: 1px solid #dcdcdc; padding: 2px 7px; text-align: left; vertical-align: top; }
th { background: #eef1f5; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
td.num { white-space: nowrap; }
th.num { max-width: 20em; overflow-wrap: break-word; }
tbody tr:nth-child(even) { background: #f8f9fb; }
.table-wrap { overflow-x: auto; }
p.note { color: #5d5d5d; font-style: italic; margin: .25em 0; }
pre.sysinfo { max-height: 26em; overflow: auto; white-space: pre-wrap; overflow-wrap: anywhere; background: #f6f7f9; border: 1px solid #e2e2e2; padding: .6em; font-size: 12px; }
pre.sysinfo span { display: block; min-height: 1.2em; padding-left: var(--v); text-indent: calc(-1 * var(--v)); }
figure { margin: 1.2em 0; }
figure svg { max-width: 100%; height: auto; display: block; }
figcaption { font-size: 12px; color: #555; margin-top: .2em; }
@media print {
  body { background: #fff; font-size: 10pt; }
  nav { display: none; }
  main { max-width: none; padding: 0; }
  pre.sysinfo { max-height: none; overflow: visible; }
  .table-wrap { overflow: visible; }
  figure, tr { break-inside: avoid; }
  section.cell { break-before: page; }
  h2, h3 { break-after: avoid; }
}
";

/// The whole report as one self-contained HTML file: the systems and a diff of every setting that
/// differs, per-cell statistics and their spread over repeats, comparisons with their support,
/// histograms and percentile spectra, cost and load throughput, trade-off charts, and per cell its
/// CPUs' histograms and each run's latency, idle residency, frequency and power over time.
pub fn html_report(input: &ReportInput) -> String {
    let a = Analysis::new(input);
    let blocks = build(&a, true);
    render(&title(&a), &blocks)
}

fn render(title: &str, blocks: &[Block]) -> String {
    let mut out = String::with_capacity(64 * 1024);
    out.push_str("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\"/>\n");
    out.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"/>\n");
    let _ = writeln!(
        out,
        "<meta name=\"generator\" content=\"latlab {}\"/>",
        env!("CARGO_PKG_VERSION")
    );
    let _ = writeln!(out, "<title>{}</title>", esc(title));
    let _ = writeln!(out, "<style>{CSS}</style>\n</head>\n<body>");
    // Table of contents from the sections.
    out.push_str("<nav>");
    for b in blocks {
        if let Block::Heading {
            level: 2,
            text,
            id: Some(id),
        } = b
        {
            let _ = write!(out, "<a href=\"#{}\">{}</a> ", esc(id), esc(text));
        }
    }
    out.push_str("</nav>\n<main>\n");
    let mut open = false;
    for b in blocks {
        match b {
            Block::Heading { level, text, id } => {
                let id_attr = id
                    .as_ref()
                    .map_or_else(String::new, |i| format!(" id=\"{}\"", esc(i)));
                match level {
                    1 => {
                        let _ = writeln!(out, "<h1{id_attr}>{}</h1>", esc(text));
                    }
                    2 => {
                        if open {
                            out.push_str("</section>\n");
                        }
                        let class = if id.as_deref().is_some_and(|i| i.starts_with("cell-")) {
                            " class=\"cell\""
                        } else {
                            ""
                        };
                        let _ = writeln!(out, "<section{id_attr}{class}>\n<h2>{}</h2>", esc(text));
                        open = true;
                    }
                    _ => {
                        let _ = writeln!(out, "<h3{id_attr}>{}</h3>", esc(text));
                    }
                }
            }
            Block::Para(t) => {
                let _ = writeln!(out, "<p>{}</p>", esc(t));
            }
            Block::Note(t) => {
                let _ = writeln!(out, "<p class=\"note\">{}</p>", esc(t));
            }
            Block::Pre(t) => {
                let _ = writeln!(out, "<pre class=\"sysinfo\">{}</pre>", pre_lines(t));
            }
            Block::Table(t) => table(&mut out, t),
            Block::Figure { caption, svg } => {
                let _ = writeln!(
                    out,
                    "<figure>\n{svg}\n<figcaption>{}</figcaption>\n</figure>",
                    esc(caption)
                );
            }
        }
    }
    if open {
        out.push_str("</section>\n");
    }
    out.push_str("</main>\n</body>\n</html>\n");
    out
}

/// A record of `key  value` lines, one block per line whose wrapped part hangs under its value
/// (the column after the first gap of two spaces or more; else its indent): a long command
/// line wraps beside its key instead of under it.
fn pre_lines(text: &str) -> String {
    let mut out = String::new();
    for line in text.lines() {
        let chars: Vec<char> = line.chars().collect();
        let indent = chars.iter().take_while(|c| **c == ' ').count();
        let value = (indent..chars.len().saturating_sub(1))
            .find(|&i| chars[i] == ' ' && chars[i + 1] == ' ')
            .and_then(|gap| (gap..chars.len()).find(|&i| chars[i] != ' '))
            // A value of its own line (under the key above): under itself; a heading: 2 in.
            .unwrap_or(if indent > 0 { indent } else { 2 });
        let _ = write!(out, "<span style=\"--v:{value}ch\">{}</span>", esc(line));
    }
    out
}

fn attrs(list: &[(&'static str, String)]) -> String {
    list.iter()
        .map(|(k, v)| format!(" {k}=\"{}\"", esc(v)))
        .collect()
}

fn table(out: &mut String, t: &Table) {
    let _ = write!(
        out,
        "<div class=\"table-wrap\"><table id=\"table-{}\">\n<thead><tr>",
        esc(&t.id)
    );
    for (h, numeric) in t.headers.iter().zip(&t.numeric) {
        let class = if *numeric { " class=\"num\"" } else { "" };
        let _ = write!(out, "<th{class}>{}</th>", esc(h));
    }
    out.push_str("</tr></thead>\n<tbody>\n");
    for r in &t.rows {
        let _ = write!(out, "<tr{}>", attrs(&r.attrs));
        for (i, c) in r.cells.iter().enumerate() {
            let class = if t.numeric.get(i).copied().unwrap_or(false) {
                " class=\"num\""
            } else {
                ""
            };
            let _ = write!(out, "<td{class}{}>{}</td>", attrs(&c.attrs), esc(&c.text));
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</tbody></table></div>\n");
}

#[cfg(test)]
mod tests {
    /// Each line of a system record is a block whose wrapped part hangs under its value.
    #[test]
    fn a_record_line_wraps_under_its_value() {
        let html = super::pre_lines("kernel\n  release       6.18 <x>\n\n  a b  c\n      more");
        assert_eq!(
            html,
            "<span style=\"--v:2ch\">kernel</span>\
             <span style=\"--v:16ch\">  release       6.18 &lt;x&gt;</span>\
             <span style=\"--v:2ch\"></span>\
             <span style=\"--v:7ch\">  a b  c</span>\
             <span style=\"--v:6ch\">      more</span>"
        );
    }
}
