//! The relist diff: what a consumer must hear when a watch lists again instead of
//! resuming (after compaction, or after etcd's revision went backwards).
//!
//! No 2014 original: 2014's watch ended with a 401 "index cleared" and the client started
//! over. client-go's reflector replaces its store wholesale (`Replace`) and lets the
//! informer diff; kube-runtime's `watcher()` emits `Init`/`InitApply`/`InitDone`. kcm diffs
//! once, here, for both its typed watch and its informers.
//!
//! Invariant: replaying the changes onto `known` yields `listed` exactly, and the upserts
//! come in revision order (ties in list order), so a consumer's resourceVersion never goes
//! backwards; deletes come last, in key order.

use std::collections::{HashMap, HashSet};

/// One change of a relist.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ListChange {
    /// `listed[i]` is new.
    Added(usize),
    /// `listed[i]` replaces a known item that differs from it.
    Modified(usize),
    /// A known key that is not listed any more.
    Deleted(String),
}

/// Compares what a watch has delivered (`known`: key → version) with a fresh list
/// (`listed`: key, version, revision) and returns the changes that turn one into the
/// other.
///
/// Versions that compare equal mean "unchanged": callers pass the resourceVersion (or
/// the whole object), and after a rewound store something that never compares equal, so
/// that every listed item is delivered again (equal revisions of two histories do not
/// mean equal values).
pub fn relist_diff<'k, V: PartialEq + 'k>(
    known: impl IntoIterator<Item = (&'k str, V)>,
    listed: &[(&str, V, i64)],
) -> Vec<ListChange> {
    let known: HashMap<&str, V> = known.into_iter().collect();
    let mut upserts: Vec<(i64, usize, bool)> = Vec::new();
    let mut seen: HashSet<&str> = HashSet::with_capacity(listed.len());
    for (i, (key, version, revision)) in listed.iter().enumerate() {
        seen.insert(key);
        match known.get(key) {
            None => upserts.push((*revision, i, true)),
            Some(old) if old != version => upserts.push((*revision, i, false)),
            Some(_) => {}
        }
    }
    upserts.sort_by_key(|&(revision, i, _)| (revision, i));
    let mut deleted: Vec<&str> = known
        .keys()
        .copied()
        .filter(|key| !seen.contains(key))
        .collect();
    deleted.sort_unstable();
    upserts
        .into_iter()
        .map(|(_, i, added)| {
            if added {
                ListChange::Added(i)
            } else {
                ListChange::Modified(i)
            }
        })
        .chain(
            deleted
                .into_iter()
                .map(|key| ListChange::Deleted(key.to_string())),
        )
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `known` and `listed` as `key@revision` words; the result as `+key`, `~key`, `-key`.
    #[track_caller]
    fn check(known: &str, listed: &str, expected: &str) {
        fn parse(words: &str) -> Vec<(&str, i64)> {
            words
                .split_whitespace()
                .map(|w| {
                    let (key, rev) = w.split_once('@').expect("key@revision");
                    (key, rev.parse().expect("revision"))
                })
                .collect()
        }
        let known = parse(known);
        let listed: Vec<(&str, i64, i64)> =
            parse(listed).into_iter().map(|(k, r)| (k, r, r)).collect();
        let changes = relist_diff(known.iter().copied(), &listed);
        let got: Vec<String> = changes
            .iter()
            .map(|c| match c {
                ListChange::Added(i) => format!("+{}", listed[*i].0),
                ListChange::Modified(i) => format!("~{}", listed[*i].0),
                ListChange::Deleted(k) => format!("-{k}"),
            })
            .collect();
        assert_eq!(got.join(" "), expected);
        // Replaying the changes onto `known` yields `listed`.
        let mut state: HashMap<&str, i64> = known.into_iter().collect();
        for change in &changes {
            match change {
                ListChange::Added(i) | ListChange::Modified(i) => {
                    state.insert(listed[*i].0, listed[*i].1);
                }
                ListChange::Deleted(k) => {
                    state.remove(k.as_str());
                }
            }
        }
        let want: HashMap<&str, i64> = listed.iter().map(|(k, v, _)| (*k, *v)).collect();
        assert_eq!(state, want);
    }

    #[test]
    fn nothing_changed_means_no_changes() {
        check("a@3 b@4", "b@4 a@3", "");
        check("", "", "");
    }

    #[test]
    fn new_changed_and_vanished_keys() {
        check("a@3 b@4 c@5", "a@3 b@9 d@7", "+d ~b -c");
    }

    #[test]
    fn upserts_come_in_revision_order_and_deletes_last_in_key_order() {
        check("z@1 y@1", "c@9 a@7 b@8", "+a +b +c -y -z");
    }

    #[test]
    fn from_an_empty_watch_everything_is_added() {
        check("", "a@5 b@2", "+b +a");
    }

    #[test]
    fn everything_gone_is_all_deletes() {
        check("b@2 a@5", "", "-a -b");
    }

    /// A watch resumed from a caller's resourceVersion N knows the state at N: objects
    /// deleted in a compacted gap become deletes, objects unchanged since N stay silent
    /// (they are not delivered again as Added with old revisions).
    #[test]
    fn resume_from_a_callers_revision_after_compaction() {
        // state at N=10: a@3 b@4 c@10; in the gap: b deleted, c modified, d created.
        check("a@3 b@4 c@10", "a@3 c@12 d@11", "+d ~c -b");
    }

    #[test]
    fn a_single_object_watch_sees_its_delete() {
        check("p@5", "", "-p");
        check("", "p@9", "+p");
    }

    /// After a rewind equal revisions do not mean equal values: callers pass versions
    /// that never compare equal, and every listed item is delivered again.
    #[test]
    fn after_a_rewind_every_listed_item_is_delivered_again() {
        let known = [("a", None), ("b", None)];
        let listed = [("a", Some(3), 3), ("c", Some(4), 4)];
        let changes = relist_diff(known.iter().map(|(k, v)| (*k, *v)), &listed);
        assert_eq!(
            changes,
            vec![
                ListChange::Modified(0),
                ListChange::Added(1),
                ListChange::Deleted("b".into())
            ]
        );
    }
}
