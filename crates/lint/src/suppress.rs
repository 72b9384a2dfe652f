//! Inline suppressions: `# resolvelab: ignore RULE[,RULE…] reason`.
//!
//! A trailing comment covers its own line; a comment on a line of its own covers the next
//! directive, including everything inside it when that directive is a block (so a comment above
//! `upstream be {` covers the whole upstream). The reason is mandatory: a suppression without one
//! suppresses nothing and is itself reported.

use crate::load::Config;
use crate::parse::{Directive, Span};
use crate::rules::{self, Hit};

/// One parsed suppression comment.
#[derive(Debug, Clone)]
pub(crate) struct Suppression {
    pub file: usize,
    pub span: Span,
    pub rules: Vec<String>,
    pub reason: String,
    /// Lines covered, inclusive.
    pub first: u32,
    pub last: u32,
    pub used: bool,
}

fn directive_ranges(dirs: &[Directive], out: &mut Vec<(usize, u32, u32)>) {
    for d in dirs {
        out.push((d.file, d.name.span.line, d.end_line));
        directive_ranges(d.children(), out);
    }
}

/// Reads every `resolvelab:` comment; malformed ones become `suppression-invalid` hits.
pub(crate) fn collect(cfg: &Config) -> (Vec<Suppression>, Vec<Hit>) {
    let mut ranges = Vec::new();
    directive_ranges(&cfg.root, &mut ranges);
    let mut out = Vec::new();
    let mut bad = Vec::new();
    for (fi, file) in cfg.files.iter().enumerate() {
        for c in &file.comments {
            let Some(rest) = c.text.trim().strip_prefix("resolvelab:") else {
                continue;
            };
            let invalid = |msg: String| {
                let rule = &rules::suppression_invalid::RULE;
                Hit {
                    rule,
                    severity: rule.severity,
                    file: fi,
                    span: c.span,
                    message: msg,
                    fix: rule.fix.to_string(),
                }
            };
            let mut words = rest.split_whitespace();
            if words.next() != Some("ignore") {
                bad.push(invalid(format!(
                    "`#{}`: the only resolvelab comment is `# resolvelab: ignore RULE reason`",
                    c.text
                )));
                continue;
            }
            let Some(list) = words.next() else {
                bad.push(invalid("`# resolvelab: ignore` names no rule".into()));
                continue;
            };
            let ids: Vec<String> = list
                .split(',')
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect();
            if let Some(unknown) = ids.iter().find(|id| rules::rule(id).is_none()) {
                bad.push(invalid(format!(
                    "`# resolvelab: ignore {unknown}`: no rule has this id (see `resolvelab lint --rules`)"
                )));
                continue;
            }
            let reason = words.collect::<Vec<_>>().join(" ");
            if reason.is_empty() {
                bad.push(invalid(format!(
                    "`# resolvelab: ignore {list}` has no reason; a suppression must say why the finding is deliberate"
                )));
                continue;
            }
            let line = c.span.line;
            let (first, last) = if c.trailing {
                (line, line)
            } else {
                ranges
                    .iter()
                    .filter(|(f, start, _)| *f == fi && *start > line)
                    .min_by_key(|(_, start, _)| *start)
                    .map(|(_, s, e)| (*s, *e))
                    .unwrap_or((line, line))
            };
            out.push(Suppression {
                file: fi,
                span: c.span,
                rules: ids,
                reason,
                first,
                last,
                used: false,
            });
        }
    }
    (out, bad)
}

/// Splits hits into (kept, suppressed with reason) and reports unused suppressions.
pub(crate) fn apply(hits: Vec<Hit>, sups: &mut [Suppression]) -> (Vec<Hit>, Vec<(Hit, String)>) {
    let mut kept = Vec::new();
    let mut suppressed = Vec::new();
    for h in hits {
        let found = sups.iter_mut().find(|s| {
            s.file == h.file
                && (s.first..=s.last).contains(&h.span.line)
                && s.rules.iter().any(|r| r == h.rule.id)
        });
        match found {
            Some(s) if !h.rule.id.starts_with("suppression-") => {
                s.used = true;
                suppressed.push((h, s.reason.clone()));
            }
            _ => kept.push(h),
        }
    }
    let rule = &rules::suppression_unused::RULE;
    for s in sups.iter().filter(|s| !s.used) {
        kept.push(Hit {
            rule,
            severity: rule.severity,
            file: s.file,
            span: s.span,
            message: format!(
                "`# resolvelab: ignore {}` suppresses nothing on lines {}-{}",
                s.rules.join(","),
                s.first,
                s.last
            ),
            fix: rule.fix.to_string(),
        });
    }
    (kept, suppressed)
}
