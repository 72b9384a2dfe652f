//! Our own JSON Lines logs: `resolvelab.dns/v1`, `resolvelab.events/v1`, `resolvelab.load/v1`.

use crate::{FileStats, open_maybe_gz};
use resolvelab_core::jsonl::{self, Row};
use serde_json::Value;
use std::path::Path;

/// One DNS query and its answer (`dns.jsonl`): the writers' own type.
pub use resolvelab_core::evidence::DnsQuery as DnsRecord;

/// One lab event (`events.jsonl`): mode changes, injections and their hit counters, phases —
/// the writers' own type.
pub use resolvelab_core::evidence::Event as EventRecord;

/// One load-generator request (`load.jsonl`): the writers' own type.
pub use resolvelab_core::evidence::load::Request as LoadRecord;

/// Read a JSON Lines file (plain or `.gz`), calling `f` for each non-schema line; bad lines
/// are counted. A read error ends the file (`FileStats::error`) with what came before it kept.
pub fn for_each_line(
    path: &Path,
    kind: &str,
    mut f: impl FnMut(u64, Value) -> Result<(), String>,
) -> anyhow::Result<(Option<String>, FileStats)> {
    let r = open_maybe_gz(path)?;
    let mut stats = FileStats::new(path, kind);
    let mut schema = None;
    let read = jsonl::for_each::<Value>(r, |row| match row {
        Row::Header { schema: s, .. } => schema = Some(s),
        Row::Line { n, value, line } => {
            let n = n as u64;
            stats.lines += 1;
            match value {
                // An interrupted run may leave a torn last line: counted like any bad line.
                Err(e) => stats.malformed(n, &format!("not JSON: {e}"), line),
                Ok(v) => match f(n, v) {
                    Ok(()) => stats.parsed += 1,
                    Err(reason) => stats.malformed(n, &reason, line),
                },
            }
        }
    });
    if let Err(e) = read {
        stats.error = Some(e.to_string());
    }
    Ok((schema, stats))
}

/// The answer addresses, also when a line names them as objects (`{"addr": …}`, `address`,
/// `ip`); what is not an address is left out.
fn answers_of(v: &Value) -> Vec<Value> {
    let Some(Value::Array(a)) = v.get("answers") else {
        return Vec::new();
    };
    a.iter()
        .filter_map(|x| match x {
            Value::String(s) => Some(s.as_str()),
            Value::Object(o) => ["addr", "address", "ip"]
                .iter()
                .find_map(|k| o.get(*k))
                .and_then(Value::as_str),
            _ => None,
        })
        .filter(|s| s.parse::<std::net::IpAddr>().is_ok())
        .map(|s| Value::String(s.to_string()))
        .collect()
}

/// Read a `dns.jsonl`.
pub fn read_dns(path: &Path, file: u32) -> anyhow::Result<(Vec<DnsRecord>, FileStats)> {
    let mut out = Vec::new();
    let (_, stats) = for_each_line(path, "dns", |n, v| {
        out.push(dns_record(v, file, n)?);
        Ok(())
    })?;
    Ok((out, stats))
}

/// One line of a `dns.jsonl` as a record (file `file`, line `n`), or why it is none.
pub fn dns_record(mut v: Value, file: u32, n: u64) -> Result<DnsRecord, String> {
    let answers = answers_of(&v);
    if let Some(o) = v.as_object_mut() {
        o.insert("answers".into(), Value::Array(answers));
        if o.get("ttl").is_some_and(|t| !t.is_u64()) {
            o.remove("ttl");
        }
    }
    let mut r: DnsRecord = serde_json::from_value(v).map_err(|e| e.to_string())?;
    r.file = file;
    r.line = n;
    Ok(r)
}

/// Read an `events.jsonl`.
pub fn read_events(path: &Path, file: u32) -> anyhow::Result<(Vec<EventRecord>, FileStats)> {
    let mut out = Vec::new();
    let (_, stats) = for_each_line(path, "events", |n, v| {
        let mut r: EventRecord = serde_json::from_value(v).map_err(|e| e.to_string())?;
        r.file = file;
        r.line = n;
        out.push(r);
        Ok(())
    })?;
    Ok((out, stats))
}

/// Stream a `load.jsonl` (one line per request: it can be large).
pub fn for_each_load(path: &Path, mut f: impl FnMut(&LoadRecord)) -> anyhow::Result<FileStats> {
    let (_, stats) = for_each_line(path, "load", |_, v| {
        let r: LoadRecord = serde_json::from_value(v).map_err(|e| e.to_string())?;
        f(&r);
        Ok(())
    })?;
    Ok(stats)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dns_answers_strings_or_objects() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("dns.jsonl");
        std::fs::write(
            &p,
            "{\"schema\":\"resolvelab.dns/v1\"}\n\
             {\"t_us\":1,\"client\":\"127.0.0.1:5000\",\"qname\":\"be.lab\",\"qtype\":\"A\",\"transport\":\"udp\",\"id\":7,\"mode\":\"static\",\"rcode\":\"NOERROR\",\"answers\":[\"127.0.0.20\"],\"ttl\":5,\"changed\":false,\"injected\":false}\n\
             {\"t_us\":2,\"qname\":\"be.lab\",\"answers\":[{\"addr\":\"127.0.0.30\"}],\"rcode\":\"NOERROR\"}\n\
             {broken\n",
        )
        .unwrap();
        let (rows, stats) = read_dns(&p, 3).unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].answer_texts(), vec!["127.0.0.20"]);
        assert_eq!(rows[1].answer_texts(), vec!["127.0.0.30"]);
        assert_eq!((rows[1].file, rows[1].line), (3, 3));
        assert_eq!(stats.malformed, 1);
        assert_eq!(stats.samples[0].line, 4);
    }
}
