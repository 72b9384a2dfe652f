//! `resolvelab lint`: flag nginx configurations the lab proves dangerous.

use crate::Ctx;
use anyhow::Context as _;
use resolvelab_lint::{LintOptions, RULES, Report, Severity, Version};
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Output format.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum Format {
    /// Compiler-style text with carets.
    Text,
    /// JSON, `schema: resolvelab_core::evidence::schema::LINT`.
    Json,
    /// SARIF 2.1.0 (code-scanning tools).
    Sarif,
}

/// Arguments of `resolvelab lint`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Exit status: 0 clean, 1 findings at or above --fail-on, 2 error (unreadable or malformed input).

Suppress a deliberate finding with a reason, on its line or the line above (above a block
covers the block):
  # resolvelab: ignore resolver-valid-long fewer swaps are worth it here
  resolver 10.0.0.53 valid=30s ipv6=off;

Examples:
  resolvelab lint /etc/nginx/nginx.conf
  nginx -T 2>&1 | resolvelab lint -
  resolvelab lint --nginx-version 1.26.2 nginx.conf
  resolvelab lint --format sarif nginx.conf > lint.sarif
  resolvelab lint --format json --fail-on error nginx.conf
  resolvelab lint --rules"
)]
pub struct Args {
    /// Configuration to lint: the main nginx.conf (includes are followed) or saved `nginx -T`
    /// output; `-` reads stdin.
    #[arg(value_name = "FILE", required_unless_present = "rules")]
    files: Vec<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value = "text")]
    format: Format,
    /// The nginx version the configuration is for (default: `nginx -V` of --nginx, of `nginx` on
    /// PATH, or of the lab's existing build; otherwise a current version >= 1.27.3 is assumed).
    #[arg(long, value_name = "X.Y.Z")]
    nginx_version: Option<Version>,
    /// Directory relative `include`s resolve against (default: the directory of FILE).
    #[arg(long, value_name = "DIR")]
    prefix: Option<PathBuf>,
    /// Exit with 1 when a finding is at least this severe (error, warning, info).
    #[arg(long, default_value = "warning", value_name = "SEVERITY")]
    fail_on: Severity,
    /// Expected requests per second per upstream: >= 100 makes a missing upstream keepalive a
    /// warning, below 100 silences it.
    #[arg(long, value_name = "N")]
    rps: Option<u32>,
    /// Addresses one `resolve` name may answer with, for the zone-size estimate (1–4096).
    #[arg(long, default_value_t = 8, value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..=4096))]
    max_addresses: u32,
    /// The build's configure flags, for the zone-size estimate: compat (`--with-compat`, as
    /// nginx.org's and Debian's packages and the official image), ssl
    /// (`--with-http_ssl_module` without it) or plain (neither). Default: `nginx -V` of the
    /// binary the version is read from; otherwise compat.
    #[arg(long, value_name = "compat|ssl|plain")]
    nginx_build: Option<resolvelab_lint::BuildFlags>,
    /// The context of FILE's top level: auto (a whole nginx.conf, or a conf.d fragment of
    /// top-level upstream/server blocks linted as http{}), main, http or stream.
    #[arg(long, default_value = "auto", value_name = "auto|main|http|stream")]
    context: resolvelab_lint::Context,
    /// Look up absolute `include` paths under DIR (a copy of the target machine's /etc/nginx…).
    #[arg(long, value_name = "DIR")]
    sysroot: Option<PathBuf>,
    /// List every rule (id, severity, nginx versions, scenario) and exit.
    #[arg(long)]
    rules: bool,
}

fn on_path(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(name))
            .find(|p| p.is_file())
    })
}

/// What the configuration's nginx is: its version and build, and where they were read.
struct Detected {
    version: Option<Version>,
    build: Option<resolvelab_lint::BuildFlags>,
    source: Option<String>,
}

fn detect_version(args: &Args, ctx: &Ctx) -> anyhow::Result<Detected> {
    let read = |bin: &Path, how: String| -> anyhow::Result<Detected> {
        let (v, build) = resolvelab_lint::version::detect_build(bin)?;
        let build = args.nginx_build.or(build);
        let source = match build {
            Some(b) => format!("nginx {v} ({b} build) {how}"),
            None => format!("nginx {v} {how}"),
        };
        Ok(Detected {
            version: Some(v),
            build,
            source: Some(source),
        })
    };
    if args.nginx_version.is_some() {
        return Ok(Detected {
            version: args.nginx_version,
            build: args.nginx_build,
            source: None,
        });
    }
    if let Some(bin) = &ctx.nginx {
        return read(bin, format!("from `{} -V`", bin.display()));
    }
    // Linting on the server itself: its nginx is the one the configuration is for. A failure here
    // is not an error — the user did not ask for this binary.
    if let Some(bin) = on_path("nginx")
        && let Ok(d) = read(&bin, format!("from `{} -V`", bin.display()))
    {
        return Ok(d);
    }
    // The lab's own build, only if it already exists: linting never builds nginx.
    if let Some(bin) = resolvelab_nginx::provision::cached_binary()
        && let Ok(d) = read(
            &bin,
            format!(
                "assumed: the lab's build at {} (pass --nginx-version and --nginx-build for another)",
                bin.display()
            ),
        )
    {
        return Ok(d);
    }
    Ok(Detected {
        version: None,
        build: args.nginx_build,
        source: None,
    })
}

fn list_rules() -> String {
    let w = RULES.iter().map(|r| r.id.len()).max().unwrap_or(4);
    let mut out = format!("{:<w$} SEVERITY  NGINX       REPRODUCE\n", "RULE");
    for r in RULES {
        out.push_str(&format!(
            "{:<w$} {:<9} {:<11} {}\n    {}\n",
            r.id,
            r.severity.as_str(),
            r.versions.to_string(),
            r.reproduce().unwrap_or_else(|| "-".into()),
            r.title
        ));
    }
    out
}

fn lint_one(path: &Path, opts: &LintOptions) -> anyhow::Result<Report> {
    if path == Path::new("-") {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .context("cannot read stdin")?;
        return Ok(resolvelab_lint::lint_text("<stdin>", text, opts)?);
    }
    Ok(resolvelab_lint::lint_paths(&[path.to_path_buf()], opts)?)
}

/// Run `resolvelab lint`.
pub fn run(args: Args, ctx: &Ctx) -> anyhow::Result<ExitCode> {
    if args.rules {
        print!("{}", list_rules());
        return Ok(ExitCode::SUCCESS);
    }
    let Detected {
        version: nginx_version,
        build: nginx_build,
        source,
    } = detect_version(&args, ctx)?;
    let opts = LintOptions {
        nginx_version,
        nginx_build,
        prefix: args.prefix.clone(),
        rps: args.rps,
        max_addresses_per_name: args.max_addresses,
        context: args.context,
        sysroot: args.sysroot.clone(),
    };
    let mut report: Option<Report> = None;
    for f in &args.files {
        let r = lint_one(f, &opts)?;
        match &mut report {
            None => report = Some(r),
            Some(all) => all.merge(r),
        }
    }
    let Some(mut report) = report else {
        anyhow::bail!("no configuration given: pass a FILE or `-` for stdin");
    };
    if let Some(s) = source {
        report.notes.push(s);
    }
    match args.format {
        Format::Text => print!("{}", resolvelab_lint::render_text(&report)),
        Format::Json => println!("{}", resolvelab_lint::render_json(&report)),
        Format::Sarif => println!("{}", resolvelab_lint::render_sarif(&report)),
    }
    Ok(ExitCode::from(report.exit_code(args.fail_on)))
}
