//! latlab's test kit, a dev-dependency of every crate whose tests run latlab or compare its
//! output: the `latlab` command with every `LATLAB_*` variable cleared (so a developer's own
//! settings never redirect a test), root checks that skip cleanly and say why, the assertions
//! on a command's exit and output, and the golden-file comparison.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub mod process;
pub mod run;

/// Every variable latlab reads, cleared from each command a test runs (a test sets what it
/// needs after). `SUDO_USER` and `NO_COLOR` change what `check` prints.
pub const LATLAB_ENV: [&str; 8] = [
    "LATLAB_SYSROOT",
    "LATLAB_STATE_DIR",
    "LATLAB_DB",
    "LATLAB_TUNE_FAIL_AT_WRITE",
    "LATLAB_TUNE_PAUSE_AFTER_WRITES",
    "LATLAB_TUNE_PAUSE_SECONDS",
    "SUDO_USER",
    "NO_COLOR",
];

/// The `latlab` binary of the calling crate's tests, with a clean environment.
#[macro_export]
macro_rules! latlab {
    () => {
        $crate::command(env!("CARGO_BIN_EXE_latlab"))
    };
}

/// `program` with every variable of [`LATLAB_ENV`] removed.
pub fn command(program: impl AsRef<std::ffi::OsStr>) -> Command {
    let mut c = Command::new(program);
    for v in LATLAB_ENV {
        c.env_remove(v);
    }
    c
}

/// Whether the tests run as root.
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// `true` as root; otherwise says the test is skipped and why.
pub fn root_or_skip(why: &str) -> bool {
    if !is_root() {
        eprintln!("skipped: {why} needs root");
    }
    is_root()
}

/// Measuring options a test can use as anyone: fifo 80 as root, otherwise `other` without
/// locked memory (said on stderr).
pub fn policy_args() -> Vec<&'static str> {
    if is_root() {
        vec!["--policy", "fifo", "-p", "80"]
    } else {
        eprintln!("not root: measuring with --policy other instead of fifo");
        vec!["--policy", "other", "--no-mlock"]
    }
}

/// [`policy_args`] as lines of a plan's `[settings]`.
pub fn policy_toml() -> &'static str {
    if is_root() {
        "policy = \"fifo\"\npriority = 80\n"
    } else {
        eprintln!("not root: the plan measures with policy other");
        "policy = \"other\"\nno-mlock = true\n"
    }
}

/// `program` as an unprivileged user (nobody, no inheritable capabilities, `drop_caps` also
/// removed from the bounding set) through setpriv when root; as is otherwise. `None` (said)
/// when setpriv is missing.
pub fn unprivileged(program: &str, drop_caps: &str) -> Option<Command> {
    if !is_root() {
        return Some(command(program));
    }
    if Command::new("setpriv").arg("--version").output().is_err() {
        eprintln!("skipped: setpriv (util-linux) is not installed");
        return None;
    }
    let mut c = command("setpriv");
    c.args([
        "--reuid=65534",
        "--regid=65534",
        "--clear-groups",
        "--inh-caps=-all",
        &format!("--bounding-set={drop_caps}"),
        program,
    ]);
    Some(c)
}

/// The tracefs lines of `/proc/self/mounts` (what tracing must leave as it found).
pub fn tracefs_mounts() -> Vec<String> {
    std::fs::read_to_string("/proc/self/mounts")
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains("tracefs"))
        .map(String::from)
        .collect()
}

/// `rounds` UDP datagrams from one loopback socket to another, each received, `pause` after
/// each: NET_RX softirqs for a trace to see.
pub fn udp_ping_pong(rounds: u32, pause: std::time::Duration) {
    let bind =
        || std::net::UdpSocket::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("a UDP socket: {e}"));
    let (a, b) = (bind(), bind());
    let to = a
        .local_addr()
        .unwrap_or_else(|e| panic!("the socket's address: {e}"));
    let mut buf = [0u8; 64];
    for _ in 0..rounds {
        b.send_to(b"latlab", to)
            .unwrap_or_else(|e| panic!("sending to {to}: {e}"));
        a.recv_from(&mut buf)
            .unwrap_or_else(|e| panic!("receiving on {to}: {e}"));
        std::thread::sleep(pause);
    }
}

/// `kernel.bpf_stats_enabled` as it reads now (tracing must put it back).
pub fn bpf_stats_sysctl() -> String {
    std::fs::read_to_string("/proc/sys/kernel/bpf_stats_enabled").unwrap_or_default()
}

/// Whether a command of that name is on the PATH.
pub fn have(program: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// [`have`], saying the test is skipped when the tool is missing (the test command installs
/// every tool the tests use; a developer may not have).
pub fn require(program: &str) -> bool {
    let found = have(program);
    if !found {
        eprintln!("skipped: {program} is not installed");
    }
    found
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The part of `text` after the first `start`, up to the next `end` (or its end): a section of
/// a report or a page. Fails the test, showing `text`, where `start` is not in it.
pub fn between<'a>(text: &'a str, start: &str, end: &str) -> &'a str {
    match text.split_once(start) {
        Some((_, rest)) => rest.split(end).next().unwrap_or(rest),
        None => panic!("{start:?} not in:\n{text}"),
    }
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The command ended with exit code 0 (else both outputs are shown).
pub fn assert_ok(o: &Output) {
    assert!(
        o.status.success(),
        "exit {:?}\nstdout: {}\nstderr: {}",
        o.status.code(),
        stdout(o),
        stderr(o)
    );
}

/// Run `cmd`, which must succeed; its output.
pub fn run_ok(cmd: &mut Command) -> Output {
    let o = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    assert_ok(&o);
    o
}

/// Run `cmd`, which must succeed; its stdout.
pub fn run_stdout(cmd: &mut Command) -> String {
    stdout(&run_ok(cmd))
}

/// The stdout of a command that must have succeeded.
pub fn ok_stdout(o: &Output) -> String {
    assert_ok(o);
    stdout(o)
}

/// Run `cmd`, which must end with exit code `code`; its output.
pub fn run_exit(cmd: &mut Command, code: i32) -> Output {
    let o = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    assert_eq!(
        o.status.code(),
        Some(code),
        "{cmd:?}\nstdout: {}\nstderr: {}",
        stdout(&o),
        stderr(&o)
    );
    o
}

/// The first line of `text` that contains `needle`; the test fails with the whole text where
/// none does.
pub fn line_with<'a>(text: &'a str, needle: &str) -> &'a str {
    text.lines()
        .find(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("no line with {needle:?} in:\n{text}"))
}

/// stdout then stderr, as one text (what a tool printed, in whichever stream).
pub fn output_text(o: &Output) -> String {
    format!("{}{}", stdout(o), stderr(o))
}

/// Exit code `code` with exactly one line on stderr, latlab's error line, containing `needle`.
pub fn assert_one_line_error(o: &Output, code: i32, needle: &str) {
    let err = stderr(o);
    assert_eq!(o.status.code(), Some(code), "stderr: {err}");
    assert_eq!(err.lines().count(), 1, "stderr: {err}");
    assert!(err.starts_with("latlab: error: "), "stderr: {err}");
    assert!(err.contains(needle), "{needle:?} not in: {err}");
}

/// stdout parsed as JSON.
pub fn json(o: &Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {}", stdout(o)))
}

/// A file parsed as JSON.
pub fn read_json(path: &Path) -> serde_json::Value {
    let text =
        std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()))
}

/// The element of the JSON array `list` whose `key` is `value`; panics naming it when absent.
pub fn json_item<'a>(list: &'a serde_json::Value, key: &str, value: &str) -> &'a serde_json::Value {
    list.as_array()
        .unwrap_or_else(|| panic!("not an array: {list}"))
        .iter()
        .find(|item| item[key] == value)
        .unwrap_or_else(|| panic!("no element with {key} = {value:?} in {list}"))
}

/// Compare `actual` with the golden file `tests/golden/NAME` of the calling crate;
/// `LATLAB_UPDATE_GOLDEN=1` writes it instead.
#[macro_export]
macro_rules! golden {
    ($name:expr, $actual:expr $(,)?) => {
        $crate::golden_at(
            &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden"),
            $name,
            $actual,
        )
    };
}

/// [`golden!`] with the directory named.
pub fn golden_at(dir: &Path, name: &str, actual: &str) {
    let path = dir.join(name);
    if std::env::var_os("LATLAB_UPDATE_GOLDEN").is_some() {
        if let Err(e) = std::fs::write(&path, actual) {
            panic!("writing {}: {e}", path.display());
        }
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (set LATLAB_UPDATE_GOLDEN=1 to create)",
            path.display()
        )
    });
    if expected != actual {
        let line = expected
            .split_inclusive('\n')
            .zip(actual.split_inclusive('\n'))
            .position(|(e, a)| e != a)
            .map_or(expected.lines().count().min(actual.lines().count()), |i| i);
        panic!(
            "{name} differs from the golden file at line {}:\n expected: {:?}\n   actual: {:?}",
            line + 1,
            expected.split_inclusive('\n').nth(line),
            actual.split_inclusive('\n').nth(line)
        );
    }
}

/// The machines of the fixture tree (`fixtures/machines/NAME`: what sysfs, procfs and devfs
/// show on each).
pub const MACHINES: [&str; 4] = ["laptop-intel", "arm-board", "amd-desktop", "vm"];

/// The repository's root (packaging, examples, the README).
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The workspace's one fixture tree (`fixtures/`; its README says what each machine is).
pub fn fixtures() -> PathBuf {
    repo().join("fixtures")
}

/// A machine's tree, to read in place.
pub fn machine(name: &str) -> PathBuf {
    fixtures().join("machines").join(name)
}

/// An overlay of a machine (`fixtures/overlays/VARIANT/NAME`, with `NAME.remove` beside it): what
/// a crate's tests need different from the machine's tree.
pub fn overlay(variant: &str, name: &str) -> PathBuf {
    fixtures().join("overlays").join(variant).join(name)
}

/// Write `content` at `rel` under `root` (a leading `/` ignored), making its directories.
pub fn write_file(root: &Path, rel: &str, content: impl AsRef<[u8]>) {
    let path = root.join(rel.trim_start_matches('/'));
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    }
    std::fs::write(&path, content).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
}

/// A temporary system tree of just `files`, each `(path as on the system, content)`.
pub fn tree_of(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("a temporary directory: {e}"));
    for (rel, content) in files {
        write_file(dir.path(), rel, content);
    }
    dir
}

/// Copy the tree `from` into `to` (created), keeping symlinks as symlinks and file modes.
pub fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for e in std::fs::read_dir(from)? {
        let e = e?;
        let dest = to.join(e.file_name());
        let kind = e.file_type()?;
        if kind.is_symlink() {
            if std::fs::symlink_metadata(&dest).is_ok_and(|m| m.is_dir()) {
                std::fs::remove_dir_all(&dest)?;
            } else if std::fs::symlink_metadata(&dest).is_ok() {
                std::fs::remove_file(&dest)?;
            }
            std::os::unix::fs::symlink(std::fs::read_link(e.path())?, &dest)?;
        } else if kind.is_dir() {
            copy_tree(&e.path(), &dest)?;
        } else {
            std::fs::copy(e.path(), &dest)?;
        }
    }
    Ok(())
}

/// A writable copy of machine `name` with `overlays` applied in order (see [`overlay`]).
pub fn copy_machine(name: &str, overlays: &[&str]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("a temporary directory: {e}"));
    copy_machine_to(name, overlays, dir.path());
    dir
}

/// [`copy_machine`] into `to`. Each overlay first removes the paths its `NAME.remove` file lists
/// (one per line, relative to the root), then copies its tree on top: its files and symlinks
/// replace what is there (a symlink may replace a directory).
pub fn copy_machine_to(name: &str, overlays: &[&str], to: &Path) {
    let fail = |what: &Path, e: std::io::Error| -> ! { panic!("{}: {e}", what.display()) };
    let base = machine(name);
    copy_tree(&base, to).unwrap_or_else(|e| fail(&base, e));
    for variant in overlays {
        let dir = overlay(variant, name);
        let list = dir.with_extension("remove");
        if let Ok(text) = std::fs::read_to_string(&list) {
            for rel in text.lines().filter(|l| !l.trim().is_empty()) {
                let p = to.join(rel.trim());
                let removed = match std::fs::symlink_metadata(&p) {
                    Ok(m) if m.is_dir() => std::fs::remove_dir_all(&p),
                    Ok(_) => std::fs::remove_file(&p),
                    Err(e) => Err(e),
                };
                removed.unwrap_or_else(|e| fail(&p, e));
            }
        }
        copy_tree(&dir, to).unwrap_or_else(|e| fail(&dir, e));
    }
}

/// A machine's tree with the `tune` overlay (grub, boot id, workqueue masks) in `root`, and a
/// separate tuning state directory `state`, both inside `dir` (removed when dropped).
pub struct TuneTree {
    pub dir: tempfile::TempDir,
    pub root: PathBuf,
    pub state: PathBuf,
}

impl TuneTree {
    pub fn new(name: &str) -> TuneTree {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("a temporary directory: {e}"));
        let root = dir.path().join("root");
        copy_machine_to(name, &["tune"], &root);
        let state = dir.path().join("state");
        TuneTree { dir, root, state }
    }

    /// The file at `rel` (as on the system) in the tree.
    pub fn read(&self, rel: &str) -> String {
        let path = self.root.join(rel.trim_start_matches('/'));
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }

    /// Write `text` at `rel` (as on the system) in the tree.
    pub fn write(&self, rel: &str, text: &str) {
        write_file(&self.root, rel, text);
    }
}

/// The trees `latlab check`'s tests read: each machine with the `check` overlay (users, limits,
/// kernel threads, mounts; cpufreq as the kernel links it), and `badly-tuned`, the laptop with
/// what a badly tuned system shows on top.
pub const CHECK_TREES: [&str; 5] = [
    "laptop-intel",
    "arm-board",
    "amd-desktop",
    "vm",
    "badly-tuned",
];

/// A writable copy of one of [`CHECK_TREES`].
pub fn check_tree(name: &str) -> tempfile::TempDir {
    match name {
        "badly-tuned" => copy_machine("laptop-intel", &["check", "badly-tuned"]),
        _ => copy_machine(name, &["check"]),
    }
}

/// Read a JUnit XML file with junitparser (the Python reader CI tools build on, installed from
/// Debian's python3-junitparser by scripts/test.sh) as JSON: `[{"name", "tests", "failures",
/// "errors", "skipped", "cases": [{"classname", "name", "time", "result": "passed" | "failure" |
/// "error" | "skipped", "message"}]}]`. `None` (and a note saying why) where it is not installed.
pub fn junit_read(path: &Path) -> Option<serde_json::Value> {
    const READER: &str = r#"
import json, sys
from junitparser import JUnitXml, Failure, Error, Skipped
xml = JUnitXml.fromfile(sys.argv[1])
suites = []
for s in xml:
    cases = []
    for c in s:
        result, message = "passed", None
        for r in c.result:
            result = {Failure: "failure", Error: "error", Skipped: "skipped"}.get(type(r), "other")
            message = r.message
        cases.append({"classname": c.classname, "name": c.name, "time": c.time,
                      "result": result, "message": message, "system_out": c.system_out})
    suites.append({"name": s.name, "tests": s.tests, "failures": s.failures,
                   "errors": s.errors, "skipped": s.skipped, "cases": cases})
print(json.dumps(suites))
"#;
    let python = "/usr/bin/python3";
    let ok = Path::new(python).exists()
        && Command::new(python)
            .args(["-c", "import junitparser"])
            .output()
            .is_ok_and(|o| o.status.success());
    if !ok {
        eprintln!(
            "note: JUnit output not read by junitparser: {python} with python3-junitparser is \
             not installed (scripts/test.sh installs it)"
        );
        return None;
    }
    let out = Command::new(python)
        .args(["-c", READER])
        .arg(path)
        .output()
        .expect("running junitparser");
    assert!(
        out.status.success(),
        "junitparser could not read {}: {}",
        path.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    Some(serde_json::from_slice(&out.stdout).expect("junitparser's JSON"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_clears_every_latlab_variable() {
        let c = command("true");
        let removed: Vec<_> = c
            .get_envs()
            .filter(|(_, v)| v.is_none())
            .map(|(k, _)| k.to_string_lossy().into_owned())
            .collect();
        for v in LATLAB_ENV {
            assert!(removed.iter().any(|r| r == v), "{v} not cleared");
        }
    }

    #[test]
    fn a_golden_mismatch_names_the_line() {
        if std::env::var_os("LATLAB_UPDATE_GOLDEN").is_some() {
            eprintln!("skipped: LATLAB_UPDATE_GOLDEN is set (golden files are being written)");
            return;
        }
        let dir = std::env::temp_dir().join(format!("latlab-testkit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).ok();
        std::fs::write(dir.join("g.txt"), "a\nb\nc\n").ok();
        golden_at(&dir, "g.txt", "a\nb\nc\n");
        let e = std::panic::catch_unwind(|| golden_at(&dir, "g.txt", "a\nX\nc\n"));
        std::fs::remove_dir_all(&dir).ok();
        let msg = e
            .err()
            .and_then(|p| p.downcast_ref::<String>().cloned())
            .unwrap_or_default();
        assert!(msg.contains("at line 2"), "{msg}");
    }
}
