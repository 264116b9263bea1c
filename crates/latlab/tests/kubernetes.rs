//! The Kubernetes manifests (packaging/kubernetes/) and the Grafana dashboard cannot drift from
//! the CLI: every manifest parses and has the fields its API requires, the objects find each
//! other (selectors, ports, the job label the alerts use), the exact command lines in them run
//! through latlab (the DaemonSet's with `--check-config`, the gate Job's on a short duration),
//! and every metric name the alerts and the dashboard query is one `/metrics` serves.
#![allow(clippy::unwrap_used)]

mod common;

use latlab_testkit::{latlab, output_text, run_exit, stderr, stdout};
use serde::Deserialize;
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use latlab_testkit::repo;

/// Every document of every manifest, with its file name.
fn manifests() -> Vec<(String, Value)> {
    let dir = repo().join("packaging/kubernetes");
    let mut files: Vec<PathBuf> = [dir.clone(), dir.join("gate")]
        .iter()
        .flat_map(|d| std::fs::read_dir(d).unwrap())
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    assert!(files.len() >= 4, "{files:?}");
    let mut docs = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        let name = f.strip_prefix(&dir).unwrap().to_string_lossy().to_string();
        for d in serde_norway::Deserializer::from_str(&text) {
            let v = serde_norway::Value::deserialize(d).unwrap_or_else(|e| panic!("{name}: {e}"));
            docs.push((name.clone(), serde_json::to_value(v).unwrap()));
        }
    }
    docs
}

fn kind<'a>(docs: &'a [(String, Value)], k: &str) -> Vec<&'a Value> {
    docs.iter()
        .filter(|(_, d)| d["kind"] == k)
        .map(|(_, d)| d)
        .collect()
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| a.iter().map(|s| s.as_str().unwrap().to_string()).collect())
        .unwrap_or_default()
}

/// The pod template's labels include every label of the selector.
fn selects(selector: &Value, labels: &Value) -> bool {
    selector
        .as_object()
        .unwrap()
        .iter()
        .all(|(k, v)| labels[k] == *v)
}

#[test]
fn every_manifest_has_what_its_api_requires_and_the_objects_find_each_other() {
    let docs = manifests();
    for (file, d) in &docs {
        for field in ["apiVersion", "kind"] {
            assert!(d[field].is_string(), "{file}: {field} missing");
        }
        let meta = &d["metadata"];
        assert!(
            meta["name"].is_string() || meta["generateName"].is_string(),
            "{file}: metadata.name"
        );
        if d["kind"] != "Namespace" {
            assert_eq!(meta["namespace"], "latlab", "{file}: {}", d["kind"]);
        }
    }
    let ds = kind(&docs, "DaemonSet");
    assert_eq!(ds.len(), 1);
    let ds = ds[0];
    assert_eq!(ds["apiVersion"], "apps/v1");
    let pod_labels = &ds["spec"]["template"]["metadata"]["labels"];
    assert!(selects(&ds["spec"]["selector"]["matchLabels"], pod_labels));
    let pod = &ds["spec"]["template"]["spec"];
    assert_eq!(
        pod["nodeSelector"]["latlab.io/monitor"], "true",
        "on labelled nodes"
    );
    let c = &pod["containers"][0];
    assert!(c["name"].is_string() && c["image"].is_string());
    let caps: BTreeSet<String> = strings(&c["securityContext"]["capabilities"]["add"])
        .into_iter()
        .collect();
    assert_eq!(caps, BTreeSet::from(["IPC_LOCK".into(), "SYS_NICE".into()]));
    assert_eq!(c["securityContext"]["privileged"], false);
    assert!(c["resources"]["requests"]["memory"].is_string());
    assert!(c["resources"]["limits"]["memory"].is_string());
    let port = &c["ports"][0];
    assert_eq!(port["containerPort"], 9464);
    assert_eq!(c["readinessProbe"]["tcpSocket"]["port"], port["name"]);
    // Every mount has its volume, and the store is on the node.
    let volumes: Vec<&Value> = pod["volumes"].as_array().unwrap().iter().collect();
    for m in c["volumeMounts"].as_array().unwrap() {
        assert!(volumes.iter().any(|v| v["name"] == m["name"]), "{m}");
    }
    let store = volumes.iter().find(|v| v["name"] == "store").unwrap();
    assert_eq!(store["hostPath"]["path"], "/var/lib/latlab");

    let svc = kind(&docs, "Service");
    assert_eq!(svc.len(), 1);
    let svc = svc[0];
    assert!(selects(&svc["spec"]["selector"], pod_labels));
    assert_eq!(svc["spec"]["ports"][0]["targetPort"], port["name"]);

    let sm = kind(&docs, "ServiceMonitor")[0];
    assert_eq!(sm["apiVersion"], "monitoring.coreos.com/v1");
    assert!(selects(
        &sm["spec"]["selector"]["matchLabels"],
        &svc["metadata"]["labels"]
    ));
    let ep = &sm["spec"]["endpoints"][0];
    assert_eq!(ep["port"], svc["spec"]["ports"][0]["name"]);
    assert_eq!(ep["scheme"], "https");
    assert!(ep["basicAuth"]["password"]["key"].is_string());
    // The alerts' job="latlab" is the value of the Service's label the ServiceMonitor names.
    let job_label = sm["spec"]["jobLabel"].as_str().unwrap();
    let job = svc["metadata"]["labels"][job_label].as_str().unwrap();
    let rules = kind(&docs, "PrometheusRule")[0];
    let mut alerts = Vec::new();
    for g in rules["spec"]["groups"].as_array().unwrap() {
        for r in g["rules"].as_array().unwrap() {
            let expr = r["expr"].as_str().unwrap();
            assert!(expr.contains(&format!("job=\"{job}\"")), "{expr}");
            alerts.push(r["alert"].as_str().unwrap().to_string());
        }
    }
    for a in [
        "LatlabWindowMaxAboveThreshold",
        "LatlabDown",
        "LatlabWindowsMissing",
    ] {
        assert!(alerts.iter().any(|x| x == a), "{a} in {alerts:?}");
    }

    let job = kind(&docs, "Job")[0];
    assert_eq!(job["apiVersion"], "batch/v1");
    assert_eq!(job["spec"]["template"]["spec"]["restartPolicy"], "Never");
}

/// The container's command line with the pod's variables and mounts put in: `$(VAR)` from
/// `env`, and each mount path replaced by the directory `mounts` gives it.
fn command_line(c: &Value, env: &[(&str, &str)], mounts: &[(&str, &Path)]) -> Vec<String> {
    assert_eq!(strings(&c["command"]), ["latlab"]);
    strings(&c["args"])
        .into_iter()
        .map(|a| {
            let mut a = a;
            for (k, v) in env {
                a = a.replace(&format!("$({k})"), v);
            }
            for (m, p) in mounts {
                if let Some(rest) = a.strip_prefix(m) {
                    a = format!("{}{rest}", p.display());
                }
            }
            a
        })
        .collect()
}

#[test]
fn the_daemonsets_command_line_is_one_latlab_accepts() {
    let docs = manifests();
    let c = &kind(&docs, "DaemonSet")[0]["spec"]["template"]["spec"]["containers"][0];
    let dir = tempfile::tempdir().unwrap();
    let (store, web) = (dir.path().join("store"), dir.path().join("web"));
    std::fs::create_dir_all(&store).unwrap();
    std::fs::create_dir_all(&web).unwrap();
    // The Secret as the README says to make it: web.yml beside its certificate and key.
    common::certificates(&web);
    common::web_config(&web, "");
    let args = command_line(
        c,
        &[("NODE_NAME", "node-a")],
        &[("/var/lib/latlab", &store), ("/etc/latlab/web", &web)],
    );
    let out = latlab!()
        .args(&args)
        .arg("--check-config")
        .output()
        .unwrap();
    common::assert_check_config_ok(&out);
    let text = stdout(&out);
    assert!(
        text.contains("node-a"),
        "the series is named after the node: {text}"
    );
    assert!(
        text.contains("https://[::]:9464/metrics — TLS 1.2–1.3; basic auth (1 user)"),
        "{text}"
    );
    // Without its web config the same line is refused: the manifest cannot serve in the open.
    let open: Vec<String> = args
        .iter()
        .take_while(|a| *a != "--web-config")
        .cloned()
        .collect();
    run_exit(latlab!().args(&open).arg("--check-config"), 2);
}

#[test]
fn the_gate_jobs_command_line_measures_and_leaves_junit_in_its_volume() {
    let docs = manifests();
    let c = &kind(&docs, "Job")[0]["spec"]["template"]["spec"]["containers"][0];
    let dir = tempfile::tempdir().unwrap();
    let mut args = command_line(c, &[], &[("/results", dir.path())]);
    // The same flags on a short run (and ordinary scheduling where the test is not root).
    let d = args.iter().position(|a| a == "--duration").unwrap();
    args[d + 1] = "2s".into();
    let out = latlab!()
        .args(&args)
        .args(latlab_testkit::policy_args())
        .output()
        .unwrap();
    let code = out.status.code();
    assert!(
        code == Some(0) || code == Some(4),
        "a verdict, pass or limit exceeded: {code:?} {}",
        stderr(&out)
    );
    let run: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("run.json")).unwrap())
            .unwrap();
    let cpus = run["threads"].as_array().unwrap().len();
    let xml = std::fs::read_to_string(dir.path().join("latency.xml")).unwrap();
    let doc = roxmltree::Document::parse(&xml).unwrap();
    let root = doc.root_element();
    assert_eq!(root.attribute("tests"), Some(cpus.to_string().as_str()));
    let failed: usize = root.attribute("failures").unwrap().parse().unwrap();
    assert_eq!(
        failed > 0,
        code == Some(4),
        "the exit code is the JUnit's verdict"
    );
}

/// The metric names `/metrics` serves for a store (families and their samples' names).
fn served_names(dir: &Path) -> BTreeSet<String> {
    let db = common::synthetic_store(dir, "1h");
    let (server, addr) = common::serve(&db, dir, &[]);
    let (status, _, mut text) = common::get(addr, "/metrics");
    assert_eq!(status, 200);
    server.term();
    // And what a running daemon adds (what waits in memory, what it lost).
    let live = dir.join("live.db");
    let addr = latlab_testkit::process::free_addr();
    let mut d = latlab_testkit::process::Proc::start(
        common::monitor(&live, &["--listen", &addr.to_string(), "--name", "n"]),
        dir.join("live.log"),
    );
    d.wait_until(
        "a stored window",
        std::time::Duration::from_secs(30),
        || !common::sets(&live, "n").is_empty(),
    );
    let (status, _, daemon) = common::get(addr, "/metrics");
    d.term();
    assert_eq!(status, 200);
    text.push_str(&daemon);
    text.lines()
        .filter_map(|l| {
            let l = l.strip_prefix("# TYPE ").unwrap_or(l);
            (!l.starts_with('#')).then(|| l.split(['{', ' ']).next().unwrap().to_string())
        })
        .filter(|n| !n.is_empty())
        .collect()
}

/// The `latlab_*` names in a PromQL expression.
fn names_in(expr: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = expr;
    while let Some(i) = rest.find("latlab_") {
        let tail = &rest[i..];
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(tail.len());
        out.push(tail[..end].to_string());
        rest = &tail[end..];
    }
    out
}

#[test]
fn the_alerts_and_the_dashboard_query_only_metrics_latlab_serves() {
    let dir = tempfile::tempdir().unwrap();
    let served = served_names(dir.path());
    assert!(
        served.contains("latlab_wakeup_latency_seconds_bucket"),
        "{served:?}"
    );
    let mut exprs = Vec::new();
    for (_, d) in manifests()
        .iter()
        .filter(|(_, d)| d["kind"] == "PrometheusRule")
    {
        for g in d["spec"]["groups"].as_array().unwrap() {
            for r in g["rules"].as_array().unwrap() {
                exprs.push(r["expr"].as_str().unwrap().to_string());
            }
        }
    }
    let dash: Value = serde_json::from_str(
        &std::fs::read_to_string(repo().join("packaging/grafana-dashboard.json")).unwrap(),
    )
    .unwrap();
    for p in dash["panels"].as_array().unwrap() {
        for t in p["targets"].as_array().unwrap_or(&Vec::new()) {
            exprs.push(t["expr"].as_str().unwrap().to_string());
        }
    }
    let vars = dash["templating"]["list"].as_array().unwrap();
    for v in vars {
        if let Some(q) = v["definition"].as_str() {
            exprs.push(q.to_string());
        }
    }
    // A fleet view: a machine and a CPU variable, and every per-CPU panel filtered by both.
    for name in ["instance", "cpu"] {
        assert!(
            vars.iter().any(|v| v["name"] == name),
            "the {name} variable"
        );
    }
    assert!(exprs.iter().filter(|e| e.contains("cpu=~\"$cpu\"")).count() >= 5);
    let mut checked = 0;
    for e in &exprs {
        for n in names_in(e) {
            assert!(
                served.contains(&n),
                "{n} (in {e}) is not served by /metrics"
            );
            checked += 1;
        }
    }
    assert!(checked >= 15, "{checked} names checked");
}

/// `kubectl apply -f packaging/kubernetes/` (as the DaemonSet's header says) takes every file
/// of the directory, and apply refuses an object whose name is generated: such a one (the gate
/// Job) lives in a directory of its own.
#[test]
fn the_applied_directory_has_no_generated_name() {
    let docs = manifests();
    for (file, d) in &docs {
        let generated = d["metadata"].get("generateName").is_some();
        assert_eq!(generated, file.contains('/'), "{file}: {d}");
    }
    assert!(docs.iter().any(|(f, _)| f == "gate/gate-job.yaml"));
}

/// The rule file of a Prometheus that scrapes the machines itself holds the Operator's rules,
/// the same expressions; and the fleet's configuration, with it beside, passes promtool.
#[test]
fn the_fleet_rule_file_is_the_operators_rules() {
    let docs = manifests();
    let rule = kind(&docs, "PrometheusRule")[0];
    let text = std::fs::read_to_string(repo().join("packaging/latlab-alerts.yml")).unwrap();
    let fleet: Value =
        serde_json::to_value(serde_norway::from_str::<serde_norway::Value>(&text).unwrap())
            .unwrap();
    let alerts = |groups: &Value| -> Vec<(String, String)> {
        groups[0]["rules"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                (
                    r["alert"].as_str().unwrap().to_string(),
                    r["expr"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    };
    assert_eq!(alerts(&fleet["groups"]), alerts(&rule["spec"]["groups"]));
    if !latlab_testkit::require("promtool") {
        return;
    }
    let out = std::process::Command::new("promtool")
        .args(["check", "config"])
        .arg(repo().join("packaging/prometheus-fleet.yml"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", output_text(&out));
    let found = format!("{} rules found", alerts(&fleet["groups"]).len());
    assert!(stdout(&out).contains(&found), "{}", output_text(&out));
}

#[test]
fn promtool_accepts_the_alerting_rules() {
    if !latlab_testkit::require("promtool") {
        return;
    }
    let docs = manifests();
    let rule = kind(&docs, "PrometheusRule")[0];
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("rules.yml");
    // The Operator's spec is a Prometheus rule file.
    let yaml = serde_norway::to_string(&rule["spec"]).unwrap();
    std::fs::write(&file, yaml).unwrap();
    let out = std::process::Command::new("promtool")
        .args(["check", "rules"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", output_text(&out));
    let rules: usize = rule["spec"]["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["rules"].as_array().unwrap().len())
        .sum();
    let found = format!("{rules} rules found");
    assert!(stdout(&out).contains(&found), "{}", stdout(&out));
}

/// The worst-case alert pages on three windows in a row above 100 µs, not on one bad window
/// (a daemon's first, or one after a scrape gap): it had no `for` and fired on the first. Run
/// with promtool's rule tests on both rule files.
#[test]
fn the_worst_case_alert_waits_for_fifteen_minutes_of_bad_windows() {
    if !latlab_testkit::require("promtool") {
        return;
    }
    let docs = manifests();
    let operator = serde_norway::to_string(&kind(&docs, "PrometheusRule")[0]["spec"]).unwrap();
    let fleet = std::fs::read_to_string(repo().join("packaging/latlab-alerts.yml")).unwrap();
    for (rules, place) in [(fleet, "instance"), (operator, "node")] {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("rules.yml"), rules).unwrap();
        let series = |cpu: u32| {
            format!(
                "latlab_wakeup_latency_window_max_seconds{{job=\"latlab\",{place}=\"n1\",cpu=\"{cpu}\"}}"
            )
        };
        // CPU 0 above from its first window on; CPU 1 too, but one window of 50 µs at 5 min.
        let test = format!(
            "rule_files: [rules.yml]
evaluation_interval: 30s
tests:
  - interval: 30s
    input_series:
      - series: '{}'
        values: '0.0002x40'
      - series: '{}'
        values: '0.0002x10 0.00005 0.0002x29'
    alert_rule_test:
      - eval_time: 1m
        alertname: LatlabWindowMaxAboveThreshold
        exp_alerts: []
      - eval_time: 16m
        alertname: LatlabWindowMaxAboveThreshold
        exp_alerts:
          - exp_labels: {{job: latlab, {place}: n1, cpu: \"0\", severity: warning}}
            exp_annotations:
              summary: \"CPU 0 of n1: every window's worst wake-up above 100 µs for 15 minutes\"
              description: \"The last window's worst case is 200us. Open the {}'s dashboard (port 9464) for its histograms and spikes.\"
",
            series(0),
            series(1),
            if place == "node" { "node" } else { "machine" }
        );
        std::fs::write(dir.path().join("test.yml"), test).unwrap();
        let out = std::process::Command::new("promtool")
            .args(["test", "rules", "test.yml"])
            .current_dir(dir.path())
            .output()
            .unwrap();
        assert!(out.status.success(), "{place}: {}", output_text(&out));
    }
}
