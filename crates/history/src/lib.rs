//! Parsers that turn nginx logs and resolvelab's own logs into one time-ordered history of
//! typed records — the input of the checker (`resolvelab-diagnose`).
//!
//! * [`logformat`] compiles any nginx `log_format` (or finds it in a config / `nginx -T`) into a
//!   byte tokenizer; `combined` is the default.
//! * [`access`] streams access logs (plain or `.gz`, several files merged in time order) without
//!   keeping lines in memory.
//! * [`errorlog`] parses error logs of every level with `*cid` and the `client/server/request/
//!   upstream/host` context, and streams several of them merged in time order (one line per
//!   file in memory).
//! * [`export`] splits log-store exports (Loki, Elasticsearch, CloudWatch, JSONEachRow, CRI files)
//!   by instance into plain logs.
//! * [`ours`] reads `dns.jsonl`, `events.jsonl` and `load.jsonl`.
//!
//! Bad input never stops a run: malformed lines are counted per file with samples ([`FileStats`]).
//!
//! ```
//! use resolvelab_history::{History, Sources, Record, logformat::{Field, LogFormat}};
//! let dir = tempfile::tempdir().unwrap();
//! let access = dir.path().join(resolvelab_core::evidence::file::ACCESS_LOG);
//! std::fs::write(&access, "1796018401.123 200 \"127.0.0.20:8080\" \"200\" 0.001 GET 1 1 \"0.001\" \"0.000\" \"GET / HTTP/1.1\" 127.0.0.1\nnot a log line\n").unwrap();
//! let error = dir.path().join(resolvelab_core::evidence::file::ERROR_LOG);
//! std::fs::write(&error, "2026/11/30 06:00:01 [error] 1#0: *5 no live upstreams while connecting to upstream, client: 127.0.0.1, server: , request: \"GET / HTTP/1.1\", upstream: \"http://be/\", host: \"x\"\n").unwrap();
//! let h = History::load(&Sources { access: vec![access], error: vec![error], ..Default::default() }).unwrap();
//! let mut stream = h.access_stream(&LogFormat::lab()).unwrap();
//! let mut errors = h.error_stream(0).unwrap();
//! let mut kinds = Vec::new();
//! h.merge(&mut stream, &mut errors, |r| kinds.push(match r {
//!     Record::Access(a) => format!("access {}", a.status().unwrap()),
//!     Record::Error(e) => format!("error *{}", e.cid.unwrap()),
//!     _ => "other".into(),
//! }));
//! assert_eq!(kinds, ["error *5", "access 200"]);
//! let stats = stream.finish();
//! assert_eq!((stats[0].parsed, stats[0].malformed), (1, 1));
//! ```

// A library says what it has to say through `resolvelab_core::progress`, never on its own
// stdout/stderr, and links only what it uses (docs/ARCHITECTURE.md, "Lints").
#![cfg_attr(not(test), deny(clippy::print_stdout, clippy::print_stderr))]
#![cfg_attr(not(test), deny(unused_crate_dependencies))]

pub mod access;
pub mod errorlog;
pub mod export;
pub mod jsonline;
pub mod logformat;
pub mod ours;
pub mod time;

pub use access::{AccessLine, AccessRecord, AccessStream, MemoryMatcher};
pub use errorlog::{ErrorRecord, ErrorStream, Level};
pub use ours::{DnsRecord, EventRecord, LoadRecord};

use serde::{Deserialize, Serialize};
use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

/// One malformed line kept as evidence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// 1-based line number.
    pub line: u64,
    /// Why it did not parse (names the field).
    pub reason: String,
    /// The line (truncated to 300 bytes).
    pub text: String,
}

/// Parse accounting for one file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FileStats {
    /// The file.
    pub path: String,
    /// `access`, `error`, `dns`, `events`, `load`.
    pub kind: String,
    /// Non-empty lines seen.
    pub lines: u64,
    /// Lines parsed.
    pub parsed: u64,
    /// Lines that did not parse.
    pub malformed: u64,
    /// The first malformed lines.
    pub samples: Vec<Sample>,
    /// For access logs mostly failing: the known format that matches them best.
    pub guess: Option<String>,
    /// An I/O error that stopped reading (e.g. a truncated gzip).
    pub error: Option<String>,
    /// A mixed stream (`--logs`): lines of the other kind or of other processes, passed over.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub skipped: u64,
    /// Continuation lines joined to the entry above them (a Lua `stack traceback:` …).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub continued: u64,
    /// Where lines start in a plain (not gzip) file, to read cited lines again without
    /// reading the file from its start; not part of any report.
    #[serde(skip)]
    pub line_index: Option<LineIndex>,
}

/// Byte offsets of every [`LineIndex::EVERY`]th line of a plain file.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct LineIndex {
    /// `starts[k]`: the offset of line `k * EVERY + 1`.
    pub starts: Vec<u64>,
}

impl LineIndex {
    /// Lines between two checkpoints: a cited line is found by reading at most this many.
    pub const EVERY: u64 = 256;

    /// Note that 1-based line `line` starts at byte `offset` (called for every line, in order).
    #[inline]
    pub fn note(&mut self, line: u64, offset: u64) {
        if (line - 1).is_multiple_of(Self::EVERY)
            && self.starts.len() as u64 == (line - 1) / Self::EVERY
        {
            self.starts.push(offset);
        }
    }

    /// The nearest checkpoint at or before `line`: (its line, its offset).
    pub fn before(&self, line: u64) -> Option<(u64, u64)> {
        let k = ((line.max(1) - 1) / Self::EVERY).min(self.starts.len().checked_sub(1)? as u64);
        Some((k * Self::EVERY + 1, self.starts[k as usize]))
    }
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl FileStats {
    /// Empty stats for `path`.
    pub fn new(path: &Path, kind: &str) -> FileStats {
        FileStats {
            path: path.display().to_string(),
            kind: kind.to_string(),
            lines: 0,
            parsed: 0,
            malformed: 0,
            samples: Vec::new(),
            guess: None,
            error: None,
            skipped: 0,
            continued: 0,
            line_index: None,
        }
    }

    /// Count one malformed line, keeping the first [`access::MAX_SAMPLES`].
    pub fn malformed(&mut self, line: u64, reason: &str, text: &str) {
        self.malformed += 1;
        if self.samples.len() < access::MAX_SAMPLES {
            let mut t = text.to_string();
            if t.len() > 300 {
                let mut cut = 300;
                while !t.is_char_boundary(cut) {
                    cut -= 1;
                }
                t.truncate(cut);
            }
            self.samples.push(Sample {
                line,
                reason: reason.to_string(),
                text: t,
            });
        }
    }
}

/// Whether `path` starts with gzip's magic bytes (unreadable: false).
pub fn is_gzip(path: &Path) -> bool {
    let mut head = [0u8; 2];
    File::open(path)
        .and_then(|mut f| f.read_exact(&mut head))
        .is_ok()
        && head == [0x1f, 0x8b]
}

/// Open a file for line reading; gzip is detected by its magic bytes, not its name.
pub fn open_maybe_gz(path: &Path) -> anyhow::Result<Box<dyn BufRead + Send>> {
    let f = File::open(path).map_err(|e| anyhow::anyhow!("cannot open {}: {e}", path.display()))?;
    let mut r = BufReader::with_capacity(1 << 17, f);
    let head = r
        .fill_buf()
        .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
    if head.starts_with(&[0x1f, 0x8b]) {
        let d: Box<dyn Read + Send> = Box::new(flate2::bufread::MultiGzDecoder::new(r));
        Ok(Box::new(BufReader::with_capacity(1 << 17, d)))
    } else {
        Ok(Box::new(r))
    }
}

/// The input files of one history.
#[derive(Debug, Clone, Default)]
pub struct Sources {
    /// Access logs (rotations and several servers are merged by time).
    pub access: Vec<PathBuf>,
    /// Error logs (every `error_log` destination).
    pub error: Vec<PathBuf>,
    /// Mixed streams (`kubectl logs`, `docker compose logs`, journald): access and error lines
    /// (and other processes' lines) in one file, each read by both streams.
    pub mixed: Vec<PathBuf>,
    /// `dns.jsonl` files.
    pub dns: Vec<PathBuf>,
    /// `events.jsonl` files.
    pub events: Vec<PathBuf>,
}

/// Leave out the records of every name answered on more than one view; those names and their
/// counts of views.
fn drop_per_view(dns: &mut Vec<DnsRecord>) -> Vec<(String, usize)> {
    let key = |r: &DnsRecord| r.qname.trim_end_matches('.').to_ascii_lowercase();
    let mut views: std::collections::BTreeMap<String, std::collections::BTreeSet<Option<u16>>> =
        Default::default();
    for r in dns.iter() {
        views.entry(key(r)).or_default().insert(r.view);
    }
    let split: Vec<(String, usize)> = (views.into_iter())
        .filter(|(_, v)| v.len() > 1)
        .map(|(n, v)| (n, v.len()))
        .collect();
    if !split.is_empty() {
        dns.retain(|r| !split.iter().any(|(n, _)| *n == key(r)));
    }
    split
}

/// The DNS and event logs, loaded; access logs and error logs are streamed
/// ([`History::access_stream`], [`History::error_stream`]) so that memory does not grow with
/// their size.
#[derive(Debug, Clone, Default)]
pub struct History {
    /// Every file by index (the `file` of each record): access logs, error logs, DNS logs,
    /// event logs, in that order.
    pub files: Vec<PathBuf>,
    /// Number of access files (they come first in `files`).
    pub n_access: usize,
    /// Number of error-log files (they follow the access files in `files`).
    pub n_error: usize,
    /// Mixed streams: the last `n_mixed` access files and the last `n_mixed` error files are
    /// the same files, read as each kind.
    pub n_mixed: usize,
    /// DNS log records in time order.
    pub dns: Vec<DnsRecord>,
    /// Names the DNS log answered on more than one view (an authority with per-resolver
    /// answers: `resolvelab dns --view`, a GSLB's per-site order), with how many: their
    /// records are left out of [`History::dns`], since which view a proxy asked is not in its
    /// logs and the views' answers interleaved would read as changes.
    pub per_view: Vec<(String, usize)>,
    /// Lab events in time order.
    pub events: Vec<EventRecord>,
    /// Parse accounting for the DNS and event files (access and error files report theirs when
    /// their stream finishes).
    pub stats: Vec<FileStats>,
}

impl History {
    /// Load DNS and event logs; register the access and error logs for streaming (each error
    /// log is opened once here so that a missing file is reported before any work is done).
    pub fn load(src: &Sources) -> anyhow::Result<History> {
        let mut files: Vec<PathBuf> = src.access.clone();
        files.extend(src.mixed.iter().cloned());
        let mut stats = Vec::new();
        for p in src.error.iter().chain(&src.mixed) {
            open_maybe_gz(p)?;
            files.push(p.clone());
        }
        let mut dns = Vec::new();
        for p in &src.dns {
            let (recs, st) = ours::read_dns(p, files.len() as u32)?;
            files.push(p.clone());
            dns.extend(recs);
            stats.push(st);
        }
        dns.sort_by_key(|d| d.t_us);
        let per_view = drop_per_view(&mut dns);
        let mut events = Vec::new();
        for p in &src.events {
            let (recs, st) = ours::read_events(p, files.len() as u32)?;
            files.push(p.clone());
            events.extend(recs);
            stats.push(st);
        }
        events.sort_by_key(|d| d.t_us);
        Ok(History {
            files,
            n_access: src.access.len() + src.mixed.len(),
            n_error: src.error.len() + src.mixed.len(),
            n_mixed: src.mixed.len(),
            dns,
            per_view,
            events,
            stats,
        })
    }

    /// Open the access logs as one time-ordered stream.
    pub fn access_stream(&self, fmt: &logformat::LogFormat) -> anyhow::Result<AccessStream> {
        AccessStream::open_mixed(&self.files[..self.n_access], self.n_mixed, fmt, 0)
    }

    /// Open the error logs as one time-ordered stream, placing their local times on the epoch
    /// clock with the server's UTC offset (seconds east).
    pub fn error_stream(&self, offset_s: i32) -> anyhow::Result<ErrorStream> {
        self.error_stream_with(time::Offsets::fixed(offset_s))
    }

    /// [`History::error_stream`] with an offset schedule (daylight saving changes seen in the
    /// access log), extendable while it is read ([`ErrorStream::offsets_mut`]).
    pub fn error_stream_with(&self, offsets: time::Offsets) -> anyhow::Result<ErrorStream> {
        ErrorStream::open_with(
            &self.files[self.n_access..self.n_access + self.n_error],
            self.n_mixed,
            self.n_access as u32,
            offsets,
        )
    }

    /// Read error-log lines again by (file index, line number), for evidence: only the wanted
    /// lines are parsed, and each file is read up to its last wanted line.
    pub fn fetch_errors(
        &self,
        wanted: &[(u32, u64)],
    ) -> anyhow::Result<std::collections::HashMap<(u32, u64), ErrorRecord>> {
        let mut by_file: std::collections::BTreeMap<u32, Vec<u64>> = Default::default();
        for &(f, l) in wanted {
            by_file.entry(f).or_default().push(l);
        }
        let mut out = std::collections::HashMap::new();
        for (f, lines) in by_file {
            let Some(p) = self.files.get(f as usize) else {
                continue;
            };
            for r in errorlog::fetch_lines(p, f, &lines)? {
                out.insert((f, r.line), r);
            }
        }
        Ok(out)
    }

    /// Read access-log lines again by (file index, line number), for evidence: each as the
    /// stream matched it (see [`access::fetch_lines`]); `stats` are the stream's, whose line
    /// indexes let a plain file be read from near each wanted line.
    pub fn fetch_access(
        &self,
        fmt: &logformat::LogFormat,
        wanted: &[(u32, u64)],
        stats: &[FileStats],
    ) -> anyhow::Result<std::collections::HashMap<(u32, u64), Vec<u8>>> {
        let mut by_file: std::collections::BTreeMap<u32, Vec<u64>> = Default::default();
        for &(f, l) in wanted {
            by_file.entry(f).or_default().push(l);
        }
        let mut out = std::collections::HashMap::new();
        for (f, lines) in by_file {
            let Some(p) = self.files[..self.n_access].get(f as usize) else {
                continue;
            };
            let index = stats.get(f as usize).and_then(|s| s.line_index.as_ref());
            for (l, text) in access::fetch_lines(p, fmt, &lines, index)? {
                out.insert((f, l), text);
            }
        }
        Ok(out)
    }

    /// `file:line` for evidence.
    pub fn cite(&self, file: u32, line: u64) -> String {
        let name = self
            .files
            .get(file as usize)
            .map(|p| p.display().to_string())
            .unwrap_or_else(|| format!("file#{file}"));
        format!("{name}:{line}")
    }

    /// Walk every record — access lines, error lines, DNS answers, events — in one time order,
    /// streaming both the access and the error logs. Error lines (1 s resolution) sort at the
    /// start of their second.
    pub fn merge(
        &self,
        access: &mut AccessStream,
        errors: &mut ErrorStream,
        mut f: impl FnMut(Record<'_>),
    ) {
        let (mut di, mut vi) = (0, 0);
        let mut emit_until = |t: i64, f: &mut dyn FnMut(Record<'_>)| loop {
            let te = errors.peek_t_us().unwrap_or(i64::MAX);
            let td = self.dns.get(di).map(|e| e.t_us).unwrap_or(i64::MAX);
            let tv = self.events.get(vi).map(|e| e.t_us).unwrap_or(i64::MAX);
            let m = te.min(td).min(tv);
            if m > t || m == i64::MAX {
                break;
            }
            if te == m {
                if let Some(e) = errors.next() {
                    f(Record::Error(e));
                }
            } else if td == m {
                f(Record::Dns(&self.dns[di]));
                di += 1;
            } else {
                f(Record::Event(&self.events[vi]));
                vi += 1;
            }
        };
        while let Some(a) = access.next() {
            emit_until(a.t_us, &mut f);
            f(Record::Access(a));
        }
        emit_until(i64::MAX - 1, &mut f);
    }
}

/// One record of the merged history.
pub enum Record<'a> {
    /// An access-log line.
    Access(AccessLine<'a>),
    /// An error-log line.
    Error(&'a ErrorRecord),
    /// A DNS answer.
    Dns(&'a DnsRecord),
    /// A lab event.
    Event(&'a EventRecord),
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn a_name_answered_per_view_is_left_out_and_named() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("dns.jsonl");
        let q = |t: u64, name: &str, view: &str, addr: &str| {
            format!(
                "{{\"t_us\":{t},\"qname\":\"{name}\",\"qtype\":\"A\",\"rcode\":\"NOERROR\",\"answers\":[\"{addr}\"]{view}}}\n"
            )
        };
        let text = String::from("{\"schema\":\"resolvelab.dns/v1\"}\n")
            + &q(1, "app.test.local", "", "127.0.0.20")
            + &q(2, "APP.test.local.", ",\"view\":1", "127.0.0.30")
            + &q(3, "db.test.local", ",\"view\":2", "127.0.0.40")
            + &q(4, "db.test.local", ",\"view\":2", "127.0.0.40");
        std::fs::write(&p, text).unwrap();
        let h = History::load(&Sources {
            dns: vec![p],
            ..Sources::default()
        })
        .unwrap();
        assert_eq!(h.per_view, vec![("app.test.local".to_string(), 2)]);
        // One view throughout (a proxy that asked one extra address) is one history.
        assert_eq!(h.dns.len(), 2);
        assert!(h.dns.iter().all(|r| r.qname == "db.test.local"));
    }

    #[test]
    fn gzip_and_rotation_merge_in_time_order() {
        let dir = tempfile::tempdir().unwrap();
        let line = |ms: i64, st: u16| {
            format!(
                "{}.{:03} {st} \"127.0.0.20:8080\" \"{st}\" 0.001 GET 1 1 \"0.001\" \"0.000\" \"GET / HTTP/1.1\" 127.0.0.1\n",
                ms / 1000,
                ms % 1000
            )
        };
        let base = 1_796_018_401_000i64;
        // Rotated file (older, gzipped) and the live file; a third, overlapping server log.
        let old = dir.path().join("access.log.1.gz");
        let mut gz =
            flate2::write::GzEncoder::new(File::create(&old).unwrap(), flate2::Compression::fast());
        for i in 0..3 {
            gz.write_all(line(base + i * 10, 200).as_bytes()).unwrap();
        }
        gz.finish().unwrap();
        let live = dir.path().join("access.log");
        std::fs::write(&live, line(base + 100, 502) + &line(base + 120, 200)).unwrap();
        let other = dir.path().join("b.log");
        std::fs::write(&other, line(base + 15, 404) + "junk\n").unwrap();
        let h = History::load(&Sources {
            access: vec![live, old, other],
            ..Default::default()
        })
        .unwrap();
        let mut s = h.access_stream(&logformat::LogFormat::lab()).unwrap();
        let mut seen = Vec::new();
        while let Some(a) = s.next() {
            seen.push((a.t_us / 1000 - base, a.status().unwrap(), a.file));
        }
        assert_eq!(
            seen,
            vec![
                (0, 200, 1),
                (10, 200, 1),
                (15, 404, 2),
                (20, 200, 1),
                (100, 502, 0),
                (120, 200, 0)
            ]
        );
        let st = s.finish();
        assert_eq!(st[2].malformed, 1);
        assert_eq!(st[2].samples[0].line, 2);
    }

    #[test]
    fn many_rotations_merge_in_time_order_through_small_batches() {
        let dir = tempfile::tempdir().unwrap();
        let files = 7;
        let per_file = 700;
        let mut paths = Vec::new();
        for f in 0..files {
            let mut text = String::new();
            for i in 0..per_file {
                // File f holds every files-th millisecond, offset by f: a strict interleave.
                let ms = 1_796_018_401_000i64 + (i * files + f) as i64;
                text += &format!(
                    "{}.{:03} 200 \"127.0.0.20:8080\" \"200\" 0.001 GET 1 1 \"0.001\" \"0.000\" \"GET / HTTP/1.1\" 127.0.0.1\n",
                    ms / 1000,
                    ms % 1000
                );
            }
            let p = dir.path().join(format!("access.log.{f}"));
            std::fs::write(&p, text).unwrap();
            paths.push(p);
        }
        let h = History::load(&Sources {
            access: paths,
            ..Default::default()
        })
        .unwrap();
        let mut s = h.access_stream(&logformat::LogFormat::lab()).unwrap();
        let mut seen = Vec::new();
        while let Some(a) = s.next() {
            seen.push((a.t_us, a.file));
        }
        assert_eq!(seen.len(), files * per_file);
        assert!(
            seen.windows(2).all(|w| w[0].0 < w[1].0),
            "strictly in time order"
        );
        assert_eq!(seen[0].1, 0);
        assert_eq!(seen[1].1, 1);
        let st = s.finish();
        assert!(
            st.iter()
                .all(|f| f.parsed == per_file as u64 && f.malformed == 0)
        );
    }

    #[test]
    fn cited_lines_are_read_again_from_the_checkpoint_before_them() {
        let dir = tempfile::tempdir().unwrap();
        let line = |i: u64| {
            format!(
                "{}.{:03} 200 \"127.0.0.20:8080\" \"200\" 0.001 GET {i} 1 \"0.001\" \"0.000\" \"GET /{i} HTTP/1.1\" 127.0.0.1",
                1_796_018_401 + i / 1000,
                i % 1000
            )
        };
        let n = 3 * LineIndex::EVERY + 10;
        let mut text = String::new();
        for i in 1..=n {
            text += &line(i);
            // Line ends and stream prefixes the fetch has to handle on the way.
            text += if i % 7 == 0 { "\r\n" } else { "\n" };
        }
        let plain = dir.path().join("access.log");
        std::fs::write(&plain, &text).unwrap();
        let gz = dir.path().join("access.log.1");
        let mut enc =
            flate2::write::GzEncoder::new(File::create(&gz).unwrap(), flate2::Compression::fast());
        enc.write_all(text.as_bytes()).unwrap();
        enc.finish().unwrap();
        let fmt = logformat::LogFormat::lab();
        for (path, indexed) in [(plain, true), (gz, false)] {
            let h = History::load(&Sources {
                access: vec![path],
                ..Default::default()
            })
            .unwrap();
            let mut s = h.access_stream(&fmt).unwrap();
            while s.next().is_some() {}
            let stats = s.finish();
            let ix = stats[0].line_index.as_ref();
            assert_eq!(ix.is_some(), indexed);
            if let Some(ix) = ix {
                assert_eq!(ix.starts.len(), 4);
                assert_eq!(
                    ix.before(LineIndex::EVERY + 1).unwrap().0,
                    LineIndex::EVERY + 1
                );
            }
            let want = [
                (0, 1),
                (0, 14),
                (0, LineIndex::EVERY),
                (0, 2 * LineIndex::EVERY + 1),
                (0, n),
            ];
            let got = h.fetch_access(&fmt, &want, &stats).unwrap();
            assert_eq!(got.len(), want.len());
            for (_, l) in want {
                assert_eq!(got[&(0, l)], line(l).into_bytes(), "line {l}");
            }
        }
    }

    #[test]
    fn lines_across_read_buffers_and_longer_than_one_are_whole() {
        // Batches are whole read buffers (1 MiB for one file): lines cross their ends, one
        // line is longer than three of them, and the last has no newline.
        let dir = tempfile::tempdir().unwrap();
        let line = |i: u64, pad: usize| {
            format!(
                "{}.{:03} 200 \"127.0.0.20:8080\" \"200\" 0.001 GET {i} 1 \"0.001\" \"0.000\" \"GET /{} HTTP/1.1\" 127.0.0.1",
                1_796_018_401 + i / 1000,
                i % 1000,
                "x".repeat(pad)
            )
        };
        let pad = |i: u64| match i {
            5_000 => 3 << 20,
            _ => (i as usize * 37) % 300,
        };
        let n = 12_000u64;
        let mut text = String::new();
        for i in 1..=n {
            text += &line(i, pad(i));
            if i < n {
                text += "\n";
            }
        }
        let path = dir.path().join("access.log");
        std::fs::write(&path, &text).unwrap();
        let h = History::load(&Sources {
            access: vec![path],
            ..Default::default()
        })
        .unwrap();
        let fmt = logformat::LogFormat::lab();
        let mut s = h.access_stream(&fmt).unwrap();
        let mut count = 0;
        while let Some(a) = s.next() {
            count += 1;
            assert_eq!(a.line, count);
            assert_eq!(a.raw(), line(count, pad(count)).as_bytes(), "line {count}");
        }
        assert_eq!(count, n);
        let stats = s.finish();
        assert_eq!((stats[0].parsed, stats[0].malformed), (n, 0));
        // The checkpoints count the bytes of every buffer before.
        let want = [(0, 4_999), (0, 5_001), (0, 11_999), (0, n)];
        let got = h.fetch_access(&fmt, &want, &stats).unwrap();
        for (_, l) in want {
            assert_eq!(got[&(0, l)], line(l, pad(l)).into_bytes(), "line {l}");
        }
    }

    #[test]
    fn nearest_guess_for_wrong_format() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.log");
        std::fs::write(
            &p,
            "127.0.0.1 - - [30/Nov/2026:15:00:01 +0900] \"GET / HTTP/1.1\" 502 157 \"-\" \"curl/8\"\n",
        )
        .unwrap();
        let h = History::load(&Sources {
            access: vec![p],
            ..Default::default()
        })
        .unwrap();
        let mut s = h.access_stream(&logformat::LogFormat::lab()).unwrap();
        assert!(s.next().is_none());
        let st = s.finish();
        assert_eq!(st[0].malformed, 1);
        assert!(
            st[0].samples[0].reason.contains("$msec"),
            "{:?}",
            st[0].samples
        );
        assert!(
            st[0].guess.as_deref().unwrap().contains("combined"),
            "{:?}",
            st[0].guess
        );
    }
}
