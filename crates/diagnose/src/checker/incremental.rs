//! The checker kept across chunks of lines read from memory: the access pass and the pairing
//! run once over every line as it is fed, and [`Incremental::snapshot`] runs the stages after
//! them (groups, swaps, incidents, totals) on a copy of what they kept, as a diagnosis of the
//! lines fed so far — without reading any line twice. `watch` classes an open window this way.
//!
//! Each stream is named by a file that holds the lines fed so far, numbered from 1 as fed (a
//! followed log, or `watch`'s copy of a window): the lines quoted as evidence are read from
//! it, and so are an error log read without any access log and a DNS stream's answers (they
//! are few: a DNS stream is read from its file at each snapshot, and feeding it does nothing).
//!
//! ```
//! use resolvelab_diagnose::checker::incremental::Incremental;
//! use resolvelab_diagnose::checker::tally::Stream;
//! use resolvelab_history::logformat::LogFormat;
//! let dir = tempfile::tempdir().unwrap();
//! let access = dir.path().join("access.log");
//! let line = "1796018401.200 502 \"127.0.0.20:8080\" \"502\" 0.001 GET 2 1 \"0.001\" \"0.000\" \"GET / HTTP/1.1\" 127.0.0.1";
//! std::fs::write(&access, format!("{line}\n")).unwrap();
//! let mut o = resolvelab_diagnose::Options::new(Vec::new(), Vec::new());
//! o.log_format = LogFormat::lab();
//! let mut c = Incremental::new(&o, &[(Stream::Access, access)]).unwrap();
//! c.feed(0, [line.as_bytes()], 1).unwrap();
//! let d = c.snapshot().unwrap();
//! assert_eq!((d.requests, d.failures), (1, 1));
//! ```

use super::access::{Reader, index_of};
use super::pairing::Pairer;
use super::tally::Stream;
use crate::Options;
use crate::verdict::Diagnosis;
use resolvelab_history::access::AccessLine;
use resolvelab_history::errorlog::{ErrorReader, Inbox, is_blank, may_be_error_line};
use resolvelab_history::{FileStats, History, MemoryMatcher, Sources};
use std::path::PathBuf;

/// One fed stream.
struct Fed {
    kind: Stream,
    /// Access and mixed streams: their matcher.
    matcher: Option<MemoryMatcher>,
    /// Error and mixed streams: where their lines are handed to the pairer's error stream.
    inbox: Option<Inbox>,
    /// The number of the next line to feed.
    next_line: u64,
    /// Mixed streams: lines handed to the error stream as empty lines (no error line can be
    /// made of them), for its counts.
    passed_over: u64,
}

/// The checker over lines fed from memory (see the module).
pub struct Incremental {
    /// The options, their paths the streams' names.
    opts: Options,
    reader: Reader<'static>,
    streams: Vec<Fed>,
    /// The access streams' stream numbers, in their file order.
    access_order: Vec<usize>,
    /// The streams' names, by stream number.
    names: Vec<PathBuf>,
}

impl Incremental {
    /// A checker reading as `opts` says (its format, `--upstream`, clock, version, config) the
    /// `streams` (kind, name); stream `k` is fed with [`Incremental::feed`]`(k, …)`. Their files
    /// are numbered as a diagnosis of the same files numbers them, so its references are
    /// those of `diagnose`.
    pub fn new(opts: &Options, streams: &[(Stream, PathBuf)]) -> anyhow::Result<Incremental> {
        let of = |kind: Stream| -> Vec<PathBuf> {
            streams
                .iter()
                .filter(|s| s.0 == kind)
                .map(|s| s.1.clone())
                .collect()
        };
        let mut opts = opts.clone();
        opts.access = of(Stream::Access);
        opts.error = of(Stream::Error);
        opts.mixed = of(Stream::Mixed);
        opts.dns = of(Stream::Dns);
        // History::load's file order: access, mixed (as access), error, mixed (as error).
        let numbers = |first: Stream| -> Vec<usize> {
            let of = |kind: Stream| (0..streams.len()).filter(move |&k| streams[k].0 == kind);
            of(first).chain(of(Stream::Mixed)).collect()
        };
        let access_order = numbers(Stream::Access);
        let error_order = numbers(Stream::Error);
        let mut fed: Vec<Fed> = streams
            .iter()
            .map(|s| Fed {
                kind: s.0,
                matcher: None,
                inbox: None,
                next_line: 1,
                passed_over: 0,
            })
            .collect();
        let fmt = &opts.log_format;
        for (file, &k) in access_order.iter().enumerate() {
            let (kind, name) = &streams[k];
            fed[k].matcher = Some(MemoryMatcher::new(
                name,
                fmt,
                *kind == Stream::Mixed,
                file as u32,
            ));
        }
        let mut readers = Vec::new();
        for (i, &k) in error_order.iter().enumerate() {
            let (kind, name) = &streams[k];
            let inbox = Inbox::default();
            let file = (access_order.len() + i) as u32;
            let r = ErrorReader::from_reader(inbox.reader(), name, file, 0);
            readers.push(if *kind == Stream::Mixed { r.mixed() } else { r });
            fed[k].inbox = Some(inbox);
        }
        let pairer = Pairer::from_memory(index_of(fmt), readers);
        let mut reader = Reader::new(None, fmt, opts.tz_offset_s, pairer);
        reader.count_only(opts.range);
        Ok(Incremental {
            reader,
            opts,
            streams: fed,
            access_order,
            names: streams.iter().map(|s| s.1.clone()).collect(),
        })
    }

    /// Feed stream `k`'s next lines (each without its newline), numbered from `first_line`:
    /// a stream's lines come in order, from line 1, with no gap. Error lines of a stretch of
    /// time are fed before or with the access lines of that stretch (a failure is paired once
    /// the access lines are 10 s past it), and a multi-line error entry (a Lua traceback)
    /// whole, as nginx writes it: continuation lines fed apart from their entry are lines of
    /// their own.
    pub fn feed<'l>(
        &mut self,
        k: usize,
        lines: impl IntoIterator<Item = &'l [u8]> + Clone,
        first_line: u64,
    ) -> anyhow::Result<()> {
        self.feed_with(k, lines, first_line, |_| {}).map(|_| ())
    }

    /// [`Incremental::feed`], each access line matched also handed to `on_access` (for
    /// counters of the same lines: they are read once); returns how many access lines were
    /// parsed, malformed and passed over.
    pub fn feed_with<'l>(
        &mut self,
        k: usize,
        lines: impl IntoIterator<Item = &'l [u8]> + Clone,
        first_line: u64,
        mut on_access: impl FnMut(&AccessLine<'_>),
    ) -> anyhow::Result<[u64; 3]> {
        let Some(fed) = self.streams.get_mut(k) else {
            anyhow::bail!("no stream {k}: {} were given", self.streams.len());
        };
        if fed.kind == Stream::Dns {
            // Read from its file at each snapshot.
            return Ok([0; 3]);
        }
        if first_line != fed.next_line {
            anyhow::bail!(
                "{}: line {first_line} fed where line {} was next: a stream is fed in order, with no gap",
                self.names[k].display(),
                fed.next_line
            );
        }
        let mut n = 0u64;
        if let Some(inbox) = &fed.inbox {
            // A mixed stream's access lines wait for the pairing as empty lines: the error
            // stream is read some seconds behind, and they are most of its bytes.
            let mixed = fed.kind == Stream::Mixed;
            // Which lines are kept, and the buffer sized once for them: a tick's text waits
            // here for seconds, and a grown buffer holds up to twice its bytes.
            let mut size = 0;
            let kept: Vec<bool> = lines
                .clone()
                .into_iter()
                .map(|l| {
                    let k = !mixed || may_be_error_line(l) || is_blank(l);
                    size += 1 + if k { l.len() } else { 0 };
                    k
                })
                .collect();
            let mut buf = Vec::with_capacity(size);
            for (l, k) in lines.clone().into_iter().zip(kept) {
                if k {
                    buf.extend_from_slice(l);
                } else {
                    fed.passed_over += 1;
                }
                buf.push(b'\n');
                n += 1;
            }
            inbox.push(buf);
            self.reader.pairer.resume();
        }
        let mut counts = [0; 3];
        if let Some(m) = &mut fed.matcher {
            // The error lines fed before these access lines (this tick's among them) wait
            // in the window, not as text.
            self.reader.pairer.read_ahead();
            let (reader, mut failed) = (&mut self.reader, None);
            let before = m.stats().clone();
            n = 0;
            m.feed(lines.into_iter().inspect(|_| n += 1), first_line, |a| {
                on_access(a);
                if failed.is_none()
                    && let Err(e) = reader.line(a)
                {
                    failed = Some(e);
                }
            });
            if let Some(e) = failed {
                return Err(e);
            }
            let after = m.stats();
            counts = [
                after.parsed - before.parsed,
                after.malformed - before.malformed,
                after.skipped - before.skipped,
            ];
        }
        fed.next_line += n;
        Ok(counts)
    }

    /// The bytes of error lines fed and not read by the pairing yet (they wait as text).
    pub fn waiting_bytes(&self) -> usize {
        self.streams
            .iter()
            .filter_map(|f| f.inbox.as_ref())
            .map(Inbox::waiting_bytes)
            .sum()
    }

    /// The diagnosis of the lines fed so far, as `diagnose` of the streams' files gives it; the
    /// checker reads on.
    pub fn snapshot(&mut self) -> anyhow::Result<Diagnosis> {
        let files: Vec<FileStats> = self
            .access_order
            .iter()
            .filter_map(|&k| self.streams[k].matcher.as_ref())
            .map(MemoryMatcher::file_stats)
            .collect();
        // The lines passed over as empty lines are counted where the error stream read them;
        // before it opened, the copy reads the files.
        let from_memory = self.reader.pairer.is_reading();
        let (acc, pairer) = self.reader.detach(files);
        let o = &self.opts;
        let hist = History::load(&Sources {
            access: o.access.clone(),
            error: o.error.clone(),
            mixed: o.mixed.clone(),
            dns: o.dns.clone(),
            events: o.events.clone(),
        })?;
        let mut d = super::conclude(o, hist, acc, pairer)?.0;
        // What reading the lines passed over would have counted: a line of another kind.
        for (fed, name) in self.streams.iter().zip(&self.names) {
            let path = name.display().to_string();
            if let Some(f) = d
                .parse
                .files
                .iter_mut()
                .find(|f| f.kind == "error" && f.path == path && from_memory)
            {
                f.lines += fed.passed_over;
                f.skipped += fed.passed_over;
            }
        }
        Ok(d)
    }
}
