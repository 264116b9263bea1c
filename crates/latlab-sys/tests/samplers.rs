//! Samplers against copies of the fixture trees, changed between two snapshots the way the
//! kernel changes them, and one short run on the live system.
#![allow(clippy::unwrap_used)]

use latlab_model::samples::{Sample, Samples};
use latlab_sys::Sys;
use latlab_sys::sample::{
    Sampler, SamplerThread, counter_delta, cpuinfo_mhz, parse_per_cpu_table, parse_perf_event,
    parse_stat,
};
use std::time::{Duration, Instant};

const SEC: u64 = 1_000_000_000;

/// A writable copy of a fixture tree.
fn tree(name: &str) -> (tempfile::TempDir, Sys) {
    let dir = latlab_testkit::copy_machine(name, &[]);
    let sys = Sys::new(dir.path());
    (dir, sys)
}

fn write(sys: &Sys, rel: &str, text: &str) {
    std::fs::write(sys.path(rel), text).unwrap();
}

fn read_u64(sys: &Sys, rel: &str) -> u64 {
    sys.read_trim(rel).unwrap().parse().unwrap()
}

fn bump(sys: &Sys, rel: &str, by: u64) {
    let v = read_u64(sys, rel);
    write(sys, rel, &format!("{}\n", v + by));
}

/// Add `by` to every per-CPU column of one row of /proc/interrupts or /proc/softirqs.
fn bump_table_row(sys: &Sys, rel: &str, row: &str, by: &[u64]) {
    let text = sys.read(rel).unwrap();
    let mut out = String::new();
    for line in text.lines() {
        if line.trim_start().starts_with(row) {
            let (label, rest) = line.split_once(':').unwrap();
            let mut fields: Vec<String> = rest.split_whitespace().map(String::from).collect();
            for (i, b) in by.iter().enumerate() {
                let v: u64 = fields[i].parse().unwrap();
                fields[i] = (v + b).to_string();
            }
            out.push_str(&format!("{label}: {}\n", fields.join(" ")));
        } else {
            out.push_str(line);
            out.push('\n');
        }
    }
    write(sys, rel, &out);
}

/// Add to one CPU's /proc/stat fields (user, idle, steal).
fn bump_stat(sys: &Sys, cpu: usize, user: u64, idle: u64, steal: u64) {
    let text = sys.read("/proc/stat").unwrap();
    let label = format!("cpu{cpu}");
    let out: Vec<String> = text
        .lines()
        .map(|line| {
            let mut f: Vec<String> = line.split_whitespace().map(String::from).collect();
            if f.first() == Some(&label) {
                for (i, by) in [(1, user), (4, idle), (8, steal)] {
                    let v: u64 = f[i].parse().unwrap();
                    f[i] = (v + by).to_string();
                }
                f.join(" ")
            } else {
                line.to_string()
            }
        })
        .collect();
    write(sys, "/proc/stat", &(out.join("\n") + "\n"));
}

#[test]
fn laptop_rapl_wraps_idle_interrupts_stat_frequency_battery() {
    let (_dir, sys) = tree("laptop-intel");
    let rapl = "/sys/class/powercap/intel-rapl:0";
    let max = read_u64(&sys, &format!("{rapl}/max_energy_range_uj"));
    // 1000 µJ before the wrap, 2_000_000 after it (+1 for the step from max to 0).
    write(
        &sys,
        &format!("{rapl}/energy_uj"),
        &format!("{}\n", max - 1000),
    );

    let mut s = Sampler::new(&sys, SEC);
    s.start(10 * SEC);
    write(&sys, &format!("{rapl}/energy_uj"), "1999999\n");
    let cpu1 = "/sys/devices/system/cpu/cpu1/cpuidle";
    bump(&sys, &format!("{cpu1}/state3/time"), 250_000); // 250 ms in C6 over 1 s
    bump(&sys, &format!("{cpu1}/state3/usage"), 40);
    bump_table_row(&sys, "/proc/interrupts", "0", &[5, 7, 0, 0]);
    bump_table_row(&sys, "/proc/softirqs", "TIMER", &[100, 250, 0, 0]);
    bump_stat(&sys, 2, 30, 60, 10);
    write(
        &sys,
        "/sys/devices/system/cpu/cpu2/cpufreq/scaling_cur_freq",
        "2400000\n",
    );
    let sample = s.sample(11 * SEC).unwrap().clone();
    assert_eq!(sample.at_ns, 11 * SEC);
    assert_eq!(sample.dt_ns, SEC);

    let c1 = &sample.cpus[1];
    assert!(c1.online);
    assert_eq!(c1.idle_time_us[3], 250_000);
    assert_eq!(c1.idle_usage[3], 40);
    assert_eq!(c1.idle_time_us[0], 0);
    assert_eq!(c1.irqs, Some(7));
    assert_eq!(c1.softirqs, Some(250));
    assert_eq!(sample.cpus[0].irqs, Some(5));
    assert_eq!(sample.cpus[2].util_pct, Some(40.0));
    assert_eq!(sample.cpus[2].steal_pct, Some(10.0));
    assert_eq!(sample.cpus[2].freq_khz, Some(2_400_000));

    let out = s.finish();
    let names = &out.idle_states[1].states;
    assert_eq!(names, &["POLL", "C1", "C1E", "C6", "C10"]);
    let sources = out.power_sources.value().unwrap();
    let pkg = sources
        .iter()
        .find(|p| p.name.starts_with("rapl:package-0"))
        .unwrap();
    assert_eq!(pkg.wraps, 1);
    let joules = pkg.energy_j.unwrap();
    assert!((joules - 2.001).abs() < 1e-9, "{joules}");
    assert!((pkg.avg_w.unwrap() - 2.001).abs() < 1e-9);
    // The unchanged subzones read 0 W, not nothing.
    assert!(
        sources
            .iter()
            .filter(|p| p.name.starts_with("rapl:"))
            .count()
            >= 4
    );
    let bat = sources.iter().find(|p| p.name == "battery:BAT0").unwrap();
    assert!((bat.avg_w.unwrap() - 7.436).abs() < 1e-9);
    let c1 = &out.cpus[1];
    assert!((c1.idle_residency_pct[3] - 25.0).abs() < 1e-9);
    assert!((c1.idle_entries_per_s[3] - 40.0).abs() < 1e-9);
    assert_eq!(out.cpus[2].avg_freq_khz, Some(2_400_000));
    assert_eq!(out.cpus[1].softirqs_per_s, Some(250.0));
    assert_eq!(out.thermal.len(), 1);
    assert_eq!(out.thermal_unavailable, None);
    assert_eq!(out.frequency.value().unwrap(), "cpufreq scaling_cur_freq");
}

#[test]
fn a_cpu_going_offline_is_marked_and_left_out_of_the_summary() {
    let (_dir, sys) = tree("laptop-intel");
    let mut s = Sampler::new(&sys, SEC);
    s.start(0);
    bump_stat(&sys, 3, 50, 50, 0);
    s.sample(SEC).unwrap();
    // CPU 3 goes offline: gone from the online list, /proc/stat and the interrupt columns.
    write(&sys, "/sys/devices/system/cpu/online", "0-2\n");
    let stat = sys.read("/proc/stat").unwrap();
    let stat: Vec<&str> = stat.lines().filter(|l| !l.starts_with("cpu3 ")).collect();
    write(&sys, "/proc/stat", &(stat.join("\n") + "\n"));
    for table in ["/proc/interrupts", "/proc/softirqs"] {
        let text = sys.read(table).unwrap();
        let lines: Vec<String> = text
            .lines()
            .enumerate()
            .map(|(i, l)| {
                if i == 0 {
                    l.replace("CPU3", "")
                } else {
                    let (label, rest) = l.split_once(':').unwrap_or((l, ""));
                    let f: Vec<&str> = rest.split_whitespace().collect();
                    if f.len() >= 4 && f[..4].iter().all(|x| x.parse::<u64>().is_ok()) {
                        format!("{label}: {} {}", f[..3].join(" "), f[4..].join(" "))
                    } else {
                        l.to_string()
                    }
                }
            })
            .collect();
        write(&sys, table, &(lines.join("\n") + "\n"));
    }
    bump_stat(&sys, 0, 10, 90, 0);
    let second = s.sample(2 * SEC).unwrap().clone();
    assert!(!second.cpus[3].online);
    assert_eq!(second.cpus[3].util_pct, None);
    assert!(second.cpus[0].online);
    assert_eq!(second.cpus[0].util_pct, Some(10.0));
    // Interrupt columns follow the header, so CPU 2 still reads its own column.
    assert_eq!(second.cpus[2].irqs, Some(0));
    let out = s.finish();
    let c3 = out.cpus.iter().find(|c| c.cpu == 3).unwrap();
    assert_eq!(c3.util_pct, Some(50.0), "only the online second counts");
    assert_eq!(c3.irqs_per_s, Some(0.0));
}

#[test]
fn arm_board_hwmon_power_and_cpufreq_dt() {
    let (_dir, sys) = tree("arm-board");
    let mut s = Sampler::new(&sys, SEC);
    s.start(0);
    write(&sys, "/sys/class/hwmon/hwmon0/power1_input", "4000000\n");
    s.sample(2 * SEC).unwrap();
    let out = s.finish();
    let sources = out.power_sources.value().unwrap();
    assert_eq!(sources.len(), 1, "{sources:?}");
    assert_eq!(sources[0].name, "hwmon:ina219/power1");
    assert!((sources[0].avg_w.unwrap() - 4.0).abs() < 1e-9);
    assert!((sources[0].energy_j.unwrap() - 8.0).abs() < 1e-9);
    assert_eq!(out.idle_states[0].states, ["WFI", "cpu-sleep-0"]);
    assert!(out.cpus[0].avg_freq_khz.is_some());
}

#[test]
fn amd_desktop_rapl_package_only() {
    let (_dir, sys) = tree("amd-desktop");
    let mut s = Sampler::new(&sys, SEC);
    s.start(0);
    bump(
        &sys,
        "/sys/class/powercap/intel-rapl:0/energy_uj",
        45_000_000,
    );
    s.sample(SEC).unwrap();
    let out = s.finish();
    let sources = out.power_sources.value().unwrap();
    assert_eq!(sources.len(), 1);
    assert_eq!(sources[0].wraps, 0);
    assert!((sources[0].avg_w.unwrap() - 45.0).abs() < 1e-9);
}

/// A meter whose energy counter stands still (a virtual machine's perf power events) measures
/// nothing: no reading, not 0 W, and with no other meter the run says why it has no power.
#[test]
fn an_energy_counter_that_stands_still_gives_no_reading() {
    let (_dir, sys) = tree("amd-desktop");
    let mut s = Sampler::new(&sys, SEC);
    s.start(0);
    let sample = s.sample(SEC).unwrap().clone();
    assert_eq!(sample.power_w, [None]);
    bump(
        &sys,
        "/sys/class/powercap/intel-rapl:0/energy_uj",
        30_000_000,
    );
    s.sample(2 * SEC).unwrap();
    s.sample(3 * SEC).unwrap();
    let out = s.finish();
    // Counted over the one second it moved in.
    let sources = out.power_sources.value().unwrap();
    assert!((sources[0].avg_w.unwrap() - 30.0).abs() < 1e-9);

    let mut s = Sampler::new(&sys, SEC);
    s.start(0);
    s.sample(2 * SEC).unwrap();
    let out = s.finish();
    let why = out.power_sources.reason().unwrap();
    assert_eq!(
        why,
        "no power meter gave a reading in 2.0 s: rapl:package-0(intel-rapl:0) (its energy counter \
         stood still)"
    );
}

#[test]
fn vm_has_no_power_source_and_says_why() {
    let (_dir, sys) = tree("vm");
    let mut s = Sampler::new(&sys, SEC);
    s.start(0);
    s.sample(SEC).unwrap();
    let out = s.finish();
    let why = out.power_sources.reason().unwrap();
    assert!(why.contains("no RAPL zones"), "{why}");
    assert!(why.contains("no hwmon power sensors"), "{why}");
    assert!(why.contains("no battery"), "{why}");
    assert!(out.frequency.value().unwrap().contains("/proc/cpuinfo"));
    assert_eq!(out.idle_states[0].states, ["POLL", "haltpoll idle"]);
    assert_eq!(out.cpus[0].avg_freq_khz, Some(2_600_000));
    // No thermal zone either: said, as power is (it was only absent).
    assert!(out.thermal.is_empty());
    assert_eq!(
        out.thermal_unavailable.as_deref(),
        Some("no thermal zone with a readable temp under /sys/class/thermal")
    );
    let json = serde_json::to_value(&out).unwrap();
    assert!(json["power_sources"]["unavailable"].is_string());
    assert!(json["thermal_unavailable"].is_string());
}

#[test]
fn smis_per_interval_from_fake_msr_files() {
    let (dir, sys) = tree("laptop-intel");
    let smi = |cpu: u32, count: u64| {
        latlab_sys::fixture::write_msr(dir.path(), cpu, latlab_sys::MSR_SMI_COUNT, count).unwrap();
    };
    for cpu in 0..4 {
        smi(cpu, 100);
    }
    // CPU 3's 32-bit counter is about to wrap.
    smi(3, u64::from(u32::MAX) - 1);
    let mut s = Sampler::new(&sys, SEC);
    s.start(0);
    smi(0, 103);
    smi(1, 101);
    smi(3, 2); // 2 to wrap to 0, then 2 more
    let first = s.sample(SEC).unwrap().clone();
    let smis: Vec<Option<u64>> = first.cpus.iter().map(|c| c.smis).collect();
    assert_eq!(smis, [Some(3), Some(1), Some(0), Some(4)]);
    assert_eq!(first.cpus[0].irqs, Some(0), "beside the interrupts");
    smi(0, 104);
    let second = s.sample(2 * SEC).unwrap().clone();
    assert_eq!(second.cpus[0].smis, Some(1));
    assert_eq!(second.cpus[1].smis, Some(0));
    let out = s.finish();
    assert_eq!(
        out.smi.as_ref().unwrap().value().map(String::as_str),
        Some(latlab_sys::SMI_SOURCE)
    );
    let totals: Vec<Option<u64>> = out.cpus.iter().map(|c| c.smis).collect();
    assert_eq!(totals, [Some(4), Some(1), Some(0), Some(4)]);
    let json = serde_json::to_value(&out).unwrap();
    assert_eq!(json["series"][0]["cpus"][0]["smis"], 3);
}

#[test]
fn without_msr_files_smis_are_unavailable_not_zero() {
    for name in ["vm", "arm-board"] {
        let (_dir, sys) = tree(name);
        let mut s = Sampler::new(&sys, SEC);
        s.start(0);
        let sample = s.sample(SEC).unwrap().clone();
        assert!(sample.cpus.iter().all(|c| c.smis.is_none()), "{name}");
        let out = s.finish();
        assert_eq!(
            out.smi.unwrap().reason(),
            Some("/dev/cpu/0/msr absent (msr module not loaded, or not an x86 CPU)"),
            "{name}"
        );
        assert!(out.cpus.iter().all(|c| c.smis.is_none()), "{name}");
    }
}

#[test]
fn parsers() {
    assert_eq!(counter_delta(10, 25, 100), (15, false));
    assert_eq!(counter_delta(95, 4, 100), (10, true));
    let t = "           CPU0       CPU2\n  0:  3  4  IO-APIC timer\nNMI: 1 1 Non-maskable\nERR:  7\nMIS:  0\n";
    let m = parse_per_cpu_table(t);
    assert_eq!(m.get(&0), Some(&4));
    assert_eq!(m.get(&2), Some(&5));
    assert_eq!(m.len(), 2);
    assert_eq!(parse_perf_event("event=0x02\n"), Some(2));
    assert_eq!(parse_perf_event("event=3,umask=0x1"), Some(3));
    assert_eq!(parse_perf_event("umask=1"), None);
    let stat = parse_stat("cpu  1 2 3 4 5 6 7 8 9 10\ncpu1 1 2 3 4 5 6 7 8 0 0\nintr 5\n");
    assert_eq!(stat.len(), 1);
    assert_eq!(stat[&1], [1, 2, 3, 4, 5, 6, 7, 8]);
    let mhz = cpuinfo_mhz(
        "processor\t: 0\ncpu MHz\t\t: 2600.000\n\nprocessor\t: 1\ncpu MHz\t\t: 1200.5\n",
    );
    assert_eq!(mhz[&1], 1200.5);
}

#[test]
fn live_sampler_thread() {
    let sys = Sys::new("/");
    let t = SamplerThread::spawn(&sys, Duration::from_millis(100), &[0], Instant::now()).unwrap();
    std::thread::sleep(Duration::from_millis(350));
    let out = t.stop();
    // Three full periods and the partial last one.
    assert!(out.series.len() >= 3, "{}", out.series.len());
    let online = sys.online_cpus().unwrap();
    let last = out.series.last().unwrap();
    assert_eq!(
        last.cpus.iter().filter(|c| c.online).count(),
        online.cpus().len()
    );
    for c in &out.cpus {
        let u = c.util_pct.unwrap();
        assert!((0.0..=100.0).contains(&u), "{u}");
    }
    let covered: u64 = out.series.iter().map(|s| s.dt_ns).sum();
    assert!(covered >= 340_000_000, "{covered}");
    assert!(out.sampler_cpu_time_ns > 0);
    assert_eq!(out.sampler_cpus, [0]);
}

#[test]
fn streamed_samples_summarize_like_the_run() {
    let (_dir, sys) = tree("laptop-intel");
    let mut s = Sampler::new(&sys, SEC);
    s.start(0);
    let rapl = "/sys/class/powercap/intel-rapl:0/energy_uj";
    let mut window = Vec::new();
    for i in 1..=4u64 {
        // 10 W in the first two seconds, 20 W in the next two.
        bump(&sys, rapl, if i <= 2 { 10_000_000 } else { 20_000_000 });
        bump_stat(&sys, 0, i * 10, 100 - i * 10, 0);
        window.push(s.sample(i * SEC).unwrap().clone());
    }
    let names = s.power_names();
    let pkg = names
        .iter()
        .position(|n| n.starts_with("rapl:package-0"))
        .unwrap();
    let first = latlab_sys::sample::summarize(&window[..2]);
    let second = latlab_sys::sample::summarize(&window[2..]);
    let all = latlab_sys::sample::summarize(&window);
    assert!((first.power[pkg].0.unwrap() - 10.0).abs() < 1e-9);
    assert!((second.power[pkg].1.unwrap() - 40.0).abs() < 1e-9);
    assert!((all.power[pkg].1.unwrap() - 60.0).abs() < 1e-9);
    assert!((first.cpus[0].util_pct.unwrap() - 15.0).abs() < 1e-9);
    assert!((all.cpus[0].util_pct.unwrap() - 25.0).abs() < 1e-9);
    let out = s.finish();
    let energy = out.power_sources.value().unwrap()[pkg].energy_j.unwrap();
    assert!((energy - 60.0).abs() < 1e-9);
}

/// A sampler of this machine every `period` for `run`, streaming its samples (`keep_series`
/// as the sampler takes it): what it returned and what it sent.
fn stream_live(period: Duration, keep_series: bool, run: Duration) -> (Samples, Vec<Sample>) {
    let (tx, rx) = std::sync::mpsc::channel();
    let sys = Sys::new("/");
    let t =
        SamplerThread::spawn_streaming(&sys, period, &[], Instant::now(), Some(tx), keep_series)
            .unwrap();
    std::thread::sleep(run);
    let out = t.stop();
    (out, rx.try_iter().collect())
}

#[test]
fn live_streaming_sends_every_full_period() {
    let (out, sent) = stream_live(Duration::from_millis(100), true, Duration::from_millis(250));
    assert_eq!(
        sent.len(),
        out.series.len() - 1,
        "all but the final partial one"
    );
    assert_eq!(sent[0], out.series[0]);
}

#[test]
fn a_sampler_without_end_keeps_only_its_last_sample() {
    // The monitor's sampler runs for months: every sample goes out, none piles up.
    let (out, sent) = stream_live(Duration::from_millis(10), false, Duration::from_millis(300));
    let sent = sent.len();
    assert!(sent >= 5, "{sent} samples sent");
    assert_eq!(
        out.series.len(),
        1,
        "only the last (partial) period is kept"
    );
}

#[test]
fn a_summary_names_its_thermal_zones_and_leaves_out_those_without_readings() {
    let summary = latlab_sys::sample::SeriesSummary {
        temps: vec![Some((41.5, 47.0)), None, Some((60.0, 72.5))],
        ..Default::default()
    };
    let zones: Vec<String> = ["x86_pkg_temp", "acpitz", "nvme"]
        .map(String::from)
        .to_vec();
    let t = summary.thermal(&zones);
    let got: Vec<(&str, f64, f64)> = t
        .iter()
        .map(|z| (z.zone.as_str(), z.avg_c, z.max_c))
        .collect();
    assert_eq!(got, [("x86_pkg_temp", 41.5, 47.0), ("nvme", 60.0, 72.5)]);
}
