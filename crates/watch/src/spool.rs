//! Lines kept on disk rather than in memory: a pass's spooled files (the checker reads the
//! lines it quotes from them), and the context — the recent ticks a new pass starts with —
//! kept as places in those files, or in a file of its own while no pass runs. So `watch`'s
//! memory does not grow with the log rate: a context of 64 MB of lines costs a few bytes a
//! tick in memory, and is read back only when a window opens.
//!
//! A file goes when the last thing that places lines in it goes ([`SpoolPath`]): a pass's
//! files outlive the pass while the context still names their lines.

use crate::follow::Lines;
use crate::live::Kind;
use std::collections::VecDeque;
use std::io::{Seek, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::{Duration, Instant};

/// A spooled file's path, removed when the last holder drops it.
#[derive(Debug)]
pub struct SpoolPath(PathBuf);

impl Drop for SpoolPath {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// One stream's lines of one tick in a spooled file: where their bytes are and their numbers
/// in the followed file.
#[derive(Debug, Clone)]
pub struct Placed {
    file: Rc<SpoolPath>,
    offset: u64,
    len: u64,
    /// Runs of lines numbered one after the other: (first number, count).
    runs: Vec<(u64, u32)>,
}

impl Placed {
    /// Read the lines back.
    fn read(&self) -> anyhow::Result<Lines> {
        let f = std::fs::File::open(&self.file.0)?;
        let mut buf = vec![0; self.len as usize];
        f.read_exact_at(&mut buf, self.offset)?;
        Lines::from_runs(buf, &self.runs).ok_or_else(|| {
            anyhow::anyhow!(
                "{}: {} bytes at {} hold fewer lines than were written there",
                self.file.0.display(),
                self.len,
                self.offset
            )
        })
    }
}

/// The lines' bytes, each with its newline (the buffer they are in: no copy), and their runs
/// of numbers.
fn encode(lines: &Lines) -> (&[u8], Vec<(u64, u32)>) {
    let mut runs: Vec<(u64, u32)> = Vec::new();
    for (n, _) in lines.iter() {
        match runs.last_mut() {
            Some((first, count)) if *first + *count as u64 == n && *count < u32::MAX => *count += 1,
            _ => runs.push((n, 1)),
        }
    }
    (lines.text(), runs)
}

/// One spooled file of a pass (one stream) and where its lines came from.
pub struct Spooled {
    path: Rc<SpoolPath>,
    /// Its writer (unbuffered: what is written can be read back at once).
    pub file: std::fs::File,
    lines: u64,
    bytes: u64,
    /// Runs of lines from one file: (first spooled line, its line in the followed file).
    origins: Vec<(u64, u64)>,
}

impl Spooled {
    /// A new spooled file for a stream of `kind`.
    pub fn create(path: PathBuf, kind: Kind) -> anyhow::Result<Spooled> {
        let mut file = std::fs::File::create(&path)?;
        let mut lines = 0;
        if kind == Kind::Dns {
            // A JSON Lines file of ours starts with its schema line.
            writeln!(
                file,
                "{}",
                serde_json::json!({ "schema": resolvelab_core::evidence::schema::DNS })
            )?;
            lines = 1;
        }
        Ok(Spooled {
            bytes: file.stream_position()?,
            path: Rc::new(SpoolPath(path)),
            file,
            lines,
            origins: Vec::new(),
        })
    }

    /// Its path.
    pub fn path(&self) -> &Path {
        &self.path.0
    }

    /// Append `lines`; returns the spooled number of the first and where they are.
    pub fn push(&mut self, lines: &Lines) -> anyhow::Result<(u64, Placed)> {
        let first = self.lines + 1;
        for (line, _) in lines.iter() {
            let next = self.lines + 1;
            let continues = self
                .origins
                .last()
                .is_some_and(|&(s, o)| o + (next - s) == line);
            if !continues {
                self.origins.push((next, line));
            }
            self.lines = next;
        }
        let (buf, runs) = encode(lines);
        self.file.write_all(buf)?;
        let placed = Placed {
            file: self.path.clone(),
            offset: self.bytes,
            len: buf.len() as u64,
            runs,
        };
        self.bytes += buf.len() as u64;
        Ok((first, placed))
    }

    /// The followed file's line of a spooled line.
    pub fn origin(&self, line: u64) -> Option<u64> {
        let k = self.origins.partition_point(|&(s, _)| s <= line);
        let (s, o) = *self.origins.get(k.checked_sub(1)?)?;
        Some(o + (line - s))
    }
}

/// One tick of the context: when it came, the newest request time read by then (epoch ms),
/// and each stream's lines (none for a stream without any).
struct Tick {
    at: Instant,
    newest_ms: Option<i64>,
    streams: Vec<Option<Placed>>,
}

impl Tick {
    fn bytes(&self) -> u64 {
        self.streams.iter().flatten().map(|p| p.len).sum()
    }
}

/// The recent ticks, on disk: what a new pass starts with.
pub struct Context {
    dir: PathBuf,
    ticks: VecDeque<Tick>,
    bytes: u64,
    /// The most bytes of lines it names.
    pub cap: u64,
    files: u64,
}

impl Context {
    /// An empty context whose own files go into `dir`, naming at most `cap` bytes of lines.
    pub fn new(dir: &Path, cap: u64) -> Context {
        Context {
            dir: dir.to_path_buf(),
            ticks: VecDeque::new(),
            bytes: 0,
            cap,
            files: 0,
        }
    }

    /// One more tick whose lines are spooled already (by a pass).
    pub fn push_placed(
        &mut self,
        at: Instant,
        newest_ms: Option<i64>,
        streams: Vec<Option<Placed>>,
    ) {
        let t = Tick {
            at,
            newest_ms,
            streams,
        };
        self.bytes += t.bytes();
        self.ticks.push_back(t);
    }

    /// One more tick, its lines written to a file of its own (no pass runs).
    pub fn push(
        &mut self,
        at: Instant,
        newest_ms: Option<i64>,
        lines: &[Lines],
    ) -> anyhow::Result<()> {
        self.files += 1;
        let path = self.dir.join(format!("c{}.log", self.files));
        let mut file = std::fs::File::create(&path)?;
        let path = Rc::new(SpoolPath(path));
        let mut offset = 0;
        let mut streams = Vec::with_capacity(lines.len());
        for l in lines {
            if l.is_empty() {
                streams.push(None);
                continue;
            }
            let (buf, runs) = encode(l);
            // Each stream's lines as they are, one write each: no copy of the tick.
            file.write_all(buf)?;
            streams.push(Some(Placed {
                file: path.clone(),
                offset,
                len: buf.len() as u64,
                runs,
            }));
            offset += buf.len() as u64;
        }
        self.push_placed(at, newest_ms, streams);
        Ok(())
    }

    /// Drop the ticks older than `context` of wall time before `now` or of log time before
    /// `newest_ms` (a backlog read at once spans hours of log in seconds), and the oldest
    /// while it names more than its cap.
    pub fn trim(&mut self, now: Instant, newest_ms: Option<i64>, context: Duration) {
        let context_ms = context.as_millis() as i64;
        while self.ticks.front().is_some_and(|t| {
            now.duration_since(t.at) > context
                || matches!((t.newest_ms, newest_ms), (Some(a), Some(b)) if b.saturating_sub(a) > context_ms)
                || self.bytes > self.cap
        }) {
            let gone = self.ticks.pop_front().expect("not empty");
            self.bytes -= gone.bytes();
        }
    }

    /// Forget every tick.
    pub fn clear(&mut self) {
        self.ticks.clear();
        self.bytes = 0;
    }

    /// The number of ticks held.
    pub fn len(&self) -> usize {
        self.ticks.len()
    }

    /// True when it holds no tick.
    pub fn is_empty(&self) -> bool {
        self.ticks.is_empty()
    }

    /// Hand every tick's lines, oldest first, to `take`, which spools them anew and says where
    /// (a new pass starting with the context): the ticks then name the new places, so the
    /// files they named before can go.
    pub fn replay(
        &mut self,
        mut take: impl FnMut(&[Lines]) -> anyhow::Result<Vec<Option<Placed>>>,
    ) -> anyhow::Result<()> {
        for t in &mut self.ticks {
            let lines = t
                .streams
                .iter()
                .map(|p| {
                    p.as_ref()
                        .map_or_else(|| Ok(Lines::default()), Placed::read)
                })
                .collect::<anyhow::Result<Vec<Lines>>>()?;
            t.streams = take(&lines)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(numbers: &[u64]) -> Lines {
        let mut l = Lines::default();
        for n in numbers {
            l.push(format!("line {n}").as_bytes(), *n);
        }
        l
    }

    /// What the context keeps on disk reads back as it came, numbers and all, whether a pass
    /// spooled it or it has a file of its own; its files go with the last tick naming them.
    #[test]
    fn a_context_on_disk_reads_back_the_lines_it_was_given() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = Context::new(dir.path(), 1 << 20);
        let now = Instant::now();
        let a = [lines(&[1, 2, 3, 7, 8]), Lines::default(), lines(&[40])];
        c.push(now, Some(1), &a).unwrap();
        let mut s = Spooled::create(dir.path().join("p.log"), Kind::Access).unwrap();
        s.push(&lines(&[1])).unwrap();
        let (first, placed) = s.push(&lines(&[9, 10])).unwrap();
        assert_eq!(first, 2);
        assert_eq!(s.origin(3), Some(10));
        c.push_placed(now, Some(2), vec![Some(placed), None, None]);
        drop(s);
        let mut got = Vec::new();
        c.replay(|l| {
            got.push(l.to_vec());
            Ok(vec![None; l.len()])
        })
        .unwrap();
        assert_eq!(got[0], a.to_vec());
        assert_eq!(
            got[1],
            vec![lines(&[9, 10]), Lines::default(), Lines::default()]
        );
        // Replayed into places that name nothing: no file is left.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    /// Ticks leave by age, wall or log, and by the bytes they name.
    #[test]
    fn a_context_keeps_context_time_and_at_most_its_cap() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = Context::new(dir.path(), 1 << 20);
        let t0 = Instant::now();
        for s in 0..30u64 {
            let at = t0 + Duration::from_secs(s);
            c.push(at, Some(s as i64 * 1000), &[lines(&[s + 1])])
                .unwrap();
            c.trim(at, Some(s as i64 * 1000), Duration::from_secs(10));
        }
        assert_eq!(c.len(), 11);
        c.cap = 3 * "line 30\n".len() as u64;
        c.trim(
            t0 + Duration::from_secs(29),
            Some(29_000),
            Duration::from_secs(10),
        );
        assert_eq!(c.len(), 3);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 3);
        c.clear();
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
