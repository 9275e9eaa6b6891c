//! Namespaces (`pkg/registry/core/namespace/storage`, whose `Delete` overrides the
//! generic store's): stored as sent (its create fills the rest: `api::new_namespace`); a
//! delete marks the Namespace Terminating (`deletionTimestamp`, phase Terminating) for
//! the namespace controller to empty and remove, and `default`, `kube-system` and
//! `kube-public` may not be deleted (403). A delete of a terminating Namespace whose
//! `spec.finalizers` are an empty list (the namespace controller's `finalize`, through
//! the API) deletes it, as kube-apiserver's does; one stored without the field (written
//! to etcd by hand) is left to the namespace controller.

use serde_json::{json, Value};

use super::strategy::{Instead, Strategy};
use crate::api;
use crate::apiserver::errors::ApiError;

pub(crate) static STRATEGY: Strategy = Strategy {
    prepare: |_| Ok(()),
    validate: |_, _| Vec::new(),
    delete: Some(delete),
};

/// Marks the Namespace `name` Terminating at `now`; one already terminating is left as
/// it is. A namespace that only holds objects (no Namespace stored) gets a Namespace,
/// Terminating, so that it is emptied too.
///
/// # Errors
/// 403 for the namespaces that may not be deleted.
fn delete(name: &str, current: Option<Value>, now: &str) -> Result<Instead, ApiError> {
    if api::IMMORTAL_NAMESPACES.contains(&name) {
        return Err(ApiError::forbidden(
            "",
            "namespaces",
            name,
            "this namespace may not be deleted",
        ));
    }
    let mut next = match current {
        Some(current) if api::is_terminating(&current) => {
            let finalized = current
                .pointer("/spec/finalizers")
                .and_then(Value::as_array)
                .is_some_and(Vec::is_empty);
            return Ok(if finalized {
                Instead::Delete
            } else {
                Instead::Keep(current)
            });
        }
        Some(current) => current,
        None => {
            let uid = crate::apiserver::resources::stable_uid(&format!("namespace/{name}"));
            api::new_namespace(json!({}), name, &uid, now)
        }
    };
    api::start_terminating(&mut next, now);
    Ok(Instead::Write(next))
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: &str = "2024-05-01T10:00:00Z";

    #[track_caller]
    fn check(name: &str, current: Option<Value>, expected: Result<Instead, u16>) {
        let answer = delete(name, current, NOW).map_err(|e| e.code);
        assert_eq!(answer, expected);
    }

    #[test]
    fn a_delete_marks_the_namespace_terminating_once() {
        let active = json!({"metadata": {"name": "web", "uid": "u"},
                            "status": {"phase": "Active"}});
        let marked = json!({"metadata": {"name": "web", "uid": "u", "deletionTimestamp": NOW},
                            "status": {"phase": "Terminating"}});
        check("web", Some(active), Ok(Instead::Write(marked.clone())));
        check(
            "web",
            Some(marked.clone()),
            Ok(Instead::Keep(marked.clone())),
        );
        let mut finalized = marked;
        finalized["spec"]["finalizers"] = json!([]);
        check("web", Some(finalized), Ok(Instead::Delete));
    }

    #[test]
    fn a_namespace_of_objects_only_gets_a_terminating_namespace() {
        let Ok(Instead::Write(created)) = delete("web", None, NOW) else {
            panic!("a Namespace is written");
        };
        assert_eq!(created["metadata"]["name"], "web");
        assert_eq!(created["metadata"]["deletionTimestamp"], NOW);
        assert_eq!(created["status"]["phase"], "Terminating");
        let again = delete("web", None, NOW).map_err(|e| e.code);
        assert_eq!(
            again,
            Ok(Instead::Write(created)),
            "the same uid every time"
        );
    }

    #[test]
    fn the_system_namespaces_may_not_be_deleted() {
        for name in api::IMMORTAL_NAMESPACES {
            check(name, None, Err(403));
        }
    }
}
