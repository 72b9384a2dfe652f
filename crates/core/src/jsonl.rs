//! JSON Lines logs as DESIGN.md describes them: a `schema` field on the first line, one event per
//! line, flushed as it happens (so an interrupted run still leaves a readable file). The one
//! writer ([`JsonlWriter`], [`BufJsonl`]) and the one reader ([`for_each`]) of every such file:
//! `dns.jsonl`, `events.jsonl`, `load.jsonl`, `probes.jsonl`, and the load generator's results.
//!
//! ```
//! use resolvelab_core::jsonl::{Row, for_each};
//! let text = "{\"schema\":\"resolvelab.test/v1\"}\n{\"t_us\":1}\n\nnot json\n";
//! let mut seen = Vec::new();
//! for_each::<serde_json::Value>(text.as_bytes(), |row| {
//!     seen.push(match row {
//!         Row::Header { schema, .. } => format!("schema {schema}"),
//!         Row::Line { n, value: Ok(v), .. } => format!("{n}: t_us {}", v["t_us"]),
//!         Row::Line { n, value: Err(_), .. } => format!("{n}: bad"),
//!     });
//! })
//! .unwrap();
//! assert_eq!(seen, ["schema resolvelab.test/v1", "2: t_us 1", "4: bad"]);
//! ```

use serde::Serialize;
use serde::de::DeserializeOwned;
use std::fs::File;
use std::io::{self, BufRead, BufWriter, Write};
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

/// One line of a JSON Lines file, as [`for_each`] hands it over.
#[derive(Debug)]
pub enum Row<'a, T> {
    /// The first non-blank line, when it names a `schema`: its text, for a reader whose
    /// header carries more (the load generator's).
    Header {
        /// 1-based line number.
        n: usize,
        /// The schema it names.
        schema: String,
        /// The line as written.
        line: &'a str,
    },
    /// Any other non-blank line: read as `T`, or why it does not read.
    Line {
        /// 1-based line number.
        n: usize,
        /// The value, or the parser's reason.
        value: Result<T, String>,
        /// The line as written (trimmed), for a sample or a copy.
        line: &'a str,
    },
}

/// Read JSON Lines from `r`, handing `f` the schema line and then every other non-blank line
/// read as `T`. A read error stops it and is returned, after every line before it was handed
/// over (so a cut file still gives what it has).
pub fn for_each<T: DeserializeOwned>(
    mut r: impl BufRead,
    mut f: impl FnMut(Row<'_, T>),
) -> io::Result<()> {
    #[derive(serde::Deserialize)]
    struct Schema {
        schema: Option<String>,
    }
    let mut buf = String::new();
    let mut n = 0;
    let mut first = true;
    loop {
        buf.clear();
        if r.read_line(&mut buf)? == 0 {
            return Ok(());
        }
        n += 1;
        let line = buf.trim();
        if line.is_empty() {
            continue;
        }
        if std::mem::take(&mut first)
            && let Ok(Schema {
                schema: Some(schema),
            }) = serde_json::from_str(line)
        {
            f(Row::Header { n, schema, line });
            continue;
        }
        let value = serde_json::from_str(line).map_err(|e| e.to_string());
        f(Row::Line { n, value, line });
    }
}

/// One line of a JSON Lines file: its 1-based number and the parsed value (or the parse error).
pub type Line = (usize, Result<serde_json::Value, String>);

/// Read a whole JSON Lines file: returns the schema (if the first line has one) and the other
/// lines.
pub fn read_values(path: &Path) -> io::Result<(Option<String>, Vec<Line>)> {
    let file = File::open(path)
        .map_err(|e| io::Error::new(e.kind(), format!("cannot read {}: {e}", path.display())))?;
    let mut schema = None;
    let mut out = Vec::new();
    for_each(io::BufReader::new(file), |row| match row {
        Row::Header { schema: s, .. } => schema = Some(s),
        Row::Line { n, value, .. } => out.push((n, value)),
    })
    .map_err(|e| io::Error::new(e.kind(), format!("cannot read {}: {e}", path.display())))?;
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
