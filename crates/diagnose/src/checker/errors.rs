//! The error logs: every line tagged with its signature and counted per second
//! ([`SigIndex`]), the lines that can still pair with a pending failure buffered
//! ([`PairWindow`]), the failures of an error log read alone, and the lines quoted as evidence
//! read again at the end ([`Cites`]).

use super::failure::{At, Failure, Store, is_addr, trunc};
use crate::classes::{self, Sig};
use crate::verdict::{Evidence, Incident, PairingLoss, Signature, TimeRange};
use resolvelab_history::access::text_hash;
use resolvelab_history::logformat::LogFormat;
use resolvelab_history::{ErrorRecord, ErrorStream, History};
use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::num::{NonZeroU32, NonZeroU64};

/// How far (ms) past a failure's end the error stream is read before pairing it, so that a line
/// written slightly out of order (several workers share one file) still finds its request.
pub(super) const REORDER_SLACK_MS: i64 = 5000;
/// At most this many error lines wait in the pairing window (a safety net: the window is
/// normally bounded by the longest request).
pub const MAX_BUFFERED: usize = 200_000;

/// One error line by its place in the merged order: time (ms), file, line — in 16 bytes, the
/// file and line packed as they order (a window holds hundreds of thousands, once and again in
/// each key's list).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(super) struct ERef {
    pub t_ms: i64,
    at: At,
}

/// What pairing needs of a buffered error line, in 32 bytes (a window holds hundreds of
/// thousands in an outage): the hashes without a separate `None` (a hash of 0 is kept as 1),
/// the host's id from 1.
#[derive(Clone)]
pub(super) struct Pairable {
    pub cid: u64,
    pub sig: Sig,
    request: Option<NonZeroU64>,
    client: Option<NonZeroU64>,
    upstream_host: Option<NonZeroU32>,
    /// Its keys are in a [`Chunk`] of the window's cold lines, not in the key map.
    cold: bool,
}

/// A hash kept as [`NonZeroU64`] (0 taken as 1: one more collision in 2^64).
fn nz(h: u64) -> NonZeroU64 {
    NonZeroU64::new(h).unwrap_or(NonZeroU64::MIN)
}

impl Pairable {
    /// A line's pairing facts: `request` and `client` are [`text_hash`]es, `upstream_host` a
    /// [`PairWindow::host`] id.
    pub fn new(
        cid: u64,
        sig: Sig,
        request: Option<u64>,
        client: Option<u64>,
        upstream_host: Option<u32>,
    ) -> Pairable {
        Pairable {
            cid,
            sig,
            request: request.map(nz),
            client: client.map(nz),
            upstream_host: upstream_host.and_then(|h| NonZeroU32::new(h.wrapping_add(1))),
            cold: false,
        }
    }

    /// [`text_hash`] of its `request:` (as kept).
    pub fn request(&self) -> Option<u64> {
        self.request.map(NonZeroU64::get)
    }

    /// [`text_hash`] of its `client:` (as kept).
    pub fn client(&self) -> Option<u64> {
        self.client.map(NonZeroU64::get)
    }

    /// Its `upstream:` host ([`PairWindow::host`]).
    pub fn upstream_host(&self) -> Option<u32> {
        self.upstream_host.map(|h| h.get() - 1)
    }

    /// Does `hash` (a [`text_hash`]) equal its request's, as kept?
    pub fn same_request(&self, hash: Option<u64>) -> bool {
        self.request == hash.map(nz)
    }

    /// Does `hash` (a [`text_hash`]) equal its client's, as kept?
    pub fn same_client(&self, hash: Option<u64>) -> bool {
        self.client == hash.map(nz)
    }
}

/// How buffered lines are found: by `*cid` (the access log has `$connection`), or by client
/// and request text (it has not).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) enum Index {
    #[default]
    Cid,
    Text,
}

type Keyed = rustc_hash::FxHashMap<u64, KeyList>;

/// One key's lines, in merged order. Most keys have one line (without `$connection` the keys
/// are a line's client and request text): kept inline; a second line makes it a list (not
/// boxed: in an outage most keys have two lines or more — a refused request's two tries —, and
/// a box costs an allocation more than the 8 bytes it saves in the map).
#[derive(Clone)]
enum KeyList {
    One(ERef),
    Many(VecDeque<ERef>),
}

/// Emptied lists kept for reuse (keys come and go with every line).
type Pool = Vec<VecDeque<ERef>>;

/// At most this many emptied lists are kept for reuse.
const POOL: usize = 4096;

impl KeyList {
    /// Add `k` (at the back, unless it came late); `pool`: emptied lists to reuse.
    fn add(&mut self, k: ERef, pool: &mut Pool) {
        match self {
            KeyList::One(x) => {
                let mut v = pool.pop().unwrap_or_default();
                v.push_back(*x);
                insert_sorted(&mut v, k);
                *self = KeyList::Many(v);
            }
            KeyList::Many(v) => insert_sorted(v, k),
        }
    }

    /// Remove `k`; true when no line is left.
    fn remove(&mut self, k: ERef, pool: &mut Pool) -> bool {
        match self {
            KeyList::One(x) => *x == k,
            KeyList::Many(v) => {
                remove_from(v, k);
                if v.len() != 1 {
                    return v.is_empty();
                }
                let only = v[0];
                if let KeyList::Many(mut v) = std::mem::replace(self, KeyList::One(only))
                    && pool.len() < POOL
                {
                    v.clear();
                    pool.push(v);
                }
                false
            }
        }
    }

    /// Its lines in `a..=b`, added to `out`.
    fn extend_span(&self, a: ERef, b: ERef, out: &mut Vec<ERef>) {
        match self {
            KeyList::One(x) => out.extend((a <= *x && *x <= b).then_some(*x)),
            KeyList::Many(v) => out.extend(in_span(v, a, b)),
        }
    }
}

/// The error lines that may still pair with a pending failure, in merged order, with one
/// short list per key ([`Index`]) so that a long window is never scanned whole. Lines come
/// (nearly) in order, so every list grows at its back and shrinks at its front.
#[derive(Default, Clone)]
pub(super) struct PairWindow {
    /// Buffered lines in merged order; a paired (taken) line leaves a hole until evicted.
    lines: VecDeque<(ERef, Option<Pairable>)>,
    live: usize,
    index: Index,
    keys: Keyed,
    /// Lines without a client ([`Index::Text`]).
    anon: VecDeque<ERef>,
    /// Emptied key lists, kept for reuse.
    pool: Pool,
    /// The `upstream:` hosts seen (few: groups and peers).
    hosts: Vec<String>,
    host_ids: HashMap<String, u32>,
    /// The most lines buffered at once.
    pub max_len: usize,
    /// Lines dropped over the safety cap.
    pub dropped: u64,
    /// The newest dropped line's time (ms): a failure starting before it may have lost a line.
    pub dropped_to_ms: Option<i64>,
    /// The lines dropped in [`PairWindow::range`].
    pub loss: PairingLoss,
    /// The time the diagnosis speaks for (its losses are counted there).
    pub range: Option<TimeRange>,
    /// While pairing is tried without changing the window ([`PairWindow::with_aside`]): the
    /// lines taken, left in place and passed over.
    aside: Option<rustc_hash::FxHashSet<ERef>>,
    /// The keys of the lines older than [`HOT_MS`] behind the newest, oldest chunk first.
    cold: VecDeque<Chunk>,
    /// The first line of `lines` not looked at for moving to `cold` yet.
    hot_from: usize,
    /// The newest line's time (ms).
    newest_ms: i64,
}

/// Lines stay in the key map this long (ms) behind the newest line read, while their second
/// is still filling; older ones keep their keys in [`Chunk`]s — 24 bytes a key rather than a
/// map entry and a list slot —, which the pairing searches (a binary search per second of
/// lines in the failure's span). A failure is paired once the access log is 10 s past it, so
/// its lines are mostly cold by then: a map of the last 10 s held 120,000 keys in an outage
/// of 3,000 lines a second (a 16 MB table while it grew), for no fewer searches; and an
/// outage's window is mostly lines kept for the longest request
/// ([`RETAIN_MS`](super::pairing)), that no failure asks for.
const HOT_MS: i64 = 2_000;
/// The window is compacted once its holes (taken lines) outnumber its lines by this many
/// and by its lines ([`PairWindow::compact`]).
const COMPACT_SLACK: usize = 4096;
/// Lines are moved to the cold chunks a second's worth at a time.
const CHUNK_MS: i64 = 1_000;

/// The keys of a run of cold lines, sorted: (key, line).
#[derive(Clone)]
struct Chunk {
    first: ERef,
    last: ERef,
    keys: Vec<(u64, ERef)>,
}

impl Chunk {
    /// Its lines of `key` in `a..=b`, added to `out`.
    fn extend_span(&self, key: u64, a: ERef, b: ERef, out: &mut Vec<ERef>) {
        if self.last < a || b < self.first {
            return;
        }
        let i = self.keys.partition_point(|x| *x < (key, a));
        out.extend(
            self.keys[i..]
                .iter()
                .take_while(|x| x.0 == key && x.1 <= b)
                .map(|x| x.1),
        );
    }
}

impl ERef {
    /// Line `line` of file `file` (see [`At::new`]), logged at `t_ms`.
    pub fn new(t_ms: i64, file: u32, line: u64) -> ERef {
        ERef {
            t_ms,
            at: At::new(file, line),
        }
    }

    pub fn file(self) -> u32 {
        self.at.file()
    }

    pub fn line(self) -> u64 {
        self.at.line()
    }

    /// Its file and line.
    pub fn at(self) -> At {
        self.at
    }

    /// The first and last possible references of the time window `lo..=hi` (ms).
    pub fn span(lo: i64, hi: i64) -> (ERef, ERef) {
        (
            ERef {
                t_ms: lo,
                at: At::NONE,
            },
            ERef {
                t_ms: hi,
                at: At::LAST,
            },
        )
    }
}

/// A line's keys in the window's map as `index` says.
fn keys_of(index: Index, p: &Pairable) -> [Option<u64>; 2] {
    match index {
        Index::Cid => [Some(p.cid), None],
        Index::Text => [p.client(), p.request()],
    }
}

/// Insert `k` into a list kept in order (at the back, unless the line came late).
fn insert_sorted(v: &mut VecDeque<ERef>, k: ERef) {
    if v.back().is_none_or(|b| *b <= k) {
        v.push_back(k);
    } else {
        let i = v.partition_point(|x| *x < k);
        v.insert(i, k);
    }
}

fn remove_from(v: &mut VecDeque<ERef>, k: ERef) {
    if v.front() == Some(&k) {
        v.pop_front();
    } else if let Some(i) = v.iter().position(|x| *x == k) {
        v.remove(i);
    }
}

/// The part of a list in `a..=b`.
fn in_span(v: &VecDeque<ERef>, a: ERef, b: ERef) -> impl Iterator<Item = ERef> + '_ {
    let i = v.partition_point(|x| *x < a);
    v.range(i..).take_while(move |x| **x <= b).copied()
}

impl PairWindow {
    /// An empty window indexed as `index` says.
    pub fn new(index: Index) -> PairWindow {
        PairWindow {
            index,
            ..PairWindow::default()
        }
    }

    /// An empty window like this one: its index, hosts and counts, no line.
    pub fn without_lines(&self) -> PairWindow {
        PairWindow {
            index: self.index,
            hosts: self.hosts.clone(),
            host_ids: self.host_ids.clone(),
            max_len: self.max_len,
            dropped: self.dropped,
            dropped_to_ms: self.dropped_to_ms,
            loss: self.loss,
            range: self.range,
            ..PairWindow::default()
        }
    }

    /// Run `f` on this window with what it takes set aside: a line taken stays in the window
    /// and no later query in `f` returns it; after `f`, every line is there as before.
    pub fn with_aside<R>(&mut self, f: impl FnOnce(&mut PairWindow) -> R) -> R {
        self.aside = Some(Default::default());
        let r = f(self);
        self.aside = None;
        r
    }

    fn is_aside(&self, k: &ERef) -> bool {
        self.aside.as_ref().is_some_and(|a| a.contains(k))
    }

    fn keys_of(&self, p: &Pairable) -> [Option<u64>; 2] {
        keys_of(self.index, p)
    }

    pub fn insert(&mut self, k: ERef, p: Pairable) {
        for key in self.keys_of(&p).into_iter().flatten() {
            match self.keys.entry(key) {
                Entry::Occupied(mut e) => e.get_mut().add(k, &mut self.pool),
                Entry::Vacant(e) => {
                    e.insert(KeyList::One(k));
                }
            }
        }
        if self.index == Index::Text && p.client.is_none() {
            insert_sorted(&mut self.anon, k);
        }
        if self.lines.back().is_none_or(|b| b.0 <= k) {
            self.lines.push_back((k, Some(p)));
        } else {
            let i = self.lines.partition_point(|x| x.0 < k);
            self.lines.insert(i, (k, Some(p)));
            // A late line before the cursor stays hot (its keys are in the map).
            if i < self.hot_from {
                self.hot_from += 1;
            }
        }
        self.live += 1;
        while self.live > MAX_BUFFERED {
            let t = self.lines.front().map_or(0, |x| x.0.t_ms);
            if self.pop_front() {
                self.count_drop(t);
            }
        }
        self.max_len = self.max_len.max(self.live);
        self.newest_ms = self.newest_ms.max(k.t_ms);
        self.chill();
        if self.lines.len() > 2 * self.live + COMPACT_SLACK && self.aside.is_none() {
            self.compact();
        }
    }

    /// Drop the holes the taken lines left, and their keys from the cold chunks: a failure
    /// takes its tries' lines as it is paired, 10 s behind, where the window keeps lines for
    /// the longest request, 70 s — its holes would outnumber its lines seven to one.
    fn compact(&mut self) {
        let (hot, mut i, mut kept) = (self.hot_from, 0, 0);
        self.lines.retain(|x| {
            let keep = x.1.is_some();
            kept += (keep && i < hot) as usize;
            i += 1;
            keep
        });
        self.hot_from = kept;
        if self.lines.capacity() > 4 * self.lines.len().max(COMPACT_SLACK) {
            self.lines.shrink_to(2 * self.lines.len());
        }
        let lines = &self.lines;
        let there = |k: &ERef| {
            lines
                .binary_search_by(|x| x.0.cmp(k))
                .is_ok_and(|i| lines[i].1.is_some())
        };
        for c in &mut self.cold {
            c.keys.retain(|x| there(&x.1));
            c.keys.shrink_to_fit();
            if let (Some(first), Some(last)) = (
                c.keys.iter().map(|x| x.1).min(),
                c.keys.iter().map(|x| x.1).max(),
            ) {
                (c.first, c.last) = (first, last);
            }
        }
        self.cold.retain(|c| !c.keys.is_empty());
    }

    /// A line of time `t_ms` dropped over the cap.
    fn count_drop(&mut self, t_ms: i64) {
        self.dropped += 1;
        self.dropped_to_ms = Some(self.dropped_to_ms.map_or(t_ms, |d| d.max(t_ms)));
        if TimeRange::holds(self.range, t_ms) {
            let first = PairingLoss {
                lines: 1,
                span_ms: Some((t_ms, t_ms)),
                unpaired: 0,
            };
            self.loss = self.loss + first;
        }
    }

    /// Move the keys of the lines older than [`HOT_MS`] behind the newest from the map to a
    /// [`Chunk`], once they span a [`CHUNK_MS`].
    fn chill(&mut self) {
        let bound = self.newest_ms.saturating_sub(HOT_MS);
        let due = |l: &VecDeque<(ERef, Option<Pairable>)>, i: usize| {
            l.get(i)
                .is_some_and(|x| x.0.t_ms < bound.saturating_sub(CHUNK_MS))
        };
        if self.aside.is_some() || !due(&self.lines, self.hot_from) {
            return;
        }
        let index = self.index;
        let mut keys = Vec::new();
        let (mut first, mut last) = (None, None);
        while self
            .lines
            .get(self.hot_from)
            .is_some_and(|x| x.0.t_ms < bound)
        {
            let (k, p) = &mut self.lines[self.hot_from];
            self.hot_from += 1;
            let Some(p) = p.as_mut().filter(|p| !p.cold) else {
                continue;
            };
            p.cold = true;
            first.get_or_insert(*k);
            last = Some(*k);
            for key in keys_of(index, p).into_iter().flatten() {
                keys.push((key, *k));
                if let Some(l) = self.keys.get_mut(&key)
                    && l.remove(*k, &mut self.pool)
                {
                    self.keys.remove(&key);
                }
            }
        }
        if let (Some(first), Some(last)) = (first, last) {
            keys.sort_unstable();
            // Kept for up to a minute: not at twice its size.
            keys.shrink_to_fit();
            self.cold.push_back(Chunk { first, last, keys });
        }
    }

    /// Its cold lines of `key` in `a..=b` that are still there (not taken, not evicted),
    /// added to `out`.
    fn cold_span(&self, key: u64, a: ERef, b: ERef, out: &mut Vec<ERef>) {
        let from = out.len();
        for c in &self.cold {
            c.extend_span(key, a, b, out);
        }
        let mut i = from;
        for j in from..out.len() {
            if self.is_there(&out[j]) {
                out[i] = out[j];
                i += 1;
            }
        }
        out.truncate(i);
    }

    /// Is the line `k` in the window, not taken?
    fn is_there(&self, k: &ERef) -> bool {
        self.lines
            .binary_search_by(|x| x.0.cmp(k))
            .is_ok_and(|i| self.lines[i].1.is_some())
    }

    /// Has the line `k` been taken (or set aside), or left the window?
    pub fn is_taken(&self, k: &ERef) -> bool {
        !self.is_there(k) || self.is_aside(k)
    }

    /// Drop the oldest line; true when it had not been paired.
    fn pop_front(&mut self) -> bool {
        let Some((k, p)) = self.lines.pop_front() else {
            return false;
        };
        self.hot_from = self.hot_from.saturating_sub(1);
        // A chunk goes with its last line.
        while self.cold.front().is_some_and(|c| c.last <= k) {
            self.cold.pop_front();
        }
        let Some(p) = p else { return false };
        self.unindex(k, &p);
        true
    }

    fn unindex(&mut self, k: ERef, p: &Pairable) {
        self.live -= 1;
        for key in self.keys_of(p).into_iter().flatten().filter(|_| !p.cold) {
            if let Some(l) = self.keys.get_mut(&key)
                && l.remove(k, &mut self.pool)
            {
                self.keys.remove(&key);
            }
        }
        if self.index == Index::Text && p.client.is_none() {
            remove_from(&mut self.anon, k);
        }
    }

    /// No line is buffered that a failure could pair with.
    pub fn is_empty(&self) -> bool {
        self.live == self.aside.as_ref().map_or(0, |a| a.len())
    }

    pub fn evict_before(&mut self, t_ms: i64) {
        while self.lines.front().is_some_and(|x| x.0.t_ms < t_ms) {
            self.pop_front();
        }
    }

    fn pos(&self, k: &ERef) -> usize {
        self.lines
            .binary_search_by(|x| x.0.cmp(k))
            .expect("a candidate is in the window")
    }

    pub fn get(&self, k: &ERef) -> &Pairable {
        self.lines[self.pos(k)]
            .1
            .as_ref()
            .expect("a candidate is not paired yet")
    }

    pub fn take(&mut self, k: &ERef) -> Pairable {
        if self.aside.is_some() {
            let p = self.get(k).clone();
            if let Some(a) = &mut self.aside {
                a.insert(*k);
            }
            return p;
        }
        let i = self.pos(k);
        let p = self.lines[i]
            .1
            .take()
            .expect("a candidate is not paired yet");
        self.unindex(*k, &p);
        p
    }

    /// The lines of `*cid` in `lo..=hi` ([`Index::Cid`]; else by time).
    pub fn by_cid(&self, cid: u64, lo: i64, hi: i64) -> Vec<ERef> {
        if self.index != Index::Cid {
            return self.by_time(lo, hi).map(|(k, _)| k).collect();
        }
        let (a, b) = ERef::span(lo, hi);
        let mut out = Vec::new();
        self.cold_span(cid, a, b, &mut out);
        let cold = out.len();
        if let Some(l) = self.keys.get(&cid) {
            l.extend_span(a, b, &mut out);
        }
        if cold > 0 {
            // A late line in the map may be older than a cold one.
            out.sort_unstable();
        }
        out.retain(|k| !self.is_aside(k));
        out
    }

    /// The lines of `lo..=hi` whose client is `client`, or whose request is `request`, or
    /// that name no client — a superset of what pairing without `*cid` accepts (hashes may
    /// collide), in merged order ([`Index::Text`]; else every line of the window).
    pub fn by_client(&self, client: u64, request: Option<u64>, lo: i64, hi: i64) -> Vec<ERef> {
        if self.index != Index::Text {
            return self.by_time(lo, hi).map(|(k, _)| k).collect();
        }
        let (a, b) = ERef::span(lo, hi);
        let mut out: Vec<ERef> = Vec::new();
        // Keys as kept ([`Pairable`]).
        for h in std::iter::once(client).chain(request).map(|h| nz(h).get()) {
            self.cold_span(h, a, b, &mut out);
            if let Some(l) = self.keys.get(&h) {
                l.extend_span(a, b, &mut out);
            }
        }
        out.extend(in_span(&self.anon, a, b));
        out.sort_unstable();
        out.dedup();
        out.retain(|k| !self.is_aside(k));
        out
    }

    /// The id of an `upstream:` host.
    pub(super) fn host_id(&mut self, h: &str) -> u32 {
        if let Some(&i) = self.host_ids.get(h) {
            return i;
        }
        self.hosts.push(h.to_string());
        self.host_ids
            .insert(h.to_string(), (self.hosts.len() - 1) as u32);
        (self.hosts.len() - 1) as u32
    }

    /// An `upstream:` host by id.
    pub fn host(&self, id: u32) -> &str {
        &self.hosts[id as usize]
    }

    /// Every unpaired line of `lo..=hi`, in merged order.
    pub fn by_time(&self, lo: i64, hi: i64) -> impl Iterator<Item = (ERef, &Pairable)> {
        let (a, b) = ERef::span(lo, hi);
        let i = self.lines.partition_point(|x| x.0 < a);
        self.lines
            .range(i..)
            .take_while(move |x| x.0 <= b)
            .filter(|(k, _)| !self.is_aside(k))
            .filter_map(|(k, p)| p.as_ref().map(|p| (*k, p)))
    }
}

/// Per signature: count, first line, and per second (error-log resolution) the first line and
/// the count — bounded by the span of the logs in seconds, not by their size.
#[derive(Clone)]
pub(super) struct SigIndex {
    pub count: Vec<u64>,
    pub first: Vec<Option<ERef>>,
    pub per_sec: Vec<BTreeMap<i64, (ERef, u64)>>,
    /// The second being counted per signature (lines come in time order): flushed into
    /// `per_sec` when the second changes, so the map is touched once per second.
    cur: Vec<Option<(i64, ERef, u64)>>,
    /// `NAME could not be resolved` lines: the distinct seconds per name (re-query period
    /// without a DNS log), with the last second added.
    pub unresolved: HashMap<String, (i64, BTreeSet<i64>)>,
    memo: SigMemo,
}

/// The last distinct messages and what they are: (message, signature, length of the name
/// before ` could not be resolved`). Messages repeat (the context is not part of them), so
/// most lines skip the substring searches.
#[derive(Default, Clone)]
pub(super) struct SigMemo {
    memo: Vec<(String, Sig, Option<usize>)>,
    next: usize,
}

const MEMO: usize = 16;

impl SigMemo {
    /// A message's signature, and where ` could not be resolved` starts in it.
    pub fn classify(&mut self, message: &str) -> (Sig, Option<usize>) {
        if let Some(m) = self.memo.iter().find(|m| m.0 == message) {
            return (m.1, m.2);
        }
        let v = (Sig::of(message), message.find(" could not be resolved"));
        let entry = (message.to_string(), v.0, v.1);
        if self.memo.len() < MEMO {
            self.memo.push(entry);
        } else {
            self.memo[self.next] = entry;
            self.next = (self.next + 1) % MEMO;
        }
        v
    }
}

impl Default for SigIndex {
    fn default() -> SigIndex {
        let n = classes::SIGNATURES.len();
        SigIndex {
            count: vec![0; n],
            first: vec![None; n],
            per_sec: vec![BTreeMap::new(); n],
            cur: vec![None; n],
            unresolved: HashMap::new(),
            memo: SigMemo::default(),
        }
    }
}

impl SigIndex {
    /// Index one line; returns its signature.
    fn add(&mut self, e: &ErrorRecord) -> Sig {
        let k = ERef::new(e.t_us / 1000, e.file, e.line);
        let (sig, unresolved) = self.memo.classify(&e.message);
        if let Some(i) = unresolved {
            let name = &e.message[..i];
            match self.unresolved.get_mut(name) {
                Some((last, _)) if *last == k.t_ms => {}
                Some((last, set)) => {
                    *last = k.t_ms;
                    set.insert(k.t_ms);
                }
                None => {
                    self.unresolved
                        .insert(name.to_string(), (k.t_ms, [k.t_ms].into()));
                }
            }
        }
        if sig == Sig::Other {
            return sig;
        }
        let si = sig as usize;
        self.count[si] += 1;
        if self.first[si].is_none_or(|f| k < f) {
            self.first[si] = Some(k);
        }
        match &mut self.cur[si] {
            Some(c) if c.0 == k.t_ms => {
                c.1 = c.1.min(k);
                c.2 += 1;
            }
            slot => {
                if let Some((t, r, n)) = slot.replace((k.t_ms, k, 1)) {
                    Self::flush(&mut self.per_sec[si], t, r, n);
                }
            }
        }
        sig
    }

    fn flush(m: &mut BTreeMap<i64, (ERef, u64)>, t: i64, r: ERef, n: u64) {
        let e = m.entry(t).or_insert((r, 0));
        e.0 = e.0.min(r);
        e.1 += n;
    }

    /// Flush the seconds being counted (after the last line).
    pub fn finish(&mut self) {
        for si in 0..self.cur.len() {
            if let Some((t, r, n)) = self.cur[si].take() {
                Self::flush(&mut self.per_sec[si], t, r, n);
            }
        }
    }

    /// The first line (in merged order) of signature `sig` between `a` and `b` ms.
    pub fn first_in(&self, sig: Sig, a: i64, b: i64) -> Option<ERef> {
        self.per_sec
            .get(sig as usize)?
            .range(a..=b)
            .next()
            .map(|(_, v)| v.0)
    }
}

/// Read the error stream up to `upto_ms`: index every line, and buffer the pairable ones
/// (a `*cid` and an NLU or first-try signature) not older than `keep_from_ms`.
pub(super) fn feed_errors(
    errs: &mut ErrorStream,
    upto_ms: i64,
    keep_from_ms: i64,
    ix: &mut SigIndex,
    win: &mut PairWindow,
) {
    while errs.peek_t_us().is_some_and(|t| t / 1000 <= upto_ms) {
        let Some(e) = errs.next() else { break };
        let sig = ix.add(e);
        let t_ms = e.t_us / 1000;
        if let Some(cid) = e.cid
            && t_ms >= keep_from_ms
            && sig.is_request_failure()
        {
            let upstream_host = e.upstream_host().map(|h| win.host_id(h));
            win.insert(
                ERef::new(t_ms, e.file, e.line),
                Pairable::new(
                    cid,
                    sig,
                    e.request.as_deref().map(text_hash),
                    e.client.as_deref().map(text_hash),
                    upstream_host,
                ),
            );
        }
    }
}

/// Without an access log, the failed requests are those the error log shows: one per `*cid`
/// and request whose lines (a failed try, `no live upstreams`, its own failed resolution) fall
/// within a second or two of each other. Whether a failed try was retried successfully only
/// the access log can tell; the evidence summary says so.
pub(super) fn failures_from_errors(
    hist: &History,
    offset_s: i32,
    store: &mut Store,
) -> anyhow::Result<Vec<Failure>> {
    let mut errs = hist.error_stream(offset_s)?;
    let mut out: Vec<Failure> = Vec::new();
    let mut open: HashMap<(u64, Option<String>), usize> = HashMap::new();
    while let Some(e) = errs.next() {
        let sig = Sig::of(&e.message);
        let Some(cid) = e.cid.filter(|_| sig.is_request_failure()) else {
            continue;
        };
        let t_ms = e.t_us / 1000;
        let r = ERef::new(t_ms, e.file, e.line);
        let key = (cid, e.request.clone());
        let i = match open.get(&key) {
            // A request's chain: its failed tries, then maybe its NLU, within two seconds of
            // its first line. An NLU ends its request, so whatever follows on the connection
            // is another request (keep-alive, HTTP/2 streams share one `*cid`).
            Some(&i) if !out[i].nlu && t_ms - out[i].start_ms <= 2000 => i,
            _ => {
                open.insert(key, out.len());
                out.push(error_failure(e, cid, sig, store));
                out.len() - 1
            }
        };
        // The failure's own lines are its evidence: they need no pairing (which a log in
        // reverse order, as log viewers export it, would miss).
        let f = &mut out[i];
        f.t_ms = f.t_ms.max(t_ms + 999);
        if sig == Sig::NoLiveUpstreams {
            f.nlu = true;
            f.err_mut().paired = Some((r, sig));
        } else if sig.is_resolution_failure() {
            f.err_mut().own_dns = Some((r, sig));
        } else if f.first_try().len() < 3 {
            f.err_mut().first_try.push((r, sig));
        }
    }
    Ok(out)
}

/// A failed request as one error line shows it (see [`failures_from_errors`]).
fn error_failure(e: &ErrorRecord, cid: u64, sig: Sig, store: &mut Store) -> Failure {
    let t_ms = e.t_us / 1000;
    Failure {
        t_ms: t_ms + 999,
        start_ms: t_ms,
        status: if sig == Sig::UpstreamTimeout {
            504
        } else {
            502
        },
        traj: None,
        file: e.file,
        line: e.line,
        conn: Some(cid),
        method: store.method_id(e.request.as_deref().and_then(|r| r.split(' ').next())),
        request: e.request.as_deref().map(text_hash),
        remote: e.client.as_deref().map(text_hash),
        group: e
            .upstream_host()
            .filter(|h| !is_addr(h))
            .map(str::to_string)
            .unwrap_or_default(),
        ..Failure::default()
    }
}

fn err_text(e: &ErrorRecord) -> String {
    trunc(
        &format!(
            "[{}] {}{}{}",
            serde_json::to_value(e.level)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default(),
            e.cid.map(|c| format!("*{c} ")).unwrap_or_default(),
            e.message,
            e.request
                .as_ref()
                .map(|r| format!(", request: \"{r}\""))
                .unwrap_or_default()
        ),
        300,
    )
}

/// Lines cited as evidence — error lines, and the access lines of failures. Their text is
/// filled in after the streamed pass, by reading only those lines again
/// ([`History::fetch_errors`], [`History::fetch_access`]).
#[derive(Default)]
pub(super) struct Cites {
    wanted: HashMap<String, (u32, u64)>,
}

impl Cites {
    /// Evidence for one error line; the text follows in [`Cites::fill`].
    pub fn ev(&mut self, h: &History, r: ERef, note: &str) -> Evidence {
        self.line(h, r.file(), r.line(), note.to_string())
    }

    /// Evidence for any line (access or error) by file and line number.
    pub fn line(&mut self, h: &History, file: u32, line: u64, note: String) -> Evidence {
        let at = h.cite(file, line);
        self.wanted.insert(at.clone(), (file, line));
        Evidence {
            at,
            note,
            text: String::new(),
        }
    }

    /// Read the cited lines and fill their evidence text; returns the number of error lines
    /// read.
    pub fn fill(
        &self,
        h: &History,
        fmt: &LogFormat,
        incidents: &mut [Incident],
        signatures: &mut [Signature],
        stats: &[resolvelab_history::FileStats],
    ) -> anyhow::Result<usize> {
        if self.wanted.is_empty() {
            return Ok(0);
        }
        type Lines = Vec<(u32, u64)>;
        let (acc, err): (Lines, Lines) = self
            .wanted
            .values()
            .copied()
            .partition(|(f, _)| (*f as usize) < h.n_access);
        let recs = h.fetch_errors(&err)?;
        let lines = h.fetch_access(fmt, &acc, stats)?;
        let gone = || "(the line can no longer be read: the file changed)".to_string();
        let text = |at: &str| -> Option<String> {
            let k = self.wanted.get(at)?;
            Some(if (k.0 as usize) < h.n_access {
                lines
                    .get(k)
                    .map(|b| trunc(&String::from_utf8_lossy(b), 300))
                    .unwrap_or_else(gone)
            } else {
                recs.get(k).map(err_text).unwrap_or_else(gone)
            })
        };
        let evs = incidents
            .iter_mut()
            .flat_map(|i| i.evidence.iter_mut())
            .chain(signatures.iter_mut().map(|s| &mut s.first));
        for e in evs {
            if e.text.is_empty()
                && let Some(t) = text(&e.at)
            {
                e.text = t;
            }
        }
        Ok(recs.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(t_ms: i64) -> ERef {
        ERef::new(t_ms, 0, t_ms as u64)
    }

    /// A buffered line takes 48 bytes, and a key's list no more than its deque: an outage
    /// buffers hundreds of thousands.
    #[test]
    fn a_buffered_line_is_small() {
        assert_eq!(std::mem::size_of::<(ERef, Option<Pairable>)>(), 48);
        assert_eq!(std::mem::size_of::<KeyList>(), 32);
        assert_eq!(std::mem::size_of::<ERef>(), 16);
        // A failure waiting for the pairing holds no line of its own yet: 128 bytes.
        assert_eq!(std::mem::size_of::<Failure>(), 128);
        assert!(Failure::default().err.is_none());
        assert!(super::super::failure::ErrLines::default().boxed().is_none());
    }

    /// A reference orders as (time, file, line) does, and a span holds every line of its
    /// times, whatever its file and line.
    #[test]
    fn a_reference_orders_as_time_file_and_line() {
        let refs = [
            (5, 0, 1),
            (5, 0, 9),
            (5, 1, 1),
            (5, 65_535, (1 << 48) - 1),
            (6, 0, 1),
        ];
        for w in refs.windows(2) {
            let (a, b) = (w[0], w[1]);
            assert!(
                ERef::new(a.0, a.1, a.2) < ERef::new(b.0, b.1, b.2),
                "{a:?} < {b:?}"
            );
        }
        for (t, f, l) in refs {
            let r = ERef::new(t, f, l);
            assert_eq!((r.t_ms, r.file(), r.line()), (t, f, l));
            let (lo, hi) = ERef::span(t, t);
            assert!(lo <= r && r <= hi);
            assert!(ERef::span(t + 1, t + 1).0 > r && ERef::span(t - 1, t - 1).1 < r);
        }
    }

    /// A key's list goes from one inline line to a list and back, in merged order, and says
    /// when it is empty; a hash of 0 is found as the one it is kept as.
    #[test]
    fn a_key_list_keeps_its_lines_in_order() {
        let mut pool = Vec::new();
        let mut l = KeyList::One(at(5));
        l.add(at(9), &mut pool);
        l.add(at(7), &mut pool);
        let span = |l: &KeyList, a, b| {
            let mut out = Vec::new();
            l.extend_span(at(a), at(b), &mut out);
            out.iter().map(|k| k.t_ms).collect::<Vec<_>>()
        };
        assert_eq!(span(&l, 0, 100), [5, 7, 9]);
        assert_eq!(span(&l, 6, 8), [7]);
        assert!(!l.remove(at(5), &mut pool));
        assert!(!l.remove(at(9), &mut pool));
        assert!(matches!(l, KeyList::One(k) if k == at(7)));
        assert_eq!(pool.len(), 1, "the emptied list is kept for reuse");
        assert!(l.remove(at(7), &mut pool));

        let mut w = PairWindow::new(Index::Text);
        w.insert(
            at(1000),
            Pairable::new(1, Sig::Other, Some(0), Some(0), Some(0)),
        );
        assert_eq!(w.by_client(0, None, 0, 2000), [at(1000)]);
        let p = w.get(&at(1000));
        assert!(p.same_client(Some(0)) && p.same_request(Some(0)));
        assert_eq!((p.client(), p.upstream_host()), (Some(1), Some(0)));
    }

    /// Lines older than [`HOT_MS`] behind the newest leave the key map for the cold chunks,
    /// and a query finds what it found before: its lines in merged order, a cold line taken
    /// not again, a late line in the map among the cold ones; a chunk goes with its last line.
    #[test]
    fn a_cold_line_is_found_as_a_hot_one_was() {
        // A line every 100 ms for 30 s, of clients 1 and 2 by turns, request 7 or 8.
        let line = |t: i64| {
            let c = 1 + (t / 100) as u64 % 2;
            Pairable::new(c, Sig::Other, Some(6 + c), Some(c), None)
        };
        for index in [Index::Text, Index::Cid] {
            let mut w = PairWindow::new(index);
            for t in (0..30_000).step_by(100) {
                w.insert(at(t), line(t));
            }
            assert!(
                !w.cold.is_empty() && w.keys.len() <= 4,
                "{} keys",
                w.keys.len()
            );
            // A late line of client 1, far behind: it stays in the map.
            w.insert(at(2_050), line(0));
            let query = |w: &PairWindow, lo, hi| match index {
                Index::Text => w.by_client(1, Some(7), lo, hi),
                Index::Cid => w.by_cid(1, lo, hi),
            };
            let want: Vec<ERef> = (1_000..=25_000)
                .step_by(100)
                .filter(|t| (t / 100) % 2 == 0)
                .chain([2_050])
                .map(at)
                .collect::<BTreeSet<_>>()
                .into_iter()
                .collect();
            assert_eq!(query(&w, 1_000, 25_000), want);
            // A cold line taken is not found again; nor, set aside, while aside.
            assert!(w.get(&at(3_000)).cold);
            w.take(&at(3_000));
            assert!(!query(&w, 1_000, 25_000).contains(&at(3_000)));
            w.with_aside(|w| {
                w.take(&at(3_200));
                assert!(!query(w, 1_000, 25_000).contains(&at(3_200)));
            });
            assert!(query(&w, 1_000, 25_000).contains(&at(3_200)));
            // Evicted with their lines, chunks and all.
            w.evict_before(12_000);
            assert!(w.cold.front().is_some_and(|c| c.last.t_ms >= 12_000));
            assert_eq!(query(&w, 0, 12_000), [at(12_000)]);
        }
    }

    /// Taken lines leave no holes for long, in the lines or in the cold chunks, and what is
    /// left is found as before: 60 s of 1,000 lines a second, all but every hundredth taken
    /// 3 s after it came (paired behind, cold by then), nothing evicted.
    #[test]
    fn taken_lines_leave_no_holes_for_long() {
        for index in [Index::Text, Index::Cid] {
            let mut w = PairWindow::new(index);
            let line = Pairable::new(1, Sig::Other, Some(7), Some(1), None);
            let mut most = 0;
            for t in 0..60_000 {
                w.insert(at(t), line.clone());
                let old = t - 3_000;
                if old >= 0 && old % 100 != 0 {
                    w.take(&at(old));
                }
                most = most.max(w.lines.len());
            }
            assert!(most <= 2 * 3_600 + COMPACT_SLACK + 1, "{most} lines held");
            let cold: usize = w.cold.iter().map(|c| c.keys.len()).sum();
            assert!(cold <= 2 * (w.live + COMPACT_SLACK), "{cold} cold keys");
            let want: Vec<ERef> = (0..57_000).step_by(100).map(at).collect();
            let got = match index {
                Index::Text => w.by_client(1, Some(7), 0, 56_999),
                Index::Cid => w.by_cid(1, 0, 56_999),
            };
            assert_eq!(got, want);
        }
    }
}
