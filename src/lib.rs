//! kcm: the 2014 Kubernetes etcd-backed control loop on etcd v3.
//!
//! ARCHITECTURE.md has the map; each module's header names the 2014 file it mirrors.

pub mod api;
pub mod client;
pub mod etcd_watcher;
pub mod labels;
pub mod registry;
