//! The request log (`resolvelab.backend/v1`): one JSON line per request, connection event and
//! fault action, written by a dedicated thread so the request path never waits on the disk.

use resolvelab_core::jsonl::BufJsonl;
use serde::Serialize;
use std::fs::File;
use std::path::Path;
use std::sync::Arc;
use std::sync::mpsc;

/// Schema of the backend request log (first line of the file).
pub const LOG_SCHEMA: &str = resolvelab_core::evidence::schema::BACKEND;

/// One log record. `event` is `request`, `conn_open`, `conn_close` or `fault`.
#[derive(Debug, Serialize)]
pub struct Rec {
    /// Epoch microseconds (request start, or the moment of the event).
    pub t_us: i64,
    /// `request`, `conn_open`, `conn_close`, `fault`.
    pub event: &'static str,
    /// Backend name.
    #[serde(serialize_with = "ser_arc_str")]
    pub backend: Arc<str>,
    /// Connection id (per backend, from 1).
    pub conn: u64,
    /// Request number on that connection (from 1).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub req: Option<u64>,
    /// Client address (on `conn_open`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peer: Option<String>,
    /// HTTP method.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub method: Option<String>,
    /// Request path.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// Response status.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// Time from request start to response headers, µs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dur_us: Option<u64>,
    /// Time spent waiting for a DB pool connection, µs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pool_wait_us: Option<u64>,
    /// Faults applied to this request or connection.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub faults: Vec<String>,
    /// What happened (fault action, close reason).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

fn ser_arc_str<S: serde::Serializer>(v: &Arc<str>, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(v)
}

impl Rec {
    /// A record with only the common fields set.
    pub fn new(event: &'static str, backend: &Arc<str>, conn: u64) -> Rec {
        Rec {
            t_us: resolvelab_core::time::now_us(),
            event,
            backend: backend.clone(),
            conn,
            req: None,
            peer: None,
            method: None,
            path: None,
            status: None,
            dur_us: None,
            pool_wait_us: None,
            faults: Vec::new(),
            detail: None,
        }
    }
}

/// Sending side of the log; dropping every sender ends the writer thread after a final flush.
#[derive(Clone)]
pub struct LogSender {
    tx: mpsc::Sender<Rec>,
}

impl LogSender {
    /// Create the file, write the schema line and start the writer thread.
    pub fn create(path: &Path) -> anyhow::Result<LogSender> {
        let f = File::create(path)
            .map_err(|e| anyhow::anyhow!("cannot create request log {}: {e}", path.display()))?;
        let mut w = BufJsonl::new(f, LOG_SCHEMA)?;
        w.flush()?;
        let (tx, rx) = mpsc::channel::<Rec>();
        std::thread::Builder::new()
            .name("backend-log".into())
            .spawn(move || {
                while let Ok(rec) = rx.recv() {
                    let _ = w.write(&rec);
                    // Drain what is queued, then flush: lines reach the disk within one burst.
                    while let Ok(rec) = rx.try_recv() {
                        let _ = w.write(&rec);
                    }
                    let _ = w.flush();
                }
                let _ = w.flush();
            })?;
        Ok(LogSender { tx })
    }

    /// Queue one record.
    pub fn send(&self, rec: Rec) {
        let _ = self.tx.send(rec);
    }
}
