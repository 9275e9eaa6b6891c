//! Typed storage of api objects on etcd v3: get, paginated list, create-if-absent,
//! compare-and-swap update, guarded delete and `guaranteed_update`.
//!
//! Mirrors 2014's `pkg/tools/etcd_tools.go` (`EtcdHelper`: `ExtractObj`, `ExtractToList`,
//! `CreateObj`, `SetObj`, `AtomicUpdate`) and `pkg/registry/etcd/etcd.go`, with etcd v2's
//! `prevIndex` compare-and-swap replaced by a v3 transaction on `mod_revision`. Where it
//! departs from 2014 (the `storage:` rows of docs/departures.md): an update never creates
//! a missing key, and every single-object operation refuses an empty namespace or name.
//!
//! Invariants:
//! - every object returned carries `metadata.resourceVersion` = its key's `mod_revision`,
//!   and every list the header revision of its (single, pinned) read;
//! - a value that does not decode never fails a list: it is reported per key in
//!   [`ObjectList::errors`] next to the good objects;
//! - writes never drop fields kcm does not model (see `api`), and an unchanged object
//!   is not written at all by [`Registry::guaranteed_update`];
//! - every create and update sets `metadata.generation` ([`api::set_generation`]): 1 on
//!   create, one more exactly when `spec` changed. This is the one place kcm's writers (the
//!   CLI, `up`, the kubelet, the controllers) get it from, as Kubernetes' get it from the
//!   apiserver;
//! - every write is one transaction; in a fenced registry ([`Registry::with_fence`])
//!   each also compares the leader key's create revision, so a deposed leader's write
//!   commits nowhere, not even one already on the wire when leadership was lost; in a
//!   guarded one ([`Registry::guarded_by`]) each also compares another object's create
//!   revision, so no write made for an object lands after that object was deleted; with
//!   [`Registry::with_conditions`] each also requires other keys absent, unchanged or
//!   alive (the garbage collector's owner checks).
//!
//! The module is split along its seams: `fence` (the leader fence and object incarnations a
//! write can be conditioned on), `errors` (`StorageError` and the classification of etcd's
//! errors), `alarms` (etcd's alarms, and what to tell the operator about them and about
//! etcd's refusals for space and size), `paging` (pinned, paginated range reads) and `raw`
//! (whole-key reads and writes: Nodes, and the apiserver's one store path with its
//! create, guaranteed update and guaranteed delete). Everything
//! public is re-exported here.

use std::sync::Arc;
use std::time::Duration;

use etcd_client::{
    Client, Compare, CompareOp, KeyValue, KvClient, Txn, TxnOp, TxnOpResponse, TxnResponse,
};

use crate::api::{self, Object, ResourceVersion};
use crate::labels::Selector;

mod alarms;
mod errors;
mod fence;
mod maintenance;
mod paging;
mod raw;
mod stamp;

#[cfg(test)]
mod tests;

pub use alarms::{is_no_space, EtcdAlarm, NOSPACE_FIX};
pub use errors::{describe_etcd_error, is_compacted, DecodeError, StorageError};
use errors::{is_unsent, RawError};
pub use fence::{Fence, FenceSlot, Incarnation, KeyCondition, FENCING_TOKEN_ANNOTATION};
pub use maintenance::active_alarms;
pub use paging::{prefix_range_end, RangePage};
pub use raw::{Deleted, Deletion, RawValue};
pub use stamp::{Filled, Stamp};

/// Objects per list page. Large on purpose: etcd 3.4 rescans the rest of the range for
/// every page, so 50,000 pods in pages of 500 took 3x as long as one request.
pub const DEFAULT_PAGE_SIZE: i64 = 10_000;

/// Largest gRPC message kcm accepts from etcd (etcd-client's default is 4 MiB, less than
/// one page of ordinary pods). A page that is still too large is split in half.
pub const MAX_RESPONSE_BYTES: usize = 256 * 1024 * 1024;

/// How often `guaranteed_update` retries a conflicting write before giving up.
const MAX_UPDATE_ATTEMPTS: usize = 100;

/// How often [`Registry`] re-sends a call that was never sent.
const MAX_RESENDS: usize = 2;

/// A list result: the objects that decoded and matched, the revision the whole list was
/// read at, and the values that did not decode.
#[derive(Debug, Clone)]
pub struct ObjectList<T> {
    pub items: Vec<T>,
    /// The etcd header revision of the read (every page is pinned to it).
    pub resource_version: ResourceVersion,
    pub errors: Vec<DecodeError>,
}

/// Records who wrote which fields of an object that tracks them (`metadata.managedFields`)
/// when a writer other than the apiserver (kcm's controllers, its CLI) writes it directly:
/// the apiserver's field manager, given to their registries as a trait object because the
/// registry sits below the apiserver.
pub trait FieldRecorder: Send + Sync {
    /// `new`, the stored document of kind `kind` that `manager` writes over `old`, with its
    /// entries updated (an Update).
    fn record(
        &self,
        kind: &str,
        manager: &str,
        old: &serde_json::Value,
        new: &mut serde_json::Value,
    );
}

/// A registry's field recorder and the manager its writes are recorded as.
#[derive(Clone)]
struct FieldManager {
    recorder: Arc<dyn FieldRecorder>,
    manager: Arc<str>,
}

/// Typed access to the objects under one prefix. Cheap to clone.
#[derive(Clone)]
pub struct Registry {
    /// Shared: etcd-client's handle is 400 bytes, and a controller makes a guarded copy
    /// of its registry for every pod it writes.
    kv: Arc<KvClient>,
    prefix: Arc<str>,
    request_timeout: Duration,
    page_size: i64,
    /// Set for a leader's registry: every write carries the current fence.
    fence: Option<FenceSlot>,
    /// Set for a registry writing on an object's behalf: every write requires it to live.
    guard: Option<Arc<Incarnation>>,
    /// The guard requires the object unchanged (same `mod_revision`), not just alive.
    guard_unchanged: bool,
    /// Every write also requires these.
    conditions: Arc<[KeyCondition]>,
    /// Set for a writer whose updates of tracked objects record their fields.
    field_manager: Option<FieldManager>,
    /// Set for a writer of values that expire: every raw create and update attaches its
    /// key to this etcd lease (the apiserver's events, as kube-apiserver's `--event-ttl`).
    lease: Option<i64>,
}

/// An object checked and encoded for a create ([`Registry::encode_create`]), waiting to
/// be written ([`Registry::create_encoded`]).
#[derive(Debug)]
pub struct EncodedCreate {
    key: String,
    /// The fence whose token the value carries, which the write must compare.
    fence: Option<Fence>,
    value: Vec<u8>,
}

impl EncodedCreate {
    /// The key it is written at.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The bytes written.
    pub fn value(&self) -> &[u8] {
        &self.value
    }
}

/// What a create stores of `object` beyond what it was given: its system fields and
/// generation ([`api::fill_created`]), the fencing `token` of the term it is written in,
/// and its type meta as stored (what `api::encode` would otherwise set on a copy). One
/// place for [`Registry::encode_create`] and the stamps cut from its encoding.
fn prepare_created<T: Object>(object: &mut T, token: Option<i64>) {
    api::fill_created(object);
    if let Some(token) = token {
        object
            .metadata_mut()
            .annotations
            .insert(FENCING_TOKEN_ANNOTATION.to_string(), token.to_string());
    }
    object.set_type_meta();
}

impl Registry {
    /// A registry over `prefix` (normalized: leading `/`, no trailing `/`).
    ///
    /// # Errors
    /// When the prefix is empty.
    pub fn new(client: &Client, prefix: &str) -> anyhow::Result<Registry> {
        Ok(Registry {
            kv: Arc::new(
                client
                    .kv_client()
                    .max_decoding_message_size(MAX_RESPONSE_BYTES),
            ),
            prefix: api::normalize_prefix(prefix)?.into(),
            request_timeout: Duration::from_secs(10),
            page_size: DEFAULT_PAGE_SIZE,
            fence: None,
            guard: None,
            guard_unchanged: false,
            conditions: Arc::new([]),
            field_manager: None,
            lease: None,
        })
    }

    /// Records every update of an object that tracks its fields' owners (one with
    /// `metadata.managedFields`, made through the API) as an Update by `manager`, as
    /// kube-apiserver records a controller's writes; objects without entries (those kcm's
    /// controllers create) stay untracked and cost nothing.
    pub fn with_field_manager(
        mut self,
        recorder: Arc<dyn FieldRecorder>,
        manager: &str,
    ) -> Registry {
        self.field_manager = Some(FieldManager {
            recorder,
            manager: manager.into(),
        });
        self
    }

    /// The same registry writing without recording fields: for a writer that set the
    /// entries itself (a server-side apply).
    pub fn without_field_manager(&self) -> Registry {
        Registry {
            field_manager: None,
            ..self.clone()
        }
    }

    /// `new`, a document of kind `kind` written over `old`, with its entries updated
    /// when `old` tracks them and this registry records (left as it is otherwise): for
    /// writers of documents rather than typed objects (the kubelet's Node).
    pub fn record_document(
        &self,
        kind: &str,
        old: &serde_json::Value,
        new: &mut serde_json::Value,
    ) {
        let Some(manager) = &self.field_manager else {
            return;
        };
        if old.pointer("/metadata/managedFields").is_some() {
            manager.recorder.record(kind, &manager.manager, old, new);
        }
    }

    /// `new`, written over `old`, with its entries updated when it tracks them and this
    /// registry records: the object unchanged otherwise.
    fn record_fields<T: Object>(&self, old: &T, new: T) -> T {
        let Some(manager) = &self.field_manager else {
            return new;
        };
        if !old.metadata().extra.contains_key("managedFields") {
            return new;
        }
        let (Ok(old_value), Ok(mut new_value)) =
            (serde_json::to_value(old), serde_json::to_value(&new))
        else {
            return new;
        };
        manager
            .recorder
            .record(T::KIND, &manager.manager, &old_value, &mut new_value);
        let mut recorded: T = match serde_json::from_value(new_value) {
            Ok(recorded) => recorded,
            Err(_) => return new,
        };
        // What the encoding does not carry.
        recorded.metadata_mut().resource_version = new.metadata().resource_version;
        recorded.metadata_mut().read_spec = new.metadata().read_spec;
        recorded
    }

    /// Fences every write: each transaction also requires the leader key of `slot`'s
    /// current term to exist at its create revision, and is refused without asking etcd
    /// while the slot holds no term. A write that etcd rejects because the fence broke
    /// fails with [`StorageError::Fenced`] and ends the term. Objects created carry the
    /// token in [`FENCING_TOKEN_ANNOTATION`].
    pub fn with_fence(mut self, slot: FenceSlot) -> Registry {
        self.fence = Some(slot);
        self
    }

    /// A copy of this registry whose every write also requires `owner` to live (the
    /// same transaction compares its key's create revision), with a read of the owner's
    /// key in the failure branch, so a refusal because the owner is gone is told apart
    /// from a conflict: [`StorageError::OwnerGone`]. Cheap: the connection is shared.
    pub fn guarded_by(&self, owner: Incarnation) -> Registry {
        Registry {
            guard: Some(Arc::new(owner)),
            guard_unchanged: false,
            ..self.clone()
        }
    }

    /// Like [`Registry::guarded_by`], but every write requires `owner` unchanged since it
    /// was read: its key's `mod_revision` still `owner.read_at`. Any update of the owner
    /// (a resize, a status write, a deletionTimestamp) or its delete refuses the write with
    /// [`StorageError::OwnerGone`]. What the ReplicaSet controller's creates and adoptions
    /// use.
    pub fn guarded_unchanged(&self, owner: Incarnation) -> Registry {
        Registry {
            guard: Some(Arc::new(owner)),
            guard_unchanged: true,
            ..self.clone()
        }
    }

    /// A copy of this registry whose raw creates and updates attach their key to etcd
    /// lease `lease` (an update attaches it again, so the value lives the lease's time
    /// from its last write).
    pub fn with_lease(&self, lease: i64) -> Registry {
        Registry {
            lease: Some(lease),
            ..self.clone()
        }
    }

    /// A copy of this registry whose every write also requires `conditions` on other keys,
    /// in the same transaction, with reads of their keys in the failure branch, so a
    /// refusal because one broke is told apart from a conflict:
    /// [`StorageError::ConditionFailed`]. The garbage collector's writes use it: a
    /// dependent is deleted only while its owners are still absent (or still the other
    /// incarnation it read).
    pub fn with_conditions(&self, conditions: Vec<KeyCondition>) -> Registry {
        Registry {
            conditions: conditions.into(),
            ..self.clone()
        }
    }

    /// The incarnation of `object` as read from this registry; `None` for an object that
    /// was never stored (no resourceVersion).
    pub fn incarnation<T: Object>(&self, object: &T) -> Option<Incarnation> {
        let meta = object.metadata();
        Some(Incarnation {
            key: self.key::<T>(&meta.namespace, &meta.name),
            read_at: meta.resource_version?.0,
            created: meta.create_revision.0,
        })
    }

    /// Bounds every unary request (default 10 s).
    pub fn with_request_timeout(mut self, timeout: Duration) -> Registry {
        self.request_timeout = timeout;
        self
    }

    /// Objects per list page (default [`DEFAULT_PAGE_SIZE`]).
    pub fn with_page_size(mut self, page_size: i64) -> Registry {
        self.page_size = page_size.max(1);
        self
    }

    /// Objects per list page.
    pub fn page_size(&self) -> i64 {
        self.page_size
    }

    /// The normalized key prefix, e.g. `/registry`.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// The KV client (with the raised message limit) for callers that need raw access.
    pub fn kv(&self) -> KvClient {
        KvClient::clone(&self.kv)
    }

    /// The key of object `namespace/name` of kind `T`.
    pub fn key<T: Object>(&self, namespace: &str, name: &str) -> String {
        api::object_key::<T>(&self.prefix, namespace, name)
    }

    /// [`Registry::key`] for operation `op` on one object, refusing what 2014's
    /// `MakeEtcdItemKey` refused on every operation ("Namespace parameter required"): an
    /// empty name or namespace, and, since kcm's keys are paths, a `/` in either.
    fn item_key<T: Object>(
        &self,
        op: &'static str,
        namespace: &str,
        name: &str,
    ) -> Result<String, StorageError> {
        let key = self.key::<T>(namespace, name);
        let message = if name.is_empty() || namespace.is_empty() {
            "metadata.name and metadata.namespace are required"
        } else if name.contains('/') || namespace.contains('/') {
            "metadata.name and metadata.namespace may not contain '/'"
        } else {
            return Ok(key);
        };
        Err(StorageError::BadRequest {
            op,
            key,
            message: message.into(),
        })
    }

    /// Runs one unary etcd call (`request` sends it through the KV client it is given)
    /// under the request timeout. A call that was never sent, because the connection to
    /// the member it was routed to could not be made, is sent again (at most twice): the
    /// balanced channel may route it to a member that answers. Only never-sent calls are
    /// repeated, so a write is never applied twice.
    async fn raw<R, Fut>(&self, request: impl Fn(KvClient) -> Fut) -> Result<R, RawError>
    where
        Fut: std::future::Future<Output = Result<R, etcd_client::Error>>,
    {
        let mut resends = 0;
        loop {
            // Boxed: etcd-client's call is a future of kilobytes, which every async fn
            // above it would otherwise hold inline and copy at each move.
            let call = Box::pin(request(KvClient::clone(&self.kv)));
            match tokio::time::timeout(self.request_timeout, call).await {
                Ok(Ok(response)) => return Ok(response),
                Ok(Err(e)) if is_unsent(&e) && resends < MAX_RESENDS => {
                    resends += 1;
                    tracing::debug!(error = %describe_etcd_error(&e), "etcd call not sent; resending");
                }
                Ok(Err(e)) => return Err(RawError::Etcd(e)),
                Err(_) => return Err(RawError::Timeout),
            }
        }
    }

    /// Runs one unary etcd call under the request timeout, naming the operation and key
    /// in any error.
    async fn call<R, Fut>(
        &self,
        op: &'static str,
        key: &str,
        request: impl Fn(KvClient) -> Fut,
    ) -> Result<R, StorageError>
    where
        Fut: std::future::Future<Output = Result<R, etcd_client::Error>>,
    {
        self.raw(request)
            .await
            .map_err(|e| self.storage_error(op, key, e))
    }

    fn storage_error(&self, op: &'static str, key: &str, error: RawError) -> StorageError {
        let (compacted, message) = match error {
            RawError::Etcd(e) => (is_compacted(&e), describe_etcd_error(&e)),
            RawError::Timeout => (
                false,
                format!(
                    "etcd did not answer within {}",
                    humantime::format_duration(self.request_timeout)
                ),
            ),
        };
        StorageError::Etcd {
            op,
            key: key.to_string(),
            message,
            compacted,
        }
    }

    /// The fence a write must carry: `None` for an unfenced registry.
    ///
    /// # Errors
    /// `Fenced` when the registry is fenced but holds no current term.
    fn write_fence(&self, op: &'static str, key: &str) -> Result<Option<Fence>, StorageError> {
        match &self.fence {
            None => Ok(None),
            Some(slot) => slot.current().map(Some).ok_or(StorageError::Fenced {
                op,
                key: key.to_string(),
            }),
        }
    }

    /// Runs one write transaction: if `compares` hold, `success`, else `failure`. With a
    /// guard, its compares join `compares` and a read of the owner's key follows
    /// `failure`; with a fence, the fence's compare joins `compares` and a read of the
    /// leader key ends `failure`. So a failed transaction tells whether the fence or the
    /// guard broke, and the caller's own `failure` reads come first in the response.
    ///
    /// # Errors
    /// `Fenced` (and the term is ended) when etcd refused the write because the leader
    /// key is gone or belongs to a later term; `OwnerGone` when it refused it because the
    /// guard's incarnation ended; `Etcd` when the call fails.
    async fn write_txn(
        &self,
        op: &'static str,
        key: &str,
        fence: Option<&Fence>,
        mut compares: Vec<Compare>,
        success: Vec<TxnOp>,
        mut failure: Vec<TxnOp>,
    ) -> Result<TxnResponse, StorageError> {
        // Room for what the guard, the conditions and the fence add, made once (each adds
        // at most two compares and one read).
        let more = 2 * usize::from(self.guard.is_some())
            + 2 * self.conditions.len()
            + usize::from(fence.is_some());
        compares.reserve(more);
        failure.reserve(more);
        let guard_read = failure.len();
        if let Some(guard) = &self.guard {
            if self.guard_unchanged {
                compares.push(guard.compare_unchanged());
            } else {
                compares.extend(guard.compares());
            }
            failure.push(TxnOp::get(guard.key.as_str(), None));
        }
        let conditions_read = failure.len();
        for condition in self.conditions.iter() {
            compares.extend(condition.compares());
            failure.push(TxnOp::get(condition.key(), None));
        }
        if let Some(fence) = fence {
            compares.push(Compare::create_revision(
                fence.key.clone(),
                CompareOp::Equal,
                fence.create_revision,
            ));
            failure.push(TxnOp::get(fence.key.clone(), None));
        }
        let txn = Txn::new().when(compares).and_then(success).or_else(failure);
        let response = self
            .call(op, key, |mut kv| {
                let txn = txn.clone();
                async move { kv.txn(txn).await }
            })
            .await?;
        if let Some(fence) = fence.filter(|_| !response.succeeded()) {
            let leader = match response.op_responses().last() {
                Some(TxnOpResponse::Get(get)) => get.kvs().first().cloned(),
                _ => None,
            };
            if !fence.held_in(leader.as_ref()) {
                if !fence.lost.is_cancelled() {
                    tracing::warn!(%key, term = fence.create_revision,
                        "etcd refused a write: the leader key is gone; leadership lost");
                }
                fence.lost.cancel();
                return Err(StorageError::Fenced {
                    op,
                    key: key.to_string(),
                });
            }
        }
        if let Some(guard) = self.guard.as_ref().filter(|_| !response.succeeded()) {
            let owner = match response.op_responses().get(guard_read) {
                Some(TxnOpResponse::Get(get)) => get.kvs().first().cloned(),
                _ => None,
            };
            let (held, how) = if self.guard_unchanged {
                (guard.unchanged_in(owner.as_ref()), "changed or deleted")
            } else {
                (guard.alive_in(owner.as_ref()), "deleted")
            };
            if !held {
                return Err(StorageError::OwnerGone {
                    op,
                    key: key.to_string(),
                    owner: guard.key.clone(),
                    how,
                });
            }
        }
        if !response.succeeded() {
            for (i, condition) in self.conditions.iter().enumerate() {
                let kv = match response.op_responses().get(conditions_read + i) {
                    Some(TxnOpResponse::Get(get)) => get.kvs().first().cloned(),
                    _ => None,
                };
                if !condition.holds_in(kv.as_ref()) {
                    return Err(StorageError::ConditionFailed {
                        op,
                        key: key.to_string(),
                        broken: condition.broken(),
                    });
                }
            }
        }
        Ok(response)
    }

    /// Decodes a key-value read from etcd as a `T` at its `mod_revision`, knowing its
    /// incarnation (its key's `create_revision`).
    ///
    /// # Errors
    /// A [`DecodeError`] naming the key and revision.
    pub fn decode<T: Object>(&self, kv: &KeyValue) -> Result<T, DecodeError> {
        let key = String::from_utf8_lossy(kv.key());
        let mut object = api::decode::<T>(&self.prefix, &key, kv.value(), kv.mod_revision())
            .map_err(|e| DecodeError {
                kind: T::KIND,
                key: key.into_owned(),
                revision: kv.mod_revision(),
                message: format!("{e:#}"),
            })?;
        object.metadata_mut().create_revision = api::CreateRevision::of(kv.create_revision());
        Ok(object)
    }

    /// Reads one object.
    ///
    /// # Errors
    /// `NotFound`, `Decode` for a malformed value, `Etcd` when etcd fails.
    pub async fn get<T: Object>(&self, namespace: &str, name: &str) -> Result<T, StorageError> {
        let key = self.item_key::<T>("get", namespace, name)?;
        let response = self
            .call("get", &key, |mut kv| {
                let key = key.clone();
                async move { kv.get(key, None).await }
            })
            .await?;
        match response.kvs().first() {
            Some(found) => {
                // One object read is usually written next: remember its spec, so the
                // write needs no second read to set `generation` (lists do not pay it).
                let mut object: T = self.decode(found)?;
                api::remember_spec(&mut object);
                Ok(object)
            }
            None => Err(StorageError::NotFound { key }),
        }
    }

    /// Lists the objects of kind `T` in one namespace (or all, with `None`) whose labels
    /// match `selector`, all read at one revision.
    ///
    /// # Errors
    /// `Etcd` when a page cannot be read. Malformed values are not errors: they are in
    /// [`ObjectList::errors`].
    pub async fn list<T: Object>(
        &self,
        namespace: Option<&str>,
        selector: &Selector,
    ) -> Result<ObjectList<T>, StorageError> {
        let prefix = api::list_key::<T>(&self.prefix, namespace);
        let mut items = Vec::new();
        let mut errors = Vec::new();
        let revision = self
            .for_each_page(&prefix, None, |page| {
                for kv in page {
                    // Only `namespace/name` keys hold objects. Anything else under the
                    // directory (a deeper key, the namespace itself) is not ours to judge,
                    // whether or not its value happens to decode: skip it silently.
                    let key = String::from_utf8_lossy(kv.key());
                    if api::parse_key::<T>(&self.prefix, &key).is_none() {
                        continue;
                    }
                    match self.decode::<T>(kv) {
                        Ok(object) if selector.matches(&object.metadata().labels) => {
                            items.push(object)
                        }
                        Ok(_) => {}
                        Err(e) => errors.push(e),
                    }
                }
            })
            .await?;
        Ok(ObjectList {
            items,
            resource_version: ResourceVersion(revision),
            errors,
        })
    }

    /// Creates an object whose key does not exist yet (a create-if-absent transaction).
    /// Fills `uid` and `creationTimestamp` when absent and sets `generation` to 1 (kinds with
    /// a spec). Returns the stored object.
    ///
    /// # Errors
    /// `AlreadyExists` (nothing is written), `BadRequest` when the object carries a
    /// resourceVersion or lacks a name or namespace.
    pub async fn create<T: Object>(&self, object: &T) -> Result<T, StorageError> {
        self.create_owned(object.clone()).await
    }

    /// [`Registry::create`] of an object the caller gives up: no copy of it is made (a
    /// controller's creates of thousands of pods each copied the pod twice).
    ///
    /// # Errors
    /// As [`Registry::create`].
    pub async fn create_owned<T: Object>(&self, mut object: T) -> Result<T, StorageError> {
        let encoded = self.encode_create(&mut object)?;
        let revision = self.create_encoded(encoded).await?;
        object.set_type_meta();
        object.metadata_mut().resource_version = Some(revision);
        object.metadata_mut().create_revision = api::CreateRevision::of(revision.0);
        api::remember_spec(&mut object);
        Ok(object)
    }

    /// The first half of a create, for a writer that keeps nothing of the object but the
    /// revision it is stored at (a controller's pod creates): checks `object`, fills its
    /// system fields (and this registry's fencing token) and encodes it, so the caller
    /// can drop it before waiting on [`Registry::create_encoded`]. An async create that
    /// took the object held it (a pod is 760 bytes before its heap) in every future
    /// between the controller and etcd, each copied whole as it moved.
    ///
    /// # Errors
    /// `BadRequest` as [`Registry::create`]; `Fenced` without a current term.
    pub fn encode_create<T: Object>(&self, object: &mut T) -> Result<EncodedCreate, StorageError> {
        let meta = object.metadata();
        let key = self.item_key::<T>("create", &meta.namespace, &meta.name)?;
        if meta.resource_version.is_some() {
            return Err(StorageError::BadRequest {
                op: "create",
                key,
                message: "resourceVersion may not be set on objects to be created".into(),
            });
        }
        let fence = self.write_fence("create", &key)?;
        prepare_created(object, fence.as_ref().map(|fence| fence.create_revision));
        let value = self.encode(&key, object)?;
        Ok(EncodedCreate { key, fence, value })
    }

    /// The second half of a create: writes `encoded` if its key is absent (under this
    /// registry's guard and conditions, and the fence it was encoded with). The revision
    /// it was stored at.
    ///
    /// # Errors
    /// As [`Registry::create`].
    pub async fn create_encoded(
        &self,
        encoded: EncodedCreate,
    ) -> Result<ResourceVersion, StorageError> {
        let EncodedCreate { key, fence, value } = encoded;
        let response = self
            .write_txn(
                "create",
                &key,
                fence.as_ref(),
                vec![Compare::create_revision(key.as_str(), CompareOp::Equal, 0)],
                vec![TxnOp::put(key.as_str(), value, None)],
                vec![],
            )
            .await?;
        if !response.succeeded() {
            return Err(StorageError::AlreadyExists { key });
        }
        Ok(ResourceVersion(
            response.header().map_or(0, |h| h.revision()),
        ))
    }

    fn encode<T: Object>(&self, key: &str, object: &T) -> Result<Vec<u8>, StorageError> {
        api::encode(object).map_err(|e| StorageError::BadRequest {
            op: "encode",
            key: key.to_string(),
            message: format!("{e:#}"),
        })
    }

    /// Writes an object read earlier, only if its key is still at the object's
    /// resourceVersion (compare-and-swap on `mod_revision`). Returns the stored object.
    ///
    /// `generation` is the stored one, plus one when `spec` differs from the stored spec
    /// ([`api::set_generation`]). An object from `get`, a write, a typed watch or a cache
    /// of whole objects remembers its stored spec ([`api::ReadSpec`]); for one that does
    /// not (built by hand, or from a list) that costs a read of the stored value first.
    ///
    /// # Errors
    /// `Conflict` when the key changed (or was deleted) since; `BadRequest` without a
    /// resourceVersion.
    pub async fn update<T: Object>(&self, object: &T) -> Result<T, StorageError> {
        let meta = object.metadata();
        let key = self.item_key::<T>("update", &meta.namespace, &meta.name)?;
        let Some(expected) = meta.resource_version else {
            return Err(StorageError::BadRequest {
                op: "update",
                key,
                message: "resourceVersion is required for an update".into(),
            });
        };
        let mut object = object.clone();
        // The stored value is read (once) when the caller's copy no longer shows the
        // stored spec the generation depends on, or when the write's fields are recorded.
        // A stored value at another revision (or none) means the write below fails anyway,
        // and classifies the failure itself.
        let records = self.field_manager.is_some() && meta.extra.contains_key("managedFields");
        let generation_set = api::set_generation_from_read(&mut object);
        if !generation_set || records {
            self.write_fence("update", &key)?;
            match self.stored_at::<T>(&key, expected).await? {
                Some(Ok(stored)) => {
                    object = self.record_fields(&stored, object);
                    api::set_generation(Some(&stored), &mut object);
                }
                // Overwriting a value that does not decode: count the write as a spec
                // change from what the writer saw.
                Some(Err(_)) if !generation_set => {
                    let meta = object.metadata_mut();
                    meta.generation = meta.generation.max(0).saturating_add(1);
                }
                Some(Err(_)) | None => {}
            }
        }
        let value = self.encode(&key, &object)?;
        self.compare_and_put(key, expected, value, object)
            .await
            .map(|(object, _)| object)
            .map_err(|(error, _)| error)
    }

    /// The object stored at `key` if its revision is still `expected`: `None` when the key
    /// is gone or has changed since, `Some(Err)` when its value does not decode.
    ///
    /// # Errors
    /// `Etcd` when the read fails.
    async fn stored_at<T: Object>(
        &self,
        key: &str,
        expected: ResourceVersion,
    ) -> Result<Option<Result<T, DecodeError>>, StorageError> {
        let response = self
            .call("update", key, |mut kv| {
                let key = key.to_string();
                async move { kv.get(key, None).await }
            })
            .await?;
        Ok(response
            .kvs()
            .first()
            .filter(|kv| kv.mod_revision() == expected.0)
            .map(|kv| self.decode(kv)))
    }

    /// The CAS transaction behind `update`; on conflict also returns the current value
    /// (read in the same transaction), so `guaranteed_update` needs no extra read.
    async fn compare_and_put<T: Object>(
        &self,
        key: String,
        expected: ResourceVersion,
        value: Vec<u8>,
        mut object: T,
    ) -> Result<(T, ()), (StorageError, Option<KeyValue>)> {
        let fence = self.write_fence("update", &key).map_err(|e| (e, None))?;
        let response = self
            .write_txn(
                "update",
                &key,
                fence.as_ref(),
                unchanged_since(&key, expected),
                vec![TxnOp::put(key.as_str(), value, None)],
                vec![TxnOp::get(key.as_str(), None)],
            )
            .await
            .map_err(|e| (e, None))?;
        if response.succeeded() {
            let revision = response.header().map_or(0, |h| h.revision());
            object.set_type_meta();
            object.metadata_mut().resource_version = Some(ResourceVersion(revision));
            api::remember_spec(&mut object);
            return Ok((object, ()));
        }
        let current = current_kv(&response.op_responses());
        let actual = current
            .as_ref()
            .map(|kv| ResourceVersion(kv.mod_revision()));
        Err((
            StorageError::Conflict {
                key,
                expected,
                actual,
            },
            current,
        ))
    }

    /// Deletes an object, optionally only if it is still at `precondition`. Returns the
    /// revision of the delete.
    ///
    /// # Errors
    /// `NotFound` when there was nothing to delete; `Conflict` when the precondition
    /// did not hold (nothing is deleted).
    pub async fn delete<T: Object>(
        &self,
        namespace: &str,
        name: &str,
        precondition: Option<ResourceVersion>,
    ) -> Result<ResourceVersion, StorageError> {
        let key = self.item_key::<T>("delete", namespace, name)?;
        let fence = self.write_fence("delete", &key)?;
        let Some(expected) = precondition else {
            // A transaction, not a plain delete, so that it can carry the fence.
            let response = self
                .write_txn(
                    "delete",
                    &key,
                    fence.as_ref(),
                    vec![],
                    vec![TxnOp::delete(key.as_str(), None)],
                    vec![],
                )
                .await?;
            let deleted = response
                .op_responses()
                .iter()
                .any(|r| matches!(r, TxnOpResponse::Delete(delete) if delete.deleted() > 0));
            if !deleted {
                return Err(StorageError::NotFound { key });
            }
            return Ok(ResourceVersion(
                response.header().map_or(0, |h| h.revision()),
            ));
        };
        let response = self
            .write_txn(
                "delete",
                &key,
                fence.as_ref(),
                unchanged_since(&key, expected),
                vec![TxnOp::delete(key.as_str(), None)],
                vec![TxnOp::get(key.as_str(), None)],
            )
            .await?;
        if response.succeeded() {
            return Ok(ResourceVersion(
                response.header().map_or(0, |h| h.revision()),
            ));
        }
        match current_kv(&response.op_responses()) {
            None => Err(StorageError::NotFound { key }),
            Some(current) => Err(StorageError::Conflict {
                key,
                expected,
                actual: Some(ResourceVersion(current.mod_revision())),
            }),
        }
    }

    /// Reads an object, applies `update` to it and writes the result with
    /// compare-and-swap, retrying from the current value on conflict (2014's
    /// `AtomicUpdate`). When `update` returns an object that encodes to the same bytes,
    /// nothing is written. `generation` follows the spec, as in [`Registry::update`] (here
    /// without an extra read), so a status-only change leaves it alone. Returns the stored
    /// object.
    ///
    /// # Errors
    /// `NotFound`, `Decode`, `Update` when `update` fails (nothing is written), `Etcd`,
    /// or `Conflict` after 100 consecutive conflicts.
    pub async fn guaranteed_update<T, F>(
        &self,
        namespace: &str,
        name: &str,
        mut update: F,
    ) -> Result<T, StorageError>
    where
        T: Object,
        F: FnMut(T) -> anyhow::Result<T>,
    {
        let key = self.item_key::<T>("update", namespace, name)?;
        let mut current: T = self.get(namespace, name).await?;
        let mut last_conflict = None;
        for _ in 0..MAX_UPDATE_ATTEMPTS {
            let expected = current
                .metadata()
                .resource_version
                .expect("decoded objects carry a resourceVersion");
            let old_bytes = self.encode(&key, &current)?;
            let updated = update(current.clone()).map_err(|source| StorageError::Update {
                key: key.clone(),
                source,
            })?;
            let mut updated = self.record_fields(&current, updated);
            api::set_generation(Some(&current), &mut updated);
            let new_bytes = self.encode(&key, &updated)?;
            if new_bytes == old_bytes {
                return Ok(current);
            }
            updated.metadata_mut().resource_version = Some(expected);
            match self
                .compare_and_put(key.clone(), expected, new_bytes, updated)
                .await
            {
                Ok((stored, ())) => return Ok(stored),
                Err((conflict @ StorageError::Conflict { .. }, Some(kv))) => {
                    tracing::debug!(%key, "guaranteed_update conflict; retrying");
                    current = self.decode(&kv)?;
                    last_conflict = Some(conflict);
                }
                Err((StorageError::Conflict { .. }, None)) => {
                    return Err(StorageError::NotFound { key })
                }
                Err((error, _)) => return Err(error),
            }
        }
        Err(last_conflict.expect("the loop ran at least once"))
    }
}

/// The compares of a write that must find `key` still at `expected`. etcd compares a
/// missing key's `mod_revision` as 0, so at resourceVersion 0 (or below) the key must
/// also exist: otherwise the write would create the object (or delete nothing and report
/// success). At a revision etcd gave, the `mod_revision` compare alone implies the key
/// exists: one compare, where each is a read of the key in etcd's serial apply.
fn unchanged_since(key: &str, expected: ResourceVersion) -> Vec<Compare> {
    let unchanged = Compare::mod_revision(key, CompareOp::Equal, expected.0);
    if expected.0 > 0 {
        vec![unchanged]
    } else {
        vec![
            Compare::create_revision(key, CompareOp::Greater, 0),
            unchanged,
        ]
    }
}

/// The key-value an `or_else([get, ..])` branch's first read returned, if the key exists.
/// Only the first: the reads a fence or a guard adds follow it, and must not be taken for
/// the key's value when the key is gone.
fn current_kv(responses: &[TxnOpResponse]) -> Option<KeyValue> {
    match responses.first() {
        Some(TxnOpResponse::Get(get)) => get.kvs().first().cloned(),
        _ => None,
    }
}
