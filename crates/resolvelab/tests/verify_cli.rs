//! `resolvelab verify` as a user runs it: `--plan` on the seed's production configuration lists
//! every line the lab changes (truth written from reading examples/production.conf), refusals
//! name the user's line and exit 2, and on real nginx the seed's directions hold: two `resolve`
//! lines of one name with the default max_fails lose every peer after a backend restart and
//! `max_fails=0` removes that tail; a reload while a name resolved at start does not resolve is
//! refused and the old configuration keeps serving.

use serde_json::Value;
use std::io::Write as _;
use std::process::Stdio;

mod common;
use common::bin;

fn repo(p: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(p)
}

/// `verify --plan --format json` with the configuration on standard input.
fn plan(conf: &str, extra: &[&str]) -> (i32, Value, String) {
    let mut c = bin()
        .args(["verify", "--nginx-conf", "-", "--plan", "--format", "json"])
        .args(extra)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    c.stdin.take().unwrap().write_all(conf.as_bytes()).unwrap();
    let o = c.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    let v = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {err}"));
    (o.status.code().unwrap_or(-1), v, err)
}

#[test]
fn plan_lists_every_change_to_the_seed_production_config() {
    let conf = std::fs::read_to_string(repo("examples/production.conf")).unwrap();
    let (code, card, err) = plan(&conf, &[]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(card["schema"], "resolvelab.verify/v1");
    let t = &card["targets"][0];
    assert_eq!(t["target"]["name"], "be");
    assert_eq!(t["target"]["names"][0]["host"], "api.example.com");
    assert_eq!(t["target"]["names"][0]["at_run_time"], true);
    assert_eq!(t["period_s"], 6);
    let changes: Vec<(u32, String)> = t["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            let at = c["at"].as_str().unwrap();
            let line = at.rsplit(':').next().unwrap().parse().unwrap();
            (line, c["kind"].as_str().unwrap().to_string())
        })
        .collect();
    // Read from the file: main context (6 user, 8 events) dropped, `worker_processes auto` as the
    // lab's 2; logs (12, 13) dropped; resolver (16) and the server line's port (19) rewritten;
    // listen (26) rewritten, TLS (28, 29) dropped, https (31) rewritten; the redirect server (34)
    // dropped. Nothing else.
    let want: Vec<(u32, &str)> = vec![
        (6, "dropped"),
        (7, "rewritten"),
        (8, "dropped"),
        (12, "dropped"),
        (13, "dropped"),
        (16, "rewritten"),
        (19, "rewritten"),
        (26, "rewritten"),
        (28, "dropped"),
        (29, "dropped"),
        (31, "rewritten"),
        (34, "dropped"),
    ];
    let got: Vec<(u32, &str)> = changes.iter().map(|(l, k)| (*l, k.as_str())).collect();
    assert_eq!(got, want);
    let body = t["lab_config"].as_str().unwrap();
    for kept in [
        "resolver_timeout 3s;",
        "zone be 128k;",
        "keepalive 1024;",
        "keepalive_time 180s;",
        "keepalive_timeout 60s;",
        "proxy_pass http://be;",
    ] {
        assert!(body.contains(kept), "{kept} in\n{body}");
    }
    let rules: Vec<&str> = t["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["rule"].as_str().unwrap())
        .collect();
    assert!(rules.contains(&"resolve-single-name"), "{rules:?}");
}

#[test]
fn what_the_lab_cannot_play_is_refused_at_the_users_line() {
    for (conf, line, says) in [
        (
            "http {\n upstream be {\n  server app.example.com:80;\n  balancer_by_lua_block { pick() }\n }\n server { location / { proxy_pass http://be; } }\n}\n",
            4,
            "Lua",
        ),
        (
            // A fallback the kept location sends to, with an address literal in a variable.
            "http {\n resolver 10.0.0.53;\n server {\n  location / {\n   proxy_pass http://be.example.com;\n   error_page 502 = @fb;\n  }\n  location @fb { set $u 192.0.2.9:8080; proxy_pass http://$u; }\n }\n}\n", // network-safe: refused text
            8,
            "the lab sends only to loopback",
        ),
        (
            "http {\n resolver 10.0.0.53;\n upstream be { zone be 64k; server be.example.com resolve; }\n server { location ~ ^/api { proxy_pass http://be; } }\n}\n",
            3,
            "--path",
        ),
    ] {
        let (code, card, err) = plan(conf, &[]);
        assert_eq!(code, 2, "{conf}\n{err}");
        let refused: Vec<&str> = card["targets"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|t| t["refused"].as_str())
            .collect();
        assert!(
            refused
                .iter()
                .any(|r| r.starts_with(&format!("-:{line}:")) && r.contains(says)),
            "{refused:?}"
        );
        assert!(err.contains(says), "{err}");
    }
}

#[test]
fn a_config_with_no_dns_fed_upstream_has_nothing_to_verify() {
    let (code, card, _) = plan(
        "http { upstream be { server 127.0.0.1:8080; } server { location / { proxy_pass http://be; } } }",
        &[],
    );
    assert_eq!(code, 0);
    assert!(card["targets"].as_array().unwrap().is_empty());
    let o = bin()
        .args([
            "verify",
            "--nginx-conf",
            "/nonexistent/nginx.conf",
            "--plan",
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("/nonexistent/nginx.conf"));
}

/// The fix of a card's target whose `key` is `value` (`rule`, `fix`).
fn fix_of<'a>(t: &'a Value, key: &str, value: &str) -> &'a Value {
    t["fixes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f[key] == value)
        .unwrap_or_else(|| panic!("no fix with {key} = {value} in {t}"))
}

/// Outcome of one event in a card: (client errors, NLU, classes, reload refused).
fn outcome(t: &Value, event: &str) -> (u64, u64, Vec<String>, bool) {
    let o = t["outcomes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["event"] == event)
        .unwrap_or_else(|| panic!("{event} in {t}"));
    assert_eq!(o["status"], "completed", "{o}");
    (
        o["client_errors"].as_u64().unwrap(),
        o["nlu"].as_u64().unwrap(),
        o["classes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c.as_str().unwrap().to_string())
            .collect(),
        o["reload_refused"].as_bool().unwrap(),
    )
}

/// `verify --nginx-conf DIR/nginx.conf ARGS --format json --out DIR/OUT` on real nginx: the exit
/// code, the card (Null when none was written) and stderr.
fn verify_file(dir: &std::path::Path, out: &str, args: &[&str]) -> (Option<i32>, Value, String) {
    let o = bin()
        .args(["verify", "--nginx-conf"])
        .arg(dir.join("nginx.conf"))
        .args(args)
        .args(["--format", "json", "--out"])
        .arg(dir.join(out))
        .output()
        .unwrap();
    let card = serde_json::from_slice(&o.stdout).unwrap_or(Value::Null);
    (
        o.status.code(),
        card,
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// Real nginx. The seed's dual-resolve configuration: a backend restart (2 s) marks both
/// peers of the one address failed (max_fails=1 each), a wipeout of fail_timeout (10 s) that
/// `max_fails=0` removes.
#[test]
fn on_real_nginx_max_fails_zero_removes_the_wipeout_of_two_resolve_lines() {
    // network-safe: 10.0.0.53 is the user's resolver, which verify rewrites to the run's
    // authority; the lab refuses any rendered configuration that names a non-loopback target.
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("nginx.conf");
    std::fs::write(
        &conf,
        "http {\n    resolver 10.0.0.53 valid=5s ipv6=off;\n    upstream be {\n        zone be 128k;\n        server api.example.com:443 resolve;\n        server api.example.com:443 resolve;\n    }\n    server {\n        listen 80;\n        location / { proxy_pass http://be; }\n    }\n}\n",
    )
    .unwrap();
    // One fix's A/B (`--fix`): the others are on the card, left out, and not played.
    let (code, _, err) = verify_file(dir.path(), "typo", &["--fix", "max-fail-0"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("--fix max-fail-0: no replayable fix") && err.contains("max-fails-0"),
        "{err}"
    );
    assert!(
        !dir.path().join("typo").exists(),
        "refused before anything ran"
    );
    let (code, card, err) = verify_file(
        dir.path(),
        "out",
        &["--events", "restart", "--fix", "max-fails-0"],
    );
    assert_eq!(code, Some(0), "{err}");
    let t = &card["targets"][0];
    let (errors, nlu, classes, _) = outcome(t, "restart");
    assert!(nlu > 500, "a 10 s wipeout at 200 rps: {nlu} NLU");
    assert!(errors >= nlu, "{errors} {nlu}");
    assert!(
        classes.contains(&"maxfails-wipeout".to_string()),
        "{classes:?}"
    );
    let fix = fix_of(t, "rule", "resolve-max-fails");
    assert_eq!(fix["verdict"], "helps", "{fix}");
    for other in ["per-dc", "retry-shim"] {
        let f = fix_of(t, "fix", other);
        assert_eq!(f["verdict"], "left-out", "{f}");
        assert!(f["rows"].as_array().unwrap().is_empty(), "{f}");
    }
    let after = &fix["rows"][0][1];
    assert_eq!(after["nlu"], 0, "{after}");
    // The scenario of every run is kept, and plays again with `resolvelab run`.
    assert!(std::path::Path::new(after["scenario"].as_str().unwrap()).is_file());
}

/// The model (`--quick`): the same events in seconds, the same direction for max_fails=0, and
/// a balancer the model does not play refused by name.
#[test]
fn quick_plays_the_events_on_the_model() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("nginx.conf"),
        "http {\n    resolver 10.0.0.53 valid=5s ipv6=off;\n    upstream be {\n        zone be 128k;\n        server api.example.com:443 resolve;\n        server api.example.com:443 resolve;\n    }\n    server {\n        listen 80;\n        location / { proxy_pass http://be; }\n    }\n}\n",
    )
    .unwrap();
    let (code, card, err) = verify_file(
        dir.path(),
        "out",
        &["--quick", "--events", "restart,nxdomain"],
    );
    assert_eq!(code, Some(0), "{err}");
    let t = &card["targets"][0];
    let (_, nlu, classes, _) = outcome(t, "restart");
    assert!(nlu > 500, "{nlu}");
    assert!(
        classes.contains(&"maxfails-wipeout".to_string()),
        "{classes:?}"
    );
    let (_, nx_nlu, nx_classes, _) = outcome(t, "nxdomain");
    assert!(
        nx_nlu > 0 && nx_classes.contains(&"dns-nxdomain".to_string()),
        "{t}"
    );
    let fix = fix_of(t, "rule", "resolve-max-fails");
    assert_eq!(fix["verdict"], "helps", "{fix}");
    // The seed's valid=30s trade-off: an NXDOMAIN takes the upstream down for a whole 31 s
    // period, and the linter's `valid=5s` brings it to about 6 s.
    std::fs::write(
        dir.path().join("nginx.conf"),
        "http {\n    resolver 10.0.0.53 valid=30s ipv6=off;\n    upstream be {\n        zone be 128k;\n        server api.example.com:443 resolve max_fails=0;\n    }\n    server {\n        listen 80;\n        location / { proxy_pass http://be; }\n    }\n}\n",
    )
    .unwrap();
    let (code, card, err) = verify_file(dir.path(), "v30", &["--quick", "--events", "nxdomain"]);
    assert_eq!(code, Some(0), "{err}");
    let t = &card["targets"][0];
    let before = t["outcomes"][0]["outage_ms"].as_i64().unwrap();
    assert!((29_000..=33_000).contains(&before), "{before}");
    let fix = fix_of(t, "rule", "resolver-valid-long");
    assert_eq!(fix["verdict"], "helps", "{fix}");
    let after = fix["rows"][0][1]["outage_ms"].as_i64().unwrap();
    assert!((5_000..=7_000).contains(&after), "{after}");
    // The seed's retry shim (section 5-3), on a GSLB name with keep-alive in use and a fifth of
    // the requests POSTs: the shim rescues the GETs' generation-race failures, never a POST.
    std::fs::write(
        dir.path().join("nginx.conf"),
        "http {\n    resolver 10.0.0.53 valid=5s ipv6=off;\n    upstream be {\n        zone be 128k;\n        server api.example.com:443 resolve max_fails=0;\n        keepalive 64;\n    }\n    server {\n        listen 80;\n        location / {\n            proxy_pass http://be;\n            proxy_http_version 1.1;\n            proxy_set_header Connection \"\";\n        }\n    }\n}\n",
    )
    .unwrap();
    let args = [
        "--quick",
        "--events",
        "swap-race",
        "--mix",
        "GET=0.8,POST=0.2",
    ];
    let (code, card, err) = verify_file(dir.path(), "shim", &args);
    assert_eq!(code, Some(0), "{err}");
    let t = &card["targets"][0];
    let before = &t["outcomes"][0]["failed_methods"];
    assert!(
        before["GET"].as_u64().unwrap() > 0 && before["POST"].as_u64().unwrap() > 0,
        "{t}"
    );
    let shim = fix_of(t, "fix", "retry-shim");
    let after = &shim["rows"][0][1];
    assert_eq!(after["failed_methods"].get("GET"), None, "{after}");
    assert!(
        after["failed_methods"]["POST"].as_u64().unwrap() > 0,
        "{after}"
    );
    assert_eq!(after["nlu"], 0, "{after}");
    // Three runs per cell (seeds 1–3): the median run shown, every run listed, the fix judged
    // run by run.
    let mut args = args.to_vec();
    args.extend(["--repeat", "3"]);
    let (code, card, err) = verify_file(dir.path(), "rep", &args);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(card["repeat"], 3);
    let o = &card["targets"][0]["outcomes"][0];
    let runs = o["runs"].as_array().unwrap();
    let seeds: Vec<u64> = runs.iter().map(|r| r["seed"].as_u64().unwrap()).collect();
    assert_eq!(seeds, [1, 2, 3], "{o}");
    let errs: Vec<u64> = runs
        .iter()
        .map(|r| r["client_errors"].as_u64().unwrap())
        .collect();
    let mut sorted = errs.clone();
    sorted.sort();
    assert_eq!(
        o["client_errors"].as_u64(),
        Some(sorted[1]),
        "the median run: {errs:?}"
    );
    let shim = fix_of(&card["targets"][0], "fix", "retry-shim");
    assert_eq!(
        shim["rows"][0][1]["runs"].as_array().unwrap().len(),
        3,
        "{shim}"
    );
    assert!(
        ["helps", "no-change", "worse", "mixed"].contains(&shim["verdict"].as_str().unwrap()),
        "{shim}"
    );
    // A day at 2,000 requests/s on the model: keep-alive in use, the answer changing at every
    // re-query — generation races — which per-DC names and the shim remove.
    let args = [
        "--quick",
        "--events",
        "nxdomain",
        "--no-fixes",
        "--per-day",
        "2000",
        "--first-try-failure",
        "0.05",
        "--sample",
        "2m",
    ];
    let (code, card, err) = verify_file(dir.path(), "day", &args);
    assert_eq!(code, Some(0), "{err}");
    let d = &card["targets"][0]["per_day"];
    assert_eq!(
        (d["rps"].as_f64(), d["sample_s"].as_i64()),
        (Some(2000.0), Some(120))
    );
    let rows = d["rows"].as_array().unwrap();
    let total = |v: &str| {
        rows.iter().find(|r| r["variant"] == v).unwrap()["total"]["count"]
            .as_u64()
            .unwrap()
    };
    assert_eq!(rows[0]["variant"], "baseline");
    assert!(total("baseline") > 0, "{d}");
    assert_eq!(total("per-dc"), 0, "{d}");
    assert_eq!(total("retry-shim"), 0, "{d}");
    std::fs::write(
        dir.path().join("nginx.conf"),
        "http { resolver 10.0.0.53; upstream be { least_conn; zone be 64k; server a.example resolve; }\n server { location / { proxy_pass http://be; } } }",
    )
    .unwrap();
    let (code, _, err) = verify_file(dir.path(), "lc", &["--quick", "--events", "restart"]);
    assert_eq!(code, Some(2));
    assert!(
        err.contains("least_conn") && err.contains("without --quick"),
        "{err}"
    );
}

/// Real nginx. A name resolved at start stops resolving; the reload 5 s later is refused
/// (`[emerg] host not found in upstream`) and the running configuration keeps serving.
#[test]
fn on_real_nginx_a_reload_is_refused_and_a_restart_stays_down_while_a_start_time_name_fails() {
    // network-safe: `nginx.conf:6:` is an error message's location, not an address; the names
    // are served by the run's authority through nginx's system resolver in a private namespace.
    let dir = tempfile::tempdir().unwrap();
    let conf = dir.path().join("nginx.conf");
    std::fs::write(
        &conf,
        "http {\n    upstream app { server app.internal:8080; }\n    server {\n        listen 80;\n        location /app/ { proxy_pass http://app; }\n        more_set_headers \"X-Edge: 1\";\n    }\n}\n",
    )
    .unwrap();
    // A third-party directive: refused at its line, then played without it when asked.
    let (code, _, err) = verify_file(dir.path(), "refused", &["--events", "reload-nxdomain"]);
    assert_eq!(code, Some(2));
    assert!(
        err.contains("nginx.conf:6: `more_set_headers`") && err.contains("--drop more_set_headers"),
        "{err}"
    );
    let o = bin()
        .args(["verify", "--nginx-conf"])
        .arg(&conf)
        .args([
            "--events",
            "reload-nxdomain,nxdomain",
            "--drop",
            "more_set_headers",
        ])
        .args(["--format", "json", "--out"])
        .arg(dir.path().join("out"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    let card: Value = serde_json::from_slice(&o.stdout).unwrap();
    let t = &card["targets"][0];
    assert_eq!(t["target"]["names"][0]["at_run_time"], false);
    // The reload is refused and harmless; the restart (a new container, a node reboot) does not
    // come up at all — nginx's own words — and every request is refused until the start after
    // the name resolves again, 6 s later.
    let (errors, nlu, _, refused) = outcome(t, "reload-nxdomain");
    assert!(refused, "{t}");
    assert!(errors > 0 && nlu == 0, "{errors} errors, {nlu} NLU");
    let rx = t["outcomes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["event"] == "reload-nxdomain")
        .unwrap();
    let start = rx["start"].as_str().unwrap();
    assert!(
        start.starts_with("refused: [emerg]") && start.contains("host not found in upstream"),
        "{start}"
    );
    let down = rx["down_ms"].as_i64().unwrap();
    assert!((5_000..=7_500).contains(&down), "{down} ms");
    // nginx never asks again for a name it resolved at start: the DNS event is not played.
    let nx = t["outcomes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["event"] == "nxdomain")
        .unwrap();
    assert!(
        nx["skipped"]
            .as_str()
            .unwrap()
            .contains("only when it starts"),
        "{nx}"
    );
    let dropped = t["changes"].as_array().unwrap().iter().any(|c| {
        c["was"].as_str().unwrap().starts_with("more_set_headers") && c["kind"] == "dropped"
    });
    assert!(dropped, "{t}");
}

/// The model too: while a name resolved at start fails, the reload is refused and harmless, and
/// a restart's start is refused with nginx's line and leaves it down until the name is back.
#[test]
fn quick_says_a_restart_fails_while_a_start_time_name_fails() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("nginx.conf"),
        "http {\n    upstream app { server app.internal:8080; }\n    server {\n        listen 80;\n        location /app/ { proxy_pass http://app; }\n    }\n}\n",
    )
    .unwrap();
    let args = ["--quick", "--events", "reload-nxdomain", "--no-fixes"];
    let (code, card, err) = verify_file(dir.path(), "out", &args);
    assert_eq!(code, Some(0), "{err}");
    let o = &card["targets"][0]["outcomes"][0];
    assert_eq!(
        o["start"], "refused: [emerg] host not found in upstream \"app.internal:8080\"",
        "{o}"
    );
    assert_eq!(o["reload_refused"].as_bool(), Some(true));
    // Down from the restart to the start 6 s later, every request of it refused.
    assert_eq!(o["down_ms"], 6000, "{o}");
    assert_eq!(
        o["client_errors"],
        6 * 200,
        "6 s at the default 200 rps: {o}"
    );
}

/// Another machine's includes (`/etc/nginx/mime.types`) are left out and listed on the card,
/// not a stop; the upstream in the main file is verified as usual.
#[test]
fn an_include_this_machine_cannot_read_is_listed_not_a_stop() {
    // network-safe: `--plan` runs nothing, and lint only reads; 10.0.0.53 is the user's
    // resolver, which a played run would rewrite to the run's authority.
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("elsewhere/mime.types");
    std::fs::write(
        dir.path().join("nginx.conf"),
        format!(
            "http {{\n    include {};\n    resolver 10.0.0.53 valid=5s;\n    upstream be {{ zone be 64k; server api.example.com:443 resolve; }}\n    server {{ listen 80; location / {{ proxy_pass http://be; }} }}\n}}\n",
            missing.display()
        ),
    )
    .unwrap();
    let (code, card, err) = verify_file(dir.path(), "out", &["--plan"]);
    assert_eq!(code, Some(0), "{err}");
    let changes = card["targets"][0]["changes"].as_array().unwrap();
    let c = changes
        .iter()
        .find(|c| c["was"].as_str().unwrap().starts_with("include "))
        .unwrap_or_else(|| panic!("{changes:?}"));
    assert_eq!(c["kind"], "dropped");
    assert!(c["at"].as_str().unwrap().ends_with("nginx.conf:2"), "{c}");
    assert!(
        c["why"].as_str().unwrap().contains("not readable here"),
        "{c}"
    );
    // The linter, which reads as nginx would, still stops there.
    let o = bin()
        .args(["lint"])
        .arg(dir.path().join("nginx.conf"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("nginx.conf:2: include: cannot read"), "{err}");
}

/// Debian 12's nginx 1.22.1 (`--engine nginx-1.22`, fetched and cached on first use): a name
/// resolved at start is played — the restart stays down while it does not resolve — and the
/// `resolve` fix, which 1.22 cannot parse, is refused on the card instead of stopping the
/// verification; a target that needs `resolve` is refused at the user's own line.
#[test]
fn on_debian_nginx_1_22_resolve_and_its_fix_are_refused_not_played() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("nginx.conf"),
        "http {\n    upstream app { server app.internal:8080; }\n    server {\n        listen 80;\n        location /app/ { proxy_pass http://app; }\n    }\n}\n",
    )
    .unwrap();
    let args = ["--engine", "nginx-1.22", "--events", "reload-nxdomain"];
    let (code, card, err) = verify_file(dir.path(), "at-start", &args);
    assert_eq!(code, Some(0), "{err}");
    assert!(card["nginx"].as_str().unwrap().contains("1.22.1"), "{card}");
    let t = &card["targets"][0];
    let (errors, _, _, refused) = outcome(t, "reload-nxdomain");
    assert!(refused && errors > 0, "{t}");
    let fix = t["fixes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["fix"] == "resolve")
        .unwrap_or_else(|| panic!("no resolve fix: {t}"));
    assert_eq!(fix["verdict"], "refused", "{fix}");
    assert!(
        fix["note"].as_str().unwrap().contains("no `resolve`"),
        "{fix}"
    );

    std::fs::write(
        dir.path().join("nginx.conf"),
        "http {\n    resolver 10.0.0.53 valid=5s;\n    upstream be {\n        zone be 64k;\n        server api.example.com:8080 resolve;\n    }\n    server {\n        listen 80;\n        location / { proxy_pass http://be; }\n    }\n}\n",
    )
    .unwrap();
    let (code, _, err) = verify_file(dir.path(), "resolve", &args);
    assert_eq!(code, Some(2), "every target refused: {err}");
    assert!(
        err.contains("nginx.conf:3: nginx 1.22.1 has no `resolve`")
            && err.contains("--engine nginx")
            && err.contains("nothing was run"),
        "{err}"
    );
}

/// `proxy_pass https://`: on an nginx with the SSL module (`--engine nginx-1.31`) TLS is played
/// as written — `proxy_ssl_verify on` against the run's own authority, the user's
/// `proxy_ssl_name` kept — and the backend restart still resets the TLS connections; on the
/// lab's 1.28.3 build (no SSL module) the plan rewrites it to plain HTTP and says why.
#[test]
fn on_nginx_with_ssl_an_https_upstream_is_played_over_tls() {
    let conf = "http {\n    resolver 10.0.0.53 valid=5s;\n    upstream be {\n        zone be 64k;\n        server api.example.com:443 resolve;\n        keepalive 8;\n    }\n    server {\n        listen 443 ssl;\n        ssl_certificate /etc/ssl/site.pem;\n        location / {\n            proxy_pass https://be;\n            proxy_ssl_verify on;\n            proxy_ssl_trusted_certificate /etc/ssl/certs/internal-ca.pem;\n            proxy_ssl_name api.example.com;\n            proxy_ssl_certificate /etc/ssl/client.pem;\n            proxy_http_version 1.1;\n            proxy_set_header Connection \"\";\n        }\n    }\n}\n";
    let change = |t: &Value, line: &str| -> Value {
        t["changes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["at"].as_str().unwrap().ends_with(line))
            .cloned()
            .unwrap_or(Value::Null)
    };
    // The lab's own build: planned as plain HTTP, the reason on the line.
    let (code, card, err) = plan(conf, &[]);
    assert_eq!(code, 0, "{err}");
    let t = &card["targets"][0];
    assert!(t["tls"].is_null(), "{t}");
    let pass = change(t, ":12");
    assert_eq!(pass["now"], "proxy_pass http://be;", "{pass}");
    assert!(
        pass["why"].as_str().unwrap().contains("no SSL module"),
        "{pass}"
    );

    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("nginx.conf"), conf).unwrap();
    let args = [
        "--engine",
        "nginx-1.31",
        "--events",
        "restart",
        "--no-fixes",
    ];
    let (code, card, err) = verify_file(dir.path(), "out", &args);
    assert_eq!(code, Some(0), "{err}");
    let t = &card["targets"][0];
    assert_eq!(
        t["tls"],
        serde_json::json!(["api.example.com", "be"]),
        "{t}"
    );
    assert!(change(t, ":12").is_null(), "proxy_pass https kept: {t}");
    assert_eq!(
        change(t, ":14")["now"],
        "proxy_ssl_trusted_certificate \"{tls_ca}\";",
        "{t}"
    );
    assert_eq!(
        change(t, ":16")["kind"],
        "dropped",
        "client certificate: {t}"
    );
    let o = &t["outcomes"][0];
    assert_eq!(o["status"], "completed", "{o}");
    let run = std::path::Path::new(o["run_dir"].as_str().unwrap());
    let conf_run = std::fs::read_to_string(run.join("nginx.conf")).unwrap();
    assert!(conf_run.contains("proxy_pass https://be;"), "{conf_run}");
    assert!(run.join("tls-ca.pem").is_file());
    // Every connection nginx opened to the backend spoke TLS, and each handshake verified.
    let log = std::fs::read_to_string(run.join("backend-b1.jsonl")).unwrap();
    let opened = log.matches("\"conn_open\"").count();
    assert!(
        opened >= 2,
        "the restart reset the pool, nginx reconnected: {opened}"
    );
    assert_eq!(log.matches("\"detail\":\"tls\"").count(), opened, "{log}");
    assert!(!log.contains("tls handshake failed"), "{log}");
    let served = log.matches("\"request\"").count() as u64;
    let requests = o["requests"].as_u64().unwrap();
    let errors = o["client_errors"].as_u64().unwrap();
    assert!(
        requests > 1000 && served + errors >= requests,
        "{served} {errors} {requests}"
    );
    assert!(errors < requests / 2, "{o}");
}
