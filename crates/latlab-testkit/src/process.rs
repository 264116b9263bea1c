//! Processes a test starts and watches: a daemon whose output goes to a log file and that is
//! killed if the test ends early, waiting for a condition or an exit with a time limit, a
//! command stopped by a signal, and a free TCP port to listen on.

use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

/// A TCP port on 127.0.0.1 nothing listens on (at the time of asking).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or_else(|e| panic!("no free port: {e}"))
}

/// 127.0.0.1 with a [`free_port`]: an address to tell a server to listen on.
pub fn free_addr() -> std::net::SocketAddr {
    std::net::SocketAddr::from(([127, 0, 0, 1], free_port()))
}

/// Start `cmd` with its stdout piped and return once a line of its stderr contains `needle`
/// (a test hook's "paused after" line); panics if it ends first. The rest of its stderr is
/// read (and dropped) so that writing it never blocks.
pub fn spawn_until_stderr(cmd: &mut Command, needle: &str) -> Child {
    use std::io::{BufRead, BufReader};
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("starting {cmd:?}: {e}"));
    let Some(stderr) = child.stderr.take() else {
        panic!("{cmd:?}: no stderr")
    };
    let mut lines = BufReader::new(stderr).lines();
    loop {
        match lines.next() {
            Some(Ok(l)) if l.contains(needle) => break,
            Some(Ok(_)) => continue,
            _ => panic!("{cmd:?} ended before saying {needle:?}"),
        }
    }
    std::thread::spawn(move || lines.for_each(drop));
    child
}

/// Poll `f` every 100 ms until it holds; panics naming `what` after `timeout`.
pub fn wait_for(what: &str, timeout: Duration, mut f: impl FnMut() -> bool) {
    let t = Instant::now();
    while !f() {
        assert!(t.elapsed() < timeout, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Wait until `f` holds while `child` runs, polling; fails (naming `what`) if `child` exits
/// first or `timeout` passes.
pub fn wait_while_running(
    child: &mut Child,
    what: &str,
    timeout: Duration,
    mut f: impl FnMut() -> bool,
) {
    let t = Instant::now();
    while !f() {
        if let Ok(Some(status)) = child.try_wait() {
            panic!("the command exited ({status}) before {what}");
        }
        assert!(t.elapsed() < timeout, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Wait for `child` to exit; kills it and panics after `timeout`.
pub fn wait_exit(child: &mut Child, timeout: Duration) -> ExitStatus {
    let t = Instant::now();
    loop {
        if let Some(s) = child.try_wait().unwrap_or_else(|e| panic!("waiting: {e}")) {
            return s;
        }
        if t.elapsed() > timeout {
            let _ = child.kill();
            panic!("process did not exit within {timeout:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Start `cmd` with its stdout and stderr kept, send it `sig` after `after`, and wait for it to
/// exit: its output and the time from the signal to the exit. Fails (killing it) if it has not
/// exited `limit` after the signal.
pub fn signal_after(
    cmd: &mut Command,
    after: Duration,
    sig: libc::c_int,
    limit: Duration,
) -> (Output, Duration) {
    let child = spawn_kept(cmd);
    std::thread::sleep(after);
    // SAFETY: a pid of a child this test started and has not reaped.
    unsafe { libc::kill(child.id() as libc::pid_t, sig) };
    let sent = Instant::now();
    let out = output_by(cmd, child, limit, "of the signal");
    (out, sent.elapsed())
}

/// Run `cmd` to its end, which must come within `limit` (else it is killed and the test fails:
/// for commands that must stop by themselves, such as ones refusing their input); its output.
pub fn output_within(cmd: &mut Command, limit: Duration) -> Output {
    let child = spawn_kept(cmd);
    output_by(cmd, child, limit, "of its start")
}

fn spawn_kept(cmd: &mut Command) -> Child {
    cmd.stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("starting {cmd:?}: {e}"))
}

/// `child`'s output once it exits; it is killed and the test fails if that takes over `limit`.
fn output_by(cmd: &Command, child: Child, limit: Duration, since: &str) -> Output {
    let pid = child.id() as libc::pid_t;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(limit) {
        Ok(out) => out.unwrap_or_else(|e| panic!("waiting for {cmd:?}: {e}")),
        Err(_) => {
            // SAFETY: a pid of a child this test started; the waiting thread has not reaped it.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            panic!("{cmd:?} did not exit within {limit:?} {since}");
        }
    }
}

/// A process this test started, its stdout and stderr in `log`; killed (by its pid) if the
/// test ends early.
pub struct Proc {
    pub child: Child,
    pub log: PathBuf,
}

impl Proc {
    pub fn start(mut cmd: Command, log: PathBuf) -> Proc {
        let f = std::fs::File::create(&log).unwrap_or_else(|e| panic!("{}: {e}", log.display()));
        let out = f.try_clone().unwrap_or_else(|e| panic!("{e}"));
        let child = cmd
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(f)
            .spawn()
            .unwrap_or_else(|e| panic!("starting {cmd:?}: {e}"));
        Proc { child, log }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// What it has written so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// [`wait_while_running`] on this process; a failure shows its log.
    pub fn wait_until(&mut self, what: &str, timeout: Duration, f: impl FnMut() -> bool) {
        let log = self.log.clone();
        let waited = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            wait_while_running(&mut self.child, what, timeout, f)
        }));
        if let Err(e) = waited {
            let why = e
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            panic!(
                "{why}; its log: {}",
                std::fs::read_to_string(&log).unwrap_or_default()
            );
        }
    }

    pub fn signal(&mut self, sig: libc::c_int) {
        // SAFETY: a pid of a child this test started and has not reaped.
        unsafe { libc::kill(self.child.id() as i32, sig) };
    }

    /// Send `sig`, wait, and return the exit status and the log.
    pub fn end(mut self, sig: libc::c_int) -> (ExitStatus, String) {
        self.signal(sig);
        let status = wait_exit(&mut self.child, Duration::from_secs(20));
        (status, self.log())
    }

    /// SIGINT and wait; the exit must be clean.
    pub fn stop(self) -> String {
        let (status, log) = self.end(libc::SIGINT);
        assert!(status.success(), "exit {status:?}: {log}");
        log
    }

    /// SIGTERM (what systemd sends) and wait; the exit must be clean.
    pub fn term(self) -> String {
        let (status, log) = self.end(libc::SIGTERM);
        assert!(status.success(), "exit {status:?}: {log}");
        log
    }

    /// SIGKILL and wait.
    pub fn kill9(mut self) -> String {
        self.signal(libc::SIGKILL);
        let _ = wait_exit(&mut self.child, Duration::from_secs(10));
        self.log()
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    #[should_panic(expected = "exited (exit status: 3) before the file")]
    fn a_wait_fails_as_soon_as_the_command_has_ended() {
        let mut child = std::process::Command::new("sh")
            .args(["-c", "exit 3"])
            .spawn()
            .unwrap();
        wait_while_running(&mut child, "the file", Duration::from_secs(30), || false);
    }

    #[test]
    fn a_wait_ends_when_the_condition_holds() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let mut polls = 0;
        wait_while_running(&mut child, "three polls", Duration::from_secs(30), || {
            polls += 1;
            polls == 3
        });
        child.kill().unwrap();
        child.wait().unwrap();
    }
}
