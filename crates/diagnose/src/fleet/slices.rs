//! Time slices of one instance: the diagnoses of adjacent time ranges (`diagnose --since
//! --until`, [`TimeRange`]) joined into the diagnosis of their union.
//!
//! A ranged diagnosis counts what falls in its range and reads the lines around it as context
//! (an incident is the range's where it starts, whole), so slices that read the same lines
//! join into exactly the diagnosis of everything: counts summed, lists concatenated in time
//! order, incidents numbered again, classes and signature notes said again of the sums. What a
//! join cannot recompute from the slices is documented at [`join`].
//!
//! ```
//! use resolvelab_diagnose::{Diagnosis, TimeRange};
//! use resolvelab_diagnose::fleet::slices::join;
//! # let d = || serde_json::from_str::<Diagnosis>(
//! #     include_str!("../../tests/data/one-request-diagnosis.json")).unwrap();
//! let (mut a, mut b) = (d(), d());
//! a.range = Some(TimeRange { since_ms: i64::MIN, until_ms: 1_000 });
//! b.range = Some(TimeRange { since_ms: 1_000, until_ms: i64::MAX });
//! let both = join(b, a).unwrap();
//! assert_eq!(both.range, None); // the two open ends: everything
//! assert_eq!(both.requests, 2 * d().requests);
//! ```

use crate::TimeRange;
use crate::checker::{
    CLUSTER_GAP_MS, MAX_MOVES_LISTED, MAX_NLU_EVENTS, MAX_SWAPS_LISTED, MAX_ZOOMS, class_summaries,
    judged,
};
use crate::classes::SIGNATURES;
use crate::evidence::{Missing, Race, pairing_missing};
use crate::verdict::{
    Diagnosis, DiagnosisStatus, InputsInfo, NluCounts, ParseInfo, PassCounts, Series, Signature,
    SwapFollow,
};
use std::collections::BTreeMap;

/// The diagnosis of two adjacent time slices of one instance, in either order. Refused when a
/// diagnosis has no range or the ranges leave a gap or overlap.
///
/// Exact for slices that read the same lines (each slice's context the whole logs). Said
/// again from the slices, and so only as exact as they are when slices read only their own
/// part of the logs: the re-query period (a median: the slice's with more swaps when they
/// differ), a timeline bin where both slices' requests meet (its latency figures are the
/// highest of theirs), the median time to follow a swap beyond 1,000 moves, and a
/// `host not found in upstream` note (the earlier slice's).
pub fn join(x: Diagnosis, y: Diagnosis) -> anyhow::Result<Diagnosis> {
    let (Some(rx), Some(ry)) = (x.range, y.range) else {
        anyhow::bail!(
            "two diagnoses of one instance without a time range: diagnose each time slice with --since/--until, or all of the instance's logs in one run"
        );
    };
    let (a, b, ra, rb) = match rx.since_ms <= ry.since_ms {
        true => (x, y, rx, ry),
        false => (y, x, ry, rx),
    };
    if ra.until_ms != rb.since_ms {
        let word = if ra.until_ms < rb.since_ms {
            "leave the time between them out"
        } else {
            "overlap"
        };
        anyhow::bail!(
            "time slices {} and {} {word}: slices join only when one's --until is the next one's --since",
            show(ra),
            show(rb)
        );
    }
    Ok(joined(a, b, ra, rb))
}

/// Several slices of one instance, in any order, joined ([`join`]).
pub fn join_all(mut slices: Vec<Diagnosis>) -> anyhow::Result<Diagnosis> {
    // An empty slice (`--since T --until T`) comes before the one that starts at T.
    slices.sort_by_key(|d| d.range.map(|r| (r.since_ms, r.until_ms)));
    let mut it = slices.into_iter();
    let first = it
        .next()
        .ok_or_else(|| anyhow::anyhow!("no slice to join"))?;
    it.try_fold(first, join)
}

/// A range as the flags wrote it.
fn show(r: TimeRange) -> String {
    let at = |t: i64, open: i64| match t == open {
        true => "…".to_string(),
        false => resolvelab_core::time::rfc3339(t * 1000),
    };
    format!(
        "[{}, {})",
        at(r.since_ms, i64::MIN),
        at(r.until_ms, i64::MAX)
    )
}

/// `a`'s range ends where `b`'s starts.
fn joined(a: Diagnosis, b: Diagnosis, ra: TimeRange, rb: TimeRange) -> Diagnosis {
    let notes = context_notes(&a, &b);
    let range = TimeRange {
        since_ms: ra.since_ms,
        until_ms: rb.until_ms,
    };
    let mut incidents = [a.incidents, b.incidents].concat();
    for (k, i) in incidents.iter_mut().enumerate() {
        i.id = k + 1;
        // A diagnosis zooms into its first incidents only.
        if k >= MAX_ZOOMS {
            i.zoom = Series::default();
        }
    }
    let race = match a.evidence.race.as_str() {
        "ruled-out" => Race::RuledOut,
        "possible" => Race::Possible,
        _ => Race::Unknown,
    };
    let (requery_period_ms, requery_source) = match a.requery_period_ms == b.requery_period_ms {
        true => (a.requery_period_ms, a.requery_source),
        false if b.swaps > a.swaps => (b.requery_period_ms, b.requery_source),
        false => (a.requery_period_ms, a.requery_source),
    };
    let mut nlu_events = [a.nlu_events, b.nlu_events].concat();
    let nlu_events_truncated =
        a.nlu_events_truncated || b.nlu_events_truncated || nlu_events.len() > MAX_NLU_EVENTS;
    nlu_events.truncate(MAX_NLU_EVENTS);
    let mut swap_list = [a.swap_list, b.swap_list].concat();
    swap_list.truncate(MAX_SWAPS_LISTED);
    let mut evidence = a.evidence.clone();
    for m in &b.evidence.missing {
        if !evidence.missing.contains(m) {
            evidence.missing.push(m.clone());
        }
    }
    // Each slice's pairing loss said again of their sum.
    let losses = [a.parse.pairing_loss, b.parse.pairing_loss];
    let said: Vec<Missing> = losses.iter().flatten().map(pairing_missing).collect();
    evidence.missing.retain(|m| !said.contains(m));
    if let Some(l) = losses.into_iter().flatten().reduce(|x, y| x + y) {
        evidence.missing.push(pairing_missing(&l));
    }
    evidence.missing.extend(notes);
    let all = range == TimeRange::ALL;
    Diagnosis {
        schema: a.schema,
        inputs: inputs(a.inputs, b.inputs),
        range: (!all).then_some(range),
        read_ms: match (a.read_ms, b.read_ms) {
            _ if all => None,
            (Some(x), Some(y)) => Some((x.0.min(y.0), x.1.max(y.1))),
            (x, y) => x.or(y),
        },
        start_ms: a.start_ms.or(b.start_ms),
        end_ms: b.end_ms.or(a.end_ms),
        status: match (a.status, b.status) {
            (None, None) => None,
            (Some(DiagnosisStatus::Partial), _) | (_, Some(DiagnosisStatus::Partial)) => {
                Some(DiagnosisStatus::Partial)
            }
            _ => Some(DiagnosisStatus::Completed),
        },
        requests: a.requests + b.requests,
        http_status: add(a.http_status, b.http_status),
        upstream_requests: {
            let mut m = a.upstream_requests;
            for (k, v) in b.upstream_requests {
                let e = m.remove(&k).unwrap_or_default();
                m.insert(k, add(e, v));
            }
            m
        },
        failures: a.failures + b.failures,
        nlu: nlu(a.nlu, b.nlu),
        passes: passes(a.passes, b.passes),
        swaps: a.swaps + b.swaps,
        swap_source: match a.swap_source.as_str() {
            "none" => b.swap_source,
            _ => a.swap_source,
        },
        swap_directions: add(a.swap_directions, b.swap_directions),
        nlu_by_swap_direction: add(a.nlu_by_swap_direction, b.nlu_by_swap_direction),
        swap_list,
        requery_period_ms,
        requery_source,
        swap_follow: follow(a.swap_follow, b.swap_follow),
        classes: class_summaries(&incidents, race),
        incidents,
        signatures: signatures(a.signatures, b.signatures),
        nlu_events,
        nlu_events_truncated,
        timeline: crate::timeline::merge(&a.timeline, &b.timeline),
        parse: parse(a.parse, b.parse),
        evidence,
    }
}

/// What two adjacent slices' logs leave out at their edge, where the other slice shows that
/// more logs existed. Said, never guessed:
/// - an incident of the earlier slice runs to the last line it read: its rest is counted by
///   neither slice (the later one leaves it to the slice it started in);
/// - the later slice read less than one re-query period before its `--since`: a swap or an
///   answer change before it, which classes its first failures, may be unseen;
/// - either read less than [`NEAR_NLU_MS`] past the edge: a signature's lines near an NLU
///   on the other side are not counted as such.
fn context_notes(a: &Diagnosis, b: &Diagnosis) -> Vec<Missing> {
    let (Some(ra), Some(rb), Some(ea), Some(sb)) = (
        a.read_ms,
        b.read_ms,
        a.range.map(|r| r.until_ms),
        b.range.map(|r| r.since_ms),
    ) else {
        return Vec::new();
    };
    let at = |t: i64| resolvelab_core::time::rfc3339(t * 1000);
    let mut out = Vec::new();
    let more_after = rb.1 > ra.1 + CLUSTER_GAP_MS;
    if let Some(i) = a
        .incidents
        .iter()
        .find(|i| more_after && i.end_ms + CLUSTER_GAP_MS > ra.1)
    {
        out.push(Missing {
            what: format!(
                "a slice's logs past {}: its incident {} ({}, from {}) runs to its last line, and the next slice's logs go on",
                at(ra.1),
                i.id,
                i.class.id(),
                at(i.start_ms)
            ),
            decides: "how long that incident lasted and how many requests it failed (a lower bound here), and its class were it to change: neither slice counts its rest".into(),
            add: "give each slice the logs after its --until as far as its incidents go on".into(),
        });
    }
    let period = b.requery_period_ms.or(a.requery_period_ms).unwrap_or(0.0) as i64;
    let need = period.max(NEAR_NLU_MS);
    let short_before = sb.saturating_sub(rb.0) < need && ra.0 < rb.0;
    let short_after = ra.1.saturating_sub(ea) < NEAR_NLU_MS && more_after;
    if short_before || short_after {
        out.push(Missing {
            what: format!(
                "context around the slices' edge at {}: {} s of logs before it in the later slice, {} s after it in the earlier one",
                at(sb),
                sb.saturating_sub(rb.0).max(0) / 1000,
                ra.1.saturating_sub(ea).max(0) / 1000
            ),
            decides: format!(
                "a swap or an answer change within one re-query period ({} ms) before the edge, which classes the first failures after it, and the signatures' lines within 10 s of an NLU across it",
                period
            ),
            add: format!(
                "give each slice at least {} s of logs before its --since and {} s after its --until",
                (need + 999) / 1000,
                NEAR_NLU_MS / 1000
            ),
        });
    }
    out
}

/// How far around an error line an NLU makes it `near_nlu` (`totals::summarize_signatures`:
/// 10 s before, 11 s after).
const NEAR_NLU_MS: i64 = 11_000;

/// Counts by key, summed.
fn add(mut a: BTreeMap<String, u64>, b: BTreeMap<String, u64>) -> BTreeMap<String, u64> {
    for (k, v) in b {
        *a.entry(k).or_default() += v;
    }
    a
}

fn nlu(a: NluCounts, b: NluCounts) -> NluCounts {
    NluCounts {
        total: a.total + b.total,
        one_hop: a.one_hop + b.one_hop,
        two_hop: a.two_hop + b.two_hop,
        multi_hop: a.multi_hop + b.multi_hop,
        unknown_hops: a.unknown_hops + b.unknown_hops,
        paired: a.paired + b.paired,
    }
}

fn passes(a: PassCounts, b: PassCounts) -> PassCounts {
    PassCounts {
        multi_pass: a.multi_pass + b.multi_pass,
        max_passes: a.max_passes.max(b.max_passes),
        internal_nlu: a.internal_nlu + b.internal_nlu,
        internal_paired: a.internal_paired + b.internal_paired,
        rescued: a.rescued + b.rescued,
        internal_by_class: add(a.internal_by_class, b.internal_by_class),
    }
}

/// The same inputs, or both slices' files.
fn inputs(mut a: InputsInfo, b: InputsInfo) -> InputsInfo {
    if a == b {
        return a;
    }
    let union = |x: &mut Vec<String>, y: Vec<String>| {
        for v in y {
            if !x.contains(&v) {
                x.push(v);
            }
        }
    };
    union(&mut a.access, b.access);
    union(&mut a.error, b.error);
    union(&mut a.mixed, b.mixed);
    union(&mut a.dns, b.dns);
    union(&mut a.events, b.events);
    union(&mut a.tz_changes, b.tz_changes);
    a
}

/// Each file once: slices that read the same file read it alike.
fn parse(a: ParseInfo, b: ParseInfo) -> ParseInfo {
    let mut files = a.files;
    for f in b.files {
        if !files.contains(&f) {
            files.push(f);
        }
    }
    let pairing_loss = match (a.pairing_loss, b.pairing_loss) {
        (Some(x), Some(y)) => Some(x + y),
        (x, y) => x.or(y),
    };
    ParseInfo {
        malformed: files.iter().map(|f| f.malformed).sum(),
        files,
        pairing_loss,
    }
}

/// The moves of both slices; the median again from the listed moves when they are all listed.
fn follow(a: Option<SwapFollow>, b: Option<SwapFollow>) -> Option<SwapFollow> {
    let (a, b) = match (a, b) {
        (Some(a), Some(b)) => (a, b),
        (x, y) => return x.or(y),
    };
    let moves = a.moves + b.moves;
    let mut list = [a.list, b.list].concat();
    let median_ms = if list.len() as u64 == moves {
        let mut t: Vec<i64> = list.iter().filter_map(|f| f.after_ms).collect();
        t.sort_unstable();
        (!t.is_empty()).then(|| t[(t.len() - 1) / 2])
    } else if b.moves > a.moves {
        b.median_ms
    } else {
        a.median_ms
    };
    list.truncate(MAX_MOVES_LISTED);
    Some(SwapFollow {
        moves,
        followed: a.followed + b.followed,
        median_ms,
        max_ms: a.max_ms.max(b.max_ms),
        list,
    })
}

/// Each signature's lines summed, its first line the earlier slice's, and what it means said
/// again of the sums.
fn signatures(a: Vec<Signature>, b: Vec<Signature>) -> Vec<Signature> {
    let mut out = Vec::new();
    for def in SIGNATURES {
        let find = |v: &[Signature]| v.iter().position(|s| s.id == def.id);
        let (x, y) = (
            find(&a).map(|i| a[i].clone()),
            find(&b).map(|i| b[i].clone()),
        );
        let (x, y) = match (x, y) {
            (Some(x), Some(y)) => (x, y),
            (Some(s), None) | (None, Some(s)) => {
                out.push(s);
                continue;
            }
            (None, None) => continue,
        };
        let (count, near_nlu, caused) = (
            x.count + y.count,
            x.near_nlu + y.near_nlu,
            x.caused + y.caused,
        );
        let (harmless, note) = judged(def.sig, caused, near_nlu, || x.note.clone());
        out.push(Signature {
            count,
            near_nlu,
            caused,
            harmless,
            note,
            ..x
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slice(since: i64, until: i64) -> Diagnosis {
        let mut d: Diagnosis =
            serde_json::from_str(include_str!("../../tests/data/one-request-diagnosis.json"))
                .unwrap();
        d.range = Some(TimeRange {
            since_ms: since,
            until_ms: until,
        });
        d
    }

    #[test]
    fn gaps_overlaps_and_slices_without_a_range_are_refused() {
        let e = join(slice(0, 1000), slice(2000, 3000))
            .unwrap_err()
            .to_string();
        assert!(e.contains("leave the time between them out"), "{e}");
        let e = join(slice(0, 2000), slice(1000, 3000))
            .unwrap_err()
            .to_string();
        assert!(e.contains("overlap"), "{e}");
        let mut whole = slice(0, 1);
        whole.range = None;
        let e = join(whole, slice(0, 1000)).unwrap_err().to_string();
        assert!(e.contains("without a time range"), "{e}");
    }

    #[test]
    fn incidents_are_numbered_again_in_time_order_and_ranges_grow() {
        let incident = |id: usize, start_ms: i64| -> crate::Incident {
            serde_json::from_value(serde_json::json!({
                "id": id, "class": "upstream-failure", "confidence": 0.85, "upstream": "be",
                "start_ms": start_ms, "end_ms": start_ms, "duration_ms": 0, "count": 1,
                "nlu": 0, "hops": NluCounts::default(), "requests_in_window": 1,
                "share_failed": 1.0, "shape": "point", "after_swap_ms": null,
                "swap_direction": null, "methods": {}, "evidence": [], "explanation": "",
                "fix": "", "zoom": {"bin_ms": 1000, "points": []}
            }))
            .unwrap()
        };
        let (mut a, mut b) = (slice(0, 1000), slice(1000, 2000));
        // Each slice numbers its own incidents from 1.
        a.incidents = vec![incident(1, 500)];
        b.incidents = vec![incident(1, 1500), incident(2, 1800)];
        let j = join_all(vec![b, slice(2000, 3000), a]).unwrap();
        let ids: Vec<usize> = j.incidents.iter().map(|i| i.id).collect();
        assert_eq!(ids, [1, 2, 3]);
        assert_eq!(j.incidents[1].start_ms, 1500);
        assert_eq!((j.classes.len(), j.classes[0].incidents), (1, 3));
        assert_eq!(
            j.range,
            Some(TimeRange {
                since_ms: 0,
                until_ms: 3000
            })
        );
        assert_eq!(j.requests, 3 * slice(0, 1).requests);
    }
}
