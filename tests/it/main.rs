//! Integration tests: every test here runs against a real etcd started by `support`.
mod support;

mod compose;
mod harness;
mod manager;
mod registry;
mod watcher;
