//! Typed storage of api objects on etcd v3: get, paginated list, create-if-absent,
//! compare-and-swap update, guarded delete and `guaranteed_update`.
//!
//! Mirrors 2014's `pkg/tools/etcd_tools.go` (`EtcdHelper`: `ExtractObj`, `ExtractToList`,
//! `CreateObj`, `SetObj`, `AtomicUpdate`) and `pkg/registry/etcd/etcd.go`, with etcd v2's
//! `prevIndex` compare-and-swap replaced by a v3 transaction on `mod_revision`.
//!
//! Invariants:
//! - every object returned carries `metadata.resourceVersion` = its key's `mod_revision`,
//!   and every list the header revision of its (single, pinned) read;
//! - a value that does not decode never fails a list: it is reported per key in
//!   [`ObjectList::errors`] next to the good objects;
//! - writes never drop fields kcm does not model (see `api`), and an unchanged object
//!   is not written at all by [`Registry::guaranteed_update`];
//! - every write is one transaction; in a fenced registry ([`Registry::with_fence`])
//!   each also compares the leader key's create revision, so a deposed leader's write
//!   commits nowhere, not even one already on the wire when leadership was lost; in a
//!   guarded one ([`Registry::guarded_by`]) each also compares another object's create
//!   revision, so no write made for an object lands after that object was deleted.

use std::sync::{Arc, RwLock};
use std::time::Duration;

use etcd_client::{
    Client, Compare, CompareOp, GetOptions, KeyValue, KvClient, Txn, TxnOp, TxnOpResponse,
    TxnResponse,
};
use tokio_util::sync::CancellationToken;

use crate::api::{self, Object, ResourceVersion};
use crate::labels::Selector;

/// Objects per list page. Large on purpose: etcd 3.4 rescans the rest of the range for
/// every page, so 50,000 pods in pages of 500 took 3x as long as one request.
pub const DEFAULT_PAGE_SIZE: i64 = 10_000;

/// Largest gRPC message kcm accepts from etcd (etcd-client's default is 4 MiB, less than
/// one page of ordinary pods). A page that is still too large is split in half.
pub const MAX_RESPONSE_BYTES: usize = 256 * 1024 * 1024;

/// How often `guaranteed_update` retries a conflicting write before giving up.
const MAX_UPDATE_ATTEMPTS: usize = 100;

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
    lost: CancellationToken,
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
    fn held_in(&self, kv: Option<&KeyValue>) -> bool {
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

/// One page of a range read ([`Registry::range_page`]).
#[derive(Debug)]
pub struct RangePage {
    pub kvs: Vec<KeyValue>,
    /// Whether keys beyond this page remain in the range.
    pub more: bool,
    /// The revision the page was read at (the response header's).
    pub revision: i64,
    /// The cluster that answered (the response header's).
    pub cluster_id: u64,
}

impl RangePage {
    /// Where the next page starts, when there is one.
    pub fn next_start(&self) -> Option<Vec<u8>> {
        let last = self.kvs.last().filter(|_| self.more)?;
        let mut next = last.key().to_vec();
        next.push(0);
        Some(next)
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
}

impl Incarnation {
    /// The compares that hold while the incarnation lives. etcd compares a missing key's
    /// create revision as 0, so existence is a compare of its own.
    fn compares(&self) -> [Compare; 2] {
        [
            Compare::create_revision(self.key.as_str(), CompareOp::Greater, 0),
            Compare::create_revision(self.key.as_str(), CompareOp::Less, self.read_at + 1),
        ]
    }

    /// Whether etcd's answer to `get(key)` shows the incarnation alive.
    fn alive_in(&self, kv: Option<&KeyValue>) -> bool {
        kv.is_some_and(|kv| kv.create_revision() > 0 && kv.create_revision() <= self.read_at)
    }
}

/// A value under the prefix that could not be decoded as its kind.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed {kind} at {key} (revision {revision}): {message}")]
pub struct DecodeError {
    pub kind: &'static str,
    pub key: String,
    pub revision: i64,
    pub message: String,
}

/// The ways a storage call fails. Callers branch on `NotFound`, `AlreadyExists` and
/// `Conflict`; the rest are reported.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    #[error("{key} not found")]
    NotFound { key: String },
    #[error("{key} already exists")]
    AlreadyExists { key: String },
    #[error("conflict writing {key}: expected resourceVersion {expected}, found {}",
        .actual.map_or("none (deleted)".to_string(), |rv| rv.to_string()))]
    Conflict {
        key: String,
        expected: ResourceVersion,
        actual: Option<ResourceVersion>,
    },
    #[error("{op} {key}: {message}")]
    BadRequest {
        op: &'static str,
        key: String,
        message: String,
    },
    #[error(transparent)]
    Decode(#[from] DecodeError),
    #[error("{op} {key}: {message}")]
    Etcd {
        op: &'static str,
        key: String,
        message: String,
        /// The revision etcd compacted to, when that is why the read failed.
        compacted: bool,
    },
    #[error("update {key}: {source:#}")]
    Update { key: String, source: anyhow::Error },
    /// A fenced registry's write while this process does not hold the leadership (or
    /// found in etcd that it no longer does). Nothing was written.
    #[error("{op} {key}: refused, this process is not the leader (leadership lost)")]
    Fenced { op: &'static str, key: String },
    /// A guarded registry's write after the incarnation it is guarded by ended (the object
    /// was deleted, and maybe written again). Nothing was written.
    #[error("{op} {key}: refused, {owner} was deleted since it was read")]
    OwnerGone {
        op: &'static str,
        key: String,
        owner: String,
    },
}

impl StorageError {
    /// True when the call failed because a revision it needed has been compacted.
    pub fn is_compacted(&self) -> bool {
        matches!(
            self,
            StorageError::Etcd {
                compacted: true,
                ..
            }
        )
    }

    pub fn is_not_found(&self) -> bool {
        matches!(self, StorageError::NotFound { .. })
    }

    /// True when a fenced write was refused because leadership was lost.
    pub fn is_fenced(&self) -> bool {
        matches!(self, StorageError::Fenced { .. })
    }
}

/// A one-line description of an etcd-client error (tonic's Display is verbose).
pub fn describe_etcd_error(error: &etcd_client::Error) -> String {
    match error {
        etcd_client::Error::GRpcStatus(status) => {
            let message = status.message();
            let text = if message.is_empty() {
                format!("{:?}", status.code())
            } else {
                message.to_string()
            };
            // A transport failure ("transport error") keeps its cause (a TLS alert, a
            // refused connection) in the source chain.
            with_sources(text, std::error::Error::source(status))
        }
        etcd_client::Error::TransportError(e) => {
            with_sources(e.to_string(), std::error::Error::source(e))
        }
        other => other.to_string(),
    }
}

/// How often [`Registry`] re-sends a call that was never sent.
const MAX_RESENDS: usize = 2;

/// True when a call failed before it was sent: the channel could not connect to the member
/// it picked (a member that died). tonic reports that as Unavailable "tcp connect error".
fn is_unsent(error: &etcd_client::Error) -> bool {
    matches!(error, etcd_client::Error::GRpcStatus(s)
        if s.code() == tonic::Code::Unavailable && s.message().contains("connect error"))
}

/// `text: source: its source: ...`, leaving out a source whose words are already there
/// (tonic repeats the cause in the status message).
fn with_sources(
    mut text: String,
    mut source: Option<&(dyn std::error::Error + 'static)>,
) -> String {
    while let Some(s) = source {
        let part = s.to_string();
        if !text.contains(&part) {
            text = format!("{text}: {part}");
        }
        source = s.source();
    }
    text
}

fn is_compacted(error: &etcd_client::Error) -> bool {
    matches!(error, etcd_client::Error::GRpcStatus(s) if s.message().contains("compacted"))
}

/// True when a response exceeded a gRPC message limit: ours when decoding (tonic's
/// "decoded message length too large") or etcd's when sending ("larger than max"). Matched
/// by message, not code: etcd also uses OutOfRange for "revision has been compacted" and
/// ResourceExhausted for "too many requests", which a smaller page does not cure.
fn is_too_large(error: &etcd_client::Error) -> bool {
    matches!(error, etcd_client::Error::GRpcStatus(s)
        if s.message().contains("message length too large")
            || s.message().contains("larger than max"))
}

/// A unary call's failure before it is given context.
enum RawError {
    Etcd(etcd_client::Error),
    Timeout,
}

/// The end of the key range that has `prefix` as a prefix (etcd's `GetPrefixRangeEnd`).
pub fn prefix_range_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    // All 0xff (or empty): to the end of the keyspace.
    vec![0]
}

/// A list result: the objects that decoded and matched, the revision the whole list was
/// read at, and the values that did not decode.
#[derive(Debug, Clone)]
pub struct ObjectList<T> {
    pub items: Vec<T>,
    /// The etcd header revision of the read (every page is pinned to it).
    pub resource_version: ResourceVersion,
    pub errors: Vec<DecodeError>,
}

/// Typed access to the objects under one prefix. Cheap to clone.
#[derive(Clone)]
pub struct Registry {
    kv: KvClient,
    prefix: Arc<str>,
    request_timeout: Duration,
    page_size: i64,
    /// Set for a leader's registry: every write carries the current fence.
    fence: Option<FenceSlot>,
    /// Set for a registry writing on an object's behalf: every write requires it to live.
    guard: Option<Arc<Incarnation>>,
}

impl Registry {
    /// A registry over `prefix` (normalized: leading `/`, no trailing `/`).
    ///
    /// # Errors
    /// When the prefix is empty.
    pub fn new(client: &Client, prefix: &str) -> anyhow::Result<Registry> {
        Ok(Registry {
            kv: client
                .kv_client()
                .max_decoding_message_size(MAX_RESPONSE_BYTES),
            prefix: api::normalize_prefix(prefix)?.into(),
            request_timeout: Duration::from_secs(10),
            page_size: DEFAULT_PAGE_SIZE,
            fence: None,
            guard: None,
        })
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
        self.kv.clone()
    }

    /// The key of object `namespace/name` of kind `T`.
    pub fn key<T: Object>(&self, namespace: &str, name: &str) -> String {
        api::object_key::<T>(&self.prefix, namespace, name)
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
            match tokio::time::timeout(self.request_timeout, request(self.kv.clone())).await {
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
        let guard_read = failure.len();
        if let Some(guard) = &self.guard {
            compares.extend(guard.compares());
            failure.push(TxnOp::get(guard.key.as_str(), None));
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
            if !guard.alive_in(owner.as_ref()) {
                return Err(StorageError::OwnerGone {
                    op,
                    key: key.to_string(),
                    owner: guard.key.clone(),
                });
            }
        }
        Ok(response)
    }

    /// Decodes a key-value read from etcd as a `T` at its `mod_revision`.
    ///
    /// # Errors
    /// A [`DecodeError`] naming the key and revision.
    pub fn decode<T: Object>(&self, kv: &KeyValue) -> Result<T, DecodeError> {
        let key = String::from_utf8_lossy(kv.key());
        api::decode::<T>(&self.prefix, &key, kv.value(), kv.mod_revision()).map_err(|e| {
            DecodeError {
                kind: T::KIND,
                key: key.into_owned(),
                revision: kv.mod_revision(),
                message: format!("{e:#}"),
            }
        })
    }

    /// Reads one object.
    ///
    /// # Errors
    /// `NotFound`, `Decode` for a malformed value, `Etcd` when etcd fails.
    pub async fn get<T: Object>(&self, namespace: &str, name: &str) -> Result<T, StorageError> {
        let key = self.key::<T>(namespace, name);
        let response = self
            .call("get", &key, |mut kv| {
                let key = key.clone();
                async move { kv.get(key, None).await }
            })
            .await?;
        match response.kvs().first() {
            Some(found) => Ok(self.decode(found)?),
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

    /// Reads every key under `prefix` in pages, all pinned to one revision (the first
    /// page's header revision, or `revision` when given), calling `on_page` for each.
    /// Returns the revision read at. A page too large for the message limit is retried
    /// with half as many keys.
    ///
    /// # Errors
    /// `Etcd` when a page cannot be read; `is_compacted()` tells when `revision` (or the
    /// pinned one, mid-list) has been compacted.
    pub async fn for_each_page(
        &self,
        prefix: &str,
        revision: Option<i64>,
        on_page: impl FnMut(&[KeyValue]),
    ) -> Result<i64, StorageError> {
        let range_end = prefix_range_end(prefix.as_bytes());
        self.for_each_page_in_range(prefix, &range_end, revision, on_page)
            .await
    }

    /// [`Registry::for_each_page`] over the keys in `[start, range_end)`.
    ///
    /// # Errors
    /// As [`Registry::for_each_page`].
    pub async fn for_each_page_in_range(
        &self,
        prefix: &str,
        range_end: &[u8],
        revision: Option<i64>,
        mut on_page: impl FnMut(&[KeyValue]),
    ) -> Result<i64, StorageError> {
        let mut start = prefix.as_bytes().to_vec();
        let mut pinned = revision.unwrap_or(0);
        let mut page_size = self.page_size;
        loop {
            let page = self
                .range_page(&start, range_end, pinned, &mut page_size)
                .await?;
            if pinned == 0 {
                pinned = page.revision;
            }
            on_page(&page.kvs);
            match page.next_start() {
                Some(next) => start = next,
                None => return Ok(pinned),
            }
        }
    }

    /// Reads one page of the keys in `[start, range_end)` at `revision` (0: the current
    /// one), at most `page_size` keys. A page too large for the message limit is retried
    /// with half as many keys, and `page_size` keeps the smaller size for the next page.
    ///
    /// # Errors
    /// `Etcd` when the page cannot be read; `is_compacted()` tells when `revision` has
    /// been compacted.
    pub async fn range_page(
        &self,
        start: &[u8],
        range_end: &[u8],
        revision: i64,
        page_size: &mut i64,
    ) -> Result<RangePage, StorageError> {
        loop {
            let options = GetOptions::new()
                .with_range(range_end.to_vec())
                .with_limit(*page_size)
                .with_revision(revision);
            let read = |mut kv: KvClient| {
                let (start, options) = (start.to_vec(), options.clone());
                async move { kv.get(start, Some(options)).await }
            };
            let key = String::from_utf8_lossy(start);
            match self.raw(read).await {
                Ok(mut response) => {
                    let header = response.header();
                    let (revision, cluster_id) =
                        header.map_or((0, 0), |h| (h.revision(), h.cluster_id()));
                    let more = response.more();
                    return Ok(RangePage {
                        kvs: response.take_kvs(),
                        more,
                        revision,
                        cluster_id,
                    });
                }
                Err(RawError::Etcd(e)) if is_too_large(&e) && *page_size > 1 => {
                    *page_size /= 2;
                    tracing::debug!(%key, page_size = *page_size, "list page too large; halving");
                }
                Err(e) => return Err(self.storage_error("list", &key, e)),
            }
        }
    }

    /// Creates an object whose key does not exist yet (a create-if-absent transaction).
    /// Fills `uid` and `creationTimestamp` when absent. Returns the stored object.
    ///
    /// # Errors
    /// `AlreadyExists` (nothing is written), `BadRequest` when the object carries a
    /// resourceVersion or lacks a name or namespace.
    pub async fn create<T: Object>(&self, object: &T) -> Result<T, StorageError> {
        let meta = object.metadata();
        let key = self.key::<T>(&meta.namespace, &meta.name);
        if meta.name.is_empty() || meta.namespace.is_empty() {
            return Err(StorageError::BadRequest {
                op: "create",
                key,
                message: "metadata.name and metadata.namespace are required".into(),
            });
        }
        if meta.name.contains('/') || meta.namespace.contains('/') {
            return Err(StorageError::BadRequest {
                op: "create",
                key,
                message: "metadata.name and metadata.namespace may not contain '/'".into(),
            });
        }
        if meta.resource_version.is_some() {
            return Err(StorageError::BadRequest {
                op: "create",
                key,
                message: "resourceVersion may not be set on objects to be created".into(),
            });
        }
        let fence = self.write_fence("create", &key)?;
        let mut object = object.clone();
        api::fill_system_fields(object.metadata_mut());
        if let Some(fence) = &fence {
            object.metadata_mut().annotations.insert(
                FENCING_TOKEN_ANNOTATION.to_string(),
                fence.create_revision.to_string(),
            );
        }
        let value = self.encode(&key, &object)?;
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
        let revision = response.header().map_or(0, |h| h.revision());
        object.set_type_meta();
        object.metadata_mut().resource_version = Some(ResourceVersion(revision));
        Ok(object)
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
    /// # Errors
    /// `Conflict` when the key changed (or was deleted) since; `BadRequest` without a
    /// resourceVersion.
    pub async fn update<T: Object>(&self, object: &T) -> Result<T, StorageError> {
        let meta = object.metadata();
        let key = self.key::<T>(&meta.namespace, &meta.name);
        let Some(expected) = meta.resource_version else {
            return Err(StorageError::BadRequest {
                op: "update",
                key,
                message: "resourceVersion is required for an update".into(),
            });
        };
        let value = self.encode(&key, object)?;
        self.compare_and_put(key, expected, value, object.clone())
            .await
            .map(|(object, _)| object)
            .map_err(|(error, _)| error)
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
                unchanged_since(&key, expected).to_vec(),
                vec![TxnOp::put(key.as_str(), value, None)],
                vec![TxnOp::get(key.as_str(), None)],
            )
            .await
            .map_err(|e| (e, None))?;
        if response.succeeded() {
            let revision = response.header().map_or(0, |h| h.revision());
            object.set_type_meta();
            object.metadata_mut().resource_version = Some(ResourceVersion(revision));
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
        let key = self.key::<T>(namespace, name);
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
                unchanged_since(&key, expected).to_vec(),
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
    /// nothing is written. Returns the stored object.
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
        let key = self.key::<T>(namespace, name);
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
            let new_bytes = self.encode(&key, &updated)?;
            if new_bytes == old_bytes {
                return Ok(current);
            }
            let mut updated = updated;
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
/// missing key's `mod_revision` as 0, so the key must also exist: otherwise a write at
/// resourceVersion 0 would create the object (or delete nothing and report success).
fn unchanged_since(key: &str, expected: ResourceVersion) -> [Compare; 2] {
    [
        Compare::create_revision(key, CompareOp::Greater, 0),
        Compare::mod_revision(key, CompareOp::Equal, expected.0),
    ]
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fence_slot_holds_the_current_term_until_it_is_lost_or_cleared() {
        let slot = FenceSlot::default();
        assert!(slot.current().is_none());
        let lost = CancellationToken::new();
        slot.set(Fence::new("/e/a", 7, lost.clone()));
        assert_eq!(slot.current().map(|f| f.create_revision), Some(7));
        lost.cancel();
        assert!(slot.current().is_none(), "a lost term is not handed out");
        let next = CancellationToken::new();
        slot.set(Fence::new("/e/b", 9, next.clone()));
        assert_eq!(slot.current().map(|f| f.key), Some(b"/e/b".to_vec()));
        slot.clear();
        assert!(next.is_cancelled() && slot.current().is_none());
    }

    #[tokio::test]
    async fn a_fenced_registry_without_a_term_refuses_writes_without_asking_etcd() {
        // Nothing listens on port 1; the refusal comes before any connection attempt.
        let client = Client::connect(["http://127.0.0.1:1"], None).await.unwrap();
        let registry = Registry::new(&client, "/registry")
            .unwrap()
            .with_fence(FenceSlot::default());
        let mut pod = api::Pod::default();
        pod.metadata.name = "a".into();
        pod.metadata.namespace = "ns".into();
        let refused = registry.create(&pod).await.unwrap_err();
        assert!(refused.is_fenced(), "{refused}");
        assert_eq!(
            refused.to_string(),
            "create /registry/pods/ns/a: refused, this process is not the leader (leadership lost)"
        );
        let refused = registry.delete::<api::Pod>("ns", "a", None).await;
        assert!(matches!(
            refused,
            Err(StorageError::Fenced { op: "delete", .. })
        ));
    }

    #[test]
    fn only_calls_that_never_left_are_resent() {
        let check = |status: tonic::Status, expected: bool| {
            let error = etcd_client::Error::GRpcStatus(status);
            assert_eq!(is_unsent(&error), expected, "{error}");
        };
        check(tonic::Status::unavailable("tcp connect error"), true);
        check(tonic::Status::unavailable("h2 protocol error"), false);
        check(tonic::Status::deadline_exceeded("tcp connect error"), false);
        check(
            tonic::Status::unknown("etcdserver: request timed out"),
            false,
        );
    }

    #[test]
    fn prefix_range_end_increments_the_last_byte() {
        assert_eq!(prefix_range_end(b"/registry/pods/"), b"/registry/pods0");
        assert_eq!(prefix_range_end(b"a\xff"), b"b");
        assert_eq!(prefix_range_end(b"\xff\xff"), b"\0");
    }
}
