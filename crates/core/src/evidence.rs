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
    /// `verdict.json`: the checker's verdict on a run.
    pub const VERDICT: &str = "resolvelab.verdict/v1";
    /// `diagnose --format json`: a diagnosis.
    pub const DIAGNOSIS: &str = "resolvelab.diagnosis/v1";
    /// `lint --format json`: lint findings.
    pub const LINT: &str = "resolvelab.lint/v1";
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
    /// The model's configuration and summary (simulated runs only).
    pub const SIM: &str = "sim.json";
    /// The verdict, as JSON ([`super::schema::VERDICT`]).
    pub const VERDICT_JSON: &str = "verdict.json";
    /// The verdict, as Markdown.
    pub const VERDICT_MD: &str = "verdict.md";
    /// The verdict, as self-contained HTML.
    pub const VERDICT_HTML: &str = "verdict.html";
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
    /// A state change the proxy logged itself (`target` the proxy, `note` its words: HAProxy's
    /// "changed its IP", "going DOWN for maintenance (DNS NX status)").
    pub const PROXY_STATE: &str = "proxy-state";
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
