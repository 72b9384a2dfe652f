//! `error-log-split`: requests and the resolver logging to different files.

use super::model::Model;
use super::{ALL, Hit, Rule, hit};
use crate::Severity;
use crate::load::Config;
use crate::parse::Directive;
use std::collections::BTreeSet;

/// What the rule is.
pub const RULE: Rule = Rule {
    id: "error-log-split",
    severity: Severity::Warning,
    title: "error_log split across files where names resolve at run time (diagnosis hazard)",
    explain: "`could not be resolved` lines come from the resolver timer and go to the main error_log, while a request's `no live upstreams` and first-try errors go to the error_log of its http/server/location; reading one file makes a DNS outage look like a lone race.",
    fix: "log to one file, or always grep every file from `nginx -T | grep error_log` (resolvelab diagnose accepts several --error files)",
    versions: ALL,
    scenario: Some("nxdomain"),
};

fn log_target(d: &Directive) -> Option<&str> {
    let t = d.arg(0)?;
    if t == "stderr" || t.starts_with("syslog:") || t.starts_with("memory:") || t == "/dev/null" {
        return None;
    }
    Some(t)
}

/// Each error_log below the main one that names another file.
pub(super) fn check(cfg: &Config, m: &Model, hits: &mut Vec<Hit>) {
    let main: BTreeSet<&str> = m
        .error_logs
        .iter()
        .filter(|(_, top)| *top)
        .filter_map(|(d, _)| d.arg(0))
        .collect();
    let main_desc = if main.is_empty() {
        "the compiled-in default (logs/error.log)".to_string()
    } else {
        main.iter()
            .map(|t| format!("`{t}`"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    for (d, top) in &m.error_logs {
        if *top {
            continue;
        }
        let Some(t) = log_target(d) else { continue };
        if main.contains(t) {
            continue;
        }
        hits.push(hit(
            &RULE,
            &d.args[0],
            d.file,
            format!(
                "requests here log to `{t}`, but the resolver's `could not be resolved` lines go to the main error_log ({main_desc}): a DNS outage shows up as lone `no live upstreams` lines in this file (see {}:{})",
                cfg.files[d.file].name, d.name.span.line
            ),
        ));
    }
}
