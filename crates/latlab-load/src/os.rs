//! Thin, checked wrappers over the system calls the loads use.

use std::io;

fn check(ret: libc::c_int) -> io::Result<()> {
    if ret == -1 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// A CPU set for `sched_setaffinity`.
pub fn cpu_set(cpus: &[u32]) -> libc::cpu_set_t {
    // SAFETY: cpu_set_t is plain data; CPU_SET ignores CPUs beyond the set's size.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for &c in cpus {
            libc::CPU_SET(c as usize, &mut set);
        }
        set
    }
}

/// Pin the calling thread to the given CPUs.
pub fn pin(cpus: &[u32]) -> io::Result<()> {
    let set = cpu_set(cpus);
    // SAFETY: set is initialised; pid 0 is the calling thread.
    check(unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) })
}

/// The CPUs the calling thread may run on.
pub fn allowed_cpus() -> io::Result<Vec<u32>> {
    // SAFETY: set is a valid out buffer of the size given.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        check(libc::sched_getaffinity(
            0,
            std::mem::size_of::<libc::cpu_set_t>(),
            &mut set,
        ))?;
        Ok((0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &set))
            .map(|c| c as u32)
            .collect())
    }
}

/// Set the calling thread's scheduling policy (`SCHED_FIFO`, `SCHED_RR` with a priority, or
/// `SCHED_OTHER` with 0).
pub fn set_scheduler(policy: libc::c_int, priority: i32) -> io::Result<()> {
    let param = libc::sched_param {
        sched_priority: priority,
    };
    // SAFETY: param is valid; pid 0 is the calling thread.
    check(unsafe { libc::sched_setscheduler(0, policy, &param) })
}

/// The memory page size.
pub fn page_size() -> usize {
    // SAFETY: no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(n).ok().filter(|&n| n > 0).unwrap_or(4096)
}

/// Wait until `fd` is readable (`POLLIN`) or writable (`POLLOUT`), at most `timeout_ms`.
pub fn poll_one(fd: libc::c_int, events: libc::c_short, timeout_ms: libc::c_int) {
    let mut p = libc::pollfd {
        fd,
        events,
        revents: 0,
    };
    // SAFETY: p is one valid pollfd.
    unsafe { libc::poll(&mut p, 1, timeout_ms) };
}
