//! The one store path every write the API serves ends in, typed kinds and documents,
//! namespaces and nodes alike: [`Store::create`], [`Store::update`] and
//! [`Store::delete`], each one of the registry's compare-and-swap primitives on the
//! object's key (`create_raw_guarded`, `guaranteed_update_raw`, `guaranteed_delete_raw`).
//! Mirrors kube-apiserver's generic store
//! (`staging/src/k8s.io/apiserver/pkg/registry/generic/registry/store.go`: `Create`,
//! `Update` through `GuaranteedUpdate`, `Delete` with `BeforeDelete`): what one kind does
//! differently reaches it as a pure function over the value read, built by its caller from
//! the kind's strategy (`write` and `delete` for the typed kinds, `documents` for the
//! rest), so the retries, `dryRun`, the namespace's lifecycle and the answers to storage
//! failures are written once, here.
//!
//! Invariants: nothing is written under `dryRun=All` (each call reads and decides as for
//! the write, then stops); a create in a namespace commits only while the namespace's
//! Namespace is absent or unchanged since it was read not terminating (403 otherwise, the
//! `NamespaceLifecycle` admission plugin's answer); a delete whose request stated a
//! resourceVersion answers 409 when another writer came between its read and its write
//! (an update's own step compares a stated resourceVersion with each value read).

use serde_json::Value;

use super::ApiState;
use crate::api::{self, Object, ResourceVersion};
use crate::apiserver::errors::ApiError;
use crate::apiserver::resources::Resource;
use crate::apiserver::validation;
use crate::registry::{Deleted, Deletion, KeyCondition, RawValue, Registry, StorageError};

/// The resource whose watch cache admits a create in a namespace.
const NAMESPACES: &str = "namespaces";
/// The resource whose writes expire (`writer`).
const EVENTS: &str = "events";

/// How often a `generateName` create tries another name after hitting an existing one.
const GENERATE_NAME_ATTEMPTS: usize = 8;

/// The objects of one served resource, as the store path writes them.
#[derive(Clone, Copy)]
pub(super) struct Store<'a> {
    pub state: &'a ApiState,
    pub resource: &'static Resource,
}

/// An object ready to be created: its name, key and stored bytes, and what the caller
/// answers with.
pub(super) struct Prepared<O> {
    pub name: String,
    pub key: String,
    pub value: Vec<u8>,
    pub object: O,
}

impl Store<'_> {
    pub fn not_found(&self, name: &str) -> ApiError {
        ApiError::not_found(self.resource.group, self.resource.plural, name)
    }

    pub fn conflict(&self, name: &str) -> ApiError {
        ApiError::conflict(self.resource.group, self.resource.plural, name)
    }

    /// The answer for a failed storage call about `name`: 404, 409, what a step or a
    /// decision refused with, 413 when etcd refused a value as too large, else 503.
    pub fn error(&self, name: &str, error: StorageError) -> ApiError {
        let (group, plural) = (self.resource.group, self.resource.plural);
        match error {
            StorageError::NotFound { .. } => self.not_found(name),
            StorageError::AlreadyExists { .. } => ApiError::already_exists(group, plural, name),
            StorageError::Conflict { .. } => self.conflict(name),
            StorageError::Update { source, .. } => match source.downcast::<ApiError>() {
                Ok(error) => error,
                Err(other) => ApiError::internal(format!("{other:#}")),
            },
            StorageError::BadRequest { message, .. } => ApiError::bad_request(message),
            StorageError::Etcd { ref message, .. } => validation::too_large_for_etcd(message)
                .unwrap_or_else(|| ApiError::unavailable(error.to_string())),
            other => ApiError::internal(other.to_string()),
        }
    }

    /// The value at `key` as stored (`None`: absent), for a `dryRun` that decides as the
    /// write would and stops there; a failure answered as `name`'s.
    async fn read(&self, key: &str, name: &str) -> Result<Option<RawValue>, ApiError> {
        self.state
            .registry
            .get_raw(key)
            .await
            .map_err(|e| self.error(name, e))
    }

    /// Creates the object `prepare` makes, if its key is absent (409 `AlreadyExists`
    /// otherwise). With `generate_name`, `prepare` gets a name of that prefix, and
    /// another after hitting an existing one. Returns what `prepare` made and the
    /// revision of the create (`None` under `dry_run`).
    ///
    /// # Errors
    /// What `prepare` refuses with; 403 in a terminating namespace; 409; 413, 503.
    pub async fn create<O>(
        &self,
        namespace: &str,
        dry_run: bool,
        generate_name: Option<&str>,
        mut prepare: impl FnMut(Option<String>) -> Result<Prepared<O>, ApiError>,
    ) -> Result<(O, Option<ResourceVersion>), ApiError> {
        let attempts = if generate_name.is_some() {
            GENERATE_NAME_ATTEMPTS
        } else {
            1
        };
        let mut taken = None;
        for _ in 0..attempts {
            let prepared = prepare(generate_name.map(generated_name))?;
            match self.create_once(namespace, &prepared, dry_run).await {
                Err(e) if e.code == 409 => taken = Some(e),
                outcome => return outcome.map(|rv| (prepared.object, rv)),
            }
        }
        Err(taken.expect("at least one attempt"))
    }

    async fn create_once<O>(
        &self,
        namespace: &str,
        prepared: &Prepared<O>,
        dry_run: bool,
    ) -> Result<Option<ResourceVersion>, ApiError> {
        let (name, key) = (prepared.name.as_str(), prepared.key.as_str());
        let registry = &self.state.registry;
        let guard = self
            .resource
            .namespaced
            .then(|| api::namespace_key(registry.prefix(), namespace));
        let admit = |read: Option<&RawValue>| admit(self.resource, namespace, name, read);
        if dry_run {
            if let Some(guard) = &guard {
                admit(self.read(guard, name).await?.as_ref())?;
            }
            return match self.read(key, name).await? {
                None => Ok(None),
                Some(_) => Err(self.error(name, StorageError::AlreadyExists { key: key.into() })),
            };
        }
        let value = prepared.value.clone();
        let registry = &self.writer().await?;
        let created = match &guard {
            Some(guard) => {
                let seen = self.namespace_seen(namespace, guard);
                let admit = |read: Option<&RawValue>| admit(read).map_err(anyhow::Error::new);
                registry
                    .create_raw_guarded(key, value, guard, seen, admit)
                    .await
            }
            None => registry.create_raw(key, value).await,
        };
        match created {
            Ok(rv) => Ok(Some(rv)),
            Err(StorageError::ConditionFailed { .. }) => Err(ApiError::conflict_because(
                self.resource.group,
                self.resource.plural,
                name,
                &format!("the namespace {namespace} kept changing; try again"),
            )),
            Err(e) => Err(self.error(name, e)),
        }
    }

    /// The registry a write goes through: for events, one that attaches the key to the
    /// current event lease, so an event written through the API expires an hour after its
    /// last write, as kube-apiserver's `--event-ttl` and as the ones kcm's components write
    /// to etcd themselves (`record`).
    async fn writer(&self) -> Result<Registry, ApiError> {
        if self.resource.plural != EVENTS {
            return Ok(self.state.registry.clone());
        }
        let lease =
            self.state.event_leases.current(1).await.map_err(|e| {
                ApiError::unavailable(format!("no lease to store the event on: {e:#}"))
            })?;
        Ok(self.state.registry.with_lease(lease))
    }

    /// The condition on the namespace's key (`guard`) that the namespaces' watch cache
    /// admits the create under: absent, or at its revision and not terminating. `None`
    /// (read etcd) before the cache has listed, and when it holds the namespace
    /// terminating, so that a 403 is only ever answered from etcd's own value.
    fn namespace_seen(&self, namespace: &str, guard: &str) -> Option<KeyCondition> {
        let cache = self.state.caches.get(NAMESPACES)?;
        if !cache.is_synced() {
            return None;
        }
        match cache.get("", namespace).0 {
            None => Some(KeyCondition::Absent(guard.to_string())),
            Some(item) if !api::is_terminating(&item.object()) => {
                Some(KeyCondition::At(guard.to_string(), item.revision))
            }
            Some(_) => None,
        }
    }

    /// The read-modify-write of the object at `key`: `step` turns each value read into the
    /// bytes to store (`None`: nothing changes, nothing is written), again from a fresh
    /// read when another writer came between. Returns the value stored (under `dry_run`,
    /// the value `step` made, at the revision read).
    ///
    /// # Errors
    /// 404; what `step` refuses with; 409 when it kept conflicting; 413, 503.
    pub async fn update(
        &self,
        key: &str,
        name: &str,
        dry_run: bool,
        mut step: impl FnMut(&RawValue) -> Result<Option<Vec<u8>>, ApiError> + Send,
    ) -> Result<RawValue, ApiError> {
        if dry_run {
            let current = self
                .read(key, name)
                .await?
                .ok_or_else(|| self.not_found(name))?;
            return Ok(match step(&current)? {
                Some(value) => RawValue { value, ..current },
                None => current,
            });
        }
        self.writer()
            .await?
            .guaranteed_update_raw(key, |raw| step(raw).map_err(anyhow::Error::new))
            .await
            .map_err(|e| self.error(name, e))
    }

    /// The delete of the object at `key`: `decide` says what the delete does to each value
    /// read (`None`: the key is absent), the kind's `BeforeDelete`: delete it now, write it
    /// marked instead (finalizers, a graceful deletion, a Namespace's Terminating), or
    /// leave it. When `stated` (the request's resourceVersion precondition) is given, a
    /// second read, after another writer came between, is 409.
    ///
    /// # Errors
    /// 404; what `decide` refuses with; 409; 413, 503.
    pub async fn delete(
        &self,
        key: &str,
        name: &str,
        (dry_run, stated): (bool, Option<ResourceVersion>),
        mut decide: impl FnMut(Option<&RawValue>) -> Result<Deletion, ApiError> + Send,
    ) -> Result<Deleted, ApiError> {
        let registry = &self.state.registry;
        if dry_run {
            let current = self.read(key, name).await?;
            return match (decide(current.as_ref())?, current) {
                (Deletion::Delete | Deletion::Keep, None) => Err(self.not_found(name)),
                (Deletion::Delete, Some(current)) => Ok(Deleted::Gone(current)),
                (Deletion::Keep, Some(current)) => Ok(Deleted::Kept(current)),
                (Deletion::Write(value), current) => Ok(Deleted::Written(RawValue {
                    value,
                    create_revision: current.as_ref().map_or(0, |c| c.create_revision),
                    mod_revision: current.as_ref().map_or(0, |c| c.mod_revision),
                })),
            };
        }
        let mut reads = 0;
        registry
            .guaranteed_delete_raw(key, |raw| {
                reads += 1;
                if reads > 1 && stated.is_some() {
                    return Err(self.conflict(name).into());
                }
                decide(raw).map_err(anyhow::Error::new)
            })
            .await
            .map_err(|e| self.error(name, e))
    }
}

/// `generateName` plus five random characters of kube-apiserver's alphabet
/// (`names.SimpleNameGenerator`: no vowels, no confusable digits).
fn generated_name(prefix: &str) -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut rng = rand::thread_rng();
    let suffix: String = (0..5)
        .map(|_| ALPHABET[rand::Rng::gen_range(&mut rng, 0..ALPHABET.len())] as char)
        .collect();
    format!("{prefix}{suffix}")
}

/// Whether a create of `name` may land in `namespace`, whose Namespace `read` is (absent,
/// or as stored): not while it is terminating.
///
/// # Errors
/// 403 `Forbidden` for a terminating namespace.
fn admit(
    resource: &Resource,
    namespace: &str,
    name: &str,
    read: Option<&RawValue>,
) -> Result<(), ApiError> {
    let document: Value = read
        .and_then(|read| serde_json::from_slice(&read.value).ok())
        .unwrap_or(Value::Null);
    if !api::is_terminating(&document) {
        return Ok(());
    }
    Err(ApiError::forbidden(
        resource.group,
        resource.plural,
        name,
        &format!(
            "unable to create new content in namespace {namespace} because it is being terminated"
        ),
    ))
}

/// A typed object as stored at `key`, at the value's revision.
///
/// # Errors
/// 500 for a value that does not decode as `T`.
pub(super) fn decode<T: Object>(
    state: &ApiState,
    key: &str,
    raw: &RawValue,
) -> Result<T, ApiError> {
    api::decode::<T>(state.registry.prefix(), key, &raw.value, raw.mod_revision).map_err(|e| {
        ApiError::internal(format!(
            "decode {} {key} at revision {}: {e:#}",
            T::KIND,
            raw.mod_revision
        ))
    })
}

/// A typed object's stored bytes.
///
/// # Errors
/// 400 for an object that does not encode.
pub(super) fn encode<T: Object>(object: &T) -> Result<Vec<u8>, ApiError> {
    api::encode(object).map_err(|e| ApiError::bad_request(format!("{e:#}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn raw(document: Value) -> RawValue {
        RawValue {
            value: serde_json::to_vec(&document).unwrap(),
            create_revision: 1,
            mod_revision: 2,
        }
    }

    #[test]
    fn generated_names_add_five_characters_of_the_alphabet() {
        let name = generated_name("web-");
        assert_eq!(name.len(), 9);
        assert!(name[4..]
            .chars()
            .all(|c| "bcdfghjklmnpqrstvwxz2456789".contains(c)));
    }

    #[test]
    fn a_create_lands_in_an_absent_or_active_namespace_only() {
        let pods = crate::apiserver::resources::find("", "v1", "pods").unwrap();
        assert!(admit(pods, "web", "a", None).is_ok());
        let active = raw(json!({"metadata": {"name": "web"}, "status": {"phase": "Active"}}));
        assert!(admit(pods, "web", "a", Some(&active)).is_ok());
        let mut terminating = json!({"metadata": {"name": "web"}});
        api::start_terminating(&mut terminating, "2024-01-01T00:00:00Z");
        let refused = admit(pods, "web", "a", Some(&raw(terminating))).unwrap_err();
        assert_eq!(refused.code, 403);
        assert!(
            refused
                .message
                .contains("namespace web because it is being terminated"),
            "{}",
            refused.message
        );
    }
}
