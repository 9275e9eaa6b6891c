//! [`Reflected`]: what an informer needs of the items it keeps: where the kind lives in
//! etcd, how one stored value decodes, and the labels and resourceVersion the store
//! reads. Every [`Cached`] form of a typed kind is one; so are the node directories'
//! items (`informer::node`), which are no typed kind.

use std::sync::Arc;

use super::{Cached, Interners, Stored};
use crate::api::{self, Object};
use crate::labels::Set;

/// An item an informer lists, watches and stores.
pub trait Reflected: Send + Sync + Sized + 'static {
    /// The plural resource name (metrics, logs), e.g. `pods`.
    const RESOURCE: &'static str;
    /// The `kind` named in decode errors, e.g. `Pod`.
    const KIND: &'static str;
    /// The directory key (ending in `/`) under `prefix` that holds every item of the
    /// kind.
    fn directory(prefix: &str) -> String;
    /// The namespace ("" for a cluster-scoped kind) and name of `key`; `None` for a key
    /// the layout does not allow.
    fn parse_key<'k>(prefix: &str, key: &'k str) -> Option<(&'k str, &'k str)>;
    /// Decodes a stored value into the kept form.
    ///
    /// # Errors
    /// When the value is not an object of the kind.
    fn decode(stored: Stored<'_>) -> anyhow::Result<Self>;
    /// The item's name (its key's last part).
    fn name(&self) -> &str;
    /// The item's name as an `Arc`.
    fn shared_name(&self) -> Arc<str> {
        self.name().into()
    }
    /// The labels the store groups and indexes items by; `None` for no label index.
    fn labels(&self) -> Option<&Arc<Set>> {
        None
    }
    /// Replaces the labels with an equal, shared copy (called before the item is stored).
    fn share_labels(&mut self, _labels: Arc<Set>) {}
    /// Replaces the namespace with the store's copy of it.
    fn share_namespace(&mut self, _namespace: &Arc<str>) {}
    /// Replaces the values many items hold alike with the store's shared copies.
    fn intern(&mut self, _interners: &mut Interners) {}
    /// The item's resourceVersion (its key's `mod_revision`).
    fn resource_version(&self) -> i64;
}

impl<C: Cached> Reflected for C {
    const RESOURCE: &'static str = <C::Object as Object>::RESOURCE;
    const KIND: &'static str = <C::Object as Object>::KIND;

    fn directory(prefix: &str) -> String {
        api::list_key::<C::Object>(prefix, None)
    }

    fn parse_key<'k>(prefix: &str, key: &'k str) -> Option<(&'k str, &'k str)> {
        api::parse_key::<C::Object>(prefix, key)
    }

    fn decode(stored: Stored<'_>) -> anyhow::Result<C> {
        C::decode_stored(stored)
    }

    fn name(&self) -> &str {
        Cached::name(self)
    }

    fn shared_name(&self) -> Arc<str> {
        Cached::shared_name(self)
    }

    fn labels(&self) -> Option<&Arc<Set>> {
        Cached::labels(self)
    }

    fn share_labels(&mut self, labels: Arc<Set>) {
        Cached::share_labels(self, labels);
    }

    fn share_namespace(&mut self, namespace: &Arc<str>) {
        Cached::share_namespace(self, namespace);
    }

    fn intern(&mut self, interners: &mut Interners) {
        Cached::intern(self, interners);
    }

    fn resource_version(&self) -> i64 {
        Cached::resource_version(self)
    }
}
