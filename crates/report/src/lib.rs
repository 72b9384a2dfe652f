//! Reports of resolvelab diagnoses and lab verdicts: Markdown, JSON, and a self-contained HTML
//! page with inline SVG charts drawn by plotters' SVG backend (no scripts, no external assets).
//!
//! ```
//! use resolvelab_report::{render_diagnosis, Format};
//! let dir = tempfile::tempdir().unwrap();
//! let a = dir.path().join(resolvelab_core::evidence::file::ACCESS_LOG);
//! std::fs::write(&a, "1796018401.100 502 \"be\" \"502\" 0.000 GET 1 1 \"-\" \"-\" \"GET / HTTP/1.1\" 127.0.0.1\n").unwrap();
//! let mut o = resolvelab_diagnose::Options::new(vec![a], vec![]);
//! o.log_format = resolvelab_history::logformat::LogFormat::lab();
//! let d = resolvelab_diagnose::diagnose(&o).unwrap();
//! let md = render_diagnosis(&d, Format::Md).unwrap();
//! assert!(md.starts_with("# resolvelab diagnosis"));
//! let html = render_diagnosis(&d, Format::Html).unwrap();
//! assert!(html.contains("<svg") && !html.contains("<script"));
//! ```

mod charts;
mod html;
mod markdown;

use resolvelab_diagnose::{Diagnosis, Verdict};
use std::path::Path;

pub use charts::{backend_latency_svg, incident_svg, latency_svg, rate_svg};

/// The per-backend table of a lab verdict (client view from `x-backend`, pool counters from
/// `backends.json`) and the readiness-probe table, as header + rows of plain text, so Markdown and
/// HTML show the same numbers.
pub(crate) fn backend_tables(c: &resolvelab_diagnose::verdict::ClientStats) -> (Table, Table) {
    let ms = |v: f64| format!("{v:.1}");
    let opt = |v: Option<f64>| v.map(ms).unwrap_or_else(|| "–".into());
    let bh = vec![
        "backend",
        "answers",
        "≥ 500",
        "min ms",
        "p50 ms",
        "p90 ms",
        "p99 ms",
        "max ms",
        "pool wait max ms",
        "pool timeouts",
    ];
    let brows = c
        .backends
        .iter()
        .map(|(n, b)| {
            vec![
                n.clone(),
                b.requests.to_string(),
                b.errors.to_string(),
                ms(b.min_ms),
                ms(b.p50_ms),
                ms(b.p90_ms),
                ms(b.p99_ms),
                ms(b.max_ms),
                opt(b.pool_wait_max_ms),
                b.pool_timeouts
                    .map(|n| n.to_string())
                    .unwrap_or_else(|| "–".into()),
            ]
        })
        .collect();
    let ph = vec![
        "probed backend",
        "probes",
        "ok",
        "failed",
        "of them timeouts",
        "slowest ms",
    ];
    let prows = c
        .probes
        .iter()
        .map(|(n, p)| {
            vec![
                n.clone(),
                p.probes.to_string(),
                p.ok.to_string(),
                p.failed.to_string(),
                p.timeouts.to_string(),
                ms(p.max_ms),
            ]
        })
        .collect();
    ((bh, brows), (ph, prows))
}

/// A header and its rows.
pub(crate) type Table = (Vec<&'static str>, Vec<Vec<String>>);

/// "What these logs can show": (label, value) rows and the missing inputs as a table
/// (missing, what it would decide, how to add it) — rendered by both Markdown and HTML.
pub(crate) fn evidence_tables(
    e: &resolvelab_diagnose::evidence::Observability,
) -> (Vec<(&'static str, String)>, Table) {
    let yes = |b: bool| if b { "yes" } else { "no" }.to_string();
    let mut rows = vec![
        ("access log", yes(e.inputs.access_log)),
        (
            "`$upstream_addr` (trajectories)",
            yes(e.inputs.upstream_addr),
        ),
        ("`$connection` (pairing by *cid)", yes(e.inputs.connection)),
        ("`$msec` (ms timing)", yes(e.inputs.msec)),
        ("error log", yes(e.inputs.error_log)),
        ("DNS answer history", yes(e.inputs.dns_log)),
        ("peer-list changes from", e.peer_changes.clone()),
        (
            "nginx version",
            e.nginx_version.clone().unwrap_or_else(|| "unknown".into()),
        ),
    ];
    rows.push(match &e.config {
        Some(c) => (
            "configuration",
            format!(
                "{}: resolve {}, variable *_pass {}{}",
                c.source,
                yes(c.resolve),
                yes(c.variable_pass),
                if c.lua_balancer {
                    ", Lua balancer (ingress-nginx)"
                } else {
                    ""
                }
            ),
        ),
        None => ("configuration", "not given".into()),
    });
    rows.push(("generation race", format!("{} — {}", e.race, e.race_why)));
    let missing = e
        .missing
        .iter()
        .map(|m| vec![m.what.clone(), m.decides.clone(), m.add.clone()])
        .collect();
    (rows, (vec!["missing", "it would decide", "add"], missing))
}

/// Output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Markdown summary.
    Md,
    /// One JSON document.
    Json,
    /// Self-contained HTML.
    Html,
}

impl std::str::FromStr for Format {
    type Err = String;
    fn from_str(s: &str) -> Result<Format, String> {
        match s {
            "md" | "markdown" => Ok(Format::Md),
            "json" => Ok(Format::Json),
            "html" => Ok(Format::Html),
            _ => Err(format!("unknown format `{s}`: use md, json or html")),
        }
    }
}

/// Render a production diagnosis.
pub fn render_diagnosis(d: &Diagnosis, f: Format) -> anyhow::Result<String> {
    Ok(match f {
        Format::Md => markdown::diagnosis(d, None),
        Format::Json => serde_json::to_string_pretty(d)? + "\n",
        Format::Html => html::page(d, None),
    })
}

/// Render a lab verdict.
pub fn render_verdict(v: &Verdict, f: Format) -> anyhow::Result<String> {
    Ok(match f {
        Format::Md => markdown::diagnosis(&v.diagnosis, Some(v)),
        Format::Json => serde_json::to_string_pretty(v)? + "\n",
        Format::Html => html::page(&v.diagnosis, Some(v)),
    })
}

/// Write `verdict.md`, `verdict.json` and `verdict.html` into a run directory.
pub fn write_verdict_files(dir: &Path, v: &Verdict) -> anyhow::Result<()> {
    for (name, f) in [
        (resolvelab_core::evidence::file::VERDICT_JSON, Format::Json),
        (resolvelab_core::evidence::file::VERDICT_MD, Format::Md),
        (resolvelab_core::evidence::file::VERDICT_HTML, Format::Html),
    ] {
        // Atomically: a kill mid-write never leaves a 0-byte verdict that `analyze` refuses.
        resolvelab_core::rundir::write_atomic(&dir.join(name), render_verdict(v, f)?.as_bytes())?;
    }
    Ok(())
}

/// An incident's failed share — never a share of zero requests (without an access log the
/// requests in the window are unknown).
pub(crate) fn share_text(i: &resolvelab_diagnose::Incident) -> String {
    if i.requests_in_window == 0 {
        "unknown (no request logged)".to_string()
    } else {
        format!("{:.1}% of {}", i.share_failed * 100.0, i.requests_in_window)
    }
}

/// Epoch ms as `2026-11-30T06:00:01.123Z`.
pub(crate) fn ts(ms: i64) -> String {
    jiff::Timestamp::from_millisecond(ms)
        .map(|t| t.strftime("%Y-%m-%dT%H:%M:%S%.3fZ").to_string())
        .unwrap_or_else(|_| ms.to_string())
}

/// The line that ends a generated part of a hand-maintained page (docs/FIDELITY.md,
/// docs/COMPARISON.md); the part starts at a line beginning `<!-- BEGIN GENERATED`.
pub const GENERATED_END: &str = "<!-- END GENERATED -->";

/// Write `generated` (which carries its own BEGIN/END marker lines) into `path` between the
/// markers already there, keeping the hand-written text around them; a file without markers
/// becomes `fresh(generated)`.
pub fn update_generated(
    path: &Path,
    generated: &str,
    fresh: impl FnOnce(&str) -> String,
) -> anyhow::Result<()> {
    use anyhow::Context;
    let old = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = old.lines().collect();
    let begin = lines
        .iter()
        .position(|l| l.starts_with("<!-- BEGIN GENERATED"));
    let end = lines.iter().position(|l| l.starts_with(GENERATED_END));
    let text = match (begin, end) {
        (Some(b), Some(e)) if b < e => {
            let mut t = lines[..b].join("\n");
            t.push('\n');
            t.push_str(generated);
            for l in &lines[e + 1..] {
                t.push_str(l);
                t.push('\n');
            }
            t
        }
        _ => fresh(generated),
    };
    resolvelab_core::rundir::write_atomic(path, text.as_bytes())
        .with_context(|| format!("cannot write {}: give a writable path", path.display()))
}
