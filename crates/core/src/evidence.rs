//! The evidence a run leaves, defined once for its writers (the lab's components, the real-nginx
//! engine, the model) and its readers (`history`, the checker): the run directory's files, the
//! schema id on the first line of each JSON Lines file, and the lab's access-log format.
//!
//! ```
//! use resolvelab_core::evidence::{file, schema};
//! assert_eq!(file::DNS, "dns.jsonl");
//! assert_eq!(schema::DNS, "resolvelab.dns/v1");
//! assert!(resolvelab_core::evidence::LAB_LOG_FORMAT.starts_with("$msec $status"));
//! ```

/// The access-log format of every lab nginx (`log_format lab`): the time in ms, the status,
/// every `$upstream_*` field the checker reads, and the connection for pairing error lines.
pub const LAB_LOG_FORMAT: &str = "$msec $status \"$upstream_addr\" \"$upstream_status\" $request_time $request_method $connection $connection_requests \"$upstream_response_time\" \"$upstream_connect_time\" \"$request\" $remote_addr";

pub mod load;
pub mod run;

/// Schema ids: the `schema` of a JSON Lines file's first line, or of a JSON document.
pub mod schema {
    /// `dns.jsonl`: one line per query the authority answered.
    pub const DNS: &str = "resolvelab.dns/v1";
    /// `events.jsonl`: what the runner did and when (phases, injections, reverts).
    pub const EVENTS: &str = "resolvelab.events/v1";
    /// `load.jsonl`: one line per request of the load generator.
    pub const LOAD: &str = "resolvelab.load/v1";
    /// `probes.jsonl`: one line per readiness probe.
    pub const PROBES: &str = "resolvelab.probes/v1";
    /// The backend's own request log.
    pub const BACKEND: &str = "resolvelab.backend/v1";
    /// The fault proxy's event log.
    pub const PROXY: &str = "resolvelab.proxy/v1";
    /// `run.json`: the run's record (status, network, hit counters).
    pub const RUN: &str = "resolvelab.run/v1";
    /// `fingerprint.json`: tool version, seed, engine, host and config hashes.
    pub const FINGERPRINT: &str = "resolvelab.fingerprint/v1";
    /// `expect.json`: what the scenario expects of the run ([`super::Expectations`]).
    pub const EXPECT: &str = "resolvelab.expect/v1";
    /// `verdict.json`: the checker's verdict on a run.
    pub const VERDICT: &str = "resolvelab.verdict/v1";
    /// `diagnose --format json`: a diagnosis.
    pub const DIAGNOSIS: &str = "resolvelab.diagnosis/v1";
    /// `lint --format json`: lint findings.
    pub const LINT: &str = "resolvelab.lint/v1";
    /// `watch --events`: one line per incident when it closes.
    pub const WATCH_EVENT: &str = "resolvelab.watch-event/v1";
    /// `watch --state`: where each followed file was and the counters, to resume from.
    pub const WATCH_STATE: &str = "resolvelab.watch-state/v1";
    /// `resolvelab verify`'s report card (`--format json`).
    pub const VERIFY: &str = "resolvelab.verify/v1";
}

/// The files of a run directory (`runs/<scenario>-<UTC stamp>/`).
pub mod file {
    /// The scenario as it was run (variant merged, scale applied).
    pub const SCENARIO: &str = "scenario.toml";
    /// The nginx configuration the run rendered.
    pub const NGINX_CONF: &str = "nginx.conf";
    /// nginx's access log, in [`super::LAB_LOG_FORMAT`].
    pub const ACCESS_LOG: &str = "access.log";
    /// nginx's error log.
    pub const ERROR_LOG: &str = "error.log";
    /// The authority's query log ([`super::schema::DNS`]).
    pub const DNS: &str = "dns.jsonl";
    /// The runner's events ([`super::schema::EVENTS`]).
    pub const EVENTS: &str = "events.jsonl";
    /// The load generator's requests ([`super::schema::LOAD`]).
    pub const LOAD: &str = "load.jsonl";
    /// Readiness probes ([`super::schema::PROBES`]).
    pub const PROBES: &str = "probes.jsonl";
    /// Backend names and addresses of the run.
    pub const BACKENDS: &str = "backends.json";
    /// The run's record ([`super::schema::RUN`]).
    pub const RUN: &str = "run.json";
    /// The run's fingerprint ([`super::schema::FINGERPRINT`]).
    pub const FINGERPRINT: &str = "fingerprint.json";
    /// What the scenario expects of the run ([`super::Expectations`]).
    pub const EXPECT: &str = "expect.json";
    /// The model's configuration and summary (simulated runs only).
    pub const SIM: &str = "sim.json";
    /// The verdict, as JSON ([`super::schema::VERDICT`]).
    pub const VERDICT_JSON: &str = "verdict.json";
    /// The verdict, as Markdown.
    pub const VERDICT_MD: &str = "verdict.md";
    /// The verdict, as self-contained HTML.
    pub const VERDICT_HTML: &str = "verdict.html";

    /// A `[fleet]` run's instances, one directory each (`instances/nginx-1/`: the instance's
    /// `nginx.conf`, `access.log`, `error.log`); the run's other files stay at its top.
    pub const INSTANCES: &str = "instances";
    /// A `[fleet]` run's balancer: which connection went to which instance
    /// ([`super::schema::PROXY`]).
    pub const BALANCER: &str = "balancer.jsonl";

    /// What every engine leaves in a judged run directory, the proxy's own configuration
    /// (`nginx.conf`, `haproxy.cfg`, …) aside.
    pub const JUDGED: [&str; 12] = [
        SCENARIO,
        EXPECT,
        FINGERPRINT,
        ACCESS_LOG,
        ERROR_LOG,
        DNS,
        EVENTS,
        LOAD,
        RUN,
        VERDICT_JSON,
        VERDICT_MD,
        VERDICT_HTML,
    ];
}

/// The `kind`s of an [`Event`] the lab writes (a reader keeps any other kind as it is: old run
/// directories and other writers may have more).
pub mod event_kind {
    /// A phase of the run (`target` nginx or load; `note` what happened: `listening`, `start`, `end`).
    pub const PHASE: &str = "phase";
    /// A name's DNS mode changed (`target` the name, `spec` the mode).
    pub const DNS_MODE: &str = "dns-mode";
    /// A timed DNS injection ended, with its hits.
    pub const DNS_MODE_END: &str = "dns-mode-end";
    /// A fault went on (`target` the backend or proxy, `spec` the fault).
    pub const FAULT_ON: &str = "fault-on";
    /// A fault went off, with its hits.
    pub const FAULT_OFF: &str = "fault-off";
    /// nginx was reloaded (`nginx -s reload`).
    pub const NGINX_RELOAD: &str = "nginx-reload";
    /// `nginx -t` on the running configuration (`spec` `ok` or `refused`, `note` nginx's
    /// words): would a start or restart succeed now?
    pub const NGINX_TEST: &str = "nginx-test";
    /// The timeline stopped nginx to start it again (`nginx = "restart"`).
    pub const NGINX_RESTART: &str = "nginx-restart";
    /// nginx was started again (after a restart's stop, or a `nginx = "start"` step): `spec`
    /// `ok` or `refused`, `note` its words (a refused start leaves nginx down).
    pub const NGINX_START: &str = "nginx-start";
    /// The lab saved the proxy's state before replacing it, where its next process reads it
    /// (HAProxy's `show servers state` into its `server-state-file`): `spec` `saved` (`note`
    /// each server and its address) or `failed` (`note` why; the reload or restart goes on).
    pub const SERVER_STATE: &str = "server-state";
    /// A state change the proxy logged itself (`target` the proxy, `note` its words: HAProxy's
    /// "changed its IP", "going DOWN for maintenance (DNS NX status)").
    pub const PROXY_STATE: &str = "proxy-state";
    /// A GSLB's answer for a name changed after its health checks (`target` the name, `spec`
    /// the new answer, `note` which member went down or up and on which probes): the system's
    /// own reaction, not an injection.
    pub const GSLB: &str = "gslb";
}

/// One line of `events.jsonl` after its header ([`schema::EVENTS`]): what the lab did and when.
/// The one type of its writers (the real-nginx runner, the model) and its reader (`history`).
///
/// ```
/// use resolvelab_core::evidence::{Event, event_kind};
/// let e = Event::new(1_000, event_kind::FAULT_OFF, "b1").spec("rst").hits(3);
/// let line = serde_json::to_string(&e).unwrap();
/// assert_eq!(line, r#"{"t_us":1000,"kind":"fault-off","target":"b1","spec":"rst","hits":3}"#);
/// let back: Event = serde_json::from_str(&line).unwrap();
/// assert_eq!(back, e);
/// ```
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Event {
    /// Epoch µs.
    pub t_us: i64,
    /// What happened ([`event_kind`]).
    #[serde(default)]
    pub kind: String,
    /// What the event acts on (a name, a backend, a proxy, `nginx`, `load`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// The spec (`nxdomain`, `rst:p=1`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<String>,
    /// Injection hit counter at the end of that injection.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hits: Option<u64>,
    /// A remark (`from start`, `end of run`, a phase's name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// The scenario meant this injection to miss nginx (e.g. an NXDOMAIN window placed between
    /// re-queries): 0 hits is then the expected finding, and any hit spoils the run.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub expect_miss: bool,
    /// Reader only: index of the file in the history's file list.
    #[serde(skip)]
    pub file: u32,
    /// Reader only: 1-based line number.
    #[serde(skip)]
    pub line: u64,
}

impl Event {
    /// An event of `kind` on `target` at `t_us`.
    pub fn new(t_us: i64, kind: &str, target: &str) -> Event {
        Event {
            t_us,
            kind: kind.to_string(),
            target: Some(target.to_string()),
            ..Event::default()
        }
    }

    /// With a spec (an empty one is left out).
    pub fn spec(mut self, spec: &str) -> Event {
        self.spec = (!spec.is_empty()).then(|| spec.to_string());
        self
    }

    /// With a hit counter.
    pub fn hits(mut self, hits: u64) -> Event {
        self.hits = Some(hits);
        self
    }

    /// With a note.
    pub fn note(mut self, note: &str) -> Event {
        self.note = Some(note.to_string());
        self
    }
}

/// What a scenario expects of one run (`expect.json`), written by the engine when the run starts
/// and read by the checker, which so never reads the scenario's own format: its name, the checks
/// this run's engine is judged by, and the injections the scenario meant to miss or allowed to.
///
/// ```
/// use resolvelab_core::evidence::{Expectations, Injected};
/// let e = Expectations {
///     checks: vec!["nlu = 0".into()],
///     meant_to_miss: vec![Injected { target: "api.lab".into(), spec: Some("nxdomain".into()) }],
///     ..Expectations::new("dns-nxdomain", "nginx")
/// };
/// let back: Expectations = serde_json::from_str(&serde_json::to_string(&e).unwrap()).unwrap();
/// assert_eq!(back, e);
/// assert!(e.is_meant_to_miss("api.lab", Some("nxdomain")));
/// assert!(!e.may_miss("api.lab"));
/// ```
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Expectations {
    /// Always [`schema::EXPECT`].
    pub schema: String,
    /// The scenario's name.
    pub scenario: String,
    /// The variant, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variant: Option<String>,
    /// The engine the checks were chosen for (a scenario may have checks per engine).
    #[serde(default)]
    pub engine: String,
    /// The checks, in the expectation language (docs/diagnose.md).
    #[serde(default)]
    pub checks: Vec<String>,
    /// Injections meant to miss the proxy: 0 hits is the finding, a hit spoils the run.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub meant_to_miss: Vec<Injected>,
    /// Injections that may miss it (they reach some engines only): any hit counter is a finding.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub may_miss: Vec<Injected>,
}

/// A timeline injection as the events name it: its target and spec.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Injected {
    /// The DNS name, backend or proxy.
    pub target: String,
    /// The mode or fault spec as the scenario wrote it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<String>,
}

impl Expectations {
    /// No checks yet, for `scenario` on `engine`.
    pub fn new(scenario: &str, engine: &str) -> Expectations {
        Expectations {
            schema: schema::EXPECT.to_string(),
            scenario: scenario.to_string(),
            engine: engine.to_string(),
            ..Expectations::default()
        }
    }

    /// Whether the injection on `target` with `spec` was meant to miss.
    pub fn is_meant_to_miss(&self, target: &str, spec: Option<&str>) -> bool {
        self.meant_to_miss
            .iter()
            .any(|i| i.target == target && (i.spec.is_none() || i.spec.as_deref() == spec))
    }

    /// Whether an injection on `target` may miss. By target alone: a fault's spec is logged
    /// normalised (`toxicity=0.3` → `p=0.3`).
    pub fn may_miss(&self, target: &str) -> bool {
        self.may_miss.iter().any(|i| i.target == target)
    }

    /// Read `expect.json` of a run directory; `None` when the run has none (production logs, a
    /// run from before 2026-12-02).
    pub fn read(dir: &std::path::Path) -> std::io::Result<Option<Expectations>> {
        let p = dir.join(file::EXPECT);
        let text = match std::fs::read_to_string(&p) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        serde_json::from_str(&text)
            .map(Some)
            .map_err(|e| std::io::Error::other(format!("{}: {e}", p.display())))
    }
}

/// How a DNS query arrived.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    serde::Serialize,
    serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Transport {
    /// UDP datagram.
    #[default]
    Udp,
    /// TCP, 2-byte length prefix.
    Tcp,
}

impl Transport {
    /// `udp` or `tcp`, as the log writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Transport::Udp => "udp",
            Transport::Tcp => "tcp",
        }
    }
}

/// One DNS query and what it was answered: a line of `dns.jsonl` ([`schema::DNS`]). The one
/// type of its writers (the lab authority, `dns watch`, the model) and its reader (`history`).
///
/// ```
/// use resolvelab_core::evidence::DnsQuery;
/// let q = DnsQuery {
///     t_us: 1_000,
///     qname: "api.lab".into(),
///     qtype: "A".into(),
///     rcode: "NOERROR".into(),
///     answers: vec!["127.0.0.20".parse().unwrap()],
///     ttl: 1,
///     ..DnsQuery::default()
/// };
/// let line = serde_json::to_string(&q).unwrap();
/// assert!(line.starts_with(r#"{"t_us":1000,"client":"0.0.0.0:0","qname":"api.lab""#));
/// let back: DnsQuery = serde_json::from_str(&line).unwrap();
/// assert_eq!(back, q);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct DnsQuery {
    /// Epoch microseconds when the query arrived.
    pub t_us: i64,
    /// The client's `ip:port` (`0.0.0.0:0` when a line does not say).
    #[serde(default = "no_client")]
    pub client: std::net::SocketAddr,
    /// Lowercase, no trailing dot (empty for an undecodable packet).
    #[serde(default)]
    pub qname: String,
    /// `A`, `AAAA`, … (empty for an undecodable packet).
    #[serde(default)]
    pub qtype: String,
    /// `udp` or `tcp`.
    #[serde(default)]
    pub transport: Transport,
    /// The DNS message id.
    #[serde(default)]
    pub id: u16,
    /// The mode string in force (`unknown` for names the authority does not serve).
    #[serde(default)]
    pub mode: String,
    /// `NOERROR`, `NXDOMAIN`, `SERVFAIL`, `REFUSED`, `FORMERR`, `NOTIMP` or `DROPPED`.
    #[serde(default)]
    pub rcode: String,
    /// The addresses in the answer section.
    #[serde(default)]
    pub answers: Vec<std::net::IpAddr>,
    /// TTL of the answer records (the name's TTL when there are none).
    #[serde(default)]
    pub ttl: u32,
    /// The answer differs from the previous answer given to this client (by IP) for this
    /// name and qtype. The first answer to a client is not a change.
    #[serde(default)]
    pub changed: bool,
    /// Answered under a mode other than the name's configured one.
    #[serde(default)]
    pub injected: bool,
    /// The UDP answer had the TC bit set (too large, or `truncate` mode).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub truncated: bool,
    /// The authority's view the query arrived on (its extra address `--view`, a fleet
    /// instance's own resolver); absent for the main address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub view: Option<u16>,
    /// `watch`: a probe's query and what it was answered (`resolvelab dns watch`), not a query
    /// the server answered — an answer history, not the proxy's; `mode` is then empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe: Option<String>,
    /// A probe's wait for the answer (µs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_us: Option<u64>,
    /// What a probe flags in the answer: `two-records`, `nxdomain`, `nodata`, `servfail`,
    /// `refused`, `timeout`, `aaaa`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flags: Vec<String>,
    /// Reader only: index of the file in the history's file list.
    #[serde(skip)]
    pub file: u32,
    /// Reader only: 1-based line number.
    #[serde(skip)]
    pub line: u64,
}

impl DnsQuery {
    /// The answer addresses as the log writes them, in the order given.
    pub fn answer_texts(&self) -> Vec<String> {
        self.answers.iter().map(ToString::to_string).collect()
    }
}

impl Default for DnsQuery {
    fn default() -> DnsQuery {
        DnsQuery {
            t_us: 0,
            client: no_client(),
            qname: String::new(),
            qtype: String::new(),
            transport: Transport::Udp,
            id: 0,
            mode: String::new(),
            rcode: String::new(),
            answers: Vec::new(),
            ttl: 0,
            changed: false,
            injected: false,
            truncated: false,
            view: None,
            probe: None,
            latency_us: None,
            flags: Vec::new(),
            file: 0,
            line: 0,
        }
    }
}

fn no_client() -> std::net::SocketAddr {
    std::net::SocketAddr::from(([0, 0, 0, 0], 0))
}
