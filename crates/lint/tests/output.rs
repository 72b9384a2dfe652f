//! The JSON and text renderers on the seed's problem configuration.

use resolvelab_lint::{
    LintOptions, SCHEMA, Severity, lint_paths, lint_text, render_json, render_text,
};
use std::path::Path;

fn problem() -> resolvelab_lint::Report {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/lint-corpus/seed-001-problem/nginx.conf");
    lint_paths(&[path], &LintOptions::default()).unwrap()
}

#[test]
fn json_has_the_v1_schema_and_every_field() {
    let v: serde_json::Value = serde_json::from_str(&render_json(&problem())).unwrap();
    assert_eq!(v["schema"], SCHEMA);
    let findings = v["findings"].as_array().unwrap();
    assert_eq!(findings.len(), 4);
    for f in findings {
        for key in [
            "rule",
            "severity",
            "file",
            "line",
            "message",
            "fix",
            "reproduce",
        ] {
            assert!(f.get(key).is_some(), "{key} missing in {f}");
        }
        assert!(["error", "warning", "info"].contains(&f["severity"].as_str().unwrap()));
        assert!(
            f["file"]
                .as_str()
                .unwrap()
                .ends_with("seed-001-problem/nginx.conf")
        );
    }
    let single = findings
        .iter()
        .find(|f| f["rule"] == "resolve-single-name")
        .unwrap();
    assert_eq!(single["line"], 7);
    assert_eq!(single["reproduce"], "resolvelab run generation-race");
    // On the upstream's line: the command that plays it on this very file.
    let verify = single["verify"].as_str().unwrap();
    assert!(
        verify.starts_with("resolvelab verify --nginx-conf ")
            && verify.ends_with("seed-001-problem/nginx.conf --upstream be"),
        "{verify}"
    );
    assert_eq!(v["summary"]["warnings"], 4);
}

#[test]
fn text_is_compiler_style_with_a_caret_under_the_word() {
    let text = render_text(&problem());
    let block: Vec<&str> = text
        .split("\n\n")
        .find(|b| b.starts_with("warning[resolve-single-name]"))
        .unwrap()
        .lines()
        .collect();
    assert!(
        block[1].ends_with("seed-001-problem/nginx.conf:7:12"),
        "{}",
        block[1]
    );
    assert_eq!(block[3], " 7 |     server api.example.com:443 resolve;");
    assert_eq!(block[4], "   |            ^^^^^^^^^^^^^^^^^^^");
    assert!(
        block
            .iter()
            .any(|l| l.starts_with("   = fix: point the upstream at fixed per-DC names"))
    );
    assert!(block.contains(&"   = reproduce: resolvelab run generation-race"));
    assert!(block.contains(&"   = nginx: >= 1.27.3"));
    assert!(
        text.trim_end().ends_with("0 errors, 4 warnings, 0 infos"),
        "{text}"
    );
}

#[test]
fn versions_switch_the_resolve_rules() {
    let conf = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/lint-corpus/seed-001-problem/nginx.conf"),
    )
    .unwrap();
    let old = LintOptions {
        nginx_version: Some(resolvelab_lint::Version(1, 26, 2)),
        ..Default::default()
    };
    let r = lint_text("nginx.conf", conf.clone(), &old).unwrap();
    let ids: Vec<&str> = r.findings.iter().map(|f| f.rule.as_str()).collect();
    // The `resolve` line, and the `resolver` and `resolver_timeout` inside the upstream:
    // nginx 1.26 refuses all three.
    assert_eq!(
        ids,
        [
            "resolve-unsupported-version",
            "resolve-unsupported-version",
            "resolve-unsupported-version",
            "keepalive-ineffective"
        ]
    );
    assert_eq!(r.findings[0].severity, Severity::Error);
    let new = LintOptions {
        nginx_version: Some(resolvelab_lint::Version(1, 28, 3)),
        ..Default::default()
    };
    let r = lint_text("nginx.conf", conf, &new).unwrap();
    assert!(r.findings.iter().any(|f| f.rule == "resolve-single-name"));
    assert!(r.notes.is_empty(), "{:?}", r.notes);
}

#[test]
fn exit_codes_follow_the_threshold() {
    let r = problem();
    assert_eq!(r.exit_code(Severity::Warning), 1);
    assert_eq!(r.exit_code(Severity::Error), 0);
}

#[test]
fn the_expected_rate_decides_how_a_missing_keepalive_is_reported() {
    let conf = "http {\n  upstream be { server 10.0.0.7:8080; }\n  server { location / { proxy_pass http://be; } }\n}\n";
    let severity_for = |rps: Option<u32>| {
        let opts = LintOptions {
            rps,
            ..Default::default()
        };
        let r = lint_text("nginx.conf", conf.to_string(), &opts).unwrap();
        r.findings
            .iter()
            .find(|f| f.rule == "upstream-no-keepalive")
            .map(|f| f.severity)
    };
    assert_eq!(severity_for(None), Some(Severity::Info));
    assert_eq!(severity_for(Some(500)), Some(Severity::Warning));
    assert_eq!(severity_for(Some(20)), None);
}
