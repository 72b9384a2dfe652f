//! Log lines are attacker-controlled text: every report must show them as text, never markup.

use resolvelab_diagnose::{Options, diagnose};
use resolvelab_history::logformat::LogFormat;
use resolvelab_report::{Format, render_diagnosis};

#[test]
fn evidence_is_escaped_in_html_and_markdown_tables() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("access.log");
    let e = dir.path().join("error.log");
    let req = "GET /<script>alert(1)</script>|x HTTP/1.1";
    let mut acc = String::new();
    for i in 0..20 {
        acc += &format!(
            "1796018401.{:03} 502 \"be\" \"502\" 0.000 GET {i} 1 \"-\" \"-\" \"{req}\" 127.0.0.1\n",
            i * 10
        );
    }
    std::fs::write(&a, acc).unwrap();
    std::fs::write(
        &e,
        format!("2026/11/30 06:00:01 [error] 1#1: *0 no live upstreams while connecting to upstream, client: 127.0.0.1, server: , request: \"{req}\", upstream: \"http://be/\", host: \"x\"\n"),
    )
    .unwrap();
    let mut o = Options::new(vec![a], vec![e]);
    o.log_format = LogFormat::lab();
    o.tz_offset_s = Some(0);
    let d = diagnose(&o).unwrap();
    assert_eq!(d.nlu.total, 20);
    assert_eq!(d.nlu.paired, 1);
    let html = render_diagnosis(&d, Format::Html).unwrap();
    assert!(!html.contains("<script"), "log text became markup");
    assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
    let md = render_diagnosis(&d, Format::Md).unwrap();
    assert!(md.contains("# resolvelab diagnosis"));
    // In Markdown the evidence is text: every table row keeps its header's cell count although
    // the request carries a `|`, and at least one row shows that request.
    let mut shown = 0;
    for table in md.split("\n\n").filter(|b| b.starts_with('|')) {
        let rows: Vec<&str> = table.lines().collect();
        let width = unescaped_pipes(rows[0]);
        for r in &rows {
            assert_eq!(unescaped_pipes(r), width, "row breaks its table: {r}");
            if r.contains("alert(1)") {
                assert!(r.contains(r"</script>\|x"), "unescaped `|` in {r}");
                shown += 1;
            }
        }
    }
    assert!(
        shown > 0,
        "the evidence line is in no Markdown table:\n{md}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&render_diagnosis(&d, Format::Json).unwrap()).unwrap();
    assert_eq!(json["schema"], "resolvelab.diagnosis/v1");
    assert_eq!(json["status"], "completed");
}

/// The `|` of a Markdown row that delimit cells (not escaped as `\|`).
fn unescaped_pipes(row: &str) -> usize {
    let b = row.as_bytes();
    (0..b.len())
        .filter(|&i| b[i] == b'|' && (i == 0 || b[i - 1] != b'\\'))
        .count()
}
