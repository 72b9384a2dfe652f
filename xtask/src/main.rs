//! The maintainers' tools that are not the product: generators of synthetic logs and fixtures
//! for the benchmarks and tests, and the small servers and probes the benchmark scripts drive.
//! Run through the `cargo xtask` alias (`.cargo/config.toml`), never shipped with `resolvelab`
//! (this crate is a workspace member, not a default member: `cargo run` still builds one binary).
//!
//! ```text
//! cargo xtask make-fixtures tests/fixtures/diagnose/synthetic
//! cargo xtask gen-preset-log main /tmp/b/access.log 10000000 0.3 300
//! cargo xtask dns-serve 127.0.0.53:5353 app.test.local=static:127.0.0.20
//! ```

// The binary links only what it uses (docs/ARCHITECTURE.md, "Lints").
#![deny(unused_crate_dependencies)]

mod bench_pipeline;
mod dns_serve;
mod gen_error_log;
mod gen_lab_log;
mod gen_preset_log;
mod load_max;
mod make_fixtures;
mod provisioned;
mod rate_probe;

use std::process::ExitCode;

/// The tools, with what each is for (the first line of its module's documentation).
const TOOLS: &[(&str, &str)] = &[
    (
        "make-fixtures",
        "write the synthetic checker fixtures (tests/fixtures/diagnose/synthetic)",
    ),
    (
        "gen-preset-log",
        "a seeded access log in a preset format, with its error log (benchmarks)",
    ),
    (
        "gen-lab-log",
        "a seeded access log in the lab's format (benchmarks)",
    ),
    (
        "gen-error-log",
        "an error log matching an access log (benchmarks)",
    ),
    (
        "bench-pipeline",
        "time parse → diagnose → report on one log",
    ),
    (
        "dns-serve",
        "the DNS authority alone, for the DNS benchmark",
    ),
    (
        "load-max",
        "the closed-loop load alone, with an optional allocation count",
    ),
    ("rate-probe", "an open-loop rate-accuracy probe"),
    (
        "provisioned",
        "the path of a pinned monitoring binary (mtail, prometheus, promtool)",
    ),
];

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(tool) = args.first().cloned() else {
        usage();
        return ExitCode::from(2);
    };
    let result: anyhow::Result<()> = match tool.as_str() {
        "make-fixtures" => {
            make_fixtures::main(args);
            Ok(())
        }
        "gen-preset-log" => gen_preset_log::main(args),
        "gen-lab-log" => gen_lab_log::main(args).map_err(Into::into),
        "gen-error-log" => gen_error_log::main(args).map_err(Into::into),
        "bench-pipeline" => bench_pipeline::main(args),
        "dns-serve" => dns_serve::main(args),
        "load-max" => load_max::main(args),
        "rate-probe" => rate_probe::main(args),
        "provisioned" => provisioned::main(args),
        "-h" | "--help" | "help" => {
            usage();
            return ExitCode::SUCCESS;
        }
        other => {
            eprintln!("xtask: unknown tool `{other}`");
            usage();
            return ExitCode::from(2);
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask {tool}: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn usage() {
    eprintln!("usage: cargo xtask TOOL [ARGS…]\n\ntools:");
    for (name, what) in TOOLS {
        eprintln!("  {name:<15} {what}");
    }
}
