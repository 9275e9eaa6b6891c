//! kube-apiserver's validation of what every written object carries, beyond kcm's own
//! (`api::validate`, which `kcm create` shares): annotation keys, the annotations' total
//! size, label syntax for the kinds kcm stores as documents, finalizer names, and a pod
//! spec's container list (apimachinery's `ValidateObjectMeta` with `ValidateAnnotations`,
//! `ValidateLabels` and `ValidateFinalizers`; `pkg/apis/core/validation`'s
//! `validateContainers` and `validateInitContainers`). Also the answer for an object too
//! large for etcd (413, as kube-apiserver answers it).
//!
//! Invariants: every check only adds a [`Cause`] (the caller answers them together as one
//! 422 `Invalid`, as kube-apiserver does); the syntax rules themselves are
//! `crate::labels`'s (`validate_key`, `validate_value`), not a copy of them.

use serde_json::Value;

use crate::api::ObjectMeta;
use crate::apiserver::errors::{ApiError, Cause};
use crate::labels;

/// The most bytes all of an object's annotations may hold together, keys and values
/// counted (kube-apiserver's `TotalAnnotationSizeLimitB`, 256 KiB).
pub(crate) const TOTAL_ANNOTATION_SIZE_LIMIT: usize = 256 * 1024;

/// The finalizers that ask the garbage collector to orphan the dependents and to delete
/// them first: one object may not carry both.
const ORPHAN: &str = "orphan";
const FOREGROUND: &str = "foregroundDeletion";

/// The metadata checks of kcm's typed kinds, beyond their name and namespace (which
/// `api::validate` checks): labels (`api::validate` checks them too, in kcm's words; the
/// caller keeps these instead), annotations and finalizers.
pub(crate) fn check_typed_metadata(meta: &ObjectMeta, out: &mut Vec<Cause>) {
    let labels = meta
        .labels
        .iter()
        .map(|(key, value)| (key.as_str(), value.as_str()));
    check_labels("metadata.labels", labels, out);
    let annotations = meta
        .annotations
        .iter()
        .map(|(key, value)| (key.as_str(), value.as_str()));
    check_annotations("metadata.annotations", annotations, out);
    check_finalizers(
        "metadata.finalizers",
        meta.finalizers.iter().map(String::as_str),
        out,
    );
}

/// The metadata checks of a kind stored as a JSON document (ConfigMap, Secret, Lease,
/// Namespace, Node, ...): labels, annotations and finalizers.
///
/// # Errors
/// 400 when one of them is not the type it must be (a map of strings, a list of
/// strings), as kube-apiserver's decoding of the `kind` fails.
pub(crate) fn check_document_metadata(
    kind: &str,
    object: &Value,
    out: &mut Vec<Cause>,
) -> Result<(), ApiError> {
    let metadata = object.get("metadata").unwrap_or(&Value::Null);
    let undecodable = |field: &str, expected: &str| {
        ApiError::bad_request(format!(
            "{kind} in version \"v1\" cannot be handled as a {kind}: metadata.{field}: expected {expected}"
        ))
    };
    let string_map = |field: &str| -> Result<Vec<(&str, &str)>, ApiError> {
        match metadata.get(field) {
            None | Some(Value::Null) => Ok(Vec::new()),
            Some(Value::Object(map)) => map
                .iter()
                .map(|(key, value)| match value {
                    Value::String(value) => Ok((key.as_str(), value.as_str())),
                    _ => Err(undecodable(field, "a map of strings")),
                })
                .collect(),
            Some(_) => Err(undecodable(field, "a map of strings")),
        }
    };
    let labels = string_map("labels")?;
    let annotations = string_map("annotations")?;
    let finalizers: Vec<&str> = match metadata.get("finalizers") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| {
                item.as_str()
                    .ok_or_else(|| undecodable("finalizers", "a list of strings"))
            })
            .collect::<Result<_, _>>()?,
        Some(_) => return Err(undecodable("finalizers", "a list of strings")),
    };
    check_labels("metadata.labels", labels, out);
    check_annotations("metadata.annotations", annotations, out);
    check_finalizers("metadata.finalizers", finalizers, out);
    Ok(())
}

/// Label keys are qualified names and values label values; each problem is a cause at
/// `field` naming the offending key or value (kube-apiserver's `ValidateLabels`).
pub(crate) fn check_labels<'a>(
    field: &str,
    labels: impl IntoIterator<Item = (&'a str, &'a str)>,
    out: &mut Vec<Cause>,
) {
    for (key, value) in labels {
        if let Err(reason) = labels::validate_key(key) {
            out.push(invalid(field, key, &reason));
        }
        if let Err(reason) = labels::validate_value(value) {
            out.push(invalid(field, value, &reason));
        }
    }
}

/// Annotation keys are qualified names, compared in lower case (kube-apiserver lowers
/// them first, so `Example.com/Key` passes), and keys and values hold at most
/// [`TOTAL_ANNOTATION_SIZE_LIMIT`] bytes together (`ValidateAnnotations`).
pub(crate) fn check_annotations<'a>(
    field: &str,
    annotations: impl IntoIterator<Item = (&'a str, &'a str)>,
    out: &mut Vec<Cause>,
) {
    let mut total = 0usize;
    for (key, value) in annotations {
        total = total.saturating_add(key.len()).saturating_add(value.len());
        if let Err(reason) = labels::validate_key(&key.to_ascii_lowercase()) {
            out.push(invalid(field, key, &reason));
        }
    }
    if total > TOTAL_ANNOTATION_SIZE_LIMIT {
        out.push(Cause {
            reason: "FieldValueTooLong",
            field: field.to_string(),
            message: format!("Too long: may not be more than {TOTAL_ANNOTATION_SIZE_LIMIT} bytes"),
        });
    }
}

/// Finalizers are qualified names, and `orphan` and `foregroundDeletion` exclude each
/// other (`ValidateFinalizers`).
pub(crate) fn check_finalizers<'a>(
    field: &str,
    finalizers: impl IntoIterator<Item = &'a str>,
    out: &mut Vec<Cause>,
) {
    let (mut orphan, mut foreground) = (false, false);
    for finalizer in finalizers {
        if let Err(reason) = labels::validate_key(finalizer) {
            out.push(invalid(field, finalizer, &reason));
        }
        orphan |= finalizer == ORPHAN;
        foreground |= finalizer == FOREGROUND;
    }
    if orphan && foreground {
        out.push(Cause {
            reason: "FieldValueInvalid",
            field: field.to_string(),
            message: format!(
                "Invalid value: [{ORPHAN:?}, {FOREGROUND:?}]: finalizer {ORPHAN} and {FOREGROUND} cannot be both set"
            ),
        });
    }
}

/// A pod spec's container list, `spec` being the served pod spec at `field` (`spec` for
/// a pod, `spec.template.spec` for a template): at least one container, each named, and
/// no name twice among the containers and init containers together (kube-apiserver
/// reports a duplicate on the later entry, regular containers counted first).
pub(crate) fn check_pod_spec(field: &str, spec: &Value, out: &mut Vec<Cause>) {
    let list = |name: &str| -> &[Value] {
        spec.get(name)
            .and_then(Value::as_array)
            .map_or(&[], Vec::as_slice)
    };
    let (containers, init_containers) = (list("containers"), list("initContainers"));
    if containers.is_empty() {
        out.push(required(&format!("{field}.containers")));
    }
    let mut names = std::collections::HashSet::new();
    for (list_name, list) in [
        ("containers", containers),
        ("initContainers", init_containers),
    ] {
        for (i, container) in list.iter().enumerate() {
            let path = format!("{field}.{list_name}[{i}].name");
            match container.get("name").and_then(Value::as_str).unwrap_or("") {
                "" => out.push(required(&path)),
                name if !names.insert(name) => out.push(Cause {
                    reason: "FieldValueDuplicate",
                    field: path,
                    message: format!("Duplicate value: {name:?}"),
                }),
                _ => {}
            }
        }
    }
}

/// The answer for a write etcd refused as larger than it accepts in one request: 413
/// `RequestEntityTooLarge`, as kube-apiserver answers it, so that a client does not retry
/// what can never succeed (a 503 says "try again"). `None` for any other storage error.
///
/// etcd's limit is its `--max-request-bytes` (1.5 MiB unless set:
/// `kubecfg::ETCD_MAX_REQUEST_BYTES`); kcm does not know the value a cluster runs with,
/// so it passes on etcd's own refusal, which the registry has already explained with
/// that figure ("request is too large", or gRPC's "received message larger than max" for
/// a request far over it).
pub(crate) fn too_large_for_etcd(message: &str) -> Option<ApiError> {
    let too_large = message.contains("request is too large")
        || message.contains("received message larger than max")
        || message.contains("trying to send message larger than max");
    too_large.then(|| ApiError {
        code: 413,
        reason: "RequestEntityTooLarge",
        message: format!("Request entity too large: {message}"),
        details: None,
    })
}

fn invalid(field: &str, value: &str, reason: &str) -> Cause {
    Cause {
        reason: "FieldValueInvalid",
        field: field.to_string(),
        message: format!("Invalid value: {value:?}: {reason}"),
    }
}

fn required(field: &str) -> Cause {
    Cause {
        reason: "FieldValueRequired",
        field: field.to_string(),
        message: "Required value".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// `(field, message)` of each cause.
    fn described(causes: &[Cause]) -> Vec<(String, String)> {
        causes
            .iter()
            .map(|c| (c.field.clone(), c.message.clone()))
            .collect()
    }

    #[track_caller]
    fn check_document(metadata: Value, expected: &[(&str, &str)]) {
        let mut causes = Vec::new();
        check_document_metadata("ConfigMap", &json!({ "metadata": metadata }), &mut causes)
            .unwrap();
        let got = described(&causes);
        assert_eq!(got.len(), expected.len(), "{got:?}");
        for ((field, message), (want_field, want_message)) in got.iter().zip(expected) {
            assert_eq!(field, want_field, "{got:?}");
            assert!(
                message.starts_with(want_message),
                "{message} vs {want_message}"
            );
        }
    }

    #[test]
    fn annotation_keys_are_qualified_names_in_any_case() {
        check_document(
            json!({"annotations": {"Example.com/Key_1": "x", "a": ""}}),
            &[],
        );
        check_document(
            json!({"annotations": {"a b/c": "x"}}),
            &[(
                "metadata.annotations",
                "Invalid value: \"a b/c\": prefix part",
            )],
        );
        check_document(
            json!({"annotations": {"-x": "y", "a/b/c": "x"}}),
            &[
                ("metadata.annotations", "Invalid value: \"-x\": name part"),
                (
                    "metadata.annotations",
                    "Invalid value: \"a/b/c\": must have at most one '/'",
                ),
            ],
        );
    }

    #[test]
    fn annotations_hold_at_most_256_kib_keys_and_values_together() {
        let at_limit = "x".repeat(TOTAL_ANNOTATION_SIZE_LIMIT - 1);
        check_document(json!({"annotations": {"k": at_limit}}), &[]);
        let over = "x".repeat(TOTAL_ANNOTATION_SIZE_LIMIT);
        check_document(
            json!({"annotations": {"k": over}}),
            &[(
                "metadata.annotations",
                "Too long: may not be more than 262144 bytes",
            )],
        );
    }

    #[test]
    fn labels_and_finalizers_are_checked() {
        check_document(
            json!({"labels": {"app": "web", "a b": "x", "k": "not ok"},
                   "finalizers": ["example.com/f", "kubernetes", "bad name"]}),
            &[
                ("metadata.labels", "Invalid value: \"a b\": name part"),
                (
                    "metadata.labels",
                    "Invalid value: \"not ok\": must be empty or consist",
                ),
                (
                    "metadata.finalizers",
                    "Invalid value: \"bad name\": name part",
                ),
            ],
        );
        check_document(
            json!({"labels": {"k": "x".repeat(64)}}),
            &[("metadata.labels", "Invalid value: \"xxxx")],
        );
        check_document(
            json!({"finalizers": ["orphan", "foregroundDeletion"]}),
            &[("metadata.finalizers", "Invalid value: [\"orphan\", \"foregroundDeletion\"]: finalizer orphan and foregroundDeletion cannot be both set")],
        );
    }

    #[test]
    fn metadata_of_the_wrong_type_does_not_decode() {
        for metadata in [
            json!({"labels": {"a": 1}}),
            json!({"annotations": ["a"]}),
            json!({"finalizers": "a"}),
        ] {
            let error = check_document_metadata(
                "ConfigMap",
                &json!({ "metadata": metadata }),
                &mut Vec::new(),
            )
            .unwrap_err();
            assert_eq!(error.code, 400, "{metadata}");
        }
    }

    #[test]
    fn typed_metadata_checks_annotations_and_finalizers() {
        let mut meta = ObjectMeta::default();
        meta.annotations.insert("a b/c".into(), "x".into());
        meta.finalizers.push("no way".into());
        let mut causes = Vec::new();
        check_typed_metadata(&meta, &mut causes);
        let fields: Vec<&str> = causes.iter().map(|c| c.field.as_str()).collect();
        assert_eq!(fields, ["metadata.annotations", "metadata.finalizers"]);
        meta.labels = [("-x", "y")].into_iter().collect();
        causes.clear();
        check_typed_metadata(&meta, &mut causes);
        assert_eq!(causes[0].field, "metadata.labels");
        assert!(causes[0]
            .message
            .starts_with("Invalid value: \"-x\": name part"));
    }

    #[track_caller]
    fn check_containers(spec: Value, expected: &[(&str, &str)]) {
        let mut causes = Vec::new();
        check_pod_spec("spec", &spec, &mut causes);
        let expected: Vec<(String, String)> = expected
            .iter()
            .map(|(f, m)| (f.to_string(), m.to_string()))
            .collect();
        assert_eq!(described(&causes), expected, "{spec}");
    }

    #[test]
    fn a_pod_has_containers_with_unique_names() {
        check_containers(json!({"containers": [{"name": "a"}, {"name": "b"}]}), &[]);
        check_containers(json!({}), &[("spec.containers", "Required value")]);
        check_containers(
            json!({"containers": []}),
            &[("spec.containers", "Required value")],
        );
        check_containers(
            json!({"containers": [{"name": "x"}, {"name": "x"}]}),
            &[("spec.containers[1].name", "Duplicate value: \"x\"")],
        );
        check_containers(
            json!({"containers": [{"name": "x"}], "initContainers": [{"name": "x"}]}),
            &[("spec.initContainers[0].name", "Duplicate value: \"x\"")],
        );
        check_containers(
            json!({"containers": [{"image": "i"}]}),
            &[("spec.containers[0].name", "Required value")],
        );
    }

    #[test]
    fn etcds_size_refusal_is_413_and_nothing_else_is() {
        let error =
            too_large_for_etcd("etcdserver: request is too large; the object is larger").unwrap();
        assert_eq!((error.code, error.reason), (413, "RequestEntityTooLarge"));
        assert!(error
            .message
            .starts_with("Request entity too large: etcdserver: request is too large"));
        assert!(too_large_for_etcd("grpc: received message larger than max (5 vs. 4)").is_some());
        assert!(too_large_for_etcd("etcdserver: mvcc: database space exceeded").is_none());
        assert!(too_large_for_etcd("etcd did not answer within 5s").is_none());
    }
}
