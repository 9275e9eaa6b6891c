//! The pure core of a Deployment sync: Kubernetes' `syncDeployment` and its parts
//! (`pkg/controller/deployment/{deployment_controller,sync,rolling,recreate,progress}.go`
//! and `util/deployment_util.go`), function by function, over (deployment, its
//! ReplicaSets, their pods, now), returning the writes to make. No IO.
//!
//! One step per sync, as Kubernetes: a sync makes at most one kind of change to the
//! ReplicaSets' sizes (the new one up, or old ones down, or a proportional rescale), then
//! writes the status. The functions work on copies ([`Rollout`]) and record what they
//! changed; [`plan`] turns that into a [`Plan`].
//!
//! kcm's two rules beyond Kubernetes (phase2.md §6.2), which make "active pods ≤
//! replicas + maxSurge" and "ready pods ≥ replicas − maxUnavailable" hold at every etcd
//! revision, where Kubernetes bounds only the sum of ReplicaSet sizes (kubernetes #95498,
//! #107920):
//! - occupancy: a ReplicaSet occupies `max(spec.replicas, status.replicas)`, and the new
//!   ReplicaSet does not grow while any ReplicaSet of the deployment is unsettled
//!   (`status.observedGeneration < metadata.generation`, or `status.replicas >
//!   spec.replicas`) — [`new_rs_new_replicas`];
//! - availability: a ReplicaSet counts `min(status.availableReplicas, spec.replicas)`
//!   available — [`reconcile_old_replica_sets`], [`cleanup_unhealthy_replicas`],
//!   [`scale_down_old_replica_sets_for_rolling_update`].

use std::cmp::Ordering;
use std::sync::Arc;

use crate::api::{
    self, controller_of, Deployment, DeploymentCondition, DeploymentStatus, LabelSelector,
    OwnerReference, PodPhase, ReplicaSet, ReplicaSetSpec, CONDITION_TRUE, DEPLOYMENT_PROGRESSING,
    DEPLOYMENT_REPLICA_FAILURE, POD_TEMPLATE_HASH_LABEL, REPLICA_FAILURE,
};
use crate::informer::CachedPod;
use crate::labels::Selector;

/// The `apiVersion` a Deployment's controller reference names.
pub const API_VERSION: &str = "apps/v1";
/// The `kind` a Deployment's controller reference names.
pub const KIND: &str = "Deployment";
/// The longest `revision-history` annotation (`maxRevHistoryLengthInChars`).
const MAX_REV_HISTORY_LENGTH_IN_CHARS: usize = 2000;
/// `math.MaxInt32`: a progress deadline or history limit of this value means none.
const MAX_INT32: i64 = i32::MAX as i64;

/// The controller reference a deployment writes into its ReplicaSets.
pub fn controller_ref(d: &Deployment) -> OwnerReference {
    OwnerReference {
        api_version: API_VERSION.to_string(),
        kind: KIND.to_string(),
        name: d.metadata.name.clone(),
        uid: d.metadata.uid.clone(),
        controller: Some(true),
        block_owner_deletion: Some(true),
        ..OwnerReference::default()
    }
}

/// Whether `rs`'s controller reference names `d` by kind, name and uid
/// ([`api::is_controlled_by`], which `kcm rollout` shares).
pub fn owns(d: &Deployment, rs: &ReplicaSet) -> bool {
    api::is_controlled_by(rs, d)
}

// ---------------------------------------------------------------------------------------
// Claiming ReplicaSets

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

// ---------------------------------------------------------------------------------------
// Small helpers of deployment_util.go

/// `spec.replicas` of a ReplicaSet (1 when absent).
fn size(rs: &ReplicaSet) -> i64 {
    rs.replicas()
}

/// The `deployment.kubernetes.io/revision` of an object ([`api::revision`]); 0 when
/// absent or unreadable.
pub fn revision(annotations: &std::collections::BTreeMap<String, String>) -> i64 {
    api::revision(annotations).unwrap_or(0)
}

fn annotation_i64(rs: &ReplicaSet, key: &str) -> Option<i64> {
    rs.metadata.annotations.get(key)?.parse().ok()
}

/// `ReplicaSetsByCreationTimestamp`: oldest first, then by name.
fn by_creation(a: &ReplicaSet, b: &ReplicaSet) -> Ordering {
    a.metadata
        .creation_timestamp
        .cmp(&b.metadata.creation_timestamp)
        .then_with(|| a.metadata.name.cmp(&b.metadata.name))
}

pub use crate::api::equal_ignore_hash;

/// Whether a ReplicaSet has not settled: the ReplicaSet controller has not acted on its
/// spec yet, or has not finished a scale-down (kcm's occupancy rule).
pub fn unsettled(rs: &ReplicaSet) -> bool {
    rs.status.observed_generation < rs.metadata.generation || rs.status.replicas > size(rs)
}

/// What a ReplicaSet occupies: `max(spec.replicas, status.replicas)` (kcm's rule).
pub fn occupancy(rs: &ReplicaSet) -> i64 {
    size(rs).max(rs.status.replicas)
}

/// What a ReplicaSet counts as available: `min(status.availableReplicas, spec.replicas)`
/// (kcm's rule).
pub fn counted_available(rs: &ReplicaSet) -> i64 {
    rs.status.available_replicas.min(size(rs))
}

/// `DeploymentComplete`: every replica updated, available, and the generation observed.
pub fn deployment_complete(d: &Deployment, status: &DeploymentStatus) -> bool {
    let replicas = d.replicas();
    status.updated_replicas == replicas
        && status.replicas == replicas
        && status.available_replicas == replicas
        && status.observed_generation >= d.metadata.generation
}

/// `DeploymentProgressing`: more updated, fewer old, more ready or more available pods
/// than the stored status says.
pub fn deployment_progressing(d: &Deployment, status: &DeploymentStatus) -> bool {
    let old = &d.status;
    let old_old = old.replicas - old.updated_replicas;
    let new_old = status.replicas - status.updated_replicas;
    status.updated_replicas > old.updated_replicas
        || new_old < old_old
        || status.ready_replicas > old.ready_replicas
        || status.available_replicas > old.available_replicas
}

/// `HasProgressDeadline`.
fn has_progress_deadline(d: &Deployment) -> bool {
    d.progress_deadline_seconds() != MAX_INT32
}

/// Seconds since the Unix epoch of an RFC 3339 time.
pub fn epoch_seconds(time: &str) -> Option<i64> {
    let time = humantime::parse_rfc3339_weak(time).ok()?;
    let seconds = time.duration_since(std::time::UNIX_EPOCH).ok()?.as_secs();
    i64::try_from(seconds).ok()
}

/// RFC 3339 (seconds) of an epoch time.
pub fn rfc3339(epoch: i64) -> String {
    let time = std::time::UNIX_EPOCH + std::time::Duration::from_secs(epoch.max(0).unsigned_abs());
    humantime::format_rfc3339_seconds(time).to_string()
}

/// `DeploymentTimedOut`: the Progressing condition's `lastUpdateTime` is more than
/// `progressDeadlineSeconds` ago, unless the condition says the rollout completed
/// (kubernetes #49637).
pub fn deployment_timed_out(d: &Deployment, status: &DeploymentStatus, now: i64) -> bool {
    if !has_progress_deadline(d) {
        return false;
    }
    let Some(condition) = status
        .conditions
        .iter()
        .find(|c| c.type_ == DEPLOYMENT_PROGRESSING)
    else {
        return false;
    };
    if condition.reason == api::NEW_RS_AVAILABLE_REASON {
        return false;
    }
    if condition.reason == api::TIMED_OUT_REASON {
        return true;
    }
    let Some(from) = condition
        .last_update_time
        .as_deref()
        .and_then(epoch_seconds)
    else {
        return false;
    };
    from.saturating_add(d.progress_deadline_seconds()) < now
}

/// `NewDeploymentCondition`: both times `now`.
pub fn new_condition(
    type_: &str,
    status: &str,
    reason: &str,
    message: String,
    now: i64,
) -> DeploymentCondition {
    let time = rfc3339(now);
    DeploymentCondition {
        type_: type_.to_string(),
        status: status.to_string(),
        last_update_time: Some(time.clone()),
        last_transition_time: Some(time),
        reason: reason.to_string(),
        message,
        ..DeploymentCondition::default()
    }
}

/// `SetDeploymentCondition`: nothing when a condition of the type has the same status and
/// reason; else replaces it, keeping `lastTransitionTime` when the status is unchanged.
pub fn set_condition(status: &mut DeploymentStatus, mut condition: DeploymentCondition) {
    if let Some(current) = status
        .conditions
        .iter()
        .find(|c| c.type_ == condition.type_)
    {
        if current.status == condition.status && current.reason == condition.reason {
            return;
        }
        if current.status == condition.status {
            condition.last_transition_time = current.last_transition_time.clone();
        }
    }
    status.conditions.retain(|c| c.type_ != condition.type_);
    status.conditions.push(condition);
}

fn remove_condition(status: &mut DeploymentStatus, type_: &str) {
    status.conditions.retain(|c| c.type_ != type_);
}

// ---------------------------------------------------------------------------------------
// The working copy a sync plans on

/// What one sync decided: the writes, in order (create, updates, deletes, then the
/// deployment), and when to look again.
#[derive(Debug, Default, Clone)]
pub struct Plan {
    /// The new ReplicaSet to create (create-if-absent).
    pub create: Option<ReplicaSet>,
    /// ReplicaSets to write over the revision they were read at (scales, annotations).
    pub updates: Vec<ReplicaSet>,
    /// Old ReplicaSets to delete at the revision they were read at (`cleanupDeployment`).
    pub deletes: Vec<ReplicaSet>,
    /// The deployment with its new annotations and status, when they changed.
    pub deployment: Option<Deployment>,
    /// Sync again after this many seconds (`requeueStuckDeployment`).
    pub requeue_after: Option<u64>,
}

/// The deployment and its ReplicaSets as a sync changes them.
#[derive(Debug, Clone)]
pub struct Rollout {
    /// The deployment as read.
    stored: Deployment,
    /// Its working copy (annotations and status change).
    pub d: Deployment,
    /// Its ReplicaSets, working copies.
    pub rss: Vec<ReplicaSet>,
    /// The new ReplicaSet's index in `rss`.
    pub new: Option<usize>,
    /// `rss[new]` does not exist yet: it is to be created.
    created: bool,
    /// Indices of ReplicaSets changed, in the order first changed.
    touched: Vec<usize>,
    /// Indices of ReplicaSets to delete.
    deleted: Vec<usize>,
    /// Seconds since the Unix epoch.
    pub now: i64,
    /// The pod-template-hash of the deployment's template as stored (its raw JSON), when
    /// the caller has it; else the hash of the typed template ([`api::template_hash`]).
    pub template_hash: Option<String>,
}

impl Rollout {
    /// A sync of `d` over its (claimed) ReplicaSets at `now`.
    pub fn new(d: &Deployment, rss: Vec<ReplicaSet>, now: i64) -> Rollout {
        let mut rss = rss;
        rss.sort_by(by_creation);
        Rollout {
            stored: d.clone(),
            d: d.clone(),
            rss,
            new: None,
            created: false,
            touched: Vec::new(),
            deleted: Vec::new(),
            now,
            template_hash: None,
        }
    }

    fn touch(&mut self, i: usize) {
        if !self.touched.contains(&i) {
            self.touched.push(i);
        }
    }

    /// The new ReplicaSet, if any.
    pub fn new_rs(&self) -> Option<&ReplicaSet> {
        self.new.map(|i| &self.rss[i])
    }

    /// Indices of the old ReplicaSets (all but the new), oldest first.
    fn old(&self) -> Vec<usize> {
        (0..self.rss.len())
            .filter(|i| Some(*i) != self.new)
            .collect()
    }

    /// Indices of the ReplicaSets with `spec.replicas > 0` among `indices`
    /// (`FilterActiveReplicaSets`).
    fn active(&self, indices: &[usize]) -> Vec<usize> {
        indices
            .iter()
            .copied()
            .filter(|i| size(&self.rss[*i]) > 0)
            .collect()
    }

    fn all(&self) -> Vec<usize> {
        (0..self.rss.len()).collect()
    }

    /// `FindNewReplicaSet`: the oldest ReplicaSet whose template equals the deployment's
    /// ignoring the hash label.
    pub fn find_new(&mut self) {
        let template = self.d.spec.template.clone().unwrap_or_default();
        self.new = self.rss.iter().position(|rs| {
            rs.spec
                .template
                .as_ref()
                .is_some_and(|t| equal_ignore_hash(t, &template))
        });
    }

    /// `getAllReplicaSetsAndSyncRevision` (`getNewReplicaSet`): finds the new ReplicaSet,
    /// raises its revision to one above the old ones (remembering the old number in
    /// `revision-history`), copies the deployment's annotations and `minReadySeconds`
    /// to it, and the revision to the deployment; with `create_if_missing`, plans the
    /// ReplicaSet `{name}-{hash}` when there is none.
    pub fn sync_revision(&mut self, create_if_missing: bool) {
        self.find_new();
        let max_old = self
            .old()
            .iter()
            .map(|i| revision(&self.rss[*i].metadata.annotations))
            .max()
            .unwrap_or(0);
        let new_revision = max_old + 1;
        if let Some(i) = self.new {
            let mut rs = self.rss[i].clone();
            let annotations_changed =
                set_new_replica_set_annotations(&self.d, &mut rs, new_revision, true);
            let min_ready_changed = rs.spec.min_ready_seconds != self.d.spec.min_ready_seconds;
            if annotations_changed || min_ready_changed {
                rs.spec.min_ready_seconds = self.d.spec.min_ready_seconds;
                self.rss[i] = rs;
                self.touch(i);
            }
            let rs_revision = self.rss[i]
                .metadata
                .annotations
                .get(api::REVISION_ANNOTATION)
                .cloned()
                .unwrap_or_default();
            set_deployment_revision(&mut self.d, &rs_revision);
            if self.d.condition(DEPLOYMENT_PROGRESSING).is_none() {
                let message = format!("Found new replica set {:?}", self.rss[i].metadata.name);
                let condition = new_condition(
                    DEPLOYMENT_PROGRESSING,
                    CONDITION_TRUE,
                    api::FOUND_NEW_RS_REASON,
                    message,
                    self.now,
                );
                set_condition(&mut self.d.status, condition);
            }
            return;
        }
        if !create_if_missing {
            return;
        }
        let rs = self.new_replica_set(new_revision);
        let name = rs.metadata.name.clone();
        self.rss.push(rs);
        let i = self.rss.len() - 1;
        self.new = Some(i);
        self.created = true;
        let replicas = new_rs_new_replicas(&self.d, &self.rss, i);
        self.rss[i].spec.replicas = Some(replicas);
        set_deployment_revision(&mut self.d, &new_revision.to_string());
        let condition = new_condition(
            DEPLOYMENT_PROGRESSING,
            CONDITION_TRUE,
            api::NEW_REPLICA_SET_REASON,
            format!("Created new replica set {name:?}"),
            self.now,
        );
        set_condition(&mut self.d.status, condition);
    }

    /// The ReplicaSet `{name}-{hash}` for the deployment's template (replicas 0 until
    /// [`new_rs_new_replicas`] sizes it).
    fn new_replica_set(&self, new_revision: i64) -> ReplicaSet {
        let d = &self.d;
        let mut template = d.spec.template.clone().unwrap_or_default();
        let hash = self
            .template_hash
            .clone()
            .unwrap_or_else(|| api::template_hash(&template, d.status.collision_count));
        template
            .metadata
            .labels
            .insert(POD_TEMPLATE_HASH_LABEL.to_string(), hash.clone());
        let mut selector: LabelSelector = d.spec.selector.clone().unwrap_or_default();
        selector
            .match_labels
            .insert(POD_TEMPLATE_HASH_LABEL.to_string(), hash.clone());
        let mut rs = ReplicaSet {
            metadata: api::ObjectMeta {
                name: format!("{}-{hash}", d.metadata.name),
                namespace: d.metadata.namespace.clone(),
                labels: template.metadata.labels.clone(),
                owner_references: vec![controller_ref(d)],
                ..api::ObjectMeta::default()
            },
            spec: ReplicaSetSpec {
                replicas: Some(0),
                min_ready_seconds: d.spec.min_ready_seconds,
                selector: Some(selector),
                template: Some(template),
                ..ReplicaSetSpec::default()
            },
            ..ReplicaSet::default()
        };
        set_new_replica_set_annotations(d, &mut rs, new_revision, false);
        rs
    }

    /// `scaleReplicaSet`: sets the size and the `desired-replicas`/`max-replicas`
    /// annotations; returns whether the size changed.
    fn scale(&mut self, i: usize, replicas: i64) -> bool {
        let desired = self.d.replicas();
        let max = desired + self.d.max_surge();
        let rs = &mut self.rss[i];
        let size_changed = size(rs) != replicas;
        let annotations_changed = set_replicas_annotations(rs, desired, max);
        if size_changed || annotations_changed {
            rs.spec.replicas = Some(replicas);
            self.touch(i);
        }
        size_changed
    }

    /// `scaleReplicaSetAndRecordEvent`: [`Rollout::scale`] unless the size is already right.
    fn scale_and_record(&mut self, i: usize, replicas: i64) -> bool {
        if size(&self.rss[i]) == replicas {
            return false;
        }
        self.scale(i, replicas)
    }

    /// `calculateStatus`.
    pub fn calculate_status(&self) -> DeploymentStatus {
        let d = &self.d;
        let available: i64 = self.rss.iter().map(|rs| rs.status.available_replicas).sum();
        let total: i64 = self.rss.iter().map(size).sum();
        let mut status = DeploymentStatus {
            observed_generation: d.metadata.generation,
            replicas: self.rss.iter().map(|rs| rs.status.replicas).sum(),
            updated_replicas: self.new_rs().map_or(0, |rs| rs.status.replicas),
            ready_replicas: self.rss.iter().map(|rs| rs.status.ready_replicas).sum(),
            available_replicas: available,
            unavailable_replicas: (total - available).max(0),
            collision_count: d.status.collision_count,
            conditions: d.status.conditions.clone(),
            extra: d.status.extra.clone(),
        };
        let condition = if available >= d.replicas() - d.max_unavailable() {
            new_condition(
                api::DEPLOYMENT_AVAILABLE,
                CONDITION_TRUE,
                api::MINIMUM_REPLICAS_AVAILABLE,
                "Deployment has minimum availability.".to_string(),
                self.now,
            )
        } else {
            new_condition(
                api::DEPLOYMENT_AVAILABLE,
                "False",
                api::MINIMUM_REPLICAS_UNAVAILABLE,
                "Deployment does not have minimum availability.".to_string(),
                self.now,
            )
        };
        set_condition(&mut status, condition);
        status
    }

    /// `syncDeploymentStatus`: the status as calculated, conditions apart from
    /// Available left alone.
    pub fn sync_status(&mut self) {
        self.d.status = self.calculate_status();
    }

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

    /// `checkPausedConditions`: Progressing Unknown `DeploymentPaused` when paused,
    /// `DeploymentResumed` when resumed (so the deadline restarts); a
    /// `ProgressDeadlineExceeded` is never overwritten.
    pub fn check_paused_conditions(&mut self) {
        if !has_progress_deadline(&self.d) {
            return;
        }
        let current = self.d.condition(DEPLOYMENT_PROGRESSING);
        if current.is_some_and(|c| c.reason == api::TIMED_OUT_REASON) {
            return;
        }
        let paused_exists = current.is_some_and(|c| c.reason == api::PAUSED_DEPLOY_REASON);
        let (reason, message) = match (self.d.spec.paused, paused_exists) {
            (true, false) => (api::PAUSED_DEPLOY_REASON, "Deployment is paused"),
            (false, true) => (api::RESUMED_DEPLOY_REASON, "Deployment is resumed"),
            _ => return,
        };
        let condition = new_condition(
            DEPLOYMENT_PROGRESSING,
            "Unknown",
            reason,
            message.to_string(),
            self.now,
        );
        set_condition(&mut self.d.status, condition);
    }

    /// `isScalingEvent`: an active ReplicaSet's `desired-replicas` differs from
    /// `spec.replicas`.
    pub fn is_scaling_event(&self) -> bool {
        let replicas = self.d.replicas();
        self.active(&self.all()).iter().any(|i| {
            annotation_i64(&self.rss[*i], api::DESIRED_REPLICAS_ANNOTATION)
                .is_some_and(|desired| desired != replicas)
        })
    }

    /// `FindActiveOrLatest`: the only active ReplicaSet, or the newest (the new one
    /// first) when none is active; `None` when several are.
    fn find_active_or_latest(&self) -> Option<usize> {
        if self.rss.is_empty() {
            return None;
        }
        let active = self.active(&self.all());
        match active.len() {
            0 => self.new.or_else(|| self.old().last().copied()),
            1 => Some(active[0]),
            _ => None,
        }
    }

    /// `IsSaturated`: the new ReplicaSet is at `replicas`, meant for them, all available.
    fn is_saturated(&self, i: usize) -> bool {
        let rs = &self.rss[i];
        let replicas = self.d.replicas();
        annotation_i64(rs, api::DESIRED_REPLICAS_ANNOTATION) == Some(replicas)
            && size(rs) == replicas
            && rs.status.available_replicas == replicas
    }

    /// `scale` (sync.go): a scaled deployment's ReplicaSets: the only active one to
    /// `replicas`; old ones to 0 when the new one is saturated; otherwise, for
    /// `RollingUpdate`, every active one in proportion (`GetProportion`), the leftover
    /// to the first.
    pub fn scale_deployment(&mut self) {
        let replicas = self.d.replicas();
        if let Some(i) = self.find_active_or_latest() {
            if size(&self.rss[i]) != replicas {
                self.scale_and_record(i, replicas);
            }
            return;
        }
        if self.new.is_some_and(|i| self.is_saturated(i)) {
            for i in self.active(&self.old()) {
                self.scale_and_record(i, 0);
            }
            return;
        }
        if !self.d.is_rolling_update() {
            return;
        }
        let mut active = self.active(&self.all());
        let current: i64 = active.iter().map(|i| size(&self.rss[*i])).sum();
        let allowed = if replicas > 0 {
            replicas + self.d.max_surge()
        } else {
            0
        };
        let to_add = allowed - current;
        let newer_first = |a: &usize, b: &usize, rss: &[ReplicaSet]| {
            size(&rss[*b])
                .cmp(&size(&rss[*a]))
                .then_with(|| by_creation(&rss[*b], &rss[*a]))
        };
        let older_first = |a: &usize, b: &usize, rss: &[ReplicaSet]| {
            size(&rss[*b])
                .cmp(&size(&rss[*a]))
                .then_with(|| by_creation(&rss[*a], &rss[*b]))
        };
        if to_add > 0 {
            active.sort_by(|a, b| newer_first(a, b, &self.rss));
        } else if to_add < 0 {
            active.sort_by(|a, b| older_first(a, b, &self.rss));
        }
        let mut added = 0;
        let mut sizes = Vec::with_capacity(active.len());
        for i in &active {
            let rs = &self.rss[*i];
            if to_add != 0 {
                let proportion = get_proportion(rs, &self.d, to_add, added);
                sizes.push(size(rs) + proportion);
                added += proportion;
            } else {
                sizes.push(size(rs));
            }
        }
        for (n, i) in active.iter().enumerate() {
            if n == 0 && to_add != 0 {
                sizes[0] = (sizes[0] + to_add - added).max(0);
            }
            self.scale(*i, sizes[n]);
        }
    }

    /// `cleanupDeployment`: deletes the oldest revisions beyond `revisionHistoryLimit`
    /// among old ReplicaSets not being deleted, skipping any with pods, a size, or a spec
    /// the ReplicaSet controller has not observed.
    pub fn cleanup(&mut self) {
        let limit = self.d.revision_history_limit();
        if limit == MAX_INT32 {
            return;
        }
        let mut cleanable: Vec<usize> = self
            .old()
            .into_iter()
            .filter(|i| self.rss[*i].metadata.deletion_timestamp.is_none())
            .collect();
        let diff = i64::try_from(cleanable.len()).unwrap_or(i64::MAX) - limit;
        if diff <= 0 {
            return;
        }
        cleanable.sort_by(|a, b| {
            let (a, b) = (&self.rss[*a], &self.rss[*b]);
            revision(&a.metadata.annotations)
                .cmp(&revision(&b.metadata.annotations))
                .then_with(|| by_creation(a, b))
        });
        for i in cleanable
            .into_iter()
            .take(usize::try_from(diff).unwrap_or(0))
        {
            let rs = &self.rss[i];
            if rs.status.replicas != 0
                || size(rs) != 0
                || rs.metadata.generation > rs.status.observed_generation
                || self.touched.contains(&i)
            {
                continue;
            }
            self.deleted.push(i);
        }
    }

    /// The writes this sync planned.
    pub fn into_plan(self, requeue_after: Option<u64>) -> Plan {
        let Rollout {
            stored,
            d,
            rss,
            new,
            created,
            touched,
            deleted,
            ..
        } = self;
        let create = new.filter(|_| created).map(|i| rss[i].clone());
        let updates = touched
            .iter()
            .filter(|i| !(created && Some(**i) == new))
            .map(|i| rss[*i].clone())
            .collect();
        let deletes = deleted.iter().map(|i| rss[*i].clone()).collect();
        let changed =
            d.status != stored.status || d.metadata.annotations != stored.metadata.annotations;
        Plan {
            create,
            updates,
            deletes,
            deployment: changed.then_some(d),
            requeue_after,
        }
    }
}

/// `SetDeploymentRevision`.
fn set_deployment_revision(d: &mut Deployment, revision: &str) {
    if d.metadata
        .annotations
        .get(api::REVISION_ANNOTATION)
        .map(String::as_str)
        != Some(revision)
    {
        d.metadata
            .annotations
            .insert(api::REVISION_ANNOTATION.to_string(), revision.to_string());
    }
}

/// `SetReplicasAnnotations`: `desired-replicas` and `max-replicas`; whether they changed.
fn set_replicas_annotations(rs: &mut ReplicaSet, desired: i64, max: i64) -> bool {
    let mut changed = false;
    for (key, value) in [
        (api::DESIRED_REPLICAS_ANNOTATION, desired),
        (api::MAX_REPLICAS_ANNOTATION, max),
    ] {
        let value = value.to_string();
        if rs.metadata.annotations.get(key) != Some(&value) {
            rs.metadata.annotations.insert(key.to_string(), value);
            changed = true;
        }
    }
    changed
}

/// `SetNewReplicaSetAnnotations`: copies the deployment's annotations (but
/// [`api::ANNOTATIONS_TO_SKIP`]), raises the revision to `new_revision` (an existing
/// lower one goes into `revision-history`, at most 2000 characters), and for a ReplicaSet
/// about to be created sets the replicas annotations. Whether anything changed.
pub fn set_new_replica_set_annotations(
    d: &Deployment,
    rs: &mut ReplicaSet,
    new_revision: i64,
    exists: bool,
) -> bool {
    let mut changed = false;
    for (key, value) in &d.metadata.annotations {
        if api::ANNOTATIONS_TO_SKIP.contains(&key.as_str())
            || rs.metadata.annotations.get(key) == Some(value)
        {
            continue;
        }
        rs.metadata.annotations.insert(key.clone(), value.clone());
        changed = true;
    }
    let old_revision = rs
        .metadata
        .annotations
        .get(api::REVISION_ANNOTATION)
        .cloned();
    let old_revision_int = match old_revision.as_deref().map(str::parse::<i64>) {
        None => 0,
        Some(Ok(n)) => n,
        // An unreadable revision is left alone (Kubernetes logs it).
        Some(Err(_)) => return changed,
    };
    if old_revision_int < new_revision {
        rs.metadata.annotations.insert(
            api::REVISION_ANNOTATION.to_string(),
            new_revision.to_string(),
        );
        changed = true;
        if let Some(old) = old_revision {
            let history = rs
                .metadata
                .annotations
                .get(api::REVISION_HISTORY_ANNOTATION)
                .cloned()
                .unwrap_or_default();
            let value = if history.is_empty() {
                Some(old)
            } else {
                let mut revisions: Vec<&str> = history.split(',').collect();
                let mut total = history.len() + old.len() + 1;
                let mut start = 0;
                while total > MAX_REV_HISTORY_LENGTH_IN_CHARS && start < revisions.len() {
                    total -= revisions[start].len() + 1;
                    start += 1;
                }
                (total <= MAX_REV_HISTORY_LENGTH_IN_CHARS).then(|| {
                    let mut kept = revisions.split_off(start);
                    kept.push(&old);
                    kept.join(",")
                })
            };
            if let Some(value) = value {
                rs.metadata
                    .annotations
                    .insert(api::REVISION_HISTORY_ANNOTATION.to_string(), value);
            }
        }
    }
    if !exists {
        let desired = d.replicas();
        changed |= set_replicas_annotations(rs, desired, desired + d.max_surge());
    }
    changed
}

/// `NewRSNewReplicas`: for `RollingUpdate`, the new ReplicaSet grows by what
/// `replicas + maxSurge` leaves over the ReplicaSets' occupancy, at most to `replicas`,
/// and not at all while any ReplicaSet is unsettled (kcm's rule); for `Recreate`,
/// `replicas`.
pub fn new_rs_new_replicas(d: &Deployment, rss: &[ReplicaSet], new: usize) -> i64 {
    let replicas = d.replicas();
    let new_size = size(&rss[new]);
    if !d.is_rolling_update() {
        return replicas;
    }
    if rss.iter().any(unsettled) {
        return new_size;
    }
    let max_total = replicas + d.max_surge();
    let current: i64 = rss.iter().map(occupancy).sum();
    if current >= max_total {
        return new_size;
    }
    let scale_up = (max_total - current).min(replicas - new_size);
    new_size + scale_up
}

/// `GetProportion`: how many replicas `rs` gains (or loses) of `to_add`, given `added`
/// already handed out: its share of the new `replicas + maxSurge` by its `max-replicas`
/// annotation (the deployment's `status.replicas` without one), bounded by what is left.
pub fn get_proportion(rs: &ReplicaSet, d: &Deployment, to_add: i64, added: i64) -> i64 {
    if size(rs) == 0 || to_add == 0 || to_add == added {
        return 0;
    }
    let fraction = replica_set_fraction(rs, d);
    let allowed = to_add - added;
    if to_add > 0 {
        fraction.min(allowed)
    } else {
        fraction.max(allowed)
    }
}

/// `getReplicaSetFraction`.
fn replica_set_fraction(rs: &ReplicaSet, d: &Deployment) -> i64 {
    if d.replicas() == 0 {
        return -size(rs);
    }
    let deployment_replicas = d.replicas() + d.max_surge();
    let annotated = annotation_i64(rs, api::MAX_REPLICAS_ANNOTATION).unwrap_or(d.status.replicas);
    if annotated == 0 {
        return 0;
    }
    let new_size = (size(rs) * deployment_replicas) as f64 / annotated as f64;
    // `integer.RoundToInt32`: half away from zero.
    new_size.round() as i64 - size(rs)
}

/// `reconcileNewReplicaSet`: scales the new ReplicaSet down to `replicas`, or up by
/// [`new_rs_new_replicas`]; whether it scaled.
pub fn reconcile_new_replica_set(r: &mut Rollout) -> bool {
    let Some(new) = r.new else {
        return false;
    };
    let replicas = r.d.replicas();
    let current = size(&r.rss[new]);
    if current == replicas {
        return false;
    }
    if current > replicas {
        return r.scale_and_record(new, replicas);
    }
    let target = new_rs_new_replicas(&r.d, &r.rss, new);
    r.scale_and_record(new, target)
}

/// `reconcileOldReplicaSets`: scales old ReplicaSets down as far as availability allows:
/// first their unhealthy replicas ([`cleanup_unhealthy_replicas`]), then available ones
/// above `replicas − maxUnavailable`
/// ([`scale_down_old_replica_sets_for_rolling_update`]); whether it scaled.
pub fn reconcile_old_replica_sets(r: &mut Rollout) -> bool {
    let old = r.active(&r.old());
    let old_count: i64 = old.iter().map(|i| size(&r.rss[*i])).sum();
    if old_count == 0 {
        return false;
    }
    let all_count: i64 = r.rss.iter().map(size).sum();
    let min_available = r.d.replicas() - r.d.max_unavailable();
    let new_unavailable = r.new_rs().map_or(0, |rs| size(rs) - counted_available(rs));
    let max_scaled_down = all_count - min_available - new_unavailable;
    if max_scaled_down <= 0 {
        return false;
    }
    let cleaned = cleanup_unhealthy_replicas(r, &old, max_scaled_down);
    let scaled = scale_down_old_replica_sets_for_rolling_update(r, &old);
    cleaned + scaled > 0
}

/// `cleanupUnhealthyReplicas`: removes up to `max_cleanup` unavailable replicas from the
/// old ReplicaSets, oldest first (kubernetes #16737); how many.
pub fn cleanup_unhealthy_replicas(r: &mut Rollout, old: &[usize], max_cleanup: i64) -> i64 {
    let mut total = 0;
    for &i in old {
        if total >= max_cleanup {
            break;
        }
        let rs = &r.rss[i];
        let unhealthy = size(rs) - counted_available(rs);
        if size(rs) == 0 || unhealthy == 0 {
            continue;
        }
        let count = (max_cleanup - total).min(unhealthy);
        let target = size(rs) - count;
        r.scale_and_record(i, target);
        total += count;
    }
    total
}

/// `scaleDownOldReplicaSetsForRollingUpdate`: removes available replicas above
/// `replicas − maxUnavailable` from the old ReplicaSets, oldest first; how many.
pub fn scale_down_old_replica_sets_for_rolling_update(r: &mut Rollout, old: &[usize]) -> i64 {
    let min_available = r.d.replicas() - r.d.max_unavailable();
    let available: i64 = r.rss.iter().map(counted_available).sum();
    if available <= min_available {
        return 0;
    }
    let to_scale_down = available - min_available;
    let mut total = 0;
    for &i in old {
        if total >= to_scale_down {
            break;
        }
        let current = size(&r.rss[i]);
        if current == 0 {
            continue;
        }
        let count = current.min(to_scale_down - total);
        r.scale_and_record(i, current - count);
        total += count;
    }
    total
}

/// `oldPodsRunning`: an old ReplicaSet still reports pods, or has not settled (kcm), or
/// a pod of one that is neither Succeeded nor Failed remains.
pub fn old_pods_running(r: &Rollout, pods: &[Arc<CachedPod>]) -> bool {
    let old = r.old();
    if old.iter().any(|i| {
        let rs = &r.rss[*i];
        rs.status.replicas > 0 || rs.status.observed_generation < rs.metadata.generation
    }) {
        return true;
    }
    pods.iter().any(|pod| {
        let Some(owner) = pod.controller.as_deref() else {
            return false;
        };
        let of_old = old
            .iter()
            .any(|i| *owner.uid == r.rss[*i].metadata.uid && &*owner.kind == "ReplicaSet");
        of_old && !matches!(pod.phase, PodPhase::Succeeded | PodPhase::Failed)
    })
}

/// `rolloutRolling`.
pub fn rollout_rolling(r: &mut Rollout) -> Option<u64> {
    r.sync_revision(true);
    if reconcile_new_replica_set(r) {
        return r.sync_rollout_status();
    }
    if reconcile_old_replica_sets(r) {
        return r.sync_rollout_status();
    }
    if deployment_complete(&r.d, &r.d.status) {
        r.cleanup();
    }
    r.sync_rollout_status()
}

/// `rolloutRecreate`: every old ReplicaSet to 0; wait until no old pod runs; only then
/// create the new ReplicaSet and scale it to `replicas`.
pub fn rollout_recreate(r: &mut Rollout, pods: &[Arc<CachedPod>]) -> Option<u64> {
    r.sync_revision(false);
    let mut scaled = false;
    for i in r.active(&r.old()) {
        scaled |= r.scale_and_record(i, 0);
    }
    if scaled || old_pods_running(r, pods) {
        return r.sync_rollout_status();
    }
    if r.new.is_none() {
        r.sync_revision(true);
    }
    if let Some(new) = r.new {
        let replicas = r.d.replicas();
        r.scale_and_record(new, replicas);
    }
    if deployment_complete(&r.d, &r.d.status) {
        r.cleanup();
    }
    r.sync_rollout_status()
}

/// `sync` (sync.go): for a paused deployment or a scaling event: scale, clean up when
/// paused, write the status.
pub fn sync_scale(r: &mut Rollout) {
    r.sync_revision(false);
    r.scale_deployment();
    if r.d.spec.paused {
        r.cleanup();
    }
    r.sync_status();
}

/// `syncDeployment` after the claim: the writes for `d` over its ReplicaSets `rss` and
/// their pods `pods` at `now` (seconds since the epoch), a new ReplicaSet named by the
/// hash of the typed template.
pub fn plan(d: &Deployment, rss: Vec<ReplicaSet>, pods: &[Arc<CachedPod>], now: i64) -> Plan {
    plan_with_hash(d, rss, pods, now, None)
}

/// [`plan`], a new ReplicaSet named by `template_hash` when given: the
/// [`api::pod_template_hash`] of the deployment's template as stored, which differs from
/// the typed template's where the stored JSON has what kcm's model leaves out (a
/// `creationTimestamp: null`, an empty list).
pub fn plan_with_hash(
    d: &Deployment,
    rss: Vec<ReplicaSet>,
    pods: &[Arc<CachedPod>],
    now: i64,
    template_hash: Option<String>,
) -> Plan {
    let mut r = Rollout::new(d, rss, now);
    r.template_hash = template_hash;
    if d.metadata.deletion_timestamp.is_some() {
        // `syncStatusOnly`: no ReplicaSet writes while the deployment is deleted.
        r.find_new();
        r.sync_status();
        r.touched.clear();
        return r.into_plan(None);
    }
    r.check_paused_conditions();
    if d.spec.paused {
        sync_scale(&mut r);
        return r.into_plan(None);
    }
    let mut probe = r.clone();
    probe.find_new();
    if probe.is_scaling_event() {
        sync_scale(&mut r);
        return r.into_plan(None);
    }
    let requeue = if d.is_rolling_update() {
        rollout_rolling(&mut r)
    } else {
        rollout_recreate(&mut r, pods)
    };
    r.into_plan(requeue)
}

#[cfg(test)]
mod tests;
