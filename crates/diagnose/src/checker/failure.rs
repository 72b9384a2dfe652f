//! One failed request as the checker keeps it, and the `$upstream_addr` trajectories it came
//! through.

use super::errors::ERef;
use crate::classes::{Class, Sig};
use std::collections::HashMap;

/// Distinct upstream keys (addresses and group names) counted separately; the rest share one.
pub(super) const MAX_KEYS: u32 = 4095;

/// One distinct `$upstream_addr` value, parsed once.
pub(super) struct Traj {
    /// Hops of the last pass.
    pub hops: Vec<String>,
    pub nlu: bool,
    /// Key for counting: the last real address, or the group for NLU.
    pub key: Option<u32>,
    /// Real addresses of the last pass (tried before the NLU).
    pub addrs: Vec<String>,
    pub group: Option<String>,
    /// Passes (`error_page … = @named` redirects separate them with ` : `).
    pub passes: u32,
    /// NLUs that ended an earlier pass: (hops, group, real addresses of that pass).
    pub internal: Vec<(u32, String, Vec<String>)>,
}

/// A real address (`IP:port`, `[v6]:port`, `unix:…`) rather than an upstream group's name.
pub(super) fn is_addr(h: &str) -> bool {
    h.starts_with("unix:") || h.parse::<std::net::SocketAddr>().is_ok()
}

/// Small integer ids for addresses and group names (the per-bucket counts are keyed by them).
#[derive(Default)]
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
    pub method: Option<String>,
    pub request: Option<String>,
    pub remote: Option<String>,
    pub raw: String,
    pub group: String,
    pub nlu: bool,
    pub hops: u32,
    /// The error line paired with the request (its NLU line, else its first-try line) and its
    /// signature.
    pub paired: Option<(ERef, Sig)>,
    /// First-try failure lines of the same `*cid` in the request's window.
    pub first_try: Vec<(ERef, Sig)>,
    /// Its own resolution's failure line (`*cid … could not be resolved`, per-request DNS).
    pub own_dns: Option<(ERef, Sig)>,
    pub class: Class,
    pub confidence: f64,
    /// An NLU inside an earlier pass of a redirected request (not a client-visible failure).
    pub internal: bool,
    /// Real addresses tried in the NLU's pass (to see whether it went through a pre-swap peer).
    pub addrs: Vec<String>,
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
            class: Class::Undetermined,
            confidence: 0.0,
            internal: false,
            addrs: Vec::new(),
        }
    }
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
}
