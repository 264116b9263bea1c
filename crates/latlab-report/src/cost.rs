//! What a run cost and what ran beside it: the samplers' summary (power, frequency, idle
//! residency, interrupts and SMIs, utilisation, temperatures) and the loads' throughput, as text.

use std::fmt::Write;

use latlab_model::load::Loads;
use latlab_model::samples::Samples;
use latlab_model::system::Field;
use latlab_model::units::format_duration;

use latlab_model::units::format_rate;

/// The sampler summary: power sources, one row per CPU, thermal zones.
pub fn samples_text(s: &Samples) -> String {
    let mut out = String::new();
    let secs: f64 = s.series.iter().map(|x| x.dt_ns).sum::<u64>() as f64 / 1e9;
    let _ = writeln!(
        out,
        "samplers: every {} for {secs:.1} s ({}), sampler CPU time {:.2} ms ({:.3} % of a CPU)",
        format_duration(s.period_ns),
        latlab_model::units::plural(s.series.len() as u64, "sample", "samples"),
        s.sampler_cpu_time_ns as f64 / 1e6,
        if secs > 0.0 {
            s.sampler_cpu_time_ns as f64 / 1e9 / secs * 100.0
        } else {
            0.0
        }
    );
    match &s.power_sources {
        Field::Value(sources) => {
            for p in sources {
                let w = p.avg_w.map_or("-".into(), |w| format!("{w:.2} W"));
                let j = p.energy_j.map_or("-".into(), |j| format!("{j:.1} J"));
                let wraps = if p.wraps > 0 {
                    format!(" ({} counter wraps)", p.wraps)
                } else {
                    String::new()
                };
                let _ = writeln!(out, "power:    {:<32} {w:>10} {j:>12}{wraps}", p.name);
            }
        }
        Field::Unavailable { unavailable } => {
            let _ = writeln!(out, "power:    unavailable: {unavailable}");
        }
    }
    match &s.frequency {
        Field::Unavailable { unavailable } => {
            let _ = writeln!(out, "frequency: unavailable: {unavailable}");
        }
        Field::Value(source) => {
            let _ = writeln!(out, "frequency: {source}");
        }
    }
    // SMIs: a column beside the interrupts where they were counted, else why not (results from
    // before latlab counted them say nothing).
    match &s.smi {
        Some(Field::Unavailable { unavailable }) => {
            let _ = writeln!(out, "smi:      unavailable: {unavailable}");
        }
        Some(Field::Value(source)) => {
            let _ = writeln!(out, "smi:      {source}, counted over the run");
        }
        None => {}
    }
    // No idle state on any CPU (no cpuidle driver): said, as the other sources are.
    let no_idle = s.idle_states.iter().all(|i| i.states.is_empty());
    if no_idle {
        let _ = writeln!(
            out,
            "idle:     unavailable: no CPU lists cpuidle states (no cpuidle driver here)"
        );
    }
    let smi_column = s.cpus.iter().any(|c| c.smis.is_some());
    let smi_head = if smi_column {
        format!("{:>6}", "SMIs")
    } else {
        String::new()
    };
    // A run that ended before the samplers read the CPUs (a --break at once) has no per-CPU
    // figures: no header over no rows.
    if s.cpus.is_empty() {
        out.push_str("per cpu:  unavailable: no reading of the CPUs (the run ended before one)\n");
    } else {
        let _ = writeln!(
            out,
            "{:<6}{:>10}{:>8}{:>8}{:>10}{smi_head}{:>10}  idle residency",
            "cpu", "MHz", "util%", "steal%", "irq/s", "softirq/s"
        );
    }
    for c in &s.cpus {
        let opt = |v: Option<f64>, prec: usize| v.map_or("-".into(), |v| format!("{v:.prec$}"));
        let mhz = c.avg_freq_khz.map(|k| k as f64 / 1000.0);
        let names = s
            .idle_states
            .iter()
            .find(|i| i.cpu == c.cpu)
            .map(|i| i.states.as_slice())
            .unwrap_or(&[]);
        let mut idle: Vec<String> = names
            .iter()
            .zip(&c.idle_residency_pct)
            .map(|(n, pct)| format!("{n} {pct:.1}%"))
            .collect();
        if no_idle {
            idle.push("-".into());
        }
        let smis = if smi_column {
            format!("{:>6}", c.smis.map_or("-".into(), |n| n.to_string()))
        } else {
            String::new()
        };
        let _ = writeln!(
            out,
            "{:<6}{:>10}{:>8}{:>8}{:>10}{smis}{:>10}  {}",
            format!("cpu{}", c.cpu),
            opt(mhz, 0),
            opt(c.util_pct, 1),
            opt(c.steal_pct, 1),
            opt(c.irqs_per_s, 0),
            opt(c.softirqs_per_s, 0),
            idle.join(", ")
        );
    }
    for t in &s.thermal {
        let _ = writeln!(
            out,
            "thermal:  {:<20} avg {:.1} °C, max {:.1} °C",
            t.zone, t.avg_c, t.max_c
        );
    }
    if let Some(why) = &s.thermal_unavailable {
        let _ = writeln!(out, "thermal:  unavailable: {why}");
    }
    out
}

/// One line per load with its throughput, and the schedule's phases.
pub fn loads_text(loads: &Loads) -> String {
    let mut out = String::new();
    for l in &loads.reports {
        // Several rates are told apart by what each counts.
        let several = l.throughput.len() > 1;
        let rates: Vec<String> = l
            .throughput
            .iter()
            .map(|t| {
                let what = if several {
                    format!(" ({})", t.what)
                } else {
                    String::new()
                };
                format!("{} {}{what}", format_rate(t.rate), t.unit)
            })
            .collect();
        let _ = writeln!(
            out,
            "load:     {:<28} {} worker(s), {:.1} s: {}",
            l.spec,
            l.workers,
            l.elapsed_ns as f64 / 1e9,
            if rates.is_empty() {
                "no throughput counted".into()
            } else {
                rates.join(", ")
            }
        );
        for w in &l.warnings {
            let _ = writeln!(out, "          warning: {w}");
        }
    }
    for p in &loads.phases {
        let _ = writeln!(
            out,
            "phase {}:  {:<20} {:.1} s – {:.1} s",
            p.index,
            p.spec,
            p.start_ns as f64 / 1e9,
            p.end_ns as f64 / 1e9
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use latlab_model::load::{LoadReport, Throughput};
    use latlab_model::samples::{CpuIdleStates, CpuSummary, PowerSource};

    #[test]
    fn samples_and_loads_render() {
        let s = Samples {
            period_ns: 1_000_000_000,
            sampler_cpus: vec![0],
            sampler_cpu_time_ns: 2_000_000,
            idle_states: vec![CpuIdleStates {
                cpu: 1,
                states: vec!["POLL".into(), "C6".into()],
            }],
            power_sources: Field::Value(vec![PowerSource {
                name: "rapl:package-0".into(),
                avg_w: Some(4.5),
                energy_j: Some(45.0),
                wraps: 1,
            }]),
            thermal_zones: vec![],
            thermal_unavailable: None,
            frequency: Field::unavailable("no cpufreq"),
            smi: None,
            cpus: vec![CpuSummary {
                cpu: 1,
                avg_freq_khz: Some(2_400_000),
                util_pct: Some(12.5),
                steal_pct: Some(0.0),
                irqs_per_s: Some(250.0),
                softirqs_per_s: None,
                smis: None,
                idle_residency_pct: vec![0.5, 80.25],
                idle_entries_per_s: vec![1.0, 2.0],
            }],
            thermal: vec![],
            series: vec![],
        };
        let t = samples_text(&s);
        assert!(t.contains("rapl:package-0"), "{t}");
        assert!(t.contains("4.50 W") && t.contains("45.0 J") && t.contains("1 counter wraps"));
        assert!(t.contains("frequency: unavailable: no cpufreq"));
        assert!(
            t.contains("cpu1") && t.contains("2400") && t.contains("C6 80.2%"),
            "{t}"
        );
        // A result from before SMIs were counted: no SMI line, no column.
        assert!(!t.contains("smi") && !t.contains("SMIs"), "{t}");
        let header = "cpu          MHz   util%  steal%     irq/s softirq/s  idle residency";
        assert!(t.contains(header), "{t}");
        // No reading of the CPUs: said, and no header over no rows.
        let none = samples_text(&Samples {
            cpus: vec![],
            ..s.clone()
        });
        assert!(
            none.contains("per cpu:  unavailable: no reading of the CPUs")
                && !none.contains(header),
            "{none}"
        );
        // Counted: a column beside the interrupts.
        let mut counted = s.clone();
        counted.smi = Some(Field::Value("MSR_SMI_COUNT (0x34)".into()));
        counted.cpus[0].smis = Some(3);
        let t = samples_text(&counted);
        assert!(
            t.contains("smi:      MSR_SMI_COUNT (0x34), counted over the run"),
            "{t}"
        );
        assert!(
            t.contains(
                "cpu          MHz   util%  steal%     irq/s  SMIs softirq/s  idle residency"
            ),
            "{t}"
        );
        assert!(
            t.contains("cpu1        2400    12.5     0.0       250     3         -  POLL 0.5%"),
            "{t}"
        );
        // Not countable: why, and no column of zeros.
        let mut missing = s.clone();
        missing.smi = Some(Field::unavailable(
            "/dev/cpu/0/msr absent (msr module not loaded)",
        ));
        let t = samples_text(&missing);
        assert!(
            t.contains("smi:      unavailable: /dev/cpu/0/msr absent (msr module not loaded)"),
            "{t}"
        );
        assert!(t.contains(header) && !t.contains("SMIs"), "{t}");
        assert!(!t.contains("idle:"), "idle states listed: {t}");
        // No CPU lists idle states (no cpuidle driver): said, and a dash in the column.
        let mut no_idle = s.clone();
        no_idle
            .idle_states
            .iter_mut()
            .for_each(|i| i.states.clear());
        no_idle.cpus[0].idle_residency_pct.clear();
        let t = samples_text(&no_idle);
        assert!(
            t.contains(
                "idle:     unavailable: no CPU lists cpuidle states (no cpuidle driver here)"
            ),
            "{t}"
        );
        assert!(t.contains("         -  -\n"), "{t}");
        let loads = Loads {
            reports: vec![LoadReport {
                spec: "matrix".into(),
                kind: "matrix".into(),
                cpus: None,
                workers: 2,
                started_ns: 0,
                elapsed_ns: 2_000_000_000,
                throughput: vec![Throughput {
                    what: "multiplies".into(),
                    unit: "ops/s".into(),
                    rate: 123_456.0,
                    total: 246_912.0,
                }],
                warnings: vec!["stopped early".into()],
                failed: None,
            }],
            phases: vec![],
        };
        let mut loads = loads;
        let t = loads_text(&loads);
        assert!(
            t.contains("123k ops/s\n") && t.contains("2 worker(s)"),
            "{t}"
        );
        assert!(t.contains("warning: stopped early"));
        // Two rates of one unit say what each counts.
        let mut flops = loads.reports[0].throughput[0].clone();
        flops.what = "floating-point operations".into();
        loads.reports[0].throughput.push(flops);
        let t = loads_text(&loads);
        assert!(
            t.contains("123k ops/s (multiplies), 123k ops/s (floating-point operations)"),
            "{t}"
        );
    }
}
