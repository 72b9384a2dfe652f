//! Tests that need no real nginx: fake binaries and a fake source tree.

use resolvelab_core::supervise::Supervisor;
use resolvelab_nginx::{Instance, Nginx};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

fn write_exec(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

#[test]
fn broken_nginx_path_is_one_clear_line() {
    let err = Nginx::at(Path::new("/nonexistent/nginx"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("/nonexistent/nginx does not exist"), "{err}");
    assert!(err.contains("RESOLVELAB_NGINX"), "names the fix: {err}");
    assert!(!err.contains('\n'));
    let dir = tempfile::tempdir().unwrap();
    let not_nginx = dir.path().join("true-nginx");
    write_exec(&not_nginx, "#!/bin/sh\necho hello >&2\n");
    let err = Nginx::at(&not_nginx).unwrap_err().to_string();
    assert!(err.contains("did not print an nginx version"), "{err}");
}

#[test]
fn old_nginx_is_refused_for_resolve() {
    let dir = tempfile::tempdir().unwrap();
    let fake = dir.path().join("nginx");
    write_exec(
        &fake,
        "#!/bin/sh\necho 'nginx version: nginx/1.22.1' >&2\necho 'configure arguments: --prefix=/usr' >&2\n",
    );
    let nx = Nginx::at(&fake).unwrap();
    assert!(!nx.info.supports_resolve());
    let sup = Supervisor::new().unwrap();
    let conf = "http { upstream be { zone be 64k; server app.test.local:8080 resolve; } }";
    let err = match Instance::start(&nx, dir.path(), conf, &sup) {
        Ok(_) => panic!("an nginx 1.22 must be refused for resolve"),
        Err(e) => e.to_string(),
    };
    assert!(err.contains("1.22.1") && err.contains("1.27.3"), "{err}");
}

/// A fake nginx source tree: `auto/configure` writes a Makefile that "builds" a script, and counts
/// how often configure ran, so two concurrent builds can be told apart from one.
fn fake_sources(root: &Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let ngx = root.join("nginx-src");
    std::fs::create_dir_all(ngx.join("nginx/auto")).unwrap();
    let counter = root.join("configure-runs");
    write_exec(
        &ngx.join("nginx/auto/configure"),
        &format!(
            r##"#!/bin/sh
echo run >> {counter}
for a in "$@"; do case "$a" in --builddir=*) B="${{a#--builddir=}}";; esac; done
mkdir -p "$B"
# Hold the build until the test has seen the other process wait on the lock (bounded: 30 s).
n=0; while [ ! -e {release} ] && [ $n -lt 600 ]; do sleep 0.05; n=$((n+1)); done
printf 'all:\n\tprintf "#!/bin/sh\\necho nginx version: nginx/1.28.3 >&2\\n" > %s/nginx && chmod +x %s/nginx\n' "$B" "$B" > "$B/Makefile"
"##,
            counter = counter.display(),
            release = root.join("release").display()
        ),
    );
    let pcre = root.join("pcre2-sys");
    std::fs::create_dir_all(pcre.join("upstream/include")).unwrap();
    std::fs::create_dir_all(pcre.join("upstream/src")).unwrap();
    std::fs::write(pcre.join("upstream/include/pcre2.h"), "/* fake */\n").unwrap();
    std::fs::write(
        pcre.join("upstream/src/pcre2_fake.c"),
        "int pcre2_fake(void) { return 0; }\n",
    )
    .unwrap();
    (ngx, pcre)
}

/// Set in the child processes of the concurrent-build test.
const CHILD_ENV: &str = "RESOLVELAB_TEST_BUILD_CHILD";

/// The child process of `concurrent_builds_share_one_build_and_the_cache_hits_after`: provision
/// (against the fake sources its parent points at) and print the binary's path.
#[test]
#[ignore = "helper process of concurrent_builds_share_one_build_and_the_cache_hits_after"]
fn build_in_a_child_process() {
    assert!(
        std::env::var_os(CHILD_ENV).is_some(),
        "run only by its parent test"
    );
    // The provisioner's notes ("another process is preparing nginx; waiting…") on stdout, where
    // the parent test reads them.
    resolvelab_core::progress::set(|n| {
        if let resolvelab_core::progress::Note::Line(l) = n {
            println!("note: {l}");
        }
    });
    let path = resolvelab_nginx::provision::ensure_built().expect("provision");
    println!("built: {}", path.display());
}

#[test]
fn concurrent_builds_share_one_build_and_the_cache_hits_after() {
    let root = tempfile::tempdir().unwrap();
    let (ngx, pcre) = fake_sources(root.path());
    let cache = root.path().join("cache");
    // Two separate processes must contend for the lock: this test binary runs itself, with only
    // the ignored helper below selected. The fake configure holds the first build until the
    // other process has said that it waits on the lock, so the two always overlap.
    let release = root.path().join("release");
    let child = || {
        Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "build_in_a_child_process",
                "--ignored",
                "--nocapture",
            ])
            .env(CHILD_ENV, "1")
            .env("XDG_CACHE_HOME", &cache)
            .env("RESOLVELAB_NGINX_SRC", &ngx)
            .env("RESOLVELAB_PCRE2_SRC", &pcre)
            .env_remove("RESOLVELAB_NGINX")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let run = |mut c: std::process::Child, tx: std::sync::mpsc::Sender<()>| {
        use std::io::BufRead;
        let mut text = String::new();
        for line in std::io::BufReader::new(c.stdout.take().unwrap()).lines() {
            let line = line.unwrap();
            if line.contains("waiting for it") {
                let _ = tx.send(());
            }
            text += &line;
            text.push('\n');
        }
        let out = c.wait_with_output().unwrap();
        let built = text
            .lines()
            .find_map(|l| l.strip_prefix("built: "))
            .map(str::to_owned);
        (
            out.status,
            text,
            String::from_utf8_lossy(&out.stderr).into_owned(),
            built,
        )
    };
    let (a, b, waited) = std::thread::scope(|s| {
        let (ta, tb) = (tx.clone(), tx);
        let a = s.spawn(|| run(child(), ta));
        let b = s.spawn(|| run(child(), tb));
        let waited = rx.recv_timeout(std::time::Duration::from_secs(30)).is_ok();
        std::fs::write(&release, "").unwrap();
        (a.join().unwrap(), b.join().unwrap(), waited)
    });
    for (status, out, err, built) in [&a, &b] {
        assert!(status.success(), "{err}");
        assert!(built.is_some(), "{out}");
    }
    assert!(
        waited,
        "neither process waited on the lock:\n{}\n{}",
        a.1, b.1
    );
    let waiting = [&a.1, &b.1]
        .iter()
        .filter(|t| t.contains("waiting for it"))
        .count();
    assert_eq!(waiting, 1, "exactly one waited:\n{}\n{}", a.1, b.1);
    assert_eq!(a.3, b.3, "both get the same binary");

    let runs = std::fs::read_to_string(root.path().join("configure-runs")).unwrap();
    assert_eq!(
        runs.lines().count(),
        1,
        "configure ran once: the second waited on the lock"
    );
    // Cache hit: a third call does not configure again.
    let (status, _, err, built) = run(child(), std::sync::mpsc::channel().0);
    assert!(status.success(), "{err}");
    assert_eq!(built, a.3);
    let runs = std::fs::read_to_string(root.path().join("configure-runs")).unwrap();
    assert_eq!(runs.lines().count(), 1, "cache hit");
}
