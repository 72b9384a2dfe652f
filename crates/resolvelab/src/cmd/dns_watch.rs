//! `resolvelab dns watch` — the names' answers over time, as evidence for `diagnose --dns`.

use anyhow::Context;
use resolvelab_core::jsonl::JsonlWriter;
use resolvelab_dns::QueryEvent;
use resolvelab_dns::watch::{Watch, watch};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// `resolvelab dns watch`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  # what nginx's resolver answers for a backend name, every second, into a file
  resolvelab dns watch app.internal --server 127.0.0.53:53 --out dns.jsonl
  # then: which 502s went to an address the name no longer had?
  resolvelab diagnose --access access.log --error error.log --dns dns.jsonl

  # two names, 10 rounds half a second apart, JSON Lines on stdout
  resolvelab dns watch a.test.local b.test.local --server 127.0.0.1:5300 --interval 500ms --count 10

Output: JSON Lines (schema resolvelab.dns/v1, one object per answer: t_us qname qtype rcode
answers ttl changed flags latency_us, \"probe\": \"watch\") to --out FILE, else stdout. A line on
stderr for each name's first answer and every change of its answer or its flags: two-records (two A
records at once: with max_fails, a wipeout's precondition), nxdomain, nodata (no A record), servfail,
refused, timeout, aaaa (an AAAA answer becomes a peer unless the resolver has ipv6=off).

Exit status: 0 done (--count or --duration reached, or Ctrl-C), 2 error (a bad argument, a
non-loopback --server without --allow-remote, an unwritable --out).")]
pub struct WatchArgs {
    /// Names to watch.
    #[arg(required = true, value_name = "NAME")]
    names: Vec<String>,
    /// The resolver to ask (the one nginx's `resolver` names, or the system's).
    #[arg(long, value_name = "ADDR:PORT")]
    server: SocketAddr,
    /// Time between two rounds.
    #[arg(long, default_value = "1s", value_name = "DUR", value_parser = resolvelab_core::dur::parse)]
    interval: Duration,
    /// Longest wait for one answer (then it is logged as `TIMEOUT`).
    #[arg(long, default_value = "1s", value_name = "DUR", value_parser = resolvelab_core::dur::parse)]
    timeout: Duration,
    /// Write the answers here (JSON Lines) instead of stdout.
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    /// Stop after this many rounds.
    #[arg(long, value_name = "N")]
    count: Option<u64>,
    /// Stop after this long.
    #[arg(long, value_name = "DUR", value_parser = resolvelab_core::dur::parse)]
    duration: Option<Duration>,
    /// Ask for A records only.
    #[arg(long)]
    no_aaaa: bool,
    /// Allow a non-loopback --server.
    #[arg(long)]
    allow_remote: bool,
    /// A stderr line for every answer, not only changes and flags.
    #[arg(short, long)]
    verbose: bool,
}

/// Run `resolvelab dns watch`.
pub async fn run(a: WatchArgs) -> anyhow::Result<ExitCode> {
    if a.interval.is_zero() {
        anyhow::bail!("--interval must be above 0 (e.g. 1s)");
    }
    let w = Watch {
        names: a.names.clone(),
        server: a.server,
        interval: a.interval,
        timeout: a.timeout,
        aaaa: !a.no_aaaa,
        count: a.count,
        duration: a.duration,
        allow_remote: a.allow_remote,
    };
    w.check()?;
    let schema = resolvelab_core::evidence::schema::DNS;
    let out = match &a.out {
        Some(p) => JsonlWriter::create(p, schema)
            .with_context(|| format!("cannot write {}", p.display()))?,
        None => JsonlWriter::stdout(schema)?,
    };
    // The flags each name and type had last: a line when they change, not on every answer.
    let mut last_flags: std::collections::HashMap<(String, String), Vec<String>> =
        std::collections::HashMap::new();
    let mut failed: Option<std::io::Error> = None;
    let watching = watch(&w, |o| {
        if let Err(e) = out.write(o) {
            failed.get_or_insert(e);
        }
        let prev = last_flags.insert((o.qname.clone(), o.qtype.clone()), o.flags.clone());
        let first = prev.is_none();
        if a.verbose || first || o.changed || prev.is_some_and(|p| p != o.flags) {
            eprintln!("{}", live_line(o, first));
        }
    });
    let summary = tokio::select! {
        s = watching => s?,
        _ = tokio::signal::ctrl_c() => {
            eprintln!("dns watch: interrupted");
            return Ok(ExitCode::SUCCESS);
        }
    };
    if let Some(e) = failed {
        return Err(e).context("cannot write the answers");
    }
    let mut flags: Vec<_> = summary.flags.iter().collect();
    flags.sort();
    eprintln!(
        "dns watch: {} queries, {} changes{}",
        summary.queries,
        summary.changes,
        flags
            .iter()
            .map(|(f, n)| format!(", {n} {f}"))
            .collect::<String>()
    );
    Ok(ExitCode::SUCCESS)
}

/// `HH:MM:SS.mmm NAME TYPE RCODE answers ttl=N [changed] [flags]`.
fn live_line(o: &QueryEvent, first: bool) -> String {
    let t = resolvelab_core::time::clock_ms(o.t_us);
    let answers = if o.answers.is_empty() {
        "-".to_string()
    } else {
        o.answers
            .iter()
            .map(|a| a.to_string())
            .collect::<Vec<_>>()
            .join(",")
    };
    let mut line = format!(
        "{t} {} {} {} {answers} ttl={}",
        o.qname, o.qtype, o.rcode, o.ttl
    );
    if o.changed {
        line.push_str("  CHANGED");
    } else if first {
        line.push_str("  (first answer)");
    }
    for f in &o.flags {
        line.push_str(&format!("  [{f}]"));
    }
    line
}
