//! The sections of a diagnosis or a lab verdict, as one [`Doc`] both renderers walk: the
//! verdict's head (status, expectations, injections, the client's view), the answer in two or
//! three sentences, incidents with their evidence, the timeline charts (when there is a
//! timeline to draw), classes and fixes, signatures, what the logs can show, totals, parsing.
//! Where a section goes and what it says is decided here only.

use crate::{share_text, ts};
use resolvelab_core::doc::{Block, Cell, Doc, Line, Table, Text, code, m, n, p};
use resolvelab_diagnose::verdict::{ClientStats, SwapFollow};
use resolvelab_diagnose::{Diagnosis, Incident, Verdict};

/// Incidents listed in the table; the rest are in the JSON report.
const LISTED: usize = 200;
/// Fewer time bins than this and the timeline charts are left out.
const MIN_CHART_POINTS: usize = 10;
/// Incidents that get a section of their own (with their zoomed chart in HTML), beside the
/// first incident of every class.
const SECTIONS: usize = 20;

/// The report of `d`, headed by the lab verdict `v` when there is one.
pub(crate) fn doc(d: &Diagnosis, v: Option<&Verdict>) -> Doc {
    let title = match v {
        Some(v) => format!(
            "resolvelab verdict — {}",
            v.scenario.as_deref().unwrap_or("(unnamed run)")
        ),
        None => "resolvelab diagnosis".to_string(),
    };
    let mut b = Vec::new();
    if let Some(v) = v {
        verdict(&mut b, v);
        // A fleet run: its instances are diagnosed one by one; the fleet report follows.
        if let Some(f) = &v.fleet {
            b.extend(crate::fleet::doc(&f.report).blocks);
            return Doc { title, blocks: b };
        }
    }
    // The answer first, then the incidents behind it, then what the logs could not show
    // (issue #43: a person paged at night reads the top of the page).
    answer(&mut b, d);
    incidents(&mut b, d);
    charts(&mut b, d);
    classes_and_signatures(&mut b, d);
    evidence(&mut b, d);
    totals(&mut b, d);
    parsing(&mut b, d);
    Doc { title, blocks: b }
}

/// Two or three sentences: how many requests failed, which classes, the fix that matters most
/// and how sure the diagnosis is — each from the diagnosis's own numbers.
fn answer(b: &mut Vec<Block>, d: &Diagnosis) {
    h2(b, "In short");
    let mut said = Vec::new();
    if d.incidents.is_empty() {
        said.push(format!(
            "No failed request in these logs ({} requests).",
            d.requests
        ));
        b.push(Block::Para(vec![m(said.join(" "))]));
        return;
    }
    let classes: Vec<String> = d
        .classes
        .iter()
        .map(|c| format!("`{}` ({} failed)", c.class, c.requests))
        .collect();
    let how_many = if d.requests > 0 {
        format!(
            "{} of {} requests failed ({:.2} %)",
            d.failures,
            d.requests,
            d.failures as f64 * 100.0 / d.requests as f64
        )
    } else {
        format!(
            "{} failed requests are seen in the error log (no access log: the share of all requests is unknown)",
            d.failures
        )
    };
    said.push(format!(
        "{how_many}, in {} incident(s): {}.",
        d.incidents.len(),
        classes.join(", ")
    ));
    // On a tie, a decided class goes before `undetermined`.
    if let Some(top) = d
        .classes
        .iter()
        .max_by_key(|c| (c.requests, c.class != "undetermined"))
    {
        let sure = d
            .incidents
            .iter()
            .filter(|i| i.class == top.class)
            .map(|i| i.confidence)
            .fold(0.0, f64::max);
        let how_sure = if top.class == "undetermined" {
            "undetermined: these logs cannot decide the cause (see \"What these logs can show\")"
                .to_string()
        } else if sure >= 0.8 {
            format!("decided by the evidence (confidence {sure:.2})")
        } else {
            format!(
                "probable, not decided (confidence {sure:.2}): see the incident for what would decide it"
            )
        };
        said.push(format!("Most failures: `{}`, {how_sure}.", top.class));
        b.push(Block::Para(vec![m(said.join(" "))]));
        b.push(Block::Para(vec![m(format!("**What to do:** {}", top.fix))]));
    } else {
        b.push(Block::Para(vec![m(said.join(" "))]));
    }
}

fn h2(b: &mut Vec<Block>, title: &str) {
    b.push(Block::Heading(2, vec![m(title)]));
}

fn joined<K: std::fmt::Display, V: std::fmt::Display>(
    it: impl IntoIterator<Item = (K, V)>,
) -> String {
    (it.into_iter())
        .map(|(k, n)| format!("{k}: {n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A lab run's head: status, expectations, injections, the client's view and its charts.
fn verdict(b: &mut Vec<Block>, v: &Verdict) {
    let good = v.passed();
    b.push(Block::Status(
        good,
        vec![m(format!("**Status: {}** — ", v.status)), p(&v.summary)],
    ));
    if !v.expectations.is_empty() {
        h2(b, "Expectations");
        let rows = (v.expectations.iter())
            .map(|e| {
                let (text, class) = match e.held {
                    true => ("✅ held", "held"),
                    false => ("❌ not held", "nothold"),
                };
                vec![
                    Cell::from(m(text)).class(class),
                    code(&e.text).into(),
                    p(&e.measured).into(),
                ]
            })
            .collect();
        b.push(table(
            Some("expectations"),
            &[("", false), ("expectation", false), ("measured", false)],
            rows,
        ));
    }
    if !v.injections.is_empty() {
        h2(b, "Injections");
        let rows = (v.injections.iter())
            .map(|i| {
                let (note, ok) = match (i.hits, i.expect_miss) {
                    (0, true) => (" ✓ missed as intended", true),
                    (0, false) => (" ⚠ did not hit", false),
                    (_, true) => (" ⚠ meant to miss, but hit", false),
                    _ => ("", true),
                };
                vec![
                    p(&i.kind).into(),
                    p(i.target.as_deref().unwrap_or("")).into(),
                    p(i.spec.as_deref().unwrap_or("")).into(),
                    Cell::from(m(format!("{}{note}", i.hits))).class(if ok {
                        "held"
                    } else {
                        "nothold"
                    }),
                    p(&i.at).into(),
                ]
            })
            .collect();
        let cols = [
            ("kind", false),
            ("target", false),
            ("spec", false),
            ("hits", true),
            ("at", false),
        ];
        b.push(table(None, &cols, rows));
    }
    if let Some(c) = &v.client {
        client(b, c);
    }
}

/// The client's view of a lab run: totals, the slow backends' chart, backends and probes.
fn client(b: &mut Vec<Block>, c: &ClientStats) {
    b.push(Block::Para(vec![m(format!(
        "Client side (load.jsonl): {} requests sent, {} errors (≥ 500 or transport error), {} never sent by the load generator (late/dropped); by status: {}.",
        c.requests,
        c.errors,
        c.unsent,
        joined(&c.status)
    ))]));
    // Worth a chart only when some backend was slow enough to see (a second or more).
    if c.backends.values().any(|b| b.max_ms >= 1000.0) {
        let series: Vec<(&str, &[resolvelab_diagnose::verdict::BackendBin])> = (c.backends.iter())
            .map(|(n, b)| (n.as_str(), b.bins.as_slice()))
            .collect();
        let t0 = (c.backends.values())
            .filter_map(|b| b.bins.first().map(|s| s.t_ms))
            .min()
            .unwrap_or(0);
        let bin = c.backends.values().map(|b| b.bin_ms).max().unwrap_or(0);
        let title = format!("Slowest answer per {bin} ms of scheduled time, by backend");
        b.push(Block::Chart {
            id: Some("backend-latency"),
            svg: crate::charts::backend_latency_svg(&series, t0, &title, (900, 280)),
            caption: None,
        });
    }
    let (backends, probes) = backend_tables(c);
    for (title, t) in [
        (
            "Backends as the client saw them (latency from the scheduled send)",
            backends,
        ),
        ("Readiness probes", probes),
    ] {
        if !t.rows.is_empty() {
            b.push(Block::Heading(3, vec![m(title)]));
            b.push(Block::Table(t));
        }
    }
}

fn table(id: Option<&'static str>, cols: &[(&'static str, bool)], rows: Vec<Vec<Cell>>) -> Block {
    Block::Table(Table {
        id,
        cols: cols.to_vec(),
        rows,
        keyed: false,
    })
}

/// The per-backend table of a lab verdict (client view from `x-backend`, pool counters from
/// `backends.json`) and the readiness-probe table.
fn backend_tables(c: &ClientStats) -> (Table, Table) {
    let ms = |v: f64| n(format!("{v:.1}"));
    let opt = |v: Option<String>| v.map_or_else(|| n("–"), n);
    let cols = vec![
        ("backend", false),
        ("answers", true),
        ("≥ 500", true),
        ("min ms", true),
        ("p50 ms", true),
        ("p90 ms", true),
        ("p99 ms", true),
        ("max ms", true),
        ("pool wait max ms", true),
        ("pool timeouts", true),
    ];
    let rows = (c.backends.iter())
        .map(|(name, b)| {
            vec![
                p(name).into(),
                n(b.requests),
                n(b.errors),
                ms(b.min_ms),
                ms(b.p50_ms),
                ms(b.p90_ms),
                ms(b.p99_ms),
                ms(b.max_ms),
                opt(b.pool_wait_max_ms.map(|v| format!("{v:.1}"))),
                opt(b.pool_timeouts.map(|v| v.to_string())),
            ]
        })
        .collect();
    let backends = Table {
        id: Some("backends"),
        cols,
        rows,
        keyed: false,
    };
    let cols = vec![
        ("probed backend", false),
        ("probes", true),
        ("ok", true),
        ("failed", true),
        ("of them timeouts", true),
        ("slowest ms", true),
    ];
    let rows = (c.probes.iter())
        .map(|(name, pr)| {
            vec![
                p(name).into(),
                n(pr.probes),
                n(pr.ok),
                n(pr.failed),
                n(pr.timeouts),
                ms(pr.max_ms),
            ]
        })
        .collect();
    let probes = Table {
        id: Some("probes"),
        cols,
        rows,
        keyed: false,
    };
    (backends, probes)
}

/// A key/value table: our label, then its value.
fn keyed(id: &'static str, rows: Vec<(Text, Line)>) -> Block {
    Block::Table(Table {
        id: Some(id),
        cols: vec![("", false), ("", false)],
        rows: (rows.into_iter())
            .map(|(k, v)| vec![Cell::from(k), Cell::new(v)])
            .collect(),
        keyed: true,
    })
}

/// "What these logs can show", first: every class below is worded from this evidence.
fn evidence(b: &mut Vec<Block>, d: &Diagnosis) {
    let e = &d.evidence;
    let yes = |v: bool| vec![m(if v { "yes" } else { "no" })];
    let mut rows = vec![
        (m("access log"), yes(e.inputs.access_log)),
        (
            m("`$upstream_addr` (trajectories)"),
            yes(e.inputs.upstream_addr),
        ),
        (
            m("`$connection` (pairing by *cid)"),
            yes(e.inputs.connection),
        ),
        (m("`$msec` (ms timing)"), yes(e.inputs.msec)),
        (m("error log"), yes(e.inputs.error_log)),
        (m("DNS answer history"), yes(e.inputs.dns_log)),
        (m("peer-list changes from"), vec![m(&e.peer_changes)]),
        (
            m("nginx version"),
            vec![p(e.nginx_version.as_deref().unwrap_or("unknown"))],
        ),
    ];
    let yn = |v: bool| if v { "yes" } else { "no" };
    rows.push(match &e.config {
        Some(c) => (
            m("configuration"),
            vec![
                p(&c.source),
                m(format!(
                    ": resolve {}, variable *_pass {}{}",
                    yn(c.resolve),
                    yn(c.variable_pass),
                    if c.lua_balancer {
                        ", Lua balancer (ingress-nginx)"
                    } else {
                        ""
                    }
                )),
            ],
        ),
        None => (m("configuration"), vec![m("not given")]),
    });
    rows.push((
        m("generation race"),
        vec![m(format!("{} — {}", e.race, e.race_why))],
    ));
    h2(b, "What these logs can show");
    b.push(keyed("evidence", rows));
    if !e.missing.is_empty() {
        let rows = (e.missing.iter())
            .map(|x| vec![m(&x.what).into(), m(&x.decides).into(), m(&x.add).into()])
            .collect();
        let cols = [
            ("missing", false),
            ("it would decide", false),
            ("add", false),
        ];
        b.push(table(Some("missing"), &cols, rows));
    }
}

/// Totals: span, statuses, NLU, swaps, re-query period, time to follow, clocks.
fn totals(b: &mut Vec<Block>, d: &Diagnosis) {
    let span = match (d.start_ms, d.end_ms) {
        (Some(a), Some(z)) => format!("{} → {} ({:.1} s)", ts(a), ts(z), (z - a) as f64 / 1000.0),
        _ => "no requests".into(),
    };
    let mut rows = vec![(m("span"), vec![m(span)])];
    if let Some(r) = d.range {
        let edge = |t: i64, open: i64| match t == open {
            true => "…".to_string(),
            false => ts(t),
        };
        rows.push((
            m("range diagnosed"),
            vec![m(format!(
                "{} → {} (excluded): requests, error lines, swaps and answer changes in it are counted, an incident where it starts; the lines around it are read as context",
                edge(r.since_ms, i64::MIN),
                edge(r.until_ms, i64::MAX)
            ))],
        ));
    }
    rows.extend([
        (
            m("requests"),
            vec![m(format!("{} ({})", d.requests, joined(&d.http_status)))],
        ),
        (
            m("failures (502/504 or NLU)"),
            vec![m(d.failures.to_string())],
        ),
        (
            m("`no live upstreams`"),
            vec![m(format!(
                "{} (1-hop {}, 2-hop {}, 3+-hop {}, unknown {}; {} paired with their error line)",
                d.nlu.total,
                d.nlu.one_hop,
                d.nlu.two_hop,
                d.nlu.multi_hop,
                d.nlu.unknown_hops,
                d.nlu.paired
            ))],
        ),
    ]);
    if d.passes.max_passes > 1 {
        let ps = &d.passes;
        rows.push((
            m("redirected requests (`error_page` passes, ` : ` in `$upstream_addr`)"),
            vec![m(format!(
                "{} (at most {} passes); internal NLU in earlier passes: {} ({}; {} paired with their error line); rescued (final status < 500): {}",
                ps.multi_pass,
                ps.max_passes,
                ps.internal_nlu,
                joined(&ps.internal_by_class),
                ps.internal_paired,
                ps.rescued
            ))],
        ));
    }
    let directions = match d.swap_directions.is_empty() {
        true => String::new(),
        false => format!("; by direction: {}", joined(&d.swap_directions)),
    };
    rows.push((
        m("swaps"),
        vec![m(format!(
            "{} (source: {}){directions}",
            d.swaps, d.swap_source
        ))],
    ));
    if !d.nlu_by_swap_direction.is_empty() {
        rows.push((
            m("NLU within 1 s after a swap, by direction"),
            vec![m(joined(&d.nlu_by_swap_direction))],
        ));
    }
    let period = (d.requery_period_ms).map_or_else(|| "unknown".into(), |p| format!("{p:.0} ms"));
    rows.push((
        m("re-query period"),
        vec![m(format!("{period} (source: {})", d.requery_source))],
    ));
    rows.push((
        m("time to follow a swap"),
        vec![m(SwapFollow::describe(d.swap_follow.as_ref()))],
    ));
    let changes = match d.inputs.tz_changes.is_empty() {
        true => String::new(),
        false => format!(", then UTC{}", d.inputs.tz_changes.join(", then UTC")),
    };
    rows.push((
        m("clocks"),
        vec![m(format!(
            "error log at UTC{} (from {}){changes}",
            d.inputs.tz_offset, d.inputs.tz_source
        ))],
    ));
    h2(b, "Totals");
    b.push(keyed("totals", rows));
}

/// Requests by outcome and latency percentiles over time, swaps and incidents marked.
fn charts(b: &mut Vec<Block>, d: &Diagnosis) {
    // A chart of a handful of points says nothing a sentence does not: left out.
    if d.timeline.points.len() < MIN_CHART_POINTS {
        return;
    }
    let t0 = d.timeline.points.first().map(|p| p.t_ms).unwrap_or(0);
    let swaps: Vec<i64> = d.swap_list.iter().map(|s| s.t_ms).collect();
    let bands: Vec<(i64, i64)> = d.incidents.iter().map(|i| (i.start_ms, i.end_ms)).collect();
    let title = "requests per second by outcome";
    b.push(Block::Chart {
        id: Some("chart-rate"),
        svg: crate::charts::rate_svg(&d.timeline, t0, &swaps, &bands, title, (1200, 360)),
        caption: Some(vec![m(format!(
            "Requests per second by outcome ({} ms bins, seconds since {}); blue lines: swaps; red bands: incidents.",
            d.timeline.bin_ms,
            ts(t0)
        ))]),
    });
    // No `$request_time` in the format: no latency to draw.
    if d.timeline.points.iter().all(|p| p.latency_ms.is_none()) {
        return;
    }
    b.push(Block::Chart {
        id: Some("chart-latency"),
        svg: crate::charts::latency_svg(&d.timeline, t0, "latency percentiles", (1200, 300)),
        caption: Some(vec![m("Latency percentiles ($request_time) per bin.")]),
    });
}

/// The incidents table, then a section for each of the first incidents and for the first
/// incident of every class: explanation, fix, zoomed chart, evidence.
fn incidents(b: &mut Vec<Block>, d: &Diagnosis) {
    h2(b, "Incidents");
    if d.incidents.is_empty() {
        b.push(Block::Para(vec![m("No failures.")]));
        return;
    }
    let rows = d.incidents.iter().take(LISTED).map(incident_row).collect();
    let cols = [
        ("#", true),
        ("class", false),
        ("conf.", true),
        ("upstream", false),
        ("start", false),
        ("duration", true),
        ("failures", true),
        ("NLU (1/2/3+)", false),
        ("share failed", true),
        ("shape", false),
        ("after swap", true),
    ];
    b.push(table(Some("incidents"), &cols, rows));
    if d.incidents.len() > LISTED {
        b.push(Block::Para(vec![m(format!(
            "… {} more incidents in the JSON report.",
            d.incidents.len() - LISTED
        ))]));
    }
    let swaps: Vec<i64> = d.swap_list.iter().map(|s| s.t_ms).collect();
    let mut seen = std::collections::BTreeSet::new();
    for (k, i) in d.incidents.iter().enumerate() {
        let first_of_class = seen.insert(i.class.id());
        if k < SECTIONS || first_of_class {
            b.push(incident_section(i, &swaps));
        }
    }
}

fn incident_row(i: &Incident) -> Vec<Cell> {
    vec![
        n(i.id).link(format!("#incident-{}", i.id)),
        code(i.class.id()).into(),
        n(format!("{:.2}", i.confidence)),
        p(&i.upstream).into(),
        n(ts(i.start_ms)),
        n(format!("{} ms", i.duration_ms)),
        n(i.count),
        n(format!(
            "{} ({}/{}/{})",
            i.nlu, i.hops.one_hop, i.hops.two_hop, i.hops.multi_hop
        )),
        n(share_text(i)),
        p(&i.shape).into(),
        n(i.after_swap_ms
            .map_or_else(|| "—".into(), |a| format!("+{a} ms"))),
    ]
}

fn incident_section(i: &Incident, swaps: &[i64]) -> Block {
    let mut s = vec![
        Block::Heading(
            3,
            vec![
                m(format!("#{} ", i.id)),
                code(i.class.id()),
                m(format!(" ({:.2})", i.confidence)),
            ],
        ),
        Block::Para(vec![m(&i.explanation)]),
        Block::Para(vec![m("**Fix:** "), m(&i.fix)]),
    ];
    // A zoom with nothing drawn in it (no request of the group in the access log) is left out.
    if i.zoom.points.iter().any(|p| p.ok + p.failed + p.nlu > 0) {
        let title = format!("incident #{} — {}", i.id, i.class);
        s.push(Block::Chart {
            id: None,
            svg: crate::charts::incident_svg(
                &i.zoom,
                i.start_ms,
                i.end_ms,
                swaps,
                &title,
                (1000, 260),
            ),
            caption: Some(vec![m(format!(
                "Zoom: {} ms bins, seconds since the incident start.",
                i.zoom.bin_ms
            ))]),
        });
    }
    if !i.evidence.is_empty() {
        let rows = (i.evidence.iter())
            .map(|e| {
                vec![
                    code(&e.at).into(),
                    p(&e.note).into(),
                    Cell::from(code(&e.text)).class("ev"),
                ]
            })
            .collect();
        s.push(table(
            None,
            &[("at", false), ("evidence", false), ("line", false)],
            rows,
        ));
    }
    Block::Section(format!("incident-{}", i.id), s)
}

/// Each class's explanation and fix, and the error-log signatures.
fn classes_and_signatures(b: &mut Vec<Block>, d: &Diagnosis) {
    if !d.classes.is_empty() {
        h2(b, "Classes and fixes");
        for c in &d.classes {
            b.push(Block::Heading(
                3,
                vec![
                    code(c.class.id()),
                    m(format!(
                        " — {} incident(s), {} failed request(s)",
                        c.incidents, c.requests
                    )),
                ],
            ));
            b.push(Block::Para(vec![m(&c.explanation)]));
            b.push(Block::Para(vec![m("**Fix:** "), m(&c.fix)]));
        }
    }
    if !d.signatures.is_empty() {
        h2(b, "Error-log signatures");
        let rows = (d.signatures.iter())
            .map(|s| {
                vec![
                    code(&s.id).into(),
                    n(s.count),
                    n(s.near_nlu),
                    n(if s.harmless { "yes" } else { "no" }),
                    p(&s.note).into(),
                    code(&s.first.at).into(),
                ]
            })
            .collect();
        let cols = [
            ("signature", false),
            ("lines", true),
            ("near NLU", true),
            ("harmless", false),
            ("note", false),
            ("first", false),
        ];
        b.push(table(Some("signatures"), &cols, rows));
    }
}

/// Parse accounting per file, with samples of what did not parse.
fn parsing(b: &mut Vec<Block>, d: &Diagnosis) {
    h2(b, "Parsing");
    let rows = (d.parse.files.iter())
        .map(|f| {
            vec![
                code(&f.path).into(),
                p(&f.kind).into(),
                n(f.lines),
                n(f.parsed),
                n(f.malformed),
            ]
        })
        .collect();
    let cols = [
        ("file", false),
        ("kind", false),
        ("lines", true),
        ("parsed", true),
        ("malformed", true),
    ];
    b.push(table(Some("parse"), &cols, rows));
    for f in d.parse.files.iter().filter(|f| {
        f.malformed > 0 || f.error.is_some() || f.guess.is_some() || f.skipped + f.continued > 0
    }) {
        b.push(Block::Para(vec![
            code(&f.path),
            m(" ("),
            p(&f.kind),
            m("):"),
        ]));
        let mut items: Vec<Line> = Vec::new();
        if f.skipped + f.continued > 0 {
            items.push(vec![m(format!(
                "mixed stream: {} line(s) passed over (the other kind, other processes), {} continuation line(s) joined to their entry",
                f.skipped, f.continued
            ))]);
        }
        if let Some(e) = &f.error {
            items.push(vec![m("read error: "), p(e)]);
        }
        for s in &f.samples {
            items.push(vec![
                m(format!("line {}: ", s.line)),
                p(&s.reason),
                m(" — "),
                code(&s.text),
            ]);
        }
        if let Some(g) = &f.guess {
            items.push(vec![m("nearest guess: "), p(g)]);
        }
        b.push(Block::List(items));
    }
}
