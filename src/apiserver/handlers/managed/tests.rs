//! One case per rule, written from the expectations of Kubernetes'
//! `test/integration/apiserver/apply/apply_test.go` (each test names its counterpart).

use super::*;
use serde_json::json;

const DEPLOYMENT: &str = "Deployment";

fn writer<'a>(manager: &'a str, subresource: &'static str) -> Writer<'a> {
    Writer {
        kind: DEPLOYMENT,
        api_version: "apps/v1",
        manager,
        subresource,
    }
}

/// A Deployment configuration with `labels`, `replicas` (left out when `None`) and
/// `containers`.
fn config(labels: Value, replicas: Option<i64>, containers: Value) -> Value {
    let mut spec = json!({
        "selector": {"matchLabels": {"app": "web"}},
        "template": {"metadata": {"labels": {"app": "web"}},
                     "spec": {"containers": containers}},
    });
    if let Some(replicas) = replicas {
        spec["replicas"] = json!(replicas);
    }
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
           "metadata": {"name": "web", "namespace": "default", "labels": labels},
           "spec": spec})
}

fn web(image: &str) -> Value {
    json!([{"name": "web", "image": image}])
}

/// Applies `config` as `manager` to `live`.
fn apply_as(manager: &str, live: Option<&Value>, config: &Value) -> Result<Value, ApiError> {
    apply(writer(manager, ""), live, config, false)
}

/// `(manager, operation, subresource)` of each entry.
fn managers(object: &Value) -> Vec<(String, String, String)> {
    entries_of(object)
        .unwrap_or_default()
        .into_iter()
        .map(|e| {
            let operation = format!("{:?}", e.operation);
            (e.manager, operation, e.subresource)
        })
        .collect()
}

fn owns(object: &Value, manager: &str, path: &[&str]) -> bool {
    let path: Vec<fieldpath::PathElement> = path
        .iter()
        .map(|f| fieldpath::PathElement::Field((*f).to_string()))
        .collect();
    entries_of(object)
        .unwrap_or_default()
        .iter()
        .any(|e| e.manager == manager && e.fields.has(&path))
}

/// `object` written by `manager` as an Update (a PUT of `next`).
fn update_as(manager: &str, object: &Value, change: impl FnOnce(&mut Value)) -> Value {
    let mut next = object.clone();
    change(&mut next);
    record(writer(manager, ""), Some(object), &mut next);
    next
}

#[test]
fn an_apply_to_nothing_creates_with_one_apply_entry() {
    // TestApplyAlsoCreates.
    let created = apply_as(
        "mgr",
        None,
        &config(json!({"app": "web"}), Some(1), web("a")),
    )
    .unwrap();
    assert_eq!(created["spec"]["replicas"], 1);
    assert_eq!(
        managers(&created),
        [("mgr".into(), "Apply".into(), String::new())]
    );
    assert!(owns(&created, "mgr", &["spec", "replicas"]));
    assert!(!owns(&created, "mgr", &["metadata", "name"]), "never owned");
}

#[test]
fn a_field_an_update_took_is_a_conflict_until_forced() {
    // TestApplyUpdateApplyConflictForced.
    let live = apply_as(
        "mgr",
        None,
        &config(json!({"app": "web"}), Some(1), web("a")),
    )
    .unwrap();
    let scaled = update_as("kubectl-client-side-apply", &live, |o| {
        o["spec"]["replicas"] = json!(5)
    });
    assert!(
        !owns(&scaled, "mgr", &["spec", "replicas"]),
        "an Update is always forced"
    );
    let again = config(json!({"app": "web"}), Some(3), web("a"));
    let refused = apply_as("mgr", Some(&scaled), &again).unwrap_err();
    assert_eq!((refused.code, refused.reason), (409, "Conflict"));
    assert_eq!(
        refused.message,
        "Apply failed with 1 conflict: conflict with \"kubectl-client-side-apply\" using apps/v1: .spec.replicas"
    );
    let status = refused.status();
    assert_eq!(
        status["details"],
        json!({"causes": [{"reason": "FieldManagerConflict",
                           "message": "conflict with \"kubectl-client-side-apply\" using apps/v1",
                           "field": ".spec.replicas"}]})
    );
    let forced = apply(writer("mgr", ""), Some(&scaled), &again, true).unwrap();
    assert_eq!(forced["spec"]["replicas"], 3);
    assert!(owns(&forced, "mgr", &["spec", "replicas"]));
    // The other manager, left with nothing, is gone.
    assert_eq!(
        managers(&forced),
        [("mgr".into(), "Apply".into(), String::new())]
    );
}

#[test]
fn the_same_value_is_co_owned_without_a_conflict() {
    let live = apply_as(
        "mgr",
        None,
        &config(json!({"app": "web"}), Some(1), web("a")),
    )
    .unwrap();
    let scaled = update_as("scaler", &live, |o| o["spec"]["replicas"] = json!(5));
    let matching = apply_as(
        "mgr",
        Some(&scaled),
        &config(json!({"app": "web"}), Some(5), web("a")),
    );
    let matching = matching.unwrap();
    assert!(owns(&matching, "mgr", &["spec", "replicas"]));
    assert!(owns(&matching, "scaler", &["spec", "replicas"]));
}

#[test]
fn a_port_without_a_protocol_is_the_item_keyed_with_tcp() {
    // TestDefaultMissingKeys: the protocol's default completes the key, so the same port
    // stated with `protocol: TCP` by another manager is the same item.
    let ports = |extra: Value| json!([{"name": "web", "image": "a", "ports": [extra]}]);
    let first = config(
        json!({"app": "web"}),
        None,
        ports(json!({"containerPort": 80})),
    );
    let live = apply_as("a", None, &first).unwrap();
    let second = config(
        json!({"app": "web"}),
        None,
        ports(json!({"containerPort": 80, "protocol": "TCP", "name": "http"})),
    );
    let merged = apply_as("b", Some(&live), &second).unwrap();
    let stored = &merged["spec"]["template"]["spec"]["containers"][0]["ports"];
    assert_eq!(stored.as_array().map(Vec::len), Some(1), "{stored}");
    assert_eq!(stored[0]["name"], "http");
}

#[test]
fn a_port_the_applier_leaves_out_goes_alone() {
    // TestApplyRemoveContainerPort.
    let ports = |ports: Value| json!([{"name": "web", "image": "a", "ports": ports}]);
    let two = config(
        json!({"app": "web"}),
        None,
        ports(json!([{"containerPort": 80}, {"containerPort": 443}])),
    );
    let live = apply_as("mgr", None, &two).unwrap();
    let one = config(
        json!({"app": "web"}),
        None,
        ports(json!([{"containerPort": 80}])),
    );
    let pruned = apply_as("mgr", Some(&live), &one).unwrap();
    let container = &pruned["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(container["ports"], json!([{"containerPort": 80}]));
    assert_eq!(container["image"], "a");
}

#[test]
fn a_field_only_the_applier_owned_goes_and_a_shared_one_stays() {
    // TestApplyUnsetExclusivelyOwnedFields and TestApplyUnsetSharedFields.
    let both = json!({"app": "web", "mine": "1", "shared": "1"});
    let live = apply_as("a", None, &config(both, None, web("x"))).unwrap();
    let shared = json!({"app": "web", "shared": "1"});
    let live = apply_as("b", Some(&live), &config(shared, None, web("x"))).unwrap();
    let left = apply_as(
        "a",
        Some(&live),
        &config(json!({"app": "web"}), None, web("x")),
    )
    .unwrap();
    assert_eq!(
        left["metadata"]["labels"],
        json!({"app": "web", "shared": "1"})
    );
}

#[test]
fn a_field_a_controller_took_stays_when_the_applier_leaves_it_out() {
    // TestApplyCanTransferFieldOwnershipToController.
    let live = apply_as(
        "mgr",
        None,
        &config(json!({"app": "web"}), Some(3), web("a")),
    )
    .unwrap();
    let scaled = update_as("controller", &live, |o| o["spec"]["replicas"] = json!(4));
    let without = apply_as(
        "mgr",
        Some(&scaled),
        &config(json!({"app": "web"}), None, web("a")),
    );
    let without = without.unwrap();
    assert_eq!(without["spec"]["replicas"], 4);
    assert!(owns(&without, "controller", &["spec", "replicas"]));
}

#[test]
fn a_list_item_a_controller_changed_a_field_of_goes_with_the_applier() {
    // TestApplyCanRemoveMapItemsContributedToByControllers.
    let two = json!([{"name": "web", "image": "a"}, {"name": "side", "image": "b"}]);
    let live = apply_as("mgr", None, &config(json!({"app": "web"}), None, two)).unwrap();
    let patched = update_as("controller", &live, |o| {
        o["spec"]["template"]["spec"]["containers"][1]["image"] = json!("c");
    });
    let one = apply_as(
        "mgr",
        Some(&patched),
        &config(json!({"app": "web"}), None, web("a")),
    );
    let containers = one.unwrap()["spec"]["template"]["spec"]["containers"].clone();
    assert_eq!(containers, json!([{"name": "web", "image": "a"}]));
}

#[test]
fn an_apply_that_changes_nothing_leaves_the_object_and_its_entries_as_they_were() {
    // TestNoOpApplyWithEmptyMap.
    let same = config(json!({}), Some(1), web("a"));
    let live = apply_as("mgr", None, &same).unwrap();
    let mut aged = live.clone();
    aged["metadata"]["managedFields"][0]["time"] = json!("2020-01-01T00:00:00Z");
    assert_eq!(apply_as("mgr", Some(&aged), &same).unwrap(), aged);
}

#[test]
fn managed_fields_of_one_empty_entry_clear_them_and_stated_entries_replace_them() {
    // TestClearManagedFieldsWithMergePatch.
    let live = apply_as(
        "mgr",
        None,
        &config(json!({"app": "web"}), Some(1), web("a")),
    )
    .unwrap();
    let cleared = update_as("kubectl-patch", &live, |o| {
        o["metadata"]["managedFields"] = json!([{}]);
    });
    assert!(cleared["metadata"].get("managedFields").is_none());
    // Entries a write states are taken (kubectl's move from client-side apply writes them).
    let stated = json!([{"manager": "kubectl", "operation": "Apply", "apiVersion": "apps/v1",
                         "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {"f:replicas": {}}}}]);
    let replaced = update_as("kubectl", &live, |o| {
        o["metadata"]["managedFields"] = stated.clone()
    });
    assert_eq!(
        managers(&replaced),
        [("kubectl".into(), "Apply".into(), String::new())]
    );
    assert!(owns(&replaced, "kubectl", &["spec", "replicas"]));
}

#[test]
fn an_untracked_object_stays_untracked_until_an_apply() {
    // kube-apiserver's skipNonApplied: objects kcm's controllers write carry no entries.
    let untracked = config(json!({"app": "web"}), Some(1), web("a"));
    let updated = update_as("kubectl-edit", &untracked, |o| {
        o["spec"]["replicas"] = json!(2)
    });
    assert!(updated["metadata"].get("managedFields").is_none());
    let mut created = untracked.clone();
    record(writer("kubectl-create", ""), None, &mut created);
    assert_eq!(
        managers(&created),
        [("kubectl-create".into(), "Update".into(), String::new())]
    );
}

#[test]
fn kubectl_moving_from_client_side_apply_takes_what_its_last_apply_explains() {
    // TestUpgradeClientSideToServerSideApply: the fields the last-applied annotation set
    // are kubectl's to take, for manager `kubectl` only, and the annotation follows.
    let csa = config(json!({"app": "web"}), Some(2), web("a"));
    let mut annotated = csa.clone();
    annotated["metadata"]["annotations"] =
        json!({LAST_APPLIED_ANNOTATION: serde_json::to_string(&csa).unwrap()});
    let mut live = annotated.clone();
    record(writer("kubectl-client-side-apply", ""), None, &mut live);
    let server_side = config(json!({"app": "web"}), Some(3), web("a"));
    let refused = apply_as("helm", Some(&live), &server_side).unwrap_err();
    assert_eq!(refused.code, 409, "another manager conflicts");
    let moved = apply_as("kubectl", Some(&live), &server_side).unwrap();
    assert_eq!(moved["spec"]["replicas"], 3);
    let last = moved["metadata"]["annotations"][LAST_APPLIED_ANNOTATION]
        .as_str()
        .unwrap();
    assert!(
        last.starts_with("{\"apiVersion\":\"apps/v1\",\"kind\":\"Deployment\""),
        "{last}"
    );
    assert!(
        last.contains("\"replicas\":3") && last.ends_with('\n'),
        "{last}"
    );
    // A value the annotation does not explain (changed since) stays a conflict.
    let edited = update_as("kubectl-edit", &live, |o| o["spec"]["replicas"] = json!(7));
    assert_eq!(
        apply_as("kubectl", Some(&edited), &server_side)
            .unwrap_err()
            .code,
        409
    );
}

#[test]
fn an_endpoint_owns_only_its_part() {
    // reset_fields_test.go: the main resource never owns the status, `/status` only it.
    let mut with_status = config(json!({"app": "web"}), Some(1), web("a"));
    with_status["status"] = json!({"replicas": 9});
    let main = apply_as("mgr", None, &with_status).unwrap();
    assert!(main.get("status").is_none() && !owns(&main, "mgr", &["status"]));
    let mut live = main;
    live["metadata"]["managedFields"][0]["time"] = json!("2020-01-01T00:00:00Z");
    let status = apply(writer("ctl", "status"), Some(&live), &with_status, false).unwrap();
    assert_eq!(status["status"]["replicas"], 9);
    // Apply entries are ordered by time.
    assert_eq!(
        managers(&status),
        [
            ("mgr".into(), "Apply".into(), String::new()),
            ("ctl".into(), "Apply".into(), "status".into()),
        ]
    );
    assert!(owns(&status, "ctl", &["status", "replicas"]));
    assert!(!owns(&status, "ctl", &["spec", "replicas"]));
}

#[test]
fn a_configuration_is_checked_against_the_endpoint() {
    let w = writer("mgr", "");
    let mut stated = config(json!({}), None, web("a"));
    stated["metadata"]["managedFields"] = json!([]);
    assert_eq!(
        check_config(w, &stated).unwrap_err().message,
        "metadata.managedFields must be nil"
    );
    let mut other = config(json!({}), None, web("a"));
    other["apiVersion"] = json!("apps/v1beta1");
    assert_eq!(
        check_config(w, &other).unwrap_err().message,
        "Incorrect version specified in apply patch. Specified patch version: apps/v1beta1, expected: apps/v1"
    );
    assert_eq!(check_config(w, &json!([1])).unwrap_err().code, 400);
    let duplicated = config(json!({}), None, json!([{"name": "c"}, {"name": "c"}]));
    let refused = apply_as("mgr", None, &duplicated).unwrap_err();
    assert_eq!(refused.code, 422);
    assert!(
        refused
            .message
            .contains("duplicate entries for key [name=\"c\"]"),
        "{}",
        refused.message
    );
}

#[test]
fn the_manager_is_the_parameter_else_the_user_agents_product_and_is_checked() {
    let query = |text: &str| Query::parse(Some(text));
    let mut headers = HeaderMap::new();
    headers.insert(
        header::USER_AGENT,
        "kubectl/v1.32.0 (linux/amd64)".parse().unwrap(),
    );
    let agent = Manager::parse(&query(""), &headers).unwrap();
    assert_eq!((agent.name.as_str(), agent.stated), ("kubectl", false));
    let named = Manager::parse(&query("fieldManager=helm&force=true"), &headers).unwrap();
    assert_eq!(
        (named.name.as_str(), named.force, named.stated),
        ("helm", true, true)
    );
    let long = format!("fieldManager={}", "m".repeat(129));
    assert_eq!(
        Manager::parse(&query(&long), &headers).unwrap_err().code,
        422
    );
    assert_eq!(
        Manager::parse(&query("force=maybe"), &headers)
            .unwrap_err()
            .code,
        400
    );
    let required = agent.check_patch(true).unwrap_err();
    assert_eq!(
        required.message,
        "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch"
    );
    let forced = named.check_patch(false).unwrap_err();
    assert_eq!(forced.code, 422);
    assert!(
        forced.message.contains("force: Forbidden"),
        "{}",
        forced.message
    );
}
