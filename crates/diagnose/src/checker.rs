//! The checker: stream the access logs once, pair failures with error-log lines, find swaps,
//! cluster failures into incidents and classify each one (DOMAIN.md §3–§4).

use crate::classes;
use crate::classify::{Facts, classify};
use crate::evidence::{self, Present, RuntimeFacts, SwapSource};
use crate::model::*;
use crate::timeline::{Outcome, Timeline};
use resolvelab_history::logformat::{Field, LogFormat};
use resolvelab_history::{ErrorRecord, ErrorStream, History, Sources, time};
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;

/// What to diagnose.
#[derive(Debug, Clone)]
pub struct Options {
    /// Access logs.
    pub access: Vec<PathBuf>,
    /// Error logs.
    pub error: Vec<PathBuf>,
    /// `dns.jsonl` files.
    pub dns: Vec<PathBuf>,
    /// `events.jsonl` files.
    pub events: Vec<PathBuf>,
    /// The access-log format.
    pub log_format: LogFormat,
    /// Only this upstream group's failures.
    pub upstream: Option<String>,
    /// The error log's UTC offset when `$time_local` is not in the access log (seconds east).
    pub tz_offset_s: Option<i32>,
    /// The nginx version, when known: below 1.27.3 no generation race is possible.
    pub nginx_version: Option<resolvelab_core::version::Version>,
    /// What the configuration resolves at run time, when it was read.
    pub config: Option<RuntimeFacts>,
}

impl Options {
    /// Options for access + error logs in the `combined` format.
    pub fn new(access: Vec<PathBuf>, error: Vec<PathBuf>) -> Options {
        Options {
            access,
            error,
            dns: Vec::new(),
            events: Vec::new(),
            log_format: LogFormat::combined(),
            upstream: None,
            tz_offset_s: None,
            nginx_version: None,
            config: None,
        }
    }
}

/// Failures within this gap (ms) belong to one cluster.
const CLUSTER_GAP_MS: i64 = 1000;
/// A cluster longer than this whose last stretch of this length is mostly successes is a steady
/// trickle, not one incident: it is cut there.
const TRICKLE_SPAN_MS: i64 = 10_000;

/// A cluster `span_ms` long whose last [`TRICKLE_SPAN_MS`] had `(requests, failed)`: a trickle
/// when under half failed (or, without an access log, when nothing says it was a burst).
fn trickle(span_ms: i64, (requests, failed): (u64, u64)) -> bool {
    span_ms > TRICKLE_SPAN_MS && failed * 2 < requests.max(1)
}
/// A success gap (ms) that ends an address's activity segment (swap inference).
const SEGMENT_GAP_MS: i64 = 1500;
/// Bucket width of the per-upstream request counts.
const BUCKET_MS: i64 = 100;
const MAX_KEYS: u32 = 4095;
const MAX_NLU_EVENTS: usize = 5000;
const MAX_SWAPS_LISTED: usize = 1000;
const MAX_ZOOMS: usize = 20;

struct Traj {
    /// Hops of the last pass.
    hops: Vec<String>,
    nlu: bool,
    /// Key for counting: the last real address, or the group for NLU.
    key: Option<u32>,
    /// Real addresses of the last pass (tried before the NLU).
    addrs: Vec<String>,
    group: Option<String>,
    /// Passes (`error_page … = @named` redirects separate them with ` : `).
    passes: u32,
    /// NLUs that ended an earlier pass: (hops, group, real addresses of that pass).
    internal: Vec<(u32, String, Vec<String>)>,
}

fn is_addr(h: &str) -> bool {
    h.starts_with("unix:") || h.parse::<std::net::SocketAddr>().is_ok()
}

#[derive(Default)]
struct Keys {
    ids: HashMap<String, u32>,
    names: Vec<String>,
}

impl Keys {
    fn id(&mut self, s: &str) -> u32 {
        if let Some(&i) = self.ids.get(s) {
            return i;
        }
        let i = (self.names.len() as u32).min(MAX_KEYS);
        if i < MAX_KEYS {
            self.ids.insert(s.to_string(), i);
            self.names.push(s.to_string());
        }
        i
    }
}

fn split_hops(pass: &str) -> Vec<String> {
    pass.split(", ")
        .map(str::trim)
        .filter(|h| !h.is_empty() && *h != "-")
        .map(str::to_string)
        .collect()
}

fn parse_traj(s: &str, keys: &mut Keys) -> Traj {
    let all: Vec<&str> = s.split(" : ").collect();
    let last = all.last().copied().unwrap_or(s);
    let internal = all[..all.len().saturating_sub(1)]
        .iter()
        .filter_map(|p| {
            let h = split_hops(p);
            let g = h.last().filter(|g| !is_addr(g))?.clone();
            let addrs = h.iter().filter(|x| is_addr(x)).cloned().collect();
            Some((h.len() as u32, g, addrs))
        })
        .collect();
    let hops: Vec<String> = split_hops(last);
    let nlu = hops.last().is_some_and(|h| !is_addr(h));
    let addrs: Vec<String> = hops.iter().filter(|h| is_addr(h)).cloned().collect();
    let group = if nlu { hops.last().cloned() } else { None };
    let key = if nlu {
        group.as_deref().map(|g| keys.id(g))
    } else {
        addrs.last().map(|a| keys.id(a))
    };
    Traj {
        hops,
        nlu,
        key,
        addrs,
        group,
        passes: all.len() as u32,
        internal,
    }
}

#[derive(Clone)]
struct Failure {
    t_ms: i64,
    start_ms: i64,
    status: u16,
    traj: Option<u32>,
    file: u32,
    line: u64,
    conn: Option<u64>,
    method: Option<String>,
    request: Option<String>,
    remote: Option<String>,
    raw: String,
    group: String,
    nlu: bool,
    hops: u32,
    /// The error line paired with the request (its NLU line, else its first-try line) and its
    /// signature.
    paired: Option<(ERef, &'static str)>,
    /// First-try failure lines of the same `*cid` in the request's window.
    first_try: Vec<(ERef, &'static str)>,
    /// Its own resolution's failure line (`*cid … could not be resolved`, per-request DNS).
    own_dns: Option<(ERef, &'static str)>,
    class: &'static str,
    confidence: f64,
    /// An NLU inside an earlier pass of a redirected request (not a client-visible failure).
    internal: bool,
    /// Real addresses tried in the NLU's pass (to see whether it went through a pre-swap peer).
    addrs: Vec<String>,
}

impl Default for Failure {
    /// Not paired, not classified yet (classification overwrites `class`).
    fn default() -> Failure {
        Failure {
            t_ms: 0,
            start_ms: 0,
            status: 0,
            traj: None,
            file: 0,
            line: 0,
            conn: None,
            method: None,
            request: None,
            remote: None,
            raw: String::new(),
            group: String::new(),
            nlu: false,
            hops: 0,
            paired: None,
            first_try: Vec::new(),
            own_dns: None,
            class: "undetermined",
            confidence: 0.0,
            internal: false,
            addrs: Vec::new(),
        }
    }
}

/// A change of a name's peer list: a swap, or the peers removed by NXDOMAIN / restored after it.
/// Each one bumps nginx's generation counter (DOMAIN.md F4).
struct Change {
    t_ms: i64,
    direction: String,
    /// IPs before the change (empty when there were none).
    old: Vec<String>,
    dns_idx: Option<usize>,
}

/// The IP of `IP:port` / `[v6]:port` (or the text itself).
fn host_of(a: &str) -> String {
    a.parse::<std::net::SocketAddr>()
        .map(|s| s.ip().to_string())
        .unwrap_or_else(|_| a.to_string())
}

struct Seg {
    key: u32,
    start: i64,
    end: i64,
}

/// How far (ms) past a failure's end the error stream is read before pairing it, so that a line
/// written slightly out of order (several workers share one file) still finds its request.
const REORDER_SLACK_MS: i64 = 5000;
/// At most this many error lines wait in the pairing window (a safety net: the window is
/// normally bounded by the longest request).
pub const MAX_BUFFERED: usize = 200_000;

/// One error line by its place in the merged order: time (ms), file, line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct ERef {
    t_ms: i64,
    file: u32,
    line: u64,
}

/// What pairing needs of a buffered error line.
struct Pairable {
    cid: u64,
    sig: &'static str,
    request: Option<String>,
    client: Option<String>,
    upstream_host: Option<String>,
}

/// The error lines that may still pair with a pending failure, ordered like the merged stream
/// and indexed by `*cid`.
#[derive(Default)]
struct PairWindow {
    lines: BTreeMap<ERef, Pairable>,
    cids: std::collections::BTreeSet<(u64, ERef)>,
    max_len: usize,
    dropped: u64,
}

impl ERef {
    /// The first and last possible references of the time window `lo..=hi` (ms).
    fn span(lo: i64, hi: i64) -> (ERef, ERef) {
        (
            ERef {
                t_ms: lo,
                file: 0,
                line: 0,
            },
            ERef {
                t_ms: hi,
                file: u32::MAX,
                line: u64::MAX,
            },
        )
    }
}

impl PairWindow {
    fn insert(&mut self, k: ERef, p: Pairable) {
        self.cids.insert((p.cid, k));
        self.lines.insert(k, p);
        if self.lines.len() > MAX_BUFFERED
            && let Some((k, p)) = self.lines.pop_first()
        {
            self.cids.remove(&(p.cid, k));
            self.dropped += 1;
        }
        self.max_len = self.max_len.max(self.lines.len());
    }

    fn evict_before(&mut self, t_ms: i64) {
        while let Some(e) = self.lines.first_entry() {
            if e.key().t_ms >= t_ms {
                break;
            }
            let (k, p) = e.remove_entry();
            self.cids.remove(&(p.cid, k));
        }
    }

    fn get(&self, k: &ERef) -> &Pairable {
        &self.lines[k]
    }

    fn take(&mut self, k: &ERef) -> Pairable {
        let p = self.lines.remove(k).expect("a candidate is in the window");
        self.cids.remove(&(p.cid, *k));
        p
    }

    fn by_cid(&self, cid: u64, lo: i64, hi: i64) -> Vec<ERef> {
        let (a, b) = ERef::span(lo, hi);
        self.cids
            .range((cid, a)..=(cid, b))
            .map(|(_, k)| *k)
            .collect()
    }

    fn by_time(&self, lo: i64, hi: i64) -> impl Iterator<Item = (ERef, &Pairable)> {
        let (a, b) = ERef::span(lo, hi);
        self.lines.range(a..=b).map(|(k, p)| (*k, p))
    }
}

/// Per signature: count, first line, and per second (error-log resolution) the first line and
/// the count — bounded by the span of the logs in seconds, not by their size.
struct SigIndex {
    count: Vec<u64>,
    first: Vec<Option<ERef>>,
    per_sec: Vec<BTreeMap<i64, (ERef, u64)>>,
    /// The second being counted per signature (lines come in time order): flushed into
    /// `per_sec` when the second changes, so the map is touched once per second.
    cur: Vec<Option<(i64, ERef, u64)>>,
    /// `NAME could not be resolved` lines: the distinct seconds per name (re-query period
    /// without a DNS log), with the last second added.
    unresolved: HashMap<String, (i64, std::collections::BTreeSet<i64>)>,
    /// The last distinct messages and what they are: (message, signature, length of the name
    /// before ` could not be resolved`). Messages repeat (the context is not part of them), so
    /// most lines skip the substring searches.
    memo: Vec<(String, Option<usize>, Option<usize>)>,
    memo_next: usize,
}

const MEMO: usize = 16;

impl Default for SigIndex {
    fn default() -> SigIndex {
        let n = classes::SIGNATURES.len();
        SigIndex {
            count: vec![0; n],
            first: vec![None; n],
            per_sec: vec![BTreeMap::new(); n],
            cur: vec![None; n],
            unresolved: HashMap::new(),
            memo: Vec::with_capacity(MEMO),
            memo_next: 0,
        }
    }
}

impl SigIndex {
    fn classify(&mut self, message: &str) -> (Option<usize>, Option<usize>) {
        if let Some(m) = self.memo.iter().find(|m| m.0 == message) {
            return (m.1, m.2);
        }
        let v = (
            classes::signature_index(message),
            message.find(" could not be resolved"),
        );
        let entry = (message.to_string(), v.0, v.1);
        if self.memo.len() < MEMO {
            self.memo.push(entry);
        } else {
            self.memo[self.memo_next] = entry;
            self.memo_next = (self.memo_next + 1) % MEMO;
        }
        v
    }

    /// Index one line; returns its signature id.
    fn add(&mut self, e: &ErrorRecord) -> &'static str {
        let k = ERef {
            t_ms: e.t_us / 1000,
            file: e.file,
            line: e.line,
        };
        let (sig, unresolved) = self.classify(&e.message);
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
        let Some(si) = sig else {
            return "other";
        };
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
        classes::SIGNATURES[si].id
    }

    fn flush(m: &mut BTreeMap<i64, (ERef, u64)>, t: i64, r: ERef, n: u64) {
        let e = m.entry(t).or_insert((r, 0));
        e.0 = e.0.min(r);
        e.1 += n;
    }

    /// Flush the seconds being counted (after the last line).
    fn finish(&mut self) {
        for si in 0..self.cur.len() {
            if let Some((t, r, n)) = self.cur[si].take() {
                Self::flush(&mut self.per_sec[si], t, r, n);
            }
        }
    }

    /// The first line (in merged order) of signature `id` between `a` and `b` ms.
    fn first_in(&self, id: &str, a: i64, b: i64) -> Option<ERef> {
        let si = classes::SIGNATURES.iter().position(|s| s.id == id)?;
        self.per_sec.get(si)?.range(a..=b).next().map(|(_, v)| v.0)
    }
}

/// Read the error stream up to `upto_ms`: index every line, and buffer the pairable ones
/// (a `*cid` and an NLU or first-try signature) not older than `keep_from_ms`.
fn feed_errors(
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
            && (sig == "no-live-upstreams"
                || classes::is_first_try_failure(sig)
                || classes::is_resolution_failure(sig))
        {
            win.insert(
                ERef {
                    t_ms,
                    file: e.file,
                    line: e.line,
                },
                Pairable {
                    cid,
                    sig,
                    request: e.request.clone(),
                    client: e.client.clone(),
                    upstream_host: e.upstream_host().map(str::to_string),
                },
            );
        }
    }
}

/// Without an access log, the failed requests are those the error log shows: one per `*cid`
/// and request whose lines (a failed try, `no live upstreams`, its own failed resolution) fall
/// within a second or two of each other. Whether a failed try was retried successfully only
/// the access log can tell; the evidence summary says so.
fn failures_from_errors(hist: &History, offset_s: i32) -> anyhow::Result<Vec<Failure>> {
    let mut errs = hist.error_stream(offset_s)?;
    let mut out: Vec<Failure> = Vec::new();
    let mut open: HashMap<(u64, Option<String>), usize> = HashMap::new();
    while let Some(e) = errs.next() {
        let sig = classes::signature_of(&e.message);
        let failing = sig == "no-live-upstreams"
            || classes::is_first_try_failure(sig)
            || classes::is_resolution_failure(sig);
        let Some(cid) = e.cid.filter(|_| failing) else {
            continue;
        };
        let t_ms = e.t_us / 1000;
        let r = ERef {
            t_ms,
            file: e.file,
            line: e.line,
        };
        let key = (cid, e.request.clone());
        let i = match open.get(&key) {
            Some(&i) if t_ms - out[i].start_ms <= 2000 => i,
            _ => {
                open.insert(key, out.len());
                out.push(error_failure(e, cid, sig));
                out.len() - 1
            }
        };
        // The failure's own lines are its evidence: they need no pairing (which a log in
        // reverse order, as log viewers export it, would miss).
        let f = &mut out[i];
        f.t_ms = f.t_ms.max(t_ms + 999);
        if sig == "no-live-upstreams" {
            f.nlu = true;
            f.paired = Some((r, sig));
        } else if classes::is_resolution_failure(sig) {
            f.own_dns = Some((r, sig));
        } else if f.first_try.len() < 3 {
            f.first_try.push((r, sig));
        }
    }
    Ok(out)
}

/// A failed request as one error line shows it (see [`failures_from_errors`]).
fn error_failure(e: &ErrorRecord, cid: u64, sig: &str) -> Failure {
    let t_ms = e.t_us / 1000;
    Failure {
        t_ms: t_ms + 999,
        start_ms: t_ms,
        status: if sig == "upstream-timeout" { 504 } else { 502 },
        traj: None,
        file: e.file,
        line: e.line,
        conn: Some(cid),
        method: e
            .request
            .as_deref()
            .and_then(|r| r.split(' ').next())
            .map(str::to_string),
        request: e.request.clone(),
        remote: e.client.clone(),
        raw: trunc(&err_text(e), 300),
        group: e
            .upstream_host()
            .filter(|h| !is_addr(h))
            .map(str::to_string)
            .unwrap_or_default(),
        ..Failure::default()
    }
}

/// Memory accounting of the streamed error-log pass (what a test or a benchmark asserts).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StreamStats {
    /// Error lines read (every file, merged).
    pub error_lines: u64,
    /// Lines that came after a later line of their file (several workers share a file).
    pub late_lines: u64,
    /// The most error lines buffered at once for pairing.
    pub max_buffered: usize,
    /// Lines dropped from a full pairing window (over its safety cap).
    pub dropped: u64,
    /// Error lines read a second time to quote them as evidence.
    pub fetched: usize,
}

/// Run the checker; also returns the loaded history (events, DNS) for the lab verdict.
pub fn diagnose_with_history(opts: &Options) -> anyhow::Result<(Diagnosis, History)> {
    diagnose_with_stats(opts).map(|(d, h, _)| (d, h))
}

/// Run the checker; also returns the loaded history and the memory accounting of the streamed
/// error-log pass.
pub fn diagnose_with_stats(opts: &Options) -> anyhow::Result<(Diagnosis, History, StreamStats)> {
    if opts.access.is_empty() && opts.error.is_empty() {
        anyhow::bail!(
            "no log given: pass --access FILE and --error FILE (several allowed, .gz ok); an error log alone also works"
        );
    }
    for p in opts
        .access
        .iter()
        .chain(&opts.error)
        .chain(&opts.dns)
        .chain(&opts.events)
    {
        if p.is_dir() {
            anyhow::bail!(
                "{} is a directory: pass the log files themselves (e.g. {}/access.log)",
                p.display(),
                p.display()
            );
        }
    }
    let fmt = &opts.log_format;
    if !opts.access.is_empty()
        && !fmt.has(Field::Msec)
        && !fmt.has(Field::TimeLocal)
        && !fmt.has(Field::TimeIso8601)
    {
        anyhow::bail!(
            "log_format `{}` has no $msec, $time_local or $time_iso8601, so requests cannot be placed in time; add $msec to the format",
            fmt.text
        );
    }
    let hist = History::load(&Sources {
        access: opts.access.clone(),
        error: opts.error.clone(),
        dns: opts.dns.clone(),
        events: opts.events.clone(),
    })?;

    // ---- pass over the access logs -------------------------------------------------------
    let mut stream = hist.access_stream(fmt)?;
    let mut keys = Keys::default();
    let mut trajs: Vec<Traj> = Vec::new();
    let mut traj_ids: HashMap<Vec<u8>, u32> = HashMap::new();
    let mut last_traj: (Vec<u8>, Option<u32>) = (Vec::new(), None);
    // (bucket << 12 | key, [requests, failed, nlu]) in arrival order; a bucket revisited by
    // out-of-order lines simply appears twice and is summed when grouped.
    let mut counts: Vec<(u64, [u32; 3])> = Vec::new();
    let mut timeline = Timeline::default();
    let mut failures: Vec<Failure> = Vec::new();
    let mut status: BTreeMap<u16, u64> = BTreeMap::new();
    let mut requests = 0u64;
    let mut offset_seen: Option<i32> = None;
    let mut addr_group: HashMap<String, String> = HashMap::new();
    let mut open_seg: Vec<Option<(i64, i64)>> = Vec::new();
    let mut cur_bucket = i64::MIN;
    let mut cur_counts: Vec<[u32; 3]> = Vec::new();
    let mut dirty: Vec<u32> = Vec::new();
    let mut segs: Vec<Seg> = Vec::new();
    let (mut first_ms, mut last_ms) = (i64::MAX, i64::MIN);
    let has_upstream = fmt.has(Field::UpstreamAddr);
    let mut passes = PassCounts::default();

    while let Some(a) = stream.next() {
        requests += 1;
        let t_ms = a.t_us / 1000;
        first_ms = first_ms.min(t_ms);
        last_ms = last_ms.max(t_ms);
        if offset_seen.is_none() {
            offset_seen = a.utc_offset_s;
        }
        let st = a.status().unwrap_or(0);
        *status.entry(st).or_default() += 1;
        let tid = match a.get(Field::UpstreamAddr) {
            Some(b) if b != b"-" && !b.is_empty() => {
                if last_traj.1.is_some() && last_traj.0 == b {
                    last_traj.1
                } else {
                    let id = match traj_ids.get(b) {
                        Some(&id) => id,
                        None => {
                            let t = parse_traj(&String::from_utf8_lossy(b), &mut keys);
                            if let Some(g) = &t.group {
                                for ad in &t.addrs {
                                    addr_group.entry(ad.clone()).or_insert_with(|| g.clone());
                                }
                            }
                            trajs.push(t);
                            let id = (trajs.len() - 1) as u32;
                            traj_ids.insert(b.to_vec(), id);
                            id
                        }
                    };
                    last_traj.0.clear();
                    last_traj.0.extend_from_slice(b);
                    last_traj.1 = Some(id);
                    Some(id)
                }
            }
            _ => None,
        };
        let traj = tid.map(|i| &trajs[i as usize]);
        let nlu = traj.is_some_and(|t| t.nlu);
        let failed = nlu || st == 502 || st == 504;
        let latency = a.request_time_us();
        timeline.add(
            t_ms,
            if nlu {
                Outcome::Nlu
            } else if failed {
                Outcome::Failed
            } else {
                Outcome::Ok
            },
            latency,
        );
        if let Some(key) = traj.and_then(|t| t.key) {
            // Lines come (nearly) in time order: count into the current 100 ms bucket and hash
            // only when the bucket changes.
            let bucket = t_ms.div_euclid(BUCKET_MS);
            if bucket != cur_bucket {
                flush_bucket(&mut counts, cur_bucket, &mut cur_counts, &mut dirty);
                cur_bucket = bucket;
            }
            let k = key as usize;
            if k >= cur_counts.len() {
                cur_counts.resize(k + 1, [0; 3]);
                open_seg.resize(k + 1, None);
            }
            let c = &mut cur_counts[k];
            if c[0] == 0 {
                dirty.push(key);
            }
            c[0] += 1;
            c[1] += failed as u32;
            c[2] += nlu as u32;
            if !failed {
                match &mut open_seg[k] {
                    Some(s) if t_ms - s.1 <= SEGMENT_GAP_MS => s.1 = s.1.max(t_ms),
                    Some(s) => {
                        segs.push(Seg {
                            key,
                            start: s.0,
                            end: s.1,
                        });
                        *s = (t_ms, t_ms);
                    }
                    slot @ None => *slot = Some((t_ms, t_ms)),
                }
            }
        }
        if let Some(t) = traj {
            passes.max_passes = passes.max_passes.max(t.passes as u64);
            passes.multi_pass += (t.passes > 1) as u64;
            if !t.internal.is_empty() && !failed {
                passes.rescued += 1;
            }
            for (ih, ig, ia) in &t.internal {
                failures.push(Failure {
                    t_ms,
                    start_ms: t_ms - latency.unwrap_or(0) / 1000,
                    status: st,
                    traj: tid,
                    file: a.file,
                    line: a.line,
                    conn: a.connection(),
                    method: a.method().map(str::to_string),
                    request: a.text(Field::Request).map(str::to_string),
                    remote: a.text(Field::RemoteAddr).map(str::to_string),
                    raw: trunc(&String::from_utf8_lossy(a.raw()), 300),
                    group: ig.clone(),
                    nlu: true,
                    hops: *ih,
                    internal: true,
                    addrs: ia.clone(),
                    ..Failure::default()
                });
            }
        }
        if failed {
            let hops = traj.map(|t| t.hops.len() as u32).unwrap_or(0);
            failures.push(Failure {
                t_ms,
                start_ms: t_ms - latency.unwrap_or(0) / 1000,
                status: st,
                traj: tid,
                file: a.file,
                line: a.line,
                conn: a.connection(),
                method: a.method().map(str::to_string),
                request: a.text(Field::Request).map(str::to_string),
                remote: a.text(Field::RemoteAddr).map(str::to_string),
                raw: trunc(&String::from_utf8_lossy(a.raw()), 300),
                group: String::new(),
                nlu,
                hops: if nlu { hops } else { 0 },
                addrs: traj.map(|t| t.addrs.clone()).unwrap_or_default(),
                ..Failure::default()
            });
        }
    }
    flush_bucket(&mut counts, cur_bucket, &mut cur_counts, &mut dirty);
    for (key, seg) in open_seg.into_iter().enumerate() {
        if let Some((s, e)) = seg {
            segs.push(Seg {
                key: key as u32,
                start: s,
                end: e,
            });
        }
    }
    let access_stats = stream.finish();

    // ---- clocks --------------------------------------------------------------------------
    let (offset_s, tz_source) = match (offset_seen, opts.tz_offset_s) {
        (Some(o), _) => (o, "time_local"),
        (None, Some(o)) => (o, "flag"),
        (None, None) => (
            time::machine_offset_at(if first_ms == i64::MAX {
                0
            } else {
                first_ms / 1000
            }),
            "machine",
        ),
    };

    if opts.access.is_empty() {
        failures = failures_from_errors(&hist, offset_s)?;
    }

    // ---- upstream groups -----------------------------------------------------------------
    let group_names: Vec<&String> = {
        let mut g: Vec<&String> = trajs.iter().filter_map(|t| t.group.as_ref()).collect();
        g.sort();
        g.dedup();
        g
    };
    let default_group = opts
        .upstream
        .clone()
        .or_else(|| (group_names.len() == 1).then(|| group_names[0].clone()))
        .unwrap_or_else(|| "upstream".to_string());
    let key_group: Vec<String> = keys
        .names
        .iter()
        .map(|k| {
            if !is_addr(k) {
                k.clone()
            } else {
                addr_group
                    .get(k)
                    .cloned()
                    .unwrap_or_else(|| default_group.clone())
            }
        })
        .collect();
    // Per group: 100 ms bucket → [requests, failed, nlu].
    let mut gnames: Vec<String> = Vec::new();
    let key_gid: Vec<usize> = key_group
        .iter()
        .map(|g| match gnames.iter().position(|x| x == g) {
            Some(i) => i,
            None => {
                gnames.push(g.clone());
                gnames.len() - 1
            }
        })
        .collect();
    let default_gid = gnames
        .iter()
        .position(|x| *x == default_group)
        .unwrap_or_else(|| {
            gnames.push(default_group.clone());
            gnames.len() - 1
        });
    let mut per_gid: Vec<BTreeMap<i64, [u64; 3]>> = vec![BTreeMap::new(); gnames.len()];
    for (k, c) in counts.iter() {
        let gid = key_gid
            .get((k & 0xfff) as usize)
            .copied()
            .unwrap_or(default_gid);
        let e = per_gid[gid].entry((k >> 12) as i64).or_insert([0; 3]);
        e[0] += c[0] as u64;
        e[1] += c[1] as u64;
        e[2] += c[2] as u64;
    }
    let group_buckets: HashMap<String, BTreeMap<i64, [u64; 3]>> =
        gnames.into_iter().zip(per_gid).collect();
    drop(counts);

    // ---- error logs: one streamed pass (signatures, pairing) -----------------------------
    // Failures are paired in time order while the merged error stream is read up to just past
    // each one: only the lines that can still pair (a `*cid` and an NLU or first-try
    // signature, not older than the earliest pending request start) are buffered, so memory is
    // bounded by the longest request, not by the size of the error logs.
    failures.sort_by_key(|f| f.t_ms);
    let mut errs = hist.error_stream(offset_s)?;
    let mut ix = SigIndex::default();
    let mut win = PairWindow::default();
    let mut lo_suffix = vec![i64::MAX; failures.len() + 1];
    for j in (0..failures.len()).rev() {
        lo_suffix[j] = lo_suffix[j + 1].min(failures[j].start_ms - 1000);
    }
    for (j, f) in failures.iter_mut().enumerate() {
        // Error-log times are the start of their second; a request's lines fall between its
        // start and its end.
        let lo = f.start_ms - 1000;
        let hi = f.t_ms;
        feed_errors(
            &mut errs,
            hi.saturating_add(REORDER_SLACK_MS),
            lo_suffix[j],
            &mut ix,
            &mut win,
        );
        win.evict_before(lo_suffix[j]);
        let cands: Vec<ERef> = match f.conn {
            // Several requests of a keep-alive connection share its *cid: the time window
            // and the request text tell them apart.
            Some(c) => win.by_cid(c, lo, hi),
            // Without `$connection`: by time and client — or by the request text where the
            // client differs (redacted differently in the two logs, or a proxy in front).
            None => win
                .by_time(lo, hi)
                .filter(|(_, e)| {
                    f.remote.is_none()
                        || e.client.is_none()
                        || e.client == f.remote
                        || (e.request.is_some() && e.request == f.request)
                })
                .map(|(k, _)| k)
                .collect(),
        };
        let req_ok = |k: &ERef| match (&win.get(k).request, &f.request) {
            (Some(a), Some(b)) => a == b,
            _ => true,
        };
        let first_try = |k: &ERef| classes::is_first_try_failure(win.get(k).sig) && req_ok(k);
        if f.paired.is_some() || !f.first_try.is_empty() || f.own_dns.is_some() {
            // Built from its own error lines (no access log): nothing more to pair.
            if f.group.is_empty() {
                f.group = default_group.clone();
            }
            continue;
        }
        // A known trajectory that ends at a real address is not an NLU, even when an NLU line
        // of the same connection and second exists (keep-alive neighbours).
        let may_be_nlu = f.nlu || f.traj.is_none();
        let nlu_line = cands
            .iter()
            .copied()
            .filter(|k| may_be_nlu && win.get(k).sig == "no-live-upstreams" && req_ok(k))
            .min_by_key(|k| (f.t_ms - k.t_ms).abs());
        f.first_try = cands
            .iter()
            .filter(|k| first_try(k))
            .take(3)
            .map(|k| (*k, win.get(k).sig))
            .collect();
        f.own_dns = cands
            .iter()
            .find(|k| classes::is_resolution_failure(win.get(k).sig) && req_ok(k))
            .map(|k| (*k, win.get(k).sig));
        let mut paired_upstream = None;
        if let Some(k) = nlu_line {
            // An NLU line answers one request only.
            let e = win.take(&k);
            f.paired = Some((k, e.sig));
            paired_upstream = e.upstream_host;
            if !f.nlu {
                // Formats without $upstream_addr learn NLU from the error log.
                f.nlu = true;
            }
        } else if !f.nlu
            && let Some(k) = cands.iter().find(|k| first_try(k))
        {
            let e = win.get(k);
            f.paired = Some((*k, e.sig));
            paired_upstream = e.upstream_host.clone();
        } else if f.paired.is_none() {
            f.paired = f.own_dns;
        }
        if f.internal {
            continue;
        }
        f.group = match f.traj.map(|t| &trajs[t as usize]) {
            Some(t) => t
                .group
                .clone()
                .or_else(|| t.addrs.last().and_then(|a| addr_group.get(a).cloned()))
                .unwrap_or_else(|| default_group.clone()),
            None => paired_upstream
                .filter(|h| !is_addr(h))
                .unwrap_or_else(|| default_group.clone()),
        };
    }
    // The lines after the last failure still count for signatures and the re-query period.
    feed_errors(&mut errs, i64::MAX, i64::MAX, &mut ix, &mut win);
    ix.finish();
    let stream_stats = StreamStats {
        error_lines: errs.lines(),
        late_lines: errs.late_lines(),
        max_buffered: win.max_len,
        dropped: win.dropped,
        fetched: 0,
    };
    let error_stats = errs.finish();
    drop(win);

    // ---- swaps and the re-query period ---------------------------------------------------
    let (swaps, swap_dns_idx, swap_source, requery, requery_source, nx_changes) =
        if !hist.dns.is_empty() {
            let (s, idx, p, nx) = swaps_from_dns(&hist);
            (s, idx, "dns", p, "dns", nx)
        } else {
            let s = infer_swaps(&segs, &keys, &key_group, first_ms, last_ms);
            let mut p = median_interval(&s.iter().map(|x| x.t_ms).collect::<Vec<_>>());
            let src = if s.is_empty() { "none" } else { "inferred" };
            let mut psrc = src;
            if p.is_none() {
                // No swaps: every failed re-query logs `NAME could not be resolved`, once per period.
                let mut all: Vec<i64> = Vec::new();
                for (_, ts) in ix.unresolved.values() {
                    // Distinct seconds: lines of one second are 0 ms apart and never count.
                    let ts: Vec<i64> = ts.iter().copied().collect();
                    all.extend(ts.windows(2).map(|w| w[1] - w[0]).filter(|d| *d >= 500));
                }
                all.sort_unstable();
                if !all.is_empty() {
                    p = Some(all[all.len() / 2] as f64);
                    psrc = "error-log";
                }
            }
            (s, Vec::new(), src, p, psrc, Vec::new())
        };
    let swap_times: Vec<i64> = swaps.iter().map(|s| s.t_ms).collect();
    let prev_swap = |t: i64| -> Option<usize> {
        let i = swap_times.partition_point(|&s| s <= t);
        i.checked_sub(1)
    };
    // Every peer-list change (swaps and NXDOMAIN removals/restorations) bumps the generation;
    // offsets "after the swap" are measured from the latest one before the failing selection.
    let mut changes: Vec<Change> = swaps
        .iter()
        .enumerate()
        .map(|(i, s)| Change {
            t_ms: s.t_ms,
            direction: s.direction.clone(),
            old: s
                .direction
                .split(" → ")
                .next()
                .unwrap_or("")
                .split(',')
                .filter(|x| !x.is_empty())
                .map(host_of)
                .collect(),
            dns_idx: swap_dns_idx.get(i).copied(),
        })
        .chain(nx_changes)
        .collect();
    changes.sort_by_key(|c| c.t_ms);
    let change_times: Vec<i64> = changes.iter().map(|c| c.t_ms).collect();
    let prev_change = |t: i64| -> Option<usize> {
        let i = change_times.partition_point(|&s| s <= t);
        i.checked_sub(1)
    };

    if let Some(u) = &opts.upstream {
        failures.retain(|f| &f.group == u);
    }

    let in_window = |id: &str, a: i64, b: i64| ix.first_in(id, a, b);
    let mut cites = Cites::default();
    let dns_nx: Vec<usize> = (0..hist.dns.len())
        .filter(|&i| hist.dns[i].rcode.eq_ignore_ascii_case("NXDOMAIN"))
        .collect();
    let period = requery.unwrap_or(6000.0) as i64;
    let swap_src = match swap_source {
        "dns" => SwapSource::Dns,
        "inferred" => SwapSource::Inferred,
        _ => SwapSource::None,
    };
    let present = Present {
        access_log: !opts.access.is_empty(),
        upstream_addr: fmt.has(Field::UpstreamAddr),
        connection: fmt.has(Field::Connection),
        msec: fmt.has(Field::Msec),
        request_time: fmt.has(Field::RequestTime),
        upstream_name: fmt.text.contains("$proxy_upstream_name"),
        error_log: !opts.error.is_empty(),
        dns_log: !opts.dns.is_empty(),
    };
    let version = opts.nginx_version.or_else(|| {
        opts.config
            .as_ref()
            .and_then(|c| c.version.as_deref())
            .and_then(resolvelab_core::version::Version::parse)
    });
    let (observability, race) = evidence::observe(present, swap_src, version, opts.config.as_ref());
    // Pairing is by `*cid` when the access log has `$connection` (or there is none: the
    // failures are the error lines themselves).
    let by_cid = present.connection || !present.access_log;

    // ---- clusters, per-failure classes, incidents ----------------------------------------
    let mut by_group: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for (i, f) in failures.iter().enumerate() {
        by_group.entry(f.group.clone()).or_default().push(i);
    }
    let empty = BTreeMap::new();
    let window = |g: &str, a: i64, b: i64| -> (u64, u64) {
        let (a, b) = if b - a < 2000 {
            let mid = (a + b) / 2;
            (mid - 1000, mid + 1000)
        } else {
            (a, b)
        };
        let m = group_buckets.get(g).unwrap_or(&empty);
        m.range(a.div_euclid(BUCKET_MS)..=b.div_euclid(BUCKET_MS))
            .fold((0, 0), |acc, (_, c)| (acc.0 + c[0], acc.1 + c[1]))
    };
    let mut incidents: Vec<Incident> = Vec::new();
    let mut incident_members: Vec<Vec<usize>> = Vec::new();
    for (g, idxs) in &by_group {
        let mut clusters: Vec<Vec<usize>> = Vec::new();
        for &i in idxs {
            let t = failures[i].t_ms;
            match clusters.last_mut() {
                Some(c)
                    if t - failures[*c.last().unwrap()].t_ms <= CLUSTER_GAP_MS
                        && !trickle(t - failures[c[0]].t_ms, window(g, t - TRICKLE_SPAN_MS, t)) =>
                {
                    c.push(i)
                }
                _ => clusters.push(vec![i]),
            }
        }
        for c in clusters {
            let cs = c.iter().map(|&i| failures[i].start_ms).min().unwrap();
            let ce = c.iter().map(|&i| failures[i].t_ms).max().unwrap();
            let (req, fail) = window(g, cs, ce);
            let share = if req == 0 {
                1.0
            } else {
                fail as f64 / req as f64
            };
            // Without an access log the successes in between are unknown: no burst is claimed.
            let burst = req > 0
                && share >= 0.8
                && c.iter().filter(|&&i| !failures[i].internal).count() >= 3;
            let nx_err = in_window("resolve-nxdomain", cs - 10_000, ce + 1000);
            let nx_dns = dns_nx.iter().copied().find(|&i| {
                let t = hist.dns[i].t_us / 1000;
                t >= cs - period - 2000 && t <= ce
            });
            let mem = in_window("zone-memory-exhausted", cs - period - 10_000, ce)
                .or_else(|| in_window("zone-slab-alloc", cs - period - 10_000, ce));
            let dis = in_window("peer-disabled", cs - 12_000, ce + 1000);
            let p99 = in_window("connect-eaddrnotavail", cs - 1000, ce + 1000);
            for &i in &c {
                let f = &failures[i];
                let pc = prev_change(f.t_ms);
                let after = pc.map(|s| f.t_ms - change_times[s]);
                // The generation race needs a request that started before the change, i.e.
                // one that tried a pre-change peer (DOMAIN.md §8: "all through the pre-swap IP").
                let through_old = pc.is_some_and(|s| {
                    let old = &changes[s].old;
                    old.is_empty()
                        || f.addrs.is_empty()
                        || f.addrs.iter().any(|a| old.contains(&host_of(a)))
                });
                let facts = Facts {
                    nlu: f.nlu,
                    hops: f.hops,
                    addrs: f.addrs.len(),
                    first_try: f.first_try.len(),
                    first_try_99: f.first_try.iter().any(|e| e.1 == "connect-eaddrnotavail"),
                    own_resolution: f.own_dns.map(|e| e.1),
                    eaddrnotavail_near: p99.is_some(),
                    zone_memory_near: mem.is_some(),
                    nxdomain_near: nx_err.is_some() || nx_dns.is_some(),
                    disabled_near: dis.is_some(),
                    burst,
                    share,
                    after_change_ms: after,
                    through_old,
                    paired: f.paired.is_some(),
                };
                let decision = classify(&facts, swap_src, race);
                let f = &mut failures[i];
                f.class = decision.class.id();
                f.confidence = decision.confidence;
            }
            // One incident per class inside the cluster.
            let mut per_class: BTreeMap<&'static str, Vec<usize>> = BTreeMap::new();
            // Internal NLUs (rescued or not by a later pass) are classified, but the
            // incidents are made of what the client saw.
            for &i in c.iter().filter(|&&i| !failures[i].internal) {
                per_class.entry(failures[i].class).or_default().push(i);
            }
            for (class, members) in per_class {
                let s = members.iter().map(|&i| failures[i].start_ms).min().unwrap();
                let e = members.iter().map(|&i| failures[i].t_ms).max().unwrap();
                let (req, _) = window(g, s, e);
                let n = members.len() as u64;
                let share = if req == 0 {
                    1.0
                } else {
                    (n as f64 / req as f64).min(1.0)
                };
                let mut hops = NluCounts::default();
                let mut methods = BTreeMap::new();
                for &i in &members {
                    let f = &failures[i];
                    if f.nlu {
                        count_hops(&mut hops, f.hops);
                        hops.paired += f.paired.is_some() as u64;
                    }
                    *methods
                        .entry(f.method.clone().unwrap_or_else(|| "-".into()))
                        .or_insert(0) += 1;
                }
                // Offset after the swap: from the first failure's end (the failing selection
                // happens after the swap even when the request started before it).
                let first_end = members.iter().map(|&i| failures[i].t_ms).min().unwrap();
                let sw = prev_change(first_end);
                let conf = members.iter().map(|&i| failures[i].confidence).sum::<f64>() / n as f64;
                let mut ev = Vec::new();
                let f0 = &failures[members[0]];
                ev.push(Evidence {
                    at: hist.cite(f0.file, f0.line),
                    note: format!(
                        "first failure: status {}{}",
                        f0.status,
                        if f0.nlu {
                            format!(", {}", traj_label(f0.hops))
                        } else {
                            String::new()
                        }
                    ),
                    text: f0.raw.clone(),
                });
                for e in f0.first_try.iter().take(1) {
                    ev.push(cites.ev(&hist, e.0, if by_cid {
                        "first-try failure on the same *cid"
                    } else {
                        "first-try failure of the same request (by time and client: no `$connection` logged)"
                    }));
                }
                if let Some(e) = f0.paired.filter(|e| e.1 == "no-live-upstreams") {
                    ev.push(cites.ev(
                        &hist,
                        e.0,
                        if by_cid {
                            "paired `no live upstreams` (same *cid, time, request)"
                        } else {
                            "paired `no live upstreams` (same time, client, request: no `$connection` logged)"
                        },
                    ));
                }
                match class {
                    "dns-nxdomain" => {
                        if let Some(e) = nx_err {
                            ev.push(cites.ev(
                                &hist,
                                e,
                                "NXDOMAIN: nginx removed every peer of the name",
                            ));
                        }
                        if let Some(d) = nx_dns {
                            let r = &hist.dns[d];
                            ev.push(Evidence {
                                at: hist.cite(r.file, r.line),
                                note: "the authority answered NXDOMAIN".into(),
                                text: format!("{} {} {} {}", r.qname, r.qtype, r.rcode, r.client),
                            });
                        }
                    }
                    "maxfails-wipeout" => {
                        if let Some(e) = dis {
                            ev.push(cites.ev(&hist, e, "a peer was excluded by max_fails"));
                        }
                    }
                    "zone-memory-exhausted" => {
                        if let Some(e) = mem {
                            ev.push(cites.ev(
                                &hist,
                                e,
                                "the zone ran out of memory while adding peers",
                            ));
                        }
                    }
                    "port-exhaustion" => {
                        if let Some(e) = p99 {
                            ev.push(cites.ev(&hist, e, "ephemeral ports exhausted"));
                        }
                    }
                    _ => {}
                }
                if class.starts_with("generation-race")
                    && let Some(si) = sw
                    && let Some(d) = changes[si].dns_idx
                {
                    let r = &hist.dns[d];
                    ev.push(Evidence {
                        at: hist.cite(r.file, r.line),
                        note: format!(
                            "peer-list change {} ms before the first failure",
                            first_end - changes[si].t_ms
                        ),
                        text: format!(
                            "{} {} {} → {}",
                            r.qname,
                            r.qtype,
                            r.rcode,
                            r.answers.join(",")
                        ),
                    });
                }
                if members.len() > 1 {
                    let fl = &failures[*members.last().unwrap()];
                    ev.push(Evidence {
                        at: hist.cite(fl.file, fl.line),
                        note: "last failure".into(),
                        text: fl.raw.clone(),
                    });
                }
                ev.truncate(8);
                let shape = if req == 0 {
                    "unknown"
                } else if share >= 0.8 && n >= 3 {
                    "burst"
                } else if share <= 0.5 {
                    "isolated"
                } else {
                    "mixed"
                };
                let after_swap_ms = sw.map(|i| first_end - change_times[i]);
                let share_text = if req == 0 {
                    "no access-log request of this upstream in the window, so the failed share is unknown".to_string()
                } else {
                    format!(
                        "{shape}, {:.0}% of {req} requests to `{g}` in the window failed",
                        share * 100.0
                    )
                };
                let detail = format!(
                    "{n} failure(s) over {} ms ({share_text}){}.",
                    e - s,
                    sw.map(|i| format!(
                        ", starting {} ms after a peer-list change ({})",
                        first_end - change_times[i],
                        changes[i].direction
                    ))
                    .unwrap_or_default()
                );
                incidents.push(Incident {
                    id: 0,
                    class: class.to_string(),
                    confidence: (conf * 100.0).round() / 100.0,
                    upstream: g.clone(),
                    start_ms: s,
                    end_ms: e,
                    duration_ms: e - s,
                    count: n,
                    nlu: hops.total,
                    hops,
                    requests_in_window: req,
                    share_failed: (share * 1000.0).round() / 1000.0,
                    shape: shape.to_string(),
                    after_swap_ms,
                    swap_direction: sw.map(|i| changes[i].direction.clone()),
                    methods,
                    evidence: ev,
                    explanation: format!("{} {detail}", classes::explanation(class)),
                    fix: classes::fix(class).to_string(),
                    zoom: Series::default(),
                });
                incident_members.push(members);
            }
        }
    }
    let mut order: Vec<usize> = (0..incidents.len()).collect();
    order.sort_by_key(|&i| (incidents[i].start_ms, incidents[i].class.clone()));
    let mut incidents: Vec<Incident> = order.iter().map(|&i| incidents[i].clone()).collect();
    for (n, inc) in incidents.iter_mut().enumerate() {
        inc.id = n + 1;
        if n < MAX_ZOOMS {
            inc.zoom = zoom(
                group_buckets.get(&inc.upstream).unwrap_or(&empty),
                inc.start_ms,
                inc.end_ms,
            );
        }
    }

    // ---- totals ----------------------------------------------------------------------------
    let mut nlu = NluCounts::default();
    let mut nlu_events = Vec::new();
    let mut nlu_times = Vec::new();
    let mut nlu_by_swap_direction: BTreeMap<String, u64> = BTreeMap::new();
    for f in failures.iter().filter(|f| f.nlu) {
        nlu_times.push(f.t_ms);
        if f.internal {
            passes.internal_nlu += 1;
            passes.internal_paired += f.paired.is_some() as u64;
            *passes
                .internal_by_class
                .entry(f.class.to_string())
                .or_insert(0) += 1;
        } else {
            if let Some(si) = prev_swap(f.t_ms).filter(|&si| f.t_ms - swap_times[si] <= 1000) {
                *nlu_by_swap_direction
                    .entry(swaps[si].direction.clone())
                    .or_insert(0) += 1;
            }
            count_hops(&mut nlu, f.hops);
            nlu.paired += f.paired.is_some() as u64;
        }
        if nlu_events.len() < MAX_NLU_EVENTS {
            nlu_events.push(NluEvent {
                t_ms: f.t_ms,
                hops: f.hops,
                trajectory: traj_label(f.hops).to_string(),
                after_swap_ms: prev_change(f.t_ms).map(|s| f.t_ms - change_times[s]),
                class: f.class.to_string(),
                at: hist.cite(f.file, f.line),
                internal: f.internal,
                status: f.status,
            });
        }
    }
    let mut classes_sum: Vec<ClassSummary> = Vec::new();
    for c in classes::CLASSES {
        let incs: Vec<&Incident> = incidents.iter().filter(|i| i.class == *c).collect();
        if incs.is_empty() {
            continue;
        }
        classes_sum.push(ClassSummary {
            class: c.to_string(),
            incidents: incs.len() as u64,
            requests: incs.iter().map(|i| i.count).sum(),
            explanation: classes::explanation(c).to_string(),
            fix: classes::fix(c).to_string(),
        });
    }
    // Signatures that are a failed request's own cause (per-request resolution failures).
    let mut caused: HashMap<&'static str, u64> = HashMap::new();
    for f in failures.iter().filter(|f| !f.internal) {
        if let Some((_, sig)) = f.own_dns {
            *caused.entry(sig).or_default() += 1;
        }
    }
    let mut signatures = summarize_signatures(&hist, &ix, &mut cites, &nlu_times, &caused);
    // Evidence text of the cited error lines: read again, only those lines.
    let stream_stats = StreamStats {
        fetched: cites.fill(&hist, &mut incidents, &mut signatures)?,
        ..stream_stats
    };
    let mut swap_directions = BTreeMap::new();
    for s in &swaps {
        *swap_directions.entry(s.direction.clone()).or_insert(0) += 1;
    }
    let mut files = access_stats;
    files.extend(error_stats);
    files.extend(hist.stats.iter().cloned());
    let malformed = files.iter().map(|f| f.malformed).sum();
    let files_ref = &files;
    let d = Diagnosis {
        schema: SCHEMA.to_string(),
        inputs: InputsInfo {
            access: opts
                .access
                .iter()
                .map(|p| p.display().to_string())
                .collect(),
            error: opts.error.iter().map(|p| p.display().to_string()).collect(),
            dns: opts.dns.iter().map(|p| p.display().to_string()).collect(),
            events: opts
                .events
                .iter()
                .map(|p| p.display().to_string())
                .collect(),
            log_format: fmt.text.clone(),
            tz_offset: time::format_offset(offset_s),
            tz_source: tz_source.to_string(),
            upstream_filter: opts.upstream.clone(),
        },
        start_ms: (requests > 0).then_some(first_ms),
        end_ms: (requests > 0).then_some(last_ms),
        status: if files_ref.iter().any(|f| f.error.is_some()) {
            "partial".to_string()
        } else {
            "completed".to_string()
        },
        requests,
        http_status: status.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
        failures: failures.iter().filter(|f| !f.internal).count() as u64,
        nlu,
        passes,
        swaps: swaps.len() as u64,
        swap_source: swap_source.to_string(),
        swap_directions,
        nlu_by_swap_direction,
        swap_list: swaps.iter().take(MAX_SWAPS_LISTED).cloned().collect(),
        requery_period_ms: requery.map(|p| (p * 10.0).round() / 10.0),
        requery_source: requery_source.to_string(),
        incidents,
        classes: classes_sum,
        signatures,
        nlu_events_truncated: nlu_events.len() as u64 != nlu_count(&failures),
        nlu_events,
        timeline: timeline.series(),
        parse: ParseInfo { files, malformed },
        evidence: observability,
    };
    let _ = has_upstream;
    Ok((d, hist, stream_stats))
}

fn flush_bucket(
    counts: &mut Vec<(u64, [u32; 3])>,
    bucket: i64,
    cur: &mut [[u32; 3]],
    dirty: &mut Vec<u32>,
) {
    for &k in dirty.iter() {
        let c = &mut cur[k as usize];
        counts.push((((bucket as u64) << 12) | k as u64, *c));
        *c = [0; 3];
    }
    dirty.clear();
}

/// Run the checker.
pub fn diagnose(opts: &Options) -> anyhow::Result<Diagnosis> {
    diagnose_with_history(opts).map(|x| x.0)
}

fn nlu_count(f: &[Failure]) -> u64 {
    f.iter().filter(|f| f.nlu).count() as u64
}

fn count_hops(c: &mut NluCounts, hops: u32) {
    c.total += 1;
    match hops {
        0 => c.unknown_hops += 1,
        1 => c.one_hop += 1,
        2 => c.two_hop += 1,
        _ => c.multi_hop += 1,
    }
}

/// `1-hop`, `2-hop`, `3+-hop` or `unknown`.
pub fn traj_label(hops: u32) -> &'static str {
    match hops {
        0 => "unknown",
        1 => "1-hop",
        2 => "2-hop",
        _ => "3+-hop",
    }
}

fn trunc(s: &str, n: usize) -> String {
    if s.len() <= n {
        return s.to_string();
    }
    let mut c = n;
    while !s.is_char_boundary(c) {
        c -= 1;
    }
    format!("{}…", &s[..c])
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

/// Error lines cited as evidence. Their text is filled in after the streamed pass, by reading
/// only those lines again ([`History::fetch_errors`]).
#[derive(Default)]
struct Cites {
    wanted: HashMap<String, (u32, u64)>,
}

impl Cites {
    /// Evidence for one error line; the text follows in [`Cites::fill`].
    fn ev(&mut self, h: &History, r: ERef, note: &str) -> Evidence {
        let at = h.cite(r.file, r.line);
        self.wanted.insert(at.clone(), (r.file, r.line));
        Evidence {
            at,
            note: note.to_string(),
            text: String::new(),
        }
    }

    /// Read the cited lines and fill their evidence text; returns the number of lines read.
    fn fill(
        &self,
        h: &History,
        incidents: &mut [Incident],
        signatures: &mut [Signature],
    ) -> anyhow::Result<usize> {
        if self.wanted.is_empty() {
            return Ok(0);
        }
        let keys: Vec<(u32, u64)> = self.wanted.values().copied().collect();
        let recs = h.fetch_errors(&keys)?;
        let text = |at: &str| -> Option<String> {
            let k = self.wanted.get(at)?;
            Some(
                recs.get(k)
                    .map(err_text)
                    .unwrap_or_else(|| "(the line can no longer be read: the file changed)".into()),
            )
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

fn zoom(m: &BTreeMap<i64, [u64; 3]>, s: i64, e: i64) -> Series {
    let span = (e - s).max(0) + 6000;
    // At most ~300 points per zoom.
    let bin = ((span / 300).max(BUCKET_MS) + BUCKET_MS - 1) / BUCKET_MS * BUCKET_MS;
    let a = (s - 3000).div_euclid(bin) * bin;
    let b = e + 3000;
    let mut pts: Vec<Point> = Vec::new();
    let mut t = a;
    while t <= b {
        let mut p = Point {
            t_ms: t,
            ..Default::default()
        };
        for (_, c) in m.range(t.div_euclid(BUCKET_MS)..(t + bin).div_euclid(BUCKET_MS)) {
            p.ok += c[0] - c[1];
            p.failed += c[1] - c[2];
            p.nlu += c[2];
        }
        pts.push(p);
        t += bin;
    }
    Series {
        bin_ms: bin,
        points: pts,
    }
}

/// Median of the intervals between consecutive times (ms), ignoring gaps < 500 ms.
fn median_interval(ts: &[i64]) -> Option<f64> {
    let mut iv: Vec<i64> = ts
        .windows(2)
        .map(|w| w[1] - w[0])
        .filter(|d| *d >= 500)
        .collect();
    if iv.is_empty() {
        return None;
    }
    iv.sort_unstable();
    let n = iv.len();
    Some(if n % 2 == 1 {
        iv[n / 2] as f64
    } else {
        (iv[n / 2 - 1] + iv[n / 2]) as f64 / 2.0
    })
}

/// Swaps from the DNS log: a NOERROR answer whose address set differs from the previous
/// non-empty answer for the same name and type. Returns the swaps, their dns indexes and the
/// median re-query period (per client, name and type).
fn swaps_from_dns(h: &History) -> (Vec<Swap>, Vec<usize>, Option<f64>, Vec<Change>) {
    let mut last: HashMap<(String, String), Vec<String>> = HashMap::new();
    let mut removed: HashMap<(String, String), bool> = HashMap::new();
    let mut nx_changes = Vec::new();
    let mut swaps = Vec::new();
    let mut idx = Vec::new();
    let mut per_client: HashMap<(String, String, String), Vec<i64>> = HashMap::new();
    for (i, r) in h.dns.iter().enumerate() {
        per_client
            .entry((r.client.clone(), r.qname.clone(), r.qtype.clone()))
            .or_default()
            .push(r.t_us / 1000);
        let k = (r.qname.clone(), r.qtype.clone());
        if r.rcode.eq_ignore_ascii_case("NXDOMAIN") {
            // NXDOMAIN removes every peer of the name (DOMAIN.md F2): a peer-list change.
            if let Some(prev) = last.get(&k)
                && !removed.get(&k).copied().unwrap_or(false)
            {
                nx_changes.push(Change {
                    t_ms: r.t_us / 1000,
                    direction: format!("{} → NXDOMAIN (no peers)", prev.join(",")),
                    old: prev.clone(),
                    dns_idx: Some(i),
                });
                removed.insert(k, true);
            }
            continue;
        }
        if !r.rcode.eq_ignore_ascii_case("NOERROR") || r.answers.is_empty() {
            continue;
        }
        let mut set = r.answers.clone();
        set.sort();
        if removed.insert(k.clone(), false).unwrap_or(false) && last.get(&k) == Some(&set) {
            // Peers restored after NXDOMAIN: a change, not a swap.
            nx_changes.push(Change {
                t_ms: r.t_us / 1000,
                direction: format!("NXDOMAIN → {}", set.join(",")),
                old: Vec::new(),
                dns_idx: Some(i),
            });
        }
        match last.get(&k) {
            Some(prev) if *prev != set => {
                swaps.push(Swap {
                    t_ms: r.t_us / 1000,
                    name: r.qname.clone(),
                    direction: format!("{} → {}", prev.join(","), set.join(",")),
                });
                idx.push(i);
                last.insert(k, set);
            }
            Some(_) => {}
            None => {
                last.insert(k, set);
            }
        }
    }
    let mut all = Vec::new();
    for ts in per_client.values() {
        all.extend(ts.windows(2).map(|w| w[1] - w[0]).filter(|d| *d >= 500));
    }
    all.sort_unstable();
    let period = if all.is_empty() {
        None
    } else {
        let n = all.len();
        Some(if n % 2 == 1 {
            all[n / 2] as f64
        } else {
            (all[n / 2 - 1] + all[n / 2]) as f64 / 2.0
        })
    };
    (swaps, idx, period, nx_changes)
}

/// Swaps inferred from `$upstream_addr`: an address whose successes start within 1.5 s of
/// another address of the same group going quiet.
fn infer_swaps(
    segs: &[Seg],
    keys: &Keys,
    key_group: &[String],
    first: i64,
    last: i64,
) -> Vec<Swap> {
    let mut out: Vec<Swap> = Vec::new();
    // Segment ends in time order, so each start looks only at the ends within the gap.
    let mut ends: Vec<(i64, usize)> = segs.iter().enumerate().map(|(i, a)| (a.end, i)).collect();
    ends.sort_unstable();
    for b in segs {
        if b.start - first <= SEGMENT_GAP_MS || !is_addr(&keys.names[b.key as usize]) {
            continue;
        }
        let gb = &key_group[b.key as usize];
        let lo = ends.partition_point(|e| e.0 < b.start - SEGMENT_GAP_MS);
        let hi = ends.partition_point(|e| e.0 <= b.start + SEGMENT_GAP_MS);
        let old = ends[lo..hi].iter().map(|&(_, i)| &segs[i]).find(|a| {
            a.key != b.key
                && &key_group[a.key as usize] == gb
                && last - a.end > SEGMENT_GAP_MS
                && a.start < b.start
        });
        if let Some(a) = old {
            out.push(Swap {
                t_ms: b.start,
                name: gb.clone(),
                direction: format!(
                    "{} → {}",
                    keys.names[a.key as usize], keys.names[b.key as usize]
                ),
            });
        }
    }
    out.sort_by_key(|s| s.t_ms);
    // Two records swapping together are one swap.
    out.dedup_by(|b, a| b.t_ms - a.t_ms < 500);
    out
}

fn summarize_signatures(
    h: &History,
    ix: &SigIndex,
    cites: &mut Cites,
    nlu_times: &[i64],
    caused: &HashMap<&'static str, u64>,
) -> Vec<Signature> {
    let near = |t: i64| {
        let i = nlu_times.partition_point(|&x| x < t - 10_000);
        nlu_times.get(i).is_some_and(|&x| x <= t + 11_000)
    };
    let mut out = Vec::new();
    for (si, def) in classes::SIGNATURES.iter().enumerate() {
        let Some(first) = ix.first[si] else { continue };
        let near_nlu = ix.per_sec[si]
            .iter()
            .filter(|(t, _)| near(**t))
            .map(|(_, c)| c.1)
            .sum::<u64>();
        let failed = caused.get(def.id).copied().unwrap_or(0);
        let (harmless, note) = match def.id {
            _ if failed > 0 => (
                false,
                format!(
                    "the cause of {failed} failed request(s): their own resolution (a variable `proxy_pass`), logged with their *cid"
                ),
            ),
            "resolve-servfail" | "resolve-timeout" | "resolve-other" if near_nlu == 0 => (
                true,
                "harmless for `resolve` upstreams: SERVFAIL and resolver timeouts keep the current peers (DOMAIN.md F2), and no failed request carries this line".to_string(),
            ),
            "resolve-servfail" | "resolve-timeout" | "resolve-other" => (
                false,
                "resolver failures near NLU: they keep the peers, so look for another cause".to_string(),
            ),
            "resolve-nxdomain" if near_nlu == 0 => (
                true,
                "NXDOMAIN answered but no request failed (the re-query missed it, or the name is idle)".to_string(),
            ),
            "resolve-nxdomain" => (false, "NXDOMAIN removes every peer of the name for one re-query period".to_string()),
            "peer-disabled" if near_nlu == 0 => (
                true,
                "a peer was excluded by max_fails but another one served: no NLU".to_string(),
            ),
            "peer-disabled" => (false, "max_fails excluded peers around NLU (wipeout precondition)".to_string()),
            "no-live-upstreams" => (false, "the NLU error line itself".to_string()),
            "zone-memory-exhausted" => (false, "peers lost while adding a new answer".to_string()),
            "connect-eaddrnotavail" => (false, "ephemeral ports exhausted".to_string()),
            _ => (false, "a first-try failure (retried when allowed)".to_string()),
        };
        out.push(Signature {
            id: def.id.to_string(),
            pattern: def.pattern.to_string(),
            count: ix.count[si],
            near_nlu,
            harmless,
            note,
            first: cites.ev(h, first, "first occurrence"),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lab_line(t_ms: i64, st: u16, ua: &str, conn: u64, creq: u64) -> String {
        format!(
            "{}.{:03} {st} \"{ua}\" \"{st}\" 0.000 GET {conn} {creq} \"-\" \"-\" \"GET / HTTP/1.1\" 127.0.0.1\n",
            t_ms / 1000,
            t_ms % 1000
        )
    }

    /// `access.log` + `error.log` in `dir`, read with the lab format at UTC.
    fn lab_options(dir: &std::path::Path, acc: &str, err: &str) -> Options {
        let a = dir.join("access.log");
        let e = dir.join("error.log");
        std::fs::write(&a, acc).unwrap();
        std::fs::write(&e, err).unwrap();
        let mut o = Options::new(vec![a], vec![e]);
        o.log_format = LogFormat::lab();
        o.tz_offset_s = Some(0);
        o
    }

    fn nlu_err(t_s: i64, cid: u64) -> String {
        err_line(t_s, cid, "no live upstreams while connecting to upstream")
    }

    fn err_line(t_s: i64, cid: u64, msg: &str) -> String {
        let ts = jiff::Timestamp::from_second(t_s).unwrap();
        format!(
            "{} [error] 1#1: *{cid} {msg}, client: 127.0.0.1, server: , request: \"GET / HTTP/1.1\", upstream: \"http://be/\", host: \"x\"\n",
            ts.strftime("%Y/%m/%d %H:%M:%S")
        )
    }

    #[test]
    fn a_steady_trickle_is_not_one_long_incident() {
        // 100 rps for 60 s with one ordinary 502 every 900 ms: the failures are < 1 s apart all
        // along, but most requests succeed — no incident spans more than ~10 s.
        let dir = tempfile::tempdir().unwrap();
        let t0 = 1_796_018_400_000i64;
        let mut acc = String::new();
        for k in 0..6000i64 {
            let t = t0 + k * 10;
            let st = if k % 90 == 0 { 502 } else { 200 };
            acc += &lab_line(t, st, "127.0.0.20:8080", 1000 + k as u64, 1);
        }
        let d = diagnose(&lab_options(dir.path(), &acc, "")).unwrap();
        assert_eq!(d.failures, 67);
        let longest = d.incidents.iter().map(|i| i.duration_ms).max().unwrap();
        assert!(d.incidents.len() >= 5, "{}", d.incidents.len());
        assert!(longest <= 11_000, "{longest} ms");
        assert_eq!(d.incidents.iter().map(|i| i.count).sum::<u64>(), 67);
    }

    #[test]
    fn pairs_by_cid_and_time_on_a_keepalive_connection() {
        let dir = tempfile::tempdir().unwrap();
        let t0 = 1_796_018_400_000i64;
        let mut acc = String::new();
        // One keep-alive connection (*7): success, NLU at +10 s, success, NLU at +12 s; and an
        // NLU on connection *8 whose error line is 5 s away (must not pair).
        acc += &lab_line(t0 + 9_000, 200, "127.0.0.20:8080", 7, 1);
        acc += &lab_line(t0 + 10_500, 502, "be", 7, 2);
        acc += &lab_line(t0 + 11_000, 200, "127.0.0.20:8080", 7, 3);
        acc += &lab_line(t0 + 12_200, 502, "be", 7, 4);
        acc += &lab_line(t0 + 20_100, 502, "be", 8, 1);
        let mut err = String::new();
        err += &nlu_err(t0 / 1000 + 10, 7);
        err += &nlu_err(t0 / 1000 + 12, 7);
        err += &nlu_err(t0 / 1000 + 15, 8);
        let o = lab_options(dir.path(), &acc, &err);
        let d = diagnose(&o).unwrap();
        assert_eq!(d.nlu.total, 3);
        assert_eq!(d.nlu.paired, 2, "the *8 line is 5 s away from its request");
        let paired: Vec<&str> = d
            .incidents
            .iter()
            .filter_map(|i| i.evidence.iter().find(|e| e.note.starts_with("paired")))
            .map(|e| e.at.rsplit(':').next().unwrap())
            .collect();
        assert_eq!(
            paired,
            ["1", "2"],
            "each NLU paired with the line of its own second"
        );
    }

    #[test]
    fn trajectories_keep_their_structure() {
        let mut k = Keys::default();
        let t = parse_traj("10.0.0.1:80, 10.0.0.2:80 : be", &mut k);
        assert!(t.nlu);
        assert_eq!(t.hops, ["be"]);
        let t = parse_traj("10.0.0.1:80, 10.0.0.2:80, be", &mut k);
        assert_eq!(
            (t.hops.len(), t.addrs.len(), t.group.as_deref()),
            (3, 2, Some("be"))
        );
        // The retry shim: the first pass ended in NLU (internal), the second succeeded.
        let t = parse_traj("10.0.0.1:80, be : 10.0.0.2:80", &mut k);
        assert!(!t.nlu);
        assert_eq!(t.passes, 2);
        assert_eq!(
            t.internal,
            [(2, "be".to_string(), vec!["10.0.0.1:80".to_string()])]
        );
        let t = parse_traj("be : be", &mut k);
        assert!(t.nlu);
        assert_eq!((t.passes, t.internal.len()), (2, 1));
        assert_eq!(host_of("[::1]:8080"), "::1");
        let t = parse_traj("unix:/run/app.sock", &mut k);
        assert!(!t.nlu);
        assert_eq!(traj_label(2), "2-hop");
        assert_eq!(traj_label(5), "3+-hop");
    }

    /// A long run: 36,000 requests over an hour, 3,600 2-hop NLUs each with a first-try line
    /// and an NLU line on its own keep-alive connection, plus resolver noise every second and
    /// peer-disabled warnings, in two error_log files (the second gzipped). Every NLU pairs,
    /// and the error lines buffered at once stay a tiny fraction of the log: a materialised
    /// error log would hold all of them.
    #[test]
    fn error_logs_are_streamed_with_a_bounded_window() {
        let dir = tempfile::tempdir().unwrap();
        let t0 = 1_796_018_400_000i64;
        let (mut acc, mut err, mut noise) = (String::new(), String::new(), String::new());
        let n = 36_000i64;
        for i in 0..n {
            let t = t0 + i * 100;
            let conn = 1 + (i % 40) as u64;
            if i % 10 == 3 {
                acc += &lab_line(t, 502, "127.0.0.20:8080, be", conn, 1 + i as u64);
                let ts = jiff::Timestamp::from_second(t / 1000)
                    .unwrap()
                    .strftime("%Y/%m/%d %H:%M:%S")
                    .to_string();
                err += &format!(
                    "{ts} [error] 1#1: *{conn} upstream prematurely closed connection while reading response header from upstream, client: 127.0.0.1, server: , request: \"GET / HTTP/1.1\", upstream: \"http://127.0.0.20:8080/\", host: \"x\"\n"
                );
                err += &err_line(
                    t / 1000,
                    conn,
                    "no live upstreams while connecting to upstream",
                );
            } else {
                acc += &lab_line(t, 200, "127.0.0.20:8080", conn, 1 + i as u64);
            }
            if i % 10 == 0 {
                let ts = jiff::Timestamp::from_second(t / 1000)
                    .unwrap()
                    .strftime("%Y/%m/%d %H:%M:%S")
                    .to_string();
                noise += &format!(
                    "{ts} [error] 2#2: be.lab could not be resolved (110: Operation timed out)\n"
                );
                if i % 50 == 0 {
                    noise += &format!(
                        "{ts} [warn] 2#2: *{conn} upstream server temporarily disabled while reading response header from upstream, client: 127.0.0.1, server: , request: \"GET / HTTP/1.1\", upstream: \"http://127.0.0.30:8080/\", host: \"x\"\n"
                    );
                }
            }
        }
        let a = dir.path().join("access.log");
        let e = dir.path().join("error.log");
        let z = dir.path().join("noise.log.gz");
        std::fs::write(&a, acc).unwrap();
        std::fs::write(&e, err).unwrap();
        let mut gz = flate2::write::GzEncoder::new(
            std::fs::File::create(&z).unwrap(),
            flate2::Compression::fast(),
        );
        std::io::Write::write_all(&mut gz, noise.as_bytes()).unwrap();
        gz.finish().unwrap();
        let mut o = Options::new(vec![a], vec![e, z]);
        o.log_format = LogFormat::lab();
        o.tz_offset_s = Some(0);
        let (d, _, st) = diagnose_with_stats(&o).unwrap();
        assert_eq!(d.requests, n as u64);
        assert_eq!(d.nlu.total, 3600);
        assert_eq!(d.nlu.paired, 3600, "every NLU found its own line");
        assert_eq!(st.error_lines, 3600 * 2 + 3600 + 720);
        assert_eq!((st.late_lines, st.dropped), (0, 0));
        // One request every 100 ms, lines of one second, 5 s read ahead: a few dozen at most.
        assert!(
            st.max_buffered > 0 && st.max_buffered <= 100,
            "buffered {} of {} error lines",
            st.max_buffered,
            st.error_lines
        );
        // Evidence is quoted from the lines read again: at most eight per incident, not the log
        // (a steady trickle of one NLU a second is cut into incidents of ~10 s).
        assert!(
            st.fetched > 0 && st.fetched <= 8 * d.incidents.len() && st.fetched * 10 < 11520,
            "{st:?}, {} incidents",
            d.incidents.len()
        );
        let te = d
            .incidents
            .iter()
            .flat_map(|i| &i.evidence)
            .find(|e| e.note.starts_with("paired"))
            .unwrap();
        assert!(te.text.contains("no live upstreams"), "{te:?}");
        let sig = d
            .signatures
            .iter()
            .find(|s| s.id == "resolve-timeout")
            .unwrap();
        assert_eq!(sig.count, 3600);
        assert!(sig.first.at.ends_with("noise.log.gz:1"), "{:?}", sig.first);
        assert!(sig.first.text.contains("could not be resolved"));
        assert_eq!(d.requery_source, "error-log");
        assert_eq!(d.requery_period_ms, Some(1000.0));
    }

    /// Several workers share one error_log: a request's NLU line written after a line of a
    /// later second (out of order in the file) still pairs, and is counted as late.
    #[test]
    fn an_out_of_order_error_line_still_pairs() {
        let dir = tempfile::tempdir().unwrap();
        let t0 = 1_796_018_400_000i64;
        let mut acc = String::new();
        acc += &lab_line(t0 + 1_500, 502, "127.0.0.20:8080, be", 4, 1);
        acc += &lab_line(t0 + 3_200, 502, "127.0.0.20:8080, be", 5, 1);
        let mut err = String::new();
        err += &nlu_err(t0 / 1000 + 3, 5);
        // Written after the line of second 3, for second 1.
        err += &nlu_err(t0 / 1000 + 1, 4);
        let o = lab_options(dir.path(), &acc, &err);
        let (d, _, st) = diagnose_with_stats(&o).unwrap();
        assert_eq!((d.nlu.total, d.nlu.paired), (2, 2));
        assert_eq!(st.late_lines, 1);
        let ats: Vec<&str> = d
            .incidents
            .iter()
            .flat_map(|i| &i.evidence)
            .filter(|e| e.note.starts_with("paired"))
            .map(|e| e.at.rsplit(':').next().unwrap())
            .collect();
        assert_eq!(ats, ["2", "1"]);
    }
}
