//! Integration tests: every test here runs against a real etcd started by `support`.
mod support;

mod apply;
mod bench;
mod cli;
mod compose;
mod endpoints;
mod framework;
mod ha;
mod harness;
mod health;
mod informer;
mod kubelet;
mod lab;
mod manager;
mod overcreate;
mod overlap;
mod registry;
mod replication_2014;
mod resume;
mod status;
mod stop;
mod sync;
mod tls;
mod up;
mod watch_cli;
mod watcher;
