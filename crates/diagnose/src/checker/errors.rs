//! The error logs: every line tagged with its signature and counted per second
//! ([`SigIndex`]), the lines that can still pair with a pending failure buffered
//! ([`PairWindow`]), the failures of an error log read alone, and the lines quoted as evidence
//! read again at the end ([`Cites`]).

use super::failure::{Failure, is_addr, trunc};
use crate::classes::{self, Sig};
use crate::model::{Evidence, Incident, Signature};
use resolvelab_history::{ErrorRecord, ErrorStream, History};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// How far (ms) past a failure's end the error stream is read before pairing it, so that a line
/// written slightly out of order (several workers share one file) still finds its request.
pub(super) const REORDER_SLACK_MS: i64 = 5000;
/// At most this many error lines wait in the pairing window (a safety net: the window is
/// normally bounded by the longest request).
pub const MAX_BUFFERED: usize = 200_000;

/// One error line by its place in the merged order: time (ms), file, line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(super) struct ERef {
    pub t_ms: i64,
    pub file: u32,
    pub line: u64,
}

/// What pairing needs of a buffered error line.
pub(super) struct Pairable {
    pub cid: u64,
    pub sig: Sig,
    pub request: Option<String>,
    pub client: Option<String>,
    pub upstream_host: Option<String>,
}

/// The error lines that may still pair with a pending failure, ordered like the merged stream
/// and indexed by `*cid`.
#[derive(Default)]
pub(super) struct PairWindow {
    lines: BTreeMap<ERef, Pairable>,
    cids: BTreeSet<(u64, ERef)>,
    /// The most lines buffered at once.
    pub max_len: usize,
    /// Lines dropped over the safety cap.
    pub dropped: u64,
}

impl ERef {
    /// The first and last possible references of the time window `lo..=hi` (ms).
    pub fn span(lo: i64, hi: i64) -> (ERef, ERef) {
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
    pub fn insert(&mut self, k: ERef, p: Pairable) {
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

    pub fn evict_before(&mut self, t_ms: i64) {
        while let Some(e) = self.lines.first_entry() {
            if e.key().t_ms >= t_ms {
                break;
            }
            let (k, p) = e.remove_entry();
            self.cids.remove(&(p.cid, k));
        }
    }

    pub fn get(&self, k: &ERef) -> &Pairable {
        &self.lines[k]
    }

    pub fn take(&mut self, k: &ERef) -> Pairable {
        let p = self.lines.remove(k).expect("a candidate is in the window");
        self.cids.remove(&(p.cid, *k));
        p
    }

    pub fn by_cid(&self, cid: u64, lo: i64, hi: i64) -> Vec<ERef> {
        let (a, b) = ERef::span(lo, hi);
        self.cids
            .range((cid, a)..=(cid, b))
            .map(|(_, k)| *k)
            .collect()
    }

    pub fn by_time(&self, lo: i64, hi: i64) -> impl Iterator<Item = (ERef, &Pairable)> {
        let (a, b) = ERef::span(lo, hi);
        self.lines.range(a..=b).map(|(k, p)| (*k, p))
    }
}

/// Per signature: count, first line, and per second (error-log resolution) the first line and
/// the count — bounded by the span of the logs in seconds, not by their size.
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
    /// The last distinct messages and what they are: (message, signature, length of the name
    /// before ` could not be resolved`). Messages repeat (the context is not part of them), so
    /// most lines skip the substring searches.
    memo: Vec<(String, Sig, Option<usize>)>,
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
    fn classify(&mut self, message: &str) -> (Sig, Option<usize>) {
        if let Some(m) = self.memo.iter().find(|m| m.0 == message) {
            return (m.1, m.2);
        }
        let v = (Sig::of(message), message.find(" could not be resolved"));
        let entry = (message.to_string(), v.0, v.1);
        if self.memo.len() < MEMO {
            self.memo.push(entry);
        } else {
            self.memo[self.memo_next] = entry;
            self.memo_next = (self.memo_next + 1) % MEMO;
        }
        v
    }

    /// Index one line; returns its signature.
    fn add(&mut self, e: &ErrorRecord) -> Sig {
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
pub(super) fn failures_from_errors(hist: &History, offset_s: i32) -> anyhow::Result<Vec<Failure>> {
    let mut errs = hist.error_stream(offset_s)?;
    let mut out: Vec<Failure> = Vec::new();
    let mut open: HashMap<(u64, Option<String>), usize> = HashMap::new();
    while let Some(e) = errs.next() {
        let sig = Sig::of(&e.message);
        let Some(cid) = e.cid.filter(|_| sig.is_request_failure()) else {
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
        if sig == Sig::NoLiveUpstreams {
            f.nlu = true;
            f.paired = Some((r, sig));
        } else if sig.is_resolution_failure() {
            f.own_dns = Some((r, sig));
        } else if f.first_try.len() < 3 {
            f.first_try.push((r, sig));
        }
    }
    Ok(out)
}

/// A failed request as one error line shows it (see [`failures_from_errors`]).
fn error_failure(e: &ErrorRecord, cid: u64, sig: Sig) -> Failure {
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
pub(super) struct Cites {
    wanted: HashMap<String, (u32, u64)>,
}

impl Cites {
    /// Evidence for one error line; the text follows in [`Cites::fill`].
    pub fn ev(&mut self, h: &History, r: ERef, note: &str) -> Evidence {
        let at = h.cite(r.file, r.line);
        self.wanted.insert(at.clone(), (r.file, r.line));
        Evidence {
            at,
            note: note.to_string(),
            text: String::new(),
        }
    }

    /// Read the cited lines and fill their evidence text; returns the number of lines read.
    pub fn fill(
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
