//! Thin, checked wrappers over the system calls the measuring threads use.

use latlab_model::{Clock, DeadlineParams, Policy};
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

fn check(ret: libc::c_int) -> io::Result<()> {
    if ret == -1 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

#[repr(C)]
struct SchedAttr {
    size: u32,
    sched_policy: u32,
    sched_flags: u64,
    sched_nice: i32,
    sched_priority: u32,
    sched_runtime: u64,
    sched_deadline: u64,
    sched_period: u64,
}

/// Set the calling thread's scheduling policy.
pub fn set_policy(policy: Policy, priority: u32, dl: Option<DeadlineParams>) -> io::Result<()> {
    let (pol, prio) = match policy {
        Policy::Fifo => (libc::SCHED_FIFO, priority),
        Policy::Rr => (libc::SCHED_RR, priority),
        Policy::Other => (libc::SCHED_OTHER, 0),
        Policy::Batch => (libc::SCHED_BATCH, 0),
        Policy::Idle => (libc::SCHED_IDLE, 0),
        Policy::Deadline => (libc::SCHED_DEADLINE, 0),
    };
    let dl = dl.unwrap_or(DeadlineParams {
        runtime_ns: 0,
        deadline_ns: 0,
        period_ns: 0,
    });
    let attr = SchedAttr {
        size: std::mem::size_of::<SchedAttr>() as u32,
        sched_policy: pol as u32,
        sched_flags: 0,
        sched_nice: 0,
        sched_priority: prio,
        sched_runtime: dl.runtime_ns,
        sched_deadline: dl.deadline_ns,
        sched_period: dl.period_ns,
    };
    // SAFETY: attr is a valid sched_attr of the size it declares; pid 0 is the calling thread.
    let ret = unsafe { libc::syscall(libc::SYS_sched_setattr, 0, &attr as *const SchedAttr, 0) };
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

/// Effective user id.
pub fn euid() -> u32 {
    // SAFETY: no preconditions.
    unsafe { libc::geteuid() }
}

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

/// Describe a scheduling failure the way a user can act on it.
pub fn explain_policy_error(policy: Policy, priority: u32, err: &io::Error) -> String {
    let mut rlim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: rlim is a valid out pointer.
    unsafe { libc::getrlimit(libc::RLIMIT_RTPRIO, &mut rlim) };
    match (policy, err.raw_os_error()) {
        (Policy::Fifo | Policy::Rr, Some(libc::EPERM)) => format!(
            "cannot use SCHED_{} priority {priority}: missing capability CAP_SYS_NICE \
             (RLIMIT_RTPRIO is {}); run as root, grant CAP_SYS_NICE, or use --policy other",
            policy.name().to_uppercase(),
            rlim.rlim_cur
        ),
        (Policy::Deadline, Some(libc::EPERM)) => "cannot use SCHED_DEADLINE: missing capability \
             CAP_SYS_NICE, or the threads' CPU affinity is narrower than their root domain; \
             run as root with unpinned threads (-t), or use --policy other"
            .to_string(),
        (Policy::Deadline, Some(libc::EBUSY)) => "cannot use SCHED_DEADLINE: the kernel's \
             deadline bandwidth is exhausted (admission control refused); lower --dl-runtime"
            .to_string(),
        _ => format!(
            "cannot set scheduling policy {} priority {priority}: {err}",
            policy.name()
        ),
    }
}
