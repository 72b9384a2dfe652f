//! One failed request as the checker keeps it, and the `$upstream_addr` trajectories it came
//! through.

use super::errors::ERef;
use super::pairing::UNRESOLVED;
use crate::classes::{Class, Sig};
use resolvelab_history::logformat::same_bytes;
use std::collections::HashMap;

/// Distinct upstream keys (addresses and group names) counted separately; the rest share one.
pub(super) const MAX_KEYS: u32 = 4095;

/// One distinct `$upstream_addr` value, parsed once.
#[derive(Clone)]
pub(super) struct Traj {
    /// Hops of the last pass.
    pub hops: Vec<String>,
    pub nlu: bool,
    /// Key for counting: the last real address, or the group for NLU.
    pub key: Option<u32>,
    /// Real addresses of the last pass (tried before the NLU).
    pub addrs: Vec<String>,
    /// Keys of every real address any pass tried (time to follow a swap).
    pub tried: Vec<u32>,
    pub group: Option<String>,
    /// Passes (`error_page … = @named` redirects separate them with ` : `).
    pub passes: u32,
    /// NLUs that ended an earlier pass: (hops, group, real addresses of that pass).
    pub internal: Vec<(u32, String, Vec<String>)>,
    /// A hop of the last pass is neither an address nor a group ([`Hop::Unknown`]): the
    /// trajectory is unknown, and the request is no NLU on this evidence.
    pub unknown: bool,
}

impl Traj {
    /// What was read as a group name is not one (the log names groups elsewhere, as
    /// ingress-nginx's `$proxy_upstream_name` does): the trajectory becomes unknown.
    pub fn group_is_unknown(&mut self) {
        if self.nlu {
            self.nlu = false;
            self.group = None;
            self.key = None;
            self.unknown = true;
        }
    }
}

/// A real address (`IP:port`, `[v6]:port`, `unix:…`) rather than an upstream group's name.
pub(super) fn is_addr(h: &str) -> bool {
    h.starts_with("unix:") || h.parse::<std::net::SocketAddr>().is_ok()
}

/// What one hop of `$upstream_addr` is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Hop {
    /// A real address.
    Addr,
    /// An upstream group's name: what nginx writes when peer selection refused the request.
    Group,
    /// Neither: a redaction (`XXX`, `<ip>`, `x.x.x.x`, `10.xxx.xx.xxx:80`, `[2409:xxxx::1]:80`,
    /// `serverIP:81`) or a placeholder. Never read as a group, so never an NLU (issue #43).
    Unknown,
}

/// The kind of one hop. A group name is what nginx's `upstream` block (or a `*_pass` host)
/// is called: a host-like token without a port, brackets or spaces, and not a redaction.
pub(super) fn hop(h: &str) -> Hop {
    if is_addr(h) {
        return Hop::Addr;
    }
    let odd =
        |c: char| matches!(c, '<' | '>' | '*' | '[' | ']' | ':' | '?' | '#') || c.is_whitespace();
    // Dotted labels of digits and x's with at least one x (`x.x.x.x`, `10.xxx.xx.xxx`,
    // `192.x.x.x`), or a run of x's alone (`XXX`).
    let xs = |l: &str| !l.is_empty() && l.chars().all(|c| c == 'x' || c == 'X');
    let masked = h
        .split('.')
        .all(|l| xs(l) || (!l.is_empty() && l.bytes().all(|b| b.is_ascii_digit())))
        && h.split('.').any(xs);
    let placeholder = ["REDACTED", "redacted", "IP", "HIDDEN", "hidden"].contains(&h);
    if h.chars().any(odd) || masked || placeholder {
        Hop::Unknown
    } else {
        Hop::Group
    }
}

/// Small integer ids for addresses and group names (the per-bucket counts are keyed by them).
#[derive(Default, Clone)]
pub(super) struct Keys {
    ids: HashMap<String, u32>,
    pub names: Vec<String>,
}

impl Keys {
    pub fn id(&mut self, s: &str) -> u32 {
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

pub(super) fn parse_traj(s: &str, keys: &mut Keys) -> Traj {
    let all: Vec<&str> = s.split(" : ").collect();
    let last = all.last().copied().unwrap_or(s);
    let internal: Vec<(u32, String, Vec<String>)> = all[..all.len().saturating_sub(1)]
        .iter()
        .filter_map(|p| {
            let h = split_hops(p);
            let g = h.last().filter(|g| hop(g) == Hop::Group)?.clone();
            let addrs = h.iter().filter(|x| is_addr(x)).cloned().collect();
            Some((h.len() as u32, g, addrs))
        })
        .collect();
    let hops: Vec<String> = split_hops(last);
    let unknown = hops.iter().any(|h| hop(h) == Hop::Unknown);
    let nlu = hops.last().is_some_and(|h| hop(h) == Hop::Group);
    let addrs: Vec<String> = hops.iter().filter(|h| is_addr(h)).cloned().collect();
    let group = if nlu { hops.last().cloned() } else { None };
    let key = if nlu {
        group.as_deref().map(|g| keys.id(g))
    } else if hops.last().is_some_and(|h| is_addr(h)) {
        addrs.last().map(|a| keys.id(a))
    } else {
        None
    };
    // After `key`, so that the last address keeps the id it had before tries were tracked.
    let mut tried: Vec<u32> = internal
        .iter()
        .flat_map(|(_, _, a)| a.iter())
        .chain(&addrs)
        .map(|a| keys.id(a))
        .filter(|&k| k < MAX_KEYS)
        .collect();
    tried.sort_unstable();
    tried.dedup();
    Traj {
        hops,
        nlu,
        key,
        tried,
        addrs,
        group,
        passes: all.len() as u32,
        internal,
        unknown,
    }
}

/// A failed request (or an NLU inside an earlier pass of one).
#[derive(Clone)]
pub(super) struct Failure {
    pub t_ms: i64,
    pub start_ms: i64,
    pub status: u16,
    pub traj: Option<u32>,
    pub file: u32,
    pub line: u64,
    pub conn: Option<u64>,
    /// Its method ([`Store::method_id`]).
    pub method: u16,
    /// [`text_hash`](super::errors::text_hash) of `$request`.
    pub request: Option<u64>,
    /// [`text_hash`](super::errors::text_hash) of `$remote_addr`.
    pub remote: Option<u64>,
    pub group: String,
    pub nlu: bool,
    pub hops: u32,
    /// Its error lines, once paired (or as an error log read alone shows them): boxed, so that
    /// the failures waiting for the pairing (a 10 s horizon of an outage) are small.
    pub err: Option<Box<ErrLines>>,
    /// An NLU inside an earlier pass of a redirected request (not a client-visible failure).
    pub internal: bool,
    /// Which pass's addresses it tried (see [`Kind::pass`]).
    pub pass: u8,
}

/// A failure's error lines, with their signatures.
#[derive(Clone, Default)]
pub(super) struct ErrLines {
    /// The error line paired with the request (its NLU line, else its first-try line).
    pub paired: Option<(ERef, Sig)>,
    /// First-try failure lines of the same `*cid` in the request's window (at most 3).
    pub first_try: Vec<(ERef, Sig)>,
    /// Its own resolution's failure line (`*cid … could not be resolved`, per-request DNS).
    pub own_dns: Option<(ERef, Sig)>,
}

impl ErrLines {
    /// Boxed for a [`Failure`]; none when it holds no line.
    pub fn boxed(self) -> Option<Box<ErrLines>> {
        let none = self.paired.is_none() && self.first_try.is_empty() && self.own_dns.is_none();
        (!none).then(|| Box::new(self))
    }
}

impl Failure {
    /// Its paired error line.
    pub fn paired(&self) -> Option<(ERef, Sig)> {
        self.err.as_ref().and_then(|l| l.paired)
    }

    /// Its first-try failure lines.
    pub fn first_try(&self) -> &[(ERef, Sig)] {
        self.err.as_ref().map_or(&[], |l| &l.first_try)
    }

    /// Its own resolution's failure line.
    pub fn own_dns(&self) -> Option<(ERef, Sig)> {
        self.err.as_ref().and_then(|l| l.own_dns)
    }

    /// Its error lines, to add to.
    pub fn err_mut(&mut self) -> &mut ErrLines {
        self.err.get_or_insert_with(Default::default)
    }
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
            method: 0,
            request: None,
            remote: None,
            group: String::new(),
            nlu: false,
            hops: 0,
            err: None,
            internal: false,
            pass: 0,
        }
    }
}

/// Failures of one (second, kind) kept one by one; the rest of that second are counted into the
/// last one kept (its weight), so that memory follows the span of the logs and the variety of
/// failures, not their number (a long outage at thousands of failures a second). Lab runs
/// (≤ 300 failures a second) stay below it: every failure is kept.
pub(super) const KEEP_PER_SECOND: u16 = 512;
/// Past [`KEEP_BUDGET`] records (48 MiB), fewer are kept one by one per (second, kind).
pub(super) const KEEP_PER_SECOND_OVER_BUDGET: u16 = 64;
/// Records kept before [`KEEP_PER_SECOND_OVER_BUDGET`] applies.
pub(super) const KEEP_BUDGET: usize = 1 << 20;

/// What a failure is, apart from when and where it was logged: the facts classification reads,
/// shared by many failures (interned in [`Store`]).
#[derive(Clone, PartialEq, Eq, Hash)]
pub(super) struct Kind {
    pub status: u16,
    pub traj: Option<u32>,
    /// Index into [`Store::groups`].
    pub group: u32,
    /// Index into [`Store::methods`].
    pub method: u16,
    pub nlu: bool,
    pub hops: u32,
    pub internal: bool,
    /// Which pass's addresses it tried: 0 the last, `i + 1` the trajectory's `internal[i]`.
    pub pass: u8,
    pub paired: Option<Sig>,
    /// First-try failure lines paired (at most 3), and whether one was `(99: …)`.
    pub first_try: u8,
    pub first_try_99: bool,
    pub own_dns: Option<Sig>,
}

/// A line by (file, line number), packed in one word (0: none) that orders as the pair does
/// (files below 65,536, lines below 2^48).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(super) struct At(u64);

impl At {
    pub const NONE: At = At(0);
    /// After every line.
    pub const LAST: At = At(u64::MAX);

    pub fn new(file: u32, line: u64) -> At {
        At(((file as u64) << 48) | (line & ((1 << 48) - 1)))
    }

    pub fn of(r: Option<ERef>) -> At {
        r.map_or(At::NONE, |r| r.at())
    }

    pub fn file(self) -> u32 {
        (self.0 >> 48) as u32
    }

    pub fn line(self) -> u64 {
        self.0 & ((1 << 48) - 1)
    }

    pub fn get(self) -> Option<(u32, u64)> {
        (self.0 != 0).then(|| (self.file(), self.line()))
    }
}

/// One kept failure (48 bytes): when, where, its kind, the error lines paired with it, and —
/// once classified — its class.
#[derive(Clone)]
pub(super) struct Rec {
    pub t_ms: i64,
    pub at: At,
    /// Its paired error line (NLU, first try, own resolution).
    pub paired_at: At,
    /// Its first first-try failure line.
    pub first_try_at: At,
    /// End minus the earliest start of its members (ms).
    pub latency_ms: u32,
    pub kind: u32,
    /// Failures it stands for (itself included).
    pub weight: u16,
    /// Last member's end minus its own (ms).
    pub span_ms: u16,
    pub class: Class,
    /// Confidence in 1/10,000.
    pub conf: u16,
}

impl Rec {
    pub fn start_ms(&self) -> i64 {
        self.t_ms - self.latency_ms as i64
    }

    pub fn last_ms(&self) -> i64 {
        self.t_ms + self.span_ms as i64
    }

    pub fn confidence(&self) -> f64 {
        self.conf as f64 / 10_000.0
    }

    pub fn weight(&self) -> u64 {
        self.weight as u64
    }
}

/// Kinds in [`Store::recent_kinds`].
const RECENT_KINDS: usize = 4;

/// Every failure kept, in pairing (time) order, with the tables their kinds point into.
#[derive(Default, Clone)]
pub(super) struct Store {
    pub recs: Vec<Rec>,
    pub kinds: Vec<Kind>,
    kind_ids: rustc_hash::FxHashMap<Kind, u32>,
    /// The kinds interned last, the latest first: the failures of a burst repeat a few kinds
    /// (a log's NLUs and its other 502s interleave), and a compare costs less than a hash.
    recent_kinds: Vec<(Kind, u32)>,
    pub groups: Vec<String>,
    group_ids: rustc_hash::FxHashMap<String, u32>,
    pub methods: Vec<Option<String>>,
    /// The method id [`Store::method_id`] returned last.
    last_method: u16,
    /// The second being kept.
    sec: i64,
    /// Seconds seen so far (a change of second starts a new one): a slot of an earlier one
    /// is stale, which empties every slot at once without clearing them.
    epoch: u64,
    /// Per kind id: (epoch, failures kept in it, last record).
    per_kind: Vec<(u64, u16, usize)>,
    /// Failures counted into an earlier record rather than kept.
    pub collapsed: u64,
}

impl Store {
    /// Keep a paired failure in `group` (its group, known now: `f.group` is not read), or
    /// count it into the last one of its kind.
    pub fn push(&mut self, f: &Failure, group: &str) {
        let kind = Kind {
            status: f.status,
            traj: f.traj,
            group: match self.recent_kinds.first() {
                // Failures come in runs of one group: skip hashing its name.
                Some((k, _))
                    if same_bytes(self.groups[k.group as usize].as_bytes(), group.as_bytes()) =>
                {
                    k.group
                }
                _ => intern(&mut self.groups, &mut self.group_ids, group),
            },
            method: f.method,
            nlu: f.nlu,
            hops: f.hops,
            internal: f.internal,
            pass: f.pass,
            paired: f.paired().map(|p| p.1),
            first_try: f.first_try().len().min(3) as u8,
            first_try_99: f
                .first_try()
                .iter()
                .any(|e| e.1 == Sig::ConnectEaddrnotavail),
            own_dns: f.own_dns().map(|p| p.1),
        };
        let kind = match self.recent_kinds.iter().position(|(k, _)| *k == kind) {
            Some(p) => {
                self.recent_kinds[..=p].rotate_right(1);
                self.recent_kinds[0].1
            }
            None => {
                let id = intern(&mut self.kinds, &mut self.kind_ids, &kind);
                self.recent_kinds.truncate(RECENT_KINDS - 1);
                self.recent_kinds.insert(0, (kind, id));
                id
            }
        };
        let sec = f.t_ms.div_euclid(1000);
        if sec != self.sec {
            self.sec = sec;
            self.epoch += 1;
        }
        let latency = (f.t_ms - f.start_ms).clamp(0, u32::MAX as i64) as u32;
        if kind as usize >= self.per_kind.len() {
            self.per_kind.resize(kind as usize + 1, (0, 0, usize::MAX));
        }
        let slot = &mut self.per_kind[kind as usize];
        if slot.0 != self.epoch {
            *slot = (self.epoch, 0, usize::MAX);
        }
        let keep = if self.recs.len() < KEEP_BUDGET {
            KEEP_PER_SECOND
        } else {
            KEEP_PER_SECOND_OVER_BUDGET
        };
        if slot.1 >= keep
            && let Some(r) = self.recs.get_mut(slot.2)
            && r.weight < u16::MAX
            && f.t_ms >= r.t_ms
        {
            r.weight += 1;
            r.span_ms = r.span_ms.max((f.t_ms - r.t_ms).min(u16::MAX as i64) as u16);
            r.latency_ms = r
                .latency_ms
                .max((r.t_ms - f.start_ms).clamp(0, u32::MAX as i64) as u32);
            self.collapsed += 1;
            return;
        }
        slot.1 = slot.1.saturating_add(1);
        slot.2 = self.recs.len();
        self.recs.push(Rec {
            t_ms: f.t_ms,
            at: At::new(f.file, f.line),
            paired_at: At::of(f.paired().map(|p| p.0)),
            first_try_at: At::of(f.first_try().first().map(|p| p.0)),
            latency_ms: latency,
            kind,
            weight: 1,
            span_ms: 0,
            class: Class::Undetermined,
            conf: 0,
        });
    }

    /// The id of a method (`None`: not logged).
    pub fn method_id(&mut self, m: Option<&str>) -> u16 {
        // Failures repeat a few methods: the last one first.
        let last = self.last_method as usize;
        let same = |x: &Option<String>| match (x, m) {
            (Some(x), Some(m)) => same_bytes(x.as_bytes(), m.as_bytes()),
            (x, m) => x.is_none() && m.is_none(),
        };
        if self.methods.get(last).is_some_and(same) {
            return self.last_method;
        }
        if let Some(i) = self.methods.iter().position(same) {
            self.last_method = i as u16;
            return i as u16;
        }
        if self.methods.len() >= u16::MAX as usize {
            return 0;
        }
        self.methods.push(m.map(str::to_string));
        (self.methods.len() - 1) as u16
    }

    pub fn kind(&self, i: usize) -> &Kind {
        &self.kinds[self.recs[i].kind as usize]
    }

    /// Failures kept and counted, internal NLUs left out.
    #[cfg(test)]
    pub fn client_failures(&self) -> u64 {
        (0..self.recs.len())
            .filter(|&i| !self.kind(i).internal)
            .map(|i| self.recs[i].weight())
            .sum()
    }

    /// The real addresses a failure tried in its failing pass.
    pub fn addrs<'a>(&self, i: usize, trajs: &'a [Traj]) -> &'a [String] {
        let k = self.kind(i);
        match k.traj.map(|t| &trajs[t as usize]) {
            None => &[],
            Some(t) if k.pass == 0 => &t.addrs,
            Some(t) => t.internal.get(k.pass as usize - 1).map_or(&[], |p| &p.2),
        }
    }

    /// Name the groups left open while pairing (see [`UNRESOLVED`]): an address's group is
    /// the one an NLU trajectory named for it, else `default`, as is a failure nothing names.
    pub fn resolve_groups(&mut self, default: &str, addr_group: &HashMap<String, String>) {
        let (mut names, mut ids) = (Vec::new(), rustc_hash::FxHashMap::default());
        let remap: Vec<u32> = self
            .groups
            .iter()
            .map(|g| {
                let name = match g.strip_prefix(UNRESOLVED) {
                    Some("") => default,
                    Some(a) => addr_group.get(a).map_or(default, String::as_str),
                    None => g,
                };
                intern(&mut names, &mut ids, &name.to_string())
            })
            .collect();
        for k in &mut self.kinds {
            k.group = remap[k.group as usize];
        }
        (self.groups, self.group_ids) = (names, ids);
        // Kinds may now repeat; nothing is interned after this.
        self.kind_ids.clear();
        self.recent_kinds.clear();
    }

    /// Keep only the failures of group `g`.
    pub fn retain_group(&mut self, g: &str) {
        let Some(&gid) = self.group_ids.get(g) else {
            self.recs.clear();
            return;
        };
        let kinds = &self.kinds;
        self.recs.retain(|r| kinds[r.kind as usize].group == gid);
    }
}

fn intern<T, Q, S>(v: &mut Vec<T>, ids: &mut HashMap<T, u32, S>, x: &Q) -> u32
where
    T: Clone + Eq + std::hash::Hash + std::borrow::Borrow<Q>,
    Q: ToOwned<Owned = T> + Eq + std::hash::Hash + ?Sized,
    S: std::hash::BuildHasher,
{
    if let Some(&i) = ids.get(x) {
        return i;
    }
    v.push(x.to_owned());
    ids.insert(x.to_owned(), (v.len() - 1) as u32);
    (v.len() - 1) as u32
}

/// The IP of `IP:port` / `[v6]:port` (or the text itself).
pub(super) fn host_of(a: &str) -> String {
    a.parse::<std::net::SocketAddr>()
        .map(|s| s.ip().to_string())
        .unwrap_or_else(|_| a.to_string())
}

/// `s` cut to at most `n` bytes (on a character boundary), with `…` when cut.
pub(super) fn trunc(s: &str, n: usize) -> String {
    if s.len() <= n {
        return s.to_string();
    }
    let mut c = n;
    while !s.is_char_boundary(c) {
        c -= 1;
    }
    format!("{}…", &s[..c])
}

#[cfg(test)]
mod tests {
    use super::*;

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
    }

    /// Redactions and placeholders seen in real logs (tests/fixtures/real/) are neither an
    /// address nor a group: never an NLU (issue #43).
    #[test]
    fn a_redaction_is_never_a_group() {
        for h in [
            "XXX",
            "xx",
            "x.x.x.x",
            "10.xxx.xx.xxx:80",
            "192.x.x.x",
            "<ip>",
            "<REDACTED_IP>",
            "<ipaddress>:xxx",
            "serverIP:81",
            "<data>:9000",
            "[2409:xxxx:xxxx::1]:443",
            "[::1]:XXX",
            "****",
            "REDACTED",
        ] {
            assert_eq!(hop(h), Hop::Unknown, "{h}");
            let mut k = Keys::default();
            let t = parse_traj(h, &mut k);
            assert!(
                !t.nlu && t.unknown && t.group.is_none() && t.key.is_none(),
                "{h}"
            );
            let t = parse_traj(&format!("10.0.0.1:80, {h}"), &mut k);
            assert!(!t.nlu && t.unknown, "{h} as the second hop");
        }
        for g in [
            "be",
            "backend",
            "api.example.com",
            "default-svc-80",
            "app_v2",
            "xapi",
        ] {
            assert_eq!(hop(g), Hop::Group, "{g}");
        }
        for a in ["10.0.0.1:80", "[2001:db8::1]:443", "unix:/run/php.sock"] {
            assert_eq!(hop(a), Hop::Addr, "{a}");
        }
    }

    fn nlu_at(t_ms: i64, line: u64) -> Failure {
        Failure {
            t_ms,
            start_ms: t_ms - 3,
            status: 502,
            line,
            nlu: true,
            hops: 1,
            ..Failure::default()
        }
    }

    #[test]
    fn a_heavy_second_is_counted_not_kept() {
        let mut s = Store::default();
        // 10,000 NLUs of one kind in one second, then one in the next second.
        for i in 0..10_000u64 {
            s.push(&nlu_at(1_000_000 + (i / 10) as i64, i + 1), "be");
        }
        s.push(&nlu_at(1_001_500, 10_001), "be");
        assert_eq!(s.recs.len(), KEEP_PER_SECOND as usize + 1);
        assert_eq!(s.client_failures(), 10_001);
        assert_eq!(s.collapsed, 10_000 - KEEP_PER_SECOND as u64);
        let last = &s.recs[KEEP_PER_SECOND as usize - 1];
        // It stands for itself and every later failure of its second, up to the last one's end.
        assert_eq!(last.weight(), 10_000 - KEEP_PER_SECOND as u64 + 1);
        assert_eq!(last.last_ms(), 1_000_999);
        assert_eq!(s.kinds.len(), 1);
    }

    #[test]
    fn over_the_budget_fewer_are_kept_per_second() {
        let mut s = Store::default();
        let per_sec = KEEP_PER_SECOND as u64;
        let seconds = (KEEP_BUDGET as u64).div_ceil(per_sec) + 2;
        for sec in 0..seconds {
            for i in 0..per_sec {
                s.push(
                    &nlu_at(sec as i64 * 1000 + i as i64 % 1000, sec * per_sec + i + 1),
                    "be",
                );
            }
        }
        let total = seconds * per_sec;
        assert_eq!(s.client_failures(), total);
        assert!(
            s.recs.len() < KEEP_BUDGET + 3 * per_sec as usize,
            "{}",
            s.recs.len()
        );
        let tail = &s.recs[s.recs.len() - KEEP_PER_SECOND_OVER_BUDGET as usize..];
        assert_eq!(tail.iter().map(Rec::weight).sum::<u64>(), per_sec);
    }
}
