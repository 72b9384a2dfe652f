//! nginx versions: `1.28.3`, found in `nginx -V` / `nginx -v` output — one type for the lab's
//! nginx, the linter's version-dependent rules and the checker's "can this nginx race?".

use std::fmt;

/// An nginx core version `major.minor.patch`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Version(pub u32, pub u32, pub u32);

/// The first open-source nginx with `server … resolve` in `upstream` — and so with the
/// peer-generation check (DOMAIN.md F4); older versions cannot show a generation race.
pub const RESOLVE_SINCE: Version = Version(1, 27, 3);

/// The first nginx whose upstreams keep idle connections by default (`keepalive 32`, local)
/// and speak HTTP/1.1 to them: before it, an upstream without `keepalive` opens a connection
/// per request, and `keepalive 0` is refused; from it on, `keepalive 0` turns the cache off.
pub const KEEPALIVE_DEFAULT_SINCE: Version = Version(1, 29, 7);

impl Version {
    /// Parses `1.28.3` (a missing patch is 0; a fourth component, as in OpenResty's
    /// `1.25.3.1`, is ignored).
    pub fn parse(s: &str) -> Option<Version> {
        let mut it = s.trim().split('.');
        let major = it.next()?.parse().ok()?;
        let minor = it.next()?.parse().ok()?;
        let patch = match it.next() {
            Some(p) => p.parse().ok()?,
            None => 0,
        };
        Some(Version(major, minor, patch))
    }

    /// Finds the nginx core version in `nginx -V` / `nginx -v` output
    /// (`nginx version: nginx/1.28.3`, `openresty/1.25.3.1`, `Angie/1.8.0 (based on nginx/1.27.4)`).
    pub fn from_nginx_v(output: &str) -> Option<Version> {
        for key in ["nginx/", "openresty/"] {
            if let Some(i) = output.find(key) {
                let rest = &output[i + key.len()..];
                let end = rest
                    .find(|c: char| !(c.is_ascii_digit() || c == '.'))
                    .unwrap_or(rest.len());
                if let Some(v) = Version::parse(rest[..end].trim_end_matches('.')) {
                    return Some(v);
                }
            }
        }
        None
    }

    /// Does this version have `server … resolve` and the generation check?
    pub fn has_resolve(self) -> bool {
        self >= RESOLVE_SINCE
    }
}

/// What a build's configure flags change in the structures the linter sizes: `nginx -V`'s
/// `configure arguments:`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BuildFlags {
    /// `--with-http_ssl_module`: a peer keeps its SSL session.
    pub http_ssl: bool,
    /// `--with-compat` (nginx.org's and Debian's packages, the official Docker image): every
    /// optional field, and a reserve for dynamic modules, is in the structures.
    pub compat: bool,
}

impl BuildFlags {
    /// Reads the `configure arguments:` line of `nginx -V` output (none: no such line).
    pub fn from_nginx_v(output: &str) -> Option<BuildFlags> {
        let args = output
            .lines()
            .find_map(|l| l.trim().strip_prefix("configure arguments:"))?;
        let has = |flag: &str| args.split_whitespace().any(|a| a == flag);
        Some(BuildFlags {
            http_ssl: has("--with-http_ssl_module"),
            compat: has("--with-compat"),
        })
    }
}

impl fmt::Display for BuildFlags {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match (self.compat, self.http_ssl) {
            (true, _) => "compat",
            (false, true) => "ssl",
            (false, false) => "plain",
        })
    }
}

impl std::str::FromStr for BuildFlags {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "compat" => Ok(BuildFlags {
                http_ssl: true,
                compat: true,
            }),
            "ssl" => Ok(BuildFlags {
                http_ssl: true,
                compat: false,
            }),
            "plain" => Ok(BuildFlags {
                http_ssl: false,
                compat: false,
            }),
            _ => Err(format!(
                "\"{s}\" is not a build: use compat (--with-compat, as nginx.org's and Debian's packages), ssl (--with-http_ssl_module without --with-compat) or plain (neither)"
            )),
        }
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.0, self.1, self.2)
    }
}

impl std::str::FromStr for Version {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Version::parse(s).ok_or_else(|| format!("\"{s}\" is not an nginx version like 1.28.3"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn build_flags_are_read_from_nginx_v() {
        let debian = "nginx version: nginx/1.22.1\nbuilt with OpenSSL 3.0.9\nconfigure arguments: --with-cc-opt='-g -O2' --prefix=/usr/share/nginx --with-compat --with-pcre-jit --with-http_ssl_module --with-http_v2_module";
        assert_eq!(
            BuildFlags::from_nginx_v(debian),
            Some(BuildFlags {
                http_ssl: true,
                compat: true
            })
        );
        let lab = "nginx version: nginx/1.28.3\nconfigure arguments: --prefix=/x --without-http_gzip_module";
        assert_eq!(
            BuildFlags::from_nginx_v(lab),
            Some("plain".parse().unwrap())
        );
        assert_eq!(
            BuildFlags::from_nginx_v("nginx version: nginx/1.28.3"),
            None
        );
        assert!("openssl".parse::<BuildFlags>().is_err());
    }

    #[test]
    fn versions_parse_and_compare() {
        assert_eq!(Version::parse("1.28.3"), Some(Version(1, 28, 3)));
        assert_eq!(Version::parse("1.27"), Some(Version(1, 27, 0)));
        assert_eq!(Version::parse("x"), None);
        assert!(Version(1, 27, 3) > Version(1, 26, 9));
        assert!(!Version(1, 26, 2).has_resolve() && Version(1, 27, 3).has_resolve());
        assert_eq!(
            Version::from_nginx_v("nginx version: nginx/1.28.3\nbuilt by gcc"),
            Some(Version(1, 28, 3))
        );
        assert_eq!(
            Version::from_nginx_v("nginx version: openresty/1.25.3.1"),
            Some(Version(1, 25, 3))
        );
        assert_eq!(
            Version::from_nginx_v("nginx version: Angie/1.8.0 (based on nginx/1.27.4)"),
            Some(Version(1, 27, 4))
        );
        assert_eq!("1.2.x".parse::<Version>().ok(), None);
    }
}
