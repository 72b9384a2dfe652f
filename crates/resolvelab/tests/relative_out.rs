//! `resolvelab run` with a relative `--out`, started from a directory that is not the
//! repository: nginx gets absolute `-p`/`-e`/`-c` and config paths (a relative run directory was
//! resolved against nginx's prefix again, `runs/x/runs/x/error.log`, and every run failed).

mod common;

#[test]
fn a_real_run_with_a_relative_out_above_the_working_directory_completes() {
    let root = tempfile::tempdir().unwrap();
    let cwd = root.path().join("elsewhere");
    std::fs::create_dir(&cwd).unwrap();
    let o = common::bin()
        .args(["run", "swap-only", "--variant", "base", "--scale", "0.2"])
        .args(["--out", "../x"])
        .current_dir(&cwd)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(text.contains("completed"), "{text}");
    let runs: Vec<_> = std::fs::read_dir(root.path().join("x"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(runs.len(), 1, "{runs:?}");
    let access = std::fs::read_to_string(runs[0].join("access.log")).unwrap();
    assert!(access.lines().count() > 100, "nginx logged the load");
    let conf = std::fs::read_to_string(runs[0].join("nginx.conf")).unwrap();
    assert!(
        !conf.contains("../x"),
        "the config names absolute paths only"
    );
}
