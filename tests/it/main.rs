//! Integration tests: every test here runs against a real etcd started by `support`.
//!
//! The tests live in folders by subject, and a test's name says where it is
//! (`it::api::limits::...` is in `api/limits.rs`):
//!
//! - `api/`: the Kubernetes API that `kcm apiserver` serves, through raw HTTP and real
//!   clients: the server and its watch cache (`apiserver`), consistent lists, documents,
//!   hostile input, in-flight limits, namespace lifecycle, body limits, Nodes, protobuf,
//!   Deployments rolled out through the API, validation and writes, `kubectl`, kube-rs
//!   (`kube_client`, `kube_controller`), the Python client (`python_client`, its script in
//!   `api/python/`) and the OpenAPI schema.
//! - `controllers/`: `kcm controller-manager` and its parts against etcd: the replication
//!   manager (`manager`, `sync`, `overcreate`, `overlap`, the 2014 one in
//!   `replication_2014`), ReplicaSets, Deployments, the garbage collector (`gc`),
//!   endpoints, events, the controller framework and the shared informer, kubelets and
//!   Nodes (`kubelet`, `kubelet_load`, `nodes`), and the status endpoint (`status`).
//! - `cli/`: kcm's command line: the kubecfg verbs (`kubecfg`, `apply`, `rollout`, `stop`),
//!   `kcm up`, `kcm watch` (`watch_cli`), `kcm lab`, `kcm bench`, and the compose file.
//! - `faults/`: what happens when things break: issue 25's cheap fault classes checked from etcd's
//!   history (`classes`), a 3-member etcd and leader election (`ha`), silent hangs made visible
//!   (`health`), watches resumed through cuts, compactions and restores (`resume`), and
//!   the harness's own etcd lifecycle and fault proxy (`harness`).
//! - `storage/`: kcm's etcd layer: the typed registry (`registry`), the etcd watcher
//!   (`watcher`) and kcm's etcd client over TLS and with passwords (`tls`).
//! - `support/`: the harness. One way to start an etcd (`support::etcd`), an apiserver
//!   (`support::apiserver`) and any other `kcm` process or command (`support::kcm`), and
//!   the helpers several test files share. A test file imports helpers from `support`,
//!   never from another test file.
mod support;

mod api {
    mod apiserver;
    mod consistent_list;
    mod documents;
    mod hostile;
    mod inflight;
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
    mod validation;
    mod writes;
}

mod controllers {
    mod deployment;
    mod endpoints;
    mod events;
    mod framework;
    mod gc;
    mod informer;
    mod kubelet;
    mod kubelet_load;
    mod manager;
    mod nodes;
    mod overcreate;
    mod overlap;
    mod replicaset;
    mod replication_2014;
    mod status;
    mod sync;
}

mod cli {
    mod apply;
    mod bench;
    mod compose;
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
