//! Validation on create and update (late-2014 `pkg/api/validation/validation.go`): the
//! errors, the checks every kind shares (metadata, labels, replicas); each kind's own
//! rules live beside the kind.

use super::{Object, OwnerReference};
use crate::labels::{self, Set};

/// The largest `spec.replicas`: Kubernetes' `int32`. The replication manager creates pods
/// until it has that many, so a larger count only fills etcd.
pub const MAX_REPLICAS: i64 = i32::MAX as i64;

/// One invalid field: its JSON path and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    pub field: String,
    pub message: String,
}

impl FieldError {
    /// An error for `field` (a JSON path such as `spec.selector`).
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> FieldError {
        FieldError {
            field: field.into(),
            message: message.into(),
        }
    }
}

/// An object that failed validation; names the object and every bad field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid {kind} {name:?}: {}", .errors.iter().map(|e| format!("{}: {}", e.field, e.message)).collect::<Vec<_>>().join("; "))]
pub struct ValidationError {
    pub kind: &'static str,
    /// `namespace/name` of the object.
    pub name: String,
    pub errors: Vec<FieldError>,
}

/// Validates an object as the late-2014 apiserver did on create and update.
///
/// # Errors
/// A [`ValidationError`] listing every invalid field.
pub fn validate<T: Object>(object: &T) -> Result<(), ValidationError> {
    let mut errors = Vec::new();
    let meta = object.metadata();
    for (field, value) in [
        ("metadata.name", &meta.name),
        ("metadata.namespace", &meta.namespace),
    ] {
        if value.is_empty() {
            errors.push(FieldError::new(field, "required"));
        } else if let Err(reason) = labels::validate_dns_subdomain(value) {
            errors.push(FieldError::new(field, format!("{value:?} {reason}")));
        }
    }
    validate_labels("metadata.labels", &meta.labels, &mut errors);
    if meta.generation < 0 {
        errors.push(FieldError::new(
            "metadata.generation",
            format!("must be >= 0, got {}", meta.generation),
        ));
    }
    validate_owner_references(&meta.owner_references, &mut errors);
    object.validate_spec(&mut errors);
    if errors.is_empty() {
        Ok(())
    } else {
        Err(ValidationError {
            kind: T::KIND,
            name: meta.key(),
            errors,
        })
    }
}

/// Every reference names its owner fully, and at most one is the controller
/// (`ValidateOwnerReferences`).
fn validate_owner_references(references: &[OwnerReference], errors: &mut Vec<FieldError>) {
    for (i, reference) in references.iter().enumerate() {
        for (field, value) in [
            ("apiVersion", &reference.api_version),
            ("kind", &reference.kind),
            ("name", &reference.name),
            ("uid", &reference.uid),
        ] {
            if value.is_empty() {
                errors.push(FieldError::new(
                    format!("metadata.ownerReferences[{i}].{field}"),
                    "required",
                ));
            }
        }
    }
    let controllers: Vec<String> = references
        .iter()
        .filter(|r| r.is_controller())
        .map(|r| format!("{}/{}", r.kind, r.name))
        .collect();
    if controllers.len() > 1 {
        errors.push(FieldError::new(
            "metadata.ownerReferences",
            format!(
                "only one reference can have controller set to true, found {}: {}",
                controllers.len(),
                controllers.join(", ")
            ),
        ));
    }
}

pub(super) fn validate_labels(field: &str, set: &Set, errors: &mut Vec<FieldError>) {
    for (key, value) in set.iter() {
        if let Err(reason) = labels::validate_key(key) {
            errors.push(FieldError::new(field, format!("key {key:?} {reason}")));
        }
        if let Err(reason) = labels::validate_value(value) {
            errors.push(FieldError::new(
                format!("{field}.{key}"),
                format!("value {value:?} {reason}"),
            ));
        }
    }
}

/// `spec.replicas` within Kubernetes' int32 and not negative.
pub(super) fn validate_replicas(replicas: i64, errors: &mut Vec<FieldError>) {
    if replicas < 0 {
        errors.push(FieldError::new(
            "spec.replicas",
            format!("must be >= 0, got {replicas}"),
        ));
    } else if replicas > MAX_REPLICAS {
        errors.push(FieldError::new(
            "spec.replicas",
            format!("must be <= {MAX_REPLICAS} (Kubernetes' int32 limit), got {replicas}"),
        ));
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;
    use crate::api::*;

    fn set(pairs: &str) -> Set {
        pairs
            .split(',')
            .filter(|pair| !pair.is_empty())
            .map(|pair| pair.split_once('=').expect("k=v"))
            .collect()
    }

    /// A controller `ns/{name}` selecting `selector` with pods labelled `labels`.
    fn rc(name: &str, replicas: i64, selector: &str, labels: &str) -> ReplicationController {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "ns"},
            "spec": {
                "replicas": replicas,
                "selector": set(selector),
                "template": {
                    "metadata": {"labels": set(labels)},
                    "spec": {"containers": [{"name": "c", "image": "i"}]}
                }
            }
        }))
        .unwrap()
    }

    #[track_caller]
    fn check_invalid(rc: &ReplicationController, expected: &str) {
        let error = validate(rc).unwrap_err().to_string();
        assert!(error.contains(expected), "{expected:?} not in {error}");
    }

    #[test]
    fn replicas_are_kubernetes_int32() {
        validate(&rc("web", 0, "app=web", "app=web")).unwrap();
        validate(&rc("web", MAX_REPLICAS, "app=web", "app=web")).unwrap();
        check_invalid(
            &rc("web", MAX_REPLICAS + 1, "app=web", "app=web"),
            "spec.replicas: must be <= 2147483647 (Kubernetes' int32 limit), got 2147483648",
        );
        check_invalid(
            &rc("web", 3_000_000_000, "app=web", "app=web"),
            "got 3000000000",
        );
        check_invalid(&rc("web", -1, "app=web", "app=web"), "must be >= 0, got -1");
    }

    #[test]
    fn a_template_without_labels_is_invalid_even_when_an_empty_value_selects_it() {
        // As in 2014, `app=` matches a pod without `app`, so the selector matches the empty
        // template labels; the controller is invalid all the same.
        assert!(selector_matches(&set("app="), &Set::new()));
        check_invalid(
            &rc("bare", 2, "app=", ""),
            "spec.template.metadata.labels: required (must not be empty)",
        );
        validate(&rc("bare", 2, "app=", "tier=x")).unwrap();
    }

    #[track_caller]
    fn check_overlap(a: (&str, &str), b: (&str, &str), expected: Option<&str>) {
        let (a_selector, a_labels, b_selector, b_labels) = (set(a.0), set(a.1), set(b.0), set(b.1));
        let witness = pods_overlap((&a_selector, &a_labels), (&b_selector, &b_labels));
        assert_eq!(witness, expected.map(set).as_ref(), "{a:?} and {b:?}");
        let reversed = pods_overlap((&b_selector, &b_labels), (&a_selector, &a_labels));
        assert_eq!(witness.is_some(), reversed.is_some(), "symmetric");
    }

    #[test]
    fn controllers_overlap_when_ones_pods_match_the_others_selector() {
        // One selector, or one inside the other: each counts the other's pods.
        check_overlap(
            ("app=web", "app=web"),
            ("app=web", "app=web"),
            Some("app=web"),
        );
        check_overlap(
            ("app=web", "app=web"),
            ("app=web,tier=fe", "app=web,tier=fe"),
            Some("app=web,tier=fe"),
        );
        // Different selectors, but one's pods carry the other's labels.
        check_overlap(
            ("app=web", "app=web,tier=fe"),
            ("tier=fe", "tier=fe"),
            Some("app=web,tier=fe"),
        );
        // A value on a shared key differs: no pod matches both.
        check_overlap(("name=a", "name=a"), ("name=b", "name=b"), None);
        check_overlap(
            ("app=web,version=v1", "app=web,version=v1"),
            ("app=web,version=v2", "app=web,version=v2"),
            None,
        );
        // Selectors some pod could satisfy together, but neither controller makes one.
        check_overlap(("app=web", "app=web"), ("tier=fe", "tier=fe"), None);
        // `k=` matches a pod without `k` (2014), so it counts pods of any other controller
        // whose pods lack `k`.
        check_overlap(("app=", "tier=x"), ("name=db", "name=db"), Some("name=db"));
        check_overlap(("app=", "tier=x"), ("app=db", "app=db"), None);
        // An empty selector is invalid; it is reported by validation, not here.
        check_overlap(("", "app=web"), ("app=web", "app=web"), None);
    }

    #[test]
    fn a_controller_overlaps_no_other_namespace_and_not_itself() {
        let web = rc("web", 1, "app=web", "app=web");
        let twin = rc("twin", 1, "app=web", "app=web");
        assert_eq!(controllers_overlap(&web, &twin), Some(&set("app=web")));
        assert_eq!(controllers_overlap(&web, &web.clone()), None);
        let mut elsewhere = twin.clone();
        elsewhere.metadata.namespace = "other".into();
        assert_eq!(controllers_overlap(&web, &elsewhere), None);
    }

    fn small_set() -> impl Strategy<Value = Set> {
        let key = prop::sample::select(vec!["a", "b", "c"]);
        let value = prop::sample::select(vec!["", "x", "y"]);
        prop::collection::btree_map(key, value, 0..3)
            .prop_map(|map| map.into_iter().collect::<Set>())
    }

    proptest! {
        #[test]
        fn selector_matches_agrees_with_the_selector(selector in small_set(), labels in small_set()) {
            prop_assert_eq!(
                selector_matches(&selector, &labels),
                selector.as_selector().matches(&labels)
            );
        }

        /// A reported overlap names a pod both selectors match; an unreported one means
        /// neither controller's pods match the other's selector.
        #[test]
        fn an_overlap_is_reported_exactly_when_pods_are_shared(
            a_selector in small_set(), a_labels in small_set(),
            b_selector in small_set(), b_labels in small_set(),
        ) {
            match pods_overlap((&a_selector, &a_labels), (&b_selector, &b_labels)) {
                Some(witness) => {
                    prop_assert!(!witness.is_empty());
                    prop_assert!(
                        (*witness == a_labels && b_selector.as_selector().matches(witness))
                            || (*witness == b_labels && a_selector.as_selector().matches(witness))
                    );
                }
                None => {
                    let shares = |selector: &Set, labels: &Set| {
                        !selector.is_empty() && !labels.is_empty()
                            && selector.as_selector().matches(labels)
                    };
                    prop_assert!(a_selector.is_empty() || b_selector.is_empty()
                        || (!shares(&b_selector, &a_labels) && !shares(&a_selector, &b_labels)));
                }
            }
        }
    }
}
