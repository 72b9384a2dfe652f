//! The HTTP control API over a set of named proxies (Toxiproxy-like):
//!
//! | method | path | effect |
//! |---|---|---|
//! | GET | `/proxies` | every proxy with its counters and faults |
//! | GET | `/proxies/{p}` | one proxy |
//! | GET | `/proxies/{p}/faults` | its faults with hit counters |
//! | POST | `/proxies/{p}/faults` | add a fault; body = spec text (`latency:delay=200ms`) |
//! | DELETE | `/proxies/{p}/faults` | remove all its faults |
//! | DELETE | `/proxies/{p}/faults/{name}` | remove one fault |
//! | POST | `/reset` | remove every fault of every proxy |
//! | GET | `/metrics` | Prometheus text format |

use crate::proxy::ProxyHandle;
use axum::Router;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use resolvelab_core::text::Exposition;
use std::collections::BTreeMap;
use std::sync::Arc;
use tokio::net::TcpListener;

/// Named proxies under one control API.
#[derive(Default, Clone)]
pub struct ProxySet {
    proxies: Arc<std::sync::RwLock<BTreeMap<String, ProxyHandle>>>,
}

impl ProxySet {
    /// An empty set.
    pub fn new() -> ProxySet {
        ProxySet::default()
    }

    /// Add a running proxy.
    pub fn insert(&self, p: ProxyHandle) {
        self.proxies
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert(p.name().to_string(), p);
    }

    /// One proxy by name.
    pub fn get(&self, name: &str) -> Option<ProxyHandle> {
        self.proxies
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(name)
            .cloned()
    }

    /// Every proxy, by name.
    pub fn all(&self) -> Vec<ProxyHandle> {
        self.proxies
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .cloned()
            .collect()
    }

    /// Shut every proxy down.
    pub async fn shutdown(&self) {
        for p in self.all() {
            p.shutdown().await;
        }
    }

    /// Prometheus text exposition of every proxy and fault counter, one family at a time.
    pub fn metrics(&self) -> String {
        let stats: Vec<_> = self.all().iter().map(|p| p.stats()).collect();
        let mut m = Exposition::default();
        type Of = fn(&crate::ProxyStats) -> u64;
        let per_proxy: [(&str, &str, Of); 3] = [
            ("resolvelab_proxy_connections_total", "counter", |s| {
                s.connections
            }),
            ("resolvelab_proxy_connections_open", "gauge", |s| s.open),
            ("resolvelab_proxy_connect_errors_total", "counter", |s| {
                s.connect_errors
            }),
        ];
        for (name, kind, of) in per_proxy {
            m.family(name, kind, None);
            for s in &stats {
                m.sample(name, &[("proxy", &s.name)], of(s));
            }
        }
        let bytes = "resolvelab_proxy_bytes_total";
        m.family(bytes, "counter", None);
        for s in &stats {
            for (dir, v) in [
                ("upstream", s.bytes_upstream),
                ("downstream", s.bytes_downstream),
            ] {
                m.sample(bytes, &[("proxy", &s.name), ("direction", dir)], v);
            }
        }
        type FaultOf = fn(&crate::ToxicStats) -> u64;
        let per_fault: [(&str, FaultOf); 3] = [
            ("resolvelab_proxy_fault_hits_total", |f| f.hits),
            ("resolvelab_proxy_fault_bytes_total", |f| f.bytes),
            ("resolvelab_proxy_fault_chunks_total", |f| f.chunks),
        ];
        for (name, of) in per_fault {
            m.family(name, "counter", None);
            for s in &stats {
                for f in &s.faults {
                    let l = [
                        ("proxy", s.name.as_str()),
                        ("fault", f.name.as_str()),
                        ("kind", f.kind.as_str()),
                        ("direction", f.direction.as_str()),
                    ];
                    m.sample(name, &l, of(f));
                }
            }
        }
        m.finish()
    }
}

fn not_found(p: &str) -> Response {
    (StatusCode::NOT_FOUND, format!("no proxy named `{p}`\n")).into_response()
}

/// The router; mount it on any listener.
pub fn router(set: ProxySet) -> Router {
    Router::new()
        .route("/proxies", get(list))
        .route("/proxies/{p}", get(one))
        .route("/proxies/{p}/faults", get(faults).post(add).delete(clear))
        .route("/proxies/{p}/faults/{name}", delete(remove))
        .route("/reset", post(reset))
        .route("/metrics", get(metrics))
        .with_state(set)
}

/// Serve the control API on `listener` until the task is aborted.
pub fn serve(set: ProxySet, listener: TcpListener) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let _ = axum::serve(listener, router(set)).await;
    })
}

async fn list(State(set): State<ProxySet>) -> Response {
    let all: Vec<_> = set.all().iter().map(|p| p.stats()).collect();
    axum::Json(all).into_response()
}

async fn one(State(set): State<ProxySet>, Path(p): Path<String>) -> Response {
    match set.get(&p) {
        Some(h) => axum::Json(h.stats()).into_response(),
        None => not_found(&p),
    }
}

async fn faults(State(set): State<ProxySet>, Path(p): Path<String>) -> Response {
    match set.get(&p) {
        Some(h) => axum::Json(h.faults()).into_response(),
        None => not_found(&p),
    }
}

async fn add(State(set): State<ProxySet>, Path(p): Path<String>, body: String) -> Response {
    let Some(h) = set.get(&p) else {
        return not_found(&p);
    };
    resolvelab_inject::control::add_fault(body, |spec| h.add_fault_str(spec))
}

async fn clear(State(set): State<ProxySet>, Path(p): Path<String>) -> Response {
    match set.get(&p) {
        Some(h) => {
            h.clear_faults();
            StatusCode::NO_CONTENT.into_response()
        }
        None => not_found(&p),
    }
}

async fn remove(State(set): State<ProxySet>, Path((p, name)): Path<(String, String)>) -> Response {
    let Some(h) = set.get(&p) else {
        return not_found(&p);
    };
    if h.remove_fault(&name) {
        StatusCode::NO_CONTENT.into_response()
    } else {
        (
            StatusCode::NOT_FOUND,
            format!("proxy `{p}` has no fault named `{name}`\n"),
        )
            .into_response()
    }
}

async fn reset(State(set): State<ProxySet>) -> Response {
    for p in set.all() {
        p.clear_faults();
    }
    StatusCode::NO_CONTENT.into_response()
}

async fn metrics(State(set): State<ProxySet>) -> Response {
    (
        [(
            axum::http::header::CONTENT_TYPE,
            "text/plain; version=0.0.4",
        )],
        set.metrics(),
    )
        .into_response()
}
