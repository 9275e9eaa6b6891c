//! Test fixtures: [`FakeCluster`], an in-memory stand-in for etcd behind both halves of the
//! sync's IO seam ([`FreshReads`] and [`PodControl`]) that records every write, and builders
//! for controllers (pods' are every replica controller's: `controller::fixtures`).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::api::{
    Container, ObjectMeta, Pod, PodSpec, PodTemplateSpec, ReplicationController,
    ReplicationControllerSpec, ResourceVersion,
};
pub use crate::controller::fixtures::{app, pod};
use crate::informer::{CachedPod, Namespace};
use crate::registry::StorageError;

use super::pod_control::{FreshReads, PodControl};
use crate::controller::replicas::{CreateOutcome, DeleteOutcome, StatusOutcome};
use crate::controller::NewPod;

/// Controllers and pods in memory, written the way etcd would write them (create-if-absent,
/// compare-and-swap on resourceVersion, one revision counter), with every write recorded.
/// Cheap to clone; clones share the state.
#[derive(Clone, Default)]
pub struct FakeCluster(Arc<Mutex<State>>);

#[derive(Default)]
pub struct State {
    revision: i64,
    /// By `namespace/name`.
    pub controllers: BTreeMap<String, ReplicationController>,
    /// By `namespace/name`.
    pub pods: BTreeMap<String, Pod>,
    /// Names (`namespace/name`) holding a value that does not decode.
    pub undecodable: Vec<String>,
    /// Every create asked for, in order, whatever it found.
    pub creates: Vec<Pod>,
    /// Every delete asked for: `namespace/name` and the guarding resourceVersion.
    pub deletes: Vec<(String, ResourceVersion)>,
    /// Every status write asked for: `namespace/name` and the count.
    pub statuses: Vec<(String, i64)>,
    /// Every create fails.
    pub fail_creates: bool,
    /// Once this many pods were created, every controller is deleted: later writes for
    /// them are refused as `ControllerGone`.
    pub delete_controllers_after: Option<usize>,
    created: usize,
}

impl FakeCluster {
    /// The state, to set up or inspect.
    pub fn state(&self) -> MutexGuard<'_, State> {
        self.0.lock().expect("fake cluster lock")
    }

    /// Stores `controller` at the next revision.
    pub fn put_controller(&self, mut controller: ReplicationController) -> &Self {
        let mut state = self.state();
        controller.metadata.resource_version = Some(state.next_revision());
        state
            .controllers
            .insert(controller.metadata.key(), controller);
        self
    }

    /// Stores `pod` at the next revision.
    pub fn put_pod(&self, mut pod: Pod) -> &Self {
        let mut state = self.state();
        pod.metadata.resource_version = Some(state.next_revision());
        state.pods.insert(pod.metadata.key(), pod);
        self
    }

    /// The names of the pods created, in order.
    pub fn created(&self) -> Vec<String> {
        let state = self.state();
        state
            .creates
            .iter()
            .map(|p| p.metadata.name.clone())
            .collect()
    }
}

impl State {
    fn next_revision(&mut self) -> ResourceVersion {
        self.revision += 1;
        ResourceVersion(self.revision)
    }

    /// Whether the incarnation of `controller` that the sync read still lives (the fake
    /// tells incarnations apart by uid; etcd by the key's create revision).
    fn lives(&self, controller: &ReplicationController) -> bool {
        self.controllers
            .get(&controller.metadata.key())
            .is_some_and(|stored| stored.metadata.uid == controller.metadata.uid)
    }
}

impl FreshReads for FakeCluster {
    async fn controller(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<ReplicationController, StorageError> {
        let key = format!("{namespace}/{name}");
        self.state()
            .controllers
            .get(&key)
            .cloned()
            .ok_or(StorageError::NotFound { key })
    }

    async fn pods(&self, namespace: &str) -> Result<Namespace<CachedPod>, StorageError> {
        let state = self.state();
        let in_namespace =
            |key: &&String| key.split_once('/').is_some_and(|(ns, _)| ns == namespace);
        let mut pods = Namespace::from_items(
            state
                .pods
                .iter()
                .filter(|(key, _)| in_namespace(key))
                .map(|(_, pod)| CachedPod::from(pod)),
        );
        for key in state.undecodable.iter().filter(in_namespace) {
            let (_, name) = key.split_once('/').expect("namespace/name");
            pods.mark_undecodable(name.into());
        }
        Ok(pods)
    }
}

impl PodControl for FakeCluster {
    async fn create_pod(
        &self,
        controller: &ReplicationController,
        pod: NewPod,
    ) -> anyhow::Result<CreateOutcome> {
        let mut pod = pod.into_pod();
        let mut state = self.state();
        let lives = state.lives(controller);
        state.creates.push(pod.clone());
        anyhow::ensure!(!state.fail_creates, "injected create failure");
        if !lives {
            return Ok(CreateOutcome::ControllerGone);
        }
        let key = pod.metadata.key();
        if let Some(existing) = state.pods.get(&key) {
            return Ok(CreateOutcome::Exists(Some(Box::new(existing.clone()))));
        }
        let revision = state.next_revision();
        pod.metadata.resource_version = Some(revision);
        state.pods.insert(key, pod);
        state.created += 1;
        if state.delete_controllers_after == Some(state.created) {
            state.controllers.clear();
        }
        Ok(CreateOutcome::Created(revision))
    }

    async fn delete_pod(
        &self,
        controller: &ReplicationController,
        namespace: &str,
        name: &str,
        resource_version: ResourceVersion,
    ) -> anyhow::Result<DeleteOutcome> {
        let mut state = self.state();
        let key = format!("{namespace}/{name}");
        state.deletes.push((key.clone(), resource_version));
        if !state.lives(controller) {
            return Ok(DeleteOutcome::ControllerGone);
        }
        let Some(pod) = state.pods.get(&key) else {
            return Ok(DeleteOutcome::Gone);
        };
        if pod.metadata.resource_version != Some(resource_version) {
            return Ok(DeleteOutcome::Changed);
        }
        state.pods.remove(&key);
        Ok(DeleteOutcome::Deleted(state.next_revision()))
    }

    async fn update_status(
        &self,
        controller: &ReplicationController,
        replicas: i64,
        ready: i64,
    ) -> anyhow::Result<StatusOutcome> {
        let mut state = self.state();
        let key = controller.metadata.key();
        state.statuses.push((key.clone(), replicas));
        let revision = state.next_revision();
        match state.controllers.get_mut(&key) {
            Some(stored)
                if stored.metadata.resource_version == controller.metadata.resource_version =>
            {
                stored.status.replicas = replicas;
                stored.status.ready_replicas = ready;
                stored.metadata.resource_version = Some(revision);
                Ok(StatusOutcome::Written(revision))
            }
            _ => Ok(StatusOutcome::Changed),
        }
    }
}

/// A valid controller `ns/{name}` with `replicas`, selecting `app={name}`, uid `uid-{name}`.
pub fn controller(name: &str, replicas: i64) -> ReplicationController {
    ReplicationController {
        metadata: ObjectMeta {
            uid: format!("uid-{name}"),
            ..ObjectMeta::named("ns", name)
        },
        spec: ReplicationControllerSpec {
            replicas,
            selector: app(name),
            template: Some(PodTemplateSpec {
                metadata: ObjectMeta {
                    labels: app(name),
                    ..ObjectMeta::default()
                },
                spec: PodSpec {
                    containers: vec![Container {
                        name: "nginx".into(),
                        image: "nginx".into(),
                        ..Container::default()
                    }],
                    host: "should-not-be-copied".into(),
                    ..PodSpec::default()
                },
                ..PodTemplateSpec::default()
            }),
            ..ReplicationControllerSpec::default()
        },
        ..ReplicationController::default()
    }
}
