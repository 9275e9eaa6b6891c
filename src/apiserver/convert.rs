//! STUB: replaced by the helper's module.
use serde_json::Value;
#[derive(Clone, Copy, Debug)]
pub enum Kind { Pod, ReplicationController, Service, Endpoints, ReplicaSet, Deployment }
pub fn to_served(_kind: Kind, stored: Value) -> Value { stored }
