//! Lints nginx configurations for the DNS/upstream failures the resolvelab lab proves.
//!
//! Gixy-style linters flag a missing resolver; this one knows that one `resolve` line behind a
//! GSLB name produces generation-race 502s, that a second `resolve` line silently arms
//! `max_fails=1`, and that `valid=30s` makes an NXDOMAIN outage five times longer — and every
//! finding names the scenario that reproduces it (`resolvelab run <scenario>`).
//!
//! The input is a file tree (with `include`, globs relative to the prefix) or the output of
//! `nginx -T` (recognised by its `# configuration file …:` markers). Output is compiler-style
//! text, JSON (`resolvelab.lint/v1`) or SARIF 2.1.0.
//!
//! ```
//! use resolvelab_lint::{lint_text, render_text, LintOptions};
//! let conf = "http {\n  resolver 10.0.0.53 valid=5s;\n  upstream be {\n    zone be 128k;\n    server api.example.com:443 resolve;\n  }\n}\n";
//! let report = lint_text(resolvelab_core::evidence::file::NGINX_CONF, conf.to_string(), &LintOptions::default()).unwrap();
//! let ids: Vec<&str> = report.findings.iter().map(|f| f.rule.as_str()).collect();
//! assert!(ids.contains(&"resolve-single-name"));
//! assert!(ids.contains(&"resolver-ipv6"));
//! assert!(render_text(&report).contains("reproduce: resolvelab run generation-race"));
//! assert_eq!(report.exit_code(resolvelab_lint::Severity::Warning), 1);
//! ```

// A library says what it has to say through `resolvelab_core::progress`, never on its own
// stdout/stderr, and links only what it uses (docs/ARCHITECTURE.md, "Lints").
#![cfg_attr(not(test), deny(clippy::print_stdout, clippy::print_stderr))]
#![cfg_attr(not(test), deny(unused_crate_dependencies))]

pub mod facts;
pub mod load;
pub mod parse;
mod render;
pub mod rules;
mod suppress;
pub mod version;

pub use facts::{LogFormats, RuntimeFacts, log_formats, runtime_facts};

pub use load::{Config, LoadError, SourceFile};
pub use render::{render_json, render_sarif, render_text, sarif_value};
pub use rules::{RULES, Rule};
pub use version::{BuildFlags, Version, Versions};

use serde::Serialize;
use std::path::{Path, PathBuf};

/// The JSON output's schema id.
pub const SCHEMA: &str = resolvelab_core::evidence::schema::LINT;

/// How bad a finding is. Ordered: `Info < Warning < Error`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// A trade-off or a hint; never fails CI by default.
    Info,
    /// A configuration the lab shows failing under realistic conditions.
    Warning,
    /// nginx refuses the configuration, or the failure is certain.
    Error,
}

impl Severity {
    /// `error`, `warning` or `info`.
    pub fn as_str(&self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Warning => "warning",
            Severity::Error => "error",
        }
    }
}

impl std::str::FromStr for Severity {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "info" => Ok(Severity::Info),
            "warning" => Ok(Severity::Warning),
            "error" => Ok(Severity::Error),
            _ => Err(format!(
                "\"{s}\" is not a severity: use error, warning or info"
            )),
        }
    }
}

/// What the linter should assume about the deployment.
#[derive(Debug, Clone)]
pub struct LintOptions {
    /// The nginx version the configuration is for; `None` assumes a current one (>= 1.27.3).
    pub nginx_version: Option<Version>,
    /// The build's configure flags (`nginx -V`), for the zone-size estimate; `None` assumes a
    /// `--with-compat` build, as nginx.org's and Debian's packages are.
    pub nginx_build: Option<BuildFlags>,
    /// Directory relative `include`s resolve against (default: the main file's directory).
    pub prefix: Option<PathBuf>,
    /// Expected request rate per upstream: >= 100 makes a missing `keepalive` a warning,
    /// below 100 silences it; `None` reports it as info.
    pub rps: Option<u32>,
    /// How many addresses one `resolve` name may answer with, for the zone-size estimate.
    pub max_addresses_per_name: u32,
    /// Which context the top level of the input is (a whole nginx.conf, or a fragment).
    pub context: Context,
    /// Where absolute `include` paths are looked up (a copy of the target machine's files).
    pub sysroot: Option<PathBuf>,
}

/// The context of the input's top level.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Context {
    /// A whole nginx.conf when it has `http`/`stream`/`events`; else a fragment whose
    /// directives say which (`upstream`/`server`/`map` → http, or stream for servers that proxy
    /// to `host:port` without a location).
    #[default]
    Auto,
    /// The main context (a whole nginx.conf).
    Main,
    /// The http{} context: a `conf.d/*.conf` fragment.
    Http,
    /// The stream{} context.
    Stream,
}

impl std::str::FromStr for Context {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "auto" => Ok(Context::Auto),
            "main" => Ok(Context::Main),
            "http" => Ok(Context::Http),
            "stream" => Ok(Context::Stream),
            _ => Err(format!(
                "\"{s}\" is not a context: use auto, main, http or stream"
            )),
        }
    }
}

/// The context a top level is in, by what it holds.
fn detect_context(root: &[parse::Directive]) -> Context {
    let has = |n: &str| root.iter().any(|d| d.name.value == n);
    if ["http", "stream", "events", "mail"].iter().any(|n| has(n)) {
        return Context::Main;
    }
    let servers: Vec<&parse::Directive> = root
        .iter()
        .filter(|d| d.name.value == "server" && d.block.is_some())
        .collect();
    let stream_server = |s: &&parse::Directive| {
        !s.children().iter().any(|c| c.name.value == "location")
            && s.children().iter().any(|c| {
                c.name.value == "proxy_pass" && c.arg(0).is_some_and(|a| !a.contains("://"))
            })
    };
    if !servers.is_empty() && servers.iter().all(stream_server) {
        return Context::Stream;
    }
    if has("upstream") || has("map") || !servers.is_empty() || has("log_format") || has("location")
    {
        return Context::Http;
    }
    Context::Main
}

/// Wrap a fragment's top level in the block of its context, so the rules see it where nginx
/// would include it; the note says so.
/// The configuration read in `ctx`: a fragment of top-level `upstream`/`server` blocks wrapped in
/// the `http {}` (or `stream {}`) it is included into, as the rules read it.
pub fn in_context(mut cfg: Config, ctx: Context) -> Config {
    let ctx = match ctx {
        Context::Auto => detect_context(&cfg.root),
        c => c,
    };
    let name = match ctx {
        Context::Http => "http",
        Context::Stream => "stream",
        Context::Main | Context::Auto => return cfg,
    };
    let Some(first) = cfg.root.first() else {
        return cfg;
    };
    let word = parse::Word {
        value: name.to_string(),
        span: first.name.span,
    };
    let end_line = cfg.root.last().map_or(first.end_line, |d| d.end_line);
    let file = first.file;
    let mut root = std::mem::take(&mut cfg.root);
    if ctx == Context::Http {
        root = locations_in_a_server(root, &mut cfg.notes);
    }
    cfg.root = vec![parse::Directive {
        name: word,
        args: Vec::new(),
        file,
        end_line,
        block: Some(root),
    }];
    cfg.fragment = true;
    cfg.notes.push(format!(
        "{}: a fragment (top-level `upstream`/`server`/…): linted as the {name}{{}} context it is included into (--context main to lint it as a whole nginx.conf)",
        cfg.files.first().map(|f| f.name.as_str()).unwrap_or("input")
    ));
    cfg
}

/// An excerpt that pasted `location` blocks beside its upstreams has left out the server{}
/// around them (nginx takes `location` only in server{} and location{}): they go into one
/// implicit server{}, so the rules see each location where nginx would.
fn locations_in_a_server(
    root: Vec<parse::Directive>,
    notes: &mut Vec<String>,
) -> Vec<parse::Directive> {
    let (locations, mut rest): (Vec<_>, Vec<_>) = root
        .into_iter()
        .partition(|d| d.name.value == "location" && d.block.is_some());
    let Some(first) = locations.first() else {
        return rest;
    };
    notes.push(format!(
        "line {}: `location` outside any server{{}}: linted inside an implicit server{{}}",
        first.name.span.line
    ));
    rest.push(parse::Directive {
        name: parse::Word {
            value: "server".to_string(),
            span: first.name.span,
        },
        args: Vec::new(),
        file: first.file,
        end_line: locations.last().map_or(first.end_line, |d| d.end_line),
        block: Some(locations),
    });
    rest
}

impl Default for LintOptions {
    fn default() -> Self {
        LintOptions {
            nginx_version: None,
            nginx_build: None,
            prefix: None,
            rps: None,
            context: Context::Auto,
            sysroot: None,
            max_addresses_per_name: 8,
        }
    }
}

/// One finding, as serialized in `findings[]` of the JSON output.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Finding {
    /// Rule id (`resolve-single-name`).
    pub rule: String,
    /// Severity of this finding.
    pub severity: Severity,
    /// File as named in the input (for `nginx -T`, the path from its marker).
    pub file: String,
    /// 1-based line.
    pub line: u32,
    /// 1-based column.
    pub column: u32,
    /// Width of the flagged word, for carets.
    #[serde(skip)]
    pub len: u32,
    /// What is wrong here and why.
    pub message: String,
    /// How to fix it.
    pub fix: String,
    /// `resolvelab run <scenario>` that reproduces the failure, if any.
    pub reproduce: Option<String>,
    /// `resolvelab verify … --upstream NAME` that plays the failure on this configuration, when
    /// the finding is on an upstream (its block, or a `proxy_pass` to it).
    pub verify: Option<String>,
    /// nginx versions the rule applies to (`>= 1.27.3`, `all`).
    pub nginx_versions: String,
}

/// A finding silenced by `# resolvelab: ignore RULE reason`.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Suppressed {
    /// The finding.
    #[serde(flatten)]
    pub finding: Finding,
    /// The reason written in the comment.
    pub reason: String,
}

/// The result of linting one configuration.
#[derive(Debug, Clone)]
pub struct Report {
    /// Findings, ordered by file, line, column.
    pub findings: Vec<Finding>,
    /// Findings silenced by a suppression with its reason.
    pub suppressed: Vec<Suppressed>,
    /// Every file read (for carets).
    pub files: Vec<SourceFile>,
    /// Remarks about the input (unmatched include globs, assumed version).
    pub notes: Vec<String>,
    /// The nginx version assumed.
    pub nginx_version: Option<Version>,
}

impl Report {
    /// 1 when a finding is at least `fail_on`, else 0 (2 is for errors before a report exists).
    pub fn exit_code(&self, fail_on: Severity) -> u8 {
        u8::from(self.findings.iter().any(|f| f.severity >= fail_on))
    }

    /// Number of findings of each severity: (errors, warnings, infos).
    pub fn counts(&self) -> (usize, usize, usize) {
        let n = |s| self.findings.iter().filter(|f| f.severity == s).count();
        (n(Severity::Error), n(Severity::Warning), n(Severity::Info))
    }

    /// Appends another report (several inputs linted in one run).
    pub fn merge(&mut self, other: Report) {
        self.findings.extend(other.findings);
        self.suppressed.extend(other.suppressed);
        self.files.extend(other.files);
        for n in other.notes {
            if !self.notes.contains(&n) {
                self.notes.push(n);
            }
        }
    }
}

/// The http upstream a line belongs to: inside its block, or a `proxy_pass` naming it.
fn upstream_at(cfg: &Config, file: usize, line: u32) -> Option<String> {
    let http = cfg.root.iter().find(|d| d.name.value == "http")?;
    let upstreams: Vec<&parse::Directive> = http
        .children()
        .iter()
        .filter(|d| d.name.value == "upstream")
        .collect();
    if let Some(u) = upstreams
        .iter()
        .find(|u| u.file == file && (u.name.span.line..=u.end_line).contains(&line))
    {
        return u.arg(0).map(str::to_string);
    }
    let mut stack: Vec<&parse::Directive> = http.children().iter().collect();
    while let Some(d) = stack.pop() {
        if d.name.value == "proxy_pass"
            && d.file == file
            && d.name.span.line == line
            && let Some(t) = rules::model::proxy_target(d)
        {
            return upstreams
                .iter()
                .find_map(|u| u.arg(0).filter(|n| n.eq_ignore_ascii_case(t)))
                .map(str::to_string);
        }
        stack.extend(d.children());
    }
    None
}

/// Lints a loaded configuration.
pub fn lint_config(cfg: Config, opts: &LintOptions) -> Report {
    let cfg = in_context(cfg, opts.context);
    let hits = rules::check(&cfg, opts);
    let (mut sups, mut bad) = suppress::collect(&cfg);
    let (mut kept, silenced) = suppress::apply(hits, &mut sups);
    kept.append(&mut bad);
    let to_finding = |h: &rules::Hit| Finding {
        rule: h.rule.id.to_string(),
        severity: h.severity,
        file: cfg.files[h.file].name.clone(),
        line: h.span.line,
        column: h.span.col,
        len: h.span.len.max(1),
        message: h.message.clone(),
        fix: h.fix.clone(),
        reproduce: h.rule.reproduce(),
        verify: upstream_at(&cfg, h.file, h.span.line).map(|u| {
            format!(
                "resolvelab verify --nginx-conf {} --upstream {u}",
                cfg.files.first().map_or("nginx.conf", |f| f.name.as_str())
            )
        }),
        nginx_versions: h.rule.versions.to_string(),
    };
    let order = |a: &rules::Hit, b: &rules::Hit| {
        (a.file, a.span.line, a.span.col, a.rule.id).cmp(&(
            b.file,
            b.span.line,
            b.span.col,
            b.rule.id,
        ))
    };
    kept.sort_by(order);
    let mut findings: Vec<Finding> = kept.iter().map(to_finding).collect();
    findings.dedup();
    let suppressed = silenced
        .iter()
        .map(|(h, reason)| Suppressed {
            finding: to_finding(h),
            reason: reason.clone(),
        })
        .collect();
    let mut notes = cfg.notes.clone();
    if opts.nginx_version.is_none() {
        notes.push(format!(
            "nginx version unknown: assuming >= {} (pass --nginx-version or --nginx)",
            version::RESOLVE_SINCE
        ));
    }
    Report {
        findings,
        suppressed,
        files: cfg.files,
        notes,
        nginx_version: opts.nginx_version,
    }
}

/// Lints configuration text (stdin, or a string): `nginx -T` output or one file named `name`.
pub fn lint_text(name: &str, text: String, opts: &LintOptions) -> Result<Report, LoadError> {
    let cfg = load::load_text(name, text, opts.prefix.as_deref())?;
    Ok(lint_config(cfg, opts))
}

/// Lints each path (a main config file or saved `nginx -T` output) and merges the reports.
/// The first unreadable or malformed input is the error (one line with file:line).
pub fn lint_paths(paths: &[PathBuf], opts: &LintOptions) -> Result<Report, LoadError> {
    let mut report = Report {
        findings: Vec::new(),
        suppressed: Vec::new(),
        files: Vec::new(),
        notes: Vec::new(),
        nginx_version: opts.nginx_version,
    };
    for p in paths {
        let cfg = load::load_path_in(
            Path::new(p),
            opts.prefix.as_deref(),
            opts.sysroot.as_deref(),
        )?;
        report.merge(lint_config(cfg, opts));
    }
    Ok(report)
}
