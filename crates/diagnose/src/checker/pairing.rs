//! Pairing: each failed request gets the error lines of its own connection and time — its
//! `no live upstreams` line, its first-try failures, its own failed resolution — in one streamed
//! pass over the merged error logs.
//!
//! Failures are paired in time order while the error stream is read up to just past each one:
//! only the lines that can still pair (a `*cid` and an NLU or first-try signature, not older than
//! the earliest pending request start) are buffered, so memory is bounded by the longest request,
//! not by the size of the error logs.

use super::StreamStats;
use super::access::AccessPass;
use super::errors::{ERef, PairWindow, REORDER_SLACK_MS, SigIndex, feed_errors};
use super::failure::{Failure, is_addr};
use crate::classes::Sig;
use resolvelab_history::{FileStats, History};

/// What the error pass yields besides the paired failures.
pub(super) struct ErrorPass {
    pub ix: SigIndex,
    pub stats: StreamStats,
    pub files: Vec<FileStats>,
}

/// Pair every failure (sorted by end time first) and index every error line.
pub(super) fn pair(
    hist: &History,
    offset_s: i32,
    failures: &mut [Failure],
    acc: &AccessPass,
    default_group: &str,
) -> anyhow::Result<ErrorPass> {
    failures.sort_by_key(|f| f.t_ms);
    let mut errs = hist.error_stream(offset_s)?;
    let mut ix = SigIndex::default();
    let mut win = PairWindow::default();
    let mut lo_suffix = vec![i64::MAX; failures.len() + 1];
    for j in (0..failures.len()).rev() {
        lo_suffix[j] = lo_suffix[j + 1].min(failures[j].start_ms - 1000);
    }
    for (j, f) in failures.iter_mut().enumerate() {
        feed_errors(
            &mut errs,
            f.t_ms.saturating_add(REORDER_SLACK_MS),
            lo_suffix[j],
            &mut ix,
            &mut win,
        );
        win.evict_before(lo_suffix[j]);
        if f.paired.is_some() || !f.first_try.is_empty() || f.own_dns.is_some() {
            // Built from its own error lines (no access log): nothing more to pair.
            if f.group.is_empty() {
                f.group = default_group.to_string();
            }
            continue;
        }
        let upstream = pair_one(f, &mut win);
        if !f.internal {
            f.group = group_of(f, acc, upstream, default_group);
        }
    }
    // The lines after the last failure still count for signatures and the re-query period.
    feed_errors(&mut errs, i64::MAX, i64::MAX, &mut ix, &mut win);
    ix.finish();
    let stats = StreamStats {
        error_lines: errs.lines(),
        late_lines: errs.late_lines(),
        max_buffered: win.max_len,
        dropped: win.dropped,
        fetched: 0,
    };
    Ok(ErrorPass {
        ix,
        stats,
        files: errs.finish(),
    })
}

/// Pair one failure with the buffered lines; returns the `upstream:` of the paired line.
fn pair_one(f: &mut Failure, win: &mut PairWindow) -> Option<String> {
    // Error-log times are the start of their second; a request's lines fall between its start
    // and its end.
    let (lo, hi) = (f.start_ms - 1000, f.t_ms);
    let cands: Vec<ERef> = match f.conn {
        // Several requests of a keep-alive connection share its *cid: the time window and the
        // request text tell them apart.
        Some(c) => win.by_cid(c, lo, hi),
        // Without `$connection`: by time and client — or by the request text where the client
        // differs (redacted differently in the two logs, or a proxy in front).
        None => win
            .by_time(lo, hi)
            .filter(|(_, e)| {
                f.remote.is_none()
                    || e.client.is_none()
                    || e.client == f.remote
                    || (e.request.is_some() && e.request == f.request)
            })
            .map(|(k, _)| k)
            .collect(),
    };
    let req_ok = |k: &ERef| match (&win.get(k).request, &f.request) {
        (Some(a), Some(b)) => a == b,
        _ => true,
    };
    let first_try = |k: &ERef| win.get(k).sig.is_first_try_failure() && req_ok(k);
    // A known trajectory that ends at a real address is not an NLU, even when an NLU line of
    // the same connection and second exists (keep-alive neighbours).
    let may_be_nlu = f.nlu || f.traj.is_none();
    let nlu_line = cands
        .iter()
        .copied()
        .filter(|k| may_be_nlu && win.get(k).sig == Sig::NoLiveUpstreams && req_ok(k))
        .min_by_key(|k| (f.t_ms - k.t_ms).abs());
    f.first_try = cands
        .iter()
        .filter(|k| first_try(k))
        .take(3)
        .map(|k| (*k, win.get(k).sig))
        .collect();
    f.own_dns = cands
        .iter()
        .find(|k| win.get(k).sig.is_resolution_failure() && req_ok(k))
        .map(|k| (*k, win.get(k).sig));
    let first = cands.iter().find(|k| first_try(k)).copied();
    if let Some(k) = nlu_line {
        // An NLU line answers one request only.
        let e = win.take(&k);
        f.paired = Some((k, e.sig));
        // Formats without $upstream_addr learn NLU from the error log.
        f.nlu = true;
        return e.upstream_host;
    }
    if !f.nlu
        && let Some(k) = first
    {
        let e = win.get(&k);
        f.paired = Some((k, e.sig));
        return e.upstream_host.clone();
    }
    f.paired = f.own_dns;
    None
}

/// The group of a paired failure: its trajectory's, its last address's, or the paired line's
/// `upstream:` host when that is a group name.
fn group_of(f: &Failure, acc: &AccessPass, upstream: Option<String>, default: &str) -> String {
    match f.traj.map(|t| &acc.trajs[t as usize]) {
        Some(t) => t
            .group
            .clone()
            .or_else(|| t.addrs.last().and_then(|a| acc.addr_group.get(a).cloned()))
            .unwrap_or_else(|| default.to_string()),
        None => upstream
            .filter(|h| !is_addr(h))
            .unwrap_or_else(|| default.to_string()),
    }
}
