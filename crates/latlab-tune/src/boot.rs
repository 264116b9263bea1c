//! Boot-time advice: the kernel command line a profile wants, computed for this machine's CPUs,
//! compared with `/proc/cmdline`, with what each option changes; build-time settings reported as
//! "needs a different kernel" with the reason; a GRUB drop-in to make the options permanent; and
//! a profile recommendation from the facts of the machine.

use crate::TuneError;
use crate::plan::{Plan, Split};
use crate::profile::{BootSettings, CpuSet, Profile};
use latlab_model::system::KernelConfig;
use latlab_model::units::CpuList;
use latlab_sys::{Sys, cmdline_value};
use std::path::PathBuf;

/// The GRUB drop-in `tune boot --write` writes (Debian and Ubuntu source
/// `/etc/default/grub.d/*.cfg` after `/etc/default/grub`).
pub const GRUB_DROPIN: &str = "/etc/default/grub.d/latlab.cfg";

/// Where one option stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BootStatus {
    /// Not on the command line yet.
    Add,
    AlreadySet,
    /// On the command line with another value.
    Differs {
        now: String,
    },
    /// The running kernel was built without what the option needs.
    NeedsKernel {
        why: String,
    },
    /// The running kernel was built to do what the option asks: it is in effect without it.
    BuiltIn {
        why: String,
    },
    Unsupported {
        why: String,
    },
}

/// One kernel command line option.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BootOption {
    /// `preempt=full`, `threadirqs`.
    pub option: String,
    pub status: BootStatus,
    /// What it changes.
    pub effect: String,
}

impl BootOption {
    /// Goes into the drop-in.
    pub fn wanted(&self) -> bool {
        matches!(self.status, BootStatus::Add | BootStatus::Differs { .. })
    }
}

/// A build-time setting and whether this kernel has it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelSetting {
    pub what: String,
    /// Ok: this kernel has it (with how it was seen); Err: needs a different kernel, why.
    pub status: Result<String, String>,
}

/// `latlab tune boot PROFILE`.
#[derive(Debug, Clone)]
pub struct BootAdvice {
    pub profile: String,
    pub split: Option<Split>,
    pub current: String,
    pub options: Vec<BootOption>,
    pub kernel: Vec<KernelSetting>,
    /// The command that makes a changed GRUB configuration take effect.
    pub grub_command: String,
}

impl BootAdvice {
    /// The options to add, space-separated.
    pub fn additions(&self) -> String {
        self.options
            .iter()
            .filter(|o| o.wanted())
            .map(|o| o.option.as_str())
            .collect::<Vec<_>>()
            .join(" ")
    }
}

fn set_list(set: &CpuSet, split: Option<&Split>, online: &CpuList) -> Result<String, String> {
    match set {
        CpuSet::All => Ok("all".into()),
        CpuSet::List(l) => Ok(l.to_string()),
        CpuSet::Isolated => split
            .map(|s| s.isolated.to_string())
            .ok_or_else(|| "no isolated CPUs here (the profile has no usable [isolation])".into()),
        CpuSet::Housekeeping => Ok(split
            .map(|s| s.housekeeping.to_string())
            .unwrap_or_else(|| online.to_string())),
    }
}

/// "CPU 1", "CPUs 1-3", "all CPUs".
fn cpus_phrase(list: &str) -> String {
    match CpuList::parse(list) {
        _ if list == "all" => "all CPUs".into(),
        Ok(l) if l.len() == 1 => l.phrase(),
        _ => format!("CPUs {list}"),
    }
}

/// Whether this machine boots through GRUB's configuration (`/etc/default/grub`), where
/// `--write` puts its drop-in.
pub fn has_grub(sys: &Sys) -> bool {
    sys.exists("/etc/default/grub")
}

/// Where a machine without GRUB takes its kernel command line: said where GRUB's drop-in would
/// be named.
pub const NO_GRUB: &str = "there is no GRUB here (/etc/default/grub is absent): add them where \
     this machine's boot loader, or its virtual machine's monitor, sets the kernel command line, \
     and reboot";

/// The command that makes a changed GRUB configuration take effect here, quoted as a command
/// (either of two where neither is found, each quoted apart from the words between).
pub fn grub_command(sys: &Sys) -> String {
    if ["/usr/sbin/update-grub", "/sbin/update-grub"]
        .iter()
        .any(|p| sys.exists(p))
    {
        "`update-grub`".into()
    } else if ["/usr/sbin/grub2-mkconfig", "/sbin/grub2-mkconfig"]
        .iter()
        .any(|p| sys.exists(p))
    {
        "`grub2-mkconfig -o /boot/grub2/grub.cfg`".into()
    } else {
        "`update-grub` (Debian, Ubuntu) or `grub2-mkconfig -o /boot/grub2/grub.cfg`".into()
    }
}

/// Work out the command line `profile` wants here.
pub fn advise(
    sys: &Sys,
    profile: &Profile,
    cpus: Option<&CpuList>,
) -> Result<BootAdvice, TuneError> {
    let plan = Plan::build(sys, profile, cpus)?;
    let online = sys.online_cpus()?;
    let version = sys
        .read_trim("/proc/sys/kernel/version")
        .unwrap_or_default();
    let config = sys.kernel_config();
    let config: Option<&KernelConfig> = config.value();
    let rt = latlab_model::system::kernel_built_with(&version, config, "PREEMPT_RT");
    let mut a = Advisor {
        current: sys.read_trim("/proc/cmdline").unwrap_or_default(),
        config,
        rt,
        options: Vec::new(),
        unsupported: Vec::new(),
    };
    let b = &profile.boot;
    a.preempt(b);
    a.cpu_sets(b, plan.split.as_ref(), &online);
    if let Some(l) = &b.rcu_lazy {
        a.add(
            "rcutree.enable_rcu_lazy",
            Some(u8::from(l.value).to_string()),
            if l.value {
                "batch RCU callbacks: fewer wake-ups and less power, memory freed later".into()
            } else {
                "RCU callbacks run promptly".into()
            },
            a.needs("rcutree.enable_rcu_lazy=", "CONFIG_RCU_LAZY"),
        );
    }
    a.isolcpus(b, plan.split.as_ref());
    if let Some(t) = &b.threadirqs
        && t.value
    {
        let need = if rt {
            Err("a PREEMPT_RT kernel threads IRQ handlers always".into())
        } else {
            Ok(())
        };
        a.add(
            "threadirqs",
            None,
            "IRQ handlers run in threads, which can be given priorities".into(),
            need,
        );
    }
    a.idle(sys, b);
    a.extra(b);
    let Advisor {
        current,
        mut options,
        unsupported,
        ..
    } = a;
    options.extend(unsupported);
    Ok(BootAdvice {
        profile: profile.name.clone(),
        split: plan.split,
        current,
        options,
        kernel: kernel_settings(profile, config, rt),
        grub_command: grub_command(sys),
    })
}

/// The boot options of a profile as they are worked out, one family at a time.
struct Advisor<'a> {
    /// `/proc/cmdline`.
    current: String,
    config: Option<&'a KernelConfig>,
    /// A PREEMPT_RT kernel.
    rt: bool,
    options: Vec<BootOption>,
    /// Options that cannot apply here, listed after the others.
    unsupported: Vec<BootOption>,
}

impl Advisor<'_> {
    /// Ok(()) when the kernel has the option (or its configuration is unreadable).
    fn needs(&self, option: &str, cfg: &str) -> Result<(), String> {
        match self.config {
            None => Ok(()),
            Some(c) => {
                let has = c.preempt.iter().chain(c.no_hz.iter()).any(|p| p == cfg)
                    || (cfg == "CONFIG_RCU_NOCB_CPU" && c.rcu_nocb_cpu)
                    || (cfg == "CONFIG_RCU_LAZY" && c.rcu_lazy);
                if has {
                    Ok(())
                } else {
                    Err(format!(
                        "{option} needs a kernel built with {cfg}, which this one ({}) is not",
                        c.source
                    ))
                }
            }
        }
    }

    /// One option, with its status against the current command line.
    fn add(&mut self, key: &str, value: Option<String>, effect: String, need: Result<(), String>) {
        let option = match &value {
            Some(v) => format!("{key}={v}"),
            None => key.to_string(),
        };
        let now = cmdline_value(&self.current, key);
        let status = match (need, now) {
            (_, Some(n)) if n == value.clone().unwrap_or_default() => BootStatus::AlreadySet,
            (Err(why), _) => BootStatus::NeedsKernel { why },
            (Ok(()), Some(n)) => BootStatus::Differs {
                now: if n.is_empty() {
                    key.to_string()
                } else {
                    format!("{key}={n}")
                },
            },
            (Ok(()), None) => BootStatus::Add,
        };
        self.options.push(BootOption {
            option,
            status,
            effect,
        });
    }

    /// An option that cannot apply here, and why.
    fn unsupported(&mut self, option: String, why: String) {
        self.unsupported.push(BootOption {
            option,
            status: BootStatus::Unsupported { why },
            effect: String::new(),
        });
    }

    /// `preempt=`.
    fn preempt(&mut self, b: &BootSettings) {
        let Some(p) = &b.preempt else { return };
        // A kernel without the switch preempts as it was built to: the model asked for may be
        // the one it has.
        let built = self
            .config
            .filter(|c| !self.rt && !c.preempt.iter().any(|o| o == "CONFIG_PREEMPT_DYNAMIC"));
        if let Some(c) = built {
            let cfg = match p.value.as_str() {
                "full" => "CONFIG_PREEMPT",
                "lazy" => "CONFIG_PREEMPT_LAZY",
                "voluntary" => "CONFIG_PREEMPT_VOLUNTARY",
                _ => "CONFIG_PREEMPT_NONE",
            };
            if c.preempt.iter().any(|o| o == cfg) {
                self.options.push(BootOption {
                    option: format!("preempt={}", p.value),
                    status: BootStatus::BuiltIn {
                        why: format!(
                            "this kernel ({}) is built with {cfg}: it preempts so without the \
                             option",
                            c.source
                        ),
                    },
                    effect: String::new(),
                });
                return;
            }
        }
        let need = if self.rt {
            Err("this is a PREEMPT_RT kernel, which is fully preemptible already".into())
        } else {
            self.needs("preempt=", "CONFIG_PREEMPT_DYNAMIC")
        };
        let effect = match p.value.as_str() {
            "full" => {
                "kernel code can be preempted almost anywhere: shorter scheduling latency, \
                       a little less throughput"
            }
            "lazy" => "preempts at the next tick for normal tasks, at once for real-time ones",
            "voluntary" => "preemption only at explicit points in the kernel",
            _ => "no kernel preemption: best throughput, longest scheduling latency",
        };
        self.add("preempt", Some(p.value.clone()), effect.into(), need);
    }

    /// The options that name CPU sets: `nohz_full=`, `rcu_nocbs=`, `irqaffinity=`.
    fn cpu_sets(&mut self, b: &BootSettings, split: Option<&Split>, online: &CpuList) {
        for (key, set, effect, need) in [
            (
                "nohz_full",
                b.nohz_full.as_ref(),
                "no scheduler tick on {} while each runs a single task (kernel entries cost a \
                 little more there)",
                self.needs("nohz_full=", "CONFIG_NO_HZ_FULL"),
            ),
            (
                "rcu_nocbs",
                b.rcu_nocbs.as_ref(),
                "RCU callbacks of {} run in kernel threads instead of their softirq",
                self.needs("rcu_nocbs=", "CONFIG_RCU_NOCB_CPU"),
            ),
            (
                "irqaffinity",
                b.irqaffinity.as_ref(),
                "IRQs start on {}",
                Ok(()),
            ),
        ] {
            let Some(set) = set else { continue };
            match set_list(&set.value, split, online) {
                Ok(list) => self.add(
                    key,
                    Some(list.clone()),
                    effect.replace("{}", &cpus_phrase(&list)),
                    need,
                ),
                Err(why) => self.unsupported(key.to_string(), why),
            }
        }
    }

    /// `isolcpus=` with the profile's flags and the isolated CPUs.
    fn isolcpus(&mut self, b: &BootSettings, split: Option<&Split>) {
        let Some(flags) = &b.isolcpus else { return };
        let Some(s) = split else {
            self.unsupported("isolcpus".into(), "no isolated CPUs here".into());
            return;
        };
        let mut v = flags.value.clone();
        v.push(s.isolated.to_string());
        self.add(
            "isolcpus",
            Some(v.join(",")),
            format!(
                "{} left out of scheduler load balancing{}",
                cpus_phrase(&s.isolated.to_string()),
                if flags.value.iter().any(|f| f == "managed_irq") {
                    ", and managed IRQs kept off them"
                } else {
                    ""
                }
            ),
            Ok(()),
        );
    }

    /// The idle options: the idle driver's `max_cstate`, and `idle=`.
    fn idle(&mut self, sys: &Sys, b: &BootSettings) {
        if let Some(m) = &b.max_cstate {
            let driver = sys
                .read_trim("/sys/devices/system/cpu/cpuidle/current_driver")
                .unwrap_or_default();
            let key = match driver.as_str() {
                "intel_idle" => Some("intel_idle.max_cstate"),
                "acpi_idle" => Some("processor.max_cstate"),
                _ => None,
            };
            match key {
                Some(k) => self.add(
                    k,
                    Some(m.value.to_string()),
                    format!("{driver} uses no idle state deeper than C{}", m.value),
                    Ok(()),
                ),
                None => self.unsupported(
                    format!("max_cstate={}", m.value),
                    format!(
                        "the idle driver here is {}, which has no max_cstate option",
                        if driver.is_empty() { "none" } else { &driver }
                    ),
                ),
            }
        }
        if let Some(i) = &b.idle {
            let effect = match i.value.as_str() {
                "poll" => "idle CPUs poll instead of sleeping: the shortest wake-up, full power",
                "halt" => "idle CPUs only halt (no deeper states)",
                _ => "idle CPUs do not use MWAIT",
            };
            self.add("idle", Some(i.value.clone()), effect.into(), Ok(()));
        }
    }

    /// The profile's other options, as given.
    fn extra(&mut self, b: &BootSettings) {
        let Some(extra) = &b.extra else { return };
        for opt in &extra.value {
            let (key, value) = match opt.split_once('=') {
                Some((k, v)) => (k, Some(v.to_string())),
                None => (opt.as_str(), None),
            };
            let effect = match key {
                "skew_tick" => "CPUs take their ticks at offset times, not all at once",
                "nosoftlockup" => "no soft-lockup watchdog timer interrupting busy CPUs",
                "tsc" => "trust the TSC clocksource without watchdog checks",
                "nowatchdog" => "no lockup watchdogs",
                _ => "as given by the profile",
            };
            self.add(key, value, effect.into(), Ok(()));
        }
    }
}

/// What the profile wants of the kernel build itself (HZ, PREEMPT_RT), against this kernel.
fn kernel_settings(
    profile: &Profile,
    config: Option<&KernelConfig>,
    rt: bool,
) -> Vec<KernelSetting> {
    let mut kernel = Vec::new();
    if let Some(hz) = &profile.kernel.hz {
        let have = config.and_then(|c| c.hz);
        kernel.push(KernelSetting {
            what: format!("HZ {}", hz.value),
            status: match have {
                Some(h) if h == hz.value => Ok(format!("CONFIG_HZ={h}")),
                Some(h) => Err(format!(
                    "CONFIG_HZ is {h} in this kernel; the tick rate is fixed when the kernel is \
                     built, so HZ {} needs a kernel built with CONFIG_HZ_{}",
                    hz.value, hz.value
                )),
                None => Err(
                    "the kernel configuration is unreadable, so HZ is unknown; it is \
                             fixed when the kernel is built"
                        .into(),
                ),
            },
        });
    }
    if let Some(want) = &profile.kernel.preempt_rt
        && want.value
    {
        kernel.push(KernelSetting {
            what: "PREEMPT_RT".into(),
            status: if rt {
                Ok("a PREEMPT_RT kernel".into())
            } else {
                Err(
                    "real-time preemption (CONFIG_PREEMPT_RT) is chosen when the kernel is \
                     built; this kernel is not a PREEMPT_RT build (install a real-time kernel \
                     package; PREEMPT_RT is in mainline since 6.12)"
                        .into(),
                )
            },
        });
    }
    kernel
}

/// What `--write` did.
#[derive(Debug, Clone)]
pub struct Written {
    pub path: PathBuf,
    pub content: String,
    /// The drop-in's previous content, when it existed.
    pub replaced: Option<String>,
}

/// Write the GRUB drop-in for `advice`. Nothing to add, or no GRUB here, is an error that names
/// the options.
pub fn write_dropin(sys: &Sys, advice: &BootAdvice) -> Result<Written, TuneError> {
    let additions = advice.additions();
    if additions.is_empty() {
        return Err(TuneError::Boot(
            "nothing to write: every option the profile wants is set already or needs a \
             different kernel"
                .into(),
        ));
    }
    if !has_grub(sys) {
        return Err(TuneError::Boot(format!(
            "no GRUB here (/etc/default/grub is absent); set these options where this machine's \
             boot loader takes its kernel command line: {additions}"
        )));
    }
    let path = sys.path(GRUB_DROPIN);
    let dir = sys.path("/etc/default/grub.d");
    let replaced = std::fs::read_to_string(&path).ok();
    // A directory made here goes again with the file (`--remove`); one made before stays.
    let made = !dir.exists()
        || replaced
            .as_deref()
            .is_some_and(|r| r.contains(MADE_THE_DIRECTORY));
    std::fs::create_dir_all(&dir).map_err(|e| TuneError::io(&dir, e))?;
    let content = format!(
        "# Written by `latlab tune boot {p} --write`: kernel options of profile {p}.\n\
         # Undo: `latlab tune boot --remove` (or delete this file), then run {cmd}.\n\
         {made}GRUB_CMDLINE_LINUX_DEFAULT=\"${{GRUB_CMDLINE_LINUX_DEFAULT}} {additions}\"\n",
        p = advice.profile,
        cmd = advice.grub_command,
        made = if made {
            format!("{MADE_THE_DIRECTORY}\n")
        } else {
            String::new()
        }
    );
    let tmp = path.with_extension("cfg.tmp");
    std::fs::write(&tmp, &content)
        .and_then(|()| std::fs::File::open(&tmp)?.sync_all())
        .and_then(|()| std::fs::rename(&tmp, &path))
        .map_err(|e| TuneError::io(&path, e))?;
    Ok(Written {
        path,
        content,
        replaced,
    })
}

/// The drop-in's line saying latlab made its directory.
const MADE_THE_DIRECTORY: &str = "# latlab made /etc/default/grub.d for this file.";

/// Remove the GRUB drop-in (and its directory, where latlab made it and it is empty now);
/// returns its path when there was one.
pub fn remove_dropin(sys: &Sys) -> Result<Option<PathBuf>, TuneError> {
    let path = sys.path(GRUB_DROPIN);
    let made = std::fs::read_to_string(&path).is_ok_and(|t| t.contains(MADE_THE_DIRECTORY));
    match std::fs::remove_file(&path) {
        Ok(()) => {
            if made {
                // Not empty (another file went in since): it stays.
                let _ = std::fs::remove_dir(sys.path("/etc/default/grub.d"));
            }
            Ok(Some(path))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(TuneError::io(&path, e)),
    }
}

/// A profile for this machine and the facts that led to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recommendation {
    pub profile: String,
    pub facts: Vec<String>,
    pub reason: String,
}

/// What the user wants most from the machine, when they say so.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Goal {
    /// The shortest wake-up latency.
    Latency,
    /// The most work per second.
    Throughput,
    /// The least power.
    Power,
    /// Neither way.
    Balanced,
}

/// Recommend a built-in profile. With a goal: latency → realtime on a real-time kernel or with
/// isolated CPUs, else lowlatency; throughput, power and balanced → their profiles. Without one,
/// from the facts alone: real-time kernel or isolated CPUs → realtime; on battery → powersave; a
/// virtual machine or a server → throughput; otherwise balanced.
pub fn recommend(sys: &Sys, goal: Option<Goal>) -> Recommendation {
    let info = sys.system_info();
    let mut facts = Vec::new();
    let rt = info.kernel_built_with("PREEMPT_RT");
    facts.push(format!(
        "kernel {} ({}), preempt model {}",
        info.kernel_release, info.kernel_version, info.preempt
    ));
    let isolated = !info.cpu.isolated.trim().is_empty() || info.boot.nohz_full.is_some();
    if isolated {
        facts.push(format!(
            "isolated CPUs: {}{}",
            if info.cpu.isolated.trim().is_empty() {
                "none"
            } else {
                info.cpu.isolated.trim()
            },
            info.boot
                .nohz_full
                .as_ref()
                .map(|n| format!(", nohz_full={n}"))
                .unwrap_or_default()
        ));
    }
    let vm = info.virtualization.hypervisor.clone();
    if let Some(h) = &vm {
        facts.push(format!("a virtual machine (hypervisor {h})"));
    }
    // Batteries and the mains.
    let mut battery = None;
    let mut on_ac = None;
    for n in sys.list_dir("/sys/class/power_supply") {
        let base = format!("/sys/class/power_supply/{n}");
        match sys.read_trim(&format!("{base}/type")).as_deref() {
            Ok("Battery") => {
                battery = Some(sys.read_trim(&format!("{base}/status")).unwrap_or_default())
            }
            Ok("Mains") => {
                on_ac = Some(
                    sys.read_trim(&format!("{base}/online"))
                        .is_ok_and(|v| v == "1"),
                )
            }
            _ => {}
        }
    }
    let discharging =
        battery.as_deref() == Some("Discharging") || on_ac == Some(false) && battery.is_some();
    if let Some(st) = &battery {
        facts.push(format!(
            "a battery ({st}){}",
            match on_ac {
                Some(true) => ", on mains power",
                Some(false) => ", not on mains power",
                None => "",
            }
        ));
    }
    let chassis = sys
        .read_trim("/sys/class/dmi/id/chassis_type")
        .ok()
        .and_then(|c| c.parse::<u32>().ok());
    let kind = chassis.map(|c| match c {
        8 | 9 | 10 | 14 | 30 | 31 | 32 => "laptop",
        3..=7 | 13 | 15 | 16 | 35 | 36 => "desktop",
        17 | 23 | 25 | 28 | 29 => "server",
        _ => "other",
    });
    if let (Some(c), Some(k)) = (chassis, kind) {
        facts.push(format!("DMI chassis type {c} ({k})"));
    }
    if let Some(goal) = goal {
        let (profile, reason) = for_goal(goal, rt || isolated, vm.is_some(), discharging);
        return Recommendation {
            profile: profile.into(),
            facts,
            reason,
        };
    }
    let (profile, reason) = if rt || isolated {
        (
            "realtime",
            "a real-time kernel or isolated CPUs: the machine is set up for real-time work",
        )
    } else if discharging {
        ("powersave", "running on battery: power matters most")
    } else if vm.is_some() {
        (
            "throughput",
            "a virtual machine: frequency and deep idle states belong to the host, and polling \
             idle in a guest burns the host's CPU time",
        )
    } else if kind == Some("server") {
        ("throughput", "a server: work per second matters most")
    } else if battery.is_some() || kind == Some("laptop") {
        ("balanced", "a laptop on mains power")
    } else {
        ("balanced", "no fact calls for anything else")
    };
    Recommendation {
        profile: profile.into(),
        facts,
        reason: reason.into(),
    }
}

/// The profile for a goal, and why, with what the machine's facts add to it.
fn for_goal(goal: Goal, realtime: bool, vm: bool, discharging: bool) -> (&'static str, String) {
    let (profile, mut reason) = match goal {
        Goal::Latency if realtime => (
            "realtime",
            "the shortest wake-up latency, on a machine set up for real-time work (a real-time \
             kernel or isolated CPUs)"
                .to_string(),
        ),
        Goal::Latency => (
            "lowlatency",
            "the shortest wake-up latency: shallow idle states only, and the fastest governor"
                .to_string(),
        ),
        Goal::Throughput => ("throughput", "the most work per second".to_string()),
        Goal::Power => ("powersave", "the least power".to_string()),
        Goal::Balanced => (
            "balanced",
            "neither way: the distributions' defaults".to_string(),
        ),
    };
    if vm && goal == Goal::Latency {
        reason.push_str(
            "; in a virtual machine it acts on the guest's idle only (the host owns frequency \
             and deep idle states), and a polling guest CPU burns the host's CPU time",
        );
    }
    if discharging && goal != Goal::Power {
        reason.push_str("; on battery it shortens the battery's life");
    }
    (profile, reason)
}
