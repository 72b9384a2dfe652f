//! HAProxy 2.6.12 (Debian 12's package): its pin, its binary's facts and signals, the
//! configuration rendered from a scenario ([`config`]), its log read back ([`log`]) and its
//! server state kept across a reload or restart ([`state`]).

pub mod config;
pub mod log;
pub mod state;

use crate::{Converted, ThirdParty};
use anyhow::Result;
use resolvelab_core::rundir::RunDir;
use resolvelab_provision::{Deb, Pinned};
use resolvelab_scenario::Scenario;
use resolvelab_scenario::net::Net;
use std::ffi::OsString;
use std::path::Path;

/// HAProxy.
pub struct Haproxy;

impl ThirdParty for Haproxy {
    fn pin(&self) -> Pinned {
        pin()
    }
    fn registry(&self) -> &'static str {
        "Debian"
    }
    fn family(&self) -> &'static str {
        "HAProxy version"
    }
    fn version<'a>(&self, text: &'a str) -> Option<&'a str> {
        text.split_whitespace().nth(2)
    }
    fn config_file(&self) -> &'static str {
        "haproxy.cfg"
    }
    fn log_file(&self) -> &'static str {
        "haproxy.log"
    }
    fn check_args(&self) -> &'static [&'static str] {
        &["-c", "-f"]
    }
    fn complaint(&self) -> fn(&str) -> bool {
        |l| l.contains("ALERT") || l.contains("parsing")
    }
    fn run_args(&self, cfg: &Path, _workers: u32) -> Vec<OsString> {
        // -W: master-worker; -db: foreground, logging to stderr.
        vec!["-W".into(), "-db".into(), "-f".into(), cfg.into()]
    }
    fn signals(&self) -> (libc::c_int, libc::c_int) {
        (libc::SIGUSR2, libc::SIGUSR1)
    }
    fn reloads(&self) -> bool {
        true
    }
    fn resolves_at_start(&self) -> bool {
        true
    }
    fn keeps_state(&self, sc: &Scenario) -> bool {
        sc.haproxy.server_state
    }
    fn save_state(&self, run_dir: &Path) -> Result<String> {
        state::save(run_dir)
    }
    fn config(&self, sc: &Scenario, net: &Net) -> Result<String> {
        config::config(sc, net)
    }
    fn convert(&self, dir: &RunDir, access_out: &Path) -> Result<Converted> {
        log::to_lab(&dir.file(self.log_file()), access_out)
    }
}

/// HAProxy 2.6.12 as Debian 12 ships it, with `liblua5.3-0` and the OpenTracing wrapper it
/// links against (absent from a minimal system; unpacked beside it).
fn pin() -> Pinned {
    let deb = |package: &str, version: &str, sha256: &str| Deb {
        package: package.into(),
        version: version.into(),
        sha256: sha256.into(),
    };
    Pinned::debian(
        "haproxy-2.6.12",
        vec![
            deb(
                "haproxy",
                "2.6.12-1+deb12u3",
                "c8fa07420a78bfc47544b2a46e97151a8a12c3b4db62de610b2e37e78506f465",
            ),
            deb(
                "liblua5.3-0",
                "5.3.6-2",
                "576ad8ef2e9f6ad21f29f0c90dac17448deefee8f3912877c2a0911b77e5d3ca",
            ),
            deb(
                "libopentracing-c-wrapper0",
                "1.1.3-3+b1",
                "68013bf6296a776923622c871bed26bc7b6bfe5f84b0fa2707a06382d1db2692",
            ),
            deb(
                "libopentracing1",
                "1.6.0-4",
                "af62b62a99979253a79e3443f7dabe13f1f33bc2fc024f99039e3868a67f26f4",
            ),
        ],
        "usr/sbin/haproxy",
    )
    .checked_by(&["-v"], "HAProxy version 2.6.12")
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_pin_names_every_package() {
        match super::pin().source {
            resolvelab_provision::Source::Debian { packages, member } => {
                assert_eq!(member, "usr/sbin/haproxy");
                assert_eq!(packages.len(), 4);
                assert!(packages.iter().all(|d| d.sha256.len() == 64));
            }
            other => panic!("{other:?}"),
        }
    }
}
