//! `resolvelab watch`: the checker run continuously on nginx logs as they grow — 502s by cause
//! while they happen, as Prometheus metrics, incident events and a live report.
//!
//! The parts, in the order a line goes through them: [`follow`] reads whole lines of each file
//! (through rotation and truncation, from a saved position), [`live`] is the diagnosis state
//! (the checker's tally of every line as it comes, and the checker over windows of failures
//! for their classes, its lines and context kept on disk by [`spool`]), [`totals`] the counters, [`metrics`] their exposition,
//! [`serve`] the HTTP endpoints and [`alerts`] the Prometheus alerting rules per class. One
//! watch follows several nginx instances ([`instances`]: `{instance}` in a path, or a stream
//! whose lines name their pod or host), each diagnosed apart with a [`live`] state of its own.
//!
//! ```
//! use resolvelab_watch::follow::{Follower, Lines, Start};
//! let dir = tempfile::tempdir().unwrap();
//! let p = dir.path().join("access.log");
//! let mut f = Follower::new(&p, Start::Beginning);
//! std::fs::write(&p, "a complete line\na line still being writ").unwrap();
//! let mut lines = Lines::default();
//! f.poll(&mut lines);
//! assert_eq!(lines.len(), 1, "only whole lines are read");
//! ```

#![cfg_attr(not(test), deny(clippy::print_stdout, clippy::print_stderr))]

pub mod alerts;
pub mod follow;
pub mod instances;
pub mod live;
pub mod metrics;
pub mod pace;
pub mod serve;
pub mod spool;
pub mod totals;

use follow::{Follower, Lines, Position, Start};
use instances::Pattern;
use live::{Kind, Live, Timing};
use resolvelab_core::evidence::schema;
use resolvelab_diagnose::{Incident, Options};
use resolvelab_history::export::{CriLines, Headed};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, TryRecvError, TrySendError};
use std::time::{Duration, Instant};
use totals::Totals;

/// One followed input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Input {
    /// A file, followed by name.
    File(PathBuf),
    /// Standard input (`kubectl logs -f … | resolvelab watch --logs -`): watching ends at its end.
    Stdin,
    /// Files of several instances, one per name that fills the pattern's `{instance}`, found
    /// again at every tick.
    Instances(Pattern),
}

/// What to watch and how.
#[derive(Debug, Clone)]
pub struct Config {
    /// The inputs with the kind each is read as.
    pub inputs: Vec<(Kind, Input)>,
    /// The name of the instance whose logs the plain inputs are (`--instance`): its series
    /// carry it as their `nginx_instance` label.
    pub instance: Option<String>,
    /// Instance label values kept; later instances are counted as `other`.
    pub max_instances: usize,
    /// The format, configuration facts and version every diagnosis uses (its paths are set per
    /// diagnosis).
    pub template: Options,
    /// How windows of failures are cut.
    pub timing: Timing,
    /// How often the files are read.
    pub interval: Duration,
    /// Upstream label values kept before the rest are `other`.
    pub max_upstreams: usize,
    /// Read files that exist at start from their beginning (default: from their end).
    pub from_start: bool,
    /// Where positions and counters are kept across restarts.
    pub state: Option<PathBuf>,
    /// Where closed incidents are written as JSON Lines (`-`: standard output).
    pub events: Option<PathBuf>,
    /// Stop after this long (None: until stopped or standard input ends).
    pub duration: Option<Duration>,
    /// Ask a resolver for these names' answers all along (`--dns-watch`): the answer history
    /// the classes read, and `resolvelab_dns_answer_changes_total`.
    pub dns: Option<resolvelab_dns::watch::Watch>,
}

/// What `--state` keeps.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct State {
    schema: String,
    /// Where each followed path was, by path.
    positions: BTreeMap<String, Position>,
    /// The unnamed instance's counters, and the answer changes.
    totals: Totals,
    /// The named instances' counters, by name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    instances: BTreeMap<String, Totals>,
}

/// One line of `--events`: an incident, once, when it closed.
#[derive(Debug, Serialize)]
struct Event<'a> {
    event: &'static str,
    /// The instance it happened on, when the watch names its instances.
    #[serde(skip_serializing_if = "Option::is_none")]
    instance: Option<&'a str>,
    incident: &'a Incident,
}

/// A followed input.
enum Source {
    File(Box<Follower>),
    Stdin(StdinLines, u64, bool),
    /// The built-in answer watcher's answers, and how many were read.
    Dns(Receiver<resolvelab_dns::QueryEvent>, u64),
}

impl Source {
    fn poll(&mut self, out: &mut Lines) -> follow::Events {
        match self {
            Source::File(f) => f.poll(out),
            Source::Stdin(rx, n, ended) => {
                let mut ev = follow::Events::default();
                let mut batches = 0;
                loop {
                    if out.bytes() >= STDIN_BYTES_PER_POLL {
                        ev.more = true;
                        break;
                    }
                    match rx.rx.try_recv() {
                        Ok(batch) => {
                            if batches == 0 {
                                // The poll's bound and one batch past it, once: grown batch by
                                // batch, the buffer doubled past 4 MiB and left the old behind.
                                out.reserve(STDIN_BYTES_PER_POLL + STDIN_BATCH + (8 << 10));
                            }
                            batches += 1;
                            *n = out.push_chunk(&batch, *n + 1) - 1;
                        }
                        Err(TryRecvError::Empty) => {
                            // The reader was held up by a full channel since the last poll:
                            // a backlog piped in, read at once rather than a channel's worth
                            // a tick. (Guessed from the batches taken, it was read at about
                            // a channel a tick — 27 k lines/s against 74 k — once a pipe's
                            // batches were 64 KB and the channel half as long.)
                            ev.more = rx.held_up.swap(false, Ordering::Relaxed);
                            break;
                        }
                        Err(TryRecvError::Disconnected) => {
                            *ended = true;
                            break;
                        }
                    }
                }
                ev
            }
            Source::Dns(rx, n) => {
                while let Ok(q) = rx.try_recv() {
                    *n += 1;
                    let text = serde_json::to_vec(&q).expect("an answer serializes");
                    out.push(&text, *n);
                }
                follow::Events::default()
            }
        }
    }
}

/// Ask the resolver on a thread of its own; its answers come through the channel.
fn dns_answers(
    w: resolvelab_dns::watch::Watch,
) -> anyhow::Result<Receiver<resolvelab_dns::QueryEvent>> {
    w.check()?;
    let (tx, rx) = std::sync::mpsc::sync_channel(1 << 16);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    std::thread::Builder::new()
        .name("watch-dns".into())
        .spawn(move || {
            let r = rt.block_on(resolvelab_dns::watch::watch(&w, |q| {
                let _ = tx.try_send(q.clone());
            }));
            if let Err(e) = r {
                resolvelab_core::progress::line(format!("watch: --dns-watch stopped: {e:#}"));
            }
        })?;
    Ok(rx)
}

/// About the most bytes one poll takes from standard input: a backlog is read in steps of
/// this size, so that what a tick holds (its lines, their copy for the error reader) stays
/// small beside the context, and a step still spreads a tick's fixed cost over many lines
/// (as [`follow::MAX_READ`] for files, and measured there).
const STDIN_BYTES_PER_POLL: usize = 1 << 20;

/// Batches of lines read from standard input and not yet taken by a poll, at most (2 MB
/// waiting at most, two polls' worth — a pipe's batches are often its 64 KB —: the reader is
/// held up there, not the memory grown).
const STDIN_CHANNEL: usize = 8;

/// About the most bytes in one batch: lines go through the channel in batches, not one by one.
const STDIN_BATCH: usize = 256 << 10;

/// Standard input's lines in batches, each a buffer of whole lines (each ended by a newline):
/// a batch is sent when full or when no more input is buffered (a live stream's line is not
/// held back waiting for the next).
fn stdin_lines() -> StdinLines {
    let (tx, rx) = std::sync::mpsc::sync_channel(STDIN_CHANNEL);
    let lines = StdinLines::new(rx);
    let held_up = lines.held_up.clone();
    // The watcher's thread (this one), woken when the reader is held up.
    let watcher = std::thread::current();
    std::thread::spawn(move || {
        use std::io::BufRead;
        let mut input = std::io::BufReader::with_capacity(1 << 20, std::io::stdin().lock());
        let mut batch = Vec::with_capacity(STDIN_BATCH + (8 << 10));
        loop {
            if !input.read_until(b'\n', &mut batch).is_ok_and(|n| n > 0) {
                break;
            }
            // A last line without its newline is still a line once the stream ended.
            if batch.last() != Some(&b'\n') {
                batch.push(b'\n');
            }
            let full = batch.len() >= STDIN_BATCH || input.buffer().is_empty() && !stdin_ready();
            if full {
                let next = Vec::with_capacity(STDIN_BATCH + (8 << 10));
                let sent = match tx.try_send(std::mem::replace(&mut batch, next)) {
                    Err(TrySendError::Full(b)) => {
                        held_up.store(true, Ordering::Relaxed);
                        watcher.unpark();
                        tx.send(b).is_ok()
                    }
                    r => r.is_ok(),
                };
                if !sent {
                    return;
                }
            }
        }
        if !batch.is_empty() {
            let _ = tx.send(batch);
        }
    });
    lines
}

/// Whether standard input has bytes to read at once (`poll(2)` with no wait): a backlog in a
/// pipe, whose reads return 64 KB at most, still fills a batch, rather than sending one a
/// read; a live stream's line goes at once.
fn stdin_ready() -> bool {
    let mut fd = libc::pollfd {
        fd: 0,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd for the length of the call.
    unsafe { libc::poll(&mut fd, 1, 0) > 0 }
}

/// Standard input's batches as [`stdin_lines`] sends them, and whether its reader found the
/// channel full since a poll last asked (more is waiting: a backlog).
struct StdinLines {
    rx: Receiver<Vec<u8>>,
    held_up: std::sync::Arc<AtomicBool>,
}

impl StdinLines {
    fn new(rx: Receiver<Vec<u8>>) -> StdinLines {
        StdinLines {
            rx,
            held_up: Default::default(),
        }
    }
}

fn kind_name(k: Kind) -> &'static str {
    match k {
        Kind::Access => "access",
        Kind::Error => "error",
        Kind::Mixed => "mixed",
        Kind::Dns => "dns",
    }
}

/// The running watcher: its sources, instances, state and outputs.
pub struct Watcher {
    config: Config,
    sources: Vec<Followed>,
    /// The nginx instances, in the order they were found; each diagnosed apart.
    members: Vec<Member>,
    /// Named instances by name.
    by_name: BTreeMap<String, usize>,
    /// The `{instance}` paths, by kind.
    patterns: Vec<(Kind, Pattern)>,
    /// The instances found at start: their files are read as `--from-start` says; those found
    /// later, from their beginning.
    started: bool,
    /// What the state file was started from (positions by path, counters by instance).
    saved: Option<State>,
    /// What the state file holds now: each path's position and each instance's counters as of
    /// the last tick that instance had no open window.
    kept: State,
    /// Changes of a name's answer, by name (the watch's answer watcher, not an instance's).
    dns_changes: BTreeMap<String, u64>,
    /// What `/metrics` shows.
    pub shared: metrics::Shared,
    /// What `/report` shows.
    pub report: serve::Report,
    events: Option<resolvelab_core::jsonl::JsonlWriter>,
    rotations: totals::Two,
    lines_read: u64,
    /// A source had more than one read takes at the last step.
    backlog: bool,
}

/// A followed input and where its lines go.
struct Followed {
    source: Source,
    kind: Kind,
    /// Its path as references name it (`-` for standard input).
    name: String,
    /// The instance whose stream it is (for the answer watcher: every instance).
    member: Option<usize>,
    /// Whether its lines are CRI/containerd lines (decided at its first line), and their
    /// partial (`P`) parts joined so far.
    cri: Option<Option<CriLines>>,
    /// Whether its lines name their instance (`kubectl logs --prefix`, a syslog of several
    /// hosts; decided at its first line), and the instance of the last line that did.
    headed: Option<Option<Headed>>,
    last_instance: Option<String>,
    /// Where it stands in log time, for pacing a backlog ([`pace`]).
    stand: pace::Stand,
    /// An access log's: what reads where it stands.
    clock: Option<pace::AccessClock>,
}

/// One nginx instance: its diagnosis state and its streams.
struct Member {
    name: Option<String>,
    live: Live,
    /// The sources of its streams, in the order of its state's streams.
    slots: Vec<usize>,
}

/// Each instance's lines of one tick, one list per stream.
type Routed = Vec<Vec<Lines>>;

impl Watcher {
    /// Open the inputs (resuming from `--state` when it names them) and the outputs.
    pub fn new(config: Config) -> anyhow::Result<Watcher> {
        let saved = match &config.state {
            Some(p) if p.exists() => Some(read_state(p)?),
            _ => None,
        };
        let events = match &config.events {
            None => None,
            Some(p) if p.as_os_str() == "-" => Some(resolvelab_core::jsonl::JsonlWriter::stdout(
                schema::WATCH_EVENT,
            )?),
            Some(p) => Some(resolvelab_core::jsonl::JsonlWriter::create(
                p,
                schema::WATCH_EVENT,
            )?),
        };
        let mut w = Watcher {
            dns_changes: saved
                .as_ref()
                .map(|s| s.totals.dns_answer_changes.clone())
                .unwrap_or_default(),
            // What was saved stays until replaced: an instance whose window is open (or that
            // has not shown up yet) keeps its saved counters and positions.
            kept: saved.clone().unwrap_or_else(|| State {
                schema: schema::WATCH_STATE.to_string(),
                positions: BTreeMap::new(),
                totals: Totals::default(),
                instances: BTreeMap::new(),
            }),
            saved,
            patterns: Vec::new(),
            members: Vec::new(),
            by_name: BTreeMap::new(),
            sources: Vec::new(),
            started: false,
            shared: Default::default(),
            report: Default::default(),
            events,
            rotations: Default::default(),
            lines_read: 0,
            backlog: false,
            config,
        };
        w.open_inputs()?;
        Ok(w)
    }

    /// The plain inputs (one instance), the answer watcher, and the instances the patterns
    /// find now.
    fn open_inputs(&mut self) -> anyhow::Result<()> {
        if let Some(d) = &self.config.dns {
            let rx = dns_answers(d.clone())?;
            let name = format!("dns-watch@{}", d.server);
            self.add_source(Source::Dns(rx, 0), Kind::Dns, name, None);
        }
        let mut plain = Vec::new();
        for (kind, input) in self.config.inputs.clone() {
            match input {
                Input::File(p) => {
                    let key = p.display().to_string();
                    let start = self.start_of(&key);
                    plain.push(self.add_source(
                        Source::File(Box::new(Follower::new(&p, start))),
                        kind,
                        key,
                        None,
                    ));
                }
                Input::Stdin => {
                    let src = Source::Stdin(stdin_lines(), 0, false);
                    plain.push(self.add_source(src, kind, "-".into(), None));
                }
                Input::Instances(pat) => self.patterns.push((kind, pat)),
            }
        }
        if !plain.is_empty() {
            let m = self.add_member(self.config.instance.clone())?;
            for k in plain {
                self.attach(m, k)?;
            }
        }
        self.discover()?;
        self.started = true;
        Ok(())
    }

    fn start_of(&self, key: &str) -> Start {
        match self.kept.positions.get(key) {
            Some(pos) => Start::At(*pos),
            None if self.config.from_start || self.started => Start::Beginning,
            None => Start::End,
        }
    }

    fn add_source(&mut self, source: Source, kind: Kind, name: String, m: Option<usize>) -> usize {
        self.sources.push(Followed {
            source,
            kind,
            name,
            member: m,
            cri: None,
            headed: None,
            last_instance: None,
            stand: pace::Stand::default(),
            clock: (kind == Kind::Access)
                .then(|| pace::AccessClock::new(&self.config.template.log_format)),
        });
        self.sources.len() - 1
    }

    /// A new instance (with the answer watcher's stream, when there is one), its counters
    /// resumed from the state file.
    fn add_member(&mut self, name: Option<String>) -> anyhow::Result<usize> {
        let totals = match (&self.saved, &name) {
            (None, _) => Totals::default(),
            (Some(s), None) => Totals {
                dns_answer_changes: BTreeMap::new(),
                ..s.totals.clone()
            },
            (Some(s), Some(n)) => s.instances.get(n).cloned().unwrap_or_default(),
        };
        let live = Live::new(
            self.config.template.clone(),
            Vec::new(),
            self.config.timing,
            self.config.max_upstreams,
            totals,
        )?;
        let m = self.members.len();
        self.members.push(Member {
            name: name.clone(),
            live,
            slots: Vec::new(),
        });
        if let Some(n) = name {
            self.by_name.insert(n, m);
        }
        let dns: Vec<usize> = (0..self.sources.len())
            .filter(|&k| self.sources[k].kind == Kind::Dns)
            .collect();
        for k in dns {
            self.attach(m, k)?;
        }
        // The context's bytes are shared: more instances, a shorter context each.
        let cap = (live::MAX_CONTEXT_BYTES / self.members.len()).max(1 << 20);
        for mem in &mut self.members {
            mem.live.set_context_cap(cap);
        }
        Ok(m)
    }

    /// Source `k` becomes one of instance `m`'s streams (once); its slot.
    fn attach(&mut self, m: usize, k: usize) -> anyhow::Result<usize> {
        let mem = &mut self.members[m];
        if let Some(j) = mem.slots.iter().position(|&s| s == k) {
            return Ok(j);
        }
        let src = &self.sources[k];
        mem.live.add_stream(src.kind, src.name.clone())?;
        mem.slots.push(k);
        if src.kind != Kind::Dns && src.member.is_none() {
            self.sources[k].member = Some(m);
        }
        Ok(mem.slots.len() - 1)
    }

    /// The named instance, found or added.
    fn named(&mut self, name: &str) -> anyhow::Result<usize> {
        match self.by_name.get(name) {
            Some(&m) => Ok(m),
            None => self.add_member(Some(name.to_string())),
        }
    }

    /// Files the patterns find that are not followed yet: each joins its instance.
    fn discover(&mut self) -> anyhow::Result<()> {
        for (kind, pat) in self.patterns.clone() {
            for (name, path) in pat.find() {
                let key = path.display().to_string();
                if self.sources.iter().any(|s| s.name == key) {
                    continue;
                }
                let m = self.named(&name)?;
                let start = self.start_of(&key);
                let k = self.add_source(
                    Source::File(Box::new(Follower::new(&path, start))),
                    kind,
                    key,
                    None,
                );
                self.attach(m, k)?;
            }
        }
        Ok(())
    }

    /// Follow until `stop` is set, `--duration` passed or standard input ended; then class
    /// the open window and count it (unless stopped with a state file to resume from).
    pub fn run(&mut self, stop: &AtomicBool) -> anyhow::Result<()> {
        let began = Instant::now();
        loop {
            let t = Instant::now();
            let ended = self.step(t, false)?;
            let timed_out = self.config.duration.is_some_and(|d| t - began >= d);
            if ended || timed_out || stop.load(Ordering::Relaxed) {
                break;
            }
            // A backlog (a file read from its start, a burst) is read at once, not a tick's worth
            // a tick.
            if !self.backlog {
                self.nap(self.config.interval.saturating_sub(t.elapsed()));
            }
        }
        // Stopped with a state file, an open window is left to the next run, which reads its
        // lines again from the state saved before it opened; else it is classed and counted now.
        let resumable = self.config.state.is_some() && stop.load(Ordering::Relaxed);
        self.step(Instant::now(), !resumable)?;
        resolvelab_core::progress::end_status();
        Ok(())
    }

    /// Sleep `d`, or less once a reader of standard input is held up by a full channel: a
    /// backlog piped in faster than a tick (its writer waits on the pipe) is read as it comes,
    /// not a channel's worth a tick — a generator's 1 M lines piped in took 37 s so with 2 MB
    /// in the channel (9.9 s with 4 MB), 3.5 s woken.
    fn nap(&self, d: Duration) {
        let until = Instant::now() + d;
        let held_up = || {
            self.sources.iter().any(
                |s| matches!(&s.source, Source::Stdin(l, ..) if l.held_up.load(Ordering::Relaxed)),
            )
        };
        while !held_up() {
            let now = Instant::now();
            if now >= until {
                return;
            }
            std::thread::park_timeout(until - now);
        }
    }

    /// One tick: read, diagnose, publish; `last` closes the open windows. True when every
    /// input is standard input and it ended.
    pub fn step(&mut self, now: Instant, last: bool) -> anyhow::Result<bool> {
        self.discover()?;
        let mut unreadable: BTreeMap<String, u64> = BTreeMap::new();
        let mut routed: Routed = Vec::new();
        self.backlog = false;
        for (k, mut v, ev) in self.read_paced() {
            let kind = self.sources[k].kind;
            self.backlog |= ev.more || self.sources[k].stand.behind;
            let stream = kind_name(kind);
            for (change, happened) in [("rotated", ev.rotated), ("truncated", ev.truncated)] {
                if happened {
                    *self
                        .rotations
                        .entry(stream.into())
                        .or_default()
                        .entry(change.into())
                        .or_default() += 1;
                }
            }
            if matches!(&self.sources[k].source, Source::File(f) if f.problem.is_some()) {
                *unreadable.entry(stream.into()).or_default() += 1;
            }
            if kind == Kind::Dns {
                self.count_answer_changes(&v);
            }
            if kind == Kind::Mixed {
                v = self.unwrap_cri(k, v);
            }
            self.lines_read += v.len() as u64;
            self.route(k, v, &mut routed)?;
        }
        let mut open = Vec::new();
        for (m, lines) in routed.into_iter().enumerate() {
            let mem = &mut self.members[m];
            let out = if last {
                mem.live.finish(lines, now)?
            } else {
                mem.live.tick(lines, now)?
            };
            if let Some(w) = &self.events {
                for i in &out.closed {
                    w.write(&Event {
                        event: "incident",
                        instance: mem.name.as_deref(),
                        incident: i,
                    })?;
                }
            }
            open.push(out.open);
        }
        self.publish(&open, unreadable)?;
        self.save_state()?;
        // The answer watcher runs beside the logs; it never ends a watch on its own.
        let mut logs = self
            .sources
            .iter()
            .filter(|s| !matches!(s.source, Source::Dns(..)))
            .peekable();
        let stdin_ended =
            logs.peek().is_some() && logs.all(|s| matches!(s.source, Source::Stdin(_, _, true)));
        Ok(stdin_ended)
    }

    /// This tick's reads, paced ([`pace`]): each source read (or left for this tick), with
    /// what its read saw. Access logs first: an error log is read up to where they stand
    /// after this tick; then an access log hands back what an error log could not follow.
    fn read_paced(&mut self) -> Vec<(usize, Lines, follow::Events)> {
        let order: Vec<usize> = (0..self.sources.len())
            .filter(|&k| self.sources[k].kind != Kind::Error)
            .chain((0..self.sources.len()).filter(|&k| self.sources[k].kind == Kind::Error))
            .collect();
        let mut reads = Vec::new();
        for k in order {
            let step = self.pace(k);
            if step == pace::Step::Wait {
                self.backlog = true;
                continue;
            }
            let mut v = Lines::default();
            let ev = self.sources[k].source.poll(&mut v);
            let back = self.stand(k, &mut v, &ev, step);
            reads.push((k, v, ev, back));
        }
        for (k, v, ev, back) in &mut reads {
            if self.sources[*k].kind == Kind::Access {
                *back |= self.wait_for_errors(*k, v, ev);
            }
        }
        reads
            .into_iter()
            .map(|(k, v, ev, back)| {
                // A file that hands lines back reads twice what it kept next time; one read to
                // its budget's end, twice its budget.
                if let Source::File(f) = &mut self.sources[k].source {
                    match (back, ev.more) {
                        (true, _) => f.set_budget(2 * v.bytes()),
                        (false, true) => f.set_budget(2 * f.budget()),
                        (false, false) => {}
                    }
                }
                (k, v, ev)
            })
            .collect()
    }

    /// An access log's lines past where an error log of its instance stands, that error log
    /// having stopped short with lines left, are handed back to its file (unless the read
    /// crossed a rotation): a failure is paired once the access log is 10 s past it, and its
    /// error lines must be read by then.
    fn wait_for_errors(&mut self, k: usize, lines: &mut Lines, ev: &follow::Events) -> bool {
        let Some(m) = self.sources[k].member else {
            return false;
        };
        let sources = &self.sources;
        let lag = self.members[m]
            .slots
            .iter()
            .map(|&j| &sources[j])
            .filter(|s| s.kind == Kind::Error && matches!(s.source, Source::File(_)))
            .filter(|s| s.stand.polled && s.stand.behind)
            .filter_map(|s| s.stand.at_ms)
            .min();
        let src = &mut self.sources[k];
        let Some(lag) = lag.filter(|l| src.stand.at_ms.is_some_and(|a| a > *l)) else {
            return false;
        };
        let (Some(c), Source::File(f)) = (&mut src.clock, &mut src.source) else {
            return false;
        };
        let n = c.cut(lines, lag);
        let tail = lines.tail_size(n);
        let back = n < lines.len() && !ev.rotated && !ev.truncated && f.give_back(tail.0, tail.1);
        if back {
            lines.truncate(n);
            src.stand.behind = true;
            src.stand.at_ms = Some(lag);
        }
        back
    }

    /// What this tick does with source `k`: a file of an instance is paced against the
    /// instance's other files ([`pace`]); anything else is read.
    fn pace(&self, k: usize) -> pace::Step {
        let src = &self.sources[k];
        let (Source::File(_), Some(m)) = (&src.source, src.member) else {
            return pace::Step::Read;
        };
        let peers: Vec<(Kind, pace::Stand)> = self.members[m]
            .slots
            .iter()
            .filter(|&&j| j != k && matches!(self.sources[j].source, Source::File(_)))
            .map(|&j| (self.sources[j].kind, self.sources[j].stand))
            .collect();
        pace::step(src.kind, src.stand, &peers)
    }

    /// Where source `k` stands after a read of `lines` (with `ev`) as `step` said: an error
    /// log's lines past the bound are handed back to its file (unless the read crossed a
    /// rotation), and it stands at the first of them. True when lines were handed back.
    fn stand(
        &mut self,
        k: usize,
        lines: &mut Lines,
        ev: &follow::Events,
        step: pace::Step,
    ) -> bool {
        let flag = self.config.template.tz_offset_s;
        let offset = self.sources[k]
            .member
            .and_then(|m| {
                self.members[m].slots.iter().find_map(|&j| {
                    let c = self.sources[j].clock.as_ref()?;
                    Some(c.error_offset_s(flag))
                })
            })
            .unwrap_or_else(|| resolvelab_diagnose::checker::error_log_offset_s(None, flag, None));
        let src = &mut self.sources[k];
        src.stand.polled = true;
        src.stand.behind = ev.more;
        match src.kind {
            Kind::Access => {
                if let Some(c) = &mut src.clock
                    && let Some(t) = c.newest_ms(lines)
                {
                    src.stand.at_ms = Some(t);
                }
                false
            }
            Kind::Error => {
                let n = match step {
                    pace::Step::UpTo(b) => pace::cut(lines, b, offset),
                    _ => lines.len(),
                };
                let tail = lines.tail_size(n);
                let back = n < lines.len()
                    && !ev.rotated
                    && !ev.truncated
                    && match &mut src.source {
                        Source::File(f) => f.give_back(tail.0, tail.1),
                        _ => false,
                    };
                if back {
                    let first = lines
                        .get(n)
                        .and_then(|(_, t)| pace::error_time_ms(t, offset));
                    lines.truncate(n);
                    src.stand.behind = true;
                    src.stand.at_ms = first.or(src.stand.at_ms);
                } else if let Some(t) = pace::last_error_time_ms(lines, offset) {
                    src.stand.at_ms = Some(t);
                }
                back
            }
            Kind::Mixed | Kind::Dns => false,
        }
    }

    /// Source `k`'s lines to their instances' streams: to its instance, or each line to the
    /// instance it names (a headed stream), or to every instance (the answers).
    fn route(&mut self, k: usize, lines: Lines, routed: &mut Routed) -> anyhow::Result<()> {
        let grow = |routed: &mut Routed, members: &[Member]| {
            routed.resize_with(members.len(), Vec::new);
            for (r, m) in routed.iter_mut().zip(members) {
                r.resize_with(m.slots.len(), Lines::default);
            }
        };
        grow(routed, &self.members);
        if self.sources[k].kind == Kind::Dns {
            for (m, mem) in self.members.iter().enumerate() {
                if let Some(j) = mem.slots.iter().position(|&s| s == k) {
                    routed[m][j].append(&lines);
                }
            }
            return Ok(());
        }
        let Some(h) = self.headed(k, &lines) else {
            if let Some(m) = self.sources[k].member {
                let j = self.attach(m, k)?;
                match routed[m][j].is_empty() {
                    true => routed[m][j] = lines,
                    false => routed[m][j].append(&lines),
                }
            }
            return Ok(());
        };
        for (n, text) in lines.iter() {
            let (m, body) = self.named_line(k, h, text)?;
            let Some(m) = m else { continue };
            let j = self.attach(m, k)?;
            if routed.len() <= m || routed[m].len() <= j {
                grow(routed, &self.members);
            }
            routed[m][j].push(&body, n);
        }
        Ok(())
    }

    /// Whether source `k`'s lines name their instance (decided at its first line; only mixed
    /// streams can).
    fn headed(&mut self, k: usize, lines: &Lines) -> Option<Headed> {
        let src = &mut self.sources[k];
        if src.kind != Kind::Mixed {
            return None;
        }
        if src.headed.is_none() {
            let first = lines.first()?;
            src.headed = Some(Headed::detect(&String::from_utf8_lossy(first.1)));
        }
        src.headed.flatten()
    }

    /// A headed line's instance and the line the checker reads; a line without a head goes to
    /// the instance of the line before it (none before: to the stream's own instance).
    fn named_line(
        &mut self,
        k: usize,
        h: Headed,
        line: &[u8],
    ) -> anyhow::Result<(Option<usize>, Vec<u8>)> {
        let text = String::from_utf8_lossy(line);
        let (name, body) = match h.split(&text) {
            Some((n, body)) => (n.to_string(), body.as_bytes().to_vec()),
            None => match &self.sources[k].last_instance {
                Some(n) => (n.clone(), line.to_vec()),
                None => return Ok((self.sources[k].member, line.to_vec())),
            },
        };
        self.sources[k].last_instance = Some(name.clone());
        let m = self.named(&name)?;
        Ok((Some(m), body))
    }

    /// A mixed stream's lines behind their CRI/containerd prefix, partial lines joined (a
    /// container's log file as the kubelet writes it); other streams' lines as they are.
    fn unwrap_cri(&mut self, k: usize, lines: Lines) -> Lines {
        let state = &mut self.sources[k].cri;
        if state.is_none() {
            let Some(first) = lines.first() else {
                return lines;
            };
            let cri = CriLines::is_cri(&String::from_utf8_lossy(first.1));
            *state = Some(cri.then(CriLines::default));
        }
        let Some(Some(cri)) = state else {
            return lines;
        };
        let mut out = Lines::default();
        for (n, text) in lines.iter() {
            if let Some((first, _, text)) = cri.push(n, &String::from_utf8_lossy(text)) {
                out.push(text.as_bytes(), first);
            }
        }
        out
    }

    /// `resolvelab_dns_answer_changes_total`: the answers the watcher saw change, by name.
    fn count_answer_changes(&mut self, answers: &Lines) {
        for (_, l) in answers.iter() {
            if let Ok(q) = serde_json::from_slice::<resolvelab_dns::QueryEvent>(l)
                && q.changed
            {
                *self.dns_changes.entry(q.qname).or_default() += 1;
            }
        }
    }

    /// Lines (and answers) read so far.
    pub fn lines_read(&self) -> u64 {
        self.lines_read
    }

    /// True while an incident window is open on some instance.
    pub fn is_open(&self) -> bool {
        self.members.iter().any(|m| m.live.is_open())
    }

    /// Bytes of spooled lines on disk now, every instance's (the open windows').
    pub fn spooled_bytes(&self) -> u64 {
        self.members.iter().map(|m| m.live.spooled_bytes()).sum()
    }

    /// The instances' names, in the order they were found (the unnamed one left out).
    pub fn instances(&self) -> Vec<String> {
        self.members.iter().filter_map(|m| m.name.clone()).collect()
    }

    /// Each instance's counters and open failures; past `--max-instances` named ones, the rest
    /// added up as `other`.
    fn parts(&mut self, open: &[Vec<Incident>]) -> Vec<metrics::Part> {
        let mut parts: Vec<metrics::Part> = Vec::new();
        let mut named = 0;
        for (mem, open) in self.members.iter_mut().zip(open) {
            let mut open_by: totals::Two = BTreeMap::new();
            for i in open {
                // Seen now, so that its counters exist (at zero) before the incident closes.
                let u = mem
                    .live
                    .totals
                    .upstream_label(&i.upstream, self.config.max_upstreams);
                *open_by
                    .entry(u)
                    .or_default()
                    .entry(i.class.id().to_string())
                    .or_default() += i.count;
            }
            if mem.name.is_none() && open.is_empty() && mem.live.totals == Totals::default() {
                // A plain stream that turned out to name its instances: nothing of its own.
                continue;
            }
            let instance = match &mem.name {
                Some(n) if named < self.config.max_instances => {
                    named += 1;
                    Some(n.clone())
                }
                Some(_) => Some(totals::OTHER.to_string()),
                None => None,
            };
            let part = match parts.iter_mut().find(|p| p.instance == instance) {
                Some(p) => p,
                None => {
                    parts.push(metrics::Part {
                        instance,
                        ..Default::default()
                    });
                    parts.last_mut().expect("pushed")
                }
            };
            part.totals.add(&mem.live.totals, self.config.max_upstreams);
            for (u, inner) in open_by {
                for (c, n) in inner {
                    *part
                        .open
                        .entry(u.clone())
                        .or_default()
                        .entry(c)
                        .or_default() += n;
                }
            }
        }
        parts
    }

    fn publish(
        &mut self,
        open: &[Vec<Incident>],
        unreadable: BTreeMap<String, u64>,
    ) -> anyhow::Result<()> {
        let parts = self.parts(open);
        let now_ms = resolvelab_core::time::now_us() / 1000;
        let newest = self.members.iter().filter_map(|m| m.live.newest_ms).max();
        let latest = self
            .members
            .iter_mut()
            .rev()
            .find_map(|m| m.live.latest.take());
        // The report goes first, so that a scrape that sees a window's counts finds its
        // report too.
        if let Some(d) = latest {
            let html = resolvelab_report::render_diagnosis(&d, resolvelab_report::Format::Html)?;
            *self.report.lock().expect("not poisoned") = Some(html);
        }
        let t = {
            let mut s = self.shared.lock().expect("not poisoned");
            s.parts = parts;
            s.dns_answer_changes = self.dns_changes.clone();
            s.lag_s = newest.map(|t| (now_ms - t).max(0) as f64 / 1000.0);
            s.unreadable = unreadable;
            s.rotations = self.rotations.clone();
            s.totals()
        };
        let n = self.members.len();
        resolvelab_core::progress::status(format!(
            "watch: {} lines{}, {} requests, {} failures classed in {} incidents{}",
            self.lines_read,
            if n > 1 {
                format!(" of {n} instances")
            } else {
                String::new()
            },
            Totals::sum(&t.requests),
            Totals::sum(&t.failed),
            Totals::sum(&t.incidents),
            match self.members.iter().filter(|m| m.live.is_open()).count() {
                0 => String::new(),
                1 => ", an incident open".into(),
                k => format!(", incidents open on {k} instances"),
            }
        ));
        Ok(())
    }

    /// Keep each instance's positions and counters as of now when it has no open window (a
    /// restart reads an open window's lines again from the state saved before it opened), and
    /// write the state file.
    fn save_state(&mut self) -> anyhow::Result<()> {
        let Some(path) = self.config.state.clone() else {
            return Ok(());
        };
        let any_open = self.is_open();
        for src in &self.sources {
            let Source::File(f) = &src.source else {
                continue;
            };
            // A headed stream feeds several instances: kept when none is open.
            let closed = match (src.headed, src.member) {
                (Some(Some(_)), _) => !any_open,
                (_, Some(m)) => !self.members[m].live.is_open(),
                (_, None) => !any_open,
            };
            if closed && let Some(p) = f.position() {
                self.kept.positions.insert(src.name.clone(), p);
            }
        }
        for mem in &self.members {
            if mem.live.is_open() {
                continue;
            }
            match &mem.name {
                None => self.kept.totals = mem.live.totals.clone(),
                Some(n) => {
                    self.kept
                        .instances
                        .insert(n.clone(), mem.live.totals.clone());
                }
            }
        }
        self.kept.totals.dns_answer_changes = self.dns_changes.clone();
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, serde_json::to_vec_pretty(&self.kept)?)
            .map_err(|e| anyhow::anyhow!("--state {}: {e}", path.display()))?;
        std::fs::rename(&tmp, &path)?;
        Ok(())
    }
}

fn read_state(p: &std::path::Path) -> anyhow::Result<State> {
    let text =
        std::fs::read_to_string(p).map_err(|e| anyhow::anyhow!("--state {}: {e}", p.display()))?;
    let s: State = serde_json::from_str(&text).map_err(|e| {
        anyhow::anyhow!(
            "--state {}:{}: not a watch state ({e}); remove it to start afresh",
            p.display(),
            e.line()
        )
    })?;
    if s.schema != schema::WATCH_STATE {
        anyhow::bail!(
            "--state {}:1: schema {} is not {}; remove it to start afresh",
            p.display(),
            s.schema,
            schema::WATCH_STATE
        );
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::path::Path;

    /// An instance's logs of `secs` seconds at 25 requests a second, every request failing
    /// in the `outages` (seconds from the start): lab-format access lines with a request path
    /// of `path` bytes, and per failure `lines` error lines of its refused connects, each with
    /// a host of `host` bytes (a backlog spans several reads).
    fn logs(
        dir: &Path,
        secs: i64,
        outages: &[(i64, i64)],
        path: usize,
        lines: usize,
        host: usize,
    ) -> (PathBuf, PathBuf) {
        let (ap, ep) = (dir.join("access.log"), dir.join("error.log"));
        let mut a = std::io::BufWriter::new(std::fs::File::create(&ap).unwrap());
        let mut e = std::io::BufWriter::new(std::fs::File::create(&ep).unwrap());
        let (path, host) = (format!("/{}", "x".repeat(path)), "h".repeat(host));
        // 2026-11-30 06:00:00 UTC: the logs span less than an hour.
        let t0 = 1_796_018_400_000i64;
        for i in 0..secs * 25 {
            let (ms, cid) = (t0 + i * 40, i + 1);
            let s = i / 25;
            let failed = outages.iter().any(|(from, to)| (*from..*to).contains(&s));
            let st = if failed { 502 } else { 200 };
            writeln!(
                a,
                "{}.{:03} {st} \"127.0.0.20:8080\" \"{st}\" 0.001 GET {cid} 1 \"0.001\" \"0.000\" \"GET {path} HTTP/1.1\" 127.0.0.1",
                ms / 1000,
                ms % 1000
            )
            .unwrap();
            for _ in 0..lines * failed as usize {
                writeln!(
                    e,
                    "2026/11/30 {:02}:{:02}:{:02} [error] 31#31: *{cid} connect() failed (111: Connection refused) while connecting to upstream, client: 127.0.0.1, server: _, request: \"GET {path} HTTP/1.1\", upstream: \"http://127.0.0.20:8080{path}\", host: \"{host}\"",
                    6 + s / 3600,
                    s / 60 % 60,
                    s % 60
                )
                .unwrap();
            }
        }
        (ap, ep)
    }

    /// The incidents of `diagnose` over the files, and those watch emits reading them from
    /// their start (the wall clock standing still, as when a backlog is read at once).
    fn batch_and_watched(ap: PathBuf, ep: PathBuf, lines: u64) -> (Vec<Incident>, Vec<Incident>) {
        let mut o = Options::new(vec![ap.clone()], vec![ep.clone()]);
        o.log_format = resolvelab_history::logformat::LogFormat::lab();
        o.tz_offset_s = Some(0);
        let batch = resolvelab_diagnose::diagnose(&o).unwrap().incidents;
        let events = ap.with_file_name("events.jsonl");
        let mut w = Watcher::new(Config {
            inputs: vec![
                (Kind::Access, Input::File(ap)),
                (Kind::Error, Input::File(ep)),
            ],
            instance: None,
            max_instances: 10,
            template: o,
            timing: live::Timing::default(),
            interval: Duration::from_millis(100),
            max_upstreams: 10,
            from_start: true,
            state: None,
            events: Some(events.clone()),
            duration: None,
            dns: None,
        })
        .unwrap();
        let now = Instant::now();
        for _ in 0..1000 {
            w.step(now, false).unwrap();
            if !w.backlog {
                break;
            }
        }
        assert_eq!(w.lines_read(), lines);
        w.step(now, true).unwrap();
        drop(w);
        let watched = std::fs::read_to_string(&events)
            .unwrap()
            .lines()
            .filter_map(|l| {
                serde_json::from_str::<serde_json::Value>(l)
                    .ok()?
                    .get("incident")
                    .cloned()
            })
            .map(|i| serde_json::from_value(i).unwrap())
            .collect();
        (batch, watched)
    }

    /// Each incident's start, class and count.
    fn outline(incidents: &[Incident]) -> Vec<(i64, resolvelab_diagnose::classes::Class, u64)> {
        incidents
            .iter()
            .map(|i| (i.start_ms, i.class, i.count))
            .collect()
    }

    /// Whether an incident quotes an error line.
    fn cites_error(i: &Incident) -> bool {
        i.evidence.iter().any(|r| r.at.contains("error.log:"))
    }

    /// `diagnose` found `outages` incidents, each quoting an error line, and watch emitted
    /// the same ones (start, class, count), each quoting one too.
    fn watched_as_diagnosed(batch: &[Incident], watched: &[Incident], outages: usize) {
        assert_eq!(batch.len(), outages, "{:?}", outline(batch));
        assert!(batch.iter().all(cites_error));
        assert_eq!(outline(watched), outline(batch));
        assert!(watched.iter().all(cites_error), "{watched:?}");
    }

    /// An instance's access and error logs read from their start, the error log holding a line
    /// per failure only: a read of it spans far more log time than a read of the access log.
    /// Read in step, every failure still pairs with its error line, and watch classes each
    /// outage as a diagnosis of the files does — not as a failure without its error line,
    /// that line read half an hour of log before it and gone with the context.
    #[test]
    fn a_sparse_error_log_read_ahead_of_its_access_log_still_pairs() {
        let dir = tempfile::tempdir().unwrap();
        // ~11 MB of access log (three reads), two 20 s outages 30 minutes apart.
        let (ap, ep) = logs(dir.path(), 2400, &[(300, 320), (2100, 2120)], 400, 1, 0);
        let (batch, watched) = batch_and_watched(ap, ep, 2400 * 25 + 2 * 20 * 25);
        watched_as_diagnosed(&batch, &watched, 2);
    }

    /// The other way round: in a long outage each failure writes long error lines, so a read
    /// of the error log spans seconds where a read of the access log spans the whole outage.
    /// The access log's lines past where the error log stands wait for it, so no failure is
    /// paired before its error lines are read.
    #[test]
    fn an_access_log_waits_for_a_dense_error_log() {
        let dir = tempfile::tempdir().unwrap();
        // A 200 s outage with 2 lines of ~1 KB per failure: ~10 MB of error log (three
        // reads) against ~4 MB of access log for the 20 minutes.
        let (ap, ep) = logs(dir.path(), 1200, &[(600, 800)], 8, 2, 900);
        let (batch, watched) = batch_and_watched(ap, ep, 1200 * 25 + 200 * 25 * 2);
        watched_as_diagnosed(&batch, &watched, 1);
    }

    /// A backlog piped in is taken in steps of about `STDIN_BYTES_PER_POLL` (what a tick
    /// holds stays bounded), every line once, numbered in order.
    #[test]
    fn standard_input_is_taken_in_bounded_steps() {
        let line = format!("{}\n", "y".repeat(199));
        let batch = line.repeat(STDIN_BATCH / line.len() + 1);
        let batches = 4 * STDIN_BYTES_PER_POLL / batch.len() + 3;
        // All of it waiting at once, as a backlog piped in is.
        let (tx, rx) = std::sync::mpsc::sync_channel(batches);
        for _ in 0..batches {
            tx.send(batch.clone().into_bytes()).unwrap();
        }
        drop(tx);
        let mut src = Source::Stdin(StdinLines::new(rx), 0, false);
        let mut read = 0u64;
        while !matches!(src, Source::Stdin(_, _, true)) {
            let mut v = Lines::default();
            src.poll(&mut v);
            assert!(
                v.bytes() < STDIN_BYTES_PER_POLL + STDIN_BATCH + line.len(),
                "{} bytes in one poll",
                v.bytes()
            );
            if let Some((first, _)) = v.first() {
                assert_eq!(first, read + 1);
            }
            read += v.len() as u64;
        }
        let per_batch = (STDIN_BATCH / line.len() + 1) as u64;
        assert_eq!(read, batches as u64 * per_batch);
    }

    /// A poll that emptied the channel after its reader was held up by a full one says more
    /// is waiting (a backlog piped in), so the watcher polls again at once, and says it once;
    /// a live stream's reader is never held up, and the watcher sleeps its tick.
    #[test]
    fn a_backlog_piped_in_is_read_without_waiting_for_a_tick() {
        for held_up in [true, false] {
            let (tx, rx) = std::sync::mpsc::sync_channel(STDIN_CHANNEL);
            let lines = StdinLines::new(rx);
            lines.held_up.store(held_up, Ordering::Relaxed);
            tx.send(b"a line\n".to_vec()).unwrap();
            let mut src = Source::Stdin(lines, 0, false);
            let mut v = Lines::default();
            assert_eq!(src.poll(&mut v).more, held_up);
            assert!(!src.poll(&mut v).more, "said once");
            drop(tx);
        }
    }
}
