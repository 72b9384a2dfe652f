//! The nginx configuration a diagnosis is given (`--nginx-conf`), read once by the linter's
//! parser: the access-log format it defines and the run-time facts the classes depend on.

use crate::evidence::RuntimeFacts;
use resolvelab_history::logformat::LogFormat;
use std::path::Path;

/// A configuration as the linter's parser read it: a file tree (includes followed) or an
/// `nginx -T` dump (also what arrives through a pipe). One that does not parse (an excerpt, a
/// template) is kept as its error: a diagnosis can go on without it.
#[derive(Debug)]
pub struct NginxConf {
    /// The path the user named, as errors and the report name it.
    pub name: String,
    parsed: Result<resolvelab_lint::load::Config, String>,
}

impl NginxConf {
    /// Read the configuration the user named `given` from `read`: the same path, or the copy
    /// a pipe was spooled to (always read as text then, since its includes cannot be followed).
    /// Fails only when `read` cannot be read at all.
    pub fn read(given: &Path, read: &Path) -> anyhow::Result<NginxConf> {
        let text = std::fs::read_to_string(read)
            .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", read.display()))?;
        let name = given.display().to_string();
        let parsed = if given == read && !resolvelab_lint::load::is_dump(&text) {
            resolvelab_lint::load::load_path(read, None)
        } else {
            resolvelab_lint::load::load_text(&name, text, None)
        };
        Ok(NginxConf {
            name,
            parsed: parsed.map_err(|e| format!("--nginx-conf {e}")),
        })
    }

    /// The access-log format named `name` (default: the one the first `access_log` uses, else
    /// nginx's `combined`).
    pub fn log_format(&self, name: Option<&str>) -> anyhow::Result<LogFormat> {
        let cfg = self.parsed.as_ref().map_err(|e| {
            anyhow::anyhow!(
                "{e}: its log_format cannot be read; pass the format itself with --log-format '…'"
            )
        })?;
        let formats = resolvelab_lint::log_formats(cfg);
        crate::run::config_log_format(&formats, name, "combined")
            .map_err(|e| anyhow::anyhow!("{}: {e}", self.name))
    }

    /// The run-time facts (resolver, `valid=`, zones, retries), or why the configuration gives
    /// none.
    pub fn facts(&self) -> Result<RuntimeFacts, &str> {
        match &self.parsed {
            Ok(cfg) => Ok(resolvelab_lint::runtime_facts(cfg, &self.name)),
            Err(e) => Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_config_gives_its_access_logs_format_and_an_excerpt_only_its_error() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("nginx.conf");
        std::fs::write(
            &p,
            "events {}\nhttp {\n log_format short '$msec $status';\n access_log /dev/null short;\n resolver 127.0.0.1 valid=5s;\n}\n",
        )
        .unwrap();
        let c = NginxConf::read(&p, &p).unwrap();
        assert_eq!(c.log_format(None).unwrap().name, "short");
        assert!(c.log_format(Some("nope")).is_err());
        assert!(c.facts().is_ok());
        std::fs::write(&p, "server { listen 80;\n").unwrap();
        let c = NginxConf::read(&p, &p).unwrap();
        assert!(c.facts().unwrap_err().starts_with("--nginx-conf "));
        let e = c.log_format(None).unwrap_err().to_string();
        assert!(
            e.contains("pass the format itself with --log-format"),
            "{e}"
        );
        assert!(NginxConf::read(&p, &dir.path().join("missing")).is_err());
    }
}
