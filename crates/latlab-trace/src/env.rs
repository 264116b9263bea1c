//! What tracing needs from the system: privileges, kernel BTF, tracefs, tracepoints; and the
//! kernel's BPF run-time statistics, enabled for the run only.

use std::fs::File;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use latlab_sys::procfs::{cap, has_cap};

/// Whether a capability mask allows loading and attaching tracing programs: CAP_SYS_ADMIN
/// (root), or CAP_BPF with CAP_PERFMON.
pub fn may_trace(cap_eff: u64) -> bool {
    let has = |c: u32| has_cap(cap_eff, c);
    has(cap::SYS_ADMIN) || (has(cap::BPF) && has(cap::PERFMON))
}

/// The capabilities that matter, as text (for the error message).
pub fn describe_caps(cap_eff: u64) -> String {
    let names: Vec<&str> = [
        (cap::SYS_ADMIN, "CAP_SYS_ADMIN"),
        (cap::BPF, "CAP_BPF"),
        (cap::PERFMON, "CAP_PERFMON"),
    ]
    .into_iter()
    .filter(|(c, _)| has_cap(cap_eff, *c))
    .map(|(_, n)| n)
    .collect();
    if names.is_empty() {
        "none of them".into()
    } else {
        format!("only {}", names.join(" and "))
    }
}

/// This process's effective capabilities where they allow tracing ([`may_trace`]); else the
/// error naming what it has.
pub fn privileged() -> Result<u64, crate::TraceError> {
    let caps = cap_eff();
    if may_trace(caps) {
        Ok(caps)
    } else {
        Err(crate::TraceError::NoPrivilege {
            have: describe_caps(caps),
        })
    }
}

/// This process's effective capabilities.
pub use latlab_sys::procfs::own_cap_eff as cap_eff;

/// Where the kernel publishes its BTF.
pub const BTF_PATH: &str = "/sys/kernel/btf/vmlinux";

/// The places tracefs is looked for, in order (as the loader looks).
use latlab_sys::TRACEFS_PATHS;

fn is_mounted_tracefs(p: &Path) -> bool {
    p.join("events").is_dir()
}

/// tracefs for the time the programs are attached.
///
/// When tracefs is not mounted, it is mounted in a private mount namespace of the calling
/// thread: the mount is invisible to the rest of the system, and when [`Tracefs::release`] (or
/// drop) returns the thread to its namespace, the private one and its mount vanish. So the
/// system is never left changed, even if the process is killed. Attach classic tracepoints on
/// the thread that acquired it, before releasing it.
pub enum Tracefs {
    /// Already mounted here.
    Mounted(PathBuf),
    /// Mounted by latlab in a private mount namespace of the calling thread.
    Private { path: PathBuf, ns: PrivateNs },
    /// Not available, and why.
    Unavailable(String),
}

fn last_os_error(what: &str) -> String {
    format!("{what}: {}", std::io::Error::last_os_error())
}

impl Tracefs {
    /// Find tracefs, or mount it privately.
    pub fn acquire() -> Tracefs {
        for p in TRACEFS_PATHS {
            if is_mounted_tracefs(Path::new(p)) {
                return Tracefs::Mounted(PathBuf::from(p));
            }
        }
        let target = Path::new(TRACEFS_PATHS[0]);
        if !target.is_dir() {
            return Tracefs::Unavailable(format!(
                "not mounted, and {} does not exist (a kernel without CONFIG_TRACING?)",
                target.display()
            ));
        }
        match mount_private(target) {
            Ok(original) => Tracefs::Private {
                path: target.to_path_buf(),
                ns: PrivateNs {
                    original: Some(original),
                },
            },
            Err(e) => Tracefs::Unavailable(format!("not mounted, and mounting it failed ({e})")),
        }
    }

    /// Where tracefs is, if it is available.
    pub fn path(&self) -> Option<&Path> {
        match self {
            Tracefs::Mounted(p) | Tracefs::Private { path: p, .. } => Some(p),
            Tracefs::Unavailable(_) => None,
        }
    }

    /// Why tracefs is unavailable.
    pub fn unavailable(&self) -> Option<&str> {
        match self {
            Tracefs::Unavailable(r) => Some(r),
            _ => None,
        }
    }

    /// Whether a classic tracepoint exists.
    pub fn has_event(&self, category: &str, event: &str) -> bool {
        self.path().is_some_and(|p| {
            p.join("events")
                .join(category)
                .join(event)
                .join("id")
                .exists()
        })
    }

    /// Return the thread to its mount namespace (dropping the private mount). Returns an error
    /// text when that failed (the thread then stays in the private namespace, where only it
    /// sees the mount).
    pub fn release(self) -> Result<(), String> {
        match self {
            Tracefs::Private { mut ns, .. } => ns.leave(),
            _ => Ok(()),
        }
    }
}

/// The calling thread's way back from a private mount namespace (taken on drop).
pub struct PrivateNs {
    original: Option<Original>,
}

/// Where a thread was before it entered a private mount namespace: the namespace, and the
/// working directory (entering a namespace with `setns` moves a thread to its root, so relative
/// paths would then name files under `/`).
struct Original {
    ns: OwnedFd,
    cwd: OwnedFd,
}

impl Original {
    /// The calling thread's mount namespace and working directory.
    fn here() -> Result<Original, String> {
        let ns = File::open("/proc/thread-self/ns/mnt")
            .map_err(|e| format!("opening /proc/thread-self/ns/mnt: {e}"))?
            .into();
        let cwd = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_PATH | libc::O_DIRECTORY)
            .open(".")
            .map_err(|e| format!("opening the working directory: {e}"))?
            .into();
        Ok(Original { ns, cwd })
    }

    /// Return the calling thread to the namespace and working directory.
    fn go_back(&self) -> Result<(), String> {
        // SAFETY: setns on a valid namespace fd; affects only the calling thread.
        if unsafe { libc::setns(self.ns.as_raw_fd(), libc::CLONE_NEWNS) } != 0 {
            return Err(last_os_error("returning to the original mount namespace"));
        }
        // SAFETY: fchdir on a valid directory fd; the calling thread has its own filesystem
        // context since its unshare.
        if unsafe { libc::fchdir(self.cwd.as_raw_fd()) } != 0 {
            return Err(last_os_error("returning to the working directory"));
        }
        Ok(())
    }
}

impl PrivateNs {
    fn leave(&mut self) -> Result<(), String> {
        match self.original.take() {
            Some(o) => o.go_back(),
            None => Ok(()),
        }
    }
}

impl Drop for PrivateNs {
    fn drop(&mut self) {
        let _ = self.leave();
    }
}

/// Enter a private mount namespace (this thread only) and mount tracefs at `target` there.
/// Returns the original namespace and working directory to go back to.
fn mount_private(target: &Path) -> Result<Original, String> {
    let original = Original::here()?;
    // SAFETY: unshare has no memory preconditions; it affects only the calling thread (which
    // gets its own filesystem context).
    if unsafe { libc::unshare(libc::CLONE_NEWNS) } != 0 {
        return Err(last_os_error("unshare(CLONE_NEWNS)"));
    }
    let back = |msg: String| -> String {
        match original.go_back() {
            Ok(()) => msg,
            Err(e) => format!("{msg}; {e}"),
        }
    };
    let root = c"/";
    // SAFETY: valid NUL-terminated strings; null fs type and data are allowed for a
    // propagation change.
    let rc = unsafe {
        libc::mount(
            std::ptr::null(),
            root.as_ptr(),
            std::ptr::null(),
            libc::MS_REC | libc::MS_PRIVATE,
            std::ptr::null(),
        )
    };
    if rc != 0 {
        return Err(back(last_os_error("making the private namespace private")));
    }
    let Ok(target_c) = std::ffi::CString::new(target.as_os_str().as_encoded_bytes()) else {
        return Err(back("bad tracefs path".into()));
    };
    let fstype = c"tracefs";
    // SAFETY: valid NUL-terminated strings; no data.
    let rc = unsafe {
        libc::mount(
            fstype.as_ptr(),
            target_c.as_ptr(),
            fstype.as_ptr(),
            libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
            std::ptr::null(),
        )
    };
    if rc != 0 {
        return Err(back(last_os_error(&format!(
            "mount -t tracefs {}",
            target.display()
        ))));
    }
    Ok(original)
}

/// The sysctl that turns the kernel's BPF run-time statistics on for everyone.
pub const BPF_STATS_SYSCTL: &str = "/proc/sys/kernel/bpf_stats_enabled";

/// The kernel's BPF run-time statistics, on for as long as this lives.
///
/// The preferred way is `BPF_ENABLE_STATS`: the statistics stay on while latlab holds the file
/// descriptor, and the kernel turns them off when it is closed — also when the process is
/// killed. On kernels without it (before 5.8), the sysctl `kernel.bpf_stats_enabled` is set to
/// 1 through [`latlab_sys::held`]: its original is kept in the run directory before the write
/// and written back on drop, by an exit hook, or — after SIGKILL — by the next trace.
pub enum BpfStats {
    Fd(OwnedFd),
    Sysctl {
        held: latlab_sys::held::Held,
        /// Writes the original back should the process have to end at once.
        _on_exit: latlab_sys::exit_hooks::Registration,
    },
    /// The sysctl was 1 already (or set by another live latlab): left as it is.
    SysctlAlreadyOn(String),
    Unavailable(String),
}

impl BpfStats {
    pub fn enable() -> BpfStats {
        let fd = aya::sys::enable_stats(aya::sys::Stats::RunTime).map_err(|e| {
            match std::error::Error::source(&e) {
                Some(cause) => format!("{e}: {cause}"),
                None => e.to_string(),
            }
        });
        Self::enable_with(
            fd,
            Path::new(BPF_STATS_SYSCTL),
            &latlab_sys::held::run_dir(),
        )
    }

    /// [`enable`](Self::enable) given the outcome of `BPF_ENABLE_STATS`, the sysctl's file and
    /// the directory its original is kept in.
    pub fn enable_with(fd: Result<OwnedFd, String>, sysctl: &Path, dir: &Path) -> BpfStats {
        use latlab_sys::held::{Hold, hold};
        let e = match fd {
            Ok(fd) => return BpfStats::Fd(fd),
            Err(e) => e,
        };
        match hold(sysctl, "1", dir, "bpf_stats_enabled") {
            Ok(Hold::Set(held)) => BpfStats::Sysctl {
                _on_exit: latlab_sys::exit_hooks::register(held.put_back_fn()),
                held,
            },
            Ok(Hold::AlreadySet) => BpfStats::SysctlAlreadyOn("already 1".into()),
            Ok(Hold::HeldBy(pid)) => BpfStats::SysctlAlreadyOn(format!(
                "set to 1 by {}",
                pid.map_or_else(|| "another latlab".into(), |p| format!("PID {p}"))
            )),
            Err(e2) => BpfStats::Unavailable(format!("BPF_ENABLE_STATS failed ({e}) and {e2}")),
        }
    }

    /// Put back the sysctl a trace killed before it could restore it left set; what was done.
    pub fn put_back_left() -> Vec<String> {
        latlab_sys::held::put_back_left(&latlab_sys::held::run_dir())
    }

    pub fn available(&self) -> bool {
        !matches!(self, BpfStats::Unavailable(_))
    }

    /// How the statistics were enabled, or why not.
    pub fn describe(&self) -> String {
        match self {
            BpfStats::Fd(_) => "BPF_ENABLE_STATS (on while traced, off when latlab exits)".into(),
            BpfStats::SysctlAlreadyOn(why) => {
                format!("kernel.bpf_stats_enabled ({why}, left as is)")
            }
            BpfStats::Sysctl { held, .. } => format!(
                "kernel.bpf_stats_enabled (1 while traced, then restored to {})",
                held.original()
            ),
            BpfStats::Unavailable(why) => format!("unavailable: {why}"),
        }
    }
}

/// Run time, run count and recursion misses of a loaded program (`BPF_OBJ_GET_INFO_BY_FD`).
pub fn program_stats(fd: std::os::fd::BorrowedFd<'_>) -> std::io::Result<(u64, u64, u64)> {
    use aya_obj::generated::bpf_prog_info;
    #[repr(C)]
    struct InfoAttr {
        bpf_fd: u32,
        info_len: u32,
        info: u64,
    }
    // SAFETY: bpf_prog_info is plain integers and pointers (all zero is valid: no buffers).
    let mut info: bpf_prog_info = unsafe { std::mem::zeroed() };
    let mut attr = InfoAttr {
        bpf_fd: fd.as_raw_fd() as u32,
        info_len: std::mem::size_of::<bpf_prog_info>() as u32,
        info: &mut info as *mut bpf_prog_info as u64,
    };
    const BPF_OBJ_GET_INFO_BY_FD: libc::c_long = 15;
    // SAFETY: attr points to a live, correctly sized buffer for the kernel to fill.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            BPF_OBJ_GET_INFO_BY_FD,
            &mut attr as *mut InfoAttr,
            std::mem::size_of::<InfoAttr>(),
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok((info.run_time_ns, info.run_cnt, info.recursion_misses))
}

/// Read one element of an array map into `out` (`BPF_MAP_LOOKUP_ELEM`), for values too large
/// for the stack (the rings).
pub fn lookup_into(
    fd: std::os::fd::BorrowedFd<'_>,
    key: u32,
    out: &mut [u8],
) -> std::io::Result<()> {
    #[repr(C)]
    struct LookupAttr {
        map_fd: u32,
        pad: u32,
        key: u64,
        value: u64,
        flags: u64,
    }
    let attr = LookupAttr {
        map_fd: fd.as_raw_fd() as u32,
        pad: 0,
        key: &key as *const u32 as u64,
        value: out.as_mut_ptr() as u64,
        flags: 0,
    };
    const BPF_MAP_LOOKUP_ELEM: libc::c_long = 1;
    // SAFETY: key and out are live; the caller sized out to the map's value size.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            BPF_MAP_LOOKUP_ELEM,
            &attr as *const LookupAttr,
            std::mem::size_of::<LookupAttr>(),
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_stats_sysctl_is_kept_on_disk_while_set_and_put_back() {
        let t = tempfile::tempdir().unwrap();
        let (sysctl, dir) = (t.path().join("bpf_stats_enabled"), t.path().join("run"));
        std::fs::write(&sysctl, "0\n").unwrap();
        let read = || std::fs::read_to_string(&sysctl).unwrap().trim().to_string();
        let stats = BpfStats::enable_with(Err("EINVAL".into()), &sysctl, &dir);
        assert_eq!(
            stats.describe(),
            "kernel.bpf_stats_enabled (1 while traced, then restored to 0)"
        );
        assert_eq!(read(), "1");
        assert!(dir.join("bpf_stats_enabled.undo").exists());
        // A second trace beside it leaves the value to the first.
        let beside = BpfStats::enable_with(Err("EINVAL".into()), &sysctl, &dir);
        assert!(
            beside.describe().contains("set to 1 by PID"),
            "{}",
            beside.describe()
        );
        drop(beside);
        assert_eq!(read(), "1");
        drop(stats);
        assert_eq!(read(), "0");
        assert!(!dir.join("bpf_stats_enabled.undo").exists());
        // With BPF_ENABLE_STATS the sysctl is not touched.
        let fd: OwnedFd = File::open("/dev/null").unwrap().into();
        let stats = BpfStats::enable_with(Ok(fd), &sysctl, &dir);
        assert!(stats.describe().starts_with("BPF_ENABLE_STATS"));
        assert_eq!(read(), "0");
        // Where the original cannot be kept, the sysctl is not written.
        let blocked = t.path().join("bpf_stats_enabled");
        let stats = BpfStats::enable_with(Err("EINVAL".into()), &sysctl, &blocked.join("run"));
        assert!(!stats.available(), "{}", stats.describe());
        assert_eq!(read(), "0");
    }

    #[test]
    fn capabilities_from_status() {
        assert!(may_trace(0x1ff_ffff_ffff));
        assert!(!may_trace(0));
        assert!(may_trace((1 << cap::BPF) | (1 << cap::PERFMON)));
        assert!(!may_trace(1 << cap::BPF));
        assert_eq!(describe_caps(0), "none of them");
        assert_eq!(describe_caps(1 << cap::BPF), "only CAP_BPF");
    }
}
