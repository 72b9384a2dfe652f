//! Five real configurations of `tests/lint-corpus/real/` planned by `verify`: their DNS-fed
//! targets (truth written from reading each file: an upstream's `server NAME` lines, a variable
//! `proxy_pass` with its `set`), and every event of every target a scenario the lab reads whose
//! rendered configuration names only loopback. Playing them on nginx is the CLI's test.

use resolvelab_verify::events::{self, Event, Settings};
use resolvelab_verify::find::Via;
use resolvelab_verify::{Request, prepare};
use std::path::{Path, PathBuf};

fn case(dir: &str) -> (PathBuf, Option<PathBuf>) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/lint-corpus/real")
        .join(dir);
    let truth: toml::Table =
        toml::from_str(&std::fs::read_to_string(root.join("truth.toml")).unwrap()).unwrap();
    let file = root.join(truth["file"].as_str().unwrap());
    let sysroot = truth
        .get("sysroot")
        .and_then(|s| s.as_str())
        .map(|s| root.join(s));
    (file, sysroot)
}

/// A target: its name, how its names become peers, whether nginx asks for them while it runs.
type Want = (&'static str, Via, bool);

#[test]
fn five_real_configurations_plan_into_scenarios_the_lab_accepts() {
    // (case, [(target, via, names resolved while running)]), read from the files.
    let truth: [(&str, Vec<Want>); 5] = [
        // `upstream relay { server relay:3000; }`, `upstream sentry { server web:9000; }`: names
        // resolved at start (Docker's embedded DNS).
        (
            "sentry-self-hosted",
            vec![
                ("relay", Via::Upstream, false),
                ("sentry", Via::Upstream, false),
            ],
        ),
        // nginx's own test: `server example.net:8080 resolve max_fails=0;`.
        (
            "nginx-tests-upstream-resolve",
            vec![("u", Via::Upstream, true)],
        ),
        (
            "django-on-docker",
            vec![("hello_django", Via::Upstream, false)],
        ),
        // conf.d/: `upstream backend { server piped:8080; }`, `upstream frontend { server piped-frontend:80; }`.
        (
            "piped-docker-upstreams",
            vec![
                ("backend", Via::Upstream, false),
                ("frontend", Via::Upstream, false),
            ],
        ),
        // `set $gateway_upstream gateway:8001; proxy_pass http://$gateway_upstream;` with a resolver,
        // and the same for provisioner and frontend.
        (
            "deer-flow-2026-05-variable",
            vec![
                ("gateway", Via::Variable, true),
                ("provisioner", Via::Variable, true),
                ("frontend", Via::Variable, true),
            ],
        ),
    ];
    for (dir, want) in truth {
        let (file, sysroot) = case(dir);
        let text = std::fs::read_to_string(&file).unwrap();
        let cfg = resolvelab_lint::load::load_text_in(
            &file.display().to_string(),
            text,
            file.parent(),
            sysroot.as_deref(),
        )
        .unwrap();
        let cfg = resolvelab_lint::in_context(cfg, resolvelab_lint::Context::Auto);
        let plans = prepare(&cfg, &Request::default());
        let got: Vec<(&str, Via, bool)> = plans
            .iter()
            .map(|p| {
                (
                    p.target.name.as_str(),
                    p.target.via,
                    p.target.asks_at_run_time(),
                )
            })
            .collect();
        assert_eq!(got, want, "{dir}");
        for p in &plans {
            let lab = p.lab.as_ref().unwrap_or_else(|e| panic!("{dir}: {e}"));
            assert!(!lab.changes.is_empty(), "{dir}: the lab changed nothing?");
            for e in Event::ALL {
                let toml = events::scenario(&p.target, lab, e, &Settings::default());
                let sc = resolvelab_scenario::Scenario::from_toml(&toml, "verify.toml")
                    .unwrap_or_else(|err| panic!("{dir} {}: {err:#}", e.id()));
                resolvelab_lab::judge::check_targets(&sc)
                    .unwrap_or_else(|err| panic!("{dir} {}: {err:#}", e.id()));
            }
        }
    }
}
