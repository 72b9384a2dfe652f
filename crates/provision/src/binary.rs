//! A third-party proxy binary ready to run: the pinned one (fetched on first use) or the one a
//! user names with `--engine-bin ENGINE=PATH`, checked to start and to be the right program.

use crate::Pinned;
use anyhow::{Context, Result, bail};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// A binary the lab can run, with the environment it needs.
#[derive(Debug, Clone)]
pub struct Binary {
    /// The binary.
    pub path: PathBuf,
    /// The environment it runs with (`LD_LIBRARY_PATH` of its unpacked libraries).
    pub env: Vec<(String, String)>,
    /// What its version command printed (`fingerprint.json`).
    pub version_text: String,
}

impl Binary {
    /// The explicit binary if one is given, else the pin's, fetched now if needed. An explicit
    /// binary must print text containing `family` (`HAProxy version`) for the pin's version
    /// arguments.
    pub fn obtain(pin: &Pinned, explicit: Option<&Path>, family: &str) -> Result<Binary> {
        if let Some(p) = explicit {
            return Binary::at(pin, p, family);
        }
        let got = crate::ensure(pin, &|line| resolvelab_core::progress::line(line))?;
        Ok(Binary {
            env: got.env(),
            path: got.path,
            version_text: got.version_text,
        })
    }

    /// The binary at `path`, checked to run and to be `family`'s.
    pub fn at(pin: &Pinned, path: &Path, family: &str) -> Result<Binary> {
        let engine = pin.engine_id();
        if !path.exists() {
            bail!(
                "{engine} binary {} does not exist: fix --engine-bin {engine}=PATH, or leave it out to use the pinned {}",
                path.display(),
                pin.name
            );
        }
        let out = Command::new(path)
            .args(&pin.version_args)
            .stdin(Stdio::null())
            .output()
            .with_context(|| {
                format!(
                    "cannot run {} {}",
                    path.display(),
                    pin.version_args.join(" ")
                )
            })?;
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
        .trim()
        .to_string();
        if !text.contains(family) {
            bail!(
                "{} {} did not print {family:?} (it printed {:?}): is it {engine}?",
                path.display(),
                pin.version_args.join(" "),
                text.lines().next().unwrap_or("")
            );
        }
        Ok(Binary {
            path: path.to_path_buf(),
            env: Vec::new(),
            version_text: text,
        })
    }

    /// sha256 of the binary, for `fingerprint.json`.
    pub fn sha256(&self) -> String {
        resolvelab_core::rundir::sha256_file(&self.path).unwrap_or_default()
    }

    /// A command running the binary with its environment.
    pub fn command(&self) -> Command {
        let mut c = Command::new(&self.path);
        c.envs(self.env.iter().map(|(k, v)| (k, v)));
        c
    }

    /// Run the binary's own configuration check (`args`); on failure, the error carries the
    /// lines of its output that `keep` picks (its own words on what is wrong).
    pub fn check_config(
        &self,
        dir: &Path,
        args: &[&std::ffi::OsStr],
        keep: fn(&str) -> bool,
    ) -> Result<()> {
        self.check_config_with(dir, args, keep, |_| {})
    }

    /// [`Binary::check_config`] with the command prepared by `prep` first (the lab points a
    /// check that resolves names at its own authority: `resolvelab_core::sysdns`).
    pub fn check_config_with(
        &self,
        dir: &Path,
        args: &[&std::ffi::OsStr],
        keep: fn(&str) -> bool,
        prep: impl FnOnce(&mut Command),
    ) -> Result<()> {
        let mut cmd = self.command();
        prep(&mut cmd);
        // In `dir` (the run directory): a check writes what the configuration names relative
        // to its working directory (Envoy's access log), which must not be the user's.
        let out = cmd
            .args(args)
            .current_dir(dir)
            .stdin(Stdio::null())
            .output()
            .with_context(|| format!("cannot run {}", self.path.display()))?;
        if out.status.success() {
            return Ok(());
        }
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let lines: Vec<&str> = text.lines().filter(|l| keep(l)).collect();
        let shown = if lines.is_empty() {
            text.lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("")
        } else {
            &lines.join(" | ")
        };
        bail!(
            "{} rejected its configuration: {}",
            self.path.display(),
            shown.trim()
        )
    }
}

/// The last `n` non-empty lines of a log, for a start that failed.
pub fn last_lines(log: &Path, n: usize) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(n)..].join(" | ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pin() -> Pinned {
        Pinned::pypi("tool-1", "tool", "1", "t.whl", "00", "bin/tool")
            .checked_by(&["--version"], "tool 1")
            .for_engine("tool")
    }

    #[test]
    fn a_broken_path_is_one_clear_line_naming_the_flag() {
        let e = Binary::at(&pin(), Path::new("/nonexistent/tool"), "tool")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("does not exist") && e.contains("--engine-bin tool=PATH"),
            "{e}"
        );
        assert!(!e.contains('\n'));
        let e = Binary::at(&pin(), Path::new("/bin/true"), "tool version")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("did not print") && e.contains("is it tool?"),
            "{e}"
        );
    }

    #[test]
    fn a_check_that_fails_carries_the_programs_words() {
        let b = Binary {
            path: "/bin/sh".into(),
            env: Vec::new(),
            version_text: String::new(),
        };
        let args =
            ["-c", "echo noise; echo 'ALERT: bad line 3' >&2; exit 1"].map(std::ffi::OsStr::new);
        let dir = tempfile::tempdir().unwrap();
        let e = b
            .check_config(dir.path(), &args, |l| l.contains("ALERT"))
            .unwrap_err()
            .to_string();
        assert!(e.ends_with("ALERT: bad line 3"), "{e}");
        // What the check writes relative to its working directory lands in `dir`.
        let ok = ["-c", "echo > written-by-the-check"].map(std::ffi::OsStr::new);
        b.check_config(dir.path(), &ok, |_| true).unwrap();
        assert!(dir.path().join("written-by-the-check").is_file());
    }
}
