//! The real kubectl (1.32, through the dispatcher on PATH) against kcm's Kubernetes API,
//! started the way a user starts it (`kcm up`, or a bare `kcm apiserver`), with objects
//! written by kcm's own CLI and its controllers. Each assertion is what kubectl prints
//! against kube-apiserver for the same objects: discovery and version, `get` in every
//! output and selector form, `get all`, nodes and namespaces, `describe` of every kind,
//! `get -w` following the controllers (the writes themselves are in `api_writes`).

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;
use std::time::Duration;

use serde_json::Value;

use crate::support::kubectl::{start_apiserver, start_up, Api, Table};
use crate::support::objects::{current_revision, pod_json, pod_key, put_json};
use crate::support::{eventually, with_timeout};

/// Bound on each test (each takes well under this on two busy cores).
const LIMIT: Duration = Duration::from_secs(90);
/// How long the controllers and kubelets may take to converge what the CLI wrote.
const CONVERGE: Duration = Duration::from_secs(40);
/// How long a watching kubectl may take to print an event.
const WATCH: Duration = Duration::from_secs(20);

/// The set of `items`.
fn set<I: IntoIterator<Item = S>, S: Into<String>>(items: I) -> BTreeSet<String> {
    items.into_iter().map(Into::into).collect()
}

/// `line` with runs of whitespace squashed to one space (describe pads with spaces).
fn squash(line: &str) -> String {
    line.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Whether `text` has a line that reads `expected` once spaces are squashed.
fn has_line(text: &str, expected: &str) -> bool {
    text.lines().any(|line| squash(line) == expected)
}

/// Whether `text` has a line that starts with `prefix` once spaces are squashed.
fn has_line_starting(text: &str, prefix: &str) -> bool {
    text.lines().any(|line| squash(line).starts_with(prefix))
}

/// Asserts that a `describe` printed `expected` as one (squashed) line.
#[track_caller]
fn assert_line(what: &str, text: &str, expected: &str) {
    assert!(
        has_line(text, expected),
        "{what}: no line {expected:?} in:\n{text}"
    );
}

/// Asserts the `Events:` section a describe ends with: `Events: <none>` or a table.
#[track_caller]
fn assert_events_section(what: &str, text: &str) {
    assert!(
        has_line(text, "Events: <none>") || has_line_starting(text, "Type Reason Age From Message"),
        "{what}: no Events section in:\n{text}"
    );
}

/// Waits until `kubectl get pods` shows exactly `n` pods, every one `1/1 Running`.
async fn wait_pods_running(api: &Api, n: usize) -> Table {
    eventually(
        CONVERGE,
        &format!("kubectl get pods: {n} pods 1/1 Running"),
        || async {
            let out = api.kubectl.run(&["get", "pods"]).await;
            let table = Table::parse(&out.stdout);
            out.status.success()
                && table.rows.len() == n
                && table.column("READY").iter().all(|ready| ready == "1/1")
                && table
                    .column("STATUS")
                    .iter()
                    .all(|status| status == "Running")
        },
    )
    .await;
    api.kubectl.table(&["get", "pods"]).await
}

/// Each pod `kubectl get pods -l {selector}` lists, with its resourceVersion.
async fn resource_versions(api: &Api, selector: &str) -> BTreeMap<String, String> {
    let stdout = api
        .kubectl
        .ok(&["get", "pods", "-l", selector, "-o", "json"])
        .await;
    let list: Value = serde_json::from_str(&stdout).expect("-o json is JSON");
    list["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|pod| {
            let metadata = &pod["metadata"];
            let field = |name: &str| metadata[name].as_str().unwrap_or_default().to_owned();
            (field("name"), field("resourceVersion"))
        })
        .collect()
}

/// The names of the pods `kubectl get pods -l {selector}` lists.
async fn pod_names(api: &Api, selector: &str) -> BTreeSet<String> {
    let stdout = api
        .kubectl
        .ok(&["get", "pods", "-l", selector, "-o", "name"])
        .await;
    stdout
        .lines()
        .map(|line| {
            line.strip_prefix("pod/")
                .unwrap_or_else(|| panic!("{line:?}"))
                .to_owned()
        })
        .collect()
}

// ---------------------------------------------------------------------------------------
// 1 and 6: version, discovery, and a write that finds nothing.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_sees_a_1_32_server_with_kcms_resources_and_a_write_finding_nothing_changes_nothing(
) {
    with_timeout(LIMIT, async {
        let Some(api) = start_apiserver().await else {
            return;
        };
        let client = api.etcd.client().await;
        put_json(
            &client,
            &pod_key("default", "solo"),
            &pod_json("default", "solo", "solo"),
        )
        .await;

        // Minor 32: the dispatcher on PATH runs kubectl 1.32 for it.
        let version: Value =
            serde_json::from_str(&api.kubectl.ok(&["version", "-o", "json"]).await)
                .expect("kubectl version -o json prints JSON");
        let server = &version["serverVersion"];
        assert_eq!(server["major"], "1", "{version:#}");
        assert_eq!(server["minor"], "32", "{version:#}");
        let git_version = server["gitVersion"].as_str().unwrap_or_default();
        assert!(git_version.starts_with("v1.32.0-kcm."), "{version:#}");

        // Exactly kcm's thirteen resources, with kube-apiserver's short names and scopes.
        let resources = api.kubectl.table(&["api-resources"]).await;
        assert_eq!(
            resources.columns,
            ["NAME", "SHORTNAMES", "APIVERSION", "NAMESPACED", "KIND"]
        );
        let got: BTreeSet<Vec<String>> = resources.rows.iter().cloned().collect();
        let expected: BTreeSet<Vec<String>> = [
            ["pods", "po", "v1", "true", "Pod"],
            [
                "replicationcontrollers",
                "rc",
                "v1",
                "true",
                "ReplicationController",
            ],
            ["services", "svc", "v1", "true", "Service"],
            ["endpoints", "ep", "v1", "true", "Endpoints"],
            ["namespaces", "ns", "v1", "false", "Namespace"],
            ["nodes", "no", "v1", "false", "Node"],
            ["events", "ev", "v1", "true", "Event"],
            ["replicasets", "rs", "apps/v1", "true", "ReplicaSet"],
            ["deployments", "deploy", "apps/v1", "true", "Deployment"],
            ["configmaps", "cm", "v1", "true", "ConfigMap"],
            ["secrets", "", "v1", "true", "Secret"],
            ["serviceaccounts", "sa", "v1", "true", "ServiceAccount"],
            ["leases", "", "coordination.k8s.io/v1", "true", "Lease"],
        ]
        .iter()
        .map(|row| row.iter().map(|cell| cell.to_string()).collect())
        .collect();
        assert_eq!(got, expected, "kubectl api-resources:\n{resources:?}");

        // The pod written to etcd is served. A write that finds nothing (an event's delete:
        // events are written through the API too, by controllers run as API clients)
        // answers NotFound and changes nothing.
        assert_eq!(
            api.kubectl.ok(&["get", "pod", "solo", "-o", "name"]).await,
            "pod/solo\n"
        );
        let before = current_revision(&client).await;
        let out = api.kubectl.run(&["delete", "event", "e-1"]).await;
        assert_eq!(out.status.code(), Some(1), "kubectl delete event: {out:?}");
        assert!(
            out.stderr.starts_with("Error from server (NotFound)"),
            "kubectl delete event: {out:?}"
        );
        assert_eq!(
            current_revision(&client).await,
            before,
            "nothing written to etcd"
        );
    })
    .await;
}

// ---------------------------------------------------------------------------------------
// 2: kubectl get pods, every output and selector.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_get_pods_prints_every_output_and_selects_as_kube_apiserver_does() {
    with_timeout(LIMIT, async {
        let Some(api) = start_up(2).await else {
            return;
        };
        api.kcm(&[
            "run",
            "web",
            "--image",
            "nginx",
            "--replicas",
            "3",
            "--port",
            "80",
            "--expose",
        ])
        .await;
        api.kcm(&[
            "create",
            "deployment",
            "app",
            "--image",
            "nginx:1",
            "--replicas",
            "4",
        ])
        .await;
        let kubectl = &api.kubectl;

        // The default table: kube-apiserver's Pod columns, every pod Ready and Running.
        let pods = wait_pods_running(&api, 7).await;
        assert_eq!(pods.columns, ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]);
        assert!(pods.column("RESTARTS").iter().all(|r| r == "0"), "{pods:?}");
        let names = set(pods.column("NAME"));
        let web: BTreeSet<String> = names
            .iter()
            .filter(|n| n.starts_with("web-"))
            .cloned()
            .collect();
        let app: BTreeSet<String> = names
            .iter()
            .filter(|n| n.starts_with("app-"))
            .cloned()
            .collect();
        assert_eq!((web.len(), app.len()), (3, 4), "{names:?}");

        // -o wide: the IP and NODE columns filled.
        let wide = kubectl.table(&["get", "pods", "-o", "wide"]).await;
        assert_eq!(
            wide.columns,
            [
                "NAME",
                "READY",
                "STATUS",
                "RESTARTS",
                "AGE",
                "IP",
                "NODE",
                "NOMINATED NODE",
                "READINESS GATES"
            ]
        );
        assert_eq!(set(wide.column("NAME")), names);
        for name in &names {
            let ip = wide.cell(name, "IP");
            assert!(ip.parse::<Ipv4Addr>().is_ok(), "{name}: IP {ip:?}");
            let node = wide.cell(name, "NODE");
            assert!(
                node == "node-1" || node == "node-2",
                "{name}: NODE {node:?}"
            );
            assert_eq!(wide.cell(name, "NOMINATED NODE"), "<none>");
        }

        // -o json: a v1 List of v1 Pods, spec.nodeName and status.podIP as -o wide showed.
        let list: Value = serde_json::from_str(&kubectl.ok(&["get", "pods", "-o", "json"]).await)
            .expect("-o json is JSON");
        assert_eq!(list["kind"], "List");
        assert_eq!(list["apiVersion"], "v1");
        let items = list["items"].as_array().expect("items");
        assert_eq!(items.len(), 7);
        let mut on_node_1 = BTreeSet::new();
        for item in items {
            let name = item["metadata"]["name"].as_str().expect("metadata.name");
            assert_eq!(item["apiVersion"], "v1", "{item:#}");
            assert_eq!(item["kind"], "Pod", "{item:#}");
            assert_eq!(item["metadata"]["namespace"], "default", "{item:#}");
            assert!(
                item["metadata"]["resourceVersion"]
                    .as_str()
                    .is_some_and(|rv| !rv.is_empty()),
                "{item:#}"
            );
            assert_eq!(
                item["spec"]["nodeName"],
                wide.cell(name, "NODE").as_str(),
                "{item:#}"
            );
            assert_eq!(
                item["status"]["podIP"],
                wide.cell(name, "IP").as_str(),
                "{item:#}"
            );
            assert_eq!(item["status"]["phase"], "Running", "{item:#}");
            if item["spec"]["nodeName"] == "node-1" {
                on_node_1.insert(name.to_owned());
            }
        }

        // -o yaml: the same List.
        let yaml: Value =
            serde_yaml_ng::from_str(&kubectl.ok(&["get", "pods", "-o", "yaml"]).await)
                .expect("-o yaml is YAML");
        assert_eq!(yaml["kind"], "List");
        let yaml_items = yaml["items"].as_array().expect("items");
        assert_eq!(yaml_items.len(), 7);
        assert!(
            yaml_items.iter().all(|item| item["apiVersion"] == "v1"
                && item["spec"]["nodeName"]
                    .as_str()
                    .is_some_and(|n| n.starts_with("node-"))),
            "{yaml:#}"
        );

        // -o name and -o jsonpath.
        let by_name = kubectl.ok(&["get", "pods", "-o", "name"]).await;
        assert_eq!(
            set(by_name.lines()),
            set(names.iter().map(|n| format!("pod/{n}")))
        );
        let jsonpath = kubectl
            .ok(&["get", "pods", "-o", "jsonpath={.items[*].metadata.name}"])
            .await;
        assert_eq!(set(jsonpath.split_whitespace()), names);

        // -A: the NAMESPACE column filled (from each row's object metadata).
        let all = kubectl.table(&["get", "pods", "-A"]).await;
        assert_eq!(
            all.columns,
            ["NAMESPACE", "NAME", "READY", "STATUS", "RESTARTS", "AGE"]
        );
        assert!(
            all.column("NAMESPACE").iter().all(|ns| ns == "default"),
            "{all:?}"
        );
        assert_eq!(set(all.column("NAME")), names);

        // Set-based label selectors.
        assert_eq!(pod_names(&api, "app in (app)").await, app);
        assert_eq!(pod_names(&api, "!missing").await, names);
        assert_eq!(pod_names(&api, "!app").await, web);
        assert_eq!(pod_names(&api, "name notin (web),app").await, app);

        // Field selectors.
        let field = |selector: &'static str| async move {
            let out = kubectl
                .run(&["get", "pods", "--field-selector", selector, "-o", "name"])
                .await;
            assert!(out.status.success(), "--field-selector {selector}: {out:?}");
            set(out
                .stdout
                .lines()
                .map(|l| l.trim_start_matches("pod/").to_owned()))
        };
        assert_eq!(field("spec.nodeName=node-1").await, on_node_1);
        let on_node_2 = field("spec.nodeName=node-2").await;
        assert_eq!(on_node_2, &names - &on_node_1);
        assert_eq!(field("status.phase=Running").await, names);
        assert_eq!(field("status.phase!=Running").await, BTreeSet::new());

        // --show-labels: the LABELS column from each row's object metadata.
        let labels = kubectl.table(&["get", "pods", "--show-labels"]).await;
        assert_eq!(labels.columns.last().map(String::as_str), Some("LABELS"));
        for name in &web {
            assert_eq!(labels.cell(name, "LABELS"), "name=web");
        }
        for name in &app {
            let cell = labels.cell(name, "LABELS");
            assert!(
                cell.starts_with("app=app,pod-template-hash="),
                "{name}: {cell:?}"
            );
        }

        // --chunk-size=2: four pages (limit/continue), merged into the same rows.
        let chunked = kubectl.table(&["get", "pods", "--chunk-size=2"]).await;
        assert_eq!(chunked.rows.len(), 7, "{chunked:?}");
        assert_eq!(set(chunked.column("NAME")), names);
        assert_eq!(chunked.columns, pods.columns);

        // One pod by name, and one that does not exist.
        let one = web.iter().next().expect("a web pod");
        let single = kubectl.table(&["get", "pod", one]).await;
        assert_eq!(single.rows.len(), 1);
        assert_eq!(single.cell(one, "READY"), "1/1");
        assert_eq!(single.cell(one, "STATUS"), "Running");
        let missing = kubectl.run(&["get", "pod", "nope"]).await;
        assert_eq!(missing.status.code(), Some(1), "{missing:?}");
        assert_eq!(missing.stdout, "");
        assert_eq!(
            missing.stderr.trim_end(),
            r#"Error from server (NotFound): pods "nope" not found"#
        );
    })
    .await;
}

// ---------------------------------------------------------------------------------------
// 3 and 4: get all, nodes, namespaces, every controller kind; describe of every kind.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_get_all_nodes_namespaces_and_describe_show_every_kind() {
    with_timeout(LIMIT, async {
        let Some(api) = start_up(2).await else {
            return;
        };
        api.kcm(&[
            "run",
            "web",
            "--image",
            "nginx",
            "--replicas",
            "2",
            "--port",
            "80",
            "--expose",
        ])
        .await;
        api.kcm(&[
            "create",
            "deployment",
            "app",
            "--image",
            "nginx:1",
            "--replicas",
            "2",
        ])
        .await;
        let kubectl = &api.kubectl;
        wait_pods_running(&api, 4).await;
        eventually(
            CONVERGE,
            "controllers' status and the endpoints caught up",
            || async {
                let out = kubectl.run(&["get", "rc,deploy,ep", "-o", "json"]).await;
                let list: Value = serde_json::from_str(&out.stdout).unwrap_or_default();
                let items = list["items"].as_array().cloned().unwrap_or_default();
                let ready = |kind: &str| {
                    items
                        .iter()
                        .any(|i| i["kind"] == kind && i["status"]["readyReplicas"] == 2)
                };
                let addresses = items
                    .iter()
                    .filter(|i| i["kind"] == "Endpoints")
                    .flat_map(|i| i["subsets"].as_array().cloned().unwrap_or_default())
                    .map(|s| s["addresses"].as_array().map_or(0, Vec::len))
                    .sum::<usize>();
                ready("ReplicationController") && ready("Deployment") && addresses == 2
            },
        )
        .await;
        let rs_name = kubectl.ok(&["get", "rs", "-o", "name"]).await;
        let rs_name = rs_name
            .trim()
            .strip_prefix("replicaset.apps/")
            .expect("one rs")
            .to_owned();
        assert!(rs_name.starts_with("app-"), "{rs_name}");

        // get all: the "all" category, in kubectl's order, one table per kind.
        let all = Table::parse_all(&kubectl.ok(&["get", "all"]).await);
        let kinds: Vec<String> = all
            .iter()
            .map(|table| {
                let first = table
                    .rows
                    .first()
                    .map(|row| row[0].clone())
                    .unwrap_or_default();
                first
                    .split_once('/')
                    .map(|(kind, _)| kind.to_owned())
                    .unwrap_or(first)
            })
            .collect();
        assert_eq!(
            kinds,
            [
                "pod",
                "replicationcontroller",
                "service",
                "deployment.apps",
                "replicaset.apps"
            ],
            "{all:#?}"
        );
        assert_eq!(all[0].rows.len(), 4);
        assert!(
            all[0].column("STATUS").iter().all(|s| s == "Running"),
            "{:?}",
            all[0]
        );
        let rc = &all[1];
        assert_eq!(rc.columns, ["NAME", "DESIRED", "CURRENT", "READY", "AGE"]);
        assert_eq!(
            rc.rows,
            [[
                "replicationcontroller/web",
                "2",
                "2",
                "2",
                rc.rows[0][4].as_str()
            ]]
        );
        let svc = &all[2];
        assert_eq!(
            svc.columns,
            [
                "NAME",
                "TYPE",
                "CLUSTER-IP",
                "EXTERNAL-IP",
                "PORT(S)",
                "AGE"
            ]
        );
        assert_eq!(svc.cell("service/web", "TYPE"), "ClusterIP");
        assert_eq!(svc.cell("service/web", "PORT(S)"), "80/TCP");
        let deploy = &all[3];
        assert_eq!(
            deploy.columns,
            ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"]
        );
        let cells =
            ["READY", "UP-TO-DATE", "AVAILABLE"].map(|c| deploy.cell("deployment.apps/app", c));
        assert_eq!(cells, ["2/2", "2", "2"], "{deploy:?}");
        let rs = &all[4];
        assert_eq!(rs.columns, ["NAME", "DESIRED", "CURRENT", "READY", "AGE"]);
        let rs_row = format!("replicaset.apps/{rs_name}");
        assert_eq!(
            (
                rs.cell(&rs_row, "DESIRED"),
                rs.cell(&rs_row, "CURRENT"),
                rs.cell(&rs_row, "READY")
            ),
            ("2".into(), "2".into(), "2".into())
        );

        // Nodes: kcm up's two kubelets, Ready.
        let nodes = kubectl.table(&["get", "nodes"]).await;
        assert_eq!(nodes.columns, ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]);
        assert_eq!(nodes.column("NAME"), ["node-1", "node-2"]);
        assert_eq!(nodes.column("STATUS"), ["Ready", "Ready"]);
        assert!(
            nodes
                .column("VERSION")
                .iter()
                .all(|v| v.starts_with("v1.32.0-kcm.")),
            "{nodes:?}"
        );

        // Namespaces: the four kube-apiserver creates (kcm's objects are all in default).
        let namespaces = kubectl.table(&["get", "ns"]).await;
        assert_eq!(namespaces.columns, ["NAME", "STATUS", "AGE"]);
        assert_eq!(
            namespaces.column("NAME"),
            ["default", "kube-node-lease", "kube-public", "kube-system"]
        );
        assert!(
            namespaces.column("STATUS").iter().all(|s| s == "Active"),
            "{namespaces:?}"
        );

        // Several kinds across namespaces: one table each, NAMESPACE filled.
        let multi = Table::parse_all(&kubectl.ok(&["get", "rc,rs,deploy,svc,ep", "-A"]).await);
        let first_names: Vec<String> = multi.iter().map(|t| t.column("NAME")[0].clone()).collect();
        assert_eq!(
            first_names,
            [
                "replicationcontroller/web".to_owned(),
                rs_row.clone(),
                "deployment.apps/app".to_owned(),
                "service/web".to_owned(),
                "endpoints/web".to_owned(),
            ],
            "{multi:#?}"
        );
        for table in &multi {
            assert_eq!(table.columns[0], "NAMESPACE", "{table:?}");
            assert_eq!(table.rows.len(), 1, "{table:?}");
            assert_eq!(table.rows[0][0], "default", "{table:?}");
        }
        let endpoints = multi[4].cell("endpoints/web", "ENDPOINTS");
        let mut ports: Vec<&str> = endpoints
            .split(',')
            .map(|e| e.rsplit(':').next().unwrap_or(""))
            .collect();
        ports.dedup();
        assert_eq!(
            (endpoints.split(',').count(), ports),
            (2, vec!["80"]),
            "{endpoints}"
        );

        // describe, each kind: exit 0, nothing on stderr, the fields kubectl computes.
        let app_pod = pod_names(&api, "app=app")
            .await
            .into_iter()
            .next()
            .expect("an app pod");
        let pod = kubectl.ok(&["describe", "pod", &app_pod]).await;
        assert_line("describe pod", &pod, &format!("Name: {app_pod}"));
        assert_line("describe pod", &pod, "Status: Running");
        assert_line(
            "describe pod",
            &pod,
            &format!("Controlled By: ReplicaSet/{rs_name}"),
        );
        assert!(
            has_line_starting(&pod, "Node: node-"),
            "describe pod:\n{pod}"
        );
        assert_events_section("describe pod", &pod);

        let rc = kubectl.ok(&["describe", "rc", "web"]).await;
        assert_line("describe rc", &rc, "Name: web");
        assert_line("describe rc", &rc, "Replicas: 2 current / 2 desired");
        assert_events_section("describe rc", &rc);

        let rs = kubectl.ok(&["describe", "rs", &rs_name]).await;
        assert_line("describe rs", &rs, &format!("Name: {rs_name}"));
        assert_line("describe rs", &rs, "Controlled By: Deployment/app");
        assert_line(
            "describe rs",
            &rs,
            "Pods Status: 2 Running / 0 Waiting / 0 Succeeded / 0 Failed",
        );
        assert_events_section("describe rs", &rs);

        let deploy = kubectl.ok(&["describe", "deploy", "app"]).await;
        assert_line("describe deploy", &deploy, "Name: app");
        assert_line(
            "describe deploy",
            &deploy,
            "Replicas: 2 desired | 2 updated | 2 total | 2 available | 0 unavailable",
        );
        assert_line("describe deploy", &deploy, "StrategyType: RollingUpdate");
        assert_line(
            "describe deploy",
            &deploy,
            &format!("NewReplicaSet: {rs_name} (2/2 replicas created)"),
        );
        assert_events_section("describe deploy", &deploy);

        let svc = kubectl.ok(&["describe", "svc", "web"]).await;
        assert_line("describe svc", &svc, "Name: web");
        assert_line("describe svc", &svc, "Selector: name=web");
        assert_line("describe svc", &svc, "Type: ClusterIP");
        assert_line("describe svc", &svc, "Port: <unset> 80/TCP");
        assert_events_section("describe svc", &svc);

        let node = kubectl.ok(&["describe", "node", "node-1"]).await;
        assert_line("describe node", &node, "Name: node-1");
        assert!(
            node.lines()
                .any(|l| l.split_whitespace().take(2).eq(["Ready", "True"])),
            "describe node: no Ready True condition in:\n{node}"
        );
        let on_node_1 = kubectl
            .ok(&[
                "get",
                "pods",
                "-A",
                "--field-selector",
                "spec.nodeName=node-1",
                "-o",
                "name",
            ])
            .await
            .lines()
            .count();
        assert_line(
            "describe node",
            &node,
            &format!("Non-terminated Pods: ({on_node_1} in total)"),
        );
        assert_events_section("describe node", &node);

        // Last, as kubectl counts them: the rc's pods are those it controls (a controller
        // ownerReference with its uid), Running.
        assert_line(
            "describe rc",
            &rc,
            "Pods Status: 2 Running / 0 Waiting / 0 Succeeded / 0 Failed",
        );
    })
    .await;
}

// ---------------------------------------------------------------------------------------
// 5: kubectl get pods -w and --watch-only while the controllers work.

/// The NAME cell of a watch line (the first word; the second with --output-watch-events).
fn watched_name(line: &str, events: bool) -> Option<&str> {
    line.split_whitespace().nth(usize::from(events))
}

/// Whether `lines` hold a row for pod `name` (`events`: preceded by the event `kind`).
fn shows(lines: &[String], name: &str, events: Option<&str>) -> bool {
    lines.iter().any(|line| {
        let mut words = line.split_whitespace();
        match events {
            Some(kind) => words.next() == Some(kind) && words.next() == Some(name),
            None => words.next() == Some(name),
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_get_pods_watch_follows_creates_heals_scales_and_deletes() {
    with_timeout(LIMIT, async {
        let Some(api) = start_up(2).await else {
            return;
        };
        // Pods that exist before the watches start.
        api.kcm(&[
            "create",
            "deployment",
            "app",
            "--image",
            "nginx:1",
            "--replicas",
            "2",
        ])
        .await;
        wait_pods_running(&api, 2).await;
        let versions_before = resource_versions(&api, "app=app").await;
        let before = set(versions_before.keys().cloned());

        let mut watch = api.kubectl.watch(&["get", "pods", "-w"]);
        let mut only = api
            .kubectl
            .watch(&["get", "pods", "--watch-only", "--output-watch-events"]);
        // -w prints the list first; both then watch from the list's resourceVersion.
        watch
            .wait_for(WATCH, "the header and the 2 existing pods", |lines| {
                lines
                    .first()
                    .is_some_and(|h| squash(h) == "NAME READY STATUS RESTARTS AGE")
                    && before.iter().all(|name| shows(lines, name, None))
            })
            .await;
        eventually(WATCH, "both kubectl watches open on the API", || async {
            api.metric(r#"apiserver_longrunning_requests{resource="pods",verb="WATCH"}"#)
                .await
                >= 2.0
        })
        .await;

        // Create: the controller's new pods appear, Pending and then Running.
        api.kcm(&[
            "run",
            "web",
            "--image",
            "nginx",
            "--replicas",
            "2",
            "--port",
            "80",
        ])
        .await;
        wait_pods_running(&api, 4).await;
        let created = pod_names(&api, "name=web").await;
        assert_eq!(created.len(), 2);
        for name in &created {
            watch
                .wait_for(WATCH, &format!("{name} Running in -w"), |lines| {
                    lines.iter().any(|l| {
                        let words: Vec<&str> = l.split_whitespace().collect();
                        words.len() >= 3
                            && words[0] == name
                            && words[1] == "1/1"
                            && words[2] == "Running"
                    })
                })
                .await;
            only.wait_for(WATCH, &format!("ADDED {name} in --watch-only"), |lines| {
                shows(lines, name, Some("ADDED"))
            })
            .await;
        }

        // Heal: a pod deleted with kcm goes (DELETED), and the controller's replacement
        // comes (ADDED, Pending: a new pod, whatever its name).
        let victim = created.iter().next().expect("a web pod").clone();
        let (watch_mark, only_mark) = (watch.mark(), only.mark());
        // --wait=false: the replacement takes the victim's name (kcm's slot names), and
        // `kcm delete --wait` would wait for that one to go too.
        api.kcm(&["delete", "pod", &victim, "--wait=false"]).await;
        only.wait_for(
            WATCH,
            &format!("DELETED {victim}, then an ADDED web pod"),
            |lines| {
                let after = &lines[only_mark..];
                let deleted = after.iter().position(|l| {
                    l.split_whitespace()
                        .take(2)
                        .eq(["DELETED", victim.as_str()])
                });
                deleted.is_some_and(|at| {
                    after[at..].iter().any(|l| {
                        let words: Vec<&str> = l.split_whitespace().collect();
                        words.len() >= 2 && words[0] == "ADDED" && words[1].starts_with("web-")
                    })
                })
            },
        )
        .await;
        watch
            .wait_for(
                WATCH,
                "a new web pod Pending in -w after the delete",
                |lines| {
                    lines[watch_mark..].iter().any(|l| {
                        let words: Vec<&str> = l.split_whitespace().collect();
                        words.len() >= 3
                            && words[0].starts_with("web-")
                            && words[1] == "0/1"
                            && words[2] == "Pending"
                    })
                },
            )
            .await;
        wait_pods_running(&api, 4).await;

        // Scale: the new names appear in both.
        let healed = pod_names(&api, "name=web").await;
        api.kcm(&["scale", "rc", "web", "--replicas", "4"]).await;
        wait_pods_running(&api, 6).await;
        let scaled = pod_names(&api, "name=web").await;
        let new: BTreeSet<String> = &scaled - &healed;
        assert_eq!(new.len(), 2, "{healed:?} -> {scaled:?}");
        for name in &new {
            watch
                .wait_for(WATCH, &format!("{name} in -w"), |lines| {
                    shows(lines, name, None)
                })
                .await;
            only.wait_for(WATCH, &format!("ADDED {name} in --watch-only"), |lines| {
                shows(lines, name, Some("ADDED"))
            })
            .await;
        }

        // Delete (kcm stop: scale to 0, then delete): every pod goes.
        let (watch_mark, only_mark) = (watch.mark(), only.mark());
        api.kcm(&["stop", "rc", "web"]).await;
        for name in &scaled {
            only.wait_for(WATCH, &format!("DELETED {name} in --watch-only"), |lines| {
                shows(&lines[only_mark..], name, Some("DELETED"))
            })
            .await;
            watch
                .wait_for(WATCH, &format!("{name}'s last row in -w"), |lines| {
                    shows(&lines[watch_mark..], name, None)
                })
                .await;
        }

        // --watch-only: no row for the pods that existed before and never changed (same
        // resourceVersion now); -w listed them first.
        let watch_lines = watch.stop().await;
        let only_lines = only.stop().await;
        let versions_after = resource_versions(&api, "app=app").await;
        let unchanged: BTreeSet<&String> = versions_before
            .iter()
            .filter(|(name, rv)| versions_after.get(*name) == Some(rv))
            .map(|(name, _)| name)
            .collect();
        assert_eq!(
            only_lines.first().map(|h| squash(h)),
            Some("EVENT NAME READY STATUS RESTARTS AGE".to_owned()),
            "{only_lines:#?}"
        );
        for line in &only_lines[1..] {
            let name = watched_name(line, true).unwrap_or_default().to_owned();
            assert!(
                !unchanged.contains(&name),
                "--watch-only printed a pod that did not change: {line:?}\n{only_lines:#?}"
            );
        }
        for name in &before {
            assert!(
                shows(&watch_lines[..3], name, None),
                "-w lists {name} first:\n{watch_lines:#?}"
            );
        }
    })
    .await;
}
