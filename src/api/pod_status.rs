//! What a node reports about a pod beyond its phase: `status.conditions` (the `Ready`
//! condition) and `status.containerStatuses`, in Kubernetes' v1 JSON shapes
//! (`PodCondition`, `ContainerStatus`, `ContainerState` of `pkg/apis/core/types.go`; 2014's
//! v1beta3 had neither, so these follow the later API). Unknown fields survive rewrites;
//! absent optional fields stay absent.

use serde::{Deserialize, Serialize};

use super::meta::null_as_default;
use super::Extra;

/// The condition type a pod's readiness is reported under.
pub const POD_READY: &str = "Ready";
/// `ConditionTrue`.
pub const CONDITION_TRUE: &str = "True";
/// `ConditionFalse`.
pub const CONDITION_FALSE: &str = "False";

/// `PodCondition`: one observation about a pod, `status` "True", "False" or "Unknown".
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PodCondition {
    #[serde(rename = "type", default)]
    pub type_: String,
    #[serde(default)]
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_probe_time: Option<String>,
    /// RFC 3339: when `status` last changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<String>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    #[serde(flatten)]
    pub extra: Extra,
}

/// `ContainerStatus`: how one container of the pod is doing.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ContainerStatus {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub image: String,
    #[serde(default)]
    pub ready: bool,
    #[serde(default)]
    pub restart_count: i64,
    /// The image as the runtime resolved it (a digest reference); "" until it is pulled.
    /// Always written, "" included, as Kubernetes' Go type writes it: the v1 schema
    /// requires it, so a document stored without it (by an older kcm) is served with "".
    #[serde(rename = "imageID", default, deserialize_with = "null_as_default")]
    pub image_id: String,
    /// `{runtime}://{id}` of the container; absent until one was started.
    #[serde(
        rename = "containerID",
        default,
        deserialize_with = "null_as_default",
        skip_serializing_if = "String::is_empty"
    )]
    pub container_id: String,
    #[serde(default, deserialize_with = "null_as_default")]
    pub state: ContainerState,
    #[serde(flatten)]
    pub extra: Extra,
}

/// `ContainerState`: at most one of waiting, running, terminated is set.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ContainerState {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting: Option<ContainerStateWaiting>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub running: Option<ContainerStateRunning>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub terminated: Option<ContainerStateTerminated>,
    #[serde(flatten)]
    pub extra: Extra,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ContainerStateWaiting {
    /// Why the container is not running: `ErrImagePull`, `ImagePullBackOff`,
    /// `CrashLoopBackOff`, `ContainerCreating`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    #[serde(flatten)]
    pub extra: Extra,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ContainerStateRunning {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<String>,
    #[serde(flatten)]
    pub extra: Extra,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ContainerStateTerminated {
    #[serde(default)]
    pub exit_code: i32,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<String>,
    #[serde(flatten)]
    pub extra: Extra,
}

impl ContainerState {
    /// `waiting.reason`, when waiting with one.
    pub fn waiting_reason(&self) -> Option<&str> {
        self.waiting
            .as_ref()
            .map(|w| w.reason.as_str())
            .filter(|r| !r.is_empty())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use crate::api::Pod;

    fn pod(status: Value) -> Pod {
        serde_json::from_value(json!({"metadata": {"name": "p"}, "status": status})).unwrap()
    }

    #[test]
    fn status_fields_round_trip_in_kubernetes_shape_keeping_unknown_fields() {
        let status = json!({
            "phase": "Running",
            "podIP": "10.0.0.2",
            "conditions": [{"type": "Ready", "status": "True",
                            "lastTransitionTime": "2026-01-01T00:00:00Z", "probe": 1}],
            "containerStatuses": [
                {"name": "web", "image": "nginx:1", "ready": false, "restartCount": 3,
                 "state": {"waiting": {"reason": "CrashLoopBackOff", "x": true}},
                 "imageID": "docker-pullable://nginx@sha256:1", "containerID": "c1"},
                {"name": "side", "image": "b", "imageID": "", "ready": true, "restartCount": 0,
                 "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}}},
                {"name": "done", "image": "c", "imageID": "i", "ready": false, "restartCount": 0,
                 "state": {"terminated": {"exitCode": 1, "reason": "Error"}}}
            ]
        });
        let pod = pod(status.clone());
        let s = pod.status.as_ref().unwrap();
        assert_eq!(s.container_statuses[0].restart_count, 3);
        assert_eq!(
            s.container_statuses[0].state.waiting_reason(),
            Some("CrashLoopBackOff")
        );
        assert_eq!(s.container_statuses[0].container_id, "c1");
        assert_eq!(serde_json::to_value(&pod).unwrap()["status"], status);
    }

    #[test]
    fn a_container_status_without_an_image_id_is_written_with_an_empty_one() {
        // What kcm's kubelet wrote before it reported image IDs: `imageID` is required by
        // the v1 schema, so it is written back as "" (as Kubernetes' Go type does);
        // `containerID` is optional and stays absent.
        let old = json!({"phase": "Pending", "containerStatuses": [
            {"name": "web", "image": "nginx:1", "ready": false, "restartCount": 0,
             "state": {"waiting": {"reason": "ContainerCreating"}}},
            {"name": "side", "image": "b", "imageID": null, "containerID": null,
             "ready": false, "restartCount": 0}]});
        let written = serde_json::to_value(pod(old)).unwrap();
        let statuses = written["status"]["containerStatuses"].as_array().unwrap();
        for status in statuses {
            assert_eq!(status["imageID"], "", "{status}");
            assert_eq!(status.get("containerID"), None, "{status}");
        }
    }

    #[test]
    fn absent_fields_stay_absent() {
        let status =
            json!({"phase": "Running", "conditions": [{"type": "Ready", "status": "False"}]});
        assert_eq!(
            serde_json::to_value(pod(status.clone())).unwrap()["status"],
            status
        );
        let bare = json!({"phase": "Pending"});
        assert_eq!(
            serde_json::to_value(pod(bare.clone())).unwrap()["status"],
            bare
        );
        let nulls = pod(json!({"phase": "Pending", "conditions": null, "containerStatuses": null}));
        assert_eq!(serde_json::to_value(nulls).unwrap()["status"], bare);
    }

    #[test]
    fn readiness_follows_the_ready_condition_and_2014_pods_count_once_running() {
        let ready = |status: Value| {
            let pod = pod(status);
            (pod.is_ready(), pod.ready_since().map(str::to_string))
        };
        let at = "2026-01-01T00:00:05Z";
        assert_eq!(
            ready(json!({"phase": "Running", "conditions": [
                {"type": "Initialized", "status": "False"},
                {"type": "Ready", "status": "True", "lastTransitionTime": at}]})),
            (true, Some(at.to_string()))
        );
        assert_eq!(
            ready(json!({"phase": "Running", "conditions": [
                {"type": "Ready", "status": "False", "lastTransitionTime": at}]})),
            (false, None)
        );
        assert_eq!(
            ready(
                json!({"phase": "Running", "conditions": [{"type": "Ready", "status": "Unknown"}]})
            ),
            (false, None)
        );
        // 2014 documents: no conditions at all.
        assert_eq!(ready(json!({"phase": "Running"})), (true, None));
        assert_eq!(ready(json!({"phase": "Pending"})), (false, None));
        assert_eq!(ready(json!(null)), (false, None));
        assert_eq!(pod(json!({"phase": "Failed"})).ready_condition(), None);
    }
}
