//! The address policy: generated traffic goes only to loopback unless the user says otherwise.
//!
//! This module only *decides*; it never opens a socket, so its tests can cover non-loopback
//! addresses without sending a packet anywhere.

use std::net::{IpAddr, SocketAddr};

/// Is this address on the loopback range (127.0.0.0/8 or ::1, including IPv4-mapped loopback)?
pub fn is_loopback(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_loopback(),
        IpAddr::V6(v6) => {
            v6.is_loopback() || v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
        }
    }
}

/// Allow `addr` as a traffic target: loopback always, anything else only with `allow_remote`.
pub fn check_target(addr: SocketAddr, allow_remote: bool) -> Result<(), String> {
    if is_loopback(addr.ip()) || allow_remote {
        Ok(())
    } else {
        Err(format!(
            "refusing to send traffic to {addr}: resolvelab only targets loopback \
             (127.0.0.0/8, ::1) unless you pass --allow-remote"
        ))
    }
}

/// Check a host name or literal from a URL: `localhost` and loopback literals pass; any other
/// name is refused without `allow_remote` (we never resolve it to find out).
pub fn check_host(host: &str, allow_remote: bool) -> Result<(), String> {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    if bare.eq_ignore_ascii_case("localhost") {
        return Ok(());
    }
    match bare.parse::<IpAddr>() {
        Ok(ip) => {
            check_target(SocketAddr::new(ip, 0), allow_remote).map_err(|e| e.replace(":0", ""))
        }
        Err(_) if allow_remote => Ok(()),
        Err(_) => Err(format!(
            "refusing to send traffic to `{host}`: only loopback addresses (127.0.0.0/8, ::1, \
             localhost) are allowed unless you pass --allow-remote"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_only() {
        for ok in [
            "127.0.0.1:80",
            "127.0.0.30:8080",
            "[::1]:53",
            "[::ffff:127.0.0.5]:1",
        ] {
            assert!(check_target(ok.parse().unwrap(), false).is_ok(), "{ok}");
        }
        for bad in [
            "10.0.0.1:80",
            "192.168.1.1:80",
            "8.8.8.8:53",
            "[2001:db8::1]:80",
            "0.0.0.0:80",
        ] {
            assert!(check_target(bad.parse().unwrap(), false).is_err(), "{bad}");
            assert!(check_target(bad.parse().unwrap(), true).is_ok(), "{bad}");
        }
        assert!(check_host("localhost", false).is_ok());
        assert!(check_host("[::1]", false).is_ok());
        assert!(check_host("example.com", false).is_err());
        assert!(
            check_host("172.16.0.1", false)
                .unwrap_err()
                .contains("--allow-remote")
        );
    }
}
