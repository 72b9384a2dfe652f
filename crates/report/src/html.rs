//! The self-contained HTML page: inline CSS and SVG, no scripts, no external assets.

use crate::charts::{incident_svg, latency_svg, rate_svg};
use crate::ts;
use resolvelab_diagnose::{Diagnosis, Verdict};
use std::fmt::Write;

use resolvelab_core::text::html_escape as h;

/// Escaped text whose `backtick` spans become `<code>` (explanations and fixes are written once,
/// in Markdown's inline-code style, for both renderers).
fn hc(s: &str) -> String {
    let mut out = String::new();
    for (i, part) in h(s).split('`').enumerate() {
        if i % 2 == 1 {
            out.push_str("<code>");
            out.push_str(part);
            out.push_str("</code>");
        } else {
            out.push_str(part);
        }
    }
    out
}

const CSS: &str = "body{font-family:system-ui,sans-serif;margin:24px;color:#222;max-width:1280px}\
table{border-collapse:collapse;margin:8px 0 16px}td,th{border:1px solid #ccc;padding:3px 7px;font-size:13px;text-align:left;vertical-align:top}\
th{background:#f3f3f3}code{background:#f6f6f6;padding:0 3px}.held{color:#1a7f37}.nothold{color:#c62828}\
.status{font-size:18px;padding:8px 12px;border-radius:6px;display:inline-block;background:#eef}\
.status.bad{background:#fde2e2}.status.good{background:#e3f6e8}figure{margin:8px 0 20px}figcaption{font-size:13px;color:#555}\
.ev{font-family:monospace;font-size:12px;white-space:pre-wrap;word-break:break-all}";

pub(crate) fn page(d: &Diagnosis, v: Option<&Verdict>) -> String {
    let mut o = String::new();
    let title = match v {
        Some(v) => format!(
            "resolvelab verdict — {}",
            v.scenario.as_deref().unwrap_or("run")
        ),
        None => "resolvelab diagnosis".to_string(),
    };
    let _ = write!(
        o,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title><style>{CSS}</style></head><body>\n<h1>{}</h1>\n",
        h(&title),
        h(&title)
    );
    if let Some(v) = v {
        verdict(&mut o, v);
    }
    evidence(&mut o, d);
    totals(&mut o, d);
    charts(&mut o, d);
    incidents(&mut o, d);
    classes_and_signatures(&mut o, d);
    parsing(&mut o, d);
    o.push_str("</table>\n</body></html>\n");
    o
}

/// A lab run's head: status, expectations, injections, the client's view and its charts.
fn verdict(o: &mut String, v: &Verdict) {
    let good = v.status == "completed" && v.expectations.iter().all(|e| e.held);
    let _ = writeln!(
        o,
        "<p class=\"status {}\" id=\"status\">Status: <b>{}</b> — {}</p>",
        if good { "good" } else { "bad" },
        h(&v.status),
        h(&v.summary)
    );
    if !v.expectations.is_empty() {
        o.push_str("<h2>Expectations</h2><table id=\"expectations\"><tr><th></th><th>expectation</th><th>measured</th></tr>\n");
        for e in &v.expectations {
            let _ = writeln!(
                o,
                "<tr><td class=\"{}\">{}</td><td><code>{}</code></td><td>{}</td></tr>",
                if e.held { "held" } else { "nothold" },
                if e.held { "held" } else { "not held" },
                h(&e.text),
                h(&e.measured)
            );
        }
        o.push_str("</table>\n");
    }
    if !v.injections.is_empty() {
        o.push_str("<h2>Injections</h2><table><tr><th>kind</th><th>target</th><th>spec</th><th>hits</th></tr>\n");
        for i in &v.injections {
            let _ = writeln!(
                o,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td class=\"{}\">{}{}</td></tr>",
                h(&i.kind),
                h(i.target.as_deref().unwrap_or("")),
                h(i.spec.as_deref().unwrap_or("")),
                if (i.hits == 0) == i.expect_miss {
                    "held"
                } else {
                    "nothold"
                },
                i.hits,
                match (i.hits, i.expect_miss) {
                    (0, true) => " (missed as intended)",
                    (0, false) => " (did not hit)",
                    (_, true) => " (meant to miss, but hit)",
                    _ => "",
                }
            );
        }
        o.push_str("</table>\n");
    }
    if let Some(c) = &v.client {
        let _ = writeln!(
            o,
            "<p id=\"client\">Client side (load.jsonl): {} requests sent, {} errors (≥ 500 or transport error), {} never sent by the load generator (late/dropped).</p>",
            c.requests, c.errors, c.unsent
        );
        // Worth a chart only when some backend was slow enough to see (a second or more).
        if c.backends.values().any(|b| b.max_ms >= 1000.0) {
            let series: Vec<(&str, &[resolvelab_diagnose::verdict::BackendBin])> = c
                .backends
                .iter()
                .map(|(n, b)| (n.as_str(), b.bins.as_slice()))
                .collect();
            let t0 = c
                .backends
                .values()
                .filter_map(|b| b.bins.first().map(|s| s.t_ms))
                .min()
                .unwrap_or(0);
            let bin = c.backends.values().map(|b| b.bin_ms).max().unwrap_or(0);
            let _ = writeln!(
                o,
                "<div class=\"chart\" id=\"backend-latency\">{}</div>",
                crate::charts::backend_latency_svg(
                    &series,
                    t0,
                    &format!("Slowest answer per {bin} ms of scheduled time, by backend"),
                    (900, 280)
                )
            );
        }
        let ((bh, brows), (ph, prows)) = crate::backend_tables(c);
        for (id, title, head, rows) in [
            ("backends", "Backends as the client saw them", bh, brows),
            ("probes", "Readiness probes", ph, prows),
        ] {
            if rows.is_empty() {
                continue;
            }
            let _ = write!(o, "<h3>{title}</h3><table id=\"{id}\"><tr>");
            for c in head {
                let _ = write!(o, "<th>{}</th>", h(c));
            }
            o.push_str("</tr>\n");
            for r in rows {
                o.push_str("<tr>");
                for c in r {
                    let _ = write!(o, "<td>{}</td>", h(&c));
                }
                o.push_str("</tr>\n");
            }
            o.push_str("</table>\n");
        }
    }
}

/// The totals table.
fn totals(o: &mut String, d: &Diagnosis) {
    let _ = writeln!(
        o,
        "<h2>Totals</h2><table id=\"totals\"><tr><th>requests</th><td>{}</td></tr><tr><th>by status</th><td>{}</td></tr>\
<tr><th>failures</th><td>{}</td></tr><tr><th>no live upstreams</th><td>{} (1-hop {}, 2-hop {}, 3+-hop {}, paired {})</td></tr>\
<tr><th>redirected (retry shim)</th><td>{} requests, max {} passes, {} internal NLU, {} rescued</td></tr>\
<tr><th>swaps</th><td>{} ({})</td></tr><tr><th>re-query period</th><td>{}</td></tr><tr><th>time to follow a swap</th><td>{}</td></tr><tr><th>span</th><td>{}</td></tr></table>",
        d.requests,
        h(&d.http_status
            .iter()
            .map(|(k, n)| format!("{k}: {n}"))
            .collect::<Vec<_>>()
            .join(", ")),
        d.failures,
        d.nlu.total,
        d.nlu.one_hop,
        d.nlu.two_hop,
        d.nlu.multi_hop,
        d.nlu.paired,
        d.passes.multi_pass,
        d.passes.max_passes,
        d.passes.internal_nlu,
        d.passes.rescued,
        d.swaps,
        h(&d.swap_source),
        d.requery_period_ms
            .map(|p| format!("{p:.0} ms"))
            .unwrap_or_else(|| "unknown".into()),
        h(&resolvelab_diagnose::verdict::SwapFollow::describe(
            d.swap_follow.as_ref()
        )),
        match (d.start_ms, d.end_ms) {
            (Some(a), Some(b)) => format!("{} → {}", ts(a), ts(b)),
            _ => "—".into(),
        }
    );
}

/// Requests by outcome and latency percentiles over time, swaps and incidents marked.
fn charts(o: &mut String, d: &Diagnosis) {
    let t0 = d.timeline.points.first().map(|p| p.t_ms).unwrap_or(0);
    let swaps: Vec<i64> = d.swap_list.iter().map(|s| s.t_ms).collect();
    let bands: Vec<(i64, i64)> = d.incidents.iter().map(|i| (i.start_ms, i.end_ms)).collect();
    o.push_str("<h2>Timeline</h2>\n");
    let _ = writeln!(
        o,
        "<figure class=\"chart\" id=\"chart-rate\">{}<figcaption>Requests per second by outcome ({} ms bins, seconds since {}); blue lines: swaps; red bands: incidents.</figcaption></figure>",
        rate_svg(
            &d.timeline,
            t0,
            &swaps,
            &bands,
            "requests per second by outcome",
            (1200, 360)
        ),
        d.timeline.bin_ms,
        ts(t0)
    );
    let _ = writeln!(
        o,
        "<figure class=\"chart\" id=\"chart-latency\">{}<figcaption>Latency percentiles ($request_time) per bin.</figcaption></figure>",
        latency_svg(&d.timeline, t0, "latency percentiles", (1200, 300))
    );
}

/// The incidents table and the evidence of each class's first incident.
fn incidents(o: &mut String, d: &Diagnosis) {
    let swaps: Vec<i64> = d.swap_list.iter().map(|s| s.t_ms).collect();
    o.push_str("<h2>Incidents</h2>\n");
    if d.incidents.is_empty() {
        o.push_str("<p>No failures.</p>\n");
    } else {
        o.push_str("<table id=\"incidents\"><tr><th>#</th><th>class</th><th>confidence</th><th>upstream</th><th>start</th><th>duration</th><th>failures</th><th>NLU 1/2/3+</th><th>share failed</th><th>shape</th><th>after swap</th></tr>\n");
        for i in d.incidents.iter().take(500) {
            let _ = writeln!(
                o,
                "<tr><td><a href=\"#incident-{id}\">{id}</a></td><td><code>{}</code></td><td>{:.2}</td><td>{}</td><td>{}</td><td>{} ms</td><td>{}</td><td>{}/{}/{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                h(&i.class),
                i.confidence,
                h(&i.upstream),
                ts(i.start_ms),
                i.duration_ms,
                i.count,
                i.hops.one_hop,
                i.hops.two_hop,
                i.hops.multi_hop,
                crate::share_text(i),
                h(&i.shape),
                i.after_swap_ms
                    .map(|a| format!("+{a} ms"))
                    .unwrap_or_else(|| "—".into()),
                id = i.id,
            );
        }
        o.push_str("</table>\n");
        for i in d.incidents.iter().filter(|i| !i.zoom.points.is_empty()) {
            let _ = writeln!(
                o,
                "<section class=\"incident\" id=\"incident-{}\"><h3>#{} <code>{}</code> ({:.2})</h3><p>{}</p><p><b>Fix:</b> {}</p>",
                i.id,
                i.id,
                h(&i.class),
                i.confidence,
                hc(&i.explanation),
                hc(&i.fix)
            );
            let _ = writeln!(
                o,
                "<figure class=\"chart zoom\">{}<figcaption>Zoom: {} ms bins, seconds since the incident start.</figcaption></figure>",
                incident_svg(
                    &i.zoom,
                    i.start_ms,
                    i.end_ms,
                    &swaps,
                    &format!("incident #{} — {}", i.id, i.class),
                    (1000, 260)
                ),
                i.zoom.bin_ms
            );
            o.push_str("<table><tr><th>at</th><th>evidence</th><th>line</th></tr>\n");
            for e in &i.evidence {
                let _ = writeln!(
                    o,
                    "<tr><td><code>{}</code></td><td>{}</td><td class=\"ev\">{}</td></tr>",
                    h(&e.at),
                    h(&e.note),
                    h(&e.text)
                );
            }
            o.push_str("</table></section>\n");
        }
    }
}

/// Each class's explanation and fix, and the error-log signatures.
fn classes_and_signatures(o: &mut String, d: &Diagnosis) {
    if !d.classes.is_empty() {
        o.push_str("<h2>Classes and fixes</h2>\n");
        for c in &d.classes {
            let _ = writeln!(
                o,
                "<h3><code>{}</code> — {} incident(s), {} failed request(s)</h3><p>{}</p><p><b>Fix:</b> {}</p>",
                h(&c.class),
                c.incidents,
                c.requests,
                hc(&c.explanation),
                hc(&c.fix)
            );
        }
    }
    if !d.signatures.is_empty() {
        o.push_str("<h2>Error-log signatures</h2><table id=\"signatures\"><tr><th>signature</th><th>lines</th><th>near NLU</th><th>harmless</th><th>note</th><th>first</th></tr>\n");
        for s in &d.signatures {
            let _ = writeln!(
                o,
                "<tr><td><code>{}</code></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td><code>{}</code></td></tr>",
                h(&s.id),
                s.count,
                s.near_nlu,
                if s.harmless { "yes" } else { "no" },
                h(&s.note),
                h(&s.first.at)
            );
        }
        o.push_str("</table>\n");
    }
}

/// Parse accounting per file (the page's last table, closed by the caller).
fn parsing(o: &mut String, d: &Diagnosis) {
    o.push_str("<h2>Parsing</h2><table id=\"parse\"><tr><th>file</th><th>kind</th><th>lines</th><th>parsed</th><th>malformed</th><th>samples</th></tr>\n");
    for f in &d.parse.files {
        let mut samples = f
            .samples
            .iter()
            .map(|s| format!("line {}: {}", s.line, s.reason))
            .collect::<Vec<_>>()
            .join("\n");
        if let Some(g) = &f.guess {
            samples.push_str(&format!("\nnearest guess: {g}"));
        }
        if f.skipped + f.continued > 0 {
            samples.push_str(&format!(
                "\nmixed stream: {} passed over, {} continuation line(s) joined",
                f.skipped, f.continued
            ));
        }
        let _ = writeln!(
            o,
            "<tr><td><code>{}</code></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"ev\">{}</td></tr>",
            h(&f.path),
            h(&f.kind),
            f.lines,
            f.parsed,
            f.malformed,
            h(&samples)
        );
    }
}

/// "What these logs can show", before everything else.
fn evidence(o: &mut String, d: &Diagnosis) {
    let (rows, (head, missing)) = crate::evidence_tables(&d.evidence);
    o.push_str("<h2>What these logs can show</h2><table id=\"evidence\">");
    for (k, v) in rows {
        let _ = write!(o, "<tr><th>{}</th><td>{}</td></tr>", hc(k), hc(&v));
    }
    o.push_str("</table>\n");
    if !missing.is_empty() {
        o.push_str("<table id=\"missing\"><tr>");
        for c in head {
            let _ = write!(o, "<th>{c}</th>");
        }
        o.push_str("</tr>");
        for r in missing {
            o.push_str("<tr>");
            for c in r {
                let _ = write!(o, "<td>{}</td>", hc(&c));
            }
            o.push_str("</tr>");
        }
        o.push_str("</table>\n");
    }
}
