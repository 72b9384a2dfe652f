//! Rendering nginx configurations for lab runs.

use std::path::Path;

/// The access-log format every lab run uses (the contract between the runner and the checker).
pub use resolvelab_core::evidence::LAB_LOG_FORMAT;

/// Is this process running as root (then nginx must be told `user root;` so that its workers
/// can write the logs inside the run directory)?
pub fn running_as_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Options of the lab configuration around the user's `http` body.
#[derive(Debug, Clone)]
pub struct LabConf {
    /// `worker_processes` (the seed lab used 2).
    pub workers: u32,
    /// `error_log` level (`warn` shows `upstream server temporarily disabled`).
    pub error_level: String,
}

impl Default for LabConf {
    fn default() -> Self {
        LabConf {
            workers: 2,
            error_level: "warn".into(),
        }
    }
}

/// A complete nginx.conf for a run directory: every path (pid, logs, temp files) inside `run_dir`,
/// the `lab` log format, and the caller's `upstream {…} server {…}` blocks inside `http {}`.
pub fn lab_conf(run_dir: &Path, http_body: &str) -> String {
    lab_conf_with(run_dir, http_body, &LabConf::default())
}

/// [`lab_conf`] with explicit options.
pub fn lab_conf_with(run_dir: &Path, http_body: &str, opts: &LabConf) -> String {
    let d = run_dir.display();
    let user = if running_as_root() {
        "user root;\n"
    } else {
        ""
    };
    let mut body = String::new();
    for line in http_body.lines() {
        if line.trim().is_empty() {
            body.push('\n');
        } else {
            body.push_str("    ");
            body.push_str(line);
            body.push('\n');
        }
    }
    format!(
        "# Rendered by resolvelab for the run in {d}\n\
         daemon off;\n\
         master_process on;\n\
         {user}worker_processes {workers};\n\
         pid {d}/nginx.pid;\n\
         error_log {d}/error.log {level};\n\
         \n\
         events {{\n    worker_connections 4096;\n}}\n\
         \n\
         http {{\n\
         \x20   client_body_temp_path {d}/temp/client_body;\n\
         \x20   proxy_temp_path {d}/temp/proxy;\n\
         \x20   fastcgi_temp_path {d}/temp/fastcgi;\n\
         \x20   uwsgi_temp_path {d}/temp/uwsgi;\n\
         \x20   scgi_temp_path {d}/temp/scgi;\n\
         \x20   log_format lab '{fmt}';\n\
         \x20   access_log {d}/access.log lab;\n\
         \n{body}}}\n",
        workers = opts.workers,
        level = opts.error_level,
        fmt = LAB_LOG_FORMAT,
    )
}

/// The first line (from 1) of `text` where an upstream `server` directive with the `resolve`
/// parameter starts — a name nginx re-resolves while running, which only 1.27.3 and later
/// accept (a `resolver` directive is not one; comments are skipped).
///
/// ```
/// use resolvelab_nginx::conf::resolve_line;
/// assert_eq!(resolve_line("resolver 127.0.0.53 valid=5s;\nupstream be {\n  server app:8080 resolve;\n}"), Some(3));
/// assert_eq!(resolve_line("http { upstream be { server app:8080 resolve; } }"), Some(1));
/// assert_eq!(resolve_line("resolver 127.0.0.53; # server x resolve;\nserver { listen 80; }"), None);
/// // A lab placeholder's braces are inside quotes, not a block.
/// assert_eq!(resolve_line("upstream be {\n  server \"app:{port}\" resolve;\n}"), Some(2));
/// ```
pub fn resolve_line(text: &str) -> Option<usize> {
    let (mut line, mut start, mut stmt, mut comment) = (1, 1, String::new(), false);
    // A quoted word may hold braces (`"app:{port}"`, the lab's placeholders): not blocks.
    let mut quote: Option<char> = None;
    for c in text.chars() {
        if comment {
            comment = c != '\n';
        } else if let Some(q) = quote {
            quote = (c != q).then_some(q);
            stmt.push(c);
        } else if c == '#' {
            comment = true;
        } else if matches!(c, '"' | '\'') {
            quote = Some(c);
            stmt.push(c);
        } else if matches!(c, ';' | '{' | '}') {
            let mut words = stmt.split_whitespace();
            if words.next() == Some("server") && words.any(|w| w == "resolve") {
                return Some(start);
            }
            stmt.clear();
        } else {
            if stmt.trim().is_empty() {
                start = line;
            }
            stmt.push(c);
        }
        if c == '\n' {
            line += 1;
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_stay_in_the_run_dir() {
        let c = lab_conf(
            Path::new("/tmp/run1"),
            "upstream be {\n  server 127.0.0.1:1;\n}\n",
        );
        assert!(c.contains("pid /tmp/run1/nginx.pid;"));
        assert!(c.contains("access_log /tmp/run1/access.log lab;"));
        assert!(c.contains("error_log /tmp/run1/error.log warn;"));
        assert!(c.contains("    upstream be {\n      server 127.0.0.1:1;"));
        assert!(c.contains("daemon off;"));
        assert_eq!(c.contains("user root;"), running_as_root());
    }
}
