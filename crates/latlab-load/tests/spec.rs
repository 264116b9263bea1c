//! Spec and schedule parsing (pure) and the registry's self-descriptions.
#![allow(clippy::unwrap_used)]

use latlab_load::{
    LoadError, LoadSpec, OptValue, parse_schedule, parse_size, registry, registry::list_text,
    spec::format_size,
};
use std::path::PathBuf;

/// Every load kind, in the registry's order.
const KINDS: [&str; 8] = [
    "cpu",
    "matrix",
    "memory",
    "io",
    "procfs",
    "rt-hog",
    "messaging",
    "cmd",
];

fn parse(s: &str) -> LoadSpec {
    LoadSpec::parse(s).unwrap_or_else(|e| panic!("{s:?}: {e}"))
}

#[test]
fn good_specs() {
    let cpu = parse("cpu");
    assert_eq!(cpu.kind(), "cpu");
    assert_eq!(cpu.text(), "cpu");
    assert_eq!(cpu.option("workers"), None, "one per CPU, decided at start");
    assert_eq!(cpu.option("kind"), Some(&OptValue::Choice("both")));

    let c = parse("cpu:workers=2,kind=float");
    assert_eq!(c.option("workers"), Some(&OptValue::Count(2)));
    assert_eq!(c.option("kind"), Some(&OptValue::Choice("float")));
    assert!(c.is_given("kind"));

    assert_eq!(
        parse("matrix:size=128").option("size"),
        Some(&OptValue::Count(128))
    );
    assert_eq!(
        parse("memory:size=256M").option("size"),
        Some(&OptValue::Size(256 << 20))
    );

    let io = parse("io:bs=4k,fsync=true,dir=/tmp,size=64M");
    assert_eq!(io.option("bs"), Some(&OptValue::Size(4096)));
    assert_eq!(io.option("fsync"), Some(&OptValue::Bool(true)));
    assert_eq!(
        io.option("dir"),
        Some(&OptValue::Path(PathBuf::from("/tmp")))
    );
    assert_eq!(io.option("size"), Some(&OptValue::Size(64 << 20)));
    let io = parse("io:bs=1M");
    assert_eq!(io.option("fsync"), Some(&OptValue::Bool(false)));
    assert_eq!(io.option("dir"), None, "a fresh temporary directory");

    assert_eq!(parse("procfs").kind(), "procfs");

    let rt = parse("rt-hog:threads=10,policy=rr,priority=1");
    assert_eq!(rt.option("threads"), Some(&OptValue::Count(10)));
    assert_eq!(rt.option("policy"), Some(&OptValue::Choice("rr")));
    assert_eq!(rt.option("priority"), Some(&OptValue::Count(1)));
    assert_eq!(
        rt.option("watchdog"),
        Some(&OptValue::Duration(2_000_000_000))
    );
    assert_eq!(
        parse("rt-hog:watchdog=500ms").option("watchdog"),
        Some(&OptValue::Duration(500_000_000))
    );

    let m = parse("messaging:groups=2,pairs=4,transport=socket");
    assert_eq!(m.option("groups"), Some(&OptValue::Count(2)));
    assert_eq!(m.option("transport"), Some(&OptValue::Choice("socket")));
    assert_eq!(
        parse("messaging").option("transport"),
        Some(&OptValue::Choice("pipe"))
    );

    // Spaces around names and values are allowed; the text is kept trimmed.
    let s = parse("  cpu: workers = 3 , kind=int ");
    assert_eq!(s.option("workers"), Some(&OptValue::Count(3)));
    assert_eq!(s.text(), "cpu: workers = 3 , kind=int");
    // The same options in another order are the same spec.
    assert_eq!(parse("cpu:kind=int,workers=3"), s);
}

#[test]
fn cmd_takes_the_rest_as_a_command_line() {
    let c = parse("cmd:\"stress-ng --cpu 1\"");
    assert_eq!(c.kind(), "cmd");
    assert_eq!(c.command(), Some("stress-ng --cpu 1"));
    let c = parse("cmd:stress-ng --cpu 1 --vm-bytes=1G,x");
    assert_eq!(c.command(), Some("stress-ng --cpu 1 --vm-bytes=1G,x"));
    let c = parse("cmd:'make -j2'");
    assert_eq!(c.command(), Some("make -j2"));
}

#[test]
fn bad_specs_are_one_line_usage_errors_naming_the_problem() {
    let cases = [
        ("", "empty load spec"),
        ("gpu", "unknown load kind \"gpu\""),
        ("idle", "idle is a phase of a schedule only"),
        ("cpu:", "no options after ':'"),
        ("cpu:workers", "has no value"),
        ("cpu:threads=2", "unknown option \"threads\" for cpu"),
        ("cpu:workers=0", "out of range"),
        ("cpu:workers=two", "not a whole number"),
        ("cpu:workers=2,workers=3", "given twice"),
        ("cpu:workers=2,", "an empty option"),
        ("cpu:kind=double", "unknown value \"double\""),
        ("io:bs=4q", "not a size"),
        ("io:bs=1M,size=4k", "smaller than bs"),
        ("io:fsync=maybe", "not a boolean"),
        ("io:dir=", "empty path"),
        ("memory:size=1k", "out of range"),
        ("rt-hog:priority=99", "out of range"),
        ("rt-hog:policy=other", "unknown value"),
        ("rt-hog:watchdog=5", "has no unit"),
        ("rt-hog:watchdog=10ms", "out of range"),
        ("messaging:transport=tcp", "unknown value"),
        ("messaging:size=8k", "out of range"),
        ("procfs:workers=1,depth=2", "unknown option \"depth\""),
        ("cmd:", "no command"),
        ("cmd:\"\"", "no command"),
    ];
    for (spec, problem) in cases {
        let e = LoadSpec::parse(spec).expect_err(spec);
        let text = e.to_string();
        assert!(e.is_usage(), "{spec:?}: {e:?}");
        assert!(matches!(e, LoadError::Invalid(_)));
        assert!(text.contains(problem), "{spec:?}: {text}");
        assert!(text.contains("accepted"), "{spec:?}: {text}");
        assert!(!text.contains('\n'), "{spec:?}: {text}");
    }
    // The accepted kinds are listed.
    let e = LoadSpec::parse("gpu").unwrap_err().to_string();
    for k in KINDS {
        assert!(e.contains(k), "{e}");
    }
    // The accepted options are listed.
    let e = LoadSpec::parse("io:blocksize=4k").unwrap_err().to_string();
    assert!(e.contains("bs, size, fsync, dir"), "{e}");
}

#[test]
fn sizes() {
    for (s, n) in [
        ("512", 512),
        ("4k", 4096),
        ("4K", 4096),
        ("4KB", 4096),
        ("4KiB", 4096),
        ("1M", 1 << 20),
        ("256M", 256 << 20),
        ("2G", 2 << 30),
        ("1T", 1 << 40),
    ] {
        assert_eq!(parse_size(s), Ok(n), "{s}");
    }
    for s in [
        "",
        "k",
        "4q",
        "-1",
        "1.5M",
        "4 k",
        "99999999999999999999",
        "20000000T",
    ] {
        assert!(parse_size(s).is_err(), "{s:?}");
    }
    assert_eq!(format_size(4096), "4k");
    assert_eq!(format_size(1 << 20), "1M");
    assert_eq!(format_size(1536), "1536");
    assert_eq!(format_size(3 << 30), "3G");
}

#[test]
fn registry_describes_every_kind_and_defaults_parse() {
    let names: Vec<_> = registry().iter().map(|d| d.name).collect();
    assert_eq!(names, KINDS);
    let text = list_text();
    for d in registry() {
        assert!(!d.description.is_empty());
        assert!(text.contains(d.name));
        assert!(text.contains(d.description));
        for o in d.options {
            assert!(text.contains(o.help), "{}: {}", d.name, o.name);
            // Every option is shown with its default and range.
            assert!(text.contains(&o.accepted()));
        }
        if d.takes_command {
            assert!(d.options.is_empty());
            continue;
        }
        assert!(!d.throughput.is_empty(), "{} reports nothing", d.name);
        // The bare kind parses: every default is a valid value.
        let s = LoadSpec::parse(d.name).unwrap();
        assert_eq!(s.descriptor().name, d.name);
    }
}

#[test]
fn schedules() {
    let s = parse_schedule("idle 30s, memory 30s, io:bs=1M 30s, procfs 30s").unwrap();
    let labels: Vec<_> = s.phases.iter().map(|p| p.label()).collect();
    assert_eq!(labels, ["idle", "memory", "io:bs=1M", "procfs"]);
    assert!(s.phases[0].spec.is_none());
    assert_eq!(
        s.phases[2].spec.as_ref().unwrap().option("bs"),
        Some(&OptValue::Size(1 << 20))
    );
    assert!(s.phases.iter().all(|p| p.duration_ns == 30_000_000_000));
    assert_eq!(s.total_ns(), 120_000_000_000);
    assert_eq!(s.specs().len(), 3);

    // Commas inside a spec stay with it.
    let s = parse_schedule("io:bs=1M,fsync=true 1.5s,idle 2s").unwrap();
    assert_eq!(s.phases.len(), 2);
    let io = s.phases[0].spec.as_ref().unwrap();
    assert_eq!(io.option("fsync"), Some(&OptValue::Bool(true)));
    assert_eq!(s.phases[0].duration_ns, 1_500_000_000);
    assert_eq!(s.phases[1].label(), "idle");

    // Quotes protect commas and spaces of a command.
    let s = parse_schedule("cmd:\"sleep 1, 2s\" 5s, cpu:workers=1 100ms").unwrap();
    assert_eq!(s.phases.len(), 2);
    assert_eq!(
        s.phases[0].spec.as_ref().unwrap().command(),
        Some("sleep 1, 2s")
    );
    assert_eq!(s.phases[1].duration_ns, 100_000_000);

    // One phase; a trailing comma is tolerated.
    assert_eq!(parse_schedule("cpu 1s").unwrap().phases.len(), 1);
    assert_eq!(parse_schedule("cpu 1s,").unwrap().phases.len(), 1);
}

#[test]
fn bad_schedules() {
    let cases = [
        ("", "an empty phase"),
        ("idle", "has no duration"),
        ("idle 30", "has no unit"),
        ("idle 30q", "unknown unit"),
        ("cpu 0s", "lasts 0"),
        ("gpu 1s", "unknown load kind"),
        ("idle 1s,, cpu 1s", "an empty phase"),
        (", cpu 1s", "an empty phase"),
        ("cpu 1s 2s", "unknown load kind"),
        ("cpu:workers=0 1s", "out of range"),
        ("cmd:\"sleep 1 1s", "quote is not closed"),
    ];
    for (text, problem) in cases {
        let e = parse_schedule(text).expect_err(text);
        let m = e.to_string();
        assert!(e.is_usage(), "{text:?}: {e:?}");
        assert!(m.contains(problem), "{text:?}: {m}");
        assert!(m.contains("accepted"), "{text:?}: {m}");
        assert!(!m.contains('\n'));
    }
}
