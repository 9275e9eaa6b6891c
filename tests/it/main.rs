//! Integration tests: every test here runs against a real etcd started by `support`.
mod support;

mod harness;
mod registry;
mod watcher;
