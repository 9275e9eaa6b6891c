//! The node directories as informers read them: Node documents
//! (`{prefix}/nodes/{name}`), kept as stored JSON so that a write keeps every field
//! ([`CachedNode`]); the kubelets' registrations (`{prefix}/minions/{name}`), whose value
//! means nothing here: a registration is present or not ([`Registration`]); and the
//! kubelets' node Leases (`{prefix}/leases/kube-node-lease/{name}`), of which only the
//! renewal time matters ([`NodeLease`]). None is a typed kind (`api::Object`); Nodes and
//! registrations are cluster-scoped, so their namespace is "", and the Leases are in
//! `kube-node-lease`.

use std::sync::Arc;

use serde_json::Value;

use super::{Reflected, Stored};
use crate::api::{self, NODES_DIR, NODE_LEASE_NAMESPACE, REGISTRATIONS_DIR};

/// A Node document as stored, at its revision.
#[derive(Clone, Debug, PartialEq)]
pub struct CachedNode {
    /// The node's name (its key's last part).
    pub name: Arc<str>,
    /// The document as stored: a JSON object.
    pub document: Value,
    /// Its key's `mod_revision`.
    pub revision: i64,
}

/// A kubelet's registration: present while its kubelet holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Registration {
    /// The node's name (its key's last part).
    pub name: Arc<str>,
    /// Its key's `mod_revision`.
    pub revision: i64,
}

/// A kubelet's node Lease: what tells a live kubelet through the API.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeLease {
    /// The node's name (its key's last part).
    pub name: Arc<str>,
    /// `spec.renewTime` (a `MicroTime`), if set: it moves on every renewal.
    pub renew_time: Option<String>,
    /// Its key's `mod_revision`.
    pub revision: i64,
}

/// The name of `key` directly under `{prefix}/{dir}/`, in the namespace "".
fn name_in<'k>(prefix: &str, dir: &str, key: &'k str) -> Option<(&'k str, &'k str)> {
    let rest = key.strip_prefix(prefix)?.strip_prefix('/')?;
    let under = rest.strip_prefix(dir)?.strip_prefix('/')?;
    api::name_under("", under).map(|name| ("", name))
}

/// The name in `key` (the whole key for one the layout does not allow, which the
/// reflector never decodes).
fn name_of<R: Reflected>(prefix: &str, key: &str) -> Arc<str> {
    R::parse_key(prefix, key)
        .map_or(key, |(_, name)| name)
        .into()
}

impl Reflected for CachedNode {
    const RESOURCE: &'static str = NODES_DIR;
    const KIND: &'static str = api::NODE_KIND;

    fn directory(prefix: &str) -> String {
        format!("{prefix}/{NODES_DIR}/")
    }

    fn parse_key<'k>(prefix: &str, key: &'k str) -> Option<(&'k str, &'k str)> {
        name_in(prefix, NODES_DIR, key)
    }

    fn decode(stored: Stored<'_>) -> anyhow::Result<Self> {
        match serde_json::from_slice::<Value>(stored.value) {
            Ok(document @ Value::Object(_)) => Ok(CachedNode {
                name: name_of::<Self>(stored.prefix, stored.key),
                document,
                revision: stored.mod_revision,
            }),
            Ok(_) => anyhow::bail!("the value is not a Node document (a JSON object)"),
            Err(e) => anyhow::bail!("the value is not a Node document (a JSON object): {e}"),
        }
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn shared_name(&self) -> Arc<str> {
        self.name.clone()
    }

    fn resource_version(&self) -> i64 {
        self.revision
    }
}

impl Reflected for Registration {
    const RESOURCE: &'static str = REGISTRATIONS_DIR;
    const KIND: &'static str = "registration";

    fn directory(prefix: &str) -> String {
        format!("{prefix}/{REGISTRATIONS_DIR}/")
    }

    fn parse_key<'k>(prefix: &str, key: &'k str) -> Option<(&'k str, &'k str)> {
        name_in(prefix, REGISTRATIONS_DIR, key)
    }

    fn decode(stored: Stored<'_>) -> anyhow::Result<Self> {
        Ok(Registration {
            name: name_of::<Self>(stored.prefix, stored.key),
            revision: stored.mod_revision,
        })
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn shared_name(&self) -> Arc<str> {
        self.name.clone()
    }

    fn resource_version(&self) -> i64 {
        self.revision
    }
}

impl Reflected for NodeLease {
    const RESOURCE: &'static str = api::LEASES_DIR;
    const KIND: &'static str = "Lease";

    /// Only the Leases of `kube-node-lease`: through the API, a list and watch of that
    /// namespace.
    fn directory(prefix: &str) -> String {
        api::node_lease_directory(prefix)
    }

    fn parse_key<'k>(prefix: &str, key: &'k str) -> Option<(&'k str, &'k str)> {
        let name = api::name_under(&api::node_lease_directory(prefix), key)?;
        Some((NODE_LEASE_NAMESPACE, name))
    }

    fn decode(stored: Stored<'_>) -> anyhow::Result<Self> {
        match serde_json::from_slice::<Value>(stored.value) {
            Ok(document @ Value::Object(_)) => Ok(NodeLease {
                name: name_of::<Self>(stored.prefix, stored.key),
                renew_time: document
                    .pointer("/spec/renewTime")
                    .and_then(Value::as_str)
                    .map(str::to_string),
                revision: stored.mod_revision,
            }),
            Ok(_) => anyhow::bail!("the value is not a Lease document (a JSON object)"),
            Err(e) => anyhow::bail!("the value is not a Lease document (a JSON object): {e}"),
        }
    }

    fn name(&self) -> &str {
        &self.name
    }

    fn shared_name(&self) -> Arc<str> {
        self.name.clone()
    }

    fn resource_version(&self) -> i64 {
        self.revision
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_keys_directly_under_each_directory_are_nodes_or_registrations() {
        let node = |key| CachedNode::parse_key("/registry", key);
        assert_eq!(node("/registry/nodes/n1"), Some(("", "n1")));
        assert_eq!(node("/registry/nodes/a/deeper"), None);
        assert_eq!(node("/registry/nodes/"), None);
        assert_eq!(node("/registry/minions/n1"), None);
        assert_eq!(node("/other/nodes/n1"), None);
        let registration = |key| Registration::parse_key("/registry", key);
        assert_eq!(registration("/registry/minions/n1"), Some(("", "n1")));
        assert_eq!(registration("/registry/minions/n1/x"), None);
        assert_eq!(registration("/registry/nodes/n1"), None);
        assert_eq!(CachedNode::directory("/registry"), "/registry/nodes/");
        assert_eq!(Registration::directory("/registry"), "/registry/minions/");
    }

    #[test]
    fn a_node_is_any_json_object_and_a_registration_any_value() {
        let node = CachedNode::decode(Stored::new(
            "/registry",
            "/registry/nodes/n1",
            br#"{"a":1}"#,
            7,
        ))
        .unwrap();
        assert_eq!(node.revision, 7);
        assert_eq!(node.document["a"], 1);
        for junk in [&b"[1]"[..], b"{not json", b"\"s\""] {
            let error = CachedNode::decode(Stored::new("/registry", "/registry/nodes/n1", junk, 7))
                .unwrap_err();
            assert!(error.to_string().contains("not a Node document"), "{error}");
        }
        let registration = Registration::decode(Stored::new(
            "/registry",
            "/registry/minions/n1",
            b"1@host",
            9,
        ))
        .unwrap();
        assert_eq!(
            registration,
            Registration {
                name: "n1".into(),
                revision: 9
            }
        );
    }

    #[test]
    fn node_leases_are_the_leases_of_kube_node_lease_and_keep_their_renewal_time() {
        let key = |key| NodeLease::parse_key("/registry", key);
        assert_eq!(
            key("/registry/leases/kube-node-lease/n1"),
            Some(("kube-node-lease", "n1"))
        );
        assert_eq!(key("/registry/leases/kube-system/kcm"), None);
        assert_eq!(key("/registry/leases/kube-node-lease/n1/x"), None);
        assert_eq!(
            NodeLease::directory("/registry"),
            "/registry/leases/kube-node-lease/"
        );
        let lease = NodeLease::decode(Stored::new(
            "/registry",
            "/registry/leases/kube-node-lease/n1",
            br#"{"spec":{"holderIdentity":"n1","renewTime":"2026-11-29T10:00:00.000001Z"}}"#,
            4,
        ))
        .unwrap();
        assert_eq!(
            lease,
            NodeLease {
                name: "n1".into(),
                renew_time: Some("2026-11-29T10:00:00.000001Z".into()),
                revision: 4
            }
        );
        let error = NodeLease::decode(Stored::new("/registry", "k", b"[]", 4)).unwrap_err();
        assert!(
            error.to_string().contains("not a Lease document"),
            "{error}"
        );
    }
}
