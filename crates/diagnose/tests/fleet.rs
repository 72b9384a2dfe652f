//! Fleets: partials of instances merged in any order or grouping give one report, which keeps
//! each instance's own diagnosis, and the fleet's reading of a DNS answer change.
//!
//! The fleet here is emulated from one real-nginx run (`real/nxdomain`: a 6 s NXDOMAIN,
//! `resolver … valid=5s`): its logs shifted by whole seconds stand for instances whose
//! re-queries fell 1, 2 and 3 s later, as they would behind one GSLB name. (The lab's own
//! multi-instance scenarios are issue #47's part 4.) Truth written before the run: one fleet
//! incident on `be`, 4 of 4 instances hit, starts staggered over exactly 3,000 ms, within the
//! 6,000 ms re-query period that `valid=5s` gives → a DNS answer change; the same run unshifted
//! on three instances → the same instant.

use flate2::read::GzDecoder;
use resolvelab_diagnose::fleet::{self, Fleet, Partial, ReadingKind};
use resolvelab_diagnose::{Diagnosis, NginxConf, Options, diagnose};
use resolvelab_history::logformat::LogFormat;
use std::io::Read;
use std::path::{Path, PathBuf};

fn run_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/diagnose/real/nxdomain")
}

fn gunzip(p: &Path) -> String {
    let mut s = String::new();
    GzDecoder::new(std::fs::File::open(p).unwrap())
        .read_to_string(&mut s)
        .unwrap();
    s
}

/// The run's access and error logs with every time `shift_s` seconds later.
fn shifted(dir: &Path, shift_s: i64) -> (PathBuf, PathBuf) {
    let access: String = gunzip(&run_dir().join("access.log.gz"))
        .lines()
        .map(|l| {
            let (t, rest) = l.split_once(' ').unwrap();
            let t: f64 = t.parse().unwrap();
            format!("{:.3} {rest}\n", t + shift_s as f64)
        })
        .collect();
    let error: String = gunzip(&run_dir().join("error.log.gz"))
        .lines()
        .map(|l| {
            // `YYYY/MM/DD HH:MM:SS` (19 bytes): the fixture's clock is UTC.
            let t = jiff::civil::DateTime::strptime("%Y/%m/%d %H:%M:%S", &l[..19]).unwrap();
            let t = t + jiff::SignedDuration::from_secs(shift_s);
            format!("{}{}\n", t.strftime("%Y/%m/%d %H:%M:%S"), &l[19..])
        })
        .collect();
    let (a, e) = (dir.join("access.log"), dir.join("error.log"));
    std::fs::write(&a, access).unwrap();
    std::fs::write(&e, error).unwrap();
    (a, e)
}

/// One instance's diagnosis, as `resolvelab diagnose --nginx-conf nginx.conf` makes it.
fn instance(shift_s: i64) -> Diagnosis {
    let dir = tempfile::tempdir().unwrap();
    let (a, e) = shifted(dir.path(), shift_s);
    let conf = run_dir().join("nginx.conf");
    let mut o = Options::new(vec![a], vec![e]);
    o.log_format = LogFormat::lab();
    o.tz_offset_s = Some(0);
    o.config = Some(NginxConf::read(&conf, &conf).unwrap().facts().unwrap());
    diagnose(&o).unwrap()
}

fn partials(shifts: &[i64]) -> Vec<Partial> {
    with_diagnoses(shifts).0
}

/// The instances' partials and their own diagnoses.
fn with_diagnoses(shifts: &[i64]) -> (Vec<Partial>, Vec<Diagnosis>) {
    let ds: Vec<Diagnosis> = shifts.iter().map(|s| instance(*s)).collect();
    let ps = ds
        .iter()
        .enumerate()
        .map(|(k, d)| Partial::one(&format!("nginx-{k}"), d.clone()).unwrap())
        .collect();
    (ps, ds)
}

/// Every order of the partials, merged left to right and right to left.
fn every_merge(ps: &[Partial]) -> Vec<Partial> {
    let mut orders: Vec<Vec<usize>> = vec![vec![]];
    for _ in 0..ps.len() {
        orders = orders
            .into_iter()
            .flat_map(|o| {
                (0..ps.len())
                    .filter(|i| !o.contains(i))
                    .map(|i| [o.clone(), vec![i]].concat())
                    .collect::<Vec<_>>()
            })
            .collect();
    }
    let mut out = Vec::new();
    for o in orders {
        let left = o.iter().skip(1).fold(ps[o[0]].clone(), |acc, &i| {
            acc.merge(ps[i].clone()).unwrap()
        });
        let right = o
            .iter()
            .rev()
            .skip(1)
            .fold(ps[*o.last().unwrap()].clone(), |acc, &i| {
                ps[i].clone().merge(acc).unwrap()
            });
        out.extend([left, right]);
    }
    out
}

#[test]
fn staggered_instances_read_as_one_answer_change_in_any_merge_order() {
    let (ps, ds) = with_diagnoses(&[0, 1, 2, 3]);
    let merges = every_merge(&ps);
    assert_eq!(merges.len(), 48);
    let first = merges[0].to_json();
    for m in &merges {
        assert_eq!(m.to_json(), first, "merging is associative and commutative");
    }
    let report = |p: &Partial| serde_json::to_string(&Fleet::of_partial(p)).unwrap();
    assert!(merges.iter().all(|m| report(m) == report(&merges[0])));
    let fleet = Fleet::of_partial(&merges[0]);
    // Each instance's diagnosis is kept whole, but for the NLU events cut to a sample.
    for (k, own) in ds.iter().enumerate() {
        let name = format!("nginx-{k}");
        assert!(own.nlu_events.len() > fleet::NLU_EVENTS);
        let mut kept = serde_json::to_value(&merges[0].instances[&name]).unwrap();
        let mut own = serde_json::to_value(own).unwrap();
        let cut = serde_json::json!(own["nlu_events"].as_array().unwrap()[..fleet::NLU_EVENTS]);
        assert!(kept["nlu_events"] == cut, "the first NLU events are kept");
        assert_eq!(kept["nlu_events_truncated"], true);
        for v in [&mut kept, &mut own] {
            let o = v.as_object_mut().unwrap();
            o.remove("nlu_events");
            o.remove("nlu_events_truncated");
        }
        assert!(
            kept == own,
            "{name}: the rest of its diagnosis is kept whole"
        );
    }
    let one = &merges[0].instances["nginx-0"];
    assert_eq!(fleet.requests, 4 * one.requests);
    assert_eq!(fleet.failures, 4 * one.failures);
    assert_eq!(fleet.incidents.len(), 1, "{:#?}", fleet.incidents);
    let i = &fleet.incidents[0];
    assert_eq!((i.upstream.as_str(), i.hit, i.serving), ("be", 4, 4));
    assert_eq!(i.start_spread_ms, 3_000);
    let offsets: Vec<i64> = i.members.iter().map(|m| m.offset_ms).collect();
    assert_eq!(offsets, [0, 1_000, 2_000, 3_000]);
    assert_eq!(
        i.reading.kind,
        ReadingKind::DnsAnswerChange,
        "{}",
        i.reading.text
    );
    assert!(
        i.reading
            .text
            .contains("within one re-query period (6000 ms)"),
        "{}",
        i.reading.text
    );
    assert_eq!(fleet.instances[0].requery_period_ms, Some(6000.0));
}

#[test]
fn a_merge_of_files_writes_the_union_byte_for_byte() {
    let ps = partials(&[0, 2, 3]);
    let dir = tempfile::tempdir().unwrap();
    // Files in another order than the names; one of them already a merge of two.
    let two = ps[2].clone().merge(ps[0].clone()).unwrap();
    let files = [
        (dir.path().join("b.json"), &ps[1]),
        (dir.path().join("a.json"), &two),
    ];
    let mut m = fleet::Merge::new();
    for (f, p) in &files {
        std::fs::write(f, p.to_json()).unwrap();
        m.add(f).unwrap();
    }
    let mut out = Vec::new();
    m.write_partial(&mut out).unwrap();
    let union = ps[0]
        .clone()
        .merge(ps[1].clone())
        .unwrap()
        .merge(ps[2].clone())
        .unwrap();
    assert!(String::from_utf8(out).unwrap() == union.to_json());
    let e = m.add(&files[0].0).unwrap_err().to_string();
    assert!(
        e.contains("b.json: instance `nginx-1` is in two partials"),
        "{e}"
    );
    let (a, b) = (m.fleet().unwrap(), Fleet::of_partial(&union));
    assert_eq!(
        serde_json::to_string(&a).unwrap(),
        serde_json::to_string(&b).unwrap()
    );
}

#[test]
fn instances_failing_at_one_instant_point_at_what_they_share() {
    let ps = partials(&[0, 0, 0]);
    let all = every_merge(&ps).remove(0);
    let fleet = Fleet::of_partial(&all);
    assert_eq!(fleet.incidents.len(), 1);
    let i = &fleet.incidents[0];
    assert_eq!((i.hit, i.start_spread_ms), (3, 0));
    assert_eq!(
        i.reading.kind,
        ReadingKind::SameInstant,
        "{}",
        i.reading.text
    );
}

#[test]
fn without_a_known_period_a_stagger_is_undetermined() {
    // The same instances without their configuration: nothing shows the re-query period.
    let ps: Vec<Partial> = [0, 2]
        .iter()
        .enumerate()
        .map(|(k, s)| {
            let mut d = instance(*s);
            d.evidence.config = None;
            Partial::one(&format!("nginx-{k}"), d).unwrap()
        })
        .collect();
    let all = ps[0].clone().merge(ps[1].clone()).unwrap();
    let fleet = Fleet::of_partial(&all);
    let i = &fleet.incidents[0];
    assert_eq!(
        i.reading.kind,
        ReadingKind::Undetermined,
        "{}",
        i.reading.text
    );
    assert!(
        i.reading
            .text
            .contains("no instance's re-query period is known")
    );
}
