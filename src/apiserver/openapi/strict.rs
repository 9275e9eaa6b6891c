//! Strict decoding of a written object against the served schema (Kubernetes 1.32,
//! [`super::schemas`]): the fields kube-apiserver's decoder would call unknown, for
//! `fieldValidation` (`strict decoding error: unknown field "spec.replicaz"`).
//!
//! Mirrors what `sigs.k8s.io/json`'s `UnmarshalStrict` finds when it decodes a body into
//! the Go types of `k8s.io/api` (whose json tags the schema's properties are): every level
//! is checked, status and list items and the values of maps included, and a field is
//! named by its path as that decoder prints it, a list item by its index and a map entry
//! as a field (`spec.template.spec.containers[0].imagee`).
//!
//! Invariants: the schema is compiled once, on first use, into one node per schema
//! (references resolved, each object's fields sorted by name), so a check hashes only
//! the kind, and allocates one path buffer per object checked and a `String` per unknown field
//! found; a field is unknown only where the schema lists an object's fields and names
//! neither it nor a map of values, so a schema that says less never refuses more; the
//! fields kcm itself serves that 1.32 lacks ([`KCM_SERVED_FIELDS`]) are never unknown.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::OnceLock;

use serde_json::Value;

use super::schemas::{other_field, schemas, Field, Schemas};

/// The fields kcm serves that 1.32's schema does not have, by kind and path: an object a
/// client reads and writes back whole (`kubectl replace`, `kubectl get -o json | kubectl
/// replace -f -`, both `fieldValidation=Strict`) carries them, so strict decoding must
/// pass them. Each is a 2014 field of the documents kcm stores (`docs/departures.md`).
pub const KCM_SERVED_FIELDS: &[(&str, &str)] = &[
    // 2014's name of `clusterIP`: a Service stored by 2014 Kubernetes has it, and kcm
    // serves it beside the `clusterIP` it fills from it (`convert.rs`), so that a
    // read-modify-write stores the document as it was.
    ("Service", "spec.portalIP"),
    // The node a 2014 kubelet reported the pod on: served when it names another node
    // than `spec.nodeName`, and as `""` when the stored status has none (`convert.rs`), so
    // that writing the object back stores the status as it was.
    ("Pod", "status.host"),
];

/// The paths of the fields of `object` (an object of `kind` as a client writes it, `Scale`
/// included) that the served schema of `kind` does not have, in document order; none for
/// a kind the schema does not hold. Keys starting with `$` (a strategic merge patch's
/// directives) are skipped, as are the fields of [`KCM_SERVED_FIELDS`].
pub fn unknown_fields(kind: &str, object: &Value) -> Vec<String> {
    let compiled = compiled();
    let Some(&root) = compiled.by_kind.get(kind) else {
        return Vec::new();
    };
    let mut walk = Walk {
        nodes: &compiled.nodes,
        kind,
        path: String::new(),
        found: Vec::new(),
    };
    walk.value(root, object);
    walk.found
}

/// A schema node as the walk reads it.
#[derive(Debug, Default)]
struct Node {
    /// An object's properties, sorted by name, each with its node.
    fields: Vec<(&'static str, usize)>,
    /// Where an object's other fields go.
    other: Other,
    /// The node of a list's items.
    items: Option<usize>,
}

/// Where an object's fields that are not its properties go.
#[derive(Debug, Default)]
enum Other {
    /// Anywhere: nothing is checked.
    #[default]
    Any,
    /// Into a map whose values have this node.
    Entry(usize),
    /// Nowhere: they are unknown fields.
    Unknown,
}

/// The compiled schema: its nodes, and the root node of each served kind.
struct Compiled {
    nodes: Vec<Node>,
    by_kind: HashMap<&'static str, usize>,
}

fn compiled() -> &'static Compiled {
    static COMPILED: OnceLock<Compiled> = OnceLock::new();
    COMPILED.get_or_init(|| {
        let mut compiler = Compiler {
            schemas: schemas(),
            nodes: Vec::new(),
            seen: HashMap::new(),
        };
        let by_kind = super::served_definitions()
            .into_iter()
            .map(|(kind, definition)| (kind, compiler.node(definition)))
            .collect();
        Compiled {
            nodes: compiler.nodes,
            by_kind,
        }
    })
}

/// Compiles schemas into [`Node`]s, each schema once (a definition that refers to itself
/// ends at its own node).
struct Compiler {
    schemas: &'static Schemas,
    nodes: Vec<Node>,
    /// The node of each schema compiled, by its address in the data.
    seen: HashMap<*const Value, usize>,
}

impl Compiler {
    fn node(&mut self, schema: &'static Value) -> usize {
        let schema = self.schemas.dereference(schema);
        if let Some(&id) = self.seen.get(&std::ptr::from_ref(schema)) {
            return id;
        }
        let id = self.nodes.len();
        self.nodes.push(Node::default());
        self.seen.insert(std::ptr::from_ref(schema), id);
        let properties = schema.get("properties").and_then(Value::as_object);
        let mut fields = Vec::new();
        for (name, property) in properties.into_iter().flatten() {
            fields.push((name.as_str(), self.node(property)));
        }
        fields.sort_unstable_by_key(|&(name, _)| name);
        let other = match other_field(schema) {
            Field::Entry(values) => Other::Entry(self.node(values)),
            Field::Unknown => Other::Unknown,
            Field::Property(_) | Field::Any => Other::Any,
        };
        let items = schema.get("items").map(|items| self.node(items));
        self.nodes[id] = Node {
            fields,
            other,
            items,
        };
        id
    }
}

/// One strict decoding: the path of the value being read and the unknown fields so far.
struct Walk<'a> {
    nodes: &'static [Node],
    kind: &'a str,
    path: String,
    found: Vec<String>,
}

impl Walk<'_> {
    fn value(&mut self, node: usize, value: &Value) {
        let nodes = self.nodes;
        let node = &nodes[node];
        match value {
            Value::Object(fields) => {
                for (name, child) in fields {
                    if name.starts_with('$') {
                        continue;
                    }
                    let length = self.path.len();
                    if length > 0 {
                        self.path.push('.');
                    }
                    self.path.push_str(name);
                    let known = node
                        .fields
                        .binary_search_by(|&(field, _)| field.cmp(name.as_str()));
                    match (known, &node.other) {
                        (Ok(index), _) => self.value(node.fields[index].1, child),
                        (Err(_), Other::Entry(values)) => self.value(*values, child),
                        (Err(_), Other::Any) => {}
                        (Err(_), Other::Unknown) => {
                            if !KCM_SERVED_FIELDS.contains(&(self.kind, self.path.as_str())) {
                                self.found.push(self.path.clone());
                            }
                        }
                    }
                    self.path.truncate(length);
                }
            }
            Value::Array(items) => {
                let Some(item_node) = node.items else {
                    return;
                };
                for (index, item) in items.iter().enumerate() {
                    let length = self.path.len();
                    write!(self.path, "[{index}]").expect("a String takes any write");
                    self.value(item_node, item);
                    self.path.truncate(length);
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::apiserver::convert::{self, Kind};

    /// The unknown fields of `object` as `kind`, compared with `expected`.
    #[track_caller]
    fn check(kind: &str, object: Value, expected: &[&str]) {
        assert_eq!(unknown_fields(kind, &object), expected, "{object:#}");
    }

    #[test]
    fn unknown_fields_are_found_at_every_depth_by_their_path() {
        check(
            "Deployment",
            json!({
                "apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": "web", "labelz": {}},
                "spec": {
                    "replicaz": 3,
                    "strategy": {"type": "RollingUpdate",
                                 "rollingUpdate": {"maxSurge": 1, "maxSurgeSeconds": 5}},
                    "template": {"spec": {"containers": [
                        {"name": "a", "image": "x"},
                        {"name": "b", "imagee": "x",
                         "livenessProbe": {"httpGet": {"port": 80, "pathh": "/"}},
                         "resources": {"limits": {"cpu": "1"}, "limitz": {}}},
                    ]}},
                },
                "status": {"replicas": 1, "unknown": true,
                           "conditions": [{"type": "Available", "status": "True", "x": 1}]},
            }),
            &[
                "metadata.labelz",
                "spec.replicaz",
                "spec.strategy.rollingUpdate.maxSurgeSeconds",
                "spec.template.spec.containers[1].imagee",
                "spec.template.spec.containers[1].livenessProbe.httpGet.pathh",
                "spec.template.spec.containers[1].resources.limitz",
                "status.unknown",
                "status.conditions[0].x",
            ],
        );
        check(
            "Pod",
            json!({"spec": {"containers": [], "volumes": [
                {"name": "v", "configMap": {"name": "c", "items": [{"key": "k", "paht": "p"}]}},
            ]}}),
            &["spec.volumes[0].configMap.items[0].paht"],
        );
        check(
            "Scale",
            json!({"spec": {"replicas": 2, "replica": 1}}),
            &["spec.replica"],
        );
        check(
            "Namespace",
            json!({"spec": {"finalizerz": []}}),
            &["spec.finalizerz"],
        );
    }

    #[test]
    fn maps_and_free_form_objects_take_any_key() {
        check(
            "Pod",
            json!({
                "metadata": {
                    "labels": {"app": "web", "anything.example/goes": "x"},
                    "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}"},
                    "managedFields": [{"manager": "kubectl", "operation": "Apply",
                                       "apiVersion": "v1", "fieldsType": "FieldsV1",
                                       "fieldsV1": {"f:spec": {"f:containers": {}}}}],
                },
                "spec": {"containers": [{"name": "a",
                                         "resources": {"limits": {"example.com/gpu": 1}}}],
                         "nodeSelector": {"disk": "ssd"},
                         "overhead": {"memory": "1Mi"}},
            }),
            &[],
        );
        check(
            "Node",
            json!({"status": {"capacity": {"pods": "110", "hugepages-2Mi": "0"}}}),
            &[],
        );
    }

    #[test]
    fn patch_directives_nulls_and_values_of_another_type_are_not_unknown_fields() {
        check(
            "Deployment",
            json!({"spec": {"template": {"spec": {
                "$setElementOrder/containers": [{"name": "a"}],
                "containers": [{"name": "b", "$patch": "delete"}],
                "volumes": null,
            }}, "strategy": "Recreate", "selector": [1]}}),
            &[],
        );
    }

    #[test]
    fn the_2014_fields_kcm_serves_pass_only_where_kcm_serves_them() {
        check(
            "Service",
            json!({"spec": {"portalIP": "10.0.0.9", "clusterIP": "10.0.0.9"}}),
            &[],
        );
        check("Pod", json!({"status": {"host": ""}}), &[]);
        check(
            "Pod",
            json!({"spec": {"portalIP": "x", "containers": []}}),
            &["spec.portalIP"],
        );
        check("Node", json!({"status": {"host": "n1"}}), &["status.host"]);
    }

    #[test]
    fn a_kind_without_a_schema_has_no_unknown_fields() {
        check("Job", json!({"spec": {"anything": 1}}), &[]);
    }

    /// What kcm's own writers store (the scheduler's `spec.host`, the kubelet's status,
    /// 2014's Service and Endpoints), served, passes.
    #[test]
    fn objects_kcm_stores_pass_once_served() {
        let pod = json!({
            "kind": "Pod", "apiVersion": "v1beta3",
            "metadata": {"name": "web-1", "namespace": "default", "uid": "u1",
                         "labels": {"app": "web"}, "resourceVersion": "7",
                         "generateName": "web-", "creationTimestamp": "2026-11-28T15:00:00Z",
                         "annotations": {"kubernetes.io/created-by":
                             "{\"kind\":\"ReplicationController\",\"name\":\"web\",\"uid\":\"u0\"}"}},
            "spec": {"host": "n1", "containers": [{"name": "web", "image": "nginx",
                                                   "ports": [{"containerPort": 80}]}]},
            "status": {"phase": "Running", "podIP": "10.244.1.5",
                       "conditions": [{"type": "Ready", "status": "True",
                                       "lastTransitionTime": "2026-11-28T15:00:01Z"}],
                       "containerStatuses": [{"name": "web", "image": "nginx", "ready": true,
                                              "restartCount": 0, "containerID": "kcm://1",
                                              "state": {"running": {
                                                  "startedAt": "2026-11-28T15:00:01Z"}}}]},
        });
        check("Pod", convert::to_served(Kind::Pod, pod), &[]);
        let unscheduled_status = json!({"kind": "Pod", "metadata": {"name": "p"},
            "spec": {"host": "n1", "containers": []}, "status": {"phase": "Pending"}});
        let served = convert::to_served(Kind::Pod, unscheduled_status);
        assert_eq!(served["status"]["host"], "", "the marker kcm serves");
        check("Pod", served, &[]);
        let service = json!({"kind": "Service", "metadata": {"name": "web"},
            "spec": {"selector": {"app": "web"}, "port": 80, "protocol": "TCP",
                     "containerPort": 8080, "portalIP": "10.0.0.9"}});
        check("Service", convert::to_served(Kind::Service, service), &[]);
        let endpoints = json!({"kind": "Endpoints", "metadata": {"name": "web"},
            "endpoints": ["10.244.1.5:8080", "10.244.1.6:8080"]});
        check(
            "Endpoints",
            convert::to_served(Kind::Endpoints, endpoints),
            &[],
        );
        let controller = json!({"kind": "ReplicationController", "metadata": {"name": "web"},
            "spec": {"replicas": 2, "selector": {"app": "web"},
                     "template": {"metadata": {"labels": {"app": "web"}},
                                  "spec": {"containers": [{"name": "web", "image": "nginx"}]}}},
            "status": {"replicas": 2, "readyReplicas": 2}});
        check(
            "ReplicationController",
            convert::to_served(Kind::ReplicationController, controller),
            &[],
        );
    }

    /// A Deployment, its Pod and a Service as kube-apiserver serves them after `kubectl
    /// create` (every default, managedFields, status): what kubectl and the typed clients
    /// send back.
    #[test]
    fn objects_as_kube_apiserver_serves_them_pass() {
        let pod_spec = json!({
            "containers": [{
                "name": "nginx", "image": "nginx:1.27", "imagePullPolicy": "IfNotPresent",
                "ports": [{"containerPort": 80, "protocol": "TCP"}],
                "env": [{"name": "A", "valueFrom": {"fieldRef": {"apiVersion": "v1",
                                                                 "fieldPath": "status.podIP"}}}],
                "resources": {"limits": {"cpu": "500m"}, "requests": {"memory": "64Mi"}},
                "readinessProbe": {"httpGet": {"path": "/", "port": 80, "scheme": "HTTP"},
                                   "periodSeconds": 10, "successThreshold": 1,
                                   "failureThreshold": 3, "timeoutSeconds": 1},
                "securityContext": {"allowPrivilegeEscalation": false,
                                    "capabilities": {"drop": ["ALL"]}},
                "terminationMessagePath": "/dev/termination-log",
                "terminationMessagePolicy": "File",
                "volumeMounts": [{"name": "kube-api-access-x", "readOnly": true,
                                  "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}],
            }],
            "dnsPolicy": "ClusterFirst", "enableServiceLinks": true, "nodeName": "n1",
            "preemptionPolicy": "PreemptLowerPriority", "priority": 0,
            "restartPolicy": "Always", "schedulerName": "default-scheduler",
            "securityContext": {}, "serviceAccount": "default",
            "serviceAccountName": "default", "terminationGracePeriodSeconds": 30,
            "tolerations": [{"effect": "NoExecute", "key": "node.kubernetes.io/not-ready",
                             "operator": "Exists", "tolerationSeconds": 300}],
            "affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 1, "podAffinityTerm": {"topologyKey": "kubernetes.io/hostname",
                    "labelSelector": {"matchLabels": {"app": "web"}}}}]}},
            "volumes": [{"name": "kube-api-access-x", "projected": {"defaultMode": 420,
                "sources": [{"serviceAccountToken": {"expirationSeconds": 3607,
                                                     "path": "token"}},
                            {"configMap": {"name": "kube-root-ca.crt",
                                           "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                            {"downwardAPI": {"items": [{"path": "namespace",
                                "fieldRef": {"apiVersion": "v1",
                                             "fieldPath": "metadata.namespace"}}]}}]}}],
        });
        let metadata = json!({
            "name": "web", "namespace": "default", "uid": "0b7c", "resourceVersion": "5",
            "generation": 1, "creationTimestamp": "2026-11-28T15:00:00Z",
            "labels": {"app": "web"},
            "annotations": {"deployment.kubernetes.io/revision": "1"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-1",
                                 "uid": "u", "controller": true, "blockOwnerDeletion": true}],
            "finalizers": ["example.com/f"],
            "managedFields": [{"manager": "kubectl-create", "operation": "Update",
                               "apiVersion": "apps/v1", "time": "2026-11-28T15:00:00Z",
                               "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {}},
                               "subresource": "status"}],
        });
        let mut pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": metadata,
            "spec": pod_spec,
            "status": {"phase": "Running", "qosClass": "Burstable", "hostIP": "10.0.0.1",
                       "hostIPs": [{"ip": "10.0.0.1"}], "podIP": "10.244.1.5",
                       "podIPs": [{"ip": "10.244.1.5"}], "startTime": "2026-11-28T15:00:00Z",
                       "conditions": [{"type": "Ready", "status": "True", "lastProbeTime": null,
                                       "lastTransitionTime": "2026-11-28T15:00:01Z"}],
                       "containerStatuses": [{"name": "nginx", "image": "nginx:1.27",
                           "imageID": "docker.io/library/nginx@sha256:0", "ready": true,
                           "started": true, "restartCount": 0,
                           "containerID": "containerd://1",
                           "lastState": {}, "state": {"running": {
                               "startedAt": "2026-11-28T15:00:01Z"}},
                           "volumeMounts": [{"name": "kube-api-access-x",
                               "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                               "readOnly": true, "recursiveReadOnly": "Disabled"}]}]}});
        check("Pod", pod.clone(), &[]);
        pod["spec"]["nodeName"].take();
        let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": pod["metadata"],
            "spec": {"replicas": 2, "progressDeadlineSeconds": 600, "revisionHistoryLimit": 10,
                     "selector": {"matchLabels": {"app": "web"}},
                     "strategy": {"type": "RollingUpdate",
                                  "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}},
                     "template": {"metadata": {"creationTimestamp": null,
                                               "labels": {"app": "web"}},
                                  "spec": pod["spec"]}},
            "status": {"observedGeneration": 1, "replicas": 2, "updatedReplicas": 2,
                       "readyReplicas": 2, "availableReplicas": 2,
                       "conditions": [{"type": "Available", "status": "True",
                                       "lastUpdateTime": "2026-11-28T15:00:02Z",
                                       "lastTransitionTime": "2026-11-28T15:00:02Z",
                                       "reason": "MinimumReplicasAvailable",
                                       "message": "Deployment has minimum availability."}]}});
        check("Deployment", deployment, &[]);
        let service = json!({"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"clusterIP": "10.96.0.10", "clusterIPs": ["10.96.0.10"],
                     "internalTrafficPolicy": "Cluster", "ipFamilies": ["IPv4"],
                     "ipFamilyPolicy": "SingleStack", "selector": {"app": "web"},
                     "ports": [{"name": "http", "port": 80, "protocol": "TCP",
                                "targetPort": "http"}],
                     "sessionAffinity": "None", "type": "ClusterIP"},
            "status": {"loadBalancer": {}}});
        check("Service", service, &[]);
    }
}
