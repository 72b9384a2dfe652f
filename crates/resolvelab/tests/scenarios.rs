//! `resolvelab run` against the real nginx as a user meets it: an interrupted run, scenario
//! errors as one line with `file:line` before anything runs, and the stale-address run diagnosed
//! from production logs with `dns watch` beside it. Run one at a time so that timing-sensitive
//! measurements do not compete for the two cores. What the library scenarios measure on the
//! real nginx: `crates/lab/tests/nginx_engine.rs`.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

static SERIAL: Mutex<()> = Mutex::new(());

fn run(args: &[&str], out: &Path) -> (i32, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_resolvelab"))
        .arg("run")
        .args(args)
        .arg("--quiet")
        .arg("--out")
        .arg(out)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    (o.status.code().unwrap_or(-1), text)
}

fn verdicts(out: &Path) -> Vec<(PathBuf, Value)> {
    let mut v: Vec<(PathBuf, Value)> = std::fs::read_dir(out)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join("verdict.json").is_file())
        .map(|p| {
            let j: Value =
                serde_json::from_str(&std::fs::read_to_string(p.join("verdict.json")).unwrap())
                    .unwrap();
            (p, j)
        })
        .collect();
    v.sort_by(|a, b| a.0.cmp(&b.0));
    v
}

#[test]
fn an_interrupted_run_leaves_a_valid_directory_marked_aborted() {
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let out = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_resolvelab"))
        .args(["run", "swap-only", "--quiet", "--out"])
        .arg(out.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Interrupt once the load is running (its first line is in load.jsonl).
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let started = std::fs::read_dir(out.path()).unwrap().flatten().any(|e| {
            std::fs::read_to_string(e.path().join("events.jsonl"))
                .is_ok_and(|t| t.contains("\"start\""))
        });
        if started {
            break;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the load never started within 60 s: nothing to interrupt");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let status = child.wait().unwrap();
    assert!(!status.success());
    let vs = verdicts(out.path());
    assert_eq!(vs.len(), 1);
    assert_eq!(vs[0].1["status"], "aborted");
    let run: Value =
        serde_json::from_str(&std::fs::read_to_string(vs[0].0.join("run.json")).unwrap()).unwrap();
    assert_eq!(run["status"], "aborted");
}

#[test]
fn scenario_errors_are_one_line_with_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("bad.toml");
    std::fs::write(
        &p,
        "version = 1\nname = \"x\"\ndescription = \"d\"\nquestion = \"q\"\n[nginx]\nvalid = 5\n",
    )
    .unwrap();
    let (code, text) = run(&[p.to_str().unwrap()], dir.path());
    assert_eq!(code, 2);
    assert_eq!(text.lines().count(), 1, "{text}");
    assert!(text.contains("bad.toml:6"), "{text}");
    let (code, text) = run(&["no-such-scenario"], dir.path());
    assert_eq!(code, 2);
    assert!(text.contains("resolvelab run --list"), "{text}");
    // A typo in an expectation — an id, a field (issue #43: `all(nlu).hopz`), a text field
    // compared as a number — is refused before the run, not reported after it as "not held"
    // or "cannot evaluate".
    let lib = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/swap-only.toml"),
    )
    .unwrap();
    for (check, says) in [
        (
            "present(\\\"generation-race-retyr\\\")",
            "generation-race-retyr",
        ),
        ("all(nlu).hopz = 1", "unknown nlu field `hopz`"),
        ("any(incidents).shape > 3", "`shape` is text"),
    ] {
        let typo = lib.replacen("checks = [", &format!("checks = [\n  \"{check}\","), 1);
        assert_ne!(typo, lib);
        let p = dir.path().join("typo.toml");
        std::fs::write(&p, &typo).unwrap();
        let runs = dir.path().join("runs");
        let (code, text) = run(&[p.to_str().unwrap(), "--engine", "sim"], &runs);
        assert_eq!(code, 2, "{check}: {text}");
        assert!(
            text.contains(says) && text.contains("nothing was run"),
            "{check}: {text}"
        );
        let line = typo.lines().position(|l| l.contains(check)).unwrap() + 1;
        assert!(
            text.contains(&format!("typo.toml:{line}:")),
            "{check}: {text}"
        );
        assert!(!runs.exists(), "{check}: no run directory was made");
    }
    // A typo in a typed value (issue #45: `load.mix`, `proxy_next_upstream`) fails at its line
    // when the file is read, on every engine, before anything starts (no run directory).
    for (section, line_text, says) in [
        (
            "[load]\n",
            "mix = \"GET=x\"",
            "weight `x` of GET is not a number",
        ),
        ("[load]\n", "mix = \"GE T=1\"", "is not an HTTP method"),
        (
            "[nginx]\n",
            "proxy_next_upstream = \"eror timeout\"",
            "`eror` is not a `proxy_next_upstream` case",
        ),
        // Durations and nginx times are typed when the file is read, too.
        ("[load]\n", "timeout = \"5 secs\"", "unknown unit"),
        (
            "[nginx]\n",
            "read_timeout = \"1.5s\"",
            "is not an nginx time",
        ),
        (
            "[nginx]\n",
            "fail_timeout = \"10 s\"",
            "is not an nginx time",
        ),
        (
            "[[backend]]\nname = \"b2\"\n",
            "[[timeline]]\nfault = \"b1\"\nspec = \"rst\"\nat = \"10x\"",
            "unknown unit `x`",
        ),
        ("[[backend]]\n", "faults = [\"reclam\"]", "reclam"),
    ] {
        let typo = lib.replacen(section, &format!("{section}{line_text}\n"), 1);
        assert_ne!(typo, lib);
        let p = dir.path().join("typo.toml");
        std::fs::write(&p, &typo).unwrap();
        // The line of the mistake: the last line inserted.
        let last = line_text.lines().last().unwrap();
        let line = typo.lines().position(|l| l == last).unwrap() + 1;
        for engine in ["sim", "nginx"] {
            let runs = dir.path().join("runs");
            let (code, text) = run(&[p.to_str().unwrap(), "--engine", engine], &runs);
            assert_eq!(code, 2, "{line_text}: {text}");
            assert!(text.contains(says), "{line_text}: {text}");
            assert!(
                text.contains(&format!("typo.toml:{line}")),
                "{line_text}: {text}"
            );
            assert_eq!(text.trim().lines().count(), 1, "one line: {text}");
            assert!(!runs.exists(), "{line_text}: no run directory was made");
        }
    }
    // An inline nginx body that names a target off the machine is refused before anything
    // starts (issue #49): nginx would connect there.
    // network-safe: 10.0.0.1 is the refused text; no run starts.
    let inline = lib
        .replacen("[[nginx.server]]\nhost = \"app.test.local\"\n", "", 1)
        .replacen(
            "[nginx]\n",
            "[nginx]\ninline = \"\"\"\n{resolver}\nupstream be { zone be {zone}; server app.test.local:{port} resolve; }\nserver {\n    listen {listen};\n    location / { proxy_pass http://10.0.0.1:8080; }\n}\n\"\"\"\n",
            1,
        );
    assert!(inline.contains("10.0.0.1"));
    let p = dir.path().join("inline.toml");
    std::fs::write(&p, &inline).unwrap();
    let key = inline
        .lines()
        .position(|l| l.starts_with("inline ="))
        .unwrap()
        + 1;
    for engine in ["sim", "nginx"] {
        let runs = dir.path().join("runs");
        let (code, text) = run(&[p.to_str().unwrap(), "--engine", engine], &runs);
        assert_eq!(code, 2, "{text}");
        assert!(text.contains(&format!("inline.toml:{key}")), "{text}");
        assert!(
            text.contains("line 5") && text.contains("10.0.0.1"),
            "{text}"
        );
        assert!(!runs.exists(), "no run directory was made");
    }
}

#[test]
fn a_moved_backend_is_a_stale_address_and_dns_watch_decides_it_from_production_logs() {
    // nginx resolves the name at start (through the lab's authority, in a mount namespace of
    // its own: root only), the backend moves at 10 s, every request after it fails.
    if !resolvelab_core::testing::can_unshare_mount() {
        resolvelab_core::testing::missing_prerequisite(
            "cannot create a mount namespace here (needs root)",
        );
        return;
    }
    // The run bind-mounts its own resolv.conf over /etc/resolv.conf inside nginx's private
    // mount namespace: the host's file and its mounts must be as they were afterwards.
    let host_resolv = std::fs::read("/etc/resolv.conf").ok();
    let host_mounts = resolv_mounts();
    let _g = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let out = tempfile::Builder::new()
        .prefix("rl-stale-")
        .tempdir()
        .unwrap()
        .keep();
    // The run's /24 is pinned, so its authority is at 127.10.77.53:53 (a resolve-once run
    // answers on port 53): a production probe watches it while the run plays.
    let watch_file = out.join("watch.jsonl");
    let mut watch = Command::new(env!("CARGO_BIN_EXE_resolvelab"))
        .args([
            "dns",
            "watch",
            "app.test.local",
            "--server",
            "127.10.77.53:53",
        ])
        .args([
            "--interval",
            "500ms",
            "--timeout",
            "300ms",
            "--duration",
            "90s",
        ])
        .arg("--out")
        .arg(&watch_file)
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let runs = out.join("runs");
    let (code, text) = run(
        &["stale-address", "--variant", "base", "--net", "10.77"],
        &runs,
    );
    // Our own child, by its pid.
    let _ = watch.kill();
    let _ = watch.wait();
    assert_eq!(code, 0, "{text}");
    let vs = verdicts(&runs);
    assert_eq!(vs.len(), 1, "{text}");
    let (dir, v) = &vs[0];
    assert_eq!(v["incidents"][0]["class"], "stale-address", "{text}");
    assert!(v["incidents"][0]["count"].as_u64().unwrap() >= 3800);
    // Production: the access and error logs, and the probe's answers instead of the lab's.
    let o = Command::new(env!("CARGO_BIN_EXE_resolvelab"))
        .args(["diagnose", "--format", "json", "--log-format", "lab"])
        .arg("--access")
        .arg(dir.join("access.log"))
        .arg("--error")
        .arg(dir.join("error.log"))
        .arg("--dns")
        .arg(&watch_file)
        .output()
        .unwrap();
    let d: Value = serde_json::from_slice(&o.stdout).unwrap();
    // The probe sees the move within its interval: the failures before that are plain upstream
    // failures (the answers it had still held the address), the rest are decided.
    let incs = d["incidents"].as_array().unwrap();
    let inc = incs
        .iter()
        .find(|i| i["class"] == "stale-address")
        .unwrap_or_else(|| panic!("no stale-address: {}", d["incidents"]));
    assert!(inc["count"].as_u64().unwrap() >= 3700, "{inc}");
    assert_eq!(inc["confidence"], 0.9, "decided by the watched answers");
    assert!(
        inc["explanation"]
            .as_str()
            .unwrap()
            .contains("had left `app.test.local`'s DNS answers"),
        "{}",
        inc["explanation"]
    );
    assert_eq!(
        std::fs::read("/etc/resolv.conf").ok(),
        host_resolv,
        "the host's /etc/resolv.conf changed"
    );
    assert_eq!(resolv_mounts(), host_mounts, "the host's mounts changed");
    let _ = std::fs::remove_dir_all(&out);
}

/// This process's mounts that touch resolv.conf (`/proc/self/mountinfo` lines).
fn resolv_mounts() -> Vec<String> {
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
        .filter(|l| l.contains("resolv.conf"))
        .map(str::to_string)
        .collect()
}
