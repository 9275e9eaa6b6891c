//! Values read and written as bytes at a whole key: the Node and Namespace documents
//! their writers read-modify-write as `serde_json::Value`, and every object the apiserver
//! writes (its one store path encodes and decodes the typed kinds itself). The
//! compare-and-swap primitives a generic store needs are here: create-if-absent (also
//! while another key stays as read: [`Registry::create_raw_guarded`]),
//! [`Registry::guaranteed_update_raw`] and [`Registry::guaranteed_delete_raw`] (whose
//! decision may write the object marked instead of deleting it). The writes are the typed
//! writes' transactions, so a fence, a guard ([`Registry::guarded_by`]) and conditions
//! ([`Registry::with_conditions`]) apply to them alike.

use etcd_client::{Compare, CompareOp, GetOptions, PutOptions, TxnOp};

use super::{
    current_kv, unchanged_since, KeyCondition, Registry, StorageError, MAX_UPDATE_ATTEMPTS,
};
use crate::api::ResourceVersion;

/// How often [`Registry::create_raw_guarded`] reads its guard again after it changed.
const GUARD_ATTEMPTS: usize = 5;

/// What a guaranteed delete does to the value it read ([`Registry::guaranteed_delete_raw`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Deletion {
    /// Delete the key.
    Delete,
    /// Write this instead (an object marked for deletion, which stays until its
    /// finalizers or its kubelet remove it).
    Write(Vec<u8>),
    /// Leave it as it is (already in deletion as asked).
    Keep,
}

/// What a guaranteed delete did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Deleted {
    /// The key is gone; the value it held, with `mod_revision` the revision of the delete
    /// (as kube-apiserver answers a delete with the object at the delete's revision).
    Gone(RawValue),
    /// The value written instead, at its new revision.
    Written(RawValue),
    /// Nothing was written; the value as read.
    Kept(RawValue),
}

/// A value as stored, with its revisions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RawValue {
    pub value: Vec<u8>,
    pub create_revision: i64,
    pub mod_revision: i64,
}

impl Registry {
    /// The options of a raw put: this registry's lease, if it has one.
    fn put_options(&self) -> Option<PutOptions> {
        self.lease.map(|lease| PutOptions::new().with_lease(lease))
    }

    /// Refuses a key outside this registry's prefix.
    fn check_raw_key(&self, op: &'static str, key: &str) -> Result<(), StorageError> {
        let inside = key
            .strip_prefix(self.prefix())
            .and_then(|rest| rest.strip_prefix('/'))
            .is_some_and(|rest| !rest.is_empty());
        if inside {
            return Ok(());
        }
        Err(StorageError::BadRequest {
            op,
            key: key.to_string(),
            message: format!("the key is not under the prefix {}", self.prefix()),
        })
    }

    /// Reads the value at `key` (under the prefix); `None` when the key does not exist.
    ///
    /// # Errors
    /// `BadRequest` for a key outside the prefix, `Etcd` when etcd fails.
    pub async fn get_raw(&self, key: &str) -> Result<Option<RawValue>, StorageError> {
        // etcd reads revision 0 as its current one.
        self.get_raw_at(key, 0).await
    }

    /// Reads the value `key` (under the prefix) had at `revision` (0: now); `None` when the
    /// key did not exist then.
    ///
    /// # Errors
    /// `BadRequest` for a key outside the prefix, `Etcd` when etcd fails (also when
    /// `revision` has been compacted).
    pub async fn get_raw_at(
        &self,
        key: &str,
        revision: i64,
    ) -> Result<Option<RawValue>, StorageError> {
        self.check_raw_key("get", key)?;
        let response = self
            .call("get", key, |mut kv| {
                let key = key.to_string();
                async move {
                    kv.get(key, Some(GetOptions::new().with_revision(revision)))
                        .await
                }
            })
            .await?;
        Ok(response.kvs().first().map(|kv| RawValue {
            value: kv.value().to_vec(),
            create_revision: kv.create_revision(),
            mod_revision: kv.mod_revision(),
        }))
    }

    /// Writes `value` at `key` (under the prefix) if the key does not exist. Returns the
    /// revision of the write. Unlike [`Registry::create`], the value is written as given: no
    /// system fields, no fencing-token annotation.
    ///
    /// # Errors
    /// `AlreadyExists` (nothing is written); `Fenced`, `OwnerGone`, `ConditionFailed` as
    /// every write.
    pub async fn create_raw(
        &self,
        key: &str,
        value: Vec<u8>,
    ) -> Result<ResourceVersion, StorageError> {
        self.check_raw_key("create", key)?;
        let fence = self.write_fence("create", key)?;
        let response = self
            .write_txn(
                "create",
                key,
                fence.as_ref(),
                vec![Compare::create_revision(key, CompareOp::Equal, 0)],
                vec![TxnOp::put(key, value, self.put_options())],
                vec![],
            )
            .await?;
        if !response.succeeded() {
            return Err(StorageError::AlreadyExists {
                key: key.to_string(),
            });
        }
        Ok(ResourceVersion(
            response.header().map_or(0, |h| h.revision()),
        ))
    }

    /// Writes `value` at `key` (under the prefix) only if the key is still at `expected`
    /// (compare-and-swap on `mod_revision`). Returns the revision of the write.
    ///
    /// # Errors
    /// `Conflict` when the key changed or was deleted since (nothing is written);
    /// `Fenced`, `OwnerGone`, `ConditionFailed` as every write.
    pub async fn update_raw(
        &self,
        key: &str,
        expected: ResourceVersion,
        value: Vec<u8>,
    ) -> Result<ResourceVersion, StorageError> {
        self.check_raw_key("update", key)?;
        let fence = self.write_fence("update", key)?;
        let response = self
            .write_txn(
                "update",
                key,
                fence.as_ref(),
                unchanged_since(key, expected),
                vec![TxnOp::put(key, value, self.put_options())],
                vec![TxnOp::get(key, None)],
            )
            .await?;
        if response.succeeded() {
            return Ok(ResourceVersion(
                response.header().map_or(0, |h| h.revision()),
            ));
        }
        let actual =
            current_kv(&response.op_responses()).map(|kv| ResourceVersion(kv.mod_revision()));
        Err(StorageError::Conflict {
            key: key.to_string(),
            expected,
            actual,
        })
    }

    /// Reads the value at `key` (under the prefix), applies `update` to it and writes what
    /// it returns with compare-and-swap, reading again and applying `update` again when
    /// another writer came between: [`Registry::guaranteed_update`] for a document that is
    /// not a typed kind. `update` returning `None` writes nothing. Returns the value as
    /// written (or as read, when nothing was written), with its revisions.
    ///
    /// # Errors
    /// `NotFound`, `Update` when `update` fails (nothing is written), `Conflict` after
    /// 100 consecutive conflicts; `Fenced`, `OwnerGone`, `ConditionFailed` as every write.
    pub async fn guaranteed_update_raw<F>(
        &self,
        key: &str,
        mut update: F,
    ) -> Result<RawValue, StorageError>
    where
        F: FnMut(&RawValue) -> anyhow::Result<Option<Vec<u8>>>,
    {
        let not_found = || StorageError::NotFound {
            key: key.to_string(),
        };
        let mut current = self.get_raw(key).await?.ok_or_else(not_found)?;
        let mut last_conflict = None;
        for _ in 0..MAX_UPDATE_ATTEMPTS {
            let Some(value) = update(&current).map_err(|source| StorageError::Update {
                key: key.to_string(),
                source,
            })?
            else {
                return Ok(current);
            };
            let expected = ResourceVersion(current.mod_revision);
            match self.update_raw(key, expected, value.clone()).await {
                Ok(written) => {
                    return Ok(RawValue {
                        value,
                        create_revision: current.create_revision,
                        mod_revision: written.0,
                    })
                }
                Err(conflict @ StorageError::Conflict { .. }) => {
                    tracing::debug!(%key, "guaranteed_update_raw conflict; retrying");
                    current = self.get_raw(key).await?.ok_or_else(not_found)?;
                    last_conflict = Some(conflict);
                }
                Err(error) => return Err(error),
            }
        }
        Err(last_conflict.expect("the loop ran at least once"))
    }

    /// The delete beside [`Registry::guaranteed_update_raw`]: reads the value at `key`
    /// (under the prefix; `None` when absent), lets `decide` say what the delete does to
    /// it ([`Deletion`]) and does that at the revision read, reading again and deciding
    /// again when another writer came between. A [`Deletion::Write`] of an absent key
    /// creates it; [`Deletion::Delete`] or [`Deletion::Keep`] of one is `NotFound`.
    ///
    /// # Errors
    /// `NotFound`, `Update` when `decide` refuses (nothing is written), `Conflict` after
    /// 100 consecutive conflicts; `Fenced`, `OwnerGone`, `ConditionFailed` as every write.
    pub async fn guaranteed_delete_raw<F>(
        &self,
        key: &str,
        mut decide: F,
    ) -> Result<Deleted, StorageError>
    where
        F: FnMut(Option<&RawValue>) -> anyhow::Result<Deletion>,
    {
        let not_found = || StorageError::NotFound {
            key: key.to_string(),
        };
        let mut current = self.get_raw(key).await?;
        let mut last_conflict = None;
        for _ in 0..MAX_UPDATE_ATTEMPTS {
            let deletion = decide(current.as_ref()).map_err(|source| StorageError::Update {
                key: key.to_string(),
                source,
            })?;
            let written = match (deletion, &current) {
                (Deletion::Delete | Deletion::Keep, None) => return Err(not_found()),
                (Deletion::Keep, Some(read)) => return Ok(Deleted::Kept(read.clone())),
                (Deletion::Delete, Some(read)) => self
                    .delete_raw(key, ResourceVersion(read.mod_revision))
                    .await
                    .map(|deleted_at| {
                        Deleted::Gone(RawValue {
                            mod_revision: deleted_at.0,
                            ..read.clone()
                        })
                    }),
                (Deletion::Write(value), None) => {
                    self.create_raw(key, value.clone()).await.map(|written| {
                        Deleted::Written(RawValue {
                            value,
                            create_revision: written.0,
                            mod_revision: written.0,
                        })
                    })
                }
                (Deletion::Write(value), Some(read)) => self
                    .update_raw(key, ResourceVersion(read.mod_revision), value.clone())
                    .await
                    .map(|written| {
                        Deleted::Written(RawValue {
                            value,
                            create_revision: read.create_revision,
                            mod_revision: written.0,
                        })
                    }),
            };
            match written {
                Ok(deleted) => return Ok(deleted),
                Err(
                    conflict @ (StorageError::Conflict { .. } | StorageError::AlreadyExists { .. }),
                ) => {
                    tracing::debug!(%key, "guaranteed_delete_raw conflict; retrying");
                    current = self.get_raw(key).await?;
                    last_conflict = Some(conflict);
                }
                Err(error) => return Err(error),
            }
        }
        Err(last_conflict.expect("the loop ran at least once"))
    }

    /// Creates `value` at `key` (under the prefix) if absent, in a transaction that also
    /// requires the `guard` key as read and as `admit` accepted it (absent, or at the
    /// revision read), reading `guard` again and asking `admit` again when it changed
    /// between: a create that must not land once something about another key changed
    /// (an object in a namespace that began terminating).
    ///
    /// `seen` is a condition on `guard` the caller already admitted, from a cache (the
    /// apiserver's watch cache of namespaces): the first attempt compares against it
    /// without reading `guard`, so a create costs one etcd request; when the cache was
    /// behind, the transaction fails on it and the next attempt reads `guard` as usual.
    ///
    /// # Errors
    /// `AlreadyExists`, `Update` when `admit` refuses (nothing is written),
    /// `ConditionFailed` when `guard` kept changing; `Fenced`, `OwnerGone` as every write.
    pub async fn create_raw_guarded<F>(
        &self,
        key: &str,
        value: Vec<u8>,
        guard: &str,
        mut seen: Option<KeyCondition>,
        mut admit: F,
    ) -> Result<ResourceVersion, StorageError>
    where
        F: FnMut(Option<&RawValue>) -> anyhow::Result<()>,
    {
        let mut last_failure = None;
        let attempts = GUARD_ATTEMPTS + usize::from(seen.is_some());
        for _ in 0..attempts {
            let condition = match seen.take() {
                Some(condition) => condition,
                None => {
                    let read = self.get_raw(guard).await?;
                    admit(read.as_ref()).map_err(|source| StorageError::Update {
                        key: key.to_string(),
                        source,
                    })?;
                    match &read {
                        None => KeyCondition::Absent(guard.to_string()),
                        Some(read) => KeyCondition::At(guard.to_string(), read.mod_revision),
                    }
                }
            };
            let guarded = self.with_conditions(vec![condition]);
            match guarded.create_raw(key, value.clone()).await {
                Err(failed @ StorageError::ConditionFailed { .. }) => {
                    tracing::debug!(%key, %guard, "create_raw_guarded: the guard changed; retrying");
                    last_failure = Some(failed);
                }
                outcome => return outcome,
            }
        }
        Err(last_failure.expect("the loop ran at least once"))
    }

    /// Deletes `key` (under the prefix) only if it is still at `expected`
    /// (compare-and-swap on `mod_revision`). Returns the revision of the delete.
    ///
    /// # Errors
    /// `NotFound` when the key is gone, `Conflict` when it changed since (nothing is
    /// deleted); `Fenced`, `OwnerGone`, `ConditionFailed` as every write.
    pub async fn delete_raw(
        &self,
        key: &str,
        expected: ResourceVersion,
    ) -> Result<ResourceVersion, StorageError> {
        self.check_raw_key("delete", key)?;
        let fence = self.write_fence("delete", key)?;
        let response = self
            .write_txn(
                "delete",
                key,
                fence.as_ref(),
                unchanged_since(key, expected),
                vec![TxnOp::delete(key, None)],
                vec![TxnOp::get(key, None)],
            )
            .await?;
        if response.succeeded() {
            return Ok(ResourceVersion(
                response.header().map_or(0, |h| h.revision()),
            ));
        }
        match current_kv(&response.op_responses()) {
            None => Err(StorageError::NotFound {
                key: key.to_string(),
            }),
            Some(current) => Err(StorageError::Conflict {
                key: key.to_string(),
                expected,
                actual: Some(ResourceVersion(current.mod_revision())),
            }),
        }
    }
}
