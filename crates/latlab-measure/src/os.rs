//! Thin, checked wrappers over the system calls the measuring threads use.

use latlab_model::Clock;
use std::io;

pub fn clock_id(c: Clock) -> libc::clockid_t {
    match c {
        Clock::Monotonic => libc::CLOCK_MONOTONIC,
        Clock::Realtime => libc::CLOCK_REALTIME,
    }
}

/// The clock in nanoseconds (vDSO, no system call on common platforms).
#[inline(always)]
pub fn now(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid out pointer; clock ids used here always exist.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

#[inline(always)]
pub fn timespec(ns: u64) -> libc::timespec {
    libc::timespec {
        tv_sec: (ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (ns % 1_000_000_000) as libc::c_long,
    }
}

/// An absolute timer's setting: first expiry at `first`, then every `interval`.
pub fn itimerspec(first: u64, interval: u64) -> libc::itimerspec {
    libc::itimerspec {
        it_interval: timespec(interval),
        it_value: timespec(first),
    }
}

pub(crate) fn check(ret: libc::c_int) -> io::Result<()> {
    if ret == -1 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Timer slack of the calling thread. The kernel reads 0 as "reset to the default", so the
/// smallest slack it accepts, 1 ns, stands for 0.
pub fn set_timer_slack(ns: u64) -> io::Result<()> {
    // SAFETY: PR_SET_TIMERSLACK takes an unsigned long value.
    check(unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, ns.max(1) as libc::c_ulong, 0, 0, 0) })
}

/// Lock all memory mapped now.
pub fn lock_memory() -> io::Result<()> {
    // SAFETY: no pointers involved.
    check(unsafe { libc::mlockall(libc::MCL_CURRENT) })
}

pub use latlab_sys::thread::euid;

/// A signal set holding one signal.
pub fn sigset_of(signals: &[libc::c_int]) -> libc::sigset_t {
    // SAFETY: sigset_t is plain data initialised by sigemptyset.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for &s in signals {
            libc::sigaddset(&mut set, s);
        }
        set
    }
}

/// Block signals in the calling thread (threads it creates inherit the mask).
pub fn block_signals(signals: &[libc::c_int]) {
    let set = sigset_of(signals);
    // SAFETY: set is initialised; old mask not needed.
    unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
}

/// The real-time signal the posix-timer method is delivered by.
pub fn timer_signal() -> libc::c_int {
    libc::SIGRTMIN() + 2
}

/// The real-time signal a waker sends for the signal method.
pub fn wake_signal() -> libc::c_int {
    libc::SIGRTMIN() + 3
}
