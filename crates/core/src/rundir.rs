//! The run directory of DESIGN.md: `runs/<scenario>-<UTC timestamp>/` with a `fingerprint.json`.

use serde::Serialize;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

/// A run directory being filled.
#[derive(Debug, Clone)]
pub struct RunDir {
    /// The directory.
    pub path: PathBuf,
    /// The run's name (`<scenario>-<stamp>`).
    pub id: String,
}

impl RunDir {
    /// Create `<base>/<name>-<UTC stamp>/` (with a numeric suffix if two runs start in the same
    /// second). The path is absolute (`base` is canonicalised once, here): it goes into nginx's
    /// `-p`/`-e`/`-c` and into configs, and a relative one would be resolved against the prefix
    /// again by nginx (`runs/x/runs/x/error.log`).
    pub fn create(base: &Path, name: &str) -> std::io::Result<RunDir> {
        let stamp = crate::time::stamp_utc(crate::time::now_us());
        let err = |e: std::io::Error| {
            std::io::Error::new(e.kind(), format!("cannot create {}: {e}", base.display()))
        };
        std::fs::create_dir_all(base).map_err(err)?;
        let base = &std::fs::canonicalize(base).map_err(err)?;
        for n in 0..1000 {
            let id = if n == 0 {
                format!("{name}-{stamp}")
            } else {
                format!("{name}-{stamp}-{n}")
            };
            let path = base.join(&id);
            match std::fs::create_dir(&path) {
                Ok(()) => return Ok(RunDir { path, id }),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => {
                    return Err(std::io::Error::new(
                        e.kind(),
                        format!("cannot create {}: {e}", path.display()),
                    ));
                }
            }
        }
        Err(std::io::Error::other("too many runs in the same second"))
    }

    /// An existing run directory (to derive its evidence again, say).
    pub fn open(path: &Path) -> RunDir {
        RunDir {
            path: path.to_path_buf(),
            id: path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
        }
    }

    /// A file inside the run directory.
    pub fn file(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }

    /// Write `name` as pretty JSON with a final newline, atomically ([`write_atomic`]).
    pub fn write_json<T: Serialize>(&self, name: &str, v: &T) -> std::io::Result<()> {
        let text = serde_json::to_string_pretty(v).map_err(std::io::Error::other)?;
        write_atomic(&self.file(name), (text + "\n").as_bytes())
    }

    /// The fingerprint of this run: tool version, seed, engine, `nginx -V` (empty for the
    /// simulator), host facts and the sha256 of the run's configuration files.
    pub fn fingerprint(
        &self,
        seed: u64,
        started_us: i64,
        engine: &str,
        nginx_v: &str,
    ) -> Fingerprint {
        let mut configs = std::collections::BTreeMap::new();
        for f in [
            crate::evidence::file::SCENARIO,
            crate::evidence::file::NGINX_CONF,
        ] {
            if let Ok(h) = sha256_file(&self.file(f)) {
                configs.insert(f.to_string(), h);
            }
        }
        Fingerprint {
            schema: crate::evidence::schema::FINGERPRINT,
            tool_version: env!("CARGO_PKG_VERSION").into(),
            started_us,
            seed,
            nginx_v: nginx_v.to_string(),
            engine: engine.to_string(),
            binary_sha256: None,
            host: HostFacts::here(),
            configs,
            utc_offset_s: None,
        }
    }
}

/// What `fingerprint.json` records: enough to know what produced a run.
#[derive(Debug, Clone, Serialize)]
pub struct Fingerprint {
    /// Always `resolvelab.fingerprint/v1`.
    pub schema: &'static str,
    /// resolvelab's version.
    pub tool_version: String,
    /// Epoch µs when the run started.
    pub started_us: i64,
    /// The seed of every RNG in the run.
    pub seed: u64,
    /// `nginx -V` output (empty for simulated runs).
    pub nginx_v: String,
    /// The engine id (`nginx`, `nginx-1.31`, `sim`).
    pub engine: String,
    /// sha256 of the proxy binary the run used (absent for simulated runs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub binary_sha256: Option<String>,
    /// Host facts.
    pub host: HostFacts,
    /// sha256 of every configuration file of the run, by file name.
    pub configs: std::collections::BTreeMap<String, String>,
    /// The UTC offset the run's local-time logs are written in, when it is not the host's (the
    /// model writes its error log in the scenario's zone); the checker joins the logs with it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub utc_offset_s: Option<i32>,
}

/// Facts about the machine a run happened on.
#[derive(Debug, Clone, Serialize)]
pub struct HostFacts {
    /// `uname -sr`-like kernel description.
    pub kernel: String,
    /// Number of CPUs available.
    pub cpus: usize,
    /// Host name.
    pub hostname: String,
    /// The machine's UTC offset now (`+09:00`): nginx's error log is in local time without an
    /// offset, so the checker needs it to join error lines with `$msec`.
    pub utc_offset: String,
}

impl HostFacts {
    /// Read the facts of this machine.
    pub fn here() -> HostFacts {
        let read = |p: &str| {
            std::fs::read_to_string(p)
                .map(|s| s.trim().to_string())
                .unwrap_or_default()
        };
        HostFacts {
            kernel: format!(
                "{} {}",
                read("/proc/sys/kernel/ostype"),
                read("/proc/sys/kernel/osrelease")
            ),
            cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
            hostname: read("/proc/sys/kernel/hostname"),
            utc_offset: local_offset(),
        }
    }
}

/// The system time zone's current UTC offset as `+HH:MM`.
pub fn local_offset() -> String {
    let secs = jiff::tz::TimeZone::system()
        .to_offset(jiff::Timestamp::now())
        .seconds();
    let sign = if secs < 0 { '-' } else { '+' };
    let a = secs.unsigned_abs();
    format!("{sign}{:02}:{:02}", a / 3600, (a % 3600) / 60)
}

/// Bytes available to this process on the filesystem holding `path` (statvfs).
pub fn free_bytes(path: &Path) -> std::io::Result<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).map_err(std::io::Error::other)?;
    // SAFETY: a valid C string and a zeroed out-parameter of the right type.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(st.f_bavail as u64 * st.f_frsize as u64)
}

/// Write `path` whole or not at all: into a temporary file beside it, flushed to disk, then
/// renamed over it. A kill or a full disk at any moment leaves the old file or the new one, never
/// a 0-byte or half-written one. The error names the file.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = path.with_file_name(format!(".{name}.tmp-{}", std::process::id()));
    let res = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    res.map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        std::io::Error::new(e.kind(), format!("cannot write {}: {e}", path.display()))
    })
}

/// sha256 of a file's bytes, hex.
pub fn sha256_file(path: &Path) -> std::io::Result<String> {
    Ok(sha256_hex(&std::fs::read(path)?))
}

/// sha256 of bytes, hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn creates_unique_dirs() {
        let base = std::env::temp_dir().join(format!("rl-rundir-{}", std::process::id()));
        let a = RunDir::create(&base, "x").unwrap();
        let b = RunDir::create(&base, "x").unwrap();
        assert_ne!(a.path, b.path);
        assert!(a.id.starts_with("x-20"));
        let h = HostFacts::here();
        assert!(h.cpus >= 1);
        assert!(
            h.utc_offset.len() == 6 && h.utc_offset.contains(':'),
            "{}",
            h.utc_offset
        );
        assert_eq!(sha256_hex(b"").len(), 64);
        std::fs::remove_dir_all(&base).ok();
    }

    #[test]
    fn the_path_is_canonical_whatever_base_was_given() {
        let tmp = std::env::temp_dir().join(format!("rl-rundir-canon-{}", std::process::id()));
        std::fs::create_dir_all(tmp.join("a")).unwrap();
        let a = RunDir::create(&tmp.join("a/../b/./c"), "x").unwrap();
        assert!(a.path.is_absolute());
        assert_eq!(a.path, std::fs::canonicalize(&a.path).unwrap());
        assert!(
            a.path
                .starts_with(std::fs::canonicalize(tmp.join("b/c")).unwrap())
        );
        std::fs::remove_dir_all(&tmp).ok();
    }
}
