//! Unit tests of the ReplicaSet controller: the pure decision, and whole syncs through a
//! recording fake of its IO ([`Fake`]: ReplicaSets and pods in memory, written the way
//! etcd would, guards included).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::api::{
    LabelSelector, LabelSelectorOperator, LabelSelectorRequirement, ObjectMeta, OwnerReference,
    Pod, PodPhase, PodTemplateSpec, ReplicaSet, ReplicaSetSpec, ReplicaSetStatus, ResourceVersion,
    REPLICA_FAILURE,
};
use crate::controller::fixtures::{app, pod};
use crate::controller::replicas::{CreateOutcome, DeleteOutcome, StatusOutcome};
use crate::controller::NewPod;
use crate::informer::{CachedPod, Namespace};
use crate::registry::StorageError;
use crate::status::Metrics;

use super::control::{ClaimOutcome, ReplicaSetControl, ReplicaSetReads};
use super::plan::{self, controller_ref};
use super::{ReplicaSetConfig, ReplicaSetController};

#[derive(Default)]
struct State {
    revision: i64,
    replica_sets: BTreeMap<String, ReplicaSet>,
    pods: BTreeMap<String, Pod>,
    /// Every write asked for, as `op ns/name`.
    log: Vec<String>,
    fail_creates: bool,
    fail_deletes: bool,
    /// After this many creates, the ReplicaSet is resized behind the sync's back.
    change_rs_after_creates: Option<usize>,
    created: usize,
}

impl State {
    fn next(&mut self) -> ResourceVersion {
        self.revision += 1;
        ResourceVersion(self.revision)
    }

    /// Whether `rs` is stored unchanged since the sync read it (etcd: `mod_revision`).
    fn unchanged(&self, rs: &ReplicaSet) -> bool {
        self.replica_sets
            .get(&rs.metadata.key())
            .is_some_and(|s| s.metadata.resource_version == rs.metadata.resource_version)
    }

    fn alive(&self, rs: &ReplicaSet) -> bool {
        self.replica_sets
            .get(&rs.metadata.key())
            .is_some_and(|s| s.metadata.uid == rs.metadata.uid)
    }
}

#[derive(Clone, Default)]
struct Fake(Arc<Mutex<State>>);

impl Fake {
    fn state(&self) -> MutexGuard<'_, State> {
        self.0.lock().unwrap()
    }

    fn put_rs(&self, mut rs: ReplicaSet) {
        let mut state = self.state();
        rs.metadata.resource_version = Some(state.next());
        state.replica_sets.insert(rs.metadata.key(), rs);
    }

    fn put_pod(&self, mut pod: Pod) {
        let mut state = self.state();
        pod.metadata.resource_version = Some(state.next());
        state.pods.insert(pod.metadata.key(), pod);
    }

    fn rs(&self, name: &str) -> ReplicaSet {
        self.state().replica_sets[&format!("ns/{name}")].clone()
    }

    fn log(&self) -> Vec<String> {
        std::mem::take(&mut self.state().log)
    }

    /// `name: controller uid` of every pod.
    fn owners(&self) -> Vec<(String, Option<String>)> {
        self.state()
            .pods
            .values()
            .map(|p| {
                let refs: Vec<_> = p
                    .metadata
                    .owner_references
                    .iter()
                    .filter(|r| r.is_controller())
                    .collect();
                assert!(refs.len() <= 1, "two controller references on {p:?}");
                (p.metadata.name.clone(), refs.first().map(|r| r.uid.clone()))
            })
            .collect()
    }
}

impl ReplicaSetReads for Fake {
    async fn replica_set(&self, namespace: &str, name: &str) -> Result<ReplicaSet, StorageError> {
        let key = format!("{namespace}/{name}");
        self.state()
            .replica_sets
            .get(&key)
            .cloned()
            .ok_or(StorageError::NotFound { key })
    }

    async fn pods(&self, namespace: &str) -> Result<Namespace<CachedPod>, StorageError> {
        let state = self.state();
        Ok(Namespace::from_items(
            state
                .pods
                .values()
                .filter(|p| p.metadata.namespace == namespace)
                .map(CachedPod::from),
        ))
    }
}

impl ReplicaSetControl for Fake {
    async fn create_pod(&self, rs: &ReplicaSet, pod: NewPod) -> anyhow::Result<CreateOutcome> {
        let mut pod = pod.into_pod();
        let mut state = self.state();
        state.log.push(format!("create {}", pod.metadata.key()));
        anyhow::ensure!(!state.fail_creates, "injected create failure");
        if !state.unchanged(rs) {
            return Ok(CreateOutcome::ControllerGone);
        }
        let key = pod.metadata.key();
        if let Some(existing) = state.pods.get(&key) {
            return Ok(CreateOutcome::Exists(Some(Box::new(existing.clone()))));
        }
        let revision = state.next();
        pod.metadata.resource_version = Some(revision);
        state.pods.insert(key, pod);
        state.created += 1;
        if state.change_rs_after_creates == Some(state.created) {
            let next = state.next();
            let stored = state.replica_sets.get_mut(&rs.metadata.key()).unwrap();
            stored.metadata.resource_version = Some(next);
        }
        Ok(CreateOutcome::Created(revision))
    }

    async fn delete_pod(
        &self,
        rs: &ReplicaSet,
        namespace: &str,
        name: &str,
        resource_version: ResourceVersion,
    ) -> anyhow::Result<DeleteOutcome> {
        let mut state = self.state();
        let key = format!("{namespace}/{name}");
        state.log.push(format!("delete {key}"));
        anyhow::ensure!(!state.fail_deletes, "injected delete failure");
        if !state.alive(rs) {
            return Ok(DeleteOutcome::ControllerGone);
        }
        match state.pods.get(&key) {
            None => Ok(DeleteOutcome::Gone),
            Some(p) if p.metadata.resource_version != Some(resource_version) => {
                Ok(DeleteOutcome::Changed)
            }
            Some(_) => {
                state.pods.remove(&key);
                Ok(DeleteOutcome::Deleted(state.next()))
            }
        }
    }

    async fn adopt(
        &self,
        rs: &ReplicaSet,
        namespace: &str,
        name: &str,
        resource_version: ResourceVersion,
    ) -> anyhow::Result<ClaimOutcome> {
        let mut state = self.state();
        let key = format!("{namespace}/{name}");
        state.log.push(format!("adopt {key}"));
        if !state.unchanged(rs) {
            return Ok(ClaimOutcome::OwnerChanged);
        }
        let revision = state.next();
        match state.pods.get_mut(&key) {
            Some(p) if p.metadata.resource_version == Some(resource_version) => {
                p.metadata.owner_references.push(controller_ref(rs));
                p.metadata.resource_version = Some(revision);
                Ok(ClaimOutcome::Done(revision))
            }
            _ => Ok(ClaimOutcome::PodChanged),
        }
    }

    async fn release(
        &self,
        rs: &ReplicaSet,
        namespace: &str,
        name: &str,
        resource_version: ResourceVersion,
    ) -> anyhow::Result<ClaimOutcome> {
        let mut state = self.state();
        let key = format!("{namespace}/{name}");
        state.log.push(format!("release {key}"));
        let revision = state.next();
        match state.pods.get_mut(&key) {
            Some(p) if p.metadata.resource_version == Some(resource_version) => {
                p.metadata
                    .owner_references
                    .retain(|r| r.uid != rs.metadata.uid);
                p.metadata.resource_version = Some(revision);
                Ok(ClaimOutcome::Done(revision))
            }
            _ => Ok(ClaimOutcome::PodChanged),
        }
    }

    async fn update_status(
        &self,
        rs: &ReplicaSet,
        status: ReplicaSetStatus,
    ) -> anyhow::Result<StatusOutcome> {
        let mut state = self.state();
        state.log.push(format!("status {}", rs.metadata.key()));
        if !state.unchanged(rs) {
            return Ok(StatusOutcome::Changed);
        }
        let revision = state.next();
        let stored = state.replica_sets.get_mut(&rs.metadata.key()).unwrap();
        stored.status = status;
        stored.metadata.resource_version = Some(revision);
        Ok(StatusOutcome::Written(revision))
    }
}

/// ReplicaSet `ns/{name}` of `replicas`, selecting `app={name}` plus `tier In (front)`.
fn replica_set(name: &str, replicas: i64) -> ReplicaSet {
    let mut labels = app(name);
    labels.insert("tier", "front");
    ReplicaSet {
        metadata: ObjectMeta {
            uid: format!("uid-{name}"),
            generation: 2,
            ..ObjectMeta::named("ns", name)
        },
        spec: ReplicaSetSpec {
            replicas: Some(replicas),
            selector: Some(LabelSelector {
                match_labels: app(name),
                match_expressions: vec![LabelSelectorRequirement {
                    key: "tier".into(),
                    operator: LabelSelectorOperator::In,
                    values: vec!["front".into()],
                    extra: Default::default(),
                }],
                ..LabelSelector::default()
            }),
            template: Some(PodTemplateSpec {
                metadata: ObjectMeta {
                    labels,
                    ..ObjectMeta::default()
                },
                ..PodTemplateSpec::default()
            }),
            ..ReplicaSetSpec::default()
        },
        ..ReplicaSet::default()
    }
}

fn front(name: &str) -> crate::labels::Set {
    let mut labels = app(name);
    labels.insert("tier", "front");
    labels
}

fn orphan(name: &str, labels: &crate::labels::Set) -> Pod {
    pod(
        name,
        labels,
        PodPhase::Running,
        "node-1",
        "2026-01-01T00:00:00Z",
    )
}

fn owned_by(mut pod: Pod, rs: &ReplicaSet) -> Pod {
    pod.metadata.owner_references.push(controller_ref(rs));
    pod
}

fn controller(fake: &Fake) -> ReplicaSetController<Fake, Fake> {
    ReplicaSetController::with_io(
        fake.clone(),
        fake.clone(),
        ReplicaSetConfig::default(),
        Arc::new(Metrics::new()),
    )
}

fn ops(log: &[String], op: &str) -> usize {
    log.iter().filter(|l| l.starts_with(op)).count()
}

#[tokio::test]
async fn a_replica_set_creates_its_pods_with_one_controller_reference_and_writes_status() {
    let fake = Fake::default();
    fake.put_rs(replica_set("web", 3));
    let c = controller(&fake);
    c.sync(&"ns/web".into()).await.unwrap();
    let log = fake.log();
    assert_eq!(ops(&log, "create"), 3, "{log:?}");
    for (name, owner) in fake.owners() {
        assert!(name.starts_with("web-") && name.len() == 9, "{name}");
        assert_eq!(owner.as_deref(), Some("uid-web"));
    }
    let pod = fake.state().pods.values().next().unwrap().clone();
    assert_eq!(
        pod.metadata.owner_references,
        vec![OwnerReference {
            api_version: "apps/v1".into(),
            kind: "ReplicaSet".into(),
            name: "web".into(),
            uid: "uid-web".into(),
            controller: Some(true),
            block_owner_deletion: Some(true),
            ..OwnerReference::default()
        }]
    );
    let status = fake.rs("web").status;
    assert_eq!(
        (
            status.replicas,
            status.fully_labeled_replicas,
            status.observed_generation
        ),
        (3, 3, 2)
    );
    // Converged: the next sync creates and deletes nothing. The pods were created Pending
    // and no kubelet ran them, so none is ready.
    c.sync(&"ns/web".into()).await.unwrap();
    let log = fake.log();
    assert_eq!(ops(&log, "create") + ops(&log, "delete"), 0, "{log:?}");
    assert_eq!(fake.rs("web").status.ready_replicas, 0);
    c.sync(&"ns/web".into()).await.unwrap();
    assert!(fake.log().is_empty(), "an unchanged status is not written");
}

#[tokio::test]
async fn matching_orphans_are_adopted_and_only_the_rest_created() {
    let fake = Fake::default();
    for i in 0..3 {
        fake.put_pod(orphan(&format!("old-{i}"), &front("web")));
    }
    // Not matching (no tier), and owned by someone else: left alone.
    fake.put_pod(orphan("other", &app("web")));
    let other = replica_set("other", 1);
    fake.put_pod(owned_by(orphan("taken", &front("web")), &other));
    fake.put_rs(replica_set("web", 5));
    controller(&fake).sync(&"ns/web".into()).await.unwrap();
    let log = fake.log();
    assert_eq!(ops(&log, "adopt"), 3, "{log:?}");
    assert_eq!(ops(&log, "create"), 2, "{log:?}");
    let owners: BTreeMap<_, _> = fake.owners().into_iter().collect();
    assert_eq!(owners["old-0"].as_deref(), Some("uid-web"));
    assert_eq!(owners["other"], None);
    assert_eq!(owners["taken"].as_deref(), Some("uid-other"));
}

#[tokio::test]
async fn a_pod_that_stops_matching_is_released_and_replaced() {
    let fake = Fake::default();
    let rs = replica_set("web", 2);
    fake.put_rs(rs.clone());
    fake.put_pod(owned_by(orphan("a", &front("web")), &rs));
    fake.put_pod(owned_by(orphan("b", &app("web")), &rs));
    let c = controller(&fake);
    c.sync(&"ns/web".into()).await.unwrap();
    let log = fake.log();
    assert_eq!(
        log.iter().filter(|l| *l == "release ns/b").count(),
        1,
        "{log:?}"
    );
    assert_eq!(ops(&log, "create"), 1, "{log:?}");
    let owners: BTreeMap<_, _> = fake.owners().into_iter().collect();
    assert_eq!(owners["b"], None, "released, and kept");
}

#[tokio::test]
async fn a_namesakes_pods_are_not_owned_and_an_rc_selected_orphan_is_not_adopted() {
    let rs = replica_set("web", 3);
    let mut namesake = rs.clone();
    namesake.metadata.uid = "uid-old".into();
    let pods = Namespace::from_items(
        [
            owned_by(orphan("stale", &front("web")), &namesake),
            orphan("rcs", &front("web")),
            orphan("free", &{
                let mut l = front("web");
                l.insert("x", "y");
                l
            }),
        ]
        .iter()
        .map(|p| {
            let mut p = p.clone();
            p.metadata.resource_version = Some(ResourceVersion(1));
            CachedPod::from(&p)
        }),
    );
    let selector = rs.spec.selector.as_ref().unwrap().to_selector().unwrap();
    // An RC selecting `x` absent... selects "rcs" only: its labels lack `x`.
    let rc_selects = |labels: &crate::labels::Set| labels.get("x").is_none();
    let decision = plan::decide(&rs, &selector, Some(&pods), 500, rc_selects);
    let adopted: Vec<_> = decision.claims.adopt.iter().map(|p| &*p.name).collect();
    assert_eq!(adopted, ["free"]);
    assert!(decision.claims.owned.is_empty());
    assert_eq!(decision.creates.len(), 2);
    // The namesake's pod is counted: a cache showing one may predate the orphaning that
    // freed it, so the sync confirms such a create from etcd.
    assert_eq!(decision.claims.namesakes, 1);
    let own_pods_only = Namespace::from_items(
        pods.items()
            .filter(|p| &*p.name != "stale")
            .map(|p| (**p).clone()),
    );
    let decision = plan::decide(&rs, &selector, Some(&own_pods_only), 500, rc_selects);
    assert_eq!(decision.claims.namesakes, 0);
}

#[tokio::test]
async fn scale_down_deletes_the_lowest_ranked_guarded_by_resource_version() {
    let fake = Fake::default();
    let rs = replica_set("web", 1);
    fake.put_rs(rs.clone());
    let mut pending = owned_by(orphan("pending", &front("web")), &rs);
    pending.status.as_mut().unwrap().phase = PodPhase::Pending;
    fake.put_pod(owned_by(orphan("running", &front("web")), &rs));
    fake.put_pod(pending);
    let mut unassigned = owned_by(orphan("unassigned", &front("web")), &rs);
    unassigned.spec.host.clear();
    fake.put_pod(unassigned);
    controller(&fake).sync(&"ns/web".into()).await.unwrap();
    let log = fake.log();
    assert_eq!(
        log[..2],
        [
            "delete ns/unassigned".to_string(),
            "delete ns/pending".to_string()
        ]
    );
    assert_eq!(fake.rs("web").status.replicas, 1);
}

#[tokio::test]
async fn a_deleting_replica_set_only_writes_status() {
    let fake = Fake::default();
    let mut rs = replica_set("web", 3);
    rs.metadata.deletion_timestamp = Some("2026-01-01T00:00:00Z".into());
    fake.put_pod(owned_by(orphan("mine", &app("web")), &rs));
    fake.put_pod(orphan("orphan", &front("web")));
    fake.put_rs(rs);
    controller(&fake).sync(&"ns/web".into()).await.unwrap();
    assert_eq!(fake.log(), ["status ns/web"]);
    assert_eq!(fake.rs("web").status.replicas, 1);
}

#[tokio::test]
async fn a_failed_create_sets_replica_failure_and_success_clears_it() {
    let fake = Fake::default();
    fake.put_rs(replica_set("web", 2));
    fake.state().fail_creates = true;
    let c = controller(&fake);
    let err = c.sync(&"ns/web".into()).await.unwrap_err();
    assert!(
        format!("{err:#}").contains("injected create failure"),
        "{err:#}"
    );
    let status = fake.rs("web").status;
    let condition = &status.conditions[0];
    assert_eq!(
        (
            condition.type_.as_str(),
            condition.status.as_str(),
            condition.reason.as_str()
        ),
        (REPLICA_FAILURE, "True", "FailedCreate")
    );
    assert!(condition.message.contains("injected create failure"));
    fake.state().fail_creates = false;
    c.sync(&"ns/web".into()).await.unwrap();
    assert!(fake.rs("web").status.conditions.is_empty());
}

#[tokio::test]
async fn a_failed_delete_sets_failed_delete() {
    let fake = Fake::default();
    let rs = replica_set("web", 0);
    fake.put_rs(rs.clone());
    fake.put_pod(owned_by(orphan("a", &front("web")), &rs));
    fake.state().fail_deletes = true;
    assert!(controller(&fake).sync(&"ns/web".into()).await.is_err());
    assert_eq!(fake.rs("web").status.conditions[0].reason, "FailedDelete");
}

#[tokio::test]
async fn an_invalid_replica_set_gets_no_writes() {
    let fake = Fake::default();
    let mut rs = replica_set("web", 2);
    rs.spec.selector = Some(LabelSelector::default());
    fake.put_rs(rs);
    controller(&fake).sync(&"ns/web".into()).await.unwrap();
    assert!(fake.log().is_empty());
}

#[tokio::test]
async fn a_replica_set_without_a_uid_gets_no_writes() {
    let fake = Fake::default();
    let mut rs = replica_set("web", 2);
    rs.metadata.uid.clear();
    fake.put_rs(rs);
    controller(&fake).sync(&"ns/web".into()).await.unwrap();
    assert!(fake.log().is_empty());
}

#[tokio::test]
async fn creates_stop_when_the_replica_set_changes_mid_sync() {
    let fake = Fake::default();
    fake.put_rs(replica_set("web", 10));
    fake.state().change_rs_after_creates = Some(1);
    controller(&fake).sync(&"ns/web".into()).await.unwrap();
    let log = fake.log();
    // The first batch of slow start is one create; the second is refused and ends the
    // sync with no status write.
    assert_eq!(fake.state().created, 1, "{log:?}");
    assert_eq!(ops(&log, "status"), 0, "{log:?}");
}
