//! The checker on real production excerpts (`tests/fixtures/real/`, each with its
//! public source and a `truth.toml` written from reading the source before the tool ran): every
//! expected signature is counted exactly, every failure gets an allowed class, none a forbidden
//! one — above all, no generation race without evidence of a peer-list change. Where the source
//! was one interleaved stream (`stream.log`), it is diagnosed as such too (`--logs`), with the
//! same truth, and its access/error/other/continuation lines counted as `[stream_counts]` says.

use resolvelab_diagnose::{NginxConf, Options, diagnose_with_stats};
use resolvelab_history::logformat::LogFormat;
use std::path::{Path, PathBuf};

fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/real")
}

fn strs(v: Option<&toml::Value>) -> Vec<String> {
    v.and_then(|v| v.as_array())
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// The preset(s) a fixture's `access_format` names; a family tries its older generation too;
/// `json` with a quoted log_format also tries that format (as `--nginx-conf` would give it).
fn formats(truth: &toml::Value) -> Vec<String> {
    let f = truth["access_format"].as_str().unwrap_or("none");
    match f {
        "json" => ["json"]
            .into_iter()
            .map(str::to_string)
            .chain(
                truth
                    .get("access_log_format")
                    .and_then(|t| t.as_str())
                    .map(str::to_string),
            )
            .collect(),
        "custom" => vec![truth["access_log_format"].as_str().unwrap().to_string()],
        "upstreaminfo" => vec![
            f.to_string(),
            format!("{f}-legacy"),
            format!("{f}-legacy-reqid"),
        ],
        "vhost" => vec![f.to_string(), format!("{f}-legacy")],
        other => vec![other.to_string()],
    }
}

/// How a fixture is read: its split files (`access.log`, `error.log`), or its original stream.
#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Split,
    Stream,
}

/// Diagnose one fixture as `resolvelab diagnose --format json` would, with the arguments a user
/// would give; the diagnosis as its JSON and the exit status the command documents (3 when
/// nothing could be diagnosed, else 0).
fn diagnose(dir: &Path, truth: &toml::Value, mode: Mode) -> (serde_json::Value, Option<i32>) {
    let mut best: Option<(serde_json::Value, Option<i32>)> = None;
    for fmt in formats(truth) {
        let mut o = Options::new(Vec::new(), Vec::new());
        let mut format_given = false;
        if mode == Mode::Stream {
            o.mixed.push(dir.join("stream.log"));
            format_given = fmt != "none";
        }
        if mode == Mode::Split && dir.join("access.log").exists() {
            o.access.push(dir.join("access.log"));
            format_given = true;
        }
        if mode == Mode::Split && dir.join("error.log").exists() {
            o.error.push(dir.join("error.log"));
        }
        o.log_format = if format_given {
            LogFormat::from_arg(&fmt).unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        } else {
            LogFormat::combined()
        };
        let conf = dir.join("nginx.conf");
        if conf.exists() {
            o.config = NginxConf::read(&conf, &conf).unwrap().facts().ok();
        }
        o.nginx_version = truth["nginx_version"]
            .as_str()
            .filter(|v| *v != "unknown")
            .map(|v| v.parse().unwrap());
        let offset = truth["utc_offset"]
            .as_str()
            .filter(|v| *v != "unknown")
            .unwrap_or("+00:00");
        o.tz_offset_s = Some(resolvelab_history::time::parse_offset(offset).unwrap());
        let (d, _, _) =
            diagnose_with_stats(&o).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        let code = if d.unusable().is_some() { 3 } else { 0 };
        let v = serde_json::to_value(&d).unwrap();
        let better = best
            .as_ref()
            .is_none_or(|(b, _)| v["requests"].as_u64() > b["requests"].as_u64());
        if better {
            best = Some((v, Some(code)));
        }
    }
    best.unwrap()
}

/// The mismatches of one fixture (empty when it holds), read both ways where it can be.
fn check(dir: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(dir.join("truth.toml")).unwrap();
    let truth: toml::Value = toml::from_str(&text).unwrap();
    let mut bad = Vec::new();
    if dir.join("access.log").exists() || dir.join("error.log").exists() {
        bad.extend(check_mode(dir, &truth, Mode::Split));
    }
    if dir.join("stream.log").exists() {
        let (v, _) = diagnose(dir, &truth, Mode::Stream);
        bad.extend(stream_counts(&v, &truth));
        bad.extend(
            check_mode(dir, &truth, Mode::Stream)
                .into_iter()
                .map(|b| format!("(--logs) {b}")),
        );
    }
    bad
}

/// The access, error, other and continuation lines of a stream, as `[stream_counts]` says.
fn stream_counts(v: &serde_json::Value, truth: &toml::Value) -> Vec<String> {
    let Some(want) = truth.get("stream_counts").and_then(|s| s.as_table()) else {
        return Vec::new();
    };
    let files = v["parse"]["files"].as_array().unwrap();
    let view = |kind: &str, key: &str| {
        files
            .iter()
            .filter(|f| f["kind"] == kind)
            .map(|f| f[key].as_u64().unwrap_or(0))
            .sum::<u64>()
    };
    let continuation = view("error", "continued");
    let error = view("error", "parsed");
    // Access lines the source's own edits broke (a redaction that ate a space) are passed over.
    let unmatched = want
        .get("access_unmatched")
        .and_then(|n| n.as_integer())
        .unwrap_or(0) as u64;
    let got = [
        ("access", view("access", "parsed") + unmatched),
        ("error", error),
        ("continuation", continuation),
        // What neither stream took: the access view passes over errors and their continuations.
        (
            "other",
            view("access", "skipped").saturating_sub(error + continuation + unmatched),
        ),
    ];
    got.iter()
        .filter_map(|(k, n)| {
            let w = want.get(*k)?.as_integer()? as u64;
            (w != *n).then(|| format!("stream: {n} {k} lines, truth {w}"))
        })
        .collect()
}

fn check_mode(dir: &Path, truth: &toml::Value, mode: Mode) -> Vec<String> {
    let (v, code) = diagnose(dir, truth, mode);
    let mut bad = Vec::new();
    let exit = truth["expect"]
        .get("exit")
        .and_then(|e| e.as_integer())
        .unwrap_or(0) as i32;
    if code != Some(exit) {
        bad.push(format!("exit status {code:?}, truth {exit}"));
    }
    // The tool's refinements of a truth id count toward it.
    let refines = |tool: &str, truth: &str| {
        tool == truth || (tool == "connect-ipv6-unavailable" && truth == "connect-eaddrnotavail")
    };
    let counted = |id: &str| {
        v["signatures"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|s| refines(s["id"].as_str().unwrap(), id))
            .map(|s| s["count"].as_u64().unwrap())
            .sum::<u64>()
    };
    if let Some(sigs) = truth.get("signatures").and_then(|s| s.as_table()) {
        for (id, n) in sigs.iter().filter(|(id, _)| id.as_str() != "other") {
            let want = n.as_integer().unwrap() as u64;
            if counted(id) != want {
                bad.push(format!(
                    "signature {id}: {} lines, truth {want}",
                    counted(id)
                ));
            }
        }
    }
    let expect = &truth["expect"];
    let allowed = strs(expect.get("classes"));
    let forbidden = strs(expect.get("must_not"));
    for i in v["incidents"].as_array().unwrap() {
        let c = i["class"].as_str().unwrap().to_string();
        if forbidden.contains(&c) || !allowed.contains(&c) {
            bad.push(format!(
                "class {c} ({} failures; allowed {allowed:?})",
                i["count"]
            ));
        }
    }
    // A failure must be found where the logs show one: a 502/504 in the access log, or a
    // `no live upstreams` line.
    let shown = v["http_status"]["502"].as_u64().unwrap_or(0)
        + v["http_status"]["504"].as_u64().unwrap_or(0)
        + counted("no-live-upstreams");
    if shown > 0 && v["incidents"].as_array().unwrap().is_empty() {
        bad.push(format!("no failure found; truth allows {allowed:?}"));
    }
    bad.extend(contradictions(&v));
    // Request identity (issue #43): the failed requests and the `no live upstreams` requests,
    // counted by hand from the source, where the truth gives them.
    for (key, got) in [
        ("failed_requests", v["failures"].as_u64()),
        ("nlu_requests", v["nlu"]["total"].as_u64()),
    ] {
        if let Some(want) = expect.get(key).and_then(|n| n.as_integer())
            && got != Some(want as u64)
        {
            bad.push(format!("{key}: {got:?}, truth {want}"));
        }
    }
    bad
}

/// What a report says against its own evidence section (issue #43): a race, or a DNS swap as a
/// cause or fix, where the evidence rules the race out; an NLU's explanation on an incident
/// without one NLU; a DNS class without a resolver line or an answer history.
fn contradictions(v: &serde_json::Value) -> Vec<String> {
    let mut bad = Vec::new();
    let ruled_out = v["evidence"]["race"] == "ruled-out";
    let resolver_lines = v["signatures"].as_array().unwrap().iter().any(|s| {
        s["id"]
            .as_str()
            .is_some_and(|id| id.starts_with("resolve-"))
    });
    let dns_log = v["evidence"]["dns_log"] == true;
    for i in v["incidents"].as_array().unwrap() {
        let class = i["class"].as_str().unwrap();
        let text =
            format!("{} {}", i["explanation"], i["fix"]).replace("DNS swap is ruled out", "");
        if ruled_out && (class.starts_with("generation-race") || text.contains("DNS swap")) {
            bad.push(format!(
                "{class}: names a race or a DNS swap the evidence rules out"
            ));
        }
        if i["nlu"] == 0 && text.contains("`no live upstreams` whose cause") {
            bad.push(format!(
                "{class}: explained as `no live upstreams` without one"
            ));
        }
        if class == "dns-nxdomain" && !resolver_lines && !dns_log {
            bad.push("dns-nxdomain without a resolver line or an answer history".into());
        }
    }
    bad
}

#[test]
fn every_real_excerpt_gets_its_true_signatures_and_an_allowed_class() {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(corpus())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("truth.toml").exists())
        .collect();
    dirs.sort();
    assert!(dirs.len() >= 93, "the corpus has {} excerpts", dirs.len());
    let failed: Vec<String> = dirs
        .iter()
        .filter_map(|d| {
            let bad = check(d);
            (!bad.is_empty()).then(|| {
                format!(
                    "{}: {}",
                    d.file_name().unwrap().to_string_lossy(),
                    bad.join("; ")
                )
            })
        })
        .collect();
    assert!(
        failed.is_empty(),
        "{} of {} excerpts disagree with their truth:\n{}",
        failed.len(),
        dirs.len(),
        failed.join("\n")
    );
}
