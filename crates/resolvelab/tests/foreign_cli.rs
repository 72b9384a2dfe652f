//! `resolvelab run NAME --engine PROXY` for what a third-party proxy cannot play: one line
//! naming the field, the scenario's `file:line` and `--engine nginx`, exit 2, and no run
//! directory. The proxies' runs themselves: `crates/lab/tests/third_party.rs`.

mod common;
use common::bin;

#[test]
fn what_a_proxy_cannot_play_is_refused_before_anything_runs() {
    for (scenario, engine, field) in [
        ("retry-shim", "haproxy", "retry_shim"),
        ("retry-shim", "envoy", "retry_shim"),
        ("backup", "caddy", "backup"),
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let o = bin()
            .args(["run", scenario, "--engine", engine, "--out"])
            .arg(tmp.path())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{err}");
        assert!(
            err.contains(field) && err.contains("--engine nginx") && err.contains(".toml:"),
            "{engine}: {err}"
        );
        assert!(
            std::fs::read_dir(tmp.path()).unwrap().next().is_none(),
            "no run directory"
        );
    }
}
