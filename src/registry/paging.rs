//! Paginated range reads pinned to one revision (2014 `ExtractToList` read a whole
//! directory at once; etcd v3 pages it, and every page must be read at the same revision).

use etcd_client::{GetOptions, KeyValue, KvClient};

use super::errors::{is_too_large, RawError};
use super::{Registry, StorageError};

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

/// What a range read returns of each key.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Fetch {
    Values,
    KeysOnly,
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

impl Registry {
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
        on_page: impl FnMut(&[KeyValue]),
    ) -> Result<i64, StorageError> {
        self.pages(prefix, range_end, revision, Fetch::Values, on_page)
            .await
    }

    /// [`Registry::for_each_page`] without the values: each key with its revisions.
    ///
    /// # Errors
    /// As [`Registry::for_each_page`].
    pub async fn for_each_key_page(
        &self,
        prefix: &str,
        revision: Option<i64>,
        on_page: impl FnMut(&[KeyValue]),
    ) -> Result<i64, StorageError> {
        let range_end = prefix_range_end(prefix.as_bytes());
        self.pages(prefix, &range_end, revision, Fetch::KeysOnly, on_page)
            .await
    }

    /// One key's key-value as it was at `revision`; `None` when it did not exist then.
    ///
    /// # Errors
    /// `Etcd` when it cannot be read; `is_compacted()` tells when `revision` has been
    /// compacted.
    pub async fn get_at(&self, key: &str, revision: i64) -> Result<Option<KeyValue>, StorageError> {
        let read = |mut kv: KvClient| {
            let options = GetOptions::new().with_revision(revision);
            async move { kv.get(key, Some(options)).await }
        };
        match self.raw(read).await {
            Ok(mut response) => Ok(response.take_kvs().into_iter().next()),
            Err(e) => Err(self.storage_error("get", key, e)),
        }
    }

    async fn pages(
        &self,
        prefix: &str,
        range_end: &[u8],
        revision: Option<i64>,
        fetch: Fetch,
        mut on_page: impl FnMut(&[KeyValue]),
    ) -> Result<i64, StorageError> {
        let mut start = prefix.as_bytes().to_vec();
        let mut pinned = revision.unwrap_or(0);
        let mut page_size = self.page_size;
        loop {
            let page = self
                .read_page(&start, range_end, pinned, &mut page_size, fetch)
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
        self.read_page(start, range_end, revision, page_size, Fetch::Values)
            .await
    }

    async fn read_page(
        &self,
        start: &[u8],
        range_end: &[u8],
        revision: i64,
        page_size: &mut i64,
        fetch: Fetch,
    ) -> Result<RangePage, StorageError> {
        loop {
            let mut options = GetOptions::new()
                .with_range(range_end.to_vec())
                .with_limit(*page_size)
                .with_revision(revision);
            if fetch == Fetch::KeysOnly {
                options = options.with_keys_only();
            }
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
}
