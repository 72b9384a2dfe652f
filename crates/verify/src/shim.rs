//! The retry shim as a fix (the seed report's section 5-3): a request that fails with 502 is
//! sent once more through a named location, which picks a peer again in the upstream's current
//! generation — what rescues a generation-race failure — and only for idempotent methods (a
//! POST whose body may have reached the backend is not sent twice). The same shape as the lab
//! template's `retry_shim` (`lab::render`), written into the user's configuration.

use crate::edit::{line, word};
use resolvelab_lint::facts::proxy_target;
use resolvelab_lint::parse::Directive;

/// The named location the shim adds.
pub const NAME: &str = "@resolvelab_retry";

/// In every server with a location whose `proxy_pass` sends to `upstream`: that location gains
/// `error_page 502 = @resolvelab_retry;`, and the server the named location, guarded, with the
/// location's own `proxy_*` lines (a named location inherits only the server's).
pub fn add(http: &mut [Directive], upstream: &str) {
    for srv in http.iter_mut().filter(|d| d.name.value == "server") {
        let Some(kids) = srv.block.as_mut() else {
            continue;
        };
        let mut retry: Option<Directive> = None;
        for loc in kids.iter_mut().filter(|d| d.name.value == "location") {
            let Some(lk) = loc.block.as_mut() else {
                continue;
            };
            let Some(pass) = lk
                .iter()
                .find(|c| {
                    c.name.value == "proxy_pass"
                        && proxy_target(c).is_some_and(|t| t.eq_ignore_ascii_case(upstream))
                })
                .cloned()
            else {
                continue;
            };
            lk.retain(|c| c.name.value != "error_page");
            lk.push(line(&pass, "error_page", &["502", "=", NAME]));
            if retry.is_none() {
                let mut body: Vec<Directive> = vec![method_guard(&pass)];
                body.extend(
                    lk.iter()
                        .filter(|c| c.name.value.starts_with("proxy_"))
                        .cloned(),
                );
                retry = Some(Directive {
                    name: word("location"),
                    args: vec![word(NAME)],
                    block: Some(body),
                    ..pass.clone()
                });
            }
        }
        if let Some(r) = retry {
            kids.push(r);
        }
    }
}

/// Guard every named location that an `error_page 502` sends to and that proxies again.
pub fn guard(http: &mut [Directive]) {
    for srv in http.iter_mut().filter(|d| d.name.value == "server") {
        let Some(kids) = srv.block.as_mut() else {
            continue;
        };
        for loc in kids
            .iter_mut()
            .filter(|d| d.name.value == "location" && d.arg(0).is_some_and(|a| a.starts_with('@')))
        {
            let Some(lk) = loc.block.as_mut() else {
                continue;
            };
            let Some(pass) = lk.iter().find(|c| c.name.value == "proxy_pass").cloned() else {
                continue;
            };
            lk.insert(0, method_guard(&pass));
        }
    }
}

/// `if ($request_method !~ ^(GET|HEAD|OPTIONS)$) { return 502; }`.
fn method_guard(near: &Directive) -> Directive {
    Directive {
        name: word("if"),
        args: ["($request_method", "!~", "^(GET|HEAD|OPTIONS)$)"]
            .iter()
            .map(|a| word(a))
            .collect(),
        block: Some(vec![line(near, "return", &["502"])]),
        ..near.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shim_and_its_guard_as_nginx_reads_them() {
        let text = "http { upstream be { zone be 64k; server a.example resolve; }\n server { location / { proxy_pass http://be; proxy_http_version 1.1; } } }";
        let mut cfg = resolvelab_lint::load::load_text("nginx.conf", text.into(), None).unwrap();
        let http = cfg.root[0].block.as_mut().unwrap();
        add(http, "be");
        let mut out = String::new();
        crate::rewrite::print(http, 0, &mut out);
        assert!(out.contains("error_page 502 = @resolvelab_retry;"), "{out}");
        assert!(out.contains("location @resolvelab_retry {"), "{out}");
        assert!(
            out.contains("if ($request_method !~ ^(GET|HEAD|OPTIONS)$) {"),
            "{out}"
        );
        assert!(out.matches("proxy_http_version 1.1;").count() == 2, "{out}");
        // What the shim writes reads back as a retry shim with its guard: lint is silent.
        let report = resolvelab_lint::lint_text(
            "nginx.conf",
            format!("http {{\n{out}}}\n"),
            &Default::default(),
        )
        .unwrap();
        assert!(
            !report
                .findings
                .iter()
                .any(|f| f.rule.starts_with("retry-shim")),
            "{:?}",
            report.findings
        );
    }
}
