use super::super::request::{parse_path, query};
use super::*;
use crate::apiserver::table::PODS;

/// A pod of namespace `a` created at `revision`, labelled `app`.
fn created(name: &str, revision: i64, app: &str) -> Arc<Event> {
    let object = json!({"metadata": {"name": name, "namespace": "a", "labels": {"app": app}}});
    Arc::new(Event {
        object: Arc::new(Item::new("a", name, revision, object, &PODS)),
        prev: None,
        deleted: false,
    })
}

/// A watch of pods from resourceVersion `from` with `selector`, fed `batches` (each
/// whole revisions): the `(name, resourceVersion)` of the lines it sends.
#[track_caller]
fn check_resume(
    from: i64,
    selector: &str,
    batches: &[&[(&str, i64, &str)]],
    expected: &[(&str, i64)],
) {
    let target = parse_path("/api/v1/namespaces/a/pods").unwrap();
    let query = query(&format!("labelSelector={selector}"));
    let filter = Filter::new(&target, &query).unwrap();
    let mut watch =
        Watch::new(target.resource, Format::Json, &query, Some(filter), from).resume_at(from);
    let mut lines = Vec::new();
    for batch in batches {
        let events = batch.iter().map(|(name, rv, app)| created(name, *rv, app));
        watch.take(events, |line| lines.push(line));
    }
    let got: Vec<(String, i64)> = lines
        .iter()
        .map(|line| {
            let line: serde_json::Value = serde_json::from_slice(line).unwrap();
            let metadata = &line["object"]["metadata"];
            let rv = metadata["resourceVersion"]
                .as_str()
                .unwrap()
                .parse()
                .unwrap();
            (metadata["name"].as_str().unwrap().to_string(), rv)
        })
        .collect();
    let expected: Vec<(String, i64)> = expected
        .iter()
        .map(|(n, rv)| (n.to_string(), *rv))
        .collect();
    assert_eq!(got, expected);
}

#[test]
fn a_watch_from_a_revision_of_several_events_sends_that_revision_again() {
    let (x, y, z) = ("x", "y", "z");
    // Two events at 11: the client may have been cut between them.
    check_resume(
        11,
        "",
        &[&[(x, 11, "a"), (y, 11, "a"), (z, 12, "a")]],
        &[(x, 11), (y, 11), (z, 12)],
    );
    // The same, arriving live (the cache had not reached 11), one revision a batch.
    check_resume(
        11,
        "",
        &[
            &[(z, 10, "a")],
            &[(x, 11, "a"), (y, 11, "a")],
            &[(z, 12, "a")],
        ],
        &[(x, 11), (y, 11), (z, 12)],
    );
    // One event at 11: delivered whole or not at all, so the client has it.
    check_resume(11, "", &[&[(x, 11, "a"), (z, 12, "a")]], &[(z, 12)]);
    // Two at 11, but one of them the watch's: a single-object watch never repeats.
    check_resume(
        11,
        "app=a",
        &[&[(x, 11, "a"), (y, 11, "b"), (z, 12, "a")]],
        &[(z, 12)],
    );
    // Nothing at 11 for this resource.
    check_resume(
        11,
        "",
        &[&[(z, 12, "a"), (y, 12, "a")]],
        &[(z, 12), (y, 12)],
    );
    // Two at 12 are an ordinary revision after the resume.
    check_resume(
        11,
        "",
        &[&[(x, 11, "a")], &[(z, 12, "a"), (y, 12, "a")]],
        &[(z, 12), (y, 12)],
    );
}

#[test]
fn watch_starts_follow_the_resource_version_and_initial_events() {
    assert!(matches!(
        plan_watch(&query("watch=true")).unwrap(),
        WatchStart::Snapshot
    ));
    assert!(matches!(
        plan_watch(&query("resourceVersion=0")).unwrap(),
        WatchStart::Snapshot
    ));
    assert!(matches!(
        plan_watch(&query("resourceVersion=9")).unwrap(),
        WatchStart::After(9)
    ));
    assert!(matches!(
        plan_watch(&query("sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&resourceVersion=0")).unwrap(),
        WatchStart::InitialEvents(0)
    ));
    assert_eq!(
        plan_watch(&query("sendInitialEvents=true"))
            .map_err(|e| e.code)
            .err(),
        Some(400)
    );
}

#[test]
fn a_table_watch_row_carries_the_whole_metadata_and_cells_of_what_the_printer_reads() {
    let target = parse_path("/api/v1/namespaces/a/pods").unwrap();
    let query = query("");
    let mut watch = Watch::new(target.resource, Format::Table, &query, None, 0);
    let object = json!({"kind": "Pod", "apiVersion": "v1",
        "metadata": {"name": "x", "namespace": "a", "labels": {"app": "web"}, "uid": "u"},
        "spec": {"nodeName": "node-1", "containers": [{"name": "c", "image": "i"}]},
        "status": {"phase": "Running", "podIP": "10.0.0.1"}});
    let item = Item::new("a", "x", 12, object, &PODS);
    let line: serde_json::Value = serde_json::from_slice(&watch.line("ADDED", &item)).unwrap();
    let row = &line["object"]["rows"][0];
    // kubectl keeps the row's resourceVersion, namespace and labels (`get -w`, `-L`).
    assert_eq!(
        row["object"],
        json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
            "metadata": {"name": "x", "namespace": "a", "labels": {"app": "web"},
                "uid": "u", "resourceVersion": "12"}})
    );
    assert_eq!(row["cells"][0], "x");
    assert_eq!(row["cells"][2], "Running");
    assert_eq!(row["cells"][5], "10.0.0.1");
    assert_eq!(row["cells"][6], "node-1");
}
