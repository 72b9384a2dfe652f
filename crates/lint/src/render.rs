//! Renderers: compiler-style text, JSON (`resolvelab.lint/v1`) and SARIF 2.1.0.

use crate::{Finding, RULES, Report, SCHEMA, Severity, Suppressed};
use serde::Serialize;
use serde_json::{Value, json};
use std::fmt::Write as _;

fn source_line<'a>(report: &'a Report, f: &Finding) -> Option<&'a str> {
    report
        .files
        .iter()
        .find(|s| s.name == f.file)
        .and_then(|s| s.line(f.line))
}

fn plural(n: usize, one: &str) -> String {
    if n == 1 {
        format!("{n} {one}")
    } else {
        format!("{n} {one}s")
    }
}

/// Compiler-style text: `severity[rule]: message`, `--> file:line:col`, the source line with a
/// caret under the flagged word, then the fix, the scenario and the nginx versions.
pub fn render_text(report: &Report) -> String {
    let mut out = String::new();
    for f in &report.findings {
        let _ = writeln!(out, "{}[{}]: {}", f.severity.as_str(), f.rule, f.message);
        let _ = writeln!(out, "  --> {}:{}:{}", f.file, f.line, f.column);
        if let Some(src) = source_line(report, f) {
            let num = f.line.to_string();
            let pad = " ".repeat(num.len());
            // Copy the line's own tabs so the caret lines up however the terminal renders them.
            let lead: String = src
                .chars()
                .take(f.column.saturating_sub(1) as usize)
                .map(|c| if c == '\t' { '\t' } else { ' ' })
                .collect();
            let _ = writeln!(out, " {pad} |");
            let _ = writeln!(out, " {num} | {src}");
            let _ = writeln!(out, " {pad} | {lead}{}", "^".repeat(f.len.max(1) as usize));
        }
        let _ = writeln!(out, "   = fix: {}", f.fix);
        if let Some(r) = &f.reproduce {
            let _ = writeln!(out, "   = reproduce: {r}");
        }
        if let Some(v) = &f.verify {
            let _ = writeln!(out, "   = prove it on this config: {v}");
        }
        let _ = writeln!(out, "   = nginx: {}", f.nginx_versions);
        out.push('\n');
    }
    for s in &report.suppressed {
        let _ = writeln!(
            out,
            "suppressed[{}] {}:{}: {}",
            s.finding.rule, s.finding.file, s.finding.line, s.reason
        );
    }
    for n in &report.notes {
        let _ = writeln!(out, "note: {n}");
    }
    let (e, w, i) = report.counts();
    if e + w + i == 0 {
        let _ = write!(out, "clean: no findings");
    } else {
        let _ = write!(
            out,
            "{}, {}, {}",
            plural(e, "error"),
            plural(w, "warning"),
            plural(i, "info")
        );
    }
    if !report.suppressed.is_empty() {
        let _ = write!(out, " ({} suppressed)", report.suppressed.len());
    }
    out.push('\n');
    out
}

#[derive(Serialize)]
struct JsonTool {
    name: &'static str,
    version: &'static str,
}

#[derive(Serialize)]
struct JsonSummary {
    errors: usize,
    warnings: usize,
    infos: usize,
    suppressed: usize,
}

/// Field order is the output order: `schema` first, so a reader can dispatch on it.
#[derive(Serialize)]
struct JsonReport<'a> {
    schema: &'static str,
    tool: JsonTool,
    nginx_version: Option<String>,
    summary: JsonSummary,
    findings: &'a [Finding],
    suppressed: &'a [Suppressed],
    notes: &'a [String],
}

/// The JSON report (pretty-printed): `{schema: resolvelab_core::evidence::schema::LINT, tool, nginx_version,
/// summary, findings: [{rule, severity, file, line, column, message, fix, reproduce, verify,
/// nginx_versions}], suppressed: [… + reason], notes}`.
pub fn render_json(report: &Report) -> String {
    let (errors, warnings, infos) = report.counts();
    let doc = JsonReport {
        schema: SCHEMA,
        tool: JsonTool {
            name: "resolvelab lint",
            version: env!("CARGO_PKG_VERSION"),
        },
        nginx_version: report.nginx_version.map(|v| v.to_string()),
        summary: JsonSummary {
            errors,
            warnings,
            infos,
            suppressed: report.suppressed.len(),
        },
        findings: &report.findings,
        suppressed: &report.suppressed,
        notes: &report.notes,
    };
    serde_json::to_string_pretty(&doc).expect("plain data serializes")
}

fn level(s: Severity) -> &'static str {
    match s {
        Severity::Error => "error",
        Severity::Warning => "warning",
        Severity::Info => "note",
    }
}

/// A file name as a SARIF URI reference: absolute paths become `file://` URIs; characters outside
/// the unreserved set are percent-encoded.
fn uri(name: &str) -> String {
    let mut out = String::new();
    if name.starts_with('/') {
        out.push_str("file://");
    }
    for b in name.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~/".contains(&b) {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

fn result(f: &Finding, rule_index: usize, suppression: Option<&str>) -> Value {
    let mut r = json!({
        "ruleId": f.rule,
        "ruleIndex": rule_index,
        "level": level(f.severity),
        "message": {"text": format!("{} Fix: {}", f.message, f.fix)},
        "locations": [{
            "physicalLocation": {
                "artifactLocation": {"uri": uri(&f.file)},
                "region": {
                    "startLine": f.line,
                    "startColumn": f.column,
                    "endColumn": f.column + f.len.max(1),
                }
            }
        }],
        "properties": {
            "fix": f.fix,
            "reproduce": f.reproduce,
            "verify": f.verify,
            "nginxVersions": f.nginx_versions,
        }
    });
    if let Some(reason) = suppression {
        r["suppressions"] = json!([{"kind": "inSource", "justification": reason}]);
    }
    r
}

/// SARIF 2.1.0 (pretty-printed): one run whose driver lists every rule; suppressed findings are
/// included with an `inSource` suppression carrying the reason.
pub fn render_sarif(report: &Report) -> String {
    serde_json::to_string_pretty(&sarif_value(report)).expect("plain data serializes")
}

/// The SARIF 2.1.0 log as a JSON value.
pub fn sarif_value(report: &Report) -> Value {
    let index = |id: &str| RULES.iter().position(|r| r.id == id).unwrap_or(0);
    let rules: Vec<Value> = RULES
        .iter()
        .map(|r| {
            json!({
                "id": r.id,
                "name": r.id,
                "shortDescription": {"text": r.title},
                "fullDescription": {"text": r.explain},
                "help": {"text": format!("Fix: {}{}", r.fix, r.reproduce().map(|c| format!(" Reproduce: {c}")).unwrap_or_default())},
                "defaultConfiguration": {"level": level(r.severity)},
                "properties": {
                    "nginxVersions": r.versions.to_string(),
                    "reproduce": r.reproduce(),
                }
            })
        })
        .collect();
    let mut results: Vec<Value> = report
        .findings
        .iter()
        .map(|f| result(f, index(&f.rule), None))
        .collect();
    results.extend(
        report
            .suppressed
            .iter()
            .map(|s| result(&s.finding, index(&s.finding.rule), Some(&s.reason))),
    );
    let mut artifacts: Vec<String> = report.files.iter().map(|f| f.name.clone()).collect();
    artifacts.dedup();
    json!({
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "resolvelab-lint",
                "version": env!("CARGO_PKG_VERSION"),
                "informationUri": "https://example.invalid/resolvelab/docs/lint.md",
                "rules": rules,
            }},
            "columnKind": "unicodeCodePoints",
            "artifacts": artifacts.iter().map(|a| json!({"location": {"uri": uri(a)}})).collect::<Vec<_>>(),
            "results": results,
        }]
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_are_encoded() {
        assert_eq!(uri("/etc/nginx/nginx.conf"), "file:///etc/nginx/nginx.conf");
        assert_eq!(uri("a b.conf"), "a%20b.conf");
        assert_eq!(uri("<stdin>"), "%3Cstdin%3E");
    }
}
