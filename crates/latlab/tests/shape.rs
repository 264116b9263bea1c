//! The code's shape, kept: functions in the library crates stay short enough to read whole, and
//! the measuring engine builds without an async runtime (its hot loop owes nothing to one).
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

use latlab_testkit::repo;

/// The longest a library function may be, in lines from its `fn` to its closing brace.
const MOST_LINES: usize = 160;

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// `(name, first line, lines)` of every function in rustfmt-formatted `text`: from the line of
/// its `fn` to the first line after it that is its indentation and a closing brace (a
/// declaration ending in `;` has no body and is skipped).
fn functions(text: &str) -> Vec<(String, usize, usize)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let body = line.trim_start();
        let indent = &line[..line.len() - body.len()];
        let words: Vec<&str> = body.split_whitespace().collect();
        let Some(at) = words.iter().position(|w| *w == "fn") else {
            continue;
        };
        let qualifiers_only = words[..at].iter().all(|w| {
            w.starts_with("pub") || ["const", "async", "unsafe", "extern", "\"C\""].contains(w)
        });
        if !qualifiers_only || words.len() <= at + 1 {
            continue;
        }
        let name: String = words[at + 1]
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        // The signature ends where the body opens, or with `;` where there is none.
        let Some(open) = lines[i..]
            .iter()
            .position(|l| l.trim_end().ends_with(';') || l.contains('{'))
            .map(|k| i + k)
        else {
            continue;
        };
        if !lines[open].contains('{') || lines[open].trim_end().ends_with('}') {
            continue; // no body, or all of it on one line
        }
        let close = format!("{indent}}}");
        if let Some(end) = lines[open..].iter().position(|l| *l == close) {
            out.push((name, i + 1, open + end - i + 1));
        }
    }
    out
}

#[test]
fn the_function_reader_measures_what_it_should() {
    let text = "fn a() {\n    x();\n}\n\npub(crate) fn b(\n    y: u32,\n) -> u32 {\n    if y > 0 {\n        1\n    } else {\n        0\n    }\n}\n\nimpl T {\n    pub const fn c(&self) {}\n    fn d(&self) {\n        e();\n    }\n}\n";
    let f = functions(text);
    let names: Vec<(&str, usize, usize)> = f.iter().map(|(n, a, b)| (n.as_str(), *a, *b)).collect();
    assert_eq!(names, [("a", 1, 3), ("b", 5, 9), ("d", 17, 3)]);
}

#[test]
fn no_library_function_is_longer_than_the_limit() {
    let mut files = Vec::new();
    for e in std::fs::read_dir(repo().join("crates")).unwrap() {
        let dir = e.unwrap().path();
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        // The command line and the tests' kit are not library code.
        if name == "latlab" || name == "latlab-testkit" {
            continue;
        }
        rust_files(&dir.join("src"), &mut files);
    }
    assert!(files.len() > 50, "{} files read", files.len());
    let mut long = Vec::new();
    let mut longest = 0;
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        for (name, line, n) in functions(&text) {
            longest = longest.max(n);
            if n > MOST_LINES {
                long.push(format!(
                    "{}:{line} {name}: {n} lines",
                    f.strip_prefix(repo()).unwrap_or(f).display()
                ));
            }
        }
    }
    assert!(
        longest > 50,
        "the reader found functions (longest {longest} lines)"
    );
    assert!(
        long.is_empty(),
        "longer than {MOST_LINES} lines (split them where they change subject):\n{}",
        long.join("\n")
    );
}

#[test]
fn the_measuring_engine_builds_without_an_async_runtime() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = latlab_testkit::run_ok(std::process::Command::new(cargo).current_dir(repo()).args([
        "tree",
        "--offline",
        "-p",
        "latlab-measure",
        "-e",
        "normal",
        "--prefix",
        "none",
    ]));
    let tree = String::from_utf8(out.stdout).unwrap();
    assert!(tree.contains("latlab-hist"), "{tree}");
    for runtime in ["tokio", "async-std", "smol", "futures", "mio"] {
        assert!(
            !tree
                .lines()
                .any(|l| l.split_whitespace().next() == Some(runtime)),
            "latlab-measure depends on {runtime}:\n{tree}"
        );
    }
}
