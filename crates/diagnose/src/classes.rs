//! Failure classes (stable ids from DESIGN.md), their explanation and fix (digest §3), and the
//! error-log signatures the checker recognises.

/// Every class id, in report order.
pub const CLASSES: &[&str] = &[
    "generation-race-retry",
    "generation-race-first-pick",
    "maxfails-wipeout",
    "dns-nxdomain",
    "zone-memory-exhausted",
    "port-exhaustion",
    "tries-exhausted",
    "upstream-failure",
    "unclassified",
];

/// What the class is (one paragraph).
pub fn explanation(class: &str) -> &'static str {
    match class {
        "generation-race-retry" => {
            "A DNS swap changed the peer list between the request's first try and its retry: the retry's peer selection saw a new generation and refused (BUSY → `no live upstreams`). Shape: isolated 2-hop `OLDIP:port, be` failures among successes, 0–500 ms after a swap, paired by *cid with a first-try failure line."
        }
        "generation-race-first-pick" => {
            "A DNS swap landed between request init and the first peer pick (a window of microseconds): a lone 1-hop `be` failure aligned to a swap."
        }
        "maxfails-wipeout" => {
            "With two or more peers (two `resolve` lines, or one name answering two A records) the hidden defaults max_fails=1 fail_timeout=10s apply: a few failures exclude every peer and every request fails 1-hop for ≈ fail_timeout."
        }
        "dns-nxdomain" => {
            "The authority answered NXDOMAIN: nginx removed every peer of the name until the next successful re-query (one full period = valid + 1 s), so every request in that window failed 1-hop."
        }
        "zone-memory-exhausted" => {
            "The upstream zone ran out of slab memory while adding the peers of a new answer, after the old peers were already removed: part or all of the peer list was lost."
        }
        "port-exhaustion" => {
            "connect() failed with EADDRNOTAVAIL (99): the ephemeral port range is exhausted (no upstream keep-alive at high request rates)."
        }
        "tries-exhausted" => {
            "Every peer was already tried in this request (3+ hops) after real backend failures, with no peer-list change: the final `no live upstreams` is the end of the retries, not a DNS problem."
        }
        "upstream-failure" => {
            "A 502/504 after real tries, without `no live upstreams`: the backend failed (refused, reset, timed out, closed early)."
        }
        _ => {
            "Failures the checker could not attribute to a known class with the evidence available."
        }
    }
}

/// The fix (digest §3).
pub fn fix(class: &str) -> &'static str {
    match class {
        "generation-race-retry" | "generation-race-first-pick" => {
            "Use per-DC fixed names (no swaps); retry once at the client or with `error_page 502 = @retry_once` guarded to GET/HEAD/OPTIONS; lower the swap rate and fix keep-alive hygiene (idle timeouts). `max_fails=0` does nothing here and a `backup` server is skipped on this path."
        }
        "maxfails-wipeout" => {
            "Add `max_fails=0` to every `server … resolve` line (measured 7,188 → 104), or remove the duplicate names/records that make the peer count ≥ 2."
        }
        "dns-nxdomain" => {
            "Fix the DNS records; consider `ipv6=off` on the resolver; add a static backup server with `max_fails=0` on every line; do not raise `valid` (it lengthens the outage to valid + 1 s)."
        }
        "zone-memory-exhausted" => {
            "Make the upstream `zone` bigger (it must hold every peer of every answer)."
        }
        "port-exhaustion" => {
            "Enable upstream keep-alive (`keepalive N;` + `proxy_http_version 1.1; proxy_set_header Connection \"\";`); widen `net.ipv4.ip_local_port_range`, enable `tcp_tw_reuse`."
        }
        "tries-exhausted" => {
            "Treat as a backend failure: fix the failing backends; this is not a DNS problem."
        }
        "upstream-failure" => {
            "Investigate the backend (its logs, the first-try error lines); tune proxy_next_upstream / timeouts as appropriate."
        }
        _ => {
            "Collect the DNS query log (`--dns`) and every error_log file (`nginx -T | grep error_log`), then diagnose again."
        }
    }
}

/// Error-log signatures: (id, pattern shown to users, matcher).
pub struct SigDef {
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
        id: "no-live-upstreams",
        pattern: "no live upstreams",
        matcher: |m| m.contains("no live upstreams"),
    },
    SigDef {
        id: "resolve-nxdomain",
        pattern: "could not be resolved (3: Host not found)",
        matcher: |m| m.contains("could not be resolved (3:"),
    },
    SigDef {
        id: "resolve-servfail",
        pattern: "could not be resolved (2: Server failure)",
        matcher: |m| m.contains("could not be resolved (2:"),
    },
    SigDef {
        id: "resolve-timeout",
        pattern: "could not be resolved (110: Operation timed out)",
        matcher: |m| m.contains("could not be resolved (110:"),
    },
    SigDef {
        id: "resolve-other",
        pattern: "could not be resolved (…)",
        matcher: |m| m.contains("could not be resolved"),
    },
    SigDef {
        id: "peer-disabled",
        pattern: "upstream server temporarily disabled",
        matcher: |m| m.contains("upstream server temporarily disabled"),
    },
    SigDef {
        id: "zone-memory-exhausted",
        pattern: "cannot add new server to upstream …, memory exhausted",
        matcher: |m| m.contains("memory exhausted"),
    },
    SigDef {
        id: "connect-eaddrnotavail",
        pattern: "connect() failed (99: Cannot assign requested address)",
        matcher: |m| m.contains("failed (99:"),
    },
    SigDef {
        id: "connect-refused",
        pattern: "connect() failed (111: Connection refused)",
        matcher: |m| m.contains("failed (111:"),
    },
    SigDef {
        id: "upstream-timeout",
        pattern: "upstream timed out (110…) / connect() failed (110…)",
        matcher: |m| m.contains("timed out (110:") || m.contains("failed (110:"),
    },
    SigDef {
        id: "premature-close",
        pattern: "upstream prematurely closed connection",
        matcher: |m| m.contains("upstream prematurely closed"),
    },
    SigDef {
        id: "reset-by-peer",
        pattern: "(104: Connection reset by peer)",
        matcher: |m| m.contains("(104:"),
    },
    SigDef {
        id: "ssl",
        pattern: "SSL_* failed",
        matcher: |m| m.contains("SSL_"),
    },
];

/// The signature id of an error message (`other` when none matches).
pub fn signature_of(message: &str) -> &'static str {
    SIGNATURES
        .iter()
        .find(|s| s.matches(message))
        .map(|s| s.id)
        .unwrap_or("other")
}

/// The index in [`SIGNATURES`] of an error message's signature (`None` for `other`).
pub fn signature_index(message: &str) -> Option<usize> {
    SIGNATURES.iter().position(|s| s.matches(message))
}

/// True for signatures that are a first-try failure (what precedes a retry).
pub fn is_first_try_failure(sig: &str) -> bool {
    matches!(
        sig,
        "connect-refused"
            | "connect-eaddrnotavail"
            | "upstream-timeout"
            | "premature-close"
            | "reset-by-peer"
            | "ssl"
    )
}
