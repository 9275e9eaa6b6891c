//! Unit tests of the verbs' pure parts: manifests, tables, ages, `run`'s objects, `describe`.

use std::time::SystemTime;

use serde_json::{json, Value};

use super::*;
use crate::api::{
    self, Container, Deployment, Endpoints, IntOrString, ObjectMeta, Pod, PodPhase, PodSpec,
    PodStatus, PodTemplateSpec, ReplicaSet, ReplicationController, ResourceVersion, Service,
};
use crate::kubecfg::print::{port_text, PodSummary};
use crate::labels::Set;
use crate::registry::ObjectList;
use crate::registry::{DecodeError, EtcdAlarm};

const NOW: &str = "2024-03-10T12:00:00Z";

fn now() -> SystemTime {
    humantime::parse_rfc3339(NOW).unwrap()
}

#[track_caller]
fn check_age(created: Option<&str>, expected: &str) {
    assert_eq!(age(created, now()), expected, "age of {created:?}");
}

#[test]
fn age_is_kubectls_short_human_duration() {
    check_age(Some("2024-03-10T12:00:00Z"), "0s");
    check_age(Some("2024-03-10T11:59:48Z"), "12s");
    check_age(Some("2024-03-10T11:59:00Z"), "1m");
    check_age(Some("2024-03-10T11:55:00.5Z"), "4m");
    check_age(Some("2024-03-10T09:00:00Z"), "3h");
    check_age(Some("2024-03-09T12:00:01Z"), "23h");
    check_age(Some("2024-03-08T12:00:00Z"), "2d");
    check_age(Some("2021-03-10T12:00:00Z"), "3y");
    // A second of clock skew is "now"; more is a bad timestamp.
    check_age(Some("2024-03-10T12:00:01Z"), "0s");
    check_age(Some("2024-03-10T12:05:00Z"), "<invalid>");
    check_age(Some("yesterday"), "<invalid>");
    check_age(None, "<unknown>");
}

#[test]
fn table_columns_are_aligned_without_trailing_spaces() {
    let rows = vec![
        vec!["web".to_string(), "3".to_string(), String::new()],
        vec![
            "a-longer-name".to_string(),
            "10".to_string(),
            "x".to_string(),
        ],
    ];
    assert_eq!(
        render_table(&["NAME", "DESIRED", "LAST"], &rows),
        "NAME            DESIRED   LAST\n\
         web             3\n\
         a-longer-name   10        x\n"
    );
    assert_eq!(render_table(&["NAME"], &[]), "NAME\n");
}

fn controller(value: Value) -> ReplicationController {
    serde_json::from_value(value).unwrap()
}

fn web_controller() -> ReplicationController {
    controller(json!({
        "metadata": {"name": "web", "namespace": "default",
            "creationTimestamp": "2024-03-10T11:55:00Z"},
        "spec": {"replicas": 3, "selector": {"name": "web"},
            "template": {"metadata": {"labels": {"name": "web"}},
                "spec": {"containers": [{"name": "web", "image": "nginx",
                    "ports": [{"name": "http", "containerPort": 80}]}]}}},
        "status": {"replicas": 2}
    }))
}

fn pod(name: &str, phase: PodPhase, host: &str, ip: &str) -> Pod {
    Pod {
        metadata: ObjectMeta {
            namespace: "prod".into(),
            creation_timestamp: Some("2024-03-10T11:59:30Z".into()),
            labels: [("name", "web")].into_iter().collect(),
            ..ObjectMeta::named("prod", name)
        },
        spec: PodSpec {
            containers: vec![Container {
                image: "nginx:1.7".into(),
                ..Container::default()
            }],
            ..PodSpec::default()
        },
        status: Some(PodStatus {
            phase,
            host: host.into(),
            pod_ip: ip.into(),
            ..PodStatus::default()
        }),
        ..Pod::default()
    }
}

#[test]
fn controller_table_and_wide_and_all_namespaces() {
    let rc = web_controller();
    assert_eq!(
        render_objects(std::slice::from_ref(&rc), false, false, now()),
        "NAME   DESIRED   CURRENT   READY   AGE\n\
         web    3         2         0       5m\n"
    );
    assert_eq!(
        render_objects(&[rc], true, true, now()),
        "NAMESPACE   NAME   DESIRED   CURRENT   READY   AGE   CONTAINERS   IMAGES   SELECTOR\n\
         default     web    3         2         0       5m    web          nginx    name=web\n"
    );
}

#[test]
fn replica_set_table_shows_desired_current_ready() {
    let rs: ReplicaSet = serde_json::from_value(json!({
        "metadata": {"name": "web", "namespace": "default",
            "creationTimestamp": web_controller().metadata.creation_timestamp},
        "spec": {"selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "web", "image": "nginx"}]}}},
        "status": {"replicas": 1, "readyReplicas": 0}
    }))
    .unwrap();
    assert_eq!(
        render_objects(std::slice::from_ref(&rs), false, false, now()),
        "NAME   DESIRED   CURRENT   READY   AGE\n\
         web    1         1         0       5m\n"
    );
    assert_eq!(
        render_objects(&[rs], true, false, now()),
        "NAME   DESIRED   CURRENT   READY   AGE   CONTAINERS   IMAGES   SELECTOR\n\
         web    1         1         0       5m    web          nginx    app=web\n"
    );
}

#[test]
fn pod_table_shows_the_apis_pod_columns() {
    let pods = [
        pod("web-1", PodPhase::Running, "node-1", "10.0.0.7"),
        pod("web-2", PodPhase::Pending, "", ""),
    ];
    assert_eq!(
        render_objects(&pods, false, false, now()),
        "NAME    READY   STATUS    RESTARTS   AGE\n\
         web-1   0/1     Running   0          30s\n\
         web-2   0/1     Pending   0          30s\n"
    );
    assert_eq!(
        render_objects(&pods[..1], true, false, now()),
        "NAME    READY   STATUS    RESTARTS   AGE   IP         NODE     NOMINATED NODE   READINESS GATES\n\
         web-1   0/1     Running   0          30s   10.0.0.7   <none>   <none>           <none>\n"
    );
}

#[test]
fn pod_status_shows_waiting_and_terminated_reasons_as_kubectl_does() {
    let with = |status: serde_json::Value, containers: usize| -> Pod {
        let mut pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": "p"}, "status": status
        }))
        .unwrap();
        pod.spec.containers = vec![Default::default(); containers];
        pod
    };
    let summary = |pod: &Pod| {
        let s = PodSummary::of(pod);
        (
            format!("{}/{}", s.ready, s.containers),
            s.status,
            s.restarts,
        )
    };
    let waiting = |reason: &str, restarts: i64| {
        json!({"name": "c", "image": "i", "ready": false, "restartCount": restarts,
               "state": {"waiting": {"reason": reason}}})
    };
    let running = |ready: bool| {
        json!({"name": "c", "image": "i", "ready": ready, "restartCount": 0,
               "state": {"running": {"startedAt": "2024-03-10T11:55:00Z"}}})
    };
    assert_eq!(
        summary(&with(
            json!({"phase": "Pending", "containerStatuses": [waiting("ImagePullBackOff", 0)]}),
            1
        )),
        ("0/1".into(), "ImagePullBackOff".into(), 0)
    );
    assert_eq!(
        summary(&with(
            json!({"phase": "Running", "containerStatuses": [waiting("CrashLoopBackOff", 3), running(true)]}),
            2
        )),
        ("1/2".into(), "CrashLoopBackOff".into(), 3)
    );
    assert_eq!(
        summary(&with(
            json!({"phase": "Running", "containerStatuses": [running(false)]}),
            1
        )),
        ("0/1".into(), "Running".into(), 0)
    );
    assert_eq!(
        summary(&with(
            json!({"phase": "Failed", "containerStatuses": [
            {"name": "c", "state": {"terminated": {"exitCode": 1, "reason": "Error"}}},
            {"name": "d", "state": {"terminated": {"exitCode": 137}}}]}),
            2
        )),
        ("0/2".into(), "Error".into(), 0),
        "the first container's reason wins"
    );
    // 2014 documents report no containers: ready as their phase says.
    assert_eq!(
        summary(&with(json!({"phase": "Running"}), 2)),
        ("2/2".into(), "Running".into(), 0)
    );
    let mut deleting = with(json!({"phase": "Running"}), 1);
    deleting.metadata.deletion_timestamp = Some("2024-03-10T12:00:00Z".into());
    assert_eq!(summary(&deleting).1, "Terminating");
}

#[test]
fn service_and_endpoints_tables() {
    let service: Service = serde_json::from_value(json!({
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"selector": {"name": "web"}, "port": 8080, "containerPort": "http"}
    }))
    .unwrap();
    assert_eq!(
        render_objects(&[service], false, false, now()),
        "NAME   TYPE        CLUSTER-IP   EXTERNAL-IP   PORT(S)    AGE\n\
         web    ClusterIP   <none>       <none>        8080/TCP   <unknown>\n"
    );
    let endpoints: Endpoints = serde_json::from_value(json!({
        "metadata": {"name": "web", "namespace": "default"},
        "endpoints": ["10.0.0.1:80", "10.0.0.2:80", "10.0.0.3:80", "10.0.0.4:80"]
    }))
    .unwrap();
    let empty = Endpoints {
        metadata: ObjectMeta::named("default", "db"),
        ..Endpoints::default()
    };
    assert_eq!(
        render_objects(&[endpoints.clone(), empty], false, false, now()),
        "NAME   ENDPOINTS                                         AGE\n\
         web    10.0.0.1:80,10.0.0.2:80,10.0.0.3:80 + 1 more...   <unknown>\n\
         db     <none>                                            <unknown>\n"
    );
    // The API's endpoints Table has no `-o wide` column.
    assert_eq!(
        render_objects(std::slice::from_ref(&endpoints), true, false, now()),
        render_objects(&[endpoints], false, false, now())
    );
}

#[test]
fn run_builds_valid_objects_selected_by_name() {
    let args = RunOptions {
        name: "web".into(),
        image: "nginx".into(),
        replicas: 2,
        port: Some(80),
        expose: true,
        service_port: Some(8080),
        namespace: "default".into(),
    };
    let (rc, service) = run_objects(&args);
    api::validate(&rc).unwrap();
    let service = service.expect("--expose makes a service");
    api::validate(&service).unwrap();
    assert_eq!(rc.spec.selector.to_string(), "name=web");
    let template = rc.spec.template.as_ref().unwrap();
    assert_eq!(template.metadata.labels.to_string(), "name=web");
    let container = &template.spec.containers[0];
    assert_eq!(
        (container.name.as_str(), container.image.as_str()),
        ("web", "nginx")
    );
    assert_eq!(port_text(&container.ports[0]), "80/TCP (http)");
    assert_eq!(service.spec.port, 8080);
    assert_eq!(service.spec.container_port, Some(IntOrString::Int(80)));
    assert_eq!(service.spec.selector.to_string(), "name=web");

    let (rc, service) = run_objects(&RunOptions {
        port: None,
        expose: false,
        service_port: None,
        ..args
    });
    assert!(service.is_none());
    assert!(rc.spec.template.unwrap().spec.containers[0]
        .ports
        .is_empty());
}

#[test]
fn describe_shows_spec_pods_and_problems() {
    let rc = web_controller();
    let pods = ObjectList {
        items: vec![
            pod("web-1", PodPhase::Running, "node-1", "10.0.0.7"),
            pod("web-2", PodPhase::Failed, "node-2", ""),
        ],
        resource_version: ResourceVersion(9),
        errors: vec![DecodeError {
            kind: "Pod",
            key: "/registry/pods/default/junk".into(),
            revision: 4,
            message: "expected value".into(),
        }],
    };
    let text = describe_controller(&rc, Some(&pods), &[], &[], now());
    let expected = "\
Name:         web
Namespace:    default
Labels:       <none>
Selector:     name=web
Replicas:     3 desired, 2 current
Created:      2024-03-10T11:55:00Z (5m ago)
Pod Template:
  Labels:     name=web
  Containers:
    web:
      Image:  nginx
      Ports:  80/TCP (http)
Pods:         1 active, 1 failed, 2 in all
  NAME    READY   STATUS    RESTARTS   HOST     IP         AGE
  web-1   1/1     Running   0          node-1   10.0.0.7   30s
  web-2   0/1     Failed    0          node-2   <none>     30s
Problems:
  - pod web-2 Failed (the manager replaces it but does not delete it)
  - malformed Pod at /registry/pods/default/junk (revision 4): expected value
  - 3 replicas desired but 2 current: the replication manager has not caught up yet; is `kcm controller-manager` running?
";
    assert_eq!(text, expected);
}

#[test]
fn describe_blames_an_etcd_alarm_instead_of_asking_whether_the_manager_runs() {
    let rc = web_controller();
    let text = describe_controller(&rc, None, &[], &[EtcdAlarm::NoSpace], now());
    assert!(
        text.contains(
            "Problems:\n  - etcd's space quota is exhausted (alarm NOSPACE): it refuses every \
             write except deletes until space is freed and the alarm disarmed: \
             `etcdctl alarm list`; free space with `etcdctl compact REV`"
        ),
        "{text}"
    );
    assert!(text.contains("--quota-backend-bytes\n"), "{text}");
    assert!(
        !text.contains("is `kcm controller-manager` running?"),
        "{text}"
    );
}

#[test]
fn describe_reports_an_invalid_spec() {
    let mut rc = web_controller();
    rc.spec.selector = Set::new();
    rc.status.replicas = 3;
    let text = describe_controller(&rc, None, &[], &[], now());
    assert!(
        text.contains("Pods:         <none> (no selector)\n"),
        "{text}"
    );
    assert!(
        text.contains(
            "  - the controller-manager skips this controller: invalid \
             ReplicationController \"default/web\": spec.selector: required"
        ),
        "{text}"
    );
    assert!(!text.contains("desired but"), "{text}");
}

#[test]
fn several_kinds_print_names_with_kubectls_kind_prefix() {
    assert_eq!(kind_reference::<ReplicaSet>("web"), "replicaset.apps/web");
    assert_eq!(
        kind_reference::<ReplicationController>("web"),
        "replicationcontroller/web"
    );
    assert_eq!(kind_reference::<Pod>("p"), "pod/p");
    assert_eq!(
        render_objects_as(&[web_controller()], false, false, true, now()),
        "NAME                        DESIRED   CURRENT   READY   AGE\n\
         replicationcontroller/web   3         2         0       5m\n"
    );
}

fn template(containers: &[(&str, &str)]) -> PodTemplateSpec {
    serde_json::from_value(json!({
        "metadata": {"labels": {"app": "web"}},
        "spec": {"containers": containers.iter()
            .map(|(name, image)| json!({"name": name, "image": image, "resources": {}}))
            .collect::<Vec<_>>()}
    }))
    .unwrap()
}

fn images(template: &PodTemplateSpec) -> Vec<&str> {
    template
        .spec
        .containers
        .iter()
        .map(|c| c.image.as_str())
        .collect()
}

#[test]
fn set_images_changes_named_containers_or_all_and_refuses_unknown_names() {
    let updates = |pairs: &[&str]| -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|p| parse_image_update(p).unwrap())
            .collect()
    };
    let mut t = template(&[("web", "nginx:1"), ("log", "fluentd:1")]);
    assert!(set_images(Some(&mut t), &updates(&["web=nginx:2"])).unwrap());
    assert_eq!(images(&t), ["nginx:2", "fluentd:1"]);
    assert!(
        t.spec.containers[0].extra.contains_key("resources"),
        "unknown fields kept"
    );
    // The same image again changes nothing.
    assert!(!set_images(Some(&mut t), &updates(&["web=nginx:2"])).unwrap());
    assert!(set_images(Some(&mut t), &updates(&["*=busybox"])).unwrap());
    assert_eq!(images(&t), ["busybox", "busybox"]);
    assert!(set_images(Some(&mut t), &updates(&["web=a", "log=b"])).unwrap());
    assert_eq!(images(&t), ["a", "b"]);

    let err = set_images(Some(&mut t), &updates(&["web=c", "x=d"])).unwrap_err();
    assert_eq!(err.to_string(), r#"unable to find container named "x""#);
    let err = set_images(None, &updates(&["web=c"])).unwrap_err();
    assert_eq!(err.to_string(), r#"unable to find container named "web""#);

    for bad in ["web", "=img", "web=", ""] {
        let err = parse_image_update(bad).unwrap_err().to_string();
        assert!(err.contains("expected CONTAINER=IMAGE"), "{bad}: {err}");
    }
    assert_eq!(
        parse_image_update("web=registry:5000/nginx").unwrap(),
        ("web".to_string(), "registry:5000/nginx".to_string())
    );
}

#[test]
fn workloads_are_type_slash_name_in_kubectls_spellings() {
    for (text, kind) in [
        ("rs/web", WorkloadKind::ReplicaSet),
        ("replicaset/web", WorkloadKind::ReplicaSet),
        ("replicasets.apps/web", WorkloadKind::ReplicaSet),
        ("rc/web", WorkloadKind::ReplicationController),
        (
            "replicationcontrollers/web",
            WorkloadKind::ReplicationController,
        ),
    ] {
        let workload: Workload = text.parse().unwrap();
        assert_eq!(
            (workload.kind, workload.name.as_str()),
            (kind, "web"),
            "{text}"
        );
    }
    for (text, expected) in [
        ("web", "expected TYPE/NAME"),
        ("rs/", "expected TYPE/NAME"),
        ("rs/a/b", "expected TYPE/NAME"),
        ("svc/web", r#"unknown resource type "svc""#),
    ] {
        let err = text.parse::<Workload>().unwrap_err();
        assert!(err.contains(expected), "{text}: {err}");
    }
}

#[test]
fn current_replicas_is_a_precondition() {
    use super::scale::check_current_replicas;
    assert!(check_current_replicas(None, 3).is_ok());
    assert!(check_current_replicas(Some(3), 3).is_ok());
    assert_eq!(
        check_current_replicas(Some(2), 3).unwrap_err().to_string(),
        "Expected replicas to be 2, was 3"
    );
}

#[test]
fn deployment_table_shows_ready_up_to_date_available() {
    let d: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "web", "namespace": "default",
            "creationTimestamp": web_controller().metadata.creation_timestamp},
        "spec": {"replicas": 10, "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "nginx", "image": "nginx:2"}]}}},
        "status": {"replicas": 13, "updatedReplicas": 5, "readyReplicas": 8, "availableReplicas": 8}
    }))
    .unwrap();
    assert_eq!(
        render_objects(std::slice::from_ref(&d), false, false, now()),
        "NAME   READY   UP-TO-DATE   AVAILABLE   AGE\n\
         web    8/10    5            8           5m\n"
    );
    assert_eq!(
        render_objects_as(&[d], true, false, true, now()),
        "NAME                  READY   UP-TO-DATE   AVAILABLE   AGE   CONTAINERS   IMAGES    SELECTOR\n\
         deployment.apps/web   8/10    5            8           5m    nginx        nginx:2   app=web\n"
    );
}

#[test]
fn a_delete_marks_what_has_finalizers_or_cascades_in_the_foreground_or_orphans() {
    use crate::kubecfg::{delete_write, Cascade, DeleteWrite};
    let live = ObjectMeta::named("ns", "x");
    assert_eq!(
        delete_write(&live, Cascade::Background),
        DeleteWrite::Delete
    );
    assert_eq!(
        delete_write(&live, Cascade::Foreground),
        DeleteWrite::Mark(Some("foregroundDeletion"))
    );
    assert_eq!(
        delete_write(&live, Cascade::Orphan),
        DeleteWrite::Mark(Some("orphan"))
    );
    // Someone's finalizer: a background delete only sets the deletionTimestamp.
    let held = ObjectMeta {
        finalizers: vec!["example.com/hold".into()],
        ..live.clone()
    };
    assert_eq!(
        delete_write(&held, Cascade::Background),
        DeleteWrite::Mark(None)
    );
    let marked = ObjectMeta {
        deletion_timestamp: Some("2026-01-01T00:00:00Z".into()),
        ..held
    };
    assert_eq!(
        delete_write(&marked, Cascade::Background),
        DeleteWrite::Nothing
    );
    // Asked again for a foreground deletion: the finalizer is added.
    assert_eq!(
        delete_write(&marked, Cascade::Foreground),
        DeleteWrite::Mark(Some("foregroundDeletion"))
    );
}

#[test]
fn kinds_are_named_as_kubectl_names_them() {
    use crate::kubecfg::kubectl_kind;
    assert_eq!(kubectl_kind::<Pod>(), "pod");
    assert_eq!(kubectl_kind::<ReplicaSet>(), "replicaset.apps");
    assert_eq!(kubectl_kind::<Deployment>(), "deployment.apps");
    assert_eq!(
        kubectl_kind::<ReplicationController>(),
        "replicationcontroller"
    );
    let meta = ObjectMeta {
        finalizers: vec!["orphan".into()],
        ..ObjectMeta::default()
    };
    assert!(crate::kubecfg::pending(&meta).starts_with("finalizers orphan still pending"));
}

#[test]
fn describe_shows_owners_finalizers_and_deletion_only_when_there_are_some() {
    use crate::kubecfg::describe::ownership_lines;
    assert_eq!(ownership_lines(&ObjectMeta::default()), "");
    let meta = ObjectMeta {
        owner_references: vec![
            api::OwnerReference {
                kind: "Deployment".into(),
                name: "web".into(),
                uid: "u1".into(),
                controller: Some(true),
                ..Default::default()
            },
            api::OwnerReference {
                kind: "Service".into(),
                name: "s".into(),
                uid: "u2".into(),
                ..Default::default()
            },
        ],
        finalizers: vec!["foregroundDeletion".into()],
        deletion_timestamp: Some("2026-01-01T00:00:00Z".into()),
        ..ObjectMeta::default()
    };
    assert_eq!(
        ownership_lines(&meta),
        "Controlled By: Deployment/web (uid u1)\n\
         Owners:        Service/s (uid u2)\n\
         Finalizers:    foregroundDeletion\n\
         Terminating:   since 2026-01-01T00:00:00Z (deletionTimestamp)\n"
    );
}

#[test]
fn get_prints_the_apis_table_columns_and_no_columns_of_its_own() {
    // `-o wide` adds the API's priority-1 columns and nothing else: no OWNER,
    // FINALIZERS or DELETING, which kubectl's tables do not have either.
    let printer = crate::apiserver::TablePrinter::of("replicationcontrollers").unwrap();
    let table = render_objects(&[web_controller()], true, false, now());
    let headers: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(headers, printer.headers(true));
    for gone in ["OWNER", "FINALIZERS", "DELETING"] {
        assert!(!headers.contains(&gone), "{table}");
    }
}
