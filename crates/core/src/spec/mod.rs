//! The lab's vocabulary: the data of everything that can be injected or scheduled, parsed and
//! displayed in one place, with no behaviour. The authority, the backend, the proxy, the load
//! generator and the model implement behaviour for these types; scenarios, the command line
//! and the model read the same spellings.
//!
//! * [`dns`] — DNS answer modes (`static:IP`, `alternate:…`, `delay:DUR+MODE`, …).
//! * [`fault`] — the common fault keys (`toxicity`, `for`, `seed`, `name`) and the backend's
//!   fault kinds (`reclaim`, `rst`, `refuse`, …).
//! * [`toxic`] — the proxy's fault kinds (Toxiproxy's `latency`, `reset_peer`, `down`, …).
//! * [`latency`] — latency models (`2ms`, `uniform:1ms..5ms`, `lognormal:p50=2ms,p99=40ms`).
//! * [`rate`] — rate plans (`300`, `100@10s,0..500@30s`) and their scaling.
//! * [`nginx`] — nginx's own size and time values (`128k`, `1m30s`), a `server` line's
//!   parameters and `proxy_next_upstream` ([`nginx::NextUpstream`]).
//! * [`mix`] — the load's method mix (`GET=0.8,POST=0.2`).
//! * [`engine`] — engine ids (`nginx`, `haproxy`, `sim-envoy`) and the third-party proxies.
//! * [`schedule`] — the open-loop schedule of a rate plan.
//! * [`Spec`] — the `KIND[:key=value,…]` syntax the fault specs are written in.
//!
//! ```
//! use resolvelab_core::spec::dns::DnsMode;
//! let m: DnsMode = "delay:200ms+alternate:127.0.0.20,127.0.0.30".parse().unwrap();
//! assert_eq!(m.to_string(), "delay:200ms+alternate:127.0.0.20,127.0.0.30");
//! assert!("static:10.0.0.1".parse::<DnsMode>().unwrap().check_loopback(false).is_err());
//! ```

pub mod dns;
pub mod engine;
pub mod fault;
pub mod latency;
pub mod mix;
pub mod nginx;
pub mod rate;
pub mod schedule;
pub mod toxic;

use std::collections::BTreeMap;

/// A value as a file wrote it and as it reads: typed when the file is read, and written back
/// with the author's spelling (a run directory's `scenario.toml`; the lab names a standing fault
/// by its kind as written). Serde reads and writes it as its text.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
#[serde(
    try_from = "String",
    into = "String",
    bound(
        serialize = "T: Clone",
        deserialize = "T: std::str::FromStr<Err = String>"
    )
)]
pub struct Spelled<T> {
    /// As written.
    pub text: String,
    /// As parsed.
    pub value: T,
}

impl<T: std::fmt::Display> Spelled<T> {
    /// A value with its canonical spelling.
    pub fn new(value: T) -> Spelled<T> {
        Spelled {
            text: value.to_string(),
            value,
        }
    }
}

impl<T: std::str::FromStr<Err = String>> TryFrom<String> for Spelled<T> {
    type Error = String;
    fn try_from(text: String) -> Result<Self, String> {
        let value = text.parse()?;
        Ok(Spelled { text, value })
    }
}

impl<T> From<Spelled<T>> for String {
    fn from(v: Spelled<T>) -> String {
        v.text
    }
}

impl<T> std::fmt::Display for Spelled<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

/// A parsed `KIND[:key=value,…]` specification. A bare positional value after the colon
/// (`status:503`, `idle-timeout:2s`) is stored under the key `""`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Spec {
    /// The kind, before the colon.
    pub kind: String,
    /// Key/value parameters in the order-independent form.
    pub params: BTreeMap<String, String>,
}

impl Spec {
    /// Parse `KIND[:key=value,…]`. Values may contain `..` and `:` but not `,`.
    pub fn parse(s: &str) -> Result<Spec, String> {
        let s = s.trim();
        let (kind, rest) = match s.split_once(':') {
            Some((k, r)) => (k, Some(r)),
            None => (s, None),
        };
        if kind.is_empty() {
            return Err(format!("`{s}`: missing kind before `:`"));
        }
        let mut params = BTreeMap::new();
        if let Some(rest) = rest {
            for part in rest.split(',').filter(|p| !p.trim().is_empty()) {
                let (k, v) = match part.split_once('=') {
                    Some((k, v)) => (k.trim(), v.trim()),
                    None => ("", part.trim()),
                };
                if params.insert(k.to_string(), v.to_string()).is_some() {
                    if k.is_empty() {
                        return Err(format!(
                            "`{s}`: two values without a key; write them as key=value"
                        ));
                    }
                    return Err(format!("`{s}`: key `{k}` given twice"));
                }
            }
        }
        Ok(Spec {
            kind: kind.to_string(),
            params,
        })
    }

    /// A parameter's value, if present.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.params.get(key).map(String::as_str)
    }

    /// Fail with a clear message if a key outside `allowed` is present.
    pub fn only(&self, allowed: &[&str]) -> Result<(), String> {
        for k in self.params.keys() {
            if !allowed.contains(&k.as_str()) {
                let shown = if k.is_empty() { "(positional)" } else { k };
                return Err(format!(
                    "`{}` does not take `{shown}`; it takes: {}",
                    self.kind,
                    allowed.join(", ")
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_kind_and_params() {
        let s = Spec::parse("reclaim:toxicity=0.3,delay=0ms..50ms").unwrap();
        assert_eq!(s.kind, "reclaim");
        assert_eq!(s.get("toxicity"), Some("0.3"));
        assert_eq!(s.get("delay"), Some("0ms..50ms"));
        let s = Spec::parse("status:503").unwrap();
        assert_eq!(s.get(""), Some("503"));
        assert_eq!(Spec::parse("rst").unwrap().params.len(), 0);
        assert!(Spec::parse(":x=1").is_err());
        assert!(
            Spec::parse("a:x=1,x=2")
                .unwrap_err()
                .contains("key `x` given twice")
        );
        assert!(Spec::parse("a:1,2").unwrap_err().contains("without a key"));
        assert!(s.only(&["code"]).unwrap_err().contains("positional"));
    }
}
