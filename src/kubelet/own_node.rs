//! The kubelet's view of its own Node object (`{prefix}/nodes/{name}`), fed by a
//! list-and-watch of that one key: whether it is cordoned (`spec.unschedulable`, which
//! `kubectl cordon` sets through the API's node `PATCH`) and whether it was deleted after
//! the kubelet last posted it (`kubectl delete node`). A pure core: the loop in the parent
//! module feeds it the engine's raw items and acts on what it says.
//!
//! Kubernetes' kubelet reads its Node from an informer of that one object (the
//! `fieldSelector=metadata.name=NAME` node lister of `pkg/kubelet/kubelet.go`); no 2014
//! original (2014 had no cordon, and its minions were not the kubelet's to write).
//!
//! Invariants: it says nothing (`cordoned` is `None`) until the first list of the key is
//! complete; afterwards it holds the latest version delivered, never an older one (the
//! engine delivers the key's revisions in order); a deletion is reported with the
//! revision it was seen at, so a post after it is not mistaken for its victim.

use serde_json::Value;

use crate::api;
use crate::etcd_watcher::{RawEvent, RawItem, RawKind};

/// The Node as last seen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Seen {
    /// Stored, at `revision`; `ready` when its Ready condition says `True`.
    Present {
        unschedulable: bool,
        ready: bool,
        revision: i64,
    },
    /// Absent: deleted at `since`, or missing from a list read at `since`.
    Absent { since: i64 },
}

/// What the kubelet knows of its own Node.
#[derive(Debug, Default)]
pub(super) struct OwnNode {
    /// The key as read by the list in progress (`None`: not in the pages so far).
    listing: Option<RawEvent>,
    /// The latest complete list or event; `None` until the first list is complete.
    seen: Option<Seen>,
}

impl OwnNode {
    /// Takes in one item of the key's list-and-watch.
    pub(super) fn observe(&mut self, item: RawItem) {
        match item {
            RawItem::Page { kvs } => {
                if let Some(kv) = kvs.into_iter().last() {
                    self.listing = Some(kv);
                }
            }
            RawItem::Listed { revision, .. } => {
                self.seen = Some(match self.listing.take() {
                    Some(kv) => present(&kv),
                    None => Seen::Absent { since: revision },
                });
            }
            RawItem::ListFailed => self.listing = None,
            RawItem::Events(events) => {
                for event in events {
                    self.seen = Some(match event.kind {
                        RawKind::Put => present(&event),
                        RawKind::Delete => Seen::Absent {
                            since: event.mod_revision,
                        },
                    });
                }
            }
            RawItem::Progress(_) | RawItem::Resumed { .. } | RawItem::Ended(_) => {}
        }
    }

    /// Whether the Node is cordoned (`spec.unschedulable: true`); an absent Node is not.
    /// `None` until the key has been listed.
    pub(super) fn cordoned(&self) -> Option<bool> {
        self.seen.map(|seen| match seen {
            Seen::Present { unschedulable, .. } => unschedulable,
            Seen::Absent { .. } => false,
        })
    }

    /// Whether the Node says it is not Ready although the kubelet posted it Ready at
    /// revision `posted`: someone wrote it since (the node lifecycle controller, which
    /// through the API may mark a Node whose Lease was renewed just before its write).
    pub(super) fn not_ready_since(&self, posted: i64) -> bool {
        matches!(self.seen, Some(Seen::Present { ready: false, revision, .. }) if revision > posted)
    }

    /// Whether the Node is gone although the kubelet posted it at revision `posted`: it
    /// was deleted after that post, or a list read at or after it did not hold it.
    pub(super) fn deleted_since(&self, posted: i64) -> bool {
        matches!(self.seen, Some(Seen::Absent { since }) if since >= posted)
    }
}

/// The Node a put or a list read: cordoned when its `spec.unschedulable` is `true`, ready
/// when its Ready condition is `True` (a value that is not a JSON object is a Node
/// without either, which the kubelet's next post replaces).
fn present(kv: &RawEvent) -> Seen {
    let node = serde_json::from_slice::<Value>(&kv.value).ok();
    let unschedulable = node
        .as_ref()
        .and_then(|node| node.pointer("/spec/unschedulable").and_then(Value::as_bool))
        .unwrap_or(false);
    let ready = node.as_ref().is_some_and(|node| {
        api::node_condition_status(node, api::NODE_READY) == Some(api::CONDITION_TRUE)
    });
    Seen::Present {
        unschedulable,
        ready,
        revision: kv.mod_revision,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::etcd_watcher::ListReason;

    fn put(revision: i64, document: &str) -> RawEvent {
        RawEvent {
            kind: RawKind::Put,
            key: "/registry/nodes/n1".into(),
            value: document.as_bytes().to_vec(),
            create_revision: 2,
            mod_revision: revision,
            version: 1,
            prev: None,
        }
    }

    fn delete(revision: i64) -> RawEvent {
        RawEvent {
            kind: RawKind::Delete,
            value: Vec::new(),
            ..put(revision, "")
        }
    }

    fn listed(revision: i64) -> RawItem {
        RawItem::Listed {
            reason: ListReason::Initial,
            revision,
        }
    }

    const CORDONED: &str =
        r#"{"kind":"Node","spec":{"podCIDR":"10.0.0.0/24","unschedulable":true}}"#;
    const SCHEDULABLE: &str = r#"{"kind":"Node","spec":{"podCIDR":"10.0.0.0/24"}}"#;

    #[test]
    fn nothing_is_known_until_the_list_is_complete() {
        let mut node = OwnNode::default();
        node.observe(RawItem::Page {
            kvs: vec![put(5, CORDONED)],
        });
        assert_eq!(node.cordoned(), None);
        assert!(!node.deleted_since(0));
        node.observe(listed(7));
        assert_eq!(node.cordoned(), Some(true));
    }

    #[test]
    fn cordon_and_uncordon_follow_the_puts() {
        let mut node = OwnNode::default();
        node.observe(RawItem::Page {
            kvs: vec![put(5, SCHEDULABLE)],
        });
        node.observe(listed(7));
        assert_eq!(node.cordoned(), Some(false));
        node.observe(RawItem::Events(vec![put(8, CORDONED)]));
        assert_eq!(node.cordoned(), Some(true));
        node.observe(RawItem::Progress(9));
        assert_eq!(node.cordoned(), Some(true), "progress changes nothing");
        node.observe(RawItem::Events(vec![
            put(10, CORDONED),
            put(11, SCHEDULABLE),
        ]));
        assert_eq!(
            node.cordoned(),
            Some(false),
            "the last event of a batch wins"
        );
        // Not JSON, or `unschedulable` not a boolean: not cordoned.
        for odd in ["not json", r#"{"spec":{"unschedulable":"yes"}}"#] {
            node.observe(RawItem::Events(vec![put(12, odd)]));
            assert_eq!(node.cordoned(), Some(false), "{odd}");
        }
    }

    #[test]
    fn a_failed_list_drops_its_pages() {
        let mut node = OwnNode::default();
        node.observe(RawItem::Page {
            kvs: vec![put(5, CORDONED)],
        });
        node.observe(RawItem::ListFailed);
        node.observe(listed(9));
        assert_eq!(node.cordoned(), Some(false), "absent at 9");
        assert!(node.deleted_since(9));
    }

    #[test]
    fn a_delete_after_the_post_is_reported_and_one_before_it_is_not() {
        let mut node = OwnNode::default();
        // Listed before the kubelet's post at 6: absent, but not deleted since.
        node.observe(listed(4));
        assert!(!node.deleted_since(6));
        node.observe(RawItem::Events(vec![put(6, CORDONED)]));
        assert!(!node.deleted_since(6));
        node.observe(RawItem::Events(vec![delete(9)]));
        assert!(node.deleted_since(6));
        assert_eq!(
            node.cordoned(),
            Some(false),
            "a deleted Node is not cordoned"
        );
        assert!(!node.deleted_since(10), "posted again at 10");
        // A relist (say, after a compaction) that misses the Node reports it too.
        let mut node = OwnNode::default();
        node.observe(RawItem::Page {
            kvs: vec![put(6, SCHEDULABLE)],
        });
        node.observe(listed(6));
        node.observe(listed(20));
        assert!(node.deleted_since(6));
    }

    #[test]
    fn a_node_marked_not_ready_after_the_post_is_reported() {
        const READY: &str = r#"{"status":{"conditions":[{"type":"Ready","status":"True"}]}}"#;
        const UNKNOWN: &str = r#"{"status":{"conditions":[{"type":"Ready","status":"Unknown"}]}}"#;
        let mut node = OwnNode::default();
        node.observe(listed(4));
        assert!(!node.not_ready_since(6), "absent is not marked");
        node.observe(RawItem::Events(vec![put(6, READY)]));
        assert!(!node.not_ready_since(6));
        // Marked Unknown after the post at 6: post again.
        node.observe(RawItem::Events(vec![put(9, UNKNOWN)]));
        assert!(node.not_ready_since(6));
        // Posted Ready at 10: nothing to do.
        node.observe(RawItem::Events(vec![put(10, READY)]));
        assert!(!node.not_ready_since(10));
        // A version older than the post (the watch is behind it) says nothing yet.
        let mut node = OwnNode::default();
        node.observe(RawItem::Page {
            kvs: vec![put(5, UNKNOWN)],
        });
        node.observe(listed(5));
        assert!(!node.not_ready_since(6));
        assert!(node.not_ready_since(4));
    }
}
