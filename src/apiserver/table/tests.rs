//! Unit tests of rows, Tables, `includeObject` and the column definitions.

use serde_json::json;

use super::fixtures::{now, printer, served_pod};
use super::*;

// ---- rows, tables, includeObject ----------------------------------------------------

#[test]
fn include_object_parses_the_query_parameter() {
    #[track_caller]
    fn check(value: Option<&str>, expected: Option<IncludeObject>) {
        assert_eq!(
            IncludeObject::from_query_parameter(value),
            expected,
            "{value:?}"
        );
    }
    check(None, Some(IncludeObject::Metadata));
    check(Some("None"), Some(IncludeObject::None));
    check(Some("Metadata"), Some(IncludeObject::Metadata));
    check(Some("Object"), Some(IncludeObject::Object));
    check(Some("object"), None);
    check(Some(""), None);
    assert_eq!(IncludeObject::default(), IncludeObject::Metadata);
}

#[test]
fn rows_carry_partial_object_metadata_the_whole_object_or_nothing() {
    let pod = served_pod();
    let metadata_row = row(printer("pods"), &pod, IncludeObject::Metadata, now());
    assert_eq!(
        metadata_row["object"],
        json!({"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1",
            "metadata":pod["metadata"].clone()})
    );
    assert_eq!(
        row(printer("pods"), &pod, IncludeObject::Object, now())["object"],
        pod
    );
    let none_row = row(printer("pods"), &pod, IncludeObject::None, now());
    assert_eq!(none_row.get("object"), None);
    assert_eq!(none_row.as_object().unwrap().len(), 1);
    // An object without metadata still gets PartialObjectMetadata.
    assert_eq!(
        row(
            printer("namespaces"),
            &json!({}),
            IncludeObject::Metadata,
            now()
        )["object"]["metadata"],
        json!({})
    );
}

#[test]
fn tables_carry_list_metadata_columns_and_rows() {
    let pods = [served_pod(), served_pod()];
    let table = table(
        printer("pods"),
        &pods,
        IncludeObject::Metadata,
        now(),
        "144",
        Some("eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6MTQ0LCJzdGFydCI6Mn0="),
        Some(3),
        true,
    );
    assert_eq!(table["kind"], json!("Table"));
    assert_eq!(table["apiVersion"], json!("meta.k8s.io/v1"));
    assert_eq!(
        table["metadata"],
        json!({"resourceVersion":"144",
            "continue":"eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6MTQ0LCJzdGFydCI6Mn0=",
            "remainingItemCount":3})
    );
    assert_eq!(table["columnDefinitions"].as_array().unwrap().len(), 9);
    assert_eq!(table["rows"].as_array().unwrap().len(), 2);
    assert_eq!(table["rows"][0]["cells"][0], json!("app-6fc9fd9bcf-rfq96"));
}

#[test]
fn watch_event_tables_after_the_first_leave_out_column_definitions() {
    let table = table(
        printer("pods"),
        &[served_pod()],
        IncludeObject::Metadata,
        now(),
        "",
        None,
        None,
        false,
    );
    assert_eq!(
        table.as_object().unwrap().keys().collect::<Vec<_>>(),
        ["kind", "apiVersion", "metadata", "rows"]
    );
    assert_eq!(table["metadata"], json!({}));
    let empty = super::table(
        printer("pods"),
        &[],
        IncludeObject::None,
        now(),
        "7",
        Some(""),
        None,
        true,
    );
    assert_eq!(empty["rows"], json!([]));
    assert_eq!(empty["metadata"], json!({"resourceVersion":"7"}));
}

#[test]
fn column_definitions_follow_printers_go() {
    #[track_caller]
    fn check(resource: &str, expected: &[(&str, &str, i64)]) {
        let columns = column_definitions(printer(resource));
        let got: Vec<(&str, &str, i64)> = columns
            .iter()
            .map(|c| {
                (
                    c["name"].as_str().unwrap(),
                    c["type"].as_str().unwrap(),
                    c["priority"].as_i64().unwrap(),
                )
            })
            .collect();
        assert_eq!(got, expected, "{resource}");
        for column in &columns {
            let keys: Vec<&String> = column.as_object().unwrap().keys().collect();
            assert_eq!(keys, ["name", "type", "format", "description", "priority"]);
            assert!(!column["description"].as_str().unwrap().is_empty());
            let format = if column["name"] == "Name" { "name" } else { "" };
            assert_eq!(column["format"], json!(format), "{resource} {column}");
        }
    }
    let s = "string";
    let i = "integer";
    check(
        "pods",
        &[
            ("Name", s, 0),
            ("Ready", s, 0),
            ("Status", s, 0),
            ("Restarts", s, 0),
            ("Age", s, 0),
            ("IP", s, 1),
            ("Node", s, 1),
            ("Nominated Node", s, 1),
            ("Readiness Gates", s, 1),
        ],
    );
    for resource in ["replicationcontrollers", "replicasets"] {
        check(
            resource,
            &[
                ("Name", s, 0),
                ("Desired", i, 0),
                ("Current", i, 0),
                ("Ready", i, 0),
                ("Age", s, 0),
                ("Containers", s, 1),
                ("Images", s, 1),
                ("Selector", s, 1),
            ],
        );
    }
    check(
        "deployments",
        &[
            ("Name", s, 0),
            ("Ready", s, 0),
            ("Up-to-date", s, 0),
            ("Available", s, 0),
            ("Age", s, 0),
            ("Containers", s, 1),
            ("Images", s, 1),
            ("Selector", s, 1),
        ],
    );
    check(
        "services",
        &[
            ("Name", s, 0),
            ("Type", s, 0),
            ("Cluster-IP", s, 0),
            ("External-IP", s, 0),
            ("Port(s)", s, 0),
            ("Age", s, 0),
            ("Selector", s, 1),
        ],
    );
    check(
        "endpoints",
        &[("Name", s, 0), ("Endpoints", s, 0), ("Age", s, 0)],
    );
    check(
        "namespaces",
        &[("Name", s, 0), ("Status", s, 0), ("Age", s, 0)],
    );
    check(
        "nodes",
        &[
            ("Name", s, 0),
            ("Status", s, 0),
            ("Roles", s, 0),
            ("Age", s, 0),
            ("Version", s, 0),
            ("Internal-IP", s, 1),
            ("External-IP", s, 1),
            ("OS-Image", s, 1),
            ("Kernel-Version", s, 1),
            ("Container-Runtime", s, 1),
        ],
    );
    check(
        "events",
        &[
            ("Last Seen", s, 0),
            ("Type", s, 0),
            ("Reason", s, 0),
            ("Object", s, 0),
            ("Subobject", s, 1),
            ("Source", s, 1),
            ("Message", s, 0),
            ("First Seen", s, 1),
            ("Count", s, 1),
            ("Name", s, 1),
        ],
    );
    check("anything", &[("Name", s, 0), ("Age", s, 0)]);
}

#[test]
fn tables_encoded_row_by_row_are_byte_for_byte_the_tables() {
    let mut succeeded = served_pod();
    succeeded["status"]["phase"] = json!("Succeeded");
    let mut without_metadata = served_pod();
    without_metadata.as_object_mut().unwrap().remove("metadata");
    let mut restarted = served_pod();
    restarted["status"]["containerStatuses"][0]["restartCount"] = json!(3);
    restarted["status"]["containerStatuses"][0]["lastState"] =
        json!({"terminated": {"finishedAt": "2026-11-26T18:06:03Z"}});
    let pods = [served_pod(), succeeded, without_metadata, restarted];
    for include in [
        IncludeObject::None,
        IncludeObject::Metadata,
        IncludeObject::Object,
    ] {
        for (objects, token, remaining, with_columns) in [
            (&pods[..], Some("abc"), Some(3), true),
            (&pods[..1], None, None, false),
            (&[][..], Some(""), None, true),
        ] {
            let expected = table(
                printer("pods"),
                objects,
                include,
                now(),
                "144",
                token,
                remaining,
                with_columns,
            )
            .to_string();
            // Each object as the watch cache keeps it: its JSON, its metadata's, its row.
            let encodings: Vec<_> = objects
                .iter()
                .map(|object| {
                    let metadata = object
                        .get("metadata")
                        .map(|m| serde_json::to_vec(m).unwrap());
                    let mut row = Vec::new();
                    encode_row(printer("pods"), object, &mut row);
                    (serde_json::to_vec(object).unwrap(), metadata, row)
                })
                .collect();
            let encoded = |sources: Vec<Source>| {
                let json = table_json(
                    printer("pods"),
                    sources,
                    include,
                    now(),
                    "144",
                    token,
                    remaining,
                    with_columns,
                );
                String::from_utf8(json).unwrap()
            };
            let rows = objects.len();
            let sources = encodings
                .iter()
                .map(|(object, metadata, row)| Source {
                    row,
                    object,
                    metadata: metadata.as_deref(),
                })
                .collect();
            assert_eq!(encoded(sources), expected, "{include:?}, {rows} rows");
        }
    }
}
