//! Ctrl-C and SIGTERM end a run cleanly: the signals are blocked in every thread and taken by
//! one thread with `sigwait`, which asks the run to stop. A second signal puts back what the
//! process changed (the hooks of `latlab_sys::exit_hooks`) and exits without writing results;
//! a third exits at once. The same signal again within [`REPEAT`] is the same request, not a
//! second one: `timeout` and service managers send it to the process and to its group at once.

use latlab_measure::StopSignal;
use latlab_model::StopReason;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

const SIGNALS: [libc::c_int; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

/// How soon the same signal again counts as the same request (a person pressing Ctrl-C twice
/// takes longer).
pub const REPEAT: std::time::Duration = std::time::Duration::from_millis(100);

fn set() -> libc::sigset_t {
    // SAFETY: sigset_t is plain data initialised by sigemptyset.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for s in SIGNALS {
            libc::sigaddset(&mut set, s);
        }
        set
    }
}

fn name(sig: libc::c_int) -> &'static str {
    match sig {
        libc::SIGINT => "SIGINT",
        libc::SIGTERM => "SIGTERM",
        _ => "SIGHUP",
    }
}

/// Block the stop signals in the calling thread and wait for one, at most `limit` (`tune hold`):
/// its name, or `None` when the time ran out.
pub fn wait(limit: Option<std::time::Duration>) -> Option<&'static str> {
    let set = set();
    // SAFETY: set is initialised; the mask is this thread's.
    unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
    let deadline = limit.map(|l| std::time::Instant::now() + l);
    loop {
        let sig = match deadline {
            None => {
                let mut sig = 0;
                // SAFETY: set is initialised; sig is a valid out pointer.
                if unsafe { libc::sigwait(&set, &mut sig) } != 0 {
                    continue;
                }
                sig
            }
            Some(d) => {
                let left = d.saturating_duration_since(std::time::Instant::now());
                if left.is_zero() {
                    return None;
                }
                let ts = libc::timespec {
                    tv_sec: left.as_secs() as libc::time_t,
                    tv_nsec: left.subsec_nanos() as libc::c_long,
                };
                // SAFETY: set and ts are initialised; no siginfo is asked for.
                let r = unsafe { libc::sigtimedwait(&set, std::ptr::null_mut(), &ts) };
                if r < 0 {
                    continue;
                }
                r
            }
        };
        return Some(name(sig));
    }
}

/// Block the stop signals in the calling thread (call before any other thread starts) and start
/// the thread that turns them into a stop request.
pub fn install(stop: Arc<StopSignal>) {
    install_with(move |name| {
        stop.request(StopReason::Signal {
            signal: name.into(),
        })
    });
}

/// Like [`install`], calling `on_signal` with the signal's name (for commands that run several
/// measurements and stop whichever is current).
pub fn install_with(on_signal: impl Fn(&str) + Send + 'static) {
    watch(on_signal, false);
}

/// For a daemon (`monitor`, `serve`): SIGINT and SIGTERM stop it as [`install_with`] says, and
/// a SIGHUP another process sends (service managers and habit send it to make a daemon reload)
/// leaves it running: there is nothing to reload, as the web configuration is read again when
/// its files change. The hangup of its terminal stops it, as every command.
pub fn install_daemon(on_signal: impl Fn(&str) + Send + 'static) {
    watch(on_signal, true);
}

/// `si_code` of a signal the kernel itself sent: a terminal's hangup (`SI_KERNEL`), as against
/// `kill` from a process (`SI_USER`).
const SI_KERNEL: libc::c_int = 0x80;

/// A line on standard error that cannot panic (after a hangup, writes to the terminal fail).
fn say(line: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "{line}");
}

/// Standard output and error where they are a terminal (asked at the start: a terminal that
/// has hung up no longer says it is one).
fn terminal_outputs() -> Vec<libc::c_int> {
    [libc::STDOUT_FILENO, libc::STDERR_FILENO]
        .into_iter()
        // SAFETY: isatty on the process's own descriptors.
        .filter(|&fd| unsafe { libc::isatty(fd) } == 1)
        .collect()
}

/// The terminal hung up: `outputs` that went to it go to /dev/null, so the rest of the run
/// (which stops, storing and writing its files as after Ctrl-C) writes nowhere rather than
/// failing on every line.
fn leave_the_terminal(outputs: &[libc::c_int]) {
    // SAFETY: open, dup2 and close on descriptors this process owns; the path is a
    // NUL-terminated literal.
    unsafe {
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_WRONLY);
        if null < 0 {
            return;
        }
        for &fd in outputs {
            libc::dup2(null, fd);
        }
        libc::close(null);
    }
}

fn watch(on_signal: impl Fn(&str) + Send + 'static, daemon: bool) {
    let set = set();
    // SAFETY: set is initialised.
    unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
    let terminal = terminal_outputs();
    let spawned = std::thread::Builder::new()
        .name("latlab-signals".into())
        .stack_size(64 * 1024)
        .spawn(move || {
            let mut seen = 0;
            let mut last: Option<(libc::c_int, std::time::Instant)> = None;
            loop {
                // SAFETY: siginfo_t is plain data, filled by sigwaitinfo.
                let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
                // SAFETY: set is initialised; info is a valid out pointer.
                let sig = unsafe { libc::sigwaitinfo(&set, &mut info) };
                if sig < 0 {
                    continue;
                }
                // A hangup of the terminal stops every command, daemons too: their terminal
                // is gone. A SIGHUP a process sends leaves a daemon running.
                let hangup = sig == libc::SIGHUP && info.si_code == SI_KERNEL;
                if hangup {
                    leave_the_terminal(&terminal);
                } else if daemon && sig == libc::SIGHUP {
                    say("latlab: SIGHUP: nothing to reload; still running (SIGTERM or SIGINT stops)");
                    continue;
                }
                let now = std::time::Instant::now();
                if last.is_some_and(|(s, at)| s == sig && now.duration_since(at) < REPEAT) {
                    continue;
                }
                last = Some((sig, now));
                seen += 1;
                match seen {
                    1 => on_signal(name(sig)),
                    2 => {
                        say(
                            "latlab: second signal: putting back what was changed, then exiting \
                             without writing results (a third exits at once)",
                        );
                        // On a thread of its own, so that a third signal is still heard.
                        let put_back = || {
                            latlab_sys::exit_hooks::run();
                            std::process::exit(130);
                        };
                        if std::thread::Builder::new()
                            .name("latlab-exit".into())
                            .spawn(put_back)
                            .is_err()
                        {
                            put_back();
                        }
                    }
                    _ => {
                        // The tuning being put back may be left part-way: named with the
                        // command that finishes it.
                        let sys = latlab_sys::Sys::from_env();
                        let restore: Vec<String> = latlab_tune::journal::locked_here()
                            .iter()
                            .map(|dir| format!("`{}`", latlab_tune::restore_command(&sys, dir)))
                            .collect();
                        say(&if restore.is_empty() {
                            "latlab: third signal: exiting now".to_string()
                        } else {
                            format!(
                                "latlab: third signal: exiting now; a tuning may stay applied: {} \
                                 puts it back",
                                restore.join(", ")
                            )
                        });
                        std::process::exit(130);
                    }
                }
            }
        });
    if let Err(e) = spawned {
        eprintln!("latlab: warning: cannot watch for Ctrl-C: {e}");
    }
}

/// Signals for a command that runs several measurements in turn (`run`, `tune search`): the
/// first one marks the command interrupted and stops the measurement under way.
#[derive(Clone, Default)]
pub struct Interrupts {
    current: Arc<Mutex<Option<Arc<StopSignal>>>>,
    interrupted: Arc<AtomicBool>,
}

impl Interrupts {
    /// Install the handler (see [`install_with`]).
    pub fn install() -> Interrupts {
        let i = Interrupts::default();
        let handler = i.clone();
        install_with(move |name| {
            handler.interrupted.store(true, Ordering::SeqCst);
            if let Ok(c) = handler.current.lock()
                && let Some(stop) = c.as_ref()
            {
                stop.request(StopReason::Signal {
                    signal: name.into(),
                });
            }
        });
        i
    }

    pub fn interrupted(&self) -> bool {
        self.interrupted.load(Ordering::SeqCst)
    }

    /// Run one measurement with a stop signal a signal can trigger.
    pub fn measuring<T>(&self, f: impl FnOnce(Arc<StopSignal>) -> T) -> T {
        let stop = StopSignal::new();
        if let Ok(mut slot) = self.current.lock() {
            *slot = Some(stop.clone());
        }
        let out = f(stop);
        if let Ok(mut slot) = self.current.lock() {
            *slot = None;
        }
        out
    }
}
