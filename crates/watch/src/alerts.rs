//! The Prometheus alerting rules shipped in `deploy/prometheus/resolvelab-alerts.yml`: one
//! alert per failure class, written from the class vocabulary so that a new class gets its
//! alert (a test compares the shipped file with [`rules_yaml`]). Each fires while the class's
//! incident is open (`resolvelab_open_incident_failures`) and for `WINDOW` after it closed
//! (`increase(resolvelab_failed_requests_total[…])`), per upstream, and links to the class's
//! runbook in docs/diagnose.md.

use resolvelab_diagnose::classes::{CLASSES, Class};

/// Where the runbooks are by default (the project's repository; set `--runbook-base` where you
/// host the docs).
pub const RUNBOOK_BASE: &str = "https://example.invalid/resolvelab/blob/main/docs/diagnose.md";

/// How long after an incident closed its alert keeps firing.
pub const WINDOW: &str = "15m";

/// One alert.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Alert {
    /// The alert's name (`ResolvelabDnsNxdomain`).
    pub name: String,
    /// The class it fires on.
    pub class: &'static str,
    /// `page` or `ticket`.
    pub severity: &'static str,
    /// The summary, `{{ $labels.upstream }}` inside.
    pub summary: String,
    /// The runbook's address.
    pub runbook_url: String,
}

impl Alert {
    /// The summary as Prometheus renders it for an upstream.
    pub fn summary_for(&self, upstream: &str) -> String {
        self.summary.replace("{{ $labels.upstream }}", upstream)
    }

    /// The class's explanation, its first sentence: the alert's description.
    pub fn description(&self) -> &'static str {
        let e = resolvelab_diagnose::classes::explanation(self.class);
        e.split_inclusive(". ").next().unwrap_or(e).trim_end()
    }
}

/// The anchor of a class's runbook section in docs/diagnose.md.
pub fn runbook_anchor(class: &str) -> String {
    format!("runbook-{class}")
}

fn title(class: &str) -> &'static str {
    match Class::from_id(class) {
        Some(Class::GenerationRaceRetry) => "retries refused by a DNS swap (generation race)",
        Some(Class::GenerationRaceFirstPick) => "a DNS swap at the first pick (generation race)",
        Some(Class::MaxfailsWipeout) => "every peer excluded by max_fails",
        Some(Class::DnsNxdomain) => "every peer removed by an NXDOMAIN answer",
        Some(Class::DnsHoldExpired) => "the DNS hold ran out",
        Some(Class::DnsClusterEmptied) => "an empty DNS answer emptied the cluster",
        Some(Class::DnsLookupFailed) => "a per-request DNS lookup failed",
        Some(Class::DnsRequestFailure) => "a request's own DNS resolution failed",
        Some(Class::StaleAddress) => "requests sent to an address DNS no longer holds",
        Some(Class::ZoneMemoryExhausted) => "the upstream zone ran out of memory",
        Some(Class::PortExhaustion) => "ephemeral ports exhausted",
        Some(Class::TriesExhausted) => "every peer tried and failed",
        Some(Class::UpstreamFailure) => "the backend failed",
        Some(Class::Undetermined) | None => "failures the logs cannot explain",
    }
}

/// Every alert, in class order.
pub fn all(runbook_base: &str) -> Vec<Alert> {
    CLASSES
        .iter()
        .map(|&class| {
            let name: String = class
                .split('-')
                .map(|w| {
                    let mut c = w.chars();
                    c.next()
                        .map(|f| f.to_uppercase().chain(c).collect::<String>())
                        .unwrap_or_default()
                })
                .collect();
            let severity = match Class::from_id(class) {
                Some(Class::UpstreamFailure | Class::Undetermined | Class::TriesExhausted) => {
                    "ticket"
                }
                _ => "page",
            };
            Alert {
                name: format!("Resolvelab{name}"),
                class,
                severity,
                summary: format!(
                    "nginx 502s on upstream {{{{ $labels.upstream }}}}: {}",
                    title(class)
                ),
                runbook_url: format!("{runbook_base}#{}", runbook_anchor(class)),
            }
        })
        .collect()
}

/// A YAML double-quoted scalar (JSON's string syntax is one).
fn q(s: &str) -> String {
    serde_json::to_string(s).expect("a string serializes")
}

/// The rules file.
pub fn rules_yaml(runbook_base: &str) -> String {
    let mut y = String::from(
        "# Alerting rules for `resolvelab watch` (one per failure class), written by\n\
         # resolvelab_watch::alerts; see docs/watch.md. Load with `rule_files:` in prometheus.yml.\n\
         groups:\n  - name: resolvelab\n    rules:\n",
    );
    for a in all(runbook_base) {
        let c = a.class;
        y.push_str(&format!(
            "      - alert: {}\n        expr: |\n          sum by (upstream, class) (increase(resolvelab_failed_requests_total{{class=\"{c}\"}}[{WINDOW}])) > 0\n          or sum by (upstream, class) (resolvelab_open_incident_failures{{class=\"{c}\"}}) > 0\n        labels:\n          severity: {}\n        annotations:\n          summary: {}\n          description: {}\n          runbook_url: {}\n",
            a.name,
            a.severity,
            q(&a.summary),
            q(a.description()),
            q(&a.runbook_url),
        ));
    }
    y
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_alert_per_class_with_its_runbook() {
        let a = all(RUNBOOK_BASE);
        assert_eq!(a.len(), CLASSES.len());
        let nx = a.iter().find(|x| x.class == "dns-nxdomain").unwrap();
        assert_eq!(nx.name, "ResolvelabDnsNxdomain");
        assert!(nx.runbook_url.ends_with("#runbook-dns-nxdomain"));
        assert_eq!(
            nx.summary_for("be"),
            "nginx 502s on upstream be: every peer removed by an NXDOMAIN answer"
        );
        assert!(
            nx.description()
                .starts_with("The authority answered NXDOMAIN")
        );
        assert!(nx.description().ends_with("failed 1-hop."));
    }
}
