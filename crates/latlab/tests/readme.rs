//! The README's two commands are what a new user types first: they must work as root on a
//! machine without sudo, and the test command must be exactly what CI runs.
#![allow(clippy::unwrap_used)]

use latlab_testkit::repo;

/// The commands of the README's "Two commands" block, without comments.
fn two_commands() -> Vec<String> {
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let section = readme
        .split("## Two commands")
        .nth(1)
        .expect("a Two commands section");
    let block = section
        .split("```sh")
        .nth(1)
        .and_then(|b| b.split("```").next())
        .expect("a sh block");
    block
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(String::from)
        .collect()
}

#[test]
fn the_two_commands_need_no_sudo_and_the_second_is_ci() {
    let cmds = two_commands();
    assert_eq!(cmds.len(), 2, "{cmds:?}");
    for c in &cmds {
        assert!(
            !c.starts_with("sudo"),
            "{c}: fails where sudo is not installed"
        );
    }
    assert!(
        cmds[0].starts_with("cargo run --release -- measure"),
        "{}",
        cmds[0]
    );
    let ci = std::fs::read_to_string(repo().join(".ci/run")).unwrap();
    assert!(
        ci.lines().any(|l| l.trim() == format!("exec {}", cmds[1])),
        ".ci/run does not run {:?}",
        cmds[1]
    );
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    assert!(
        readme.contains("as root (or\nwith sudo"),
        "the README says how to run as root"
    );
}

/// The README's layout table names every crate of the workspace, and only those.
#[test]
fn the_layout_table_matches_the_crates() {
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let table: std::collections::BTreeSet<String> = readme
        .lines()
        .filter_map(|l| l.strip_prefix("| `crates/"))
        .filter_map(|l| l.split('`').next())
        .map(String::from)
        .collect();
    let crates: std::collections::BTreeSet<String> = std::fs::read_dir(repo().join("crates"))
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.path().join("Cargo.toml").exists())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(table, crates, "README layout table vs crates/");
}
