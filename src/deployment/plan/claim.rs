//! Claiming a deployment's ReplicaSets: `ClaimReplicaSets` of Kubernetes'
//! `ReplicaSetControllerRefManager` (`pkg/controller/controller_ref_manager.go`), as
//! `getReplicaSetsForDeployment` (`deployment_controller.go`) uses it. Pure.

use std::sync::Arc;

use crate::api::{controller_of, Deployment, ReplicaSet};
use crate::labels::Selector;

use super::owns;

/// `ClaimReplicaSets` of the `ReplicaSetControllerRefManager`: the owned ReplicaSets the
/// selector still matches, the orphans to adopt, the owned ones to release.
#[derive(Debug, Default)]
pub struct Claims {
    pub owned: Vec<Arc<ReplicaSet>>,
    pub adopt: Vec<Arc<ReplicaSet>>,
    pub release: Vec<Arc<ReplicaSet>>,
}

/// Claims among `candidates` (the ReplicaSets of `d`'s namespace): an owned one that still
/// matches is kept, one that no longer matches is released (not while `d` is deleting);
/// a matching orphan without a `deletionTimestamp` is adopted (not while `d` is deleting).
/// ReplicaSets of other controllers are left alone.
pub fn claim(d: &Deployment, selector: &Selector, candidates: &[Arc<ReplicaSet>]) -> Claims {
    let deleting = d.metadata.deletion_timestamp.is_some();
    let mut claims = Claims::default();
    for rs in candidates {
        let matches = selector.matches(&rs.metadata.labels);
        match controller_of(&rs.metadata) {
            Some(_) if owns(d, rs) => {
                if matches {
                    claims.owned.push(rs.clone());
                } else if !deleting {
                    claims.release.push(rs.clone());
                }
            }
            Some(_) => {}
            None => {
                if matches && !deleting && rs.metadata.deletion_timestamp.is_none() {
                    claims.adopt.push(rs.clone());
                }
            }
        }
    }
    claims
}
