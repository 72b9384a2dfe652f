//! The diagnosis state `watch` keeps: the checker run on what the followers read, in two ways.
//!
//! - **Every line is counted once** as it comes, by the checker's [`Tally`]: what the checker
//!   counts line by line (requests by upstream and status, error lines by signature, lines
//!   read) adds up over any split of the lines, so it is added to the counters at every tick,
//!   read where the follower holds the lines (no file written). An address's upstream is the
//!   one the lines so far name (a diagnosis of the whole log may learn it later).
//! - **Failures are classed in windows.** A tick with a failure opens a window that starts with
//!   the `context` before it (the swaps and answers the classes read). Its lines are fed once,
//!   as they come, to the checker's [`Incremental`] pass (and copied to a file, from which the
//!   lines it quotes as evidence are read), which starts with the context (kept on disk,
//!   [`spool`](crate::spool)) and stays warm after the window closes, so that the next
//!   window finds its context read already: it goes once it is two contexts old with no
//!   window open. While the window is
//!   open it is classed every `reclass` from that pass's state (first `reclass` after it
//!   opened, once the lines after its first failure are in), its incidents exported as open;
//!   it closes once
//!   no failure came for `settle` of log time (or of wall time when the logs stop), or when it
//!   is `window` long. Then its incidents are counted by class, once each, and emitted.
//!
//! So a file watched live and diagnosed afterwards give the same classes and counts when its
//! incidents are more than `settle` apart, and their evidence lies within `context` before
//! them; an incident longer than `window` is classed in pieces (each failure still counted
//! once: the next window starts without context).

use crate::follow::Lines;
use crate::spool::{Context, Placed, Spooled};
use crate::totals::{PairingCount, Totals};
use resolvelab_diagnose::checker::incremental::Incremental;
use resolvelab_diagnose::checker::tally::{Stream, Tally};
use resolvelab_diagnose::{Diagnosis, Incident, Options};
use std::collections::BTreeMap;
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

/// The most lines the context names, whatever its `context` time (on disk: see [`spool`]): at
/// a high log rate the context is shorter than asked, not the disk fuller, and a new pass
/// reads no more than this back. Several instances share it.
///
/// [`spool`]: crate::spool
pub const MAX_CONTEXT_BYTES: usize = 64 << 20;

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

/// The checker's pass over the lines since a window opened with the context before it: kept
/// after the window closes, so that the next window finds its context already read, until it
/// is older than two contexts when no window is open (see [`Live::expire_pass`]).
struct Pass {
    files: Vec<Spooled>,
    /// Each spooled file a stream.
    checker: Incremental,
    started: Instant,
    /// The newest request time read when it started (epoch ms).
    started_ms: Option<i64>,
    /// The pairing loss its checker reported at the last window's close: a pass outlives its
    /// window, and the next window counts only what it adds.
    counted_loss: PairingCount,
}

/// An open window.
struct Window {
    opened: Instant,
    /// The first failed request of the tick that opened it: incidents that ended before it
    /// belong to the context (and were counted by an earlier window).
    start_ms: i64,
    last_classed: Option<Instant>,
    last_lines: Instant,
    /// The latest failed request read since it opened (epoch ms).
    last_failed_ms: Option<i64>,
}

impl Pass {
    /// Copy one tick's lines (one list per stream) to the spooled files and feed them to the
    /// checker, error, mixed and DNS streams first (a failure pairs with the error lines fed
    /// before or with it); with `tally`, count them there too, each access line matched once
    /// for both. Returns where each stream's lines were spooled.
    fn take(
        &mut self,
        lines: &[Lines],
        names: &[(Kind, String)],
        mut tally: Option<&mut Tally>,
    ) -> anyhow::Result<Vec<Option<Placed>>> {
        let mut placed = vec![None; lines.len()];
        for k in feed_order(names, lines.len().min(self.files.len())) {
            let l = &lines[k];
            if l.is_empty() {
                continue;
            }
            let (first, at) = self.files[k].push(l)?;
            placed[k] = Some(at);
            let texts = l.iter().map(|(_, t)| t);
            match tally.as_deref_mut() {
                Some(t) => {
                    let read = self
                        .checker
                        .feed_with(k, texts.clone(), first, |a| t.count_access(a))?;
                    t.count_matched(read);
                    t.feed_other(k, texts);
                }
                None => self.checker.feed(k, texts, first)?,
            }
        }
        Ok(placed)
    }
}

/// The first `n` streams, those that are not access logs first.
fn feed_order(names: &[(Kind, String)], n: usize) -> impl Iterator<Item = usize> + '_ {
    let access = move |k: &usize| names[*k].0 == Kind::Access;
    (0..n)
        .filter(move |k| !access(k))
        .chain((0..n).filter(move |k| access(k)))
}

/// The checker's pass over spooled files, read as `template` says.
fn checker(
    template: &Options,
    names: &[(Kind, String)],
    files: &[Spooled],
) -> anyhow::Result<Incremental> {
    let streams: Vec<(Stream, PathBuf)> = names
        .iter()
        .zip(files)
        .map(|((kind, _), f)| (kind.stream(), f.path().to_path_buf()))
        .collect();
    Incremental::new(template, &streams)
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
    /// The recent ticks, on disk ([`MAX_CONTEXT_BYTES`] shared by the instances watched).
    context: Context,
    window: Option<Window>,
    windows_opened: u64,
    pass: Option<Pass>,
    passes_started: u64,
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
        let dir = tempfile::Builder::new()
            .prefix("resolvelab-watch")
            .tempdir()?;
        Ok(Live {
            template,
            names,
            tally,
            context: Context::new(dir.path(), MAX_CONTEXT_BYTES as u64),
            dir,
            timing,
            max_upstreams,
            window: None,
            windows_opened: 0,
            pass: None,
            passes_started: 0,
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
        if let Some(w) = &mut self.pass {
            let k = self.names.len() - 1;
            let p = self
                .dir
                .path()
                .join(format!("p{}-{k}.log", self.passes_started));
            w.files.push(Spooled::create(p, kind)?);
            // The checker's streams are fixed: a new one is read from the spooled files
            // (rare: a file that appears while a pass runs).
            w.checker = checker(&self.template, &self.names, &w.files)?;
            let order = feed_order(&self.names, w.files.len());
            for k in order {
                let f = &mut w.files[k];
                f.file.flush()?;
                let text = std::fs::read(f.path())?;
                let lines = text.strip_suffix(b"\n").unwrap_or(&text);
                if !lines.is_empty() {
                    w.checker.feed(k, lines.split(|b| *b == b'\n'), 1)?;
                }
            }
        }
        Ok(())
    }

    /// Hold at most `bytes` of context (its share of [`MAX_CONTEXT_BYTES`] when several
    /// instances are watched); the excess goes at the next tick with lines.
    pub fn set_context_cap(&mut self, bytes: usize) {
        self.context.cap = bytes as u64;
    }

    /// Bytes of spooled lines on disk now: the checker's pass's, while a window is open and for
    /// two contexts after, and the context's (none once the lines end).
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
        let out = self.settle(now, true);
        // Nothing more comes: the pass, the context and their spooled files go.
        self.pass = None;
        self.context.clear();
        out
    }

    fn ingest(&mut self, lines: Vec<Lines>, now: Instant) -> anyhow::Result<()> {
        if lines.iter().all(Lines::is_empty) {
            return Ok(());
        }
        // Where the pass spooled this tick's lines, if one read them.
        let mut placed = match &mut self.pass {
            // Its checker reads the lines, and the tally counts what it matched.
            Some(p) => Some(p.take(&lines, &self.names, Some(&mut self.tally))?),
            None => {
                for (k, l) in lines.iter().enumerate() {
                    self.count(k, l);
                }
                None
            }
        };
        let c = self.tally.take();
        self.totals.add_lines(&c, self.max_upstreams);
        self.newest_ms = c.span_ms.map(|s| s.1).max(self.newest_ms);
        if self.window.is_none() && c.failed > 0 {
            if self.pass.is_none() {
                self.start_pass(now)?;
                let p = self.pass.as_mut().expect("started");
                placed = Some(p.take(&lines, &self.names, None)?);
            }
            self.open(c.first_failed_ms.unwrap_or(i64::MIN), now);
        }
        match &mut self.window {
            Some(w) => {
                w.last_lines = now;
                w.last_failed_ms = w.last_failed_ms.max(c.last_failed_ms);
            }
            None => self.expire_pass(now),
        }
        // The context names the lines where they are on disk: the pass's files, or a file of
        // their own.
        match placed {
            Some(at) => self.context.push_placed(now, self.newest_ms, at),
            // A context that cannot be written (a full disk) is not a reason to stop counting:
            // it is dropped, and the next window starts without one.
            None => {
                if self.context.push(now, self.newest_ms, &lines).is_err() {
                    self.context.clear();
                }
            }
        }
        // The context is `context` of wall time or of log time, whichever is shorter (a
        // backlog read at once spans hours of log in seconds).
        self.context.trim(now, self.newest_ms, self.timing.context);
        Ok(())
    }

    /// Count stream `k`'s lines, each run of consecutive lines under its own numbers.
    fn count(&mut self, k: usize, lines: &Lines) {
        for (first, run) in lines.runs() {
            self.tally.feed(k, run, first);
        }
    }

    /// Start the checker's pass with the context (the recent ticks, not this one).
    fn start_pass(&mut self, now: Instant) -> anyhow::Result<()> {
        self.passes_started += 1;
        let mut files = Vec::new();
        for k in 0..self.names.len() {
            let p = self
                .dir
                .path()
                .join(format!("p{}-{k}.log", self.passes_started));
            files.push(Spooled::create(p, self.names[k].0)?);
        }
        let mut p = Pass {
            checker: checker(&self.template, &self.names, &files)?,
            files,
            started: now,
            started_ms: self.newest_ms,
            counted_loss: PairingCount::default(),
        };
        // A stream added after a tick has no lines in it. The ticks then name the pass's
        // files, and their own files go.
        let names = &self.names;
        self.context.replay(|t| p.take(t, names, None))?;
        self.pass = Some(p);
        Ok(())
    }

    /// With no window open, a pass older than two contexts of wall or log time goes (its
    /// state, its spooled lines): the next window starts a new one with the context, so a
    /// pass's state, and the cost of classing from it, stay bounded by two contexts plus one
    /// window (a backlog read at once spans hours of log in seconds).
    fn expire_pass(&mut self, now: Instant) {
        let old = 2 * self.timing.context;
        let old_ms = old.as_millis() as i64;
        let newest = self.newest_ms;
        if self.window.is_none()
            && self.pass.as_ref().is_some_and(|p| {
                now.duration_since(p.started) > old
                    || matches!((p.started_ms, newest), (Some(a), Some(b)) if b.saturating_sub(a) > old_ms)
            })
        {
            self.pass = None;
        }
    }

    /// Open a window (its pass started); `start_ms`: the first failed request of the tick
    /// that showed one.
    fn open(&mut self, start_ms: i64, now: Instant) {
        self.windows_opened += 1;
        self.window = Some(Window {
            opened: now,
            start_ms,
            last_classed: None,
            last_lines: now,
            last_failed_ms: None,
        });
    }

    /// Class the open window when it is due; close it when it settled.
    fn settle(&mut self, now: Instant, force: bool) -> anyhow::Result<Outcome> {
        let Some(w) = &self.window else {
            return Ok(Outcome::default());
        };
        let quiet_wall = now.duration_since(w.last_lines) >= self.timing.settle;
        // `window` of wall or log time, whichever is shorter: a backlog read at once spans
        // hours of log in seconds, and the pass holds what the window spans.
        let too_long = now.duration_since(w.opened) >= self.timing.window
            || (w.start_ms != i64::MIN
                && self
                    .newest_ms
                    .is_some_and(|n| n - w.start_ms >= self.timing.window.as_millis() as i64));
        // First classed `reclass` after it opened, not at once: the swap a failure follows is
        // seen in the lines after it (requests going to the new address).
        let due = now.duration_since(w.last_classed.unwrap_or(w.opened)) >= self.timing.reclass;
        // `settle` of log time past its last failed request, as the tally saw them: in a
        // backlog, where `reclass` of wall time spans minutes of log, the window would otherwise
        // run on into the next outage and be cut at `window`, mid-incident (a piece classed
        // without its context).
        let settled = self.timing.settle.as_millis() as i64;
        let quiet_tally =
            matches!((w.last_failed_ms, self.newest_ms), (Some(f), Some(n)) if n - f >= settled);
        if !(due || quiet_wall || quiet_tally || too_long || force) {
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
            .filter(|i| i.end_ms >= start_ms)
            .cloned()
            .collect();
        let last_failure = mine.iter().map(|i| i.end_ms).max();
        let quiet_log = match (last_failure, d.end_ms) {
            (Some(f), Some(e)) => e - f >= self.timing.settle.as_millis() as i64,
            _ => true,
        };
        let loss = d.parse.pairing_loss.unwrap_or_default();
        self.latest = Some(d);
        if quiet_log || quiet_wall || quiet_tally || too_long || force {
            self.count_pairing_loss(loss);
            self.window = None;
            if too_long || force {
                // Its last failures may go on: a next window must not read them again as its
                // context (they are counted now).
                self.context.clear();
                self.pass = None;
            }
            self.expire_pass(now);
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

    /// What the pass's checker dropped from its pairing window since the last window closed.
    fn count_pairing_loss(&mut self, now: resolvelab_diagnose::verdict::PairingLoss) {
        let Some(p) = self.pass.as_mut() else {
            return;
        };
        let t = &mut self.totals.pairing_loss;
        t.lines += now.lines.saturating_sub(p.counted_loss.lines);
        t.unpaired += now.unpaired.saturating_sub(p.counted_loss.unpaired);
        p.counted_loss = PairingCount {
            lines: now.lines,
            unpaired: now.unpaired,
        };
    }

    /// The checker over the open window, its references named by the followed files.
    fn diagnose_window(&mut self) -> anyhow::Result<Diagnosis> {
        let w = self.pass.as_mut().expect("a window has its pass");
        // The lines it quotes are read from the spooled files.
        for f in &mut w.files {
            f.file.flush()?;
        }
        let mut d = w.checker.snapshot()?;
        let w = self.pass.as_ref().expect("a window has its pass");
        let by_path: BTreeMap<String, (usize, &Spooled)> = w
            .files
            .iter()
            .enumerate()
            .map(|(k, f)| (f.path().display().to_string(), (k, f)))
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use resolvelab_history::logformat::LogFormat;

    /// A tick of lab-format access lines at log second `s`, each `(status, cid)`.
    fn tick(s: i64, first_line: u64, reqs: &[(u16, u64)]) -> Vec<Lines> {
        let mut l = Lines::default();
        for (i, (st, cid)) in reqs.iter().enumerate() {
            let text = format!(
                "{}.{:03} {st} \"127.0.0.20:8080\" \"{st}\" 0.001 GET {cid} 1 \"0.001\" \"0.000\" \"GET / HTTP/1.1\" 127.0.0.1",
                1_796_018_400 + s,
                i
            );
            l.push(text.as_bytes(), first_line + i as u64);
        }
        vec![l]
    }

    /// A state of one lab-format access log: 2 s settle, 10 s context, 1 s reclass.
    fn small() -> Live {
        let mut o = Options::new(Vec::new(), Vec::new());
        o.log_format = LogFormat::lab();
        let timing = Timing {
            settle: Duration::from_secs(2),
            context: Duration::from_secs(10),
            window: Duration::from_secs(600),
            reclass: Duration::from_secs(1),
        };
        let names = vec![(Kind::Access, "access.log".to_string())];
        Live::new(o, names, timing, 10, Totals::default()).unwrap()
    }

    /// The checker's pass outlives its window by two contexts at most: then its state goes,
    /// and its spooled lines once the context no longer names them, so a watch that runs for
    /// months keeps no incident on disk — only the context, `context` of lines.
    #[test]
    fn a_pass_stays_warm_for_two_contexts_after_its_window_then_goes() {
        let mut live = small();
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        live.tick(tick(0, 1, &[(200, 1), (502, 2)]), at(0)).unwrap();
        assert!(live.is_open() && live.spooled_bytes() > 0);
        let (mut closed_at, mut gone_at) = (None, None);
        for s in 1..60u64 {
            // One line a second: line s + 2.
            live.tick(tick(s as i64, s + 2, &[(200, 10 + s)]), at(s))
                .unwrap();
            if !live.is_open() && closed_at.is_none() {
                closed_at = Some(s);
            }
            assert!(live.context.len() <= 11, "{} ticks", live.context.len());
            if live.pass.is_none() && gone_at.is_none() {
                // Gone two contexts after the pass started, not before.
                assert!(s > 20, "the pass went after {s} s");
                assert!(closed_at.is_some_and(|c| c < s));
                gone_at = Some(s);
            }
            if gone_at.is_some_and(|g| s > g + 11) {
                // The context's 11 lines of one second each, in files of their own.
                let line = tick(s as i64, 0, &[(200, 10 + s)])[0].bytes() as u64;
                assert_eq!(live.spooled_bytes(), 11 * line);
                return;
            }
        }
        panic!("the pass stayed after two contexts without a window");
    }

    /// A failure that opens a window started before the tick's first line (its request took
    /// time): its incident starts before the window and is the window's all the same — the
    /// first incident of a log is counted, as `diagnose` counts it.
    #[test]
    fn the_incident_that_opens_a_window_is_counted() {
        let mut live = small();
        let t0 = Instant::now();
        let mut closed = Vec::new();
        for s in 0..10u64 {
            let reqs: &[(u16, u64)] = if s == 0 {
                &[(502, 2), (200, 1)]
            } else {
                &[(200, 1)]
            };
            let out = live
                .tick(tick(s as i64, 2 * s + 1, reqs), t0 + Duration::from_secs(s))
                .unwrap();
            closed.extend(out.closed);
        }
        assert_eq!(closed.len(), 1, "{closed:?}");
        assert_eq!(closed[0].count, 1);
        assert!(closed[0].start_ms < 1_796_018_400_000);
    }

    /// A context that cannot be written costs the context, not the counting.
    #[test]
    fn a_context_that_cannot_be_written_is_dropped() {
        let mut live = small();
        std::fs::remove_dir(live.dir.path()).unwrap();
        let t0 = Instant::now();
        for s in 0..3u64 {
            live.tick(
                tick(s as i64, s + 1, &[(200, 1)]),
                t0 + Duration::from_secs(s),
            )
            .unwrap();
        }
        assert!(live.context.is_empty());
        assert_eq!(live.totals.requests_by_class()["2xx"], 3);
    }

    /// A window that closes with its pass two contexts old takes the pass with it: windows
    /// that keep opening do not keep one pass, and the cost of classing from it, forever.
    #[test]
    fn a_window_that_closes_with_an_old_pass_ends_it() {
        let mut live = small();
        let t0 = Instant::now();
        let mut line = 1;
        // A 502 every second for 25 s keeps one window open; then only successes.
        for s in 0..40u64 {
            let st = if s < 25 { 502 } else { 200 };
            live.tick(
                tick(s as i64, line, &[(200, 1000 + s), (st, 100 + s)]),
                t0 + Duration::from_secs(s),
            )
            .unwrap();
            line += 2;
            if s > 0 && !live.is_open() {
                assert!(s > 25, "closed at {s} s");
                assert!(
                    live.pass.is_none(),
                    "the window closed at {s} s and its 2-context-old pass stayed"
                );
                return;
            }
        }
        panic!("the window never closed");
    }

    /// A backlog read at once spans minutes of log in no wall time: the pass goes after two
    /// contexts of log time, and the context kept for the next one is `context` of log time.
    #[test]
    fn in_a_backlog_the_pass_and_the_context_follow_log_time() {
        let mut live = small();
        // Five seconds of log a second: a minute of log in 12 s, under two contexts.
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_millis(200 * s);
        live.tick(tick(0, 1, &[(200, 1), (502, 2)]), at(0)).unwrap();
        for s in 1..60u64 {
            live.tick(tick(s as i64, s + 2, &[(200, 10 + s)]), at(s))
                .unwrap();
            assert!(
                live.context.len() <= 11,
                "{} ticks of context at {s} s",
                live.context.len()
            );
            if live.pass.is_none() {
                assert!(s > 20, "the pass went after {s} s of log");
                return;
            }
        }
        panic!("the pass stayed for a minute of log time");
    }

    /// In a backlog a window closes `settle` of log time after its last failure, as the lines
    /// counted show it, though no classing is due: the next outage opens a window of its own.
    #[test]
    fn in_a_backlog_a_window_closes_after_settle_of_log_time() {
        // Read at once: the wall clock stands still, so no `reclass` is ever due.
        let mut live = small();
        let now = Instant::now();
        let (mut closed, mut next) = (Vec::new(), 1);
        for s in 0..40u64 {
            // Failures in seconds 0–4 and 30–34, one good request a second besides.
            let reqs = match s % 30 < 5 {
                true => vec![(200, 1000 + s), (502, s)],
                false => vec![(200, 1000 + s)],
            };
            let out = live.tick(tick(s as i64, next, &reqs), now).unwrap();
            next += reqs.len() as u64;
            closed.push((s, out.closed.len()));
        }
        // Each window closed `settle` (2 s) of log after its last failure (at 4.001 s and
        // 34.001 s), its incident counted: the second outage opened a window of its own.
        let closes: Vec<u64> = closed.iter().filter(|c| c.1 > 0).map(|c| c.0).collect();
        assert_eq!(closes, [7, 37], "{closed:?}");
        assert_eq!(live.windows_opened, 2);
    }

    /// A backlog that fails on and on is classed in pieces of `window` of log time, each
    /// counted when it closes: the pass never holds more than that.
    #[test]
    fn in_a_backlog_a_window_is_at_most_window_of_log_time() {
        let mut live = small();
        live.timing.window = Duration::from_secs(30);
        let now = Instant::now();
        let mut closed = 0;
        for s in 0..100u64 {
            let out = live
                .tick(tick(s as i64, 2 * s + 1, &[(200, 1000 + s), (502, s)]), now)
                .unwrap();
            closed += out.closed.len();
        }
        assert!(live.windows_opened >= 3, "{} windows", live.windows_opened);
        assert!(closed >= 2, "{closed} incidents counted");
    }
}
