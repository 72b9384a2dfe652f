//! deploy/kubernetes: the fleet's Indexed Job and its merge Job are valid Kubernetes 1.37
//! objects (kubernetes-validate, pinned, from PyPI, installed by this test), agree with
//! themselves (one index per instance), and their commands do what docs/diagnose.md says when
//! run as written: the diagnose container's script on one instance's Loki slice writes its
//! partial, the merge container's script writes the fleet report.

mod common;
use resolvelab_core::testing;
use resolvelab_provision::pytool::{Installed, KUBERNETES_VALIDATE};
use serde_json::Value;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn manifests() -> [PathBuf; 2] {
    let d = root().join("deploy/kubernetes");
    [d.join("diagnose-job.yaml"), d.join("merge-job.yaml")]
}

fn validator() -> Option<Installed> {
    match KUBERNETES_VALIDATE.ensure(&|l| eprintln!("{l}")) {
        Ok(v) => Some(v),
        Err(e) => {
            testing::missing_prerequisite(&format!("kubernetes-validate from PyPI: {e:#}"));
            None
        }
    }
}

/// Every document of a YAML file, read by the validator's own PyYAML.
fn documents(v: &Installed, file: &Path) -> Vec<Value> {
    let out = common::run_ok(
        v.python()
            .args([
                "-c",
                "import json, sys, yaml; print(json.dumps(list(yaml.safe_load_all(open(sys.argv[1])))))",
            ])
            .arg(file),
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn the_manifests_are_valid_kubernetes_objects() {
    let Some(v) = validator() else { return };
    let o = v
        .command()
        .arg("--strict")
        .args(manifests())
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(o.status.success(), "{text}");
    assert_eq!(text.matches(" passed for resource ").count(), 4, "{text}");
    // The validator does reject a mistake (a misspelt field, strict mode).
    let tmp = tempfile::tempdir().unwrap();
    let bad = tmp.path().join("bad.yaml");
    let text = std::fs::read_to_string(&manifests()[0]).unwrap();
    std::fs::write(&bad, text.replace("completionMode:", "completionMod:")).unwrap();
    let o = v.command().arg("--strict").arg(&bad).output().unwrap();
    assert!(!o.status.success(), "a misspelt field passed");
}

fn script(job: &Value, container: &str) -> String {
    let spec = &job["spec"]["template"]["spec"];
    let all = [&spec["initContainers"], &spec["containers"]];
    let c = all
        .iter()
        .filter_map(|l| l.as_array())
        .flatten()
        .find(|c| c["name"] == container)
        .unwrap_or_else(|| panic!("no container {container}"));
    assert_eq!(c["command"], serde_json::json!(["/bin/sh", "-c"]));
    c["args"][0].as_str().unwrap().to_string()
}

#[test]
fn the_jobs_commands_run_as_written() {
    let Some(v) = validator() else { return };
    let docs = documents(&v, &manifests()[0]);
    let fleet = docs.iter().find(|d| d["kind"] == "ConfigMap").unwrap();
    let job = docs.iter().find(|d| d["kind"] == "Job").unwrap();
    let instances: Vec<&str> = fleet["data"]["instances"]
        .as_str()
        .unwrap()
        .lines()
        .collect();
    assert_eq!(
        job["spec"]["completions"].as_u64(),
        Some(instances.len() as u64)
    );
    assert_eq!(job["spec"]["completionMode"], "Indexed");
    let merge = &documents(&v, &manifests()[1])[0];

    // The pod's file system, under a temporary root: /slice holds one instance's Loki slice
    // (what the init container's logcli writes), /conf the nginx.conf, /parts the volume.
    let tmp = tempfile::tempdir().unwrap();
    let fs = |p: &str| tmp.path().join(p.trim_start_matches('/'));
    for d in ["slice", "conf", "parts"] {
        std::fs::create_dir_all(fs(d)).unwrap();
    }
    let mut loki = String::new();
    flate2::read::GzDecoder::new(
        std::fs::File::open(root().join("tests/fixtures/exports/loki.jsonl.gz")).unwrap(),
    )
    .read_to_string(&mut loki)
    .unwrap();
    for (name, pod) in [(instances[0], "web-1"), (instances[1], "web-2")] {
        let slice: String = loki
            .lines()
            .filter(|l| l.contains(&format!("\"pod\":\"{pod}\"")))
            .map(|l| format!("{}\n", l.replace(pod, name)))
            .collect();
        std::fs::write(fs("slice/logs.jsonl"), slice).unwrap();
        std::fs::write(fs("slice/instance"), format!("{name}\n")).unwrap();
        std::fs::copy(
            root().join("tests/fixtures/diagnose/real/nxdomain/nginx.conf"),
            fs("conf/nginx.conf"),
        )
        .unwrap();
        // The lab's log format: the fixture's nginx.conf names it, as production's would.
        run(&script(job, "diagnose"), tmp.path());
        assert!(fs(&format!("parts/{name}.json")).exists());
    }
    let report = run(&script(merge, "merge"), tmp.path());
    assert!(
        report.starts_with("# resolvelab fleet diagnosis — 2 instances"),
        "{report}"
    );
    assert!(report.contains("dns-answer-change"), "{report}");
    assert!(fs("parts/fleet.html").exists());
}

/// A container's script with its absolute paths moved under `root`, `resolvelab` on PATH.
fn run(script: &str, root: &Path) -> String {
    let mut s = script.to_string();
    for d in ["/slice/", "/conf/", "/parts/"] {
        s = s.replace(d, &format!("{}{d}", root.display()));
    }
    let bin = Path::new(env!("CARGO_BIN_EXE_resolvelab"))
        .parent()
        .unwrap();
    let o = Command::new("sh")
        .args(["-c", &s])
        // A container's clock zone: the error log's times are read as UTC, as they were written.
        .env("TZ", "UTC")
        .env(
            "PATH",
            format!(
                "{}:{}",
                bin.display(),
                std::env::var("PATH").unwrap_or_default()
            ),
        )
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "{s}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap()
}

/// The watch sidecar: valid objects, and the watch container's arguments, run as written
/// against a log in the ConfigMap's own format, count its lines (the format parses).
#[test]
fn the_watch_sidecar_is_valid_and_its_arguments_read_its_nginx_format() {
    let Some(v) = validator() else { return };
    let file = root().join("deploy/kubernetes/watch-sidecar.yaml");
    let o = v.command().arg("--strict").arg(&file).output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(o.status.success(), "{text}");
    assert_eq!(text.matches(" passed for resource ").count(), 2, "{text}");
    let docs = documents(&v, &file);
    let conf = docs.iter().find(|d| d["kind"] == "ConfigMap").unwrap()["data"]["nginx.conf"]
        .as_str()
        .unwrap()
        .to_string();
    let deploy = docs.iter().find(|d| d["kind"] == "Deployment").unwrap();
    let c = deploy["spec"]["template"]["spec"]["containers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "watch")
        .unwrap();
    let port = c["ports"][0]["containerPort"].as_u64().unwrap();
    assert_eq!(
        deploy["spec"]["template"]["metadata"]["annotations"]["prometheus.io/port"],
        port.to_string()
    );
    let tmp = tempfile::tempdir().unwrap();
    let shared = tmp.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    std::fs::write(tmp.path().join("nginx.conf"), &conf).unwrap();
    // One success and one `no live upstreams`, in the ConfigMap's `upstreams` format.
    // network-safe: 10.0.0.1 and 10.1.0.7 are a log line's client and upstream; watch reads files.
    std::fs::write(
        shared.join("access.log"),
        "10.0.0.1 - - [05/Dec/2026:10:00:00 +0000] \"GET / HTTP/1.1\" 200 5 \"-\" \"curl/8\" rt=0.002 ua=\"10.1.0.7:8080\" us=\"200\" cid=11 msec=1796378400.001\n\
         10.0.0.1 - - [05/Dec/2026:10:00:00 +0000] \"GET / HTTP/1.1\" 502 157 \"-\" \"curl/8\" rt=0.000 ua=\"backend\" us=\"502\" cid=12 msec=1796378400.101\n",
    )
    .unwrap();
    std::fs::write(shared.join("error.log"), "").unwrap();
    let args: Vec<String> = c["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            a.as_str()
                .unwrap()
                .replace("/var/log/nginx/shared", &shared.display().to_string())
                .replace(
                    "/etc/nginx/nginx.conf",
                    &tmp.path().join("nginx.conf").display().to_string(),
                )
                .replace("0.0.0.0:9469", "127.0.0.1:0")
        })
        .collect();
    let o = Command::new(env!("CARGO_BIN_EXE_resolvelab"))
        .args(&args)
        .args(["--from-start", "--duration", "1s"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let state: Value = serde_json::from_str(
        &std::fs::read_to_string(shared.join(".resolvelab-watch.json")).unwrap(),
    )
    .unwrap();
    let t = &state["totals"];
    assert_eq!(
        t["requests"],
        serde_json::json!({"backend": {"2xx": 1, "5xx": 1}}),
        "{state}"
    );
    assert_eq!(t["lines"]["access"]["parsed"], 2, "{state}");
    assert_eq!(
        t["failed"]["backend"]
            .as_object()
            .unwrap()
            .values()
            .map(|n| n.as_u64().unwrap())
            .sum::<u64>(),
        1,
        "{state}"
    );
}
