//! Following one log file as nginx writes it, the way `tail -F` does: only whole lines (a line
//! is delivered once its newline is written), through rotation by rename + create, delete +
//! recreate and copytruncate, and from a saved position after a restart.

use serde::{Deserialize, Serialize};
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// The most bytes one poll reads from one file, so that a large backlog is taken in steps and
/// memory stays bounded.
const MAX_READ: usize = 16 << 20;

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

/// One whole line read: its bytes (without the newline) and its line number in its file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    /// The line, without its newline.
    pub text: Vec<u8>,
    /// Its line number in the file it was read from (1-based; restarts with a new file).
    pub line: u64,
}

/// An open file and what was delivered of it.
struct Open {
    file: File,
    pos: Position,
    /// Bytes after the last newline: a line still being written.
    partial: Vec<u8>,
}

impl Open {
    /// Whole lines appended since the last read: whether the file got shorter, and whether more
    /// was there than one read takes.
    fn read(&mut self, out: &mut Vec<Line>) -> std::io::Result<(bool, bool)> {
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
        let mut buf = Vec::new();
        (&mut self.file)
            .take(MAX_READ as u64)
            .read_to_end(&mut buf)?;
        let more = buf.len() == MAX_READ;
        self.partial.extend_from_slice(&buf);
        let Some(last) = self.partial.iter().rposition(|&b| b == b'\n') else {
            return Ok((truncated, more));
        };
        let rest = self.partial.split_off(last + 1);
        let whole = std::mem::replace(&mut self.partial, rest);
        self.pos.offset += whole.len() as u64;
        for l in whole[..whole.len() - 1].split(|&b| b == b'\n') {
            self.pos.line += 1;
            out.push(Line {
                text: l.to_vec(),
                line: self.pos.line,
            });
        }
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
        }
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
    pub fn poll(&mut self, out: &mut Vec<Line>) -> Events {
        let mut ev = Events::default();
        if let Some((o, left)) = &mut self.old {
            let _ = o.read(out);
            *left -= 1;
            if *left == 0 {
                self.old = None;
            }
        }
        if let Some(o) = &mut self.cur {
            match o.read(out) {
                Ok((t, more)) => (ev.truncated, ev.more) = (t, more),
                Err(e) => self.problem = Some(format!("{}: {e}", self.path.display())),
            }
        }
        match self.reopen() {
            Ok(Some(mut o)) => {
                ev.rotated = self.cur.is_some();
                let _ = o.read(out);
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
        let mut v = Vec::new();
        f.poll(&mut v);
        v.iter()
            .map(|l| String::from_utf8(l.text.clone()).unwrap())
            .collect()
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
        let mut v = Vec::new();
        let ev = f.poll(&mut v);
        assert!(ev.truncated);
        assert_eq!(v[0].text, b"after");
        assert_eq!(v[0].line, 1);
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
        let mut v = Vec::new();
        g.poll(&mut v);
        assert_eq!((v.len(), v[0].line), (1, 3));
        std::fs::remove_file(&p).unwrap();
        std::fs::create_dir(&p).unwrap();
        assert!(texts(&mut g).is_empty());
        assert!(g.problem.as_deref().unwrap().contains("directory"));
    }
}
