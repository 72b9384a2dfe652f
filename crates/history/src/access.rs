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
    status: Option<u16>,
    request_time_us: Option<i64>,
    upstream_key: Option<u64>,
    /// Its spans and hashes, read only when asked for (see [`Parsed`]).
    cold: &'a Cold,
    /// Its batch's spans of lines too long for [`Packed`].
    wide: &'a [Spans],
    fields: u32,
}

/// Spans as pairs of `u16` offsets; which of them are there is the line's field set
/// ([`AccessLine::fields`]). A third of the size of [`Spans`]: the batches the matchers hand
/// over stay in cache. Lines of 64 KiB or more keep [`Spans`] in their batch's `wide` list
/// instead.
#[derive(Clone, Copy)]
struct Packed([u16; 2 * N_FIELDS]);

impl Packed {
    /// Lines this long or longer are not packed.
    const TOO_LONG: usize = u16::MAX as usize;
    const EMPTY: Packed = Packed([0; 2 * N_FIELDS]);

    /// Pack `spans` if the line is short enough (`None`: it is not): every offset in one
    /// sweep, those of absent fields too, as the field set says which count.
    #[inline]
    fn of(spans: &Spans, len: usize) -> Option<Packed> {
        (len < Packed::TOO_LONG).then(|| Packed(spans.narrow()))
    }
}

/// A fixed-key hash of a client or request text (deterministic across runs): the checker's
/// pairing compares these rather than keeping the texts. A fast hash is enough: it only ever
/// meets hashes of the same run.
pub fn text_hash(s: &str) -> u64 {
    utf8_hash(s.as_bytes())
}

/// [`text_hash`] of bytes known to be UTF-8 (hashed as `str` hashes: the bytes, then `0xff`).
fn utf8_hash(b: &[u8]) -> u64 {
    use std::hash::Hasher;
    let mut h = rustc_hash::FxHasher::default();
    h.write(b);
    h.write_u8(0xff);
    h.finish()
}

/// The bytes are UTF-8 text (see [`as_text`]).
#[inline]
fn is_utf8(b: &[u8]) -> bool {
    as_text(b).is_some()
}

/// The bytes as text if they are UTF-8; the ASCII check first, as nearly every logged value
/// is ASCII and it costs a fraction of full validation.
#[inline]
fn as_text(b: &[u8]) -> Option<&str> {
    if b.is_ascii() {
        // SAFETY: ASCII bytes are UTF-8.
        Some(unsafe { std::str::from_utf8_unchecked(b) })
    } else {
        std::str::from_utf8(b).ok()
    }
}

/// Hashes a matcher thread computed for the checker, so that its one thread does not: of
/// `$upstream_addr` on every line, of `$request` and `$remote_addr` on the lines that failed
/// (status 500 and above).
#[derive(Clone, Copy, Default)]
struct Hashes {
    /// [`AccessLine::upstream_key`], [`text_hash`] of `$request` and of `$remote_addr`; each
    /// one only where its bit in `set` is on (two thirds of the size of three `Option`s: the
    /// batches the matchers hand over stay in cache).
    values: [u64; 3],
    set: u8,
    /// The texts' hashes were computed (a line that failed): a clear bit is an absent field.
    texts: bool,
}

impl Hashes {
    const UPSTREAM: usize = 0;
    const REQUEST: usize = 1;
    const REMOTE: usize = 2;

    fn of<'b>(field: impl Fn(Field) -> Option<&'b [u8]>, status: Option<u16>) -> Hashes {
        use std::hash::BuildHasher;
        let mut h = Hashes {
            texts: status.is_some_and(|s| s >= 500),
            ..Hashes::default()
        };
        if let Some(b) = field(Field::UpstreamAddr).filter(|b| !b.is_empty() && *b != b"-") {
            h.put(Hashes::UPSTREAM, rustc_hash::FxBuildHasher.hash_one(b));
        }
        if h.texts {
            for (i, f) in [
                (Hashes::REQUEST, Field::Request),
                (Hashes::REMOTE, Field::RemoteAddr),
            ] {
                if let Some(b) = field(f).filter(|b| is_utf8(b)) {
                    h.put(i, utf8_hash(b));
                }
            }
        }
        h
    }

    fn put(&mut self, i: usize, v: u64) {
        self.values[i] = v;
        self.set |= 1 << i;
    }

    fn get(&self, i: usize) -> Option<u64> {
        (self.set & (1 << i) != 0).then_some(self.values[i])
    }
}

impl<'a> AccessLine<'a> {
    /// A 64-bit hash of `$upstream_addr` (`None`: not logged, empty or `-`): its value tells
    /// trajectories apart without comparing their text on the checker's thread. Two distinct
    /// values of one log share a hash with odds of about n²/2⁶⁵ (n distinct values: a few
    /// thousand), the same bet pairing makes with [`text_hash`].
    #[inline]
    pub fn upstream_key(&self) -> Option<u64> {
        self.upstream_key
    }

    /// [`text_hash`] of `$request`, computed on a matcher thread for a line that failed.
    #[inline]
    pub fn request_hash(&self) -> Option<u64> {
        match self.cold.hashes.texts {
            true => self.cold.hashes.get(Hashes::REQUEST),
            false => self.text(Field::Request).map(text_hash),
        }
    }

    /// [`text_hash`] of `$remote_addr` (see [`AccessLine::request_hash`]).
    #[inline]
    pub fn remote_hash(&self) -> Option<u64> {
        match self.cold.hashes.texts {
            true => self.cold.hashes.get(Hashes::REMOTE),
            false => self.text(Field::RemoteAddr).map(text_hash),
        }
    }

    /// Raw bytes of a field (`-` is returned as is).
    #[inline]
    pub fn get(&self, f: Field) -> Option<&'a [u8]> {
        self.get_index(f as usize)
    }

    /// The fields this line has, as bits (bit `f`: `Field as usize` `f` has a value here):
    /// what a format's lines hold, learned for the price of an OR per line.
    #[inline]
    pub fn fields(&self) -> u32 {
        self.fields
    }

    /// Raw bytes of the field with index `i` (`Field as usize`).
    #[inline]
    pub fn get_index(&self, i: usize) -> Option<&'a [u8]> {
        if i >= N_FIELDS || self.fields >> i & 1 == 0 {
            return None;
        }
        let (a, b) = match self.wide.get(self.cold.wide as usize) {
            Some(w) => w.get_index(i)?,
            None => {
                let p = &self.cold.spans.0;
                (p[2 * i] as usize, p[2 * i + 1] as usize)
            }
        };
        Some(&self.raw[a..b])
    }

    /// A field as text (lossy only for invalid UTF-8, which nginx escapes anyway).
    pub fn text(&self, f: Field) -> Option<&'a str> {
        self.get(f).and_then(as_text)
    }

    /// `$status`.
    #[inline]
    pub fn status(&self) -> Option<u16> {
        self.status
    }

    /// `$request_time` in µs.
    #[inline]
    pub fn request_time_us(&self) -> Option<i64> {
        self.request_time_us
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
        let r = self.text(Field::Request)?;
        // The first word, found as a byte (a `str` split pays for a general pattern search).
        let m = r.bytes().position(|c| c == b' ').map_or(r, |i| &r[..i]);
        (!m.is_empty() && m != "-").then_some(m)
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

/// The sequential half of reading one access log: its bytes cut into chunks of whole lines,
/// each line's number, and the file's [`LineIndex`]. The file's matchers share it behind the
/// [`Handoff`]'s lock: whichever is free cuts the next chunk, so the chunks are read in order.
struct Chunker {
    reader: Box<dyn BufRead + Send>,
    /// The start of a line the last chunk did not end.
    carry: Vec<u8>,
    /// The file offset of the next chunk's first byte.
    base: u64,
    /// Lines before the next chunk.
    lines: u64,
    /// Checkpoints for reading cited lines again (plain files only).
    index: Option<LineIndex>,
    eof: bool,
    error: Option<String>,
    /// The size of a chunk (a line longer than it doubles its chunk).
    bytes: usize,
}

impl Chunker {
    /// Chunks of about `bytes` of `reader`, the lines of `path`.
    fn new(reader: Box<dyn BufRead + Send>, path: &Path, bytes: usize) -> Chunker {
        Chunker {
            reader,
            carry: Vec::new(),
            base: 0,
            lines: 0,
            index: (!crate::is_gzip(path)).then(LineIndex::default),
            eof: false,
            error: None,
            bytes,
        }
    }

    /// The next chunk of whole lines (the last one may lack its newline) in `b` (a batch the
    /// stream is done with, or a new one), or `None` at the end.
    fn next(&mut self, mut b: Batch) -> Option<Batch> {
        if self.eof && self.carry.is_empty() {
            return None;
        }
        b.lines.clear();
        b.cold.clear();
        b.ends.clear();
        b.wide.clear();
        let size = self.bytes.max(self.carry.len() * 2);
        if b.buf.len() < size {
            b.buf.resize(size, 0);
        }
        let mut filled = self.carry.len();
        b.buf[..filled].copy_from_slice(&self.carry);
        self.carry.clear();
        let cut = loop {
            filled = self.read_into(&mut b.buf, filled);
            match memchr::memrchr(b'\n', &b.buf[..filled]) {
                Some(p) => break p + 1,
                None if self.eof => break filled,
                None if filled == b.buf.len() => {
                    let n = b.buf.len() * 2;
                    b.buf.resize(n, 0);
                }
                None => {}
            }
        };
        if cut == 0 {
            return None;
        }
        self.carry.extend_from_slice(&b.buf[cut..filled]);
        b.first_line = self.lines + 1;
        let mut start = 0;
        crate::logformat::each_byte(&b.buf[..cut], b'\n', |p| {
            self.note(start);
            b.ends.push(p as u32);
            start = p + 1;
        });
        if start < cut {
            self.note(start);
            b.ends.push(cut as u32);
        }
        self.base += cut as u64;
        Some(b)
    }

    /// Read once after `filled` (until something arrives or the end); the new fill level.
    fn read_into(&mut self, buf: &mut [u8], mut filled: usize) -> usize {
        while !self.eof && filled < buf.len() {
            match self.reader.read(&mut buf[filled..]) {
                Ok(0) => self.eof = true,
                Ok(n) => {
                    filled += n;
                    break;
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    self.error = Some(e.to_string());
                    self.eof = true;
                }
            }
        }
        filled
    }

    /// A line of the chunk being cut starts at `start`.
    #[inline]
    fn note(&mut self, start: usize) {
        self.lines += 1;
        if let Some(ix) = &mut self.index {
            ix.note(self.lines, self.base + start as u64);
        }
    }
}

/// The parallel half: matching the lines of a chunk. Each of a file's matcher threads has one;
/// their statistics are merged when the file is done ([`Matcher::merge`]).
struct Matcher {
    fmt: Arc<LogFormat>,
    spans: Spans,
    t_us: i64,
    offset: Option<i32>,
    /// Cache of the last textual timestamp: `$time_local` repeats for every request of a second.
    tcache: Vec<u8>,
    tcache_val: (i64, i32),
    /// `$msec`, its seconds remembered.
    msec: time::MsecReader,
    stats: FileStats,
    /// Raw malformed lines (with their numbers) kept for the nearest-format guess.
    bad_lines: Vec<(u64, String)>,
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

impl Matcher {
    fn new(path: &Path, fmt: Arc<LogFormat>, mixed: bool) -> Matcher {
        Matcher {
            fmt,
            spans: Spans::EMPTY,
            t_us: 0,
            offset: None,
            tcache: Vec::new(),
            tcache_val: (0, 0),
            msec: time::MsecReader::default(),
            stats: FileStats::new(path, "access"),
            bad_lines: Vec::new(),
            mixed,
            json: JsonShape::default(),
        }
    }

    /// Match every line of a chunk, keeping the well-formed ones in `b.lines`.
    fn batch(&mut self, b: &mut Batch) {
        let mut ls = 0usize;
        for (k, &end) in b.ends.iter().enumerate() {
            let line = b.first_line + k as u64;
            let (s, e) = (ls, end as usize);
            ls = e + 1;
            if let Some((start, end)) = self.line(&mut b.buf, s, e, line) {
                let raw = &b.buf[start..end];
                let field = |f: Field| self.spans.slice(raw, f);
                let status = field(Field::Status)
                    .and_then(time::parse_u64)
                    .map(|v| v as u16);
                let request_time_us = field(Field::RequestTime).and_then(time::parse_secs_us);
                let hashes = Hashes::of(field, status);
                let fields = self.spans.fields();
                let (spans, wide) = match Packed::of(&self.spans, end - start) {
                    Some(p) => (p, u32::MAX),
                    None => {
                        b.wide.push(self.spans);
                        (Packed::EMPTY, (b.wide.len() - 1) as u32)
                    }
                };
                b.lines.push(Parsed {
                    start: start as u32,
                    end: end as u32,
                    line,
                    t_us: self.t_us,
                    utc_offset_s: self.offset,
                    status,
                    request_time_us,
                    upstream_key: hashes.get(Hashes::UPSTREAM),
                    fields,
                });
                b.cold.push(Cold {
                    hashes,
                    spans,
                    wide,
                });
            }
        }
    }

    /// One raw line `buf[ls..le]` (without its newline): the range that matched (behind a
    /// stream prefix, without a `\r`), or `None` for an empty or rejected line.
    fn line(
        &mut self,
        buf: &mut [u8],
        ls: usize,
        mut le: usize,
        no: u64,
    ) -> Option<(usize, usize)> {
        if le > ls && buf[le - 1] == b'\r' {
            le -= 1;
        }
        if le == ls {
            return None;
        }
        self.stats.lines += 1;
        if self.mixed
            && let Some(inner) = crate::jsonline::docker_log_line(&buf[ls..le])
        {
            // The record's line is never longer than the record: it takes its place.
            buf[ls..ls + inner.len()].copy_from_slice(&inner);
            le = ls + inner.len();
        }
        let mut res = self.match_at(&buf[ls..le]);
        let mut start = ls;
        if res.is_err() {
            // A mixed stream (`docker compose logs`, `kubectl logs --prefix/--timestamps`,
            // journald, syslog): the line may match behind its prefix.
            let ends: Vec<usize> = stream_prefix_ends(&buf[ls..le]).collect();
            for p in ends {
                if self.match_at(&buf[ls + p..le]).is_ok() {
                    (start, res) = (ls + p, Ok(()));
                    break;
                }
            }
        }
        match res {
            Ok(()) => {
                self.stats.parsed += 1;
                Some((start, le))
            }
            Err(reason) => {
                self.rejected(&buf[ls..le], no, reason);
                None
            }
        }
    }

    /// Count a line that did not match, and keep it for the nearest-format guess.
    fn rejected(&mut self, raw: &[u8], no: u64, reason: String) {
        let other = self.mixed
            && (crate::errorlog::looks_like_entry(raw) || crate::errorlog::is_continuation(raw));
        let text = String::from_utf8_lossy(raw).into_owned();
        if self.mixed {
            self.stats.skipped += 1;
        } else {
            self.stats.malformed(no, &reason, &text);
        }
        if !other && self.bad_lines.len() < GUESS_LINES {
            self.bad_lines.push((no, text));
        }
    }

    fn match_at(&mut self, line: &[u8]) -> Result<(), String> {
        if let Some(t) = &self.json.template {
            if t.matches(line, &mut self.spans) {
                self.json.misses = 0;
                return self.time_of(line);
            }
            self.json.missed();
        }
        self.fmt
            .match_line(line, &mut self.spans)
            .map_err(|m| m.to_string())?;
        if let Some(keys) = self.fmt.json_keys() {
            self.json.learn(line, keys);
        }
        self.time_of(line)
    }

    fn time_of(&mut self, line: &[u8]) -> Result<(), String> {
        let span = |f: Field| self.spans.slice(line, f);
        let mut offset = None;
        let mut cached = |b: &[u8], parse: fn(&[u8]) -> Option<(i64, i32)>| {
            if !crate::logformat::same_bytes(b, &self.tcache) {
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
                self.msec
                    .read(b)
                    .ok_or_else(|| format!("$msec `{}` is not a time", lossy(b)))?,
            );
        }
        self.t_us = t.ok_or("the format has no $msec, $time_local or $time_iso8601")?;
        self.offset = offset;
        Ok(())
    }

    /// One file's statistics from its matchers' and its chunker's: counts summed, the first
    /// samples of all, and the nearest-format guess when more than half the lines failed.
    fn merge(path: &Path, parts: Vec<Matcher>, chunker: Option<Chunker>) -> FileStats {
        let mut st = Self::summary(path, &parts);
        if let Some(c) = chunker {
            st.error = c.error;
            st.line_index = c.index;
        }
        st
    }

    /// [`Matcher::merge`]'s statistics of `parts`, which stay as they are.
    fn summary(path: &Path, parts: &[Matcher]) -> FileStats {
        let mut st = FileStats::new(path, "access");
        let mut bad = Vec::new();
        let mut fmt = None;
        for m in parts {
            st.lines += m.stats.lines;
            st.parsed += m.stats.parsed;
            st.malformed += m.stats.malformed;
            st.skipped += m.stats.skipped;
            st.samples.extend(m.stats.samples.iter().cloned());
            bad.extend(m.bad_lines.iter().cloned());
            fmt = Some(&m.fmt);
        }
        st.samples.sort_by_key(|s| s.line);
        st.samples.truncate(MAX_SAMPLES);
        bad.sort_by_key(|b| b.0);
        bad.truncate(GUESS_LINES);
        let bad: Vec<String> = bad.into_iter().map(|b| b.1).collect();
        let failing = st.malformed.max(bad.len() as u64);
        if let Some(fmt) = fmt
            && failing > 0
            && st.parsed < failing
        {
            st.guess = nearest_guess(&bad, fmt);
        }
        st
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
    let mut spans = Spans::EMPTY;
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
    let mut spans = Spans::EMPTY;
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

/// Lines handed from a file's matcher threads to the stream: a chunk of whole lines and those
/// of them that matched. The channel is crossed once per chunk, not once per line, and no line
/// is copied.
#[derive(Default)]
struct Batch {
    buf: Vec<u8>,
    /// Where each line of the chunk ends (its newline, or the chunk's end).
    ends: Vec<u32>,
    /// The number of the chunk's first line.
    first_line: u64,
    lines: Vec<Parsed>,
    /// What the checker reads only of some lines, one per line of `lines`.
    cold: Vec<Cold>,
    /// The spans of lines too long for [`Packed`].
    wide: Vec<Spans>,
}

impl Batch {
    /// Matched line `i` of the batch, of file `file`.
    #[inline]
    fn line(&self, i: usize, file: u32) -> AccessLine<'_> {
        let (p, c) = (&self.lines[i], &self.cold[i]);
        AccessLine {
            file,
            line: p.line,
            t_us: p.t_us,
            utc_offset_s: p.utc_offset_s,
            raw: &self.buf[p.start as usize..p.end as usize],
            status: p.status,
            request_time_us: p.request_time_us,
            upstream_key: p.upstream_key,
            cold: c,
            wide: &self.wide,
            fields: p.fields,
        }
    }
}

/// Access lines matched from memory on the calling thread, chunk after chunk, with the same
/// matcher as [`AccessStream`]: what a follower (`watch`) holds is read where it is, with no
/// file written and no thread started. Its statistics add up over the chunks.
pub struct MemoryMatcher {
    m: Matcher,
    b: Batch,
    file: u32,
}

impl MemoryMatcher {
    /// A matcher of the lines of `name` (a name for its statistics), as file `file`; `mixed`:
    /// lines that do not match are passed over (a mixed stream), not malformed.
    pub fn new(name: &Path, fmt: &LogFormat, mixed: bool, file: u32) -> MemoryMatcher {
        MemoryMatcher {
            m: Matcher::new(name, Arc::new(fmt.clone()), mixed),
            b: Batch::default(),
            file,
        }
    }

    /// Match `lines` (each without its newline) numbered from `first_line` on; `f` is given
    /// each line that matched, in order. They are matched in chunks of [`MEMORY_CHUNK`].
    pub fn feed<'l>(
        &mut self,
        lines: impl IntoIterator<Item = &'l [u8]>,
        first_line: u64,
        mut f: impl FnMut(&AccessLine<'_>),
    ) {
        let mut next = first_line;
        self.b.buf.clear();
        self.b.ends.clear();
        for l in lines {
            let b = &mut self.b;
            b.buf.extend_from_slice(l);
            b.ends.push(b.buf.len() as u32);
            b.buf.push(b'\n');
            if b.buf.len() >= MEMORY_CHUNK {
                next = self.chunk(next, &mut f);
            }
        }
        if !self.b.ends.is_empty() {
            self.chunk(next, &mut f);
        }
    }

    /// Match the chunk in the batch, its first line numbered `first`; the next chunk's first.
    fn chunk(&mut self, first: u64, f: &mut impl FnMut(&AccessLine<'_>)) -> u64 {
        let b = &mut self.b;
        b.lines.clear();
        b.cold.clear();
        b.wide.clear();
        b.first_line = first;
        self.m.batch(b);
        for i in 0..b.lines.len() {
            f(&b.line(i, self.file));
        }
        let next = first + b.ends.len() as u64;
        b.buf.clear();
        b.ends.clear();
        next
    }

    /// The lines read so far: how many matched, were malformed or passed over.
    pub fn stats(&self) -> &FileStats {
        &self.m.stats
    }

    /// The statistics a stream reports for the same lines when it finishes (with the
    /// nearest-format guess when more than half of them failed).
    pub fn file_stats(&self) -> FileStats {
        Matcher::summary(Path::new(&self.m.stats.path), std::slice::from_ref(&self.m))
    }
}

/// One matched line of a [`Batch`]: its bytes are `buf[start..end]`. What the checker reads of
/// every line, apart from what it reads of some ([`Cold`]): it reads the lines a matcher thread
/// wrote on another core, and 72 bytes a line rather than 168 are fewer cache lines to bring over
/// (10 M `lab` lines: 3 % less wall and CPU than one struct of 168 bytes, medians of 15 pairs).
struct Parsed {
    start: u32,
    end: u32,
    line: u64,
    t_us: i64,
    utc_offset_s: Option<i32>,
    status: Option<u16>,
    request_time_us: Option<i64>,
    /// [`AccessLine::upstream_key`].
    upstream_key: Option<u64>,
    /// [`AccessLine::fields`].
    fields: u32,
}

/// The rest of a [`Parsed`] line: its spans (relative to its bytes) and its hashes, read for
/// the lines that failed.
struct Cold {
    hashes: Hashes,
    spans: Packed,
    /// Its index in the batch's `wide` list (`u32::MAX`: `spans` holds them).
    wide: u32,
}

/// How a file is read: its chunk size, its matcher threads and the chunks each may have
/// ready ahead of the stream. One file (the common case) gets large chunks and a matcher per
/// core (up to 4), which keeps every core busy; many files (a year of daily rotations) get one
/// matcher and small chunks each, so that memory stays bounded by the chunks in flight (about
/// 0.3 MB a file then), not by the number of files times several MB. A large chunk is 2 MiB:
/// against 1 MiB, a 10 M-line JSON log (520-byte lines, 4,000 to a chunk) took 2.38 s where
/// it took 2.50 (median of 9, side by side), the `lab` preset 1.16 s where 1.18, for 9–15 MB
/// more peak memory; 4 MiB was no faster for JSON and slower for `lab`.
#[derive(Clone, Copy)]
struct Batching {
    bytes: usize,
    ahead: usize,
    workers: usize,
}

/// The chunk a single file is read in ([`Batching`]).
const LARGE_CHUNK: usize = 2 << 20;

/// The chunk lines fed from memory are matched in ([`MemoryMatcher`]): nothing reads ahead
/// of it, so a larger one only holds more — its text and its matched lines stay allocated
/// between feeds, once per matcher (`watch` keeps two: 12 MB of a 68 MB heap at 2 MiB).
const MEMORY_CHUNK: usize = 256 << 10;

impl Batching {
    fn for_files(n: usize) -> Batching {
        match n {
            0..=4 => Batching {
                bytes: LARGE_CHUNK,
                ahead: 2,
                workers: std::thread::available_parallelism().map_or(2, |c| c.get().clamp(2, 4)),
            },
            _ => Batching {
                bytes: 1 << 16,
                ahead: 1,
                workers: 1,
            },
        }
    }
}

/// The chunks of one file between its chunker, its matchers and the stream. A free matcher
/// cuts the next chunk (under the lock, so in file order) and matches it; the stream takes the
/// matched chunks in file order. No matcher waits for another's turn (with more threads than
/// cores, a matcher held to its turn waited whenever the one before it was descheduled); a
/// matcher waits only for room: at most `room` chunks are cut and not yet taken.
struct Handoff {
    flow: std::sync::Mutex<Flow>,
    /// Room to cut a chunk (or the stream is gone).
    roomy: std::sync::Condvar,
    /// The chunk the stream takes next was matched (or the end, or a matcher was lost).
    ready: std::sync::Condvar,
}

struct Flow {
    chunker: Chunker,
    /// The number of the next chunk to cut.
    cut: usize,
    /// The number of the next chunk the stream takes.
    taken: usize,
    /// Matched chunks `taken, taken + 1, …` (`None`: still being matched).
    done: std::collections::VecDeque<Option<Batch>>,
    /// The chunks in the file, once the chunker has found its end.
    end: Option<usize>,
    /// Batches the stream is done with, to be cut into again.
    spare: Vec<Batch>,
    /// Chunks that may be cut and not yet taken.
    room: usize,
    /// The stream is gone: every matcher stops.
    closed: bool,
    /// A matcher thread died: its chunk will never come.
    lost: bool,
}

impl Handoff {
    /// `room`: the chunks that may be cut and not yet taken.
    fn new(chunker: Chunker, room: usize) -> Handoff {
        Handoff {
            flow: std::sync::Mutex::new(Flow {
                chunker,
                cut: 0,
                taken: 0,
                done: Default::default(),
                end: None,
                spare: Vec::new(),
                room,
                closed: false,
                lost: false,
            }),
            roomy: std::sync::Condvar::new(),
            ready: std::sync::Condvar::new(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Flow> {
        self.flow.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The next chunk to match and its number, once there is room; `None`: the end of the
    /// file, or the stream is gone.
    fn cut(&self) -> Option<(usize, Batch)> {
        let mut f = self.lock();
        while !f.closed && f.end.is_none() && f.cut - f.taken >= f.room {
            f = self.roomy.wait(f).unwrap_or_else(|e| e.into_inner());
        }
        if f.closed || f.end.is_some() {
            return None;
        }
        let reuse = f.spare.pop().unwrap_or_default();
        match f.chunker.next(reuse) {
            Some(b) => {
                f.cut += 1;
                f.done.push_back(None);
                Some((f.cut - 1, b))
            }
            None => {
                f.end = Some(f.cut);
                self.roomy.notify_all();
                self.ready.notify_all();
                None
            }
        }
    }

    /// Chunk `seq`, matched.
    fn put(&self, seq: usize, b: Batch) {
        let mut f = self.lock();
        let at = seq - f.taken;
        f.done[at] = Some(b);
        if at == 0 {
            self.ready.notify_all();
        }
    }

    /// The next chunk in file order, once matched; `None` at the end (or when a matcher was
    /// lost). `used` is the stream's previous chunk, kept to be cut into again.
    fn take(&self, used: Batch) -> Option<Batch> {
        let mut f = self.lock();
        if f.spare.len() < f.room {
            f.spare.push(used);
        }
        loop {
            if let Some(b) = f.done.front_mut().and_then(Option::take) {
                f.done.pop_front();
                f.taken += 1;
                self.roomy.notify_all();
                return Some(b);
            }
            if f.lost || f.closed || f.end == Some(f.taken) {
                return None;
            }
            f = self.ready.wait(f).unwrap_or_else(|e| e.into_inner());
        }
    }

    fn close(&self) {
        self.lock().closed = true;
        self.roomy.notify_all();
        self.ready.notify_all();
    }
}

/// Marks the hand-off when its matcher thread unwinds, so that the stream stops waiting for a
/// chunk that will never come.
struct Lifeline(Arc<Handoff>);

impl Drop for Lifeline {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.lock().lost = true;
            self.0.ready.notify_all();
        }
    }
}

/// Lower this matcher thread's priority (nice 5) under the checker's. The checker takes the
/// chunks on one thread and is the pass's critical path; the matchers are more threads than
/// there are cores left beside it (two and the checker on two cores). At equal weights the
/// matchers, once ahead, took the checker's core by turns and then waited for it, so a core sat
/// idle: on the `lab` preset the matchers waited for room 1.4–1.9 s in all of a 2.7 s pass, and
/// 1.6 of the 2 cores were busy. At nice 5 they waited 0.2–0.7 s and 1.8 cores were busy. A
/// thread may always lower its own priority; a failure only leaves it as it was.
fn yield_to_the_checker() {
    #[cfg(target_os = "linux")]
    // SAFETY: plain system calls on this thread's own id; no memory is passed.
    unsafe {
        libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, 5);
    }
}

/// One matcher thread: the next chunk to cut, matched, handed to the stream; until the end.
fn work(handoff: Arc<Handoff>, mut m: Matcher) -> Matcher {
    let _lifeline = Lifeline(handoff.clone());
    yield_to_the_checker();
    while let Some((seq, mut b)) = handoff.cut() {
        m.batch(&mut b);
        handoff.put(seq, b);
    }
    m
}

/// One file of the stream. It is cut into chunks and matched on threads of its own, so that
/// matching the lines and checking them run side by side on every core.
struct Source {
    cur: Batch,
    idx: usize,
    handles: Vec<std::thread::JoinHandle<Matcher>>,
    handoff: Arc<Handoff>,
    path: PathBuf,
}

impl Source {
    fn spawn(
        reader: Box<dyn BufRead + Send>,
        m: impl Fn() -> Matcher,
        path: &Path,
        plan: Batching,
    ) -> anyhow::Result<Source> {
        let chunker = Chunker::new(reader, path, plan.bytes);
        let handoff = Arc::new(Handoff::new(chunker, plan.workers * (plan.ahead + 1)));
        let mut handles = Vec::new();
        for me in 0..plan.workers {
            let (h, m) = (handoff.clone(), m());
            let spawned = std::thread::Builder::new()
                .name(format!("access-match-{me}"))
                .spawn(move || work(h, m));
            match spawned {
                Ok(h) => handles.push(h),
                Err(e) => {
                    handoff.close();
                    return Err(e.into());
                }
            }
        }
        let mut s = Source {
            cur: Batch::default(),
            idx: 0,
            handles,
            handoff,
            path: path.to_path_buf(),
        };
        s.refill();
        Ok(s)
    }

    fn head(&self) -> Option<&Parsed> {
        self.cur.lines.get(self.idx)
    }

    #[inline]
    fn step(&mut self) {
        self.idx += 1;
        if self.idx >= self.cur.lines.len() {
            self.refill();
        }
    }

    /// The next chunk with a matched line, in file order; at the end, an empty one.
    #[inline(never)]
    fn refill(&mut self) {
        self.idx = 0;
        loop {
            let used = std::mem::take(&mut self.cur);
            let Some(next) = self.handoff.take(used) else {
                return;
            };
            self.cur = next;
            if !self.cur.lines.is_empty() {
                return;
            }
        }
    }

    fn finish(mut self) -> FileStats {
        // A stream left early: the matchers stop at their next chunk.
        self.handoff.close();
        let mut parts = Vec::new();
        let mut lost = false;
        for h in self.handles.drain(..) {
            match h.join() {
                Ok(m) => parts.push(m),
                Err(_) => lost = true,
            }
        }
        let chunker = Arc::try_unwrap(self.handoff).ok().map(|h| {
            h.flow
                .into_inner()
                .unwrap_or_else(|e| e.into_inner())
                .chunker
        });
        let mut st = Matcher::merge(&self.path, parts, chunker);
        if lost {
            st.error = Some("a reader thread stopped unexpectedly".into());
        }
        st
    }
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
        Self::open_planned(
            paths,
            mixed,
            fmt,
            first_file,
            Batching::for_files(paths.len()),
        )
    }

    fn open_planned(
        paths: &[PathBuf],
        mixed: usize,
        fmt: &LogFormat,
        first_file: u32,
        plan: Batching,
    ) -> anyhow::Result<Self> {
        let fmt = Arc::new(fmt.clone());
        let plain = paths.len().saturating_sub(mixed);
        // Every file is opened before any is read: a missing one fails the run at once.
        let readers = paths
            .iter()
            .map(|p| open_maybe_gz(p))
            .collect::<anyhow::Result<Vec<_>>>()?;
        let mut sources = Vec::new();
        for (i, (r, p)) in readers.into_iter().zip(paths).enumerate() {
            let matcher = || Matcher::new(p, fmt.clone(), i >= plain);
            sources.push(Source::spawn(r, matcher, p, plan)?);
        }
        Ok(AccessStream {
            sources,
            files: (0..paths.len() as u32).map(|i| first_file + i).collect(),
            last: None,
            paths: paths.to_vec(),
        })
    }

    /// The next line in time order across all files (a lending iterator).
    // Inlined into the checker's loop: returned through memory, the line's fields were read
    // back right after the narrower stores that wrote them (a store-forwarding stall per line).
    #[allow(clippy::should_implement_trait)]
    #[inline]
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
        Some(s.cur.line(s.idx, self.files[pick]))
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::logformat::Field;

    /// A log whose lines cross every chunk size tried: empty and CRLF lines, a malformed one,
    /// one longer than 64 KiB (its spans are kept wide) and a last line without its newline.
    fn awkward_log() -> String {
        let mut text = String::new();
        for i in 0..700u64 {
            let path = match i {
                300 => format!("/long/{}", "x".repeat(70_000)),
                _ => format!("/p/{i}"),
            };
            let line = match i % 97 {
                5 => String::new(),
                6 => "not an access line".to_string(),
                7 => format!(
                    "10.0.0.1 - - [30/Nov/2026:06:00:{:02} +0100] \"GET {path} HTTP/1.1\" 502 0 \"-\" \"ua\"\r",
                    i % 60
                ),
                _ => format!(
                    "10.0.0.1 - - [30/Nov/2026:06:00:{:02} +0100] \"GET {path} HTTP/1.1\" {} 0 \"-\" \"ua {i}\"",
                    i % 60,
                    200 + i % 5
                ),
            };
            text.push_str(&line);
            if i < 699 {
                text.push('\n');
            }
        }
        text
    }

    /// What reading the text line by line gives: (line number, status, field set, every
    /// field's bytes) of each line that matches, the malformed line numbers, and where lines 1,
    /// 257, 513 … start.
    type Expected = (Vec<(u64, Option<u16>, u32, Fields)>, Vec<u64>, Vec<u64>);
    type Fields = Vec<Option<Vec<u8>>>;

    fn line_by_line(text: &str, fmt: &LogFormat) -> Expected {
        let (mut ok, mut bad, mut starts) = (Vec::new(), Vec::new(), Vec::new());
        let mut spans = Spans::EMPTY;
        let mut offset = 0u64;
        for (k, raw) in text.split('\n').enumerate() {
            let no = k as u64 + 1;
            if (no - 1).is_multiple_of(LineIndex::EVERY) {
                starts.push(offset);
            }
            offset += raw.len() as u64 + 1;
            let line = raw.strip_suffix('\r').unwrap_or(raw).as_bytes();
            if line.is_empty() {
                continue;
            }
            if fmt.match_line(line, &mut spans).is_err() {
                bad.push(no);
                continue;
            }
            let status = spans
                .slice(line, Field::Status)
                .map(|s| std::str::from_utf8(s).unwrap().parse().unwrap());
            let all = (0..N_FIELDS)
                .map(|f| spans.get_index(f).map(|(a, b)| line[a..b].to_vec()))
                .collect();
            ok.push((no, status, spans.fields(), all));
        }
        (ok, bad, starts)
    }

    fn streamed(path: &Path, fmt: &LogFormat, plan: Batching) -> (Expected, FileStats) {
        let mut s = AccessStream::open_planned(&[path.to_path_buf()], 0, fmt, 0, plan).unwrap();
        let mut ok = Vec::new();
        while let Some(a) = s.next() {
            // Packed or wide, the line reads as its spans did.
            let all = (0..N_FIELDS)
                .map(|f| a.get_index(f).map(<[u8]>::to_vec))
                .collect();
            ok.push((a.line, a.status(), a.fields(), all));
        }
        let st = s.finish().remove(0);
        let bad = st.samples.iter().map(|x| x.line).collect();
        let starts = st.line_index.clone().unwrap().starts;
        ((ok, bad, starts), st)
    }

    #[test]
    fn chunks_of_any_size_on_any_number_of_matchers_read_the_lines_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("access.log");
        let text = awkward_log();
        std::fs::write(&path, &text).unwrap();
        let fmt = LogFormat::combined();
        let (ok, bad, starts) = line_by_line(&text, &fmt);
        assert_eq!(bad.len(), 8, "one malformed line in every 97");
        assert!(
            ok.iter()
                .any(|l| l.3[Field::Request as usize].as_ref().unwrap().len() > 70_000),
            "the long line matched"
        );
        for bytes in [7, 100, 4096, 1 << 20] {
            for workers in [1, 2, 3] {
                let plan = Batching {
                    bytes,
                    ahead: 1,
                    workers,
                };
                let ((got_ok, got_bad, got_starts), st) = streamed(&path, &fmt, plan);
                let at = format!("{bytes} bytes, {workers} matchers");
                assert_eq!(got_ok, ok, "{at}");
                assert_eq!(
                    got_bad,
                    bad[..MAX_SAMPLES].to_vec(),
                    "{at}: the first samples"
                );
                assert_eq!(got_starts, starts, "{at}: the line index");
                assert_eq!((st.parsed, st.malformed), (ok.len() as u64, 8), "{at}");
            }
        }
    }

    #[test]
    fn a_stream_left_early_stops_its_matchers() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("access.log");
        std::fs::write(&path, awkward_log()).unwrap();
        let plan = Batching {
            bytes: 64,
            ahead: 1,
            workers: 3,
        };
        let mut s =
            AccessStream::open_planned(&[path], 0, &LogFormat::combined(), 0, plan).unwrap();
        for _ in 0..3 {
            assert!(s.next().is_some());
        }
        // finish() joins the matchers: it returns only if every one of them stopped.
        let st = s.finish().remove(0);
        assert!(st.parsed >= 3 && st.error.is_none(), "{st:?}");
    }

    #[test]
    fn a_lost_matcher_ends_the_stream_instead_of_hanging_it() {
        let reader = Box::new(std::io::Cursor::new(awkward_log().into_bytes()));
        let h = Arc::new(Handoff::new(
            Chunker::new(reader, Path::new("a.log"), 64),
            4,
        ));
        let dying = h.clone();
        let died = std::thread::spawn(move || {
            let _lifeline = Lifeline(dying.clone());
            let _chunk = dying.cut().expect("a first chunk");
            panic!("a matcher dies holding chunk 0");
        })
        .join();
        assert!(died.is_err());
        // Chunk 0 will never come: the stream ends rather than waiting for it.
        assert!(h.take(Batch::default()).is_none());
    }

    #[test]
    fn the_matchers_hashes_are_the_ones_the_checker_would_compute() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("access.log");
        let line = |t: u32, st: u16, up: &str| {
            format!(
                "1796018400.{t:03} {st} \"{up}\" \"-\" 0.001 GET 7 1 \"-\" \"-\" \"GET /a?{t} HTTP/1.1\" 10.1.0.{t}\n"
            )
        };
        let text = [
            line(1, 502, "10.0.0.5:8080, 10.0.0.6:8080"),
            line(2, 200, "10.0.0.5:8080"),
            line(3, 504, "10.0.0.5:8080"),
            line(4, 200, "-"),
            line(5, 500, "10.0.0.5:8080, 10.0.0.6:8080"),
            // Failed lines whose request is UTF-8 but not ASCII, and not UTF-8 at all.
            line(6, 502, "10.0.0.5:8080").replace("/a?", "/é?"),
        ]
        .concat();
        let mut text = text.into_bytes();
        text.extend(
            line(7, 502, "10.0.0.5:8080")
                .replace("/a?", "/\u{1}?")
                .bytes(),
        );
        let bad = text.iter().rposition(|&b| b == 1).unwrap();
        text[bad] = 0xff;
        std::fs::write(&path, text).unwrap();
        let mut s = AccessStream::open(&[path], &LogFormat::lab(), 0).unwrap();
        let (mut keys, mut requests) = (Vec::new(), Vec::new());
        while let Some(a) = s.next() {
            // Computed on a matcher thread (failed lines) or here (the others): the same value.
            assert_eq!(a.request_hash(), a.text(Field::Request).map(text_hash));
            assert_eq!(a.remote_hash(), a.text(Field::RemoteAddr).map(text_hash));
            keys.push(a.upstream_key());
            requests.push(a.request_hash());
        }
        assert!(
            requests[5].is_some() && requests[6].is_none(),
            "{requests:?}"
        );
        assert_eq!(keys.len(), 7);
        assert_eq!(keys[0], keys[4], "one $upstream_addr, one key");
        assert_eq!(keys[1], keys[2]);
        assert_ne!(keys[0], keys[1]);
        assert!(
            keys[1].is_some() && keys[3].is_none(),
            "`-` names no trajectory"
        );
    }

    #[test]
    fn every_field_is_at_its_index() {
        for (i, f) in Field::ALL.iter().enumerate() {
            assert_eq!(*f as usize, i);
        }
    }
}
