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
    /// `$hostname`: the host that wrote the line — the instance, in a log several hosts share.
    Hostname,
}

/// Number of [`Field`] variants.
pub const N_FIELDS: usize = 20;

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
        Field::Hostname,
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
            "hostname" => Field::Hostname,
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
            Field::RemoteAddr | Field::Host | Field::ProxyUpstreamName | Field::Hostname
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
    /// The slots the steps fill ([`Spans::put`]): a line that matches has them all, set at
    /// once rather than a bit per step (a dependency of every step on the one before).
    slots: u32,
    lits: Vec<u8>,
    /// JSON lines read by key (see [`crate::jsonline`]): the template's own keys (empty for
    /// the bare `json` preset, which knows the usual names only).
    json: Option<Vec<(String, Field)>>,
}

/// One variable and the literal that ends it (empty = end of line).
#[derive(Debug, Clone, Copy)]
struct Step {
    term: Term,
    /// Its terminator's first byte sixteen times: the search's pattern, made once.
    lanes: [u8; 16],
    /// Where its span goes ([`Spans::put`]): its field, or [`SKIP`].
    slot: u8,
    scan: Scan,
    /// The value is one word (an address, a host): a space in it means the line was matched
    /// out of step, e.g. behind a stream prefix.
    word: bool,
    /// The value is a number: read by [`Scan::Number`], or checked whole as the rest of the
    /// line.
    numeric: bool,
    /// A multi-valued value whose terminator starts with a space: the spaces of its `, ` and
    /// ` : ` separators are not its end.
    sep_spaces: bool,
}

/// How a step finds where its value ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scan {
    /// A number (`200`, `0.004`, `-`), read and checked in one pass; its terminator must follow
    /// at once.
    Number,
    /// The next place the terminator is.
    Search,
    /// The rest of the line (the last variable, with no literal after it).
    Rest,
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

/// The slot of a variable whose value is not kept: past the fields, never read.
const SKIP: u8 = 31;

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

/// Byte spans of the fields of one matched line, by field (`Field as usize`), and the set of
/// fields the line has. The set is what says a span is there: clearing the spans for the next
/// line is one store, and the offsets of every field can be copied (narrowed) in one sweep
/// without a branch per field.
#[derive(Clone, Copy, Debug)]
pub struct Spans {
    /// `at[f]`: field `f`'s bytes, meaningful only where `has` says so. Slots past the
    /// fields take what the matcher does not keep ([`SKIP`]) without a branch.
    at: [[u32; 2]; 32],
    has: u32,
}

const _: () = assert!(N_FIELDS <= 32, "a field set is a u32");

impl Spans {
    /// No field.
    pub const EMPTY: Spans = Spans {
        at: [[0; 2]; 32],
        has: 0,
    };

    /// The field bits of `has` (slots past the fields are not fields).
    const FIELDS: u32 = (1 << N_FIELDS) - 1;

    /// Forget every field.
    #[inline]
    pub fn clear(&mut self) {
        self.has = 0;
    }

    /// Field `f` is `a..b`.
    #[inline]
    pub fn set(&mut self, f: Field, a: usize, b: usize) {
        self.put(f as u8, a, b);
    }

    /// Slot `slot` (a field, or [`SKIP`]) is `a..b`.
    #[inline(always)]
    fn put(&mut self, slot: u8, a: usize, b: usize) {
        self.place(slot, a, b);
        self.has |= 1 << (slot & 31);
    }

    /// [`Spans::put`] without marking the slot as there: the caller sets `has` once.
    #[inline(always)]
    fn place(&mut self, slot: u8, a: usize, b: usize) {
        self.at[(slot & 31) as usize] = [a as u32, b as u32];
    }

    /// Field `f`'s range, if the line has it.
    #[inline]
    pub fn get(&self, f: Field) -> Option<(usize, usize)> {
        self.get_index(f as usize)
    }

    /// [`Spans::get`] by index (`Field as usize`; `None` past the last field).
    #[inline]
    pub fn get_index(&self, f: usize) -> Option<(usize, usize)> {
        (f < N_FIELDS && self.has >> f & 1 == 1)
            .then(|| (self.at[f][0] as usize, self.at[f][1] as usize))
    }

    /// Field `f`'s bytes in `line`, if the line has it.
    #[inline]
    pub fn slice<'a>(&self, line: &'a [u8], f: Field) -> Option<&'a [u8]> {
        self.get(f).map(|(a, b)| &line[a..b])
    }

    /// Whether the line has field `f`.
    #[inline]
    pub fn has(&self, f: Field) -> bool {
        self.has >> f as usize & 1 == 1
    }

    /// The fields the line has, as bits (bit `f`: `Field as usize` `f`).
    #[inline]
    pub fn fields(&self) -> u32 {
        self.has & Spans::FIELDS
    }

    /// Every offset, present or not, as `u16` (for lines shorter than 64 KiB).
    #[inline]
    pub fn narrow(&self) -> [u16; 2 * N_FIELDS] {
        std::array::from_fn(|i| self.at[i / 2][i % 2] as u16)
    }
}

impl Default for Spans {
    fn default() -> Spans {
        Spans::EMPTY
    }
}

impl PartialEq for Spans {
    /// The same fields at the same places (what is left of earlier lines does not count).
    fn eq(&self, o: &Spans) -> bool {
        self.fields() == o.fields() && (0..N_FIELDS).all(|f| self.get_index(f) == o.get_index(f))
    }
}

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
                    let numeric = f.is_some_and(|f| f.numeric());
                    let first = lits.get(off as usize).copied().unwrap_or(0);
                    steps.push(Step {
                        term: Term::new(&lits, off, len),
                        lanes: [first; 16],
                        slot: f.map(|f| f as u8).unwrap_or(SKIP),
                        scan: match (len, numeric) {
                            (0, _) => Scan::Rest,
                            (_, true) => Scan::Number,
                            (_, false) => Scan::Search,
                        },
                        word: f.is_some_and(|f| f.one_word()),
                        numeric,
                        sep_spaces: f.is_some_and(|f| f.multi_valued()) && first == b' ',
                    });
                }
            }
        }
        Ok(LogFormat {
            name: fmt_name.to_string(),
            text: text.to_string(),
            items,
            lead,
            slots: steps.iter().fold(0, |a, st| a | 1 << (st.slot & 31)),
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
            slots: 0,
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
        spans.clear();
        if !has_at(line, 0, &self.lead) {
            return false;
        }
        let mut pos = self.lead.len();
        for st in &self.steps {
            let end = match st.scan {
                Scan::Number => match number_end(line, pos) {
                    Some(j) if st.term.at(line, j, &self.lits) => j,
                    _ => return false,
                },
                Scan::Search => match self.search(line, pos, st) {
                    Some(e) => e,
                    None => return false,
                },
                Scan::Rest => {
                    let v = &line[pos..];
                    let spaced = || find_byte(line, pos, b' ').is_some();
                    if (st.numeric && !is_number(v)) || (st.word && spaced()) {
                        return false;
                    }
                    line.len()
                }
            };
            spans.place(st.slot, pos, end);
            pos = end + st.term.len as usize;
        }
        spans.has = self.slots;
        pos == line.len()
    }

    /// Where step `st`'s value, from `from` on, ends: the first place its terminator is (past
    /// the spaces of a multi-valued value's separators), or `None` (no such place, or a space
    /// inside a one-word value).
    #[inline(always)]
    fn search(&self, line: &[u8], from: usize, st: &Step) -> Option<usize> {
        let space_first = st.term.first() == b' ';
        let mut start = from;
        loop {
            let j = find_byte_in(line, start, &st.lanes)?;
            if st.term.at(line, j, &self.lits) && !(st.sep_spaces && separator_space(line, from, j))
            {
                // A terminator that starts with a space was found at the value's first space.
                let one_word =
                    !st.word || space_first || find_byte(&line[..j], from, b' ').is_none();
                return one_word.then_some(j);
            }
            if st.word && space_first {
                // The value goes on past a space: not one word.
                return None;
            }
            start = j + 1;
        }
    }

    /// The slow path for lines that failed: walk the items again and say which one failed.
    fn explain(&self, line: &[u8], spans: &mut Spans) -> Result<(), Mismatch> {
        spans.clear();
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
                        spans.set(*f, pos, end);
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
pub(crate) fn each_byte(hay: &[u8], b: u8, f: impl FnMut(usize)) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2 (checked just above).
        unsafe { each_byte_avx2(hay, b, f) };
        return;
    }
    each_byte_baseline(hay, b, f);
}

/// [`each_byte`] on the target's baseline: SSE2 on x86_64, else `memchr`.
#[inline]
fn each_byte_baseline(hay: &[u8], b: u8, mut f: impl FnMut(usize)) {
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

/// [`each_byte`] with AVX2: two loads and compares per sixty-four bytes where SSE2 takes
/// four. A chunk's line ends are found under the hand-off's lock, so this is serial time.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn each_byte_avx2(hay: &[u8], b: u8, mut f: impl FnMut(usize)) {
    use std::arch::x86_64::{
        __m256i, _mm256_cmpeq_epi8, _mm256_loadu_si256, _mm256_movemask_epi8, _mm256_set1_epi8,
    };
    let pat = _mm256_set1_epi8(b as i8);
    let hits32 = |at: usize| {
        let block: &[u8; 32] = hay[at..at + 32].try_into().expect("32 bytes");
        // SAFETY: `block` is thirty-two readable bytes; the load has no alignment requirement.
        let v = unsafe { _mm256_loadu_si256(block.as_ptr().cast::<__m256i>()) };
        _mm256_movemask_epi8(_mm256_cmpeq_epi8(v, pat)) as u32 as u64
    };
    let mut at = 0;
    while at + 64 <= hay.len() {
        let mut m = hits32(at) | hits32(at + 32) << 32;
        while m != 0 {
            f(at + m.trailing_zeros() as usize);
            m &= m - 1;
        }
        at += 64;
    }
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

/// `a == b`, compared a word at a time in line: for the short texts compared once per line
/// (a cached timestamp, 25 bytes; a failure's group and method), where `==` is a call to
/// `memcmp` (1.5 % of a JSON pass).
#[inline(always)]
pub fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let (mut wa, mut wb) = (a.chunks_exact(8), b.chunks_exact(8));
    let word = |c: &[u8]| u64::from_le_bytes(c.try_into().expect("8 bytes"));
    wa.by_ref()
        .zip(wb.by_ref())
        .all(|(x, y)| word(x) == word(y))
        && wa
            .remainder()
            .iter()
            .zip(wb.remainder())
            .all(|(x, y)| x == y)
}

/// The top bit of each byte of `w` (eight bytes of a line, the first lowest) that is not an
/// ASCII digit.
#[inline(always)]
fn non_digits(w: u64) -> u64 {
    const LO7: u64 = 0x7f7f_7f7f_7f7f_7f7f;
    const HI: u64 = 0x8080_8080_8080_8080;
    // A digit's byte minus '0' is 0..=9; adding 0x76 to any other value below 0x80 (and
    // OR-ing in the bytes with their top bit set) raises the byte's top bit.
    let a = w ^ 0x3030_3030_3030_3030;
    (((a & LO7) + 0x7676_7676_7676_7676) | a) & HI
}

/// The first position from `from` on that is not an ASCII digit (or `line.len()`). Eight
/// bytes at a time: `$msec` and the times are most of a number-heavy line.
#[inline(always)]
pub(crate) fn digits_end(line: &[u8], from: usize) -> usize {
    let mut j = from;
    while j + 8 <= line.len() {
        let t = non_digits(u64::from_le_bytes(
            line[j..j + 8].try_into().expect("8 bytes"),
        ));
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

/// The end of the number at `pos` (`200`, `0.004`, `1796018401.123`, or `-`): digits with at
/// most one dot; `None` where there is none, or a second dot follows.
#[inline(always)]
fn number_end(line: &[u8], pos: usize) -> Option<usize> {
    // A word at a time, the dot found in the same word as the digits around it: `0.004 ` and
    // the second word of `1796018401.123 ` are read in one step, not in a scan to the dot and
    // another after it.
    let mut j = pos;
    let mut dot = false;
    while j + 8 <= line.len() {
        let mut t = non_digits(u64::from_le_bytes(
            line[j..j + 8].try_into().expect("8 bytes"),
        ));
        if t != 0 && !dot && line[j + (t.trailing_zeros() / 8) as usize] == b'.' {
            dot = true;
            t &= t - 1;
        }
        if t != 0 {
            let end = j + (t.trailing_zeros() / 8) as usize;
            return number_at(line, pos, end, dot);
        }
        j += 8;
    }
    while j < line.len() && (line[j].is_ascii_digit() || (line[j] == b'.' && !dot)) {
        dot |= line[j] == b'.';
        j += 1;
    }
    number_at(line, pos, j, dot)
}

/// [`number_end`] once the digits (and dot) from `pos` end at `end`: `None` at a second dot,
/// `-` alone is a number.
#[inline(always)]
fn number_at(line: &[u8], pos: usize, mut end: usize, dot: bool) -> Option<usize> {
    if dot && line.get(end) == Some(&b'.') {
        return None;
    }
    if end == pos && line.get(pos) == Some(&b'-') {
        end += 1;
    }
    (end > pos).then_some(end)
}

/// The space at `j` belongs to a multi-valued value's `, ` or ` : ` separator (the value
/// starts at `from`).
#[inline(always)]
fn separator_space(line: &[u8], from: usize, j: usize) -> bool {
    (j > from && line[j - 1] == b',')
        || line[j + 1..].starts_with(b": ")
        || (j >= from + 2 && line[j - 1] == b':' && line[j - 2] == b' ')
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
        if at(j) && !(multi && first == b' ' && separator_space(line, from, j)) {
            return Some(j);
        }
        start = j + 1;
    }
}

fn snippet(b: &[u8]) -> String {
    let s = String::from_utf8_lossy(&b[..b.len().min(40)]).into_owned();
    if b.len() > 40 { format!("{s}…") } else { s }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get<'a>(line: &'a str, s: &Spans, f: Field) -> Option<&'a str> {
        s.get(f).map(|(a, b)| &line[a..b])
    }

    #[test]
    fn adjacent_variables_are_one_skipped_value_unless_a_needed_field_is_lost() {
        let f = LogFormat::compile("t", "$msec $status x:$request_time$request_body end").unwrap();
        let mut spans = Spans::EMPTY;
        f.match_line(b"1700000000.123 502 x:0.000- end", &mut spans)
            .unwrap();
        assert!(!spans.has(Field::RequestTime));
        assert!(spans.has(Field::Status));
        let e = LogFormat::compile("t", "$msec$status")
            .unwrap_err()
            .to_string();
        assert!(e.contains("$msec") && e.contains("separator"), "{e}");
    }

    #[test]
    fn lab_line_with_two_hops() {
        let f = LogFormat::lab();
        let line = r#"1796018401.123 502 "127.0.0.20:8080, be" "502, 502" 0.004 GET 17 3 "0.004, 0.000" "0.000, -" "GET /x HTTP/1.1" 127.0.0.1"#;
        let mut s = Spans::EMPTY;
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
        let mut s = Spans::EMPTY;
        f.match_line(line.as_bytes(), &mut s).unwrap();
        assert_eq!(
            get(line, &s, Field::UpstreamAddr),
            Some("10.0.0.1:80, 10.0.0.2:80 : be")
        );
        assert_eq!(get(line, &s, Field::Status), Some("502"));
        assert_eq!(get(line, &s, Field::UpstreamStatus), Some("502, 502 : 502"));
    }

    #[test]
    fn same_bytes_is_equality() {
        let base = b"2026-11-30T06:00:00+00:00 and more".to_vec();
        for len in 0..base.len() {
            let a = &base[..len];
            assert!(same_bytes(a, a));
            assert!(!same_bytes(a, &base[..len + 1]));
            for at in 0..len {
                let mut b = a.to_vec();
                b[at] ^= 1;
                assert!(!same_bytes(a, &b), "{len} bytes, changed at {at}");
            }
        }
    }

    #[test]
    fn number_end_reads_digits_with_one_dot() {
        // The scan to the dot and the one after it, as it was before the word-at-a-time reader.
        let reference = |line: &[u8], pos: usize| {
            let naive = |from: usize| {
                from + line[from..]
                    .iter()
                    .take_while(|b| b.is_ascii_digit())
                    .count()
            };
            let mut j = naive(pos);
            if line.get(j) == Some(&b'.') {
                j = naive(j + 1);
                if line.get(j) == Some(&b'.') {
                    return None;
                }
            }
            if j == pos && line.get(pos) == Some(&b'-') {
                j += 1;
            }
            (j > pos).then_some(j)
        };
        let parts: [&[u8]; 12] = [
            b"0",
            b"1796018401",
            b".",
            b"123",
            b"-",
            b" ",
            b"\"",
            b"x",
            b"00000000",
            b"9",
            b"..",
            b"1.5",
        ];
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let mut line = Vec::new();
            for k in 0..(x % 6) {
                line.extend_from_slice(parts[((x >> (8 * k)) % 12) as usize]);
            }
            for pos in 0..line.len() {
                assert_eq!(
                    number_end(&line, pos),
                    reference(&line, pos),
                    "{:?} at {pos}",
                    String::from_utf8_lossy(&line)
                );
            }
        }
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
                for got in each_byte_everywhere(hay, b) {
                    assert_eq!(got, naive, "len {len} byte {b}");
                }
            }
        }
        let lines = b"a\nbb\n\n".repeat(40);
        for got in each_byte_everywhere(&lines, b'\n') {
            assert_eq!(got.len(), 120);
            assert!(got.iter().all(|&p| lines[p] == b'\n'));
        }
    }

    /// The positions [`each_byte`] gives, and those of each of its implementations this CPU
    /// can run.
    fn each_byte_everywhere(hay: &[u8], b: u8) -> Vec<Vec<usize>> {
        let mut all = vec![Vec::new(), Vec::new()];
        each_byte(hay, b, |p| all[0].push(p));
        each_byte_baseline(hay, b, |p| all[1].push(p));
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") {
            let mut avx2 = Vec::new();
            // SAFETY: the CPU has AVX2 (checked just above).
            unsafe { each_byte_avx2(hay, b, |p| avx2.push(p)) };
            all.push(avx2);
        }
        all
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

    /// The compiled steps read a line as the walk over the items does: the same verdict and,
    /// when it matches, the same spans, on every preset's line and every one-byte edit of it
    /// (a byte deleted, or replaced by one of the bytes the steps look for).
    #[test]
    fn fast_match_reads_every_line_as_the_item_walk() {
        let lines = [
            (
                "main",
                r#"10.1.32.214 - - [30/Nov/2026:06:00:00 +0000] "GET /api/v1/items/85829?page=10 HTTP/1.1" 502 150 "-" "curl/8.5.0" "-""#,
            ),
            (
                "upstreaminfo",
                r#"10.1.32.214 - - [30/Nov/2026:06:00:00 +0000] "GET /a?b=1 HTTP/1.1" 502 150 "-" "curl/8.5.0" 490 0.001 [shop-web-8080] [] 10.0.0.5:8080, 10.0.0.6:8080 : be 0, 0 0.000, 0.001 502, 502 0f7a4199ab0018f9"#,
            ),
            (
                "vhost",
                r#"shop.example.com 10.1.32.214 - - [30/Nov/2026:06:00:00 +0000] "GET /a HTTP/1.1" 502 150 "-" "curl/8.5.0" "10.0.0.5:8080, 10.0.0.6:8080""#,
            ),
            (
                "npm",
                r#"[30/Nov/2026:06:00:00 +0000] - 502, 502 502 - GET https shop.example.com "/a?page=10" [Client 10.1.32.214] [Length 150] [Gzip -] [Sent-to 10.0.0.5] "curl/8.5.0" "-""#,
            ),
            (
                "lab",
                r#"1796018400.020 502 "10.0.0.5:8080, 10.0.0.6:8080" "502, 502" 0.001 GET 839 53 "0.000, 0.001" "0.000, -" "GET /a?page=10 HTTP/1.1" 10.1.32.214"#,
            ),
        ];
        for (name, line) in lines {
            let text = PRESETS.iter().find(|p| p.0 == name).unwrap().1;
            let f = LogFormat::compile(name, text).unwrap();
            let line = line.as_bytes();
            let mut edits = vec![line.to_vec()];
            for at in 0..line.len() {
                let mut gone = line.to_vec();
                gone.remove(at);
                edits.push(gone);
                for b in *b" \",.-:0x[]" {
                    let mut changed = line.to_vec();
                    changed[at] = b;
                    edits.push(changed);
                }
            }
            let (mut matched, mut fast, mut slow) = (0, Spans::EMPTY, Spans::EMPTY);
            for e in &edits {
                let ok = f.fast_match(e, &mut fast);
                let explained = f.explain(e, &mut slow);
                let shown = String::from_utf8_lossy(e);
                assert_eq!(ok, explained.is_ok(), "{name}: {shown} {explained:?}");
                if ok {
                    assert_eq!(fast, slow, "{name}: {shown}");
                    matched += 1;
                }
            }
            assert!(f.fast_match(line, &mut fast), "{name}: the line itself");
            assert!(
                matched > line.len(),
                "{name}: edits that still match: {matched}"
            );
        }
    }

    #[test]
    fn mismatch_names_the_field() {
        let f = LogFormat::combined();
        let mut s = Spans::EMPTY;
        let e = f
            .match_line(b"1796018401.123 502 \"be\"", &mut s)
            .unwrap_err();
        assert!(e.reason.contains("$remote_addr"), "{}", e.reason);
    }

    #[test]
    fn adjacent_unknown_variables() {
        assert!(
            LogFormat::compile("x", "$a$b").is_ok(),
            "unknown adjacent variables are one skipped value"
        );
        assert!(LogFormat::compile("x", "$status$a").is_err());
    }
}
