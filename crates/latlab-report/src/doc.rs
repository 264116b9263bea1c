//! A report as a list of blocks (headings, paragraphs, tables, figures), written once and rendered
//! as plain text, Markdown or HTML, so every format carries the same content (text and Markdown
//! leave out the figures).

use std::fmt::Write;

/// One piece of a report.
pub(crate) enum Block {
    /// Level 1 is the title; a level-2 heading opens a section (its `id` anchors it in HTML).
    Heading {
        level: u8,
        text: String,
        id: Option<String>,
    },
    Para(String),
    /// A one-line statement, e.g. why a section has no data.
    Note(String),
    Table(Table),
    /// Preformatted text (a system record).
    Pre(String),
    /// An SVG figure with its caption (HTML only).
    Figure {
        caption: String,
        svg: String,
    },
}

/// A table: headers, which columns are numeric (right-aligned), rows.
pub(crate) struct Table {
    pub id: String,
    pub headers: Vec<String>,
    pub numeric: Vec<bool>,
    pub rows: Vec<Row>,
}

pub(crate) struct Row {
    /// HTML attributes of the row (`data-*`).
    pub attrs: Vec<(&'static str, String)>,
    pub cells: Vec<TCell>,
}

pub(crate) struct TCell {
    pub text: String,
    /// HTML attributes of the cell (`data-*`), so tests and scripts read exact values.
    pub attrs: Vec<(&'static str, String)>,
}

impl TCell {
    pub fn new(text: impl Into<String>) -> TCell {
        TCell {
            text: text.into(),
            attrs: Vec::new(),
        }
    }
    pub fn attr(mut self, k: &'static str, v: impl Into<String>) -> TCell {
        self.attrs.push((k, v.into()));
        self
    }
}

impl From<String> for TCell {
    fn from(s: String) -> TCell {
        TCell::new(s)
    }
}

impl From<&str> for TCell {
    fn from(s: &str) -> TCell {
        TCell::new(s)
    }
}

impl Table {
    /// A table whose columns are numeric where `numeric` says so (by header position).
    pub fn new(id: impl Into<String>, headers: &[(&str, bool)]) -> Table {
        Table {
            id: id.into(),
            headers: headers.iter().map(|(h, _)| h.to_string()).collect(),
            numeric: headers.iter().map(|(_, n)| *n).collect(),
            rows: Vec::new(),
        }
    }
    pub fn with_headers(id: impl Into<String>, headers: Vec<(String, bool)>) -> Table {
        Table {
            id: id.into(),
            numeric: headers.iter().map(|(_, n)| *n).collect(),
            headers: headers.into_iter().map(|(h, _)| h).collect(),
            rows: Vec::new(),
        }
    }
    pub fn row(&mut self, cells: Vec<TCell>) {
        self.rows.push(Row {
            attrs: Vec::new(),
            cells,
        });
    }
    pub fn row_with(&mut self, attrs: Vec<(&'static str, String)>, cells: Vec<TCell>) {
        self.rows.push(Row { attrs, cells });
    }
}

fn width(s: &str) -> usize {
    s.chars().count()
}

/// Every block but the figures written by `write`, a blank line between two blocks unless both
/// are notes (a run of notes stays together): the flow of the text and Markdown renderings.
fn render_flow(blocks: &[Block], mut write: impl FnMut(&mut String, &Block)) -> String {
    let mut out = String::new();
    let mut prev_note = false;
    for b in blocks {
        if matches!(b, Block::Figure { .. }) {
            continue;
        }
        let is_note = matches!(b, Block::Note(_));
        if !(out.is_empty() || is_note && prev_note) {
            out.push('\n');
        }
        prev_note = is_note;
        write(&mut out, b);
    }
    out
}

/// Plain text: underlined headings, space-aligned tables, figures left out.
pub(crate) fn render_text(blocks: &[Block]) -> String {
    render_flow(blocks, |out, b| match b {
        Block::Heading { level, text, .. } => {
            let rule = match level {
                1 => '=',
                2 => '-',
                _ => '.',
            };
            let _ = writeln!(out, "{text}");
            let _ = writeln!(out, "{}", rule.to_string().repeat(width(text)));
        }
        Block::Para(t) | Block::Note(t) => {
            let _ = writeln!(out, "{t}");
        }
        Block::Pre(t) => {
            for line in t.lines().map(str::trim_end) {
                if line.is_empty() {
                    out.push('\n');
                } else {
                    let _ = writeln!(out, "  {line}");
                }
            }
        }
        Block::Table(t) => text_table(out, t),
        Block::Figure { .. } => {}
    })
}

fn text_table(out: &mut String, t: &Table) {
    let cols = t.headers.len();
    let mut w: Vec<usize> = t.headers.iter().map(|h| width(h)).collect();
    for r in &t.rows {
        for (i, c) in r.cells.iter().enumerate().take(cols) {
            w[i] = w[i].max(width(&c.text));
        }
    }
    let line = |out: &mut String, cells: &mut dyn Iterator<Item = &str>| {
        let mut s = String::new();
        for (i, text) in cells.enumerate().take(cols) {
            if i > 0 {
                s.push_str("  ");
            }
            let pad = w[i].saturating_sub(width(text));
            if t.numeric[i] {
                s.push_str(&" ".repeat(pad));
                s.push_str(text);
            } else {
                s.push_str(text);
                s.push_str(&" ".repeat(pad));
            }
        }
        let _ = writeln!(out, "{}", s.trim_end());
    };
    line(out, &mut t.headers.iter().map(String::as_str));
    for r in &t.rows {
        line(out, &mut r.cells.iter().map(|c| c.text.as_str()));
    }
}

/// Characters Markdown would read as markup, escaped with a backslash (CommonMark's escape of
/// ASCII punctuation). `<`, `&`, `>` and `_` are escaped only where they would be markup: `<`
/// before what opens a tag or an autolink, `&` before what opens an entity, `>` opening a line
/// (a quote), `_` at a word's edge, so `p < 0.05` and `timer_migration` read as they render.
fn md_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    let mut prev: Option<char> = None;
    while let Some(ch) = chars.next() {
        let next = chars.peek().copied();
        let markup = match ch {
            '\\' | '|' | '*' | '`' | '[' | ']' => true,
            '<' => next.is_some_and(|n| n.is_ascii_alphabetic() || "/!?".contains(n)),
            '&' => next.is_some_and(|n| n.is_ascii_alphanumeric() || n == '#'),
            '>' => prev.is_none(),
            // Inside a word (`timer_migration`) it is no emphasis; at a word's edge it may be.
            '_' => {
                !(prev.is_some_and(char::is_alphanumeric)
                    && next.is_some_and(char::is_alphanumeric))
            }
            _ => false,
        };
        if markup {
            out.push('\\');
        }
        out.push(ch);
        prev = Some(ch);
    }
    out
}

/// GitHub-flavoured Markdown: `#` headings, pipe tables, fenced system records.
pub(crate) fn render_markdown(blocks: &[Block]) -> String {
    render_flow(blocks, |out, b| match b {
        Block::Heading { level, text, .. } => {
            let _ = writeln!(
                out,
                "{} {}",
                "#".repeat(usize::from(*level).clamp(1, 6)),
                md_escape(text)
            );
        }
        Block::Para(t) => {
            let _ = writeln!(out, "{}", md_escape(t));
        }
        Block::Note(t) => {
            let _ = writeln!(out, "- {}", md_escape(t));
        }
        Block::Pre(t) => {
            let _ = writeln!(out, "```text");
            for line in t.lines() {
                let _ = writeln!(out, "{}", line.trim_end());
            }
            let _ = writeln!(out, "```");
        }
        Block::Table(t) => {
            let cols = t.headers.len();
            let _ = writeln!(
                out,
                "| {} |",
                t.headers
                    .iter()
                    .map(|h| md_escape(h))
                    .collect::<Vec<_>>()
                    .join(" | ")
            );
            let _ = writeln!(
                out,
                "|{}|",
                t.numeric
                    .iter()
                    .map(|n| if *n { "---:" } else { "---" })
                    .collect::<Vec<_>>()
                    .join("|")
            );
            for r in &t.rows {
                let cells: Vec<String> = (0..cols)
                    .map(|i| {
                        r.cells
                            .get(i)
                            .map_or_else(String::new, |c| md_escape(&c.text))
                    })
                    .collect();
                let _ = writeln!(out, "| {} |", cells.join(" | "));
            }
        }
        Block::Figure { .. } => {}
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_escapes_only_markup() {
        // Comparisons and ampersands in prose read as they render.
        assert_eq!(
            md_escape("p < 0.05, a & b, 1 > 0"),
            "p < 0.05, a & b, 1 > 0"
        );
        // What would open a tag, an autolink, an entity or a quote is escaped.
        assert_eq!(
            md_escape("<b> </i> <http://x> &amp; &#39; > q"),
            "\\<b> \\</i> \\<http://x> \\&amp; \\&#39; > q"
        );
        assert_eq!(md_escape("> quoted"), "\\> quoted");
        assert_eq!(
            md_escape("timer_migration _f_ a_"),
            "timer_migration \\_f\\_ a\\_"
        );
        assert_eq!(
            md_escape("a|b *c* `d` [e] \\"),
            "a\\|b \\*c\\* \\`d\\` \\[e\\] \\\\"
        );
    }

    fn sample() -> Vec<Block> {
        let mut t = Table::new("t", &[("name", false), ("value", true)]);
        t.row(vec!["a|b".into(), "1.0".into()]);
        t.row(vec!["long name".into(), "12.5".into()]);
        vec![
            Block::Heading {
                level: 1,
                text: "Title".into(),
                id: None,
            },
            Block::Para("some *text*".into()),
            Block::Note("one".into()),
            Block::Note("two".into()),
            Block::Table(t),
            Block::Figure {
                caption: "c".into(),
                svg: "<svg/>".into(),
            },
        ]
    }

    #[test]
    fn text() {
        assert_eq!(
            render_text(&sample()),
            "Title\n=====\n\nsome *text*\n\none\ntwo\n\nname       value\na|b          1.0\nlong name   12.5\n"
        );
    }

    #[test]
    fn markdown() {
        assert_eq!(
            render_markdown(&sample()),
            "# Title\n\nsome \\*text\\*\n\n- one\n- two\n\n| name | value |\n|---|---:|\n| a\\|b | 1.0 |\n| long name | 12.5 |\n"
        );
    }
}
