//! `resolvelab watch`: the checker run continuously on nginx logs as they grow — 502s by cause
//! while they happen, as Prometheus metrics, incident events and a live report.
//!
//! The parts, in the order a line goes through them: [`follow`] reads whole lines of each file
//! (through rotation and truncation, from a saved position), [`live`] is the diagnosis state
//! (the checker over each tick's lines for what it counts line by line, and over windows of
//! failures for their classes), [`totals`] the counters, [`metrics`] their exposition,
//! [`serve`] the HTTP endpoints and [`alerts`] the Prometheus alerting rules per class.
//!
//! ```
//! use resolvelab_watch::follow::{Follower, Start};
//! let dir = tempfile::tempdir().unwrap();
//! let p = dir.path().join("access.log");
//! let mut f = Follower::new(&p, Start::Beginning);
//! std::fs::write(&p, "a complete line\na line still being writ").unwrap();
//! let mut lines = Vec::new();
//! f.poll(&mut lines);
//! assert_eq!(lines.len(), 1, "only whole lines are read");
//! ```

#![cfg_attr(not(test), deny(clippy::print_stdout, clippy::print_stderr))]

pub mod alerts;
pub mod follow;
pub mod live;
pub mod metrics;
pub mod serve;
pub mod totals;

use follow::{Follower, Line, Position, Start};
use live::{Kind, Live, Timing};
use resolvelab_core::evidence::schema;
use resolvelab_diagnose::{Incident, Options};
use resolvelab_history::export::CriLines;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, TryRecvError};
use std::time::{Duration, Instant};
use totals::Totals;

/// One followed input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Input {
    /// A file, followed by name.
    File(PathBuf),
    /// Standard input (`kubectl logs -f … | resolvelab watch --logs -`): watching ends at its end.
    Stdin,
}

/// What to watch and how.
#[derive(Debug, Clone)]
pub struct Config {
    /// The inputs with the kind each is read as.
    pub inputs: Vec<(Kind, Input)>,
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
    totals: Totals,
}

/// One line of `--events`: an incident, once, when it closed.
#[derive(Debug, Serialize)]
struct Event<'a> {
    event: &'static str,
    incident: &'a Incident,
}

/// A followed input.
enum Source {
    File(Follower),
    Stdin(Receiver<Vec<u8>>, u64, bool),
    /// The built-in answer watcher's answers, and how many were read.
    Dns(Receiver<resolvelab_dns::QueryEvent>, u64),
}

impl Source {
    fn poll(&mut self, out: &mut Vec<Line>) -> follow::Events {
        match self {
            Source::File(f) => f.poll(out),
            Source::Stdin(rx, n, ended) => {
                let mut ev = follow::Events::default();
                loop {
                    if out.len() >= STDIN_LINES_PER_POLL {
                        ev.more = true;
                        break;
                    }
                    match rx.try_recv() {
                        Ok(text) => {
                            *n += 1;
                            out.push(Line { text, line: *n });
                        }
                        Err(TryRecvError::Empty) => break,
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
                    out.push(Line { text, line: *n });
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

/// The most lines one poll takes from standard input (a backlog is read at once, in steps).
const STDIN_LINES_PER_POLL: usize = 1 << 18;

fn stdin_lines() -> Receiver<Vec<u8>> {
    let (tx, rx) = std::sync::mpsc::sync_channel(1 << 16);
    std::thread::spawn(move || {
        use std::io::BufRead;
        let mut input = std::io::stdin().lock();
        let mut buf = Vec::new();
        while input.read_until(b'\n', &mut buf).is_ok_and(|n| n > 0) {
            // A last line without its newline is still a line once the stream ended.
            if buf.last() == Some(&b'\n') {
                buf.pop();
            }
            if tx.send(std::mem::take(&mut buf)).is_err() {
                break;
            }
        }
    });
    rx
}

fn kind_name(k: Kind) -> &'static str {
    match k {
        Kind::Access => "access",
        Kind::Error => "error",
        Kind::Mixed => "mixed",
        Kind::Dns => "dns",
    }
}

/// The running watcher: its sources, state and outputs.
pub struct Watcher {
    config: Config,
    sources: Vec<Source>,
    live: Live,
    /// What `/metrics` shows.
    pub shared: metrics::Shared,
    /// What `/report` shows.
    pub report: serve::Report,
    events: Option<resolvelab_core::jsonl::JsonlWriter>,
    rotations: totals::Two,
    lines_read: u64,
    /// A source had more than one read takes at the last step.
    backlog: bool,
    /// Per source: whether its lines are CRI/containerd lines (decided at its first line), and
    /// their partial (`P`) parts joined so far.
    cri: Vec<Option<Option<CriLines>>>,
}

impl Watcher {
    /// Open the inputs (resuming from `--state` when it names them) and the outputs.
    pub fn new(config: Config) -> anyhow::Result<Watcher> {
        let saved = match &config.state {
            Some(p) if p.exists() => Some(read_state(p)?),
            _ => None,
        };
        let mut sources = Vec::new();
        let mut names = Vec::new();
        for (kind, input) in &config.inputs {
            match input {
                Input::File(p) => {
                    let key = p.display().to_string();
                    let start = match saved.as_ref().and_then(|s| s.positions.get(&key)) {
                        Some(pos) => Start::At(*pos),
                        None if config.from_start => Start::Beginning,
                        None => Start::End,
                    };
                    sources.push(Source::File(Follower::new(p, start)));
                    names.push((*kind, key));
                }
                Input::Stdin => {
                    sources.push(Source::Stdin(stdin_lines(), 0, false));
                    names.push((*kind, "-".to_string()));
                }
            }
        }
        if let Some(w) = &config.dns {
            sources.push(Source::Dns(dns_answers(w.clone())?, 0));
            names.push((Kind::Dns, format!("dns-watch@{}", w.server)));
        }
        let totals = saved.map(|s| s.totals).unwrap_or_default();
        let live = Live::new(
            config.template.clone(),
            names,
            config.timing,
            config.max_upstreams,
            totals,
        )?;
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
        Ok(Watcher {
            config,
            sources,
            live,
            shared: Default::default(),
            report: Default::default(),
            events,
            rotations: Default::default(),
            lines_read: 0,
            backlog: false,
            cri: Vec::new(),
        })
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
                std::thread::sleep(self.config.interval.saturating_sub(t.elapsed()));
            }
        }
        // Stopped with a state file, an open window is left to the next run, which reads its
        // lines again from the state saved before it opened; else it is classed and counted now.
        let resumable = self.config.state.is_some() && stop.load(Ordering::Relaxed);
        self.step(Instant::now(), !resumable)?;
        resolvelab_core::progress::end_status();
        Ok(())
    }

    /// One tick: read, diagnose, publish; `last` closes the open window. True when every
    /// input is standard input and it ended.
    pub fn step(&mut self, now: Instant, last: bool) -> anyhow::Result<bool> {
        let mut lines = Vec::with_capacity(self.sources.len());
        let mut unreadable: BTreeMap<String, u64> = BTreeMap::new();
        self.backlog = false;
        for k in 0..self.sources.len() {
            let kind = self.config.inputs.get(k).map_or(Kind::Dns, |i| i.0);
            let mut v = Vec::new();
            let ev = self.sources[k].poll(&mut v);
            self.backlog |= ev.more;
            let unreadable_now = matches!(&self.sources[k], Source::File(f) if f.problem.is_some());
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
            if unreadable_now {
                *unreadable.entry(stream.into()).or_default() += 1;
            }
            if kind == Kind::Dns {
                self.count_answer_changes(&v);
            }
            if kind == Kind::Mixed {
                v = self.unwrap_cri(k, v);
            }
            self.lines_read += v.len() as u64;
            lines.push(v);
        }
        let out = if last {
            self.live.finish(lines, now)?
        } else {
            self.live.tick(lines, now)?
        };
        for i in &out.closed {
            if let Some(w) = &self.events {
                w.write(&Event {
                    event: "incident",
                    incident: i,
                })?;
            }
        }
        self.publish(&out.open, unreadable)?;
        if !self.live.is_open() {
            self.save_state()?;
        }
        // The answer watcher runs beside the logs; it never ends a watch on its own.
        let mut logs = self
            .sources
            .iter()
            .filter(|s| !matches!(s, Source::Dns(..)))
            .peekable();
        let stdin_ended =
            logs.peek().is_some() && logs.all(|s| matches!(s, Source::Stdin(_, _, true)));
        Ok(stdin_ended)
    }

    /// A mixed stream's lines behind their CRI/containerd prefix, partial lines joined (a
    /// container's log file as the kubelet writes it); other streams' lines as they are.
    fn unwrap_cri(&mut self, k: usize, lines: Vec<Line>) -> Vec<Line> {
        if self.cri.len() <= k {
            self.cri.resize_with(k + 1, || None);
        }
        let state = &mut self.cri[k];
        if state.is_none() {
            let Some(first) = lines.first() else {
                return lines;
            };
            let cri = CriLines::is_cri(&String::from_utf8_lossy(&first.text));
            *state = Some(cri.then(CriLines::default));
        }
        let Some(Some(cri)) = state else {
            return lines;
        };
        lines
            .into_iter()
            .filter_map(|l| {
                let (first, _, text) = cri.push(l.line, &String::from_utf8_lossy(&l.text))?;
                Some(Line {
                    text: text.into_bytes(),
                    line: first,
                })
            })
            .collect()
    }

    /// `resolvelab_dns_answer_changes_total`: the answers the watcher saw change, by name.
    fn count_answer_changes(&mut self, answers: &[Line]) {
        for l in answers {
            if let Ok(q) = serde_json::from_slice::<resolvelab_dns::QueryEvent>(&l.text)
                && q.changed
            {
                *self
                    .live
                    .totals
                    .dns_answer_changes
                    .entry(q.qname)
                    .or_default() += 1;
            }
        }
    }

    /// Lines (and answers) read so far.
    pub fn lines_read(&self) -> u64 {
        self.lines_read
    }

    /// True while an incident window is open.
    pub fn is_open(&self) -> bool {
        self.live.is_open()
    }

    fn publish(
        &mut self,
        open: &[Incident],
        unreadable: BTreeMap<String, u64>,
    ) -> anyhow::Result<()> {
        let mut open_by: totals::Two = BTreeMap::new();
        for i in open {
            // Seen now, so that its counters exist (at zero) before the incident closes.
            let u = self
                .live
                .totals
                .upstream_label(&i.upstream, self.config.max_upstreams);
            *open_by
                .entry(u)
                .or_default()
                .entry(i.class.id().to_string())
                .or_default() += i.count;
        }
        let now_ms = resolvelab_core::time::now_us() / 1000;
        {
            let mut s = self.shared.lock().expect("not poisoned");
            s.totals = self.live.totals.clone();
            s.open = open_by;
            s.lag_s = self
                .live
                .newest_ms
                .map(|t| (now_ms - t).max(0) as f64 / 1000.0);
            s.unreadable = unreadable;
            s.rotations = self.rotations.clone();
        }
        if let Some(d) = self.live.latest.take() {
            let html = resolvelab_report::render_diagnosis(&d, resolvelab_report::Format::Html)?;
            *self.report.lock().expect("not poisoned") = Some(html);
        }
        let t = &self.live.totals;
        resolvelab_core::progress::status(format!(
            "watch: {} lines, {} requests, {} failures classed in {} incidents{}",
            self.lines_read,
            Totals::sum(&t.requests),
            Totals::sum(&t.failed),
            Totals::sum(&t.incidents),
            if self.live.is_open() {
                ", an incident open"
            } else {
                ""
            }
        ));
        Ok(())
    }

    fn save_state(&self) -> anyhow::Result<()> {
        let Some(path) = &self.config.state else {
            return Ok(());
        };
        let mut positions = BTreeMap::new();
        for s in &self.sources {
            if let Source::File(f) = s
                && let Some(p) = f.position()
            {
                positions.insert(f.path().display().to_string(), p);
            }
        }
        let state = State {
            schema: schema::WATCH_STATE.to_string(),
            positions,
            totals: self.live.totals.clone(),
        };
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, serde_json::to_vec_pretty(&state)?)
            .map_err(|e| anyhow::anyhow!("--state {}: {e}", path.display()))?;
        std::fs::rename(&tmp, path)?;
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
