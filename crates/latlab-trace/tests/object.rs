//! The committed BPF object, checked without privileges: it parses, holds every program and map
//! the loader looks up by name with the layout the loader assumes, and (when clang is present)
//! rebuilding it from its sources gives the same bytes.
#![allow(clippy::unwrap_used)]

use aya_obj::{Object, ProgramSection};
use latlab_trace::events::{Attach, all_programs};
use latlab_trace::layout::{self, RING_BYTES};
use std::path::Path;
use std::process::Command;

#[test]
fn the_object_holds_every_program_the_loader_attaches() {
    let obj = Object::parse(layout::OBJECT).unwrap();
    assert!(
        obj.license.to_str().unwrap().contains("GPL"),
        "tracing helpers need a GPL-compatible license"
    );
    assert!(
        obj.btf.is_some() && obj.btf_ext.is_some(),
        "BTF and CO-RE relocations kept"
    );
    for (group, p) in all_programs() {
        let prog = obj
            .programs
            .get(p.name)
            .unwrap_or_else(|| panic!("program {} ({group:?}) missing", p.name));
        match (&prog.section, p.attach) {
            (ProgramSection::TracePoint, Attach::Classic) => {}
            (ProgramSection::BtfTracePoint, Attach::Btf) => {}
            (s, a) => panic!("{}: section {s:?} but attached as {a:?}", p.name),
        }
    }
    assert_eq!(
        obj.programs.len(),
        all_programs().count(),
        "no unused programs"
    );
}

#[test]
fn maps_and_globals_have_the_layout_the_loader_assumes() {
    let obj = Object::parse(layout::OBJECT).unwrap();
    let map = |name: &str| {
        obj.maps
            .get(name)
            .unwrap_or_else(|| panic!("map {name} missing"))
    };
    // (name, type, key size, value size)
    const PERCPU_HASH: u32 = 5;
    const PERCPU_ARRAY: u32 = 6;
    const ARRAY: u32 = 2;
    const LRU_HASH: u32 = 9;
    for (name, ty, key, value) in [
        ("hist", PERCPU_HASH, 16, 8),
        ("stats", PERCPU_HASH, 16, 32),
        ("drops", PERCPU_ARRAY, 4, 8),
        ("queued", LRU_HASH, 8, 8),
        ("running", LRU_HASH, 8, 16),
        ("waking", LRU_HASH, 4, 16),
        ("rings", ARRAY, 4, RING_BYTES as u32),
    ] {
        let m = map(name);
        assert_eq!(
            (m.map_type(), m.key_size(), m.value_size()),
            (ty, key, value),
            "map {name}"
        );
    }
    assert_eq!(map("drops").max_entries(), layout::NR_FAMILIES);
    assert!(map("state").value_size() > 0);
    // The read-only globals the loader sets before loading.
    let btf = obj.btf.as_ref().unwrap();
    for global in [
        "hist_mask",
        "ring_enabled",
        "wake_rt_only",
        "wake_pid",
        "filter_cpus",
        "cpu_mask",
    ] {
        assert!(
            btf.id_by_type_name_kind(global, aya_obj::btf::BtfKind::Var)
                .is_ok(),
            "global {global} missing"
        );
    }
}

/// `scripts/build-bpf.sh --check`: exit 0 agree, 1 differ, 3 compiler missing or different
/// from the one that built the committed object.
#[test]
fn rebuilding_the_object_from_source_gives_the_same_bytes() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let script = root.join("scripts/build-bpf.sh");
    if Command::new("clang").arg("--version").output().is_err() {
        eprintln!("skipped: clang is not installed (Debian: apt-get install clang llvm)");
        return;
    }
    let out = Command::new("bash")
        .arg(&script)
        .arg("--check")
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    match out.status.code() {
        Some(0) => assert!(text.contains("agrees"), "{text}"),
        Some(3) => eprintln!("skipped: {}", text.trim()),
        _ => panic!("the committed BPF object does not match its sources:\n{text}"),
    }
}
