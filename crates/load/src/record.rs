//! The per-request record (one JSON Lines object each) and the result-file header.

use resolvelab_core::jsonl::{self, Row};
use std::io::{self, BufRead, BufWriter, Write};
use std::path::Path;

/// The `schema` of a load result file (first line).
pub const SCHEMA: &str = resolvelab_core::evidence::schema::LOAD;

/// A request's record, its error kinds and the file's header: the evidence types, shared with
/// their reader (`history`).
pub use resolvelab_core::evidence::load::{ErrorKind, Header, Request as Record};

/// Where records go: implemented for the JSON Lines file writer; the runner may plug its own.
pub trait RecordSink: Send {
    /// Take one record (called from the collector thread, in completion order).
    fn record(&mut self, r: &Record) -> io::Result<()>;
    /// Flush what was buffered (called whenever the collector catches up, and at the end).
    fn flush(&mut self) -> io::Result<()>;
}

/// A sink that discards records (summary only).
pub struct NullSink;

impl RecordSink for NullSink {
    fn record(&mut self, _r: &Record) -> io::Result<()> {
        Ok(())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Writes the result file: the [`Header`] line, then one [`Record`] per line.
pub struct JsonlSink<W: Write + Send> {
    w: BufWriter<W>,
}

impl<W: Write + Send> JsonlSink<W> {
    /// Wrap a writer and write the header line.
    pub fn new(w: W, header: &Header) -> io::Result<Self> {
        let mut s = JsonlSink {
            w: BufWriter::with_capacity(1 << 16, w),
        };
        serde_json::to_writer(&mut s.w, header).map_err(io::Error::other)?;
        s.w.write_all(b"\n")?;
        s.w.flush()?;
        Ok(s)
    }
}

impl JsonlSink<std::fs::File> {
    /// Create (truncate) `path` and write the header line.
    pub fn create(path: &Path, header: &Header) -> io::Result<Self> {
        let f = std::fs::File::create(path).map_err(|e| {
            io::Error::new(e.kind(), format!("cannot create {}: {e}", path.display()))
        })?;
        Self::new(f, header)
    }
}

impl<W: Write + Send> RecordSink for JsonlSink<W> {
    fn record(&mut self, r: &Record) -> io::Result<()> {
        serde_json::to_writer(&mut self.w, r).map_err(io::Error::other)?;
        self.w.write_all(b"\n")
    }
    fn flush(&mut self) -> io::Result<()> {
        self.w.flush()
    }
}

/// A result file read back: its header, its records, and the lines that did not parse.
#[derive(Debug, Clone, Default)]
pub struct ResultFile {
    /// The header line.
    pub header: Header,
    /// Records in file order.
    pub records: Vec<Record>,
    /// Number of malformed lines (skipped, never fatal).
    pub malformed: usize,
    /// Up to 3 samples of malformed lines: `(line number, error)`.
    pub malformed_samples: Vec<(usize, String)>,
}

/// Read a result file (`-` for standard input). A file whose first line is not a
/// `resolvelab.load/v1` header is refused with one line that says so.
pub fn read_file(path: &Path) -> anyhow::Result<ResultFile> {
    let reader: Box<dyn BufRead> = if path.as_os_str() == "-" {
        Box::new(io::BufReader::new(io::stdin()))
    } else {
        let f = std::fs::File::open(path)
            .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
        Box::new(io::BufReader::with_capacity(1 << 16, f))
    };
    let mut out = ResultFile::default();
    let mut first: Option<(usize, Result<Header, String>)> = None;
    let read = jsonl::for_each::<Record>(reader, |row| match row {
        Row::Header { n, line, .. } if first.is_none() => {
            first = Some((n, serde_json::from_str(line).map_err(|e| e.to_string())));
        }
        Row::Header { n, .. } | Row::Line { n, .. } if first.is_none() => {
            first = Some((n, Err("no schema".into())));
        }
        Row::Header { .. } => {}
        Row::Line { n, value, .. } => match value {
            Ok(r) => out.records.push(r),
            Err(e) => {
                out.malformed += 1;
                if out.malformed_samples.len() < 3 {
                    out.malformed_samples.push((n, e));
                }
            }
        },
    });
    read.map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
    let Some((n, header)) = first else {
        anyhow::bail!(
            "{}: empty file; write one with `resolvelab load URL --out FILE`",
            path.display()
        );
    };
    let h = header.map_err(|_| {
        anyhow::anyhow!(
            "{}:{n}: not a load result file (expected a first line with \"schema\":\"{SCHEMA}\"); \
             write one with `resolvelab load URL --out FILE`",
            path.display(),
        )
    })?;
    if h.schema != SCHEMA {
        anyhow::bail!(
            "{}:{n}: schema `{}` is not `{SCHEMA}`; pass files written by `resolvelab load --out`",
            path.display(),
            h.schema
        );
    }
    out.header = h;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_round_trip_and_field_names() {
        let r = Record {
            t_us: 10,
            sent_us: None,
            latency_us: None,
            uncorrected_us: None,
            status: None,
            bytes: 0,
            error: Some(ErrorKind::ConnectRefused),
            conn: None,
            method: "GET".into(),
            header: None,
            seq: 3,
            retried: false,
        };
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["error"], "connect-refused");
        assert!(v["sent_us"].is_null() && v["status"].is_null() && v["header"].is_null());
        // `retried` is left out when false (files of earlier runs stay byte for byte).
        assert!(v.get("retried").is_none(), "{v}");
        let back: Record = serde_json::from_value(v).unwrap();
        assert_eq!(back, r);
        assert_eq!(r.class(), 5);
    }
}
