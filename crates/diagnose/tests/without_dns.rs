//! Every real-nginx lab fixture judged as production would judge it — without the DNS log, and
//! again with the access log rewritten into a production `log_format` (`$time_local` to the
//! second, `$upstream_addr`, no `$msec`, no `$connection`): the verdict may say `undetermined`,
//! but it never names a class the full-evidence verdict does not have (docs/diagnose.md, "Without
//! the DNS log").

use resolvelab_diagnose::{Options, analyze_run, diagnose};
use resolvelab_history::logformat::{Field, LogFormat};
use resolvelab_history::{History, Sources};
use std::collections::BTreeSet;
use std::io::Write;
use std::path::{Path, PathBuf};

const PRODUCTION: &str = r#"$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent "$http_referer" "$http_user_agent" "$upstream_addr""#;

fn fixtures() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/diagnose/real");
    let mut v: Vec<PathBuf> = std::fs::read_dir(root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("expect.json").exists())
        // nginx's logs only: `diagnose` reads production nginx logs, not another proxy's (such a
        // lab run is judged with its own events, `tests/lab_runs.rs`).
        .filter(|p| {
            p.join("nginx.conf").exists()
                || !["haproxy.cfg", "envoy.json", "caddy.json"]
                    .iter()
                    .any(|c| p.join(c).exists())
        })
        .collect();
    v.sort();
    v
}

fn file(dir: &Path, name: &str) -> PathBuf {
    let gz = dir.join(format!("{name}.gz"));
    if gz.exists() { gz } else { dir.join(name) }
}

fn classes(v: &serde_json::Value) -> BTreeSet<String> {
    let d = v.get("diagnosis").unwrap_or(v);
    d["incidents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["class"].as_str().unwrap().to_string())
        .collect()
}

/// `[30/Nov/2026:06:00:01 +0000]` of an epoch time in µs.
fn time_local(t_us: i64) -> String {
    let r = resolvelab_core::time::rfc3339(t_us);
    let months = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let m: usize = r[5..7].parse().unwrap();
    format!(
        "{}/{}/{}:{} +0000",
        &r[8..10],
        months[m - 1],
        &r[0..4],
        &r[11..19]
    )
}

/// The lab access log rewritten in [`PRODUCTION`], request by request.
fn production_access(dir: &Path, out: &Path) -> PathBuf {
    let h = History::load(&Sources {
        access: vec![file(dir, "access.log")],
        ..Sources::default()
    })
    .unwrap();
    let mut s = h.access_stream(&LogFormat::lab()).unwrap();
    let path = out.join("access.log");
    let mut w = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
    while let Some(a) = s.next() {
        let t = |f| a.text(f).unwrap_or("-");
        writeln!(
            w,
            "{} - - [{}] \"{}\" {} 0 \"-\" \"-\" \"{}\"",
            t(Field::RemoteAddr),
            time_local(a.t_us),
            t(Field::Request),
            t(Field::Status),
            t(Field::UpstreamAddr)
        )
        .unwrap();
    }
    path
}

/// `resolvelab diagnose --format json --tz-offset +00:00 --access A --error E --log-format F`.
fn diagnose_logs(access: &Path, error: &Path, format: &str) -> serde_json::Value {
    let mut o = Options::new(vec![access.to_path_buf()], vec![error.to_path_buf()]);
    o.log_format = LogFormat::from_arg(format).unwrap();
    o.tz_offset_s = Some(0);
    serde_json::to_value(diagnose(&o).unwrap()).unwrap()
}

#[test]
fn without_the_dns_log_a_verdict_may_be_undetermined_but_never_contradicts_the_lab() {
    let mut bad = Vec::new();
    let mut table = Vec::new();
    // Floors on what was checked: the lab's nginx runs are all here (a moved or emptied
    // directory would pass an empty loop), and the logs without a DNS history still decide
    // most of their classes (a checker that said `undetermined` to everything would contradict
    // nothing).
    let dirs = fixtures();
    assert!(dirs.len() >= 11, "only {} lab runs found", dirs.len());
    let mut decided = 0;
    for dir in dirs {
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        let full = serde_json::to_value(analyze_run(&dir).unwrap()).unwrap();
        let truth = classes(&full);
        let error = file(&dir, "error.log");
        let lab = classes(&diagnose_logs(&file(&dir, "access.log"), &error, "lab"));
        let tmp = tempfile::tempdir().unwrap();
        let prod = classes(&diagnose_logs(
            &production_access(&dir, tmp.path()),
            &error,
            PRODUCTION,
        ));
        for (how, got) in [
            ("lab format, no DNS log", &lab),
            ("production format", &prod),
        ] {
            let wrong: Vec<&String> = got
                .iter()
                .filter(|c| *c != "undetermined" && !truth.contains(*c))
                .collect();
            if !wrong.is_empty() {
                bad.push(format!("{name} ({how}): {wrong:?}, lab truth {truth:?}"));
            }
        }
        decided += usize::from(lab.iter().any(|c| c != "undetermined" && truth.contains(c)));
        table.push(format!("| {name} | {truth:?} | {lab:?} | {prod:?} |"));
    }
    assert!(
        decided >= 7,
        "only {decided} runs had a class decided without the DNS log"
    );
    println!(
        "| fixture | with the DNS log | no DNS log | production format |\n|---|---|---|---|\n{}",
        table.join("\n")
    );
    assert!(bad.is_empty(), "contradictions:\n{}", bad.join("\n"));
}
