//! Keys and the document codec: where each object lives under the prefix (2014
//! `pkg/registry/etcd/etcd.go`) and how its JSON is read and written.

use super::{Object, ResourceVersion, DEFAULT_PREFIX};

// ---------------------------------------------------------------------------------------
// Keys

/// Normalizes a `--prefix` value: a leading `/`, no trailing `/`.
///
/// # Errors
/// When the prefix is empty or `/` (kcm would then own the whole keyspace).
pub fn normalize_prefix(prefix: &str) -> anyhow::Result<String> {
    let trimmed = prefix.trim().trim_end_matches('/');
    anyhow::ensure!(
        !trimmed.is_empty(),
        "prefix {prefix:?} is empty; use a directory such as {DEFAULT_PREFIX}"
    );
    Ok(if trimmed.starts_with('/') {
        trimmed.to_string()
    } else {
        format!("/{trimmed}")
    })
}

/// `{prefix}/{dir}/{namespace}/{name}`.
pub fn object_key<T: Object>(prefix: &str, namespace: &str, name: &str) -> String {
    format!("{prefix}/{}/{namespace}/{name}", T::KEY_DIR)
}

/// The key prefix a list or watch of `T` ranges over: one namespace, or all of them.
/// Always ends in `/`, so namespace `a` does not also match namespace `ab`.
pub fn list_key<T: Object>(prefix: &str, namespace: Option<&str>) -> String {
    match namespace {
        Some(ns) => format!("{prefix}/{}/{ns}/", T::KEY_DIR),
        None => format!("{prefix}/{}/", T::KEY_DIR),
    }
}

/// Splits an object key back into `(namespace, name)`; `None` for any other key
/// (the directory itself, a deeper key, a key of another kind).
pub fn parse_key<'k, T: Object>(prefix: &str, key: &'k str) -> Option<(&'k str, &'k str)> {
    let rest = key.strip_prefix(prefix)?.strip_prefix('/')?;
    let rest = rest.strip_prefix(T::KEY_DIR)?.strip_prefix('/')?;
    let (namespace, name) = rest.split_once('/')?;
    (!namespace.is_empty() && !name.is_empty() && !name.contains('/')).then_some((namespace, name))
}

// ---------------------------------------------------------------------------------------
// Decoding

/// Decodes a stored document of kind `T` read from `key` at `mod_revision`.
///
/// Fills `metadata.resourceVersion` from the revision (a stored value is ignored) and
/// `metadata.namespace`/`name` from the key when the document leaves them out.
///
/// # Errors
/// When the value is not JSON of this kind's shape, names another kind or an `apiVersion`
/// the kind is not read in ([`Object::API_VERSION`], [`Object::READ_API_VERSIONS`]), or
/// names another object than its key.
pub fn decode<T: Object>(
    prefix: &str,
    key: &str,
    value: &[u8],
    mod_revision: i64,
) -> anyhow::Result<T> {
    let mut object: T = serde_json::from_slice(value).map_err(|e| anyhow::anyhow!("{e}"))?;
    check_type::<T>(object.stored_kind(), object.stored_api_version())?;
    if let Some((namespace, name)) = parse_key::<T>(prefix, key) {
        let meta = object.metadata_mut();
        for (field, stored, from_key) in [
            ("namespace", &mut meta.namespace, namespace),
            ("name", &mut meta.name, name),
        ] {
            if takes_key_name(field, stored, from_key)? {
                *stored = from_key.to_string();
            }
        }
    }
    object.metadata_mut().resource_version = Some(ResourceVersion(mod_revision));
    Ok(object)
}

/// [`decode`]'s check of a stored document's `kind` and `apiVersion` (either may be
/// empty).
///
/// # Errors
/// When either names another kind or a version `T` is not read in.
pub fn check_type<T: Object>(kind: &str, api_version: &str) -> anyhow::Result<()> {
    anyhow::ensure!(
        kind.is_empty() || kind == T::KIND,
        "kind is {kind:?}, expected {:?}",
        T::KIND
    );
    anyhow::ensure!(
        api_version.is_empty()
            || api_version == T::API_VERSION
            || T::READ_API_VERSIONS.contains(&api_version),
        "apiVersion is {api_version:?}, expected {:?}",
        T::API_VERSION
    );
    Ok(())
}

/// [`decode`]'s check of a stored document's `metadata.namespace` or `metadata.name`
/// (`field`) against its key's: whether the document left it out, so that it is taken
/// from the key.
///
/// # Errors
/// When the document names another object than its key.
pub fn takes_key_name(field: &str, stored: &str, from_key: &str) -> anyhow::Result<bool> {
    if stored.is_empty() {
        return Ok(true);
    }
    anyhow::ensure!(
        stored == from_key,
        "metadata.{field} {stored:?} does not match the key's {from_key:?}"
    );
    Ok(false)
}

/// Encodes an object for storage: `kind` and `apiVersion` set, no `resourceVersion`
/// (the revision lives in etcd, not in the document).
pub fn encode<T: Object>(object: &T) -> anyhow::Result<Vec<u8>> {
    let stored_as_is = object.stored_kind() == T::KIND
        && object.stored_api_version() == T::API_VERSION
        && object.metadata().resource_version.is_none();
    if stored_as_is {
        return to_vec(object);
    }
    let mut object = object.clone();
    object.set_type_meta();
    object.metadata_mut().resource_version = None;
    to_vec(&object)
}

/// Where an encoding starts: a controller's pod is about 600 bytes, and serde_json's own
/// start of 128 grew three times for each. The bytes only pass through (to etcd, to a
/// comparison), so the room left over is not kept.
const ENCODE_CAPACITY: usize = 1024;

fn to_vec<T: Object>(object: &T) -> anyhow::Result<Vec<u8>> {
    let mut out = Vec::with_capacity(ENCODE_CAPACITY);
    serde_json::to_writer(&mut out, object)?;
    Ok(out)
}
