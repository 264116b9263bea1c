//! The calling thread as the kernel sees it: its id, the CPU time it (or the process) has used,
//! the CPUs it may run on and its scheduling policy. One implementation for every crate: CPU ids are `u32` as in
//! `CpuList`, and a CPU beyond what `cpu_set_t` holds is an error, never a panic or a silent skip.
//! These act on the live system only (no `Sys` root: a thread is not a file).

use latlab_model::{DeadlineParams, Policy};
use std::io;

/// This process's effective user id.
pub fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() }
}

/// The calling thread's id (what `/proc/self/task/TID` and `sigev_notify_thread_id` name).
pub fn gettid() -> i32 {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::gettid() }
}

pub(crate) fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we pass.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// CPU time the calling thread has used, ns.
pub fn cpu_time_ns() -> u64 {
    clock_ns(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// CPU time every thread of the process has used, ns.
pub fn process_cpu_time_ns() -> u64 {
    clock_ns(libc::CLOCK_PROCESS_CPUTIME_ID)
}

/// A `cpu_set_t` holding `cpus`; a CPU beyond `CPU_SETSIZE` is refused by number.
pub fn cpu_set(cpus: &[u32]) -> io::Result<libc::cpu_set_t> {
    // SAFETY: cpu_set_t is plain data; all zeroes is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &c in cpus {
        if c as usize >= libc::CPU_SETSIZE as usize {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "CPU {c} is beyond the {} a CPU set holds",
                    libc::CPU_SETSIZE
                ),
            ));
        }
        // SAFETY: c is below CPU_SETSIZE, checked above.
        unsafe { libc::CPU_SET(c as usize, &mut set) };
    }
    Ok(set)
}

/// Confine the calling thread to `cpus`.
pub fn set_affinity(cpus: &[u32]) -> io::Result<()> {
    set_task_affinity(0, cpus)
}

/// Put a helper thread (a sampler, the store's keeper, the web server) on the housekeeping
/// `cpus`, away from the measured ones. An empty list leaves it where it is; a refused affinity
/// costs only its placement, so the thread still does its work unpinned.
pub fn keep_on(cpus: &[u32]) {
    if !cpus.is_empty() {
        let _ = set_affinity(cpus);
    }
}

/// The CPUs this process could run on before latlab first confined one of its threads.
static BEFORE_CONFINED: std::sync::OnceLock<Vec<u32>> = std::sync::OnceLock::new();

/// Confine the task `tid` (0: the calling thread) to `cpus`.
pub fn set_task_affinity(tid: i32, cpus: &[u32]) -> io::Result<()> {
    let set = cpu_set(cpus)?;
    if BEFORE_CONFINED.get().is_none()
        && let Ok(now) = affinity()
    {
        let _ = BEFORE_CONFINED.set(now);
    }
    // SAFETY: a valid cpu_set_t of the size passed.
    let r = unsafe { libc::sched_setaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The thread of this process named `name` (its `comm`, as `std::thread::Builder::name` set it,
/// cut to 15 bytes by the kernel).
pub fn tid_named(name: &str) -> Option<i32> {
    let want = &name.as_bytes()[..name.len().min(15)];
    std::fs::read_dir("/proc/self/task").ok()?.find_map(|e| {
        let e = e.ok()?;
        let comm = std::fs::read(e.path().join("comm")).ok()?;
        (comm.strip_suffix(b"\n").unwrap_or(&comm) == want)
            .then(|| e.file_name().to_str()?.parse().ok())?
    })
}

/// The CPUs this process may put a thread on: the calling thread's, as they were before latlab
/// confined any thread (to a measured CPU, or the coordinator to the housekeeping ones). Its own
/// placement of threads does not limit where others (the loads) may go; `taskset` or a cpuset
/// given to the process does.
pub fn process_affinity() -> io::Result<Vec<u32>> {
    match BEFORE_CONFINED.get() {
        Some(cpus) => Ok(cpus.clone()),
        None => affinity(),
    }
}

/// The CPUs the calling thread may run on.
pub fn affinity() -> io::Result<Vec<u32>> {
    // SAFETY: cpu_set_t is plain data; sched_getaffinity fills the one we pass.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: a valid cpu_set_t of the size passed.
    let r = unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((0..libc::CPU_SETSIZE as usize)
        // SAFETY: c is below CPU_SETSIZE.
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .map(|c| c as u32)
        .collect())
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
    set_task_policy(0, policy, priority, dl)
}

/// Set task `tid`'s scheduling policy (0: the calling thread).
pub fn set_task_policy(
    tid: i32,
    policy: Policy,
    priority: u32,
    dl: Option<DeadlineParams>,
) -> io::Result<()> {
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
    // SAFETY: attr is a valid sched_attr of the size it declares.
    let ret = unsafe { libc::syscall(libc::SYS_sched_setattr, tid, &attr as *const SchedAttr, 0) };
    if ret == -1 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Give a thread of this process a real-time policy (`Fifo` or `Rr`) from outside, as it is
/// started: spawned by a thread that runs above busy real-time threads, it would otherwise begin
/// at normal priority and wait for them before it could take its policy itself. Other policies
/// are left to the thread (`Ok` without a change).
pub fn set_thread_policy<T>(
    thread: &std::thread::JoinHandle<T>,
    policy: Policy,
    priority: u32,
) -> io::Result<()> {
    use std::os::unix::thread::JoinHandleExt;
    let policy = match policy {
        Policy::Fifo => libc::SCHED_FIFO,
        Policy::Rr => libc::SCHED_RR,
        _ => return Ok(()),
    };
    let param = libc::sched_param {
        sched_priority: i32::try_from(priority).unwrap_or(i32::MAX),
    };
    // SAFETY: the handle keeps the thread joinable, so its pthread_t is valid; param is valid.
    match unsafe { libc::pthread_setschedparam(thread.as_pthread_t(), policy, &param) } {
        0 => Ok(()),
        e => Err(io::Error::from_raw_os_error(e)),
    }
}

/// Set the calling thread's scheduling policy with `sched_setscheduler`, keeping its nice value
/// (`SCHED_FIFO`/`SCHED_RR` with a priority, or `SCHED_OTHER` with 0): for load threads.
pub fn set_scheduler(policy: libc::c_int, priority: i32) -> io::Result<()> {
    let param = libc::sched_param {
        sched_priority: priority,
    };
    // SAFETY: param is valid; pid 0 is the calling thread.
    if unsafe { libc::sched_setscheduler(0, policy, &param) } == -1 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// The calling thread raised to `SCHED_FIFO` for a while, given its policy back when dropped: for
/// a thread that must keep running on time above real-time threads of its own process (the one
/// that ends a measurement beside an `rt-hog` load). The raise carries `SCHED_RESET_ON_FORK`, so
/// the threads and processes it starts meanwhile begin at `SCHED_OTHER`, as they would have.
#[derive(Debug)]
pub struct RaisedPolicy {
    policy: libc::c_int,
    priority: i32,
    /// The policy is the calling thread's: the guard stays on it.
    _thread: std::marker::PhantomData<*const ()>,
}

impl RaisedPolicy {
    /// Raise the calling thread to `SCHED_FIFO` at `priority` (1 to 99).
    pub fn fifo(priority: i32) -> io::Result<RaisedPolicy> {
        let mut param = libc::sched_param { sched_priority: 0 };
        // SAFETY: pid 0 is the calling thread; param is a valid out pointer.
        let policy = unsafe { libc::sched_getscheduler(0) };
        if policy == -1 || unsafe { libc::sched_getparam(0, &mut param) } == -1 {
            return Err(io::Error::last_os_error());
        }
        set_scheduler(libc::SCHED_FIFO | libc::SCHED_RESET_ON_FORK, priority)?;
        Ok(RaisedPolicy {
            policy,
            priority: param.sched_priority,
            _thread: std::marker::PhantomData,
        })
    }
}

impl Drop for RaisedPolicy {
    fn drop(&mut self) {
        // Clearing the reset-on-fork flag takes CAP_SYS_NICE: without it the thread keeps the
        // flag, and still gets its policy back.
        if set_scheduler(self.policy, self.priority).is_err() {
            let _ = set_scheduler(self.policy | libc::SCHED_RESET_ON_FORK, self.priority);
        }
    }
}

/// Whether this process holds CAP_SYS_NICE (bit 23 of `CapEff` in `/proc/self/status`).
fn has_cap_sys_nice() -> bool {
    crate::procfs::has_cap(crate::procfs::own_cap_eff(), crate::procfs::cap::SYS_NICE)
}

/// This process's cpu cgroup and its real-time budget, where the kernel schedules real-time
/// tasks per group (`cpu.rt_runtime_us` of cgroup v1, CONFIG_RT_GROUP_SCHED): in a container's
/// own cgroup it is 0 unless the runtime gave it one, and SCHED_FIFO fails with EPERM even for
/// root.
fn rt_group_budget(
    proc_cgroup: &str,
    read: impl Fn(&str) -> Option<String>,
) -> Option<(String, i64)> {
    let path = proc_cgroup.lines().find_map(|l| {
        let mut parts = l.splitn(3, ':');
        let _id = parts.next()?;
        let controllers = parts.next()?;
        let path = parts.next()?;
        controllers
            .split(',')
            .any(|c| c == "cpu")
            .then(|| path.to_string())
    })?;
    let sub = if path == "/" { "" } else { path.as_str() };
    // A container that shares the host's cgroup names sees its own group mounted as the root
    // of the hierarchy: where its path is not under the mount, the mount's root is the group.
    ["/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpu,cpuacct"]
        .iter()
        .find_map(|m| {
            read(&format!("{m}{sub}/cpu.rt_runtime_us"))
                .or_else(|| read(&format!("{m}/cpu.rt_runtime_us")))
        })
        .and_then(|v| v.trim().parse().ok())
        .map(|runtime| (path, runtime))
}

/// Describe a scheduling failure of a measuring thread the way a user can act on it.
pub fn explain_policy_error(policy: Policy, priority: u32, err: &io::Error) -> String {
    explain_policy_refusal(policy, priority, err, "use --policy other")
}

/// Describe a scheduling failure the way a user can act on it: a cgroup without a real-time
/// budget, a missing capability (with RLIMIT_RTPRIO), the deadline admission; `instead` is the
/// way round it that the caller offers last (`use --policy other`).
pub fn explain_policy_refusal(
    policy: Policy,
    priority: u32,
    err: &io::Error,
    instead: &str,
) -> String {
    if matches!(policy, Policy::Fifo | Policy::Rr)
        && err.raw_os_error() == Some(libc::EPERM)
        && has_cap_sys_nice()
        && let Some((cgroup, 0)) = std::fs::read_to_string("/proc/self/cgroup")
            .ok()
            .and_then(|c| rt_group_budget(&c, |p| std::fs::read_to_string(p).ok()))
    {
        return format!(
            "cannot use SCHED_{} priority {priority}: the cpu cgroup {cgroup} has no real-time \
             budget (cpu.rt_runtime_us is 0: this kernel schedules real-time tasks per group); \
             give the cgroup one (e.g. podman or docker run --cpu-rt-runtime 100000), run \
             outside it, or {instead}",
            policy.name().to_uppercase()
        );
    }
    let mut rlim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: rlim is a valid out pointer.
    unsafe { libc::getrlimit(libc::RLIMIT_RTPRIO, &mut rlim) };
    match (policy, err.raw_os_error()) {
        (Policy::Fifo | Policy::Rr, Some(libc::EPERM)) => format!(
            "cannot use SCHED_{} priority {priority}: missing capability CAP_SYS_NICE \
             (RLIMIT_RTPRIO is {}); run as root, grant CAP_SYS_NICE, or {instead}",
            policy.name().to_uppercase(),
            rlim.rlim_cur
        ),
        (Policy::Deadline, Some(libc::EPERM)) => format!(
            "cannot use SCHED_DEADLINE: missing capability CAP_SYS_NICE, or the threads' CPU \
             affinity is narrower than their root domain; run as root with unpinned threads \
             (-t), or {instead}"
        ),
        (Policy::Deadline, Some(libc::EBUSY)) => "cannot use SCHED_DEADLINE: the kernel's \
             deadline bandwidth is exhausted (admission control refused); lower --dl-runtime"
            .to_string(),
        _ => format!(
            "cannot set scheduling policy {} priority {priority}: {err}",
            policy.name()
        ),
    }
}

#[cfg(test)]
mod rt_budget_tests {
    #![allow(clippy::unwrap_used)]
    use super::rt_group_budget;

    #[test]
    fn the_budget_of_the_cpu_cgroup_is_read_where_the_kernel_has_one() {
        let files = |p: &str| match p {
            "/sys/fs/cgroup/cpu/libpod_parent/x/cpu.rt_runtime_us" => Some("0\n".to_string()),
            "/sys/fs/cgroup/cpu/cpu.rt_runtime_us" => Some("950000\n".to_string()),
            _ => None,
        };
        let v1 = "12:memory:/libpod_parent/x\n4:cpu,cpuacct:/libpod_parent/x\n";
        assert_eq!(
            rt_group_budget(v1, files),
            Some(("/libpod_parent/x".into(), 0))
        );
        // In its own cgroup namespace a container sees itself as the root.
        assert_eq!(
            rt_group_budget("4:cpu,cpuacct:/\n", files),
            Some(("/".into(), 950000))
        );
        // cgroup v2 (no per-group real-time budget) and kernels without it: nothing to say.
        assert_eq!(rt_group_budget("0::/user.slice\n", files), None);
        // A container's own group mounted as the hierarchy's root.
        let own =
            |p: &str| (p == "/sys/fs/cgroup/cpu/cpu.rt_runtime_us").then(|| "0\n".to_string());
        assert_eq!(
            rt_group_budget("1:cpu:/libpod_parent/c\n", own),
            Some(("/libpod_parent/c".into(), 0))
        );
        assert_eq!(rt_group_budget("1:cpu:/x\n", |_| None), None);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn affinity_round_trips_and_a_cpu_beyond_the_set_is_refused() {
        let before = affinity().unwrap();
        assert!(!before.is_empty());
        // In a thread of its own: the test harness's thread keeps its CPUs.
        std::thread::spawn(move || {
            set_affinity(&before[..1]).unwrap();
            assert_eq!(affinity().unwrap(), before[..1]);
            // Where the process may put threads stays what it was.
            assert_eq!(process_affinity().unwrap(), before);
            let e = set_affinity(&[5000]).unwrap_err();
            assert!(e.to_string().contains("CPU 5000"), "{e}");
            assert_eq!(
                affinity().unwrap(),
                before[..1],
                "unchanged after a refusal"
            );
        })
        .join()
        .unwrap();
    }

    #[test]
    fn a_helper_thread_is_kept_on_housekeeping_cpus_and_runs_unpinned_when_refused() {
        let all = affinity().unwrap();
        let last = *all.last().unwrap();
        std::thread::spawn(move || {
            keep_on(&[]);
            assert_eq!(
                affinity().unwrap(),
                all,
                "no housekeeping CPUs: left where it was"
            );
            keep_on(&[5000]);
            assert_eq!(affinity().unwrap(), all, "a refused set: left where it was");
            keep_on(&[last]);
            assert_eq!(affinity().unwrap(), [last]);
        })
        .join()
        .unwrap();
    }

    /// Raised, the thread runs SCHED_FIFO and the threads it starts do not; dropped, it has its
    /// policy back.
    #[test]
    fn a_raised_thread_gets_its_policy_back_and_starts_threads_at_normal_priority() {
        std::thread::spawn(|| {
            // SAFETY: plain system calls on the calling thread.
            let policy = || unsafe { libc::sched_getscheduler(0) };
            assert_eq!(policy(), libc::SCHED_OTHER);
            let raised = match RaisedPolicy::fifo(3) {
                Ok(r) => r,
                Err(e) => {
                    eprintln!("skipped: SCHED_FIFO refused here ({e}); needs CAP_SYS_NICE");
                    return;
                }
            };
            assert_eq!(policy(), libc::SCHED_FIFO | libc::SCHED_RESET_ON_FORK);
            let child = std::thread::spawn(policy).join().unwrap();
            assert_eq!(child, libc::SCHED_OTHER, "a thread it started");
            drop(raised);
            assert_eq!(policy(), libc::SCHED_OTHER);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn thread_time_grows_with_work_and_is_within_the_process_time() {
        let t0 = cpu_time_ns();
        let mut x = 0u64;
        for i in 0..2_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        let t1 = cpu_time_ns();
        assert!(t1 > t0);
        assert!(process_cpu_time_ns() >= t1);
        assert!(gettid() > 0);
    }

    #[test]
    fn a_thread_is_found_by_its_name() {
        let (tx, rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let t = std::thread::Builder::new()
            .name("latlab-test-named-thread".into())
            .spawn(move || {
                tx.send(gettid()).unwrap();
                let _ = done_rx.recv();
            })
            .unwrap();
        let tid = rx.recv().unwrap();
        // Longer than the kernel keeps: matched on its first 15 bytes.
        assert_eq!(tid_named("latlab-test-named-thread"), Some(tid));
        assert_eq!(tid_named("latlab-no-such-thread"), None);
        // Its policy set from this thread.
        set_task_policy(tid, Policy::Other, 0, None).unwrap();
        done_tx.send(()).unwrap();
        t.join().unwrap();
    }
}
