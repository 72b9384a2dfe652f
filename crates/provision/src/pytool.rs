//! Pinned Python tools from PyPI — the validators users run on what resolvelab ships
//! (Kubernetes manifests, dashboards) — installed with pip itself, every wheel pinned by version
//! and sha256 (`--require-hashes`), into a directory of their own under the cache (pip's
//! `--target`: neither the system's Python nor a virtual environment is touched), once, behind
//! the same lock as the binaries.

use crate::{Fetcher, once_locked};
use anyhow::{Context, Result, bail};
use resolvelab_core::rundir::sha256_hex;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A Python tool and its pinned wheels.
#[derive(Debug, Clone, Copy)]
pub struct PyTool {
    /// Its cache name (with its version).
    pub name: &'static str,
    /// `python3 -m MODULE` runs it.
    pub module: &'static str,
    /// A pip requirements file: every wheel, its dependencies included, `==` a version with
    /// `--hash=sha256:…`.
    pub requirements: &'static str,
}

/// kubernetes-validate 1.37.0 (Kubernetes 1.37 schemas) and what it imports, for CPython 3.11
/// on x86-64 Linux (Debian 12's Python).
pub const KUBERNETES_VALIDATE: PyTool = PyTool {
    name: "kubernetes-validate-1.37.0",
    module: "kubernetes_validate",
    requirements: "\
kubernetes-validate==1.37.0 --hash=sha256:85136d018a27b50ec7fc049d902bfa5193f5976807e6c0f408e3ab6fe078cad9
attrs==26.1.0 --hash=sha256:c647aa4a12dfbad9333ca4e71fe62ddc36f4e63b2d260a37a8b83d2f043ac309
importlib_resources==7.1.0 --hash=sha256:1bd7b48b4088eddb2cd16382150bb515af0bd2c70128194392725f82ad2c96a1
jsonschema==4.26.0 --hash=sha256:d489f15263b8d200f8387e64b4c3a75f06629559fb73deb8fdfb525f2dab50ce
jsonschema_specifications==2025.9.1 --hash=sha256:98802fee3a11ee76ecaca44429fda8a41bff98b00a0f2838151b113f210cc6fe
packaging==26.4 --hash=sha256:81383611a09c1bc0b08b76e0fd5829d7c6824c65b27a6aee339da133f4233ea2
pyyaml==6.0.4 --hash=sha256:622aa875fa6533f25fedcffe23079357d65a690d462200afed5d8e9d0e01ebee
referencing==0.37.0 --hash=sha256:381329a9f99628c9069361716891d34ad94af76e461dcb0335825aecc7692231
rpds_py==2026.9.1 --hash=sha256:136a1c3fe4402b7008bc81cb62ee538481795b61a7e83df88dff3b3f02b726ff
typing_extensions==4.16.0 --hash=sha256:481caa481374e813c1b176ada14e97f1f67a4539ce9cfeb3f350d78d6370c2e8
",
};

/// Grafana's Foundation SDK for Python (Grafana 11.6's dashboard schema; no dependencies): the
/// builders `deploy/grafana/dashboard.py` writes the shipped dashboard with.
pub const GRAFANA_FOUNDATION_SDK: PyTool = PyTool {
    name: "grafana-foundation-sdk-11.6.0",
    module: "grafana_foundation_sdk",
    requirements: "\
grafana-foundation-sdk==1769699379!11.6.0 --hash=sha256:92d7a8144eba0fa802e728fb70e63d74b056fb1195ff116d812ad7a4ccfa5eca
",
};

/// A tool installed: run it with [`Installed::command`].
#[derive(Debug, Clone)]
pub struct Installed {
    /// The directory pip installed into (the tool's `PYTHONPATH`).
    pub dir: PathBuf,
    /// The Python that runs it.
    pub python: Vec<String>,
    /// Its module.
    pub module: &'static str,
}

impl Installed {
    /// `python3 -m MODULE` with the tool's directory on `PYTHONPATH`.
    pub fn command(&self) -> Command {
        let mut c = self.python();
        c.args(["-m", self.module]);
        c
    }

    /// `python3` with the tool's directory on `PYTHONPATH`: a script that imports it.
    pub fn python(&self) -> Command {
        let mut c = Command::new(&self.python[0]);
        c.args(&self.python[1..])
            .env("PYTHONPATH", &self.dir)
            .env("PYTHONDONTWRITEBYTECODE", "1");
        c
    }
}

impl PyTool {
    /// Its directory in `cache`: the name and the requirements' hash, so a changed pin is a
    /// new directory.
    pub fn dir_in(&self, cache: &Path) -> PathBuf {
        let h = sha256_hex(self.requirements.as_bytes());
        cache
            .join("pytools")
            .join(format!("{}-{}", self.name, &h[..12]))
    }

    /// The tool, installed on first use (`note` hears what takes time).
    pub fn ensure(&self, note: &dyn Fn(&str)) -> Result<Installed> {
        let f = Fetcher::from_env();
        let dir = self.dir_in(&f.cache);
        let done = dir.join(".installed");
        let installed = || Installed {
            dir: dir.clone(),
            python: f.python.clone(),
            module: self.module,
        };
        once_locked(
            &dir,
            self.name,
            note,
            || done.exists().then(installed),
            || {
                note(&format!(
                    "resolvelab: installing {} from PyPI (first use only) into {}",
                    self.name,
                    dir.display()
                ));
                self.install(&f, &dir)?;
                std::fs::write(&done, "")?;
                Ok(installed())
            },
        )
    }

    fn install(&self, f: &Fetcher, dir: &Path) -> Result<()> {
        let tmp = PathBuf::from(format!("{}.tmp", dir.display()));
        let _ = std::fs::remove_dir_all(&tmp);
        std::fs::create_dir_all(&tmp)?;
        let req = tmp.join("requirements.txt");
        std::fs::write(&req, self.requirements)?;
        let out = Command::new(&f.pip[0])
            .args(&f.pip[1..])
            .args([
                "install",
                "--quiet",
                "--no-deps",
                "--require-hashes",
                "--no-compile",
            ])
            .arg("--target")
            .arg(tmp.join("lib"))
            .arg("-r")
            .arg(&req)
            .output()
            .with_context(|| format!("cannot run {}", f.pip.join(" ")))?;
        if !out.status.success() {
            bail!(
                "{} could not install {}: {}",
                f.pip.join(" "),
                self.name,
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        let _ = std::fs::remove_dir_all(dir);
        std::fs::rename(tmp.join("lib"), dir)?;
        let _ = std::fs::remove_dir_all(&tmp);
        Ok(())
    }
}
