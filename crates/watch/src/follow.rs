//! Following one log file as nginx writes it, the way `tail -F` does: only whole lines (a line
//! is delivered once its newline is written), through rotation by rename + create, delete +
//! recreate and copytruncate, and from a saved position after a restart.

use serde::{Deserialize, Serialize};
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// The most bytes one poll reads from one file, so that a large backlog is taken in steps and
/// memory stays bounded. Each tick's buffers (the lines read, the tally's and the error
/// reader's copies, the matcher's chunk) are sized by it: a 2 M-line `main` backlog with its
/// error log caught up in 3.2–3.3 s of CPU at 28–30 MB peak with 1 MiB, against 3.9–4.2 s at
/// 47–49 MB with 4 MiB (3 runs each, alternating, 2026-12-07) — fewer fresh pages touched.
pub const MAX_READ: usize = 1 << 20;

/// Polls an old file is still read after its name moved to a new file: nginx writes to the
/// renamed file until it reopens its logs (`USR1`, sent right after logrotate's rename).
const DRAIN_POLLS: u32 = 3;

/// Where a follower is in its file: what a state file keeps so that a restarted `watch` goes on
/// from the first line it had not counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Position {
    /// The file's device.
    pub dev: u64,
    /// The file's inode: another inode at the path is another file (rotated).
    pub ino: u64,
    /// Bytes of whole lines delivered.
    pub offset: u64,
    /// Whole lines delivered (a line's number is this + 1).
    pub line: u64,
}

/// What changed in a poll besides the lines.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Events {
    /// The path names a new file (renamed or deleted, then created).
    pub rotated: bool,
    /// The file became shorter than what was read (copytruncate): read again from its start.
    pub truncated: bool,
    /// More was there than one poll reads: poll again at once (a backlog).
    pub more: bool,
}

/// Whole lines read, in one buffer: each line's bytes and its line number in its file. A
/// tick's lines are handed on as one value, not as an allocation per line. The buffer holds
/// each line with its newline, as a file does: a chunk read is copied into it once, and
/// spooled from it as it is ([`Lines::text`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Lines {
    buf: Vec<u8>,
    /// Where each line ends in `buf`, after its newline (it starts where the one before ends).
    ends: Vec<usize>,
    numbers: Vec<u64>,
}

impl Lines {
    /// One more line, numbered `line` (1-based; restarts with a new file).
    pub fn push(&mut self, text: &[u8], line: u64) {
        self.buf.extend_from_slice(text);
        self.buf.push(b'\n');
        self.ends.push(self.buf.len());
        self.numbers.push(line);
    }

    /// The whole lines of `chunk` (each ended by a newline; bytes after the last one are left
    /// out), numbered from `first` on; the number of the next line.
    pub fn push_chunk(&mut self, chunk: &[u8], first: u64) -> u64 {
        let Some(last) = memchr::memrchr(b'\n', chunk) else {
            return first;
        };
        let base = self.buf.len();
        self.buf.extend_from_slice(&chunk[..=last]);
        let mut n = first;
        for end in memchr::memchr_iter(b'\n', &chunk[..=last]) {
            self.ends.push(base + end + 1);
            self.numbers.push(n);
            n += 1;
        }
        n
    }

    /// Room for `bytes` more of lines at once: a buffer filled batch by batch to a known bound
    /// is sized once, not doubled past it (a doubled 4 MiB buffer left the old one behind).
    pub fn reserve(&mut self, bytes: usize) {
        self.buf.reserve_exact(bytes);
    }

    /// Every line with its newline, as they are spooled.
    pub fn text(&self) -> &[u8] {
        &self.buf
    }

    /// Lines spooled as [`Lines::text`], numbered by runs of (first number, count); none when
    /// the text holds fewer lines than the runs count. The text becomes the buffer: no copy.
    pub fn from_runs(text: Vec<u8>, runs: &[(u64, u32)]) -> Option<Lines> {
        let total: usize = runs.iter().map(|r| r.1 as usize).sum();
        let mut ends = Vec::with_capacity(total);
        let mut numbers = Vec::with_capacity(total);
        let mut newlines = memchr::memchr_iter(b'\n', &text);
        for &(first, n) in runs {
            for i in 0..n as u64 {
                ends.push(newlines.next()? + 1);
                numbers.push(first + i);
            }
        }
        let end = ends.last().copied().unwrap_or(0);
        let mut buf = text;
        buf.truncate(end);
        Some(Lines { buf, ends, numbers })
    }

    /// Keep the first `n` lines.
    pub fn truncate(&mut self, n: usize) {
        if n >= self.len() {
            return;
        }
        let end = if n == 0 { 0 } else { self.ends[n - 1] };
        self.buf.truncate(end);
        self.ends.truncate(n);
        self.numbers.truncate(n);
    }

    /// The bytes (with a newline each) and the number of the lines after the first `n`.
    pub fn tail_size(&self, n: usize) -> (u64, u64) {
        if n >= self.len() {
            return (0, 0);
        }
        let start = if n == 0 { 0 } else { self.ends[n - 1] };
        let bytes = self.buf.len() - start;
        (bytes as u64, (self.len() - n) as u64)
    }

    /// The lines of `other` after these.
    pub fn append(&mut self, other: &Lines) {
        let base = self.buf.len();
        self.buf.extend_from_slice(&other.buf);
        self.ends.extend(other.ends.iter().map(|e| e + base));
        self.numbers.extend_from_slice(&other.numbers);
    }

    /// How many lines.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// No line.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// Line `i`: its number and bytes (without its newline).
    pub fn get(&self, i: usize) -> Option<(u64, &[u8])> {
        let end = *self.ends.get(i)?;
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        Some((self.numbers[i], &self.buf[start..end - 1]))
    }

    /// The first line.
    pub fn first(&self) -> Option<(u64, &[u8])> {
        self.get(0)
    }

    /// Each line: its number and bytes.
    pub fn iter(&self) -> impl Iterator<Item = (u64, &[u8])> + Clone {
        (0..self.len()).map(|i| self.get(i).expect("in range"))
    }

    /// The lines' bytes with a newline each (what they take in a file).
    pub fn bytes(&self) -> usize {
        self.buf.len()
    }

    /// Runs of lines numbered one after the other: (first number, the run's bytes).
    pub fn runs(&self) -> impl Iterator<Item = (u64, impl Iterator<Item = &[u8]> + Clone)> {
        let mut i = 0;
        std::iter::from_fn(move || {
            let (first, _) = self.get(i)?;
            let len = self.numbers[i..]
                .iter()
                .enumerate()
                .take_while(|(k, n)| **n == first + *k as u64)
                .count();
            let run = (i..i + len).map(|j| self.get(j).expect("in range").1);
            i += len;
            Some((first, run))
        })
    }
}

/// An open file and what was delivered of it.
struct Open {
    file: File,
    pos: Position,
    /// Bytes after the last newline: a line still being written.
    partial: Vec<u8>,
    /// The bytes and lines its last read delivered (what can be handed back).
    last: (u64, u64),
}

impl Open {
    /// Whole lines appended since the last read: whether the file got shorter, and whether more
    /// was there than one read takes.
    fn read(&mut self, out: &mut Lines, budget: usize) -> std::io::Result<(bool, bool)> {
        let len = self.file.metadata()?.len();
        let read_to = self.pos.offset + self.partial.len() as u64;
        let truncated = len < read_to;
        if truncated {
            self.pos.offset = 0;
            self.pos.line = 0;
            self.partial.clear();
        }
        self.file
            .seek(SeekFrom::Start(self.pos.offset + self.partial.len() as u64))?;
        let had = self.partial.len();
        (&mut self.file)
            .take(budget as u64)
            .read_to_end(&mut self.partial)?;
        let more = self.partial.len() - had == budget;
        let Some(last) = memchr::memrchr(b'\n', &self.partial) else {
            return Ok((truncated, more));
        };
        let line = out.push_chunk(&self.partial[..=last], self.pos.line + 1) - 1;
        self.last = (last as u64 + 1, line - self.pos.line);
        self.pos.line = line;
        self.pos.offset += last as u64 + 1;
        self.partial.drain(..=last);
        Ok((truncated, more))
    }
}

/// One followed path.
pub struct Follower {
    path: PathBuf,
    cur: Option<Open>,
    /// The file the path named before a rotation, read for a few polls more.
    old: Option<(Open, u32)>,
    /// Where to start in the first file seen: its end (`tail -f`), its start, or a saved position.
    start: Start,
    /// Why the path could not be read at the last poll (it is missing, a directory, …).
    pub problem: Option<String>,
    /// The most bytes a poll reads from a file ([`MAX_READ`] unless [`Follower::set_budget`]).
    budget: usize,
}

/// Where a follower starts in the first file it opens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    /// At its end: only lines written from now on (the default, as `tail -f`).
    End,
    /// At its beginning.
    Beginning,
    /// At a saved position, if the path still names that file (else at its beginning).
    At(Position),
}

impl Follower {
    /// Follow `path` from `start`. The path need not exist yet: it is read from its beginning
    /// once created.
    pub fn new(path: &Path, start: Start) -> Follower {
        Follower {
            path: path.to_path_buf(),
            cur: None,
            old: None,
            start,
            problem: None,
            budget: MAX_READ,
        }
    }

    /// Read at most `bytes` a poll from now on (within 64 KiB and [`MAX_READ`]): a backlog
    /// paced against another file need not read what it hands back.
    pub fn set_budget(&mut self, bytes: usize) {
        self.budget = bytes.clamp(64 << 10, MAX_READ);
    }

    /// The most bytes a poll reads now.
    pub fn budget(&self) -> usize {
        self.budget
    }

    /// The path followed.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Where the follower is, if its file is open.
    pub fn position(&self) -> Option<Position> {
        self.cur.as_ref().map(|o| o.pos)
    }

    /// Read what was appended since the last poll: whole lines only, the old file's last lines
    /// before the new file's after a rotation. Never fails: a path that cannot be read is
    /// reported in [`Follower::problem`] and tried again at the next poll.
    pub fn poll(&mut self, out: &mut Lines) -> Events {
        let mut ev = Events::default();
        if let Some((o, left)) = &mut self.old {
            let _ = o.read(out, self.budget);
            *left -= 1;
            if *left == 0 {
                self.old = None;
            }
        }
        if let Some(o) = &mut self.cur {
            o.last = (0, 0);
            match o.read(out, self.budget) {
                Ok((t, more)) => (ev.truncated, ev.more) = (t, more),
                Err(e) => self.problem = Some(format!("{}: {e}", self.path.display())),
            }
        }
        match self.reopen() {
            Ok(Some(mut o)) => {
                ev.rotated = self.cur.is_some();
                // A file found with more than one read in it is a backlog too.
                if let Ok((_, more)) = o.read(out, self.budget) {
                    ev.more |= more;
                }
                if let Some(old) = self.cur.replace(o) {
                    self.old = Some((old, DRAIN_POLLS));
                }
                self.problem = None;
            }
            Ok(None) => self.problem = None,
            Err(e) => self.problem = Some(e),
        }
        ev
    }

    /// Hand back the last `lines` lines (`bytes` with their newlines) of the last poll: the
    /// next poll reads them again, and [`Follower::position`] is before them. False (nothing
    /// handed back) when they were not all read from the file open now.
    pub fn give_back(&mut self, bytes: u64, lines: u64) -> bool {
        let Some(o) = &mut self.cur else {
            return false;
        };
        if bytes > o.last.0 || lines > o.last.1 {
            return false;
        }
        o.pos.offset -= bytes;
        o.pos.line -= lines;
        o.partial.clear();
        o.last = (o.last.0 - bytes, o.last.1 - lines);
        true
    }

    /// The file the path names now, when it is not the one open.
    fn reopen(&mut self) -> Result<Option<Open>, String> {
        let at = |e: std::io::Error| format!("{}: {e}", self.path.display());
        let meta = match std::fs::metadata(&self.path) {
            Ok(m) => m,
            // Renamed or deleted and not created again yet: the open file is still read.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && self.cur.is_some() => {
                return Ok(None);
            }
            Err(e) => {
                // A file created after watching began is read from its beginning.
                self.start = Start::Beginning;
                return Err(at(e));
            }
        };
        if meta.is_dir() {
            return Err(format!("{} is a directory", self.path.display()));
        }
        let same = |p: &Position| p.dev == meta.dev() && p.ino == meta.ino();
        if self.cur.as_ref().is_some_and(|o| same(&o.pos)) {
            return Ok(None);
        }
        let file = File::open(&self.path).map_err(at)?;
        let mut pos = Position {
            dev: meta.dev(),
            ino: meta.ino(),
            offset: 0,
            line: 0,
        };
        // Only the first file opened starts elsewhere than at its beginning.
        match std::mem::replace(&mut self.start, Start::Beginning) {
            Start::End => pos.offset = meta.len(),
            Start::At(p) if same(&p) && p.offset <= meta.len() => pos = p,
            Start::At(_) | Start::Beginning => {}
        }
        // Started at the end, line numbers count from there.
        Ok(Some(Open {
            file,
            pos,
            partial: Vec::new(),
            last: (0, 0),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn append(p: &Path, s: &str) {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(p)
            .unwrap()
            .write_all(s.as_bytes())
            .unwrap();
    }

    fn texts(f: &mut Follower) -> Vec<String> {
        let mut v = Lines::default();
        f.poll(&mut v);
        v.iter()
            .map(|(_, t)| String::from_utf8(t.to_vec()).unwrap())
            .collect()
    }

    #[test]
    fn lines_keep_their_numbers_and_runs_break_where_numbers_jump() {
        let mut l = Lines::default();
        assert_eq!(l.push_chunk(b"a\n\nb\nnot yet", 7), 10, "three whole lines");
        l.push(b"c", 20);
        l.push(b"d", 21);
        let all: Vec<(u64, &[u8])> = l.iter().collect();
        assert_eq!(
            all,
            [(7, &b"a"[..]), (8, b""), (9, b"b"), (20, b"c"), (21, b"d")]
        );
        assert_eq!(l.bytes(), 9);
        let runs: Vec<(u64, Vec<&[u8]>)> = l.runs().map(|(n, r)| (n, r.collect())).collect();
        assert_eq!(
            runs,
            [(7, vec![&b"a"[..], b"", b"b"]), (20, vec![&b"c"[..], b"d"])]
        );
        let mut m = Lines::default();
        m.append(&l);
        assert_eq!(m, l);
        m.append(&l);
        assert_eq!(m.len(), 10);
        assert_eq!(m.get(7), Some((9, &b"b"[..])));
        // Spooled as its text, read back by its runs: the same lines.
        assert_eq!(l.text(), b"a\n\nb\nc\nd\n");
        let runs = [(7, 3), (20, 2)];
        assert_eq!(Lines::from_runs(l.text().to_vec(), &runs), Some(l.clone()));
        assert_eq!(
            Lines::from_runs(b"a\n\nb\n".to_vec(), &runs),
            None,
            "fewer lines"
        );
    }

    /// A backlog is taken in steps of at most `MAX_READ` and the end of the line the last
    /// step cut (what a tick holds stays bounded), every line once, in order.
    #[test]
    fn a_backlog_is_read_in_bounded_steps() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("a.log");
        let line = format!("{}\n", "x".repeat(99));
        let n = 3 * MAX_READ / line.len() + 7;
        append(&p, &line.repeat(n));
        let mut f = Follower::new(&p, Start::Beginning);
        let (mut read, mut polls) = (0, 0);
        loop {
            let mut v = Lines::default();
            let ev = f.poll(&mut v);
            assert!(
                v.bytes() <= MAX_READ + line.len(),
                "{} bytes in one poll",
                v.bytes()
            );
            assert_eq!(
                v.first().map(|l| l.0),
                (!v.is_empty()).then_some(read as u64 + 1)
            );
            read += v.len();
            polls += 1;
            if !ev.more {
                break;
            }
        }
        assert_eq!(read, n);
        assert!(polls >= 4, "{polls} polls");
    }

    #[test]
    fn whole_lines_only_and_a_missing_file_waited_for() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("a.log");
        let mut f = Follower::new(&p, Start::End);
        assert!(texts(&mut f).is_empty());
        assert!(
            f.problem.is_some(),
            "a missing file is a problem until created"
        );
        append(&p, "one\ntw");
        assert_eq!(texts(&mut f), ["one"], "created later: read from its start");
        append(&p, "o\n");
        assert_eq!(texts(&mut f), ["two"]);
        assert_eq!(f.position().unwrap().line, 2);
    }

    #[test]
    fn rotation_by_rename_and_by_copytruncate_loses_no_line() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("a.log");
        append(&p, "old\n");
        let mut f = Follower::new(&p, Start::Beginning);
        assert_eq!(texts(&mut f), ["old"]);
        // logrotate's rename + create, nginx writing to the old file until it reopens.
        std::fs::rename(&p, d.path().join("a.log.1")).unwrap();
        append(&d.path().join("a.log.1"), "late\n");
        append(&p, "new and longer\n");
        let mut got = texts(&mut f);
        append(&d.path().join("a.log.1"), "later\n");
        got.extend(texts(&mut f));
        assert_eq!(got, ["late", "new and longer", "later"]);
        // copytruncate: copied away, then cut to zero, then written again (less than was
        // read: a file that grew past the old size before a poll looks appended to, as it
        // does to `tail -F`).
        std::fs::write(&p, "").unwrap();
        append(&p, "after\n");
        let mut v = Lines::default();
        let ev = f.poll(&mut v);
        assert!(ev.truncated);
        assert_eq!(v.first(), Some((1, &b"after"[..])));
    }

    /// A budget bounds what a poll reads, within 64 KiB and `MAX_READ` (with the end of a line
    /// the poll before read the start of); the rest is read by the polls after it, every line
    /// once.
    #[test]
    fn a_budget_bounds_a_poll() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("access.log");
        let line = format!("{}\n", "z".repeat(99));
        append(&p, &line.repeat(2000));
        let mut f = Follower::new(&p, Start::Beginning);
        f.set_budget(1);
        assert_eq!(f.budget(), 64 << 10);
        let (mut read, mut polls) = (0, 0);
        while read < 2000 {
            let mut v = Lines::default();
            let ev = f.poll(&mut v);
            // The budget's bytes, with the line the poll before left unfinished.
            assert!(v.bytes() <= (64 << 10) + line.len(), "{} bytes", v.bytes());
            read += v.len();
            polls += 1;
            assert_eq!(ev.more, read < 2000 && v.bytes() > 0, "poll {polls}");
        }
        assert_eq!((read, polls), (2000, 4));
        f.set_budget(usize::MAX);
        assert_eq!(f.budget(), MAX_READ);
    }

    /// Lines handed back are read again by the next poll with the same numbers, the position
    /// before them; lines of the file read before a rotation cannot be handed back.
    #[test]
    fn lines_handed_back_are_read_again_and_only_from_the_open_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("error.log");
        append(&p, "a\nb\nc\nd\npart");
        let mut f = Follower::new(&p, Start::Beginning);
        let mut v = Lines::default();
        f.poll(&mut v);
        assert_eq!(v.len(), 4);
        let back = v.tail_size(2);
        assert_eq!(back, (4, 2));
        assert!(f.give_back(back.0, back.1));
        v.truncate(2);
        assert_eq!(f.position().unwrap().offset, 4);
        assert_eq!(f.position().unwrap().line, 2);
        // More than the last poll read cannot go back.
        assert!(!f.give_back(5, 3));
        append(&p, "ial\n");
        let mut again = Lines::default();
        f.poll(&mut again);
        let read: Vec<(u64, &[u8])> = again.iter().collect();
        assert_eq!(read, [(3, &b"c"[..]), (4, b"d"), (5, b"partial")]);
        // Renamed and created again: the poll reads the old file's last line, then the new
        // file's; only the new file's lines can go back.
        append(&p, "e\n");
        std::fs::rename(&p, dir.path().join("error.log.1")).unwrap();
        append(&p, "new\n");
        let mut v = Lines::default();
        f.poll(&mut v);
        let read: Vec<&[u8]> = v.iter().map(|(_, t)| t).collect();
        assert_eq!(read, [&b"e"[..], b"new"]);
        assert!(!f.give_back(v.tail_size(0).0, 2));
        assert!(f.give_back(4, 1));
        let mut v = Lines::default();
        f.poll(&mut v);
        assert_eq!(v.iter().collect::<Vec<_>>(), [(1, &b"new"[..])]);
    }

    #[test]
    fn a_saved_position_resumes_and_a_directory_is_a_problem() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("a.log");
        append(&p, "1\n2\n");
        let mut f = Follower::new(&p, Start::Beginning);
        assert_eq!(texts(&mut f).len(), 2);
        let at = f.position().unwrap();
        append(&p, "3\n");
        let mut g = Follower::new(&p, Start::At(at));
        let mut v = Lines::default();
        g.poll(&mut v);
        assert_eq!((v.len(), v.first().unwrap().0), (1, 3));
        std::fs::remove_file(&p).unwrap();
        std::fs::create_dir(&p).unwrap();
        assert!(texts(&mut g).is_empty());
        assert!(g.problem.as_deref().unwrap().contains("directory"));
    }
}
