//! What the checker counts line by line — requests by upstream group and status class, error
//! lines by signature, lines parsed, malformed or passed over — kept across chunks of lines
//! read from memory. `watch` counts every line it follows this way, once, with no file
//! written: the counts add up over any split of the lines, and each chunk's lines are read
//! with the access pass's own parts (the matcher, the trajectories, the group rule, the
//! signatures), so they are those a diagnosis of the same lines counts.
//!
//! ```
//! use resolvelab_diagnose::checker::tally::{Stream, Tally};
//! use resolvelab_history::logformat::LogFormat;
//! let mut o = resolvelab_diagnose::Options::new(Vec::new(), Vec::new());
//! o.log_format = LogFormat::lab();
//! let mut t = Tally::new(&o);
//! let access = t.add_stream(Stream::Access, "access.log");
//! t.feed(access, [&b"1796018401.200 502 \"127.0.0.20:8080\" \"502\" 0.001 GET 2 1 \"0.001\" \"0.000\" \"GET / HTTP/1.1\" 127.0.0.1"[..]], 1);
//! let c = t.take();
//! assert_eq!(c.failed, 1);
//! assert_eq!(c.requests["(unknown)"]["5xx"], 1);
//! ```

use super::access::{STATUS_CLASSES, TrajIds, status_class};
use super::errors::SigMemo;
use super::failure::{Keys, Traj};
use super::groups::key_groups;
use crate::classes::{self, Sig};
use resolvelab_history::access::AccessLine;
use resolvelab_history::errorlog::{ErrorReader, is_blank, may_be_error_line};
use resolvelab_history::logformat::LogFormat;
use resolvelab_history::{FileStats, MemoryMatcher};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

/// The kind of a fed stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    /// An access log.
    Access,
    /// An error log.
    Error,
    /// Access, error and other lines in one stream (`kubectl logs`, a CRI file).
    Mixed,
    /// Answers of the upstreams' names (`resolvelab.dns/v1` lines).
    Dns,
}

/// The counts of the lines fed since the last [`Tally::take`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Counts {
    /// Requests by upstream group, then status class (`2xx` … `5xx`, `other`).
    pub requests: BTreeMap<String, BTreeMap<&'static str, u64>>,
    /// Requests answered without an upstream, by status class.
    pub unrouted: BTreeMap<&'static str, u64>,
    /// Error lines by signature id (lines of no known signature are not counted).
    pub signatures: BTreeMap<&'static str, u64>,
    /// Lines by the kind of file that read them (`access`, `error`, `dns`; a mixed stream is
    /// read as both `access` and `error`), then `parsed`, `malformed`, `skipped`.
    pub lines: BTreeMap<&'static str, [u64; 3]>,
    /// Failed requests (NLU, 502, 504) by the access lines; where none is read, the error
    /// lines that show a request failing.
    pub failed: u64,
    /// The first and last request times read, epoch ms.
    pub span_ms: Option<(i64, i64)>,
    /// The earliest time of a failed request read (epoch ms; none where no access line is).
    pub first_failed_ms: Option<i64>,
    /// The latest time of a failed request read (epoch ms; none where no access line is).
    pub last_failed_ms: Option<i64>,
}

/// One fed stream.
struct Fed {
    kind: Stream,
    name: PathBuf,
    /// Access and mixed streams: their matcher (its statistics add up over the chunks).
    access: Option<MemoryMatcher>,
}

/// The counts, kept across chunks (see the module).
pub struct Tally {
    fmt: LogFormat,
    upstream: Option<String>,
    streams: Vec<Fed>,
    ids: TrajIds,
    keys: Keys,
    trajs: Vec<Traj>,
    addr_group: HashMap<String, String>,
    memo: SigMemo,
    /// Access lines are read (an access stream is fed, or a mixed one held access lines).
    access_read: bool,
    /// Since the last take: requests by key, then status class.
    key_status: Vec<[u64; 6]>,
    now: Counts,
}

/// The counts of a file's statistics: parsed, malformed, skipped.
fn counts_of(s: &FileStats) -> [u64; 3] {
    [s.parsed, s.malformed, s.skipped]
}

impl Tally {
    /// A tally reading lines as `opts` says (its format and `--upstream`; its paths unused).
    pub fn new(opts: &crate::Options) -> Tally {
        Tally {
            fmt: opts.log_format.clone(),
            upstream: opts.upstream.clone(),
            streams: Vec::new(),
            ids: TrajIds::default(),
            keys: Keys::default(),
            trajs: Vec::new(),
            addr_group: HashMap::new(),
            memo: SigMemo::default(),
            access_read: false,
            key_status: Vec::new(),
            now: Counts::default(),
        }
    }

    /// One more stream, named `name` in its statistics; its number for [`Tally::feed`].
    pub fn add_stream(&mut self, kind: Stream, name: impl AsRef<Path>) -> usize {
        let file = self.streams.len() as u32;
        let name = name.as_ref().to_path_buf();
        let access = matches!(kind, Stream::Access | Stream::Mixed)
            .then(|| MemoryMatcher::new(&name, &self.fmt, kind == Stream::Mixed, file));
        self.access_read |= kind == Stream::Access;
        self.streams.push(Fed { kind, name, access });
        self.streams.len() - 1
    }

    /// Count stream `k`'s next lines (each without its newline), numbered from `first_line`.
    pub fn feed<'l>(
        &mut self,
        k: usize,
        lines: impl IntoIterator<Item = &'l [u8]> + Clone,
        first_line: u64,
    ) {
        if matches!(self.streams[k].kind, Stream::Access | Stream::Mixed) {
            self.access(k, lines.clone(), first_line);
        }
        self.feed_other(k, lines);
    }

    /// Count what is not an access line of stream `k`'s next lines (its error lines, its DNS
    /// answers): its access lines are matched elsewhere, and counted with
    /// [`Tally::count_access`] and [`Tally::count_matched`].
    pub fn feed_other<'l>(&mut self, k: usize, lines: impl IntoIterator<Item = &'l [u8]>) {
        match self.streams[k].kind {
            Stream::Error | Stream::Mixed => self.errors(k, lines),
            Stream::Dns => self.answers(lines),
            Stream::Access => {}
        }
    }

    fn access<'l>(&mut self, k: usize, lines: impl IntoIterator<Item = &'l [u8]>, first: u64) {
        let fed = &mut self.streams[k];
        let mut m = fed.access.take().expect("an access stream has a matcher");
        let before = counts_of(m.stats());
        m.feed(lines, first, |a| self.count_access(a));
        let after = counts_of(m.stats());
        self.streams[k].access = Some(m);
        self.count_matched(std::array::from_fn(|i| after[i] - before[i]));
    }

    /// Count one access line matched elsewhere (by the checker's own pass over the same
    /// lines, which so reads each line once).
    pub fn count_access(&mut self, a: &AccessLine<'_>) {
        let Tally {
            ids,
            keys,
            trajs,
            addr_group,
            key_status,
            now,
            access_read,
            ..
        } = self;
        *access_read = true;
        let t_ms = a.t_us / 1000;
        now.span_ms = Some(match now.span_ms {
            Some((lo, hi)) => (lo.min(t_ms), hi.max(t_ms)),
            None => (t_ms, t_ms),
        });
        let st = a.status().unwrap_or(0);
        let c = status_class(st);
        let traj = ids
            .id(a, keys, trajs, addr_group)
            .map(|i| &trajs[i as usize]);
        let nlu = traj.is_some_and(|t| t.nlu);
        if nlu || st == 502 || st == 504 {
            now.failed += 1;
            now.first_failed_ms = Some(now.first_failed_ms.map_or(t_ms, |f| f.min(t_ms)));
            now.last_failed_ms = Some(now.last_failed_ms.map_or(t_ms, |f| f.max(t_ms)));
        }
        match traj.and_then(|t| t.key) {
            Some(key) => {
                if key_status.len() <= key as usize {
                    key_status.resize(key as usize + 1, [0; 6]);
                }
                key_status[key as usize][c] += 1;
            }
            None => *now.unrouted.entry(STATUS_CLASSES[c]).or_default() += 1,
        }
    }

    /// Count access lines read elsewhere: parsed, malformed, passed over.
    pub fn count_matched(&mut self, lines: [u64; 3]) {
        let e = self.now.lines.entry("access").or_default();
        for (i, n) in lines.iter().enumerate() {
            e[i] += n;
        }
    }

    /// Error lines: read as an error log is (entries joined with their continuation lines;
    /// in a mixed stream, what is not one passed over), each counted by its signature.
    fn errors<'l>(&mut self, k: usize, lines: impl IntoIterator<Item = &'l [u8]>) {
        let fed = &self.streams[k];
        // A mixed stream's lines that no error line can be made of are handed over empty (most
        // of its bytes are access lines), and counted as the reader counts them: skipped.
        let mixed = fed.kind == Stream::Mixed;
        let (mut buf, mut passed) = (Vec::new(), 0);
        for l in lines {
            if mixed && !may_be_error_line(l) && !is_blank(l) {
                passed += 1;
            } else {
                buf.extend_from_slice(l);
            }
            buf.push(b'\n');
        }
        let reader = Box::new(std::io::Cursor::new(buf));
        let mut r = ErrorReader::from_reader(reader, &fed.name, k as u32, 0);
        if fed.kind == Stream::Mixed {
            r = r.mixed();
        }
        let mut failing = 0;
        while r.advance() {
            let Some(e) = r.current() else { continue };
            let (sig, _) = self.memo.classify(&e.message);
            failing += (e.cid.is_some() && sig.is_request_failure()) as u64;
            if sig != Sig::Other {
                *self
                    .now
                    .signatures
                    .entry(classes::SIGNATURES[sig as usize].id)
                    .or_default() += 1;
            }
        }
        if !self.access_read {
            self.now.failed += failing;
        }
        let mut s = counts_of(&r.finish());
        s[2] += passed;
        let e = self.now.lines.entry("error").or_default();
        for (i, n) in s.iter().enumerate() {
            e[i] += n;
        }
    }

    /// Answer lines of the upstreams' names: counted as a `dns.jsonl` is read.
    fn answers<'l>(&mut self, lines: impl IntoIterator<Item = &'l [u8]>) {
        let e = self.now.lines.entry("dns").or_default();
        for (n, l) in lines.into_iter().enumerate() {
            let ok = serde_json::from_slice::<serde_json::Value>(l)
                .map_err(|e| e.to_string())
                .and_then(|v| resolvelab_history::ours::dns_record(v, 0, n as u64));
            e[ok.is_err() as usize] += 1;
        }
    }

    /// The counts since the last take, each key's requests under its upstream group as the
    /// lines read so far decide it.
    pub fn take(&mut self) -> Counts {
        let (_, key_group) = key_groups(
            &self.trajs,
            &self.keys,
            &self.addr_group,
            self.upstream.as_deref(),
        );
        let mut out = std::mem::take(&mut self.now);
        for (k, by_class) in self.key_status.iter_mut().enumerate() {
            for (c, n) in by_class.iter_mut().enumerate().filter(|(_, n)| **n > 0) {
                let g = key_group.get(k).cloned().unwrap_or_default();
                *out.requests
                    .entry(g)
                    .or_default()
                    .entry(STATUS_CLASSES[c])
                    .or_default() += *n;
                *n = 0;
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Options;

    const LAB: &str = "1796018401.100 200 \"127.0.0.20:8080\" \"200\" 0.001 GET 1 1 \"0.001\" \"0.000\" \"GET / HTTP/1.1\" 127.0.0.1\n\
1796018401.200 502 \"127.0.0.20:8080\" \"502\" 0.001 GET 2 1 \"0.001\" \"0.000\" \"GET / HTTP/1.1\" 127.0.0.1\n\
1796018402.300 502 \"be\" \"502\" 0.000 GET 3 1 \"-\" \"-\" \"GET / HTTP/1.1\" 127.0.0.1\n\
not a line of the format\n\
1796018402.400 301 \"-\" \"-\" 0.000 GET 4 1 \"-\" \"-\" \"GET /old HTTP/1.1\" 127.0.0.1\n";

    const ERRORS: &str = "2026/12/01 00:00:02 [error] 7#7: *3 no live upstreams while connecting to upstream, client: 127.0.0.1, server: _, request: \"GET / HTTP/1.1\", upstream: \"http://be/\", host: \"x\"\n\
2026/12/01 00:00:01 [error] 7#7: *2 connect() failed (111: Connection refused) while connecting to upstream, client: 127.0.0.1, server: _, request: \"GET / HTTP/1.1\", upstream: \"http://127.0.0.20:8080/\", host: \"x\"\n\
garbage\n";

    fn opts(dir: &Path) -> Options {
        let a = dir.join("access.log");
        let e = dir.join("error.log");
        std::fs::write(&a, LAB).unwrap();
        std::fs::write(&e, ERRORS).unwrap();
        let mut o = Options::new(vec![a], vec![e]);
        o.log_format = LogFormat::lab();
        o.tz_offset_s = Some(0);
        o
    }

    /// Every split of the lines into chunks counts what one diagnosis of them counts.
    #[test]
    fn the_counts_over_any_split_are_the_diagnosis_counts() {
        let dir = tempfile::tempdir().unwrap();
        let o = opts(dir.path());
        let d = crate::diagnose(&o).unwrap();
        let lines = |s: &'static str| s.lines().map(str::as_bytes).collect::<Vec<_>>();
        let (al, el) = (lines(LAB), lines(ERRORS));
        for split in 0..=al.len() {
            let mut t = Tally::new(&o);
            let (a, e) = (
                t.add_stream(Stream::Access, "access.log"),
                t.add_stream(Stream::Error, "error.log"),
            );
            let mut sum = Counts::default();
            let mut add = |c: Counts| {
                for (g, m) in c.requests {
                    for (k, n) in m {
                        *sum.requests
                            .entry(g.clone())
                            .or_default()
                            .entry(k)
                            .or_default() += n;
                    }
                }
                for (k, n) in c.signatures {
                    *sum.signatures.entry(k).or_default() += n;
                }
                for (k, v) in c.lines {
                    let e = sum.lines.entry(k).or_default();
                    for i in 0..3 {
                        e[i] += v[i];
                    }
                }
                for (k, n) in c.unrouted {
                    *sum.unrouted.entry(k).or_default() += n;
                }
                sum.failed += c.failed;
            };
            t.feed(a, al[..split].iter().copied(), 1);
            t.feed(e, el[..split.min(el.len())].iter().copied(), 1);
            add(t.take());
            t.feed(a, al[split..].iter().copied(), split as u64 + 1);
            t.feed(e, el[split.min(el.len())..].iter().copied(), 1);
            add(t.take());
            let want: BTreeMap<String, BTreeMap<&'static str, u64>> = d
                .upstream_requests
                .iter()
                .map(|(g, m)| {
                    let m = m
                        .iter()
                        .map(|(c, n)| (*STATUS_CLASSES.iter().find(|x| *x == c).unwrap(), *n))
                        .collect();
                    (g.clone(), m)
                })
                .collect();
            // A group is known from the line that names it: before it, an address's requests
            // are counted under the group the lines so far decide.
            let named = al
                .iter()
                .position(|l| l.windows(4).any(|w| w == b"\"be\""))
                .unwrap();
            if split == 0 || split > named {
                assert_eq!(sum.requests, want, "split at {split}");
            } else {
                let by_class = |m: &BTreeMap<String, BTreeMap<&'static str, u64>>| {
                    let mut out: BTreeMap<&'static str, u64> = BTreeMap::new();
                    for (c, n) in m.values().flatten() {
                        *out.entry(*c).or_default() += n;
                    }
                    out
                };
                assert_eq!(by_class(&sum.requests), by_class(&want), "split at {split}");
                assert_eq!(sum.requests["(unknown)"]["2xx"], 1, "split at {split}");
            }
            assert_eq!(
                sum.unrouted,
                BTreeMap::from([("3xx", 1)]),
                "split at {split}"
            );
            let sigs: BTreeMap<&str, u64> = d
                .signatures
                .iter()
                .map(|s| (s.id.as_str(), s.count))
                .collect();
            let got: BTreeMap<&str, u64> = sum.signatures.clone();
            assert_eq!(got, sigs, "split at {split}");
            assert_eq!(sum.failed, d.failures, "split at {split}");
            for f in &d.parse.files {
                let v = sum.lines[f.kind.as_str()];
                assert_eq!(
                    v,
                    [f.parsed, f.malformed, f.skipped],
                    "{} at {split}",
                    f.kind
                );
            }
        }
    }

    /// An error log read alone: the failures are the error lines that show one.
    #[test]
    fn without_access_lines_the_failures_are_the_error_lines_that_show_one() {
        let dir = tempfile::tempdir().unwrap();
        let mut o = opts(dir.path());
        o.access.clear();
        let d = crate::diagnose(&o).unwrap();
        let mut t = Tally::new(&o);
        let e = t.add_stream(Stream::Error, "error.log");
        t.feed(e, ERRORS.lines().map(str::as_bytes), 1);
        let c = t.take();
        assert_eq!((c.failed, d.failures), (2, 2));
        assert_eq!(c.span_ms, None);
        assert_eq!(c.lines["error"], [2, 1, 0]);
    }

    /// A mixed stream is read as both kinds; what is neither is passed over, not malformed.
    #[test]
    fn a_mixed_stream_counts_as_both_kinds() {
        let mut o = Options::new(Vec::new(), Vec::new());
        o.log_format = LogFormat::lab();
        let mut t = Tally::new(&o);
        let m = t.add_stream(Stream::Mixed, "pod.log");
        // The error lines first: the chunk's access lines still decide its failures.
        let text = format!("{ERRORS}{LAB}");
        t.feed(m, text.lines().map(str::as_bytes), 1);
        let c = t.take();
        assert_eq!(c.lines["access"], [4, 0, 4]);
        assert_eq!(c.lines["error"], [2, 0, 6]);
        assert_eq!(
            c.failed, 2,
            "the access lines' failures, not the error lines'"
        );
        assert_eq!(t.take(), Counts::default(), "a take empties the counts");
    }
}
