//! Converts kcm's stored documents to the objects the API server serves, and back.
//!
//! Mirrors, in spirit: `pkg/api/v1/conversion.go` and `pkg/api/v1beta3/conversion.go` of
//! 2014 Kubernetes (the v1beta3 <-> internal conversions: `host` <-> `nodeName`, the
//! singular service port <-> `ports`, flat endpoints <-> `subsets`), and
//! `pkg/apis/core/v1/defaults.go` for the defaults kubectl's output depends on
//! (`protocol: TCP`, `targetPort = port`, `type: ClusterIP`).
//!
//! kcm stores Pod, ReplicationController, Service and Endpoints in the 2014 v1beta3 shape
//! (`apiVersion: v1beta3`) and ReplicaSet and Deployment in apps/v1. [`to_served`] turns
//! a stored document into the core/v1 or apps/v1 object a client sees; [`to_stored`]
//! turns an object a client wrote into the stored shape.
//!
//! Invariants:
//! - Pure functions over `serde_json::Value`; they never panic. A field of an unexpected
//!   type is left exactly as it is, and a document that is not a JSON object is returned
//!   unchanged.
//! - Everything not named below (metadata, status, unknown fields at any depth) passes
//!   through unchanged in both directions.
//! - `to_served(to_stored(v1)) == v1` for every served-shape object that already carries
//!   the defaults `to_served` applies (as every object this server returns does).
//! - `to_stored(to_served(stored)) == stored` for documents as kcm writes them, except
//!   that a container port or a service without `protocol` gains `protocol: "TCP"` (a
//!   default, meaning the same thing to kcm).
//!
//! Round-trip rules that need more than a rename:
//! - Pod `status.host` (the node the kubelet wrote; not a v1 field). `to_served` drops it
//!   when it equals `spec.host`; when the stored status has no `host` but `spec.host` is
//!   set, it serves `status.host: ""` as a marker. `to_stored` removes an empty
//!   `status.host`, and fills a missing one from `spec.nodeName` when `status` exists.
//!   A `status.host` naming another node passes through both ways.
//! - Service `spec.containerPort` absent (kcm then uses the first container's first port,
//!   unlike Kubernetes' `targetPort = port`): `to_served` serves `targetPort = port` and
//!   adds the annotation [`SERVICE_CONTAINER_PORT_UNSET_ANNOTATION`]; `to_stored` removes
//!   the annotation and, while `ports[0].targetPort` still equals `ports[0].port`, writes
//!   no `containerPort`. An annotation survives typed clients that drop unknown fields.
//! - Service `ports`: `to_stored` writes `ports[0]` into `port`/`protocol`/`containerPort`
//!   and keeps the whole `ports` array unless it is a single entry holding nothing but
//!   `port`, `protocol` and `targetPort`. `to_served` starts from a stored `ports` array
//!   when present and overwrites `ports[0]` from the singular fields (kcm's own tools edit
//!   those). `spec.type: ClusterIP` is the default and is not stored.
//! - Service `portalIP` (the 2014 name) passes through and fills `clusterIP` when that is
//!   absent; `to_stored` drops a `clusterIP` equal to `portalIP`.
//! - Endpoints: `to_stored` writes `endpoints` as the sorted, de-duplicated `ip:port`
//!   strings of every ready address x port (as kcm's endpoints controller writes them) and
//!   keeps a non-empty `subsets` unless regenerating it from `endpoints` gives it back exactly.
//!   `to_served` serves a stored `subsets` when its flattening is the same set as
//!   `endpoints`, else regenerates them from `endpoints` (one subset per port, in order of
//!   first appearance, addresses in stored order, `protocol: TCP`).

use serde_json::{Map, Value};

/// The `apiVersion` kcm stores core kinds (Pod, ReplicationController, Service,
/// Endpoints) with.
pub const STORED_CORE_API_VERSION: &str = "v1beta3";
/// The `apiVersion` core kinds are served with.
pub const SERVED_CORE_API_VERSION: &str = "v1";
/// The `apiVersion` of ReplicaSet and Deployment, stored and served.
pub const APPS_API_VERSION: &str = "apps/v1";
/// Annotation marking a served Service whose stored document has no `containerPort`
/// (kcm resolves it to the first container's first port); see the module docs.
pub const SERVICE_CONTAINER_PORT_UNSET_ANNOTATION: &str = "kcm.io/container-port-unset";
/// The protocol Kubernetes defaults container and service ports to.
pub const DEFAULT_PORT_PROTOCOL: &str = "TCP";
/// The service type Kubernetes defaults to.
pub const DEFAULT_SERVICE_TYPE: &str = "ClusterIP";

/// The kinds kcm stores and serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// core Pod, stored as v1beta3 (`spec.host`, `status.host`).
    Pod,
    /// core ReplicationController, stored as v1beta3; its template is a pod spec.
    ReplicationController,
    /// core Service, stored as v1beta3 (`spec.port`, `spec.protocol`, `spec.containerPort`).
    Service,
    /// core Endpoints, stored as v1beta3 (`endpoints: ["ip:port", ...]`).
    Endpoints,
    /// apps/v1 ReplicaSet, stored as served except for its template's pod spec.
    ReplicaSet,
    /// apps/v1 Deployment, stored as served except for its template's pod spec.
    Deployment,
}

impl Kind {
    /// Every kind, core kinds first.
    pub const ALL: [Kind; 6] = [
        Kind::Pod,
        Kind::ReplicationController,
        Kind::Service,
        Kind::Endpoints,
        Kind::ReplicaSet,
        Kind::Deployment,
    ];

    /// The `kind` field: `"Pod"`, `"ReplicationController"`, ...
    pub fn kind_name(self) -> &'static str {
        match self {
            Kind::Pod => "Pod",
            Kind::ReplicationController => "ReplicationController",
            Kind::Service => "Service",
            Kind::Endpoints => "Endpoints",
            Kind::ReplicaSet => "ReplicaSet",
            Kind::Deployment => "Deployment",
        }
    }

    /// The kind whose `kind` field is `kind_name`, if kcm stores it.
    pub fn from_kind_name(kind_name: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.kind_name() == kind_name)
    }

    /// The resource (plural) name in URLs: `"pods"`, `"replicationcontrollers"`, ...
    /// (the server reads it from the resource's row, `resources::RESOURCES`, whose
    /// `decode` names the kind; `apiclient` names its requests' paths with it).
    pub fn resource(self) -> &'static str {
        match self {
            Kind::Pod => "pods",
            Kind::ReplicationController => "replicationcontrollers",
            Kind::Service => "services",
            Kind::Endpoints => "endpoints",
            Kind::ReplicaSet => "replicasets",
            Kind::Deployment => "deployments",
        }
    }

    /// The kind served under the resource (plural) name `resource`, if kcm stores it.
    pub fn from_resource(resource: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.resource() == resource)
    }

    /// The `apiVersion` objects of this kind are served with.
    pub fn served_api_version(self) -> &'static str {
        match self {
            Kind::ReplicaSet | Kind::Deployment => APPS_API_VERSION,
            _ => SERVED_CORE_API_VERSION,
        }
    }

    /// The `apiVersion` documents of this kind are stored with.
    pub fn stored_api_version(self) -> &'static str {
        match self {
            Kind::ReplicaSet | Kind::Deployment => APPS_API_VERSION,
            _ => STORED_CORE_API_VERSION,
        }
    }
}

/// A stored document (as read from etcd) -> the object served to clients: core/v1 for
/// Pod, ReplicationController, Service and Endpoints, apps/v1 for ReplicaSet and
/// Deployment, with `kind` and `apiVersion` set and Kubernetes' port defaults applied.
/// See the module docs for the rules. A non-object is returned unchanged.
pub fn to_served(kind: Kind, stored: Value) -> Value {
    let Value::Object(mut object) = stored else {
        return stored;
    };
    set_type_meta(&mut object, kind.kind_name(), kind.served_api_version());
    match kind {
        Kind::Pod => pod_to_served(&mut object),
        Kind::ReplicationController | Kind::ReplicaSet | Kind::Deployment => {
            template_to_served(&mut object)
        }
        Kind::Service => service_to_served(&mut object),
        Kind::Endpoints => endpoints_to_served(&mut object),
    }
    Value::Object(object)
}

/// An object in the served shape (as a client writes it) -> the document kcm stores:
/// `apiVersion: v1beta3` for core kinds, `apps/v1` for ReplicaSet and Deployment, with
/// `kind` set. See the module docs for the rules. A non-object is returned unchanged.
pub fn to_stored(kind: Kind, served: Value) -> Value {
    let Value::Object(mut object) = served else {
        return served;
    };
    set_type_meta(&mut object, kind.kind_name(), kind.stored_api_version());
    match kind {
        Kind::Pod => pod_to_stored(&mut object),
        Kind::ReplicationController | Kind::ReplicaSet | Kind::Deployment => {
            template_to_stored(&mut object)
        }
        Kind::Service => service_to_stored(&mut object),
        Kind::Endpoints => endpoints_to_stored(&mut object),
    }
    Value::Object(object)
}

// ---------------------------------------------------------------------------------------
// Shared helpers

/// Sets `kind` and `apiVersion`, in place when present, else first in the object.
fn set_type_meta(object: &mut Map<String, Value>, kind_name: &str, api_version: &str) {
    if object.contains_key("kind") && object.contains_key("apiVersion") {
        object.insert("kind".into(), Value::from(kind_name));
        object.insert("apiVersion".into(), Value::from(api_version));
        return;
    }
    let rest = std::mem::take(object);
    object.insert("kind".into(), Value::from(kind_name));
    object.insert("apiVersion".into(), Value::from(api_version));
    for (key, value) in rest {
        if key != "kind" && key != "apiVersion" {
            object.insert(key, value);
        }
    }
}

/// Renames `from` to `to`, keeping its position, when `from` holds a string and `to` is
/// absent. Anything else is left alone.
fn rename_string_field(object: &mut Map<String, Value>, from: &str, to: &str) {
    if !matches!(object.get(from), Some(Value::String(_))) || object.contains_key(to) {
        return;
    }
    let rest = std::mem::take(object);
    for (key, value) in rest {
        if key == from {
            object.insert(to.to_string(), value);
        } else {
            object.insert(key, value);
        }
    }
}

/// `object[key]` as a mutable object, if it is one.
fn object_field_mut<'a>(
    object: &'a mut Map<String, Value>,
    key: &str,
) -> Option<&'a mut Map<String, Value>> {
    object.get_mut(key).and_then(Value::as_object_mut)
}

/// A non-empty string at `object[key]`.
fn non_empty_string_field<'a>(object: &'a Map<String, Value>, key: &str) -> Option<&'a str> {
    object
        .get(key)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
}

// ---------------------------------------------------------------------------------------
// Pods and pod templates

/// 2014's record of which replication controller made a pod.
pub const CREATED_BY_ANNOTATION: &str = "kubernetes.io/created-by";

/// The controller reference a pod of a 2014 replication controller stands for: the
/// `kubernetes.io/created-by` annotation kcm's replication manager writes (a flat
/// reference, or Kubernetes' `SerializedReference` around one), when it names a
/// ReplicationController with a uid. Served as an `ownerReferences` entry so that
/// kubectl (`describe rc`'s pod counts, `describe pod`'s Controlled By) sees the ownership
/// kcm's RC keeps by selector; never stored (kcm's RC ignores pods with a controller
/// reference, so storing it would orphan the pod).
fn created_by_reference(pod: &Map<String, Value>) -> Option<Value> {
    let annotation = pod
        .get("metadata")?
        .get("annotations")?
        .get(CREATED_BY_ANNOTATION)?
        .as_str()?;
    let parsed: Value = serde_json::from_str(annotation).ok()?;
    let reference = parsed.get("reference").unwrap_or(&parsed);
    let field = |name: &str| {
        reference
            .get(name)
            .and_then(Value::as_str)
            .filter(|v| !v.is_empty())
    };
    if field("kind")? != "ReplicationController" {
        return None;
    }
    Some(serde_json::json!({
        "apiVersion": "v1",
        "kind": "ReplicationController",
        "name": field("name")?,
        "uid": field("uid")?,
        "controller": true,
    }))
}

/// Adds the controller reference of `created_by_reference` to a served pod that has no
/// controller reference of its own.
fn serve_created_by_reference(pod: &mut Map<String, Value>) {
    let Some(reference) = created_by_reference(pod) else {
        return;
    };
    let Some(metadata) = object_field_mut(pod, "metadata") else {
        return;
    };
    let references = metadata
        .entry("ownerReferences")
        .or_insert_with(|| Value::Array(Vec::new()));
    let Some(references) = references.as_array_mut() else {
        return;
    };
    if references
        .iter()
        .any(|r| r.get("controller").and_then(Value::as_bool) == Some(true))
    {
        return;
    }
    references.push(reference);
}

/// Removes what `serve_created_by_reference` added (an empty list it created included).
fn store_without_created_by_reference(pod: &mut Map<String, Value>) {
    let Some(reference) = created_by_reference(pod) else {
        return;
    };
    let Some(metadata) = object_field_mut(pod, "metadata") else {
        return;
    };
    let Some(Value::Array(references)) = metadata.get_mut("ownerReferences") else {
        return;
    };
    references.retain(|r| *r != reference);
    if references.is_empty() {
        metadata.shift_remove("ownerReferences");
    }
}

fn pod_to_served(pod: &mut Map<String, Value>) {
    serve_created_by_reference(pod);
    let stored_host = object_field_mut(pod, "spec")
        .and_then(|spec| non_empty_string_field(spec, "host"))
        .map(str::to_string);
    if let Some(spec) = object_field_mut(pod, "spec") {
        pod_spec_to_served(spec);
    }
    if let Some(status) = object_field_mut(pod, "status") {
        serve_image_ids(status);
        match (status.get("host"), stored_host.as_deref()) {
            (Some(Value::String(host)), Some(node)) if host == node => {
                status.shift_remove("host");
            }
            (None, Some(_)) => {
                status.insert("host".into(), Value::from(""));
            }
            _ => {}
        }
    }
}

/// A container status always has `imageID` (Go's `ContainerStatus` writes it even empty,
/// and 1.32's schema requires it): a pod its kubelet wrote before kcm wrote the field is
/// served with `""`, as kube-apiserver serves a container whose image is not pulled yet.
fn serve_image_ids(status: &mut Map<String, Value>) {
    for field in ["containerStatuses", "initContainerStatuses"] {
        let Some(Value::Array(statuses)) = status.get_mut(field) else {
            continue;
        };
        for container in statuses.iter_mut().filter_map(Value::as_object_mut) {
            container
                .entry("imageID")
                .or_insert_with(|| Value::String(String::new()));
        }
    }
}

/// An empty `imageID` is not stored (the served form adds it back, [`serve_image_ids`]),
/// so a pod read and written back through the API is stored as it was.
fn store_without_empty_image_ids(status: &mut Map<String, Value>) {
    for field in ["containerStatuses", "initContainerStatuses"] {
        let Some(Value::Array(statuses)) = status.get_mut(field) else {
            continue;
        };
        for container in statuses.iter_mut().filter_map(Value::as_object_mut) {
            if container.get("imageID").and_then(Value::as_str) == Some("") {
                container.shift_remove("imageID");
            }
        }
    }
}

fn pod_to_stored(pod: &mut Map<String, Value>) {
    store_without_created_by_reference(pod);
    let node_name = object_field_mut(pod, "spec")
        .and_then(|spec| non_empty_string_field(spec, "nodeName"))
        .map(str::to_string);
    if let Some(spec) = object_field_mut(pod, "spec") {
        pod_spec_to_stored(spec);
    }
    if let Some(status) = object_field_mut(pod, "status") {
        store_without_empty_image_ids(status);
        match (status.get("host"), node_name) {
            (Some(Value::String(host)), _) if host.is_empty() => {
                status.shift_remove("host");
            }
            (None, Some(node)) => {
                status.insert("host".into(), Value::from(node));
            }
            _ => {}
        }
    }
}

/// `host` -> `nodeName`; container ports default to `protocol: TCP`.
fn pod_spec_to_served(spec: &mut Map<String, Value>) {
    rename_string_field(spec, "host", "nodeName");
    for containers in ["containers", "initContainers"] {
        default_container_port_protocols(spec, containers);
    }
}

/// `nodeName` -> `host`.
fn pod_spec_to_stored(spec: &mut Map<String, Value>) {
    rename_string_field(spec, "nodeName", "host");
}

fn default_container_port_protocols(spec: &mut Map<String, Value>, containers_key: &str) {
    let Some(Value::Array(containers)) = spec.get_mut(containers_key) else {
        return;
    };
    for container in containers.iter_mut().filter_map(Value::as_object_mut) {
        let Some(Value::Array(ports)) = container.get_mut("ports") else {
            continue;
        };
        for port in ports.iter_mut().filter_map(Value::as_object_mut) {
            if matches!(port.get("protocol"), None | Some(Value::Null)) {
                port.insert("protocol".into(), Value::from(DEFAULT_PORT_PROTOCOL));
            }
        }
    }
}

/// The pod spec of `spec.template.spec` (ReplicationController, ReplicaSet, Deployment).
fn template_pod_spec_mut(object: &mut Map<String, Value>) -> Option<&mut Map<String, Value>> {
    let spec = object_field_mut(object, "spec")?;
    let template = object_field_mut(spec, "template")?;
    object_field_mut(template, "spec")
}

fn template_to_served(object: &mut Map<String, Value>) {
    if let Some(pod_spec) = template_pod_spec_mut(object) {
        pod_spec_to_served(pod_spec);
    }
}

fn template_to_stored(object: &mut Map<String, Value>) {
    if let Some(pod_spec) = template_pod_spec_mut(object) {
        pod_spec_to_stored(pod_spec);
    }
}

// ---------------------------------------------------------------------------------------
// Services

/// `spec.ports` when it is a non-empty array whose first entry is an object.
fn usable_service_ports(spec: &Map<String, Value>) -> Option<&Vec<Value>> {
    match spec.get("ports") {
        Some(Value::Array(ports)) if matches!(ports.first(), Some(Value::Object(_))) => Some(ports),
        _ => None,
    }
}

fn service_to_served(service: &mut Map<String, Value>) {
    let mut container_port_unset = false;
    if let Some(spec) = object_field_mut(service, "spec") {
        container_port_unset = service_spec_to_served(spec);
    }
    if container_port_unset {
        let metadata = service
            .entry("metadata")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(metadata) = metadata {
            let annotations = metadata
                .entry("annotations")
                .or_insert_with(|| Value::Object(Map::new()));
            if let Value::Object(annotations) = annotations {
                annotations.insert(
                    SERVICE_CONTAINER_PORT_UNSET_ANNOTATION.into(),
                    Value::from("true"),
                );
            }
        }
    }
}

/// Converts the spec; returns whether the stored spec had a port but no `containerPort`.
fn service_spec_to_served(spec: &mut Map<String, Value>) -> bool {
    let ports_key_present = spec.contains_key("ports");
    let ports_usable = usable_service_ports(spec).is_some();
    let mut container_port_unset = false;
    // A `ports` field kcm cannot read (not a list of objects) leaves the singular fields
    // as they are.
    if spec.contains_key("port") && (ports_usable || !ports_key_present) {
        let port = spec.shift_remove("port").unwrap_or(Value::Null);
        let protocol = spec
            .shift_remove("protocol")
            .unwrap_or_else(|| Value::from(DEFAULT_PORT_PROTOCOL));
        let target_port = match spec.shift_remove("containerPort") {
            Some(container_port) => container_port,
            None => {
                container_port_unset = true;
                port.clone()
            }
        };
        let mut ports = match spec.shift_remove("ports") {
            Some(Value::Array(ports)) => ports,
            _ => vec![Value::Object(Map::new())],
        };
        if let Some(first) = ports.first_mut().and_then(Value::as_object_mut) {
            first.insert("port".into(), port);
            first.insert("protocol".into(), protocol);
            first.insert("targetPort".into(), target_port);
        }
        spec.insert("ports".into(), Value::Array(ports));
    }
    if let Some(Value::Array(ports)) = spec.get_mut("ports") {
        for port in ports.iter_mut().filter_map(Value::as_object_mut) {
            if matches!(port.get("protocol"), None | Some(Value::Null)) {
                port.insert("protocol".into(), Value::from(DEFAULT_PORT_PROTOCOL));
            }
            if !port.contains_key("targetPort") {
                if let Some(number) = port.get("port").cloned() {
                    port.insert("targetPort".into(), number);
                }
            }
        }
    }
    if !spec.contains_key("type") {
        spec.insert("type".into(), Value::from(DEFAULT_SERVICE_TYPE));
    }
    if !spec.contains_key("clusterIP") {
        if let Some(portal_ip) = spec.get("portalIP").cloned() {
            spec.insert("clusterIP".into(), portal_ip);
        }
    }
    container_port_unset
}

fn service_to_stored(service: &mut Map<String, Value>) {
    let container_port_unset = remove_container_port_unset_annotation(service);
    if let Some(spec) = object_field_mut(service, "spec") {
        service_spec_to_stored(spec, container_port_unset);
    }
}

/// Removes [`SERVICE_CONTAINER_PORT_UNSET_ANNOTATION`] (and `annotations` if that empties
/// it); returns whether it was there.
fn remove_container_port_unset_annotation(service: &mut Map<String, Value>) -> bool {
    let Some(metadata) = object_field_mut(service, "metadata") else {
        return false;
    };
    let Some(annotations) = object_field_mut(metadata, "annotations") else {
        return false;
    };
    let was_there = annotations
        .shift_remove(SERVICE_CONTAINER_PORT_UNSET_ANNOTATION)
        .is_some();
    if was_there && annotations.is_empty() {
        metadata.shift_remove("annotations");
    }
    was_there
}

fn service_spec_to_stored(spec: &mut Map<String, Value>, container_port_unset: bool) {
    if let Some(ports) = usable_service_ports(spec) {
        let first = ports[0].as_object().cloned().unwrap_or_default();
        let only_singular_fields = ports.len() == 1
            && first
                .keys()
                .all(|key| matches!(key.as_str(), "port" | "protocol" | "targetPort"));
        let port = first.get("port").cloned();
        let target_port = first.get("targetPort").cloned().or_else(|| port.clone());
        match &port {
            Some(port) => spec.insert("port".into(), port.clone()),
            None => spec.shift_remove("port"),
        };
        match first.get("protocol") {
            Some(protocol) => spec.insert("protocol".into(), protocol.clone()),
            None => spec.shift_remove("protocol"),
        };
        match target_port {
            Some(target) if !(container_port_unset && Some(&target) == port.as_ref()) => {
                spec.insert("containerPort".into(), target)
            }
            _ => spec.shift_remove("containerPort"),
        };
        if only_singular_fields {
            spec.shift_remove("ports");
        }
    }
    if spec.get("type").and_then(Value::as_str) == Some(DEFAULT_SERVICE_TYPE) {
        spec.shift_remove("type");
    }
    if spec.contains_key("portalIP") && spec.get("portalIP") == spec.get("clusterIP") {
        spec.shift_remove("clusterIP");
    }
}

// ---------------------------------------------------------------------------------------
// Endpoints

/// One stored endpoint: an IP (without brackets) and a port.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct HostPort {
    ip: String,
    port: u16,
}

impl HostPort {
    /// `net.SplitHostPort` for `ip:port` and `[ipv6]:port`.
    fn parse(endpoint: &str) -> Option<HostPort> {
        let (ip, port) = if let Some(rest) = endpoint.strip_prefix('[') {
            let (ip, port) = rest.split_once("]:")?;
            (ip, port)
        } else {
            let (ip, port) = endpoint.rsplit_once(':')?;
            if ip.contains(':') {
                return None;
            }
            (ip, port)
        };
        if ip.is_empty() || port.is_empty() || !port.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        Some(HostPort {
            ip: ip.to_string(),
            port: port.parse().ok()?,
        })
    }

    /// `net.JoinHostPort`: IPv6 addresses are bracketed.
    fn join(&self) -> String {
        if self.ip.contains(':') {
            format!("[{}]:{}", self.ip, self.port)
        } else {
            format!("{}:{}", self.ip, self.port)
        }
    }
}

/// The stored `endpoints` parsed, or `None` if it is not a list of `ip:port` strings.
fn parse_stored_endpoints(endpoints: &Value) -> Option<Vec<HostPort>> {
    endpoints
        .as_array()?
        .iter()
        .map(|entry| HostPort::parse(entry.as_str()?))
        .collect()
}

/// Every ready address x port of `subsets`, in order. Addresses without an `ip` string and
/// ports without a port number are skipped; a subset without ports contributes nothing.
fn flatten_subsets(subsets: &[Value]) -> Vec<HostPort> {
    let mut flattened = Vec::new();
    for subset in subsets {
        let addresses = subset.get("addresses").and_then(Value::as_array);
        let ports = subset.get("ports").and_then(Value::as_array);
        let (Some(addresses), Some(ports)) = (addresses, ports) else {
            continue;
        };
        for address in addresses {
            let Some(ip) = address.get("ip").and_then(Value::as_str) else {
                continue;
            };
            for port in ports {
                let Some(number) = port
                    .get("port")
                    .and_then(Value::as_u64)
                    .and_then(|p| u16::try_from(p).ok())
                else {
                    continue;
                };
                flattened.push(HostPort {
                    ip: ip.to_string(),
                    port: number,
                });
            }
        }
    }
    flattened
}

fn sorted_deduplicated(mut endpoints: Vec<HostPort>) -> Vec<HostPort> {
    endpoints.sort_by_key(HostPort::join);
    endpoints.dedup();
    endpoints
}

/// One subset per distinct port (in order of first appearance), its addresses in order.
fn subsets_from_endpoints(endpoints: &[HostPort]) -> Vec<Value> {
    let mut groups: Vec<(u16, Vec<&str>)> = Vec::new();
    for endpoint in endpoints {
        let index = match groups.iter().position(|(port, _)| *port == endpoint.port) {
            Some(index) => index,
            None => {
                groups.push((endpoint.port, Vec::new()));
                groups.len() - 1
            }
        };
        let addresses = &mut groups[index].1;
        if !addresses.contains(&endpoint.ip.as_str()) {
            addresses.push(&endpoint.ip);
        }
    }
    groups
        .into_iter()
        .map(|(port, addresses)| {
            let addresses: Vec<Value> = addresses
                .into_iter()
                .map(|ip| serde_json::json!({ "ip": ip }))
                .collect();
            serde_json::json!({
                "addresses": addresses,
                "ports": [{ "port": port, "protocol": DEFAULT_PORT_PROTOCOL }],
            })
        })
        .collect()
}

fn endpoints_to_served(endpoints_object: &mut Map<String, Value>) {
    let Some(stored) = endpoints_object.get("endpoints") else {
        return;
    };
    let Some(endpoints) = parse_stored_endpoints(stored) else {
        return;
    };
    let stored_subsets_still_hold = match endpoints_object.get("subsets") {
        Some(Value::Array(subsets)) => {
            sorted_deduplicated(flatten_subsets(subsets)) == sorted_deduplicated(endpoints.clone())
        }
        _ => false,
    };
    endpoints_object.shift_remove("endpoints");
    if stored_subsets_still_hold {
        return;
    }
    let subsets = subsets_from_endpoints(&endpoints);
    if subsets.is_empty() {
        endpoints_object.shift_remove("subsets");
    } else {
        endpoints_object.insert("subsets".into(), Value::Array(subsets));
    }
}

fn endpoints_to_stored(endpoints_object: &mut Map<String, Value>) {
    match endpoints_object.get("subsets") {
        None => {
            if !endpoints_object.contains_key("endpoints") {
                endpoints_object.insert("endpoints".into(), Value::Array(Vec::new()));
            }
        }
        Some(Value::Array(subsets)) => {
            let endpoints = sorted_deduplicated(flatten_subsets(subsets));
            let subsets_are_redundant =
                !subsets.is_empty() && subsets_from_endpoints(&endpoints) == *subsets;
            let strings = endpoints.iter().map(|e| Value::from(e.join())).collect();
            endpoints_object.insert("endpoints".into(), Value::Array(strings));
            if subsets_are_redundant {
                endpoints_object.shift_remove("subsets");
            }
        }
        Some(_) => {}
    }
}

#[cfg(test)]
mod tests;
