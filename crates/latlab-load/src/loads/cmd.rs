//! `cmd:COMMAND`: an external command (stress-ng, fio, a kernel build, ...) run as the load.
//!
//! The rest of the spec after `cmd:` is a shell command line, run with `/bin/sh -c` (one pair of
//! surrounding quotes is removed, so `cmd:"stress-ng --cpu 1"` works when the shell passed the
//! quotes through). The command runs in its own process group, pinned to the load CPU set, with
//! its output on latlab's standard error (standard output stays clean for JSON) and no input.
//! Stopping sends SIGTERM to the whole group, then SIGKILL after a grace of 2 s. The report
//! carries its elapsed time and how it ended.
//!
//! A watcher in the group holds the read end of a pipe whose write end only latlab has. Should
//! latlab die in any way (SIGKILL included), the pipe closes and the watcher stops the whole
//! group as latlab would have: SIGTERM, then SIGKILL after the grace, so neither the command
//! nor what it forked or left running outlives latlab. The command itself is the group's
//! leader, with its own exit status and signal dispositions.

use crate::registry::LoadDescriptor;
use crate::{Ctx, Finished, LoadOptions, LoadSpec, Running};
use latlab_model::units::format_duration;
use std::os::fd::AsFd;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

pub static DESCRIPTOR: LoadDescriptor = LoadDescriptor {
    name: "cmd",
    description: "an external command line (run with /bin/sh -c in its own process group, pinned \
                  to the CPU set, SIGTERM then SIGKILL when stopped)",
    options: &[],
    throughput: &[],
    takes_command: true,
    validate: None,
    realtime: None,
    supported,
    start,
};

const SHELL: &str = "/bin/sh";

/// The group's first process: it starts the watcher, a background subshell that holds the pipe
/// on its standard input (as fd 3) and, when the pipe ends (latlab ended or died), stops the
/// whole group as latlab would (SIGTERM, [`GRACE`], SIGKILL), then replaces itself with the
/// command (`/bin/sh -c LINE`, no input). So the command keeps the group leader's pid, its own
/// exit status and its signal dispositions, and the watcher outlives it until latlab stops the
/// group: what the command left running is stopped with it.
///
/// The script and the command line come in the environment ([`SCRIPT_VAR`], [`LINE_VAR`]),
/// removed before the command runs, not as arguments: the watcher's command line is then only
/// [`SUPERVISOR_ARGS`], so `pkill -f` with the command's text finds the command, not the watcher.
const SUPERVISOR: &str = r#"exec 3<&0 0</dev/null
line=$LATLAB_CMD_LINE
unset LATLAB_CMD_LINE LATLAB_CMD_SUPERVISOR
{ trap '' TERM; read _ <&3; kill -TERM 0; /bin/sleep 2 2>/dev/null || sleep 2; kill -KILL 0; } &
exec 3<&- /bin/sh -c "$line"
"#;
const SCRIPT_VAR: &str = "LATLAB_CMD_SUPERVISOR";
const LINE_VAR: &str = "LATLAB_CMD_LINE";
/// `/bin/sh -c` these, with the script in [`SCRIPT_VAR`].
const SUPERVISOR_ARGS: [&str; 3] = ["-c", "eval \"$LATLAB_CMD_SUPERVISOR\"", "latlab-cmd"];
/// Time between SIGTERM and SIGKILL.
pub const GRACE: Duration = Duration::from_secs(2);

fn supported(_: &LoadSpec, _: &LoadOptions) -> Result<(), String> {
    if std::path::Path::new(SHELL).exists() {
        Ok(())
    } else {
        Err(format!("{SHELL} is missing"))
    }
}

/// When the child exited (seen without reaping it, so its process group id stays reserved).
type ExitSeen = Arc<(Mutex<Option<Instant>>, Condvar)>;

struct CmdLoad {
    child: Option<Child>,
    pid: u32,
    started: Instant,
    exited: ExitSeen,
    monitor: Option<JoinHandle<()>>,
    term_sent: AtomicBool,
    /// The write end of the watcher's pipe: closed when latlab ends (or dies), after the group
    /// is stopped.
    _lifeline: std::os::fd::OwnedFd,
    /// Kills the group should latlab have to end at once (the group id stays reserved until
    /// the child is reaped, so it names no other processes).
    _on_exit: latlab_sys::exit_hooks::Registration,
}

/// A pipe, both ends close-on-exec (the group's first process gets the read end as its
/// standard input, which clears the flag there, and hands it to the watcher): `(read, write)`.
fn lifeline() -> Result<(std::os::fd::OwnedFd, std::os::fd::OwnedFd), String> {
    use std::os::fd::FromRawFd;
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: fds is a valid array of two ints for pipe2 to fill.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } == -1 {
        return Err(format!(
            "creating the command's pipe: {}",
            std::io::Error::last_os_error()
        ));
    }
    // SAFETY: pipe2 succeeded, so both descriptors are open and owned by nobody else.
    Ok(unsafe {
        (
            std::os::fd::OwnedFd::from_raw_fd(fds[0]),
            std::os::fd::OwnedFd::from_raw_fd(fds[1]),
        )
    })
}

fn kill_group(pgid: u32, sig: libc::c_int) {
    if let Ok(p) = libc::pid_t::try_from(pgid) {
        // SAFETY: plain system call; a negative pid names the process group.
        unsafe { libc::kill(-p, sig) };
    }
}

fn describe(status: &ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(c), _) => format!("exit status {c}"),
        (None, Some(s)) => format!("signal {}", signal_name(s)),
        _ => status.to_string(),
    }
}

fn signal_name(s: i32) -> String {
    match s {
        libc::SIGTERM => "SIGTERM".into(),
        libc::SIGKILL => "SIGKILL".into(),
        libc::SIGINT => "SIGINT".into(),
        libc::SIGHUP => "SIGHUP".into(),
        libc::SIGSEGV => "SIGSEGV".into(),
        libc::SIGABRT => "SIGABRT".into(),
        other => other.to_string(),
    }
}

impl CmdLoad {
    fn exit_time(&self) -> Option<Instant> {
        self.exited.0.lock().ok().and_then(|g| *g)
    }

    /// Wait for the child's exit, at most `limit`.
    fn wait_exit(&self, limit: Duration) -> Option<Instant> {
        let (lock, cv) = &*self.exited;
        let guard = lock.lock().ok()?;
        let (guard, _) = cv
            .wait_timeout_while(guard, limit, |exit| exit.is_none())
            .ok()?;
        *guard
    }

    /// Stop the group and reap the child; returns its status, exit time and whether SIGKILL
    /// was needed.
    fn end(&mut self) -> (Option<ExitStatus>, Option<Instant>, bool, bool) {
        let ended_alone = self.exit_time().is_some() && !self.term_sent.load(Ordering::Relaxed);
        if !ended_alone {
            self.request_term();
        }
        let mut killed = false;
        let exit = match self.wait_exit(GRACE) {
            Some(t) => Some(t),
            None => {
                killed = true;
                kill_group(self.pid, libc::SIGKILL);
                self.wait_exit(Duration::from_secs(10))
            }
        };
        // Whatever else is left in the group (the leader is a zombie here, so the group id
        // cannot have been reused).
        kill_group(self.pid, libc::SIGKILL);
        if let Some(m) = self.monitor.take() {
            let _ = m.join();
        }
        let status = self.child.take().and_then(|mut c| c.wait().ok());
        (status, exit, killed, ended_alone)
    }

    fn request_term(&self) {
        if self.exit_time().is_none() && !self.term_sent.swap(true, Ordering::Relaxed) {
            kill_group(self.pid, libc::SIGTERM);
        }
    }
}

impl Running for CmdLoad {
    fn request_stop(&self) {
        self.request_term();
    }

    fn finish(mut self: Box<Self>) -> Finished {
        let (status, exit, killed, ended_alone) = self.end();
        let elapsed = exit
            .unwrap_or_else(Instant::now)
            .saturating_duration_since(self.started);
        let how = status.as_ref().map_or("an unknown status".into(), describe);
        // Stopped by SIGTERM as the run ended, as a command that outlives the run is: the
        // normal end, said nowhere. Ending early or having to be killed is said.
        let note = if ended_alone {
            Some(format!(
                "the command ended on its own after {} with {how}",
                format_duration(elapsed.as_millis() as u64 * 1_000_000)
            ))
        } else if killed {
            Some(format!(
                "the command did not end within {} of SIGTERM and was killed ({how})",
                format_duration(GRACE.as_nanos() as u64)
            ))
        } else {
            None
        };
        // A command that ended on its own before it was stopped, other than with success, is a
        // load that failed (it did not run for the time asked).
        let failed = note
            .clone()
            .filter(|_| ended_alone && !status.as_ref().is_some_and(|s| s.success()));
        Finished {
            workers: 1,
            elapsed,
            throughput: Vec::new(),
            warnings: note.into_iter().collect(),
            failed,
        }
    }

    fn pids(&self) -> Vec<u32> {
        vec![self.pid]
    }
}

impl Drop for CmdLoad {
    fn drop(&mut self) {
        if self.child.is_some() {
            let _ = self.end();
        }
    }
}

fn start(spec: &LoadSpec, ctx: &Ctx<'_>) -> Result<Box<dyn Running>, String> {
    let line = spec.command().unwrap_or_default().to_string();
    let set =
        latlab_sys::thread::cpu_set(ctx.cpus).map_err(|e| format!("pinning the command: {e}"))?;
    let stderr = std::io::stderr()
        .as_fd()
        .try_clone_to_owned()
        .map_err(|e| format!("duplicating standard error: {e}"))?;
    let (lifeline_read, lifeline) = lifeline()?;
    let mut cmd = Command::new(SHELL);
    cmd.args(SUPERVISOR_ARGS)
        .env(SCRIPT_VAR, SUPERVISOR)
        .env(LINE_VAR, &line)
        .stdin(Stdio::from(lifeline_read))
        .stdout(Stdio::from(stderr))
        .process_group(0);
    // SAFETY: only async-signal-safe system calls run between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            let mut empty: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut empty);
            libc::pthread_sigmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
            if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == -1 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let started = Instant::now();
    let child = cmd
        .spawn()
        .map_err(|e| format!("running {SHELL} -c {line:?}: {e}"))?;
    let pid = child.id();
    let exited: ExitSeen = Arc::new((Mutex::new(None), Condvar::new()));
    let seen = exited.clone();
    let monitor = std::thread::Builder::new()
        .name("ll-cmd-wait".into())
        .spawn(move || {
            loop {
                // SAFETY: info is a valid out buffer; WNOWAIT leaves the child to be reaped.
                let ret = unsafe {
                    let mut info: libc::siginfo_t = std::mem::zeroed();
                    libc::waitid(
                        libc::P_PID,
                        pid as libc::id_t,
                        &mut info,
                        libc::WEXITED | libc::WNOWAIT,
                    )
                };
                if ret == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
                    break;
                }
            }
            let (lock, cv) = &*seen;
            if let Ok(mut g) = lock.lock() {
                *g = Some(Instant::now());
            }
            cv.notify_all();
        });
    let mut load = CmdLoad {
        child: Some(child),
        pid,
        started,
        exited,
        monitor: None,
        term_sent: AtomicBool::new(false),
        _lifeline: lifeline,
        _on_exit: latlab_sys::exit_hooks::register(move || kill_group(pid, libc::SIGKILL)),
    };
    match monitor {
        Ok(m) => load.monitor = Some(m),
        Err(e) => {
            // Dropping the load kills and reaps the child; the exit is then seen by no one, so
            // do it here without waiting for a monitor.
            kill_group(pid, libc::SIGKILL);
            if let Some(mut c) = load.child.take() {
                let _ = c.wait();
            }
            return Err(format!("starting the thread that watches the command: {e}"));
        }
    }
    Ok(Box::new(load))
}
