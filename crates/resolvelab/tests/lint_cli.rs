//! `resolvelab lint` end to end: exit status, stdin and `nginx -T`, formats, version detection.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn corpus(case: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/lint-corpus")
        .join(case)
}

fn lint(args: &[&str], stdin: Option<&str>) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_resolvelab"));
    cmd.arg("lint")
        .args(args)
        .env_remove("RESOLVELAB_NGINX")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("resolvelab runs");
    {
        let mut pipe = child.stdin.take().unwrap();
        if let Some(text) = stdin {
            pipe.write_all(text.as_bytes()).unwrap();
        }
    }
    child.wait_with_output().unwrap()
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn exit_status_is_0_clean_1_findings_2_error() {
    let problem = corpus("seed-001-problem/nginx.conf");
    let o = lint(
        &["--nginx-version", "1.28.3", problem.to_str().unwrap()],
        None,
    );
    let (out, _) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(out.contains("warning[resolve-single-name]"), "{out}");
    assert!(
        out.contains("   = reproduce: resolvelab run generation-race"),
        "{out}"
    );

    let rec = corpus("seed-001-recommended/nginx.conf");
    let o = lint(&["--nginx-version", "1.28.3", rec.to_str().unwrap()], None);
    let (out, _) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}");
    assert!(out.contains("clean: no findings"), "{out}");

    let bad = corpus("malformed/stray-brace.conf");
    let o = lint(&[bad.to_str().unwrap()], None);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("stray-brace.conf:3:1: unexpected \"}\""),
        "{err}"
    );

    let o = lint(
        &[
            "--fail-on",
            "error",
            "--nginx-version",
            "1.28.3",
            problem.to_str().unwrap(),
        ],
        None,
    );
    assert_eq!(o.status.code(), Some(0));
}

#[test]
fn nginx_t_on_stdin_keeps_the_marker_paths() {
    let dump = std::fs::read_to_string(corpus("nginx-T/nginx-T.txt")).unwrap();
    let o = lint(
        &["--format", "json", "--nginx-version", "1.28.3", "-"],
        Some(&dump),
    );
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["schema"], "resolvelab.lint/v1");
    let files: Vec<&str> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["file"].as_str().unwrap())
        .collect();
    assert!(files.contains(&"/etc/nginx/upstreams/be.conf"), "{files:?}");
    assert!(
        files.contains(&"/etc/nginx/conf.d/10-resolver.conf"),
        "{files:?}"
    );
}

#[test]
fn plain_config_on_stdin_is_named_stdin() {
    let conf = "http {\n  upstream be {\n    server api.example.com:80 resolve;\n  }\n}\n";
    let o = lint(
        &["--format", "json", "--nginx-version", "1.28.3", "-"],
        Some(conf),
    );
    let (out, _) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let findings = v["findings"].as_array().unwrap();
    let rules: Vec<&str> = findings
        .iter()
        .map(|f| f["rule"].as_str().unwrap())
        .collect();
    assert!(rules.contains(&"resolve-no-zone"), "{rules:?}");
    assert!(rules.contains(&"resolve-no-resolver"), "{rules:?}");
    assert!(findings.iter().all(|f| f["file"] == "<stdin>"), "{out}");
    assert_eq!(v["summary"]["errors"], 2);
}

#[test]
fn sarif_format_is_sarif_2_1_0() {
    let problem = corpus("seed-001-problem/nginx.conf");
    let o = lint(
        &[
            "--format",
            "sarif",
            "--nginx-version",
            "1.28.3",
            problem.to_str().unwrap(),
        ],
        None,
    );
    let (out, _) = text(&o);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["version"], "2.1.0");
    assert_eq!(v["runs"][0]["results"].as_array().unwrap().len(), 4);
}

#[test]
fn old_nginx_versions_get_the_unsupported_finding() {
    let problem = corpus("seed-001-problem/nginx.conf");
    let o = lint(
        &["--nginx-version", "1.26.2", problem.to_str().unwrap()],
        None,
    );
    let (out, _) = text(&o);
    assert!(out.contains("error[resolve-unsupported-version]"), "{out}");
    assert!(!out.contains("resolve-single-name"), "{out}");
    assert_eq!(o.status.code(), Some(1));
}

#[test]
fn version_is_read_from_nginx_dash_v_of_the_given_binary() {
    let dir = tempfile::tempdir().unwrap();
    let fake = dir.path().join("nginx");
    // A stand-in for `nginx -V`: the detection reads the version line nginx prints on stderr.
    std::fs::write(
        &fake,
        "#!/bin/sh\necho 'nginx version: nginx/1.26.2' >&2\necho 'built by gcc 12' >&2\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let problem = corpus("seed-001-problem/nginx.conf");
    let mut o = lint(
        &["--nginx", fake.to_str().unwrap(), problem.to_str().unwrap()],
        None,
    );
    for _ in 0..5 {
        // ETXTBSY when another test thread forked while the script was open for writing.
        if o.status.code() != Some(2) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
        o = lint(
            &["--nginx", fake.to_str().unwrap(), problem.to_str().unwrap()],
            None,
        );
    }
    let (out, err) = text(&o);
    assert!(out.contains("resolve-unsupported-version"), "{out}{err}");
    assert!(out.contains("note: nginx 1.26.2 from"), "{out}");

    let o = lint(
        &["--nginx", "/nonexistent/nginx", problem.to_str().unwrap()],
        None,
    );
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2));
    assert!(err.contains("--nginx-version"), "{err}");
}

#[test]
fn help_has_examples_and_rules_are_listed() {
    let o = Command::new(env!("CARGO_BIN_EXE_resolvelab"))
        .args(["lint", "--help"])
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("Examples:") && out.contains("nginx -T 2>&1 | resolvelab lint -"),
        "{out}"
    );
    let o = lint(&["--rules"], None);
    let (out, _) = text(&o);
    assert_eq!(o.status.code(), Some(0));
    for id in [
        "resolve-single-name",
        "resolve-max-fails",
        "error-log-split",
        "suppression-invalid",
    ] {
        assert!(out.contains(id), "{id}");
    }
}

/// The zone estimate reads the build from `nginx -V` with the version: the lab's 1.28.3,
/// built without SSL, holds the `zone-sweep` scenario's shared zone at the default 8 addresses a
/// name (it held 25 filler peers in the lab); said to be a --with-compat build (nginx.org's and
/// Debian's packages), whose peers take twice the slab class, it does not.
#[test]
fn the_zone_estimate_reads_the_build_from_nginx_dash_v() {
    let nginx = resolvelab_nginx::provision::ensure_built().expect("the lab's nginx builds");
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("nginx.conf");
    std::fs::write(
        &conf,
        "http {\n resolver 127.0.0.53 valid=1s;\n upstream be {\n  zone be 32k;\n  server app.test.local:8080 resolve;\n }\n upstream filler {\n  zone be;\n  server filler.test.local:8080 resolve max_fails=0;\n }\n}\n",
    )
    .unwrap();
    let (nginx, conf) = (nginx.to_str().unwrap(), conf.to_str().unwrap());
    let (out, err) = text(&lint(&["--nginx", nginx, conf], None));
    assert!(
        out.contains("note: nginx 1.28.3 (plain build) from"),
        "{out}{err}"
    );
    assert!(!out.contains("zone-too-small"), "{out}");
    let (out, _) = text(&lint(
        &["--nginx", nginx, "--nginx-build", "compat", conf],
        None,
    ));
    assert!(out.contains("zone-too-small"), "{out}");
    assert!(out.contains("320-byte peers of this compat build"), "{out}");
    for n in ["0", "4097"] {
        let o = lint(&["--max-addresses", n, conf], None);
        assert_eq!(o.status.code(), Some(2), "--max-addresses {n}");
    }
    let o = lint(&["--nginx-build", "openssl", conf], None);
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(2));
    assert!(err.contains("is not a build: use compat"), "{err}");
}
