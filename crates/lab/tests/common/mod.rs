//! What the engine tests share: a library scenario played as `resolvelab run` plays it.
// Each test file uses the part it needs.
#![allow(dead_code)]

use resolvelab_lab::engine;
use resolvelab_lab::judge::{self, Judged};
use resolvelab_lab::options::RunOptions;
use std::path::Path;

/// What to play: `resolvelab run NAME [--variant V] [--seed S] [--scale F] --engine ENGINE`.
pub struct Play<'a> {
    /// A library scenario's name, or a scenario file's path.
    pub name: &'a str,
    /// One variant; None plays every variant the engine plays.
    pub variant: Option<&'a str>,
    /// An engine id (`nginx`, `sim`, `sim-envoy`, …).
    pub engine: &'a str,
    /// `--seed`: None takes the scenario's, else 1.
    pub seed: Option<u64>,
    /// `--scale`.
    pub scale: f64,
}

impl<'a> Play<'a> {
    /// `name` on `engine`, every variant, the scenario's seed, unscaled.
    pub fn new(name: &'a str, engine: &'a str) -> Play<'a> {
        Play {
            name,
            variant: None,
            engine,
            seed: None,
            scale: 1.0,
        }
    }

    /// Only this variant.
    pub fn variant(self, v: &'a str) -> Play<'a> {
        Play {
            variant: Some(v),
            ..self
        }
    }

    /// Scaled by `f`.
    pub fn scale(self, f: f64) -> Play<'a> {
        Play { scale: f, ..self }
    }

    /// With this seed.
    pub fn seed(self, s: u64) -> Play<'a> {
        Play {
            seed: Some(s),
            ..self
        }
    }

    /// Play into `out`, each run judged (its verdict files written), as the command does.
    pub fn into(self, out: &Path) -> Vec<Judged> {
        let engine = engine::by_name(self.engine).unwrap();
        let scenarios = judge::selected(false, Some(self.name)).unwrap();
        judge::planned(&scenarios, self.variant)
            .unwrap()
            .into_iter()
            .filter(|v| judge::passed_over(v, engine, self.variant.is_some(), false).is_none())
            .map(|v| {
                let opts = RunOptions {
                    out: out.to_path_buf(),
                    seed: Some(self.seed.or(v.seed).unwrap_or(1)),
                    scale: self.scale,
                    progress: false,
                    ..RunOptions::default()
                };
                judge::run_and_judge(&v, &opts, engine)
                    .unwrap_or_else(|e| panic!("{} on {}: {e:#}", self.name, engine.id()))
            })
            .collect()
    }
}

/// A run directory's JSON file.
pub fn json(dir: &Path, file: &str) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join(file)).unwrap()).unwrap()
}
