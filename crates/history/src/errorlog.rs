//! nginx error logs: `YYYY/MM/DD HH:MM:SS [level] pid#tid: *cid message, client: …, server: …,
//! request: "…", upstream: "…", host: "…"`.

use crate::time::{FileClock, Offsets};
use crate::{FileStats, open_maybe_gz, time};
use serde::{Deserialize, Serialize};
use std::io::BufRead;
use std::path::{Path, PathBuf};

/// Error-log severity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[allow(missing_docs)]
pub enum Level {
    Debug,
    Info,
    Notice,
    Warn,
    Error,
    Crit,
    Alert,
    Emerg,
}

impl Level {
    fn parse(s: &str) -> Option<Level> {
        Some(match s {
            "debug" => Level::Debug,
            "info" => Level::Info,
            "notice" => Level::Notice,
            "warn" => Level::Warn,
            "error" => Level::Error,
            "crit" => Level::Crit,
            "alert" => Level::Alert,
            "emerg" => Level::Emerg,
            _ => return None,
        })
    }
}

/// One error-log line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorRecord {
    /// Index of the file in the history's file list.
    pub file: u32,
    /// 1-based line number.
    pub line: u64,
    /// The local wall-clock time read as if it were UTC (seconds); see [`ErrorRecord::t_us`].
    pub local_s: i64,
    /// Epoch µs of the start of the logged second, once the UTC offset is applied.
    pub t_us: i64,
    /// Severity.
    pub level: Level,
    /// Worker pid.
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// `*cid`: the client connection id (shared by every request of a keep-alive connection).
    pub cid: Option<u64>,
    /// The message, without the context pairs (`… while connecting to upstream`).
    pub message: String,
    /// `client:` context.
    pub client: Option<String>,
    /// `server:` context.
    pub server: Option<String>,
    /// `request:` context (unquoted).
    pub request: Option<String>,
    /// `upstream:` context (unquoted).
    pub upstream: Option<String>,
    /// `host:` context (unquoted).
    pub host: Option<String>,
}

impl ErrorRecord {
    /// The upstream group named by the `upstream:` context (`http://be/` → `be`, `http://10.0.0.1:80/x` → `10.0.0.1:80`).
    pub fn upstream_host(&self) -> Option<&str> {
        let u = self.upstream.as_deref()?;
        let rest = u.split_once("://").map(|x| x.1).unwrap_or(u);
        Some(rest.split('/').next().unwrap_or(rest))
    }
}

/// Parse one error-log line, also behind the prefix of a mixed stream. `Err` carries the reason.
pub fn parse_line(line: &str, file: u32, line_no: u64) -> Result<ErrorRecord, String> {
    let mut rec = blank(file);
    parse_prefixed(line, file, line_no, &mut rec)?;
    Ok(rec)
}

/// [`parse_into`], and where that fails, from nginx's `YYYY/MM/DD HH:MM:SS [` inside the line:
/// lines of a mixed stream (kubectl `--timestamps`/`--prefix`, `docker compose logs`,
/// journald, syslog) carry a prefix before it.
pub fn parse_prefixed(
    line: &str,
    file: u32,
    line_no: u64,
    rec: &mut ErrorRecord,
) -> Result<(), String> {
    parse_into(line, file, line_no, rec).or_else(|e| match nginx_time_at(line) {
        Some(i) if i > 0 => parse_into(&line[i..], file, line_no, rec),
        _ => Err(e),
    })
}

fn blank(file: u32) -> ErrorRecord {
    ErrorRecord {
        file,
        line: 0,
        local_s: 0,
        t_us: 0,
        level: Level::Error,
        pid: 0,
        tid: 0,
        cid: None,
        message: String::new(),
        client: None,
        server: None,
        request: None,
        upstream: None,
        host: None,
    }
}

/// `haystack.find(needle)` for the two-byte separators (`: `, `, `, `] `): a byte search for
/// the first byte (building a substring searcher per call costs more than the search).
#[inline]
fn find(haystack: &str, needle: &str) -> Option<usize> {
    let (h, n) = (haystack.as_bytes(), needle.as_bytes());
    let mut from = 0;
    while let Some(i) = memchr::memchr(n[0], &h[from..]) {
        let j = from + i;
        if h[j..].starts_with(n) {
            return Some(j);
        }
        from = j + 1;
    }
    None
}

/// The start of the context (`, client: `), searched with one prebuilt finder.
fn find_context(msg: &str) -> Option<usize> {
    static F: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
        std::sync::LazyLock::new(|| memchr::memmem::Finder::new(", client: "));
    F.find(msg.as_bytes())
}

/// Set an optional field, reusing its allocation when it has one.
#[inline]
fn put(slot: &mut Option<String>, v: &str) {
    match slot {
        Some(s) => {
            s.clear();
            s.push_str(v);
        }
        None => *slot = Some(v.to_string()),
    }
}

/// Parse one line into `rec`, reusing its strings: a streamed log allocates nothing per line
/// once the first lines have sized them. On `Err`, `rec` is unspecified.
pub fn parse_into(
    line: &str,
    file: u32,
    line_no: u64,
    rec: &mut ErrorRecord,
) -> Result<(), String> {
    let local_s = line
        .get(..19)
        .and_then(|t| time::parse_error_time(t.as_bytes()))
        .ok_or("does not start with `YYYY/MM/DD HH:MM:SS`")?;
    let rest = line[19..]
        .strip_prefix(" [")
        .ok_or("missing ` [level]` after the time")?;
    let i = find(rest, "] ").ok_or("missing `]` after the level")?;
    let (lvl, rest) = (&rest[..i], &rest[i + 2..]);
    let level = Level::parse(lvl).ok_or_else(|| format!("unknown level `{lvl}`"))?;
    let i = find(rest, ": ").ok_or("missing `pid#tid: `")?;
    let (pidtid, rest) = (&rest[..i], &rest[i + 2..]);
    let (pid, tid) = pidtid.split_once('#').ok_or("missing `pid#tid`")?;
    let pid = pid.parse().map_err(|_| format!("bad pid `{pid}`"))?;
    let tid = tid.parse().map_err(|_| format!("bad tid `{tid}`"))?;
    let (cid, msg) = match rest.strip_prefix('*') {
        Some(r) => {
            let end = r.find(' ').unwrap_or(r.len());
            match r[..end].parse::<u64>() {
                Ok(c) => (Some(c), r[end..].trim_start()),
                Err(_) => (None, rest),
            }
        }
        None => (None, rest),
    };
    rec.file = file;
    rec.line = line_no;
    rec.local_s = local_s;
    rec.t_us = local_s * 1_000_000;
    rec.level = level;
    rec.pid = pid;
    rec.tid = tid;
    rec.cid = cid;
    rec.message.clear();
    // The context always starts with `, client: ` (ngx_http_log_error); the message itself may
    // contain commas, so split at that marker only.
    let mut seen = [false; 5];
    if let Some(idx) = find_context(msg) {
        rec.message.push_str(&msg[..idx]);
        seen = parse_context(&msg[idx + 2..], rec);
    } else {
        rec.message.push_str(msg);
    }
    for (slot, seen) in [
        &mut rec.client,
        &mut rec.server,
        &mut rec.request,
        &mut rec.upstream,
        &mut rec.host,
    ]
    .into_iter()
    .zip(seen)
    {
        if !seen {
            *slot = None;
        }
    }
    Ok(())
}

/// Where nginx's `YYYY/MM/DD HH:MM:SS [` starts inside a line with a prefix, if anywhere.
pub fn nginx_time_at(line: &str) -> Option<usize> {
    nginx_time_in(line.as_bytes())
}

/// [`nginx_time_at`] of a line's bytes (the time is ASCII: where the line is not UTF-8, its
/// lossy text has the time as well).
fn nginx_time_in(b: &[u8]) -> Option<usize> {
    let digits = |r: std::ops::Range<usize>| b[r].iter().all(u8::is_ascii_digit);
    let mut from = 0;
    while let Some(i) = memchr::memchr(b'/', &b[from..]) {
        let slash = from + i;
        from = slash + 1;
        let Some(start) = slash.checked_sub(4) else {
            continue;
        };
        if b.len() >= start + 21
            && digits(start..start + 4)
            && b[start + 7] == b'/'
            && digits(start + 5..start + 7)
            && digits(start + 8..start + 10)
            && b[start + 10] == b' '
            && b[start + 13] == b':'
            && b[start + 16] == b':'
            && &b[start + 19..start + 21] == b" ["
        {
            return Some(start);
        }
    }
    None
}

/// Parse the `client: …, server: …` pairs; returns which of client, server, request,
/// upstream, host were set.
fn parse_context(mut s: &str, rec: &mut ErrorRecord) -> [bool; 5] {
    let mut seen = [false; 5];
    while let Some(k) = find(s, ": ") {
        let (key, rest) = (&s[..k], &s[k + 2..]);
        let (value, next) = if let Some(q) = rest.strip_prefix('"') {
            // Quoted values end at `"` followed by `, ` or end of line.
            let mut end = None;
            let mut from = 0;
            while let Some(i) = memchr::memchr(b'"', &q.as_bytes()[from..]) {
                let j = from + i;
                if q[j + 1..].is_empty() || q[j + 1..].starts_with(", ") {
                    end = Some(j);
                    break;
                }
                from = j + 1;
            }
            let j = end.unwrap_or(q.len());
            (&q[..j], q.get(j + 1..).unwrap_or(""))
        } else {
            match find(rest, ", ") {
                Some(i) => (&rest[..i], &rest[i..]),
                None => (rest, ""),
            }
        };
        let (slot, n) = match key {
            "client" => (&mut rec.client, 0),
            "server" => (&mut rec.server, 1),
            "request" => (&mut rec.request, 2),
            "upstream" => (&mut rec.upstream, 3),
            "host" => (&mut rec.host, 4),
            _ => {
                s = match next.strip_prefix(", ") {
                    Some(n) => n,
                    None => break,
                };
                continue;
            }
        };
        put(slot, value);
        seen[n] = true;
        s = match next.strip_prefix(", ") {
            Some(n) => n,
            None => break,
        };
    }
    seen
}

/// A line an [`ErrorReader`] passes over without counting it (nothing but a line end).
pub fn is_blank(line: &[u8]) -> bool {
    line.iter().all(|b| *b == b'\r' || *b == b'\n')
}

/// False for a line of a mixed stream that an [`ErrorReader`] passes over whatever comes around
/// it (no nginx time in it, not a continuation, not Docker's JSON): such a line may be handed
/// to the reader as an empty line, which it passes over without counting it (it counts the
/// line as skipped when it reads it: so should whoever hands it over, unless it
/// [`is_blank`]).
pub fn may_be_error_line(line: &[u8]) -> bool {
    line.starts_with(br#"{"log":""#) || is_continuation(line) || nginx_time_in(line).is_some()
}

/// A line that continues the entry above it: indented, or a Lua `stack traceback:` header.
pub fn is_continuation(line: &[u8]) -> bool {
    line.first().is_some_and(|b| *b == b' ' || *b == b'\t') || line.starts_with(b"stack traceback:")
}

/// A line with nginx's `YYYY/MM/DD HH:MM:SS [` somewhere in its head (behind a stream prefix):
/// only such an entry takes continuation lines.
pub fn looks_like_entry(line: &[u8]) -> bool {
    let head = &line[..line.len().min(240)];
    head.windows(21).any(|w| {
        w[4] == b'/'
            && w[7] == b'/'
            && w[10] == b' '
            && w[13] == b':'
            && w[16] == b':'
            && w[19] == b' '
            && w[20] == b'['
    })
}

/// Read a whole error log (plain or gzip) into memory. Malformed lines are counted in the
/// stats. For logs of any size prefer [`ErrorStream`], which keeps one line per file.
pub fn read(path: &Path, file: u32) -> anyhow::Result<(Vec<ErrorRecord>, FileStats)> {
    let mut r = ErrorReader::open(path, file, 0)?;
    let mut out = Vec::new();
    while r.advance() {
        out.extend(r.current().cloned());
    }
    Ok((out, r.stats))
}

/// Streaming reader of one error log: one parsed line at a time.
pub struct ErrorReader {
    file: u32,
    reader: Box<dyn BufRead>,
    buf: Vec<u8>,
    /// The line after the current entry, read to see whether it continues it.
    next: Vec<u8>,
    has_next: bool,
    /// A mixed stream (`--logs`): lines that are not error lines are passed over, not malformed.
    mixed: bool,
    line_no: u64,
    offset_s: i32,
    /// The current line, parsed into reused strings.
    rec: ErrorRecord,
    has: bool,
    stats: FileStats,
}

impl ErrorReader {
    /// Open `path` (plain or gzip); `file` is the index reported in every record and
    /// `offset_s` the server's UTC offset (seconds east) that places lines on the epoch clock.
    pub fn open(path: &Path, file: u32, offset_s: i32) -> anyhow::Result<ErrorReader> {
        Ok(ErrorReader::from_reader(
            open_maybe_gz(path)?,
            path,
            file,
            offset_s,
        ))
    }

    /// [`ErrorReader::open`] over lines already read (`name` names them in the statistics):
    /// what a follower holds, read where it is.
    pub fn from_reader(
        reader: Box<dyn BufRead>,
        name: &Path,
        file: u32,
        offset_s: i32,
    ) -> ErrorReader {
        ErrorReader {
            file,
            reader,
            buf: Vec::with_capacity(512),
            next: Vec::with_capacity(512),
            has_next: false,
            mixed: false,
            line_no: 0,
            offset_s,
            rec: blank(file),
            has: false,
            stats: FileStats::new(name, "error"),
        }
    }

    /// Pass over lines that are not error lines (a mixed stream, `--logs`) instead of counting
    /// them as malformed.
    pub fn mixed(mut self) -> ErrorReader {
        self.mixed = true;
        self
    }

    /// Read one raw line into `buf` (from the look-ahead if there is one); false at the end.
    fn read_line(&mut self, into_next: bool) -> bool {
        if !into_next && self.has_next {
            std::mem::swap(&mut self.buf, &mut self.next);
            self.has_next = false;
            return true;
        }
        let buf = if into_next {
            &mut self.next
        } else {
            &mut self.buf
        };
        buf.clear();
        match self.reader.read_until(b'\n', buf) {
            Ok(0) => false,
            Ok(_) => {
                while buf.last().is_some_and(|b| *b == b'\n' || *b == b'\r') {
                    buf.pop();
                }
                true
            }
            Err(e) => {
                self.stats.error = Some(e.to_string());
                false
            }
        }
    }

    /// Join the lines that continue the entry in `buf` (a multi-line message: a Lua
    /// `stack traceback:` whose last frame carries nginx's `, client: …` context).
    fn join_continuations(&mut self) {
        while self.has_next || self.read_line(true) {
            self.has_next = true;
            if !is_continuation(&self.next) {
                return;
            }
            self.line_no += 1;
            self.stats.lines += 1;
            self.stats.continued += 1;
            self.buf.push(b' ');
            let text = self.next.trim_ascii_start();
            self.buf.extend_from_slice(text);
            self.has_next = false;
        }
    }

    /// Read the next well-formed line into [`ErrorReader::current`]; false at end of file (or
    /// at a read error, which is kept in the stats).
    pub fn advance(&mut self) -> bool {
        self.has = false;
        loop {
            if !self.read_line(false) {
                return false;
            }
            self.line_no += 1;
            if self.buf.is_empty() {
                continue;
            }
            self.stats.lines += 1;
            if self.mixed
                && let Some(inner) = crate::jsonline::docker_log_line(&self.buf)
            {
                self.buf = inner;
            }
            let line_no = self.line_no;
            if looks_like_entry(&self.buf) {
                self.join_continuations();
            }
            // nginx writes UTF-8 (or escapes); validating is much cheaper than the lossy path.
            let line = match std::str::from_utf8(&self.buf) {
                Ok(l) => std::borrow::Cow::Borrowed(l),
                Err(_) => String::from_utf8_lossy(&self.buf),
            };
            match parse_prefixed(&line, self.file, line_no, &mut self.rec) {
                Ok(()) => {
                    self.stats.parsed += 1;
                    self.rec.t_us = (self.rec.local_s - self.offset_s as i64) * 1_000_000;
                    self.has = true;
                    return true;
                }
                Err(_) if self.mixed => self.stats.skipped += 1,
                Err(reason) => self.stats.malformed(line_no, &reason, &line),
            }
        }
    }

    /// The current line (after `advance` returned true).
    pub fn current(&self) -> Option<&ErrorRecord> {
        self.has.then_some(&self.rec)
    }

    /// Statistics so far (consumes the reader).
    pub fn finish(self) -> FileStats {
        self.stats
    }

    /// Statistics so far.
    pub fn stats(&self) -> &FileStats {
        &self.stats
    }
}

/// Lines handed over from memory (what a follower read), read by an [`ErrorReader`] as a file
/// that grows: past the last line handed over is the end *for now*, and
/// [`ErrorStream::resume`] reads on once more came.
///
/// ```
/// use resolvelab_history::errorlog::{ErrorReader, Inbox};
/// let inbox = Inbox::default();
/// let mut r = ErrorReader::from_reader(inbox.reader(), "error.log".as_ref(), 0, 0);
/// assert!(!r.advance());
/// inbox.push(b"2026/12/01 00:00:02 [error] 7#7: *3 no live upstreams while connecting to upstream\n".to_vec());
/// assert!(r.advance());
/// assert_eq!(r.current().unwrap().cid, Some(3));
/// ```
#[derive(Clone, Default)]
pub struct Inbox(std::sync::Arc<std::sync::Mutex<std::collections::VecDeque<Vec<u8>>>>);

impl Inbox {
    /// Hand over whole lines, each ending with its newline.
    pub fn push(&self, bytes: Vec<u8>) {
        if !bytes.is_empty() {
            self.0
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push_back(bytes);
        }
    }

    /// The bytes handed over and not taken by the reader yet (its current chunk aside).
    pub fn waiting_bytes(&self) -> usize {
        let q = self.0.lock().unwrap_or_else(|e| e.into_inner());
        q.iter().map(Vec::len).sum()
    }

    /// A reader of what is handed over, from now on.
    pub fn reader(&self) -> Box<dyn BufRead> {
        Box::new(InboxReader {
            inbox: self.clone(),
            buf: Vec::new(),
            pos: 0,
        })
    }
}

/// [`Inbox::reader`]: one chunk at a time, end of file when none is waiting.
struct InboxReader {
    inbox: Inbox,
    buf: Vec<u8>,
    pos: usize,
}

impl std::io::Read for InboxReader {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        let n = {
            let b = self.fill_buf()?;
            let n = b.len().min(out.len());
            out[..n].copy_from_slice(&b[..n]);
            n
        };
        self.consume(n);
        Ok(n)
    }
}

impl BufRead for InboxReader {
    fn fill_buf(&mut self) -> std::io::Result<&[u8]> {
        if self.pos >= self.buf.len() {
            let next = self
                .inbox
                .0
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .pop_front();
            if let Some(b) = next {
                self.buf = b;
                self.pos = 0;
            }
        }
        Ok(self.buf.get(self.pos..).unwrap_or_default())
    }

    fn consume(&mut self, n: usize) {
        self.pos += n;
    }
}

/// Several error logs (rotations, several `error_log` destinations) merged into one stream in
/// time order without loading them: each file is read one line at a time and the stream yields
/// the earliest head (ties: the earlier file), which is the order of a stable sort by time of
/// the files concatenated. A line written out of order inside one file (several workers share a
/// file) is yielded where it stands and counted in [`ErrorStream::late_lines`]; consumers that
/// need it at its sorted place key their buffers by (time, file, line).
pub struct ErrorStream {
    readers: Vec<ErrorReader>,
    live: Vec<bool>,
    last: Option<usize>,
    max_t_us: i64,
    lines: u64,
    late: u64,
    offsets: Offsets,
    clocks: Vec<FileClock>,
}

impl ErrorStream {
    /// Open every file; file indexes start at `first_file`. `offset_s` is the server's UTC
    /// offset (seconds east) of the error log's local time.
    pub fn open(paths: &[PathBuf], first_file: u32, offset_s: i32) -> anyhow::Result<ErrorStream> {
        Self::open_with(paths, 0, first_file, Offsets::fixed(offset_s))
    }

    /// [`ErrorStream::open`] with an offset schedule (daylight saving seen in the access log),
    /// which [`ErrorStream::offsets_mut`] may extend while the stream is read; the last `mixed`
    /// files are mixed streams (`--logs`).
    pub fn open_with(
        paths: &[PathBuf],
        mixed: usize,
        first_file: u32,
        offsets: Offsets,
    ) -> anyhow::Result<ErrorStream> {
        let mut readers = Vec::new();
        let plain = paths.len().saturating_sub(mixed);
        for (i, p) in paths.iter().enumerate() {
            let r = ErrorReader::open(p, first_file + i as u32, 0)?;
            readers.push(if i >= plain { r.mixed() } else { r });
        }
        Ok(ErrorStream::from_readers(readers, offsets))
    }

    /// A stream of readers already open (lines handed over from memory: [`Inbox`]), in the
    /// order of their file indexes.
    pub fn from_readers(mut readers: Vec<ErrorReader>, offsets: Offsets) -> ErrorStream {
        let live = readers.iter_mut().map(|r| r.advance()).collect();
        ErrorStream {
            clocks: vec![FileClock::default(); readers.len()],
            readers,
            live,
            last: None,
            max_t_us: i64::MIN,
            lines: 0,
            late: 0,
            offsets,
        }
    }

    /// Read on where a reader had come to its end: files that grow ([`Inbox`]) got more lines.
    pub fn resume(&mut self) {
        self.settle();
        for (r, live) in self.readers.iter_mut().zip(&mut self.live) {
            if !*live {
                *live = r.advance();
            }
        }
    }

    /// Per-file statistics so far.
    pub fn file_stats(&self) -> Vec<FileStats> {
        self.readers.iter().map(|r| r.stats().clone()).collect()
    }

    /// The offset schedule.
    pub fn offsets(&self) -> &Offsets {
        &self.offsets
    }

    /// The offset schedule, to extend with what the access log shows.
    pub fn offsets_mut(&mut self) -> &mut Offsets {
        &mut self.offsets
    }

    /// Epoch µs of file `i`'s current line, and that file's clock after it (`i64::MAX` while
    /// the schedule cannot place it yet: see [`Offsets::try_utc`]).
    fn head_t_us(&self, i: usize) -> Option<(i64, FileClock)> {
        let r = self.readers[i].current()?;
        Some(match self.offsets.try_utc(r.local_s, self.clocks[i]) {
            Some((u, c)) => (u * 1_000_000, c),
            None => (i64::MAX, self.clocks[i]),
        })
    }

    fn settle(&mut self) {
        if let Some(i) = self.last.take() {
            self.live[i] = self.readers[i].advance();
        }
    }

    fn pick(&self) -> Option<(usize, i64, FileClock)> {
        if self.readers.len() == 1 {
            return self
                .live
                .first()
                .filter(|l| **l)
                .and_then(|_| self.head_t_us(0))
                .map(|(t, c)| (0, t, c));
        }
        (0..self.readers.len())
            .filter(|&i| self.live[i])
            .filter_map(|i| self.head_t_us(i).map(|(t, c)| (i, t, c)))
            .min_by_key(|x| x.1)
    }

    /// Epoch µs of the next line, without consuming it.
    pub fn peek_t_us(&mut self) -> Option<i64> {
        self.settle();
        self.pick().map(|x| x.1)
    }

    /// The next line in time order across all files (a lending iterator).
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Option<&ErrorRecord> {
        self.settle();
        let (i, t_us, clock) = self.pick()?;
        let (t_us, clock) = if t_us == i64::MAX {
            // Taken before it could be placed: with what is known.
            let r = self.readers[i].current()?;
            let (u, c) = self.offsets.to_utc(r.local_s, self.clocks[i]);
            (u * 1_000_000, c)
        } else {
            (t_us, clock)
        };
        self.last = Some(i);
        self.clocks[i] = clock;
        self.readers[i].rec.t_us = t_us;
        self.lines += 1;
        if t_us < self.max_t_us {
            self.late += 1;
        }
        self.max_t_us = self.max_t_us.max(t_us);
        self.readers[i].current()
    }

    /// Lines yielded so far.
    pub fn lines(&self) -> u64 {
        self.lines
    }

    /// Lines yielded after a later line (out of order inside their file).
    pub fn late_lines(&self) -> u64 {
        self.late
    }

    /// Per-file statistics (consumes the stream).
    pub fn finish(self) -> Vec<FileStats> {
        self.readers.into_iter().map(|r| r.finish()).collect()
    }
}

/// Read the given line numbers (1-based) of one error log again, for evidence: lines are
/// counted, and only the wanted ones are parsed. Stops after the last wanted line. A wanted
/// line that no longer parses (the file changed) is left out.
pub fn fetch_lines(path: &Path, file: u32, wanted: &[u64]) -> anyhow::Result<Vec<ErrorRecord>> {
    let mut want: Vec<u64> = wanted.to_vec();
    want.sort_unstable();
    want.dedup();
    let Some(&last) = want.last() else {
        return Ok(Vec::new());
    };
    let mut r = open_maybe_gz(path)?;
    let mut out = Vec::new();
    let mut buf = Vec::new();
    let mut n = 0u64;
    let mut next = 0;
    while n < last {
        buf.clear();
        match r.read_until(b'\n', &mut buf) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        n += 1;
        if want[next] != n {
            continue;
        }
        next += 1;
        let line = String::from_utf8_lossy(&buf);
        if let Ok(rec) = parse_line(line.trim_end_matches(['\n', '\r']), file, n) {
            out.push(rec);
        }
        if next == want.len() {
            break;
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Only lines the reader can make nothing of are said not to be error lines: an access
    /// line, a supervisor's own line; never an entry behind a prefix, a continuation or
    /// Docker's JSON.
    #[test]
    fn what_may_be_an_error_line() {
        let no: [&[u8]; 3] = [
            br#"10.1.2.3 - - [01/Sep/2016:17:45:04 +0000] "GET /a/b HTTP/1.1" 502 181"#,
            b"2016-09-01 17:45:14,289 DEBG 'nginx' stdout output:",
            b"",
        ];
        let yes: [&[u8]; 5] = [
            b"2016/09/01 17:45:04 [error] 25#0: *13587 upstream timed out",
            b"web-1  | 2016/09/01 17:45:04 [error] 25#0: *1 connect() failed",
            b"\tcontent_by_lua(nginx.conf:12):3: in main chunk",
            b"stack traceback:",
            br#"{"log":"2016/09/01 17:45:04 [error] 25#0: x\n","stream":"stderr"}"#,
        ];
        for l in no {
            assert!(!may_be_error_line(l), "{}", String::from_utf8_lossy(l));
            assert!(parse_line(&String::from_utf8_lossy(l), 0, 1).is_err());
        }
        for l in yes {
            assert!(may_be_error_line(l), "{}", String::from_utf8_lossy(l));
        }
    }

    #[test]
    fn lines_of_mixed_streams_parse_behind_their_prefix() {
        let core = r#"2022/11/02 12:42:51 [error] 22#22: *3188 connect() failed (111: Connection refused) while connecting to upstream, client: 10.0.0.222, server: , request: "GET / HTTP/1.1", upstream: "http://172.20.0.6:9000/", host: "x""#;
        for prefix in [
            "",
            "nginx_1                                     | ",
            "web-1  | ",
            "2024-10-21T10:41:45.462803094+02:00 ",
            "[pod/web-7d9/nginx] ",
            "Apr 21 08:13:58 box nginx[30946]: box nginx: ",
            "<11>Nov  2 12:42:51 host nginx: ",
        ] {
            let r = parse_line(&format!("{prefix}{core}"), 0, 1).unwrap();
            assert_eq!(
                (r.cid, r.local_s % 86400),
                (Some(3188), 12 * 3600 + 42 * 60 + 51),
                "{prefix}"
            );
            assert_eq!(r.upstream.as_deref(), Some("http://172.20.0.6:9000/"));
        }
        assert!(
            parse_line(
                "Apr 21 08:12:57 box systemd[1]: Reloaded nginx.service",
                0,
                1
            )
            .is_err()
        );
        assert_eq!(
            nginx_time_at("x 2022/11/02 12:42:51 [error] 1#1: m"),
            Some(2)
        );
        assert_eq!(nginx_time_at("2022/11/02 12:42:51 error"), None);
    }

    #[test]
    fn nlu_line_with_context() {
        let l = r#"2026/11/30 06:00:01 [error] 1234#0: *5 no live upstreams while connecting to upstream, client: 127.0.0.1, server: , request: "GET / HTTP/1.1", upstream: "http://be/", host: "127.0.0.1:8080""#;
        let r = parse_line(l, 0, 7).unwrap();
        assert_eq!(r.level, Level::Error);
        assert_eq!((r.pid, r.tid, r.cid), (1234, 0, Some(5)));
        assert_eq!(r.message, "no live upstreams while connecting to upstream");
        assert_eq!(r.client.as_deref(), Some("127.0.0.1"));
        assert_eq!(r.server.as_deref(), Some(""));
        assert_eq!(r.request.as_deref(), Some("GET / HTTP/1.1"));
        assert_eq!(r.upstream_host(), Some("be"));
        assert_eq!(r.host.as_deref(), Some("127.0.0.1:8080"));
    }

    #[test]
    fn resolver_line_without_cid_and_bad_lines() {
        let l =
            "2026/11/30 06:00:01 [error] 99#99: be.lab could not be resolved (3: Host not found)";
        let r = parse_line(l, 0, 1).unwrap();
        assert_eq!(r.cid, None);
        assert_eq!(
            r.message,
            "be.lab could not be resolved (3: Host not found)"
        );
        let w = "2026/11/30 06:00:01 [warn] 9#9: *3 upstream server temporarily disabled while reading response header from upstream, client: 127.0.0.1, server: , request: \"GET /a\"b HTTP/1.1\", upstream: \"http://127.0.0.20:8080/\", host: \"x\"";
        let r = parse_line(w, 0, 2).unwrap();
        assert_eq!(r.level, Level::Warn);
        assert_eq!(r.request.as_deref(), Some("GET /a\"b HTTP/1.1"));
        assert_eq!(r.upstream_host(), Some("127.0.0.20:8080"));
        assert!(parse_line("garbage", 0, 3).is_err());
        assert!(parse_line("2026/11/30 06:00:01 [loud] 1#0: x", 0, 4).is_err());
    }

    fn line(t: &str, cid: u64, msg: &str) -> String {
        format!(
            "2026/11/30 {t} [error] 1#0: *{cid} {msg}, client: 127.0.0.1, server: , request: \"GET / HTTP/1.1\", upstream: \"http://be/\", host: \"x\"\n"
        )
    }

    #[test]
    fn stream_merges_files_in_time_order_and_counts_late_lines() {
        use std::io::Write;
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("error.log");
        // A worker wrote second 02 after second 03: a late line.
        let text = line("06:00:01", 1, "a1")
            + &line("06:00:03", 2, "a3")
            + "junk\n"
            + &line("06:00:02", 3, "a2")
            + &line("06:00:05", 4, "a5");
        std::fs::write(&a, text).unwrap();
        let b = dir.path().join("other.log.1.gz");
        let mut gz = flate2::write::GzEncoder::new(
            std::fs::File::create(&b).unwrap(),
            flate2::Compression::fast(),
        );
        gz.write_all((line("06:00:01", 9, "b1") + &line("06:00:04", 9, "b4")).as_bytes())
            .unwrap();
        gz.finish().unwrap();
        let mut s = ErrorStream::open(&[a.clone(), b], 3, 3600).unwrap();
        let mut seen = Vec::new();
        while let Some(t) = s.peek_t_us() {
            let r = s.next().unwrap();
            assert_eq!(r.t_us, t);
            assert_eq!(r.t_us, (r.local_s - 3600) * 1_000_000);
            seen.push((r.message.clone(), r.file, r.line));
        }
        let msgs: Vec<&str> = seen.iter().map(|x| x.0.as_str()).collect();
        // Ties in one second go to the earlier file; the late line comes where it stands.
        assert_eq!(msgs, ["a1", "b1", "a3", "a2", "b4", "a5"]);
        assert_eq!(seen[3], ("a2".to_string(), 3, 4));
        assert_eq!((s.lines(), s.late_lines()), (6, 1));
        let st = s.finish();
        assert_eq!((st[0].parsed, st[0].malformed), (4, 1));
        assert_eq!(st[0].samples[0].line, 3);
        assert_eq!((st[1].parsed, st[1].kind.as_str()), (2, "error"));
        // Evidence lines are read again by number, only those.
        let got = fetch_lines(&a, 3, &[4, 1, 3, 4]).unwrap();
        let got: Vec<(u64, &str)> = got.iter().map(|r| (r.line, r.message.as_str())).collect();
        assert_eq!(got, [(1, "a1"), (4, "a2")], "line 3 is junk");
        assert!(fetch_lines(&a, 3, &[]).unwrap().is_empty());
    }
}
