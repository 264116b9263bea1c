//! Model-specific registers through `/dev/cpu/N/msr` (the `msr` module), read as turbostat reads
//! them: `pread` of 8 bytes at the register number. The device goes through the same root as
//! every other read, so a test can stand a regular file of at least `register + 8` bytes in for
//! it.
//!
//! Only what latlab needs is here: MSR_SMI_COUNT (0x34), the count of System Management
//! Interrupts since reset on Intel CPUs (32 bits; the upper half of the register is reserved).

use crate::Sys;
use std::os::unix::fs::FileExt;

/// MSR_SMI_COUNT: System Management Interrupts since reset (Intel, from Nehalem on).
pub const MSR_SMI_COUNT: u64 = 0x34;

/// Where SMI counts come from, as the samplers and the inventory name it.
pub const SMI_SOURCE: &str = "MSR_SMI_COUNT (0x34) through /dev/cpu/N/msr";

impl Sys {
    /// One MSR of one CPU (64 bits, little endian as x86 stores it), or why it cannot be read,
    /// naming the system path (not the root of a fixture tree).
    pub fn read_msr(&self, cpu: u32, msr: u64) -> Result<u64, String> {
        let rel = format!("/dev/cpu/{cpu}/msr");
        let file = match std::fs::File::open(self.path(&rel)) {
            Ok(f) => f,
            Err(e) => {
                return Err(match e.kind() {
                    std::io::ErrorKind::NotFound => {
                        format!("{rel} absent (msr module not loaded, or not an x86 CPU)")
                    }
                    std::io::ErrorKind::PermissionDenied => {
                        format!("{rel}: {e} (reading MSRs needs root with CAP_SYS_RAWIO)")
                    }
                    _ => format!("{rel}: {e}"),
                });
            }
        };
        let mut buf = [0u8; 8];
        match file.read_exact_at(&mut buf, msr) {
            Ok(()) => Ok(u64::from_le_bytes(buf)),
            // The msr driver answers EIO when the CPU raises #GP: the register does not exist.
            Err(e) if e.raw_os_error() == Some(libc::EIO) => Err(format!(
                "{rel}: MSR {msr:#x} not readable: {e} (not on this CPU: AMD and other non-Intel \
                 CPUs, and most hypervisors, have no such register)"
            )),
            Err(e) => Err(format!("{rel}: MSR {msr:#x} not readable: {e}")),
        }
    }

    /// The SMI count of one CPU (the low 32 bits of MSR_SMI_COUNT, an Intel register: another
    /// vendor's CPU is said to have none before any file is tried).
    pub fn smi_count(&self, cpu: u32) -> Result<u64, String> {
        if let Some(vendor) = self.cpu_vendor()
            && vendor != "GenuineIntel"
        {
            return Err(format!(
                "MSR_SMI_COUNT is an Intel register; this CPU is {vendor}"
            ));
        }
        self.read_msr(cpu, MSR_SMI_COUNT).map(|v| v & 0xffff_ffff)
    }

    /// The `vendor_id` of /proc/cpuinfo (x86 only), if it says one.
    fn cpu_vendor(&self) -> Option<String> {
        let text = self.read("/proc/cpuinfo").ok()?;
        text.lines()
            .find_map(|l| l.strip_prefix("vendor_id"))
            .and_then(|rest| rest.split_once(':'))
            .map(|(_, v)| v.trim().to_string())
            .filter(|v| !v.is_empty())
    }

    /// SMI counts of `cpus` since boot: the CPUs whose count can be read, or, when none can, why
    /// (the reason of the first CPU).
    pub fn smi_counts(&self, cpus: &[u32]) -> Result<Vec<(u32, u64)>, String> {
        let mut out = Vec::new();
        let mut first_error = None;
        for &c in cpus {
            match self.smi_count(c) {
                Ok(n) => out.push((c, n)),
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        match first_error {
            Some(e) if out.is_empty() => Err(e),
            _ if out.is_empty() => Err("no online CPU".into()),
            _ => Ok(out),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn smi_count_from_fake_msr_files_and_reasons_without_them() {
        let dir = tempfile::tempdir().unwrap();
        let sys = Sys::new(dir.path());
        let why = sys.smi_counts(&[0, 1]).unwrap_err();
        assert_eq!(
            why,
            "/dev/cpu/0/msr absent (msr module not loaded, or not an x86 CPU)"
        );
        // The reserved upper half of the register is set: it is masked off.
        crate::fixture::write_msr(dir.path(), 1, MSR_SMI_COUNT, 0xdead_beef_0000_0007).unwrap();
        assert_eq!(sys.smi_count(1).unwrap(), 7);
        assert_eq!(sys.smi_counts(&[0, 1]).unwrap(), vec![(1, 7)]);
        // A file too short to hold the register reads as not readable, not as zero.
        std::fs::write(dir.path().join("dev/cpu/1/msr"), [0u8; 0x30]).unwrap();
        let why = sys.smi_count(1).unwrap_err();
        assert!(
            why.starts_with("/dev/cpu/1/msr: MSR 0x34 not readable"),
            "{why}"
        );
        assert!(!why.contains(&*dir.path().to_string_lossy()), "{why}");
        // An AMD CPU has no such register: said before any file is tried.
        std::fs::create_dir_all(dir.path().join("proc")).unwrap();
        std::fs::write(
            dir.path().join("proc/cpuinfo"),
            "processor\t: 0\nvendor_id\t: AuthenticAMD\n",
        )
        .unwrap();
        assert_eq!(
            sys.smi_counts(&[0, 1]).unwrap_err(),
            "MSR_SMI_COUNT is an Intel register; this CPU is AuthenticAMD"
        );
    }

    /// On the live machine the count is read or says why (this VM: an AMD CPU, no msr module).
    #[test]
    fn live_smi_count_or_reason() {
        match Sys::default().smi_count(0) {
            Ok(n) => assert!(n <= u64::from(u32::MAX)),
            Err(why) => assert!(
                why.starts_with("/dev/cpu/0/msr") || why.starts_with("MSR_SMI_COUNT is an Intel"),
                "{why}"
            ),
        }
    }
}
