//! The helpers of Kubernetes' `pkg/controller/deployment/util/deployment_util.go`
//! (conditions, annotations, revisions, proportions, `NewRSNewReplicas`), with kcm's
//! occupancy and availability rules ([`unsettled`], [`occupancy`],
//! [`counted_available`]). Pure.
//!
//! `EqualIgnoreHash`, `Revision` and the owner check live in the parent module, `plan.rs`.

use std::cmp::Ordering;

use crate::api::{
    self, Deployment, DeploymentCondition, DeploymentStatus, ReplicaSet, DEPLOYMENT_PROGRESSING,
};

use super::{equal_ignore_hash, Rollout};

/// The longest `revision-history` annotation (`maxRevHistoryLengthInChars`).
const MAX_REV_HISTORY_LENGTH_IN_CHARS: usize = 2000;
/// `math.MaxInt32`: a progress deadline or history limit of this value means none.
pub(super) const MAX_INT32: i64 = i32::MAX as i64;

/// `spec.replicas` of a ReplicaSet (1 when absent).
pub(super) fn size(rs: &ReplicaSet) -> i64 {
    rs.replicas()
}

pub(super) fn annotation_i64(rs: &ReplicaSet, key: &str) -> Option<i64> {
    rs.metadata.annotations.get(key)?.parse().ok()
}

/// `ReplicaSetsByCreationTimestamp`: oldest first, then by name.
pub(super) fn by_creation(a: &ReplicaSet, b: &ReplicaSet) -> Ordering {
    a.metadata
        .creation_timestamp
        .cmp(&b.metadata.creation_timestamp)
        .then_with(|| a.metadata.name.cmp(&b.metadata.name))
}

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
pub(super) fn has_progress_deadline(d: &Deployment) -> bool {
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

pub(super) fn remove_condition(status: &mut DeploymentStatus, type_: &str) {
    status.conditions.retain(|c| c.type_ != type_);
}

/// `SetDeploymentRevision`.
pub(super) fn set_deployment_revision(d: &mut Deployment, revision: &str) {
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
pub(super) fn set_replicas_annotations(rs: &mut ReplicaSet, desired: i64, max: i64) -> bool {
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

impl Rollout {
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

    /// `FindActiveOrLatest`: the only active ReplicaSet, or the newest (the new one
    /// first) when none is active; `None` when several are.
    pub(super) fn find_active_or_latest(&self) -> Option<usize> {
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
    pub(super) fn is_saturated(&self, i: usize) -> bool {
        let rs = &self.rss[i];
        let replicas = self.d.replicas();
        annotation_i64(rs, api::DESIRED_REPLICAS_ANNOTATION) == Some(replicas)
            && size(rs) == replicas
            && rs.status.available_replicas == replicas
    }
}
