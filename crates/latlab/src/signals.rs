//! Ctrl-C and SIGTERM end a run cleanly: the signals are blocked in every thread and taken by
//! one thread with `sigwait`, which asks the run to stop. A second signal exits at once.

use latlab_measure::StopSignal;
use latlab_model::StopReason;
use std::sync::Arc;

const SIGNALS: [libc::c_int; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

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
    let set = set();
    // SAFETY: set is initialised.
    unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
    let spawned = std::thread::Builder::new()
        .name("latlab-signals".into())
        .stack_size(64 * 1024)
        .spawn(move || {
            let mut first = true;
            loop {
                let mut sig: libc::c_int = 0;
                // SAFETY: set is initialised; sig is a valid out pointer.
                if unsafe { libc::sigwait(&set, &mut sig) } != 0 {
                    continue;
                }
                if !first {
                    eprintln!("latlab: second signal, exiting without writing results");
                    std::process::exit(130);
                }
                first = false;
                let name = match sig {
                    libc::SIGINT => "SIGINT",
                    libc::SIGTERM => "SIGTERM",
                    _ => "SIGHUP",
                };
                on_signal(name);
            }
        });
    if let Err(e) = spawned {
        eprintln!("latlab: warning: cannot watch for Ctrl-C: {e}");
    }
}
