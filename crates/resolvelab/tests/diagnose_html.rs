//! The self-contained HTML report: checked structurally without a browser, and rendered in
//! headless Chromium when it is installed (skipped with a message otherwise).

use std::path::{Path, PathBuf};
use std::process::Command;

mod common;
use common::run_ok;

fn html_for(run: &str) -> (tempfile::TempDir, PathBuf) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/diagnose/synthetic")
        .join(run);
    let dir = tempfile::tempdir().unwrap();
    for e in std::fs::read_dir(&src).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), dir.path().join(e.file_name())).unwrap();
    }
    let out = run_ok(
        Command::new(env!("CARGO_BIN_EXE_resolvelab"))
            .args(["analyze", "--format", "html"])
            .arg(dir.path()),
    );
    let p = dir.path().join("verdict.html");
    assert_eq!(std::fs::read(&p).unwrap(), out.stdout);
    (dir, p)
}

#[test]
fn html_is_self_contained_with_charts() {
    let (_d, p) = html_for("maxfails-wipeout");
    let html = std::fs::read_to_string(p).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert!(html.trim_end().ends_with("</html>"));
    for id in [
        "id=\"chart-rate\"",
        "id=\"chart-latency\"",
        "id=\"incidents\"",
        "id=\"expectations\"",
        "class=\"chart zoom\"",
    ] {
        assert!(html.contains(id), "{id} missing");
    }
    // Two timeline charts plus one zoom per incident (two incidents here).
    assert_eq!(html.matches("<svg").count(), 4);
    assert_eq!(html.matches("</svg>").count(), 4);
    // The rate chart draws the three outcomes and the incident band.
    assert!(html.contains("no live upstreams") && html.contains("failed (502/504)"));
    // No scripts and no external assets.
    assert!(!html.contains("<script"));
    assert!(
        !html.contains("src=\"http") && !html.contains("href=\"http") && !html.contains("url(http")
    );
    assert!(!html.contains("chart unavailable"));
}

#[test]
fn html_renders_in_headless_chromium() {
    let Some(chrome) = ["chromium", "chromium-browser", "google-chrome"]
        .iter()
        .find(|c| {
            Command::new("which")
                .arg(c)
                .output()
                .is_ok_and(|o| o.status.success())
        })
    else {
        eprintln!(
            "SKIP: chromium is not installed (apt-get install chromium) — structural HTML test still ran"
        );
        return;
    };
    let (dir, p) = html_for("dns-nxdomain");
    let png = dir.path().join("shot.png");
    let url = format!("file://{}", p.display());
    let common = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--hide-scrollbars",
        "--window-size=1280,2400",
    ];
    let out = Command::new(chrome)
        .args(common)
        .arg(format!("--screenshot={}", png.display()))
        .arg(&url)
        .output()
        .unwrap();
    assert!(
        png.exists(),
        "no screenshot: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let bytes = std::fs::read(&png).unwrap();
    assert_eq!(&bytes[1..4], b"PNG");
    // A blank page compresses to a few KB; charts with text and lines do not.
    assert!(
        bytes.len() > 30_000,
        "screenshot only {} bytes",
        bytes.len()
    );
    let dom = Command::new(chrome)
        .args(common)
        .arg("--dump-dom")
        .arg(&url)
        .output()
        .unwrap();
    let dom = String::from_utf8_lossy(&dom.stdout);
    assert!(
        dom.matches("<svg").count() >= 3,
        "charts missing in the rendered DOM"
    );
    assert!(
        dom.contains("<polyline") || dom.contains("<path"),
        "no chart lines in the rendered DOM"
    );
}
