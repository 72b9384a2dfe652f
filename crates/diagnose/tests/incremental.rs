//! The incremental checker ([`Incremental`]) against `diagnose` of the same files: fed in
//! chunks of any size, with snapshots taken along the way, its last snapshot is the
//! diagnosis of the whole files — field for field — and a snapshot taken along the way is
//! the diagnosis of the lines fed so far. On the real production excerpts
//! (`tests/fixtures/real`) and on recorded lab runs (`tests/fixtures/diagnose/real`).

use resolvelab_diagnose::checker::incremental::Incremental;
use resolvelab_diagnose::checker::tally::Stream;
use resolvelab_diagnose::{Options, diagnose};
use resolvelab_history::errorlog::is_continuation;
use resolvelab_history::logformat::LogFormat;
use std::io::Read;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A seeded generator (splitmix64): the chunk sizes and snapshot points of a case.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        (z ^ (z >> 31)) % n.max(1)
    }
}

/// `src` as a plain file in `dir` (a `.gz` fixture unpacked), named `name`.
fn plain(src: &Path, dir: &Path, name: &str) -> PathBuf {
    let mut bytes = Vec::new();
    let f = std::fs::File::open(src).unwrap();
    if src.extension().is_some_and(|e| e == "gz") {
        flate2::read::MultiGzDecoder::new(f)
            .read_to_end(&mut bytes)
            .unwrap();
    } else {
        std::io::BufReader::new(f).read_to_end(&mut bytes).unwrap();
    }
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

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

/// The folders in `dir`, in name order.
fn subdirs(dir: &Path) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    dirs
}

/// The real excerpts, split and as their original stream, with the format their truth names.
#[test]
fn fed_in_chunks_it_is_diagnose_on_every_real_excerpt() {
    let tmp = tempfile::tempdir().unwrap();
    let mut cases = 0;
    for (i, dir) in subdirs(&root().join("tests/fixtures/real"))
        .iter()
        .enumerate()
    {
        let truth: toml::Value =
            toml::from_str(&std::fs::read_to_string(dir.join("truth.toml")).unwrap()).unwrap();
        let fmt = truth["access_format"].as_str().unwrap_or("none");
        let fmt = match fmt {
            "custom" => truth["access_log_format"].as_str().unwrap().to_string(),
            "none" => "combined".to_string(),
            f => f.to_string(),
        };
        let Ok(log_format) = LogFormat::from_arg(&fmt) else {
            continue;
        };
        let mut o = Options::new(Vec::new(), Vec::new());
        o.log_format = log_format;
        o.tz_offset_s = Some(0);
        if dir.join("access.log").exists() {
            o.access.push(dir.join("access.log"));
        }
        if dir.join("error.log").exists() {
            o.error.push(dir.join("error.log"));
        }
        if !(o.access.is_empty() && o.error.is_empty()) {
            check(&o, i as u64, tmp.path());
            cases += 1;
        }
        if dir.join("stream.log").exists() {
            let mut m = Options::new(Vec::new(), Vec::new());
            m.log_format = o.log_format.clone();
            m.tz_offset_s = Some(0);
            m.mixed.push(dir.join("stream.log"));
            check(&m, 1000 + i as u64, tmp.path());
            cases += 1;
        }
    }
    assert!(cases >= 90, "{cases} cases");
}

/// Recorded lab runs (every class of the checker, with their DNS logs and events).
#[test]
fn fed_in_chunks_it_is_diagnose_on_recorded_lab_runs() {
    let tmp = tempfile::tempdir().unwrap();
    let dirs = subdirs(&root().join("tests/fixtures/diagnose/real"));
    assert!(dirs.len() >= 8);
    for (i, dir) in dirs.iter().enumerate() {
        let d = tmp.path().join(format!("run{i}"));
        std::fs::create_dir_all(&d).unwrap();
        let mut o = Options::new(Vec::new(), Vec::new());
        o.log_format = resolvelab_diagnose::run::run_log_format(dir).unwrap();
        for (name, list) in [
            ("access.log", &mut o.access),
            ("error.log", &mut o.error),
            ("dns.jsonl", &mut o.dns),
        ] {
            for src in [dir.join(name), dir.join(format!("{name}.gz"))] {
                if src.exists() {
                    list.push(plain(&src, &d, name));
                }
            }
        }
        if dir.join("events.jsonl").exists() {
            o.events.push(dir.join("events.jsonl"));
        }
        check(&o, 2000 + i as u64, tmp.path());
    }
}
