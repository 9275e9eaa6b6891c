//! The IO seam of an endpoints sync: what it reads past the caches and what it writes.
//! [`Registry`] is the real one on etcd, `apiclient::ApiClient` the one through the API;
//! the unit tests pass a recording fake.

use std::future::Future;

use crate::api::{Endpoints, Pod, Service};
use crate::labels::Selector;
use crate::registry::{Registry, StorageError};

/// Reads and writes of an endpoints sync.
pub trait EndpointsControl: Send + Sync + 'static {
    /// The Service as stored now (`NotFound`, `Decode` for a malformed value).
    fn service(
        &self,
        namespace: &str,
        name: &str,
    ) -> impl Future<Output = Result<Service, StorageError>> + Send;

    /// The pods of `namespace` that `selector` matches, as stored now (2014's list per
    /// sync, used without caches).
    fn pods(
        &self,
        namespace: &str,
        selector: &Selector,
    ) -> impl Future<Output = Result<Vec<Pod>, StorageError>> + Send;

    /// The Endpoints as stored now (`NotFound`, `Decode` for a malformed value).
    fn endpoints(
        &self,
        namespace: &str,
        name: &str,
    ) -> impl Future<Output = Result<Endpoints, StorageError>> + Send;

    /// Creates `endpoints` if absent.
    fn create(
        &self,
        endpoints: &Endpoints,
    ) -> impl Future<Output = Result<(), StorageError>> + Send;

    /// Writes `endpoints` if its key is still at its resourceVersion.
    fn update(
        &self,
        endpoints: &Endpoints,
    ) -> impl Future<Output = Result<(), StorageError>> + Send;

    /// Deletes the Endpoints `namespace/name` (`NotFound` when absent).
    fn delete(
        &self,
        namespace: &str,
        name: &str,
    ) -> impl Future<Output = Result<(), StorageError>> + Send;

    /// Every Endpoints object, as stored now (the periodic pass over orphans).
    fn list_endpoints(&self) -> impl Future<Output = Result<Vec<Endpoints>, StorageError>> + Send;
}

impl EndpointsControl for Registry {
    async fn service(&self, namespace: &str, name: &str) -> Result<Service, StorageError> {
        self.get(namespace, name).await
    }

    async fn pods(&self, namespace: &str, selector: &Selector) -> Result<Vec<Pod>, StorageError> {
        Ok(self.list(Some(namespace), selector).await?.items)
    }

    async fn endpoints(&self, namespace: &str, name: &str) -> Result<Endpoints, StorageError> {
        self.get(namespace, name).await
    }

    async fn create(&self, endpoints: &Endpoints) -> Result<(), StorageError> {
        Registry::create(self, endpoints).await.map(drop)
    }

    async fn update(&self, endpoints: &Endpoints) -> Result<(), StorageError> {
        Registry::update(self, endpoints).await.map(drop)
    }

    async fn delete(&self, namespace: &str, name: &str) -> Result<(), StorageError> {
        Registry::delete::<Endpoints>(self, namespace, name, None)
            .await
            .map(drop)
    }

    async fn list_endpoints(&self) -> Result<Vec<Endpoints>, StorageError> {
        Ok(self.list(None, &Selector::everything()).await?.items)
    }
}
