//! Bad input, for every command, in one table: one line on standard error that names the problem
//! and the accepted form, exit code 2, nothing on standard output, and nothing touched. Every
//! row runs against a copy of a fixture tree (`--sysroot`), with the state directory and the
//! working directory beside it; after the table, that whole directory and the tracefs mounts are
//! as they were. What each command does with good input is in its own test file.
#![allow(clippy::unwrap_used)]

use latlab_testkit::process::output_within;
use latlab_testkit::{latlab, stderr, tracefs_mounts};
use std::time::Duration;

/// The rows: the arguments (after `--sysroot laptop` unless a row names its own tree) and what the
/// line must say.
const ROWS: &[(&[&str], &str)] = &[
    // measure: the measuring options, its outputs and its limits.
    (&["measure", "-i", "0"], "--interval 0s: below the minimum"),
    (&["measure", "-i", "500ns"], "below the minimum"),
    (&["measure", "-i", "1x"], "--interval: unknown unit \"x\""),
    (&["measure", "-p", "0"], "--priority 0: out of range"),
    (&["measure", "-p", "100"], "--priority 100: out of range"),
    (&["measure", "-p", "1.5"], "--priority \"1.5\""),
    (
        &["measure", "-a", "999"],
        "--cpus 999: CPU 999 is absent or offline",
    ),
    (&["measure", "-a", "3-1"], "range \"3-1\" runs backwards"),
    (&["measure", "-D", "soon"], "--duration: unknown unit"),
    (
        &[
            "measure",
            "-D",
            "2s",
            "--load-schedule",
            "idle 2s, memory 2s",
        ],
        "--load-schedule: its phases last 4s, longer than --duration 2s",
    ),
    // `load` refuses it too (it cut the schedule short without a word).
    (
        &["load", "--schedule", "cpu 2s, idle 2s", "-D", "1s"],
        "--schedule: its phases last 4s, longer than --duration 1s",
    ),
    (
        &["measure", "--window", "500us"],
        "--window 500us: too short (accepted: 1ms or more)",
    ),
    (
        &["measure", "--method", "sleepy"],
        "unknown method \"sleepy\"",
    ),
    (&["measure", "--policy", "fast"], "unknown policy \"fast\""),
    (
        &["measure", "--waker-cpu", "1"],
        "--waker-cpu 1: method clock-nanosleep has no waker thread",
    ),
    (&["measure", "--clock", "tai"], "unknown clock \"tai\""),
    (&["measure", "--policy", "deadline"], "needs --dl-runtime"),
    (
        &[
            "measure",
            "--policy",
            "deadline",
            "--dl-runtime",
            "2ms",
            "--dl-period",
            "1ms",
        ],
        "inconsistent deadline parameters",
    ),
    (
        &[
            "measure",
            "--policy",
            "deadline",
            "--dl-runtime",
            "100us",
            "-m",
            "futex",
        ],
        "-m futex: its waker thread is pinned",
    ),
    // A real-time load that outranks the measuring thread on its CPU: it never ran, past -D. At
    // the same priority a fifo hog never yields; an rr one does (its time slice ends).
    (
        &[
            "measure",
            "-a",
            "0",
            "-p",
            "50",
            "-D",
            "1s",
            "--load",
            "rt-hog:threads=1,priority=50,policy=fifo",
            "--load-cpus",
            "0",
        ],
        "its threads at priority 50 under fifo, which never yields to its equal, keep CPU 0 busy, \
         where cpu0 would run at fifo 50, and it would never run",
    ),
    (&["measure", "--sample-period", "1ms"], "too short"),
    (&["measure", "--sample-period", "often"], "--sample-period"),
    (
        &["measure", "--histfile", "h.txt", "--histfile-range", "0"],
        "--histfile-range 0",
    ),
    // An option that does nothing without another: the other was forgotten.
    (
        &["measure", "--load-cpus", "1"],
        "--load-cpus: no load to place on them (accepted: with --load or --load-schedule)",
    ),
    (
        &["measure", "--spike-limit", "5"],
        "--spike-limit: no spikes are kept without --spike (accepted: with --spike DUR",
    ),
    (
        &["measure", "-m", "busy", "-i", "5ms"],
        "--interval: the busy method spins without a period (every gap is a sample) (accepted: \
         --interval with a waiting method",
    ),
    (
        &["measure", "--profile-dir", "."],
        "--profile-dir: no --profile to look for in it (accepted: with --profile NAME)",
    ),
    (&["measure", "--force"], "--force: no rt-hog load to force"),
    (
        &["measure", "--force", "--load", "cpu"],
        "--force: no rt-hog load to force (accepted: with an rt-hog --load)",
    ),
    (
        &["load", "cpu", "--force"],
        "--force: no rt-hog load to force (accepted: with an rt-hog load)",
    ),
    (
        &["measure", "--no-samplers", "--sample-period", "2s"],
        "--sample-period: no samplers run with --no-samplers (accepted: one of the two)",
    ),
    (
        &["measure", "--trace", "wakeup,irqs"],
        "unknown event group \"irqs\"",
    ),
    (
        &["report", "1", "-o", "/nonexistent-dir/r.html"],
        "--output /nonexistent-dir/r.html: no directory /nonexistent-dir (accepted: a writable",
    ),
    // Said before the plan's cells are listed (stdout stays empty).
    (
        &["run", "plan.toml", "--db", "/nonexistent-dir/d.db"],
        "--db /nonexistent-dir/d.db: no directory /nonexistent-dir (accepted: a latlab store",
    ),
    (
        &["export", "1", "-o", "/nonexistent-dir/x.json"],
        "--output /nonexistent-dir/x.json: no directory /nonexistent-dir (accepted: a writable",
    ),
    (
        &[
            "measure",
            "--profile",
            "lowlatency",
            "--profile-dir",
            "/nonexistent-dir",
        ],
        "--profile-dir /nonexistent-dir: no such directory (accepted: a directory of profile files)",
    ),
    (
        &["tune", "--profile-dir", "/nonexistent-dir", "list"],
        "--profile-dir /nonexistent-dir: no such directory",
    ),
    (
        &["check", "--user", "nosuchuser"],
        "--user nosuchuser: no such user in /etc/passwd (accepted:",
    ),
    // Written for real, not asked of access(2), which says yes to root: sysfs takes no files.
    (
        &["measure", "--json", "/sys/r.json"],
        "--json /sys/r.json: not writable: ",
    ),
    (
        &["measure", "--json", "/nonexistent-dir/x.json"],
        "--json /nonexistent-dir/x.json",
    ),
    (
        &["measure", "--max-latency", "0"],
        "no wake-up takes no time",
    ),
    (&["measure", "--max-p99", "fast"], "--max-p99: "),
    (
        &["measure", "--max-missed", "many"],
        "\"many\" is not a count",
    ),
    (
        &["measure", "--junit", "/nonexistent-dir/j.xml"],
        "--junit /nonexistent-dir/j.xml: ",
    ),
    // A good output beside a bad one: the earlier result file is left as it was.
    (
        &[
            "measure",
            "--json",
            "earlier.json",
            "--junit",
            "/nonexistent-dir/j.xml",
        ],
        "--junit /nonexistent-dir/j.xml: ",
    ),
    (
        &["measure", "--json", "laptop"],
        "--json laptop: a directory",
    ),
    (&["measure", "--bogus"], "unexpected argument '--bogus'"),
    (
        &["measure", "--durtion", "5s"],
        "unexpected argument '--durtion' found (a similar one exists: --duration)",
    ),
    (
        &["measure", "--smp"],
        "(cyclictest's --smp: every online CPU is measured by default; -a LIST picks CPUs)",
    ),
    // cyclictest's letters that mean something else here: a ported script must not "pass" by
    // printing the help (-h400 did, exit 0).
    (
        &["measure", "-D", "1s", "-h400"],
        "-h400: cyclictest's histogram; -h is the help here (accepted: --histfile FILE \
         --histfile-range 400)",
    ),
    (
        &["measure", "-h", "50", "-D", "1s"],
        "-h 50: cyclictest's histogram",
    ),
    (
        &["measure", "-h=50", "-D", "1s"],
        "-h=50: cyclictest's histogram",
    ),
    (
        &["measure", "-m", "-D", "1s"],
        "-m: a method is needed: -m is --method here, and cyclictest's -m (mlockall) is the \
         default (accepted: -m clock-nanosleep, ",
    ),
    // monitor: the same measuring options, and its own.
    (
        &["monitor", "--interval", "abc"],
        "--interval: unknown unit",
    ),
    (&["monitor", "--interval", "0"], "below the minimum"),
    (&["monitor", "--window", "10ms"], "--window 10ms: too short"),
    (&["monitor", "--window", "abc"], "--window: unknown unit"),
    (
        &["monitor", "--window", "1s", "--interval", "2s"],
        "--window 1s: shorter than --interval 2s (accepted: a window of at least one interval, e.g. --window 2s)",
    ),
    (
        &["monitor", "--window", "2h", "--retention", "1h"],
        "--retention 1h: shorter than --window 2h",
    ),
    (
        &["monitor", "--retention", "5m"],
        "--retention 5m: too short",
    ),
    (&["monitor", "--method", "busy"], "not for monitoring"),
    (&["monitor", "--method", "sleepy"], "unknown method"),
    (
        &["monitor", "--policy", "deadline"],
        "not supported by monitor",
    ),
    (
        &["tune", "search", "--policy", "deadline"],
        "--policy deadline is not supported by tune search, only by measure",
    ),
    (
        &["monitor", "--priority", "0"],
        "--priority 0: out of range",
    ),
    (
        &["monitor", "--cpus", "7"],
        "--cpus 7: CPU 7 is absent or offline",
    ),
    (&["monitor", "--cpus", "0-99"], "is absent or offline"),
    (&["monitor", "--listen", "localhost"], "is not an address"),
    (
        &["monitor", "--listen", "0.0.0.0:9464"],
        "reachable from other machines without TLS or authentication (accepted: --web-config",
    ),
    (&["monitor", "--profile", "nonexistent"], "unknown profile"),
    (
        &["monitor", "--schedule", "25:00 cpu2:performance"],
        "\"25:00\" is not a time of day",
    ),
    (
        &["monitor", "--schedule", "5 o'clock"],
        "is not a time of day",
    ),
    (
        &["monitor", "--schedule", "05:05 cpu2:turbo"],
        "cpu2 does not offer the turbo governor",
    ),
    (
        &["monitor", "--schedule", "05:05 cpu9:performance"],
        "CPU 9 is absent or offline",
    ),
    (&["serve", "--listen", "everywhere"], "is not an address"),
    (&["serve", "--listen", ":99999"], "is not an address"),
    (
        &["monitor", "--listen", "off", "--web-config", "p.toml"],
        "--web-config with --listen off: nothing is served (accepted: --listen ADDR beside \
         --web-config)",
    ),
    (
        &["monitor", "--listen", "off", "--insecure-listen"],
        "--insecure-listen with --listen off: nothing is served",
    ),
    (
        &["serve", "--listen", "off"],
        "--listen off: serve is the web server and needs an address (accepted: IP:PORT",
    ),
    // `:PORT` is every address, IPv6 and IPv4, as Go's exporters read it: so it is not loopback.
    (
        &["serve", "--listen", ":9464"],
        "--listen [::]:9464: reachable from other machines",
    ),
    // trace
    (&["trace", "-D", "5x"], "--duration: unknown unit"),
    (&["trace", "-D", "0"], "--duration 0: too short"),
    (
        &["trace", "--events", "softirq,irqs"],
        "unknown event group \"irqs\"",
    ),
    (&["trace", "--events", ""], "no event group given"),
    (
        &["trace", "--cpus", "4096"],
        "CPU 4096 is absent or offline",
    ),
    (&["trace", "--cpus", "3-1"], "runs backwards"),
    (&["trace", "--pid", "0"], "--pid 0: not a process id"),
    (&["trace", "--pid", "2147483646"], "no such process"),
    (
        &["trace", "--rt-only", "--events", "softirq"],
        "filter wake-ups",
    ),
    (&["trace", "--top", "0"], "--top 0: no rows to show"),
    (&["trace", "--top", "x"], "--top \"x\""),
    (
        &["trace", "--json", "/nonexistent-dir/t.json"],
        "--json /nonexistent-dir/t.json",
    ),
    // check
    (
        &["check", "--target", "x"],
        "--target x: unknown (accepted: audio, control, throughput)",
    ),
    (
        &["check", "--skip", "unknown-id"],
        "unknown check id \"unknown-id\"",
    ),
    (&["check", "--skip", "kernel.preempt,nope"], "\"nope\""),
    (
        &["check", "--skip", "cpu,,irq"],
        "--skip: unknown check id \"\"",
    ),
    (&["check", "--measure", "soon"], "--measure: unknown unit"),
    (&["check", "--measure", "0"], "--measure 0: too short"),
    (
        &["check", "--state-dir", "state"],
        "--state-dir without --fix",
    ),
    // load
    (&["load", "gpu"], "unknown load kind \"gpu\""),
    (&["load", "cpu:workers=0"], "0 is out of range"),
    (&["load", "io:bs=4q"], "\"4q\" is not a size"),
    (&["load"], "no load given"),
    (
        &["load", "cpu", "--load-cpus", "x"],
        "\"x\" is not a CPU number",
    ),
    (
        &["load", "cpu", "--load-cpus", "4000"],
        "--load-cpus 4000: CPU 4000 is absent or offline",
    ),
    (
        &["load", "cpu", "--duration", "5q"],
        "--duration: unknown unit",
    ),
    (
        &["load", "--schedule", "idle 30"],
        "--schedule \"idle 30\": phase \"idle 30\": duration \"30\" has no unit",
    ),
    // tune
    (
        &["tune", "apply", "nonesuch"],
        "unknown profile \"nonesuch\"",
    ),
    (
        &["tune", "apply", "./bad.toml"],
        "bad.toml:3: cpu.all.governor",
    ),
    (
        &["tune", "apply", "./seven.toml"],
        "seven.toml:1: cpu.7: CPU 7 does not exist here",
    ),
    // The same profile for one run is bad input too (it was exit 1).
    (
        &["measure", "--profile", "./seven.toml"],
        "--profile ./seven.toml: ./seven.toml:1: cpu.7: CPU 7 does not exist here",
    ),
    // A directory is no store, to read or to write.
    (
        &["report", "--db", "/tmp"],
        "--db /tmp: a directory, not a store (accepted: a store written by",
    ),
    (
        &["serve", "--db", "/tmp", "--listen", "127.0.0.1:0"],
        "--db /tmp: a directory, not a store",
    ),
    (
        &["measure", "--db", "/tmp"],
        "--db /tmp: a directory, not a store (accepted: a latlab store or a new file)",
    ),
    // A runtime the kernel refuses, longer than this machine's period.
    (
        &["tune", "apply", "./rtbig.toml"],
        "rtbig.toml:3: system.sched_rt_runtime_us: 2000000 is longer than sched_rt_period_us \
         here, which the kernel refuses (accepted: -1, or 0 to 1000000)",
    ),
    // The search writes its profile at the end: where it cannot is said before it starts.
    (
        &["tune", "search", "--write-profile", "/proc/x.toml"],
        "--write-profile /proc/x.toml: cannot be written in /proc: ",
    ),
    (
        &["tune", "search", "--write-profile", "/etc/passwd/x.toml"],
        "--write-profile /etc/passwd/x.toml: /etc/passwd is not a directory",
    ),
    // A path given is written where it says: no directory is made for it.
    (
        &[
            "tune",
            "search",
            "--write-profile",
            "/nonexistent-dir/x.toml",
        ],
        "--write-profile /nonexistent-dir/x.toml: no directory /nonexistent-dir (accepted: a \
         profile name, or a path ending in .toml in an existing directory)",
    ),
    // A series' name is one line: it is a label in logs, tables and Prometheus.
    (
        &["monitor", "--name", "a\nb", "--check-config"],
        "--name \"a\\nb\": with a control character such as a line break",
    ),
    (
        &["monitor", "--name", " ", "--check-config"],
        "--name \" \": empty or blank (accepted: a short name on one line)",
    ),
    (
        &["monitor", "--name", "12", "--check-config"],
        "--name 12: a name of digits alone reads as a series id",
    ),
    // Where the journal goes must take it.
    (
        &["tune", "--state-dir", "/etc/passwd", "status"],
        "--state-dir /etc/passwd: not a directory (accepted: a directory latlab may write",
    ),
    (
        &["tune", "--state-dir", "/proc/nope", "restore"],
        "--state-dir /proc/nope: cannot be made in /proc: ",
    ),
    // A parent that does not exist is a path mistyped: the journal would go where the path
    // meant is not looked in (it was made, and the machine tuned).
    (
        &["tune", "--state-dir", "missing/s", "apply", "lowlatency"],
        "--state-dir missing/s: no directory missing (accepted: a directory latlab may write \
         its journal in)",
    ),
    (
        &["measure", "--profile", "p.toml", "--state-dir", "no/s"],
        "--state-dir no/s: no directory no",
    ),
    // One standard output: the refusal writes no JUnit there either (it wrote a document).
    (
        &["check", "--json", "--junit", "-"],
        "--junit -: standard output is taken by --json (accepted: --junit FILE)",
    ),
    // Every sample is above 0: a spike threshold of 0 kept them all (a "spike" each).
    (
        &["measure", "--spike", "0"],
        "--spike 0: every wake-up takes longer, so every sample would be kept as a spike \
         (accepted: a duration above 0, e.g. 50us)",
    ),
    // A priority only real-time policies have.
    (
        &["measure", "--policy", "other", "-p", "50"],
        "--priority 50: policy other has no real-time priority (accepted: -p with --policy fifo or rr)",
    ),
    (
        &["monitor", "--policy", "batch", "-p", "10", "--check-config"],
        "--priority 10: policy batch has no real-time priority",
    ),
    // The kernel takes a signed 32-bit PM QoS request.
    (
        &["tune", "apply", "./dma.toml"],
        "dma.toml:2: system.cpu_dma_latency_us: 3000000000 is out of range (accepted: µs from 0 \
         to 2147483647)",
    ),
    (
        &["tune", "hold", "--us", "4294967295"],
        "--us: 4294967295 is more than the kernel takes (accepted: a whole number of µs from 0 \
         to 2147483647",
    ),
    (
        &["measure", "--pm-qos", "2147483648"],
        "--pm-qos: 2147483648 is more than the kernel takes",
    ),
    (
        &["tune", "show", "./typo.toml"],
        "typo.toml:2: system.timer_migraton: unknown field",
    ),
    (
        &["tune", "apply", "lowlatency", "--cpus", "9"],
        "--cpus 9: CPU 9 is absent or offline",
    ),
    (&["tune", "apply", "lowlatency", "--cpus", "x"], "--cpus"),
    (&["tune", "verify", "lowlatency", "--cpus", "x"], "--cpus"),
    // The journal records its CPUs: --cpus is for a PROFILE.
    (&["tune", "verify", "--cpus", "1"], "<PROFILE>"),
    (&["tune", "hold"], "no latency limit given"),
    (
        &["tune", "hold", "--us", "0", "-D", "0"],
        "--duration 0: too short",
    ),
    (&["tune", "hold", "--us", "x"], "--us \"x\""),
    // A gate without a length would pass when a signal ends it.
    (
        &["measure", "--max-latency", "1ms"],
        "a limit (--max-latency, --max-p99, --max-missed) needs a length to measure",
    ),
    // A negative value is named with the option it was given to, long, and that option's
    // range (it pointed to --help).
    (
        &["measure", "--max-latency", "-5"],
        "--max-latency -5: negative (accepted: a duration above 0, e.g. 50us)",
    ),
    (
        &["measure", "-D", "-1s"],
        "--duration -1s: negative (accepted: a length above 0, e.g. 10s, 5m)",
    ),
    (
        &["measure", "-i", "-5"],
        "--interval -5: negative (accepted: 1us or more, e.g. 100us, 1ms)",
    ),
    (
        &["tune", "hold", "--us", "-3"],
        "--us -3: negative (accepted: a whole number of µs from 0 to 2147483647, e.g. 10)",
    ),
    // Not "0 or more": a priority is 1 to 99.
    (
        &["measure", "-p", "-1"],
        "--priority -1: negative (accepted: 1..99 for fifo and rr)",
    ),
    (
        &["measure", "--priority=-1"],
        "--priority \"-1\": negative (accepted: 1..99 for fifo and rr)",
    ),
    (
        &["measure", "--window", "-1s"],
        "--window -1s: negative (accepted: 1ms or more, e.g. 1s)",
    ),
    (
        &["tune", "search", "--budget", "-5"],
        "--budget -5: negative (accepted: a duration, e.g. 30m)",
    ),
    (
        &["measure", "-a", "-1"],
        "--cpus -1: negative (accepted: CPU numbers and ranges, e.g. 0-3,6 or 0-7:2)",
    ),
    // A name or a path that starts with '-' is no negative number: it is given with `=`.
    (
        &["report", "--title", "-5"],
        "--title -5: a value that starts with '-' is read as an option (accepted: --title=-5)",
    ),
    (
        &["monitor", "--window", "-1s"],
        "--window -1s: negative (accepted: 1s or more, e.g. 5m)",
    ),
    (
        &["monitor", "--retention", "abc"],
        "(accepted: a number of days, or with a unit h or d, e.g. 90 or 90d, 12h)",
    ),
    (
        &["monitor", "--db", "/nonexistent/dir/m.db", "--check-config"],
        "--db /nonexistent/dir/m.db: no directory /nonexistent/dir (accepted: a latlab store or \
         a new file)",
    ),
    // Too large for its type: said so, with the option's range where latlab knows it.
    (
        &["measure", "-l", "18446744073709551616"],
        "--loops \"18446744073709551616\": too large (accepted: a positive number of periods)",
    ),
    (
        &["measure", "--policy", "fifo", "-p", "4294967297"],
        "--priority \"4294967297\": too large (accepted: 1..99 for fifo and rr)",
    ),
    // Zero where it cannot be, with the reason.
    (
        &["measure", "-l", "0"],
        "--loops 0: no period to measure (accepted: a positive number of periods)",
    ),
    (
        &["measure", "-b", "0"],
        "--break 0: every wake-up takes longer, so the first would end the run (accepted: a \
         duration above 0, e.g. 500us)",
    ),
    (
        &["load", "cpu", "-D", "0"],
        "--duration 0: no time to run (accepted: a duration above 0, e.g. 10s)",
    ),
    // No duration at all is not a negative one; an empty name from a list names the list.
    (
        &["measure", "-i=-x"],
        "--interval: \"-x\" is not a duration (accepted: a number of us",
    ),
    (
        &["tune", "search", "--budget=-x"],
        "--budget: \"-x\" is not a duration (accepted: a number of seconds",
    ),
    (
        &["measure", "--timer-slack=-x"],
        "--timer-slack: \"-x\" is not a duration (accepted: a number of ns, or with a unit",
    ),
    (
        &["measure", "--json", ""],
        "--json: no value (accepted: FILE, as `--help` describes it)",
    ),
    (
        &["measure", "--load", "1e99"],
        "--load \"1e99\": unknown load kind \"1e99\" (accepted: cpu, matrix",
    ),
    (
        &["measure", "--load-schedule", "bogus 1s"],
        "--load-schedule \"bogus 1s\": phase \"bogus 1s\": unknown load kind \"bogus\" (accepted: idle, cpu",
    ),
    (
        &["report", "--format="],
        "--format: no value (accepted: html, text, md, json, csv)",
    ),
    (
        &["measure", "--max-missed", "18446744073709551616"],
        "\"18446744073709551616\" is too large (accepted: a whole number up to \
         18446744073709551615)",
    ),
    (
        &["db", "list", "--db", "-x"],
        "--db -x: a value that starts with '-' is read as an option (accepted: --db=-x)",
    ),
    // A value the option refuses itself is refused in its words (a name from a list too: it
    // was given as `--target=-5`, to be refused then).
    (
        &["tune", "search", "--target", "-5"],
        "--target -5: unknown (accepted: audio, control, throughput)",
    ),
    (
        &["check", "--target", "-5"],
        "--target -5: unknown (accepted: audio, control, throughput)",
    ),
    (
        &["report", "--format", "-5"],
        "--format -5: unknown (accepted: html, text, md, json, csv)",
    ),
    (
        &["export", "1", "--format", "-5"],
        "--format -5: unknown (accepted: json, csv, histogram-csv, windows-csv, spikes-csv, \
         cyclictest-json, cyclictest-hist)",
    ),
    (
        &["import", "x.json", "--format", "-5"],
        "--format -5: unknown (accepted: cyclictest-json, cyclictest-hist, stress-ng, \
         jitterdebugger)",
    ),
    (
        &["measure", "--policy", "-5"],
        "--policy: unknown policy \"-5\" (accepted: fifo, rr, other, batch, idle, deadline)",
    ),
    (
        &["measure", "-a", "-x"],
        "--cpus: \"-x\" is not a CPU number (accepted: CPU numbers and ranges",
    ),
    (
        &["trace", "--top", "-x"],
        "--top \"-x\": not a whole number (accepted: a whole number, e.g. 10)",
    ),
    (
        &["tune", "search", "--repeats=-1"],
        "--repeats \"-1\": negative (accepted: 4 or more)",
    ),
    (&["measure", "--interval=-1"], "duration \"-1\" is negative"),
    (&["measure", "--cpus=-1"], "CPU numbers are not negative"),
    (
        &["measure", "-p", "1.5"],
        "--priority \"1.5\": not a whole number (accepted: a whole number, e.g. 10)",
    ),
    (&["tune", "frobnicate"], "unrecognized subcommand"),
    // tune search
    (
        &["tune", "search", "--knobs", "pm_qos,nope"],
        "--knobs nope: unknown knob",
    ),
    (
        &["tune", "search", "--skip", "idel"],
        "--skip idel: unknown knob",
    ),
    (
        &["tune", "search", "--objective", "p95"],
        "--objective p95: unknown (accepted: p50, p99, p99.9, max, p99-per-watt)",
    ),
    (
        &["tune", "search", "--target", "video"],
        "--target video: unknown (accepted: audio, control, throughput)",
    ),
    (
        &["tune", "search", "--budget", "10s"],
        "--budget 10s: too small",
    ),
    (
        &["tune", "search", "--budget", "soon"],
        "--budget: unknown unit",
    ),
    (
        &["tune", "search", "--repeats", "3"],
        "--repeats 3: too few for a verdict",
    ),
    (
        &["tune", "search", "--load", "nosuch"],
        "unknown load kind \"nosuch\"",
    ),
    (
        &["tune", "search", "--target", "throughput"],
        "needs a load whose throughput it keeps",
    ),
    (
        &[
            "--sysroot",
            "vm",
            "tune",
            "search",
            "--objective",
            "p99-per-watt",
        ],
        "--objective p99-per-watt: no power meter here",
    ),
    (
        &["--sysroot", "nosuch", "tune", "apply", "lowlatency"],
        "system root nosuch: no such directory (accepted: a directory holding a system's",
    ),
    (
        &["--sysroot", "plan.toml", "sysinfo"],
        "system root plan.toml: not a directory (accepted: ",
    ),
    // Refused before its plan is printed.
    (
        &["tune", "search", "--db", "earlier.json"],
        "--db: earlier.json is not a latlab store (not an SQLite database)",
    ),
    (
        &["check", "--fix", "--state-dir", "plan.toml"],
        "--state-dir plan.toml: not a directory (accepted: a directory latlab may write its \
         journal in)",
    ),
    // The fixture's RAPL counters and battery are files that do not move: no reading.
    (
        &[
            "--sysroot",
            "amd",
            "tune",
            "search",
            "--objective",
            "p99-per-watt",
        ],
        "--objective p99-per-watt: no power meter here (no power meter gave a reading in 0.2 s: \
         rapl:package-0(intel-rapl:0) (its energy counter stood still))",
    ),
    (
        &["tune", "search", "--write-profile", "realtime"],
        "the name of a built-in profile",
    ),
    (
        &["tune", "search", "--write-profile", "a b"],
        "not a profile name",
    ),
    (&["tune", "search", "--cpus", "7"], "CPU 7"),
    (
        &[
            "--sysroot",
            "vm",
            "tune",
            "search",
            "--knobs",
            "governor",
            "--dry-run",
        ],
        "no candidate knob can be tried here (governor=performance: unsupported here: ",
    ),
    (
        &["tune", "search", "-m", "busy"],
        "--method busy: it measures no wake-up",
    ),
    // the commands over stored results
    (&["run", "nosuch.toml"], "nosuch.toml: cannot read the plan"),
    (
        &["run", "noname.toml"],
        "noname.toml:1: missing field `name` (accepted: a TOML plan: name = ",
    ),
    (
        &["import", "cut.json"],
        "cut.json: line 2: invalid JSON: EOF while parsing",
    ),
    (
        &["tune", "apply", "nosuch.toml"],
        "nosuch.toml: No such file or directory (os error 2) (accepted: a profile name",
    ),
    // An output named twice, or over the store or the plan, would destroy it at the end.
    (
        &[
            "measure", "--policy", "other", "--json", "o.out", "--junit", "o.out",
        ],
        "--junit o.out: the same file as --json",
    ),
    // Through a link to a file not there yet, too.
    (
        &[
            "measure", "--policy", "other", "--json", "j.xml", "--junit", "to-j.xml",
        ],
        "--junit to-j.xml: the same file as --json",
    ),
    (
        &[
            "measure",
            "--policy",
            "other",
            "--json",
            "j.xml",
            "--junit",
            "to-to-j.xml",
        ],
        "--junit to-to-j.xml: the same file as --json",
    ),
    (
        &[
            "measure",
            "--policy",
            "other",
            "--json",
            "-",
            "--junit",
            "/dev/stdout",
        ],
        "--junit /dev/stdout: standard output is taken by --json -",
    ),
    (
        &[
            "measure", "--policy", "other", "--db", "s.db", "--junit", "./s.db",
        ],
        "--junit ./s.db: the same file as the store,",
    ),
    (
        &[
            "measure", "--policy", "other", "--db", "s.db", "--json", "s.db-wal",
        ],
        "--json s.db-wal: the same file as the store's journal",
    ),
    (
        &["run", "typo-plan.toml"],
        "typo-plan.toml: cell profile=nosuch: --profile nosuch: unknown profile \"nosuch\"",
    ),
    (
        &[
            "measure",
            "--policy",
            "other",
            "--json",
            "-",
            "--histfile",
            "-",
        ],
        "--histfile -: standard output is taken by --json - (accepted: at most one output to -",
    ),
    (
        &[
            "measure",
            "--policy",
            "other",
            "--profile",
            "p.toml",
            "--json",
            "./p.toml",
        ],
        "--json ./p.toml: the same file as --profile",
    ),
    (
        &[
            "measure",
            "--policy",
            "other",
            "--db",
            "plan.toml",
            "--junit",
            "hard.toml",
        ],
        "--junit hard.toml: the same file as the store,",
    ),
    (
        &["run", "plan.toml", "--junit", "plan.toml"],
        "--junit plan.toml: the same file as the plan file",
    ),
    (
        &["report", "--db", "s.db", "-o", "s.db"],
        "--output s.db: the same file as the store,",
    ),
    (
        &["export", "1", "--db", "s.db", "-o", "s.db"],
        "--output s.db: the same file as the store,",
    ),
    (&["report", "--format", "pdf", "1"], "--format pdf: unknown"),
    (
        &["compare"],
        "required arguments were not provided: <A>, <B>",
    ),
    (&["export"], "required arguments were not provided: <RUN>"),
    (
        &["export", "1", "--format", "csv", "--range", "50"],
        "--range: --format csv has no rows of 1 µs (accepted: --range with --format cyclictest-hist)",
    ),
    (&["import"], "required arguments were not provided: <FILES>"),
    (&["db", "frob"], "unrecognized subcommand 'frob'"),
    (
        &["measur"],
        "unrecognized subcommand 'measur' (a similar one exists: measure)",
    ),
    (
        &["tune", "aply", "x"],
        "unrecognized subcommand 'aply' (a similar one exists: apply)",
    ),
    (
        &["sysinfo", "--format", "yaml"],
        "unexpected argument '--format'",
    ),
];

/// How a line names the accepted form: its own words, clap's pointer to the help, a governor's
/// offer, or a profile file's expected type.
const FORMS: [&str; 5] = [
    "(accepted: ",
    "(see --help)",
    "(offered: ",
    ": expected ",
    ", expected ",
];

#[test]
fn bad_input_is_one_line_naming_the_accepted_form_exit_2_and_touches_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let at = dir.path();
    latlab_testkit::copy_machine_to("laptop-intel", &["tune"], &at.join("laptop"));
    latlab_testkit::copy_machine_to("vm", &["tune"], &at.join("vm"));
    latlab_testkit::copy_machine_to("amd-desktop", &["tune"], &at.join("amd"));
    // The users `check --user` knows.
    latlab_testkit::write_file(
        &at.join("laptop"),
        "/etc/passwd",
        "root:x:0:0::/root:/bin/sh\n",
    );
    for (name, text) in [
        ("bad.toml", "description = \"x\"\n[cpu.all]\ngovernor = 3\n"),
        ("seven.toml", "[cpu.7]\nmax_idle_latency_us = 0\n"),
        ("dma.toml", "[system]\ncpu_dma_latency_us = 3000000000\n"),
        (
            "rtbig.toml",
            "[system]\ntimer_migration = false\nsched_rt_runtime_us = 2000000\n",
        ),
        ("typo.toml", "[system]\ntimer_migraton = false\n"),
        ("earlier.json", "{\"a result\": \"kept\"}\n"),
        (
            "typo-plan.toml",
            "name = \"t\"\n[settings]\nduration = \"1s\"\npolicy = \"other\"\n\
             [axes]\nprofile = [\"none\", \"nosuch\"]\n",
        ),
        ("noname.toml", "description = \"x\"\n"),
        (
            "cut.json",
            "{\"cmdline:\": \"cyclictest -h 100\",\n\"thread\": {",
        ),
        (
            "plan.toml",
            "name = \"p\"\n[settings]\nduration = \"1s\"\npolicy = \"other\"\n",
        ),
    ] {
        std::fs::write(at.join(name), text).unwrap();
    }
    // A hard link to the plan (another name, the same file), and a profile file.
    std::fs::hard_link(at.join("plan.toml"), at.join("hard.toml")).unwrap();
    std::os::unix::fs::symlink("j.xml", at.join("to-j.xml")).unwrap();
    std::os::unix::fs::symlink("to-j.xml", at.join("to-to-j.xml")).unwrap();
    std::fs::write(at.join("p.toml"), "[system]\ntimer_migration = false\n").unwrap();
    let before = latlab_sys::fixture::snapshot(at).unwrap();
    let mounts = tracefs_mounts();
    for (args, needle) in ROWS {
        let mut cmd = latlab!();
        cmd.current_dir(at)
            .env("LATLAB_STATE_DIR", at.join("state"));
        if args[0] != "--sysroot" {
            cmd.args(["--sysroot", "laptop"]);
        }
        // A row the command accepted would run on (a measurement, a hold): it fails instead.
        let out = output_within(cmd.args(*args), Duration::from_secs(60));
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            out.stdout.is_empty(),
            "{args:?}: nothing on standard output"
        );
        assert_eq!(err.lines().count(), 1, "{args:?}: one line: {err}");
        assert!(err.starts_with("latlab: error: "), "{args:?}: {err}");
        assert!(
            err.contains(needle),
            "{args:?}: {err} should say {needle:?}"
        );
        assert!(
            FORMS.iter().any(|f| err.contains(f)),
            "{args:?}: the accepted form is not named: {err}"
        );
    }
    assert!(
        latlab_sys::fixture::snapshot(at).unwrap() == before,
        "bad input wrote into the tree, the state directory or the working directory"
    );
    assert_eq!(tracefs_mounts(), mounts, "tracefs mounts as before");
}

/// `LATLAB_STATE_DIR` is `--state-dir` given otherwise: one whose parent does not exist is
/// refused as the option is, before anything is touched (it was made, and the machine tuned).
#[test]
fn a_state_dir_from_the_environment_is_checked_as_the_option_is() {
    let tree = latlab_testkit::copy_machine("laptop-intel", &["tune"]);
    let root = tree.path().to_str().unwrap();
    let missing = tree.path().join("missing/state");
    let before = latlab_sys::fixture::snapshot(tree.path()).unwrap();
    for args in [
        &["tune", "apply", "lowlatency"][..],
        &["measure", "--profile", "lowlatency", "-D", "1s"],
        &["check", "--fix"],
        &["monitor", "--profile", "lowlatency", "--check-config"],
    ] {
        let out = latlab!()
            .args(["--sysroot", root])
            .args(args)
            .env("LATLAB_STATE_DIR", &missing)
            .env("LATLAB_DB", tree.path().join("m.db"))
            .output()
            .unwrap();
        latlab_testkit::assert_one_line_error(
            &out,
            2,
            &format!(
                "LATLAB_STATE_DIR={}: no directory {} (accepted: a directory latlab may write",
                missing.display(),
                missing.parent().unwrap().display()
            ),
        );
    }
    assert!(latlab_sys::fixture::snapshot(tree.path()).unwrap() == before);
}

/// A command line without its command (`latlab`, `latlab tune`): the help on stderr, exit 2.
#[test]
fn a_missing_command_shows_the_help_and_exits_2() {
    for args in [&[][..], &["tune"], &["db"]] {
        let out = latlab!().args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {out:?}");
        assert!(out.stdout.is_empty(), "{args:?}: {out:?}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("Usage: latlab"),
            "{args:?}: {out:?}"
        );
    }
}
