//! The Debian package: built by `scripts/build-deb.sh` with cargo-deb from this test build, its
//! contents listed with `dpkg-deb -c` and checked (binary, man pages generated from the CLI,
//! shell completions, the systemd unit, the built-in profiles, the Grafana dashboard), and the
//! unit checked with `systemd-analyze verify` where systemd is installed. Skips with the reason
//! when cargo-deb or dpkg-deb is missing.
#![allow(clippy::unwrap_used)]

use std::path::PathBuf;
use std::process::Command;

fn works(cmd: &str, args: &[&str]) -> bool {
    Command::new(cmd)
        .args(args)
        .output()
        .is_ok_and(|o| o.status.success())
}

use latlab_testkit::repo;

#[test]
fn the_deb_holds_binary_man_pages_completions_unit_and_profiles() {
    if !works("cargo", &["deb", "--version"]) {
        eprintln!(
            "skipped: cargo-deb is not installed (cargo install cargo-deb --version 3.8.0 --locked)"
        );
        return;
    }
    if !works("dpkg-deb", &["--version"]) {
        eprintln!("skipped: dpkg-deb is not installed");
        return;
    }
    // The binary of this test build lives in <target>/debug.
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_latlab"));
    let target = bin.parent().unwrap().parent().unwrap().to_path_buf();
    let out = tempfile::tempdir().unwrap();
    let build = Command::new(repo().join("scripts/build-deb.sh"))
        .env("PROFILE", "dev")
        .env("NO_BUILD", "1")
        .env("CARGO_TARGET_DIR", &target)
        .args(["--fast", "--output"])
        .arg(out.path())
        .output()
        .unwrap();
    let log = latlab_testkit::output_text(&build);
    assert!(build.status.success(), "build-deb.sh failed: {log}");
    let deb = std::fs::read_dir(out.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "deb"))
        .unwrap_or_else(|| panic!("no .deb written: {log}"));
    assert!(
        deb.file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with(&format!("latlab_{}", env!("CARGO_PKG_VERSION"))),
        "{deb:?}"
    );

    let listing = Command::new("dpkg-deb")
        .arg("-c")
        .arg(&deb)
        .output()
        .unwrap();
    assert!(listing.status.success());
    let listing = String::from_utf8_lossy(&listing.stdout).to_string();
    // "mode owner size date time path"
    let entries: Vec<(String, String)> = listing
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            Some((
                f.first()?.to_string(),
                f.get(5)?.trim_start_matches('.').to_string(),
            ))
        })
        .collect();
    let mode = |path: &str| {
        entries
            .iter()
            .find(|(_, p)| p == path)
            .map(|(m, _)| m.clone())
            .unwrap_or_else(|| panic!("{path} missing from the package:\n{listing}"))
    };
    assert_eq!(mode("/usr/bin/latlab"), "-rwxr-xr-x");
    for page in [
        "latlab",
        "latlab-monitor",
        "latlab-serve",
        "latlab-measure",
        "latlab-tune",
    ] {
        assert_eq!(
            mode(&format!("/usr/share/man/man1/{page}.1.gz")),
            "-rw-r--r--"
        );
    }
    assert!(
        !listing.contains("gen-docs"),
        "the hidden gen-docs command has no man page"
    );
    mode("/usr/share/bash-completion/completions/latlab");
    mode("/usr/share/zsh/vendor-completions/_latlab");
    mode("/usr/share/fish/vendor_completions.d/latlab.fish");
    mode("/usr/lib/systemd/system/latlab-monitor.service");
    mode("/usr/share/latlab/grafana-dashboard.json");
    mode("/usr/share/doc/latlab/examples/prometheus-fleet.yml");
    mode("/usr/share/doc/latlab/examples/latlab-alerts.yml");
    mode("/usr/share/doc/latlab/copyright");
    let profiles = repo().join("profiles");
    if profiles.is_dir() {
        for p in std::fs::read_dir(&profiles).unwrap() {
            let name = p.unwrap().file_name().to_string_lossy().to_string();
            if name.ends_with(".toml") {
                mode(&format!("/usr/share/latlab/profiles/{name}"));
            }
        }
    }

    // Control data: the unit is installed but neither enabled nor started by the package.
    let info = Command::new("dpkg-deb")
        .arg("-I")
        .arg(&deb)
        .output()
        .unwrap();
    let info = String::from_utf8_lossy(&info.stdout).to_string();
    assert!(info.contains("Package: latlab"), "{info}");
    assert!(info.contains("Depends:"), "{info}");
    let x = tempfile::tempdir().unwrap();
    assert!(
        Command::new("dpkg-deb")
            .arg("-e")
            .arg(&deb)
            .arg(x.path().join("DEBIAN"))
            .status()
            .unwrap()
            .success()
    );
    let postinst = std::fs::read_to_string(x.path().join("DEBIAN/postinst")).unwrap();
    assert!(postinst.contains("latlab-monitor.service"), "{postinst}");
    assert!(
        !postinst.contains("deb-systemd-invoke start") && !postinst.contains("_dh_action=start"),
        "not started at install: {postinst}"
    );

    // The files are the repository's.
    let root = x.path().join("root");
    assert!(
        Command::new("dpkg-deb")
            .arg("-x")
            .arg(&deb)
            .arg(&root)
            .status()
            .unwrap()
            .success()
    );
    let unit = std::fs::read_to_string(root.join("usr/lib/systemd/system/latlab-monitor.service"))
        .unwrap();
    assert_eq!(
        unit,
        std::fs::read_to_string(repo().join("packaging/latlab-monitor.service")).unwrap()
    );
    assert!(unit.contains("ExecStart=/usr/bin/latlab monitor"));
    assert!(unit.contains("Restart=on-failure"));
    // Windows its store cannot take go to TMPDIR: a directory that outlives a stop (PrivateTmp's
    // /tmp does not), where the next start finds them.
    assert!(
        unit.contains("Environment=TMPDIR=%t/latlab")
            && unit.contains("RuntimeDirectory=latlab")
            && unit.contains("RuntimeDirectoryPreserve=yes"),
        "{unit}"
    );
    let dash: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(root.join("usr/share/latlab/grafana-dashboard.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(dash["uid"], "latlab-monitor");
    let zsh =
        std::fs::read_to_string(root.join("usr/share/zsh/vendor-completions/_latlab")).unwrap();
    assert!(zsh.contains("monitor") && zsh.contains("--schedule"));
    let packaged = root.join("usr/bin/latlab");
    let v = Command::new(&packaged).arg("--version").output().unwrap();
    assert!(String::from_utf8_lossy(&v.stdout).contains(env!("CARGO_PKG_VERSION")));

    // The unit as systemd reads it (its man page is not installed here, so that line is skipped).
    if works("systemd-analyze", &["--version"]) {
        let u = x.path().join("latlab-monitor.service");
        std::fs::write(
            &u,
            unit.replace("/usr/bin/latlab", &packaged.to_string_lossy()),
        )
        .unwrap();
        let v = Command::new("systemd-analyze")
            .arg("verify")
            .arg(&u)
            .output()
            .unwrap();
        let text = latlab_testkit::output_text(&v);
        let problems: Vec<&str> = text
            .lines()
            .filter(|l| !l.trim().is_empty() && !l.contains("man latlab-monitor(1)"))
            .collect();
        assert!(problems.is_empty(), "systemd-analyze verify: {problems:?}");
    } else {
        eprintln!("note: systemd-analyze is not installed; the unit's syntax was not checked");
    }
}
