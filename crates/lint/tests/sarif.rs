//! SARIF output validated against the vendored SARIF 2.1.0 JSON schema (see `sarif/README.md`).

use resolvelab_lint::{LintOptions, lint_paths, sarif_value};
use serde_json::Value;
use std::path::Path;

const SCHEMA_URL: &str = "https://json.schemastore.org/sarif-2.1.0-rtm.5.json";

fn validator() -> (boon::Schemas, boon::SchemaIndex) {
    let text = include_str!("sarif/sarif-2.1.0-rtm.5.json");
    let schema: Value = serde_json::from_str(text).expect("schema is JSON");
    let mut schemas = boon::Schemas::new();
    let mut compiler = boon::Compiler::new();
    compiler.enable_format_assertions();
    compiler
        .add_resource(SCHEMA_URL, schema)
        .expect("schema loads");
    let index = compiler
        .compile(SCHEMA_URL, &mut schemas)
        .expect("schema compiles");
    (schemas, index)
}

fn sarif_of(case: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/lint-corpus")
        .join(case);
    let input = ["nginx.conf", "nginx-T.txt"]
        .iter()
        .map(|n| path.join(n))
        .find(|p| p.is_file())
        .unwrap();
    let report = lint_paths(&[input], &LintOptions::default()).unwrap();
    sarif_value(&report)
}

#[test]
fn sarif_output_is_valid_against_the_2_1_0_schema() {
    let (schemas, index) = validator();
    for case in [
        "seed-001-problem",
        "suppressions",
        "nginx-T",
        "seed-001-recommended",
    ] {
        let sarif = sarif_of(case);
        if let Err(e) = schemas.validate(&sarif, index) {
            panic!("{case}: {e:#}");
        }
    }
}

#[test]
fn sarif_carries_rules_locations_and_suppressions() {
    let sarif = sarif_of("suppressions");
    assert_eq!(sarif["version"], "2.1.0");
    let run = &sarif["runs"][0];
    let rules = run["tool"]["driver"]["rules"].as_array().unwrap();
    assert_eq!(rules.len(), resolvelab_lint::RULES.len());
    let results = run["results"].as_array().unwrap();
    let open: Vec<&Value> = results
        .iter()
        .filter(|r| r.get("suppressions").is_none())
        .collect();
    assert_eq!(open.len(), 1);
    assert_eq!(open[0]["ruleId"], "resolve-single-name");
    let idx = open[0]["ruleIndex"].as_u64().unwrap() as usize;
    assert_eq!(rules[idx]["id"], "resolve-single-name");
    assert_eq!(
        open[0]["locations"][0]["physicalLocation"]["region"]["startLine"],
        14
    );
    assert_eq!(
        open[0]["properties"]["reproduce"],
        "resolvelab run generation-race"
    );
    let silenced = results.len() - open.len();
    assert_eq!(silenced, 4);
    assert!(results.iter().any(|r| {
        r["suppressions"][0]["justification"]
            .as_str()
            .is_some_and(|j| j.contains("NET-42"))
    }));
    let dump = sarif_of("nginx-T");
    let uri = &dump["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]
        ["uri"];
    assert!(
        uri.as_str().unwrap().starts_with("file:///etc/nginx/"),
        "{uri}"
    );
}

#[test]
fn the_validator_rejects_broken_sarif() {
    // Proves the schema test can fail: a level SARIF does not define, and a missing message.
    let (schemas, index) = validator();
    let mut sarif = sarif_of("seed-001-problem");
    sarif["runs"][0]["results"][0]["level"] = "fatal".into();
    assert!(schemas.validate(&sarif, index).is_err());
    let mut sarif = sarif_of("seed-001-problem");
    sarif["runs"][0]["results"][0]
        .as_object_mut()
        .unwrap()
        .remove("message");
    assert!(schemas.validate(&sarif, index).is_err());
}
