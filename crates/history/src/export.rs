//! Log-store exports read as they come, each record's instance taken from its labels: Loki
//! (`logcli query … --output=jsonl`), Elasticsearch/OpenSearch (`_search` responses), CloudWatch
//! Logs (`aws logs filter-log-events`), ClickHouse (`FORMAT JSONEachRow`) and Kubernetes
//! CRI/containerd log files (`<time> stdout F <line>`, partial `P` lines joined).
//!
//! An export holds the lines of many nginx instances, interleaved and often newest first
//! (logcli's default). [`split`] unwraps every record and writes each instance's lines, in time
//! order, to a plain file of its own — what the checker reads as one instance's mixed stream
//! (`--logs`). Records are held in memory until they are sorted: an export is a bounded query
//! result, not a live stream.
//!
//! ```
//! use resolvelab_history::export::{split, Fields, Export};
//! let dir = tempfile::tempdir().unwrap();
//! let f = dir.path().join("loki.jsonl");
//! std::fs::write(&f, concat!(
//!     r#"{"labels":{"pod":"web-2"},"line":"b","timestamp":"2026-11-30T06:00:02Z"}"#, "\n",
//!     r#"{"labels":{"pod":"web-1"},"line":"a","timestamp":"2026-11-30T06:00:01Z"}"#, "\n",
//! )).unwrap();
//! let slices = split(&[f], &Fields::default(), dir.path()).unwrap().unwrap();
//! assert_eq!(slices.format, Export::Loki);
//! let names: Vec<&str> = slices.instances.iter().map(|s| s.instance.as_str()).collect();
//! assert_eq!(names, ["web-1", "web-2"]);
//! assert_eq!(std::fs::read_to_string(&slices.instances[0].path).unwrap(), "a\n");
//! ```

use serde_json::Value;
use std::collections::BTreeMap;
use std::io::{BufRead, Read, Write};
use std::path::{Path, PathBuf};

/// A log store's export format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Export {
    /// `logcli query … --output=jsonl`: `{"labels": {…}, "line": "…", "timestamp": "…"}` per line.
    Loki,
    /// An Elasticsearch/OpenSearch `_search` response: `hits.hits[]._source`.
    Elasticsearch,
    /// `aws logs filter-log-events` output: `events[]` with `logStreamName` and `message`.
    CloudWatch,
    /// ClickHouse `FORMAT JSONEachRow`: one object per line (the message column is named).
    JsonEachRow,
    /// Kubernetes CRI/containerd log files: `<RFC 3339 time> <stream> <P|F> <line>`.
    Cri,
    /// `kubectl logs … --prefix`: `[pod/NAME/CONTAINER] <line>`, the pods' lines interleaved.
    KubectlPrefix,
    /// A syslog file of several hosts (a central rsyslog/syslog-ng, `journalctl -o short`):
    /// RFC 3164 `[<PRI>]MMM DD HH:MM:SS HOST TAG: …` or RFC 5424 `<PRI>1 TIME HOST APP …`.
    Syslog,
    /// An access log several hosts wrote (a shared volume, a central collector), its format
    /// holding `$hostname`: each line's instance is that field.
    Hostname,
}

impl Export {
    /// Its name in messages.
    pub fn name(self) -> &'static str {
        match self {
            Export::Loki => "Loki (logcli --output=jsonl)",
            Export::Elasticsearch => "Elasticsearch/OpenSearch _search",
            Export::CloudWatch => "CloudWatch Logs filter-log-events",
            Export::JsonEachRow => "JSONEachRow",
            Export::Cri => "CRI/containerd log",
            Export::KubectlPrefix => "kubectl logs --prefix",
            Export::Syslog => "syslog",
            Export::Hostname => "access log with $hostname",
        }
    }
}

/// The fields that name a record's instance and line, where the format leaves them open.
#[derive(Debug, Clone, Default)]
pub struct Fields {
    /// The label or field naming the instance (dotted for nested fields: `kubernetes.pod.name`).
    pub instance: Option<String>,
    /// The field holding the log line (JSONEachRow needs it; others have a default).
    pub message: Option<String>,
}

/// Instance labels tried in order when none is named.
const LOKI_INSTANCE: &[&str] = &[
    "pod",
    "instance",
    "host",
    "hostname",
    "node_name",
    "container",
];
const DOC_INSTANCE: &[&str] = &[
    "kubernetes.pod.name",
    "kubernetes.pod_name",
    "host.name",
    "host.hostname",
    "agent.hostname",
    "hostname",
    "host",
    "instance",
    "pod",
];
const DOC_MESSAGE: &[&str] = &["message", "log", "line"];
const DOC_TIME: &[&str] = &["@timestamp", "timestamp", "time", "ts"];

/// One instance's lines, written as a plain log file.
#[derive(Debug, Clone)]
pub struct Slice {
    /// The instance (its label's value).
    pub instance: String,
    /// The file holding its lines, in time order.
    pub path: PathBuf,
    /// Its lines (records).
    pub lines: u64,
    /// Where each of its lines came from: (index into [`Slices::inputs`], place).
    pub origins: Vec<(u32, Where)>,
}

impl Slice {
    /// Where line `n` (from 1) of the slice was in the export: `FILE:LINE`, or
    /// `FILE:hits.hits[I]` / `FILE:events[I]` (`#D` before it for the D-th of several documents).
    pub fn origin(&self, slices: &Slices, n: u64) -> Option<String> {
        let (file, at) = *self.origins.get(usize::try_from(n).ok()?.checked_sub(1)?)?;
        let f = slices.inputs.get(file as usize)?.display();
        Some(match at {
            Where::Line(l) => format!("{f}:{l}"),
            Where::Item(doc, i) => {
                let list = match slices.format {
                    Export::CloudWatch => "events",
                    _ => "hits.hits",
                };
                let doc = if doc > 1 {
                    format!("#{doc}")
                } else {
                    String::new()
                };
                format!("{f}:{doc}{list}[{i}]")
            }
        })
    }
}

/// The instances of an export.
#[derive(Debug, Clone)]
pub struct Slices {
    /// The format read.
    pub format: Export,
    /// The export files, as given.
    pub inputs: Vec<PathBuf>,
    /// Every instance, by name.
    pub instances: Vec<Slice>,
}

/// Where a record was in its export file: a line (JSON Lines, CRI), or an item of a document's
/// array (Elasticsearch `hits.hits`, CloudWatch `events`; documents counted from 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Where {
    /// Line number, from 1 (a CRI line joined from parts: its first part's).
    Line(u64),
    /// Document number (from 1) and index in its array (from 0).
    Item(u32, u32),
}

/// A record of an export file, as a reader hands it over.
struct Record {
    at: Where,
    instance: String,
    /// Epoch ns, when the export has a time.
    t: Option<i128>,
    line: String,
}

/// One record kept: its time, its order in the input, its origin (file index, place), its line.
type Rec = (Option<i128>, u64, (u32, Where), String);

/// Which export `path` holds, from its first bytes; None for a plain log. JSONEachRow is never
/// guessed (an nginx JSON access log is one object per line too): it is read when
/// `fields.message` names its column.
pub fn detect(path: &Path, fields: &Fields) -> anyhow::Result<Option<Export>> {
    let mut r = crate::open_maybe_gz(path)?;
    let mut first = String::new();
    while first.trim().is_empty() {
        first.clear();
        if r.read_line(&mut first)? == 0 {
            return Ok(None);
        }
    }
    let t = first.trim_start();
    if is_cri(t) {
        return Ok(Some(Export::Cri));
    }
    if kubectl_pod(t).is_some() {
        return Ok(Some(Export::KubectlPrefix));
    }
    if syslog_host(t).is_some() {
        return Ok(Some(Export::Syslog));
    }
    if !t.starts_with('{') {
        return Ok(None);
    }
    match serde_json::from_str::<Value>(t.trim_end()) {
        Ok(Value::Object(o)) => {
            if o.get("line").is_some_and(Value::is_string) && o.contains_key("timestamp") {
                Ok(Some(Export::Loki))
            } else if fields.message.is_some() {
                Ok(Some(Export::JsonEachRow))
            } else if o.contains_key("events") {
                Ok(Some(Export::CloudWatch))
            } else if o.contains_key("hits") {
                Ok(Some(Export::Elasticsearch))
            } else {
                Ok(None)
            }
        }
        // A pretty-printed document: the key that names it is on a later line.
        _ => {
            let mut head = first.clone();
            r.take(1 << 16).read_to_string(&mut head).ok();
            let key = |k: &str| head.contains(&format!("\"{k}\""));
            Ok(if key("events") && key("logStreamName") {
                Some(Export::CloudWatch)
            } else if key("hits") && key("_source") {
                Some(Export::Elasticsearch)
            } else {
                None
            })
        }
    }
}

/// A stream whose lines name their instance in a head — `kubectl logs --prefix`, a syslog of
/// several hosts — read line by line as it grows (`watch`; [`split`] reads a whole export).
///
/// ```
/// use resolvelab_history::export::Headed;
/// let l = "[pod/web-7f9c/nginx] 10.0.0.1 - - [30/Nov/2026:06:00:01 +0000] \"GET / HTTP/1.1\" 502 0";
/// let h = Headed::detect(l).unwrap();
/// assert_eq!(h.split(l).unwrap().0, "web-7f9c");
/// assert!(h.split(l).unwrap().1.starts_with("10.0.0.1"));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Headed {
    /// `[pod/NAME/CONTAINER] <line>`: the pod, the line behind the prefix.
    Kubectl,
    /// A syslog line: its host, the whole line (the checker reads behind the syslog header).
    Syslog,
}

impl Headed {
    /// The kind of head a stream's first line has, if any.
    pub fn detect(line: &str) -> Option<Headed> {
        if kubectl_pod(line).is_some() {
            Some(Headed::Kubectl)
        } else if syslog_host(line).is_some() {
            Some(Headed::Syslog)
        } else {
            None
        }
    }

    /// A line's instance and the text the checker reads; None for a line without a head (a
    /// continuation: it belongs to the instance of the line before it).
    pub fn split(self, line: &str) -> Option<(&str, &str)> {
        match self {
            Headed::Kubectl => kubectl_pod(line),
            Headed::Syslog => syslog_host(line).map(|h| (h, line)),
        }
    }
}

/// The pod of a `kubectl logs --prefix` line, and the line behind the prefix.
fn kubectl_pod(line: &str) -> Option<(&str, &str)> {
    let rest = line.strip_prefix("[pod/")?;
    let (inside, text) = rest.split_once("] ")?;
    let (pod, container) = inside.split_once('/')?;
    (!pod.is_empty() && !container.is_empty() && !container.contains('/')).then_some((pod, text))
}

/// The HOST of a syslog line: RFC 3164 (`Apr 21 08:12:57 box nginx[30944]: …`, with or without
/// `<PRI>`) or RFC 5424 (`<13>1 2026-11-30T06:00:01.000Z box nginx 31 - - …`).
fn syslog_host(line: &str) -> Option<&str> {
    let (pri, rest) = match line.strip_prefix('<') {
        Some(r) => {
            let (p, rest) = r.split_once('>')?;
            (p.len() <= 3 && p.bytes().all(|b| b.is_ascii_digit())).then_some(())?;
            (true, rest)
        }
        None => (false, line),
    };
    if pri && let Some(r) = rest.strip_prefix("1 ") {
        // RFC 5424: VERSION TIMESTAMP HOSTNAME APP-NAME …
        let mut it = r.splitn(3, ' ');
        let (t, host) = (it.next()?, it.next()?);
        return (t.len() >= 19 && t.as_bytes()[4] == b'-' && host != "-").then_some(host);
    }
    // RFC 3164: `Mmm dd hh:mm:ss HOST TAG…` (a day under 10 padded with a space).
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let b = rest.as_bytes();
    if b.len() < 17 || !MONTHS.contains(&rest.get(..3)?) || b[3] != b' ' {
        return None;
    }
    let time = rest.get(7..15)?;
    let ok_time = time.len() == 8 && time.as_bytes()[2] == b':' && time.as_bytes()[5] == b':';
    let day = rest.get(4..6)?.trim_start();
    if !ok_time || day.is_empty() || !day.bytes().all(|c| c.is_ascii_digit()) || b[15] != b' ' {
        return None;
    }
    let (host, tag) = rest.get(16..)?.split_once(' ')?;
    (!host.is_empty() && tag.contains(':')).then_some(host)
}

/// `2016-10-06T00:17:09.669794202Z stdout F …`
fn is_cri(line: &str) -> bool {
    let mut it = line.splitn(4, ' ');
    let (Some(t), Some(stream), Some(tag)) = (it.next(), it.next(), it.next()) else {
        return false;
    };
    t.len() >= 20
        && t.as_bytes()[4] == b'-'
        && t.as_bytes()[10] == b'T'
        && matches!(stream, "stdout" | "stderr")
        && matches!(tag, "P" | "F")
}

/// Split the exports among `inputs` by instance into files under `dir`. None when no input is
/// an export; an error when exports and plain logs are mixed, or a record names no instance.
pub fn split(inputs: &[PathBuf], fields: &Fields, dir: &Path) -> anyhow::Result<Option<Slices>> {
    let mut format = None;
    let mut plain = None;
    for p in inputs {
        match detect(p, fields)? {
            Some(f) if format.is_none_or(|g| g == f) => format = Some(f),
            Some(f) => anyhow::bail!(
                "{}: a {} export beside a {} one: give each format to its own run",
                p.display(),
                f.name(),
                format.map_or("", Export::name)
            ),
            None => plain = Some(p),
        }
    }
    let Some(format) = format else {
        return Ok(None);
    };
    if let Some(p) = plain {
        anyhow::bail!(
            "{} is a plain log beside {} exports: give it to its own run (an export's lines are split by instance, a plain log's cannot be)",
            p.display(),
            format.name()
        );
    }
    let mut by: BTreeMap<String, Vec<Rec>> = BTreeMap::new();
    let mut seq = 0u64;
    for (fi, p) in inputs.iter().enumerate() {
        let mut file: Vec<Record> = Vec::new();
        let mut push = |r: Record| file.push(r);
        match format {
            Export::Loki => read_loki(p, fields, &mut push)?,
            Export::JsonEachRow => read_rows(p, fields, &mut push)?,
            Export::Elasticsearch | Export::CloudWatch => read_doc(p, format, fields, &mut push)?,
            Export::Cri => read_cri(p, &mut push)?,
            Export::KubectlPrefix => read_kubectl(p, &mut push)?,
            Export::Syslog => read_syslog(p, &mut push)?,
            Export::Hostname => unreachable!("detect never names it: split_hosts reads it"),
        }
        // Newest first (logcli's default direction): lines of one timestamp are reversed too,
        // so read the file backwards before the stable sort by time.
        if let (Some(Record { t: Some(a), .. }), Some(Record { t: Some(b), .. })) =
            (file.first(), file.last())
            && a > b
        {
            file.reverse();
        }
        for r in file {
            let rec = (r.t, seq, (fi as u32, r.at), r.line);
            by.entry(r.instance).or_default().push(rec);
            seq += 1;
        }
    }
    let mut instances = Vec::new();
    for (k, (instance, mut recs)) in by.into_iter().enumerate() {
        // Newest-first exports (logcli's default) and interleaved pages come back in time order;
        // records without a time keep the export's order.
        if recs.iter().all(|r| r.0.is_some()) {
            recs.sort_by_key(|r| (r.0, r.1));
        }
        let path = dir.join(format!("instance-{k}.log"));
        let mut w = std::io::BufWriter::new(std::fs::File::create(&path)?);
        for (_, _, _, line) in &recs {
            w.write_all(line.trim_end_matches(['\n', '\r']).as_bytes())?;
            w.write_all(b"\n")?;
        }
        w.flush()?;
        instances.push(Slice {
            instance,
            path,
            lines: recs.len() as u64,
            origins: recs.iter().map(|r| r.2).collect(),
        });
    }
    Ok(Some(Slices {
        format,
        inputs: inputs.to_vec(),
        instances,
    }))
}

/// Access logs whose format has `$hostname`, split by it: `None` when the format has no
/// `$hostname` or the lines name fewer than two hosts (one instance: read as it is). A line
/// the format does not match stays with the host of the line before it (the first host's at
/// the start), where the diagnosis counts it as malformed.
pub fn split_hosts(
    inputs: &[PathBuf],
    fmt: &crate::logformat::LogFormat,
    dir: &Path,
) -> anyhow::Result<Option<Slices>> {
    use crate::logformat::{Field, Spans};
    if inputs.is_empty() || !fmt.has(Field::Hostname) {
        return Ok(None);
    }
    // Each host's file, written as its lines come (a shared log can be large), and where each
    // of its lines was.
    type Host = (
        std::io::BufWriter<std::fs::File>,
        PathBuf,
        Vec<(u32, Where)>,
    );
    let mut by: BTreeMap<String, Host> = BTreeMap::new();
    let mut spans = Spans::default();
    let mut pending: Vec<(String, (u32, Where))> = Vec::new();
    let mut last: Option<String> = None;
    for (fi, p) in inputs.iter().enumerate() {
        let r = crate::open_maybe_gz(p)?;
        for (n, line) in r.lines().enumerate() {
            let line = line.map_err(|e| anyhow::anyhow!("{}:{}: {e}", p.display(), n + 1))?;
            let at = (fi as u32, Where::Line(n as u64 + 1));
            let host = fmt
                .match_line(line.as_bytes(), &mut spans)
                .ok()
                .and_then(|()| spans.slice(line.as_bytes(), Field::Hostname))
                .map(|h| String::from_utf8_lossy(h).into_owned())
                .filter(|h| !h.is_empty() && h != "-")
                .or_else(|| last.clone());
            let Some(host) = host else {
                pending.push((line, at));
                continue;
            };
            if !by.contains_key(&host) {
                let path = dir.join(format!("host-{}.log", by.len()));
                let w = std::io::BufWriter::new(std::fs::File::create(&path)?);
                by.insert(host.clone(), (w, path, Vec::new()));
            }
            let (w, _, origins) = by.get_mut(&host).expect("inserted above");
            for (l, a) in pending.drain(..).chain(std::iter::once((line, at))) {
                w.write_all(l.trim_end_matches('\r').as_bytes())?;
                w.write_all(b"\n")?;
                origins.push(a);
            }
            last = Some(host);
        }
    }
    if by.len() < 2 {
        return Ok(None);
    }
    let mut instances = Vec::new();
    for (instance, (mut w, path, origins)) in by {
        w.flush()?;
        instances.push(Slice {
            instance,
            path,
            lines: origins.len() as u64,
            origins,
        });
    }
    Ok(Some(Slices {
        format: Export::Hostname,
        inputs: inputs.to_vec(),
        instances,
    }))
}

/// A field by name, or by a dotted path into nested objects (`kubernetes.pod.name`).
fn field<'a>(v: &'a Value, name: &str) -> Option<&'a Value> {
    if let Some(x) = v.get(name) {
        return Some(x);
    }
    let (head, rest) = name.split_once('.')?;
    field(v.get(head)?, rest)
}

fn text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// The instance of a record: the named field, else the first default present.
fn instance_of(v: &Value, named: Option<&str>, defaults: &[&str]) -> Result<String, String> {
    match named {
        Some(n) => field(v, n)
            .and_then(text)
            .ok_or_else(|| format!("no field `{n}`")),
        None => defaults
            .iter()
            .find_map(|n| field(v, n).and_then(text))
            .ok_or_else(|| format!("none of {} names the instance", defaults.join(", "))),
    }
}

/// RFC 3339 text, epoch ms or s (a number) → epoch ns.
fn time_of(v: Option<&Value>) -> Option<i128> {
    match v? {
        Value::String(s) => s.parse::<jiff::Timestamp>().ok().map(|t| t.as_nanosecond()),
        // Epoch seconds have 10 digits, milliseconds 13.
        Value::Number(n) => match n.as_i64() {
            Some(x) if x < 100_000_000_000 => Some(x as i128 * 1_000_000_000),
            Some(x) => Some(x as i128 * 1_000_000),
            None => {
                let x = n.as_f64()?;
                Some(if x < 1e11 { x * 1e9 } else { x * 1e6 } as i128)
            }
        },
        _ => None,
    }
}

fn keys_hint(v: &Value) -> String {
    v.as_object()
        .map(|o| o.keys().cloned().collect::<Vec<_>>().join(", "))
        .unwrap_or_default()
}

fn read_loki(p: &Path, fields: &Fields, push: &mut impl FnMut(Record)) -> anyhow::Result<()> {
    json_lines(p, "a logcli JSON line", &mut |v, place, at| {
        let labels = v.get("labels").cloned().unwrap_or(Value::Null);
        let instance =
            instance_of(&labels, fields.instance.as_deref(), LOKI_INSTANCE).map_err(|e| {
                anyhow::anyhow!(
                    "{}: {e} among the labels ({}); name it with --instance-field LABEL",
                    at(),
                    keys_hint(&labels)
                )
            })?;
        push(Record {
            at: place,
            instance,
            t: time_of(v.get("timestamp")),
            line: v.get("line").and_then(text).unwrap_or_default(),
        });
        Ok(())
    })
}

fn read_rows(p: &Path, fields: &Fields, push: &mut impl FnMut(Record)) -> anyhow::Result<()> {
    let message = fields.message.as_deref().unwrap_or("message");
    json_lines(p, "a JSONEachRow row", &mut |v, place, at| {
        doc_record(&v, place, message, fields, at, push)
    })
}

/// What [`json_lines`] calls with each parsed line, its place and its `file:line`.
type EachLine<'a> = dyn FnMut(Value, Where, &dyn Fn() -> String) -> anyhow::Result<()> + 'a;

/// Each non-blank line of a JSON Lines file, parsed, with its place and its `file:line`.
fn json_lines(p: &Path, what: &str, each: &mut EachLine) -> anyhow::Result<()> {
    for (n, line) in crate::open_maybe_gz(p)?.lines().enumerate() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        let at = || format!("{}:{}", p.display(), n + 1);
        let v: Value = serde_json::from_str(&line)
            .map_err(|e| anyhow::anyhow!("{}: not {what} ({e})", at()))?;
        each(v, Where::Line(n as u64 + 1), &at)?;
    }
    Ok(())
}

/// One document of a store (a row, an Elasticsearch `_source`): its instance, time and line.
fn doc_record(
    v: &Value,
    place: Where,
    message: &str,
    fields: &Fields,
    at: &dyn Fn() -> String,
    push: &mut impl FnMut(Record),
) -> anyhow::Result<()> {
    let instance = instance_of(v, fields.instance.as_deref(), DOC_INSTANCE).map_err(|e| {
        anyhow::anyhow!(
            "{}: {e} (fields: {}); name it with --instance-field FIELD",
            at(),
            keys_hint(v)
        )
    })?;
    let msg = field(v, message).and_then(text).ok_or_else(|| {
        anyhow::anyhow!(
            "{}: no field `{message}` holds the log line (fields: {}); name it with --message-field FIELD",
            at(),
            keys_hint(v)
        )
    })?;
    let t = DOC_TIME.iter().find_map(|k| time_of(field(v, k)));
    push(Record {
        at: place,
        instance,
        t,
        line: msg,
    });
    Ok(())
}

/// An Elasticsearch response or a CloudWatch `filter-log-events` document (one per file, or
/// several concatenated: pages saved one after another).
fn read_doc(
    p: &Path,
    format: Export,
    fields: &Fields,
    push: &mut impl FnMut(Record),
) -> anyhow::Result<()> {
    let r = crate::open_maybe_gz(p)?;
    for (page, doc) in serde_json::Deserializer::from_reader(r)
        .into_iter::<Value>()
        .enumerate()
    {
        let doc = doc.map_err(|e| {
            anyhow::anyhow!("{}: not a {} document ({e})", p.display(), format.name())
        })?;
        let (list, what) = match format {
            Export::CloudWatch => (doc.get("events"), "events"),
            _ => (doc.get("hits").and_then(|h| h.get("hits")), "hits.hits"),
        };
        let list = list.and_then(Value::as_array).ok_or_else(|| {
            anyhow::anyhow!(
                "{}: document {} has no `{what}` array",
                p.display(),
                page + 1
            )
        })?;
        for (i, rec) in list.iter().enumerate() {
            let place = Where::Item(page as u32 + 1, i as u32);
            let at = || format!("{}: document {}, {what}[{i}]", p.display(), page + 1);
            match format {
                Export::CloudWatch => {
                    let instance = fields.instance.as_deref().unwrap_or("logStreamName");
                    let inst = field(rec, instance).and_then(text).ok_or_else(|| {
                        anyhow::anyhow!(
                            "{}: no `{instance}`; name the instance with --instance-field FIELD",
                            at()
                        )
                    })?;
                    let msg = rec.get("message").and_then(text).unwrap_or_default();
                    push(Record {
                        at: place,
                        instance: inst,
                        t: time_of(rec.get("timestamp")),
                        line: msg,
                    });
                }
                _ => {
                    let src = rec.get("_source").unwrap_or(rec);
                    let message = fields
                        .message
                        .as_deref()
                        .or_else(|| {
                            DOC_MESSAGE
                                .iter()
                                .copied()
                                .find(|m| field(src, m).is_some())
                        })
                        .unwrap_or("message");
                    doc_record(src, place, message, fields, &at, push)?;
                }
            }
        }
    }
    Ok(())
}

/// The pod of a CRI log file from its path (`/var/log/pods/<ns>_<pod>_<uid>/<container>/0.log`,
/// `/var/log/containers/<pod>_<ns>_<container>-<id>.log`), else the file's name.
pub fn cri_instance(p: &Path) -> String {
    let parts: Vec<String> = p
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if let Some(i) = parts.iter().position(|c| c == "pods")
        && let Some(dir) = parts.get(i + 1)
        && let [_, pod, _] = dir.splitn(3, '_').collect::<Vec<_>>()[..]
    {
        return pod.to_string();
    }
    let stem = p
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    if parts.iter().any(|c| c == "containers")
        && let Some((pod, _)) = stem.split_once('_')
    {
        return pod.to_string();
    }
    stem
}

fn read_cri(p: &Path, push: &mut impl FnMut(Record)) -> anyhow::Result<()> {
    let instance = cri_instance(p);
    let mut cri = CriLines::default();
    let mut record = |(first, t, line): CriRecord| {
        push(Record {
            at: Where::Line(first),
            instance: instance.clone(),
            t,
            line,
        })
    };
    for (n, line) in crate::open_maybe_gz(p)?.lines().enumerate() {
        if let Some(r) = cri.push(n as u64 + 1, &line?) {
            record(r);
        }
    }
    if let Some(r) = cri.finish() {
        record(r);
    }
    Ok(())
}

/// One record of a CRI file: its first part's line number, its time (ns since the epoch, when
/// it reads) and its text, parts joined.
pub type CriRecord = (u64, Option<i128>, String);

/// CRI/containerd lines (`<RFC 3339 time> <stream> <P|F> <text>`) joined into records as they
/// come, for a file read whole ([`split`]) or followed (`resolvelab watch`): a line longer than
/// the runtime's buffer comes as `P` parts ended by an `F` part.
#[derive(Debug, Default)]
pub struct CriLines {
    pending: Option<CriRecord>,
}

impl CriLines {
    /// Whether a line is a CRI line.
    pub fn is_cri(line: &str) -> bool {
        is_cri(line)
    }

    /// Take line `n`: the record it completes, if any (a line that is not CRI is passed over).
    pub fn push(&mut self, n: u64, line: &str) -> Option<CriRecord> {
        let mut it = line.splitn(4, ' ');
        let (Some(t), Some(_), Some(tag)) = (it.next(), it.next(), it.next()) else {
            return None;
        };
        let body = it.next().unwrap_or("");
        let t = t.parse::<jiff::Timestamp>().ok().map(|t| t.as_nanosecond());
        let (first, t0, mut text) = self.pending.take().unwrap_or((n, t, String::new()));
        text.push_str(body);
        if tag == "P" {
            self.pending = Some((first, t0, text));
            return None;
        }
        Some((first, t0, text))
    }

    /// A last record the stream ended before its `F` part.
    pub fn finish(&mut self) -> Option<CriRecord> {
        self.pending.take()
    }
}

/// Each line goes to its pod; a line without a prefix (a continuation) to the pod before it.
/// kubectl writes each pod's lines in order, so the export's order is kept.
fn read_kubectl(p: &Path, push: &mut impl FnMut(Record)) -> anyhow::Result<()> {
    read_headed(p, push, "`[pod/NAME/CONTAINER] ` prefix", Headed::Kubectl)
}

/// Each line to its host, whole (the checker reads an nginx line behind its syslog header); a
/// line without a header (a continuation) to the host before it. Hosts' lines keep the file's
/// order (a syslog time has no year and whole seconds).
fn read_syslog(p: &Path, push: &mut impl FnMut(Record)) -> anyhow::Result<()> {
    read_headed(
        p,
        push,
        "syslog header (`MMM DD HH:MM:SS HOST TAG:`)",
        Headed::Syslog,
    )
}

/// A stream whose lines name their instance in a header; a line without one continues the
/// instance before it, and none may come first.
fn read_headed(
    p: &Path,
    push: &mut impl FnMut(Record),
    what: &str,
    head: Headed,
) -> anyhow::Result<()> {
    let mut last: Option<String> = None;
    for (n, line) in crate::open_maybe_gz(p)?.lines().enumerate() {
        let line = line?;
        let (instance, text) = match (head.split(&line), &last) {
            (Some((i, t)), _) => (i.to_string(), t.to_string()),
            (None, Some(i)) => (i.clone(), line),
            (None, None) => anyhow::bail!(
                "{}:{}: no {what} before the first instance's line",
                p.display(),
                n + 1
            ),
        };
        last = Some(instance.clone());
        push(Record {
            at: Where::Line(n as u64 + 1),
            instance,
            t: None,
            line: text,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cri_pods_come_from_the_path() {
        for (path, pod) in [
            (
                "/var/log/pods/ingress_nginx-7d9f-x2k_0b1c/controller/0.log",
                "nginx-7d9f-x2k",
            ),
            (
                "/var/log/containers/nginx-7d9f-x2k_ingress_controller-4f5e.log",
                "nginx-7d9f-x2k",
            ),
            ("/tmp/web-1.log", "web-1"),
        ] {
            assert_eq!(cri_instance(Path::new(path)), pod, "{path}");
        }
    }

    #[test]
    fn syslog_hosts_are_read_from_either_rfc() {
        for (line, host) in [
            (
                "Apr 21 08:12:57 box nginx[30944]: 2025/04/21 08:12:57 [notice] 1#1: x",
                Some("box"),
            ),
            (
                "Dec  5 09:50:17 web-1 nginx: 10.0.0.1 - - [05/Dec/2026:09:50:17 +0000] \"GET /\"",
                Some("web-1"),
            ),
            (
                "<27>Dec  5 09:50:17 web-2 nginx: 2026/12/05 09:50:17 [error] 1#1: x",
                Some("web-2"),
            ),
            (
                "<11>1 2026-12-05T09:50:17.003Z web-3 nginx 31 - - 2026/12/05 09:50:17 [error]",
                Some("web-3"),
            ),
            (
                "2026/12/05 09:50:17 [error] 31#31: *1 connect() failed",
                None,
            ),
            (
                "10.0.0.1 - - [05/Dec/2026:09:50:17 +0000] \"GET / HTTP/1.1\" 502 150",
                None,
            ),
            (
                "daemon.debug: Oct 14 14:44:22 horst horst nginx: 2015/10/14",
                None,
            ),
            ("Decision: 12 … not a header", None),
        ] {
            assert_eq!(syslog_host(line), host, "{line}");
        }
    }

    #[test]
    fn numbers_are_seconds_or_milliseconds() {
        let s = serde_json::json!(1796018401);
        let ms = serde_json::json!(1796018401123u64);
        assert_eq!(time_of(Some(&s)), Some(1_796_018_401_000_000_000));
        assert_eq!(time_of(Some(&ms)), Some(1_796_018_401_123_000_000));
        let t = serde_json::json!("2026-11-30T06:00:01.5+09:00");
        assert!(time_of(Some(&t)).is_some());
    }
}
