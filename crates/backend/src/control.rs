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
use resolvelab_core::text::Exposition;

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
    let b = s.name.as_str();
    let mut m = Exposition::default();
    let one = |m: &mut Exposition, name: &str, kind: &str, v: &dyn std::fmt::Display| {
        m.family(name, kind, None);
        m.sample(name, &[("backend", b)], v);
    };
    m.family("resolvelab_backend_requests_total", "counter", None);
    for (code, n) in &s.statuses {
        let code = code.to_string();
        m.sample(
            "resolvelab_backend_requests_total",
            &[("backend", b), ("status", &code)],
            n,
        );
    }
    one(
        &mut m,
        "resolvelab_backend_connections_total",
        "counter",
        &s.connections,
    );
    one(
        &mut m,
        "resolvelab_backend_connections_open",
        "gauge",
        &s.open,
    );
    m.family("resolvelab_backend_fault_hits_total", "counter", None);
    for f in &s.faults {
        let l = [
            ("backend", b),
            ("fault", f.name.as_str()),
            ("kind", f.kind.as_str()),
        ];
        m.sample("resolvelab_backend_fault_hits_total", &l, f.hits);
    }
    let reclaims: Vec<_> = s.faults.iter().filter(|f| f.kind == "reclaim").collect();
    if !reclaims.is_empty() {
        m.family("resolvelab_backend_reclaim_caught_total", "counter", None);
        for f in reclaims {
            let l = [("backend", b), ("fault", f.name.as_str())];
            m.sample("resolvelab_backend_reclaim_caught_total", &l, f.caught);
        }
    }
    if let Some(p) = &s.pool {
        one(&mut m, "resolvelab_backend_pool_size", "gauge", &p.size);
        one(&mut m, "resolvelab_backend_pool_in_use", "gauge", &p.in_use);
        one(
            &mut m,
            "resolvelab_backend_pool_waiters",
            "gauge",
            &p.waiters,
        );
        one(
            &mut m,
            "resolvelab_backend_pool_timeouts_total",
            "counter",
            &p.timeouts,
        );
        let h = "resolvelab_backend_pool_wait_seconds";
        m.family(h, "histogram", None);
        let count = p.acquired + p.timeouts;
        for (le, n) in &p.wait_buckets {
            let le = le.to_string();
            m.sample(&format!("{h}_bucket"), &[("backend", b), ("le", &le)], n);
        }
        m.sample(
            &format!("{h}_bucket"),
            &[("backend", b), ("le", "+Inf")],
            count,
        );
        m.sample(&format!("{h}_sum"), &[("backend", b)], p.wait_sum_s);
        m.sample(&format!("{h}_count"), &[("backend", b)], count);
        let wait_max = p.wait_us_max as f64 / 1e6;
        one(
            &mut m,
            "resolvelab_backend_pool_wait_max_seconds",
            "gauge",
            &wait_max,
        );
    }
    m.finish()
}
