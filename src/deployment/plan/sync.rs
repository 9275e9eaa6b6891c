//! Kubernetes' `pkg/controller/deployment/sync.go`: `sync` (scaling and paused
//! deployments), the revision sync and the new ReplicaSet (`getNewReplicaSet`), scaling
//! a ReplicaSet, `calculateStatus`, `checkPausedConditions`, `isScalingEvent` and
//! `cleanupDeployment`, as methods of the working copy [`Rollout`]. Pure.

use crate::api::{
    self, DeploymentStatus, LabelSelector, ReplicaSet, ReplicaSetSpec, CONDITION_TRUE,
    DEPLOYMENT_PROGRESSING, POD_TEMPLATE_HASH_LABEL,
};

use super::util::{
    annotation_i64, by_creation, get_proportion, has_progress_deadline, new_condition,
    new_rs_new_replicas, set_condition, set_deployment_revision, set_new_replica_set_annotations,
    set_replicas_annotations, size, MAX_INT32,
};
use super::{controller_ref, revision, Rollout};

impl Rollout {
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
    pub(super) fn scale_and_record(&mut self, i: usize, replicas: i64) -> bool {
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
