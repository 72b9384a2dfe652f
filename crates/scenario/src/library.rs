//! The built-in scenario library (`scenarios/*.toml`, embedded at compile time).

use crate::format::Scenario;

/// `(file name, text)` of every built-in scenario.
pub const FILES: &[(&str, &str)] = &[
    (
        "swap-only",
        include_str!("../../../scenarios/swap-only.toml"),
    ),
    (
        "generation-race",
        include_str!("../../../scenarios/generation-race.toml"),
    ),
    (
        "generation-race-control",
        include_str!("../../../scenarios/generation-race-control.toml"),
    ),
    (
        "first-pick",
        include_str!("../../../scenarios/first-pick.toml"),
    ),
    ("nxdomain", include_str!("../../../scenarios/nxdomain.toml")),
    (
        "fleet-nxdomain",
        include_str!("../../../scenarios/fleet-nxdomain.toml"),
    ),
    (
        "gslb-failover",
        include_str!("../../../scenarios/gslb-failover.toml"),
    ),
    (
        "dns-silent",
        include_str!("../../../scenarios/dns-silent.toml"),
    ),
    (
        "dual-resolve",
        include_str!("../../../scenarios/dual-resolve.toml"),
    ),
    ("per-dc", include_str!("../../../scenarios/per-dc.toml")),
    (
        "zone-churn",
        include_str!("../../../scenarios/zone-churn.toml"),
    ),
    (
        "zone-exhaustion",
        include_str!("../../../scenarios/zone-exhaustion.toml"),
    ),
    (
        "zone-sweep",
        include_str!("../../../scenarios/zone-sweep.toml"),
    ),
    (
        "retry-shim",
        include_str!("../../../scenarios/retry-shim.toml"),
    ),
    ("backup", include_str!("../../../scenarios/backup.toml")),
    (
        "aaaa-pollution",
        include_str!("../../../scenarios/aaaa-pollution.toml"),
    ),
    ("rto", include_str!("../../../scenarios/rto.toml")),
    (
        "port-exhaustion",
        include_str!("../../../scenarios/port-exhaustion.toml"),
    ),
    (
        "slow-dependency",
        include_str!("../../../scenarios/slow-dependency.toml"),
    ),
    (
        "stale-address",
        include_str!("../../../scenarios/stale-address.toml"),
    ),
    (
        "reload-nxdomain",
        include_str!("../../../scenarios/reload-nxdomain.toml"),
    ),
    (
        "restart-nxdomain",
        include_str!("../../../scenarios/restart-nxdomain.toml"),
    ),
    ("outlier", include_str!("../../../scenarios/outlier.toml")),
    ("demo", include_str!("../../../scenarios/demo.toml")),
];

/// The ids of the built-in scenarios.
pub fn names() -> Vec<&'static str> {
    FILES.iter().map(|(n, _)| *n).collect()
}

/// Parse a built-in scenario by id.
pub fn get(name: &str) -> anyhow::Result<Scenario> {
    let (file, text) = FILES.iter().find(|(n, _)| *n == name).ok_or_else(|| {
        anyhow::anyhow!(
            "no built-in scenario `{name}` (see `resolvelab run --list`; a path to a .toml file also works)"
        )
    })?;
    Scenario::from_toml(text, &format!("scenarios/{file}.toml"))
}

/// Every built-in scenario, parsed.
pub fn all() -> anyhow::Result<Vec<Scenario>> {
    names().into_iter().map(get).collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_builtin_parses_and_names_match_files() {
        for (file, _) in super::FILES {
            let sc = super::get(file).unwrap();
            assert_eq!(&sc.name, file, "the id is the file name");
            for v in sc.variant_names() {
                sc.variant(&v).unwrap();
            }
        }
    }
}
