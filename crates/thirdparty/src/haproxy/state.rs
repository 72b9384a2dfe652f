//! HAProxy's server state kept across a reload or a restart (`[haproxy] server_state`), as an
//! operator's reload script keeps it (HAProxy's configuration manual, `server-state-file`):
//! `show servers state` asked on the stats socket and written to the file the next process
//! reads at start, where `init-addr last` takes each server's address from it.
//!
//! ```
//! use resolvelab_thirdparty::haproxy::state::summary;
//! let shown = "1\n# be_id be_name srv_id srv_name srv_addr srv_op_state\n3 be 1 s1 127.0.0.2 2\n\n";
//! assert_eq!(summary(shown), "s1 127.0.0.2");
//! ```

use anyhow::{Context, Result};
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

/// The stats socket, relative to the run directory (HAProxy's working directory).
pub const SOCKET: &str = "haproxy.sock";
/// The server-state file, relative to the run directory.
pub const FILE: &str = "haproxy.state";

/// How long the running HAProxy has to answer (it answers at once unless it is stopping).
const ANSWER_WAIT: Duration = Duration::from_secs(2);

/// Ask the HAProxy running in `run_dir` for its servers' state and write it to [`FILE`]
/// whole (a reader never sees half of it); returns the servers and addresses saved.
pub fn save(run_dir: &Path) -> Result<String> {
    let sock = run_dir.join(SOCKET);
    // Through the directory's descriptor: a socket's path must fit in 108 bytes, a run
    // directory's need not (HAProxy binds it relative to its working directory).
    let dir = std::fs::File::open(run_dir)
        .with_context(|| format!("cannot open {}", run_dir.display()))?;
    let short = format!("/proc/self/fd/{}/{SOCKET}", dir.as_raw_fd());
    let mut s = UnixStream::connect(&short)
        .with_context(|| format!("cannot reach HAProxy's stats socket {}", sock.display()))?;
    s.set_read_timeout(Some(ANSWER_WAIT))?;
    s.set_write_timeout(Some(ANSWER_WAIT))?;
    // Without `prompt` the socket answers one command and closes.
    s.write_all(b"show servers state\n")?;
    let mut text = String::new();
    s.read_to_string(&mut text)
        .with_context(|| format!("no answer to `show servers state` on {}", sock.display()))?;
    if !text.starts_with(|c: char| c.is_ascii_digit()) {
        anyhow::bail!("`show servers state` answered `{}`", text.trim());
    }
    let file = run_dir.join(FILE);
    let tmp = run_dir.join(format!("{FILE}.tmp"));
    std::fs::write(&tmp, &text).with_context(|| format!("cannot write {}", tmp.display()))?;
    std::fs::rename(&tmp, &file).with_context(|| format!("cannot write {}", file.display()))?;
    Ok(summary(&text))
}

/// Each server and the address kept for it (`-`: none), from `show servers state`'s answer:
/// a version line, a `#` header, then a line per server (`be_id be_name srv_id srv_name
/// srv_addr …`).
pub fn summary(text: &str) -> String {
    let servers: Vec<String> = text
        .lines()
        .skip(1)
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            Some(format!("{} {}", f.get(3)?, f.get(4)?))
        })
        .collect();
    match servers.is_empty() {
        true => "no server".into(),
        false => servers.join(", "),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_socket_is_one_line_naming_it() {
        let d = tempfile::tempdir().unwrap();
        let e = format!("{:#}", save(d.path()).unwrap_err());
        assert!(e.contains("haproxy.sock") && !e.contains('\n'), "{e}");
        assert!(!d.path().join(FILE).exists());
    }

    #[test]
    fn a_run_directory_longer_than_a_socket_path_is_reached() {
        let top = tempfile::tempdir().unwrap();
        let deep = top.path().join("d".repeat(60)).join("e".repeat(60));
        std::fs::create_dir_all(&deep).unwrap();
        assert!(deep.join(SOCKET).as_os_str().len() > 108);
        let dir = std::fs::File::open(&deep).unwrap();
        let at = format!("/proc/self/fd/{}/{SOCKET}", dir.as_raw_fd());
        let listener = std::os::unix::net::UnixListener::bind(at).unwrap();
        // What HAProxy 2.6.12 answered in the lab's runs (two fields of its 25 kept).
        let answer = "1\n# be_id be_name srv_id srv_name srv_addr\n3 be 1 s1 127.0.0.9 2\n\n";
        let served = std::thread::spawn(move || {
            let (mut c, _) = listener.accept().unwrap();
            let mut asked = [0u8; 19];
            c.read_exact(&mut asked).unwrap();
            c.write_all(answer.as_bytes()).unwrap();
            asked
        });
        assert_eq!(save(&deep).unwrap(), "s1 127.0.0.9");
        assert_eq!(&served.join().unwrap(), b"show servers state\n");
        assert_eq!(std::fs::read_to_string(deep.join(FILE)).unwrap(), answer);
    }

    #[test]
    fn an_answer_without_servers_says_so() {
        assert_eq!(summary("1\n# be_id be_name srv_id\n\n"), "no server");
    }
}
