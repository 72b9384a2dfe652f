//! Progress and warnings from the libraries, through one sink the program installs. A library
//! never prints (the workspace denies `print_stdout`/`print_stderr` outside the binary): what
//! a long build, a run or a background task has to say goes to [`line`] or [`status`], and the
//! program decides where it lands — the binary writes it to stderr, a test can collect it, an
//! embedding program can show it its own way. Without a sink, nothing is shown; like the `log`
//! facade, and for the same reason: the library cannot know whether its caller has a terminal.
//!
//! ```
//! use resolvelab_core::progress::{self, Note};
//! use std::sync::{Arc, Mutex};
//! let seen = Arc::new(Mutex::new(Vec::new()));
//! let s = seen.clone();
//! progress::set(move |n: Note<'_>| {
//!     if let Note::Line(l) = n {
//!         s.lock().unwrap().push(l.to_string())
//!     }
//! });
//! progress::line("building nginx");
//! assert_eq!(seen.lock().unwrap()[0], "building nginx");
//! ```

use std::sync::{Arc, RwLock};

/// One thing a library has to say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Note<'a> {
    /// A line of its own (a stage, a warning).
    Line(&'a str),
    /// The new text of a live status line, which replaces the previous one (shown only where
    /// the program has a terminal for it).
    Status(&'a str),
    /// The live status line is finished: what comes next starts on a new line.
    EndStatus,
}

type Sink = Arc<dyn Fn(Note<'_>) + Send + Sync>;

static SINK: RwLock<Option<Sink>> = RwLock::new(None);

/// Install the sink every later note goes to (replacing the previous one).
pub fn set(sink: impl Fn(Note<'_>) + Send + Sync + 'static) {
    *SINK.write().unwrap_or_else(|p| p.into_inner()) = Some(Arc::new(sink));
}

/// Say `note` (dropped when no sink is installed).
pub fn say(note: Note<'_>) {
    let sink = SINK.read().unwrap_or_else(|p| p.into_inner()).clone();
    if let Some(s) = sink {
        s(note)
    }
}

/// A line of its own.
pub fn line(text: impl AsRef<str>) {
    say(Note::Line(text.as_ref()))
}

/// The live status line's new text.
pub fn status(text: impl AsRef<str>) {
    say(Note::Status(text.as_ref()))
}

/// The live status line is finished.
pub fn end_status() {
    say(Note::EndStatus)
}
