//! Test fixtures every replica controller's unit tests build on: pods and their labels.

use crate::api::{ObjectMeta, Pod, PodPhase, PodSpec, PodStatus};
use crate::labels::Set;

/// The labels of controller `name`'s pods, and its selector: `app={name}`.
pub fn app(name: &str) -> Set {
    [("app", name)].into_iter().collect()
}

/// Pod `ns/{name}` labelled `labels`, in `phase`, on `host` ("" for unassigned), created at
/// `created` (RFC 3339).
pub fn pod(name: &str, labels: &Set, phase: PodPhase, host: &str, created: &str) -> Pod {
    Pod {
        metadata: ObjectMeta {
            labels: labels.clone(),
            creation_timestamp: Some(created.to_string()),
            ..ObjectMeta::named("ns", name)
        },
        spec: PodSpec {
            host: host.to_string(),
            ..PodSpec::default()
        },
        status: Some(PodStatus {
            phase,
            ..PodStatus::default()
        }),
        ..Pod::default()
    }
}
