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
    const TASK_STORAGE: u32 = 29;
    for (name, ty, key, value) in [
        ("hist", PERCPU_HASH, 16, 8),
        ("stats", PERCPU_HASH, 16, 32),
        ("drops", PERCPU_ARRAY, 4, 8),
        ("queued", LRU_HASH, 8, 8),
        ("running", LRU_HASH, 8, 16),
        ("waking", TASK_STORAGE, 4, 16),
        ("wake_stats", PERCPU_ARRAY, 4, 32),
        ("wake_hist", PERCPU_ARRAY, 4, 32 * 1024),
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
    // One entry per wake-up class: other, rt, deadline.
    assert_eq!(map("wake_stats").max_entries(), 3);
    assert_eq!(map("wake_hist").max_entries(), 3);
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
    let text = latlab_testkit::output_text(&out);
    match out.status.code() {
        Some(0) => assert!(text.contains("agrees"), "{text}"),
        Some(3) => eprintln!("skipped: {}", text.trim()),
        _ => panic!("the committed BPF object does not match its sources:\n{text}"),
    }
}

/// The bucket index the BPF programs compute (`hist_index` in `bpf/trace.h`), compiled for the
/// host with the system's C compiler, equals [`latlab_trace::buckets::bucket_index`] — which the
/// unit tests check against the shared histogram — for values of every magnitude.
#[test]
fn the_c_bucket_index_is_the_loaders() {
    let Some(cc) = ["cc", "gcc", "clang"]
        .into_iter()
        .find(|c| Command::new(c).arg("--version").output().is_ok())
    else {
        eprintln!("skipped: no C compiler (cc, gcc or clang) to build the C bucket index");
        return;
    };
    let bpf_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("bpf");
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("hist-index-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("index.c");
    std::fs::write(
        &src,
        "#include \"trace.h\"\n#include <stdio.h>\n\
         int main(void) { unsigned long long v; \
         while (scanf(\"%llu\", &v) == 1) printf(\"%u\\n\", hist_index(v)); return 0; }\n",
    )
    .unwrap();
    let exe = dir.join("index");
    latlab_testkit::run_ok(
        Command::new(cc)
            .args(["-O2", "-w", "-I"])
            .arg(&bpf_dir)
            .arg(&src)
            .arg("-o")
            .arg(&exe),
    );

    let mut values: Vec<u64> = Vec::new();
    for shift in 0..64 {
        let p = 1u64 << shift;
        values.extend([
            p - 1,
            p,
            p + 1,
            p | (p >> 1),
            p | (p >> 11),
            p.saturating_mul(3) / 2,
        ]);
    }
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    for _ in 0..20_000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        values.push(x >> (x % 64));
    }
    values.extend([
        0,
        2047,
        2048,
        3_599_999_999_999,
        3_600_000_000_000,
        u64::MAX,
    ]);
    let input: String = values.iter().map(|v| format!("{v}\n")).collect();
    let values_file = dir.join("values");
    std::fs::write(&values_file, input).unwrap();
    let out = Command::new(&exe)
        .stdin(std::fs::File::open(&values_file).unwrap())
        .output()
        .unwrap();
    assert!(out.status.success());
    let got: Vec<u32> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| l.parse().unwrap())
        .collect();
    assert_eq!(got.len(), values.len());
    for (v, c) in values.iter().zip(&got) {
        assert_eq!(*c, latlab_trace::buckets::bucket_index(*v), "bucket of {v}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
