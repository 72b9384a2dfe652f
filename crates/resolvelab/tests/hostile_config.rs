//! A hostile configuration cannot make the lab reach the network (issue #49): a scenario whose
//! inline nginx body names a public resolver, a public `proxy_pass`, a public upstream server
//! or an `include` outside the run is refused before anything starts, naming the line — and
//! the refusal is checked inside `unshare -n` (an empty network namespace), so that even a
//! check that failed could not send a packet off the machine.

use std::path::Path;
use std::process::Command;

#[test]
fn every_off_machine_target_in_an_inline_body_is_refused_before_anything_runs() {
    if !resolvelab_core::testing::can_unshare_net() {
        resolvelab_core::testing::missing_prerequisite(
            "cannot create a network namespace (needs root)",
        );
        return;
    }
    let lib = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/swap-only.toml"),
    )
    .unwrap();
    let base = lib.replacen("[[nginx.server]]\nhost = \"app.test.local\"\n", "", 1);
    let dir = tempfile::tempdir().unwrap();
    // network-safe: the addresses below are the refused text; the runs happen in `unshare -n`.
    for (hostile, line, says) in [
        ("resolver 8.8.8.8 valid=5s;", 1, "8.8.8.8"),
        (
            "upstream be { zone be 64k; server 93.184.216.34:80; }",
            1,
            "93.184.216.34",
        ),
        (
            "server { listen {listen}; location / { proxy_pass http://93.184.216.34; } }",
            1,
            "93.184.216.34",
        ),
        ("include /etc/nginx/conf.d/*.conf;", 1, "include"),
        (
            "upstream be { zone be 64k; server example.com:80; }",
            1,
            "example.com",
        ),
    ] {
        let body = format!(
            "{hostile}\nupstream ok {{ zone ok 64k; server app.test.local:8080 resolve; }}\n{{resolver}}\n"
        );
        let sc = base.replacen(
            "[nginx]\n",
            &format!("[nginx]\ninline = \"\"\"\n{body}\"\"\"\n"),
            1,
        );
        let p = dir.path().join("hostile.toml");
        std::fs::write(&p, &sc).unwrap();
        let runs = dir.path().join("runs");
        let out = Command::new("unshare")
            .arg("-n")
            .arg(env!("CARGO_BIN_EXE_resolvelab"))
            .args(["run"])
            .arg(&p)
            .args(["--engine", "nginx", "-q", "--out"])
            .arg(&runs)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{hostile}: {text}");
        assert!(
            text.contains(&format!("line {line}:")) && text.contains(says),
            "{hostile}: {text}"
        );
        assert!(!runs.exists(), "{hostile}: nothing ran");
    }
}
