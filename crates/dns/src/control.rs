//! The control API (HTTP JSON on loopback) and its client.
//!
//! | method & path | body | answer |
//! |---|---|---|
//! | `GET /names` | | `{"names": [NameStatus…]}` |
//! | `GET /names/{name}` | | `NameStatus` |
//! | `PUT /names/{name}` | `{"mode": "nxdomain", "for": "2s", "align": "next-query"}` | `NameStatus` |
//! | `PUT /names/{name}/views/{view}` | `{"mode": "static:127.0.0.30"}` (`default`: as the name) | `NameStatus` |
//! | `DELETE /names/{name}/views/{view}` | | `NameStatus` (the view answers as the name again) |
//! | `GET /metrics` | | Prometheus text |
//! | `GET /healthz` | | `ok` |
//!
//! With a token, every request but `/healthz` needs `Authorization: Bearer TOKEN`.
//! Errors are `{"error": "…"}` with status 400 (bad mode), 401 (token) or 404 (unknown name).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use axum::Router;
use axum::extract::{Path, Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, put};
use http_body_util::{BodyExt, Full};
use serde::{Deserialize, Serialize};
use tokio::net::TcpListener;

use crate::engine::{Engine, NameStatus, SetError};
use crate::zone::{Align, ModeSpec};

/// Body of `PUT /names/{name}`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct SetRequest {
    /// A mode (`alternate:…`, `nxdomain`, `delay:200ms`, …) or `default`.
    pub mode: String,
    /// Revert after this long (`2s`, `500ms`).
    #[serde(rename = "for", default, skip_serializing_if = "Option::is_none")]
    pub for_: Option<String>,
    /// `next-query` to take effect exactly at the next query for the name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub align: Option<String>,
}

/// Body of `GET /names`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct NameList {
    /// Every name, sorted.
    pub names: Vec<NameStatus>,
}

#[derive(Clone)]
struct Ctl {
    engine: Arc<Engine>,
    token: Option<Arc<str>>,
}

fn err(status: StatusCode, msg: impl Into<String>) -> Response {
    (
        status,
        axum::Json(serde_json::json!({ "error": msg.into() })),
    )
        .into_response()
}

/// A request body read as `T`, or why not, saying what it should look `like` (a 400).
fn json_body<T: serde::de::DeserializeOwned>(body: &[u8], like: &str) -> Result<T, String> {
    serde_json::from_slice(body).map_err(|e| format!("body must be JSON like {like}: {e}"))
}

async fn auth(State(ctl): State<Ctl>, req: Request, next: Next) -> Response {
    if let Some(tok) = &ctl.token
        && req.uri().path() != "/healthz"
    {
        let given = req
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "));
        if given != Some(&**tok) {
            return err(
                StatusCode::UNAUTHORIZED,
                "missing or wrong bearer token: pass --token (or RESOLVELAB_DNS_TOKEN)",
            );
        }
    }
    next.run(req).await
}

async fn list(State(ctl): State<Ctl>) -> Response {
    axum::Json(NameList {
        names: ctl.engine.list(),
    })
    .into_response()
}

async fn show(State(ctl): State<Ctl>, Path(name): Path<String>) -> Response {
    match ctl.engine.status(&name) {
        Some(s) => axum::Json(s).into_response(),
        None => err(StatusCode::NOT_FOUND, format!("unknown name `{name}`")),
    }
}

async fn set(
    State(ctl): State<Ctl>,
    Path(name): Path<String>,
    body: axum::body::Bytes,
) -> Response {
    let like = r#"{"mode": "nxdomain", "for": "2s", "align": "next-query"}"#;
    let req: SetRequest = match json_body(&body, like) {
        Ok(r) => r,
        Err(m) => return err(StatusCode::BAD_REQUEST, m),
    };
    let spec: ModeSpec = match req.mode.parse() {
        Ok(m) => m,
        Err(e) => return err(StatusCode::BAD_REQUEST, e),
    };
    let for_ = match req
        .for_
        .as_deref()
        .map(resolvelab_core::dur::parse)
        .transpose()
    {
        Ok(f) => f,
        Err(e) => return err(StatusCode::BAD_REQUEST, format!("`for`: {e}")),
    };
    let align: Align = match req.align.as_deref().unwrap_or("now").parse() {
        Ok(a) => a,
        Err(e) => return err(StatusCode::BAD_REQUEST, e),
    };
    match ctl.engine.set_mode(&name, spec, for_, align) {
        Ok(s) => axum::Json(s).into_response(),
        Err(SetError::UnknownName(m)) => err(StatusCode::NOT_FOUND, m),
        Err(SetError::Invalid(m)) => err(StatusCode::BAD_REQUEST, m),
    }
}

/// Body of `PUT /names/{name}/views/{view}`.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct ViewRequest {
    /// A mode, or `default` for the name's own answer.
    pub mode: String,
}

async fn set_view(
    State(ctl): State<Ctl>,
    Path((name, view)): Path<(String, u16)>,
    body: axum::body::Bytes,
) -> Response {
    let req: ViewRequest = match json_body(&body, r#"{"mode": "static:127.0.0.30"}"#) {
        Ok(r) => r,
        Err(m) => return err(StatusCode::BAD_REQUEST, m),
    };
    let mode = match req.mode.parse::<ModeSpec>() {
        Ok(ModeSpec::Default) => None,
        Ok(ModeSpec::DnsMode(m)) if !m.is_partial() => Some(m),
        Ok(ModeSpec::DnsMode(m)) => {
            return err(
                StatusCode::BAD_REQUEST,
                format!("`{m}` wraps no mode: a view's answer is a whole mode"),
            );
        }
        Err(e) => return err(StatusCode::BAD_REQUEST, e),
    };
    view_answer(&ctl, &name, view, mode)
}

async fn reset_view(State(ctl): State<Ctl>, Path((name, view)): Path<(String, u16)>) -> Response {
    view_answer(&ctl, &name, view, None)
}

fn view_answer(ctl: &Ctl, name: &str, view: u16, mode: Option<crate::DnsMode>) -> Response {
    match ctl.engine.serve_view(name, view, mode) {
        Ok(s) => axum::Json(s).into_response(),
        Err(SetError::UnknownName(m)) => err(StatusCode::NOT_FOUND, m),
        Err(SetError::Invalid(m)) => err(StatusCode::BAD_REQUEST, m),
    }
}

async fn metrics(State(ctl): State<Ctl>) -> Response {
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        ctl.engine.metrics(),
    )
        .into_response()
}

/// The control API's router (exposed for tests and embedding).
pub fn router(engine: Arc<Engine>, token: Option<String>) -> Router {
    let ctl = Ctl {
        engine,
        token: token.map(Arc::from),
    };
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/names", get(list))
        .route("/names/{name}", get(show).put(set).post(set))
        .route(
            "/names/{name}/views/{view}",
            put(set_view).post(set_view).delete(reset_view),
        )
        .route("/metrics", get(metrics))
        .layer(middleware::from_fn_with_state(ctl.clone(), auth))
        .with_state(ctl)
}

pub(crate) async fn serve(listener: TcpListener, engine: Arc<Engine>, token: Option<String>) {
    if let Err(e) = axum::serve(listener, router(engine, token)).await {
        resolvelab_core::progress::line(format!("dns: control API stopped: {e}"));
    }
}

/// A client of the control API (what `resolvelab dns ctl` uses).
#[derive(Debug, Clone)]
pub struct ControlClient {
    addr: SocketAddr,
    token: Option<String>,
}

impl ControlClient {
    /// A client for the API at `addr` (must be loopback unless `allow_remote`).
    pub fn new(
        addr: SocketAddr,
        token: Option<String>,
        allow_remote: bool,
    ) -> anyhow::Result<Self> {
        resolvelab_core::policy::check_target(addr, allow_remote).map_err(anyhow::Error::msg)?;
        Ok(ControlClient { addr, token })
    }

    async fn request(
        &self,
        method: &str,
        path: &str,
        body: Option<String>,
    ) -> anyhow::Result<(StatusCode, String)> {
        let stream = tokio::time::timeout(
            Duration::from_secs(5),
            tokio::net::TcpStream::connect(self.addr),
        )
        .await
        .map_err(|_| {
            anyhow::anyhow!(
                "control API {} did not accept a connection within 5 s",
                self.addr
            )
        })?
        .with_context(|| {
            format!(
                "cannot reach the control API at {}: is `resolvelab dns --control {}` running?",
                self.addr, self.addr
            )
        })?;
        let (mut sender, conn) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream)).await?;
        let conn_task = tokio::spawn(conn);
        let mut req = hyper::Request::builder()
            .method(method)
            .uri(path)
            .header(header::HOST, self.addr.to_string());
        if let Some(t) = &self.token {
            req = req.header(header::AUTHORIZATION, format!("Bearer {t}"));
        }
        if body.is_some() {
            req = req.header(header::CONTENT_TYPE, "application/json");
        }
        let req = req.body(Full::new(bytes::Bytes::from(body.unwrap_or_default())))?;
        let resp = tokio::time::timeout(Duration::from_secs(10), sender.send_request(req))
            .await
            .map_err(|_| {
                anyhow::anyhow!("control API {} did not answer within 10 s", self.addr)
            })??;
        let status = resp.status();
        let body = resp.into_body().collect().await?.to_bytes();
        conn_task.abort();
        Ok((status, String::from_utf8_lossy(&body).into_owned()))
    }

    fn check(status: StatusCode, body: String) -> anyhow::Result<String> {
        if status.is_success() {
            return Ok(body);
        }
        let msg = serde_json::from_str::<serde_json::Value>(&body)
            .ok()
            .and_then(|v| v.get("error").and_then(|e| e.as_str()).map(String::from))
            .unwrap_or(body);
        anyhow::bail!("control API: {msg} (HTTP {})", status.as_u16())
    }

    /// `GET /names`.
    pub async fn list(&self) -> anyhow::Result<Vec<NameStatus>> {
        let (s, b) = self.request("GET", "/names", None).await?;
        let b = Self::check(s, b)?;
        Ok(serde_json::from_str::<NameList>(&b)
            .context("control API answered something that is not a name list")?
            .names)
    }

    /// `GET /names/{name}`.
    pub async fn show(&self, name: &str) -> anyhow::Result<NameStatus> {
        let (s, b) = self.request("GET", &format!("/names/{name}"), None).await?;
        let b = Self::check(s, b)?;
        serde_json::from_str(&b).context("control API answered something that is not a name status")
    }

    /// `PUT /names/{name}`.
    pub async fn set(&self, name: &str, req: &SetRequest) -> anyhow::Result<NameStatus> {
        let (s, b) = self
            .request(
                "PUT",
                &format!("/names/{name}"),
                Some(serde_json::to_string(req)?),
            )
            .await?;
        let b = Self::check(s, b)?;
        serde_json::from_str(&b).context("control API answered something that is not a name status")
    }

    /// `PUT /names/{name}/views/{view}` with `mode`, or (`None`) `DELETE`: the view answers
    /// as the name again.
    pub async fn set_view(
        &self,
        name: &str,
        view: u16,
        mode: Option<&str>,
    ) -> anyhow::Result<NameStatus> {
        let path = format!("/names/{name}/views/{view}");
        let (s, b) = match mode {
            Some(m) => {
                let body = serde_json::to_string(&ViewRequest { mode: m.into() })?;
                self.request("PUT", &path, Some(body)).await?
            }
            None => self.request("DELETE", &path, None).await?,
        };
        let b = Self::check(s, b)?;
        serde_json::from_str(&b).context("control API answered something that is not a name status")
    }

    /// `GET /metrics`.
    pub async fn metrics(&self) -> anyhow::Result<String> {
        let (s, b) = self.request("GET", "/metrics", None).await?;
        Self::check(s, b)
    }
}
