//! Unit tests of a pod's cells (`printPod`): readiness, status, restarts, init
//! containers, and the wide columns.

use serde_json::{json, Value};

use super::super::super::fixtures::{now, printer, served_pod};
use super::super::super::{row, IncludeObject};
use super::{cells, check_cells};

#[test]
fn a_running_pod_prints_like_kubectl_get_pods_wide() {
    check_cells(
        "pods",
        served_pod(),
        json!([
            "app-6fc9fd9bcf-rfq96",
            "1/1",
            "Running",
            "0",
            "10m",
            "10.244.166.4",
            "node-1",
            "<none>",
            "<none>"
        ]),
    );
}

/// A pod with the given container statuses (and phase Running unless overridden).
fn pod_with(statuses: Value, extra_status: Value, extra_metadata: Value) -> Value {
    let mut pod = json!({"metadata":{"name":"p","creationTimestamp":"2026-11-26T18:01:03Z"},
        "spec":{"containers":[{"name":"a"},{"name":"b"}]},
        "status":{"phase":"Running","containerStatuses":statuses}});
    for (key, value) in extra_status.as_object().unwrap() {
        pod["status"][key] = value.clone();
    }
    for (key, value) in extra_metadata.as_object().unwrap() {
        pod["metadata"][key] = value.clone();
    }
    pod
}

#[test]
fn pod_status_ready_and_restarts_follow_print_pod() {
    #[track_caller]
    fn check(pod: Value, ready: &str, status: &str, restarts: &str) {
        let got = cells("pods", &pod);
        assert_eq!(
            (
                got[1].as_str().unwrap(),
                got[2].as_str().unwrap(),
                got[3].as_str().unwrap()
            ),
            (ready, status, restarts),
            "{pod:#}"
        );
    }
    let running = json!({"running":{"startedAt":"2026-11-26T18:01:03Z"}});
    let none = json!({});
    // Both ready and running.
    check(
        pod_with(
            json!([{"name":"a","ready":true,"state":running},{"name":"b","ready":true,"state":running}]),
            none.clone(),
            none.clone(),
        ),
        "2/2",
        "Running",
        "0",
    );
    // Running but not ready counts as not ready.
    check(
        pod_with(
            json!([{"name":"a","ready":false,"state":running},{"name":"b","ready":true,"state":running}]),
            none.clone(),
            none.clone(),
        ),
        "1/2",
        "Running",
        "0",
    );
    // Waiting reasons win, the first container's last.
    check(
        pod_with(
            json!([{"name":"a","state":{"waiting":{"reason":"ImagePullBackOff"}}},
                {"name":"b","state":{"waiting":{"reason":"ErrImagePull"}}}]),
            json!({"phase":"Pending"}),
            none.clone(),
        ),
        "0/2",
        "ImagePullBackOff",
        "0",
    );
    check(
        pod_with(
            json!([{"name":"a","ready":true,"state":running},
                {"name":"b","restartCount":4,"state":{"waiting":{"reason":"CrashLoopBackOff"}},
                 "lastState":{"terminated":{"exitCode":1,"finishedAt":"2026-11-26T18:06:03Z"}}}]),
            none.clone(),
            none.clone(),
        ),
        "1/2",
        "CrashLoopBackOff",
        "4 (5m ago)",
    );
    // Restarts without a last termination time print just the number; several add up.
    check(
        pod_with(
            json!([{"name":"a","ready":true,"restartCount":2,"state":running},
                {"name":"b","ready":true,"restartCount":1,"state":running,
                 "lastState":{"terminated":{"exitCode":137,"finishedAt":"2026-11-26T16:11:03Z"}}}]),
            none.clone(),
            none.clone(),
        ),
        "2/2",
        "Running",
        "3 (120m ago)",
    );
    check(
        pod_with(
            json!([{"name":"a","ready":true,"restartCount":2,"state":running}]),
            none.clone(),
            none.clone(),
        ),
        "1/2",
        "Running",
        "2",
    );
    // Terminated: the reason, else Signal:N, else ExitCode:N.
    check(
        pod_with(
            json!([{"name":"a","state":{"terminated":{"exitCode":0,"reason":"Completed"}}},
                {"name":"b","state":{"terminated":{"exitCode":0,"reason":"Completed"}}}]),
            json!({"phase":"Succeeded"}),
            none.clone(),
        ),
        "0/2",
        "Completed",
        "0",
    );
    check(
        pod_with(
            json!([{"name":"a","state":{"terminated":{"exitCode":2,"reason":"Error"}}}]),
            json!({"phase":"Failed"}),
            none.clone(),
        ),
        "0/2",
        "Error",
        "0",
    );
    check(
        pod_with(
            json!([{"name":"a","state":{"terminated":{"exitCode":1}}}]),
            json!({"phase":"Failed"}),
            none.clone(),
        ),
        "0/2",
        "ExitCode:1",
        "0",
    );
    check(
        pod_with(
            json!([{"name":"a","state":{"terminated":{"exitCode":137,"signal":9}}}]),
            json!({"phase":"Failed"}),
            none.clone(),
        ),
        "0/2",
        "Signal:9",
        "0",
    );
    // Completed with a container still running is Running if Ready, else NotReady.
    let completed_and_running = json!([{"name":"a","state":{"terminated":{"exitCode":0,"reason":"Completed"}}},
        {"name":"b","ready":true,"state":running}]);
    check(
        pod_with(
            completed_and_running.clone(),
            json!({"conditions":[{"type":"Ready","status":"True"}]}),
            none.clone(),
        ),
        "1/2",
        "Running",
        "0",
    );
    check(
        pod_with(completed_and_running, none.clone(), none.clone()),
        "1/2",
        "NotReady",
        "0",
    );
    // status.reason overrides the phase.
    check(
        pod_with(
            json!([]),
            json!({"phase":"Failed","reason":"Evicted"}),
            none.clone(),
        ),
        "0/2",
        "Evicted",
        "0",
    );
    // Deletion: Terminating, unless the node was lost or the pod already finished.
    check(
        pod_with(
            json!([{"name":"a","ready":true,"state":running}]),
            none.clone(),
            json!({"deletionTimestamp":"2026-11-26T18:10:00Z"}),
        ),
        "1/2",
        "Terminating",
        "0",
    );
    check(
        pod_with(
            json!([]),
            json!({"reason":"NodeLost"}),
            json!({"deletionTimestamp":"2026-11-26T18:10:00Z"}),
        ),
        "0/2",
        "Unknown",
        "0",
    );
    check(
        pod_with(
            json!([{"name":"a","state":{"terminated":{"exitCode":0,"reason":"Completed"}}}]),
            json!({"phase":"Succeeded"}),
            json!({"deletionTimestamp":"2026-11-26T18:10:00Z"}),
        ),
        "0/2",
        "Completed",
        "0",
    );
    // Scheduling gates.
    check(
        pod_with(
            json!([]),
            json!({"phase":"Pending","conditions":[{"type":"PodScheduled","status":"False",
                "reason":"SchedulingGated"}]}),
            none.clone(),
        ),
        "0/2",
        "SchedulingGated",
        "0",
    );
    // kcm: a pod without status is Pending.
    check(
        json!({"metadata":{"name":"p"},"spec":{"containers":[{"name":"a"}]}}),
        "0/1",
        "Pending",
        "0",
    );
}

#[test]
fn init_containers_print_init_progress() {
    #[track_caller]
    fn check(init_statuses: Value, extra_status: Value, ready: &str, status: &str, restarts: &str) {
        let mut pod = json!({"metadata":{"name":"p"},
            "spec":{"initContainers":[{"name":"i1"},{"name":"i2"},{"name":"side","restartPolicy":"Always"}],
                "containers":[{"name":"c"}]},
            "status":{"phase":"Pending","initContainerStatuses":init_statuses,
                "containerStatuses":[{"name":"c","state":{"waiting":{"reason":"PodInitializing"}}}]}});
        for (key, value) in extra_status.as_object().unwrap() {
            pod["status"][key] = value.clone();
        }
        let got = cells("pods", &pod);
        assert_eq!(
            (
                got[1].as_str().unwrap(),
                got[2].as_str().unwrap(),
                got[3].as_str().unwrap()
            ),
            (ready, status, restarts),
            "{pod:#}"
        );
    }
    let done = json!({"terminated":{"exitCode":0,"reason":"Completed"}});
    let none = json!({});
    check(
        json!([{"name":"i1","state":{"running":{}}}]),
        none.clone(),
        "0/2",
        "Init:0/3",
        "0",
    );
    check(
        json!([{"name":"i1","state":done},{"name":"i2","state":{"waiting":{"reason":"PodInitializing"}}}]),
        none.clone(),
        "0/2",
        "Init:1/3",
        "0",
    );
    check(
        json!([{"name":"i1","restartCount":3,"state":{"waiting":{"reason":"CrashLoopBackOff"}},
            "lastState":{"terminated":{"exitCode":1,"finishedAt":"2026-11-26T18:10:03Z"}}}]),
        none.clone(),
        "0/2",
        "Init:CrashLoopBackOff",
        "3 (60s ago)",
    );
    check(
        json!([{"name":"i1","state":{"terminated":{"exitCode":1,"reason":"Error"}}}]),
        none.clone(),
        "0/2",
        "Init:Error",
        "0",
    );
    check(
        json!([{"name":"i1","state":{"terminated":{"exitCode":3}}}]),
        none.clone(),
        "0/2",
        "Init:ExitCode:3",
        "0",
    );
    check(
        json!([{"name":"i1","state":{"terminated":{"exitCode":137,"signal":9}}}]),
        none.clone(),
        "0/2",
        "Init:Signal:9",
        "0",
    );
    // Every init container done and the sidecar started and ready: the main containers
    // decide, and the sidecar counts towards ready.
    check(
        json!([{"name":"i1","state":done},{"name":"i2","state":done},
            {"name":"side","started":true,"ready":true,"restartCount":1,"state":{"running":{}}}]),
        json!({"phase":"Running","containerStatuses":[{"name":"c","ready":true,"state":{"running":{}}}]}),
        "2/2",
        "Running",
        "1",
    );
}

#[test]
fn pod_rows_carry_completed_conditions_for_finished_pods() {
    let succeeded = json!({"metadata":{"name":"p"},"status":{"phase":"Succeeded"}});
    assert_eq!(
        row(printer("pods"), &succeeded, IncludeObject::None, now())["conditions"],
        json!([{"type":"Completed","status":"True","reason":"Succeeded",
            "message":"The pod has completed successfully."}])
    );
    let failed = json!({"metadata":{"name":"p"},"status":{"phase":"Failed"}});
    assert_eq!(
        row(printer("pods"), &failed, IncludeObject::None, now())["conditions"],
        json!([{"type":"Completed","status":"True","reason":"Failed","message":"The pod failed."}])
    );
    assert_eq!(
        row(printer("pods"), &served_pod(), IncludeObject::None, now()).get("conditions"),
        None
    );
}

#[test]
fn pod_wide_cells_use_pod_ips_nominated_node_and_readiness_gates() {
    let pod = json!({"metadata":{"name":"p"},
        "spec":{"containers":[],
            "readinessGates":[{"conditionType":"example.com/a"},{"conditionType":"example.com/b"}]},
        "status":{"phase":"Pending","podIP":"10.0.0.9","podIPs":[{"ip":"10.0.0.1"},{"ip":"fd00::1"}],
            "nominatedNodeName":"node-2",
            "conditions":[{"type":"example.com/a","status":"True"},{"type":"example.com/b","status":"False"}]}});
    check_cells(
        "pods",
        pod,
        json!([
            "p",
            "0/0",
            "Pending",
            "0",
            "<unknown>",
            "10.0.0.1",
            "<none>",
            "node-2",
            "1/2"
        ]),
    );
}
