//! The backend control API (on `--control ADDR`):
//!
//! | method | path | effect |
//! |---|---|---|
//! | GET | `/metrics` | Prometheus text: requests, connections, fault hits, pool gauges and wait histogram |
//! | GET | `/stats` | the same as JSON |
//! | GET | `/faults` | faults with hit counters |
//! | POST | `/faults` | add a fault; body = spec text (`reclaim:toxicity=0.3`) or `{"spec": …}` |
//! | DELETE | `/faults` | remove every fault |
//! | DELETE | `/faults/{name}` | remove one fault |

use crate::server::{BackendHandle, BackendStats};
use axum::Router;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get};
use std::fmt::Write as _;

pub(crate) fn router(h: BackendHandle) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/stats", get(stats))
        .route("/health", get(|| async { "ok\n" }))
        .route("/faults", get(faults).post(add).delete(clear))
        .route("/faults/{name}", delete(remove))
        .with_state(h)
}

async fn metrics(State(h): State<BackendHandle>) -> Response {
    (
        [(
            axum::http::header::CONTENT_TYPE,
            "text/plain; version=0.0.4",
        )],
        h.metrics_text(),
    )
        .into_response()
}

async fn stats(State(h): State<BackendHandle>) -> Response {
    axum::Json(h.stats()).into_response()
}

async fn faults(State(h): State<BackendHandle>) -> Response {
    axum::Json(h.faults()).into_response()
}

async fn add(State(h): State<BackendHandle>, body: String) -> Response {
    resolvelab_inject::control::add_fault(body, |spec| h.add_fault_str(spec))
}

async fn clear(State(h): State<BackendHandle>) -> Response {
    h.clear_faults();
    StatusCode::NO_CONTENT.into_response()
}

async fn remove(State(h): State<BackendHandle>, Path(name): Path<String>) -> Response {
    if h.remove_fault(&name) {
        StatusCode::NO_CONTENT.into_response()
    } else {
        (StatusCode::NOT_FOUND, format!("no fault named `{name}`\n")).into_response()
    }
}

/// Render stats in the Prometheus text format.
pub(crate) fn prometheus(s: &BackendStats) -> String {
    let b = &s.name;
    let mut o = String::new();
    let _ = writeln!(o, "# TYPE resolvelab_backend_requests_total counter");
    for (code, n) in &s.statuses {
        let _ = writeln!(
            o,
            "resolvelab_backend_requests_total{{backend=\"{b}\",status=\"{code}\"}} {n}"
        );
    }
    let _ = writeln!(o, "# TYPE resolvelab_backend_connections_total counter");
    let _ = writeln!(
        o,
        "resolvelab_backend_connections_total{{backend=\"{b}\"}} {}",
        s.connections
    );
    let _ = writeln!(o, "# TYPE resolvelab_backend_connections_open gauge");
    let _ = writeln!(
        o,
        "resolvelab_backend_connections_open{{backend=\"{b}\"}} {}",
        s.open
    );
    let _ = writeln!(o, "# TYPE resolvelab_backend_fault_hits_total counter");
    for f in &s.faults {
        let _ = writeln!(
            o,
            "resolvelab_backend_fault_hits_total{{backend=\"{b}\",fault=\"{}\",kind=\"{}\"}} {}",
            f.name, f.kind, f.hits
        );
        if f.kind == "reclaim" {
            let _ = writeln!(
                o,
                "resolvelab_backend_reclaim_caught_total{{backend=\"{b}\",fault=\"{}\"}} {}",
                f.name, f.caught
            );
        }
    }
    if let Some(p) = &s.pool {
        let _ = writeln!(o, "# TYPE resolvelab_backend_pool_size gauge");
        let _ = writeln!(
            o,
            "resolvelab_backend_pool_size{{backend=\"{b}\"}} {}",
            p.size
        );
        let _ = writeln!(o, "# TYPE resolvelab_backend_pool_in_use gauge");
        let _ = writeln!(
            o,
            "resolvelab_backend_pool_in_use{{backend=\"{b}\"}} {}",
            p.in_use
        );
        let _ = writeln!(o, "# TYPE resolvelab_backend_pool_waiters gauge");
        let _ = writeln!(
            o,
            "resolvelab_backend_pool_waiters{{backend=\"{b}\"}} {}",
            p.waiters
        );
        let _ = writeln!(o, "# TYPE resolvelab_backend_pool_timeouts_total counter");
        let _ = writeln!(
            o,
            "resolvelab_backend_pool_timeouts_total{{backend=\"{b}\"}} {}",
            p.timeouts
        );
        let _ = writeln!(o, "# TYPE resolvelab_backend_pool_wait_seconds histogram");
        let count = p.acquired + p.timeouts;
        for (le, n) in &p.wait_buckets {
            let _ = writeln!(
                o,
                "resolvelab_backend_pool_wait_seconds_bucket{{backend=\"{b}\",le=\"{le}\"}} {n}"
            );
        }
        let _ = writeln!(
            o,
            "resolvelab_backend_pool_wait_seconds_bucket{{backend=\"{b}\",le=\"+Inf\"}} {count}"
        );
        let _ = writeln!(
            o,
            "resolvelab_backend_pool_wait_seconds_sum{{backend=\"{b}\"}} {}",
            p.wait_sum_s
        );
        let _ = writeln!(
            o,
            "resolvelab_backend_pool_wait_seconds_count{{backend=\"{b}\"}} {count}"
        );
        let _ = writeln!(o, "# TYPE resolvelab_backend_pool_wait_max_seconds gauge");
        let _ = writeln!(
            o,
            "resolvelab_backend_pool_wait_max_seconds{{backend=\"{b}\"}} {}",
            p.wait_us_max as f64 / 1e6
        );
    }
    o
}
