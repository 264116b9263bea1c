//! `--schedule "05:05 cpu2:performance; 17:05 cpu2:restore"`: cpufreq governors switched at
//! wall-clock times of day, each switch through latlab-tune (journaled, restored on exit).
//!
//! The schedule is level-triggered: at any moment the setting in force for a CPU is that of the
//! latest entry at or before the local time of day (wrapping to the previous day). A daemon that
//! starts at 10:00 with the schedule above therefore switches CPU 2 to performance at once, and
//! a clock that jumps never leaves a switch half done. The clock and the tuner are traits so
//! tests drive them.

use latlab_model::units::CpuList;
use latlab_sys::Sys;
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

/// What an entry does to a CPU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Switch to this cpufreq governor.
    Governor(String),
    /// Put back what was there before the schedule touched the CPU.
    Restore,
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Action::Governor(g) => f.write_str(g),
            Action::Restore => f.write_str("restore"),
        }
    }
}

/// One switch: at a second of the day, on one CPU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Seconds after local midnight.
    pub at_s: u32,
    pub cpu: u32,
    pub action: Action,
}

impl Entry {
    pub fn time_text(&self) -> String {
        hhmm(self.at_s)
    }
}

fn hhmm(s: u32) -> String {
    if s.is_multiple_of(60) {
        format!("{:02}:{:02}", s / 3600, s / 60 % 60)
    } else {
        format!("{:02}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
    }
}

/// A parsed schedule, entries ordered by time of day.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Schedule {
    pub entries: Vec<Entry>,
}

pub const FORM: &str = "\"HH:MM cpuN:GOVERNOR; HH:MM cpuN:restore\", e.g. \
                        \"05:05 cpu2:performance; 17:05 cpu2:restore\"";

impl Schedule {
    /// Parse `HH:MM[:SS] cpuLIST:ACTION [cpuLIST:ACTION …]` items separated by `;`.
    pub fn parse(text: &str) -> Result<Schedule, String> {
        let mut entries = Vec::new();
        for item in text.split(';').map(str::trim).filter(|s| !s.is_empty()) {
            let mut words = item.split_whitespace();
            let Some(time) = words.next() else { continue };
            let at_s = parse_time(time).ok_or_else(|| {
                format!("--schedule: {time:?} is not a time of day (accepted: {FORM})")
            })?;
            let mut any = false;
            for word in words {
                any = true;
                let (cpus, action) = word.split_once(':').ok_or_else(|| {
                    format!("--schedule: {word:?} is not cpuN:ACTION (accepted: {FORM})")
                })?;
                let list = cpus.strip_prefix("cpu").ok_or_else(|| {
                    format!("--schedule: {cpus:?} does not name CPUs as cpuN (accepted: {FORM})")
                })?;
                let list =
                    CpuList::parse(list).map_err(|e| format!("--schedule: {cpus:?}: {e}"))?;
                let action = match action {
                    "restore" => Action::Restore,
                    g if !g.is_empty()
                        && g.chars()
                            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') =>
                    {
                        Action::Governor(g.to_string())
                    }
                    other => {
                        return Err(format!(
                            "--schedule: {other:?} is not a governor name or restore (accepted: {FORM})"
                        ));
                    }
                };
                for &cpu in list.cpus() {
                    if entries
                        .iter()
                        .any(|e: &Entry| e.at_s == at_s && e.cpu == cpu)
                    {
                        return Err(format!(
                            "--schedule: cpu{cpu} is switched twice at {} (accepted: one action per CPU and time)",
                            hhmm(at_s)
                        ));
                    }
                    entries.push(Entry {
                        at_s,
                        cpu,
                        action: action.clone(),
                    });
                }
            }
            if !any {
                return Err(format!(
                    "--schedule: {item:?} has a time but no cpuN:ACTION (accepted: {FORM})"
                ));
            }
        }
        if entries.is_empty() {
            return Err(format!("--schedule: empty schedule (accepted: {FORM})"));
        }
        entries.sort_by_key(|e| (e.at_s, e.cpu));
        Ok(Schedule { entries })
    }

    /// The CPUs the schedule touches.
    pub fn cpus(&self) -> Vec<u32> {
        let mut c: Vec<u32> = self.entries.iter().map(|e| e.cpu).collect();
        c.sort_unstable();
        c.dedup();
        c
    }

    /// The entry in force for each scheduled CPU at `day_s` seconds after local midnight: the
    /// latest entry at or before it, else the day's last one (from the day before).
    pub fn in_force(&self, day_s: u32) -> BTreeMap<u32, &Entry> {
        let mut out = BTreeMap::new();
        for cpu in self.cpus() {
            let of_cpu = self.entries.iter().filter(|e| e.cpu == cpu);
            let pick = of_cpu
                .clone()
                .rfind(|e| e.at_s <= day_s)
                .or_else(|| of_cpu.clone().next_back());
            if let Some(e) = pick {
                out.insert(cpu, e);
            }
        }
        out
    }

    /// The schedule as written in canonical form.
    pub fn describe(&self) -> String {
        self.entries
            .iter()
            .map(|e| format!("{} cpu{}:{}", e.time_text(), e.cpu, e.action))
            .collect::<Vec<_>>()
            .join("; ")
    }
}

fn parse_time(t: &str) -> Option<u32> {
    let parts: Vec<&str> = t.split(':').collect();
    if !(2..=3).contains(&parts.len()) {
        return None;
    }
    let num = |s: &str, max: u32| -> Option<u32> {
        if s.len() != 2 || !s.chars().all(|c| c.is_ascii_digit()) {
            return None;
        }
        s.parse().ok().filter(|v| *v <= max)
    };
    let h = num(parts[0], 23)?;
    let m = num(parts[1], 59)?;
    let s = match parts.get(2) {
        Some(s) => num(s, 59)?,
        None => 0,
    };
    Some(h * 3600 + m * 60 + s)
}

/// Wall-clock time, injectable for tests.
pub trait WallClock: Send {
    fn now_unix_ns(&self) -> u64;
    /// Seconds to add to UTC to get local time at `unix_s`.
    fn utc_offset_s(&self, unix_s: i64) -> i64;

    /// Seconds after local midnight now.
    fn day_seconds(&self) -> u32 {
        let unix_s = (self.now_unix_ns() / 1_000_000_000) as i64;
        (unix_s + self.utc_offset_s(unix_s)).rem_euclid(86_400) as u32
    }
}

/// The system clock and the local time zone (`TZ`, `/etc/localtime`).
pub struct SystemClock;

impl WallClock for SystemClock {
    fn now_unix_ns(&self) -> u64 {
        super::unix_now_ns()
    }
    fn utc_offset_s(&self, unix_s: i64) -> i64 {
        let t: libc::time_t = unix_s as libc::time_t;
        // SAFETY: localtime_r writes into the tm we pass; both pointers are valid.
        unsafe {
            let mut tm: libc::tm = std::mem::zeroed();
            if libc::localtime_r(&t, &mut tm).is_null() {
                return 0;
            }
            tm.tm_gmtoff
        }
    }
}

/// What carries out a switch.
pub trait Tuner {
    /// Switch `cpu` to `governor` (after putting back an earlier switch of the same CPU).
    fn set_governor(&mut self, cpu: u32, governor: &str) -> Result<String, String>;
    /// Put back what the schedule changed on `cpu` (nothing to do is fine).
    fn restore(&mut self, cpu: u32) -> Result<String, String>;
}

/// A switch carried out (or failed), for the annotation.
#[derive(Debug, Clone, PartialEq)]
pub struct Switch {
    pub at_unix_ns: u64,
    pub cpu: u32,
    pub entry_time: String,
    pub action: Action,
    pub result: Result<String, String>,
}

impl Switch {
    pub fn text(&self) -> String {
        match &self.result {
            Ok(what) => format!(
                "schedule {} cpu{}:{}: {what}",
                self.entry_time, self.cpu, self.action
            ),
            Err(e) => format!(
                "schedule {} cpu{}:{} failed: {e}",
                self.entry_time, self.cpu, self.action
            ),
        }
    }
}

/// Keeps the CPUs at the schedule's settings.
pub struct Switcher<T: Tuner> {
    schedule: Schedule,
    /// What each CPU was last switched to (absent: untouched, as restore leaves it).
    current: BTreeMap<u32, Action>,
    /// Entries that failed, not retried until the entry in force changes.
    failed: BTreeMap<u32, (u32, Action)>,
    pub tuner: T,
}

impl<T: Tuner> Switcher<T> {
    pub fn new(schedule: Schedule, tuner: T) -> Switcher<T> {
        Switcher {
            schedule,
            current: BTreeMap::new(),
            failed: BTreeMap::new(),
            tuner,
        }
    }

    /// Bring every scheduled CPU to the setting in force now; returns the switches made.
    pub fn tick(&mut self, clock: &dyn WallClock) -> Vec<Switch> {
        let day_s = clock.day_seconds();
        let at_unix_ns = clock.now_unix_ns();
        let want: Vec<(u32, Entry)> = self
            .schedule
            .in_force(day_s)
            .into_iter()
            .map(|(c, e)| (c, e.clone()))
            .collect();
        let mut done = Vec::new();
        for (cpu, entry) in want {
            let have = self.current.get(&cpu).cloned().unwrap_or(Action::Restore);
            if have == entry.action {
                continue;
            }
            if self.failed.get(&cpu) == Some(&(entry.at_s, entry.action.clone())) {
                continue;
            }
            let result = match &entry.action {
                Action::Governor(g) => self.tuner.set_governor(cpu, g),
                Action::Restore => self.tuner.restore(cpu),
            };
            match &result {
                Ok(_) => {
                    self.failed.remove(&cpu);
                    if entry.action == Action::Restore {
                        self.current.remove(&cpu);
                    } else {
                        self.current.insert(cpu, entry.action.clone());
                    }
                }
                Err(_) => {
                    self.failed.insert(cpu, (entry.at_s, entry.action.clone()));
                }
            }
            done.push(Switch {
                at_unix_ns,
                cpu,
                entry_time: entry.time_text(),
                action: entry.action.clone(),
                result,
            });
        }
        done
    }

    /// Put every CPU back (at exit).
    pub fn restore_all(&mut self, clock: &dyn WallClock) -> Vec<Switch> {
        let cpus: Vec<u32> = self.current.keys().copied().collect();
        cpus.into_iter()
            .map(|cpu| {
                let result = self.tuner.restore(cpu);
                self.current.remove(&cpu);
                Switch {
                    at_unix_ns: clock.now_unix_ns(),
                    cpu,
                    entry_time: "exit".into(),
                    action: Action::Restore,
                    result,
                }
            })
            .collect()
    }
}

/// Switches through latlab-tune: each CPU's governor is a temporary tuning of its own, with its
/// journal and lock in `<state dir>/monitor-schedule/cpuN`, so a switch of one CPU never
/// disturbs another CPU or a `--profile` applied beside it, and a daemon killed mid-switch
/// leaves a journal the next start restores.
pub struct GovernorTuner {
    sys: Sys,
    base: PathBuf,
    guards: BTreeMap<u32, latlab_tune::TuningGuard>,
}

impl GovernorTuner {
    pub fn new(sys: &Sys, state_dir: &Path) -> GovernorTuner {
        GovernorTuner {
            sys: sys.clone(),
            base: schedule_dir(state_dir),
            guards: BTreeMap::new(),
        }
    }

    fn dir(&self, cpu: u32) -> PathBuf {
        self.base.join(format!("cpu{cpu}"))
    }
}

/// Where the schedule's journals live.
pub fn schedule_dir(state_dir: &Path) -> PathBuf {
    state_dir.join("monitor-schedule")
}

/// The one-CPU governor profile a switch applies (written to a file, the form
/// latlab-tune reads).
fn governor_profile(dir: &Path, cpu: u32, governor: &str) -> Result<latlab_tune::Profile, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let path = dir.join(format!("schedule-cpu{cpu}.toml"));
    let text = format!(
        "description = \"latlab monitor schedule: cpu{cpu} at the {governor} governor\"\n\n\
         [cpu.{cpu}]\ngovernor = \"{governor}\"\n"
    );
    std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
    latlab_tune::Profiles::builtin()
        .resolve(&path.to_string_lossy())
        .map_err(|e| e.to_string())
}

/// The cpufreq policy directory of `cpu` and the CPUs it governs together (a governor switch
/// of one CPU switches them all); without one, the CPU's own `cpufreq` directory.
pub fn cpufreq_policy(sys: &Sys, cpu: u32) -> (String, Vec<u32>) {
    match latlab_tune::cpufreq_policy(sys, cpu) {
        Some((dir, cpus)) => (dir, cpus.cpus().to_vec()),
        None => (
            format!("/sys/devices/system/cpu/cpu{cpu}/cpufreq"),
            vec![cpu],
        ),
    }
}

fn current_governor(sys: &Sys, cpu: u32) -> String {
    let (dir, _) = cpufreq_policy(sys, cpu);
    sys.read_trim(&format!("{dir}/scaling_governor"))
        .unwrap_or_else(|_| "?".into())
}

/// Check that `cpu` can take `governor` here (read-only): the plan of the switch.
pub fn check_governor(sys: &Sys, cpu: u32, governor: &str) -> Result<String, String> {
    let (dir, shared) = cpufreq_policy(sys, cpu);
    let offered = sys
        .read_trim(&format!("{dir}/scaling_available_governors"))
        .map_err(|e| {
            format!(
                "cpu{cpu} has no cpufreq governors to switch ({e}) (accepted: CPUs with a \
                 cpufreq driver)"
            )
        })?;
    if !offered.split_whitespace().any(|g| g == governor) {
        return Err(format!(
            "cpu{cpu} does not offer the {governor} governor (offered: {offered})"
        ));
    }
    let now = current_governor(sys, cpu);
    let others: Vec<u32> = shared.into_iter().filter(|c| *c != cpu).collect();
    let note = if others.is_empty() {
        String::new()
    } else {
        format!(
            " (its cpufreq policy also governs CPUs {})",
            CpuList::from_cpus(others)
        )
    };
    Ok(format!("cpu{cpu} governor {now} -> {governor}{note}"))
}

impl Tuner for GovernorTuner {
    fn set_governor(&mut self, cpu: u32, governor: &str) -> Result<String, String> {
        let mut put_back = String::new();
        if let Some(g) = self.guards.remove(&cpu) {
            g.restore().map_err(|e| e.to_string())?;
            put_back = " (after putting back the previous switch)".into();
        }
        let before = current_governor(&self.sys, cpu);
        let dir = self.dir(cpu);
        let profile = governor_profile(&dir, cpu, governor)?;
        let guard = latlab_tune::TemporaryTuning::apply(
            &self.sys,
            &profile,
            Some(&CpuList::from_cpus(vec![cpu])),
            &dir,
        )
        .map_err(|e| e.to_string())?;
        let written = guard.applied().written.len();
        self.guards.insert(cpu, guard);
        Ok(if written == 0 {
            format!("governor already {governor}{put_back}")
        } else {
            format!("governor {before} -> {governor}{put_back}")
        })
    }

    fn restore(&mut self, cpu: u32) -> Result<String, String> {
        let Some(g) = self.guards.remove(&cpu) else {
            return Ok("nothing to put back".into());
        };
        let report = g.restore().map_err(|e| e.to_string())?;
        let lines: Vec<String> = report
            .lines
            .iter()
            .map(|l| match &l.outcome {
                latlab_tune::Outcome::Restored { from, to, .. } => {
                    format!("governor {from} -> {to}")
                }
                other => format!("{}: {other:?}", l.knob),
            })
            .collect();
        Ok(if lines.is_empty() {
            "nothing to put back".into()
        } else {
            lines.join(", ")
        })
    }
}

/// Restore the journals a killed daemon left in the schedule's directories; returns what was
/// done, one line per CPU.
pub fn restore_stale(sys: &Sys, state_dir: &Path) -> Vec<String> {
    stale(sys, state_dir)
        .into_iter()
        .map(|(name, dir)| match latlab_tune::restore(sys, &dir) {
            Ok(r) => format!(
                "{name}: restored {} value(s) a previous run left",
                r.lines.len()
            ),
            Err(e) => format!("{name}: restore failed: {e}"),
        })
        .collect()
}

/// The schedule's journals a daemon that ended without restoring left (`cpu1` and its
/// directory), in CPU order; none held by a running daemon.
pub fn stale(sys: &Sys, state_dir: &Path) -> Vec<(String, PathBuf)> {
    let Ok(entries) = std::fs::read_dir(schedule_dir(state_dir)) else {
        return Vec::new();
    };
    let mut dirs: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    dirs.sort();
    dirs.into_iter()
        .filter(|dir| {
            latlab_tune::status(sys, dir)
                .is_ok_and(|st| st.journal.is_some() && st.holder.is_none())
        })
        .map(|dir| {
            let name = dir
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            (name, dir)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};

    #[test]
    fn parses_the_seed_schedule() {
        let s = Schedule::parse("05:05 cpu2:performance; 17:05 cpu2:restore").unwrap();
        assert_eq!(s.entries.len(), 2);
        assert_eq!(s.entries[0].at_s, 5 * 3600 + 5 * 60);
        assert_eq!(s.entries[0].action, Action::Governor("performance".into()));
        assert_eq!(s.entries[1].action, Action::Restore);
        assert_eq!(s.describe(), "05:05 cpu2:performance; 17:05 cpu2:restore");
        let m = Schedule::parse("06:00:30 cpu1-2:powersave cpu3:performance;").unwrap();
        assert_eq!(m.cpus(), vec![1, 2, 3]);
    }

    #[test]
    fn bad_schedules_name_the_problem() {
        for bad in [
            "",
            "5:05 cpu2:performance",
            "25:00 cpu2:performance",
            "05:05",
            "05:05 2:performance",
            "05:05 cpu2",
            "05:05 cpux:performance",
            "05:05 cpu2:perf ormance",
            "05:05 cpu2:performance cpu2:powersave",
        ] {
            let e = Schedule::parse(bad).unwrap_err();
            assert!(e.starts_with("--schedule"), "{bad}: {e}");
        }
    }

    #[test]
    fn in_force_wraps_to_the_previous_day() {
        let s = Schedule::parse("05:05 cpu2:performance; 17:05 cpu2:restore").unwrap();
        let at = |h: u32, m: u32| s.in_force(h * 3600 + m * 60)[&2].action.clone();
        assert_eq!(at(3, 0), Action::Restore);
        assert_eq!(at(5, 5), Action::Governor("performance".into()));
        assert_eq!(at(12, 0), Action::Governor("performance".into()));
        assert_eq!(at(17, 5), Action::Restore);
        assert_eq!(at(23, 59), Action::Restore);
    }

    /// A clock the test moves.
    #[derive(Clone)]
    struct FakeClock(Arc<AtomicU64>, i64);
    impl FakeClock {
        fn at(&self, h: u64, m: u64, s: u64) {
            // 2026-03-02 00:00:00 UTC, then local time of day h:m:s with the offset.
            let midnight = 1_772_409_600u64;
            let utc = (midnight as i64 + (h * 3600 + m * 60 + s) as i64 - self.1) as u64;
            self.0.store(utc * 1_000_000_000, Ordering::Relaxed);
        }
    }
    impl WallClock for FakeClock {
        fn now_unix_ns(&self) -> u64 {
            self.0.load(Ordering::Relaxed)
        }
        fn utc_offset_s(&self, _: i64) -> i64 {
            self.1
        }
    }

    struct Tree {
        _dir: tempfile::TempDir,
        root: PathBuf,
        state: PathBuf,
    }

    fn laptop() -> Tree {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        latlab_testkit::copy_machine_to("laptop-intel", &[], &root);
        let state = dir.path().join("state");
        Tree {
            _dir: dir,
            root,
            state,
        }
    }

    fn governor(t: &Tree, cpu: u32) -> String {
        current_governor(&Sys::new(&t.root), cpu)
    }

    /// Many CPUs with one cpufreq policy per eight, numbered after their first CPU
    /// (`policy0`, `policy8`, …): a CPU far up is found in its policy with its siblings.
    #[test]
    fn a_cpu_is_found_in_sparsely_numbered_policies() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().join("sys/devices/system/cpu/cpufreq");
        for first in (0..256u32).step_by(8) {
            let policy = base.join(format!("policy{first}"));
            std::fs::create_dir_all(&policy).unwrap();
            let cpus: Vec<String> = (first..first + 8).map(|c| c.to_string()).collect();
            for (file, text) in [
                ("related_cpus", cpus.join(" ")),
                ("scaling_governor", "powersave".into()),
                (
                    "scaling_available_governors",
                    "performance powersave".into(),
                ),
            ] {
                std::fs::write(policy.join(file), format!("{text}\n")).unwrap();
            }
        }
        let sys = Sys::new(dir.path());
        let (policy, cpus) = cpufreq_policy(&sys, 250);
        assert!(policy.ends_with("/cpufreq/policy248"), "{policy}");
        assert_eq!(cpus, (248..256).collect::<Vec<u32>>());
        assert_eq!(
            check_governor(&sys, 130, "performance"),
            Ok(
                "cpu130 governor powersave -> performance (its cpufreq policy also governs \
                 CPUs 128-129,131-135)"
                    .into()
            )
        );
    }

    #[test]
    fn switches_a_fixture_governor_at_the_set_times() {
        let t = laptop();
        let sys = Sys::new(&t.root);
        assert_eq!(governor(&t, 2), "powersave");
        let clock = FakeClock(Arc::new(AtomicU64::new(0)), 3600); // UTC+1
        let schedule = Schedule::parse("05:05 cpu2:performance; 17:05 cpu2:restore").unwrap();
        let mut sw = Switcher::new(schedule, GovernorTuner::new(&sys, &t.state));

        clock.at(5, 4, 59);
        assert!(sw.tick(&clock).is_empty(), "nothing before 05:05");
        assert_eq!(governor(&t, 2), "powersave");

        clock.at(5, 5, 0);
        let s = sw.tick(&clock);
        assert_eq!(s.len(), 1, "{s:?}");
        assert_eq!(s[0].cpu, 2);
        assert_eq!(s[0].result, Ok("governor powersave -> performance".into()));
        assert_eq!(governor(&t, 2), "performance");
        assert_eq!(governor(&t, 1), "powersave", "other CPUs untouched");
        // Journaled while in force.
        assert!(schedule_dir(&t.state).join("cpu2").exists());
        let st = latlab_tune::status(&sys, &schedule_dir(&t.state).join("cpu2")).unwrap();
        assert!(st.journal.is_some());

        clock.at(12, 0, 0);
        assert!(sw.tick(&clock).is_empty(), "already in force");

        clock.at(17, 5, 0);
        let s = sw.tick(&clock);
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].action, Action::Restore);
        assert_eq!(governor(&t, 2), "powersave");
        assert!(
            s[0].text().contains("performance -> powersave"),
            "{}",
            s[0].text()
        );

        // Starting mid-day applies what is in force, and exit puts it back.
        let mut sw2 = Switcher::new(
            Schedule::parse("05:05 cpu2:performance; 17:05 cpu2:restore").unwrap(),
            GovernorTuner::new(&sys, &t.state),
        );
        clock.at(9, 30, 0);
        assert_eq!(sw2.tick(&clock).len(), 1);
        assert_eq!(governor(&t, 2), "performance");
        let back = sw2.restore_all(&clock);
        assert_eq!(back.len(), 1);
        assert_eq!(governor(&t, 2), "powersave");
    }

    #[test]
    fn an_unknown_governor_is_refused_by_the_check() {
        let t = laptop();
        let sys = Sys::new(&t.root);
        assert!(check_governor(&sys, 2, "performance").is_ok());
        let e = check_governor(&sys, 2, "ondemand").unwrap_err();
        assert!(e.contains("offered: performance powersave"), "{e}");
    }
}
