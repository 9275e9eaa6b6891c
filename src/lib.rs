//! kcm: the 2014 Kubernetes etcd-backed control loop on etcd v3.
//!
//! ARCHITECTURE.md has the map; each module's header names the 2014 file it mirrors.

pub mod alloc;
pub mod api;
pub mod apiclient;
pub mod apiserver;
pub mod bench;
pub mod cli;
pub mod client;
pub mod controller;
pub mod controller_manager;
pub mod deployment;
pub mod endpoints;
pub mod etcd_process;
pub mod etcd_watcher;
pub mod garbagecollector;
pub mod informer;
pub mod kubecfg;
pub mod kubelet;
pub mod lab;
pub mod labels;
pub mod leader;
pub mod measure;
pub mod namespace;
pub mod nodelifecycle;
pub mod record;
pub mod registry;
pub mod replicaset;
pub mod replication_2014;
pub mod replication_manager;
pub mod scheduler;
pub mod status;
pub mod up;
pub mod workqueue;

#[cfg(test)]
mod module_dependencies;
