//! Failure classes (stable ids from DESIGN.md), their explanation and fix (DOMAIN.md §3), and the
//! error-log signatures the checker recognises.

/// A failure class. Its [`id`](Class::id) is the stable name used in the CLI, JSON and docs,
/// and the text it is written and read as.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(try_from = "String", into = "String")]
pub enum Class {
    /// A peer-list change between a request's first try and its retry (DOMAIN.md F4, branch 1).
    GenerationRaceRetry,
    /// A peer-list change between request init and the first pick (branch 2).
    GenerationRaceFirstPick,
    /// Every peer excluded by the hidden `max_fails=1` (branch 3, DOMAIN.md F5).
    MaxfailsWipeout,
    /// The `resolve` re-query got NXDOMAIN: every peer of the name removed (F2).
    DnsNxdomain,
    /// A proxy that holds the last answer through DNS failures (HAProxy's `hold nx`/`hold
    /// other`) reached the end of the hold and took the server out of service.
    DnsHoldExpired,
    /// An NXDOMAIN (or empty) answer replaced the hosts of the proxy's DNS cluster with none
    /// (Envoy's STRICT_DNS: `DNS hosts have changed`), until the next refresh.
    DnsClusterEmptied,
    /// The proxy looked the name up inside the request and the lookup failed (Caddy's dynamic
    /// upstreams: `failed getting dynamic upstreams`).
    DnsLookupFailed,
    /// A request's own (per-request, variable `proxy_pass`) resolution failed.
    DnsRequestFailure,
    /// A try went to an address the name's DNS answers no longer held: the backend moved.
    StaleAddress,
    /// The zone's slab ran out while adding peers (F3).
    ZoneMemoryExhausted,
    /// Ephemeral ports exhausted (`connect() failed (99…)`).
    PortExhaustion,
    /// Every peer already tried in this request, no peer-list change.
    TriesExhausted,
    /// A 502/504 after real tries, without `no live upstreams`.
    UpstreamFailure,
    /// The inputs cannot decide the cause: the report says what is missing.
    Undetermined,
}

/// Every class id, in report order (derived from [`Class::ALL`] and [`Class::id`]).
pub const CLASSES: [&str; Class::COUNT] = {
    let mut ids = [""; Class::COUNT];
    let mut i = 0;
    while i < Class::COUNT {
        ids[i] = Class::ALL[i].id();
        i += 1;
    }
    ids
};

impl std::fmt::Display for Class {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.id())
    }
}

impl std::str::FromStr for Class {
    type Err = String;
    fn from_str(s: &str) -> Result<Class, String> {
        Class::from_id(s)
            .ok_or_else(|| format!("no failure class `{s}` (known: {})", CLASSES.join(", ")))
    }
}

/// A class equals its id (the expectation language names classes by id).
impl PartialEq<str> for Class {
    fn eq(&self, id: &str) -> bool {
        self.id() == id
    }
}

impl PartialEq<&str> for Class {
    fn eq(&self, id: &&str) -> bool {
        self.id() == *id
    }
}

impl PartialEq<String> for Class {
    fn eq(&self, id: &String) -> bool {
        self.id() == id
    }
}

impl TryFrom<String> for Class {
    type Error = String;
    fn try_from(s: String) -> Result<Class, String> {
        s.parse()
    }
}

impl From<Class> for String {
    fn from(c: Class) -> String {
        c.id().to_string()
    }
}

impl Class {
    /// How many classes there are: one more than the last variant's index.
    pub const COUNT: usize = Class::Undetermined as usize + 1;

    /// Every class, in report order (the variants' order). Checked when the crate compiles:
    /// a variant left out (or out of order) fails the build.
    pub const ALL: [Class; Class::COUNT] = [
        Class::GenerationRaceRetry,
        Class::GenerationRaceFirstPick,
        Class::MaxfailsWipeout,
        Class::DnsNxdomain,
        Class::DnsHoldExpired,
        Class::DnsClusterEmptied,
        Class::DnsLookupFailed,
        Class::DnsRequestFailure,
        Class::StaleAddress,
        Class::ZoneMemoryExhausted,
        Class::PortExhaustion,
        Class::TriesExhausted,
        Class::UpstreamFailure,
        Class::Undetermined,
    ];

    /// The stable id: one arm per variant, so a new class without an id does not compile.
    pub const fn id(self) -> &'static str {
        match self {
            Class::GenerationRaceRetry => "generation-race-retry",
            Class::GenerationRaceFirstPick => "generation-race-first-pick",
            Class::MaxfailsWipeout => "maxfails-wipeout",
            Class::DnsNxdomain => "dns-nxdomain",
            Class::DnsHoldExpired => "dns-hold-expired",
            Class::DnsClusterEmptied => "dns-cluster-emptied",
            Class::DnsLookupFailed => "dns-lookup-failed",
            Class::DnsRequestFailure => "dns-request-failure",
            Class::StaleAddress => "stale-address",
            Class::ZoneMemoryExhausted => "zone-memory-exhausted",
            Class::PortExhaustion => "port-exhaustion",
            Class::TriesExhausted => "tries-exhausted",
            Class::UpstreamFailure => "upstream-failure",
            Class::Undetermined => "undetermined",
        }
    }

    /// The class of a stable id.
    pub fn from_id(id: &str) -> Option<Class> {
        Class::ALL.into_iter().find(|c| c.id() == id)
    }

    /// A generation race (either branch): a class that needs an observed peer-list change.
    pub fn is_race(self) -> bool {
        matches!(
            self,
            Class::GenerationRaceRetry | Class::GenerationRaceFirstPick
        )
    }
}

// `ALL[i]` is the variant of index `i`: with `COUNT` = the last index + 1, every variant is in it.
const _: () = {
    let mut i = 0;
    while i < Class::COUNT {
        assert!(
            Class::ALL[i] as usize == i,
            "Class::ALL must list every variant in order"
        );
        i += 1;
    }
};

/// What the class is (one paragraph).
pub fn explanation(class: &str) -> &'static str {
    match Class::from_id(class) {
        Some(Class::GenerationRaceRetry) => {
            "A DNS swap changed the peer list between the request's first try and its retry: the retry's peer selection saw a new generation and refused (BUSY → `no live upstreams`). Shape: isolated 2-hop `OLDIP:port, be` failures among successes, 0–500 ms after a swap, paired by *cid with a first-try failure line."
        }
        Some(Class::GenerationRaceFirstPick) => {
            "A DNS swap landed between request init and the first peer pick (a window of microseconds): a lone 1-hop `be` failure aligned to a swap."
        }
        Some(Class::MaxfailsWipeout) => {
            "With two or more peers (two `resolve` lines, or one name answering two A records) the hidden defaults max_fails=1 fail_timeout=10s apply: a few failures exclude every peer and every request fails 1-hop for ≈ fail_timeout."
        }
        Some(Class::DnsNxdomain) => {
            "The authority answered NXDOMAIN: nginx removed every peer of the name until the next successful re-query (one full period = valid + 1 s), so every request in that window failed 1-hop."
        }
        Some(Class::DnsHoldExpired) => {
            "The proxy kept the name's last good address through the DNS failure for its hold time (HAProxy: `hold nx` for NXDOMAIN, `hold other`/`hold timeout` for the rest, 30 s by default), then took the server out of service (`going DOWN for maintenance (DNS NX status)`, `(DNS timeout status)`, `(unspecified DNS error)` for a SERVFAIL; `backend … has no server available!`): every request failed with no server (503) until an answer came back. The outage is the DNS failure's length minus the hold, ended by the next successful poll (every `timeout resolve`, 1 s)."
        }
        Some(Class::DnsClusterEmptied) => {
            "The authority answered NXDOMAIN (or no address) and the proxy replaced its cluster's hosts with that empty answer (Envoy's STRICT_DNS cluster logs `DNS hosts have changed`): every request failed with no healthy upstream (503, response flag `UH`) until a refresh got addresses again. The outage runs to the first refresh after the records are back (`dns_refresh_rate`, 5 s by default, whatever the TTL)."
        }
        Some(Class::DnsLookupFailed) => {
            "The proxy looks the name up inside a request once its cached answer is older than its refresh interval, and that lookup failed (Caddy's dynamic upstreams log `failed getting dynamic upstreams; falling back to static upstreams`): with no static upstreams to fall back on, the request got 503 `no upstreams available` without any backend tried."
        }
        Some(Class::DnsRequestFailure) => {
            "The request's own DNS resolution failed (a variable `proxy_pass` with a `resolver` resolves per request): nginx logged `could not be resolved` with this request's *cid and answered 502 without trying any upstream."
        }
        Some(Class::StaleAddress) => {
            "The request went to an address its name's DNS answers no longer held: the backend moved (a container or pod restarted, a VIP changed) and nginx still sent to where it was — it resolved the name once, when it started or last reloaded (a `server` line without `resolve`, or `proxy_pass http://name`), or its resolver cache or re-query had not caught up yet. The old address refuses or times out until nginx resolves the name again."
        }
        Some(Class::ZoneMemoryExhausted) => {
            "The upstream zone ran out of slab memory while adding the peers of a new answer, after the old peers were already removed: part or all of the peer list was lost."
        }
        Some(Class::PortExhaustion) => {
            "connect() failed with EADDRNOTAVAIL (99): the ephemeral port range is exhausted (no upstream keep-alive at high request rates)."
        }
        Some(Class::TriesExhausted) => {
            "Every peer was already tried in this request after real backend failures, with no peer-list change seen: the final `no live upstreams` is the end of the retries, not a DNS problem."
        }
        Some(Class::UpstreamFailure) => {
            "A 502/504 after real tries, without `no live upstreams`: the backend failed (refused, reset, timed out, closed early)."
        }
        Some(Class::Undetermined) | None => {
            "`no live upstreams` whose cause these inputs cannot decide: a peer-list change (DNS swap), peers excluded by max_fails or marked `down`, or every peer already tried all end this way, and the logs show none of them."
        }
    }
}

/// The fix (DOMAIN.md §3).
pub fn fix(class: &str) -> &'static str {
    match Class::from_id(class) {
        Some(Class::GenerationRaceRetry | Class::GenerationRaceFirstPick) => {
            "Use per-DC fixed names (no swaps); retry once at the client or with `error_page 502 = @retry_once` guarded to GET/HEAD/OPTIONS; lower the swap rate and fix keep-alive hygiene (idle timeouts). `max_fails=0` does nothing here and a `backup` server is skipped on this path."
        }
        Some(Class::MaxfailsWipeout) => {
            "Add `max_fails=0` to every `server … resolve` line (measured 7,188 → 104), or remove the duplicate names/records that make the peer count ≥ 2."
        }
        Some(Class::DnsNxdomain) => {
            "Fix the DNS records; consider `ipv6=off` on the resolver; add a static backup server with `max_fails=0` on every line; do not raise `valid` (it lengthens the outage to valid + 1 s)."
        }
        Some(Class::DnsHoldExpired) => {
            "Fix the DNS records or the resolver; a longer `hold nx`/`hold other` in the `resolvers` section rides out longer failures (at the price of sending to a vanished address longer); a static `backup` server keeps a target when the resolved one goes."
        }
        Some(Class::DnsClusterEmptied) => {
            "Fix the DNS records; a static endpoint at a lower priority (a `backup` server line) keeps a target while the resolved hosts are gone; a shorter `dns_refresh_rate` ends the outage sooner once the records are back."
        }
        Some(Class::DnsLookupFailed) => {
            "Fix the resolver or the records; static `upstreams` beside the dynamic ones are used when the lookup fails; a longer `refresh` looks the name up less often (and follows changes later)."
        }
        Some(Class::DnsRequestFailure) => {
            "Fix the resolver or the records it serves (the error line names the rcode; `no resolver defined` means there is no `resolver` in scope: add one, `resolvelab lint` finds every such `*_pass`); a `valid=` on the `resolver` caches good answers longer; or `server … resolve` in an upstream, which keeps the last good peers on SERVFAIL/timeouts (a name resolved once at start pins an address until reload instead)."
        }
        Some(Class::StaleAddress) => {
            "Make nginx follow the name: `server NAME:PORT resolve;` with a `zone` and `resolver … valid=5s` (nginx >= 1.27.3; it follows within valid + 1 s), or a variable `proxy_pass` with a `resolver` (per request, within `valid`); until then, reload nginx whenever the backend moves (`nginx -s reload`). `resolvelab lint` lists every name resolved only at start."
        }
        Some(Class::ZoneMemoryExhausted) => {
            "Make the upstream `zone` bigger (it must hold every peer of every answer)."
        }
        Some(Class::PortExhaustion) => {
            "Enable upstream keep-alive (`keepalive N;` + `proxy_http_version 1.1; proxy_set_header Connection \"\";`); widen `net.ipv4.ip_local_port_range`, enable `tcp_tw_reuse`."
        }
        Some(Class::TriesExhausted) => {
            "Treat as a backend failure: fix the failing backends; this is not a DNS problem."
        }
        Some(Class::UpstreamFailure) => {
            "Investigate the backend (its logs, the first-try error lines); tune proxy_next_upstream / timeouts as appropriate."
        }
        Some(Class::Undetermined) | None => {
            "See \"What these logs can show\" at the top of the report: log every error_log destination at `warn` (it shows `upstream server temporarily disabled`), add `$upstream_addr` and `$connection` to the log_format, give the config (`--nginx-conf <(nginx -T)`) and the version (`--nginx-version`), and, where the name's answers may change, a record of them over time (`--dns`, resolvelab.dns/v1 JSON Lines), then diagnose again."
        }
    }
}

/// The explanation and fix of an undetermined outcome, each sentence from what the evidence
/// holds (issue #43): `nlu` of its failures were `no live upstreams` (0: none was — and a
/// 504 never is one), `race_ruled_out` by the configuration or version (then a DNS swap is
/// not offered as a cause), `timeouts` of them were 504s.
pub fn undetermined(nlu: u64, race_ruled_out: bool, timeouts: u64) -> (String, &'static str) {
    if nlu == 0 {
        let mut t = "502/504 failures with no error line of their own that says why".to_string();
        if timeouts > 0 {
            t += &format!(
                "; {timeouts} of them are 504s — an upstream timeout (connect, send or read), never a `no live upstreams`, which nginx answers with 502"
            );
        }
        let fix = "No error line pairs with these failures: give every `error_log` destination of this server (at `warn` or lower; `nginx -T | grep error_log`) so that each failure pairs with its own line, and add `$upstream_addr`, `$upstream_status` and `$connection` to the log_format; then diagnose again.";
        return (t + ".", fix);
    }
    let mut causes = Vec::new();
    if !race_ruled_out {
        causes.push("a peer-list change (DNS swap)");
    }
    causes.extend([
        "peers excluded by max_fails or marked `down`",
        "every peer already tried",
    ]);
    let mut t = format!(
        "`no live upstreams` whose cause these inputs cannot decide: {} all end this way, and the logs show none of them",
        causes.join(", ")
    );
    if race_ruled_out {
        t += " (a DNS swap is ruled out: see \"What these logs can show\")";
    }
    // The lines that would decide it, cause by cause.
    t += ". What would decide it: an `upstream server temporarily disabled` line (logged at `warn`) before the first NLU — a max_fails wipeout, even in a static upstream with the default max_fails=1; every peer of the group in the request's `$upstream_addr` — tries exhausted";
    if !race_ruled_out {
        t += "; a DNS answer history (`--dns`) or addresses changing in `$upstream_addr` — a peer-list change";
    }
    (t + ".", fix(Class::Undetermined.id()))
}

/// An error-log signature. Its [`id`](Sig::id) is the stable name used in JSON, expectations
/// and docs; the variants are in [`SIGNATURES`]' order (most specific first).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Sig {
    /// `no live upstreams`.
    NoLiveUpstreams,
    /// `could not be resolved (3: Host not found)`.
    ResolveNxdomain,
    /// `could not be resolved (2: Server failure)`.
    ResolveServfail,
    /// `could not be resolved (110: Operation timed out)`.
    ResolveTimeout,
    /// Any other `could not be resolved (…)`.
    ResolveOther,
    /// `unexpected response for NAME`.
    ResolverUnexpectedResponse,
    /// `no resolver defined to resolve NAME`: a variable `*_pass` with no `resolver` in scope.
    NoResolver,
    /// `upstream server temporarily disabled`.
    PeerDisabled,
    /// `cannot add new server …, memory exhausted`.
    ZoneMemoryExhausted,
    /// `ngx_slab_alloc() failed: no memory in upstream zone`.
    ZoneSlabAlloc,
    /// `connect() to [IPv6]:port failed (99: …)`.
    ConnectIpv6Unavailable,
    /// `connect() failed (99: Cannot assign requested address)`.
    ConnectEaddrnotavail,
    /// `connect() failed (111: Connection refused)`.
    ConnectRefused,
    /// `connect() failed (113: No route to host)`.
    ConnectNoRoute,
    /// `connect() failed (101: Network is unreachable)`.
    ConnectUnreachable,
    /// `connect() … failed (13: Permission denied)`.
    ConnectPermission,
    /// `connect() to unix:… failed (2: No such file or directory)`.
    UnixSocketMissing,
    /// `upstream timed out (110…)`.
    UpstreamTimeout,
    /// `upstream prematurely closed connection`.
    PrematureClose,
    /// `(104: Connection reset by peer)`.
    ResetByPeer,
    /// `upstream sent too big header`.
    TooBigHeader,
    /// `upstream sent invalid header` and kin.
    InvalidHeader,
    /// `SSL_* failed … to upstream`.
    Ssl,
    /// Any other `connect() … failed (N: …) while connecting to upstream` (11: a full listen
    /// backlog, 22: ingress-nginx's `0.0.0.1` placeholder, …).
    ConnectOther,
    /// `[emerg] host not found in upstream "NAME…"`: a start or a reload refused because a name
    /// the configuration resolves at start does not resolve.
    HostNotFoundInUpstream,
    /// None of the above.
    Other,
}

impl Sig {
    /// The stable id (`other` for [`Sig::Other`]).
    pub fn id(self) -> &'static str {
        SIGNATURES.get(self as usize).map_or("other", |d| d.id)
    }

    /// The signature of an error message.
    pub fn of(message: &str) -> Sig {
        // A Lua timer's own socket work (`context: ngx.timer`: OpenResty, Kong) belongs to no
        // request and no upstream try, whatever errno it carries.
        if message.contains("context: ngx.timer") {
            return Sig::Other;
        }
        SIGNATURES
            .iter()
            .find(|s| s.matches(message))
            .map_or(Sig::Other, |s| s.sig)
    }

    /// The signature of a stable id.
    pub fn from_id(id: &str) -> Option<Sig> {
        if id == "other" {
            return Some(Sig::Other);
        }
        SIGNATURES.iter().find(|s| s.id == id).map(|s| s.sig)
    }

    /// A first-try failure: what precedes a retry.
    pub fn is_first_try_failure(self) -> bool {
        use Sig::*;
        matches!(
            self,
            ConnectRefused
                | ConnectEaddrnotavail
                | ConnectIpv6Unavailable
                | ConnectNoRoute
                | ConnectUnreachable
                | ConnectPermission
                | UnixSocketMissing
                | ConnectOther
                | UpstreamTimeout
                | PrematureClose
                | ResetByPeer
                | TooBigHeader
                | InvalidHeader
                | Ssl
        )
    }

    /// A failed resolution (`could not be resolved (…)`, `unexpected response`). With a `*cid`
    /// the line belongs to one request's own resolution (a variable `proxy_pass`): that
    /// request's cause. Without one it is the `resolve` re-query timer's.
    pub fn is_resolution_failure(self) -> bool {
        use Sig::*;
        matches!(
            self,
            ResolveNxdomain
                | ResolveServfail
                | ResolveTimeout
                | ResolveOther
                | ResolverUnexpectedResponse
                | NoResolver
        )
    }

    /// What a failed request's pairing looks for: its NLU line, a first-try failure, its own
    /// failed resolution.
    pub fn is_request_failure(self) -> bool {
        self == Sig::NoLiveUpstreams || self.is_first_try_failure() || self.is_resolution_failure()
    }
}

/// Error-log signatures: (id, pattern shown to users, matcher).
pub struct SigDef {
    /// The signature.
    pub sig: Sig,
    /// Stable id.
    pub id: &'static str,
    /// Human pattern.
    pub pattern: &'static str,
    matcher: fn(&str) -> bool,
}

impl SigDef {
    /// Does `message` match?
    pub fn matches(&self, message: &str) -> bool {
        (self.matcher)(message)
    }
}

/// The signatures, most specific first.
pub const SIGNATURES: &[SigDef] = &[
    SigDef {
        sig: Sig::NoLiveUpstreams,
        id: "no-live-upstreams",
        pattern: "no live upstreams",
        matcher: |m| m.contains("no live upstreams"),
    },
    SigDef {
        sig: Sig::ResolveNxdomain,
        id: "resolve-nxdomain",
        pattern: "could not be resolved (3: Host not found)",
        matcher: |m| m.contains("could not be resolved (3:"),
    },
    SigDef {
        sig: Sig::ResolveServfail,
        id: "resolve-servfail",
        pattern: "could not be resolved (2: Server failure)",
        matcher: |m| m.contains("could not be resolved (2:"),
    },
    SigDef {
        sig: Sig::ResolveTimeout,
        id: "resolve-timeout",
        pattern: "could not be resolved (110: Operation timed out)",
        matcher: |m| m.contains("could not be resolved (110:"),
    },
    SigDef {
        sig: Sig::ResolveOther,
        id: "resolve-other",
        pattern: "could not be resolved (…)",
        matcher: |m| m.contains("could not be resolved"),
    },
    SigDef {
        sig: Sig::ResolverUnexpectedResponse,
        id: "resolver-unexpected-response",
        pattern: "unexpected response for NAME",
        matcher: |m| m.contains("unexpected response for "),
    },
    SigDef {
        sig: Sig::NoResolver,
        id: "no-resolver",
        pattern: "no resolver defined to resolve NAME",
        matcher: |m| m.contains("no resolver defined to resolve "),
    },
    SigDef {
        sig: Sig::PeerDisabled,
        id: "peer-disabled",
        pattern: "upstream server temporarily disabled",
        matcher: |m| m.contains("upstream server temporarily disabled"),
    },
    SigDef {
        sig: Sig::ZoneMemoryExhausted,
        id: "zone-memory-exhausted",
        pattern: "cannot add new server to upstream …, memory exhausted",
        matcher: |m| m.contains("memory exhausted"),
    },
    SigDef {
        sig: Sig::ZoneSlabAlloc,
        id: "zone-slab-alloc",
        pattern: "ngx_slab_alloc() failed: no memory in upstream zone \"…\"",
        matcher: |m| m.contains("no memory in upstream zone"),
    },
    SigDef {
        sig: Sig::ConnectIpv6Unavailable,
        id: "connect-ipv6-unavailable",
        pattern: "connect() to [IPv6]:port failed (99: …): no such IPv6 address here (e.g. [::1] without IPv6)",
        matcher: |m| m.contains("failed (99:") && m.contains("connect() to ["),
    },
    SigDef {
        sig: Sig::ConnectEaddrnotavail,
        id: "connect-eaddrnotavail",
        pattern: "connect() failed (99: Cannot assign requested address)",
        matcher: |m| m.contains("failed (99:"),
    },
    SigDef {
        sig: Sig::ConnectRefused,
        id: "connect-refused",
        pattern: "connect() failed (111: Connection refused)",
        matcher: |m| m.contains("failed (111:"),
    },
    SigDef {
        sig: Sig::ConnectNoRoute,
        id: "connect-no-route",
        pattern: "connect() failed (113: No route to host)",
        matcher: |m| m.contains("failed (113:"),
    },
    SigDef {
        sig: Sig::ConnectUnreachable,
        id: "connect-unreachable",
        pattern: "connect() failed (101: Network is unreachable)",
        matcher: |m| m.contains("failed (101:"),
    },
    SigDef {
        sig: Sig::ConnectPermission,
        id: "connect-permission",
        pattern: "connect() … failed (13: Permission denied) while connecting to upstream",
        matcher: |m| m.contains("failed (13:") && m.contains("connect"),
    },
    SigDef {
        sig: Sig::UnixSocketMissing,
        id: "unix-socket-missing",
        pattern: "connect() to unix:… failed (2: No such file or directory)",
        matcher: |m| m.contains("connect() to unix:") && m.contains("failed (2:"),
    },
    SigDef {
        sig: Sig::UpstreamTimeout,
        id: "upstream-timeout",
        pattern: "upstream timed out (110…) / connect() failed (110…)",
        matcher: |m| m.contains("timed out (110:") || m.contains("failed (110:"),
    },
    SigDef {
        sig: Sig::PrematureClose,
        id: "premature-close",
        pattern: "upstream prematurely closed connection",
        matcher: |m| m.contains("upstream prematurely closed"),
    },
    SigDef {
        sig: Sig::ResetByPeer,
        id: "reset-by-peer",
        pattern: "(104: Connection reset by peer)",
        matcher: |m| m.contains("(104:"),
    },
    SigDef {
        sig: Sig::TooBigHeader,
        id: "too-big-header",
        pattern: "upstream sent too big header",
        matcher: |m| m.contains("upstream sent too big header"),
    },
    SigDef {
        sig: Sig::InvalidHeader,
        id: "invalid-header",
        pattern: "upstream sent invalid header / invalid status / no valid HTTP header",
        matcher: |m| {
            m.contains("upstream sent invalid")
                || m.contains("upstream sent no valid HTTP")
                || m.contains("upstream sent duplicate header")
        },
    },
    SigDef {
        sig: Sig::Ssl,
        id: "ssl",
        pattern: "SSL_* failed … to upstream",
        // Client-side TLS failures (`while SSL handshaking, client: …`) are not the upstream's.
        matcher: |m| m.contains("SSL_") && m.contains("upstream"),
    },
    SigDef {
        sig: Sig::ConnectOther,
        id: "connect-other",
        pattern: "connect() … failed (N: …) while connecting to upstream (another errno: 11 a full backlog, 22 …)",
        matcher: |m| {
            m.contains("connect()")
                && m.contains("failed (")
                && m.contains("while connecting to upstream")
        },
    },
    SigDef {
        sig: Sig::HostNotFoundInUpstream,
        id: "host-not-found-in-upstream",
        pattern: "host not found in upstream \"NAME\" (a start or reload refused)",
        matcher: |m| m.contains("host not found in upstream"),
    },
];

/// The signature id of an error message (`other` when none matches).
pub fn signature_of(message: &str) -> &'static str {
    Sig::of(message).id()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_is_in_the_enums_order() {
        for (i, d) in SIGNATURES.iter().enumerate() {
            assert_eq!(d.sig as usize, i, "{}", d.id);
            assert_eq!(Sig::from_id(d.id), Some(d.sig));
        }
        assert_eq!(Sig::Other as usize, SIGNATURES.len());
        assert_eq!(Sig::Other.id(), "other");
    }

    /// tests/fixtures/real/kong-7716-ngx-timer-recv-113: Kong's Lua timer logs its own socket
    /// errors with a `*cid` and `client: 127.0.0.1`, but no request and no upstream try.
    #[test]
    fn a_lua_timers_socket_error_is_no_request_failure() {
        let m = "recv() failed (113: Host is unreachable), context: ngx.timer";
        assert_eq!(Sig::of(m), Sig::Other);
        let r = "connect() failed (113: Host is unreachable) while connecting to upstream";
        assert_eq!(Sig::of(r), Sig::ConnectNoRoute);
    }

    #[test]
    fn connect_failures_of_any_errno_are_first_try_failures() {
        // alerta/alerta#243 (uWSGI's listen backlog full) and kubernetes/ingress-nginx#4168
        // (the Lua balancer's 0.0.0.1 placeholder peer).
        for m in [
            "connect() to unix:/app.sock failed (11: Resource temporarily unavailable) while connecting to upstream",
            "connect() to 0.0.0.1:80 failed (22: Invalid argument) while connecting to upstream",
        ] {
            assert_eq!(Sig::of(m), Sig::ConnectOther, "{m}");
            assert!(Sig::of(m).is_first_try_failure());
        }
        // The specific ones keep their own signature.
        let t = "connect() failed (110: Connection timed out) while connecting to upstream";
        assert_eq!(Sig::of(t), Sig::UpstreamTimeout);
        let r = "connect() failed (111: Connection refused) while connecting to upstream";
        assert_eq!(Sig::of(r), Sig::ConnectRefused);
    }
}
