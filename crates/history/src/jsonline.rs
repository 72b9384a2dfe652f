//! JSON access lines — `log_format NAME escape=json '{"key":"$var",…}'` with named keys, in any
//! order, one object per line — read with serde_json without copying: each known key's value
//! becomes a byte span of the line (a string without its quotes), exactly as a template format's
//! fields do, so everything after the match is the same for both kinds of format.
//!
//! Keys are recognised by name ([`field_of_key`]): the variable's own name (`upstream_addr`) and
//! the names common configurations give it (`upstream`, `up_addr`, `upstreamhost`, `@timestamp`,
//! …), at the top level or one object down (`response.status`). The time key's value decides
//! which time it is: epoch seconds (`$msec`), ISO 8601 or `$time_local`.
//!
//! ```
//! use resolvelab_history::jsonline::match_json;
//! use resolvelab_history::logformat::{Field, Spans};
//! let line = br#"{"time":"2026-11-30T06:00:00+00:00","status":502,"upstream":"10.0.0.5:80"}"#;
//! let mut spans = Spans::EMPTY;
//! match_json(line, &mut spans).unwrap();
//! let (a, b) = spans.get(Field::UpstreamAddr).unwrap();
//! assert_eq!(&line[a..b], b"10.0.0.5:80");
//! assert!(spans.has(Field::TimeIso8601));
//! ```

use crate::logformat::{Field, Spans, digits_end, find_byte_in, has_at};
use serde::Deserializer as _;
use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, Visitor};
use serde_json::value::RawValue;
use std::borrow::Cow;
use std::fmt;

/// What a key holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    Field(Field),
    /// A time whose kind the value shows.
    Time,
}

/// The field a JSON key names (`None`: not one the checker reads). `path` is `key` or
/// `object.key`.
fn target_of(path: &str) -> Option<Target> {
    match exact_target(path) {
        Some(t) => Some(t),
        None if path.bytes().any(|b| b.is_ascii_uppercase()) => {
            exact_target(&path.to_ascii_lowercase())
        }
        None => None,
    }
}

fn exact_target(path: &str) -> Option<Target> {
    use Field::*;
    let f = match path {
        "msec" => Msec,
        "time_local" | "time_iso8601" | "time" | "timestamp" | "@timestamp" | "date"
        | "datetime" | "ts" => return Some(Target::Time),
        "status" | "status_code" | "response_status" | "response.status" => Status,
        "request" | "request_line" => Request,
        "request_method" | "method" | "http_method" | "request.method" => RequestMethod,
        "request_uri" | "uri" | "path" | "url" | "request.uri" => RequestUri,
        "request_time" | "responsetime" | "response_time" | "request.time" => RequestTime,
        "upstream_addr" | "upstream" | "up_addr" | "upstreamhost" | "upstreamaddr"
        | "upstream-addr" => UpstreamAddr,
        "upstream_status"
        | "up_status"
        | "upstreamstatus"
        | "upstream-status"
        | "response.upstream_status" => UpstreamStatus,
        "upstream_response_time"
        | "up_resp_time"
        | "upstreamtime"
        | "upstream_time"
        | "upstream-response-time" => UpstreamResponseTime,
        "upstream_connect_time" => UpstreamConnectTime,
        "upstream_header_time" => UpstreamHeaderTime,
        "connection" => Connection,
        "connection_requests" => ConnectionRequests,
        "remote_addr" | "client" | "clientip" | "client_ip" | "remote_ip" => RemoteAddr,
        "host" | "http_host" | "server_name" | "vhost" => Host,
        "body_bytes_sent" | "bytes_sent" | "bytes" => BodyBytesSent,
        "proxy_upstream_name" | "upstream_name" => ProxyUpstreamName,
        _ => return None,
    };
    Some(Target::Field(f))
}

/// The field a JSON key names, as [`match_json`] reads it (time keys: `None`, their value
/// decides).
pub fn field_of_key(path: &str) -> Option<Field> {
    match target_of(path)? {
        Target::Field(f) => Some(f),
        Target::Time => None,
    }
}

/// Match one JSON line: fill `spans` with the known keys' values (the first key of a field
/// wins). Errors say why the line is not a JSON object.
pub fn match_json(line: &[u8], spans: &mut Spans) -> Result<(), String> {
    match_json_keys(line, &[], spans)
}

/// [`match_json`] where `keys` (paths from the configuration's own `log_format`, e.g.
/// `("upstream", UpstreamAddr)`) come before the names known by default.
pub fn match_json_keys(
    line: &[u8],
    keys: &[(String, Field)],
    spans: &mut Spans,
) -> Result<(), String> {
    spans.clear();
    let start = line
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(0);
    if line.get(start) != Some(&b'{') {
        return Err("not a JSON object (the json format needs one object per line)".into());
    }
    let mut de = serde_json::Deserializer::from_slice(line);
    Object {
        line,
        keys,
        spans,
        prefix: None,
    }
    .deserialize(&mut de)
    .and_then(|()| de.end())
    .map_err(|e| format!("not a JSON object: {e}"))
}

/// One object's keys into the spans (`prefix`: the key of the object it is in).
struct Object<'l, 's> {
    line: &'l [u8],
    keys: &'l [(String, Field)],
    spans: &'s mut Spans,
    prefix: Option<String>,
}

impl<'de> DeserializeSeed<'de> for Object<'_, '_> {
    type Value = ();

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Object<'_, '_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(mut self, mut m: A) -> Result<(), A::Error> {
        while let Some(key) = m.next_key::<Cow<'de, str>>()? {
            let path = match &self.prefix {
                Some(p) => Cow::Owned(format!("{p}.{key}")),
                None => Cow::Borrowed(key.as_ref()),
            };
            let own = self
                .keys
                .iter()
                .find(|(k, _)| k.as_str() == path.as_ref() || k.eq_ignore_ascii_case(&path))
                .map(|(_, f)| Target::Field(*f));
            let time = |f: Field| matches!(f, Field::Msec | Field::TimeLocal | Field::TimeIso8601);
            let own = match own {
                Some(Target::Field(f)) if time(f) => Some(Target::Time),
                o => o,
            };
            match own.or_else(|| target_of(&path)) {
                Some(t) => {
                    let raw: &'de RawValue = m.next_value()?;
                    if raw.get().starts_with('{') && self.prefix.is_none() {
                        // `"request": {…}` is an object, not `$request`: read into it.
                        let mut de = serde_json::Deserializer::from_str(raw.get());
                        Object {
                            line: self.line,
                            keys: self.keys,
                            spans: self.spans,
                            prefix: Some(key.to_ascii_lowercase()),
                        }
                        .deserialize(&mut de)
                        .map_err(de::Error::custom)?;
                    } else {
                        self.record(t, raw.get());
                    }
                }
                // One level down: `{"request": {"method": …}, "response": {"status": …}}`.
                None if self.prefix.is_none() => m.next_value_seed(Nested(Object {
                    line: self.line,
                    keys: self.keys,
                    spans: self.spans,
                    prefix: Some(key.to_ascii_lowercase()),
                }))?,
                None => {
                    m.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(())
    }
}

/// A value that may be an object (read into the spans) or anything else (skipped).
struct Nested<'l, 's>(Object<'l, 's>);

impl<'de> DeserializeSeed<'de> for Nested<'_, '_> {
    type Value = ();

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Nested<'_, '_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, m: A) -> Result<(), A::Error> {
        self.0.visit_map(m)
    }

    fn visit_seq<A: de::SeqAccess<'de>>(self, mut s: A) -> Result<(), A::Error> {
        while s.next_element::<IgnoredAny>()?.is_some() {}
        Ok(())
    }

    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }

    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }

    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }

    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }

    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }
}

impl Object<'_, '_> {
    /// Record a raw value (a slice of the line) as the span of its field.
    fn record(&mut self, t: Target, raw: &str) {
        let base = self.line.as_ptr() as usize;
        let off = (raw.as_ptr() as usize).wrapping_sub(base);
        if off > self.line.len() {
            return;
        }
        let quoted = raw.starts_with('"') && raw.len() >= 2;
        let (a, b) = if quoted {
            (off + 1, off + raw.len() - 1)
        } else {
            (off, off + raw.len())
        };
        record(self.line, self.spans, t, a, b, quoted);
    }
}

/// Record the value `line[a..b]` (a string's content when `quoted`) as the span of the field
/// `t` names, unless that field has one already or the value is empty, `-` or `null`.
fn record(line: &[u8], spans: &mut Spans, t: Target, a: usize, b: usize, quoted: bool) {
    let v = &line[a..b];
    if !quoted && v == b"null" {
        return;
    }
    let field = match t {
        Target::Field(f) => f,
        Target::Time if !v.is_empty() && v.iter().all(|c| c.is_ascii_digit() || *c == b'.') => {
            Field::Msec
        }
        Target::Time if v.len() > 10 && v[10] == b'T' => Field::TimeIso8601,
        Target::Time => Field::TimeLocal,
    };
    if !spans.has(field) && !v.is_empty() && v != b"-" {
        spans.set(field, a, b);
    }
}

/// The (key path, field) pairs of a JSON `log_format` template (`{"up":"$upstream_addr",
/// "request":{"method":"$request_method"}}` → `up`, `request.method`); empty when the text is
/// not one.
pub fn template_keys(text: &str) -> Vec<(String, Field)> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut stack: Vec<Option<String>> = Vec::new();
    let mut last_key: Option<String> = None;
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'{' => {
                stack.push(last_key.take());
                i += 1;
            }
            b'}' => {
                stack.pop();
                i += 1;
            }
            b'"' => {
                let end = text[i + 1..].find('"').map_or(b.len(), |e| i + 1 + e);
                let s = &text[i + 1..end.min(b.len())];
                let mut j = end + 1;
                while j < b.len() && b[j].is_ascii_whitespace() {
                    j += 1;
                }
                if b.get(j) == Some(&b':') {
                    last_key = Some(s.to_string());
                } else if let (Some(k), Some(var)) = (&last_key, s.strip_prefix('$')) {
                    push(&mut out, &stack, k, var);
                    last_key = None;
                }
                i = end + 1;
            }
            b'$' => {
                let j = b[i + 1..]
                    .iter()
                    .position(|c| !(c.is_ascii_alphanumeric() || *c == b'_'))
                    .map_or(b.len(), |p| i + 1 + p);
                if let Some(k) = last_key.take() {
                    push(&mut out, &stack, &k, &text[i + 1..j]);
                }
                i = j;
            }
            _ => i += 1,
        }
    }
    out
}

fn push(out: &mut Vec<(String, Field)>, stack: &[Option<String>], key: &str, var: &str) {
    let var = var.trim_start_matches('{').trim_end_matches('}');
    let Some(f) = Field::from_var(var) else {
        return;
    };
    let mut path: Vec<&str> = stack.iter().flatten().map(String::as_str).collect();
    path.push(key);
    out.push((path.join("."), f));
}

/// A Docker `json-file` record (`{"log":"…\n","stream":"stdout","time":"…"}`, what
/// `/var/lib/docker/containers/*/*-json.log` holds): the line it carries, without its newline
/// and terminal colours. `None` for any other line.
pub fn docker_log_line(line: &[u8]) -> Option<Vec<u8>> {
    if !line.starts_with(br#"{"log":""#) {
        return None;
    }
    #[derive(serde::Deserialize)]
    struct Record<'a> {
        #[serde(borrow)]
        log: Cow<'a, str>,
    }
    let r: Record = serde_json::from_slice(line).ok()?;
    let text = r.log.trim_end_matches(['\n', '\r']);
    let mut out = Vec::with_capacity(text.len());
    let b = text.as_bytes();
    let mut i = 0;
    while i < b.len() {
        // ANSI colour codes: ESC [ … m.
        if b[i] == 0x1b && b.get(i + 1) == Some(&b'[') {
            let end = b[i + 2..].iter().position(|c| c.is_ascii_alphabetic());
            i += 2 + end.map_or(b.len(), |e| e + 1);
            continue;
        }
        out.push(b[i]);
        i += 1;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_lines_are_judged_alike_a_block_and_a_byte_at_a_time() {
        // Every byte value at every position of lines around the 16-byte blocks.
        for len in [1usize, 15, 16, 17, 31, 32, 33, 100] {
            for at in 0..len {
                for b in 0..=255u8 {
                    let mut line = vec![b'a'; len];
                    line[at] = b;
                    let want = (0x20..0x7f).contains(&b) && b != b'\\';
                    assert_eq!(plain(&line), want, "len {len} at {at} byte {b:#x}");
                    assert_eq!(plain_bytes(&line), want);
                }
            }
        }
        assert!(plain(b""));
    }

    /// A template accepts a line only when the parser does, and reads it exactly as the parser.
    fn agrees(t: &Template, line: &[u8], keys: &[(String, Field)]) -> bool {
        let (mut fast, mut slow) = (Spans::EMPTY, Spans::EMPTY);
        if !t.matches(line, &mut fast) {
            return false;
        }
        match_json_keys(line, keys, &mut slow).expect("a line the template took parses");
        assert_eq!(fast, slow, "{}", String::from_utf8_lossy(line));
        true
    }

    #[test]
    fn template_reads_real_json_logs_as_the_parser_does() {
        let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/fixtures/real");
        let mut files = 0;
        for e in std::fs::read_dir(root).unwrap() {
            let Ok(text) = std::fs::read(e.unwrap().path().join("access.log")) else {
                continue;
            };
            let lines: Vec<&[u8]> = text
                .split(|&b| b == b'\n')
                .map(|l| l.strip_suffix(b"\r").unwrap_or(l))
                .filter(|l| l.starts_with(b"{"))
                .collect();
            let Some(t) = lines.iter().find_map(|l| Template::learn(l, &[])) else {
                continue;
            };
            files += 1;
            // Every line: the template either declines or agrees with the parser.
            let taken = lines.iter().filter(|l| agrees(&t, l, &[])).count();
            assert!(taken >= 1);
        }
        // barq ×2, goaccess 2145/2499/2810/359 have flat objects; loki's is nested.
        assert!(files >= 5, "{files} real JSON logs taught a template");
    }

    #[test]
    fn template_declines_what_the_parser_would_read_otherwise() {
        let first = br#"{"time":"2026-11-30T06:00:00+00:00","status":502,"up":"10.0.0.5:80","x":1.5e3,"ua":"curl/8"}"#;
        let keys = vec![("up".to_string(), Field::UpstreamAddr)];
        let t = Template::learn(first, &keys).unwrap();
        assert!(agrees(&t, first, &keys));
        let same_shape: [&[u8]; 6] = [
            br#"{"time":"2026-11-30T06:00:01+00:00","status":200,"up":"-","x":-0.5,"ua":""}"#,
            br#"{"time":"1796018400.123","status":null,"up":"10.0.0.6:80, 10.0.0.7:80","x":0,"ua":"a b"}"#,
            br#"{"time":"30/Nov/2026:06:00:00 +0000","status":true,"up":"","x":2E-7,"ua":"{}"}"#,
            br#"{"time":"","status":504,"up":"unix:/run/a.sock","x":10,"ua":"x,y:1"}"#,
            br#"{"time":"t","status":-1,"up":"u","x":1e+2,"ua":"  "}"#,
            br#"{"time":"t","status":0,"up":"u","x":1.25,"ua":"[1]"}"#,
        ];
        for l in same_shape {
            assert!(agrees(&t, l, &keys), "{}", String::from_utf8_lossy(l));
        }
        let declined: [&[u8]; 11] = [
            // Escapes and bytes outside printable ASCII: the parser's.
            br#"{"time":"t","status":502,"up":"u","x":1,"ua":"a\"b"}"#,
            "{\"time\":\"t\",\"status\":502,\"up\":\"u\",\"x\":1,\"ua\":\"é\"}".as_bytes(),
            b"{\"time\":\"t\",\"status\":502,\"up\":\"u\",\"x\":1,\"ua\":\"\t\"}",
            // Invalid numbers, which the parser refuses.
            br#"{"time":"t","status":0502,"up":"u","x":1,"ua":"a"}"#,
            br#"{"time":"t","status":502,"up":"u","x":1.,"ua":"a"}"#,
            br#"{"time":"t","status":502,"up":"u","x":.5,"ua":"a"}"#,
            br#"{"time":"t","status":,"up":"u","x":1,"ua":"a"}"#,
            br#"{"time":"t","status":5e,"up":"u","x":1,"ua":"a"}"#,
            // Another shape: a quoted number, another key order, an extra key.
            br#"{"time":"t","status":"502","up":"u","x":1,"ua":"a"}"#,
            br#"{"status":502,"time":"t","up":"u","x":1,"ua":"a"}"#,
            br#"{"time":"t","status":502,"up":"u","x":1,"ua":"a","z":1}"#,
        ];
        for l in declined {
            let mut s = Spans::EMPTY;
            assert!(!t.matches(l, &mut s), "{}", String::from_utf8_lossy(l));
        }
        // Nested objects and escaped lines teach nothing.
        assert!(Template::learn(br#"{"a":{"status":502}}"#, &[]).is_none());
        assert!(Template::learn(br#"{"ua":"a\"b"}"#, &[]).is_none());
    }

    /// The template's match as it was first written, a check of the whole line and then a
    /// search per value: the faster match must read every line as this does.
    fn reference(t: &Template, line: &[u8], spans: &mut Spans) -> bool {
        if !has_at(line, 0, &t.first.bytes) || !plain(line) {
            return false;
        }
        spans.clear();
        let mut pos = t.first.len();
        for slot in &t.slots {
            let (target, quoted, next) = (slot.target, slot.quoted, &slot.next.bytes);
            let stop = if quoted { b'"' } else { next[0] };
            let Some(end) = line[pos..].iter().position(|&c| c == stop).map(|e| pos + e) else {
                return false;
            };
            if !has_at(line, end, next) || (!quoted && !bare_value(&line[pos..end])) {
                return false;
            }
            if let Some(t) = target {
                record(line, spans, t, pos, end, quoted);
            }
            pos = end + next.len();
        }
        pos == line.len()
    }

    #[test]
    fn template_match_reads_every_line_as_a_plain_check_and_a_search_per_value() {
        // Lines across the 16-byte blocks, pieces of every length class (up to 16 bytes, up to
        // 32, longer); every byte value put at every position, and every byte deleted, in turn.
        let keys = vec![("up".to_string(), Field::UpstreamAddr)];
        let firsts: [&[u8]; 4] = [
            br#"{"t":"x","s":502,"up":"10.0.0.5:80"}"#,
            br#"{"a_key_longer_than_thirty_two_bytes_in_all":"v","b":1,"sixteen_byte_key":"w"}"#,
            br#"{"time":"2026-11-30T06:00:00+00:00","remote_addr":"10.1.133.110","status":502,"up":"10.0.0.5:8080, 10.0.0.6:8080","rt":0.001,"ok":true,"n":null,"ua":"curl/8.5.0"}"#,
            br#"{ "time": "1796018400.123", "status": 200 , "up": "-" }"#,
        ];
        let (mut taken, mut declined) = (0, 0);
        for first in firsts {
            let t = Template::learn(first, &keys).unwrap();
            let mut lines = vec![first.to_vec()];
            for at in 0..first.len() {
                let mut cut = first.to_vec();
                cut.remove(at);
                lines.push(cut);
                for b in 0..=255u8 {
                    let mut l = first.to_vec();
                    l[at] = b;
                    lines.push(l);
                }
            }
            for l in &lines {
                let (mut fast, mut slow) = (Spans::EMPTY, Spans::EMPTY);
                let (f, s) = (t.matches(l, &mut fast), reference(&t, l, &mut slow));
                assert_eq!(f, s, "{}", String::from_utf8_lossy(l));
                if f {
                    assert_eq!(fast, slow, "{}", String::from_utf8_lossy(l));
                    taken += 1;
                } else {
                    declined += 1;
                }
            }
        }
        assert!(
            taken > 1000 && declined > 1000,
            "{taken} taken, {declined} declined"
        );
    }

    #[test]
    fn bare_values_are_what_serde_accepts() {
        for v in [
            "0", "-0", "7", "502", "1.5", "-0.25", "1e9", "1E+9", "2e-3", "10.5e10", "true",
            "false", "null", "01", "-", "1.", ".5", "1e", "1e+", "+1", "--1", "0x10", "1.2.3",
            "nul", "", "1 ", "Infinity", "NaN",
        ] {
            let serde = serde_json::from_str::<IgnoredAny>(v).is_ok() && !v.ends_with(' ');
            assert_eq!(bare_value(v.as_bytes()), serde, "{v:?}");
        }
    }

    fn get<'a>(line: &'a [u8], s: &Spans, f: Field) -> Option<&'a str> {
        s.slice(line, f).map(|v| std::str::from_utf8(v).unwrap())
    }

    #[test]
    fn keys_in_any_order_nested_and_renamed() {
        // Grafana's ingress-nginx JSON (Loki parser test data), nested request/response.
        let line = br#"{"remote_addr": "3.112.221.14","upstream_addr": "10.12.15.234:5000","timestamp": "2020-12-11T16:20:07+00:00","upstream_name": "hosted-grafana-api-80","request": {"time": "0.001","method" : "GET","uri": "/"},"response": {"status": 200,"upstream_status": "200"}}"#;
        let mut s = Spans::EMPTY;
        match_json(line, &mut s).unwrap();
        assert_eq!(get(line, &s, Field::Status), Some("200"));
        assert_eq!(get(line, &s, Field::RequestTime), Some("0.001"));
        assert_eq!(get(line, &s, Field::RequestMethod), Some("GET"));
        assert_eq!(get(line, &s, Field::UpstreamStatus), Some("200"));
        assert_eq!(
            get(line, &s, Field::ProxyUpstreamName),
            Some("hosted-grafana-api-80")
        );
        assert_eq!(
            get(line, &s, Field::TimeIso8601),
            Some("2020-12-11T16:20:07+00:00")
        );
        // Renamed keys, numbers unquoted, epoch seconds.
        let line = br#"{"msec":"1796018400.123","status":"502","up_addr":"10.0.0.5:80, 10.0.0.6:80","up_resp_time":"0.001, 0.002","clientip":"1.2.3.4"}"#;
        match_json(line, &mut s).unwrap();
        assert_eq!(get(line, &s, Field::Msec), Some("1796018400.123"));
        assert_eq!(
            get(line, &s, Field::UpstreamAddr),
            Some("10.0.0.5:80, 10.0.0.6:80")
        );
        assert_eq!(get(line, &s, Field::RemoteAddr), Some("1.2.3.4"));
    }

    #[test]
    fn what_is_not_a_json_object_says_so() {
        let mut s = Spans::EMPTY;
        let e = match_json(b"10.0.0.1 - - [x]", &mut s).unwrap_err();
        assert!(e.contains("not a JSON object"), "{e}");
        // goaccess#2499: unquoted values are not JSON.
        let e = match_json(br#"{"time": 04/Apr/2023:12:09:31 +0530}"#, &mut s).unwrap_err();
        assert!(e.contains("not a JSON object"), "{e}");
        // An escaped quote stays inside its value.
        let line =
            br#"{"time":"30/Nov/2026:06:00:00 +0000","request":"GET /a\"b HTTP/1.1","status":200}"#;
        match_json(line, &mut s).unwrap();
        assert_eq!(get(line, &s, Field::Request), Some(r#"GET /a\"b HTTP/1.1"#));
        assert!(s.has(Field::TimeLocal));
    }

    #[test]
    fn a_templates_keys_name_its_fields() {
        // The log_format of the barq-academy lab (escape=json, `$status` unquoted).
        let t = r#"{"timestamp":"$time_iso8601","service":"edge","request_id":"$request_id","method":"$request_method","path":"$uri","status":$status,"upstream":"$upstream_addr","upstream_status":"$upstream_status","request_time":"$request_time","r":{"up":"${upstream_response_time}"}}"#;
        let k = template_keys(t);
        assert_eq!(
            k,
            [
                ("timestamp".to_string(), Field::TimeIso8601),
                ("method".to_string(), Field::RequestMethod),
                ("path".to_string(), Field::RequestUri),
                ("status".to_string(), Field::Status),
                ("upstream".to_string(), Field::UpstreamAddr),
                ("upstream_status".to_string(), Field::UpstreamStatus),
                ("request_time".to_string(), Field::RequestTime),
                ("r.up".to_string(), Field::UpstreamResponseTime),
            ]
        );
        let line = br#"{"r":{"up":"0.5"},"status":504,"upstream":"172.20.0.3:8080","timestamp":"2026-09-09T22:43:44+00:00"}"#;
        let mut s = Spans::EMPTY;
        match_json_keys(line, &k, &mut s).unwrap();
        assert_eq!(get(line, &s, Field::UpstreamResponseTime), Some("0.5"));
        assert_eq!(get(line, &s, Field::Status), Some("504"));
        assert!(template_keys("$remote_addr - [$time_local]").is_empty());
    }

    #[test]
    fn docker_json_file_records_carry_their_line() {
        // goaccess#1339: forego's coloured prefix inside a Docker json-file record.
        let rec = br#"{"log":"\u001b[0;33;1mnginx.1    | \u001b[0mdrive.mysite.com 1.2.3.4 - - [26/Dec/2018:12:29:09 +0000] \"GET /a?x=1\u0026y=2 HTTP/2.0\" 200 844\n","stream":"stdout","time":"2018-12-26T12:29:09.74181707Z"}"#;
        let line = docker_log_line(rec).unwrap();
        assert_eq!(
            String::from_utf8(line).unwrap(),
            r#"nginx.1    | drive.mysite.com 1.2.3.4 - - [26/Dec/2018:12:29:09 +0000] "GET /a?x=1&y=2 HTTP/2.0" 200 844"#
        );
        assert_eq!(docker_log_line(br#"{"time":"x"}"#), None);
    }
}

/// The shape of one access log's JSON lines, learned from its first plain line: nginx writes an
/// `escape=json` template's keys in one fixed order with the same literal text between values,
/// so a line is matched by comparing those literals and finding each value's end — about ten
/// times cheaper than a JSON parse. It reads a line exactly as [`match_json_keys`] would (the
/// same keys, the same first-non-empty rule, the time kind by value) and accepts only lines
/// that parser accepts; any other line (a backslash, a byte outside printable ASCII, another
/// key order) is left to it.
#[derive(Debug, Clone)]
pub struct Template {
    /// The text before the first value; a quoted value's quotes belong to the pieces around it.
    first: Piece,
    /// Per value, in line order: how it ends and the text after it. One record per value, read
    /// in one pass, where parallel lists cost an index and a bounds check each.
    slots: Vec<Slot>,
}

/// One value of a [`Template`] and the literal text that follows it.
#[derive(Debug, Clone)]
struct Slot {
    /// What its key names (`None`: a key the checker does not read).
    target: Option<Target>,
    /// A quoted string, which ends at its closing quote; else a bare value, which ends at
    /// `stop`'s byte.
    quoted: bool,
    /// The next piece's first byte sixteen times, the search's pattern made once.
    stop: [u8; 16],
    /// The text after the value: up to the next value, or to the line's end.
    next: Piece,
}

/// One literal piece of a [`Template`], with its first and last sixteen bytes ready to compare
/// sixteen at a time: most pieces are a key between quotes (`","status":`), 8 to 32 bytes,
/// that a word-by-word comparison reads in three or four steps and a branch per step.
#[derive(Debug, Clone)]
struct Piece {
    bytes: Vec<u8>,
    /// The first sixteen bytes (zero-padded) and the last sixteen (when longer than sixteen).
    head: [u8; 16],
    tail: [u8; 16],
}

impl Piece {
    fn new(bytes: &[u8]) -> Piece {
        let (mut head, mut tail) = ([0u8; 16], [0u8; 16]);
        let n = bytes.len().min(16);
        head[..n].copy_from_slice(&bytes[..n]);
        if bytes.len() >= 16 {
            tail.copy_from_slice(&bytes[bytes.len() - 16..]);
        }
        Piece {
            bytes: bytes.to_vec(),
            head,
            tail,
        }
    }

    fn len(&self) -> usize {
        self.bytes.len()
    }

    /// Whether `line` has this piece at `pos`.
    #[inline]
    fn at(&self, line: &[u8], pos: usize) -> bool {
        #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
        {
            let n = self.bytes.len();
            if n <= 16 && pos + 16 <= line.len() {
                let want = (1u32 << n) - 1;
                return same16(line, pos, &self.head) & want == want;
            }
            if (16..=32).contains(&n) && pos + n <= line.len() {
                return same16(line, pos, &self.head) == 0xffff
                    && same16(line, pos + n - 16, &self.tail) == 0xffff;
            }
        }
        has_at(line, pos, &self.bytes)
    }
}

/// Bit i set when `line[at + i] == want[i]`, for the sixteen bytes at `at`.
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
#[inline(always)]
fn same16(line: &[u8], at: usize, want: &[u8; 16]) -> u32 {
    use std::arch::x86_64::{__m128i, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_movemask_epi8};
    let block: &[u8; 16] = line[at..at + 16].try_into().expect("16 bytes");
    // SAFETY: both are sixteen readable bytes and the loads have no alignment requirement;
    // SSE2 is in every x86_64 target's baseline (the cfg).
    unsafe {
        let v = _mm_loadu_si128(block.as_ptr().cast::<__m128i>());
        let w = _mm_loadu_si128(want.as_ptr().cast::<__m128i>());
        _mm_movemask_epi8(_mm_cmpeq_epi8(v, w)) as u32
    }
}

impl Template {
    /// Learn from a line the parser read; `None` when the line cannot teach one (it needs a
    /// flat object of plain ASCII with no escapes).
    pub fn learn(line: &[u8], keys: &[(String, Field)]) -> Option<Template> {
        if !plain(line) {
            return None;
        }
        let mut de = serde_json::Deserializer::from_slice(line);
        let pairs = de.deserialize_map(Flat).ok()?;
        de.end().ok()?;
        let base = line.as_ptr() as usize;
        let (mut lits, mut values, mut at) = (Vec::new(), Vec::new(), 0usize);
        for (key, raw) in pairs {
            let raw = raw.get();
            if raw.starts_with('{') || raw.starts_with('[') {
                return None;
            }
            let quoted = raw.starts_with('"');
            let start = raw.as_ptr() as usize - base + quoted as usize;
            lits.push(Piece::new(&line[at..start]));
            at = raw.as_ptr() as usize - base + raw.len() - quoted as usize;
            values.push((target_for(key, keys), quoted));
        }
        lits.push(Piece::new(&line[at..]));
        let mut lits = lits.into_iter();
        let first = lits.next()?;
        let slots = values
            .into_iter()
            .zip(lits)
            .map(|((target, quoted), next)| {
                // What follows a value in an object is a comma, a brace or a space: never empty.
                let stop = [*next.bytes.first()?; 16];
                Some(Slot {
                    target,
                    quoted,
                    stop,
                    next,
                })
            })
            .collect::<Option<Vec<_>>>()?;
        Some(Template { first, slots })
    }

    /// Match `line` into `spans`; false (spans undefined) when it does not have this shape.
    ///
    /// Every byte of an accepted line is in a piece, compared with the learned (plain) one, or
    /// in a value: a quoted value's search stops at a byte that is not plain as at its closing
    /// quote, and a bare value is a number or a word. So the line is plain when it matches,
    /// with no separate pass over it.
    pub fn matches(&self, line: &[u8], spans: &mut Spans) -> bool {
        if !self.first.at(line, 0) {
            return false;
        }
        spans.clear();
        let mut pos = self.first.len();
        for s in &self.slots {
            let end = if s.quoted {
                match quote_or_bad(line, pos) {
                    Some(end) if line[end] == b'"' => end,
                    _ => return false,
                }
            } else {
                match find_byte_in(line, pos, &s.stop) {
                    Some(end) if bare_value(&line[pos..end]) => end,
                    _ => return false,
                }
            };
            if !s.next.at(line, end) {
                return false;
            }
            if let Some(t) = s.target {
                record(line, spans, t, pos, end, s.quoted);
            }
            pos = end + s.next.len();
        }
        pos == line.len()
    }
}

/// The first quote or byte that is not [`plain`] in `line[from..]` (absolute): where a quoted
/// value ends, or shows it has an escape or a byte the parser must judge.
#[inline]
fn quote_or_bad(line: &[u8], from: usize) -> Option<usize> {
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
    if line.len() >= 16 {
        return crate::logformat::first_hit16(line, from, |at| quote_or_bad16(line, at));
    }
    let bad = |c: u8| c == b'"' || c < 0x20 || c == b'\\' || c >= 0x7f;
    line[from..].iter().position(|&c| bad(c)).map(|e| from + e)
}

/// Bit i set when `line[at + i]` is a quote or not [`plain`].
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
#[inline(always)]
fn quote_or_bad16(line: &[u8], at: usize) -> u32 {
    use std::arch::x86_64::{
        __m128i, _mm_cmpeq_epi8, _mm_cmplt_epi8, _mm_loadu_si128, _mm_movemask_epi8, _mm_or_si128,
        _mm_set1_epi8,
    };
    let block: &[u8; 16] = line[at..at + 16].try_into().expect("16 bytes");
    // SAFETY: `block` is sixteen readable bytes and the load has no alignment requirement;
    // SSE2 is in every x86_64 target's baseline (the cfg).
    unsafe {
        let v = _mm_loadu_si128(block.as_ptr().cast::<__m128i>());
        // A byte below 0x20 or from 0x80 on is below 0x20 as a signed byte.
        let low = _mm_cmplt_epi8(v, _mm_set1_epi8(0x20));
        let quote = _mm_cmpeq_epi8(v, _mm_set1_epi8(b'"' as i8));
        let del = _mm_cmpeq_epi8(v, _mm_set1_epi8(0x7f));
        let esc = _mm_cmpeq_epi8(v, _mm_set1_epi8(b'\\' as i8));
        _mm_movemask_epi8(_mm_or_si128(
            _mm_or_si128(low, quote),
            _mm_or_si128(del, esc),
        )) as u32
    }
}

/// Printable ASCII and spaces only: no escapes, no control bytes, nothing to validate as UTF-8.
fn plain(line: &[u8]) -> bool {
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
    {
        plain_sse2(line)
    }
    #[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
    {
        plain_bytes(line)
    }
}

/// [`plain`] a byte at a time, without an early exit so that it compiles to a vector loop.
fn plain_bytes(line: &[u8]) -> bool {
    !line.iter().fold(false, |bad, &b| {
        bad | (b < 0x20) | (b == b'\\') | (b >= 0x7f)
    })
}

/// [`plain`] sixteen bytes at a time: a byte below 0x20 or from 0x80 on is below 0x20 as a
/// signed byte; 0x7f and the backslash are compared for.
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
fn plain_sse2(line: &[u8]) -> bool {
    use std::arch::x86_64::{
        __m128i, _mm_cmpeq_epi8, _mm_cmplt_epi8, _mm_loadu_si128, _mm_movemask_epi8, _mm_or_si128,
        _mm_set1_epi8,
    };
    if line.len() < 16 {
        return plain_bytes(line);
    }
    // SAFETY (the intrinsics' calls): SSE2 is in every x86_64 target's baseline (the cfg);
    // each load reads the sixteen bytes of `block`, with no alignment requirement.
    let (low, del, esc) = unsafe {
        (
            _mm_set1_epi8(0x20),
            _mm_set1_epi8(0x7f),
            _mm_set1_epi8(b'\\' as i8),
        )
    };
    let bad = |at: usize| {
        let block: &[u8; 16] = line[at..at + 16].try_into().expect("16 bytes");
        unsafe {
            let v = _mm_loadu_si128(block.as_ptr().cast::<__m128i>());
            let b = _mm_or_si128(
                _mm_cmplt_epi8(v, low),
                _mm_or_si128(_mm_cmpeq_epi8(v, del), _mm_cmpeq_epi8(v, esc)),
            );
            _mm_movemask_epi8(b) != 0
        }
    };
    let mut at = 0;
    while at + 16 <= line.len() {
        if bad(at) {
            return false;
        }
        at += 16;
    }
    // The last sixteen bytes, read again in part.
    at == line.len() || !bad(line.len() - 16)
}

/// An unquoted JSON value as the parser would accept it: `true`, `false`, `null` or a number
/// (`-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`, RFC 8259 section 6).
fn bare_value(v: &[u8]) -> bool {
    if matches!(v, b"true" | b"false" | b"null") {
        return true;
    }
    let digits = |i: usize| digits_end(v, i);
    let mut i = (v.first() == Some(&b'-')) as usize;
    let int_end = digits(i);
    if int_end == i || (v[i] == b'0' && int_end > i + 1) {
        return false;
    }
    i = int_end;
    if v.get(i) == Some(&b'.') {
        let e = digits(i + 1);
        if e == i + 1 {
            return false;
        }
        i = e;
    }
    if matches!(v.get(i), Some(b'e' | b'E')) {
        i += 1 + matches!(v.get(i + 1), Some(b'+' | b'-')) as usize;
        let e = digits(i);
        if e == i {
            return false;
        }
        i = e;
    }
    i == v.len()
}

/// What a top-level key names: the configuration's own keys first, then the usual names.
fn target_for(key: &str, keys: &[(String, Field)]) -> Option<Target> {
    let time = |f: Field| matches!(f, Field::Msec | Field::TimeLocal | Field::TimeIso8601);
    keys.iter()
        .find(|(k, _)| k.as_str() == key || k.eq_ignore_ascii_case(key))
        .map(|&(_, f)| {
            if time(f) {
                Target::Time
            } else {
                Target::Field(f)
            }
        })
        .or_else(|| target_of(key))
}

/// A top-level object's (key, raw value) pairs in order, borrowed from a line without escapes.
struct Flat;

impl<'de> Visitor<'de> for Flat {
    type Value = Vec<(&'de str, &'de RawValue)>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Self::Value, A::Error> {
        let mut out = Vec::new();
        while let Some(key) = m.next_key::<&'de str>()? {
            out.push((key, m.next_value::<&'de RawValue>()?));
        }
        Ok(out)
    }
}
