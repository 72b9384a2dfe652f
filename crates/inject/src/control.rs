//! The control-API handler the backend and the proxy share.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

/// `POST …/faults` of a backend or a proxy: the body is the bare spec or `{"spec": "…"}`;
/// the answer is 201 with the fault's name, or 400 with the one-line error.
pub fn add_fault(body: String, add: impl FnOnce(&str) -> anyhow::Result<String>) -> Response {
    let spec = match serde_json::from_str::<serde_json::Value>(&body) {
        Ok(v) => v
            .get("spec")
            .and_then(|s| s.as_str())
            .map(str::to_string)
            .unwrap_or(body),
        Err(_) => body,
    };
    match add(spec.trim()) {
        Ok(name) => (
            StatusCode::CREATED,
            axum::Json(serde_json::json!({"name": name})),
        )
            .into_response(),
        Err(e) => (StatusCode::BAD_REQUEST, format!("{e}\n")).into_response(),
    }
}
