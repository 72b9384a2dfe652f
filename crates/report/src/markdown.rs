//! Markdown: totals, incidents table, per-class explanation and fix, signatures, parse report.

use crate::ts;
use resolvelab_diagnose::{Diagnosis, Verdict};
use std::fmt::Write;

fn esc(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

pub(crate) fn diagnosis(d: &Diagnosis, v: Option<&Verdict>) -> String {
    let mut o = String::new();
    match v {
        Some(v) => verdict(&mut o, v),
        None => o.push_str("# resolvelab diagnosis\n\n"),
    }
    evidence(&mut o, d);
    totals(&mut o, d);
    incidents(&mut o, d);
    classes_and_signatures(&mut o, d);
    parsing(&mut o, d);
    o
}

/// A lab run's head: status, expectations, injections, the client's view.
fn verdict(o: &mut String, v: &Verdict) {
    let _ = writeln!(
        o,
        "# resolvelab verdict — {}\n\n**Status: {}** — {}\n",
        v.scenario.as_deref().unwrap_or("(unnamed run)"),
        v.status,
        v.summary
    );
    if !v.expectations.is_empty() {
        o.push_str("## Expectations\n\n| | expectation | measured |\n|---|---|---|\n");
        for e in &v.expectations {
            let _ = writeln!(
                o,
                "| {} | `{}` | {} |",
                if e.held { "✅ held" } else { "❌ not held" },
                esc(&e.text),
                esc(&e.measured)
            );
        }
        o.push('\n');
    }
    if !v.injections.is_empty() {
        o.push_str(
            "## Injections\n\n| kind | target | spec | hits | at |\n|---|---|---|---:|---|\n",
        );
        for i in &v.injections {
            let _ = writeln!(
                o,
                "| {} | {} | {} | {}{} | {} |",
                i.kind,
                esc(i.target.as_deref().unwrap_or("")),
                esc(i.spec.as_deref().unwrap_or("")),
                i.hits,
                match (i.hits, i.expect_miss) {
                    (0, true) => " ✓ missed as intended",
                    (0, false) => " ⚠ did not hit",
                    (_, true) => " ⚠ meant to miss, but hit",
                    _ => "",
                },
                i.at
            );
        }
        o.push('\n');
    }
    if let Some(c) = &v.client {
        let _ = writeln!(
            o,
            "Client side (load.jsonl): {} requests sent, {} errors (≥ 500 or transport error), {} never sent by the load generator (late/dropped); by status: {}.\n",
            c.requests,
            c.errors,
            c.unsent,
            c.status
                .iter()
                .map(|(k, n)| format!("{k}: {n}"))
                .collect::<Vec<_>>()
                .join(", ")
        );
        let ((bh, brows), (ph, prows)) = crate::backend_tables(c);
        for (title, head, rows) in [
            (
                "Backends as the client saw them (latency from the scheduled send)",
                bh,
                brows,
            ),
            ("Readiness probes", ph, prows),
        ] {
            if rows.is_empty() {
                continue;
            }
            let _ = writeln!(o, "{title}:\n\n| {} |", head.join(" | "));
            let _ = writeln!(o, "|{}", "---|".repeat(head.len()));
            for r in rows {
                let r: Vec<String> = r.iter().map(|x| esc(x)).collect();
                let _ = writeln!(o, "| {} |", r.join(" | "));
            }
            o.push('\n');
        }
    }
}

/// Totals: span, statuses, NLU, swaps, re-query period, time to follow, clocks.
fn totals(o: &mut String, d: &Diagnosis) {
    o.push_str("## Totals\n\n");
    let span = match (d.start_ms, d.end_ms) {
        (Some(a), Some(b)) => format!("{} → {} ({:.1} s)", ts(a), ts(b), (b - a) as f64 / 1000.0),
        _ => "no requests".into(),
    };
    let _ = writeln!(o, "- span: {span}");
    let _ = writeln!(
        o,
        "- requests: {} ({})",
        d.requests,
        d.http_status
            .iter()
            .map(|(k, n)| format!("{k}: {n}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let _ = writeln!(
        o,
        "- failures (502/504 or NLU): {}; `no live upstreams`: {} (1-hop {}, 2-hop {}, 3+-hop {}, unknown {}; {} paired with their error line)",
        d.failures,
        d.nlu.total,
        d.nlu.one_hop,
        d.nlu.two_hop,
        d.nlu.multi_hop,
        d.nlu.unknown_hops,
        d.nlu.paired
    );
    if d.passes.max_passes > 1 {
        let _ = writeln!(
            o,
            "- redirected requests (`error_page` passes, ` : ` in `$upstream_addr`): {} (at most {} passes); internal NLU in earlier passes: {} ({}; {} paired with their error line); rescued (final status < 500): {}",
            d.passes.multi_pass,
            d.passes.max_passes,
            d.passes.internal_nlu,
            d.passes
                .internal_by_class
                .iter()
                .map(|(k, n)| format!("{k}: {n}"))
                .collect::<Vec<_>>()
                .join(", "),
            d.passes.internal_paired,
            d.passes.rescued
        );
    }
    let _ = writeln!(
        o,
        "- swaps: {} (source: {}){}",
        d.swaps,
        d.swap_source,
        if d.swap_directions.is_empty() {
            String::new()
        } else {
            format!(
                "; by direction: {}",
                d.swap_directions
                    .iter()
                    .map(|(k, n)| format!("{k}: {n}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        }
    );
    if !d.nlu_by_swap_direction.is_empty() {
        let _ = writeln!(
            o,
            "- NLU within 1 s after a swap, by direction: {}",
            d.nlu_by_swap_direction
                .iter()
                .map(|(k, n)| format!("{k}: {n}"))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    let _ = writeln!(
        o,
        "- re-query period: {} (source: {})",
        d.requery_period_ms
            .map(|p| format!("{p:.0} ms"))
            .unwrap_or_else(|| "unknown".into()),
        d.requery_source
    );
    let _ = writeln!(
        o,
        "- time to follow a swap: {}",
        resolvelab_diagnose::verdict::SwapFollow::describe(d.swap_follow.as_ref())
    );
    let changes = if d.inputs.tz_changes.is_empty() {
        String::new()
    } else {
        format!(", then UTC{}", d.inputs.tz_changes.join(", then UTC"))
    };
    let _ = writeln!(
        o,
        "- clocks: error log at UTC{} (from {}){changes}\n",
        d.inputs.tz_offset, d.inputs.tz_source
    );
}

/// The incidents table and the evidence of each class's first incident.
fn incidents(o: &mut String, d: &Diagnosis) {
    o.push_str("## Incidents\n\n");
    if d.incidents.is_empty() {
        o.push_str("No failures.\n\n");
    } else {
        o.push_str("| # | class | conf. | upstream | start | duration | failures | NLU (1/2/3+) | share failed | shape | after swap |\n|---:|---|---:|---|---|---:|---:|---|---:|---|---:|\n");
        for i in d.incidents.iter().take(200) {
            let _ = writeln!(
                o,
                "| {} | `{}` | {:.2} | {} | {} | {} ms | {} | {} ({}/{}/{}) | {} | {} | {} |",
                i.id,
                i.class,
                i.confidence,
                esc(&i.upstream),
                ts(i.start_ms),
                i.duration_ms,
                i.count,
                i.nlu,
                i.hops.one_hop,
                i.hops.two_hop,
                i.hops.multi_hop,
                crate::share_text(i),
                i.shape,
                i.after_swap_ms
                    .map(|a| format!("+{a} ms"))
                    .unwrap_or_else(|| "—".into())
            );
        }
        if d.incidents.len() > 200 {
            let _ = writeln!(
                o,
                "\n… {} more incidents in the JSON report.",
                d.incidents.len() - 200
            );
        }
        o.push('\n');
        o.push_str("### Evidence (first incident of each class)\n\n");
        let mut seen = std::collections::BTreeSet::new();
        for i in &d.incidents {
            if !seen.insert(i.class.clone()) {
                continue;
            }
            let _ = writeln!(o, "**#{} `{}`** — {}\n", i.id, i.class, i.explanation);
            for e in &i.evidence {
                let _ = writeln!(
                    o,
                    "- `{}` {}:\n  `{}`",
                    e.at,
                    e.note,
                    e.text.replace('`', "'")
                );
            }
            o.push('\n');
        }
    }
}

/// Each class's explanation and fix, and the error-log signatures.
fn classes_and_signatures(o: &mut String, d: &Diagnosis) {
    if !d.classes.is_empty() {
        o.push_str("## Classes and fixes\n\n");
        for c in &d.classes {
            let _ = writeln!(
                o,
                "### `{}` — {} incident(s), {} failed request(s)\n\n{}\n\n**Fix:** {}\n",
                c.class, c.incidents, c.requests, c.explanation, c.fix
            );
        }
    }
    if !d.signatures.is_empty() {
        o.push_str("## Error-log signatures\n\n| signature | lines | near NLU | harmless | note | first |\n|---|---:|---:|---|---|---|\n");
        for s in &d.signatures {
            let _ = writeln!(
                o,
                "| `{}` | {} | {} | {} | {} | `{}` |",
                s.id,
                s.count,
                s.near_nlu,
                if s.harmless { "yes" } else { "no" },
                esc(&s.note),
                s.first.at
            );
        }
        o.push('\n');
    }
}

/// Parse accounting per file, with samples of what did not parse.
fn parsing(o: &mut String, d: &Diagnosis) {
    o.push_str(
        "## Parsing\n\n| file | kind | lines | parsed | malformed |\n|---|---|---:|---:|---:|\n",
    );
    for f in &d.parse.files {
        let _ = writeln!(
            o,
            "| `{}` | {} | {} | {} | {} |",
            f.path, f.kind, f.lines, f.parsed, f.malformed
        );
    }
    for f in d.parse.files.iter().filter(|f| {
        f.malformed > 0 || f.error.is_some() || f.guess.is_some() || f.skipped + f.continued > 0
    }) {
        let _ = writeln!(o, "\n`{}` ({}):", f.path, f.kind);
        if f.skipped + f.continued > 0 {
            let _ = writeln!(
                o,
                "- mixed stream: {} line(s) passed over (the other kind, other processes), {} continuation line(s) joined to their entry",
                f.skipped, f.continued
            );
        }
        if let Some(e) = &f.error {
            let _ = writeln!(o, "- read error: {e}");
        }
        for s in &f.samples {
            let _ = writeln!(
                o,
                "- line {}: {} — `{}`",
                s.line,
                s.reason,
                s.text.replace('`', "'")
            );
        }
        if let Some(g) = &f.guess {
            let _ = writeln!(o, "- nearest guess: {g}");
        }
    }
}

/// "What these logs can show", first: every class below is worded from this evidence.
fn evidence(o: &mut String, d: &Diagnosis) {
    let (rows, (head, missing)) = crate::evidence_tables(&d.evidence);
    o.push_str("## What these logs can show\n\n| input | |\n|---|---|\n");
    for (k, v) in rows {
        let _ = writeln!(o, "| {k} | {} |", esc(&v));
    }
    if !missing.is_empty() {
        let _ = writeln!(o, "\n| {} |\n|---|---|---|", head.join(" | "));
        for r in missing {
            let _ = writeln!(
                o,
                "| {} |",
                r.iter().map(|c| esc(c)).collect::<Vec<_>>().join(" | ")
            );
        }
    }
    o.push('\n');
}
