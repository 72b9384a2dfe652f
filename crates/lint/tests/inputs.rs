//! What the linter reads: fragments in their context, only bounded regular files, include
//! depth apart from cycles, one line per error — and rule details that real configurations
//! showed (case-insensitive upstream names, `*_next_upstream off`, SRV names).

use resolvelab_lint::{Context, LintOptions, lint_paths, lint_text};

fn rules_of(text: &str, opts: &LintOptions) -> Vec<String> {
    let r = lint_text("t.conf", text.to_string(), opts).unwrap();
    r.findings.iter().map(|f| f.rule.clone()).collect()
}

const FRAGMENT: &str = "upstream be {\n    zone be 64k;\n    server app.example.com:80 resolve;\n}\nserver {\n    listen 80;\n    location / { proxy_pass http://be; }\n}\n";

#[test]
fn a_conf_d_fragment_is_linted_as_http_and_says_so() {
    let with_resolver = format!("resolver 10.0.0.2 valid=5s ipv6=off;\n{FRAGMENT}");
    let r = lint_text(
        "conf.d/app.conf",
        with_resolver.clone(),
        &LintOptions::default(),
    )
    .unwrap();
    let rules: Vec<&str> = r.findings.iter().map(|f| f.rule.as_str()).collect();
    assert!(rules.contains(&"resolve-single-name"), "{rules:?}");
    assert!(
        r.notes
            .iter()
            .any(|n| n.contains("linted as the http{} context")),
        "{:?}",
        r.notes
    );
    // Forced to the main context the same file has no http{}: nothing is linted.
    let main = LintOptions {
        context: Context::Main,
        ..LintOptions::default()
    };
    assert!(rules_of(&with_resolver, &main).is_empty());
    // A whole nginx.conf is left as it is.
    let whole = format!("events {{}}\nhttp {{\n{with_resolver}}}\n");
    let r = lint_text("nginx.conf", whole, &LintOptions::default()).unwrap();
    assert!(!r.notes.iter().any(|n| n.contains("fragment")));
}

#[test]
fn a_stream_fragment_is_detected_by_its_servers() {
    let text = "upstream dns {\n    zone dns 64k;\n    server ns.example.com:53 resolve;\n}\nserver {\n    listen 53 udp;\n    proxy_pass dns;\n}\n";
    let r = lint_text(
        "stream.d/dns.conf",
        text.to_string(),
        &LintOptions::default(),
    )
    .unwrap();
    assert!(
        r.notes.iter().any(|n| n.contains("stream{}")),
        "{:?}",
        r.notes
    );
    assert!(r.findings.iter().any(|f| f.rule == "resolve-no-resolver"));
}

#[test]
fn only_bounded_regular_files_are_read() {
    let dir = tempfile::tempdir().unwrap();
    let main = dir.path().join("nginx.conf");
    std::fs::write(&main, "include /dev/zero;\n").unwrap();
    let e = lint_paths(std::slice::from_ref(&main), &LintOptions::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("not a regular file"), "{e}");
    // A FIFO is refused before it is opened (opening one for reading would block).
    let fifo = dir.path().join("fifo.conf");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a valid C string; mkfifo only creates the node.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    std::fs::write(&main, format!("include {};\n", fifo.display())).unwrap();
    let e = lint_paths(std::slice::from_ref(&main), &LintOptions::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("not a regular file") && !e.contains('\n'), "{e}");
    let e = lint_paths(&[fifo], &LintOptions::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("not a regular file"), "{e}");
    // Too big to be a configuration.
    let big = dir.path().join("big.conf");
    let f = std::fs::File::create(&big).unwrap();
    f.set_len(resolvelab_lint::load::MAX_FILE_BYTES + 1)
        .unwrap();
    let e = lint_paths(&[big], &LintOptions::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("MiB"), "{e}");
}

#[test]
fn deep_includes_and_cycles_are_told_apart() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    for i in 0..40 {
        std::fs::write(
            d.join(format!("{i}.conf")),
            format!("include {}.conf;\n", i + 1),
        )
        .unwrap();
    }
    std::fs::write(d.join("40.conf"), "worker_processes 1;\n").unwrap();
    let e = lint_paths(&[d.join("0.conf")], &LintOptions::default())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("nests includes") && e.contains("no cycle"),
        "{e}"
    );
    std::fs::write(d.join("a.conf"), "include b.conf;\n").unwrap();
    std::fs::write(d.join("b.conf"), "include a.conf;\n").unwrap();
    let e = lint_paths(&[d.join("a.conf")], &LintOptions::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("includes itself"), "{e}");
}

#[test]
fn a_syntax_error_is_printed_once() {
    let e = lint_text("t.conf", "http {\n".into(), &LintOptions::default()).unwrap_err();
    let shown = format!("{:#}", anyhow::Error::new(e));
    let first = shown.split(": ").nth(1).unwrap_or_default().to_string();
    assert_eq!(shown.matches(&first).count(), 1, "{shown}");
}

#[test]
fn rule_details_from_real_configurations() {
    let opts = LintOptions::default();
    // nginx matches upstream names case-insensitively.
    let ka = "http {\n upstream Backend { server 10.0.0.1:80; keepalive 8; }\n server { location / { proxy_pass http://backend; } }\n}\n";
    assert!(rules_of(ka, &opts).contains(&"keepalive-ineffective".to_string()));
    // Retries off in any module, or one try only.
    for d in [
        "fastcgi_next_upstream off",
        "grpc_next_upstream off",
        "proxy_next_upstream_tries 1",
    ] {
        let t = format!("http {{ server {{ location / {{ {d}; }} }} }}\n");
        assert!(
            rules_of(&t, &opts).contains(&"proxy-next-upstream-off".to_string()),
            "{d}"
        );
    }
    // A static upstream with a backup is not the lab's hazard; a resolving one is.
    let static_backup =
        "http {\n upstream be { server 10.0.0.1:80; server 10.0.0.2:80 backup; }\n}\n";
    assert!(!rules_of(static_backup, &opts).contains(&"backup-max-fails".to_string()));
    let resolving = "http {\n resolver 10.0.0.2 valid=5s ipv6=off;\n upstream be { zone be 64k; server a.example:80 resolve; server 10.0.0.2:80 backup; }\n}\n";
    assert!(rules_of(resolving, &opts).contains(&"backup-max-fails".to_string()));
    // An SRV name is described as one.
    let srv = "http {\n resolver 10.0.0.2 valid=5s ipv6=off;\n upstream be { zone be 64k; server backend.example service=http resolve; }\n}\n";
    let r = lint_text("t.conf", srv.into(), &opts).unwrap();
    assert!(
        r.findings.iter().any(|f| f.message.contains("SRV lookup")),
        "{:?}",
        r.findings
    );
}

/// nginx's upstream docs: "For FastCGI servers, it is required that fastcgi_keep_conn is set for
/// keepalive connections to work" (the default is off, in every version).
#[test]
fn fastcgi_keepalive_needs_fastcgi_keep_conn() {
    let conf = |keep: &str| {
        format!(
            "http {{\n upstream php {{\n  server 127.0.0.1:9000;\n  keepalive 8;\n }}\n server {{\n  listen 80;\n  {keep}\n  location ~ \\.php$ {{\n   fastcgi_pass php;\n  }}\n }}\n}}\n"
        )
    };
    let opts = LintOptions::default();
    let without = rules_of(&conf(""), &opts);
    assert!(
        without.contains(&"keepalive-ineffective".to_string()),
        "{without:?}"
    );
    // Set at the server level, inherited by the location.
    let with = rules_of(&conf("fastcgi_keep_conn on;"), &opts);
    assert!(
        !with.contains(&"keepalive-ineffective".to_string()),
        "{with:?}"
    );
    assert!(
        !with.contains(&"upstream-no-keepalive".to_string()),
        "{with:?}"
    );
}

/// nginx 1.29.7 keeps 32 idle upstream connections by default: an upstream without `keepalive`
/// runs out of ports only on older versions (the lab's `port-exhaustion [netns]`: 20,000 of
/// 21,000 requests failed on 1.28.3, none on 1.31.3). An unknown version is assumed older.
#[test]
fn a_missing_keepalive_matters_only_before_1_29_7() {
    let conf = "http {\n upstream be {\n  server 127.0.0.1:8080;\n }\n server {\n  listen 80;\n  location / {\n   proxy_pass http://be;\n  }\n }\n}\n";
    let on = |v: Option<&str>| {
        let opts = LintOptions {
            nginx_version: v.map(|v| v.parse().unwrap()),
            ..LintOptions::default()
        };
        rules_of(conf, &opts).contains(&"upstream-no-keepalive".to_string())
    };
    assert!(on(None), "unknown version: assumed older");
    assert!(on(Some("1.28.3")));
    assert!(!on(Some("1.29.7")) && !on(Some("1.31.3")));
}

/// Issue #43, lint wording and severity, each from a real configuration of the corpus.
mod evidence_of_the_input {
    use resolvelab_lint::{LintOptions, Severity, lint_text};

    fn findings(name: &str, text: &str, version: Option<&str>) -> Vec<resolvelab_lint::Finding> {
        let opts = LintOptions {
            nginx_version: version.map(|v| v.parse().unwrap()),
            ..LintOptions::default()
        };
        lint_text(name, text.to_string(), &opts).unwrap().findings
    }

    /// tests/lint-corpus/real/upstream-queue-module-issue-6-k8s-resolve: a conf.d fragment with
    /// a `resolve` upstream and no resolver in sight. The http{} that includes it is not in the
    /// input: a warning that says so, not nginx's refusal; the whole file without one is.
    #[test]
    fn a_fragment_without_a_resolver_is_a_warning_naming_the_missing_context() {
        let frag = "upstream api {\n    zone api 64k;\n    server api-backend.blah:8080 resolve max_fails=100;\n    keepalive 2;\n}\n";
        let f = findings("conf.d/api.conf", frag, Some("1.27.3"));
        let r = f
            .iter()
            .find(|f| f.rule == "resolve-no-resolver")
            .expect("fires");
        assert_eq!(r.severity, Severity::Warning, "{}", r.message);
        assert!(
            r.message
                .contains("unless the http{} that includes this file"),
            "{}",
            r.message
        );
        let whole = format!("events {{}}\nhttp {{\n{frag}}}\n");
        let f = findings("nginx.conf", &whole, Some("1.27.3"));
        let r = f
            .iter()
            .find(|f| f.rule == "resolve-no-resolver")
            .expect("fires");
        assert_eq!(r.severity, Severity::Error, "{}", r.message);
        assert!(r.message.contains("nginx refuses it"), "{}", r.message);
    }

    /// tests/lint-corpus/real/docker-openresty-issue-165-resolver-in-upstream: `resolver` inside
    /// an upstream on OpenResty 1.17.8, which nginx refuses ("directive is not allowed here").
    #[test]
    fn a_resolver_inside_an_upstream_before_1_27_3_is_refused_with_its_version() {
        let text = "upstream hostname_x_upstream {\n    resolver 127.0.0.11 ipv6=off;\n    resolver_timeout 3s;\n    server hostname-a;\n}\n";
        let f = findings("file_name.conf", text, Some("1.17.8"));
        let lines: Vec<u32> = f
            .iter()
            .filter(|f| f.rule == "resolve-unsupported-version")
            .map(|f| f.line)
            .collect();
        assert_eq!(lines, [2, 3], "{f:?}");
        let r = f
            .iter()
            .find(|f| f.rule == "resolve-unsupported-version")
            .unwrap();
        assert_eq!(r.severity, Severity::Error);
        assert!(
            r.message.contains("1.27.3") && r.message.contains("1.17.8"),
            "{}",
            r.message
        );
        // From 1.27.3 on it is allowed; with no version given, nothing is claimed.
        for v in [Some("1.27.3"), None] {
            let f = findings("file_name.conf", text, v);
            assert!(
                !f.iter().any(|f| f.rule == "resolve-unsupported-version"),
                "{v:?}"
            );
        }
    }

    /// The name says which case it is: a headless Kubernetes service or a Consul service answers
    /// several records all the time (not "briefly, as a GSLB"), and a long `fail_timeout` is the
    /// length of the outage it arms.
    #[test]
    fn resolve_max_fails_says_what_the_name_looks_like() {
        let conf = |name: &str, extra: &str| {
            format!(
                "http {{\n resolver 10.96.0.10 valid=5s ipv6=off;\n upstream be {{\n  zone be 64k;\n  server {name}:8080 resolve{extra};\n }}\n}}\n"
            )
        };
        let msg = |name: &str, extra: &str| {
            findings("nginx.conf", &conf(name, extra), Some("1.28.0"))
                .into_iter()
                .find(|f| f.rule == "resolve-max-fails")
                .map(|f| f.message)
                .unwrap_or_default()
        };
        let k8s = msg("api.default.svc.cluster.local", " fail_timeout=360s");
        assert!(
            k8s.contains("Kubernetes service") && k8s.contains("all the time"),
            "{k8s}"
        );
        assert!(k8s.contains("last 360 s"), "{k8s}");
        assert!(!k8s.contains("GSLB"), "{k8s}");
        let consul = msg("web.service.consul", "");
        assert!(consul.contains("Consul service"), "{consul}");
        let gslb = msg("app.gslb.example.com", "");
        assert!(
            gslb.contains("GSLB") && !gslb.contains("all the time"),
            "{gslb}"
        );
    }
}
