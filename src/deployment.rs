//! The Deployment controller: rolls a template out through ReplicaSets it owns.
//!
//! Mirrors Kubernetes' `pkg/controller/deployment/` (none of it existed in 2014).

pub mod plan;
