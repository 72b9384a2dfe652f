//! Streaming access-log reader: one file or several merged in time order, without keeping lines.
//!
//! Each matched line is exposed as a borrowed [`AccessLine`] (byte spans into a reused buffer), so
//! reading 10 M lines allocates nothing per line. Lines that do not match the format are counted
//! and sampled in [`FileStats`], never fatal.

use crate::jsonline::Template;
use crate::logformat::{Field, LogFormat, N_FIELDS, Spans};
use crate::{FileStats, LineIndex, open_maybe_gz, time};
use std::io::{BufRead, Read};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// One matched access-log line (borrowed).
#[derive(Clone, Copy)]
pub struct AccessLine<'a> {
    /// Index of the file in the stream's file list.
    pub file: u32,
    /// 1-based line number.
    pub line: u64,
    /// Request end time (the log write time), epoch µs.
    pub t_us: i64,
    /// UTC offset seen in `$time_local` / `$time_iso8601`, if the format has one.
    pub utc_offset_s: Option<i32>,
    raw: &'a [u8],
    spans: &'a Spans,
}

impl<'a> AccessLine<'a> {
    /// Raw bytes of a field (`-` is returned as is).
    #[inline]
    pub fn get(&self, f: Field) -> Option<&'a [u8]> {
        self.spans[f as usize].map(|(a, b)| &self.raw[a as usize..b as usize])
    }

    /// Raw bytes of the field with index `i` (`Field as usize`).
    #[inline]
    pub fn get_index(&self, i: usize) -> Option<&'a [u8]> {
        self.spans
            .get(i)
            .copied()
            .flatten()
            .map(|(a, b)| &self.raw[a as usize..b as usize])
    }

    /// A field as text (lossy only for invalid UTF-8, which nginx escapes anyway).
    pub fn text(&self, f: Field) -> Option<&'a str> {
        self.get(f).and_then(|b| std::str::from_utf8(b).ok())
    }

    /// `$status`.
    #[inline]
    pub fn status(&self) -> Option<u16> {
        self.get(Field::Status)
            .and_then(time::parse_u64)
            .map(|v| v as u16)
    }

    /// `$request_time` in µs.
    #[inline]
    pub fn request_time_us(&self) -> Option<i64> {
        self.get(Field::RequestTime).and_then(time::parse_secs_us)
    }

    /// `$connection`.
    #[inline]
    pub fn connection(&self) -> Option<u64> {
        self.get(Field::Connection).and_then(time::parse_u64)
    }

    /// `$connection_requests`.
    pub fn connection_requests(&self) -> Option<u64> {
        self.get(Field::ConnectionRequests)
            .and_then(time::parse_u64)
    }

    /// The request method: `$request_method`, else the first word of `$request`.
    pub fn method(&self) -> Option<&'a str> {
        if let Some(m) = self.text(Field::RequestMethod) {
            return Some(m);
        }
        self.text(Field::Request)
            .and_then(|r| r.split(' ').next())
            .filter(|m| !m.is_empty() && *m != "-")
    }

    /// The whole raw line.
    pub fn raw(&self) -> &'a [u8] {
        self.raw
    }

    /// An owned copy of the fields the history exposes.
    pub fn to_record(&self) -> AccessRecord {
        let s = |f| self.text(f).map(str::to_string);
        AccessRecord {
            file: self.file,
            line: self.line,
            t_us: self.t_us,
            status: self.status(),
            request: s(Field::Request),
            method: self.method().map(str::to_string),
            request_time_us: self.request_time_us(),
            upstream_addr: s(Field::UpstreamAddr),
            upstream_status: s(Field::UpstreamStatus),
            upstream_response_time: s(Field::UpstreamResponseTime),
            upstream_connect_time: s(Field::UpstreamConnectTime),
            connection: self.connection(),
            connection_requests: self.connection_requests(),
            remote_addr: s(Field::RemoteAddr),
            host: s(Field::Host),
        }
    }
}

/// An owned access-log record.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[allow(missing_docs)]
pub struct AccessRecord {
    pub file: u32,
    pub line: u64,
    pub t_us: i64,
    pub status: Option<u16>,
    pub request: Option<String>,
    pub method: Option<String>,
    pub request_time_us: Option<i64>,
    pub upstream_addr: Option<String>,
    pub upstream_status: Option<String>,
    pub upstream_response_time: Option<String>,
    pub upstream_connect_time: Option<String>,
    pub connection: Option<u64>,
    pub connection_requests: Option<u64>,
    pub remote_addr: Option<String>,
    pub host: Option<String>,
}

/// Samples of malformed lines kept per file.
pub const MAX_SAMPLES: usize = 5;
/// Raw malformed lines kept per file to compute the nearest guess.
const GUESS_LINES: usize = 20;

/// Streaming reader of one access-log file.
pub struct AccessReader {
    reader: Box<dyn BufRead + Send>,
    buf: Vec<u8>,
    line_no: u64,
    fmt: Arc<LogFormat>,
    spans: Spans,
    t_us: i64,
    offset: Option<i32>,
    head: usize,
    filled: usize,
    /// The file offset of `buf[0]`.
    base: u64,
    /// Checkpoints for reading cited lines again (plain files only).
    index: Option<LineIndex>,
    eof: bool,
    /// Cache of the last textual timestamp: `$time_local` repeats for every request of a second.
    tcache: Vec<u8>,
    tcache_val: (i64, i32),
    stats: FileStats,
    bad_lines: Vec<String>,
    done: bool,
    /// A mixed stream (`--logs`): lines that do not match are passed over, not malformed.
    mixed: bool,
    json: JsonShape,
}

/// The learned shape of a JSON log's lines ([`Template`]), and when to learn it again.
#[derive(Default)]
struct JsonShape {
    template: Option<Template>,
    /// Lines tried to learn from since the last template.
    tries: u32,
    /// Lines in a row the template did not match.
    misses: u32,
}

impl JsonShape {
    /// Lines that may teach a template before the parser is left to read them all.
    const TRIES: u32 = 64;
    /// Misses in a row after which the log is taken to have changed shape.
    const MISSES: u32 = 64;

    fn learn(&mut self, line: &[u8], keys: &[(String, Field)]) {
        if self.template.is_none() && self.tries < Self::TRIES {
            self.tries += 1;
            self.template = Template::learn(line, keys);
            self.misses = 0;
        }
    }

    fn missed(&mut self) {
        self.misses += 1;
        if self.misses >= Self::MISSES {
            *self = JsonShape::default();
        }
    }
}

/// What [`AccessReader::advance`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    /// A line: its range in the reader's buffer.
    Line(usize, usize),
    /// The buffer is used up.
    Refill,
    /// The end of the file.
    End,
}

impl AccessReader {
    /// Open `path` (plain or gzip) for `fmt`.
    pub fn open(path: &Path, fmt: Arc<LogFormat>) -> anyhow::Result<AccessReader> {
        let reader = open_maybe_gz(path)?;
        Ok(AccessReader {
            reader,
            buf: Vec::new(),
            head: 0,
            filled: 0,
            base: 0,
            index: (!crate::is_gzip(path)).then(LineIndex::default),
            eof: false,
            line_no: 0,
            fmt,
            spans: [None; N_FIELDS],
            t_us: 0,
            offset: None,
            tcache: Vec::new(),
            tcache_val: (0, 0),
            stats: FileStats::new(path, "access"),
            bad_lines: Vec::new(),
            done: false,
            mixed: false,
            json: JsonShape::default(),
        })
    }

    /// Pass over lines that do not match (a mixed stream, `--logs`) instead of counting them
    /// as malformed; those that are not error lines still feed the nearest-format guess.
    pub fn mixed(mut self) -> AccessReader {
        self.mixed = true;
        self
    }

    /// The next raw line as a range of `buf` (without its newline), if the buffer holds one;
    /// [`Next::Refill`] when it holds only the start of one (see [`AccessReader::refill`]).
    #[inline]
    fn next_line(&mut self) -> Next {
        if let Some(r) = memchr::memchr(b'\n', &self.buf[self.head..self.filled]) {
            let s = self.head;
            self.head = s + r + 1;
            return Next::Line(s, s + r);
        }
        if !self.eof {
            return Next::Refill;
        }
        if self.head < self.filled {
            let s = self.head;
            self.head = self.filled;
            return Next::Line(s, self.filled);
        }
        Next::End
    }

    /// Move the unread tail (the start of the next line) into `fresh`, read more after it, and
    /// return the old buffer: the lines already handed out stay valid in it, so a batch takes
    /// it whole instead of copying its lines.
    fn refill(&mut self, mut fresh: Vec<u8>) -> Vec<u8> {
        let tail = self.filled - self.head;
        // A line longer than the buffer doubles it.
        let size = if tail * 2 > self.buf.len() {
            self.buf.len() * 2
        } else {
            self.buf.len()
        };
        if fresh.len() < size {
            fresh.resize(size, 0);
        }
        fresh[..tail].copy_from_slice(&self.buf[self.head..self.filled]);
        self.base += self.head as u64;
        let old = std::mem::replace(&mut self.buf, fresh);
        self.filled = tail;
        self.head = 0;
        while !self.eof && self.filled < self.buf.len() {
            match self.reader.read(&mut self.buf[self.filled..]) {
                Ok(0) => self.eof = true,
                Ok(n) => {
                    self.filled += n;
                    break;
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    self.stats.error = Some(e.to_string());
                    self.eof = true;
                }
            }
        }
        old
    }

    /// Advance to the next well-formed line in the buffer. [`Next::Refill`]: the buffer is
    /// used up; call [`AccessReader::refill`] and advance again.
    pub fn advance(&mut self) -> Next {
        if self.done {
            return Next::End;
        }
        loop {
            let (ls, mut le) = match self.next_line() {
                Next::Line(ls, le) => (ls, le),
                Next::Refill => return Next::Refill,
                Next::End => {
                    self.done = true;
                    return Next::End;
                }
            };
            self.line_no += 1;
            if let Some(ix) = &mut self.index {
                ix.note(self.line_no, self.base + ls as u64);
            }
            if le > ls && self.buf[le - 1] == b'\r' {
                le -= 1;
            }
            if le == ls {
                continue;
            }
            self.stats.lines += 1;
            if self.mixed
                && let Some(inner) = crate::jsonline::docker_log_line(&self.buf[ls..le])
            {
                // The record's line is never longer than the record: it takes its place.
                self.buf[ls..ls + inner.len()].copy_from_slice(&inner);
                le = ls + inner.len();
            }
            let mut res = self.match_at(ls, le);
            let mut start = ls;
            if res.is_err() {
                // A mixed stream (`docker compose logs`, `kubectl logs --prefix/--timestamps`,
                // journald, syslog): the line may match behind its prefix.
                let ends: Vec<usize> = stream_prefix_ends(&self.buf[ls..le]).collect();
                for p in ends {
                    if self.match_at(ls + p, le).is_ok() {
                        (start, res) = (ls + p, Ok(()));
                        break;
                    }
                }
            }
            match res {
                Ok(()) => {
                    self.stats.parsed += 1;
                    return Next::Line(start, le);
                }
                Err(reason) => self.rejected(ls, le, reason),
            }
        }
    }

    /// Count a line that did not match, and keep it for the nearest-format guess.
    fn rejected(&mut self, ls: usize, le: usize, reason: String) {
        let raw = &self.buf[ls..le];
        let other = self.mixed
            && (crate::errorlog::looks_like_entry(raw) || crate::errorlog::is_continuation(raw));
        let text = String::from_utf8_lossy(raw).into_owned();
        if self.mixed {
            self.stats.skipped += 1;
        } else {
            self.stats.malformed(self.line_no, &reason, &text);
        }
        if !other && self.bad_lines.len() < GUESS_LINES {
            self.bad_lines.push(text);
        }
    }

    fn match_at(&mut self, ls: usize, le: usize) -> Result<(), String> {
        let line = &self.buf[ls..le];
        if let Some(t) = &self.json.template {
            if t.matches(line, &mut self.spans) {
                self.json.misses = 0;
                return self.time_of(ls, le);
            }
            self.json.missed();
        }
        self.fmt
            .match_line(line, &mut self.spans)
            .map_err(|m| m.to_string())?;
        if let Some(keys) = self.fmt.json_keys() {
            self.json.learn(line, keys);
        }
        self.time_of(ls, le)
    }

    fn time_of(&mut self, ls: usize, le: usize) -> Result<(), String> {
        let line = &self.buf[ls..le];
        let span = |f: Field| self.spans[f as usize].map(|(a, b)| &line[a as usize..b as usize]);
        let mut offset = None;
        let mut cached = |b: &[u8], parse: fn(&[u8]) -> Option<(i64, i32)>| {
            if b != self.tcache.as_slice() {
                let v = parse(b)?;
                self.tcache.clear();
                self.tcache.extend_from_slice(b);
                self.tcache_val = v;
            }
            Some(self.tcache_val)
        };
        let mut t = None;
        if let Some(b) = span(Field::TimeLocal) {
            let (us, off) = cached(b, time::parse_time_local)
                .ok_or_else(|| format!("$time_local `{}` is not a time", lossy(b)))?;
            t = Some(us);
            offset = Some(off);
        } else if let Some(b) = span(Field::TimeIso8601) {
            let (us, off) = cached(b, time::parse_iso8601)
                .ok_or_else(|| format!("$time_iso8601 `{}` is not a time", lossy(b)))?;
            t = Some(us);
            offset = Some(off);
        }
        // $msec has millisecond resolution, so it wins over the one-second text times.
        if let Some(b) = span(Field::Msec) {
            t = Some(
                time::parse_msec(b).ok_or_else(|| format!("$msec `{}` is not a time", lossy(b)))?,
            );
        }
        self.t_us = t.ok_or("the format has no $msec, $time_local or $time_iso8601")?;
        self.offset = offset;
        Ok(())
    }

    /// Statistics so far; the nearest-guess is computed when more than half the lines failed.
    pub fn finish(mut self) -> FileStats {
        let failing = self.stats.malformed.max(self.bad_lines.len() as u64);
        if failing > 0 && self.stats.parsed < failing {
            self.stats.guess = nearest_guess(&self.bad_lines, &self.fmt);
        }
        self.stats.line_index = self.index;
        self.stats
    }
}

/// Where a line of a mixed stream may start behind its prefix, in the order tried: after a
/// compose `service | `, a kubectl `[pod/…] `, an RFC 3339 timestamp (`--timestamps`), or a
/// syslog/journald header ending in `: `. Only tried on lines that did not match as they are.
pub fn stream_prefix_ends(line: &[u8]) -> impl Iterator<Item = usize> + '_ {
    let head = &line[..line.len().min(200)];
    let after = |pat: &'static [u8]| memchr::memmem::find(head, pat).map(|i| i + pat.len());
    let timestamp = (head.len() > 20
        && head[..4].iter().all(u8::is_ascii_digit)
        && head[4] == b'-'
        && head[10] == b'T')
        .then(|| memchr::memchr(b' ', head).map(|i| i + 1))
        .flatten();
    let pod = head.starts_with(b"[").then(|| after(b"] ")).flatten();
    [after(b"| "), pod, timestamp, after(b": ")]
        .into_iter()
        .flatten()
        .filter(move |&p| p < line.len())
}

/// Read the given line numbers (1-based, as the stream numbers them) of one access log again,
/// for evidence: each wanted line as the stream matched it — behind its stream prefix, without
/// its line end. With the file's [`LineIndex`] each wanted line is read from the checkpoint
/// before it; without one (gzip) the file is read up to the last wanted line. Only the wanted
/// lines are parsed.
pub fn fetch_lines(
    path: &Path,
    fmt: &LogFormat,
    wanted: &[u64],
    index: Option<&LineIndex>,
) -> anyhow::Result<std::collections::HashMap<u64, Vec<u8>>> {
    let mut want: Vec<u64> = wanted.to_vec();
    want.sort_unstable();
    want.dedup();
    let mut out = std::collections::HashMap::new();
    match index.filter(|ix| !ix.starts.is_empty()) {
        Some(ix) => {
            use std::io::{Seek, SeekFrom};
            let mut r = std::io::BufReader::with_capacity(1 << 15, std::fs::File::open(path)?);
            let mut rest = &want[..];
            while let Some(&w) = rest.first() {
                let Some((n, off)) = ix.before(w) else { break };
                // The wanted lines up to the next checkpoint are read in one go.
                let upto = rest.partition_point(|&l| l < n + LineIndex::EVERY);
                r.seek(SeekFrom::Start(off))?;
                scan_lines(&mut r, n, &rest[..upto.max(1)], &mut out);
                rest = &rest[upto.max(1)..];
            }
        }
        None => scan_lines(&mut *open_maybe_gz(path)?, 1, &want, &mut out),
    }
    let mut spans = [None; N_FIELDS];
    for line in out.values_mut() {
        if line.last() == Some(&b'\r') {
            line.pop();
        }
        if fmt.match_line(line, &mut spans).is_ok() {
            continue;
        }
        let start =
            stream_prefix_ends(line).find(|&p| fmt.match_line(&line[p..], &mut spans).is_ok());
        if let Some(p) = start {
            line.drain(..p);
        }
    }
    Ok(out)
}

/// Read lines from `r`, whose next line is number `n`, keeping the `want`ed ones (sorted).
fn scan_lines(
    r: &mut dyn BufRead,
    mut n: u64,
    want: &[u64],
    out: &mut std::collections::HashMap<u64, Vec<u8>>,
) {
    let mut next = want.partition_point(|&l| l < n);
    let mut cur: Vec<u8> = Vec::new();
    while next < want.len() {
        let buf = match r.fill_buf() {
            Ok([]) | Err(_) => break,
            Ok(b) => b,
        };
        let mut pos = 0;
        while pos < buf.len() && next < want.len() {
            let keep = want[next] == n;
            match memchr::memchr(b'\n', &buf[pos..]) {
                Some(k) => {
                    if keep {
                        cur.extend_from_slice(&buf[pos..pos + k]);
                        out.insert(n, std::mem::take(&mut cur));
                        next += 1;
                    }
                    pos += k + 1;
                    n += 1;
                }
                None => {
                    if keep {
                        cur.extend_from_slice(&buf[pos..]);
                    }
                    pos = buf.len();
                }
            }
        }
        r.consume(pos);
    }
    if next < want.len() && want[next] == n && !cur.is_empty() {
        out.insert(n, cur);
    }
}

fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Try the well-known formats on the lines that failed. A format matching them is named with
/// the flag to use; otherwise the format that gets furthest into the lines is named with where it
/// stops (e.g. extra fields after `combined`).
pub fn nearest_guess(lines: &[String], fmt: &LogFormat) -> Option<String> {
    let mut spans = [None; N_FIELDS];
    if !fmt.is_json() {
        let json = LogFormat::json();
        let n = lines
            .iter()
            .filter(|l| json.match_line(l.as_bytes(), &mut spans).is_ok())
            .count();
        if n > 0 {
            return Some(format!(
                "{n}/{} failing lines are JSON objects (escape=json): --log-format json",
                lines.len()
            ));
        }
    }
    // (full matches, every item matched on the first line (only extra text after it), items
    // matched on the first line, name, text, first mismatch): a format that matches a line all
    // the way but for extra fields beats one that gets further and then breaks.
    type Score<'a> = (usize, bool, usize, &'a str, &'a str, Option<String>);
    let mut best: Option<Score> = None;
    for (name, text) in crate::logformat::PRESETS
        .iter()
        .chain(crate::logformat::KNOWN)
    {
        if *text == fmt.text {
            continue;
        }
        let Ok(f) = LogFormat::compile(name, text) else {
            continue;
        };
        let mut full = 0;
        let mut first_err = None;
        let mut depth = 0;
        let mut complete = false;
        for (k, l) in lines.iter().enumerate() {
            match f.match_line(l.as_bytes(), &mut spans) {
                Ok(()) => {
                    full += 1;
                    if k == 0 {
                        depth = f.items().len() + 1;
                    }
                }
                Err(m) => {
                    if k == 0 {
                        depth = m.item;
                        complete = m.item >= f.items().len();
                        first_err = Some(m.reason);
                    }
                }
            }
        }
        let better = match &best {
            None => true,
            Some(b) => (full, complete, depth) > (b.0, b.1, b.2),
        };
        if better {
            best = Some((full, complete, depth, name, text, first_err));
        }
    }
    let (full, _, depth, name, text, err) = best?;
    if full > 0 {
        Some(format!(
            "{full}/{} failing lines match the `{name}` format: --log-format '{text}'",
            lines.len()
        ))
    } else if depth > 2 {
        Some(format!(
            "closest known format: `{name}` ({text}); it stops there: {}",
            err.unwrap_or_default()
        ))
    } else {
        None
    }
}

/// Lines handed from a file's reader thread to the stream: the channel is crossed once per
/// batch, not once per line.
#[derive(Default)]
struct Batch {
    buf: Vec<u8>,
    lines: Vec<Parsed>,
}

/// One matched line of a [`Batch`]: its bytes are `buf[start..end]`, its spans relative to them.
struct Parsed {
    start: u32,
    end: u32,
    line: u64,
    t_us: i64,
    utc_offset_s: Option<i32>,
    spans: Spans,
}

/// How much a file's reader thread may read ahead of the stream. One file (the common case)
/// gets large batches and four of them in flight, which keeps both cores busy; many files
/// (a year of daily rotations) get small ones, so that memory stays bounded by the batches in
/// flight (about 0.4 MB a file then), not by the number of files times 2 MB.
#[derive(Clone, Copy)]
struct Batching {
    bytes: usize,
    ahead: usize,
}

impl Batching {
    fn for_files(n: usize) -> Batching {
        match n {
            0..=4 => Batching {
                bytes: 1 << 20,
                ahead: 4,
            },
            _ => Batching {
                bytes: 1 << 16,
                ahead: 1,
            },
        }
    }
}

/// One file of the stream. It is read and matched on its own thread, so that on a machine
/// with two cores matching the lines and checking them run side by side.
struct Source {
    rx: Option<std::sync::mpsc::Receiver<Batch>>,
    back: std::sync::mpsc::SyncSender<Batch>,
    cur: Batch,
    idx: usize,
    handle: Option<std::thread::JoinHandle<FileStats>>,
    path: PathBuf,
}

impl Source {
    fn spawn(r: AccessReader, path: &Path, plan: Batching) -> anyhow::Result<Source> {
        let (tx, rx) = std::sync::mpsc::sync_channel(plan.ahead);
        let (back, back_rx) = std::sync::mpsc::sync_channel(plan.ahead + 1);
        let handle = std::thread::Builder::new()
            .name("access-reader".into())
            .spawn(move || produce(r, tx, back_rx, plan))?;
        let mut s = Source {
            rx: Some(rx),
            back,
            cur: Batch::default(),
            idx: 0,
            handle: Some(handle),
            path: path.to_path_buf(),
        };
        s.refill();
        Ok(s)
    }

    fn head(&self) -> Option<&Parsed> {
        self.cur.lines.get(self.idx)
    }

    fn step(&mut self) {
        self.idx += 1;
        if self.idx >= self.cur.lines.len() {
            self.refill();
        }
    }

    fn refill(&mut self) {
        let next = self.rx.as_ref().and_then(|rx| rx.recv().ok());
        let used = std::mem::replace(&mut self.cur, next.unwrap_or_default());
        let _ = self.back.try_send(used);
        self.idx = 0;
    }

    fn finish(mut self) -> FileStats {
        // A stream left early: the reader's next send fails and it stops.
        self.rx = None;
        let joined = self.handle.take().map(|h| h.join());
        match joined {
            Some(Ok(stats)) => stats,
            _ => {
                let mut st = FileStats::new(&self.path, "access");
                st.error = Some("the reader thread stopped unexpectedly".into());
                st
            }
        }
    }
}

/// The reader thread: match lines into batches until the end of the file or until the stream
/// is gone; its statistics are the thread's result. A batch is one read buffer and the lines
/// matched in it, so no line is copied.
fn produce(
    mut r: AccessReader,
    tx: std::sync::mpsc::SyncSender<Batch>,
    back: std::sync::mpsc::Receiver<Batch>,
    plan: Batching,
) -> FileStats {
    r.buf = vec![0; plan.bytes];
    let mut lines = Vec::new();
    loop {
        match r.advance() {
            Next::Line(start, end) => lines.push(Parsed {
                start: start as u32,
                end: end as u32,
                line: r.line_no,
                t_us: r.t_us,
                utc_offset_s: r.offset,
                spans: r.spans,
            }),
            Next::Refill => {
                let spare = back.try_recv().unwrap_or_default();
                let buf = r.refill(spare.buf);
                if lines.is_empty() {
                    continue;
                }
                let full = Batch {
                    buf,
                    lines: std::mem::replace(&mut lines, spare.lines),
                };
                lines.clear();
                if tx.send(full).is_err() {
                    break;
                }
            }
            Next::End => {
                if !lines.is_empty() {
                    let buf = std::mem::take(&mut r.buf);
                    let _ = tx.send(Batch { buf, lines });
                }
                break;
            }
        }
    }
    r.finish()
}

/// Several access logs (rotations, several servers) merged into one time-ordered stream.
pub struct AccessStream {
    sources: Vec<Source>,
    files: Vec<u32>,
    last: Option<usize>,
    paths: Vec<PathBuf>,
}

impl AccessStream {
    /// Open every file with the same format. File indexes start at `first_file`.
    pub fn open(paths: &[PathBuf], fmt: &LogFormat, first_file: u32) -> anyhow::Result<Self> {
        Self::open_mixed(paths, 0, fmt, first_file)
    }

    /// [`AccessStream::open`] where the last `mixed` files are mixed streams (`--logs`).
    pub fn open_mixed(
        paths: &[PathBuf],
        mixed: usize,
        fmt: &LogFormat,
        first_file: u32,
    ) -> anyhow::Result<Self> {
        let fmt = Arc::new(fmt.clone());
        let plain = paths.len().saturating_sub(mixed);
        let mut readers = Vec::new();
        for (i, p) in paths.iter().enumerate() {
            let r = AccessReader::open(p, fmt.clone())?;
            readers.push(if i >= plain { r.mixed() } else { r });
        }
        let plan = Batching::for_files(paths.len());
        let mut sources = Vec::new();
        for (r, p) in readers.into_iter().zip(paths) {
            sources.push(Source::spawn(r, p, plan)?);
        }
        Ok(AccessStream {
            sources,
            files: (0..paths.len() as u32).map(|i| first_file + i).collect(),
            last: None,
            paths: paths.to_vec(),
        })
    }

    /// The next line in time order across all files (a lending iterator).
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Option<AccessLine<'_>> {
        if let Some(i) = self.last.take() {
            self.sources[i].step();
        }
        let pick = if self.sources.len() == 1 {
            self.sources[0].head().map(|_| 0)
        } else {
            (0..self.sources.len())
                .filter_map(|i| self.sources[i].head().map(|p| (p.t_us, i)))
                .min()
                .map(|(_, i)| i)
        }?;
        self.last = Some(pick);
        let s = &self.sources[pick];
        let p = &s.cur.lines[s.idx];
        Some(AccessLine {
            file: self.files[pick],
            line: p.line,
            t_us: p.t_us,
            utc_offset_s: p.utc_offset_s,
            raw: &s.cur.buf[p.start as usize..p.end as usize],
            spans: &p.spans,
        })
    }

    /// The files of the stream.
    pub fn paths(&self) -> &[PathBuf] {
        &self.paths
    }

    /// Per-file statistics (consumes the stream).
    pub fn finish(self) -> Vec<FileStats> {
        self.sources.into_iter().map(Source::finish).collect()
    }
}
