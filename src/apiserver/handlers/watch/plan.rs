//! Where a watch starts and how long it lasts, from its query (kube-apiserver's
//! `resourceVersion`, `sendInitialEvents`, `resourceVersionMatch` and `timeoutSeconds`
//! rules for a watch).

use std::time::Duration;

use rand::Rng as _;

use super::super::request::Query;
use crate::apiserver::errors::ApiError;

/// A watch without `timeoutSeconds` lasts between this and twice this (kube-apiserver's
/// `--min-request-timeout`, 1800 s, randomised so that watchers do not reconnect together).
pub(super) const MIN_WATCH_TIMEOUT: Duration = Duration::from_secs(1800);

/// Where a watch starts.
pub(super) enum WatchStart {
    /// The current state as ADDED, then the changes (`""`, `"0"`).
    Snapshot,
    /// The current state as ADDED, a BOOKMARK saying so, then the changes
    /// (`sendInitialEvents=true`).
    InitialEvents(i64),
    /// The changes after this revision.
    After(i64),
}

pub(super) fn plan_watch(query: &Query) -> Result<WatchStart, ApiError> {
    let rv = query.get("resourceVersion").unwrap_or("");
    let revision = if rv.is_empty() {
        0
    } else {
        rv.parse::<i64>().ok().filter(|n| *n >= 0).ok_or_else(|| {
            ApiError::bad_request(format!(
                "resourceVersion: Invalid value: {rv:?}: must be a non-negative integer"
            ))
        })?
    };
    match query.get("sendInitialEvents") {
        Some("true") => {
            if query.get("resourceVersionMatch") != Some("NotOlderThan") {
                return Err(ApiError::bad_request(
                    "sendInitialEvents: Forbidden: sendInitialEvents is allowed only with resourceVersionMatch set to \"NotOlderThan\"",
                ));
            }
            if !query.flag("allowWatchBookmarks") {
                return Err(ApiError::bad_request(
                    "allowWatchBookmarks: Forbidden: allowWatchBookmarks must be set with sendInitialEvents",
                ));
            }
            Ok(WatchStart::InitialEvents(revision))
        }
        Some("false") if revision > 0 => Ok(WatchStart::After(revision)),
        _ if revision == 0 => Ok(WatchStart::Snapshot),
        _ => Ok(WatchStart::After(revision)),
    }
}

/// How long a watch lasts: `timeoutSeconds`, or a random time between
/// [`MIN_WATCH_TIMEOUT`] and twice that when it is absent or 0.
///
/// A negative `timeoutSeconds` is not refused: kube-apiserver's list options validation
/// says nothing about it, and its watch handler turns the seconds into a duration and
/// gives the watch a deadline that far from now (only 0 means "the default"). A negative
/// duration is a deadline already past, so the watch is answered 200 and its stream ends
/// at once. kcm does the same with a zero duration: the stream ends at its first wait,
/// after at most the initial events already queued (kube-apiserver's timer and its first
/// events race, so it may send some of them too).
pub(super) fn watch_timeout(query: &Query) -> Result<Duration, ApiError> {
    Ok(match query.number("timeoutSeconds")? {
        Some(seconds) if seconds > 0 => Duration::from_secs(seconds as u64),
        Some(seconds) if seconds < 0 => Duration::ZERO,
        _ => {
            let extra = rand::thread_rng().gen_range(0..MIN_WATCH_TIMEOUT.as_secs());
            MIN_WATCH_TIMEOUT + Duration::from_secs(extra)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::super::super::request::query;
    use super::*;

    #[test]
    fn timeout_seconds_bound_a_watch_and_a_negative_one_ends_it_at_once() {
        let timeout = |q: &str| watch_timeout(&query(q)).map_err(|e| e.code);
        assert_eq!(timeout("timeoutSeconds=5"), Ok(Duration::from_secs(5)));
        assert_eq!(timeout("timeoutSeconds=-5"), Ok(Duration::ZERO));
        for default in ["", "timeoutSeconds=0", "timeoutSeconds="] {
            let got = timeout(default).unwrap();
            assert!(
                (MIN_WATCH_TIMEOUT..MIN_WATCH_TIMEOUT * 2).contains(&got),
                "{default}: {got:?}"
            );
        }
        assert_eq!(timeout("timeoutSeconds=soon"), Err(400));
    }
}
