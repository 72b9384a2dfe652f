//! The diagnosis state `watch` keeps: the checker run on what the followers read, in two ways.
//!
//! - **Every line is counted once** as it comes, by the checker's [`Tally`]: what the checker
//!   counts line by line (requests by upstream and status, error lines by signature, lines
//!   read) adds up over any split of the lines, so it is added to the counters at every tick,
//!   read where the follower holds the lines (no file written). An address's upstream is the
//!   one the lines so far name (a diagnosis of the whole log may learn it later).
//! - **Failures are classed in windows.** A tick with a failure opens a window that starts with
//!   the `context` before it (the swaps and answers the classes read); while it is open the
//!   window is diagnosed every `reclass` (first `reclass` after it opened, once the lines after
//!   its first failure are in), its incidents exported as open; it closes once
//!   no failure came for `settle` of log time (or of wall time when the logs stop), or when it
//!   is `window` long. Then its incidents are counted by class, once each, and emitted.
//!
//! So a file watched live and diagnosed afterwards give the same classes and counts when its
//! incidents are more than `settle` apart, and their evidence lies within `context` before
//! them; an incident longer than `window` is classed in pieces (each failure still counted
//! once: the next window starts without context).

use crate::follow::Lines;
use crate::totals::Totals;
use resolvelab_diagnose::checker::tally::{Stream, Tally};
use resolvelab_diagnose::{Diagnosis, Incident, Options};
use std::collections::{BTreeMap, VecDeque};
use std::io::Write;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// The kind of a followed stream, as the checker reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// An access log.
    Access,
    /// An error log.
    Error,
    /// A mixed stream (`kubectl logs -f`, `journalctl -f`, a CRI file).
    Mixed,
    /// The names' answers (`resolvelab.dns/v1` lines, from `--dns-watch`).
    Dns,
}

impl Kind {
    /// The tally's name for it.
    fn stream(self) -> Stream {
        match self {
            Kind::Access => Stream::Access,
            Kind::Error => Stream::Error,
            Kind::Mixed => Stream::Mixed,
            Kind::Dns => Stream::Dns,
        }
    }
}

/// The most the context holds in memory, whatever its `context` time: at a high log rate the
/// context is shorter than asked, not the memory larger. Several instances share it.
pub const MAX_CONTEXT_BYTES: usize = 64 << 20;

/// The bytes of a tick's lines.
fn bytes(lines: &[Lines]) -> usize {
    lines.iter().map(Lines::bytes).sum()
}

/// How windows are cut.
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    /// Log time without a failure that closes a window.
    pub settle: Duration,
    /// What a window starts with before its first failure.
    pub context: Duration,
    /// The longest a window stays open.
    pub window: Duration,
    /// How often an open window is classed again.
    pub reclass: Duration,
}

impl Default for Timing {
    fn default() -> Timing {
        Timing {
            settle: Duration::from_secs(30),
            context: Duration::from_secs(120),
            window: Duration::from_secs(15 * 60),
            reclass: Duration::from_secs(5),
        }
    }
}

/// One spooled file of a window and where its lines came from.
struct Spooled {
    path: PathBuf,
    file: std::fs::File,
    lines: u64,
    /// Runs of lines from one file: (first spooled line, its line in the followed file).
    origins: Vec<(u64, u64)>,
}

/// A window's spool is removed when the window closes (and a tick's after its diagnosis): a
/// watch that runs for months keeps no incident's lines on disk.
impl Drop for Spooled {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

impl Spooled {
    fn create(path: PathBuf, kind: Kind) -> anyhow::Result<Spooled> {
        let mut file = std::fs::File::create(&path)?;
        let mut lines = 0;
        if kind == Kind::Dns {
            // A JSON Lines file of ours starts with its schema line.
            writeln!(
                file,
                "{}",
                serde_json::json!({ "schema": resolvelab_core::evidence::schema::DNS })
            )?;
            lines = 1;
        }
        Ok(Spooled {
            path,
            file,
            lines,
            origins: Vec::new(),
        })
    }

    fn push(&mut self, lines: &Lines) -> anyhow::Result<()> {
        let mut buf = Vec::with_capacity(lines.bytes());
        for (line, text) in lines.iter() {
            let next = self.lines + 1;
            let continues = self
                .origins
                .last()
                .is_some_and(|&(s, o)| o + (next - s) == line);
            if !continues {
                self.origins.push((next, line));
            }
            self.lines = next;
            buf.extend_from_slice(text);
            buf.push(b'\n');
        }
        self.file.write_all(&buf)?;
        Ok(())
    }

    /// The followed file's line of a spooled line.
    fn origin(&self, line: u64) -> Option<u64> {
        let k = self.origins.partition_point(|&(s, _)| s <= line);
        let (s, o) = *self.origins.get(k.checked_sub(1)?)?;
        Some(o + (line - s))
    }
}

/// An open window.
struct Window {
    files: Vec<Spooled>,
    opened: Instant,
    /// The first request of the tick that opened it: earlier failures belong to the context.
    start_ms: i64,
    last_classed: Option<Instant>,
    last_lines: Instant,
}

/// What a tick changed, for the caller to publish.
#[derive(Debug, Default)]
pub struct Outcome {
    /// Incidents of a window that closed in this tick, counted now.
    pub closed: Vec<Incident>,
    /// The open window's incidents as last classed (empty when none is open).
    pub open: Vec<Incident>,
}

/// The state: the counters, the open window, the recent ticks a window starts with.
pub struct Live {
    template: Options,
    names: Vec<(Kind, String)>,
    /// What every line counts, counted once as it comes.
    tally: Tally,
    dir: tempfile::TempDir,
    timing: Timing,
    max_upstreams: usize,
    ring: VecDeque<(Instant, Vec<Lines>)>,
    ring_bytes: usize,
    /// The most the ring holds ([`MAX_CONTEXT_BYTES`] shared by the instances watched).
    ring_cap: usize,
    window: Option<Window>,
    windows_opened: u64,
    /// The open window's incidents as last classed.
    open_incidents: Vec<Incident>,
    /// The counters.
    pub totals: Totals,
    /// The newest diagnosis of a window (open or closed), for `/report`.
    pub latest: Option<Diagnosis>,
    /// The newest request time read, epoch ms.
    pub newest_ms: Option<i64>,
}

impl Live {
    /// A state for followed streams of these kinds and names (their paths, as references name
    /// them); `template` holds the format, configuration facts and version every diagnosis uses.
    pub fn new(
        template: Options,
        names: Vec<(Kind, String)>,
        timing: Timing,
        max_upstreams: usize,
        totals: Totals,
    ) -> anyhow::Result<Live> {
        let mut tally = Tally::new(&template);
        for (kind, name) in &names {
            tally.add_stream(kind.stream(), name);
        }
        Ok(Live {
            template,
            names,
            tally,
            dir: tempfile::Builder::new()
                .prefix("resolvelab-watch")
                .tempdir()?,
            timing,
            max_upstreams,
            ring: VecDeque::new(),
            ring_bytes: 0,
            ring_cap: MAX_CONTEXT_BYTES,
            window: None,
            windows_opened: 0,
            open_incidents: Vec::new(),
            totals,
            latest: None,
            newest_ms: None,
        })
    }

    /// One more followed stream (an instance's file found later): empty in the context and
    /// in the open window so far.
    pub fn add_stream(&mut self, kind: Kind, name: String) -> anyhow::Result<()> {
        self.tally.add_stream(kind.stream(), &name);
        self.names.push((kind, name));
        if let Some(w) = &mut self.window {
            let k = self.names.len() - 1;
            let p = self
                .dir
                .path()
                .join(format!("w{}-{k}.log", self.windows_opened));
            w.files.push(Spooled::create(p, kind)?);
        }
        Ok(())
    }

    /// Hold at most `bytes` of context (its share of [`MAX_CONTEXT_BYTES`] when several
    /// instances are watched); the excess goes at the next tick with lines.
    pub fn set_context_cap(&mut self, bytes: usize) {
        self.ring_cap = bytes;
    }

    /// Bytes of spooled lines on disk now (the open window's; none between windows).
    pub fn spooled_bytes(&self) -> u64 {
        std::fs::read_dir(self.dir.path())
            .map(|d| {
                d.flatten()
                    .filter_map(|e| e.metadata().ok())
                    .map(|m| m.len())
                    .sum()
            })
            .unwrap_or(0)
    }

    /// True when a window is open (its failures are not counted yet).
    pub fn is_open(&self) -> bool {
        self.window.is_some()
    }

    /// Take one tick's lines (one list per stream, in the order of `names`).
    pub fn tick(&mut self, lines: Vec<Lines>, now: Instant) -> anyhow::Result<Outcome> {
        self.ingest(lines, now)?;
        self.settle(now, false)
    }

    /// The last tick: its lines, then the open window classed and closed whatever its state.
    pub fn finish(&mut self, lines: Vec<Lines>, now: Instant) -> anyhow::Result<Outcome> {
        self.ingest(lines, now)?;
        self.settle(now, true)
    }

    fn ingest(&mut self, lines: Vec<Lines>, now: Instant) -> anyhow::Result<()> {
        if lines.iter().any(|l| !l.is_empty()) {
            for (k, l) in lines.iter().enumerate() {
                self.count(k, l);
            }
            let c = self.tally.take();
            self.totals.add_lines(&c, self.max_upstreams);
            self.newest_ms = c.span_ms.map(|s| s.1).max(self.newest_ms);
            if self.window.is_none() && c.failed > 0 {
                self.open(c.span_ms.map_or(i64::MIN, |s| s.0), now)?;
            }
            if let Some(w) = &mut self.window {
                for (f, l) in w.files.iter_mut().zip(&lines) {
                    f.push(l)?;
                }
                w.last_lines = now;
            }
            self.ring_bytes += bytes(&lines);
            self.ring.push_back((now, lines));
            while self.ring.front().is_some_and(|(t, _)| {
                now.duration_since(*t) > self.timing.context || self.ring_bytes > self.ring_cap
            }) {
                let (_, gone) = self.ring.pop_front().expect("not empty");
                self.ring_bytes -= bytes(&gone);
            }
        }
        Ok(())
    }

    /// Count stream `k`'s lines, each run of consecutive lines under its own numbers.
    fn count(&mut self, k: usize, lines: &Lines) {
        for (first, run) in lines.runs() {
            self.tally.feed(k, run, first);
        }
    }

    /// Open a window with the context before the tick that showed a failure; `start_ms`: the
    /// tick's first request.
    fn open(&mut self, start_ms: i64, now: Instant) -> anyhow::Result<()> {
        self.windows_opened += 1;
        let mut files = Vec::new();
        for k in 0..self.names.len() {
            let p = self
                .dir
                .path()
                .join(format!("w{}-{k}.log", self.windows_opened));
            let mut f = Spooled::create(p, self.names[k].0)?;
            // A stream added after a tick has no lines in it.
            for (_, t) in &self.ring {
                if let Some(l) = t.get(k) {
                    f.push(l)?;
                }
            }
            files.push(f);
        }
        self.window = Some(Window {
            files,
            opened: now,
            start_ms,
            last_classed: None,
            last_lines: now,
        });
        Ok(())
    }

    /// Class the open window when it is due; close it when it settled.
    fn settle(&mut self, now: Instant, force: bool) -> anyhow::Result<Outcome> {
        let Some(w) = &self.window else {
            return Ok(Outcome::default());
        };
        let quiet_wall = now.duration_since(w.last_lines) >= self.timing.settle;
        let too_long = now.duration_since(w.opened) >= self.timing.window;
        // First classed `reclass` after it opened, not at once: the swap a failure follows is
        // seen in the lines after it (requests going to the new address).
        let due = now.duration_since(w.last_classed.unwrap_or(w.opened)) >= self.timing.reclass;
        if !(due || quiet_wall || too_long || force) {
            // Between two classings the open incidents are the last ones classed: the gauge
            // stays up for the whole window, not one tick in `reclass`.
            return Ok(Outcome {
                closed: Vec::new(),
                open: self.open_incidents.clone(),
            });
        }
        let d = self.diagnose_window()?;
        let w = self.window.as_mut().expect("open");
        w.last_classed = Some(now);
        let start_ms = w.start_ms;
        let mine: Vec<Incident> = d
            .incidents
            .iter()
            .filter(|i| i.start_ms >= start_ms)
            .cloned()
            .collect();
        let last_failure = mine.iter().map(|i| i.end_ms).max();
        let quiet_log = match (last_failure, d.end_ms) {
            (Some(f), Some(e)) => e - f >= self.timing.settle.as_millis() as i64,
            _ => true,
        };
        self.latest = Some(d);
        if quiet_log || quiet_wall || too_long || force {
            self.window = None;
            if too_long || force {
                // Its last failures may go on: a next window must not read them again as its
                // context (they are counted now).
                self.ring.clear();
            }
            for i in &mine {
                self.totals.add_incident(i, self.max_upstreams);
            }
            self.open_incidents.clear();
            return Ok(Outcome {
                closed: mine,
                open: Vec::new(),
            });
        }
        self.open_incidents = mine.clone();
        Ok(Outcome {
            closed: Vec::new(),
            open: mine,
        })
    }

    /// The checker over the open window, its references named by the followed files.
    fn diagnose_window(&mut self) -> anyhow::Result<Diagnosis> {
        let w = self.window.as_mut().expect("open");
        for f in &mut w.files {
            f.file.flush()?;
        }
        let w = self.window.as_ref().expect("open");
        let mut d = self.diagnose(&w.files)?;
        let by_path: BTreeMap<String, (usize, &Spooled)> = w
            .files
            .iter()
            .enumerate()
            .map(|(k, f)| (f.path.display().to_string(), (k, f)))
            .collect();
        let names = &self.names;
        d.relabel(
            &|at| {
                let (p, line) = at.rsplit_once(':')?;
                let (k, f) = by_path.get(p)?;
                let o = f.origin(line.parse().ok()?)?;
                Some(format!("{}:{o}", names[*k].1))
            },
            &|p| by_path.get(p).map(|(k, _)| names[*k].1.clone()),
        );
        Ok(d)
    }

    fn diagnose(&self, files: &[Spooled]) -> anyhow::Result<Diagnosis> {
        let mut o = self.template.clone();
        let paths = |kind: Kind| -> Vec<PathBuf> {
            files
                .iter()
                .zip(&self.names)
                .filter(|(_, (k, _))| *k == kind)
                .map(|(f, _)| f.path.clone())
                .collect()
        };
        o.access = paths(Kind::Access);
        o.error = paths(Kind::Error);
        o.mixed = paths(Kind::Mixed);
        o.dns = paths(Kind::Dns);
        resolvelab_diagnose::diagnose(&o)
    }
}
