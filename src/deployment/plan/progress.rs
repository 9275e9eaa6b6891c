//! Kubernetes' `pkg/controller/deployment/progress.go`: the Progressing condition
//! (`syncRolloutStatus`), the ReplicaSets' failures (`getReplicaFailures`) and when to
//! look again at a stuck rollout (`requeueStuckDeployment`). Pure.

use crate::api::{
    self, DeploymentCondition, DeploymentStatus, CONDITION_TRUE, DEPLOYMENT_PROGRESSING,
    DEPLOYMENT_REPLICA_FAILURE, REPLICA_FAILURE,
};

use super::util::{
    deployment_complete, deployment_progressing, deployment_timed_out, epoch_seconds,
    has_progress_deadline, new_condition, remove_condition, set_condition,
};
use super::Rollout;

impl Rollout {
    /// `syncRolloutStatus`: the status with the Progressing condition (complete,
    /// progressing, or timed out) and the ReplicaSets' failures; returns when to sync
    /// again to check the deadline (`requeueStuckDeployment`).
    pub fn sync_rollout_status(&mut self) -> Option<u64> {
        let d = &self.d;
        let mut status = self.calculate_status();
        if !has_progress_deadline(d) {
            remove_condition(&mut status, DEPLOYMENT_PROGRESSING);
        }
        let current = d.condition(DEPLOYMENT_PROGRESSING).cloned();
        let complete = status.replicas == status.updated_replicas
            && current
                .as_ref()
                .is_some_and(|c| c.reason == api::NEW_RS_AVAILABLE_REASON);
        let subject = match self.new_rs() {
            Some(rs) => format!("ReplicaSet {:?}", rs.metadata.name),
            None => format!("Deployment {:?}", d.metadata.name),
        };
        if has_progress_deadline(d) && !complete {
            if deployment_complete(d, &status) {
                let condition = new_condition(
                    DEPLOYMENT_PROGRESSING,
                    CONDITION_TRUE,
                    api::NEW_RS_AVAILABLE_REASON,
                    format!("{subject} has successfully progressed."),
                    self.now,
                );
                set_condition(&mut status, condition);
            } else if deployment_progressing(d, &status) {
                let mut condition = new_condition(
                    DEPLOYMENT_PROGRESSING,
                    CONDITION_TRUE,
                    api::REPLICA_SET_UPDATED_REASON,
                    format!("{subject} is progressing."),
                    self.now,
                );
                if let Some(current) = &current {
                    if current.status == CONDITION_TRUE {
                        condition.last_transition_time = current.last_transition_time.clone();
                    }
                    remove_condition(&mut status, DEPLOYMENT_PROGRESSING);
                }
                set_condition(&mut status, condition);
            } else if deployment_timed_out(d, &status, self.now) {
                let condition = new_condition(
                    DEPLOYMENT_PROGRESSING,
                    "False",
                    api::TIMED_OUT_REASON,
                    format!("{subject} has timed out progressing."),
                    self.now,
                );
                set_condition(&mut status, condition);
            }
        }
        match self.replica_failure() {
            Some(condition) => set_condition(&mut status, condition),
            None => remove_condition(&mut status, DEPLOYMENT_REPLICA_FAILURE),
        }
        let requeue = if status == self.d.status {
            self.requeue_stuck(&status)
        } else {
            None
        };
        self.d.status = status;
        requeue
    }

    /// `getReplicaFailures`: the first `ReplicaFailure` True of the new ReplicaSet, else of
    /// the others, as a deployment condition.
    fn replica_failure(&self) -> Option<DeploymentCondition> {
        let order = self.new.into_iter().chain(self.old());
        order.into_iter().find_map(|i| {
            let c = self.rss[i]
                .status
                .conditions
                .iter()
                .find(|c| c.type_ == REPLICA_FAILURE && c.status == CONDITION_TRUE)?;
            Some(DeploymentCondition {
                type_: DEPLOYMENT_REPLICA_FAILURE.to_string(),
                status: c.status.clone(),
                last_update_time: c.last_transition_time.clone(),
                last_transition_time: c.last_transition_time.clone(),
                reason: c.reason.clone(),
                message: c.message.clone(),
                ..DeploymentCondition::default()
            })
        })
    }

    /// `requeueStuckDeployment`: seconds until the deadline can be checked, for a rollout
    /// that made no progress this sync.
    fn requeue_stuck(&self, status: &DeploymentStatus) -> Option<u64> {
        let d = &self.d;
        let current = d.condition(DEPLOYMENT_PROGRESSING)?;
        if !has_progress_deadline(d)
            || deployment_complete(d, status)
            || current.reason == api::TIMED_OUT_REASON
        {
            return None;
        }
        let last = current
            .last_update_time
            .as_deref()
            .and_then(epoch_seconds)?;
        // Timed out once `last + deadline < now`: one second after the deadline.
        let after = last + d.progress_deadline_seconds() + 1 - self.now;
        Some(after.max(1).unsigned_abs())
    }
}
