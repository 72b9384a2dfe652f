//! Pairing: each failed request gets the error lines of its own connection and time — its
//! `no live upstreams` line, its first-try failures, its own failed resolution — while the
//! access logs are read, in one streamed pass over the merged error logs.
//!
//! A failure waits until the access log is [`HORIZON_MS`] past it (lines of several workers come
//! slightly out of order), then the error stream is read up to just past it and it is paired.
//! Only the error lines that can still pair (a `*cid` and an NLU, first-try or resolution
//! signature, not older than the oldest request that may still come) are buffered, so memory
//! is bounded by the longest request, not by the size of the error logs; a paired failure is
//! kept as a 48-byte record ([`Store`]).

use super::StreamStats;
use super::errors::{ERef, Index, PairWindow, REORDER_SLACK_MS, SigIndex, feed_errors};
use super::failure::{ErrLines, Failure, Store, Traj, is_addr};
use crate::classes::Sig;
use crate::verdict::{PairingLoss, TimeRange};
use resolvelab_history::errorlog::ErrorReader;
use resolvelab_history::time::Offsets;
use resolvelab_history::{ErrorStream, FileStats, History};
use std::borrow::Cow;
use std::collections::VecDeque;

/// A failure is paired once the access log is this far (ms) past its end.
const HORIZON_MS: i64 = 10_000;
/// Error lines are kept this long (ms) for requests not read yet: the longest request whose
/// early error lines still pair (nginx's default timeouts are 60 s).
const RETAIN_MS: i64 = 60_000;

/// The group of a failure nothing names (resolved at the end: `--upstream`, the only group
/// seen, or `upstream`). A name after it is an address whose group a later NLU trajectory may
/// still name.
pub(super) const UNRESOLVED: char = '\0';
/// [`UNRESOLVED`] alone: the group of a failure nothing names.
const UNRESOLVED_GROUP: &str = "\0";

/// What the error pass yields besides the paired failures.
pub(super) struct ErrorPass {
    pub ix: SigIndex,
    /// UTC offset changes the access log showed: (first epoch second, offset).
    pub offset_changes: Vec<(i64, i32)>,
    pub stats: StreamStats,
    pub files: Vec<FileStats>,
}

/// The streaming pairer.
#[derive(Default)]
pub(super) struct Pairer {
    errs: Option<ErrorStream>,
    ix: SigIndex,
    win: PairWindow,
    /// Failures not paired yet, in end-time order (stable).
    pending: VecDeque<Failure>,
    /// The latest access-log end time seen (ms).
    max_t: i64,
    /// The server's UTC offsets until the error stream is opened (then it holds them).
    offsets: Option<Offsets>,
    /// The paired failures.
    pub store: Store,
    /// Each trajectory's group, once asked for ([`traj_group`]).
    traj_groups: Vec<Option<String>>,
    /// The error logs as lines handed over from memory, opened as the stream when first
    /// needed (instead of the history's files).
    memory: Option<Vec<ErrorReader>>,
    /// A copy taken by [`Pairer::detach`]: it reads no stream, and this is what the stream
    /// had read.
    detached: Option<Detached>,
    /// The second of log up to which the error lines were read ahead ([`Pairer::advance`]).
    read_to_s: i64,
    /// Failures that found no line where lines had been dropped ([`PairingLoss::unpaired`]).
    unpaired_after_drop: u64,
}

/// What the error stream had read when a pairer was [detached](Pairer::detach).
#[derive(Clone, Default)]
struct Detached {
    lines: u64,
    late: u64,
    offset_changes: Vec<(i64, i32)>,
    files: Vec<FileStats>,
}

impl Pairer {
    /// A pairer whose window is indexed as `index` says.
    pub fn new(index: Index) -> Pairer {
        Pairer {
            win: PairWindow::new(index),
            ..Pairer::default()
        }
    }

    /// A pairer that reads its error lines from `readers` (lines handed over from memory, see
    /// [`resolvelab_history::errorlog::Inbox`]) rather than from a history's files.
    pub fn from_memory(index: Index, readers: Vec<ErrorReader>) -> Pairer {
        Pairer {
            memory: Some(readers),
            ..Pairer::new(index)
        }
    }

    /// True once its error stream is open: a copy ([`Pairer::detach`]) then reads on from it,
    /// not from the files.
    pub fn is_reading(&self) -> bool {
        self.errs.is_some()
    }

    /// More lines were handed over: read on where the stream had come to its end.
    pub fn resume(&mut self) {
        if let Some(e) = &mut self.errs {
            e.resume();
        }
    }

    /// Read every error line handed over so far, once the stream is open. A failure pairs
    /// only with lines up to its end, so reading ahead changes no pairing ([`Pairer::detach`]
    /// reads so at every snapshot); a line read waits in the window — tens of bytes, or none
    /// if it cannot pair — rather than as text until the access log is 5 s past it (the text
    /// of the last seconds of an outage's error lines was `watch`'s largest item: 17 MB at
    /// 3,000 lines a second).
    pub fn read_ahead(&mut self) {
        let keep_from = self.keep_from();
        if let Some(e) = &mut self.errs {
            e.resume();
            feed_errors(e, i64::MAX, keep_from, &mut self.ix, &mut self.win);
        }
    }

    /// A copy of this pairer as [`Pairer::finish`] would find it were the logs to end here,
    /// this one reading on (`trajs`: the access pass's trajectories). Once its error stream is
    /// open, every error line handed over so far is read first (into the index, and the
    /// pairable ones into the window: a failure pairs only with lines up to its end, so
    /// reading ahead changes no pairing), and the pending failures are paired here, on this
    /// window, as the copy's finish would pair them — what they take set aside and put back
    /// after —, so the copy holds them paired and needs no window of its own (the window is
    /// most of a pairer's memory in an outage). Before the stream opens (from files, at the
    /// first pairing; from memory, at the first access line), the access lines may
    /// still change the clock that places the error lines: this one opens nothing, and the copy
    /// reads the error logs' files when it finishes.
    pub fn detach(&mut self, trajs: &[Traj]) -> Pairer {
        let keep_from = self.keep_from();
        let Some(e) = &mut self.errs else {
            return self.copy();
        };
        e.resume();
        feed_errors(e, i64::MAX, keep_from, &mut self.ix, &mut self.win);
        let detached = Detached {
            lines: e.lines(),
            late: e.late_lines(),
            offset_changes: e.offsets().segments()[1..].to_vec(),
            files: e.file_stats(),
        };
        let mut copy = Pairer {
            errs: None,
            ix: self.ix.clone(),
            win: self.win.without_lines(),
            pending: VecDeque::new(),
            max_t: self.max_t,
            offsets: self.offsets.clone(),
            store: self.store.clone(),
            traj_groups: self.traj_groups.clone(),
            memory: None,
            detached: Some(detached),
            read_to_s: self.read_to_s,
            unpaired_after_drop: self.unpaired_after_drop,
        };
        // Eviction, which the copy's finish would do before each failure, removes no line a
        // failure could pair with (it keeps a second before the failure's start): left out.
        self.win.with_aside(|win| {
            for f in &self.pending {
                let mut f = f.clone();
                let upstream = pair_lines(&mut f, win, trajs);
                copy.unpaired_after_drop += lost_line(&f, win) as u64;
                let group = group_of(&f, upstream, &mut copy.traj_groups, trajs);
                copy.store.push(&f, &group);
            }
        });
        copy
    }

    /// This pairer without its stream.
    fn copy(&self) -> Pairer {
        Pairer {
            errs: None,
            ix: self.ix.clone(),
            win: self.win.clone(),
            pending: self.pending.clone(),
            max_t: self.max_t,
            offsets: self.offsets.clone(),
            store: self.store.clone(),
            traj_groups: self.traj_groups.clone(),
            memory: None,
            detached: self.detached.clone(),
            read_to_s: self.read_to_s,
            unpaired_after_drop: self.unpaired_after_drop,
        }
    }

    /// Count the lines dropped over the window's cap, and the failures that may have lost
    /// theirs, only in `range` ([`PairingLoss`]).
    pub fn set_range(&mut self, range: Option<TimeRange>) {
        self.win.range = range;
    }

    /// Index error lines as `index` says (before any is read).
    pub fn set_index(&mut self, index: Index) {
        if self.errs.is_none() {
            let range = self.win.range;
            self.win = PairWindow::new(index);
            self.win.range = range;
        }
    }

    /// A failure of the access pass (any order close to time order).
    pub fn push(&mut self, f: Failure) {
        let t = f.t_ms;
        // A failure ends no later than the access log has reached (and an error log read
        // alone has no access log: its failures are the clock).
        self.max_t = self.max_t.max(t);
        if self.pending.back().is_none_or(|b| b.t_ms <= t) {
            self.pending.push_back(f);
            return;
        }
        // Out of order: after the equal times already there. A log whose time jumps back
        // (several servers' logs concatenated, rotations in the wrong order) puts every
        // failure of its second part before the whole window still pending: found by a
        // search and put at the front, where walking back to it cost the window's length per
        // failure (a 2 M-line log of a 1 M-line one twice: 9.3 s where once took 0.3 s).
        let i = self.pending.partition_point(|p| p.t_ms <= t);
        self.pending.insert(i, f);
    }

    /// The access log has reached `t_ms`: pair what can no longer get an earlier neighbour.
    #[inline]
    pub fn advance(
        &mut self,
        t_ms: i64,
        hist: Option<&History>,
        offset_s: i32,
        trajs: &[Traj],
    ) -> anyhow::Result<()> {
        self.max_t = self.max_t.max(t_ms);
        // Lines handed over from memory wait as text until their stream opens: it opens as
        // soon as an access line has set the clock that places them (not at the first
        // pairing, 10 s into an outage: `watch` held an outage's first error lines so, 31 MB
        // of its 70 MB heap at 5,000 requests a second).
        if self.memory.is_some() {
            self.open(hist, offset_s)?;
        }
        while self
            .pending
            .front()
            .is_some_and(|f| f.t_ms.saturating_add(HORIZON_MS) < self.max_t)
        {
            self.pair_next(hist, offset_s, trajs)?;
        }
        // With no failure to pair, the error lines are still read as far as the next pairing
        // would read them, once a second of log: they wait in the window, not as text (from
        // memory, `watch` holds them as text until read: the first ten seconds of an outage's
        // error lines waited so, 55 MB at 10,000 lines a second).
        let upto = self.max_t - HORIZON_MS + REORDER_SLACK_MS;
        if upto.div_euclid(1000) > self.read_to_s {
            let keep_from = self.keep_from();
            if let Some(errs) = self.errs.as_mut() {
                self.read_to_s = upto.div_euclid(1000);
                feed_errors(errs, upto, keep_from, &mut self.ix, &mut self.win);
            }
        }
        Ok(())
    }

    /// The oldest time (ms) an error line may have to be kept for: a second before the first
    /// pending failure's start, or the longest request before the horizon.
    fn keep_from(&self) -> i64 {
        self.pending
            .front()
            .map_or(i64::MAX, |f| f.start_ms - 1000)
            .min(
                self.max_t
                    .saturating_sub(HORIZON_MS + RETAIN_MS)
                    .saturating_sub(1000),
            )
    }

    /// Pair every pending failure, read the rest of the error logs.
    pub fn finish(
        mut self,
        hist: Option<&History>,
        offset_s: i32,
        trajs: &[Traj],
    ) -> anyhow::Result<(Store, ErrorPass)> {
        // The access log is read: no offset change will come. The pending failures are paired
        // with the same retention as before (a long request among them still finds its lines).
        match &mut self.errs {
            Some(e) => e.offsets_mut().seal(),
            None => {
                if let Some(o) = &mut self.offsets {
                    o.seal();
                }
            }
        }
        while !self.pending.is_empty() {
            self.pair_next(hist, offset_s, trajs)?;
        }
        self.open(hist, offset_s)?;
        let read = match self.errs.take() {
            Some(mut errs) => {
                // The lines after the last failure still count for signatures and the re-query
                // period.
                feed_errors(&mut errs, i64::MAX, i64::MAX, &mut self.ix, &mut self.win);
                Detached {
                    lines: errs.lines(),
                    late: errs.late_lines(),
                    offset_changes: errs.offsets().segments()[1..].to_vec(),
                    files: errs.finish(),
                }
            }
            None => self.detached.take().unwrap_or_default(),
        };
        self.ix.finish();
        let stats = StreamStats {
            error_lines: read.lines,
            late_lines: read.late,
            max_buffered: self.win.max_len,
            dropped: self.win.dropped,
            loss: PairingLoss {
                unpaired: self.unpaired_after_drop,
                ..self.win.loss
            },
            fetched: 0,
        };
        let pass = ErrorPass {
            offset_changes: read.offset_changes,
            ix: self.ix,
            stats,
            files: read.files,
        };
        Ok((self.store, pass))
    }

    /// Open the error stream (from memory, else from `hist`'s files) once it is needed; a
    /// detached copy opens none.
    fn open(&mut self, hist: Option<&History>, offset_s: i32) -> anyhow::Result<()> {
        if self.errs.is_some() || self.detached.is_some() {
            return Ok(());
        }
        let offsets =
            |o: &mut Option<Offsets>| o.take().unwrap_or_else(|| Offsets::fixed(offset_s));
        if let Some(readers) = self.memory.take() {
            self.errs = Some(ErrorStream::from_readers(
                readers,
                offsets(&mut self.offsets),
            ));
        } else if let Some(h) = hist {
            self.errs = Some(h.error_stream_with(offsets(&mut self.offsets))?);
        }
        Ok(())
    }

    /// An access line at epoch second `utc_s` showed the server's offset `offset_s`
    /// (`first`: the error log's offset before any change).
    #[inline]
    pub fn observe_offset(&mut self, utc_s: i64, offset_s: i32, first: i32) {
        match &mut self.errs {
            Some(e) => e.offsets_mut().observe(utc_s, offset_s),
            None => self
                .offsets
                .get_or_insert_with(|| Offsets::open(first))
                .observe(utc_s, offset_s),
        }
    }

    fn pair_next(
        &mut self,
        hist: Option<&History>,
        offset_s: i32,
        trajs: &[Traj],
    ) -> anyhow::Result<()> {
        let Some(mut f) = self.pending.pop_front() else {
            return Ok(());
        };
        // Requests read later may have started up to RETAIN_MS before the horizon.
        let keep_from = (f.start_ms - 1000).min(
            self.max_t
                .saturating_sub(HORIZON_MS + RETAIN_MS)
                .saturating_sub(1000),
        );
        self.open(hist, offset_s)?;
        if let Some(errs) = self.errs.as_mut() {
            feed_errors(
                errs,
                f.t_ms.saturating_add(REORDER_SLACK_MS),
                keep_from,
                &mut self.ix,
                &mut self.win,
            );
        }
        self.win.evict_before(keep_from);
        let upstream = pair_lines(&mut f, &mut self.win, trajs);
        self.unpaired_after_drop += lost_line(&f, &self.win) as u64;
        let group = group_of(&f, upstream, &mut self.traj_groups, trajs);
        self.store.push(&f, &group);
        Ok(())
    }
}

/// How a failure was paired: with its own error lines (an error log read alone: nothing more
/// to pair), or with the window's, and the `upstream:` of the line it paired with.
enum Paired {
    Own,
    Window(Option<String>),
}

/// Pair `f` with the window's lines, unless it was built from its own.
fn pair_lines(f: &mut Failure, win: &mut PairWindow, trajs: &[Traj]) -> Paired {
    if f.err.is_some() {
        return Paired::Own;
    }
    // Nothing buffered (no error log, or none near): nothing to pair with.
    // Its tries, one error line each at most: as many as its last pass's addresses.
    let tries = f.traj.map_or(1, |t| trajs[t as usize].addrs.len().max(1));
    // A `$upstream_addr` the checker could not read (a redaction, or a name where the log
    // names groups elsewhere) says nothing: the request's own lines decide.
    let unread = f.traj.is_some_and(|t| trajs[t as usize].unknown);
    Paired::Window(
        (!win.is_empty())
            .then(|| pair_one(f, (tries, unread), win))
            .flatten(),
    )
}

/// `f` (paired) found no error line, in the range, although a line of its span had been
/// dropped over the window's cap ([`PairingLoss::unpaired`]).
fn lost_line(f: &Failure, win: &PairWindow) -> bool {
    f.err.is_none()
        && win.dropped_to_ms.is_some_and(|t| f.start_ms - 1000 <= t)
        && TimeRange::holds(win.range, f.t_ms)
}

/// The group a paired failure is stored under.
fn group_of<'a>(
    f: &'a Failure,
    paired: Paired,
    traj_groups: &'a mut Vec<Option<String>>,
    trajs: &[Traj],
) -> Cow<'a, str> {
    match paired {
        Paired::Own if f.group.is_empty() => Cow::Borrowed(UNRESOLVED_GROUP),
        Paired::Own => Cow::Borrowed(f.group.as_str()),
        // A group the access line names (internal passes, `$proxy_upstream_name`) stays.
        Paired::Window(upstream) if !f.internal && f.group.is_empty() => match f.traj {
            // A trajectory's group is the same for each of its failures: made once.
            Some(t) => Cow::Borrowed(traj_group(traj_groups, t, trajs)),
            None => unnamed_group(upstream),
        },
        Paired::Window(_) => Cow::Borrowed(f.group.as_str()),
    }
}

/// The group of trajectory `t`'s failures, made once per trajectory and kept in `made`: the
/// group it names, else its last address's (resolved at the end, when every NLU trajectory
/// has named its addresses; see [`UNRESOLVED`]).
fn traj_group<'m>(made: &'m mut Vec<Option<String>>, t: u32, trajs: &[Traj]) -> &'m str {
    let t = t as usize;
    if made.len() <= t {
        made.resize(t + 1, None);
    }
    made[t].get_or_insert_with(|| {
        let t = &trajs[t];
        t.group.clone().unwrap_or_else(|| match t.addrs.last() {
            Some(a) => format!("{UNRESOLVED}{a}"),
            None => UNRESOLVED.to_string(),
        })
    })
}

/// Pair one failure with the buffered lines; returns the `upstream:` of the paired line.
/// `unread`: its `$upstream_addr` could not be read ([`Traj::unknown`]).
fn pair_one(
    f: &mut Failure,
    (tries, unread): (usize, bool),
    win: &mut PairWindow,
) -> Option<String> {
    // Error-log times are the start of their second; a request's lines fall between its start
    // and its end.
    let (lo, hi) = (f.start_ms - 1000, f.t_ms);
    let keys: Vec<ERef> = match (f.conn, f.remote) {
        // Several requests of a keep-alive connection share its *cid: the time window and the
        // request text tell them apart.
        (Some(c), _) => win.by_cid(c, lo, hi),
        // Without `$connection`: by time and client — or by the request text where the client
        // differs (redacted differently in the two logs, or a proxy in front).
        (None, Some(remote)) => win.by_client(remote, f.request, lo, hi),
        (None, None) => win.by_time(lo, hi).map(|(k, _)| k).collect(),
    };
    let by_text = f.conn.is_none() && f.remote.is_some();
    // Its candidates are its connection's or its client's, not any line of its time.
    let own = f.conn.is_some() || f.remote.is_some();
    // Each candidate's signature, and whether its request text agrees (a line without one, or
    // a failure without one, agrees).
    let mut same_request = Vec::new();
    let cands: Vec<(ERef, Sig, bool)> = keys
        .into_iter()
        .filter_map(|k| {
            let e = win.get(&k);
            let req_ok = e.request().is_none() || f.request.is_none() || e.same_request(f.request);
            let same_req = e.request().is_some() && e.same_request(f.request);
            let client_ok = e.client().is_none() || e.same_client(f.remote) || same_req;
            if same_req && e.sig.is_first_try_failure() {
                same_request.push(k);
            }
            (!by_text || client_ok).then_some((k, e.sig, req_ok))
        })
        .collect();
    let first_try = |c: &&(ERef, Sig, bool)| c.1.is_first_try_failure() && c.2;
    // A known trajectory that ends at a real address is not an NLU, even when an NLU line of
    // the same connection and second exists (keep-alive neighbours). One that could not be
    // read may be: its own `no live upstreams` line is the evidence (issue #43).
    let may_be_nlu = f.nlu || f.traj.is_none() || unread;
    let nlu_line = cands
        .iter()
        .filter(|c| may_be_nlu && c.1 == Sig::NoLiveUpstreams && c.2)
        .min_by_key(|c| (f.t_ms - c.0.t_ms).abs())
        .map(|c| c.0);
    let mut lines = ErrLines {
        paired: None,
        first_try: cands
            .iter()
            .filter(first_try)
            .take(3)
            .map(|c| (c.0, c.1))
            .collect(),
        own_dns: cands
            .iter()
            .find(|c| c.1.is_resolution_failure() && c.2)
            .map(|c| (c.0, c.1)),
    };
    let host = |win: &PairWindow, h: Option<u32>| h.map(|h| win.host(h).to_string());
    if let Some(k) = nlu_line {
        // An NLU line answers one request only.
        let e = win.take(&k);
        lines.paired = Some((k, e.sig));
        f.err = keep(lines, own.then_some(tries), win);
        // Formats without $upstream_addr learn NLU from the error log, and so does one whose
        // `$upstream_addr` could not be read (its hops stay unknown).
        f.nlu = true;
        let upstream = host(win, e.upstream_host());
        if unread && f.group.is_empty() {
            f.group = unnamed_group(upstream.clone()).into_owned();
        }
        return upstream;
    }
    // A 1-hop "NLU" whose own request (same connection, second and request text) logged a
    // first try on a peer was not refused at the pick: its one hop is a redacted address, not
    // a group (issue #43: `upstream prematurely closed connection` behind `XXX`).
    if f.nlu
        && !f.internal
        && f.hops == 1
        && let Some(&k) = same_request.first()
    {
        f.nlu = false;
        f.hops = 0;
        let e = win.get(&k);
        lines.paired = Some((k, e.sig));
        let upstream = host(win, e.upstream_host());
        f.err = keep(lines, own.then_some(tries), win);
        f.group = unnamed_group(upstream.clone()).into_owned();
        return upstream;
    }
    if !f.nlu
        && let Some(c) = cands.iter().find(first_try)
    {
        lines.paired = Some((c.0, c.1));
        let upstream = host(win, win.get(&c.0).upstream_host());
        f.err = keep(lines, own.then_some(tries), win);
        return upstream;
    }
    lines.paired = lines.own_dns;
    f.err = keep(lines, own.then_some(tries), win);
    None
}

/// `lines` as a failure's, its own tries' lines taken out of the window — its paired line and
/// then its other first-try lines, one per peer, as many as it made `tries` (none when its
/// lines were found by time alone, not by its connection or client: they may be anyone's).
/// A try's line answers one request: an outage's were kept for the longest request, 70 s,
/// where its failure is paired 10 s behind the access log. Lines of the same client and
/// request in the same second may be another request's: a failure takes no more than its
/// tries, so that its neighbour finds the others.
fn keep(lines: ErrLines, tries: Option<usize>, win: &mut PairWindow) -> Option<Box<ErrLines>> {
    let paired = lines.paired.filter(|p| p.1.is_first_try_failure());
    let mut peers = Vec::new();
    for (k, _) in paired.into_iter().chain(lines.first_try.iter().copied()) {
        if peers.len() >= tries.unwrap_or(0) {
            break;
        }
        if win.is_taken(&k) {
            continue;
        }
        let peer = win.get(&k).upstream_host();
        if peer.is_none() || !peers.contains(&peer) {
            peers.push(peer);
            win.take(&k);
        }
    }
    lines.boxed()
}

/// The group of a failure without a trajectory: the paired line's `upstream:` host when that
/// is a group name, else none yet ([`UNRESOLVED`]: allocated for no failure).
fn unnamed_group(upstream: Option<String>) -> Cow<'static, str> {
    match upstream.filter(|h| !is_addr(h)) {
        Some(h) => Cow::Owned(h),
        None => Cow::Borrowed(UNRESOLVED_GROUP),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A log whose time jumps back (two servers' logs concatenated) keeps the pending failures
    /// in end-time order, equal times in arrival order.
    #[test]
    fn failures_wait_in_time_order_whatever_order_they_come_in() {
        let mut p = Pairer::default();
        let times = [5, 7, 7, 3, 6, 7, 1, 9, 2, 2, 8];
        for (line, &t_ms) in times.iter().enumerate() {
            p.push(Failure {
                t_ms,
                line: line as u64,
                ..Failure::default()
            });
        }
        let got: Vec<(i64, u64)> = p.pending.iter().map(|f| (f.t_ms, f.line)).collect();
        let mut want: Vec<(i64, u64)> = times.iter().zip(0..).map(|(&t, l)| (t, l)).collect();
        want.sort_by_key(|&(t, _)| t);
        assert_eq!(got, want);
        assert_eq!(p.max_t, 9);
    }

    /// A failure takes its own tries' lines out of the window as it is paired, one per peer
    /// and no more than its tries: two requests of one client and request text in one second,
    /// refused by both peers, pair with two lines each, and nothing is left waiting; a failure
    /// found by time alone takes nothing.
    #[test]
    fn a_failure_takes_its_own_tries_lines_and_no_more() {
        use super::super::errors::Pairable;
        use super::super::failure::{Keys, parse_traj};
        let mut keys = Keys::default();
        let trajs = [parse_traj("10.0.0.5:8080, 10.0.0.6:8080", &mut keys)];
        let (client, request) = (Some(11), Some(22));
        let mut win = PairWindow::new(Index::Text);
        let peers = [win.host_id("10.0.0.5:8080"), win.host_id("10.0.0.6:8080")];
        let refused = |peer| Pairable::new(1, Sig::ConnectRefused, request, client, Some(peer));
        for (line, peer) in [(1, peers[0]), (2, peers[1]), (3, peers[0]), (4, peers[1])] {
            win.insert(ERef::new(5_000, 0, line), refused(peer));
        }
        let failure = |remote| Failure {
            t_ms: 5_400,
            start_ms: 5_400,
            status: 502,
            traj: Some(0),
            request,
            remote,
            ..Failure::default()
        };
        let mut by_time = failure(None);
        pair_lines(&mut by_time, &mut win, &trajs);
        assert_eq!(
            by_time.first_try().len(),
            3,
            "found by time: every line near"
        );
        assert_eq!(win.by_time(0, 10_000).count(), 4, "and none taken");
        for line in [1, 3] {
            let mut f = failure(client);
            pair_lines(&mut f, &mut win, &trajs);
            let got: Vec<u64> = f.first_try().iter().map(|l| l.0.line()).collect();
            assert_eq!(got[..2], [line, line + 1]);
        }
        assert!(win.is_empty(), "every try's line taken once");
    }
}
