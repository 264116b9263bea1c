//! Every sysfs, procfs and devfs access of latlab goes through [`Sys`], which holds a root path
//! (default `/`; `LATLAB_SYSROOT` points it elsewhere) so tests can run against fixture trees.
//!
//! Reading is separated from deciding: functions here return raw facts or typed values; a field
//! that cannot be read is reported with the reason, never invented.

use latlab_model::system::KernelConfig;
use latlab_model::units::{CpuList, ParseError};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

pub mod exit_hooks;
pub mod fixture;
pub mod held;
mod inventory;
mod msr;
pub mod pi_mutex;
pub mod pidlock;
pub mod procfs;
pub mod sample;
pub mod thread;
pub use inventory::{
    cmdline_value, dynamic_preempt_from_log, kernel_words, parse_boot_options, parse_kernel_config,
    selected, steal_percent,
};
pub use msr::{MSR_SMI_COUNT, SMI_SOURCE};

/// The CPUs' directory in sysfs (online lists, topology, cpufreq, cpuidle).
pub const CPU_SYSFS: &str = "/sys/devices/system/cpu";

/// Where tracefs is mounted: its own mount point first, then under debugfs.
pub const TRACEFS_PATHS: [&str; 2] = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"];

/// Errors of system access, each naming the path and the cause.
#[derive(Debug, thiserror::Error)]
pub enum SysError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: {source}")]
    Parse {
        path: PathBuf,
        #[source]
        source: ParseError,
    },
}

impl SysError {
    /// The errno behind an I/O failure, if any.
    pub fn raw_os_error(&self) -> Option<i32> {
        match self {
            SysError::Io { source, .. } => source.raw_os_error(),
            SysError::Parse { .. } => None,
        }
    }
}

/// A thread of another process at a real-time policy on CPUs of interest
/// ([`Sys::realtime_threads`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RealtimeThread {
    pub pid: u32,
    /// Its process's name.
    pub comm: String,
    /// `fifo`, `rr` or `deadline`.
    pub policy: &'static str,
    /// Its real-time priority (0 for deadline).
    pub priority: u32,
    /// The CPUs of interest it may run on.
    pub cpus: CpuList,
}

/// Real-time threads gathered by process ([`RealtimeProcess::of`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RealtimeProcess {
    pub pid: u32,
    pub comm: String,
    pub threads: usize,
    /// The policy and priority of its thread that outranks the others (deadline first).
    pub policy: &'static str,
    pub priority: u32,
    /// The CPUs of interest its threads may run on.
    pub cpus: CpuList,
}

impl RealtimeProcess {
    /// `threads` by process, those that outrank the most first: deadline, then by priority.
    pub fn of(threads: &[RealtimeThread]) -> Vec<RealtimeProcess> {
        let rank = |policy: &str, priority: u32| (policy == "deadline", priority);
        let mut out: Vec<RealtimeProcess> = Vec::new();
        for t in threads {
            match out.iter_mut().find(|p| p.pid == t.pid) {
                Some(p) => {
                    if rank(t.policy, t.priority) > rank(p.policy, p.priority) {
                        (p.policy, p.priority) = (t.policy, t.priority);
                    }
                    p.threads += 1;
                    let mut all = p.cpus.cpus().to_vec();
                    all.extend_from_slice(t.cpus.cpus());
                    p.cpus = CpuList::from_cpus(all);
                }
                None => out.push(RealtimeProcess {
                    pid: t.pid,
                    comm: t.comm.clone(),
                    threads: 1,
                    policy: t.policy,
                    priority: t.priority,
                    cpus: t.cpus.clone(),
                }),
            }
        }
        out.sort_by_key(|p| (std::cmp::Reverse(rank(p.policy, p.priority)), p.pid));
        out
    }
}

impl std::fmt::Display for RealtimeProcess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let policy = match self.policy {
            "deadline" => "deadline".to_string(),
            p => format!("{p} {}", self.priority),
        };
        write!(
            f,
            "PID {} {} ({} {}, {policy}, on {})",
            self.pid,
            self.comm,
            self.threads,
            if self.threads == 1 {
                "thread"
            } else {
                "threads"
            },
            self.cpus.phrase()
        )
    }
}

/// The system as seen through one root directory.
#[derive(Debug, Clone)]
pub struct Sys {
    root: PathBuf,
}

impl Default for Sys {
    fn default() -> Self {
        Sys::new("/")
    }
}

impl Sys {
    pub fn new(root: impl Into<PathBuf>) -> Sys {
        Sys { root: root.into() }
    }

    /// `/`, or the directory named by `LATLAB_SYSROOT`.
    pub fn from_env() -> Sys {
        match std::env::var_os("LATLAB_SYSROOT") {
            Some(r) if !r.is_empty() => Sys::new(r),
            _ => Sys::default(),
        }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// True when this is the live system rather than a fixture tree.
    pub fn is_live(&self) -> bool {
        self.root == Path::new("/")
    }

    /// The real path of a system path such as `/proc/cmdline`.
    pub fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel.trim_start_matches('/'))
    }

    pub fn read(&self, rel: &str) -> Result<String, SysError> {
        let path = self.path(rel);
        std::fs::read_to_string(&path).map_err(|source| SysError::Io { path, source })
    }

    /// Read a file and trim surrounding white space.
    pub fn read_trim(&self, rel: &str) -> Result<String, SysError> {
        self.read(rel).map(|s| s.trim().to_string())
    }

    pub fn exists(&self, rel: &str) -> bool {
        self.path(rel).exists()
    }

    fn read_cpu_list(&self, rel: &str) -> Result<CpuList, SysError> {
        let text = self.read_trim(rel)?;
        if text.is_empty() {
            return Ok(CpuList::default());
        }
        CpuList::parse(&text).map_err(|source| SysError::Parse {
            path: self.path(rel),
            source,
        })
    }

    /// Threads of processes other than this one at a real-time policy that may run on a CPU of
    /// `on` (kernel threads left out): what competes with a measurement there. A thread's
    /// `status` is read only once its `stat` shows a real-time policy; entries that cannot be
    /// read (a process that ended meanwhile) are passed over.
    pub fn realtime_threads(&self, on: &CpuList) -> Vec<RealtimeThread> {
        let own = std::process::id();
        let Ok(dir) = std::fs::read_dir(self.path("/proc")) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for pid in dir
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        {
            if pid == own {
                continue;
            }
            let Ok(tasks) = std::fs::read_dir(self.path(&format!("/proc/{pid}/task"))) else {
                continue;
            };
            for task in tasks.flatten() {
                let base = format!("/proc/{pid}/task/{}", task.file_name().to_string_lossy());
                let Some((policy, priority)) = self
                    .read(&format!("{base}/stat"))
                    .ok()
                    .and_then(|s| procfs::realtime_policy(&s))
                else {
                    continue;
                };
                let Some(cpus) = self
                    .read(&format!("{base}/status"))
                    .ok()
                    .and_then(|s| procfs::allowed_cpus(&s))
                else {
                    continue;
                };
                let shared: Vec<u32> = cpus
                    .cpus()
                    .iter()
                    .copied()
                    .filter(|c| on.contains(*c))
                    .collect();
                if shared.is_empty() {
                    continue;
                }
                out.push(RealtimeThread {
                    pid,
                    comm: self
                        .read_trim(&format!("/proc/{pid}/comm"))
                        .unwrap_or_else(|_| "?".into()),
                    policy,
                    priority,
                    cpus: CpuList::from_cpus(shared),
                });
            }
        }
        out
    }

    /// CPUs online now.
    pub fn online_cpus(&self) -> Result<CpuList, SysError> {
        self.read_cpu_list("/sys/devices/system/cpu/online")
    }

    /// The online CPUs this process may put its threads on: the online ones within its
    /// affinity, which a cpuset of its container or cgroup (a Kubernetes CPU manager's, docker
    /// `--cpuset-cpus`) or `taskset` narrows. Under a system root other than `/` the tree's
    /// online CPUs, as the machine it stands for has them; also where the affinity is
    /// unreadable or shares none of them.
    pub fn usable_cpus(&self) -> Result<CpuList, SysError> {
        self.online_cpus().map(|online| self.usable_of(online))
    }

    /// [`Sys::usable_cpus`] of the online CPUs already read.
    pub fn usable_of(&self, online: CpuList) -> CpuList {
        let allowed = match thread::process_affinity() {
            Ok(allowed) if self.is_live() => allowed,
            _ => return online,
        };
        let usable: Vec<u32> = online
            .cpus()
            .iter()
            .copied()
            .filter(|c| allowed.contains(c))
            .collect();
        if usable.is_empty() {
            online
        } else {
            CpuList::from_cpus(usable)
        }
    }

    /// The machine's host name (`/proc/sys/kernel/hostname`), where readable.
    pub fn hostname(&self) -> Option<String> {
        self.read_trim(inventory::HOSTNAME).ok()
    }

    /// CPUs that may ever exist.
    pub fn possible_cpus(&self) -> Result<CpuList, SysError> {
        self.read_cpu_list("/sys/devices/system/cpu/possible")
    }

    /// The CPUs the kernel keeps apart from general work: `isolated` (isolcpus=) and `nohz_full`
    /// together (empty where neither is set or readable).
    pub fn isolated_cpus(&self) -> CpuList {
        let mut cpus = Vec::new();
        for file in ["isolated", "nohz_full"] {
            if let Ok(l) = self.read_cpu_list(&format!("/sys/devices/system/cpu/{file}")) {
                cpus.extend_from_slice(l.cpus());
            }
        }
        CpuList::from_cpus(cpus)
    }

    /// CPU time of one thread in nanoseconds (first field of its schedstat).
    pub fn thread_cpu_time_ns(&self, pid: i32, tid: i32) -> Result<u64, SysError> {
        let rel = format!("/proc/{pid}/task/{tid}/schedstat");
        let text = self.read(&rel)?;
        text.split_whitespace()
            .next()
            .and_then(|f| f.parse().ok())
            .ok_or_else(|| SysError::Io {
                path: self.path(&rel),
                source: std::io::Error::new(std::io::ErrorKind::InvalidData, "no run time field"),
            })
    }

    /// The tracefs `trace_marker` file, if tracefs is mounted.
    pub fn trace_marker(&self) -> Option<PathBuf> {
        TRACEFS_PATHS
            .into_iter()
            .map(|p| self.path(&format!("{p}/trace_marker")))
            .find(|p| p.exists())
    }

    /// Write one line to tracefs `trace_marker`; returns where it went.
    pub fn write_trace_marker(&self, message: &str) -> Result<PathBuf, String> {
        let path = self
            .trace_marker()
            .ok_or_else(|| "tracefs is not mounted".to_string())?;
        let mut f = OpenOptions::new()
            .write(true)
            .open(&path)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        f.write_all(message.as_bytes())
            .map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(path)
    }

    /// Hold a PM QoS CPU latency request (`/dev/cpu_dma_latency`) for as long as the returned
    /// value lives. The kernel drops the request when the file closes, also when the process
    /// dies, so nothing needs restoring.
    pub fn hold_pm_qos(&self, us: u32) -> Result<PmQosHold, SysError> {
        let path = self.path("/dev/cpu_dma_latency");
        let io = |source| SysError::Io {
            path: path.clone(),
            source,
        };
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .map_err(io)?;
        let value = i32::try_from(us).unwrap_or(i32::MAX);
        file.write_all(&value.to_ne_bytes()).map_err(io)?;
        HELD_HERE.add(us);
        Ok(PmQosHold { _file: file, us })
    }
}

/// What this process holds now (requests, locks), process-wide: added as each is taken and
/// removed as it is let go, so other parts of the process can say what is held.
pub struct HeldHere<T>(std::sync::Mutex<Vec<T>>);

impl<T: PartialEq + Clone> HeldHere<T> {
    pub const fn new() -> Self {
        HeldHere(std::sync::Mutex::new(Vec::new()))
    }

    fn list(&self) -> std::sync::MutexGuard<'_, Vec<T>> {
        // A poisoned list is still the list.
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn add(&self, item: T) {
        self.list().push(item);
    }

    /// Let go of one `item` (others equal to it stay).
    pub fn remove(&self, item: &T) {
        let mut list = self.list();
        if let Some(i) = list.iter().position(|x| x == item) {
            list.swap_remove(i);
        }
    }

    pub fn now(&self) -> Vec<T> {
        self.list().clone()
    }
}

impl<T: PartialEq + Clone> Default for HeldHere<T> {
    fn default() -> Self {
        Self::new()
    }
}

/// The PM QoS requests this process holds (a run's own, a profile's): what a request read from
/// `/dev/cpu_dma_latency` is not another process's.
static HELD_HERE: HeldHere<u32> = HeldHere::new();

/// The lowest PM QoS request this process holds, if any.
pub fn pm_qos_held_here() -> Option<u32> {
    HELD_HERE.now().into_iter().min()
}

/// What a refused PM QoS request needs, said after its error: root where it was denied, the
/// device where there is none (a container it was not passed into).
pub fn pm_qos_hint(e: &SysError) -> &'static str {
    match e.raw_os_error() {
        Some(libc::EACCES | libc::EPERM) => " (needs root)",
        Some(libc::ENOENT) => {
            " (no such device here; a container needs it passed in, e.g. --device \
             /dev/cpu_dma_latency)"
        }
        _ => "",
    }
}

/// A held PM QoS request; dropping it releases the request.
#[derive(Debug)]
pub struct PmQosHold {
    _file: File,
    pub us: u32,
}

impl Drop for PmQosHold {
    fn drop(&mut self) {
        HELD_HERE.remove(&self.us);
    }
}

/// `path` if it exists, else its nearest ancestor that does (`.` for a relative path none of
/// whose parts exist): where a file at `path`, and the directories above it, would be made.
pub fn nearest_existing(path: &Path) -> &Path {
    path.ancestors()
        .find(|p| !p.as_os_str().is_empty() && p.exists())
        .unwrap_or(Path::new("."))
}

/// Bytes free for unprivileged users in the file system holding `path` (or its nearest
/// existing ancestor), when it says: `None` for one with no blocks (proc, sys) or unreadable.
pub fn available_bytes(path: &Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(nearest_existing(path).as_os_str().as_bytes()).ok()?;
    // SAFETY: c is a valid C string; st is a valid out buffer.
    unsafe {
        let mut st: libc::statvfs = std::mem::zeroed();
        if libc::statvfs(c.as_ptr(), &mut st) != 0 || st.f_blocks == 0 {
            return None;
        }
        Some((st.f_bavail as u64).saturating_mul(st.f_frsize as u64))
    }
}

/// Whether the file system holding `path` (or its nearest existing ancestor) keeps its files in
/// memory (tmpfs, ramfs): they are gone at the next boot.
pub fn in_memory(path: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    const TMPFS_MAGIC: i64 = 0x0102_1994;
    const RAMFS_MAGIC: i64 = 0x8584_58f6;
    let Ok(c) = std::ffi::CString::new(nearest_existing(path).as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: c is a valid C string; st is a valid out buffer.
    unsafe {
        let mut st: libc::statfs = std::mem::zeroed();
        libc::statfs(c.as_ptr(), &mut st) == 0
            && matches!(st.f_type as i64, TMPFS_MAGIC | RAMFS_MAGIC)
    }
}

/// The first bytes of a file this process already has open (known by device and inode), read
/// through a descriptor it holds (`pread`, the descriptor's offset untouched), and how many there
/// were. Opening and closing a descriptor of its own would drop every POSIX lock the process
/// holds on the file: SQLite's on a store, so that another program's reader would take the
/// store for unused and move its journal away under it. `None` where no descriptor of this
/// process is open on the file.
pub fn read_head_of_open(identity: (u64, u64), head: &mut [u8]) -> Option<usize> {
    let fds = std::fs::read_dir("/proc/self/fd").ok()?;
    for entry in fds.flatten() {
        let Ok(fd) = entry.file_name().to_string_lossy().parse::<libc::c_int>() else {
            continue;
        };
        // SAFETY: st is a valid out buffer; fstat on a descriptor that may have closed meanwhile
        // fails and is passed over.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        if unsafe { libc::fstat(fd, &mut st) } != 0 || (st.st_dev, st.st_ino) != identity {
            continue;
        }
        // SAFETY: head is valid for head.len() bytes.
        let n = unsafe { libc::pread(fd, head.as_mut_ptr().cast(), head.len(), 0) };
        return usize::try_from(n).ok();
    }
    None
}

/// Whether this process may write the existing file `path`, asked without opening it
/// (`access(2)`: a read-only file system says so to root too); for a file other descriptors of
/// this process hold locks on, as [`read_head_of_open`] says why.
pub fn may_write_unopened(path: &Path) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    // SAFETY: c is a valid C string.
    if unsafe { libc::access(c.as_ptr(), libc::W_OK) } == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Whether this process can write `path`, tried for real (`access(2)` says yes to root even on
/// a read-only file system or in sysfs): an existing file is opened for writing, neither
/// truncated nor changed; a missing one is created and removed again; in a directory a file of
/// its own is created and removed.
pub fn probe_write(path: &Path) -> std::io::Result<()> {
    use std::fs::OpenOptions;
    let probe = |file: &Path| {
        OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(file)
            .and_then(|_| std::fs::remove_file(file))
    };
    match std::fs::metadata(path) {
        Ok(m) if m.is_dir() => probe(&path.join(format!(
            ".latlab-write-probe-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ))),
        Ok(_) => OpenOptions::new().write(true).open(path).map(drop),
        // A link to a file not there yet is written through: its target is probed.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => probe(&link_target(path)),
        Err(e) => Err(e),
    }
}

/// The file a path names when written: `path` itself, or where its links lead (followed as
/// the kernel does, up to 40 of them), for a link to a file not there yet.
pub fn link_target(path: &Path) -> std::path::PathBuf {
    let mut path = path.to_path_buf();
    for _ in 0..40 {
        let Ok(target) = std::fs::read_link(&path) else {
            break;
        };
        path = path.parent().unwrap_or(Path::new("")).join(target);
    }
    path
}

/// The wall clock now, ns since 1970 (0 for a clock set before it).
pub fn unix_now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// `CLOCK_MONOTONIC` now, ns: the clock of the kernel's trace timestamps (`bpf_ktime_get_ns`).
pub fn monotonic_ns() -> u64 {
    thread::clock_ns(libc::CLOCK_MONOTONIC)
}

/// The CPU model from `/proc/cpuinfo` (x86 `model name`, or ARM `Hardware` / `CPU part`).
pub fn cpu_model(cpuinfo: &str) -> String {
    let field = |name: &str| {
        cpuinfo.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            (k.trim() == name).then(|| v.trim().to_string())
        })
    };
    field("model name")
        .or_else(|| field("Hardware"))
        .or_else(|| field("CPU part").map(|p| format!("CPU part {p}")))
        .unwrap_or_else(|| "unavailable: no model name in /proc/cpuinfo".into())
}

/// The preempt model: `rt` for a kernel built with PREEMPT_RT (its version string or its
/// configuration, as [`latlab_model::SystemInfo::kernel_built_with`] answers), else the debugfs switch (its
/// parenthesised entry) when readable, else a `preempt=` boot option, else the kernel version
/// string. Returned as `model (source)`.
pub fn preempt_model(
    version: &str,
    config: Option<&KernelConfig>,
    debugfs: Option<&str>,
    cmdline: &str,
) -> String {
    if latlab_model::system::kernel_built_with(version, config, "PREEMPT_RT") {
        return if version.contains("PREEMPT_RT") {
            "rt (kernel version)".into()
        } else {
            "rt (kernel configuration)".into()
        };
    }
    if let Some(sel) = debugfs.and_then(|d| {
        let start = d.find('(')?;
        let end = d[start..].find(')')?;
        Some(d[start + 1..start + end].to_string())
    }) {
        return format!("{sel} (sched/preempt)");
    }
    if version.contains("PREEMPT_DYNAMIC") {
        if let Some(opt) = cmdline_value(cmdline, "preempt") {
            return format!("{opt} (preempt= boot option)");
        }
        return "dynamic, current model unreadable (debugfs not mounted)".into();
    }
    if version.contains("PREEMPT_LAZY") {
        return "lazy (kernel version)".into();
    }
    if version.contains(" PREEMPT ") || version.contains(" PREEMPT") {
        return "full (kernel version)".into();
    }
    "none or voluntary (kernel version)".into()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    use latlab_testkit::tree_of as tree;

    /// A file system in memory is told from one on a disk, as /proc/mounts names them (a path
    /// below a mount point counts as its file system's, one not made yet as its parent's).
    #[test]
    fn a_file_system_in_memory_is_told_from_a_disk() {
        let mounts = std::fs::read_to_string("/proc/mounts").unwrap();
        let kind = |fs: &[&str]| {
            mounts.lines().find_map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                (f.len() > 2 && fs.contains(&f[2])).then(|| PathBuf::from(f[1]))
            })
        };
        let Some(tmp) = kind(&["tmpfs"]) else {
            eprintln!("skipped: no tmpfs mounted");
            return;
        };
        assert!(in_memory(&tmp), "{}", tmp.display());
        assert!(in_memory(&tmp.join("not-made-yet/f.json")));
        match kind(&["ext4", "xfs", "btrfs"]) {
            Some(disk) => assert!(!in_memory(&disk), "{}", disk.display()),
            None => eprintln!("note: no disk file system mounted to compare"),
        }
    }

    /// A path that is a link to a file not there yet can be written (through the link); it was
    /// refused as "File exists". Nothing is left behind by the probe.
    #[test]
    fn a_link_to_a_missing_file_is_writable_through_it() {
        let dir = tempfile::tempdir().unwrap();
        let link = dir.path().join("out.xml");
        std::os::unix::fs::symlink("target.xml", &link).unwrap();
        probe_write(&link).unwrap();
        assert!(!dir.path().join("target.xml").exists());
        let gone = dir.path().join("link2.xml");
        std::os::unix::fs::symlink("no-dir/target.xml", &gone).unwrap();
        assert!(probe_write(&gone).is_err());
    }

    /// A PM QoS device that is not there (a container it was not passed into) is said so, not
    /// said to need root.
    #[test]
    fn a_missing_pm_qos_device_is_not_said_to_need_root() {
        let root = tempfile::tempdir().unwrap();
        let e = Sys::new(root.path()).hold_pm_qos(0).unwrap_err();
        let hint = pm_qos_hint(&e);
        assert!(hint.contains("--device /dev/cpu_dma_latency"), "{e}{hint}");
        assert!(!hint.contains("root"), "{e}{hint}");
    }

    /// A `/proc/PID/task/TID/stat` line of `comm` with `flags`, `rt_priority` and `policy`.
    fn stat(comm: &str, flags: u64, priority: u32, policy: u32) -> String {
        let mut f = vec!["0".to_string(); 50];
        f[0] = "S".into();
        f[9 - 3] = flags.to_string();
        f[40 - 3] = priority.to_string();
        f[41 - 3] = policy.to_string();
        format!("1 ({comm}) {}\n", f.join(" "))
    }

    /// Real-time threads of other processes that may run on the CPUs asked, by process: kernel
    /// threads, other policies and threads kept to other CPUs left out.
    #[test]
    fn realtime_threads_of_others_on_the_cpus() {
        let allowed = |l: &str| format!("Name:\tx\nCpus_allowed_list:\t{l}\n");
        let dir = tree(&[
            ("proc/100/comm", "jackd\n"),
            ("proc/100/task/100/stat", &stat("jackd", 0, 0, 0)),
            ("proc/100/task/100/status", &allowed("0-3")),
            ("proc/100/task/101/stat", &stat("jackd", 0, 70, 1)),
            ("proc/100/task/101/status", &allowed("0-3")),
            ("proc/100/task/102/stat", &stat("jackd", 0, 60, 2)),
            ("proc/100/task/102/status", &allowed("1")),
            ("proc/200/comm", "migration/0\n"),
            (
                "proc/200/task/200/stat",
                &stat("migration/0", procfs::PF_KTHREAD, 99, 1),
            ),
            ("proc/200/task/200/status", &allowed("0")),
            ("proc/300/comm", "elsewhere\n"),
            ("proc/300/task/300/stat", &stat("elsewhere", 0, 50, 1)),
            ("proc/300/task/300/status", &allowed("2-3")),
            ("proc/self", ""),
        ]);
        let sys = Sys::new(dir.path());
        let threads = sys.realtime_threads(&CpuList::parse("0-1").unwrap());
        assert_eq!(threads.len(), 2, "{threads:?}");
        let found = RealtimeProcess::of(&threads);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(
            found[0].to_string(),
            "PID 100 jackd (2 threads, fifo 70, on CPUs 0-1)"
        );
        assert!(
            Sys::new(dir.path().join("absent"))
                .realtime_threads(&CpuList::parse("0").unwrap())
                .is_empty()
        );
        // A deadline thread outranks every other: its process comes first, said without a
        // priority.
        let t = |pid, policy, priority| RealtimeThread {
            pid,
            comm: format!("p{pid}"),
            policy,
            priority,
            cpus: CpuList::parse("0").unwrap(),
        };
        let ranked = RealtimeProcess::of(&[t(1, "fifo", 99), t(2, "deadline", 0), t(2, "rr", 5)]);
        let texts: Vec<String> = ranked.iter().map(|p| p.to_string()).collect();
        assert_eq!(
            texts,
            [
                "PID 2 p2 (2 threads, deadline, on CPU 0)",
                "PID 1 p1 (1 thread, fifo 99, on CPU 0)"
            ]
        );
    }

    /// Where a file and the directories above it would be made: the part of the path that is.
    #[test]
    fn the_nearest_existing_part_of_a_path() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        assert_eq!(nearest_existing(d), d);
        assert_eq!(nearest_existing(&d.join("a/b/c.toml")), d);
        std::fs::write(d.join("f"), "").unwrap();
        assert_eq!(nearest_existing(&d.join("f/x")), d.join("f"));
        assert_eq!(
            nearest_existing(Path::new("no-such-dir-here/x")),
            Path::new(".")
        );
    }

    #[test]
    fn reads_through_the_root() {
        let t = tree(&[
            ("/sys/devices/system/cpu/online", "0-1\n"),
            ("/sys/devices/system/cpu/possible", "0-3\n"),
            ("/proc/sys/kernel/hostname", "box\n"),
            ("/proc/sys/kernel/osrelease", "6.18.0\n"),
            ("/proc/sys/kernel/version", "#1 SMP PREEMPT_DYNAMIC @0\n"),
            ("/proc/cmdline", "quiet preempt=full\n"),
            ("/proc/cpuinfo", "processor\t: 0\nmodel name\t: Test CPU\n"),
        ]);
        let sys = Sys::new(t.path());
        assert!(!sys.is_live());
        assert_eq!(sys.online_cpus().unwrap().cpus(), &[0, 1]);
        let info = sys.system_info();
        assert_eq!(info.hostname, "box");
        assert_eq!(info.cpus_online, vec![0, 1]);
        assert_eq!(info.cpus_possible, 4);
        assert_eq!(info.cpu_model, "Test CPU");
        assert_eq!(info.preempt, "full (preempt= boot option)");
        assert!(
            info.clocksource.starts_with("unavailable: "),
            "{}",
            info.clocksource
        );
        assert!(sys.trace_marker().is_none());
        assert!(
            sys.write_trace_marker("x")
                .unwrap_err()
                .contains("not mounted")
        );
    }

    #[test]
    fn preempt_model_sources() {
        assert_eq!(
            preempt_model(
                "#1 SMP PREEMPT_DYNAMIC",
                None,
                Some("none voluntary (full) lazy"),
                ""
            ),
            "full (sched/preempt)"
        );
        assert_eq!(
            preempt_model("#1 SMP PREEMPT_RT", None, None, ""),
            "rt (kernel version)"
        );
        assert_eq!(
            preempt_model("#1 SMP PREEMPT Tue", None, None, ""),
            "full (kernel version)"
        );
        assert!(preempt_model("#1 SMP PREEMPT_DYNAMIC", None, None, "").starts_with("dynamic"));
        // The kernel takes the last preempt= it is given.
        assert_eq!(
            preempt_model(
                "#1 SMP PREEMPT_DYNAMIC",
                None,
                None,
                "preempt=none preempt=full"
            ),
            "full (preempt= boot option)"
        );
        assert!(preempt_model("#1 SMP", None, None, "").starts_with("none"));
        // An RT kernel whose version string does not say so: its configuration does.
        let rt = KernelConfig {
            preempt: vec!["CONFIG_PREEMPT_RT".into()],
            ..KernelConfig::default()
        };
        assert_eq!(
            preempt_model("#1 SMP PREEMPT RT Tue", Some(&rt), None, ""),
            "rt (kernel configuration)"
        );
    }

    #[test]
    fn cpu_models() {
        assert_eq!(cpu_model("Hardware\t: BCM2835\n"), "BCM2835");
        assert_eq!(cpu_model("CPU part\t: 0xd08\n"), "CPU part 0xd08");
        assert!(cpu_model("").starts_with("unavailable"));
    }

    #[test]
    fn bad_cpu_list_file_names_the_path() {
        let t = tree(&[("/sys/devices/system/cpu/online", "zz\n")]);
        let e = Sys::new(t.path()).online_cpus().unwrap_err();
        assert!(e.to_string().contains("online"), "{e}");
    }

    #[test]
    fn live_schedstat_of_this_thread() {
        let sys = Sys::default();
        let pid = std::process::id() as i32;
        // SAFETY: gettid has no preconditions.
        let tid = unsafe { libc::gettid() };
        if !sys.exists(&format!("/proc/{pid}/task/{tid}/schedstat")) {
            eprintln!("skipped: schedstat not available on this kernel");
            return;
        }
        // Burn 20 ms of this thread's own CPU time (not of the clock: on a busy machine the
        // thread may get little of it), then sleep so the kernel folds it into schedstat.
        let t0 = crate::thread::cpu_time_ns();
        while crate::thread::cpu_time_ns() < t0 + 20_000_000 {
            std::hint::spin_loop();
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
        assert!(sys.thread_cpu_time_ns(pid, tid).unwrap() >= 10_000_000);
    }

    #[test]
    fn pm_qos_on_a_fixture_file_writes_the_binary_value() {
        let t = tree(&[("/dev/cpu_dma_latency", "")]);
        let hold = Sys::new(t.path()).hold_pm_qos(7).unwrap();
        assert_eq!(hold.us, 7);
        let bytes = std::fs::read(t.path().join("dev/cpu_dma_latency")).unwrap();
        assert_eq!(bytes, 7i32.to_ne_bytes());
    }
}
