//! The rules: one file each (gixy's plugin shape), holding the rule's metadata (`RULE`: id,
//! severity, title, explanation, fix, versions, the lab scenario that reproduces it) beside
//! the check that finds it; a finding names its rule by value, never by a string. [`check`]
//! runs every check over the configuration as [`model`] reads it; [`RULES`] lists them in
//! the order of the docs.
//!
//! A new rule is one more file here, its line in [`RULES`] and its call in [`check`].

use crate::load::Config;
use crate::parse::{Span, Word};
use crate::version::{RESOLVE_SINCE, Versions};
use crate::{LintOptions, Severity};
use model::{ServerLine, find, model, server_line, users_by_upstream, walk_all};
use std::collections::HashSet;

pub(crate) mod model;

pub mod backup_max_fails;
pub mod error_log_split;
pub mod keepalive_ineffective;
pub mod proxy_next_upstream_off;
pub mod resolve_max_fails;
pub mod resolve_no_resolver;
pub mod resolve_no_zone;
pub mod resolve_once;
pub mod resolve_single_name;
pub mod resolve_unsupported_version;
pub mod resolver_ipv6;
pub mod resolver_timeout_vs_valid;
pub mod resolver_valid_long;
pub mod retry_shim_no_method_guard;
pub mod retry_shim_recursive;
pub mod suppression_invalid;
pub mod suppression_unused;
pub mod upstream_no_keepalive;
pub mod variable_proxy_pass_no_resolver;
pub mod zone_too_small;

/// What a rule is: id, default severity, one-line title, explanation, fix, versions, scenario.
#[derive(Debug, Clone, Copy)]
pub struct Rule {
    /// Stable id (`resolve-single-name`).
    pub id: &'static str,
    /// Default severity (a finding may be raised or lowered with a reason in its message).
    pub severity: Severity,
    /// One line.
    pub title: &'static str,
    /// Why it matters, from the lab's measurements.
    pub explain: &'static str,
    /// The general fix.
    pub fix: &'static str,
    /// The nginx versions the rule applies to.
    pub versions: Versions,
    /// The scenario that reproduces it: `resolvelab run <scenario>`.
    pub scenario: Option<&'static str>,
}

impl Rule {
    /// `resolvelab run <scenario>`, if the rule has a scenario.
    pub fn reproduce(&self) -> Option<String> {
        self.scenario.map(|s| format!("resolvelab run {s}"))
    }
}

const ALL: Versions = Versions::All;
const RESOLVE: Versions = Versions::AtLeast(RESOLVE_SINCE);

/// Every rule, in the order of the docs.
pub static RULES: &[Rule] = &[
    resolve_single_name::RULE,
    resolve_max_fails::RULE,
    resolver_valid_long::RULE,
    resolver_ipv6::RULE,
    backup_max_fails::RULE,
    proxy_next_upstream_off::RULE,
    retry_shim_no_method_guard::RULE,
    retry_shim_recursive::RULE,
    zone_too_small::RULE,
    resolve_no_zone::RULE,
    error_log_split::RULE,
    upstream_no_keepalive::RULE,
    keepalive_ineffective::RULE,
    resolve_unsupported_version::RULE,
    resolver_timeout_vs_valid::RULE,
    resolve_no_resolver::RULE,
    resolve_once::RULE,
    variable_proxy_pass_no_resolver::RULE,
    suppression_invalid::RULE,
    suppression_unused::RULE,
];

/// The rule with this id.
pub fn rule(id: &str) -> Option<&'static Rule> {
    RULES.iter().find(|r| r.id == id)
}

/// A finding before file names are attached.
#[derive(Debug, Clone)]
pub(crate) struct Hit {
    pub rule: &'static Rule,
    pub severity: Severity,
    pub file: usize,
    pub span: Span,
    pub message: String,
    pub fix: String,
}

/// A finding of `rule` at `at` in file `file`, with the rule's severity and fix.
fn hit(rule: &'static Rule, at: &Word, file: usize, message: String) -> Hit {
    Hit {
        rule,
        severity: rule.severity,
        file,
        span: at.span,
        message,
        fix: rule.fix.to_string(),
    }
}

/// nginx's size and time values (one parser for the linter and the model).
pub use resolvelab_core::spec::nginx::{size as parse_size, time_ms as parse_time_ms};

/// Runs every check. `version` is the nginx version the configuration is for (None: unknown).
pub(crate) fn check(cfg: &Config, opts: &LintOptions) -> Vec<Hit> {
    let m = model(cfg);
    let mut hits = Vec::new();
    let version = opts.nginx_version;
    let ctx_dirs = |ctx: &str| {
        let block = if ctx == "http" { m.http } else { m.stream };
        block.map(|b| b.children()).unwrap_or(&[])
    };
    // The context's resolver, found once: looked up per upstream it made the lint quadratic.
    let ctx_resolvers = |ctx: &str| {
        let d = ctx_dirs(ctx);
        (find(d, "resolver"), find(d, "resolver_timeout"))
    };
    let (http_res, stream_res) = (ctx_resolvers("http"), ctx_resolvers("stream"));
    let mut seen_resolver: HashSet<(usize, u32, u32, &str)> = HashSet::new();
    let users = users_by_upstream(&m);

    zone_too_small::check(&m, opts, &mut hits);
    for &(up, ctx) in &m.upstreams {
        let uname = up.arg(0).unwrap_or("?");
        let dirs = up.children();
        let lines: Vec<ServerLine> = dirs
            .iter()
            .filter(|d| d.name.value == "server")
            .filter_map(server_line)
            .collect();
        let resolve_lines: Vec<&ServerLine> = lines
            .iter()
            .filter(|s| s.resolve() && s.name.is_some())
            .collect();

        // The lab's evidence (`resolvelab run backup`) is about upstreams that resolve at run
        // time; a static upstream with a backup is the textbook setup, not that hazard.
        if !resolve_lines.is_empty() {
            backup_max_fails::check(uname, &lines, &mut hits);
        }
        if ctx == "http" {
            upstream_no_keepalive::check(up, uname, &users, opts, &mut hits);
            keepalive_ineffective::check(up, uname, &users, opts, &mut hits);
        }

        let too_old = version.filter(|v| *v < RESOLVE_SINCE);
        if let Some(v) = too_old {
            resolve_unsupported_version::check(dirs, &resolve_lines, uname, v, &mut hits);
        }
        if resolve_lines.is_empty() || too_old.is_some() {
            continue;
        }
        resolve_no_zone::check(up, uname, &mut hits);
        let (ctx_resolver, ctx_timeout) = if ctx == "http" { http_res } else { stream_res };
        let resolver = find(dirs, "resolver").or(ctx_resolver);
        let timeout = find(dirs, "resolver_timeout").or(ctx_timeout);
        match resolver {
            None => hits.push(resolve_no_resolver::check(
                cfg,
                &m,
                ctx,
                uname,
                resolve_lines[0],
            )),
            Some(r) => {
                let key = (r.file, r.name.span.line, r.name.span.col, "");
                if seen_resolver.insert(key) {
                    resolver_ipv6::check(r, &mut hits);
                    resolver_valid_long::check(r, &mut hits);
                    resolver_timeout_vs_valid::check(r, timeout, &mut hits);
                }
            }
        }
        resolve_single_name::check(uname, &lines, &resolve_lines, &mut hits);
        resolve_max_fails::check(uname, &lines, &resolve_lines, &mut hits);
    }

    retry_shim_no_method_guard::check(&m, &mut hits);
    retry_shim_recursive::check(&m, &mut hits);
    resolve_once::check(cfg, &m, &mut hits);
    variable_proxy_pass_no_resolver::check(cfg, &m, &mut hits);
    // Only where a name is resolved at run time is there a resolver line to lose.
    let facts = crate::facts::runtime_facts(cfg, "");
    if facts.variable_pass {
        // A resolver that serves per-request resolution (a variable `*_pass`): a long `valid`
        // keeps a bad answer as long (the other resolver rules are about `resolve` upstreams).
        for r in walk_all(&cfg.root)
            .into_iter()
            .filter(|d| d.name.value == "resolver")
        {
            if seen_resolver.insert((r.file, r.name.span.line, r.name.span.col, "")) {
                resolver_valid_long::check(r, &mut hits);
            }
        }
    }
    if facts.resolve || facts.variable_pass {
        error_log_split::check(cfg, &m, &mut hits);
    }
    proxy_next_upstream_off::check(cfg, &mut hits);
    hits.retain(|h| h.rule.versions.contains(version));
    hits
}

/// Rules proven on real configurations (`tests/lint-corpus/real/`) whose lab scenario does not
/// exist yet (none today: every rule but the suppression checks has one).
pub const NO_SCENARIO_YET: &[&str] = &[];

/// Does the configuration resolve some backend name only at start (a `resolve-once` finding)?
pub(crate) fn resolves_once(cfg: &Config) -> bool {
    let mut hits = Vec::new();
    resolve_once::check(cfg, &model(cfg), &mut hits);
    !hits.is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_rule_id_is_unique_and_has_a_scenario_or_is_about_suppressions() {
        // The scenario ids of the lab's library, read from its files (the first `name = ` of
        // each), so a renamed or deleted scenario fails here.
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios");
        let scenarios: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .flatten()
            .filter(|e| e.path().extension().is_some_and(|x| x == "toml"))
            .map(|e| {
                let text = std::fs::read_to_string(e.path()).unwrap();
                let line = text.lines().find(|l| l.starts_with("name = ")).unwrap();
                line["name = ".len()..].trim_matches('"').to_string()
            })
            .collect();
        assert!(
            scenarios.len() >= 16,
            "scenario library not found: {scenarios:?}"
        );
        let mut ids = HashSet::new();
        for r in RULES {
            assert!(ids.insert(r.id), "{} twice", r.id);
            match r.scenario {
                Some(s) => assert!(
                    scenarios.iter().any(|x| x == s),
                    "{}: unknown scenario {s}",
                    r.id
                ),
                None => assert!(
                    r.id.starts_with("suppression-") || NO_SCENARIO_YET.contains(&r.id),
                    "{} has no scenario",
                    r.id
                ),
            }
        }
    }
}
