//! Serving beyond loopback: `--web-config` in the exporter toolkit's format, with TLS (rustls)
//! and basic authentication, read by the real clients a fleet uses: curl and a Prometheus that
//! scrapes `/metrics` over TLS with `basic_auth`. Also client certificates, a configuration
//! that does not load, and a non-loopback address refused without a web config.
//! Tests that need curl or Prometheus skip with the reason when they are missing.
#![allow(clippy::unwrap_used)]

mod common;

use common::{PASSWORD, certificates, prom_query, web_config};
use latlab_testkit::process::{Proc, wait_for};
use latlab_testkit::{assert_one_line_error, latlab, require, run_ok};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

/// A store with a 2-hour synthetic series of 2 CPUs.
fn store(dir: &Path) -> PathBuf {
    common::synthetic_store(dir, "2h")
}

/// A new directory with the test CA and certificates, a web config with TLS, one user and
/// `extra_tls` (its path), and a synthetic store (its path).
fn tls_files(extra_tls: &str) -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    certificates(dir.path());
    let web = web_config(dir.path(), extra_tls);
    let db = store(dir.path());
    (dir, web, db)
}

/// [`tls_files`] and `latlab serve` of the store with that config.
fn tls_server(extra_tls: &str) -> (tempfile::TempDir, Proc, SocketAddr) {
    let (dir, web, db) = tls_files(extra_tls);
    let (server, addr) =
        common::serve(&db, dir.path(), &["--web-config".as_ref(), web.as_os_str()]);
    (dir, server, addr)
}

/// curl with the test CA: (exit code, HTTP status or 0, body).
fn curl(dir: &Path, url: &str, args: &[&str]) -> (i32, u16, String) {
    let out: Output = Command::new("curl")
        .args(["-sS", "--max-time", "20", "--cacert"])
        .arg(dir.join("ca.pem"))
        .args(["-o", "-", "-w", "\n%{http_code}"])
        .args(args)
        .arg(url)
        .current_dir(dir)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", &text));
    (
        out.status.code().unwrap_or(-1),
        code.trim().parse().unwrap_or(0),
        body.to_string(),
    )
}

#[test]
fn tls_and_basic_auth_as_curl_sees_them() {
    if !require("curl") {
        return;
    }
    let (dir, server, addr) = tls_server("");
    let url = format!("https://localhost:{}/metrics", addr.port());
    let user = format!("prometheus:{PASSWORD}");

    let (rc, code, body) = curl(dir.path(), &url, &["-u", &user]);
    assert_eq!((rc, code), (0, 200), "{body}\n{}", server.log());
    assert!(body.contains("latlab_build_info"), "{body}");
    // No credentials, a wrong password, an unknown user: 401, asking for basic auth.
    for args in [&[][..], &["-u", "prometheus:wrong"], &["-u", "nobody:x"]] {
        let (rc, code, body) = curl(dir.path(), &url, args);
        assert_eq!((rc, code), (0, 401), "{args:?}: {body}");
        assert!(!body.contains("latlab_"), "{body}");
    }
    let (_, code, head) = curl(dir.path(), &url, &["-I"]);
    assert_eq!(code, 401);
    assert!(
        head.to_ascii_lowercase()
            .contains("www-authenticate: basic realm=\"latlab\""),
        "{head}"
    );
    // The dashboard is behind the same door.
    let (_, code, _) = curl(
        dir.path(),
        &format!("https://localhost:{}/", addr.port()),
        &[],
    );
    assert_eq!(code, 401);
    let (_, code, page) = curl(
        dir.path(),
        &format!("https://localhost:{}/", addr.port()),
        &["-u", &user],
    );
    assert_eq!(code, 200);
    assert!(page.contains("<html"), "{page}");
    // Plain HTTP to the TLS port is told what it did, and gets nothing else.
    let (rc, code, body) = curl(
        dir.path(),
        &format!("http://localhost:{}/metrics", addr.port()),
        &["-u", &user],
    );
    assert_eq!(
        (rc, code, body.as_str()),
        (0, 400, "Client sent an HTTP request to an HTTPS server.\n")
    );
    // With the security headers every other answer carries (it had none).
    curl(
        dir.path(),
        &format!("http://localhost:{}/metrics", addr.port()),
        &["-D", "h400.txt"],
    );
    let head = std::fs::read_to_string(dir.path().join("h400.txt"))
        .unwrap()
        .to_ascii_lowercase();
    assert!(
        head.contains("x-content-type-options: nosniff")
            && head.contains("content-security-policy: default-src 'self'"),
        "{head}"
    );
    // A TCP probe (a readiness check) that connects and closes is not a refused client.
    drop(TcpStream::connect(addr).unwrap());
    std::thread::sleep(Duration::from_millis(200));
    // A client that does not trust the CA refuses the server.
    let out = Command::new("curl")
        .args(["-sS", "--max-time", "20", &url])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(60),
        "curl's certificate problem, {:?}",
        out
    );
    let log = server.term();
    assert!(
        log.contains(&format!(
            "https://{addr}/metrics (TLS 1.2–1.3; basic auth (1 user))"
        )),
        "{log}"
    );
    // The handshake that client broke off is in the log, once (the next ones within the
    // minute are counted, not said); the probe is not.
    let said: Vec<&str> = log
        .lines()
        .filter(|l| l.starts_with("latlab: web: TLS handshake with 127.0.0.1:"))
        .collect();
    assert!(said.len() == 1 && said[0].contains("alert"), "{log}");
}

/// A client of TLS 1.1 (an old exporter, a scanner) is refused, and the log says what rustls's
/// "peer is incompatible" means.
#[test]
fn a_tls_1_1_client_is_refused_and_the_log_says_why() {
    if !require("curl") {
        return;
    }
    let (dir, server, addr) = tls_server("");
    let url = format!("https://localhost:{}/metrics", addr.port());
    // OpenSSL 3 offers TLS 1.1 only at security level 0.
    let (rc, code, _) = curl(
        dir.path(),
        &url,
        &[
            "--tlsv1.1",
            "--tls-max",
            "1.1",
            "--ciphers",
            "DEFAULT@SECLEVEL=0",
        ],
    );
    assert_eq!((rc, code), (35, 0), "curl's handshake failure");
    let log = server.term();
    let said = log
        .lines()
        .find(|l| l.starts_with("latlab: web: TLS handshake with 127.0.0.1:"))
        .unwrap_or_else(|| panic!("{log}"));
    assert!(
        said.contains("peer is incompatible")
            && said.contains("the client offers nothing this server accepts: TLS older than 1.2"),
        "{said}"
    );
}

#[test]
fn client_certificates_required_are_verified_against_the_client_ca() {
    if !require("curl") {
        return;
    }
    let (dir, server, addr) =
        tls_server("  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.pem\n");
    let url = format!("https://localhost:{}/metrics", addr.port());
    let user = format!("prometheus:{PASSWORD}");
    let (rc, code, _) = curl(dir.path(), &url, &["-u", &user]);
    assert!(
        rc != 0 && code == 0,
        "no client certificate: rc {rc}, {code}"
    );
    let (rc, code, body) = curl(
        dir.path(),
        &url,
        &["-u", &user, "--cert", "client.pem", "--key", "client.key"],
    );
    assert_eq!((rc, code), (0, 200), "{body}\n{}", server.log());
    // A certificate the CA did not sign is refused.
    let own = rcgen::generate_simple_self_signed(vec!["x".into()]).unwrap();
    std::fs::write(dir.path().join("own.pem"), own.cert.pem()).unwrap();
    std::fs::write(dir.path().join("own.key"), own.signing_key.serialize_pem()).unwrap();
    let (rc, code, _) = curl(
        dir.path(),
        &url,
        &["-u", &user, "--cert", "own.pem", "--key", "own.key"],
    );
    assert!(
        rc != 0 && code == 0,
        "a foreign client certificate: rc {rc}, {code}"
    );
}

#[test]
fn prometheus_scrapes_over_tls_with_basic_auth() {
    if !require("prometheus") {
        return;
    }
    let (dir, server, addr) = tls_server("");
    let ca = dir.path().join("ca.pem");
    let job = |name: &str, password: &str| {
        format!(
            "  - job_name: {name}\n    scheme: https\n    tls_config:\n      ca_file: {}\n      \
             server_name: localhost\n    basic_auth:\n      username: prometheus\n      \
             password: '{password}'\n    static_configs:\n      - targets: ['{addr}']\n",
            ca.display()
        )
    };
    let (prom, prom_addr) = common::prometheus(
        dir.path(),
        &(job("latlab", PASSWORD) + &job("wrong", "not it")),
    );
    wait_for("both jobs scraped", Duration::from_secs(60), || {
        prom_query(prom_addr, "up", None).len() == 2
    });
    let up: std::collections::BTreeMap<String, f64> = prom_query(prom_addr, "up", None)
        .into_iter()
        .map(|(m, _, v)| (m["job"].as_str().unwrap().to_string(), v))
        .collect();
    assert_eq!(
        up.get("latlab"),
        Some(&1.0),
        "{}\n{}",
        prom.log(),
        server.log()
    );
    assert_eq!(
        up.get("wrong"),
        Some(&0.0),
        "a wrong password scrapes nothing"
    );
    let cpus = prom_query(
        prom_addr,
        "latlab_wakeup_latency_seconds_count{job=\"latlab\"}",
        None,
    );
    assert_eq!(cpus.len(), 2, "both CPUs of the series, over TLS");
    let targets = common::get_json(prom_addr, "/api/v1/targets");
    let wrong = targets["data"]["activeTargets"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["labels"]["job"] == "wrong")
        .unwrap()
        .clone();
    assert!(
        wrong["lastError"].as_str().unwrap().contains("401"),
        "{wrong}"
    );
}

#[test]
fn a_web_config_that_does_not_load_and_an_open_address_are_refused_before_serving() {
    let dir = tempfile::tempdir().unwrap();
    let db = store(dir.path());
    let bad = dir.path().join("bad.yml");
    std::fs::write(
        &bad,
        "tls_server_config:\n  cert_file: none.pem\n  key_file: none.key\n",
    )
    .unwrap();
    let out = latlab!()
        .args(["serve", "--db"])
        .arg(&db)
        .arg("--web-config")
        .arg(&bad)
        .output()
        .unwrap();
    assert_one_line_error(&out, 2, "--web-config ");
    assert!(
        latlab_testkit::stderr(&out).contains("cert_file: ")
            && latlab_testkit::stderr(&out).contains("none.pem")
    );
    for cmd in [
        &["serve", "--db", db.to_str().unwrap()][..],
        &["monitor", "--check-config"],
    ] {
        let out = latlab!()
            .args(cmd)
            .args(["--listen", "0.0.0.0:9464"])
            .output()
            .unwrap();
        assert_one_line_error(
            &out,
            2,
            "--listen 0.0.0.0:9464: reachable from other machines",
        );
        assert!(latlab_testkit::stderr(&out).contains("--insecure-listen"));
    }
    // With the web config, monitor's check shows how it will serve.
    certificates(dir.path());
    let web = web_config(dir.path(), "");
    let out = run_ok(
        latlab!()
            .args([
                "monitor",
                "--check-config",
                "--listen",
                "0.0.0.0:9464",
                "--web-config",
            ])
            .arg(&web),
    );
    let text = latlab_testkit::stdout(&out);
    assert!(
        text.contains("https://0.0.0.0:9464/metrics — TLS 1.2–1.3; basic auth (1 user)"),
        "{text}"
    );
    // A web config that lacks TLS or authentication does not open the address either; client
    // certificates required count as authentication; --insecure-listen serves it all the same.
    let tls = "tls_server_config:\n  cert_file: server.pem\n  key_file: server.key\n";
    let mtls = "  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.pem\n";
    for (text, refusal) in [
        ("", Some("has no tls_server_config (plain HTTP)")),
        (
            "http_server_config:\n  headers:\n    X-Frame-Options: deny\n",
            Some("has no tls_server_config (plain HTTP)"),
        ),
        (
            tls,
            Some("has neither basic_auth_users nor client_auth_type"),
        ),
        (&format!("{tls}{mtls}"), None),
    ] {
        let file = dir.path().join("partial.yml");
        std::fs::write(&file, text).unwrap();
        let check = |extra: &[&str]| {
            latlab!()
                .args(["monitor", "--check-config", "--listen", "0.0.0.0:9464"])
                .args(extra)
                .arg("--web-config")
                .arg(&file)
                .output()
                .unwrap()
        };
        let insecure = check(&["--insecure-listen"]);
        assert!(insecure.status.success(), "{text:?}: {insecure:?}");
        let out = check(&[]);
        match refusal {
            Some(why) => {
                assert_one_line_error(
                    &out,
                    2,
                    "--listen 0.0.0.0:9464: reachable from other machines",
                );
                assert!(
                    latlab_testkit::stderr(&out).contains(why),
                    "{text:?}: {out:?}"
                );
            }
            None => assert!(out.status.success(), "{text:?}: {out:?}"),
        }
    }
}

/// `latlab serve` of a store over TLS with basic auth on `host` (`0.0.0.0`; empty: `:PORT`) and
/// a free port, once it listens: its directory, web config, server and port.
fn serve_open(host: &str) -> (tempfile::TempDir, PathBuf, Proc, u16) {
    let (dir, web, db) = tls_files("");
    let port = latlab_testkit::process::free_port();
    let mut c = latlab!();
    c.args(["serve", "--listen", &format!("{host}:{port}"), "--db"])
        .arg(&db)
        .arg("--web-config")
        .arg(&web);
    let server = Proc::start(c, dir.path().join("serve.log"));
    wait_for("listening", Duration::from_secs(20), || {
        TcpStream::connect(("127.0.0.1", port)).is_ok()
    });
    (dir, web, server, port)
}

#[test]
fn on_an_open_address_a_change_that_drops_authentication_is_refused() {
    if !require("curl") {
        return;
    }
    let (dir, web, server, port) = serve_open("0.0.0.0");
    let url = format!("https://localhost:{port}/metrics");
    assert_eq!(curl(dir.path(), &url, &[]).1, 401, "{}", server.log());
    // Emptied in place, as a tool rewriting the file does for a moment: plain HTTP without
    // users would open the metrics to anyone who reaches the address.
    std::fs::write(&web, "").unwrap();
    wait_for("the change refused", Duration::from_secs(20), || {
        curl(dir.path(), &url, &[]);
        server
            .log()
            .contains("refused on an address other machines reach")
    });
    let (rc, code, body) = curl(dir.path(), &url, &[]);
    assert_eq!((rc, code), (0, 401), "TLS and authentication stay: {body}");
    let (_, code, body) = curl(dir.path(), &url, &["-u", &format!("prometheus:{PASSWORD}")]);
    assert_eq!(code, 200, "{body}");
    let log = server.term();
    assert!(log.contains("the one before stays"), "{log}");
}

#[test]
fn the_web_configs_headers_are_on_every_answer_refusals_included() {
    if !require("curl") {
        return;
    }
    let (dir, web, db) = tls_files("");
    let mut text = std::fs::read_to_string(&web).unwrap();
    // Four requests at once, then one an hour: the fifth is refused.
    text.push_str(
        "http_server_config:\n  headers:\n    X-Frame-Options: deny\n    \
         Strict-Transport-Security: max-age=31536000\nrate_limit:\n  interval: 1h\n  burst: 4\n",
    );
    std::fs::write(&web, text).unwrap();
    let (server, addr) =
        common::serve(&db, dir.path(), &["--web-config".as_ref(), web.as_os_str()]);
    let url = format!("https://localhost:{}/metrics", addr.port());
    let user = format!("prometheus:{PASSWORD}");
    for (args, status) in [
        (&[][..], 401),
        (&["-u", &user][..], 200),
        (&["-u", &user, "-X", "POST"][..], 405),
        (&["-u", &user, "-X", "GET", "-d", "x"][..], 413),
        (&["-u", &user][..], 429),
    ] {
        let mut with_head = vec!["-D", "-"];
        with_head.extend_from_slice(args);
        let (rc, code, out) = curl(dir.path(), &url, &with_head);
        assert_eq!((rc, code), (0, status), "{args:?}: {out}\n{}", server.log());
        let head = out.to_ascii_lowercase();
        for h in [
            "x-frame-options: deny",
            "strict-transport-security: max-age=31536000",
            "x-content-type-options: nosniff",
            "content-security-policy: default-src 'self'",
        ] {
            assert!(head.contains(h), "{status} without {h}: {out}");
        }
    }
}

#[test]
fn answers_carry_the_security_headers_and_nothing_of_the_server() {
    use std::io::{Read, Write};
    let dir = tempfile::tempdir().unwrap();
    let db = store(dir.path());
    let (server, addr) = common::serve(&db, dir.path(), &[]);
    // Every answer, found or not: no sniffing, only the page's own scripts and styles.
    for path in ["/", "/metrics", "/api/series", "/nothing-here"] {
        let (_, head, _) = common::get(addr, path);
        let head = head.to_ascii_lowercase();
        assert!(
            head.contains("x-content-type-options: nosniff"),
            "{path}: {head}"
        );
        assert!(
            head.contains("content-security-policy: default-src 'self'")
                && head.contains("script-src 'self'")
                && head.contains("style-src 'self'"),
            "{path}: {head}"
        );
    }
    // No path leads outside the embedded assets.
    for path in [
        "/../../etc/passwd",
        "/%2e%2e/%2e%2e/etc/passwd",
        "/app.js/..%2f..%2fetc%2fpasswd",
        "//etc/passwd",
        "/style.css%00.js",
    ] {
        let (status, _, body) = common::get(addr, path);
        assert!(status == 404 || status == 400, "{path}: {status}");
        assert!(!body.contains("root:"), "{path}: {body}");
    }
    // A client that never finishes its request is closed (within the 10 s header timeout).
    let mut slow = TcpStream::connect(addr).unwrap();
    slow.set_read_timeout(Some(Duration::from_secs(40)))
        .unwrap();
    slow.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n").unwrap();
    let started = std::time::Instant::now();
    let mut buf = Vec::new();
    let _ = slow.read_to_end(&mut buf);
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "a slow client held its connection for {:?}",
        started.elapsed()
    );
    assert!(!String::from_utf8_lossy(&buf).contains("200 OK"));
    // A store broken under the server: a 503 (it cannot be read now) that names no file and
    // no internals; the detail is in the server's log.
    std::fs::write(&db, b"not a store any more").unwrap();
    let (status, _, body) = common::get(addr, "/api/series");
    assert_eq!(status, 503, "{body}");
    assert_eq!(
        body,
        "{\"error\":\"the store cannot be read now (the server's log has the detail)\"}"
    );
    let log = server.term();
    assert!(log.contains("latlab: web: "), "{log}");
}

/// A server certificate made the common way with OpenSSL (`x509 -req` without extensions) is
/// X.509 v1, which rustls does not take: the file is refused naming the certificate and how to
/// make one it takes, not blaming the key.
#[test]
fn an_x509_v1_server_certificate_is_named_as_the_problem() {
    if !require("openssl") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let sh = "openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
              -keyout server.key -subj /CN=localhost -out c.csr && \
              openssl x509 -req -in c.csr -signkey server.key -out server.pem -days 1";
    let out = Command::new("sh")
        .args(["-c", sh])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let web = web_config(dir.path(), "");
    let out = latlab!()
        .args(["monitor", "--check-config", "--web-config"])
        .arg(&web)
        .arg("--db")
        .arg(dir.path().join("m.db"))
        .output()
        .unwrap();
    assert_one_line_error(
        &out,
        2,
        "cert_file: an X.509 v1 certificate, which rustls does not take (accepted: an X.509 v3",
    );
}

/// `--listen :PORT` takes IPv6 and IPv4 both, as Go's `:PORT` does (it took IPv4 alone, so an
/// IPv6-only cluster's Prometheus could not reach a node). Skipped where the host has no IPv6.
#[test]
fn listen_on_a_bare_port_takes_ipv6_and_ipv4() {
    if std::net::TcpListener::bind("[::1]:0").is_err() {
        eprintln!("skipped: this host has no IPv6 loopback");
        return;
    }
    let (_dir, _web, server, port) = serve_open("");
    let v6: SocketAddr = format!("[::1]:{port}").parse().unwrap();
    assert!(TcpStream::connect(v6).is_ok(), "{}", server.log());
    assert!(
        server.log().contains(&format!("https://[::]:{port}/")),
        "{}",
        server.log()
    );
}

/// One client address that opens every connection it can and finishes no request holds at most
/// its share: another client's scrape is answered at once (it waited out the first one's
/// header timeout), and the connections past the share are closed at once.
#[test]
fn one_client_cannot_take_every_connection() {
    use std::io::{Read, Write};
    if !require("curl") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let db = common::synthetic_store(dir.path(), "1h");
    let (server, addr) = common::serve(&db, dir.path(), &[]);
    let mut held = Vec::new();
    for _ in 0..300 {
        let Ok(mut c) = TcpStream::connect(addr) else {
            break;
        };
        let _ = c.write_all(b"GET / HTTP/1.1\r\n");
        held.push(c);
    }
    // Past its share the server closes them: the last ones read an end at once.
    let mut last = held.pop().unwrap();
    last.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut buf = [0u8; 16];
    match last.read(&mut buf) {
        // Closed with its request unread: an end, or a reset.
        Ok(0) => {}
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
        other => panic!("not closed: {other:?}"),
    }
    // Another address (loopback's 127.0.0.2) is served while the first holds its share.
    let started = std::time::Instant::now();
    let out = Command::new("curl")
        .args([
            "-s",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            "--max-time",
            "5",
        ])
        .args(["--interface", "127.0.0.2"])
        .arg(format!("http://{addr}/metrics"))
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "200");
    assert!(started.elapsed() < Duration::from_secs(5));
    drop(held);
    server.term();
}
