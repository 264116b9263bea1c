//! What the test files of the latlab command share: the monitor daemon as they run it and what
//! they read back, and the idle states of the machine the tests run on.
#![allow(dead_code)]

use latlab_store::{Annotation, Store, WindowSetRow};
use latlab_testkit::process::{Proc, free_addr, wait_for};
use latlab_testkit::{latlab, policy_args};
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

pub const END: u64 = i64::MAX as u64;

/// `latlab monitor` with 1 s windows at 1 ms on every CPU storing into `db` (SCHED_FIFO as
/// root, otherwise SCHED_OTHER), then `extra`.
pub fn monitor(db: &Path, extra: &[&str]) -> Command {
    let mut c = latlab!();
    c.args(["monitor", "--window", "1s", "--interval", "1ms", "--db"])
        .arg(db)
        .args(policy_args())
        .args(extra);
    c
}

/// The window sets of series `name` (none while the store cannot be read).
pub fn sets(db: &Path, name: &str) -> Vec<WindowSetRow> {
    let Ok(store) = Store::open_existing(db) else {
        return Vec::new();
    };
    let Ok(Some(id)) = store.find_series(name) else {
        return Vec::new();
    };
    store.monitor_sets(id, 0, END).unwrap_or_default()
}

/// The annotations of kind `kind` on series `name` of `db`.
pub fn annotations(db: &Path, name: &str, kind: &str) -> Vec<Annotation> {
    let store = Store::open_existing(db).unwrap();
    let id = store
        .find_series(name)
        .unwrap()
        .unwrap_or_else(|| panic!("no series {name}"));
    store
        .annotations(id, 0, END)
        .unwrap()
        .into_iter()
        .filter(|a| a.kind == kind)
        .collect()
}

/// The `disable` file of every idle state of every CPU of this machine, with what it holds.
pub fn idle_disable_files() -> BTreeMap<PathBuf, String> {
    let mut out = BTreeMap::new();
    let Ok(cpus) = std::fs::read_dir("/sys/devices/system/cpu") else {
        return out;
    };
    for c in cpus.flatten() {
        let idle = c.path().join("cpuidle");
        let Ok(states) = std::fs::read_dir(&idle) else {
            continue;
        };
        for s in states.flatten() {
            let f = s.path().join("disable");
            if let Ok(v) = std::fs::read_to_string(&f) {
                out.insert(f, v);
            }
        }
    }
    out
}

/// A tiny HTTP/1.1 client: (status, headers, body).
pub fn http(addr: SocketAddr, request: &str) -> (u16, String, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s.write_all(request.as_bytes()).unwrap();
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).unwrap();
    let text = String::from_utf8_lossy(&buf).to_string();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (status, head.to_string(), body.to_string())
}

pub fn get(addr: SocketAddr, path: &str) -> (u16, String, String) {
    http(
        addr,
        &format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"),
    )
}

pub fn get_json(addr: SocketAddr, path: &str) -> serde_json::Value {
    let (status, _, body) = get(addr, path);
    assert_eq!(status, 200, "{path}: {body}");
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("{path}: {e}: {body}"))
}

/// Percent-encode a query value.
pub fn enc(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// An instant query of Prometheus's HTTP API: (labels, time, value) per series.
pub fn prom_query(
    prom: SocketAddr,
    q: &str,
    time: Option<f64>,
) -> Vec<(serde_json::Value, f64, f64)> {
    let mut path = format!("/api/v1/query?query={}", enc(q));
    if let Some(t) = time {
        path.push_str(&format!("&time={t:.3}"));
    }
    let v = get_json(prom, &path);
    assert_eq!(v["status"], "success", "{q}: {v}");
    v["data"]["result"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let ts = r["value"][0].as_f64().unwrap();
            let val: f64 = r["value"][1].as_str().unwrap().parse().unwrap();
            (r["metric"].clone(), ts, val)
        })
        .collect()
}

/// A real Prometheus scraping every second with `scrape_configs` (YAML list items, indented
/// by two), its data in `dir`; ready when this returns.
pub fn prometheus(dir: &Path, scrape_configs: &str) -> (Proc, SocketAddr) {
    let addr = free_addr();
    let cfg = dir.join("prometheus.yml");
    std::fs::write(
        &cfg,
        format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n{scrape_configs}"
        ),
    )
    .unwrap();
    let mut cmd = Command::new("prometheus");
    cmd.arg(format!("--config.file={}", cfg.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.join("tsdb").display()
        ))
        .arg(format!("--web.listen-address={addr}"))
        .arg("--log.level=warn");
    let prom = Proc::start(cmd, dir.join("prom.log"));
    wait_for("prometheus ready", Duration::from_secs(60), || {
        TcpStream::connect(addr).is_ok() && get(addr, "/-/ready").0 == 200
    });
    (prom, addr)
}

pub const PASSWORD: &str = "correct horse";

/// A CA, a server certificate for 127.0.0.1 and localhost and a client certificate, both signed
/// by the CA, as PEM files in `dir`: ca.pem, server.pem, server.key, client.pem, client.key.
pub fn certificates(dir: &Path) {
    use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "latlab test CA");
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().unwrap()).unwrap();
    std::fs::write(dir.join("ca.pem"), ca.pem()).unwrap();
    for (name, sans) in [
        (
            "server",
            vec!["localhost".to_string(), "127.0.0.1".to_string()],
        ),
        ("client", vec!["prometheus.example".to_string()]),
    ] {
        let key = KeyPair::generate().unwrap();
        let cert = CertificateParams::new(sans)
            .unwrap()
            .signed_by(&key, &ca)
            .unwrap();
        std::fs::write(dir.join(format!("{name}.pem")), cert.pem()).unwrap();
        std::fs::write(dir.join(format!("{name}.key")), key.serialize_pem()).unwrap();
    }
}

/// A web config with TLS (files relative to it) and one user, `prometheus`, plus `extra` TLS
/// lines.
pub fn web_config(dir: &Path, extra_tls: &str) -> PathBuf {
    let hash = bcrypt::hash(PASSWORD, 4).unwrap();
    let path = dir.join("web.yml");
    std::fs::write(
        &path,
        format!(
            "tls_server_config:\n  cert_file: server.pem\n  key_file: server.key\n{extra_tls}\
             basic_auth_users:\n  prometheus: {hash}\n"
        ),
    )
    .unwrap();
    path
}

/// `latlab serve` of `db` on a free loopback port with `extra` options (e.g. `--web-config`),
/// listening when this returns; its log in `dir`.
pub fn serve(db: &Path, dir: &Path, extra: &[&std::ffi::OsStr]) -> (Proc, SocketAddr) {
    let addr = free_addr();
    let mut c = latlab!();
    c.args(["serve", "--listen", &addr.to_string(), "--db"])
        .arg(db)
        .args(extra);
    let s = Proc::start(c, dir.join(format!("serve-{}.log", addr.port())));
    wait_for("listening", Duration::from_secs(20), || {
        TcpStream::connect(addr).is_ok()
    });
    (s, addr)
}

/// A store in `dir` with a synthetic series `s` of 2 CPUs over `span`.
pub fn synthetic_store(dir: &Path, span: &str) -> PathBuf {
    let db = dir.join("m.db");
    latlab_testkit::run_ok(
        latlab!()
            .args([
                "fill-monitor",
                "--cpus",
                "2",
                "--span",
                span,
                "--name",
                "s",
                "--db",
            ])
            .arg(&db),
    );
    db
}

/// Headless Chromium with `args` (logging on stderr, virtual time for scripts to settle), which
/// must succeed: its stdout (`--dump-dom`) and its log.
pub fn chromium(args: &[String]) -> (String, String) {
    let out = Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--enable-logging=stderr",
            "--v=0",
            "--virtual-time-budget=15000",
        ])
        .args(args)
        .output()
        .unwrap();
    let log = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "{log}");
    (String::from_utf8_lossy(&out.stdout).to_string(), log)
}

/// The page's console messages and uncaught errors in a Chromium log.
pub fn console_lines(log: &str) -> Vec<&str> {
    log.lines()
        .filter(|l| l.contains("CONSOLE") || l.contains("Uncaught"))
        .collect()
}

/// A `monitor --check-config` of a good configuration at the default real-time policy passes
/// as root; without root it fails for that policy alone, as the start it checks would.
pub fn assert_check_config_ok(out: &std::process::Output) {
    if latlab_testkit::is_root() {
        latlab_testkit::assert_ok(out);
    } else {
        let err = latlab_testkit::stderr(out);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(
            err.trim()
                .starts_with("latlab: error: a start now would fail: cannot use SCHED_FIFO")
                && err.trim().lines().count() == 1,
            "{err}"
        );
    }
}
