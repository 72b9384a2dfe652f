//! Property tests: the parser and the whole linter never panic, on random bytes, on random
//! nginx-like token soup, or on any truncation of real configurations.

use proptest::prelude::*;
use resolvelab_lint::{LintOptions, lint_text, parse::parse};

const REAL: &[&str] = &[
    include_str!("../../../tests/lint-corpus/seed-001-problem/nginx.conf"),
    include_str!("../../../tests/lint-corpus/suppressions/nginx.conf"),
    include_str!("../../../tests/lint-corpus/retry-shim-recursive-pos/nginx.conf"),
    include_str!("../../../tests/lint-corpus/zone-too-small-pos/nginx.conf"),
    include_str!("../../../tests/lint-corpus/nginx-T/nginx-T.txt"),
];

fn token() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("{".to_string()),
        Just("}".to_string()),
        Just(";".to_string()),
        Just("\"".to_string()),
        Just("'".to_string()),
        Just("\\".to_string()),
        Just("#".to_string()),
        Just("\n".to_string()),
        Just(" ".to_string()),
        Just("${".to_string()),
        Just("# resolvelab: ignore ".to_string()),
        Just("# configuration file /x/a.conf:\n".to_string()),
        Just("content_by_lua_block".to_string()),
        prop::sample::select(vec![
            "http",
            "upstream",
            "server",
            "location",
            "resolver",
            "zone",
            "resolve",
            "backup",
            "max_fails=0",
            "valid=30s",
            "error_page",
            "502",
            "@r",
            "proxy_pass",
            "http://be",
            "if",
            "($request_method",
            "return",
            "keepalive",
            "error_log",
            "recursive_error_pages",
            "on",
            "off",
            "proxy_next_upstream",
            "resolver_timeout",
            "30s",
            "be",
            "128k",
            "1",
        ])
        .prop_map(str::to_string),
        "[a-z0-9=:./@$-]{1,12}",
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, rng_seed: proptest::test_runner::RngSeed::Fixed(0x5eed_0001), ..ProptestConfig::default() })]

    #[test]
    fn parser_never_panics_on_random_text(s in "\\PC{0,400}") {
        let _ = parse(&s, 0, "fuzz");
    }

    #[test]
    fn linter_never_panics_on_token_soup(tokens in prop::collection::vec(token(), 0..120)) {
        let text = tokens.join(" ");
        if let Ok(report) = lint_text("fuzz.conf", text, &LintOptions::default()) {
            let _ = resolvelab_lint::render_text(&report);
            let _ = resolvelab_lint::render_sarif(&report);
        }
    }

    #[test]
    fn truncated_real_configs_never_panic(which in 0..REAL.len(), frac in 0.0f64..1.0) {
        // A cut anywhere in the file (a fraction of its length, moved back to a character
        // boundary): every case lints a real prefix, never the whole file by accident.
        let text = REAL[which];
        let mut cut = (frac * text.len() as f64) as usize;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        prop_assert!(cut < text.len());
        let head = text[..cut].to_string();
        if let Err(e) = lint_text("fuzz.conf", head, &LintOptions::default()) {
            prop_assert!(!e.to_string().contains('\n'));
        }
    }
}

#[test]
fn every_prefix_of_a_real_config_parses_or_fails_with_a_position() {
    let text = REAL[0];
    for cut in 0..=text.len() {
        match parse(&text[..cut], 0, "seed.conf") {
            Ok(_) => {}
            Err(e) => assert!(e.line >= 1 && e.col >= 1, "{e}"),
        }
    }
    assert!(parse(text, 0, "seed.conf").is_ok());
}
