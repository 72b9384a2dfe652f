//! The pass over the access logs: one streamed read that keeps the failures, per-key counts in
//! 100 ms buckets, the chart timeline, and the success segments that swap inference needs.

use super::errors::Index;
use super::failure::{Failure, Keys, Traj, parse_traj};
use super::pairing::Pairer;
use super::swaps::{Seg, Segments};
use crate::TimeRange;
use crate::timeline::{Outcome, Timeline};
use crate::verdict::PassCounts;
use resolvelab_history::access::AccessLine;
use resolvelab_history::logformat::{Field, LogFormat};
use resolvelab_history::{FileStats, History, time};
use std::collections::{BTreeMap, HashMap};

/// Slots of [`Reader::recent`].
const RECENT: usize = 64;

/// Bucket width of the per-upstream request counts.
pub(super) const BUCKET_MS: i64 = 100;

/// What the access pass keeps.
#[derive(Default, Clone)]
pub(super) struct AccessPass {
    pub keys: Keys,
    pub trajs: Vec<Traj>,
    /// Address → the group its NLU trajectories named.
    pub addr_group: HashMap<String, String>,
    /// (bucket << 12 | key, [requests, failed, nlu]) in arrival order; a bucket revisited by
    /// out-of-order lines simply appears twice and is summed when grouped.
    pub counts: Vec<(u64, [u32; 3])>,
    pub timeline: Timeline,
    /// Requests per status (see [`AccessPass::statuses`]).
    status: BTreeMap<u16, u64>,
    /// Per key (an upstream address or group), requests by [`status_class`].
    pub key_status: Vec<[u64; 6]>,
    /// Statuses below 1000 counted without a map lookup.
    status_counts: Vec<u64>,
    /// Requests read (context included).
    pub requests: u64,
    /// What the diagnosis speaks for ([`crate::TimeRange`]): the requests in its range, the
    /// first and last of their times. The counts above and below (statuses, per-key status
    /// classes, the timeline, passes) hold those requests only; the rest holds every line.
    pub counted: Counted,
    /// The error log's clock, decided at the first line.
    pub clock: Option<Clock>,
    /// Success segments per serving address.
    pub segs: Vec<Seg>,
    /// Segments of tries per address, failed ones too.
    pub tried: Vec<Seg>,
    pub first_ms: i64,
    pub last_ms: i64,
    pub passes: PassCounts,
    pub files: Vec<FileStats>,
    /// The fields the lines held (`1 << Field`), for a format that does not say (bare `json`).
    pub seen: u32,
    /// Requests whose `$upstream_addr` held a token that is neither an address nor a group
    /// (a redaction): their trajectories are unknown.
    pub unknown_addr: u64,
}

/// The requests in a diagnosis's range.
#[derive(Clone, Copy)]
pub(super) struct Counted {
    pub requests: u64,
    pub first_ms: i64,
    pub last_ms: i64,
}

impl Default for Counted {
    fn default() -> Counted {
        Counted {
            requests: 0,
            first_ms: i64::MAX,
            last_ms: i64::MIN,
        }
    }
}

impl Counted {
    /// The first and last request's times, if any.
    pub fn span(&self) -> Option<(i64, i64)> {
        (self.requests > 0).then_some((self.first_ms, self.last_ms))
    }
}

impl AccessPass {
    /// Requests per status.
    pub fn statuses(&self) -> BTreeMap<u16, u64> {
        let mut m = self.status.clone();
        for (st, &n) in self.status_counts.iter().enumerate() {
            if n > 0 {
                *m.entry(st as u16).or_default() += n;
            }
        }
        m
    }
}

/// The status classes, by [`status_class`] index.
pub(super) const STATUS_CLASSES: [&str; 6] = ["other", "1xx", "2xx", "3xx", "4xx", "5xx"];

/// A status's index in [`STATUS_CLASSES`] (`502` → 5; 0 or 600+ → 0, `other`).
pub(super) fn status_class(status: u16) -> usize {
    match status / 100 {
        c @ 1..=5 => c as usize,
        _ => 0,
    }
}

/// The error log's UTC offset (its times are local and carry none) and where it came from.
#[derive(Clone, Copy)]
pub(super) struct Clock {
    pub offset_s: i32,
    pub source: &'static str,
}

impl Clock {
    /// From the first access line's `$time_local` offset, else `--tz-offset`, else the
    /// machine's offset at that time (`at_ms`; none: the epoch).
    pub fn of(seen: Option<i32>, flag: Option<i32>, at_ms: Option<i64>) -> Clock {
        let (offset_s, source) = match (seen, flag) {
            (Some(o), _) => (o, "time_local"),
            (None, Some(o)) => (o, "flag"),
            (None, None) => (
                time::machine_offset_at(at_ms.unwrap_or(0) / 1000),
                "machine",
            ),
        };
        Clock { offset_s, source }
    }
}

/// The pass's working state besides what it keeps: fed one line at a time, by [`read`] from a
/// history's files or by [`super::incremental::Incremental`] from memory.
#[derive(Default)]
pub(super) struct Reader<'h> {
    /// The history whose error logs the pairer reads (none: it reads from memory).
    hist: Option<&'h History>,
    /// The lines, not the format, say which fields there are.
    learn_fields: bool,
    tz_flag: Option<i32>,
    /// What is counted (the rest is context).
    range: Option<TimeRange>,
    out: AccessPass,
    pub pairer: Pairer,
    traj_ids: TrajIds,
    served: Segments,
    tried: Segments,
    cur_bucket: i64,
    cur_ms: std::ops::Range<i64>,
    cur_counts: Vec<[u32; 3]>,
    dirty: Vec<u32>,
}

/// How error lines are found for pairing: by `*cid` when the format logs `$connection`.
pub(super) fn index_of(fmt: &LogFormat) -> Index {
    if fmt.has(Field::Connection) {
        Index::Cid
    } else {
        Index::Text
    }
}

/// Read every access log once, pairing its failures on the way.
pub(super) fn read(
    hist: &History,
    fmt: &LogFormat,
    tz_flag: Option<i32>,
    range: Option<TimeRange>,
) -> anyhow::Result<(AccessPass, Pairer)> {
    let mut stream = hist.access_stream(fmt)?;
    let mut r = Reader::new(Some(hist), fmt, tz_flag, Pairer::new(index_of(fmt)));
    r.count_only(range);
    while let Some(a) = stream.next() {
        r.line(&a)?;
    }
    let (mut out, pairer) = r.finish();
    out.files = stream.finish();
    if out.clock.is_none() {
        out.clock = Some(Clock::of(None, tz_flag, None));
    }
    Ok((out, pairer))
}

impl<'h> Reader<'h> {
    /// A reader of lines in `fmt`, its failures paired by `pairer` (whose error lines come
    /// from `hist`, or from memory). It counts every line unless told a range
    /// ([`Reader::count_only`]).
    pub fn new(
        hist: Option<&'h History>,
        fmt: &LogFormat,
        tz_flag: Option<i32>,
        pairer: Pairer,
    ) -> Reader<'h> {
        Reader {
            hist,
            learn_fields: !fmt.fields_known(),
            tz_flag,
            pairer,
            cur_bucket: i64::MIN,
            out: AccessPass {
                status_counts: vec![0; 1000],
                first_ms: i64::MAX,
                last_ms: i64::MIN,
                ..AccessPass::default()
            },
            ..Reader::default()
        }
    }

    /// Count only the lines in `range`; read the others as context.
    pub fn count_only(&mut self, range: Option<TimeRange>) {
        self.range = range;
        self.pairer.set_range(range);
    }

    /// What [`Reader::finish`] would give were the lines to end here (`files`: the access
    /// streams' statistics), this reader reading on.
    pub fn detach(&mut self, files: Vec<FileStats>) -> (AccessPass, Pairer) {
        // A bucket counted again later appears twice in `counts`, which sums them.
        self.flush_bucket();
        let mut out = self.out.clone();
        out.segs = self.served.clone().finish();
        out.tried = self.tried.clone().finish();
        out.files = files;
        out.clock
            .get_or_insert_with(|| Clock::of(None, self.tz_flag, None));
        let pairer = self.pairer.detach(&self.out.trajs);
        (out, pairer)
    }

    pub fn line(&mut self, a: &AccessLine<'_>) -> anyhow::Result<()> {
        let o = &mut self.out;
        o.requests += 1;
        let t_ms = a.t_us / 1000;
        o.first_ms = o.first_ms.min(t_ms);
        o.last_ms = o.last_ms.max(t_ms);
        if self.learn_fields {
            if o.seen == 0 {
                // The first line decides how error lines are indexed.
                let index = if a.connection().is_some() {
                    Index::Cid
                } else {
                    Index::Text
                };
                self.pairer.set_index(index);
            }
            o.seen |= a.fields();
        }
        let clock = *o
            .clock
            .get_or_insert_with(|| Clock::of(a.utc_offset_s, self.tz_flag, Some(t_ms)));
        if let Some(off) = a.utc_offset_s {
            self.pairer
                .observe_offset(t_ms.div_euclid(1000), off, clock.offset_s);
        }
        let st = a.status().unwrap_or(0);
        let tid = self.traj_id(a);
        let traj = tid.map(|i| &self.out.trajs[i as usize]);
        let nlu = traj.is_some_and(|t| t.nlu);
        self.out.unknown_addr += traj.is_some_and(|t| t.unknown) as u64;
        let failed = nlu || st == 502 || st == 504;
        let latency = a.request_time_us();
        if let Some(t) = traj {
            for &k in &t.tried {
                self.tried.touch(k, t_ms);
            }
        }
        let internal = traj.is_some_and(|t| !t.internal.is_empty());
        let key = traj.and_then(|t| t.key);
        let counted = TimeRange::holds(self.range, t_ms);
        if counted {
            self.count_request(t_ms, st, tid, (failed, nlu), latency);
        }
        if let Some(key) = key {
            self.count(key, t_ms, failed, nlu);
            if counted {
                let ks = &mut self.out.key_status;
                if ks.len() <= key as usize {
                    ks.resize(key as usize + 1, [0; 6]);
                }
                ks[key as usize][status_class(st)] += 1;
            }
        }
        if failed || internal {
            self.keep(a, (t_ms, st, latency), tid, failed, nlu);
        }
        self.advance(t_ms, clock)
    }

    /// What a request in the range adds to the counts: its status, its bin of the timeline,
    /// its passes.
    fn count_request(
        &mut self,
        t_ms: i64,
        st: u16,
        tid: Option<u32>,
        (failed, nlu): (bool, bool),
        latency: Option<i64>,
    ) {
        let o = &mut self.out;
        o.counted.requests += 1;
        o.counted.first_ms = o.counted.first_ms.min(t_ms);
        o.counted.last_ms = o.counted.last_ms.max(t_ms);
        match o.status_counts.get_mut(st as usize) {
            Some(c) => *c += 1,
            None => *o.status.entry(st).or_default() += 1,
        }
        let outcome = if nlu {
            Outcome::Nlu
        } else if failed {
            Outcome::Failed
        } else {
            Outcome::Ok
        };
        o.timeline.add(t_ms, outcome, latency);
        if let Some(t) = tid.map(|i| &o.trajs[i as usize]) {
            let p = &mut o.passes;
            p.max_passes = p.max_passes.max(t.passes as u64);
            p.multi_pass += (t.passes > 1) as u64;
            p.rescued += (!t.internal.is_empty() && !failed) as u64;
        }
    }

    /// The failures of a kept line: its internal NLUs (earlier passes) and, if it failed, the
    /// request itself.
    fn keep(
        &mut self,
        a: &AccessLine<'_>,
        (t_ms, st, latency): (i64, u16, Option<i64>),
        tid: Option<u32>,
        failed: bool,
        nlu: bool,
    ) {
        // What every failure of this line shares, read from its fields once.
        let method = self.pairer.store.method_id(a.method());
        let base = failure(a, method, t_ms, st, tid, latency);
        let Some(t) = tid.map(|i| &self.out.trajs[i as usize]) else {
            self.pairer.push(base);
            return;
        };
        for (k, (ih, ig, _)) in t.internal.iter().enumerate() {
            self.pairer.push(Failure {
                group: ig.clone(),
                nlu: true,
                hops: *ih,
                internal: true,
                pass: (k + 1).min(u8::MAX as usize) as u8,
                ..base.clone()
            });
        }
        if failed {
            self.pairer.push(Failure {
                nlu,
                hops: if nlu { t.hops.len() as u32 } else { 0 },
                ..base
            });
        }
    }

    #[inline]
    fn advance(&mut self, t_ms: i64, clock: Clock) -> anyhow::Result<()> {
        self.pairer
            .advance(t_ms, self.hist, clock.offset_s, &self.out.trajs)
    }

    fn traj_id(&mut self, a: &AccessLine<'_>) -> Option<u32> {
        let o = &mut self.out;
        self.traj_ids
            .id(a, &mut o.keys, &mut o.trajs, &mut o.addr_group)
    }

    /// Count one request of `key` and extend its success segment.
    fn count(&mut self, key: u32, t_ms: i64, failed: bool, nlu: bool) {
        // Lines come (nearly) in time order: count into the current 100 ms bucket and hash only
        // when the bucket changes.
        // The current bucket's times are `cur_ms` (no division for the lines inside it).
        if !self.cur_ms.contains(&t_ms) {
            let bucket = t_ms.div_euclid(BUCKET_MS);
            if bucket != self.cur_bucket {
                self.flush_bucket();
                self.cur_bucket = bucket;
            }
            self.cur_ms = bucket * BUCKET_MS..(bucket + 1) * BUCKET_MS;
        }
        let k = key as usize;
        if k >= self.cur_counts.len() {
            self.cur_counts.resize(k + 1, [0; 3]);
        }
        let c = &mut self.cur_counts[k];
        if c[0] == 0 {
            self.dirty.push(key);
        }
        c[0] += 1;
        c[1] += failed as u32;
        c[2] += nlu as u32;
        if failed {
            return;
        }
        self.served.touch(key, t_ms);
    }

    fn flush_bucket(&mut self) {
        for &k in &self.dirty {
            let c = &mut self.cur_counts[k as usize];
            self.out
                .counts
                .push((((self.cur_bucket as u64) << 12) | k as u64, *c));
            *c = [0; 3];
        }
        self.dirty.clear();
    }

    fn finish(mut self) -> (AccessPass, Pairer) {
        self.flush_bucket();
        self.out.segs = std::mem::take(&mut self.served).finish();
        self.out.tried = std::mem::take(&mut self.tried).finish();
        (self.out, self.pairer)
    }
}

/// Trajectory ids by `$upstream_addr` value: each distinct value parsed once. Shared by the
/// access pass and the [`super::tally::Tally`], so that both read a value alike.
#[derive(Default, Clone)]
pub(super) struct TrajIds {
    /// Trajectory ids by [`AccessLine::upstream_key`].
    ids: rustc_hash::FxHashMap<u64, u32>,
    /// The trajectory ids of recent keys by the keys' low bits, `(key, id + 1)` (`id + 1` 0:
    /// empty): a log's lines alternate between a few `$upstream_addr` values, and a slot
    /// compare costs less than the map's probe.
    recent: Vec<(u64, u32)>,
}

impl TrajIds {
    /// The trajectory id of a line's `$upstream_addr` (known by its
    /// [`AccessLine::upstream_key`]), its trajectory parsed into `trajs` the first time. With
    /// `$proxy_upstream_name` (ingress-nginx) the addresses of a new trajectory belong to the
    /// group it names.
    pub fn id(
        &mut self,
        a: &AccessLine<'_>,
        keys: &mut Keys,
        trajs: &mut Vec<Traj>,
        addr_group: &mut HashMap<String, String>,
    ) -> Option<u32> {
        let key = a.upstream_key()?;
        let slot = (key ^ key >> 32) as usize % RECENT;
        if let Some(&(k, id1)) = self.recent.get(slot)
            && k == key
            && id1 != 0
        {
            return Some(id1 - 1);
        }
        let id = match self.ids.get(&key) {
            Some(&id) => id,
            None => {
                let b = a.get(Field::UpstreamAddr).unwrap_or_default();
                let mut t = parse_traj(&String::from_utf8_lossy(b), keys);
                // ingress-nginx names the group in `$proxy_upstream_name`, and its Lua
                // balancer never writes one into `$upstream_addr`: a name there is no group.
                if upstream_name(a).is_some() {
                    t.group_is_unknown();
                }
                if let Some(g) = t.group.as_deref().or_else(|| upstream_name(a)) {
                    for ad in &t.addrs {
                        addr_group
                            .entry(ad.clone())
                            .or_insert_with(|| g.to_string());
                    }
                }
                trajs.push(t);
                let id = (trajs.len() - 1) as u32;
                self.ids.insert(key, id);
                id
            }
        };
        if self.recent.is_empty() {
            self.recent = vec![(0, 0); RECENT];
        }
        self.recent[slot] = (key, id + 1);
        Some(id)
    }
}

/// `$proxy_upstream_name`, when logged and set.
fn upstream_name<'a>(a: &AccessLine<'a>) -> Option<&'a str> {
    a.text(Field::ProxyUpstreamName)
        .filter(|v| !v.is_empty() && *v != "-")
}

/// A failed request as its access line shows it (not paired, not classified yet); its group is
/// the `$proxy_upstream_name` that names it, if any.
fn failure(
    a: &AccessLine<'_>,
    method: u16,
    t_ms: i64,
    status: u16,
    traj: Option<u32>,
    latency_us: Option<i64>,
) -> Failure {
    Failure {
        t_ms,
        start_ms: t_ms - latency_us.unwrap_or(0) / 1000,
        status,
        traj,
        file: a.file,
        line: a.line,
        conn: a.connection(),
        method,
        request: a.request_hash(),
        remote: a.remote_hash(),
        group: upstream_name(a).map(str::to_string).unwrap_or_default(),
        ..Failure::default()
    }
}
