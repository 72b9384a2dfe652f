//! The incremental checker ([`Incremental`]) against `diagnose` of the same files: fed in
//! chunks of any size, with snapshots taken along the way, its last snapshot is the
//! diagnosis of the whole files — field for field — and a snapshot taken along the way is
//! the diagnosis of the lines fed so far. On the real production excerpts
//! (`tests/fixtures/real`) and on recorded lab runs (`tests/fixtures/diagnose/real`).

mod common;

use common::{Rng, lab_cases, real_cases};
use resolvelab_diagnose::checker::incremental::Incremental;
use resolvelab_diagnose::checker::tally::Stream;
use resolvelab_diagnose::{Options, diagnose};
use resolvelab_history::errorlog::is_continuation;
use std::path::{Path, PathBuf};

fn lines(p: &Path) -> Vec<Vec<u8>> {
    let b = std::fs::read(p).unwrap();
    let mut v: Vec<Vec<u8>> = b.split(|c| *c == b'\n').map(<[u8]>::to_vec).collect();
    if v.last().is_some_and(Vec::is_empty) {
        v.pop();
    }
    v
}

fn json(d: &resolvelab_diagnose::Diagnosis) -> String {
    serde_json::to_string_pretty(d).unwrap()
}

/// The streams of `o`, in the order `Incremental::new` is given them.
fn streams(o: &Options) -> Vec<(Stream, PathBuf)> {
    let mut out = Vec::new();
    for (v, k) in [
        (&o.dns, Stream::Dns),
        (&o.error, Stream::Error),
        (&o.mixed, Stream::Mixed),
        (&o.access, Stream::Access),
    ] {
        out.extend(v.iter().map(|p| (k, p.clone())));
    }
    out
}

/// Feed every stream of `o` in random chunks — the error and DNS streams first, then the
/// access and mixed ones — with a snapshot after some chunks; the last snapshot must equal
/// `diagnose(o)`, and one snapshot taken along the way must equal the diagnosis of the
/// access lines fed so far (written to a file of their own) beside the whole error log.
fn check(o: &Options, seed: u64, tmp: &Path) {
    let want = json(&diagnose(o).unwrap());
    let ss = streams(o);
    let mut c = Incremental::new(o, &ss).unwrap();
    let mut rng = Rng(seed);
    let mut checked_midway = false;
    for (k, (kind, path)) in ss.iter().enumerate() {
        let all = lines(path);
        let mut at = 0usize;
        while at < all.len() {
            let n = 1 + rng.below(400.min(all.len() as u64)) as usize;
            let mut end = (at + n).min(all.len());
            // nginx writes a multi-line entry (a Lua traceback) at once: it is fed whole.
            while *kind != Stream::Access && end < all.len() && is_continuation(&all[end]) {
                end += 1;
            }
            c.feed(k, all[at..end].iter().map(Vec::as_slice), at as u64 + 1)
                .unwrap();
            at = end;
            if rng.below(4) == 0 && at < all.len() {
                let mid = c.snapshot().unwrap();
                if *kind == Stream::Access && !checked_midway && o.access.len() == 1 {
                    checked_midway = true;
                    let part = tmp.join(format!("part-{seed}.log"));
                    let mut text = all[..at].join(&b'\n');
                    text.push(b'\n');
                    std::fs::write(&part, text).unwrap();
                    let mut po = o.clone();
                    po.access = vec![part.clone()];
                    let expect = json(&diagnose(&po).unwrap())
                        .replace(&part.display().to_string(), &path.display().to_string());
                    assert_eq!(
                        json(&mid),
                        expect,
                        "{}: a snapshot after {at} access lines is not their diagnosis",
                        path.display()
                    );
                }
            }
        }
    }
    let got = json(&c.snapshot().unwrap());
    if got != want {
        let (g, w): (Vec<&str>, Vec<&str>) = (got.lines().collect(), want.lines().collect());
        let i = g.iter().zip(&w).position(|(a, b)| a != b).unwrap_or(0);
        panic!(
            "{:?}: the incremental checker differs from diagnose at line {i}:\n got: {}\nwant: {}",
            ss,
            g[i.saturating_sub(3)..(i + 3).min(g.len())].join("\n"),
            w[i.saturating_sub(3)..(i + 3).min(w.len())].join("\n"),
        );
    }
}

/// The real excerpts, split and as their original stream, with the format their truth names.
#[test]
fn fed_in_chunks_it_is_diagnose_on_every_real_excerpt() {
    let tmp = tempfile::tempdir().unwrap();
    let cases = real_cases();
    assert!(cases.len() >= 90, "{} cases", cases.len());
    for (seed, o) in &cases {
        check(o, *seed, tmp.path());
    }
}

/// Recorded lab runs (every class of the checker, with their DNS logs and events).
#[test]
fn fed_in_chunks_it_is_diagnose_on_recorded_lab_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let cases = lab_cases(tmp.path());
    assert!(cases.len() >= 8);
    for (seed, o) in &cases {
        check(o, *seed, tmp.path());
    }
}
