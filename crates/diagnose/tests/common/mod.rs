//! What the checker's corpus tests share: the real production excerpts
//! (`tests/fixtures/real`, each with the format its truth names) and the recorded lab runs
//! (`tests/fixtures/diagnose/real`, with their DNS logs and events) as `Options`, and a seeded
//! generator.

#![allow(dead_code)]

use resolvelab_diagnose::Options;
use resolvelab_history::logformat::LogFormat;
use std::io::Read;
use std::path::{Path, PathBuf};

/// The repository's root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A seeded generator (splitmix64).
pub struct Rng(pub u64);

impl Rng {
    /// A number below `n` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        (z ^ (z >> 31)) % n.max(1)
    }
}

/// `src` as a plain file in `dir` (a `.gz` fixture unpacked), named `name`.
pub fn plain(src: &Path, dir: &Path, name: &str) -> PathBuf {
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

/// The folders in `dir`, in name order.
pub fn subdirs(dir: &Path) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    dirs
}

/// Every real excerpt with an access or error log, split (access + error), and as its
/// original stream when it has one: (a seed for the case, its options).
pub fn real_cases() -> Vec<(u64, Options)> {
    let mut out = Vec::new();
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
        if dir.join("stream.log").exists() {
            let mut m = Options::new(Vec::new(), Vec::new());
            m.log_format = o.log_format.clone();
            m.tz_offset_s = Some(0);
            m.mixed.push(dir.join("stream.log"));
            out.push((1000 + i as u64, m));
        }
        if !(o.access.is_empty() && o.error.is_empty()) {
            out.push((i as u64, o));
        }
    }
    out
}

/// Every recorded lab run, its compressed logs unpacked into `tmp`: (a seed, its options).
pub fn lab_cases(tmp: &Path) -> Vec<(u64, Options)> {
    let mut out = Vec::new();
    for (i, dir) in subdirs(&root().join("tests/fixtures/diagnose/real"))
        .iter()
        .enumerate()
    {
        let d = tmp.join(format!("run{i}"));
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
        out.push((2000 + i as u64, o));
    }
    out
}
