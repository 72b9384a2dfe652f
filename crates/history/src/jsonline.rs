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
//! use resolvelab_history::logformat::{Field, N_FIELDS};
//! let line = br#"{"time":"2026-11-30T06:00:00+00:00","status":502,"upstream":"10.0.0.5:80"}"#;
//! let mut spans = [None; N_FIELDS];
//! match_json(line, &mut spans).unwrap();
//! let (a, b) = spans[Field::UpstreamAddr as usize].unwrap();
//! assert_eq!(&line[a as usize..b as usize], b"10.0.0.5:80");
//! assert!(spans[Field::TimeIso8601 as usize].is_some());
//! ```

use crate::logformat::{Field, Spans};
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
    *spans = [None; crate::logformat::N_FIELDS];
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
        if off > self.line.len() || raw == "null" {
            return;
        }
        let (mut a, mut b) = (off, off + raw.len());
        if raw.starts_with('"') && raw.len() >= 2 {
            (a, b) = (a + 1, b - 1);
        }
        let v = &self.line[a..b];
        let field = match t {
            Target::Field(f) => f,
            Target::Time if !v.is_empty() && v.iter().all(|c| c.is_ascii_digit() || *c == b'.') => {
                Field::Msec
            }
            Target::Time if v.len() > 10 && v[10] == b'T' => Field::TimeIso8601,
            Target::Time => Field::TimeLocal,
        };
        let slot = &mut self.spans[field as usize];
        if slot.is_none() && !v.is_empty() && v != b"-" {
            *slot = Some((a as u32, b as u32));
        }
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
    use crate::logformat::N_FIELDS;

    fn get<'a>(line: &'a [u8], s: &Spans, f: Field) -> Option<&'a str> {
        s[f as usize].map(|(a, b)| std::str::from_utf8(&line[a as usize..b as usize]).unwrap())
    }

    #[test]
    fn keys_in_any_order_nested_and_renamed() {
        // Grafana's ingress-nginx JSON (Loki parser test data), nested request/response.
        let line = br#"{"remote_addr": "3.112.221.14","upstream_addr": "10.12.15.234:5000","timestamp": "2020-12-11T16:20:07+00:00","upstream_name": "hosted-grafana-api-80","request": {"time": "0.001","method" : "GET","uri": "/"},"response": {"status": 200,"upstream_status": "200"}}"#;
        let mut s = [None; N_FIELDS];
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
        let mut s = [None; N_FIELDS];
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
        assert!(s[Field::TimeLocal as usize].is_some());
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
        let mut s = [None; N_FIELDS];
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
