use k8s_pb::api::apps::v1 as apps;
use k8s_pb::api::core::v1 as core;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;
use k8s_pb::apimachinery::pkg::runtime::{TypeMeta, Unknown};
use serde_json::json;

use super::*;

/// A body decoded as the API decodes it: served kinds by their registry rows.
fn decode(bytes: &[u8]) -> Result<Value, ApiError> {
    super::decode(bytes, crate::apiserver::resources::protobuf_of)
}

/// A body as client-go writes it: the magic, then `runtime.Unknown`.
fn envelope(api_version: &str, kind: &str, message: &impl Message) -> Vec<u8> {
    let unknown = Unknown {
        type_meta: Some(TypeMeta {
            api_version: Some(api_version.into()),
            kind: Some(kind.into()),
        }),
        raw: Some(message.encode_to_vec()),
        content_encoding: Some(String::new()),
        content_type: Some(String::new()),
    };
    [MAGIC, &unknown.encode_to_vec()].concat()
}

fn hex(text: &str) -> Vec<u8> {
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap())
        .collect()
}

#[track_caller]
fn check(body: &[u8], expected: Value) {
    assert_eq!(decode(body).unwrap(), expected);
}

#[test]
fn a_truncated_body_is_refused_not_misread() {
    // The first 120 of the 201 bytes of `kubectl create deployment d2 --image=nginx`, as
    // the trace kept them: the envelope says 167 bytes of raw message follow.
    let body = hex("6b3873000a150a07617070732f7631120a4465706c6f796d656e7412a7010a1d0a02643212001a0022002a003200380042005a090a036170701202643212780801120b0a090a03617070120264321a5f0a1b0a0012001a0022002a003200380042005a090a0361707012026432124012220a056e67696e78");
    let refused = decode(&body).unwrap_err();
    assert_eq!(refused.code, 400);
    assert!(
        refused.message.contains("not valid protobuf"),
        "{}",
        refused.message
    );
}

#[test]
fn kubectl_create_namespace_and_service_bodies_decode() {
    // `kubectl create namespace team-a`, captured: every empty field kubectl's Go
    // protobuf wrote (generateName, uid, generation 0, creationTimestamp {}) is left out.
    check(
        &hex("6b3873000a0f0a02763112094e616d657370616365121e0a160a067465616d2d6112001a0022002a0032003800420012001a020a001a002200"),
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a", "generation": 0}}),
    );
    // `kubectl create service clusterip s3 --tcp=80:80`, captured.
    check(
        &hex("6b3873000a0d0a02763112075365727669636512630a1d0a02733312001a0022002a003200380042005a090a0361707012027333123e0a180a0538302d3830120354435018502206080010501a00280012090a03617070120273331a002209436c757374657249503a00420052005a00600068001a020a00"),
        json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "s3", "generation": 0, "labels": {"app": "s3"}},
            "spec": {
                "ports": [{"name": "80-80", "protocol": "TCP", "port": 80, "targetPort": 80, "nodePort": 0}],
                "selector": {"app": "s3"}, "type": "ClusterIP",
                "publishNotReadyAddresses": false, "healthCheckNodePort": 0,
            },
        }),
    );
}

#[test]
fn a_deployment_encoded_with_k8s_pb_is_its_json() {
    let labels = BTreeMap::from([("app".to_string(), "web".to_string())]);
    let deployment = apps::Deployment {
        metadata: Some(meta::ObjectMeta {
            name: Some("web".into()),
            labels: labels.clone(),
            creation_timestamp: Some(meta::Time {
                seconds: Some(1_700_000_000),
                nanos: Some(0),
            }),
            ..Default::default()
        }),
        spec: Some(apps::DeploymentSpec {
            replicas: Some(0),
            selector: Some(meta::LabelSelector {
                match_labels: labels.clone(),
                ..Default::default()
            }),
            template: Some(core::PodTemplateSpec {
                metadata: Some(meta::ObjectMeta {
                    labels,
                    ..Default::default()
                }),
                spec: Some(core::PodSpec {
                    host_ipc: Some(true),
                    containers: vec![core::Container {
                        name: Some("nginx".into()),
                        image: Some("nginx:1.27".into()),
                        ports: vec![core::ContainerPort {
                            container_port: Some(80),
                            ..Default::default()
                        }],
                        resources: Some(core::ResourceRequirements {
                            limits: BTreeMap::from([(
                                "cpu".to_string(),
                                Quantity {
                                    string: Some("100m".into()),
                                },
                            )]),
                            ..Default::default()
                        }),
                        readiness_probe: Some(core::Probe {
                            handler: Some(core::ProbeHandler {
                                http_get: Some(core::HttpGetAction {
                                    port: Some(IntOrString {
                                        r#type: Some(1),
                                        int_val: Some(0),
                                        str_val: Some("http".into()),
                                    }),
                                    ..Default::default()
                                }),
                                ..Default::default()
                            }),
                            ..Default::default()
                        }),
                        ..Default::default()
                    }],
                    ..Default::default()
                }),
            }),
            strategy: Some(apps::DeploymentStrategy {
                r#type: Some("Recreate".into()),
                rolling_update: None,
            }),
            ..Default::default()
        }),
        status: Some(apps::DeploymentStatus::default()),
    };
    check(
        &envelope("apps/v1", "Deployment", &deployment),
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "creationTimestamp": "2023-11-14T22:13:20Z", "labels": {"app": "web"}},
            "spec": {
                "replicas": 0,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {
                        "containers": [{
                            "name": "nginx", "image": "nginx:1.27",
                            "ports": [{"containerPort": 80}],
                            "resources": {"limits": {"cpu": "100m"}},
                            "readinessProbe": {"httpGet": {"port": "http"}},
                        }],
                        "hostIPC": true,
                    },
                },
                "strategy": {"type": "Recreate"},
            },
        }),
    );
}

#[test]
fn scale_and_delete_options_decode() {
    let scale = autoscaling::v1::Scale {
        metadata: Some(meta::ObjectMeta {
            name: Some("web".into()),
            resource_version: Some("42".into()),
            ..Default::default()
        }),
        spec: Some(autoscaling::v1::ScaleSpec { replicas: Some(0) }),
        status: None,
    };
    check(
        &envelope("autoscaling/v1", "Scale", &scale),
        json!({"apiVersion": "autoscaling/v1", "kind": "Scale",
               "metadata": {"name": "web", "resourceVersion": "42"}, "spec": {"replicas": 0}}),
    );
    let options = meta::DeleteOptions {
        propagation_policy: Some("Foreground".into()),
        preconditions: Some(meta::Preconditions {
            uid: Some("u-1".into()),
            resource_version: None,
        }),
        dry_run: vec!["All".into()],
        ..Default::default()
    };
    check(
        &envelope("meta.k8s.io/v1", "DeleteOptions", &options),
        json!({"apiVersion": "meta.k8s.io/v1", "kind": "DeleteOptions",
               "preconditions": {"uid": "u-1"}, "propagationPolicy": "Foreground", "dryRun": ["All"]}),
    );
}

#[test]
fn bad_bodies_are_refused_with_one_status() {
    let refused = |body: &[u8]| decode(body).unwrap_err();
    assert!(refused(b"{\"kind\":\"Pod\"}").message.contains("k8s\\0"));
    assert!(refused(b"k8s\0\xff\xff\xff")
        .message
        .contains("not valid protobuf"));
    let node = envelope("v1", "Node", &core::Node::default());
    assert!(
        refused(&node).message.contains("no kind \"Node\""),
        "{}",
        refused(&node).message
    );
    let pod_as_garbage = [
        MAGIC,
        &Unknown {
            type_meta: Some(TypeMeta {
                api_version: Some("v1".into()),
                kind: Some("Pod".into()),
            }),
            raw: Some(vec![0x0a, 0xff]),
            ..Default::default()
        }
        .encode_to_vec(),
    ]
    .concat();
    assert_eq!(refused(&pod_as_garbage).code, 400);
    let gzipped = [
        MAGIC,
        &Unknown {
            content_encoding: Some("gzip".into()),
            ..Default::default()
        }
        .encode_to_vec(),
    ]
    .concat();
    assert_eq!(refused(&gzipped).code, 415);
}
