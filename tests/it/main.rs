//! Integration tests: every test here runs against a real etcd started by `support`.
mod support;

mod cli;
mod compose;
mod endpoints;
mod harness;
mod kubelet;
mod manager;
mod registry;
mod up;
mod watch_cli;
mod watcher;
