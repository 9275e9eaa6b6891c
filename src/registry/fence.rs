//! What a write can be conditioned on besides its own key: the leader key of the current
//! term (a fence), another object's incarnation (a guard) and any other key's state (a
//! [`KeyCondition`], what the garbage collector's deletes compare about owners).

use std::sync::{Arc, RwLock};

use etcd_client::{Compare, CompareOp, KeyValue};
use tokio_util::sync::CancellationToken;

/// The annotation a fenced registry stamps on every object it creates: the fencing token
/// (leader key create revision) of the leadership term that created it. An audit trail:
/// etcd's history then shows which term wrote each object.
pub const FENCING_TOKEN_ANNOTATION: &str = "kcm.io/fencing-token";

/// A fencing token: the key a leader holds in an etcd election and that key's create
/// revision (etcd's `LeaderKey.rev`). A fenced write commits only while this very key
/// exists; once the lease behind it expires or the leader resigns, the key is gone (or
/// re-created by a later campaign with a higher revision) and every write carrying the
/// fence fails in etcd, wherever it comes from.
#[derive(Clone, Debug)]
pub struct Fence {
    /// The leader key, e.g. `/registry/elections/kcm-controller-manager/694d77b5e6a4a20f`.
    pub key: Vec<u8>,
    /// The leader key's create revision; increases with every term.
    pub create_revision: i64,
    /// Cancelled when the term ends, by the elector or by a registry that found the
    /// fence broken in etcd.
    pub(super) lost: CancellationToken,
}

impl Fence {
    /// The fence of a term that has just been won; the term ends when `lost` is
    /// cancelled (the elector passes a child of its lease's token, so an expired lease
    /// ends the term at once).
    pub fn new(key: impl Into<Vec<u8>>, create_revision: i64, lost: CancellationToken) -> Fence {
        Fence {
            key: key.into(),
            create_revision,
            lost,
        }
    }

    /// Cancelled once the term is over; fenced writes are then refused locally.
    pub fn lost(&self) -> &CancellationToken {
        &self.lost
    }

    /// Whether etcd's answer to `get(key)` shows the fence still held.
    pub(super) fn held_in(&self, kv: Option<&KeyValue>) -> bool {
        kv.is_some_and(|kv| kv.create_revision() == self.create_revision)
    }
}

/// The fence of the current leadership term, shared by the elector (which fills it when
/// it wins and ends the term when it loses) and every fenced registry. Cheap to clone.
#[derive(Clone, Debug, Default)]
pub struct FenceSlot(Arc<RwLock<Option<Fence>>>);

impl FenceSlot {
    /// Starts a term: from now on fenced writes carry `fence`.
    pub fn set(&self, fence: Fence) {
        *self.0.write().expect("fence lock") = Some(fence);
    }

    /// Ends the current term, if any: fenced writes are refused until the next `set`.
    pub fn clear(&self) {
        if let Some(fence) = self.0.write().expect("fence lock").take() {
            fence.lost.cancel();
        }
    }

    /// The fence of the current term, `None` when there is none or it was lost.
    pub fn current(&self) -> Option<Fence> {
        self.0
            .read()
            .expect("fence lock")
            .as_ref()
            .filter(|fence| !fence.lost.is_cancelled())
            .cloned()
    }
}

/// One incarnation of an object, as a write precondition: its key exists and was created
/// at or before `read_at`, a revision at which the object was read. Deleting the key ends
/// the incarnation for good: a key written again afterwards was created after the delete,
/// so after `read_at`, whatever its document says (even the same uid). etcd's
/// `create_revision` is what tells incarnations apart; the fencing token is the same idea
/// applied to the leader key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Incarnation {
    /// The object's key, e.g. `/registry/controllers/default/web`.
    pub key: String,
    /// A revision at which the object was read (its resourceVersion then).
    pub read_at: i64,
    /// The key's `create_revision` when the reader knows it (a copy decoded from etcd
    /// does): the incarnation is then exactly the key at that create revision.
    pub created: Option<i64>,
}

impl Incarnation {
    /// The compares that hold while the incarnation lives: its key's create revision,
    /// when known, is one compare (a missing key compares as 0, a later incarnation as
    /// more). Otherwise two: etcd compares a missing key's create revision as 0, so
    /// existence is a compare of its own. Each compare is one more read of the key in
    /// etcd's transaction, for every pod a controller writes.
    pub(super) fn compares(&self) -> impl Iterator<Item = Compare> {
        let key = self.key.as_str();
        let compares = match self.created {
            Some(created) => [
                Some(Compare::create_revision(key, CompareOp::Equal, created)),
                None,
            ],
            None => [
                Some(Compare::create_revision(key, CompareOp::Greater, 0)),
                Some(Compare::create_revision(
                    key,
                    CompareOp::Less,
                    self.read_at + 1,
                )),
            ],
        };
        compares.into_iter().flatten()
    }

    /// The compare that holds while the object is unchanged since it was read (its key's
    /// `mod_revision` is still `read_at`): stricter than [`Incarnation::compares`], it
    /// also breaks on any update (a spec change, a status write, a deletionTimestamp).
    pub(super) fn compare_unchanged(&self) -> Compare {
        Compare::mod_revision(self.key.as_str(), CompareOp::Equal, self.read_at)
    }

    /// Whether etcd's answer to `get(key)` shows the object unchanged since `read_at`.
    pub(super) fn unchanged_in(&self, kv: Option<&KeyValue>) -> bool {
        kv.is_some_and(|kv| kv.mod_revision() == self.read_at)
    }

    /// Whether etcd's answer to `get(key)` shows the incarnation alive.
    pub(super) fn alive_in(&self, kv: Option<&KeyValue>) -> bool {
        kv.is_some_and(|kv| match self.created {
            Some(created) => kv.create_revision() == created,
            None => kv.create_revision() > 0 && kv.create_revision() <= self.read_at,
        })
    }
}

/// A condition on another key that a write also requires, in its own transaction
/// ([`super::Registry::with_conditions`]): the garbage collector deletes a dependent only
/// while its owner is still absent, or still the other incarnation it read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KeyCondition {
    /// The key does not exist.
    Absent(String),
    /// The key exists, unchanged since this `mod_revision`.
    At(String, i64),
    /// The incarnation lives (its key was created at or before it was read, and not
    /// deleted since).
    Alive(Incarnation),
}

impl KeyCondition {
    /// The key the condition is about.
    pub fn key(&self) -> &str {
        match self {
            KeyCondition::Absent(key) | KeyCondition::At(key, _) => key,
            KeyCondition::Alive(incarnation) => &incarnation.key,
        }
    }

    pub(super) fn compares(&self) -> Vec<Compare> {
        match self {
            KeyCondition::Absent(key) => {
                vec![Compare::create_revision(key.as_str(), CompareOp::Equal, 0)]
            }
            KeyCondition::At(key, revision) => vec![
                Compare::create_revision(key.as_str(), CompareOp::Greater, 0),
                Compare::mod_revision(key.as_str(), CompareOp::Equal, *revision),
            ],
            KeyCondition::Alive(incarnation) => incarnation.compares().collect(),
        }
    }

    /// Whether etcd's answer to `get(key)` shows the condition holding.
    pub(super) fn holds_in(&self, kv: Option<&KeyValue>) -> bool {
        match self {
            KeyCondition::Absent(_) => kv.is_none(),
            KeyCondition::At(_, revision) => kv.is_some_and(|kv| kv.mod_revision() == *revision),
            KeyCondition::Alive(incarnation) => incarnation.alive_in(kv),
        }
    }

    /// What broke, for an error: `KEY was created`, `KEY changed since revision N`.
    pub(super) fn broken(&self) -> String {
        match self {
            KeyCondition::Absent(key) => format!("{key} exists"),
            KeyCondition::At(key, revision) => format!("{key} changed since revision {revision}"),
            KeyCondition::Alive(incarnation) => format!("{} was deleted", incarnation.key),
        }
    }
}
