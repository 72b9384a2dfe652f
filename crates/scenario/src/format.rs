//! The scenario file format (`version = 1`), documented in docs/scenarios.md.

use resolvelab_core::dur::Dur;
use resolvelab_core::spec::dns::{Align, DnsSetting, HostRef};
use resolvelab_core::spec::engine::EngineId;
use resolvelab_core::spec::fault::{BackendFault, Fault};
use resolvelab_core::spec::latency::Latency;
use resolvelab_core::spec::mix::Mix;
use resolvelab_core::spec::nginx::{NextUpstream, NginxTime};
use resolvelab_core::spec::rate::RatePlan;
use resolvelab_core::spec::toxic::ToxicSpec;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;

/// A scenario: the question, the setup (nginx, DNS, backends, proxies), the load, the faults on a
/// timeline and the expectations written before the run.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Format version; always 1.
    pub version: u32,
    /// Stable id (`generation-race`).
    pub name: String,
    /// What the scenario sets up.
    pub description: String,
    /// The question it answers.
    pub question: String,
    /// The seed experiment it reproduces (DOMAIN.md §5), e.g. `4-4` or `P2`.
    #[serde(default)]
    pub reproduces: String,
    /// The seed's figure, for the reproduction table.
    #[serde(default)]
    pub seed_figure: String,
    /// RNG seed of the run (faults, DNS weights). `--seed` overrides.
    #[serde(default)]
    pub seed: Option<u64>,
    /// Run the same scenario this many times (distributions, e.g. RTO).
    #[serde(default)]
    pub repeat: Option<u32>,
    /// `false` when the load itself is the measurement (a burst that must outnumber a pool):
    /// `--scale` then leaves the scenario as written.
    #[serde(default = "d_true", skip_serializing_if = "Clone::clone")]
    pub scalable: bool,
    /// Variant name when this is a variant run (set by the runner).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variant_of: Option<String>,
    /// The host the run needs (`[host]`): a private network namespace and its settings.
    #[serde(default, skip_serializing_if = "HostSpec::is_default")]
    pub host: HostSpec,
    /// The nginx configuration: also the proxy-neutral upstream description the other engines
    /// render their own configurations from.
    pub nginx: NginxSpec,
    /// HAProxy's own knobs for the `haproxy` engine (`[haproxy]`).
    #[serde(default, skip_serializing_if = "HaproxySpec::is_empty")]
    pub haproxy: HaproxySpec,
    /// Envoy's own knobs for the `envoy` engine (`[envoy]`).
    #[serde(default, skip_serializing_if = "EnvoySpec::is_empty")]
    pub envoy: EnvoySpec,
    /// Caddy's own knobs for the `caddy` engine (`[caddy]`).
    #[serde(default, skip_serializing_if = "CaddySpec::is_empty")]
    pub caddy: CaddySpec,
    /// The DNS authority.
    #[serde(default)]
    pub dns: DnsSpec,
    /// Backends (`[[backend]]`).
    #[serde(default, rename = "backend")]
    pub backends: Vec<BackendSpec>,
    /// TCP fault proxies (`[[proxy]]`).
    #[serde(default, rename = "proxy")]
    pub proxies: Vec<ProxySpec>,
    /// Readiness probes (`[[probe]]`): a prober like a kubelet's, polling a backend's path on an
    /// interval with a timeout while the load runs; every probe goes to `probes.jsonl`.
    #[serde(default, rename = "probe", skip_serializing_if = "Vec::is_empty")]
    pub probes: Vec<ProbeSpec>,
    /// Several nginx instances behind one L4 balancer (`[fleet]`); absent: one nginx.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fleet: Option<FleetSpec>,
    /// The load.
    pub load: LoadSpec,
    /// Injections over time (`[[timeline]]`).
    #[serde(default)]
    pub timeline: Vec<Event>,
    /// The engines this scenario applies to (empty: every engine that can play it); the others
    /// are not applicable (`compare` shows n/a), e.g. a zone exhaustion is nginx's alone.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub engines: Vec<Spelled<EngineId>>,
    /// Expectations (`[expect] checks = [...]`).
    #[serde(default)]
    pub expect: Expect,
    /// A/B variants: tables deep-merged over this scenario (`[[variant]]`).
    #[serde(default, rename = "variant", skip_serializing_if = "Vec::is_empty")]
    pub variants: Vec<toml::Table>,
    /// The text this scenario was read from, so later checks can say `file:line`.
    #[serde(skip)]
    pub source: Option<std::sync::Arc<crate::locate::Source>>,
    /// Which `[[variant]]` of the source this is (its values are found there first).
    #[serde(skip)]
    variant_index: Option<usize>,
}

/// The built-in nginx template's variables (or an inline `http {}` body).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NginxSpec {
    /// `worker_processes`.
    #[serde(default = "d_workers")]
    pub workers: u32,
    /// Resolver `valid=` (the re-query period is valid + 1 s).
    #[serde(default = "d_valid")]
    pub valid: NginxTime,
    /// Resolver `ipv6=` (false renders `ipv6=off`).
    #[serde(default)]
    pub ipv6: bool,
    /// `resolver_timeout`.
    #[serde(default)]
    pub resolver_timeout: Option<NginxTime>,
    /// Shared-memory zone size of the upstream.
    #[serde(default = "d_zone")]
    pub zone: String,
    /// Upstream `keepalive` connections (0: no upstream keep-alive, on every nginx version:
    /// rendered as `keepalive 0;` from 1.29.7 on, whose default is 32).
    #[serde(default = "d_keepalive")]
    pub keepalive: u32,
    /// No `keepalive` line at all: the nginx version's own default applies (none before
    /// 1.29.7, 32 from it on), as in a configuration that never mentions it. `keepalive` is
    /// then not used; the model (nginx 1.28) keeps none.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub keepalive_default: bool,
    /// `keepalive_timeout` of the upstream block.
    #[serde(default)]
    pub keepalive_timeout: Option<NginxTime>,
    /// `proxy_next_upstream` (`off` disables retries), checked when the file is read.
    #[serde(default = "d_next")]
    pub proxy_next_upstream: NextUpstream,
    /// `proxy_next_upstream_tries` (0: nginx's default, unlimited).
    #[serde(default)]
    pub proxy_next_upstream_tries: u32,
    /// The `error_page 502 = @retry_once` shim.
    #[serde(default)]
    pub retry_shim: bool,
    /// Guard the shim with a GET/HEAD/OPTIONS method check.
    #[serde(default = "d_true")]
    pub method_guard: bool,
    /// `recursive_error_pages on` (a hazard with the shim).
    #[serde(default)]
    pub recursive_error_pages: bool,
    /// Default `max_fails` for every server line (None: nginx's default, 1).
    #[serde(default)]
    pub max_fails: Option<u32>,
    /// Default `fail_timeout` for every server line (None: nginx's default, 10s).
    #[serde(default)]
    pub fail_timeout: Option<NginxTime>,
    /// The port backends listen on and server lines point at.
    #[serde(default = "d_port")]
    pub port: u16,
    /// `proxy_connect_timeout`.
    #[serde(default)]
    pub connect_timeout: Option<NginxTime>,
    /// `proxy_read_timeout`.
    #[serde(default)]
    pub read_timeout: Option<NginxTime>,
    /// Upstream server lines (`[[nginx.server]]`).
    #[serde(default, rename = "server")]
    pub servers: Vec<ServerLine>,
    /// A second upstream, `filler`, sharing `be`'s zone and resolving this [dns.names] entry (no
    /// traffic goes to it): its peers take zone memory that `be`'s answer changes then lack.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone_filler: Option<String>,
    /// An inline `http {}` body instead of the template. `{resolver}`, `{dns}` (the run's DNS
    /// authority, `IP:PORT`), `{listen}`, `{port}`, `{zone}`, `{backend:NAME}` and `{tls_ca}`
    /// (the run's certificate authority, when a backend speaks TLS) are substituted.
    #[serde(default)]
    pub inline: Option<String>,
    /// The inline body names hosts nginx resolves when it starts (and at each reload): a
    /// `server` line without `resolve`, a `proxy_pass` to a name. The lab then points nginx's
    /// system resolver at its authority, as it does for the template's `resolve = false`.
    /// Only with `inline` (the template knows it by itself).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub resolves_at_start: bool,
    /// How `location /` reaches the backend (see [`Route`]).
    #[serde(default, skip_serializing_if = "Route::is_upstream")]
    pub route: Route,
    /// Render the `resolver` directive. `false` leaves it out: a variable `proxy_pass` then
    /// fails every request (`no resolver defined to resolve NAME`); nginx refuses a `resolve`
    /// server without one.
    #[serde(default = "d_true", skip_serializing_if = "Clone::clone")]
    pub resolver: bool,
}

/// Lines added to the sections of the `haproxy` engine's configuration, for what has no
/// counterpart in `[nginx]` (`resolvers = ["hold nx 5s"]`, `backend = ["option redispatch"]`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HaproxySpec {
    /// Lines of `defaults`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub defaults: Vec<String>,
    /// Lines of `resolvers lab`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resolvers: Vec<String>,
    /// Lines of `backend be`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub backend: Vec<String>,
    /// Each resolved name as `server-template` with this many servers (one per address of
    /// the answer, up to it) instead of one `server` line (one address).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_template: Option<u32>,
    /// `init-addr` on each resolved server line, instead of the lab's `none` (with
    /// `resolvers`) or HAProxy's default (a name resolved at start only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub init_addr: Option<crate::knobs::InitAddr>,
    /// Keep HAProxy's server state across a reload or restart, as an operator's reload script
    /// does: `server-state-file` and `load-server-state-from-file`, and the lab writes `show
    /// servers state` into that file before it replaces HAProxy (`init-addr last` then finds
    /// the address the old process had).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub server_state: bool,
}

impl HaproxySpec {
    fn is_empty(&self) -> bool {
        *self == HaproxySpec::default()
    }
}

/// Envoy's own knobs for the `envoy` engine, each a table merged (JSON merge patch) into its
/// part of the rendered `envoy.json`: `cluster = { dns_refresh_rate = "1s", type =
/// "LOGICAL_DNS" }`, `route = { retry_policy = { num_retries = 3 } }`, `bootstrap = { … }`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EnvoySpec {
    /// Merged into the whole bootstrap document.
    #[serde(default, skip_serializing_if = "toml::Table::is_empty")]
    pub bootstrap: toml::Table,
    /// Merged into cluster `be`.
    #[serde(default, skip_serializing_if = "toml::Table::is_empty")]
    pub cluster: toml::Table,
    /// Merged into the route's `route` action (`cluster`, `timeout`, `retry_policy`).
    #[serde(default, skip_serializing_if = "toml::Table::is_empty")]
    pub route: toml::Table,
}

impl EnvoySpec {
    fn is_empty(&self) -> bool {
        *self == EnvoySpec::default()
    }
}

/// Caddy's own knobs for the `caddy` engine, merged (JSON merge patch) into the rendered
/// `caddy.json`: `handler = { load_balancing = { retries = 3 } }` into the `reverse_proxy`
/// handler, `upstreams = { refresh = "5s" }` into every dynamic `a` upstream source.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CaddySpec {
    /// Merged into the `reverse_proxy` handler.
    #[serde(default, skip_serializing_if = "toml::Table::is_empty")]
    pub handler: toml::Table,
    /// Merged into every dynamic `a` upstream source.
    #[serde(default, skip_serializing_if = "toml::Table::is_empty")]
    pub upstreams: toml::Table,
    /// Static upstreams beside the dynamic ones (`fallback = ["@b1"]`: backends or proxies by
    /// name): Caddy sends a request to them when its lookup of the name fails, and only then.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fallback: Vec<String>,
}

impl CaddySpec {
    fn is_empty(&self) -> bool {
        *self == CaddySpec::default()
    }
}

/// How the template's `location /` reaches the backend: the three ways nginx can use a name.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Route {
    /// `proxy_pass http://be;`: the `[[nginx.server]]` lines of upstream `be`, each name
    /// resolved at run time (`resolve`) or once, at start and at each reload (`resolve = false`).
    #[default]
    Upstream,
    /// `proxy_pass http://NAME:PORT;`: the one server's name, resolved once (at start and at
    /// each reload) by the system resolver, as an implicit upstream with nginx's defaults.
    Direct,
    /// `set $backend NAME; proxy_pass http://$backend:PORT;` with a `resolver`: the name is
    /// resolved per request, through the resolver's cache (`valid=`).
    Variable,
}

impl Route {
    fn is_upstream(&self) -> bool {
        *self == Route::Upstream
    }
}

/// What a timeline event does to nginx itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NginxAction {
    /// `nginx -s reload` (SIGHUP to the master): the configuration is read again, and every
    /// name it resolves at start is resolved again.
    Reload,
    /// `nginx -t` on the running configuration, with the run's resolver: would a start (or a
    /// restart) succeed now? It resolves every name a start resolves (`host not found in
    /// upstream` stops a start); nothing running changes.
    Test,
    /// Stop nginx (SIGQUIT, as `docker stop` of the official image sends: requests in flight
    /// finish, the listener and idle connections close) and start it again with the same
    /// configuration — a container restart, a node reboot. The start resolves every name a
    /// start resolves: one that does not resolve stops it (`[emerg] host not found in
    /// upstream`), and nginx stays down until a later `start` succeeds.
    Restart,
    /// Start nginx if it is down (a restart policy's next try); nothing when it runs.
    Start,
}

/// One `server` line of the upstream.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerLine {
    /// A DNS name served by the lab's authority, or `@backend` for that backend's fixed address.
    pub host: String,
    /// Add `resolve` (DNS names only).
    #[serde(default = "d_true")]
    pub resolve: bool,
    /// `max_fails=` (overrides the [nginx] default).
    #[serde(default)]
    pub max_fails: Option<u32>,
    /// `fail_timeout=`.
    #[serde(default)]
    pub fail_timeout: Option<NginxTime>,
    /// `backup`.
    #[serde(default)]
    pub backup: bool,
}

/// The DNS authority: names and their initial modes.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DnsSpec {
    /// TTL of answers (nginx ignores it in favour of `valid`).
    #[serde(default = "d_ttl")]
    pub ttl: Dur,
    /// Name → initial mode (`alternate:@b1,@b2`, `static:@b1`, `nxdomain`, …). `@name` is a
    /// backend's (or proxy's) address.
    #[serde(default)]
    pub names: BTreeMap<String, Spelled<DnsSetting<HostRef>>>,
    /// Names a GSLB answers (`[dns.gslb."NAME"]`): their answer follows health checks of a
    /// pool of backends, as a global load balancer's or a service registry's does.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub gslb: BTreeMap<String, GslbSpec>,
}

impl Default for DnsSpec {
    fn default() -> Self {
        DnsSpec {
            ttl: d_ttl(),
            names: BTreeMap::new(),
            gslb: BTreeMap::new(),
        }
    }
}

/// `[dns.gslb."NAME"]`: the name's answer is its pool's healthy members, after health checks
/// on a fixed cycle — a member goes down after `down_after` failed probes in a row and comes
/// back after `up_after` good ones — so a dead backend stays in the answer for up to
/// `down_after × interval` and each resolver then meets the new answer at its own re-query.
/// Defaults are Route 53's health check scaled to the lab (interval 30 s → 1 s, threshold 3).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GslbSpec {
    /// Backends by name, in order of preference.
    pub pool: Vec<String>,
    /// `first`: the first healthy member (active/passive failover); `all`: every healthy one.
    #[serde(default)]
    pub answer: GslbAnswer,
    /// Time between two probe rounds (not scaled by `--scale`, like `valid`).
    #[serde(default = "d_probe_interval")]
    pub interval: Dur,
    /// A probe without a 2xx answer within this time failed.
    #[serde(default = "d_gslb_timeout")]
    pub timeout: Dur,
    /// Failed probes in a row that take a member out of the answer.
    #[serde(default = "d_gslb_threshold")]
    pub down_after: u32,
    /// Good probes in a row that put it back.
    #[serde(default = "d_gslb_threshold")]
    pub up_after: u32,
    /// Path probed (`/health` answers at once on a live backend).
    #[serde(default = "d_gslb_path")]
    pub path: String,
    /// With every member down: `pool` answers them all (Route 53 and most GSLBs: better a
    /// maybe-dead address than none), `nxdomain` answers none (a service registry with no
    /// healthy instance).
    #[serde(default)]
    pub all_down: GslbAllDown,
    /// Per resolver, its own order of preference (a topology-aware GSLB answers each site its
    /// nearest healthy member): a `[fleet]` instance's name (`nginx-3`) → pool members in that
    /// order. Each fleet instance asks the authority on a resolver address of its own, and the
    /// GSLB answers it in its instance's order; instances not listed get `pool`'s.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub prefer: BTreeMap<String, Vec<String>>,
}

/// Which healthy members a GSLB answers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum GslbAnswer {
    /// The first healthy member in pool order (failover).
    #[default]
    First,
    /// Every healthy member.
    All,
}

/// What a GSLB answers when no member is healthy.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum GslbAllDown {
    /// The whole pool (as if every member were healthy).
    #[default]
    Pool,
    /// NXDOMAIN.
    Nxdomain,
}

impl GslbSpec {
    /// The members it answers given each one's health (pool order), as backend names; `None`
    /// for NXDOMAIN.
    pub fn answer_for(&self, up: &[bool]) -> Option<Vec<&str>> {
        let order: Vec<&str> = self.pool.iter().map(String::as_str).collect();
        self.answer_in(&order, up)
    }

    /// The order in which it answers the resolver of fleet instance `instance` (`nginx-3`):
    /// its `prefer` entry, else the pool's.
    pub fn order_for(&self, instance: &str) -> Vec<&str> {
        match self.prefer.get(instance) {
            Some(o) => o.iter().map(String::as_str).collect(),
            None => self.pool.iter().map(String::as_str).collect(),
        }
    }

    /// [`GslbSpec::answer_for`] in the order `order` (members of the pool), the health still
    /// given in pool order.
    pub fn answer_in<'a>(&'a self, order: &[&'a str], up: &[bool]) -> Option<Vec<&'a str>> {
        let is_up = |m: &str| {
            (self.pool.iter().zip(up))
                .find(|(p, _)| p.as_str() == m)
                .is_some_and(|(_, u)| *u)
        };
        let healthy: Vec<&str> = order.iter().copied().filter(|m| is_up(m)).collect();
        let chosen = match (healthy.is_empty(), self.answer) {
            (false, GslbAnswer::First) => healthy[..1].to_vec(),
            (false, GslbAnswer::All) => healthy,
            (true, _) if self.all_down == GslbAllDown::Nxdomain => return None,
            (true, GslbAnswer::First) => order[..1].to_vec(),
            (true, GslbAnswer::All) => order.to_vec(),
        };
        Some(chosen)
    }

    /// The `[dns.names]` mode of its answer with every member up: `static:@b1` (or
    /// `static:@b1,@b2` for `all`).
    pub fn starting_mode(&self) -> String {
        let all = self
            .answer_for(&vec![true; self.pool.len()])
            .unwrap_or_default();
        let refs: Vec<String> = all.iter().map(|m| format!("@{m}")).collect();
        format!("static:{}", refs.join(","))
    }
}

fn d_gslb_timeout() -> Dur {
    Dur::new(Duration::from_millis(500))
}
fn d_gslb_threshold() -> u32 {
    3
}
fn d_gslb_path() -> String {
    "/health".into()
}

/// One backend.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BackendSpec {
    /// Name (used as `@name` and as `x-backend`).
    pub name: String,
    /// Last octet of its loopback address inside the run's /24 (default 20, 30, 40, …).
    #[serde(default)]
    pub host: Option<u8>,
    /// Latency model (`1ms`, `uniform:1ms..5ms`, `lognormal:p50=2ms,p99=40ms`).
    #[serde(default)]
    pub latency: Option<Spelled<Latency>>,
    /// Faults active from the start (`reclaim:toxicity=0.3,delay=0ms..50ms`).
    #[serde(default)]
    pub faults: Vec<Spelled<BackendFault>>,
    /// Slow dependency: the proxy (by name) in front of the DB stand-in.
    #[serde(default)]
    pub db: Option<String>,
    /// Slow dependency: sequential round trips per request.
    #[serde(default)]
    pub round_trips: Option<u32>,
    /// Slow dependency: pool size.
    #[serde(default)]
    pub pool: Option<u32>,
    /// Slow dependency: pool acquire timeout.
    #[serde(default)]
    pub acquire_timeout: Option<Dur>,
    /// This backend is the DB stand-in (`--echo-db`).
    #[serde(default)]
    pub echo_db: bool,
    /// Speak TLS (`tls = {}`, or `tls = { names = ["api.example.com"] }`): the run makes a
    /// certificate authority, the backend presents a certificate it signed for every
    /// `[dns.names]` name, `names` and every backend address, and an inline nginx body trusts
    /// it with `proxy_ssl_trusted_certificate {tls_ca};`. nginx engines built with the SSL
    /// module only; the model does not model the handshake.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<TlsSpec>,
}

/// A backend's TLS (see [`BackendSpec::tls`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsSpec {
    /// Names its certificate covers besides the `[dns.names]` (a `proxy_ssl_name`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub names: Vec<String>,
}

pub use resolvelab_core::spec::Spelled;

/// What [`Scenario::specs`] parses.
#[derive(Debug, Clone)]
pub struct Specs {
    /// Each `[dns.names]` entry's starting setting, its `@name` references kept until the
    /// run's addresses are known (`render::Net::resolve`).
    pub dns: BTreeMap<String, DnsSetting<HostRef>>,
    /// Each backend's latency model and standing faults, by name.
    pub backends: BTreeMap<String, BackendSpecs>,
    /// Each TCP proxy's standing faults (toxics), by name.
    pub proxies: BTreeMap<String, Vec<Spelled<ToxicSpec>>>,
    /// `[load] rate`.
    pub rate: RatePlan,
}

/// One backend's parsed specs.
#[derive(Debug, Clone, Default)]
pub struct BackendSpecs {
    /// `latency` (`None`: the backend answers at once).
    pub latency: Option<Spelled<Latency>>,
    /// `faults`, active from the start.
    pub faults: Vec<Spelled<BackendFault>>,
}

/// One TCP fault proxy.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProxySpec {
    /// Name.
    pub name: String,
    /// Last octet of its listen address.
    #[serde(default)]
    pub host: Option<u8>,
    /// Port it listens on (default: the [nginx] port).
    #[serde(default)]
    pub port: Option<u16>,
    /// The backend it forwards to.
    pub upstream: String,
    /// Faults active from the start.
    #[serde(default)]
    pub faults: Vec<Spelled<ToxicSpec>>,
}

/// `[fleet]`: several nginx instances, each with its own configuration, logs and resolver,
/// behind one L4 balancer that spreads the load's connections round-robin, started apart so
/// that their re-query phases differ — a production fleet asking one GSLB (issue #47).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FleetSpec {
    /// How many nginx instances (2–16).
    pub instances: u32,
    /// Time between two instances' starts: their re-query phases differ by it (default: the
    /// re-query period divided by the instances; not scaled by `--scale`, like `valid`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stagger: Option<Dur>,
}

/// Most nginx instances a fleet runs (each one has its workers, logs and connections on a
/// 2-core machine).
pub const MAX_FLEET: u32 = 16;

/// `[host]`: kernel settings a scenario needs, applied only inside a private network namespace.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostSpec {
    /// Run in a fresh network namespace (its own loopback; needs root).
    #[serde(default)]
    pub netns: bool,
    /// Per-namespace settings, e.g. `"net.ipv4.tcp_tw_reuse" = "0"` (only with `netns = true`).
    #[serde(default)]
    pub sysctl: BTreeMap<String, String>,
}

impl HostSpec {
    fn is_default(&self) -> bool {
        self == &HostSpec::default()
    }
}

/// One readiness prober (`[[probe]]`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProbeSpec {
    /// The backend (or proxy) probed, by name.
    pub target: String,
    /// Path requested (`/ready` queues behind a backend's DB pool; `/health` never does).
    #[serde(default = "d_probe_path")]
    pub path: String,
    /// Time between probes (not scaled by `--scale`, like `valid`).
    #[serde(default = "d_probe_interval")]
    pub interval: Dur,
    /// A probe without a complete answer within this time counts as failed.
    #[serde(default = "d_probe_interval")]
    pub timeout: Dur,
}

fn d_probe_path() -> String {
    "/ready".into()
}
fn d_probe_interval() -> Dur {
    Dur::new(Duration::from_secs(1))
}

/// The load.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LoadSpec {
    /// Requests per second, or a plan (`100@10s,500@30s`), checked when the file is read.
    pub rate: Spelled<RatePlan>,
    /// Duration.
    pub duration: Dur,
    /// Method mix (`GET=1`, `GET=0.8,POST=0.2`), checked when the file is read.
    #[serde(default)]
    pub mix: Mix,
    /// Client keep-alive connections.
    #[serde(default = "d_conns")]
    pub connections: u32,
    /// Per-request timeout.
    #[serde(default = "d_timeout")]
    pub timeout: Dur,
    /// Path requested.
    #[serde(default = "d_path")]
    pub path: String,
    /// Concurrency cap (in-flight requests) for slow scenarios.
    #[serde(default)]
    pub max_in_flight: Option<u32>,
    /// A client like browsers, curl and Go's: an idempotent request sent on a reused
    /// keep-alive connection that closed before any response byte is sent once more on a new
    /// connection (`resolvelab load --retry-idempotent`, counted as client retries). Off by
    /// default: such a request is a client error, which the lab then counts against the proxy.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub retry_idempotent: bool,
}

/// One injection on the timeline.
#[derive(Debug, Clone, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct Event {
    /// Time after the load starts.
    #[serde(default)]
    pub at: Option<Dur>,
    /// Time after the previous event.
    #[serde(default)]
    pub after: Option<Dur>,
    /// Add a uniform random delay in `[0, jitter)` from the run's seeded RNG: the phase of a real
    /// failure relative to nginx's re-query timer is random (RTO ~ U(0, valid + 1 s]).
    #[serde(default)]
    pub jitter: Option<Dur>,
    /// `next-requery` (lands on nginx's next re-query of `dns`) or `between-requeries`.
    #[serde(default)]
    pub align: Option<resolvelab_core::spec::dns::Align>,
    /// Set this DNS name's mode.
    #[serde(default)]
    pub dns: Option<String>,
    /// The new DNS mode.
    #[serde(default)]
    pub mode: Option<Spelled<DnsSetting<HostRef>>>,
    /// Add a fault to this backend or proxy.
    #[serde(default)]
    pub fault: Option<String>,
    /// The fault spec.
    #[serde(default)]
    pub spec: Option<String>,
    /// Remove all faults of this backend or proxy.
    #[serde(default)]
    pub clear: Option<String>,
    /// Act on nginx itself (`"reload"`, `"test"`, `"restart"`, `"start"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nginx: Option<NginxAction>,
    /// How long the change lasts (then it reverts).
    #[serde(default, rename = "for")]
    pub for_: Option<Dur>,
    /// A note for the events log.
    #[serde(default)]
    pub note: Option<String>,
    /// The injection is *meant* to miss nginx (e.g. an NXDOMAIN window placed between two
    /// re-queries): a hit counter of 0 is then the finding, not an injection that failed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub expect_miss: bool,
    /// The injection reaches some engines only (a fault on reused connections, which a proxy
    /// without upstream keep-alive never makes): any hit counter, 0 included, is a finding, and
    /// the run stays interpretable either way.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub may_miss: bool,
}

/// Expectations written before the run.
#[derive(Debug, Clone, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct Expect {
    /// Checks in the expectation language (docs/diagnose.md).
    #[serde(default)]
    pub checks: Vec<String>,
    /// Checks for one engine's runs instead of `checks` (`[expect.engines] haproxy = [...]`):
    /// what that proxy's own policy makes of the scenario.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub engines: std::collections::BTreeMap<Spelled<EngineId>, Vec<String>>,
}

impl Event {
    /// The injection as the events name it (`None` for `clear` and nginx actions).
    fn injected(&self) -> Option<resolvelab_core::evidence::Injected> {
        Some(resolvelab_core::evidence::Injected {
            target: self.dns.clone().or_else(|| self.fault.clone())?,
            spec: (self.mode.as_ref().map(|m| m.text.clone())).or_else(|| self.spec.clone()),
        })
    }
}

impl Scenario {
    /// What this scenario expects of a run on `engine` (`expect.json`): the checks that
    /// engine is judged by, and the injections meant to miss (`expect_miss`, or placed
    /// `between-requeries`) or allowed to (`may_miss`).
    pub fn expectations(&self, engine: EngineId) -> resolvelab_core::evidence::Expectations {
        use resolvelab_core::spec::dns::Align;
        let meant = |e: &&Event| e.expect_miss || e.align == Some(Align::BetweenQueries);
        resolvelab_core::evidence::Expectations {
            variant: self.variant_of.clone(),
            checks: self.expect.for_engine(engine).to_vec(),
            meant_to_miss: self
                .timeline
                .iter()
                .filter(meant)
                .filter_map(Event::injected)
                .collect(),
            may_miss: (self.timeline.iter())
                .filter(|e| e.may_miss)
                .filter_map(Event::injected)
                .collect(),
            ..resolvelab_core::evidence::Expectations::new(&self.name, engine.as_str())
        }
    }
}

impl Expect {
    /// The checks a run of `engine` is judged by: its own, a model's proxy's (`sim-haproxy` →
    /// `haproxy`), else `checks`.
    pub fn for_engine(&self, engine: EngineId) -> &[String] {
        let own = |want: EngineId| {
            let mut keys = self.engines.iter();
            keys.find(|(k, _)| k.value == want).map(|(_, v)| v)
        };
        let modelled = engine.proxy().filter(|_| engine.is_model());
        own(engine)
            .or_else(|| modelled.and_then(|k| own(EngineId::Proxy(k))))
            .unwrap_or(&self.checks)
    }
}

/// `[host] sysctl`: only per-namespace networking settings may be set, and only inside the
/// private namespace.
pub fn check_sysctl_key(key: &str) -> Result<(), String> {
    let ok =
        key.starts_with("net.ipv4.") || key.starts_with("net.ipv6.") || key == "net.core.somaxconn";
    if !ok || key.contains("..") || key.contains('/') {
        return Err(format!(
            "sysctl `{key}`: only per-namespace `net.ipv4.*`, `net.ipv6.*` or `net.core.somaxconn` may be set"
        ));
    }
    Ok(())
}

fn d_workers() -> u32 {
    2
}
fn d_valid() -> NginxTime {
    "5s".parse().expect("an nginx time")
}
fn d_zone() -> String {
    "64k".into()
}
fn d_keepalive() -> u32 {
    16
}
fn d_next() -> NextUpstream {
    NextUpstream {
        error: true,
        timeout: true,
        ..NextUpstream::default()
    }
}
fn d_true() -> bool {
    true
}
fn d_port() -> u16 {
    8080
}
fn d_ttl() -> Dur {
    Dur::new(Duration::from_secs(1))
}
fn d_conns() -> u32 {
    32
}
fn d_timeout() -> Dur {
    Dur::new(Duration::from_secs(5))
}
fn d_path() -> String {
    "/".into()
}

impl Scenario {
    /// Parse a scenario from TOML text; `origin` names the file in errors. Every mistake —
    /// syntax, a DNS mode, a fault spec, a rate plan, a reference, in the scenario or in any of
    /// its variants — is reported here as `origin:line`, before anything runs.
    pub fn from_toml(text: &str, origin: &str) -> anyhow::Result<Scenario> {
        let mut sc: Scenario = toml::from_str(text).map_err(|e| {
            let line = e.span().map(|s| {
                text.as_bytes()[..s.start.min(text.len())]
                    .iter()
                    .filter(|&&b| b == b'\n')
                    .count()
                    + 1
            });
            let msg = e.message().trim().to_string();
            match line {
                Some(l) => anyhow::anyhow!("{origin}:{l}: {msg}"),
                None => anyhow::anyhow!("{origin}: {msg}"),
            }
        })?;
        sc.source = Some(std::sync::Arc::new(crate::locate::Source {
            origin: origin.to_string(),
            text: text.to_string(),
        }));
        sc.validate()?;
        for v in sc.variant_names() {
            sc.variant(&v)?;
        }
        Ok(sc)
    }

    /// `file:line` of the value at `path` (keys, and array indices as numbers): in this
    /// variant's own table when it sets the value, else in the scenario.
    pub fn at(&self, path: &[&str]) -> String {
        let Some(src) = &self.source else {
            return self.name.clone();
        };
        let located = self.variant_index.and_then(|i| {
            let idx = i.to_string();
            let mut vpath = vec!["variant", idx.as_str()];
            vpath.extend_from_slice(path);
            crate::locate::line_of(&src.text, &vpath).filter(|(_, exact)| *exact)
        });
        match located.or_else(|| crate::locate::line_of(&src.text, path)) {
            Some((line, _)) => format!("{}:{line}", src.origin),
            None => src.origin.clone(),
        }
    }

    /// An error at the value at `path`.
    fn err_at(&self, path: &[&str], msg: impl std::fmt::Display) -> anyhow::Error {
        anyhow::anyhow!("{}: {msg}", self.at(path))
    }

    /// Check what serde cannot: durations, the lab's specs (DNS modes, faults, latency, rate),
    /// references between sections.
    pub fn validate(&self) -> anyhow::Result<()> {
        if self.version != 1 {
            return Err(self.err_at(
                &["version"],
                format!("version = {} is not supported (use 1)", self.version),
            ));
        }
        self.check_load().map_err(|e| self.err_at(&["load"], e))?;
        for kind in resolvelab_core::spec::engine::ProxyKind::ALL {
            self.proxy_timing(kind)?;
        }
        if self.nginx.servers.is_empty() && self.nginx.inline.is_none() {
            return Err(self.err_at(
                &["nginx"],
                "[nginx] needs at least one [[nginx.server]] or an inline config",
            ));
        }
        if self.nginx.resolves_at_start && self.nginx.inline.is_none() {
            return Err(self.err_at(
                &["nginx", "resolves_at_start"],
                "[nginx] resolves_at_start is for an inline body: the template knows which names it resolves at start (`resolve = false`)",
            ));
        }
        let names = self.check_hosts()?;
        self.check_gslb(&names)?;
        self.check_route()?;
        self.check_specs()?;
        self.check_probes(&names)?;
        if let Some(f) = &self.nginx.zone_filler
            && !self.dns.names.contains_key(f)
        {
            return Err(self.err_at(
                &["nginx", "zone_filler"],
                format!("[nginx] zone_filler `{f}` is not a [dns.names] entry"),
            ));
        }
        for (i, s) in self.nginx.servers.iter().enumerate() {
            let at = || self.at(&["nginx", "server", &i.to_string(), "host"]);
            if let Some(b) = s.host.strip_prefix('@') {
                if !names.contains(b) {
                    anyhow::bail!("{}: server host `@{b}` names no backend or proxy", at());
                }
            } else if !self.dns.names.contains_key(&s.host) {
                anyhow::bail!(
                    "{}: server host `{}` is not a [dns.names] entry (use `@backend` for a fixed address)",
                    at(),
                    s.host
                );
            }
        }
        self.check_server_params()?;
        self.check_caddy_fallback(&names)?;
        self.check_server_template()?;
        self.check_server_state()?;
        self.check_fleet()?;
        self.check_timeline(&names)?;
        self.check_events_within_load()
            .map_err(|e| self.err_at(&["timeline"], e))?;
        Ok(())
    }

    /// `[haproxy] server_template`: 1 to 1024 servers, for at least one resolved name.
    fn check_server_template(&self) -> anyhow::Result<()> {
        let Some(n) = self.haproxy.server_template else {
            return Ok(());
        };
        let at = ["haproxy", "server_template"];
        if !(1..=1024).contains(&n) {
            return Err(self.err_at(
                &at,
                format!("[haproxy] server_template = {n}: give 1 to 1024 servers per name"),
            ));
        }
        if self.nginx.servers.iter().all(|s| s.host.starts_with('@')) {
            return Err(self.err_at(
                &at,
                "[haproxy] server_template needs a resolved server name: a fixed address is one server",
            ));
        }
        Ok(())
    }

    /// `[haproxy] server_state`: only where a server's `init-addr` starts from the file
    /// (`last`): HAProxy's default on a line without `resolvers`, else `init_addr` with `last`.
    fn check_server_state(&self) -> anyhow::Result<()> {
        if !self.haproxy.server_state {
            return Ok(());
        }
        let last = match &self.haproxy.init_addr {
            Some(a) => a.0.contains(&crate::knobs::InitMethod::Last),
            // The lab writes `init-addr none` on a line with `resolvers`.
            None => (self.nginx.servers.iter()).all(|s| !s.resolve || s.host.starts_with('@')),
        };
        if last {
            return Ok(());
        }
        Err(self.err_at(
            &["haproxy", "server_state"],
            "[haproxy] server_state: no server reads the file's address — add `last` to init_addr (`init_addr = \"last,libc,none\"`)",
        ))
    }

    /// `[caddy] fallback`: each a `@backend` of this scenario, beside at least one resolved
    /// name (Caddy falls back to static upstreams only from dynamic ones).
    fn check_caddy_fallback(&self, names: &std::collections::BTreeSet<&str>) -> anyhow::Result<()> {
        let fallback = &self.caddy.fallback;
        for (i, f) in fallback.iter().enumerate() {
            let at = || self.at(&["caddy", "fallback", &i.to_string()]);
            match f.strip_prefix('@') {
                Some(b) if names.contains(b) => {}
                Some(b) => {
                    anyhow::bail!("{}: caddy fallback `@{b}` names no backend or proxy", at())
                }
                None => anyhow::bail!(
                    "{}: caddy fallback `{f}` is not a backend reference: write `@NAME` of a [[backend]]",
                    at()
                ),
            }
        }
        if !fallback.is_empty() && self.nginx.servers.iter().all(|s| s.host.starts_with('@')) {
            return Err(self.err_at(
                &["caddy", "fallback"],
                "[caddy] fallback needs a resolved server name: Caddy uses static upstreams as a fallback only for dynamic ones",
            ));
        }
        Ok(())
    }

    /// `[dns.gslb."NAME"]`: a served name, a pool of backends, sane probes, and the name's
    /// starting mode is the GSLB's answer with every member up.
    fn check_gslb(&self, names: &std::collections::BTreeSet<&str>) -> anyhow::Result<()> {
        for (name, g) in &self.dns.gslb {
            let bad = |k: &str, why: String| self.err_at(&["dns", "gslb", name, k], why);
            let Some(start) = self.dns.names.get(name) else {
                return Err(bad(
                    "pool",
                    format!(
                        "[dns.gslb] `{name}` is not a [dns.names] entry: add `\"{name}\" = \"{}\"`",
                        g.starting_mode()
                    ),
                ));
            };
            if g.pool.is_empty() {
                return Err(bad("pool", "a GSLB needs at least one member".into()));
            }
            if let Some(m) = g.pool.iter().find(|m| !names.contains(m.as_str())) {
                return Err(bad("pool", format!("member `{m}` is not a backend")));
            }
            if g.interval.get().is_zero() || g.timeout.get().is_zero() {
                return Err(bad(
                    "interval",
                    "interval and timeout must be above 0".into(),
                ));
            }
            if g.timeout.get() > g.interval.get() {
                return Err(bad(
                    "timeout",
                    format!(
                        "timeout {} is longer than the interval {}: a round must end before the next",
                        g.timeout, g.interval
                    ),
                ));
            }
            for (k, n) in [("down_after", g.down_after), ("up_after", g.up_after)] {
                if !(1..=10).contains(&n) {
                    return Err(bad(k, format!("{k} = {n}: 1 to 10 probes")));
                }
            }
            if !g.path.starts_with('/') {
                return Err(bad(
                    "path",
                    format!("path `{}` must start with `/`", g.path),
                ));
            }
            self.check_prefer(name, g)?;
            let want = g.starting_mode();
            if want.parse::<DnsSetting<HostRef>>().ok().as_ref() != Some(&start.value) {
                return Err(self.err_at(
                    &["dns", "names", name],
                    format!(
                        "[dns.names] {name} = \"{}\": a GSLB name starts as the GSLB answers with every member up: \"{want}\"",
                        start.text
                    ),
                ));
            }
        }
        Ok(())
    }

    /// `[dns.gslb."NAME"] prefer`: a fleet's instances, each with pool members, none twice.
    fn check_prefer(&self, name: &str, g: &GslbSpec) -> anyhow::Result<()> {
        let Some((who, _)) = g.prefer.iter().next() else {
            return Ok(());
        };
        let fail = |k: &str, why: String| self.err_at(&["dns", "gslb", name, "prefer", k], why);
        let Some(f) = &self.fleet else {
            return Err(fail(
                who,
                "prefer orders the answers per resolver of a [fleet]'s instances: add [fleet]"
                    .into(),
            ));
        };
        for (inst, order) in &g.prefer {
            let known = (1..=f.instances).any(|k| format!("nginx-{k}") == *inst);
            if !known {
                return Err(fail(
                    inst,
                    format!(
                        "`{inst}` is not an instance of this fleet (nginx-1 to nginx-{})",
                        f.instances
                    ),
                ));
            }
            if order.is_empty() {
                return Err(fail(inst, "an order needs at least one member".into()));
            }
            for (i, m) in order.iter().enumerate() {
                if !g.pool.contains(m) {
                    return Err(fail(inst, format!("`{m}` is not in the pool")));
                }
                if order[..i].contains(m) {
                    return Err(fail(inst, format!("`{m}` is given twice")));
                }
            }
        }
        Ok(())
    }

    /// `[fleet]`: 2–16 instances, each started within a minute of the one before.
    fn check_fleet(&self) -> anyhow::Result<()> {
        let Some(f) = &self.fleet else { return Ok(()) };
        if !(2..=MAX_FLEET).contains(&f.instances) {
            return Err(self.err_at(
                &["fleet", "instances"],
                format!(
                    "instances = {}: a fleet has 2 to {MAX_FLEET} nginx instances",
                    f.instances
                ),
            ));
        }
        if f.stagger
            .as_ref()
            .is_some_and(|d| d.get() > Duration::from_secs(60))
        {
            return Err(self.err_at(&["fleet", "stagger"], "stagger is at most 60s"));
        }
        if let Some(i) = self.timeline.iter().position(|e| e.nginx.is_some()) {
            return Err(self.err_at(
                &["timeline", &i.to_string(), "nginx"],
                "a fleet's timeline cannot reload nginx (which instance?): leave `nginx` out of a [fleet] scenario's timeline",
            ));
        }
        Ok(())
    }

    /// Time between two fleet instances' starts ([`FleetSpec::stagger`]).
    pub fn fleet_stagger(&self) -> Option<Duration> {
        let f = self.fleet.as_ref()?;
        Some(match &f.stagger {
            Some(d) => d.get(),
            None => self.requery_period() / f.instances,
        })
    }

    /// Each server line's parameters read as nginx reads them (`fail_timeout` is an nginx
    /// time), with the `[nginx]` defaults applied: the value the renderer and the model use.
    fn check_server_params(&self) -> anyhow::Result<()> {
        let net = crate::net::Net::assign(self, 255, 255)?;
        for (i, s) in self.nginx.servers.iter().enumerate() {
            if let Err(e) = net.upstream_server(self, s) {
                let i = i.to_string();
                let path: &[&str] = if s.fail_timeout.is_some() {
                    &["nginx", "server", &i, "fail_timeout"]
                } else {
                    &["nginx", "fail_timeout"]
                };
                return Err(self.err_at(path, e));
            }
        }
        Ok(())
    }

    /// `route = "direct" | "variable"`: one server, a DNS name, none of the upstream block's
    /// settings (the upstream is nginx's implicit one).
    fn check_route(&self) -> anyhow::Result<()> {
        let n = &self.nginx;
        if !n.resolver
            && n.route == Route::Upstream
            && (n
                .servers
                .iter()
                .any(|s| s.resolve && !s.host.starts_with('@'))
                || n.zone_filler.is_some())
        {
            return Err(self.err_at(
                &["nginx", "resolver"],
                "[nginx] resolver = false with a `resolve` server: nginx refuses it (no resolver defined to resolve names at run time); set resolve = false on the server lines or keep the resolver",
            ));
        }
        if n.route == Route::Upstream {
            return Ok(());
        }
        let route = if n.route == Route::Direct {
            "direct"
        } else {
            "variable"
        };
        let bad = |path: &[&str], why: &str| {
            self.err_at(path, format!("[nginx] route = \"{route}\": {why}"))
        };
        if n.inline.is_some() {
            return Err(bad(
                &["nginx", "inline"],
                "an inline config writes its own proxy_pass",
            ));
        }
        if n.servers.len() != 1 || n.servers[0].host.starts_with('@') {
            return Err(bad(
                &["nginx", "server"],
                "needs exactly one [[nginx.server]] whose host is a [dns.names] entry (the name proxy_pass uses)",
            ));
        }
        let s = &n.servers[0];
        if s.backup || s.max_fails.is_some() || s.fail_timeout.is_some() {
            return Err(bad(
                &["nginx", "server", "0"],
                "backup, max_fails and fail_timeout belong to an upstream block; proxy_pass to a name uses nginx's defaults",
            ));
        }
        if n.max_fails.is_some() || n.fail_timeout.is_some() || n.zone_filler.is_some() {
            return Err(bad(
                &["nginx"],
                "max_fails, fail_timeout and zone_filler belong to an upstream block",
            ));
        }
        Ok(())
    }

    /// True when the proxy resolves a name at start (and at each reload) with the system
    /// resolver: a server line without `resolve`, `route = "direct"`, or HAProxy's
    /// `init_addr` with `libc`. The lab then points the proxy's `/etc/resolv.conf` at its
    /// authority.
    pub fn resolves_at_start(&self) -> bool {
        let n = &self.nginx;
        if n.inline.is_some() {
            return n.resolves_at_start;
        }
        match n.route {
            Route::Direct => true,
            Route::Variable => false,
            Route::Upstream => {
                n.servers
                    .iter()
                    .any(|s| !s.resolve && !s.host.starts_with('@'))
                    || (self.haproxy.init_addr.as_ref()).is_some_and(|a| a.uses_libc())
            }
        }
    }

    /// Backend and proxy names, `[host]`, the slow-dependency settings; returns the names.
    fn check_hosts(&self) -> anyhow::Result<std::collections::BTreeSet<&str>> {
        let mut names = std::collections::BTreeSet::new();
        for (i, b) in self.backends.iter().enumerate() {
            if !names.insert(b.name.as_str()) {
                return Err(self.err_at(
                    &["backend", &i.to_string(), "name"],
                    format!("backend/proxy name `{}` is used twice", b.name),
                ));
            }
        }
        for (i, p) in self.proxies.iter().enumerate() {
            let at = |k: &str| self.at(&["proxy", &i.to_string(), k]);
            if !names.insert(p.name.as_str()) {
                anyhow::bail!(
                    "{}: backend/proxy name `{}` is used twice",
                    at("name"),
                    p.name
                );
            }
            if !self.backends.iter().any(|b| b.name == p.upstream) {
                anyhow::bail!(
                    "{}: proxy `{}`: upstream `{}` is not a [[backend]] name",
                    at("upstream"),
                    p.name,
                    p.upstream
                );
            }
        }
        if !self.host.sysctl.is_empty() && !self.host.netns {
            return Err(self.err_at(
                &["host", "sysctl"],
                "[host] sysctl needs `netns = true`: settings are only changed inside the run's own network namespace, never on the host",
            ));
        }
        for k in self.host.sysctl.keys() {
            check_sysctl_key(k)
                .map_err(|e| self.err_at(&["host", "sysctl", k], format!("[host] {e}")))?;
        }
        for (i, b) in self.backends.iter().enumerate() {
            let at = |k: &str| self.at(&["backend", &i.to_string(), k]);
            if b.tls.is_some() && self.nginx.inline.is_none() {
                anyhow::bail!(
                    "{}: backend `{}`: a TLS backend needs an `[nginx] inline` body that proxies to it with `https://` (and `proxy_ssl_trusted_certificate {{tls_ca}};` to verify it): the template speaks plain HTTP",
                    at("tls"),
                    b.name
                );
            }
            for n in b.tls.iter().flat_map(|t| &t.names) {
                if !is_dns_name(n) {
                    anyhow::bail!(
                        "{}: backend `{}`: tls name `{n}` is not a DNS name (letters, digits, `-`, `_` and dots; `*.` first for a wildcard)",
                        at("tls"),
                        b.name
                    );
                }
            }
            if let Some(db) = &b.db {
                if !names.contains(db.as_str()) || db == &b.name {
                    anyhow::bail!(
                        "{}: backend `{}`: db `{db}` is not another backend or proxy name (point it at an `echo_db = true` backend or a proxy in front of one)",
                        at("db"),
                        b.name
                    );
                }
                if b.pool == Some(0) || b.round_trips == Some(0) {
                    anyhow::bail!(
                        "{}: backend `{}`: pool and round_trips must be at least 1",
                        at(if b.pool == Some(0) {
                            "pool"
                        } else {
                            "round_trips"
                        }),
                        b.name
                    );
                }
            } else if b.round_trips.is_some() || b.pool.is_some() || b.acquire_timeout.is_some() {
                anyhow::bail!(
                    "{}: backend `{}`: round_trips/pool/acquire_timeout need `db = \"NAME\"`",
                    at("name"),
                    b.name
                );
            }
        }
        // The run's addresses (a /24 of its own): a host collision is a mistake of the file.
        crate::net::Net::assign(self, 255, 255).map_err(|e| self.err_at(&["backend"], e))?;
        Ok(names)
    }

    /// Every spec written in the lab's vocabulary parses: DNS modes (their `@name` references
    /// resolved in a placeholder run), backend and proxy faults, backend latency.
    fn check_specs(&self) -> anyhow::Result<()> {
        let net = crate::net::Net::assign(self, 255, 255)?;
        let specs = self.specs()?;
        for (name, setting) in &specs.dns {
            net.resolve(setting).map_err(|e| {
                anyhow::anyhow!(
                    "{}: [dns.names] {name}: {e}",
                    self.at(&["dns", "names", name])
                )
            })?;
        }
        Ok(())
    }

    /// The backends' and proxies' specs and the load's rate, parsed (each mistake at its
    /// `file:line`). [`Scenario::validate`] made them once already, so for a loaded scenario
    /// this cannot fail: the engines start from it rather than from the strings.
    pub fn specs(&self) -> anyhow::Result<Specs> {
        let mut dns = BTreeMap::new();
        for (name, setting) in &self.dns.names {
            if setting.value.mode.is_partial() {
                anyhow::bail!(
                    "{}: [dns.names] {name}: a starting mode must be complete, e.g. `delay:200ms+static:@b1`",
                    self.at(&["dns", "names", name])
                );
            }
            dns.insert(name.clone(), setting.value.clone());
        }
        let backends = (self.backends.iter())
            .map(|b| {
                let (latency, faults) = (b.latency.clone(), b.faults.clone());
                (b.name.clone(), BackendSpecs { latency, faults })
            })
            .collect();
        let proxies = (self.proxies.iter())
            .map(|p| (p.name.clone(), p.faults.clone()))
            .collect();
        let rate = self.load.rate.value.clone();
        Ok(Specs {
            dns,
            backends,
            proxies,
            rate,
        })
    }

    /// `[[probe]]`: targets, intervals, paths.
    fn check_probes(&self, names: &std::collections::BTreeSet<&str>) -> anyhow::Result<()> {
        for (i, p) in self.probes.iter().enumerate() {
            let n = i + 1;
            let at = |k: &str| self.at(&["probe", &i.to_string(), k]);
            if !names.contains(p.target.as_str()) {
                anyhow::bail!(
                    "{}: probe {n}: target `{}` is not a backend or proxy name",
                    at("target"),
                    p.target
                );
            }
            for (f, v) in [("interval", &p.interval), ("timeout", &p.timeout)] {
                if v.get().is_zero() {
                    anyhow::bail!("{}: probe {n}: {f} must be above 0 (e.g. `1s`)", at(f));
                }
            }
            if !p.path.starts_with('/') {
                anyhow::bail!(
                    "{}: probe {n}: path `{}` must start with `/`",
                    at("path"),
                    p.path
                );
            }
        }
        Ok(())
    }

    /// `[[timeline]]`: one action per event, its references, its specs and its alignment.
    fn check_timeline(&self, names: &std::collections::BTreeSet<&str>) -> anyhow::Result<()> {
        let net = crate::net::Net::assign(self, 255, 255)?;
        for (i, ev) in self.timeline.iter().enumerate() {
            let n = i + 1;
            let idx = i.to_string();
            let at = |k: &str| self.at(&["timeline", &idx, k]);
            let bad = |k: &str, m: String| anyhow::anyhow!("{}: timeline event {n}: {m}", at(k));
            if ev.at.is_some() && ev.after.is_some() {
                return Err(bad("after", "give `at` or `after`, not both".into()));
            }
            let actions = [
                ev.dns.is_some(),
                ev.fault.is_some(),
                ev.clear.is_some(),
                ev.nginx.is_some(),
            ];
            if actions.iter().filter(|a| **a).count() != 1 {
                return Err(bad(
                    "",
                    "exactly one of `dns`, `fault`, `clear`, `nginx` is needed".into(),
                ));
            }
            if ev.nginx.is_some() && (ev.for_.is_some() || ev.align.is_some()) {
                return Err(bad(
                    "nginx",
                    "`nginx = \"reload\"` and `\"test\"` happen once: they take no `for` or `align`".into(),
                ));
            }
            if let Some(d) = &ev.dns {
                if !self.dns.names.contains_key(d) {
                    return Err(bad("dns", format!("dns name `{d}` is not in [dns.names]")));
                }
                if self.dns.gslb.contains_key(d) {
                    return Err(bad(
                        "dns",
                        format!(
                            "`{d}` is answered by its [dns.gslb] health checks: fault its pool's backends instead of setting its mode"
                        ),
                    ));
                }
                let Some(mode) = &ev.mode else {
                    return Err(bad("dns", "`dns` needs a `mode`".into()));
                };
                let setting = &mode.value;
                if setting.ttl.is_some() || !setting.aaaa.is_empty() {
                    return Err(bad(
                        "mode",
                        format!(
                            "`{mode}`: a timeline event changes the mode only; a name's `ttl` and `aaaa` are set in [dns.names]"
                        ),
                    ));
                }
                net.resolve(setting)
                    .map_err(|e| bad("mode", e.to_string()))?;
            }
            if let Some(t) = ev.fault.as_ref().or(ev.clear.as_ref()) {
                if !names.contains(t.as_str()) {
                    let k = if ev.fault.is_some() { "fault" } else { "clear" };
                    return Err(bad(k, format!("`{t}` is not a backend or proxy")));
                }
                if ev.fault.is_some() {
                    let Some(spec) = &ev.spec else {
                        return Err(bad("fault", "`fault` needs a `spec`".into()));
                    };
                    // The plan reads it again with the same function (timeline::Action::of):
                    // here only its line is known.
                    let proxy = self.proxies.iter().any(|p| &p.name == t);
                    Fault::parse(spec, proxy).map_err(|e| bad("spec", e))?;
                }
            }
            if let Some(a) = ev.align {
                if a == Align::Now {
                    return Err(bad(
                        "align",
                        "align = `now` is what an event without `align` does; use `next-requery` or `between-requeries`".into(),
                    ));
                }
                if ev.dns.is_none() {
                    return Err(bad("align", "`align` needs a `dns` name".into()));
                }
                if a == Align::NextQuery {
                    self.check_window_fits_period(n, ev.for_.as_ref())
                        .map_err(|e| anyhow::anyhow!("{}: {e}", at("for")))?;
                }
            }
        }
        Ok(())
    }

    /// A load that sends no request measures nothing: `rate = "0"`, `duration = "0s"`, or a
    /// `--scale` that shrinks them to nothing.
    fn check_load(&self) -> Result<(), String> {
        if self.planned_requests()? == Some(0) {
            return Err(format!(
                "[load] rate = \"{}\" for {} sends no request: raise the rate or the duration",
                self.load.rate, self.load.duration
            ));
        }
        Ok(())
    }

    /// nginx's re-query period for this scenario: `valid` + 1 s (DOMAIN.md §3).
    pub fn requery_period(&self) -> Duration {
        self.nginx.valid.get() + Duration::from_secs(1)
    }

    /// How many requests the load plans (None for `rate = "max"`, which has no schedule).
    pub fn planned_requests(&self) -> Result<Option<u64>, String> {
        let d = self.load.duration.get();
        let schedule = self.load.rate.value.schedule(Some(d), None);
        Ok(schedule.and_then(|s| s.planned()))
    }

    /// Every timeline event must be played while the load runs: one that starts or ends after
    /// it would be dropped or cut silently. An event armed at the next re-query may take effect
    /// up to one period later.
    fn check_events_within_load(&self) -> Result<(), String> {
        let load = self.load.duration.get();
        let period = self.requery_period();
        let mut t = Duration::ZERO;
        for (i, ev) in self.timeline.iter().enumerate() {
            let p = |v: &Option<Dur>| v.as_ref().map(Dur::get).unwrap_or_default();
            t = match &ev.at {
                Some(at) => at.get(),
                None => t + p(&ev.after),
            };
            let aligned = if ev.align.is_some() {
                period
            } else {
                Duration::ZERO
            };
            let end = t + p(&ev.for_) + aligned;
            if end > load {
                return Err(format!(
                    "timeline event {} ends at {} (start {}{}), after the load ends at {}: make [load] duration at least {}",
                    i + 1,
                    resolvelab_core::dur::format(end),
                    resolvelab_core::dur::format(t),
                    if ev.align.is_some() {
                        ", plus one re-query period for the alignment"
                    } else {
                        ""
                    },
                    self.load.duration,
                    resolvelab_core::dur::format(end)
                ));
            }
        }
        Ok(())
    }

    /// A window armed at nginx's next re-query must end before the one after it: a window as long
    /// as the period (valid + 1 s) reverts at the moment nginx asks again, and whether that query
    /// sees the injection is a coin toss (the demo failed one run in three that way).
    fn check_window_fits_period(&self, n: usize, for_: Option<&Dur>) -> Result<(), String> {
        let Some(f) = for_ else {
            return Ok(());
        };
        let period = self.requery_period();
        if f.get() >= period {
            return Err(format!(
                "timeline event {n}: for = \"{f}\" with align = \"next-requery\" must be shorter than \
                 nginx's re-query period (valid {} + 1 s = {}): the revert would race the next \
                 re-query; use at most half the period",
                self.nginx.valid,
                resolvelab_core::dur::format(period)
            ));
        }
        Ok(())
    }

    /// The scenario with variant `name` merged in (deep merge of tables, arrays replaced).
    pub fn variant(&self, name: &str) -> anyhow::Result<Scenario> {
        let (index, patch) = self
            .variants
            .iter()
            .enumerate()
            .find(|(_, v)| v.get("name").and_then(|n| n.as_str()) == Some(name))
            .ok_or_else(|| {
                anyhow::anyhow!(
                    "scenario `{}` has no variant `{name}` (it has: {})",
                    self.name,
                    self.variant_names().join(", ")
                )
            })?;
        let mut base = toml::Table::try_from(self)?;
        base.remove("variant");
        let mut patch = patch.clone();
        patch.remove("name");
        // A variant's expectations replace the base's, per engine too.
        if patch.contains_key("expect") {
            base.remove("expect");
        }
        let whole = {
            let mut t = base.clone();
            merge(&mut t, patch.clone());
            t
        };
        let mut v: Scenario = toml::Value::Table(whole).try_into().map_err(|e| {
            // Point at the variant's own key that does not read, else at the variant.
            let idx = index.to_string();
            let key = culprit(&base, &patch, &mut Vec::new()).unwrap_or_default();
            let mut path = vec!["variant", idx.as_str()];
            path.extend(key.iter().map(String::as_str));
            self.err_at(&path, format!("variant `{name}`: {}", e.message().trim()))
        })?;
        v.source = self.source.clone();
        v.variant_index = Some(index);
        v.variant_of = Some(name.to_string());
        v.validate()
            .map_err(|e| anyhow::anyhow!("{e} (variant `{name}`)"))?;
        Ok(v)
    }

    /// The names of the variants.
    pub fn variant_names(&self) -> Vec<String> {
        self.variants
            .iter()
            .filter_map(|v| v.get("name").and_then(|n| n.as_str()).map(String::from))
            .collect()
    }

    /// Shorten durations and rates by `f` for quick runs; `valid` and `fail_timeout` stay real
    /// (they are what the scenarios measure).
    pub fn scaled(&self, f: f64) -> anyhow::Result<Scenario> {
        if (f - 1.0).abs() < f64::EPSILON || !self.scalable {
            return Ok(self.clone());
        }
        if !(f > 0.0 && f <= 1.0) {
            anyhow::bail!("--scale {f}: use a factor in (0, 1]");
        }
        let mut s = self.clone();
        s.load.rate = Spelled::new(s.load.rate.value.scaled(f));
        let mut end = Duration::ZERO;
        let mut t = Duration::ZERO;
        for ev in &mut s.timeline {
            if let Some(a) = &mut ev.at {
                *a = a.scaled(f);
                t = a.get();
            } else if let Some(a) = &mut ev.after {
                *a = a.scaled(f);
                t += a.get();
            }
            end = end.max(t + ev.for_.as_ref().map(Dur::get).unwrap_or_default());
        }
        // The load must still cover the last injection and what follows it: two re-query
        // periods, or the wipeout tail (fail_timeout) when that is longer.
        let fail = (s.nginx.fail_timeout.as_ref()).map_or(Duration::from_secs(10), NginxTime::get);
        let tail = (s.requery_period() * 2).max(fail + Duration::from_secs(2));
        let scaled = s.load.duration.scaled(f).get();
        let need = if s.timeline.is_empty() {
            scaled
        } else {
            scaled.max(end + tail)
        };
        s.load.duration = Dur::new(need);
        s.check_load()
            .map_err(|e| anyhow::anyhow!("--scale {f}: {e}"))?;
        Ok(s)
    }
}

/// The path of the first value of `patch` that makes `base` unreadable as a scenario on its
/// own (`base` alone reads).
fn culprit(base: &toml::Table, patch: &toml::Table, at: &mut Vec<String>) -> Option<Vec<String>> {
    for (k, v) in patch {
        at.push(k.clone());
        let found = match v {
            toml::Value::Table(t) => culprit(base, t, at),
            _ => {
                let mut one = toml::Table::new();
                let leaf = at.iter().rev().fold(v.clone(), |inner, key| {
                    let mut t = toml::Table::new();
                    t.insert(key.clone(), inner);
                    toml::Value::Table(t)
                });
                if let toml::Value::Table(t) = leaf {
                    one = t;
                }
                let mut t = base.clone();
                merge(&mut t, one);
                toml::Value::Table(t)
                    .try_into::<Scenario>()
                    .is_err()
                    .then(|| at.clone())
            }
        };
        at.pop();
        if found.is_some() {
            return found;
        }
    }
    None
}

fn merge(base: &mut toml::Table, patch: toml::Table) {
    for (k, v) in patch {
        match (base.get_mut(&k), v) {
            (Some(toml::Value::Table(b)), toml::Value::Table(p)) => merge(b, p),
            (_, v) => {
                base.insert(k, v);
            }
        }
    }
}

/// A name a certificate can hold: dot-separated labels of letters, digits, `-` and `_` (an
/// nginx upstream's name may have one), a `*.` wildcard first.
fn is_dns_name(n: &str) -> bool {
    let n = n.strip_prefix("*.").unwrap_or(n);
    !n.is_empty()
        && n.len() <= 253
        && n.split('.').all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && l.bytes()
                    .all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_')
                && !l.starts_with('-')
                && !l.ends_with('-')
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use resolvelab_core::spec::engine::ProxyKind;

    const MIN: &str = r#"
version = 1
name = "t"
description = "d"
question = "q"
[nginx]
valid = "1s"
[[nginx.server]]
host = "app.test.local"
[dns.names]
"app.test.local" = "alternate:@b1,@b2"
[[backend]]
name = "b1"
[[backend]]
name = "b2"
[load]
rate = "300"
duration = "60s"
[[timeline]]
at = "10s"
dns = "app.test.local"
mode = "nxdomain"
for = "1s"
align = "next-requery"
[expect]
checks = ["nlu > 0"]
[[variant]]
name = "mf0"
nginx = { max_fails = 0 }
expect = { checks = ["nlu = 0"] }
"#;

    #[test]
    fn a_resolvers_own_order_is_a_fleets_and_names_its_members() {
        let text = include_str!("../../../scenarios/gslb-failover.toml");
        let s = Scenario::from_toml(text, "g.toml").unwrap();
        let g = &s.variant("per-site").unwrap().dns.gslb["app.test.local"];
        assert_eq!(g.order_for("nginx-3"), ["b2", "b1"]);
        assert_eq!(g.order_for("nginx-1"), ["b1", "b2"]);
        // b2 down: nginx-3's resolver still gets a member, in its order.
        assert_eq!(
            g.answer_in(&g.order_for("nginx-3"), &[true, false]),
            Some(vec!["b1"])
        );
        assert_eq!(
            g.answer_in(&g.order_for("nginx-3"), &[true, true]),
            Some(vec!["b2"])
        );
        let with = |prefer: &str| {
            text.replace(
                "down_after = 3\nup_after = 3\n",
                &format!("down_after = 3\nup_after = 3\nprefer = {{ {prefer} }}\n"),
            )
        };
        let fails = |t: String, says: &str| {
            let e = Scenario::from_toml(&t, "g.toml").unwrap_err().to_string();
            assert!(e.starts_with("g.toml:") && e.contains(says), "{e}");
        };
        fails(
            with("\"nginx-9\" = [\"b2\"]"),
            "not an instance of this fleet (nginx-1 to nginx-4)",
        );
        fails(with("\"nginx-2\" = [\"b3\"]"), "`b3` is not in the pool");
        fails(
            with("\"nginx-2\" = [\"b2\", \"b2\"]"),
            "`b2` is given twice",
        );
        fails(with("\"nginx-2\" = []"), "at least one member");
        let alone = with("\"nginx-2\" = [\"b2\"]")
            .replace("[fleet]\ninstances = 4\nstagger = \"1.5s\"\n", "");
        fails(alone, "add [fleet]");
    }

    #[test]
    fn a_gslb_is_checked_where_it_is_written() {
        // MIN's name starts `alternate:@b1,@b2`; a GSLB name starts as its answer.
        let base = MIN
            .replace("\"alternate:@b1,@b2\"", "\"static:@b1\"")
            .replace("[[timeline]]\nat = \"10s\"\ndns = \"app.test.local\"\nmode = \"nxdomain\"\nfor = \"1s\"\nalign = \"next-requery\"", "[[timeline]]\nat = \"10s\"\nfault = \"b1\"\nspec = \"restart\"\nfor = \"5s\"");
        let gslb = |t: &str| {
            base.replacen(
                "[[backend]]",
                &format!("[dns.gslb.\"app.test.local\"]\n{t}\n[[backend]]"),
                1,
            )
        };
        let s = Scenario::from_toml(&gslb("pool = [\"b1\", \"b2\"]"), "t.toml").unwrap();
        let g = &s.dns.gslb["app.test.local"];
        assert_eq!(
            (g.down_after, g.up_after, g.path.as_str()),
            (3, 3, "/health")
        );
        assert_eq!(g.interval.to_string(), "1s");
        assert_eq!(g.starting_mode(), "static:@b1");
        let fails = |t: &str, line: u32, says: &str| {
            let e = Scenario::from_toml(&gslb(t), "t.toml")
                .unwrap_err()
                .to_string();
            assert!(
                e.starts_with(&format!("t.toml:{line}:")) && e.contains(says),
                "{t}: {e}"
            );
        };
        fails(
            "pool = [\"b1\", \"b9\"]",
            13,
            "member `b9` is not a backend",
        );
        fails("pool = []", 13, "at least one member");
        fails(
            "pool = [\"b1\"]\ntimeout = \"2s\"",
            14,
            "longer than the interval",
        );
        fails("pool = [\"b1\"]\ndown_after = 0", 14, "1 to 10 probes");
        fails(
            "pool = [\"b1\"]\npath = \"health\"",
            14,
            "must start with `/`",
        );
        // `all` answers both: the starting mode says so.
        fails(
            "pool = [\"b1\", \"b2\"]\nanswer = \"all\"",
            11,
            "starts as the GSLB answers with every member up: \"static:@b1,@b2\"",
        );
        let s = Scenario::from_toml(&gslb("pool = [\"b2\", \"b1\"]"), "t.toml");
        assert!(s.unwrap_err().to_string().contains("\"static:@b2\""));
        // A timeline step cannot set a GSLB name's mode.
        let text = gslb("pool = [\"b1\"]").replace(
            "fault = \"b1\"\nspec = \"restart\"",
            "dns = \"app.test.local\"\nmode = \"nxdomain\"",
        );
        let e = Scenario::from_toml(&text, "t.toml")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("answered by its [dns.gslb] health checks"),
            "{e}"
        );
        // A GSLB for a name that is not served.
        let text = gslb("pool = [\"b1\"]").replace(
            "[dns.gslb.\"app.test.local\"]",
            "[dns.gslb.\"other.test.local\"]",
        );
        let e = Scenario::from_toml(&text, "t.toml")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("is not a [dns.names] entry: add `\"other.test.local\" = \"static:@b1\"`"),
            "{e}"
        );
    }

    #[test]
    fn a_fleet_is_checked_where_it_is_written() {
        let fleet = |t: &str| MIN.replace("[load]", &format!("[fleet]\n{t}\n[load]"));
        let s = Scenario::from_toml(&fleet("instances = 4"), "t.toml").unwrap();
        assert_eq!(s.fleet.as_ref().map(|f| f.instances), Some(4));
        // valid = 1s: a 2 s period over 4 instances.
        assert_eq!(s.fleet_stagger(), Some(Duration::from_millis(500)));
        let s = Scenario::from_toml(&fleet("instances = 2\nstagger = \"3s\""), "t.toml").unwrap();
        assert_eq!(s.fleet_stagger(), Some(Duration::from_secs(3)));
        assert_eq!(
            Scenario::from_toml(MIN, "t.toml").unwrap().fleet_stagger(),
            None
        );
        for (t, says) in [
            (
                "instances = 1",
                "t.toml:17: instances = 1: a fleet has 2 to 16",
            ),
            ("instances = 17", "t.toml:17: instances = 17"),
            (
                "instances = 2\nstagger = \"2m\"",
                "t.toml:18: stagger is at most 60s",
            ),
            ("instances = 2\nweight = 3", "unknown field `weight`"),
        ] {
            let e = format!(
                "{:#}",
                Scenario::from_toml(&fleet(t), "t.toml").unwrap_err()
            );
            assert!(e.contains(says), "{t}: {e}");
        }
        let reload = fleet("instances = 2").replace(
            "[expect]",
            "[[timeline]]\nafter = \"1s\"\nnginx = \"reload\"\n[expect]",
        );
        let e = format!("{:#}", Scenario::from_toml(&reload, "t.toml").unwrap_err());
        assert!(e.contains("a fleet's timeline cannot reload nginx"), "{e}");
    }

    #[test]
    fn parses_validates_and_merges_variants() {
        let s = Scenario::from_toml(MIN, "t.toml").unwrap();
        assert_eq!(s.nginx.servers.len(), 1);
        assert_eq!(s.variant_names(), ["mf0"]);
        let v = s.variant("mf0").unwrap();
        assert_eq!(v.nginx.max_fails, Some(0));
        assert_eq!(
            v.nginx.valid.to_string(),
            "1s",
            "untouched fields survive the merge"
        );
        assert_eq!(v.expect.checks, ["nlu = 0"]);
        assert_eq!(v.variant_of.as_deref(), Some("mf0"));
        assert!(s.variant("nope").unwrap_err().to_string().contains("mf0"));
    }

    #[test]
    fn expectations_name_the_engines_checks_and_the_injections_meant_to_miss() {
        let text = MIN
            .replace(
                "[[variant]]",
                "[expect.engines]\nhaproxy = [\"nlu = 0\"]\n[[variant]]",
            )
            .replace(
                "[expect]",
                "[[timeline]]\nafter = \"5s\"\ndns = \"app.test.local\"\nmode = \"nxdomain\"\nfor = \"1s\"\nalign = \"between-requeries\"\n\
                 [[timeline]]\nafter = \"1s\"\nfault = \"b1\"\nspec = \"rst\"\nfor = \"1s\"\nmay_miss = true\n[expect]",
            );
        let s = Scenario::from_toml(&text, "t.toml").unwrap();
        let e = s.expectations(EngineId::SimProxy(ProxyKind::Haproxy));
        assert_eq!(
            (e.scenario.as_str(), e.engine.as_str()),
            ("t", "sim-haproxy")
        );
        assert_eq!(e.checks, ["nlu = 0"]);
        // The first NXDOMAIN window is aligned on a re-query: it is meant to hit.
        assert!(e.is_meant_to_miss("app.test.local", Some("nxdomain")));
        assert_eq!(e.meant_to_miss.len(), 1);
        assert!(e.may_miss("b1") && !e.may_miss("b2"));
        let v = s.variant("mf0").unwrap().expectations(EngineId::Nginx);
        assert_eq!(
            (v.variant.as_deref(), v.checks.as_slice()),
            (Some("mf0"), &["nlu = 0".to_string()][..])
        );
    }

    #[test]
    fn engines_and_their_own_expectations() {
        let text = MIN.replace(
            "[[variant]]",
            "[expect.engines]\nhaproxy = [\"nlu = 0\"]\n[[variant]]",
        );
        let s = Scenario::from_toml(&text, "t.toml").unwrap();
        assert_eq!(
            s.expect.for_engine(EngineId::Proxy(ProxyKind::Haproxy)),
            ["nlu = 0"]
        );
        assert_eq!(
            s.expect.for_engine(EngineId::SimProxy(ProxyKind::Haproxy)),
            ["nlu = 0"],
            "a model is judged as its proxy"
        );
        assert_eq!(
            s.expect.for_engine(EngineId::Proxy(ProxyKind::Envoy)),
            ["nlu > 0"]
        );
        // A variant's expectations replace the base's, its engines' too.
        let v = s.variant("mf0").unwrap();
        assert_eq!(
            v.expect.for_engine(EngineId::Proxy(ProxyKind::Haproxy)),
            ["nlu = 0"]
        );
        assert!(v.expect.engines.is_empty());
        let bad = text.replace("haproxy = [", "lighttpd = [");
        let e = Scenario::from_toml(&bad, "t.toml").unwrap_err().to_string();
        assert!(
            e.starts_with("t.toml:") && e.contains("no engine `lighttpd`"),
            "{e}"
        );
        let bad = format!("engines = [\"nginx\", \"squid\"]\n{MIN}");
        let e = Scenario::from_toml(&bad, "t.toml").unwrap_err().to_string();
        assert!(e.starts_with("t.toml:1:") && e.contains("squid"), "{e}");
    }

    #[test]
    fn errors_name_the_file_and_line() {
        let bad = MIN.replace("valid = \"1s\"", "valid = \"1s\"\nbogus = 1");
        let e = Scenario::from_toml(&bad, "x.toml").unwrap_err().to_string();
        assert!(e.starts_with("x.toml:8:"), "{e}");
        assert!(e.contains("bogus"), "{e}");
        let bad = MIN.replace("mode = \"nxdomain\"", "mode = \"nxdomain\"\nfault = \"b1\"");
        let e = Scenario::from_toml(&bad, "x.toml").unwrap_err().to_string();
        assert!(e.contains("exactly one of"), "{e}");
        let bad = MIN.replace("host = \"app.test.local\"", "host = \"other.local\"");
        assert!(
            Scenario::from_toml(&bad, "x")
                .unwrap_err()
                .to_string()
                .contains("[dns.names]")
        );
    }

    /// `MIN` with `from` replaced by `to` once fails to load at `t.toml:LINE`, saying `says`.
    fn fails_at(from: &str, to: &str, line: u32, says: &str) {
        let text = MIN.replacen(from, to, 1);
        assert_ne!(text, MIN, "{from}");
        let e = Scenario::from_toml(&text, "t.toml")
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with(&format!("t.toml:{line}:")) && e.contains(says),
            "{to}: {e}"
        );
    }

    #[test]
    fn every_spec_is_checked_at_load_with_its_line() {
        let b1 = "name = \"b1\"";
        let mf0 = "nginx = { max_fails = 0 }";
        for (from, to, line, says) in [
            (
                "mode = \"nxdomain\"",
                "mode = \"nxdomian\"",
                22,
                "unknown mode",
            ),
            ("alternate:@b1,@b2", "alternate:@b1,@b3", 11, "@b3"),
            ("rate = \"300\"", "rate = \"0..300\"", 17, "ramp"),
            (
                b1,
                "name = \"b1\"\nfaults = [\"rst\", \"reclam\"]",
                14,
                "reclam",
            ),
            (
                b1,
                "name = \"b1\"\nlatency = \"lognormal:p50=2ms\"",
                14,
                "p99",
            ),
            (
                "align = \"next-requery\"",
                "align = \"next\"",
                24,
                "next-requery",
            ),
            // A variant's mistake is found when the scenario loads, at the variant's line.
            (
                mf0,
                "timeline = [{ at = \"10s\", dns = \"app.test.local\", mode = \"bogus\" }]",
                29,
                "variant `mf0`",
            ),
            (mf0, "nginx = { max_fail = 0 }", 29, "max_fail"),
            // A server line's fail_timeout is an nginx time, at its own line or the [nginx] default's.
            (mf0, "nginx = { fail_timeout = \"5 s\" }", 29, "nginx time"),
        ] {
            fails_at(from, to, line, says);
        }
    }

    #[test]
    fn dns_settings_are_read_once_and_resolved_per_run() {
        let sc = Scenario::from_toml(MIN, "t.toml").unwrap();
        let specs = sc.specs().unwrap();
        let alt = &specs.dns["app.test.local"];
        assert_eq!(
            alt.mode,
            resolvelab_core::spec::dns::DnsMode::Alternate(vec![
                HostRef::Named("b1".into()),
                HostRef::Named("b2".into())
            ])
        );
        // Each run resolves the same typed value against its own /24.
        for (a, b) in [(10, 2), (200, 7)] {
            let net = crate::net::Net::assign(&sc, a, b).unwrap();
            assert_eq!(
                net.resolve(alt).unwrap().to_string(),
                format!("alternate:127.{a}.{b}.20,127.{a}.{b}.30")
            );
        }
        // A timeline mode's reference is checked at its line, before anything runs.
        let nx = "mode = \"nxdomain\"";
        fails_at(nx, "mode = \"static:@b9\"", 22, "`@b9` names no");
        fails_at(nx, "mode = \"static:@b1;aaaa=::1\"", 22, "[dns.names]");
        fails_at("alternate:@b1,@b2", "delay:1s", 11, "complete");
        fails_at("alternate:@b1,@b2", "multi:25@@", 11, "`@`");
    }

    #[test]
    fn the_standing_specs_are_parsed_once_with_their_text() {
        let text = MIN.replacen(
            "name = \"b1\"",
            "name = \"b1\"\nlatency = \"5ms\"\nfaults = [\"reclaim:toxicity=0.3\", \"rst\"]",
            1,
        );
        let sc = Scenario::from_toml(&text, "t.toml").unwrap();
        let specs = sc.specs().unwrap();
        let b1 = &specs.backends["b1"];
        assert_eq!(b1.latency.as_ref().map(|l| l.text.as_str()), Some("5ms"));
        let faults: Vec<_> = b1
            .faults
            .iter()
            .map(|f| (f.text.as_str(), f.value.name()))
            .collect();
        assert_eq!(
            faults,
            [
                ("reclaim:toxicity=0.3", "reclaim".to_string()),
                ("rst", "rst".to_string())
            ]
        );
        assert_eq!(b1.faults[0].value.common.toxicity, 0.3);
        assert!(specs.backends["b2"].faults.is_empty() && specs.backends["b2"].latency.is_none());
        assert_eq!(specs.rate, RatePlan::parse("300").unwrap());
    }

    #[test]
    fn slow_dependency_and_probe_references_are_checked() {
        let db = MIN.replace(
            "[[backend]]\nname = \"b2\"",
            "[[backend]]\nname = \"b2\"\ndb = \"DB\"\npool = 4\n[[backend]]\nname = \"db\"\necho_db = true\n[[probe]]\ntarget = \"PT\"\n",
        );
        let ok = db.replace("DB", "db").replace("PT", "b2");
        let s = Scenario::from_toml(&ok, "t").unwrap();
        assert_eq!(s.probes[0].path, "/ready");
        assert_eq!(s.probes[0].interval.to_string(), "1s");
        let err = |text: &str| Scenario::from_toml(text, "t").unwrap_err().to_string();
        assert!(err(&db.replace("DB", "nope").replace("PT", "b2")).contains("db `nope`"));
        assert!(err(&db.replace("DB", "b2").replace("PT", "b2")).contains("another backend"));
        assert!(err(&db.replace("DB", "db").replace("PT", "x")).contains("target `x`"));
        assert!(err(&ok.replace("pool = 4", "pool = 0")).contains("at least 1"));
        let no_db = ok.replace("db = \"db\"\n", "");
        assert!(err(&no_db).contains("need `db"));
        let zero = ok.replace("target = \"b2\"", "target = \"b2\"\ntimeout = \"0s\"");
        assert!(err(&zero).contains("timeout must be above 0"));
    }

    #[test]
    fn a_tls_backend_names_dns_names_only() {
        let tls = |names: &str| {
            MIN.replace(
                "[[backend]]\nname = \"b2\"",
                &format!("[[backend]]\nname = \"b2\"\ntls = {{ names = [{names}] }}"),
            )
        };
        // The template speaks plain HTTP: a TLS backend needs an inline body.
        let e = Scenario::from_toml(&tls(r#""edge.example.com""#), "t")
            .unwrap_err()
            .to_string();
        assert!(e.contains("needs an `[nginx] inline` body"), "{e}");
        let inline = |names: &str| {
            tls(names).replace(
                "[nginx]\n",
                "[nginx]\ninline = \"server { listen {listen}; location / { proxy_pass https://{backend:b2}:{port}; proxy_ssl_trusted_certificate {tls_ca}; } }\"\n",
            )
        };
        let s = Scenario::from_toml(
            &inline(r#""edge.example.com", "*.svc.local", "be_pool""#),
            "t",
        )
        .unwrap();
        assert_eq!(s.backends[1].tls.as_ref().unwrap().names.len(), 3);
        assert!(s.backends[0].tls.is_none());
        let e = Scenario::from_toml(&inline(r#""api example""#), "t")
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("t:") && e.contains("`api example` is not a DNS name"),
            "{e}"
        );
    }

    /// MIN with `table` (a table and its lines) before its first backend.
    fn min_with(table: &str) -> String {
        let first = "[[backend]]\nname = \"b1\"";
        MIN.replace(first, &format!("{table}\n{first}"))
    }

    /// `text` is refused at the line holding `at` (its first), saying `says`.
    fn assert_refused_at(text: &str, at: &str, says: &str) {
        let e = Scenario::from_toml(text, "t").unwrap_err().to_string();
        let line = text
            .lines()
            .position(|l| l.contains(at))
            .expect("`at` is in the text")
            + 1;
        assert!(
            e.starts_with(&format!("t:{line}:")) && e.contains(says),
            "{e}"
        );
    }

    #[test]
    fn a_caddy_fallback_names_a_backend_beside_a_resolved_name() {
        let with = |fallback: &str| min_with(&format!("[caddy]\nfallback = [{fallback}]"));
        let s = Scenario::from_toml(&with(r#""@b2""#), "t").unwrap();
        assert_eq!(s.caddy.fallback, ["@b2"]);
        let err = |text: &str| Scenario::from_toml(text, "t").unwrap_err().to_string();
        assert_refused_at(&with(r#""@b9""#), "@b9", "`@b9` names no backend");
        assert!(err(&with(r#""b2""#)).contains("write `@NAME`"));
        let fixed = with(r#""@b2""#).replace("host = \"app.test.local\"", "host = \"@b1\"");
        assert!(
            err(&fixed).contains("needs a resolved server name"),
            "{}",
            err(&fixed)
        );
    }

    #[test]
    fn a_server_template_counts_servers_for_a_resolved_name() {
        let with = |n: &str| min_with(&format!("[haproxy]\nserver_template = {n}"));
        let s = Scenario::from_toml(&with("4"), "t").unwrap();
        assert_eq!(s.haproxy.server_template, Some(4));
        let err = |text: &str| Scenario::from_toml(text, "t").unwrap_err().to_string();
        assert_refused_at(&with("0"), "server_template", "1 to 1024");
        let fixed = with("4").replace("host = \"app.test.local\"", "host = \"@b1\"");
        assert!(
            err(&fixed).contains("needs a resolved server name"),
            "{}",
            err(&fixed)
        );
    }

    #[test]
    fn a_server_state_file_needs_a_server_that_reads_it() {
        let with = |extra: &str| min_with(&format!("[haproxy]\nserver_state = true\n{extra}"));
        // MIN's server has `resolvers` (the lab writes `init-addr none`): nothing reads it.
        assert_refused_at(&with(""), "server_state", "add `last` to init_addr");
        let s = Scenario::from_toml(&with("init_addr = \"last,none\""), "t").unwrap();
        assert!(s.haproxy.server_state);
        let once = with("").replace(
            "host = \"app.test.local\"",
            "host = \"app.test.local\"\nresolve = false",
        );
        assert!(Scenario::from_toml(&once, "t").is_ok());
    }

    #[test]
    fn the_format_example_in_the_docs_loads() {
        let doc = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/scenarios.md"),
        )
        .unwrap();
        let from = doc.find("## Format (version 1)").unwrap();
        let start = doc[from..].find("```toml\n").unwrap() + from + 8;
        let end = doc[start..].find("```\n").unwrap() + start;
        let sc = Scenario::from_toml(&doc[start..end], "docs/scenarios.md")
            .unwrap_or_else(|e| panic!("the documented example must load: {e}"));
        sc.variant("valid30-aligned").unwrap();
    }

    #[test]
    fn windows_loads_and_late_events_are_checked_at_load() {
        let err = |t: &str| Scenario::from_toml(t, "x.toml").unwrap_err().to_string();
        // A window armed at the re-query as long as the period races the one after it.
        let e = err(&MIN.replace("for = \"1s\"", "for = \"2s\""));
        assert!(e.contains("shorter than nginx's re-query period"), "{e}");
        // No request at all.
        assert!(err(&MIN.replace("rate = \"300\"", "rate = \"0\"")).contains("sends no request"));
        assert!(
            err(&MIN.replace("duration = \"60s\"", "duration = \"0s\""))
                .contains("sends no request")
        );
        // An event after the end of the load would be dropped silently: refused at load.
        let e = err(&MIN.replace("at = \"10s\"", "at = \"59s\""));
        assert!(
            e.contains("after the load ends") && e.contains("timeline event 1"),
            "{e}"
        );
        // A scale that shrinks the load to nothing (no timeline to keep it long).
        let tl = "[[timeline]]\nat = \"10s\"\ndns = \"app.test.local\"\nmode = \"nxdomain\"\nfor = \"1s\"\nalign = \"next-requery\"\n";
        assert!(MIN.contains(tl));
        let s = Scenario::from_toml(&MIN.replace(tl, ""), "t").unwrap();
        let e = s.scaled(1e-6).unwrap_err().to_string();
        assert!(
            e.contains("--scale") && e.contains("sends no request"),
            "{e}"
        );
    }

    #[test]
    fn an_unscalable_scenario_ignores_scale() {
        let s = Scenario::from_toml(&format!("scalable = false\n{MIN}"), "t").unwrap();
        let t = s.scaled(0.1).unwrap();
        assert_eq!(
            (
                t.load.rate.text.as_str(),
                t.load.duration.to_string().as_str()
            ),
            ("300", "60s")
        );
        // Round trip: the resolved scenario.toml of a run keeps the flag.
        let back = Scenario::from_toml(&toml::to_string(&s).unwrap(), "t").unwrap();
        assert!(!back.scalable);
    }

    #[test]
    fn scaling_keeps_valid() {
        let s = Scenario::from_toml(MIN, "t").unwrap().scaled(0.1).unwrap();
        assert_eq!(
            s.timeline[0]
                .at
                .as_ref()
                .map(ToString::to_string)
                .as_deref(),
            Some("1s")
        );
        // 1 s + 1 s window + two re-query periods of 2 s… or the 10 s fail_timeout tail + 2 s.
        assert_eq!(s.load.duration.to_string(), "14s");
        assert_eq!(s.load.rate.text, "30");
        assert_eq!(s.nginx.valid.to_string(), "1s");
        let mut ramp = Scenario::from_toml(MIN, "t").unwrap();
        ramp.load.rate = "0..300@10s,300".to_string().try_into().unwrap();
        // A ramp scales in rate and in duration, like a step.
        assert_eq!(ramp.scaled(0.5).unwrap().load.rate.text, "0..150@5s,150");
    }
}
