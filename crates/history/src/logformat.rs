//! nginx `log_format` strings compiled into a byte tokenizer.
//!
//! A format is a sequence of literals and `$variables`. Matching a line walks the sequence: a
//! literal must appear verbatim, a variable extends up to the next literal. That is exactly how
//! nginx writes the line, so no regular expression is needed and no allocation happens per line.
//!
//! Multi-valued `$upstream_*` variables contain `, ` (between tries) and ` : ` (between
//! internal-redirect passes); when such a variable is followed by a literal starting with a space,
//! spaces that belong to those separators are skipped.

use std::fmt;

/// The variables the history understands; every other `$variable` is matched and skipped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
#[allow(missing_docs)]
pub enum Field {
    Msec = 0,
    TimeLocal,
    TimeIso8601,
    Status,
    Request,
    RequestMethod,
    RequestUri,
    RequestTime,
    UpstreamAddr,
    UpstreamStatus,
    UpstreamResponseTime,
    UpstreamConnectTime,
    UpstreamHeaderTime,
    Connection,
    ConnectionRequests,
    RemoteAddr,
    Host,
    BodyBytesSent,
    /// ingress-nginx's `$proxy_upstream_name` (`namespace-service-port`).
    ProxyUpstreamName,
}

/// Number of [`Field`] variants.
pub const N_FIELDS: usize = 19;

impl Field {
    /// Every field, in index order (`Field::ALL[f as usize] == f`).
    pub const ALL: [Field; N_FIELDS] = [
        Field::Msec,
        Field::TimeLocal,
        Field::TimeIso8601,
        Field::Status,
        Field::Request,
        Field::RequestMethod,
        Field::RequestUri,
        Field::RequestTime,
        Field::UpstreamAddr,
        Field::UpstreamStatus,
        Field::UpstreamResponseTime,
        Field::UpstreamConnectTime,
        Field::UpstreamHeaderTime,
        Field::Connection,
        Field::ConnectionRequests,
        Field::RemoteAddr,
        Field::Host,
        Field::BodyBytesSent,
        Field::ProxyUpstreamName,
    ];

    /// Map an nginx variable name (without `$`) to a field.
    pub fn from_var(name: &str) -> Option<Field> {
        Some(match name {
            "msec" => Field::Msec,
            "time_local" => Field::TimeLocal,
            "time_iso8601" => Field::TimeIso8601,
            "status" => Field::Status,
            "request" => Field::Request,
            "request_method" => Field::RequestMethod,
            "request_uri" | "uri" => Field::RequestUri,
            "request_time" => Field::RequestTime,
            "upstream_addr" => Field::UpstreamAddr,
            "upstream_status" => Field::UpstreamStatus,
            "upstream_response_time" => Field::UpstreamResponseTime,
            "upstream_connect_time" => Field::UpstreamConnectTime,
            "upstream_header_time" => Field::UpstreamHeaderTime,
            "connection" => Field::Connection,
            "connection_requests" => Field::ConnectionRequests,
            "remote_addr" => Field::RemoteAddr,
            "host" | "http_host" | "server_name" => Field::Host,
            "body_bytes_sent" | "bytes_sent" => Field::BodyBytesSent,
            "proxy_upstream_name" => Field::ProxyUpstreamName,
            _ => return None,
        })
    }

    /// The fields the checker cannot do without when the format has them: time, status and
    /// the upstream trajectory (the rest only refine the diagnosis).
    pub fn needed(self) -> bool {
        matches!(
            self,
            Field::Msec
                | Field::TimeLocal
                | Field::TimeIso8601
                | Field::Status
                | Field::UpstreamAddr
                | Field::Connection
        )
    }

    /// True for the `$upstream_*` variables whose values may hold `, ` and ` : ` separators.
    pub fn multi_valued(self) -> bool {
        matches!(
            self,
            Field::UpstreamAddr
                | Field::UpstreamStatus
                | Field::UpstreamResponseTime
                | Field::UpstreamConnectTime
                | Field::UpstreamHeaderTime
        )
    }

    /// True when the value never holds a space (addresses, hosts).
    fn one_word(self) -> bool {
        matches!(
            self,
            Field::RemoteAddr | Field::Host | Field::ProxyUpstreamName
        )
    }

    /// True when the value is a number (used to explain mismatches).
    fn numeric(self) -> bool {
        matches!(
            self,
            Field::Msec
                | Field::Status
                | Field::RequestTime
                | Field::Connection
                | Field::ConnectionRequests
                | Field::BodyBytesSent
        )
    }
}

/// One element of a compiled format.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Item {
    /// Text that must appear verbatim.
    Literal(Vec<u8>),
    /// A variable: its name and the field it fills (None = skipped).
    Var(String, Option<Field>),
}

/// A compiled `log_format`.
#[derive(Debug, Clone)]
pub struct LogFormat {
    /// The name (`combined`, `lab`, `main`, or `custom`).
    pub name: String,
    /// The format text as nginx sees it (quotes joined).
    pub text: String,
    items: Vec<Item>,
    /// The hot-path program: leading literal, then one step per variable.
    lead: Vec<u8>,
    steps: Vec<Step>,
    lits: Vec<u8>,
    /// JSON lines read by key (see [`crate::jsonline`]): the template's own keys (empty for
    /// the bare `json` preset, which knows the usual names only).
    json: Option<Vec<(String, Field)>>,
}

/// One variable and the literal that ends it (empty = end of line).
#[derive(Debug, Clone, Copy)]
struct Step {
    field: u8,
    numeric: bool,
    /// The value is one word (an address, a host): a space in it means the line was matched
    /// out of step, e.g. behind a stream prefix.
    word: bool,
    multi: bool,
    term: Term,
    /// Its terminator's first byte sixteen times: the search's pattern, made once.
    lanes: [u8; 16],
}

/// The literal that ends a step (`lits[off..off + len]`), its first eight bytes also kept as a
/// word and a mask: most lines are checked against it with one load and one compare.
#[derive(Debug, Clone, Copy)]
struct Term {
    off: u32,
    len: u32,
    word: u64,
    mask: u64,
}

impl Term {
    fn new(lits: &[u8], off: u32, len: u32) -> Term {
        let l = &lits[off as usize..(off + len) as usize];
        let (mut word, mut mask) = (0u64, 0u64);
        for (i, &b) in l.iter().take(8).enumerate() {
            word |= (b as u64) << (8 * i);
            mask |= 0xff << (8 * i);
        }
        Term {
            off,
            len,
            word,
            mask,
        }
    }

    #[inline(always)]
    fn is_empty(&self) -> bool {
        self.len == 0
    }

    #[inline(always)]
    fn first(&self) -> u8 {
        self.word as u8
    }

    /// `line[pos..]` starts with the literal.
    #[inline(always)]
    fn at(&self, line: &[u8], pos: usize, lits: &[u8]) -> bool {
        if self.len <= 8 && pos + 8 <= line.len() {
            let w = u64::from_le_bytes(line[pos..pos + 8].try_into().expect("8 bytes"));
            return (w ^ self.word) & self.mask == 0;
        }
        has_at(
            line,
            pos,
            &lits[self.off as usize..(self.off + self.len) as usize],
        )
    }
}

const SKIP: u8 = u8::MAX;

/// nginx's predefined `combined` format.
pub const COMBINED: &str = r#"$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent "$http_referer" "$http_user_agent""#;

/// The resolvelab lab format (what every lab run's nginx.conf declares as `log_format lab`).
pub const LAB: &str = resolvelab_core::evidence::LAB_LOG_FORMAT;

/// `log_format main` of nginx's own default nginx.conf (and of the official Docker image).
pub const MAIN: &str = r#"$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent "$http_referer" "$http_user_agent" "$http_x_forwarded_for""#;

/// ingress-nginx's `upstreaminfo` since 0.21 (`$proxy_alternative_upstream_name`, `$req_id`).
pub const UPSTREAMINFO: &str = r#"$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent "$http_referer" "$http_user_agent" $request_length $request_time [$proxy_upstream_name] [$proxy_alternative_upstream_name] $upstream_addr $upstream_response_length $upstream_response_time $upstream_status $req_id"#;

/// ingress-nginx's `upstreaminfo` before 0.21 (`$the_real_ip` twice, no alternative upstream).
pub const UPSTREAMINFO_LEGACY: &str = r#"$the_real_ip - [$the_real_ip] - $remote_user [$time_local] "$request" $status $body_bytes_sent "$http_referer" "$http_user_agent" $request_length $request_time [$proxy_upstream_name] $upstream_addr $upstream_response_length $upstream_response_time $upstream_status"#;

/// The `$the_real_ip` format with a trailing `$req_id`, as 0.2x controllers wrote it
/// (ingress-nginx#4168, 2019).
pub const UPSTREAMINFO_LEGACY_REQID: &str = r#"$the_real_ip - [$the_real_ip] - $remote_user [$time_local] "$request" $status $body_bytes_sent "$http_referer" "$http_user_agent" $request_length $request_time [$proxy_upstream_name] $upstream_addr $upstream_response_length $upstream_response_time $upstream_status $req_id"#;

/// nginx-proxy's `vhost` format (with `$upstream_addr`, as its template writes it today).
pub const VHOST: &str = r#"$host $remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent "$http_referer" "$http_user_agent" "$upstream_addr""#;

/// nginx-proxy's older `vhost` format, without `$upstream_addr`.
pub const VHOST_LEGACY: &str = r#"$host $remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent "$http_referer" "$http_user_agent""#;

/// Nginx Proxy Manager's `proxy` format (proxy-host-N_access.log).
pub const NPM: &str = r#"[$time_local] $upstream_cache_status $upstream_status $status - $request_method $scheme $host "$request_uri" [Client $remote_addr] [Length $body_bytes_sent] [Gzip $gzip_ratio] [Sent-to $server] "$http_user_agent" "$http_referer""#;

/// A typical `log_format … escape=json` (ingress-nginx's documented JSON example, with
/// `$connection`). `--log-format json` reads it — and any other order or naming of such keys
/// ([`crate::jsonline`]).
pub const JSON_EXAMPLE: &str = r#"{"time":"$time_iso8601","remote_addr":"$remote_addr","x_forwarded_for":"$http_x_forwarded_for","request_id":"$req_id","remote_user":"$remote_user","bytes_sent":$bytes_sent,"request_time":$request_time,"status":$status,"vhost":"$host","request_proto":"$server_protocol","path":"$uri","request_query":"$args","request_length":$request_length,"method":"$request_method","http_referrer":"$http_referer","http_user_agent":"$http_user_agent","upstream_addr":"$upstream_addr","upstream_status":"$upstream_status","upstream_response_time":"$upstream_response_time","connection":$connection}"#;

/// The named presets `--log-format NAME` accepts (and `json`: [`LogFormat::json`]).
pub const PRESETS: &[(&str, &str)] = &[
    ("combined", COMBINED),
    ("main", MAIN),
    ("lab", LAB),
    ("upstreaminfo", UPSTREAMINFO),
    ("upstreaminfo-legacy", UPSTREAMINFO_LEGACY),
    ("upstreaminfo-legacy-reqid", UPSTREAMINFO_LEGACY_REQID),
    ("vhost", VHOST),
    ("vhost-legacy", VHOST_LEGACY),
    ("npm", NPM),
];

/// Formats tried, besides the [`PRESETS`], when a user's format does not match, to show the
/// nearest guess.
pub const KNOWN: &[(&str, &str)] = &[
    (
        "main (combined + upstream)",
        r#"$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent "$http_referer" "$http_user_agent" "$upstream_addr" "$upstream_status" $request_time $upstream_response_time"#,
    ),
    (
        "common",
        r#"$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent"#,
    ),
];

/// Why a line did not match a format.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mismatch {
    /// Index of the item that failed.
    pub item: usize,
    /// Byte offset in the line where it failed.
    pub at: usize,
    /// Human explanation naming the field.
    pub reason: String,
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (at byte {})", self.reason, self.at)
    }
}

/// Byte spans of the fields of one matched line, indexed by `Field as usize`.
pub type Spans = [Option<(u32, u32)>; N_FIELDS];

impl LogFormat {
    /// Compile a format string (the concatenation of the quoted parts of a `log_format` directive).
    pub fn compile(fmt_name: &str, text: &str) -> anyhow::Result<LogFormat> {
        if fmt_name == "json" && text == "json" {
            return Ok(LogFormat::json());
        }
        // A JSON template (`escape=json '{"status":$status,…}'`): read lines by key, in any
        // order and with their escapes — and by the template's literals where a line is not
        // valid JSON (a format written without escape=json, or with values left unquoted).
        if text.trim_start().starts_with('{') {
            let keys = crate::jsonline::template_keys(text);
            if !keys.is_empty() {
                let literal = LogFormat::compile_template(fmt_name, text)?;
                return Ok(LogFormat {
                    json: Some(keys),
                    ..literal
                });
            }
        }
        LogFormat::compile_template(fmt_name, text)
    }

    /// [`LogFormat::compile`] by the template's literals only.
    fn compile_template(fmt_name: &str, text: &str) -> anyhow::Result<LogFormat> {
        let bytes = text.as_bytes();
        let mut items: Vec<Item> = Vec::new();
        let mut lit = Vec::new();
        let mut i = 0;
        while i < bytes.len() {
            let b = bytes[i];
            if b == b'$' {
                // `${var}` and `$var` are both nginx syntax.
                let (name, next) = if bytes.get(i + 1) == Some(&b'{') {
                    let end = text[i + 2..].find('}').ok_or_else(|| {
                        anyhow::anyhow!(
                            "log_format {fmt_name}: unclosed `${{` at byte {i} of `{text}`: close it with `}}`"
                        )
                    })?;
                    (&text[i + 2..i + 2 + end], i + 3 + end)
                } else {
                    let mut j = i + 1;
                    while j < bytes.len() && (bytes[j].is_ascii_alphanumeric() || bytes[j] == b'_')
                    {
                        j += 1;
                    }
                    (&text[i + 1..j], j)
                };
                if name.is_empty() {
                    lit.push(b);
                    i += 1;
                    continue;
                }
                if !lit.is_empty() {
                    items.push(Item::Literal(std::mem::take(&mut lit)));
                }
                // Adjacent variables (`$request_time$request_body`) cannot be split: the run
                // becomes one skipped value that ends where the next literal starts. A field
                // the checker needs in such a run is lost, and refused so the user knows.
                if let Some(Item::Var(prev, prev_field)) = items.last_mut() {
                    let lost = match (*prev_field, Field::from_var(name)) {
                        (Some(f), _) if f.needed() => Some(prev.clone()),
                        (_, Some(f)) if f.needed() => Some(name.to_string()),
                        _ => None,
                    };
                    if let Some(lost) = lost {
                        anyhow::bail!(
                            "log_format {fmt_name}: variables ${prev} and ${name} are adjacent with nothing between them, so ${lost} cannot be split out; put a separator between them in the format"
                        );
                    }
                    prev.push('$');
                    prev.push_str(name);
                    *prev_field = None;
                    i = next;
                    continue;
                }
                items.push(Item::Var(name.to_string(), Field::from_var(name)));
                i = next;
            } else {
                lit.push(b);
                i += 1;
            }
        }
        if !lit.is_empty() {
            items.push(Item::Literal(lit));
        }
        if items.is_empty() {
            anyhow::bail!(
                "log_format {fmt_name}: the format is empty; pass e.g. --log-format combined"
            );
        }
        let mut lead = Vec::new();
        let mut steps = Vec::new();
        let mut lits = Vec::new();
        for (k, it) in items.iter().enumerate() {
            match it {
                Item::Literal(l) if k == 0 => lead = l.clone(),
                Item::Literal(_) => {}
                Item::Var(_, f) => {
                    let (off, len) = match items.get(k + 1) {
                        Some(Item::Literal(l)) => {
                            lits.extend_from_slice(l);
                            ((lits.len() - l.len()) as u32, l.len() as u32)
                        }
                        _ => (0, 0),
                    };
                    steps.push(Step {
                        field: f.map(|f| f as u8).unwrap_or(SKIP),
                        numeric: f.is_some_and(|f| f.numeric()),
                        word: f.is_some_and(|f| f.one_word()),
                        multi: f.is_some_and(|f| f.multi_valued()),
                        term: Term::new(&lits, off, len),
                        lanes: [lits.get(off as usize).copied().unwrap_or(0); 16],
                    });
                }
            }
        }
        Ok(LogFormat {
            name: fmt_name.to_string(),
            text: text.to_string(),
            items,
            lead,
            steps,
            lits,
            json: None,
        })
    }

    /// The `json` preset: one JSON object per line, keys by their usual names.
    pub fn json() -> LogFormat {
        LogFormat::json_named("json", "json")
    }

    fn json_named(name: &str, text: &str) -> LogFormat {
        LogFormat {
            name: name.to_string(),
            text: text.to_string(),
            items: Vec::new(),
            lead: Vec::new(),
            steps: Vec::new(),
            lits: Vec::new(),
            json: Some(Vec::new()),
        }
    }

    /// Lines are JSON objects read by key.
    pub fn is_json(&self) -> bool {
        self.json.is_some()
    }

    /// A JSON format's own (key path, field) pairs (empty for the bare `json` preset); `None`
    /// for a template format.
    pub fn json_keys(&self) -> Option<&[(String, Field)]> {
        self.json.as_deref()
    }

    /// Which fields the format holds is known before any line is read (false for the bare
    /// `json` preset: the lines tell).
    pub fn fields_known(&self) -> bool {
        self.json.as_ref().is_none_or(|k| !k.is_empty())
    }

    /// `combined`, nginx's default access-log format.
    pub fn combined() -> LogFormat {
        LogFormat::compile("combined", COMBINED).expect("builtin format")
    }

    /// The lab's format.
    pub fn lab() -> LogFormat {
        LogFormat::compile("lab", LAB).expect("builtin format")
    }

    /// Resolve a user's `--log-format` argument: a preset name ([`PRESETS`]) or a format text.
    pub fn from_arg(arg: &str) -> anyhow::Result<LogFormat> {
        if arg == "json" {
            return Ok(LogFormat::json());
        }
        if let Some((name, text)) = PRESETS.iter().find(|(n, _)| *n == arg) {
            return LogFormat::compile(name, text);
        }
        if arg.contains('$') {
            return LogFormat::compile("custom", arg);
        }
        anyhow::bail!(
            "--log-format `{arg}` is neither a preset ({}) nor a format with $variables; pass the format text, or --nginx-conf FILE --log-format-name {arg}",
            PRESETS
                .iter()
                .map(|p| p.0)
                .chain(["json"])
                .collect::<Vec<_>>()
                .join(", ")
        )
    }

    /// The compiled items.
    pub fn items(&self) -> &[Item] {
        &self.items
    }

    /// True when the format contains the field with index `i` (`Field as usize`).
    pub fn has_index(&self, i: usize) -> bool {
        Field::ALL.get(i).is_some_and(|&f| self.has(f))
    }

    /// True when the format contains `field`.
    pub fn has(&self, field: Field) -> bool {
        if let Some(keys) = &self.json {
            return keys.iter().any(|(_, f)| *f == field);
        }
        self.items
            .iter()
            .any(|it| matches!(it, Item::Var(_, Some(f)) if *f == field))
    }

    /// Match one line (without its newline), filling `spans`; a mismatch names the field.
    #[inline]
    pub fn match_line(&self, line: &[u8], spans: &mut Spans) -> Result<(), Mismatch> {
        if let Some(keys) = &self.json {
            let by_key = crate::jsonline::match_json_keys(line, keys, spans);
            return match by_key {
                Ok(()) => Ok(()),
                Err(_) if !self.steps.is_empty() && self.fast_match(line, spans) => Ok(()),
                Err(reason) => Err(Mismatch {
                    item: 0,
                    at: 0,
                    reason,
                }),
            };
        }
        if self.fast_match(line, spans) {
            Ok(())
        } else {
            self.explain(line, spans)
        }
    }

    /// The hot path: the compiled steps, no error reporting.
    #[inline]
    fn fast_match(&self, line: &[u8], spans: &mut Spans) -> bool {
        *spans = [None; N_FIELDS];
        if !has_at(line, 0, &self.lead) {
            return false;
        }
        let mut pos = self.lead.len();
        let lits = &self.lits;
        for st in &self.steps {
            let term = st.term;
            if st.numeric && !term.is_empty() {
                // Numbers: scan and validate in one pass; the terminator must follow at once.
                let mut j = digits_end(line, pos);
                if line.get(j) == Some(&b'.') {
                    j = digits_end(line, j + 1);
                    if line.get(j) == Some(&b'.') {
                        return false;
                    }
                }
                if j == pos && line.get(pos) == Some(&b'-') {
                    j += 1;
                }
                if j == pos || !term.at(line, j, lits) {
                    return false;
                }
                spans[st.field as usize] = Some((pos as u32, j as u32));
                pos = j + term.len as usize;
                continue;
            }
            let end = if term.is_empty() {
                line.len()
            } else {
                let at = |j| term.at(line, j, lits);
                let next = |j| find_byte_in(line, j, &st.lanes);
                match find_with(line, pos, term.first(), st.multi, next, at) {
                    Some(e) => e,
                    None => return false,
                }
            };
            if st.field != SKIP {
                if st.numeric && !is_number(&line[pos..end]) {
                    return false;
                }
                if st.word && find_byte(&line[..end], pos, b' ').is_some() {
                    return false;
                }
                spans[st.field as usize] = Some((pos as u32, end as u32));
            }
            pos = end + term.len as usize;
        }
        pos == line.len()
    }

    /// The slow path for lines that failed: walk the items again and say which one failed.
    fn explain(&self, line: &[u8], spans: &mut Spans) -> Result<(), Mismatch> {
        *spans = [None; N_FIELDS];
        let mut pos = 0usize;
        let n = self.items.len();
        for (idx, item) in self.items.iter().enumerate() {
            match item {
                Item::Literal(l) => {
                    if !has_at(line, pos, l) {
                        return Err(self.mismatch(idx, pos, line));
                    }
                    pos += l.len();
                }
                Item::Var(_, field) => {
                    let end = if idx + 1 == n {
                        line.len()
                    } else {
                        let Item::Literal(next) = &self.items[idx + 1] else {
                            unreachable!("compile rejects adjacent variables")
                        };
                        let multi = field.is_some_and(|f| f.multi_valued());
                        match find_literal(line, pos, next, multi) {
                            Some(e) => e,
                            None => return Err(self.mismatch(idx + 1, pos, line)),
                        }
                    };
                    if let Some(f) = field {
                        let v = &line[pos..end];
                        let wrong = if f.one_word() && v.contains(&b' ') {
                            Some("one word")
                        } else if f.numeric() && !is_number(v) {
                            Some("a number")
                        } else {
                            None
                        };
                        if let (Some(what), Item::Var(name, _)) = (wrong, item) {
                            return Err(Mismatch {
                                item: idx,
                                at: pos,
                                reason: format!("${name} should be {what} but is `{}`", snippet(v)),
                            });
                        }
                        spans[*f as usize] = Some((pos as u32, end as u32));
                    }
                    pos = end;
                }
            }
        }
        if pos != line.len() {
            return Err(Mismatch {
                item: n,
                at: pos,
                reason: format!(
                    "the line continues after the format ended: `{}`",
                    snippet(&line[pos..])
                ),
            });
        }
        Ok(())
    }

    fn mismatch(&self, idx: usize, at: usize, line: &[u8]) -> Mismatch {
        let after = self.items[..idx].iter().rev().find_map(|it| match it {
            Item::Var(n, _) => Some(format!("${n}")),
            _ => None,
        });
        let lit = match &self.items[idx] {
            Item::Literal(l) => String::from_utf8_lossy(l).into_owned(),
            Item::Var(n, _) => format!("${n}"),
        };
        let reason = match after {
            Some(v) => format!(
                "expected `{lit}` after {v}, found `{}`",
                snippet(&line[at.min(line.len())..])
            ),
            None => format!(
                "expected the line to start with `{lit}`, found `{}`",
                snippet(line)
            ),
        };
        Mismatch {
            item: idx,
            at,
            reason,
        }
    }
}

/// A number as nginx logs it (`200`, `0.004`, `1796018401.123`) or `-`.
#[inline(always)]
fn is_number(v: &[u8]) -> bool {
    if v.is_empty() {
        return false;
    }
    if v == b"-" {
        return true;
    }
    let mut dots = 0;
    for &c in v {
        if c == b'.' {
            dots += 1;
        } else if !c.is_ascii_digit() {
            return false;
        }
    }
    dots <= 1
}

/// `line[pos..]` starts with `lit`. Literals are a few bytes: a byte loop beats a memcmp call,
/// and from eight bytes on (JSON keys) eight at a time, the last eight overlapping.
#[inline(always)]
pub(crate) fn has_at(line: &[u8], pos: usize, lit: &[u8]) -> bool {
    let n = lit.len();
    if pos + n > line.len() {
        return false;
    }
    let hay = &line[pos..pos + n];
    if n >= 8 {
        let word =
            |s: &[u8], k: usize| u64::from_le_bytes(s[k..k + 8].try_into().expect("8 bytes"));
        let mut k = 0;
        while k + 8 <= n {
            if word(hay, k) != word(lit, k) {
                return false;
            }
            k += 8;
        }
        return word(hay, n - 8) == word(lit, n - 8);
    }
    let mut k = 0;
    while k < n {
        if hay[k] != lit[k] {
            return false;
        }
        k += 1;
    }
    true
}

/// Position of `b` in `line[from..]` (absolute). Field values are short, so the search is
/// inlined with no setup: sixteen bytes at a time with SSE2 (every x86_64 has it), the last
/// sixteen of the line read once more, overlapping, rather than finished byte by byte; eight at
/// a time in a register elsewhere.
#[inline(always)]
pub(crate) fn find_byte(line: &[u8], from: usize, b: u8) -> Option<usize> {
    find_byte_in(line, from, &[b; 16])
}

/// [`find_byte`] of the byte `lanes` holds sixteen times (a pattern made once, not at every
/// search).
#[inline(always)]
pub(crate) fn find_byte_in(line: &[u8], from: usize, lanes: &[u8; 16]) -> Option<usize> {
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
    {
        find_byte_sse2(line, from, lanes)
    }
    #[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
    {
        find_byte_swar(line, from, lanes[0])
    }
}

#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
#[inline(always)]
fn find_byte_sse2(line: &[u8], from: usize, lanes: &[u8; 16]) -> Option<usize> {
    use std::arch::x86_64::{__m128i, _mm_loadu_si128};
    if line.len() < 16 {
        return find_byte_swar(line, from, lanes[0]);
    }
    // SAFETY: SSE2 is in every x86_64 target's baseline (the cfg); `lanes` is sixteen
    // readable bytes, and the load has no alignment requirement.
    let pat = unsafe { _mm_loadu_si128(lanes.as_ptr().cast::<__m128i>()) };
    first_hit16(line, from, |at| hits16(line, at, pat))
}

/// The first position at or after `from` that `hits` marks, where `hits(at)` gives the marks of
/// the sixteen bytes at `at` (bit i: `line[at + i]`); `line` holds at least sixteen bytes. The
/// last sixteen of the line are read once more, overlapping, rather than finished byte by byte.
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
#[inline(always)]
pub(crate) fn first_hit16(line: &[u8], from: usize, hits: impl Fn(usize) -> u32) -> Option<usize> {
    let mut j = from;
    while j + 16 <= line.len() {
        let m = hits(j);
        if m != 0 {
            return Some(j + m.trailing_zeros() as usize);
        }
        j += 16;
    }
    if j >= line.len() {
        return None;
    }
    // The tail: the line's last sixteen bytes, without those before `j`.
    let last = line.len() - 16;
    let m = hits(last) >> (j - last);
    (m != 0).then(|| j + m.trailing_zeros() as usize)
}

/// The positions of the byte `pat` holds sixteen times among the sixteen bytes of `hay` at
/// `at` (bit i: `hay[at + i]`).
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
#[inline(always)]
fn hits16(hay: &[u8], at: usize, pat: std::arch::x86_64::__m128i) -> u32 {
    use std::arch::x86_64::{__m128i, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_movemask_epi8};
    let block: &[u8; 16] = hay[at..at + 16].try_into().expect("16 bytes");
    // SAFETY: `block` is sixteen readable bytes and the load has no alignment requirement;
    // SSE2 is in every x86_64 target's baseline (the cfg).
    unsafe {
        let v = _mm_loadu_si128(block.as_ptr().cast::<__m128i>());
        _mm_movemask_epi8(_mm_cmpeq_epi8(v, pat)) as u32
    }
}

/// Call `f` with the position of every `b` in `hay`, in order. Sixty-four bytes are compared
/// at a time and their hits walked as bits: a chunk's line ends cost a few instructions each,
/// where an iterator of searches pays a search's setup at every line.
#[inline]
pub(crate) fn each_byte(hay: &[u8], b: u8, mut f: impl FnMut(usize)) {
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
    let at = {
        // SAFETY: SSE2 is in every x86_64 target's baseline (the cfg).
        let pat = unsafe { std::arch::x86_64::_mm_set1_epi8(b as i8) };
        let mut at = 0;
        while at + 64 <= hay.len() {
            let mut m = (0..4).fold(0u64, |m, k| {
                m | (hits16(hay, at + 16 * k, pat) as u64) << (16 * k)
            });
            while m != 0 {
                f(at + m.trailing_zeros() as usize);
                m &= m - 1;
            }
            at += 64;
        }
        at
    };
    #[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
    let at = 0;
    for p in memchr::memchr_iter(b, &hay[at..]) {
        f(at + p);
    }
}

/// [`find_byte`] eight bytes at a time in a register (the classic "has zero byte" test).
#[inline(always)]
fn find_byte_swar(line: &[u8], from: usize, b: u8) -> Option<usize> {
    const LO: u64 = 0x0101_0101_0101_0101;
    const HI: u64 = 0x8080_8080_8080_8080;
    let pat = LO.wrapping_mul(b as u64);
    let mut j = from;
    while j + 8 <= line.len() {
        let w = u64::from_le_bytes(line[j..j + 8].try_into().expect("8 bytes"));
        let x = w ^ pat;
        // The lowest flagged byte is always a true match (false flags only appear above one).
        let t = x.wrapping_sub(LO) & !x & HI;
        if t != 0 {
            return Some(j + (t.trailing_zeros() / 8) as usize);
        }
        j += 8;
    }
    while j < line.len() {
        if line[j] == b {
            return Some(j);
        }
        j += 1;
    }
    None
}

/// The first position from `from` on that is not an ASCII digit (or `line.len()`). Eight
/// bytes at a time: `$msec` and the times are most of a number-heavy line.
#[inline(always)]
pub(crate) fn digits_end(line: &[u8], from: usize) -> usize {
    const LO7: u64 = 0x7f7f_7f7f_7f7f_7f7f;
    const HI: u64 = 0x8080_8080_8080_8080;
    let mut j = from;
    while j + 8 <= line.len() {
        let w = u64::from_le_bytes(line[j..j + 8].try_into().expect("8 bytes"));
        // A digit's byte minus '0' is 0..=9; adding 0x76 to any other value below 0x80 (and
        // OR-ing in the bytes with their top bit set) raises the byte's top bit.
        let a = w ^ 0x3030_3030_3030_3030;
        let t = (((a & LO7) + 0x7676_7676_7676_7676) | a) & HI;
        if t != 0 {
            return j + (t.trailing_zeros() / 8) as usize;
        }
        j += 8;
    }
    while j < line.len() && line[j].is_ascii_digit() {
        j += 1;
    }
    j
}

/// Find `lit` in `line[from..]`, skipping spaces that are part of `, ` / ` : ` separators when
/// the value is multi-valued. Returns the absolute start of the literal.
#[inline]
fn find_literal(line: &[u8], from: usize, lit: &[u8], multi: bool) -> Option<usize> {
    let next = |j| find_byte(line, j, lit[0]);
    find_with(line, from, lit[0], multi, next, |j| has_at(line, j, lit))
}

/// [`find_literal`] of a literal that starts with `first` (the next one at or after `j`:
/// `next(j)`) and is at `j` when `at(j)`.
#[inline(always)]
fn find_with(
    line: &[u8],
    from: usize,
    first: u8,
    multi: bool,
    next: impl Fn(usize) -> Option<usize>,
    at: impl Fn(usize) -> bool,
) -> Option<usize> {
    let mut start = from;
    loop {
        let j = next(start)?;
        if at(j) {
            let sep = multi
                && first == b' '
                && ((j > from && line[j - 1] == b',')
                    || line[j + 1..].starts_with(b": ")
                    || (j >= from + 2 && line[j - 1] == b':' && line[j - 2] == b' '));
            if !sep {
                return Some(j);
            }
        }
        start = j + 1;
    }
}

fn snippet(b: &[u8]) -> String {
    let s = String::from_utf8_lossy(&b[..b.len().min(40)]).into_owned();
    if b.len() > 40 { format!("{s}…") } else { s }
}

/// Find `log_format NAME …;` in nginx configuration text (a file or `nginx -T` output) and
/// return its format text with the quoted parts joined, as nginx does.
pub fn find_in_config(conf: &str, wanted: &str) -> anyhow::Result<String> {
    let toks = tokenize(conf);
    let mut names = Vec::new();
    let mut i = 0;
    while i < toks.len() {
        if toks[i] == "log_format" && i + 1 < toks.len() {
            let name = &toks[i + 1];
            let mut j = i + 2;
            let mut text = String::new();
            while j < toks.len() && toks[j] != ";" {
                if !toks[j].starts_with("escape=") {
                    text.push_str(&toks[j]);
                }
                j += 1;
            }
            if name == wanted {
                return Ok(text);
            }
            names.push(name.clone());
            i = j;
        }
        i += 1;
    }
    if wanted == "combined" {
        return Ok(COMBINED.to_string());
    }
    anyhow::bail!(
        "no `log_format {wanted}` in the configuration (found: {}); pass --log-format-name with one of those",
        if names.is_empty() {
            "none".to_string()
        } else {
            names.join(", ")
        }
    )
}

/// The access_log directives' format names in a configuration, in order (for picking a default).
pub fn access_log_formats(conf: &str) -> Vec<String> {
    let toks = tokenize(conf);
    let mut out = Vec::new();
    for (i, t) in toks.iter().enumerate() {
        if t == "access_log" && i + 2 < toks.len() && toks[i + 1] != "off" && toks[i + 2] != ";" {
            out.push(toks[i + 2].clone());
        }
    }
    out
}

/// Minimal nginx config tokenizer: words, quoted strings (unquoted), `;`, `{`, `}`; drops comments.
fn tokenize(conf: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut chars = conf.chars().peekable();
    while let Some(&c) = chars.peek() {
        if c.is_whitespace() {
            chars.next();
        } else if c == '#' {
            for c in chars.by_ref() {
                if c == '\n' {
                    break;
                }
            }
        } else if c == ';' || c == '{' || c == '}' {
            out.push(c.to_string());
            chars.next();
        } else if c == '\'' || c == '"' {
            chars.next();
            let mut s = String::new();
            while let Some(d) = chars.next() {
                if d == '\\' {
                    if let Some(e) = chars.next() {
                        // nginx keeps backslashes before anything but the quote itself.
                        if e != c {
                            s.push('\\');
                        }
                        s.push(e);
                    }
                } else if d == c {
                    break;
                } else {
                    s.push(d);
                }
            }
            out.push(s);
        } else {
            let mut s = String::new();
            while let Some(&d) = chars.peek() {
                if d.is_whitespace() || d == ';' || d == '{' || d == '}' {
                    break;
                }
                s.push(d);
                chars.next();
            }
            out.push(s);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get<'a>(line: &'a str, s: &Spans, f: Field) -> Option<&'a str> {
        s[f as usize].map(|(a, b)| &line[a as usize..b as usize])
    }

    #[test]
    fn adjacent_variables_are_one_skipped_value_unless_a_needed_field_is_lost() {
        let f = LogFormat::compile("t", "$msec $status x:$request_time$request_body end").unwrap();
        let mut spans = [None; N_FIELDS];
        f.match_line(b"1700000000.123 502 x:0.000- end", &mut spans)
            .unwrap();
        assert!(spans[Field::RequestTime as usize].is_none());
        assert!(spans[Field::Status as usize].is_some());
        let e = LogFormat::compile("t", "$msec$status")
            .unwrap_err()
            .to_string();
        assert!(e.contains("$msec") && e.contains("separator"), "{e}");
    }

    #[test]
    fn lab_line_with_two_hops() {
        let f = LogFormat::lab();
        let line = r#"1796018401.123 502 "127.0.0.20:8080, be" "502, 502" 0.004 GET 17 3 "0.004, 0.000" "0.000, -" "GET /x HTTP/1.1" 127.0.0.1"#;
        let mut s = [None; N_FIELDS];
        f.match_line(line.as_bytes(), &mut s).unwrap();
        assert_eq!(get(line, &s, Field::Msec), Some("1796018401.123"));
        assert_eq!(
            get(line, &s, Field::UpstreamAddr),
            Some("127.0.0.20:8080, be")
        );
        assert_eq!(get(line, &s, Field::Request), Some("GET /x HTTP/1.1"));
        assert_eq!(get(line, &s, Field::RemoteAddr), Some("127.0.0.1"));
        assert_eq!(get(line, &s, Field::ConnectionRequests), Some("3"));
    }

    #[test]
    fn unquoted_multi_valued_upstream_keeps_separators() {
        let f = LogFormat::compile("x", "$upstream_addr $status $upstream_status").unwrap();
        let line = "10.0.0.1:80, 10.0.0.2:80 : be 502 502, 502 : 502";
        let mut s = [None; N_FIELDS];
        f.match_line(line.as_bytes(), &mut s).unwrap();
        assert_eq!(
            get(line, &s, Field::UpstreamAddr),
            Some("10.0.0.1:80, 10.0.0.2:80 : be")
        );
        assert_eq!(get(line, &s, Field::Status), Some("502"));
        assert_eq!(get(line, &s, Field::UpstreamStatus), Some("502, 502 : 502"));
    }

    #[test]
    fn digits_end_matches_a_naive_scan() {
        let line = b"1796018400.123 502 0 9 / : \xb0\xff 0123456789012345678x 42";
        for from in 0..=line.len() {
            let naive = from
                + line[from..]
                    .iter()
                    .take_while(|c| c.is_ascii_digit())
                    .count();
            assert_eq!(digits_end(line, from), naive, "from {from}");
        }
    }

    #[test]
    fn each_byte_finds_every_position_in_order() {
        // Lengths around the 64-byte blocks, bytes that hit often, rarely and never.
        let full: Vec<u8> = (0..400u32).map(|i| (i * 37 % 251) as u8).collect();
        for len in [0, 1, 15, 16, 63, 64, 65, 127, 128, 129, 200, 400] {
            for b in [0u8, 1, 37, 74, 200, 255] {
                let hay = &full[..len];
                let naive: Vec<usize> = (0..len).filter(|&i| hay[i] == b).collect();
                let mut got = Vec::new();
                each_byte(hay, b, |p| got.push(p));
                assert_eq!(got, naive, "len {len} byte {b}");
            }
        }
        let lines = b"a\nbb\n\n".repeat(40);
        let mut got = Vec::new();
        each_byte(&lines, b'\n', |p| got.push(p));
        assert_eq!(got.len(), 120);
        assert!(got.iter().all(|&p| lines[p] == b'\n'));
    }

    #[test]
    fn find_byte_matches_a_naive_scan() {
        // Every start in lines around the 8- and 16-byte blocks, so that the block loop, the
        // overlapping last block and the short-line path all meet hits and misses.
        let full: Vec<u8> = (0..200u32).map(|i| (i * 37 % 251) as u8).collect();
        for len in [0, 1, 5, 8, 15, 16, 17, 24, 31, 32, 33, 47, 200] {
            let line = &full[..len];
            for from in 0..=len {
                for b in [0u8, 1, 37, 74, 128, 200, 255] {
                    let naive = line[from..].iter().position(|&c| c == b).map(|p| p + from);
                    let got = find_byte(line, from, b);
                    assert_eq!(got, naive, "len {len} from {from} byte {b}");
                    assert_eq!(
                        find_byte_swar(line, from, b),
                        naive,
                        "len {len} from {from}"
                    );
                }
            }
        }
    }

    #[test]
    fn mismatch_names_the_field() {
        let f = LogFormat::combined();
        let mut s = [None; N_FIELDS];
        let e = f
            .match_line(b"1796018401.123 502 \"be\"", &mut s)
            .unwrap_err();
        assert!(e.reason.contains("$remote_addr"), "{}", e.reason);
    }

    #[test]
    fn config_lookup_joins_quoted_parts() {
        let conf = "http {\n  # comment log_format x 'y';\n  log_format main escape=json '$remote_addr [$time_local] '\n     '\"$request\" $status';\n  access_log /var/log/a.log main;\n}";
        assert_eq!(
            find_in_config(conf, "main").unwrap(),
            "$remote_addr [$time_local] \"$request\" $status"
        );
        assert_eq!(access_log_formats(conf), vec!["main"]);
        let e = find_in_config(conf, "nope").unwrap_err().to_string();
        assert!(e.contains("found: main"), "{e}");
        assert!(
            LogFormat::compile("x", "$a$b").is_ok(),
            "unknown adjacent variables are one skipped value"
        );
        assert!(LogFormat::compile("x", "$status$a").is_err());
    }
}
