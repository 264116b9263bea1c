//! Thin wrappers over the system calls only the loads use (threads' affinity and scheduling
//! live in `latlab_sys::thread`).

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
