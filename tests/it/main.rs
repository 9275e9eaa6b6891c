//! Integration tests: every test here runs against a real etcd started by `support`.
//!
//! The tests live in folders by subject; a test's name is its path
//! (`it::api::limits::...` is in `api/limits.rs`). The map:
//!
//! - `api/`: the Kubernetes API `kcm apiserver` serves. `apiserver` (the server, its watch
//!   cache, HTTPS and tokens), `consistent_list`, `documents`, `hostile` (hostile clients),
//!   `inflight` (in-flight limits), `lifecycle` (namespaces, graceful deletes, Nodes),
//!   `limits` (what one request may cost), `nodes` (cordon and a claiming kubelet),
//!   `protobuf`, `rollout` (Deployments through the API), `server_side_apply` (field
//!   ownership, through kubectl and `kcm apply --server-side`), `validation`, `writes`; real
//!   clients: `kubectl`, kube-rs (`kube_client`, `kube_controller`, `kube_apply`), the
//!   Python client (`python_client`, its script in `api/python/`); the schema (`openapi`).
//! - `controllers/`: `kcm controller-manager` and its parts. The replication manager
//!   (`manager`, `sync`, `overcreate`, `overlap`; the 2014 one in `replication_2014`),
//!   `replicaset`, `deployment`, `gc`, `endpoints`, `events`, the controller `framework`,
//!   the shared `informer`, `kubelet`, `kubelet_load`, `nodes` (Node objects and the node
//!   lifecycle controller), `status` (the status endpoint), `status_history` (a
//!   scale-up's status never runs backwards).
//! - `cli/`: kcm's command line. `kubecfg` (the kubecfg verbs), `apply`, `rollout`, `stop`,
//!   `up`, `watch_cli` (`kcm watch`), `lab`, `bench`, `compose` (the compose file).
//! - `faults/`: what happens when things break. `classes` (issue 25's cheap fault classes),
//!   `ha` (a 3-member etcd, leader election), `health` (silent hangs made visible),
//!   `resume` (watches resumed through cuts, compactions and restores), `harness` (the
//!   harness's own etcd lifecycle and fault proxy).
//! - `storage/`: kcm's etcd layer. `registry` (the typed registry), `watcher` (the etcd
//!   watcher), `tls` (kcm's etcd client with TLS and passwords).
//! - `support/`: the harness. The one way to start an etcd (`support::etcd`), an apiserver
//!   (`support::apiserver`) and any other `kcm` process or command (`support::kcm`), and
//!   every helper more than one test file uses. A test file imports helpers from
//!   `support`, never from another test file.
mod support;

mod api {
    mod apiserver;
    mod consistent_list;
    mod documents;
    mod hostile;
    mod inflight;
    mod kube_apply;
    mod kube_client;
    mod kube_controller;
    mod kubectl;
    mod lifecycle;
    mod limits;
    mod nodes;
    mod openapi;
    mod protobuf;
    mod python_client;
    mod rollout;
    mod server_side_apply;
    mod validation;
    mod writes;
}

mod controllers {
    mod deployment;
    mod deployment_through_api;
    mod endpoints;
    mod events;
    mod framework;
    mod gc;
    mod gc_through_api;
    mod informer;
    mod kubelet;
    mod kubelet_load;
    mod manager;
    mod namespace_through_api;
    mod nodelifecycle_through_api;
    mod nodes;
    mod overcreate;
    mod overlap;
    mod replicaset;
    mod replication_2014;
    mod scheduling_through_api;
    mod status;
    mod status_history;
    mod sync;
    mod through_api;
}

mod cli {
    mod apply;
    mod apply_memory;
    mod bench;
    mod compose;
    mod controller_manager_binary;
    mod kubecfg;
    mod lab;
    mod rollout;
    mod stop;
    mod up;
    mod watch_cli;
}

mod faults {
    mod classes;
    mod ha;
    mod harness;
    mod health;
    mod resume;
}

mod storage {
    mod registry;
    mod tls;
    mod watcher;
}
