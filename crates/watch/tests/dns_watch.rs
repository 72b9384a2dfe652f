//! `--dns-watch`: the watcher asks a real DNS authority (the lab's, on loopback) for a name's
//! answers all along; a changed answer is counted in `resolvelab_dns_answer_changes_total`,
//! and the checker reads the answers as its DNS log (parsed `dns` lines).

mod common;
use resolvelab_dns::{DnsConfig, DnsMode, DnsServer, NameConfig};
use resolvelab_watch::Watcher;
use resolvelab_watch::metrics::{encode, registry};
use std::time::{Duration, Instant};

#[test]
fn answer_changes_are_counted_and_read_as_the_dns_log() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let dns = rt
        .block_on(DnsServer::start(DnsConfig {
            listen: "127.0.0.1:0".parse().unwrap(),
            names: vec![NameConfig::parse_cli("app.test=static:127.0.0.20").unwrap()],
            ..DnsConfig::default()
        }))
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut template = resolvelab_diagnose::Options::new(Vec::new(), Vec::new());
    template.log_format = resolvelab_history::logformat::LogFormat::lab();
    template.tz_offset_s = Some(0);
    std::fs::write(dir.path().join("access.log"), "").unwrap();
    std::fs::write(dir.path().join("error.log"), "").unwrap();
    let mut cfg = common::config(dir.path(), &template);
    cfg.dns = Some(resolvelab_dns::watch::Watch {
        names: vec!["app.test".into()],
        server: dns.local_addr(),
        interval: Duration::from_millis(100),
        aaaa: false,
        ..Default::default()
    });
    let mut w = Watcher::new(cfg).unwrap();
    let changes = |w: &Watcher| {
        w.shared
            .lock()
            .unwrap()
            .dns_answer_changes
            .get("app.test")
            .copied()
            .unwrap_or(0)
    };
    // Bounded: the watcher asks ten times a second; 10 s is a broken authority.
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut changed = false;
    while Instant::now() < deadline && changes(&w) < 2 {
        w.step(Instant::now(), false).unwrap();
        if !changed && w.lines_read() >= 3 {
            dns.set_mode(
                "app.test",
                DnsMode::Static(vec!["127.0.0.21".parse().unwrap()]),
                None,
                false,
            )
            .unwrap();
            changed = true;
        } else if changed && changes(&w) == 1 {
            dns.set_mode(
                "app.test",
                DnsMode::Static(vec!["127.0.0.20".parse().unwrap()]),
                None,
                false,
            )
            .unwrap();
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(changes(&w), 2, "127.0.0.20 → .21 → .20");
    let text = encode(&registry(w.shared.clone()));
    assert!(
        text.contains("resolvelab_dns_answer_changes_total{name=\"app.test\"} 2"),
        "{text}"
    );
    let lines = &w.shared.lock().unwrap().totals().lines.clone();
    assert!(lines["dns"]["parsed"] >= 3, "{lines:?}");
    rt.block_on(dns.shutdown()).unwrap();
}
