//! One run's directory from its creation to its last write, the same for every engine: the
//! run id (`<scenario>[.<variant>]-<stamp>`), `run.json` marked `running` at once and rewritten
//! at each change of status, the plan (`scenario.toml`, `expect.json`) before anything plays,
//! and `fingerprint.json` + the final `run.json` at the end, whatever happened. The lab runner
//! and the model differ in what they play, not in what they leave.
//!
//! ```no_run
//! # fn main() -> anyhow::Result<()> {
//! use resolvelab_core::spec::engine::EngineId;
//! use resolvelab_lab::{lifecycle::Lifecycle, options::{RunOptions, RunStatus}};
//! use resolvelab_scenario::library;
//! let sc = library::get("swap-only")?;
//! let opts = RunOptions::default();
//! let run = Lifecycle::begin(&sc, &opts, EngineId::Sim, (10, 1), "127.10.1.1:8080".into(), 1)?;
//! let fp = run.dir.fingerprint(1, run.record.started_us, "sim", "");
//! let record = run.end(RunStatus::Completed, None, &fp)?;
//! assert_eq!(record.status, RunStatus::Completed);
//! # Ok(()) }
//! ```

use crate::options::{Network, RunOptions, RunRecord, RunStatus};
use anyhow::{Context, Result};
use resolvelab_core::evidence::{file, schema};
use resolvelab_core::rundir::RunDir;
use resolvelab_core::spec::engine::EngineId;
use resolvelab_core::time::now_us;
use resolvelab_scenario::Scenario;
use std::collections::BTreeMap;

/// A run directory being written, with its record.
pub struct Lifecycle {
    /// The directory.
    pub dir: RunDir,
    /// What `run.json` says (status `running` until [`Lifecycle::end`]).
    pub record: RunRecord,
}

impl Lifecycle {
    /// Create the run's directory under `opts.out` and write `run.json` (running), then the
    /// plan: `scenario.toml` (variant merged, scale applied) and what the scenario expects of
    /// `engine`'s run (`expect.json`, the checker's only source of expectations).
    pub fn begin(
        sc: &Scenario,
        opts: &RunOptions,
        engine: EngineId,
        (a, b): (u8, u8),
        nginx_addr: String,
        seed: u64,
    ) -> Result<Lifecycle> {
        let dir = RunDir::create(&opts.out, &run_id(sc))?;
        let record = RunRecord {
            schema: schema::RUN.into(),
            scenario: sc.name.clone(),
            engine: engine.to_string(),
            variant: sc.variant_of.clone(),
            status: RunStatus::Running,
            reason: None,
            dir: dir.path.clone(),
            started_us: now_us(),
            load_start_us: 0,
            ended_us: 0,
            net: Network::loopback(a, b),
            nginx_addr,
            seed,
            requests: 0,
            hits: BTreeMap::new(),
        };
        let run = Lifecycle { dir, record };
        run.save()?;
        let path = run.dir.file(file::SCENARIO);
        resolvelab_core::rundir::write_atomic(&path, toml::to_string(sc)?.as_bytes())
            .with_context(|| format!("cannot write {}", path.display()))?;
        (run.dir.write_json(file::EXPECT, &sc.expectations(engine)))
            .with_context(|| format!("cannot write {}", run.dir.file(file::EXPECT).display()))?;
        Ok(run)
    }

    /// Rewrite `run.json` as the record now is.
    pub fn save(&self) -> Result<()> {
        Ok(self.dir.write_json(file::RUN, &self.record)?)
    }

    /// The run failed before it could play: record why and hand the error back.
    pub fn fail(mut self, e: anyhow::Error) -> anyhow::Error {
        self.record.status = RunStatus::Failed;
        self.record.reason = Some(format!("{e:#}"));
        self.record.ended_us = now_us();
        match self.save() {
            Ok(()) => e,
            Err(w) => e.context(format!("and run.json could not be written: {w:#}")),
        }
    }

    /// The run is over: write `fingerprint` and the final `run.json` with `status`.
    pub fn end(
        mut self,
        status: RunStatus,
        reason: Option<String>,
        fingerprint: &impl serde::Serialize,
    ) -> Result<RunRecord> {
        self.record.ended_us = now_us();
        self.record.status = status;
        self.record.reason = reason;
        self.dir.write_json(file::FINGERPRINT, fingerprint)?;
        self.save()?;
        Ok(self.record)
    }
}

/// `<scenario>[.<variant>]`, the variant's name made safe for a directory name.
fn run_id(sc: &Scenario) -> String {
    let safe = |s: &str| -> String {
        s.chars()
            .map(|c| match c {
                c if c.is_ascii_alphanumeric() || c == '-' || c == '_' => c,
                _ => '_',
            })
            .collect()
    };
    match &sc.variant_of {
        Some(v) => format!("{}.{}", sc.name, safe(v)),
        None => sc.name.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_directory_says_running_then_how_it_ended() {
        let out = tempfile::tempdir().unwrap();
        let mut sc = resolvelab_scenario::library::get("swap-only").unwrap();
        sc.variant_of = Some("ttl=0 s".into());
        let opts = RunOptions {
            out: out.path().into(),
            ..RunOptions::default()
        };
        let run = Lifecycle::begin(
            &sc,
            &opts,
            EngineId::Sim,
            (10, 1),
            "127.10.1.1:8080".into(),
            3,
        )
        .unwrap();
        let name = run
            .dir
            .path
            .file_name()
            .unwrap()
            .to_string_lossy()
            .to_string();
        assert!(name.starts_with("swap-only.ttl_0_s-"), "{name}");
        let read = |f: &str| -> serde_json::Value {
            serde_json::from_str(&std::fs::read_to_string(run.dir.file(f)).unwrap()).unwrap()
        };
        assert_eq!(read(file::RUN)["status"], "running");
        assert_eq!(read(file::EXPECT)["scenario"], "swap-only");
        assert!(run.dir.file(file::SCENARIO).exists());
        let dir = run.dir.path.clone();
        let e = run.fail(anyhow::anyhow!("no space left"));
        assert_eq!(e.to_string(), "no space left");
        let rec: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join(file::RUN)).unwrap()).unwrap();
        assert_eq!(rec["status"], "failed");
        assert_eq!(rec["reason"], "no space left");
        assert!(rec["ended_us"].as_i64().unwrap() >= rec["started_us"].as_i64().unwrap());
    }
}
