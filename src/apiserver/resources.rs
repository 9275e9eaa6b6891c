//! The static table of what `kcm apiserver` serves: one [`Resource`] per served resource,
//! with the names, kinds, scope, subresources and verbs that discovery publishes and the
//! kcm storage directory the handlers read.
//!
//! Mirrors the per-resource facts kube-apiserver assembles from its registries:
//! `pkg/registry/core/*/storage/storage.go` and `pkg/registry/apps/*/storage/storage.go`
//! (`ShortNames()`, `Categories()`, `SingularName()`, the `status` and `scale` REST
//! objects), `pkg/kubeapiserver/default_storage_factory_builder.go`
//! (`SpecialDefaultResourcePrefixes`: `controllers`, `services/specs`,
//! `services/endpoints`; kcm keeps Nodes in `nodes`, its registrations being in `minions`), and `staging/src/k8s.io/apiserver/pkg/endpoints/
//! installer.go`, which turns them into discovery entries.
//!
//! Invariants (checked by the tests below):
//! - `(group, version, plural)` is unique, and so is every plural, singular and short
//!   name across the whole table, so a bare name resolves to at most one resource;
//! - resources are listed by group (core first), then alphabetically by plural, the order
//!   kube-apiserver's discovery lists them in; subresources alphabetically;
//! - every resource kcm stores as a typed kind serves exactly [`SERVED_VERBS`], namespaces
//!   [`NAMESPACE_VERBS`], nodes [`NODE_VERBS`], the documents kept for other tools
//!   (ConfigMaps, Secrets, ServiceAccounts, Leases) and events [`DOCUMENT_VERBS`], and every
//!   subresource [`SUBRESOURCE_VERBS`]: widening
//!   what kcm serves is a change of those constants;
//! - `categories` is `["all"]` on exactly pods, replicationcontrollers, services,
//!   deployments and replicasets (what `kubectl get all` expands to) and empty elsewhere;
//! - a `status` subresource answers with its resource's own kind, a `scale` subresource
//!   with `autoscaling/v1` `Scale`;
//! - cluster-scoped resources (namespaces, nodes) are never stored under a namespace.

use k8s_pb::api::{apps, coordination, core};

use super::convert::Kind;
use super::fields::{self, SelectableFields};
use super::protobuf::{json_of, FromProtobuf};
use super::table::{self, Printer};
use strategy::Strategy;

mod configmap;
mod lease;
mod namespace;
mod secret;
mod serviceaccount;
pub(crate) mod strategy;

/// The verbs of a resource kcm stores and writes (discovery's `verbs`, in kube-apiserver's
/// order).
pub(crate) const SERVED_VERBS: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

/// The verbs of namespaces (kube-apiserver's: no `deletecollection`).
pub(crate) const NAMESPACE_VERBS: &[&str] = &[
    "create", "delete", "get", "list", "patch", "update", "watch",
];

/// The verbs of nodes: kcm's kubelets create them, the API patches (`kubectl cordon`),
/// updates and deletes them.
pub(crate) const NODE_VERBS: &[&str] = &["delete", "get", "list", "patch", "update", "watch"];

/// The verbs of the kinds the API stores as documents for other tools (ConfigMaps,
/// Secrets, ServiceAccounts, Leases): [`SERVED_VERBS`] but `deletecollection` (kubectl
/// deletes one by one).
pub(crate) const DOCUMENT_VERBS: &[&str] = &[
    "create", "delete", "get", "list", "patch", "update", "watch",
];

/// The verbs every subresource serves (`status`, `scale`).
pub(crate) const SUBRESOURCE_VERBS: &[&str] = &["get", "patch", "update"];

/// The core group's name: the empty string, served under `/api`.
pub(crate) const CORE_GROUP: &str = "";

/// Where a resource's objects come from in kcm's etcd keyspace (below the key prefix,
/// `/registry` by default).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Storage {
    /// JSON documents at `{prefix}/{directory}/{namespace}/{name}` (converted to the
    /// served version on the way out).
    Objects {
        /// The directory under the prefix (`pods`, `services/specs`).
        directory: &'static str,
    },
    /// JSON documents stored in the served version, at `{prefix}/{directory}/{name}`
    /// (cluster-scoped) or `{prefix}/{directory}/{namespace}/{name}`: the Nodes kcm's
    /// kubelets write, the Namespaces, ConfigMaps, Secrets, ServiceAccounts and Leases
    /// the API writes (`handlers/documents.rs`, with one strategy per kind in
    /// `resources/`).
    Documents {
        /// The directory under the prefix (`nodes`, `namespaces`, `configmaps`).
        directory: &'static str,
        /// What its writes prepare, validate and do on delete: its file's under
        /// `resources/` ([`strategy::DEFAULT`] for one stored as sent).
        strategy: &'static Strategy,
    },
}

impl Storage {
    /// The directory under the key prefix, if anything is read from etcd.
    pub(crate) fn directory(self) -> Option<&'static str> {
        match self {
            Storage::Objects { directory } | Storage::Documents { directory, .. } => {
                Some(directory)
            }
        }
    }
}

/// How a resource's stored value becomes the served object (the decoding half of
/// kube-apiserver's per-resource storage codec).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Decode {
    /// Stored in kcm's 2014 (v1beta3) shape and converted to the served version by
    /// `convert::to_served`.
    Converted(Kind),
    /// Stored in the served version: the row's `kind` and `apiVersion` are set on the way
    /// out, nothing else changes. The Nodes kcm's kubelets write (the node lifecycle
    /// controller marks one Unknown once its registration in `minions` lapses), the
    /// Namespaces the API creates (reads add those that only hold objects), the Events
    /// `record` writes (each on an hour's lease, so they also leave by its expiry: a
    /// DELETED event), and the documents (ConfigMaps, Secrets, ServiceAccounts, Leases).
    Served,
}

/// A subresource of a [`Resource`] (`pods/status`, `deployments/scale`).
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Subresource {
    /// The path segment after the object's name (`status`, `scale`).
    pub name: &'static str,
    /// The group of the kind it answers with (`autoscaling` for `scale`).
    pub group: &'static str,
    /// The version of the kind it answers with.
    pub version: &'static str,
    /// The kind it answers with (the resource's own kind for `status`, `Scale`).
    pub kind: &'static str,
    /// The verbs it serves: [`SUBRESOURCE_VERBS`].
    pub verbs: &'static [&'static str],
}

/// One served resource: everything discovery says about it and where kcm keeps it.
#[derive(Debug)]
pub(crate) struct Resource {
    /// The API group: [`CORE_GROUP`] ("") or `apps`.
    pub group: &'static str,
    /// The API version within the group (`v1`).
    pub version: &'static str,
    /// The plural name used in URLs (`replicationcontrollers`).
    pub plural: &'static str,
    /// The singular name (`replicationcontroller`).
    pub singular: &'static str,
    /// The kind of its objects (`ReplicationController`).
    pub kind: &'static str,
    /// The kind of its lists (`ReplicationControllerList`).
    pub list_kind: &'static str,
    /// Whether its objects live in a namespace.
    pub namespaced: bool,
    /// kubectl's abbreviations (`rc`).
    pub short_names: &'static [&'static str],
    /// The categories it belongs to (`all`).
    pub categories: &'static [&'static str],
    /// Its subresources, alphabetically.
    pub subresources: &'static [Subresource],
    /// The verbs it serves: one of the `*_VERBS` constants.
    pub verbs: &'static [&'static str],
    /// Where kcm keeps (or from what it synthesizes) its objects.
    pub storage: Storage,
    /// How a stored value under [`Resource::storage`] becomes the served object (the
    /// watch caches decode with it).
    pub decode: Decode,
    /// How its objects print as a Table: printers.go's columns and cells.
    pub printer: &'static Printer,
    /// What its field selectors may name and how each field reads (`GetAttrs`).
    pub fields: &'static SelectableFields,
    /// How a protobuf body of its kind becomes JSON; `None` for a kind clients never send
    /// (Events, which kcm's components write; Nodes, which its kubelets write).
    pub protobuf: Option<FromProtobuf>,
}

/// Rows are statics; one is equal only to itself.
impl PartialEq for Resource {
    fn eq(&self, other: &Resource) -> bool {
        std::ptr::eq(self, other)
    }
}

impl Eq for Resource {}

impl Resource {
    /// The `apiVersion` of its objects: `v1` for the core group, else `group/version`.
    pub(crate) fn api_version(&self) -> String {
        group_version(self.group, self.version)
    }

    /// Whether it is served under `/api` (the core group) rather than `/apis/{group}`.
    #[cfg(test)]
    pub(crate) fn is_core(&self) -> bool {
        self.group == CORE_GROUP
    }

    /// `Namespaced` or `Cluster`, as aggregated discovery spells the scope.
    pub(crate) fn scope(&self) -> &'static str {
        if self.namespaced {
            "Namespaced"
        } else {
            "Cluster"
        }
    }

    /// Its subresource called `name`, if it has one.
    pub(crate) fn subresource(&self, name: &str) -> Option<&'static Subresource> {
        self.subresources.iter().find(|sub| sub.name == name)
    }

    /// Whether `name` is its plural, singular or one of its short names (ASCII
    /// case-insensitively, as kubectl lowercases what it is given).
    #[cfg(test)]
    pub(crate) fn is_called(&self, name: &str) -> bool {
        self.plural.eq_ignore_ascii_case(name)
            || self.singular.eq_ignore_ascii_case(name)
            || self
                .short_names
                .iter()
                .any(|short| short.eq_ignore_ascii_case(name))
    }
}

/// `v1` for the core group, else `group/version` (the form of `apiVersion` and of
/// discovery's `groupVersion`).
pub(crate) fn group_version(group: &str, version: &str) -> String {
    if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    }
}

const fn status_of(group: &'static str, kind: &'static str) -> Subresource {
    Subresource {
        name: "status",
        group,
        version: "v1",
        kind,
        verbs: SUBRESOURCE_VERBS,
    }
}

/// `namespaces/finalize`: the namespace controller's removal of `spec.finalizers`.
const FINALIZE: Subresource = Subresource {
    name: "finalize",
    group: CORE_GROUP,
    version: "v1",
    kind: "Namespace",
    verbs: &["update"],
};

/// `pods/binding`: a scheduler's `Binding` (create only).
const BINDING: Subresource = Subresource {
    name: "binding",
    group: CORE_GROUP,
    version: "v1",
    kind: "Binding",
    verbs: &["create"],
};

const SCALE: Subresource = Subresource {
    name: "scale",
    group: "autoscaling",
    version: "v1",
    kind: "Scale",
    verbs: SUBRESOURCE_VERBS,
};

const ALL: &[&str] = &["all"];
const NONE: &[&str] = &[];

/// Every served resource: core/v1 first, then apps/v1 and coordination.k8s.io/v1, each
/// alphabetically by plural.
pub(crate) static RESOURCES: &[Resource] = &[
    Resource {
        group: CORE_GROUP,
        version: "v1",
        plural: "configmaps",
        singular: "configmap",
        kind: "ConfigMap",
        list_kind: "ConfigMapList",
        namespaced: true,
        short_names: &["cm"],
        categories: NONE,
        subresources: &[],
        verbs: DOCUMENT_VERBS,
        storage: Storage::Documents {
            directory: "configmaps",
            strategy: &configmap::STRATEGY,
        },
        decode: Decode::Served,
        printer: &configmap::PRINTER,
        fields: &fields::METADATA,
        protobuf: Some(json_of::<core::v1::ConfigMap>),
    },
    Resource {
        group: CORE_GROUP,
        version: "v1",
        plural: "endpoints",
        singular: "endpoints",
        kind: "Endpoints",
        list_kind: "EndpointsList",
        namespaced: true,
        short_names: &["ep"],
        categories: NONE,
        subresources: &[],
        verbs: SERVED_VERBS,
        storage: Storage::Objects {
            directory: "services/endpoints",
        },
        decode: Decode::Converted(Kind::Endpoints),
        printer: &table::ENDPOINTS,
        fields: &fields::METADATA,
        protobuf: Some(json_of::<core::v1::Endpoints>),
    },
    Resource {
        group: CORE_GROUP,
        version: "v1",
        plural: "events",
        singular: "event",
        kind: "Event",
        list_kind: "EventList",
        namespaced: true,
        short_names: &["ev"],
        categories: NONE,
        subresources: &[],
        // Written by kcm's controllers through etcd, and through the API by a controller
        // manager run as an API client (`--kubeconfig`). Events written through the API
        // have no lease: kcm's apiserver keeps them until deleted (kube-apiserver gives
        // them its --event-ttl).
        verbs: DOCUMENT_VERBS,
        storage: Storage::Documents {
            directory: crate::record::EVENTS_DIR,
            strategy: &strategy::DEFAULT,
        },
        decode: Decode::Served,
        printer: &table::EVENTS,
        fields: &fields::EVENTS,
        protobuf: None,
    },
    Resource {
        group: CORE_GROUP,
        version: "v1",
        plural: "namespaces",
        singular: "namespace",
        kind: "Namespace",
        list_kind: "NamespaceList",
        namespaced: false,
        short_names: &["ns"],
        categories: NONE,
        subresources: &[FINALIZE],
        verbs: NAMESPACE_VERBS,
        storage: Storage::Documents {
            directory: crate::api::NAMESPACES_DIR,
            strategy: &namespace::STRATEGY,
        },
        decode: Decode::Served,
        printer: &table::NAMESPACES,
        fields: &fields::NAMESPACES,
        protobuf: Some(json_of::<core::v1::Namespace>),
    },
    Resource {
        group: CORE_GROUP,
        version: "v1",
        plural: "nodes",
        singular: "node",
        kind: "Node",
        list_kind: "NodeList",
        namespaced: false,
        short_names: &["no"],
        categories: NONE,
        subresources: &[status_of(CORE_GROUP, "Node")],
        verbs: NODE_VERBS,
        storage: Storage::Documents {
            directory: "nodes",
            strategy: &strategy::DEFAULT,
        },
        decode: Decode::Served,
        printer: &table::NODES,
        fields: &fields::NODES,
        protobuf: None,
    },
    Resource {
        group: CORE_GROUP,
        version: "v1",
        plural: "pods",
        singular: "pod",
        kind: "Pod",
        list_kind: "PodList",
        namespaced: true,
        short_names: &["po"],
        categories: ALL,
        subresources: &[BINDING, status_of(CORE_GROUP, "Pod")],
        verbs: SERVED_VERBS,
        storage: Storage::Objects { directory: "pods" },
        decode: Decode::Converted(Kind::Pod),
        printer: &table::PODS,
        fields: &fields::PODS,
        protobuf: Some(json_of::<core::v1::Pod>),
    },
    Resource {
        group: CORE_GROUP,
        version: "v1",
        plural: "replicationcontrollers",
        singular: "replicationcontroller",
        kind: "ReplicationController",
        list_kind: "ReplicationControllerList",
        namespaced: true,
        short_names: &["rc"],
        categories: ALL,
        subresources: &[SCALE, status_of(CORE_GROUP, "ReplicationController")],
        verbs: SERVED_VERBS,
        storage: Storage::Objects {
            directory: "controllers",
        },
        decode: Decode::Converted(Kind::ReplicationController),
        printer: &table::REPLICATION_CONTROLLERS,
        fields: &fields::REPLICATION_CONTROLLERS,
        protobuf: Some(json_of::<core::v1::ReplicationController>),
    },
    Resource {
        group: CORE_GROUP,
        version: "v1",
        plural: "secrets",
        singular: "secret",
        kind: "Secret",
        list_kind: "SecretList",
        namespaced: true,
        short_names: &[],
        categories: NONE,
        subresources: &[],
        verbs: DOCUMENT_VERBS,
        storage: Storage::Documents {
            directory: "secrets",
            strategy: &secret::STRATEGY,
        },
        decode: Decode::Served,
        printer: &secret::PRINTER,
        fields: &secret::FIELDS,
        protobuf: Some(json_of::<core::v1::Secret>),
    },
    Resource {
        group: CORE_GROUP,
        version: "v1",
        plural: "serviceaccounts",
        singular: "serviceaccount",
        kind: "ServiceAccount",
        list_kind: "ServiceAccountList",
        namespaced: true,
        short_names: &["sa"],
        categories: NONE,
        subresources: &[],
        verbs: DOCUMENT_VERBS,
        storage: Storage::Documents {
            directory: "serviceaccounts",
            strategy: &strategy::DEFAULT,
        },
        decode: Decode::Served,
        printer: &serviceaccount::PRINTER,
        fields: &fields::METADATA,
        protobuf: Some(json_of::<core::v1::ServiceAccount>),
    },
    Resource {
        group: CORE_GROUP,
        version: "v1",
        plural: "services",
        singular: "service",
        kind: "Service",
        list_kind: "ServiceList",
        namespaced: true,
        short_names: &["svc"],
        categories: ALL,
        subresources: &[status_of(CORE_GROUP, "Service")],
        verbs: SERVED_VERBS,
        storage: Storage::Objects {
            directory: "services/specs",
        },
        decode: Decode::Converted(Kind::Service),
        printer: &table::SERVICES,
        fields: &fields::SERVICES,
        protobuf: Some(json_of::<core::v1::Service>),
    },
    Resource {
        group: "apps",
        version: "v1",
        plural: "deployments",
        singular: "deployment",
        kind: "Deployment",
        list_kind: "DeploymentList",
        namespaced: true,
        short_names: &["deploy"],
        categories: ALL,
        subresources: &[SCALE, status_of("apps", "Deployment")],
        verbs: SERVED_VERBS,
        storage: Storage::Objects {
            directory: "deployments",
        },
        decode: Decode::Converted(Kind::Deployment),
        printer: &table::DEPLOYMENTS,
        fields: &fields::METADATA,
        protobuf: Some(json_of::<apps::v1::Deployment>),
    },
    Resource {
        group: "apps",
        version: "v1",
        plural: "replicasets",
        singular: "replicaset",
        kind: "ReplicaSet",
        list_kind: "ReplicaSetList",
        namespaced: true,
        short_names: &["rs"],
        categories: ALL,
        subresources: &[SCALE, status_of("apps", "ReplicaSet")],
        verbs: SERVED_VERBS,
        storage: Storage::Objects {
            directory: "replicasets",
        },
        decode: Decode::Converted(Kind::ReplicaSet),
        printer: &table::REPLICA_SETS,
        fields: &fields::METADATA,
        protobuf: Some(json_of::<apps::v1::ReplicaSet>),
    },
    Resource {
        group: "coordination.k8s.io",
        version: "v1",
        plural: "leases",
        singular: "lease",
        kind: "Lease",
        list_kind: "LeaseList",
        namespaced: true,
        short_names: &[],
        categories: NONE,
        subresources: &[],
        verbs: DOCUMENT_VERBS,
        storage: Storage::Documents {
            directory: "leases",
            strategy: &lease::STRATEGY,
        },
        decode: Decode::Served,
        printer: &lease::PRINTER,
        fields: &fields::METADATA,
        protobuf: Some(json_of::<coordination::v1::Lease>),
    },
];

/// The served resource `plural` of `group`/`version` (`("apps", "v1", "deployments")`).
pub(crate) fn find(group: &str, version: &str, plural: &str) -> Option<&'static Resource> {
    RESOURCES
        .iter()
        .find(|r| r.group == group && r.version == version && r.plural == plural)
}

/// The served resource whose plural, singular or short name is `name` (`po`, `pod`,
/// `pods`), in any group. Names are unique across the table, so there is at most one.
#[cfg(test)]
pub(crate) fn find_by_name(name: &str) -> Option<&'static Resource> {
    RESOURCES.iter().find(|r| r.is_called(name))
}

/// The served resource of `kind` in `group` (`("", "Pod")`).
#[cfg(test)]
pub(crate) fn find_by_kind(group: &str, kind: &str) -> Option<&'static Resource> {
    RESOURCES
        .iter()
        .find(|r| r.group == group && r.kind == kind)
}

/// How a protobuf body of `kind` in `api_version` decodes, if that is a served kind
/// clients send.
pub(crate) fn protobuf_of(api_version: &str, kind: &str) -> Option<FromProtobuf> {
    RESOURCES
        .iter()
        .find(|r| r.kind == kind && r.api_version() == api_version)
        .and_then(|r| r.protobuf)
}

/// The resources served in `group`/`version`, in table order; empty for an unserved one.
pub(crate) fn resources_in<'a>(
    group: &'a str,
    version: &'a str,
) -> impl Iterator<Item = &'static Resource> + 'a {
    RESOURCES
        .iter()
        .filter(move |r| r.group == group && r.version == version)
}

/// The groups served, core ("") first, each once, in table order.
pub(crate) fn groups() -> Vec<&'static str> {
    let mut groups: Vec<&'static str> = Vec::new();
    for resource in RESOURCES {
        if !groups.contains(&resource.group) {
            groups.push(resource.group);
        }
    }
    groups
}

/// The versions served in `group`, preferred first, each once; empty for an unserved
/// group.
pub(crate) fn versions_of(group: &str) -> Vec<&'static str> {
    let mut versions: Vec<&'static str> = Vec::new();
    for resource in RESOURCES.iter().filter(|r| r.group == group) {
        if !versions.contains(&resource.version) {
            versions.push(resource.version);
        }
    }
    versions
}

/// Whether anything is served in `group`/`version`.
pub(crate) fn serves_group_version(group: &str, version: &str) -> bool {
    resources_in(group, version).next().is_some()
}

/// A deterministic UUID for a synthesized object (a node, a namespace).
pub(crate) fn stable_uid(seed: &str) -> String {
    use std::hash::{Hash as _, Hasher as _};
    let mut high = std::collections::hash_map::DefaultHasher::new();
    (0u8, seed).hash(&mut high);
    let mut low = std::collections::hash_map::DefaultHasher::new();
    (1u8, seed).hash(&mut low);
    let bits = (u128::from(high.finish()) << 64) | u128::from(low.finish());
    // A version-4-shaped UUID: kubectl and clients only compare uids.
    let bits = (bits & !(0xf << 76) | (0x4 << 76)) & !(0x3 << 62) | (0x2 << 62);
    uuid::Uuid::from_u128(bits).to_string()
}

#[cfg(test)]
mod tests;
