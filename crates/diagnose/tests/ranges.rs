//! A diagnosis of a time range (`--since`/`--until`, [`TimeRange`]) reads every line given and
//! counts only what falls in its range: the diagnoses of two adjacent ranges over the same
//! lines add up to the diagnosis of everything — every count summed, every incident, swap,
//! NLU event and answer change in exactly one of them, whole and classed as it is in the
//! diagnosis of everything. On the real production excerpts and the recorded lab runs, split
//! at a seeded second, in the middle, and one second after each of the first incidents start
//! (an incident that straddles the split).

mod common;

use common::{Rng, lab_cases, real_cases};
use resolvelab_diagnose::fleet::slices;
use resolvelab_diagnose::{Diagnosis, Options, TimeRange, diagnose};
use serde_json::{Map, Value};

/// `a + b` over every number of two JSON maps of numbers (nested maps too).
fn sum(a: &Value, b: &Value) -> Value {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let mut out: Map<String, Value> = x.clone();
            for (k, v) in y {
                let s = match x.get(k) {
                    Some(w) => sum(w, v),
                    None => v.clone(),
                };
                out.insert(k.clone(), s);
            }
            Value::Object(out)
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            Value::Array(x.iter().zip(y).map(|(a, b)| sum(a, b)).collect())
        }
        (Value::Number(x), Value::Number(y)) => (x.as_u64().unwrap() + y.as_u64().unwrap()).into(),
        _ => panic!("not summable: {a} + {b}"),
    }
}

fn v<T: serde::Serialize>(x: &T) -> Value {
    serde_json::to_value(x).unwrap()
}

/// A map of class id → [incidents, requests].
fn classes(d: &Diagnosis) -> Value {
    d.classes
        .iter()
        .map(|c| (c.class.id().to_string(), v(&[c.incidents, c.requests])))
        .collect::<Map<_, _>>()
        .into()
}

/// A map of signature id → [count, near_nlu].
fn signatures(d: &Diagnosis) -> Value {
    d.signatures
        .iter()
        .map(|s| (s.id.clone(), v(&[s.count, s.near_nlu])))
        .collect::<Map<_, _>>()
        .into()
}

/// Requests, failed and NLU over the timeline's bins.
fn timeline(d: &Diagnosis) -> Value {
    let p = &d.timeline.points;
    v(&[
        p.iter().map(|p| p.ok).sum::<u64>(),
        p.iter().map(|p| p.failed).sum(),
        p.iter().map(|p| p.nlu).sum(),
    ])
}

/// `d`'s lists, those that split between ranges: incidents (without their number and zoom,
/// which are the diagnosis's: the join numbers them again), swaps, NLU events, answer changes.
fn lists(d: &Diagnosis) -> [Value; 4] {
    let mut incidents = v(&d.incidents);
    for i in incidents.as_array_mut().unwrap() {
        let i = i.as_object_mut().unwrap();
        i.remove("id");
        i.remove("zoom");
    }
    [
        incidents,
        v(&d.swap_list),
        v(&d.nlu_events),
        v(&d.swap_follow.as_ref().map(|f| &f.list)),
    ]
}

fn concat(a: &Value, b: &Value) -> Value {
    match (a, b) {
        (Value::Array(x), Value::Array(y)) => Value::Array([x.clone(), y.clone()].concat()),
        (Value::Null, Value::Null) => Value::Null,
        _ => panic!("not lists: {a} {b}"),
    }
}

/// What must add up, as one JSON value.
fn additive(d: &Diagnosis) -> Value {
    let mut p = d.passes.clone();
    p.max_passes = 0;
    serde_json::json!({
        "requests": d.requests,
        "failures": d.failures,
        "swaps": d.swaps,
        "http_status": d.http_status,
        "upstream_requests": d.upstream_requests,
        "nlu": d.nlu,
        "passes": p,
        "swap_directions": d.swap_directions,
        "nlu_by_swap_direction": d.nlu_by_swap_direction,
        "classes": classes(d),
        "signatures": signatures(d),
        "moves": d.swap_follow.as_ref().map_or(serde_json::json!({}), |f| {
            serde_json::json!({"moves": f.moves, "followed": f.followed})
        }),
    })
}

/// Split `o`'s diagnosis at second `at_s`: the two ranges must add up to the whole.
fn check_split(o: &Options, whole: &Diagnosis, at_s: i64, case: &str) {
    let at = at_s * 1000;
    let ranged = |since: i64, until: i64| {
        let mut r = o.clone();
        r.range = Some(TimeRange {
            since_ms: since,
            until_ms: until,
        });
        diagnose(&r).unwrap()
    };
    let (a, b) = (ranged(i64::MIN, at), ranged(at, i64::MAX));
    let ctx = format!("{case} split at {at_s} s");
    // Joined, the two slices are the whole diagnosis, field for field but the latency figures
    // of the timeline's bins that join bins of the slices: the one where both slices'
    // requests meet, and every bin when a slice's bins are narrower (the histograms are not
    // kept).
    let joined = slices::join(b.clone(), a.clone()).unwrap();
    let (mut j, mut w) = (v(&joined), v(whole));
    let w_ms = whole.timeline.bin_ms;
    let rebinned = a.timeline.bin_ms < w_ms || b.timeline.bin_ms < w_ms;
    for x in [&mut j, &mut w] {
        for p in x["timeline"]["points"].as_array_mut().unwrap() {
            let t = p["t_ms"].as_i64().unwrap();
            if rebinned || (t <= at && at < t + w_ms) {
                p["latency_ms"] = Value::Null;
            }
        }
    }
    assert_json_eq(&j, &w, &ctx);
    let summed = sum(&additive(&a), &additive(&b));
    // Zeros a range leaves out of its maps are in the sum's; compare without them.
    assert_eq!(strip(&summed), strip(&additive(whole)), "{ctx}");
    assert_eq!(
        sum(&timeline(&a), &timeline(&b)),
        timeline(whole),
        "{ctx}: the timelines"
    );
    assert_eq!(
        a.passes.max_passes.max(b.passes.max_passes),
        whole.passes.max_passes,
        "{ctx}"
    );
    let (la, lb, lw) = (lists(&a), lists(&b), lists(whole));
    let names = ["incidents", "swaps", "NLU events", "answer changes"];
    for i in 0..4 {
        let cut = (i == 1 && whole.swaps as usize > whole.swap_list.len())
            || (i == 2 && (whole.nlu_events_truncated || a.nlu_events_truncated));
        if !cut {
            assert_eq!(concat(&la[i], &lb[i]), lw[i], "{ctx}: the {}", names[i]);
        }
    }
    let ends = |d: &Diagnosis| d.start_ms.into_iter().chain(d.end_ms);
    assert_eq!(
        (
            ends(&a).chain(ends(&b)).min(),
            ends(&a).chain(ends(&b)).max()
        ),
        (whole.start_ms, whole.end_ms),
        "{ctx}: the first and last request"
    );
    for s in &whole.signatures {
        let first = [&a, &b]
            .iter()
            .find_map(|d| d.signatures.iter().find(|x| x.id == s.id))
            .map(|x| &x.first.at);
        assert_eq!(first, Some(&s.first.at), "{ctx}: {}'s first line", s.id);
    }
}

/// Two JSON documents equal, or the first lines where they differ.
fn assert_json_eq(got: &Value, want: &Value, ctx: &str) {
    let (g, w) = (
        serde_json::to_string_pretty(got).unwrap(),
        serde_json::to_string_pretty(want).unwrap(),
    );
    if g != w {
        if let Ok(d) = std::env::var("RANGES_DUMP") {
            std::fs::write(format!("{d}/got.json"), &g).unwrap();
            std::fs::write(format!("{d}/want.json"), &w).unwrap();
        }
        let (g, w): (Vec<&str>, Vec<&str>) = (g.lines().collect(), w.lines().collect());
        let i = g.iter().zip(&w).position(|(a, b)| a != b).unwrap_or(0);
        panic!(
            "{ctx}: the joined slices differ from the whole at line {i}:\n got: {}\nwant: {}",
            g[i.saturating_sub(4)..(i + 3).min(g.len())].join("\n"),
            w[i.saturating_sub(4)..(i + 3).min(w.len())].join("\n"),
        );
    }
}

/// A JSON value without its zero numbers and the maps they empty.
fn strip(x: &Value) -> Value {
    match x {
        Value::Object(m) => m
            .iter()
            .map(|(k, v)| (k.clone(), strip(v)))
            .filter(|(_, v)| !(v == &Value::from(0) || v == &Value::Object(Map::new())))
            .collect::<Map<_, _>>()
            .into(),
        Value::Array(a) => Value::Array(a.iter().map(strip).collect()),
        _ => x.clone(),
    }
}

/// Split each case at a seeded second, in the middle, and just after each of its first three
/// incidents start.
fn check(o: &Options, seed: u64, case: &str) -> usize {
    let whole = diagnose(o).unwrap();
    // An error log read alone has incidents and no requests.
    let times = || {
        let incidents = whole.incidents.iter().flat_map(|i| [i.start_ms, i.end_ms]);
        whole
            .start_ms
            .into_iter()
            .chain(whole.end_ms)
            .chain(incidents)
    };
    let (Some(s), Some(e)) = (times().min(), times().max()) else {
        return 0;
    };
    let mut at: Vec<i64> = vec![(s + e) / 2000];
    at.push(s / 1000 + Rng(seed).below((e - s) as u64 / 1000 + 1) as i64);
    at.extend(
        whole
            .incidents
            .iter()
            .take(3)
            .map(|i| i.start_ms / 1000 + 1),
    );
    at.sort_unstable();
    at.dedup();
    for &t in &at {
        check_split(o, &whole, t, case);
    }
    at.len()
}

#[test]
fn adjacent_ranges_add_up_to_the_whole_on_every_real_excerpt() {
    let mut splits = 0;
    for (seed, o) in real_cases() {
        splits += check(&o, seed, &format!("{:?}", [&o.access, &o.error, &o.mixed]));
    }
    eprintln!("{splits} splits");
    assert!(splits >= 150, "{splits} splits");
}

#[test]
fn adjacent_ranges_add_up_to_the_whole_on_recorded_lab_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let mut splits = 0;
    for (seed, o) in lab_cases(tmp.path()) {
        splits += check(&o, seed, &format!("{:?}", o.access));
    }
    eprintln!("{splits} splits");
    assert!(splits >= 20, "{splits} splits");
}

/// What a range keeps out is context, not absence: a failure just after the range's end
/// still classes an incident that started inside it, and the range says what it covers.
#[test]
fn a_range_is_recorded_and_an_empty_one_counts_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let (_, o) = lab_cases(tmp.path()).remove(0);
    let whole = diagnose(&o).unwrap();
    let mut r = o.clone();
    let after = whole.end_ms.unwrap() + 60_000;
    r.range = Some(TimeRange {
        since_ms: after,
        until_ms: after + 1000,
    });
    let d = diagnose(&r).unwrap();
    assert_eq!(d.range, r.range);
    assert_eq!((d.requests, d.failures, d.start_ms), (0, 0, None));
    assert!(d.incidents.is_empty() && d.classes.is_empty());
    let json = serde_json::to_value(&d).unwrap();
    assert_eq!(json["range"]["since_ms"], after);
    assert!(serde_json::to_value(&whole).unwrap().get("range").is_none());
}

#[test]
fn a_range_is_read_from_rfc3339_seconds() {
    let r = TimeRange::parse(
        Some("2026-12-06T02:00:00Z"),
        Some("2026-12-06T02:30:00+00:00"),
    )
    .unwrap();
    assert_eq!(r.until_ms - r.since_ms, 1_800_000);
    assert!(r.contains(r.since_ms) && !r.contains(r.until_ms));
    let open = TimeRange::parse(None, Some("2026-12-06T02:00:00Z")).unwrap();
    assert_eq!(open.since_ms, i64::MIN);
    for (s, u, want) in [
        (Some("02:00"), None, "not an RFC 3339 time"),
        (Some("2026-12-06T02:00:00.5Z"), None, "whole seconds"),
        (
            Some("2026-12-06T02:00:00Z"),
            Some("2026-12-06T02:00:00Z"),
            "not before",
        ),
    ] {
        let e = TimeRange::parse(s, u).unwrap_err();
        assert!(e.contains(want), "{e}");
    }
}

/// The property over instances and time at once: three recorded runs stand for three
/// instances, each cut into three time slices at seeded seconds; the nine slices' partials,
/// merged from files in a seeded order, are byte for byte the partial of the three instances'
/// whole diagnoses (their spans need 1 s bins, so no bin is shared by two slices). Slices with
/// a gap between them are refused, naming the instance.
#[test]
fn time_slices_of_instances_merge_into_the_partial_of_everything() {
    use resolvelab_diagnose::fleet::{Merge, Partial};
    let tmp = tempfile::tempdir().unwrap();
    let mut rng = Rng(47);
    let mut want: Option<Partial> = None;
    let mut files = Vec::new();
    let mut gap = None;
    for (k, (_, o)) in lab_cases(tmp.path())
        .into_iter()
        .filter(|(_, o)| {
            let d = diagnose(o).unwrap();
            d.timeline.bin_ms == 1000 && !d.incidents.is_empty()
        })
        .take(3)
        .enumerate()
    {
        let name = format!("nginx-{k}");
        let whole = diagnose(&o).unwrap();
        let one = Partial::one(&name, whole.clone()).unwrap();
        want = Some(match want {
            None => one,
            Some(w) => w.merge(one).unwrap(),
        });
        let (s, e) = (whole.start_ms.unwrap() / 1000, whole.end_ms.unwrap() / 1000);
        let mut cuts = [
            s + 1 + rng.below((e - s) as u64) as i64,
            whole.incidents[0].start_ms / 1000 + 1,
        ];
        cuts.sort_unstable();
        let edges = [
            vec![i64::MIN],
            cuts.iter().map(|c| c * 1000).collect(),
            vec![i64::MAX],
        ]
        .concat();
        for (j, w) in edges.windows(2).enumerate() {
            let mut r = o.clone();
            r.range = Some(TimeRange {
                since_ms: w[0],
                until_ms: w[1],
            });
            let f = tmp.path().join(format!("{name}-{j}.json"));
            std::fs::write(
                &f,
                Partial::one(&name, diagnose(&r).unwrap())
                    .unwrap()
                    .to_json(),
            )
            .unwrap();
            if j == 1 {
                gap = Some(f.clone());
            }
            files.push(f);
        }
    }
    assert_eq!(files.len(), 9, "three runs with 1 s bins and an incident");
    for i in (1..files.len()).rev() {
        files.swap(i, rng.below(i as u64 + 1) as usize);
    }
    let mut m = Merge::new();
    for f in &files {
        m.add(f).unwrap();
    }
    let mut out = Vec::new();
    m.write_partial(&mut out).unwrap();
    assert_eq!(String::from_utf8(out).unwrap(), want.unwrap().to_json());
    // The middle slice of nginx-0 left out: a gap.
    let mut m = Merge::new();
    for f in files.iter().filter(|f| Some(*f) != gap.as_ref()) {
        m.add(f).unwrap();
    }
    let e = m.fleet().unwrap_err().to_string();
    assert!(
        e.starts_with("instance `nginx-2`: ") && e.contains("leave the time between them out"),
        "{e}"
    );
}

/// `o`'s inputs cut to the lines within `[since - margin, until + margin)`, written into `dir`:
/// what a log store's query for one slice and its context returns.
fn local(o: &Options, r: TimeRange, margin_ms: i64, dir: &std::path::Path) -> Options {
    use resolvelab_history::MemoryMatcher;
    let (lo, hi) = (
        r.since_ms.saturating_sub(margin_ms),
        r.until_ms.saturating_add(margin_ms),
    );
    let within = |t_ms: i64| lo <= t_ms && t_ms < hi;
    std::fs::create_dir_all(dir).unwrap();
    let read = |p: &std::path::Path| -> Vec<Vec<u8>> {
        let b = std::fs::read(p).unwrap();
        let mut v: Vec<Vec<u8>> = b.split(|c| *c == b'\n').map(<[u8]>::to_vec).collect();
        if v.last().is_some_and(Vec::is_empty) {
            v.pop();
        }
        v
    };
    let write = |name: &str, lines: Vec<&Vec<u8>>| {
        let p = dir.join(name);
        let mut text = Vec::new();
        for l in lines {
            text.extend_from_slice(l);
            text.push(b'\n');
        }
        std::fs::write(&p, text).unwrap();
        p
    };
    let mut out = o.clone();
    out.access = Vec::new();
    for (k, p) in o.access.iter().enumerate() {
        let lines = read(p);
        let mut keep = vec![false; lines.len()];
        let mut m = MemoryMatcher::new(p, &o.log_format, false, 0);
        m.feed(lines.iter().map(Vec::as_slice), 1, |a| {
            keep[a.line as usize - 1] = within(a.t_us / 1000);
        });
        let kept = lines
            .iter()
            .zip(&keep)
            .filter(|x| *x.1)
            .map(|x| x.0)
            .collect();
        out.access.push(write(&format!("access{k}.log"), kept));
    }
    out.error = Vec::new();
    for (k, p) in o.error.iter().enumerate() {
        let mut inside = false;
        let mut kept = Vec::new();
        let lines = read(p);
        for l in &lines {
            if let Some(t) = l
                .get(..19)
                .and_then(resolvelab_history::time::parse_error_time)
            {
                inside = within(t * 1000 - o.tz_offset_s.unwrap_or(0) as i64 * 1000);
            }
            if inside {
                kept.push(l);
            }
        }
        out.error.push(write(&format!("error{k}.log"), kept));
    }
    for (list, name) in [(&mut out.dns, "dns"), (&mut out.events, "events")] {
        for p in list.iter_mut() {
            let lines = read(p);
            let kept = lines
                .iter()
                .enumerate()
                .filter(|(i, l)| {
                    *i == 0 || {
                        let v: Value = serde_json::from_slice(l).unwrap();
                        v["t_us"].as_i64().is_some_and(|t| within(t / 1000))
                    }
                })
                .map(|x| x.1)
                .collect();
            *p = write(&format!("{name}.jsonl"), kept);
        }
    }
    out
}

/// What a diagnosis says, without where it read it: its counts, classes, incidents by class,
/// upstream, time and size, swaps, the re-query period and the moves followed.
fn said(d: &Diagnosis) -> Value {
    let incidents: Vec<Value> = d
        .incidents
        .iter()
        .map(|i| serde_json::json!([i.class, i.upstream, i.start_ms, i.end_ms, i.count, i.nlu]))
        .collect();
    serde_json::json!({
        "additive": strip(&additive(d)),
        "incidents": incidents,
        "requery": d.requery_period_ms,
        "follow": d.swap_follow.as_ref().map(|f| (f.moves, f.followed, f.median_ms, f.max_ms)),
    })
}

/// Slices given only their own lines and `margin` of context on each side, as a log store's
/// query for each slice returns them: joined, they say what the whole diagnosis says (counts,
/// classes, incidents, swaps, moves; the re-query period is a median of what each read, see
/// docs/diagnose.md), or the join names the context that was missing at an edge. Measured on
/// the recorded lab runs, three slices each: with 5 s of context 7 of 15 joins are the
/// same (each other one says why), with 15 s 12 (the rest differ only in the period's median,
/// by at most 1 ms, or say why), with 30 s all 15.
#[test]
fn slices_with_local_context_join_to_the_whole_or_say_what_was_missing() {
    let tmp = tempfile::tempdir().unwrap();
    let without_period = |d: &Diagnosis| {
        let mut v = said(d);
        v["requery"] = Value::Null;
        v
    };
    for (margin_s, want_same) in [(5i64, 7), (15, 12), (30, 15)] {
        let (mut same, mut all) = (0, 0);
        for (seed, o) in lab_cases(tmp.path()) {
            let whole = diagnose(&o).unwrap();
            let (Some(s), Some(e)) = (whole.start_ms, whole.end_ms) else {
                continue;
            };
            let mut rng = Rng(seed);
            let mut cuts = [
                s / 1000 + 1 + rng.below(((e - s) / 1000) as u64) as i64,
                whole
                    .incidents
                    .first()
                    .map_or(s / 1000 + 2, |i| i.start_ms / 1000 + 1),
            ];
            cuts.sort_unstable();
            let edges = [i64::MIN, cuts[0] * 1000, cuts[1] * 1000, i64::MAX];
            let parts: Vec<Diagnosis> = edges
                .windows(2)
                .enumerate()
                .map(|(j, w)| {
                    let r = TimeRange {
                        since_ms: w[0],
                        until_ms: w[1],
                    };
                    let dir = tmp.path().join(format!("s{seed}-{margin_s}-{j}"));
                    let mut lo = local(&o, r, margin_s * 1000, &dir);
                    lo.range = Some(r);
                    diagnose(&lo).unwrap()
                })
                .collect();
            let j = slices::join_all(parts).unwrap();
            all += 1;
            let told = j.evidence.missing.iter().any(|m| {
                m.what.starts_with("a slice's logs past") || m.what.starts_with("context around")
            });
            if said(&j) == said(&whole) {
                same += 1;
            } else {
                assert!(
                    told || without_period(&j) == without_period(&whole),
                    "{margin_s} s of context, {:?}: the join differs and does not say why:\n got  {}\n want {}",
                    o.access,
                    said(&j),
                    said(&whole)
                );
            }
        }
        assert_eq!((same, all), (want_same, 15), "{margin_s} s of context");
    }
}
