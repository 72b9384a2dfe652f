//! JSON Lines logs as DESIGN.md describes them: a `schema` field on the first line, one event per
//! line, flushed as it happens (so an interrupted run still leaves a readable file).

use serde::Serialize;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;
use std::sync::Mutex;

/// A thread-safe JSON Lines writer. The first line is `{"schema": …, …header}`.
pub struct JsonlWriter {
    inner: Mutex<Box<dyn Write + Send>>,
}

impl JsonlWriter {
    /// Create (truncate) `path` and write the schema line.
    pub fn create(path: &Path, schema: &str) -> io::Result<JsonlWriter> {
        let f = File::create(path).map_err(|e| {
            io::Error::new(e.kind(), format!("cannot create {}: {e}", path.display()))
        })?;
        Self::from_writer(Box::new(f), schema)
    }

    /// Write to standard output (`--out -`).
    pub fn stdout(schema: &str) -> io::Result<JsonlWriter> {
        Self::from_writer(Box::new(io::stdout()), schema)
    }

    /// Wrap any writer and write the schema line.
    pub fn from_writer(w: Box<dyn Write + Send>, schema: &str) -> io::Result<JsonlWriter> {
        let w = JsonlWriter {
            inner: Mutex::new(w),
        };
        w.write(&serde_json::json!({ "schema": schema }))?;
        Ok(w)
    }

    /// Append one event and flush it.
    pub fn write<T: Serialize>(&self, event: &T) -> io::Result<()> {
        let mut line = serde_json::to_vec(event).map_err(io::Error::other)?;
        line.push(b'\n');
        let mut w = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        w.write_all(&line)?;
        w.flush()
    }
}

/// A buffered JSON Lines writer for hot paths (one writer per task); call [`BufJsonl::flush`]
/// periodically and at the end.
pub struct BufJsonl<W: Write> {
    w: BufWriter<W>,
}

impl<W: Write> BufJsonl<W> {
    /// Wrap `w` and write the schema line.
    pub fn new(w: W, schema: &str) -> io::Result<Self> {
        let mut b = BufJsonl {
            w: BufWriter::with_capacity(1 << 16, w),
        };
        b.write(&serde_json::json!({ "schema": schema }))?;
        Ok(b)
    }

    /// Append one event (buffered).
    pub fn write<T: Serialize>(&mut self, event: &T) -> io::Result<()> {
        serde_json::to_writer(&mut self.w, event).map_err(io::Error::other)?;
        self.w.write_all(b"\n")
    }

    /// Flush buffered events.
    pub fn flush(&mut self) -> io::Result<()> {
        self.w.flush()
    }
}

/// One line of a JSON Lines file: its 1-based number and the parsed value (or the parse error).
pub type Line = (usize, Result<serde_json::Value, String>);

/// Read a JSON Lines file: returns the schema (if the first line has one) and the other lines.
pub fn read_values(path: &Path) -> io::Result<(Option<String>, Vec<Line>)> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| io::Error::new(e.kind(), format!("cannot read {}: {e}", path.display())))?;
    let mut schema = None;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let v: Result<serde_json::Value, String> =
            serde_json::from_str(line).map_err(|e| e.to_string());
        if i == 0
            && let Ok(v) = &v
            && let Some(s) = v.get("schema").and_then(|s| s.as_str())
        {
            schema = Some(s.to_string());
            continue;
        }
        out.push((i + 1, v));
    }
    Ok((schema, out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schema_first_then_events() {
        let dir = std::env::temp_dir().join(format!("rl-jsonl-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("x.jsonl");
        let w = JsonlWriter::create(&p, "resolvelab.test/v1").unwrap();
        w.write(&serde_json::json!({"t_us": 1, "a": "b"})).unwrap();
        w.write(&serde_json::json!({"t_us": 2})).unwrap();
        let (schema, rows) = read_values(&p).unwrap();
        assert_eq!(schema.as_deref(), Some("resolvelab.test/v1"));
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].0, 2);
        assert_eq!(rows[1].1.as_ref().unwrap()["t_us"], 2);
        std::fs::remove_dir_all(&dir).ok();
    }
}
