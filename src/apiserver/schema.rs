//! The field names of the served kinds, for `fieldValidation`: which fields of a written
//! object kube-apiserver would call unknown (`strict decoding error: unknown field
//! "spec.replica"`).
//!
//! Mirrors the Go structs of `k8s.io/api` `core/v1`, `apps/v1` and `autoscaling/v1` at
//! 1.32 (their json tags), down to the levels people write by hand: the type and object
//! metadata, each kind's spec, a pod template's spec and its containers. Below those
//! levels (probes, volumes, resources, affinity, status, ...) a value is [`Node::Any`]: not
//! checked, so a field kcm does not list is never refused there.
//!
//! Invariant: every field name listed is one the Go struct has; a miss can only let an
//! unknown field through, never refuse a known one, except for fields 1.32 does not have.

use serde_json::Value;

/// What a value may hold.
#[derive(Debug)]
pub enum Node {
    /// Anything (not checked).
    Any,
    /// An object with exactly these fields.
    Object(&'static [(&'static str, Node)]),
    /// A list of such values.
    List(&'static Node),
}

use Node::{Any, List, Object};

const OBJECT_META: Node = Object(&[
    ("annotations", Any),
    ("creationTimestamp", Any),
    ("deletionGracePeriodSeconds", Any),
    ("deletionTimestamp", Any),
    ("finalizers", Any),
    ("generateName", Any),
    ("generation", Any),
    ("labels", Any),
    ("managedFields", Any),
    ("name", Any),
    ("namespace", Any),
    ("ownerReferences", Any),
    ("resourceVersion", Any),
    ("selfLink", Any),
    ("uid", Any),
]);

const CONTAINER_PORT: Node = Object(&[
    ("containerPort", Any),
    ("hostIP", Any),
    ("hostPort", Any),
    ("name", Any),
    ("protocol", Any),
]);

const CONTAINER: Node = Object(&[
    ("args", Any),
    ("command", Any),
    ("env", Any),
    ("envFrom", Any),
    ("image", Any),
    ("imagePullPolicy", Any),
    ("lifecycle", Any),
    ("livenessProbe", Any),
    ("name", Any),
    ("ports", List(&CONTAINER_PORT)),
    ("readinessProbe", Any),
    ("resizePolicy", Any),
    ("resources", Any),
    ("restartPolicy", Any),
    ("securityContext", Any),
    ("startupProbe", Any),
    ("stdin", Any),
    ("stdinOnce", Any),
    ("terminationMessagePath", Any),
    ("terminationMessagePolicy", Any),
    ("tty", Any),
    ("volumeDevices", Any),
    ("volumeMounts", Any),
    ("workingDir", Any),
]);

const POD_SPEC: Node = Object(&[
    ("activeDeadlineSeconds", Any),
    ("affinity", Any),
    ("automountServiceAccountToken", Any),
    ("containers", List(&CONTAINER)),
    ("dnsConfig", Any),
    ("dnsPolicy", Any),
    ("enableServiceLinks", Any),
    ("ephemeralContainers", Any),
    ("hostAliases", Any),
    ("hostIPC", Any),
    ("hostNetwork", Any),
    ("hostPID", Any),
    ("hostUsers", Any),
    ("hostname", Any),
    ("imagePullSecrets", Any),
    ("initContainers", List(&CONTAINER)),
    ("nodeName", Any),
    ("nodeSelector", Any),
    ("os", Any),
    ("overhead", Any),
    ("preemptionPolicy", Any),
    ("priority", Any),
    ("priorityClassName", Any),
    ("readinessGates", Any),
    ("resourceClaims", Any),
    ("resources", Any),
    ("restartPolicy", Any),
    ("runtimeClassName", Any),
    ("schedulerName", Any),
    ("schedulingGates", Any),
    ("securityContext", Any),
    ("serviceAccount", Any),
    ("serviceAccountName", Any),
    ("setHostnameAsFQDN", Any),
    ("shareProcessNamespace", Any),
    ("subdomain", Any),
    ("terminationGracePeriodSeconds", Any),
    ("tolerations", Any),
    ("topologySpreadConstraints", Any),
    ("volumes", Any),
]);

const TEMPLATE: Node = Object(&[("metadata", OBJECT_META), ("spec", POD_SPEC)]);

const SERVICE_SPEC: Node = Object(&[
    ("allocateLoadBalancerNodePorts", Any),
    ("clusterIP", Any),
    ("clusterIPs", Any),
    ("externalIPs", Any),
    ("externalName", Any),
    ("externalTrafficPolicy", Any),
    ("healthCheckNodePort", Any),
    ("internalTrafficPolicy", Any),
    ("ipFamilies", Any),
    ("ipFamilyPolicy", Any),
    ("loadBalancerClass", Any),
    ("loadBalancerIP", Any),
    ("loadBalancerSourceRanges", Any),
    // 2014's name of `clusterIP`: kcm serves it where a stored Service has it, so an
    // object read back and written again must pass.
    ("portalIP", Any),
    ("ports", Any),
    ("publishNotReadyAddresses", Any),
    ("selector", Any),
    ("sessionAffinity", Any),
    ("sessionAffinityConfig", Any),
    ("trafficDistribution", Any),
    ("type", Any),
]);

const fn top(spec: Node) -> [(&'static str, Node); 5] {
    [
        ("apiVersion", Any),
        ("kind", Any),
        ("metadata", OBJECT_META),
        ("spec", spec),
        ("status", Any),
    ]
}

static POD: [(&str, Node); 5] = top(POD_SPEC);
static SERVICE: [(&str, Node); 5] = top(SERVICE_SPEC);
static REPLICATION_CONTROLLER: [(&str, Node); 5] = top(Object(&[
    ("minReadySeconds", Any),
    ("replicas", Any),
    ("selector", Any),
    ("template", TEMPLATE),
]));
static REPLICA_SET: [(&str, Node); 5] = top(Object(&[
    ("minReadySeconds", Any),
    ("replicas", Any),
    ("selector", Any),
    ("template", TEMPLATE),
]));
static DEPLOYMENT: [(&str, Node); 5] = top(Object(&[
    ("minReadySeconds", Any),
    ("paused", Any),
    ("progressDeadlineSeconds", Any),
    ("replicas", Any),
    ("revisionHistoryLimit", Any),
    ("selector", Any),
    ("strategy", Any),
    ("template", TEMPLATE),
]));
static SCALE: [(&str, Node); 5] = top(Object(&[("replicas", Any)]));
static ENDPOINTS: [(&str, Node); 4] = [
    ("apiVersion", Any),
    ("kind", Any),
    ("metadata", OBJECT_META),
    ("subsets", Any),
];

/// The schema of a served kind (`Scale` included); `None` for a kind not checked.
pub fn of_kind(kind: &str) -> Option<Node> {
    Some(Object(match kind {
        "Pod" => &POD,
        "Service" => &SERVICE,
        "ReplicationController" => &REPLICATION_CONTROLLER,
        "ReplicaSet" => &REPLICA_SET,
        "Deployment" => &DEPLOYMENT,
        "Endpoints" => &ENDPOINTS,
        "Scale" => &SCALE,
        _ => return None,
    }))
}

/// The paths of the fields of `value` that `node` does not know (`spec.replica`,
/// `spec.template.spec.containers[0].imagee`), in document order. Keys starting with `$`
/// (strategic merge patch directives) are skipped.
pub fn unknown_fields(node: &Node, value: &Value) -> Vec<String> {
    let mut found = Vec::new();
    walk(node, value, "", &mut found);
    found
}

fn walk(node: &Node, value: &Value, path: &str, found: &mut Vec<String>) {
    match (node, value) {
        (Object(fields), Value::Object(object)) => {
            for (key, child) in object {
                if key.starts_with('$') {
                    continue;
                }
                let child_path = if path.is_empty() {
                    key.clone()
                } else {
                    format!("{path}.{key}")
                };
                match fields.iter().find(|(name, _)| name == key) {
                    Some((_, child_node)) => walk(child_node, child, &child_path, found),
                    None => found.push(child_path),
                }
            }
        }
        (List(item), Value::Array(items)) => {
            for (i, child) in items.iter().enumerate() {
                walk(item, child, &format!("{path}[{i}]"), found);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn unknown_fields_are_named_by_path_and_unchecked_levels_pass() {
        let deployment = of_kind("Deployment").unwrap();
        let object = json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "labelz": {}},
            "spec": {
                "replica": 3,
                "strategy": {"anything": {"goes": 1}},
                "template": {"spec": {
                    "$setElementOrder/containers": [{"name": "nginx"}],
                    "containers": [{"name": "nginx", "imagee": "x",
                                    "resources": {"whatever": 1}}],
                }},
            },
            "status": {"unknown": true},
        });
        assert_eq!(
            unknown_fields(&deployment, &object),
            [
                "metadata.labelz",
                "spec.replica",
                "spec.template.spec.containers[0].imagee"
            ]
        );
        assert!(unknown_fields(
            &of_kind("Pod").unwrap(),
            &json!({"spec": {"containers": []}})
        )
        .is_empty());
        assert!(of_kind("Node").is_none());
    }
}
