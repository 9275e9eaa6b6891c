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
    #[cfg(test)]
    pub fn from_kind_name(kind_name: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.kind_name() == kind_name)
    }

    /// The resource (plural) name in URLs: `"pods"`, `"replicationcontrollers"`, ...
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
mod tests {
    use serde_json::json;

    use super::*;

    // ---- helpers -----------------------------------------------------------------------

    #[track_caller]
    fn check_to_served(kind: Kind, stored: Value, expected: Value) {
        let served = to_served(kind, stored.clone());
        assert_eq!(
            served, expected,
            "to_served({kind:?}, {stored:#})\n got {served:#}\nwant {expected:#}"
        );
    }

    #[track_caller]
    fn check_to_stored(kind: Kind, served: Value, expected: Value) {
        let stored = to_stored(kind, served.clone());
        assert_eq!(
            stored, expected,
            "to_stored({kind:?}, {served:#})\n got {stored:#}\nwant {expected:#}"
        );
    }

    /// stored -> served -> stored gives the stored document back.
    #[track_caller]
    fn check_stored_round_trip(kind: Kind, stored: Value) {
        let served = to_served(kind, stored.clone());
        let back = to_stored(kind, served.clone());
        assert_eq!(
            back, stored,
            "stored round trip of {kind:?}\nstored {stored:#}\nserved {served:#}\n  back {back:#}"
        );
    }

    /// served -> stored -> served gives the served object back.
    #[track_caller]
    fn check_served_round_trip(kind: Kind, served: Value) {
        let stored = to_stored(kind, served.clone());
        let back = to_served(kind, stored.clone());
        assert_eq!(
            back, served,
            "served round trip of {kind:?}\nserved {served:#}\nstored {stored:#}\n  back {back:#}"
        );
    }

    // ---- real documents as kcm writes them ---------------------------------------------

    fn stored_rc() -> Value {
        json!({"kind":"ReplicationController","apiVersion":"v1beta3",
            "metadata":{"name":"web","namespace":"default","uid":"e199","labels":{"name":"web"},
                "creationTimestamp":"2026-11-26T18:01:03Z","generation":1},
            "spec":{"replicas":2,"selector":{"name":"web"},
                "template":{"metadata":{"labels":{"name":"web"}},
                    "spec":{"containers":[{"name":"web","image":"nginx",
                        "ports":[{"name":"http","containerPort":80,"protocol":"TCP"}]}]}}},
            "status":{"replicas":2}})
    }

    fn stored_pod() -> Value {
        json!({"kind":"Pod","apiVersion":"v1beta3",
            "metadata":{"name":"app-6fc9fd9bcf-rfq96","namespace":"default","uid":"7d0e",
                "labels":{"app":"app","pod-template-hash":"6fc9fd9bcf"},
                "creationTimestamp":"2026-11-26T18:01:03Z",
                "ownerReferences":[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"app-6fc9fd9bcf",
                    "uid":"25cb","controller":true,"blockOwnerDeletion":true}]},
            "spec":{"containers":[{"name":"nginx","image":"nginx:1"}],"host":"node-1"},
            "status":{"phase":"Running","host":"node-1","podIP":"10.244.166.4",
                "conditions":[{"type":"Ready","status":"True","lastTransitionTime":"2026-11-26T18:01:03Z"}],
                "containerStatuses":[{"name":"nginx","image":"nginx:1","ready":true,"restartCount":0,
                    "state":{"running":{"startedAt":"2026-11-26T18:01:03Z"}}}]}})
    }

    fn stored_service() -> Value {
        json!({"kind":"Service","apiVersion":"v1beta3",
            "metadata":{"name":"web","namespace":"default","uid":"5a1f",
                "creationTimestamp":"2026-11-26T18:01:03Z"},
            "spec":{"selector":{"name":"web"},"port":80,"protocol":"TCP","containerPort":80}})
    }

    fn stored_endpoints() -> Value {
        json!({"kind":"Endpoints","apiVersion":"v1beta3",
            "metadata":{"name":"web","namespace":"default","uid":"9b2c",
                "creationTimestamp":"2026-11-26T18:01:04Z"},
            "endpoints":["10.244.166.2:80","10.244.166.3:80"]})
    }

    fn stored_deployment() -> Value {
        json!({"kind":"Deployment","apiVersion":"apps/v1",
            "metadata":{"name":"app","namespace":"default","uid":"d3f1","generation":2,
                "creationTimestamp":"2026-11-26T18:01:02Z","labels":{"app":"app"}},
            "spec":{"replicas":2,
                "selector":{"matchLabels":{"app":"app"},
                    "matchExpressions":[{"key":"tier","operator":"In","values":["web"]}]},
                "template":{"metadata":{"labels":{"app":"app","tier":"web"}},
                    "spec":{"containers":[{"name":"nginx","image":"nginx:1",
                        "ports":[{"containerPort":80,"protocol":"TCP"}]}]}},
                "strategy":{"type":"RollingUpdate","rollingUpdate":{"maxUnavailable":"25%","maxSurge":"25%"}}},
            "status":{"observedGeneration":2,"replicas":2,"updatedReplicas":2,"readyReplicas":2,
                "availableReplicas":2,
                "conditions":[{"type":"Available","status":"True","reason":"MinimumReplicasAvailable"}]}})
    }

    fn stored_replica_set() -> Value {
        json!({"kind":"ReplicaSet","apiVersion":"apps/v1",
            "metadata":{"name":"app-6fc9fd9bcf","namespace":"default","uid":"25cb",
                "labels":{"app":"app","pod-template-hash":"6fc9fd9bcf"},
                "ownerReferences":[{"apiVersion":"apps/v1","kind":"Deployment","name":"app","uid":"d3f1",
                    "controller":true,"blockOwnerDeletion":true}]},
            "spec":{"replicas":2,"selector":{"matchLabels":{"app":"app","pod-template-hash":"6fc9fd9bcf"}},
                "template":{"metadata":{"labels":{"app":"app","pod-template-hash":"6fc9fd9bcf"}},
                    "spec":{"containers":[{"name":"nginx","image":"nginx:1"}],"host":"ignored-in-templates"}}},
            "status":{"replicas":2,"fullyLabeledReplicas":2,"readyReplicas":2,"availableReplicas":2,
                "observedGeneration":1}})
    }

    // ---- kinds --------------------------------------------------------------------------

    #[test]
    fn kinds_map_to_names_resources_and_api_versions() {
        #[track_caller]
        fn check(kind: Kind, name: &str, resource: &str, served: &str, stored: &str) {
            assert_eq!(kind.kind_name(), name);
            assert_eq!(kind.resource(), resource);
            assert_eq!(kind.served_api_version(), served);
            assert_eq!(kind.stored_api_version(), stored);
            assert_eq!(Kind::from_kind_name(name), Some(kind));
            assert_eq!(Kind::from_resource(resource), Some(kind));
        }
        check(Kind::Pod, "Pod", "pods", "v1", "v1beta3");
        check(
            Kind::ReplicationController,
            "ReplicationController",
            "replicationcontrollers",
            "v1",
            "v1beta3",
        );
        check(Kind::Service, "Service", "services", "v1", "v1beta3");
        check(Kind::Endpoints, "Endpoints", "endpoints", "v1", "v1beta3");
        check(
            Kind::ReplicaSet,
            "ReplicaSet",
            "replicasets",
            "apps/v1",
            "apps/v1",
        );
        check(
            Kind::Deployment,
            "Deployment",
            "deployments",
            "apps/v1",
            "apps/v1",
        );
        assert_eq!(Kind::from_kind_name("Node"), None);
        assert_eq!(Kind::from_resource("nodes"), None);
    }

    // ---- pods ---------------------------------------------------------------------------

    #[test]
    fn the_real_pod_is_served_with_node_name_and_without_status_host() {
        check_to_served(
            Kind::Pod,
            stored_pod(),
            json!({"kind":"Pod","apiVersion":"v1",
                "metadata":{"name":"app-6fc9fd9bcf-rfq96","namespace":"default","uid":"7d0e",
                    "labels":{"app":"app","pod-template-hash":"6fc9fd9bcf"},
                    "creationTimestamp":"2026-11-26T18:01:03Z",
                    "ownerReferences":[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"app-6fc9fd9bcf",
                        "uid":"25cb","controller":true,"blockOwnerDeletion":true}]},
                "spec":{"containers":[{"name":"nginx","image":"nginx:1"}],"nodeName":"node-1"},
                "status":{"phase":"Running","podIP":"10.244.166.4",
                    "conditions":[{"type":"Ready","status":"True","lastTransitionTime":"2026-11-26T18:01:03Z"}],
                    "containerStatuses":[{"name":"nginx","image":"nginx:1","ready":true,"restartCount":0,
                        "imageID":"","state":{"running":{"startedAt":"2026-11-26T18:01:03Z"}}}]}}),
        );
    }

    #[test]
    fn served_node_name_is_stored_as_host_in_spec_and_status() {
        check_to_stored(
            Kind::Pod,
            json!({"kind":"Pod","apiVersion":"v1","metadata":{"name":"p"},
                "spec":{"nodeName":"node-1","containers":[]},
                "status":{"phase":"Running","hostIP":"10.0.0.1"}}),
            json!({"kind":"Pod","apiVersion":"v1beta3","metadata":{"name":"p"},
                "spec":{"host":"node-1","containers":[]},
                "status":{"phase":"Running","hostIP":"10.0.0.1","host":"node-1"}}),
        );
    }

    #[test]
    fn pod_status_host_rules() {
        #[track_caller]
        fn check(
            stored_spec: Value,
            stored_status: Value,
            served_spec: Value,
            served_status: Value,
        ) {
            let stored = json!({"kind":"Pod","apiVersion":"v1beta3","spec":stored_spec,"status":stored_status});
            let served =
                json!({"kind":"Pod","apiVersion":"v1","spec":served_spec,"status":served_status});
            check_to_served(Kind::Pod, stored.clone(), served);
            check_stored_round_trip(Kind::Pod, stored);
        }
        // The kubelet's claim: both set to the node; the served status has no host.
        check(
            json!({"host":"n1"}),
            json!({"phase":"Pending","host":"n1"}),
            json!({"nodeName":"n1"}),
            json!({"phase":"Pending"}),
        );
        // Bound without status.host (kcm's lab binds this way): served as an empty marker.
        check(
            json!({"host":"n1"}),
            json!({"phase":"Running"}),
            json!({"nodeName":"n1"}),
            json!({"phase":"Running","host":""}),
        );
        // A status.host naming another node passes through.
        check(
            json!({"host":"n1"}),
            json!({"host":"n2"}),
            json!({"nodeName":"n1"}),
            json!({"host":"n2"}),
        );
        // Unbound pods: nothing to do.
        check(
            json!({}),
            json!({"phase":"Pending"}),
            json!({}),
            json!({"phase":"Pending"}),
        );
        check(
            json!({}),
            json!({"host":"n2"}),
            json!({}),
            json!({"host":"n2"}),
        );
        // hostIP is a v1 field and passes through.
        check(
            json!({"host":"n1"}),
            json!({"host":"n1","hostIP":"10.0.0.1"}),
            json!({"nodeName":"n1"}),
            json!({"hostIP":"10.0.0.1"}),
        );
    }

    #[test]
    fn a_pod_without_status_gets_no_status() {
        check_to_stored(
            Kind::Pod,
            json!({"spec":{"nodeName":"n1"}}),
            json!({"kind":"Pod","apiVersion":"v1beta3","spec":{"host":"n1"}}),
        );
        check_to_served(
            Kind::Pod,
            json!({"spec":{"host":"n1"}}),
            json!({"kind":"Pod","apiVersion":"v1","spec":{"nodeName":"n1"}}),
        );
    }

    #[test]
    fn container_ports_default_to_tcp_in_pods_and_every_template() {
        let stored_spec = json!({"containers":[
                {"name":"a","ports":[{"containerPort":80},{"containerPort":53,"protocol":"UDP"}]},
                {"name":"b"}],
            "initContainers":[{"name":"i","ports":[{"containerPort":9000}]}]});
        let served_spec = json!({"containers":[
                {"name":"a","ports":[{"containerPort":80,"protocol":"TCP"},{"containerPort":53,"protocol":"UDP"}]},
                {"name":"b"}],
            "initContainers":[{"name":"i","ports":[{"containerPort":9000,"protocol":"TCP"}]}]});
        check_to_served(
            Kind::Pod,
            json!({"spec":stored_spec.clone()}),
            json!({"kind":"Pod","apiVersion":"v1","spec":served_spec.clone()}),
        );
        for (kind, api_version) in [
            (Kind::ReplicationController, "v1"),
            (Kind::ReplicaSet, "apps/v1"),
            (Kind::Deployment, "apps/v1"),
        ] {
            check_to_served(
                kind,
                json!({"spec":{"template":{"spec":stored_spec.clone()}}}),
                json!({"kind":kind.kind_name(),"apiVersion":api_version,
                    "spec":{"template":{"spec":served_spec.clone()}}}),
            );
        }
    }

    #[test]
    fn a_stored_port_without_protocol_gains_tcp_on_the_round_trip() {
        let stored = json!({"kind":"Pod","apiVersion":"v1beta3",
            "spec":{"containers":[{"name":"a","ports":[{"containerPort":80}]}]}});
        let back = to_stored(Kind::Pod, to_served(Kind::Pod, stored));
        assert_eq!(
            back,
            json!({"kind":"Pod","apiVersion":"v1beta3",
                "spec":{"containers":[{"name":"a","ports":[{"containerPort":80,"protocol":"TCP"}]}]}})
        );
    }

    #[test]
    fn templates_rename_host_and_node_name() {
        check_to_served(
            Kind::ReplicationController,
            json!({"spec":{"template":{"spec":{"host":"n1","containers":[]}}}}),
            json!({"kind":"ReplicationController","apiVersion":"v1",
                "spec":{"template":{"spec":{"nodeName":"n1","containers":[]}}}}),
        );
        check_to_stored(
            Kind::Deployment,
            json!({"spec":{"template":{"spec":{"nodeName":"n1"}}}}),
            json!({"kind":"Deployment","apiVersion":"apps/v1","spec":{"template":{"spec":{"host":"n1"}}}}),
        );
    }

    #[test]
    fn the_real_documents_survive_the_stored_round_trip() {
        check_stored_round_trip(Kind::Pod, stored_pod());
        check_stored_round_trip(Kind::ReplicationController, stored_rc());
        check_stored_round_trip(Kind::Service, stored_service());
        check_stored_round_trip(Kind::Endpoints, stored_endpoints());
        check_stored_round_trip(Kind::Deployment, stored_deployment());
        check_stored_round_trip(Kind::ReplicaSet, stored_replica_set());
    }

    #[test]
    fn the_real_documents_served_survive_the_served_round_trip() {
        for (kind, stored) in [
            (Kind::Pod, stored_pod()),
            (Kind::ReplicationController, stored_rc()),
            (Kind::Service, stored_service()),
            (Kind::Endpoints, stored_endpoints()),
            (Kind::Deployment, stored_deployment()),
            (Kind::ReplicaSet, stored_replica_set()),
        ] {
            check_served_round_trip(kind, to_served(kind, stored));
        }
    }

    #[test]
    fn a_container_status_without_an_image_id_is_served_with_an_empty_one() {
        let stored = json!({"kind":"Pod","apiVersion":"v1beta3","metadata":{"name":"p"},
            "spec":{"containers":[{"name":"c","image":"x"}]},
            "status":{"containerStatuses":[{"name":"c","image":"x","ready":true,"restartCount":0},
                {"name":"d","image":"y","imageID":"docker-pullable://y@sha256:00","ready":true,"restartCount":0}],
                "initContainerStatuses":[{"name":"i","image":"z","ready":false,"restartCount":0}]}});
        let served = to_served(Kind::Pod, stored);
        assert_eq!(served["status"]["containerStatuses"][0]["imageID"], "");
        assert_eq!(
            served["status"]["containerStatuses"][1]["imageID"],
            "docker-pullable://y@sha256:00"
        );
        assert_eq!(served["status"]["initContainerStatuses"][0]["imageID"], "");
        check_served_round_trip(Kind::Pod, served);
    }

    #[test]
    fn rich_v1_pods_survive_the_served_round_trip() {
        check_served_round_trip(
            Kind::Pod,
            json!({"kind":"Pod","apiVersion":"v1",
                "metadata":{"name":"p","namespace":"default","resourceVersion":"12",
                    "annotations":{"a":"b"},"finalizers":["x"],"deletionTimestamp":"2026-11-26T18:05:00Z"},
                "spec":{"nodeName":"node-1","restartPolicy":"Always","dnsPolicy":"ClusterFirst",
                    "containers":[{"name":"c","image":"busybox","imagePullPolicy":"IfNotPresent",
                        "ports":[{"name":"http","containerPort":8080,"protocol":"TCP","hostPort":0}],
                        "resources":{},"x-unknown":{"deep":[1,2,{"deeper":true}]}}],
                    "initContainers":[{"name":"init","image":"busybox","restartPolicy":"Always",
                        "ports":[{"containerPort":9000,"protocol":"SCTP"}]}],
                    "readinessGates":[{"conditionType":"example.com/ready"}],
                    "unknownSpecField":"kept"},
                "status":{"phase":"Running","hostIP":"10.0.0.1","podIP":"10.244.0.5",
                    "podIPs":[{"ip":"10.244.0.5"}],"nominatedNodeName":"node-2",
                    "containerStatuses":[{"name":"c","ready":false,"restartCount":3,"imageID":"",
                        "state":{"waiting":{"reason":"CrashLoopBackOff"}},
                        "lastState":{"terminated":{"exitCode":1,"finishedAt":"2026-11-26T18:04:00Z"}}}],
                    "unknownStatusField":{"a":1}}}),
        );
        // A pod not yet bound, and one bound with a status that has no host.
        check_served_round_trip(
            Kind::Pod,
            json!({"kind":"Pod","apiVersion":"v1","metadata":{"name":"p"},
                "spec":{"containers":[{"name":"c"}]},"status":{"phase":"Pending"}}),
        );
        check_served_round_trip(
            Kind::Pod,
            json!({"kind":"Pod","apiVersion":"v1","metadata":{"name":"p"},
                "spec":{"nodeName":"n1","containers":[{"name":"c"}]},"status":{"phase":"Pending"}}),
        );
    }

    // ---- services -----------------------------------------------------------------------

    #[test]
    fn the_real_service_is_served_with_ports_type_and_target_port() {
        check_to_served(
            Kind::Service,
            stored_service(),
            json!({"kind":"Service","apiVersion":"v1",
                "metadata":{"name":"web","namespace":"default","uid":"5a1f",
                    "creationTimestamp":"2026-11-26T18:01:03Z"},
                "spec":{"selector":{"name":"web"},
                    "ports":[{"port":80,"protocol":"TCP","targetPort":80}],"type":"ClusterIP"}}),
        );
    }

    #[test]
    fn service_singular_port_conversion_rules() {
        #[track_caller]
        fn check(stored_spec: Value, served_spec: Value) {
            check_to_served(
                Kind::Service,
                json!({"kind":"Service","apiVersion":"v1beta3","metadata":{"name":"s"},"spec":stored_spec}),
                json!({"kind":"Service","apiVersion":"v1","metadata":{"name":"s"},"spec":served_spec}),
            );
        }
        // A named container port becomes a named target port.
        check(
            json!({"port":80,"containerPort":"http"}),
            json!({"ports":[{"port":80,"protocol":"TCP","targetPort":"http"}],"type":"ClusterIP"}),
        );
        check(
            json!({"port":53,"protocol":"UDP","containerPort":5353}),
            json!({"ports":[{"port":53,"protocol":"UDP","targetPort":5353}],"type":"ClusterIP"}),
        );
        // The 2014 portalIP fills clusterIP and is kept; a set type is kept.
        check(
            json!({"port":80,"containerPort":80,"portalIP":"10.0.0.9","type":"NodePort"}),
            json!({"portalIP":"10.0.0.9","ports":[{"port":80,"protocol":"TCP","targetPort":80}],
                "type":"NodePort","clusterIP":"10.0.0.9"}),
        );
        check(
            json!({"port":80,"containerPort":80,"clusterIP":"10.0.0.7"}),
            json!({"clusterIP":"10.0.0.7","ports":[{"port":80,"protocol":"TCP","targetPort":80}],
                "type":"ClusterIP"}),
        );
    }

    #[test]
    fn a_service_without_container_port_is_served_with_target_port_and_a_marker() {
        let stored = json!({"kind":"Service","apiVersion":"v1beta3","metadata":{"name":"s"},
            "spec":{"selector":{"app":"a"},"port":8080}});
        check_to_served(
            Kind::Service,
            stored.clone(),
            json!({"kind":"Service","apiVersion":"v1",
                "metadata":{"name":"s","annotations":{SERVICE_CONTAINER_PORT_UNSET_ANNOTATION:"true"}},
                "spec":{"selector":{"app":"a"},
                    "ports":[{"port":8080,"protocol":"TCP","targetPort":8080}],"type":"ClusterIP"}}),
        );
        // Back to stored: no containerPort, and protocol gained (the accepted difference).
        check_to_stored(
            Kind::Service,
            to_served(Kind::Service, stored.clone()),
            json!({"kind":"Service","apiVersion":"v1beta3","metadata":{"name":"s"},
                "spec":{"selector":{"app":"a"},"port":8080,"protocol":"TCP"}}),
        );
        // Other annotations stay.
        check_stored_round_trip(
            Kind::Service,
            json!({"kind":"Service","apiVersion":"v1beta3","metadata":{"name":"s","annotations":{"x":"y"}},
                "spec":{"selector":{"app":"a"},"port":8080,"protocol":"TCP"}}),
        );
    }

    #[test]
    fn editing_the_target_port_of_a_marked_service_stores_a_container_port() {
        let mut served = to_served(
            Kind::Service,
            json!({"metadata":{"name":"s"},"spec":{"port":80,"protocol":"TCP"}}),
        );
        served["spec"]["ports"][0]["targetPort"] = json!(8080);
        check_to_stored(
            Kind::Service,
            served,
            json!({"kind":"Service","apiVersion":"v1beta3","metadata":{"name":"s"},
                "spec":{"port":80,"protocol":"TCP","containerPort":8080}}),
        );
    }

    #[test]
    fn a_multi_port_v1_service_keeps_its_ports_in_the_stored_document() {
        let served = json!({"kind":"Service","apiVersion":"v1",
            "metadata":{"name":"web","namespace":"default","labels":{"app":"web"}},
            "spec":{"selector":{"app":"web"},"type":"NodePort","clusterIP":"10.96.0.10",
                "clusterIPs":["10.96.0.10"],"sessionAffinity":"None",
                "ports":[{"name":"http","port":80,"protocol":"TCP","targetPort":"http","nodePort":30080},
                    {"name":"https","port":443,"protocol":"TCP","targetPort":8443,"appProtocol":"https"}]},
            "status":{"loadBalancer":{}}});
        check_to_stored(
            Kind::Service,
            served.clone(),
            json!({"kind":"Service","apiVersion":"v1beta3",
                "metadata":{"name":"web","namespace":"default","labels":{"app":"web"}},
                "spec":{"selector":{"app":"web"},"type":"NodePort","clusterIP":"10.96.0.10",
                    "clusterIPs":["10.96.0.10"],"sessionAffinity":"None",
                    "ports":[{"name":"http","port":80,"protocol":"TCP","targetPort":"http","nodePort":30080},
                        {"name":"https","port":443,"protocol":"TCP","targetPort":8443,"appProtocol":"https"}],
                    "port":80,"protocol":"TCP","containerPort":"http"},
                "status":{"loadBalancer":{}}}),
        );
        check_served_round_trip(Kind::Service, served);
    }

    #[test]
    fn kcm_edits_to_the_singular_fields_win_over_a_stale_ports_array() {
        let stored = json!({"kind":"Service","apiVersion":"v1beta3","metadata":{"name":"s"},
            "spec":{"port":81,"protocol":"TCP","containerPort":9090,
                "ports":[{"name":"http","port":80,"protocol":"TCP","targetPort":8080},
                    {"name":"metrics","port":9100,"protocol":"TCP","targetPort":9100}]}});
        check_to_served(
            Kind::Service,
            stored,
            json!({"kind":"Service","apiVersion":"v1","metadata":{"name":"s"},
                "spec":{"ports":[{"name":"http","port":81,"protocol":"TCP","targetPort":9090},
                    {"name":"metrics","port":9100,"protocol":"TCP","targetPort":9100}],
                    "type":"ClusterIP"}}),
        );
    }

    #[test]
    fn served_services_get_port_defaults_on_every_entry() {
        check_to_served(
            Kind::Service,
            json!({"spec":{"ports":[{"port":80},{"port":53,"protocol":"UDP","targetPort":5353}]}}),
            json!({"kind":"Service","apiVersion":"v1",
                "spec":{"ports":[{"port":80,"protocol":"TCP","targetPort":80},
                    {"port":53,"protocol":"UDP","targetPort":5353}],"type":"ClusterIP"}}),
        );
    }

    #[test]
    fn v1_services_survive_the_served_round_trip() {
        for served in [
            json!({"kind":"Service","apiVersion":"v1","metadata":{"name":"a"},
                "spec":{"selector":{"app":"a"},"ports":[{"port":80,"protocol":"TCP","targetPort":8080}],
                    "type":"ClusterIP"}}),
            json!({"kind":"Service","apiVersion":"v1","metadata":{"name":"b"},
                "spec":{"selector":{"app":"b"},"ports":[{"port":80,"protocol":"TCP","targetPort":80}],
                    "type":"ClusterIP","clusterIP":"10.96.1.1","x-unknown":{"kept":[1]}}}),
            json!({"kind":"Service","apiVersion":"v1","metadata":{"name":"c"},
                "spec":{"ports":[{"name":"dns","port":53,"protocol":"UDP","targetPort":53}],
                    "type":"LoadBalancer","externalIPs":["1.2.3.4"]},
                "status":{"loadBalancer":{"ingress":[{"ip":"5.6.7.8"}]}}}),
            json!({"kind":"Service","apiVersion":"v1","metadata":{"name":"headless"},
                "spec":{"clusterIP":"None","ports":[],"type":"ClusterIP"}}),
            json!({"kind":"Service","apiVersion":"v1","metadata":{"name":"ext"},
                "spec":{"type":"ExternalName","externalName":"example.com"}}),
        ] {
            check_served_round_trip(Kind::Service, served);
        }
    }

    #[test]
    fn stored_services_survive_the_stored_round_trip() {
        for spec in [
            json!({"selector":{"name":"web"},"port":80,"protocol":"TCP","containerPort":80}),
            json!({"selector":{"name":"web"},"port":80,"protocol":"TCP","containerPort":"http"}),
            json!({"selector":{"name":"web"},"port":80,"protocol":"TCP"}),
            json!({"selector":{"name":"web"},"port":80,"protocol":"UDP","portalIP":"10.0.0.3"}),
            json!({"selector":{"name":"web"},"port":80,"protocol":"TCP","containerPort":80,
                "sessionAffinity":"ClientIP","createExternalLoadBalancer":true}),
        ] {
            check_stored_round_trip(
                Kind::Service,
                json!({"kind":"Service","apiVersion":"v1beta3","metadata":{"name":"s"},"spec":spec}),
            );
        }
    }

    // ---- endpoints ----------------------------------------------------------------------

    #[test]
    fn the_real_endpoints_are_served_as_one_subset() {
        check_to_served(
            Kind::Endpoints,
            stored_endpoints(),
            json!({"kind":"Endpoints","apiVersion":"v1",
                "metadata":{"name":"web","namespace":"default","uid":"9b2c",
                    "creationTimestamp":"2026-11-26T18:01:04Z"},
                "subsets":[{"addresses":[{"ip":"10.244.166.2"},{"ip":"10.244.166.3"}],
                    "ports":[{"port":80,"protocol":"TCP"}]}]}),
        );
    }

    #[test]
    fn stored_endpoints_make_one_subset_per_port_in_stored_order() {
        #[track_caller]
        fn check(endpoints: Value, subsets: Value) {
            let served = to_served(Kind::Endpoints, json!({"endpoints": endpoints}));
            assert_eq!(
                served.get("subsets"),
                subsets.as_array().map(|_| &subsets),
                "{served:#}"
            );
            assert_eq!(served.get("endpoints"), None);
        }
        check(
            json!(["10.0.0.2:80", "10.0.0.1:8080", "10.0.0.1:80"]),
            json!([{"addresses":[{"ip":"10.0.0.2"},{"ip":"10.0.0.1"}],"ports":[{"port":80,"protocol":"TCP"}]},
                {"addresses":[{"ip":"10.0.0.1"}],"ports":[{"port":8080,"protocol":"TCP"}]}]),
        );
        check(
            json!(["[::1]:80", "[fd00::2]:80", "10.0.0.1:80"]),
            json!([{"addresses":[{"ip":"::1"},{"ip":"fd00::2"},{"ip":"10.0.0.1"}],
                "ports":[{"port":80,"protocol":"TCP"}]}]),
        );
        // No endpoints: no subsets (v1 omits an empty list).
        check(json!([]), Value::Null);
    }

    #[test]
    fn subsets_flatten_to_sorted_ready_endpoints_and_are_kept() {
        let served = json!({"kind":"Endpoints","apiVersion":"v1","metadata":{"name":"web"},
            "subsets":[
                {"addresses":[{"ip":"10.0.0.3","nodeName":"n1",
                        "targetRef":{"kind":"Pod","name":"web-1","namespace":"default","uid":"u1"}},
                    {"ip":"10.0.0.1","targetRef":{"kind":"Pod","name":"web-2"}}],
                 "notReadyAddresses":[{"ip":"10.0.0.9"}],
                 "ports":[{"name":"http","port":80,"protocol":"TCP"},{"name":"metrics","port":9100,"protocol":"TCP"}]},
                {"addresses":[{"ip":"fd00::5"}],"ports":[{"port":80,"protocol":"TCP"}]}]});
        let stored = to_stored(Kind::Endpoints, served.clone());
        assert_eq!(
            stored["endpoints"],
            json!([
                "10.0.0.1:80",
                "10.0.0.1:9100",
                "10.0.0.3:80",
                "10.0.0.3:9100",
                "[fd00::5]:80"
            ])
        );
        assert_eq!(stored["subsets"], served["subsets"]);
        assert_eq!(stored["apiVersion"], json!("v1beta3"));
        check_served_round_trip(Kind::Endpoints, served);
    }

    #[test]
    fn stale_stored_subsets_are_regenerated_from_endpoints() {
        // kcm's endpoints controller rewrote `endpoints` after a client wrote subsets.
        let stored = json!({"kind":"Endpoints","apiVersion":"v1beta3","metadata":{"name":"web"},
            "endpoints":["10.0.0.7:80"],
            "subsets":[{"addresses":[{"ip":"10.0.0.1","targetRef":{"name":"old"}}],
                "ports":[{"name":"http","port":80,"protocol":"TCP"}]}]});
        check_to_served(
            Kind::Endpoints,
            stored.clone(),
            json!({"kind":"Endpoints","apiVersion":"v1","metadata":{"name":"web"},
                "subsets":[{"addresses":[{"ip":"10.0.0.7"}],"ports":[{"port":80,"protocol":"TCP"}]}]}),
        );
        // And the stale copy is dropped on the next write.
        check_to_stored(
            Kind::Endpoints,
            to_served(Kind::Endpoints, stored),
            json!({"kind":"Endpoints","apiVersion":"v1beta3","metadata":{"name":"web"},
                "endpoints":["10.0.0.7:80"]}),
        );
    }

    #[test]
    fn stored_subsets_are_served_when_they_flatten_to_the_same_set_in_another_order() {
        let subsets = json!([{"addresses":[{"ip":"10.0.0.2"},{"ip":"10.0.0.1"}],
            "ports":[{"name":"http","port":80,"protocol":"TCP"}]}]);
        check_to_served(
            Kind::Endpoints,
            json!({"endpoints":["10.0.0.1:80","10.0.0.2:80"],"subsets":subsets.clone()}),
            json!({"kind":"Endpoints","apiVersion":"v1","subsets":subsets}),
        );
    }

    #[test]
    fn endpoints_survive_both_round_trips() {
        for endpoints in [
            json!([]),
            json!(["10.244.166.2:80"]),
            json!(["10.0.0.1:80", "10.0.0.1:8080", "10.0.0.2:80"]),
            json!(["10.0.0.1:80", "[::1]:80"]),
        ] {
            check_stored_round_trip(
                Kind::Endpoints,
                json!({"kind":"Endpoints","apiVersion":"v1beta3","metadata":{"name":"e"},
                    "endpoints":endpoints}),
            );
        }
        for served in [
            json!({"kind":"Endpoints","apiVersion":"v1","metadata":{"name":"e"}}),
            json!({"kind":"Endpoints","apiVersion":"v1","metadata":{"name":"e"},"subsets":[]}),
            json!({"kind":"Endpoints","apiVersion":"v1","metadata":{"name":"e"},
                "subsets":[{"notReadyAddresses":[{"ip":"10.0.0.1"}],"ports":[{"port":80,"protocol":"TCP"}]}]}),
            json!({"kind":"Endpoints","apiVersion":"v1","metadata":{"name":"e"},
                "subsets":[{"addresses":[{"ip":"10.0.0.1"}],"ports":[{"port":80,"protocol":"UDP"}]}]}),
            json!({"kind":"Endpoints","apiVersion":"v1","metadata":{"name":"e","labels":{"a":"b"}},
                "subsets":[{"addresses":[{"ip":"10.0.0.1"}]}]}),
        ] {
            check_served_round_trip(Kind::Endpoints, served);
        }
    }

    #[test]
    fn host_ports_parse_and_join_like_go() {
        #[track_caller]
        fn check(endpoint: &str, expected: Option<(&str, u16)>) {
            let parsed = HostPort::parse(endpoint);
            assert_eq!(
                parsed.as_ref().map(|h| (h.ip.as_str(), h.port)),
                expected,
                "{endpoint}"
            );
            if let Some(parsed) = parsed {
                assert_eq!(parsed.join(), endpoint);
            }
        }
        check("10.0.0.1:80", Some(("10.0.0.1", 80)));
        check("[::1]:80", Some(("::1", 80)));
        check("[fd00::1:2]:65535", Some(("fd00::1:2", 65535)));
        check("host.example:8080", Some(("host.example", 8080)));
        check("::1:80", None);
        check("10.0.0.1", None);
        check("10.0.0.1:", None);
        check(":80", None);
        check("10.0.0.1:65536", None);
        check("10.0.0.1:+80", None);
        check("[::1]80", None);
        check("", None);
    }

    #[test]
    fn serving_a_served_object_again_changes_nothing() {
        for (kind, stored) in [
            (Kind::Pod, stored_pod()),
            (Kind::ReplicationController, stored_rc()),
            (Kind::Service, stored_service()),
            (
                Kind::Service,
                json!({"metadata":{"name":"s"},"spec":{"port":80,"portalIP":"10.0.0.1"}}),
            ),
            (Kind::Endpoints, stored_endpoints()),
            (Kind::Deployment, stored_deployment()),
            (Kind::ReplicaSet, stored_replica_set()),
        ] {
            let served = to_served(kind, stored);
            assert_eq!(to_served(kind, served.clone()), served, "{kind:?}");
        }
    }

    // ---- malformed input ----------------------------------------------------------------

    #[test]
    fn malformed_documents_are_left_alone_and_never_panic() {
        #[track_caller]
        fn check_unchanged_except_type_meta(kind: Kind, document: Value) {
            let served = to_served(kind, document.clone());
            let mut expected = document.clone();
            expected["kind"] = json!(kind.kind_name());
            expected["apiVersion"] = json!(kind.served_api_version());
            if kind == Kind::Service && document["spec"].is_object() {
                // The one default that applies to any service spec.
                expected["spec"]["type"] = json!("ClusterIP");
            }
            assert_eq!(served, expected, "to_served({kind:?}, {document:#})");
            if kind == Kind::Service && document["spec"].is_object() {
                expected["spec"] = document["spec"].clone();
            }
            let stored = to_stored(kind, document.clone());
            expected["apiVersion"] = json!(kind.stored_api_version());
            if kind == Kind::Endpoints
                && document.get("subsets").is_none()
                && document.get("endpoints").is_none()
            {
                // A v1 Endpoints without subsets is stored with no endpoints.
                expected["endpoints"] = json!([]);
            }
            assert_eq!(stored, expected, "to_stored({kind:?}, {document:#})");
        }
        for kind in Kind::ALL {
            for not_an_object in [json!(null), json!(3), json!("pod"), json!([1, 2])] {
                assert_eq!(to_served(kind, not_an_object.clone()), not_an_object);
                assert_eq!(to_stored(kind, not_an_object.clone()), not_an_object);
            }
            for document in [
                json!({}),
                json!({"spec":null}),
                json!({"spec":"text"}),
                json!({"spec":{"template":7}}),
                json!({"spec":{"template":{"spec":[]}}}),
                json!({"metadata":[],"status":"x"}),
            ] {
                check_unchanged_except_type_meta(kind, document);
            }
        }
        // Pods: wrong types inside the spec.
        for document in [
            json!({"spec":{"host":5,"containers":"x"}}),
            json!({"spec":{"containers":[1,{"ports":"x"},{"ports":[null,{"protocol":"UDP"}]}]}}),
            json!({"spec":{"host":["n1"]},"status":{"host":3}}),
            json!({"status":{"host":"n1"}}),
        ] {
            check_unchanged_except_type_meta(Kind::Pod, document);
        }
        // Services: a spec without a port, an unreadable ports field.
        check_to_served(
            Kind::Service,
            json!({"spec":{"selector":{"a":"b"},"port":80,"ports":"garbage"}}),
            json!({"kind":"Service","apiVersion":"v1",
                "spec":{"selector":{"a":"b"},"port":80,"ports":"garbage","type":"ClusterIP"}}),
        );
        check_to_stored(
            Kind::Service,
            json!({"spec":{"ports":[7],"port":80}}),
            json!({"kind":"Service","apiVersion":"v1beta3","spec":{"ports":[7],"port":80}}),
        );
        // Endpoints: unparsable entries leave the document alone.
        for endpoints in [
            json!(["garbage"]),
            json!([1]),
            json!("10.0.0.1:80"),
            json!(null),
        ] {
            check_unchanged_except_type_meta(
                Kind::Endpoints,
                json!({"endpoints": endpoints, "subsets": "x"}),
            );
        }
        check_to_stored(
            Kind::Endpoints,
            json!({"subsets":[1,{"addresses":"x"},{"addresses":[{"ip":7}],"ports":[{"port":"80"}]}]}),
            json!({"kind":"Endpoints","apiVersion":"v1beta3",
                "subsets":[1,{"addresses":"x"},{"addresses":[{"ip":7}],"ports":[{"port":"80"}]}],
                "endpoints":[]}),
        );
    }

    #[test]
    fn type_meta_is_set_first_when_missing_and_in_place_when_present() {
        let served = to_served(Kind::Pod, json!({"metadata":{"name":"p"}}));
        let keys: Vec<&str> = served
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(keys, ["kind", "apiVersion", "metadata"]);
        let stored = to_stored(
            Kind::Pod,
            json!({"metadata":{"name":"p"},"apiVersion":"v1","kind":"Pod"}),
        );
        let keys: Vec<&str> = stored
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(keys, ["metadata", "apiVersion", "kind"]);
        assert_eq!(stored["apiVersion"], json!("v1beta3"));
    }

    #[test]
    fn renames_keep_the_field_position() {
        let served = to_served(
            Kind::Pod,
            json!({"kind":"Pod","apiVersion":"v1beta3","spec":{"a":1,"host":"n","b":2}}),
        );
        let keys: Vec<&str> = served["spec"]
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(keys, ["a", "nodeName", "b"]);
    }

    #[test]
    fn a_2014_replication_controllers_pods_are_served_with_its_controller_reference_never_stored() {
        let created_by =
            r#"{"kind":"ReplicationController","namespace":"default","name":"web","uid":"u-1"}"#;
        let stored = json!({
            "kind": "Pod", "apiVersion": "v1beta3",
            "metadata": {"name": "web-abcde", "annotations": {"kubernetes.io/created-by": created_by}},
            "spec": {"containers": []},
        });
        let served = to_served(Kind::Pod, stored.clone());
        assert_eq!(
            served["metadata"]["ownerReferences"],
            json!([{"apiVersion": "v1", "kind": "ReplicationController", "name": "web", "uid": "u-1", "controller": true}])
        );
        assert_eq!(to_stored(Kind::Pod, served.clone()), stored);
        assert_eq!(
            to_served(Kind::Pod, to_stored(Kind::Pod, served.clone())),
            served
        );
        // A pod with a controller reference of its own keeps only that one.
        let mut owned = stored.clone();
        owned["metadata"]["ownerReferences"] = json!([{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "u-2", "controller": true}]);
        let served = to_served(Kind::Pod, owned.clone());
        assert_eq!(
            served["metadata"]["ownerReferences"]
                .as_array()
                .unwrap()
                .len(),
            1
        );
        assert_eq!(to_stored(Kind::Pod, served), owned);
        // Kubernetes' SerializedReference form is read too; other kinds are left alone.
        let wrapped = format!(
            r#"{{"kind":"SerializedReference","apiVersion":"v1","reference":{created_by}}}"#
        );
        let mut pod = stored.clone();
        pod["metadata"]["annotations"]["kubernetes.io/created-by"] = json!(wrapped);
        assert_eq!(
            to_served(Kind::Pod, pod)["metadata"]["ownerReferences"][0]["uid"],
            "u-1"
        );
        let mut pod = stored;
        pod["metadata"]["annotations"]["kubernetes.io/created-by"] =
            json!(r#"{"kind":"Job","name":"j","uid":"u"}"#);
        assert!(to_served(Kind::Pod, pod)["metadata"]
            .get("ownerReferences")
            .is_none());
    }
}
