//! The HTTP endpoints: `/metrics` (OpenMetrics text, what Prometheus scrapes), `/healthz` and
//! `/report` (the newest window's HTML report).

use crate::metrics::{Shared, encode, registry};
use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use std::sync::{Arc, Mutex};

/// The newest HTML report, set by the watcher.
pub type Report = Arc<Mutex<Option<String>>>;

#[derive(Clone)]
struct Ctx {
    registry: Arc<prometheus_client::registry::Registry>,
    report: Report,
}

async fn metrics(State(c): State<Ctx>) -> Response {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        encode(&c.registry),
    )
        .into_response()
}

async fn report(State(c): State<Ctx>) -> Response {
    match c.report.lock().expect("not poisoned").clone() {
        Some(html) => ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], html).into_response(),
        None => (
            StatusCode::NOT_FOUND,
            "no failure seen yet: the report is written when the first incident opens\n",
        )
            .into_response(),
    }
}

/// The router of the endpoints.
pub fn router(shared: Shared, report_html: Report) -> Router {
    let ctx = Ctx {
        registry: Arc::new(registry(shared)),
        report: report_html,
    };
    Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/metrics", get(metrics))
        .route("/report", get(report))
        .with_state(ctx)
}

/// Serve on a bound listener on a thread of its own (the watcher's loop stays synchronous).
pub fn spawn(
    listener: std::net::TcpListener,
    shared: Shared,
    report_html: Report,
) -> anyhow::Result<()> {
    listener.set_nonblocking(true)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    std::thread::Builder::new()
        .name("watch-http".into())
        .spawn(move || {
            rt.block_on(async move {
                let Ok(l) = tokio::net::TcpListener::from_std(listener) else {
                    return;
                };
                if let Err(e) = axum::serve(l, router(shared, report_html)).await {
                    resolvelab_core::progress::line(format!("watch: HTTP server stopped: {e}"));
                }
            })
        })?;
    Ok(())
}
