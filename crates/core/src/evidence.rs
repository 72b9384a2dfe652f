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
