//! Reading an instance's files in step on log time while they hold a backlog.
//!
//! A backlog (files read from their start, or after a pause) is read as fast as it can be,
//! but an instance's files do not span the same log time per byte: its error log holds a line
//! per failure, its access log a line per request, so one read of each spans hours of error
//! log against seconds of access log. The checker pairs a failure with the error lines read
//! by the time its access line is 10 s behind the access log, keeps those lines a minute, and
//! a window starts with `context` of the access log's time before it: error lines read hours
//! ahead are lost to all three, and error lines read too late find their failures paired.
//!
//! So in a backlog an error log is read up to [`SLACK_MS`] past where its instance's access
//! logs stand (what a read takes beyond is handed back to the file, read again later), and
//! an access log waits for an error log more than that behind it with lines left to read.
//! Followed live (every file read to its end at each tick) nothing waits.
//!
//! ```
//! use resolvelab_watch::live::Kind;
//! use resolvelab_watch::pace::{Stand, Step, step};
//! let access = Stand { polled: true, behind: true, at_ms: Some(60_000) };
//! let error = Stand { polled: true, behind: true, at_ms: Some(10_000) };
//! // The error log is read up to 10 s past the access log's newest request…
//! assert_eq!(step(Kind::Error, error, &[(Kind::Access, access)]), Step::UpTo(70_000));
//! // …which waits for it: it is 50 s behind, with lines left.
//! assert_eq!(step(Kind::Access, access, &[(Kind::Error, error)]), Step::Wait);
//! ```

use crate::follow::Lines;
use crate::live::Kind;
use resolvelab_diagnose::checker::error_log_offset_s;
use resolvelab_history::MemoryMatcher;
use resolvelab_history::logformat::LogFormat;
use resolvelab_history::time::parse_error_time;
use std::path::Path;

/// How far (ms) an instance's error log is read past its access logs in a backlog: as far as
/// the checker looks past a failure before pairing it (10 s), so that every error line a
/// failure can pair with is read before it is paired.
pub const SLACK_MS: i64 = 10_000;

/// Where one followed file of an instance stands.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stand {
    /// It was read at least once.
    pub polled: bool,
    /// Lines are left to read: its last read stopped short of its end, or lines were handed
    /// back to it.
    pub behind: bool,
    /// The log time it has reached (epoch ms): an access log's newest request read; an error
    /// log's next line (the first handed back), else its last line read.
    pub at_ms: Option<i64>,
}

impl Stand {
    /// Lines of it may come before the log time it shows.
    fn waiting(&self) -> bool {
        !self.polled || self.behind
    }
}

/// What a tick does with one file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Read what is there.
    Read,
    /// Read, and hand back the lines after this log time (epoch ms).
    UpTo(i64),
    /// Leave it for this tick.
    Wait,
}

/// What a tick does with a file of kind `kind` standing at `me`, beside the instance's other
/// files `peers`. An access log is read before the error logs in a tick, so that the error
/// logs' bound is where it stands after that read.
pub fn step(kind: Kind, me: Stand, peers: &[(Kind, Stand)]) -> Step {
    match kind {
        Kind::Error => {
            let mut bound: Option<i64> = None;
            for (_, s) in peers
                .iter()
                .filter(|(k, s)| *k == Kind::Access && s.waiting())
            {
                if !s.polled {
                    return Step::Wait;
                }
                if let Some(a) = s.at_ms {
                    bound = Some(bound.map_or(a + SLACK_MS, |b| b.min(a + SLACK_MS)));
                }
            }
            match bound {
                None => Step::Read,
                Some(b) if me.at_ms.is_some_and(|m| m > b) => Step::Wait,
                Some(b) => Step::UpTo(b),
            }
        }
        Kind::Access => {
            let Some(at) = me.at_ms else {
                return Step::Read;
            };
            let lagging = peers.iter().any(|(k, s)| {
                *k == Kind::Error
                    && s.polled
                    && s.behind
                    && s.at_ms.is_some_and(|e| at > e + SLACK_MS)
            });
            if lagging { Step::Wait } else { Step::Read }
        }
        Kind::Mixed | Kind::Dns => Step::Read,
    }
}

/// The last lines of a read that [`AccessClock::newest_ms`] parses: enough to pass over a
/// few malformed ones.
const TAIL: usize = 8;

/// Where an access log stands: the newest request among the last lines of each read, in its
/// format, and the error logs' UTC offset that its first request read gives.
pub struct AccessClock {
    m: MemoryMatcher,
    /// The first request read: its `$time_local` offset, if the format has one, and its time.
    first: Option<(Option<i32>, i64)>,
}

impl AccessClock {
    /// A clock for an access log in `fmt`.
    pub fn new(fmt: &LogFormat) -> AccessClock {
        AccessClock {
            m: MemoryMatcher::new(Path::new("pace"), fmt, false, 0),
            first: None,
        }
    }

    /// The newest request time (epoch ms) among the last of `lines` (none when none of them
    /// is a request of the format).
    pub fn newest_ms(&mut self, lines: &Lines) -> Option<i64> {
        let from = lines.len().saturating_sub(TAIL);
        let tail = (from..lines.len()).filter_map(|i| Some(lines.get(i)?.1));
        let (mut newest, first) = (None, &mut self.first);
        self.m.feed(tail, 1, |a| {
            let t = a.t_us / 1000;
            newest = newest.max(Some(t));
            first.get_or_insert((a.utc_offset_s, t));
        });
        newest
    }

    /// The first of `lines` written after `bound_ms` (their length when none is), found by
    /// bisection: an access log is in time order but for the few lines that workers write
    /// out of turn, so the cut is exact to within them. A line of another format counts as
    /// after the bound (the cut comes no later than it).
    pub fn cut(&mut self, lines: &Lines, bound_ms: i64) -> usize {
        let (mut lo, mut hi) = (0, lines.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            match self.time_ms(lines, mid) {
                Some(t) if t <= bound_ms => lo = mid + 1,
                _ => hi = mid,
            }
        }
        lo
    }

    /// Line `i`'s request time (epoch ms).
    fn time_ms(&mut self, lines: &Lines, i: usize) -> Option<i64> {
        let (_, text) = lines.get(i)?;
        let mut t = None;
        self.m.feed([text], 1, |a| t = Some(a.t_us / 1000));
        t
    }

    /// The error logs' UTC offset as a diagnosis takes it (`flag`: `--tz-offset`).
    pub fn error_offset_s(&self, flag: Option<i32>) -> i32 {
        let (seen, at) = self.first.map_or((None, None), |(o, t)| (o, Some(t)));
        error_log_offset_s(seen, flag, at)
    }
}

/// An error line's time (epoch ms of the start of its second) with the server's UTC offset
/// `offset_s`; none for a line that does not start with one (a continuation line).
pub fn error_time_ms(line: &[u8], offset_s: i32) -> Option<i64> {
    let local = parse_error_time(line.get(..19)?)?;
    Some((local - offset_s as i64) * 1000)
}

/// The first of an error log's `lines` written after `bound_ms` (its length when none is):
/// the lines before it are handed on, the rest back to the file. A line without a time goes
/// with the line before it.
pub fn cut(lines: &Lines, bound_ms: i64, offset_s: i32) -> usize {
    lines
        .iter()
        .position(|(_, t)| error_time_ms(t, offset_s).is_some_and(|ms| ms > bound_ms))
        .unwrap_or(lines.len())
}

/// The time of the last of `lines` that has one.
pub fn last_error_time_ms(lines: &Lines, offset_s: i32) -> Option<i64> {
    (0..lines.len())
        .rev()
        .find_map(|i| error_time_ms(lines.get(i)?.1, offset_s))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stand(behind: bool, at: i64) -> Stand {
        Stand {
            polled: true,
            behind,
            at_ms: Some(at),
        }
    }

    /// No pair of files can wait for each other: whatever they stand at, one of them is read.
    #[test]
    fn an_access_log_and_an_error_log_never_both_wait() {
        for a in [0, 5_000, 10_000, 10_001, 30_000] {
            for e in [0, 5_000, 10_000, 10_001, 30_000] {
                for (ab, eb) in [(true, true), (true, false), (false, true)] {
                    let (sa, se) = (stand(ab, a), stand(eb, e));
                    let access = step(Kind::Access, sa, &[(Kind::Error, se)]);
                    let error = step(Kind::Error, se, &[(Kind::Access, sa)]);
                    assert!(
                        access != Step::Wait || error != Step::Wait,
                        "access at {a} ({ab}), error at {e} ({eb}): both wait"
                    );
                }
            }
        }
    }

    /// Before its access log was read at all an error log waits a tick; an access log read
    /// to its end (followed live) bounds nothing.
    #[test]
    fn an_error_log_waits_for_the_first_read_of_its_access_log_only() {
        let unread = Stand::default();
        assert_eq!(
            step(Kind::Error, unread, &[(Kind::Access, unread)]),
            Step::Wait
        );
        assert_eq!(
            step(Kind::Access, unread, &[(Kind::Error, unread)]),
            Step::Read
        );
        let live = stand(false, 60_000);
        assert_eq!(
            step(Kind::Error, stand(false, 0), &[(Kind::Access, live)]),
            Step::Read
        );
        // Of two access logs, the one further behind bounds it.
        let peers = [
            (Kind::Access, stand(true, 60_000)),
            (Kind::Access, stand(true, 20_000)),
        ];
        assert_eq!(
            step(Kind::Error, stand(true, 0), &peers),
            Step::UpTo(30_000)
        );
    }

    /// The lines after the bound are cut off at the first one written after it; a
    /// continuation line stays with its line.
    #[test]
    fn lines_are_cut_at_the_first_one_after_the_bound() {
        let mut l = Lines::default();
        for (i, t) in [
            "2026/12/07 10:00:01 [error] a",
            "  continued",
            "2026/12/07 10:00:05 [error] b",
        ]
        .iter()
        .enumerate()
        {
            l.push(t.as_bytes(), i as u64 + 1);
        }
        let at = |s: &str| error_time_ms(s.as_bytes(), 3600).unwrap();
        let t1 = at("2026/12/07 10:00:01");
        // Local time one hour east of UTC.
        assert_eq!(Some(t1), error_time_ms(b"2026/12/07 09:00:01", 0));
        assert_eq!(cut(&l, t1, 3600), 2);
        assert_eq!(cut(&l, t1 - 1, 3600), 0);
        assert_eq!(cut(&l, t1 + 4000, 3600), 3);
        assert_eq!(last_error_time_ms(&l, 3600), Some(t1 + 4000));
    }
}
