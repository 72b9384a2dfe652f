//! Reports of resolvelab diagnoses and lab verdicts: Markdown, JSON, and a self-contained HTML
//! page with inline SVG charts drawn by plotters' SVG backend (no scripts, no external assets).
//! A report's sections are built once as data (`sections.rs` → `resolvelab_core::doc::Doc`) and rendered twice
//! (`markdown.rs`, `html.rs`), so the two formats cannot drift apart.
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

// A library says what it has to say through `resolvelab_core::progress`, never on its own
// stdout/stderr, and links only what it uses (docs/ARCHITECTURE.md, "Lints").
#![cfg_attr(not(test), deny(clippy::print_stdout, clippy::print_stderr))]
#![cfg_attr(not(test), deny(unused_crate_dependencies))]

mod charts;
mod fleet;
mod sections;

use resolvelab_core::doc::{html, markdown};

use resolvelab_diagnose::{Diagnosis, Verdict};
use std::path::Path;

pub use charts::{backend_latency_svg, incident_svg, lanes_svg, latency_svg, rate_svg};

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
        Format::Md => markdown::render(&sections::doc(d, None)),
        Format::Json => serde_json::to_string_pretty(d)? + "\n",
        Format::Html => html::render(&sections::doc(d, None), ""),
    })
}

/// Render a fleet diagnosis (`resolvelab merge`).
pub fn render_fleet(
    f: &resolvelab_diagnose::fleet::Fleet,
    format: Format,
) -> anyhow::Result<String> {
    let mut out = Vec::new();
    write_fleet(f, format, &mut out)?;
    Ok(String::from_utf8(out)?)
}

/// Write a fleet diagnosis to `w`: the JSON as it is serialized (a thousand instances' report is
/// larger than it is worth holding twice).
pub fn write_fleet(
    f: &resolvelab_diagnose::fleet::Fleet,
    format: Format,
    w: &mut dyn std::io::Write,
) -> anyhow::Result<()> {
    match format {
        Format::Md => w.write_all(markdown::render(&fleet::doc(f)).as_bytes())?,
        Format::Json => {
            serde_json::to_writer_pretty(&mut *w, f)?;
            w.write_all(b"\n")?;
        }
        Format::Html => w.write_all(html::render(&fleet::doc(f), "").as_bytes())?,
    }
    Ok(())
}

/// Render a lab verdict.
pub fn render_verdict(v: &Verdict, f: Format) -> anyhow::Result<String> {
    Ok(match f {
        Format::Md => markdown::render(&sections::doc(&v.diagnosis, Some(v))),
        Format::Json => serde_json::to_string_pretty(v)? + "\n",
        Format::Html => html::render(&sections::doc(&v.diagnosis, Some(v)), ""),
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

/// Whether `path` can take a generated part ([`update_generated`]): missing, empty, or with
/// its markers. Checked before long work that ends by writing it.
pub fn check_generated_page(path: &Path) -> anyhow::Result<()> {
    let old = std::fs::read_to_string(path).unwrap_or_default();
    let has = |p: &str| old.lines().any(|l| l.starts_with(p));
    match old.trim().is_empty() || (has("<!-- BEGIN GENERATED") && has(GENERATED_END)) {
        true => Ok(()),
        false => Err(not_a_generated_page(path)),
    }
}

fn not_a_generated_page(path: &Path) -> anyhow::Error {
    anyhow::anyhow!(
        "{} has text but no `<!-- BEGIN GENERATED` … `{GENERATED_END}` lines, so writing the table would replace it: put those two lines where the table goes, or give a new file",
        path.display()
    )
}

/// Write `generated` (which carries its own BEGIN/END marker lines) into `path` between the
/// markers already there, keeping the hand-written text around them; a missing or empty file
/// becomes `fresh(generated)`. A file with text but no markers is refused, not overwritten: it
/// is somebody's page (`compare --table docs/COMPARISON.md` would have replaced its findings).
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
        _ if old.trim().is_empty() => fresh(generated),
        _ => return Err(not_a_generated_page(path)),
    };
    resolvelab_core::rundir::write_atomic(path, text.as_bytes())
        .with_context(|| format!("cannot write {}: give a writable path", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_generated_part_goes_between_markers_and_a_page_without_them_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("page.md");
        let gen_ = |x: &str| format!("<!-- BEGIN GENERATED x -->\n{x}\n{GENERATED_END}\n");
        let fresh = |g: &str| format!("# New\n\n{g}");
        check_generated_page(&p).unwrap();
        update_generated(&p, &gen_("one"), fresh).unwrap();
        check_generated_page(&p).unwrap();
        assert_eq!(
            std::fs::read_to_string(&p).unwrap(),
            "# New\n\n".to_string() + &gen_("one")
        );
        update_generated(&p, &gen_("two"), fresh).unwrap();
        let t = std::fs::read_to_string(&p).unwrap();
        assert!(
            t.starts_with("# New\n") && t.contains("two") && !t.contains("one"),
            "{t}"
        );
        std::fs::write(&p, "# Findings\n\nhand-written\n").unwrap();
        assert!(check_generated_page(&p).is_err());
        let e = update_generated(&p, &gen_("three"), fresh)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("no `<!-- BEGIN GENERATED`") && !e.contains('\n'),
            "{e}"
        );
        assert_eq!(
            std::fs::read_to_string(&p).unwrap(),
            "# Findings\n\nhand-written\n"
        );
    }
}
