//! The fleet report (`resolvelab merge`): the answer over every instance, the instances side by
//! side, the fleet's incidents with what the fleet shows about each, the instances' failures on
//! one time axis, then each instance's own incidents.

use crate::ts;
use resolvelab_core::doc::{Block, Cell, Doc, Table, code, m, n};
use resolvelab_diagnose::fleet::{Fleet, FleetIncident};

/// Fleet incidents with a section of their own; the rest are in the table and the JSON.
const SECTIONS: usize = 20;
/// Instances drawn on the aligned chart (the JSON holds every one).
pub(crate) const LANES: usize = 60;

pub(crate) fn doc(f: &Fleet) -> Doc {
    let mut b = Vec::new();
    answer(&mut b, f);
    instances(&mut b, f);
    incidents(&mut b, f);
    classes(&mut b, f);
    Doc {
        title: format!(
            "resolvelab fleet diagnosis — {} instances",
            f.instances.len()
        ),
        blocks: b,
    }
}

fn h2(b: &mut Vec<Block>, t: &str) {
    b.push(Block::Heading(2, vec![m(t)]));
}

fn table(id: &'static str, cols: &[(&'static str, bool)], rows: Vec<Vec<Cell>>) -> Block {
    Block::Table(Table {
        id: Some(id),
        cols: cols.to_vec(),
        rows,
        keyed: false,
    })
}

fn answer(b: &mut Vec<Block>, f: &Fleet) {
    h2(b, "In short");
    let hit = f.instances.iter().filter(|i| i.failures > 0).count();
    let mut said = vec![format!(
        "{} of {} requests failed on {hit} of {} instances, in {} fleet incident(s).",
        f.failures,
        f.requests,
        f.instances.len(),
        f.incidents.len()
    )];
    if let Some(top) = f.classes.first() {
        said.push(format!(
            "Most failures: `{}` ({} failed on {} instance(s)).",
            top.class, top.requests, top.instances
        ));
    }
    // What only the fleet shows, for its largest incident: the first thing a person paged for
    // one instance needs to know is whether the others saw it too, and when.
    if let Some(i) = f.incidents.iter().max_by_key(|i| i.count) {
        said.push(format!(
            "The largest fleet incident ({} failed, {}): {}.",
            i.count,
            ts(i.start_ms),
            i.reading.text
        ));
    }
    let unusable: Vec<&str> = f
        .instances
        .iter()
        .filter(|i| i.unusable.is_some())
        .map(|i| i.name.as_str())
        .collect();
    if !unusable.is_empty() {
        said.push(format!(
            "Not diagnosed: {} (see their rows).",
            unusable.join(", ")
        ));
    }
    b.push(Block::Para(vec![m(said.join(" "))]));
}

fn instances(b: &mut Vec<Block>, f: &Fleet) {
    h2(b, "Instances");
    let rows = f
        .instances
        .iter()
        .map(|i| {
            vec![
                code(i.name.clone()).into(),
                n(i.requests),
                n(i.failures),
                n(i.nlu),
                n(i.incidents),
                m(i.requery_period_ms
                    .map_or("unknown".into(), |p| format!("{:.0} ms", p)))
                .into(),
                m(match &i.unusable {
                    Some(why) => format!("not diagnosed: {why}"),
                    None => i
                        .classes
                        .iter()
                        .map(|(c, k)| format!("{c} {k}"))
                        .collect::<Vec<_>>()
                        .join(", "),
                })
                .into(),
            ]
        })
        .collect();
    b.push(table(
        "instances",
        &[
            ("instance", false),
            ("requests", true),
            ("failed", true),
            ("NLU", true),
            ("incidents", true),
            ("re-query period", true),
            ("classes (failed requests)", false),
        ],
        rows,
    ));
    let lanes: Vec<(&str, &resolvelab_diagnose::fleet::Lane)> = f
        .timelines
        .iter()
        .filter(|(_, t)| !t.points.is_empty())
        .take(LANES)
        .map(|(n, t)| (n.as_str(), t))
        .collect();
    if let (Some(t0), false) = (f.start_ms, lanes.is_empty()) {
        let h = (70 + 26 * lanes.len() as u32).max(160);
        b.push(Block::Chart {
            id: Some("chart-fleet"),
            svg: crate::charts::lanes_svg(&lanes, t0, (1200, h)),
            caption: Some(vec![m(format!(
                "Each instance's failed requests per bin on one axis (seconds since {}); red: NLU, orange: other failures; darker: a larger share of that bin's requests.{}",
                ts(t0),
                if f.instances.len() > LANES {
                    format!(" The first {LANES} instances by name.")
                } else {
                    String::new()
                }
            ))]),
        });
    }
}

fn incidents(b: &mut Vec<Block>, f: &Fleet) {
    h2(b, "Fleet incidents");
    if f.incidents.is_empty() {
        b.push(Block::Para(vec![m("No incident on any instance.")]));
        return;
    }
    b.push(Block::Para(vec![m(
        "Each instance's incidents on one upstream that overlap in time, with what the fleet shows: staggered starts within one re-query period are one DNS answer change met at each instance's own re-query; starts at one instant point at what the instances share — and, with ends staggered within one re-query period, at a failover that DNS ended at each instance's re-query; one instance alone is local to it.",
    )]));
    let rows = f
        .incidents
        .iter()
        .map(|i| {
            vec![
                n(i.id),
                code(i.upstream.clone()).into(),
                m(ts(i.start_ms)).into(),
                m(format!("{} of {}", i.hit, i.serving)).into(),
                n(i.count),
                m(format!("{} ms", i.start_spread_ms)).into(),
                m(format!("{} ms", i.end_spread_ms)).into(),
                code(i.reading.kind.id().to_string()).into(),
            ]
        })
        .collect();
    b.push(table(
        "fleet-incidents",
        &[
            ("#", true),
            ("upstream", false),
            ("start (UTC)", false),
            ("instances hit", true),
            ("failed", true),
            ("start spread", true),
            ("end spread", true),
            ("the fleet shows", false),
        ],
        rows,
    ));
    for i in f.incidents.iter().take(SECTIONS) {
        b.push(section(i));
    }
}

fn section(i: &FleetIncident) -> Block {
    let mut s = vec![
        Block::Heading(
            3,
            vec![m(format!(
                "Fleet incident {} — `{}`, {}",
                i.id,
                i.upstream,
                ts(i.start_ms)
            ))],
        ),
        Block::Para(vec![m(format!("**The fleet shows:** {}.", i.reading.text))]),
    ];
    let rows = i
        .members
        .iter()
        .map(|x| {
            vec![
                code(x.instance.clone()).into(),
                n(x.incident),
                code(x.class.to_string()).into(),
                m(format!("+{} ms", x.offset_ms)).into(),
                m(format!("{} ms", x.end_ms - x.start_ms)).into(),
                n(x.count),
            ]
        })
        .collect();
    s.push(Block::Table(Table {
        id: None,
        cols: vec![
            ("instance", false),
            ("its incident", true),
            ("its class", false),
            ("start", true),
            ("duration", true),
            ("failed", true),
        ],
        rows,
        keyed: false,
    }));
    Block::Section(format!("fleet-incident-{}", i.id), s)
}

fn classes(b: &mut Vec<Block>, f: &Fleet) {
    if f.classes.is_empty() {
        return;
    }
    h2(b, "Classes over the fleet");
    let rows = f
        .classes
        .iter()
        .map(|c| {
            vec![
                code(c.class.to_string()).into(),
                n(c.instances),
                n(c.incidents),
                n(c.requests),
            ]
        })
        .collect();
    b.push(table(
        "fleet-classes",
        &[
            ("class", false),
            ("instances", true),
            ("incidents", true),
            ("failed", true),
        ],
        rows,
    ));
    b.push(Block::Para(vec![m(
        "Each instance's own report (evidence lines, fixes, what its logs can show) is in its partial (`merge --partial FILE` writes them all in one), or from `resolvelab diagnose` on its logs.",
    )]));
}
