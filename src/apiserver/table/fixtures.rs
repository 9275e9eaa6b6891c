//! Fixtures of the Tables' tests (`tests.rs`, `cells/tests.rs`, `format/tests.rs`): the
//! clock they print against, each resource's printer and a served pod.

use std::time::SystemTime;

use serde_json::{json, Value};

use super::format::parse_timestamp;
use super::{Printer, NAME_AGE};

/// 2026-11-26T18:11:03Z: ten minutes after the fixtures were created.
pub(super) fn now() -> SystemTime {
    parse_timestamp("2026-11-26T18:11:03Z").unwrap()
}

/// The printer of the served resource `plural`; [`NAME_AGE`] for any other.
pub(super) fn printer(plural: &str) -> &'static Printer {
    super::super::resources::find_by_name(plural)
        .filter(|resource| resource.plural == plural)
        .map_or(&NAME_AGE, |resource| resource.printer)
}

/// A Running pod of one ready container, created at `now() - 10m`, as served.
pub(super) fn served_pod() -> Value {
    json!({"kind":"Pod","apiVersion":"v1",
        "metadata":{"name":"app-6fc9fd9bcf-rfq96","namespace":"default","uid":"7d0e",
            "resourceVersion":"141","labels":{"app":"app"},
            "creationTimestamp":"2026-11-26T18:01:03Z"},
        "spec":{"containers":[{"name":"nginx","image":"nginx:1"}],"nodeName":"node-1"},
        "status":{"phase":"Running","podIP":"10.244.166.4",
            "conditions":[{"type":"Ready","status":"True"}],
            "containerStatuses":[{"name":"nginx","ready":true,"restartCount":0,
                "state":{"running":{"startedAt":"2026-11-26T18:01:03Z"}}}]}})
}
