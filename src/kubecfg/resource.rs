//! kubectl's names of kinds and objects: the kinds on the command line ([`Kind`]), the
//! `TYPE/NAME` of the workloads ([`Workload`]: `deploy/web`, `rc/web`), and how an object
//! is named in output (`replicaset.apps/web`, `replicationcontrollers/web`). kubectl's
//! `pkg/cmd/util` and its REST mapper; 2014's kubecfg named kinds by their resource only.

use crate::api::Object;

/// The kinds kcm stores, as named on the command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Pods,
    Replicationcontrollers,
    Replicasets,
    Deployments,
    Services,
    Endpoints,
}

/// The kinds with a pod template, named `TYPE/NAME` by `set image` and `rollout`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WorkloadKind {
    ReplicationController,
    ReplicaSet,
    Deployment,
}

/// `TYPE/NAME` on the command line: `deploy/web`, `rc/web`, `replicaset/web`,
/// `deployment.apps/web`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Workload {
    pub kind: WorkloadKind,
    pub name: String,
}

impl std::str::FromStr for Workload {
    type Err = String;

    /// kubectl's spellings of each kind, with or without the `.apps` group.
    fn from_str(text: &str) -> Result<Workload, String> {
        let Some((kind, name)) = text.split_once('/') else {
            return Err(format!("expected TYPE/NAME (e.g. rs/web), got {text:?}"));
        };
        if name.is_empty() || name.contains('/') {
            return Err(format!("expected TYPE/NAME (e.g. rs/web), got {text:?}"));
        }
        let kind = match kind.strip_suffix(".apps").unwrap_or(kind) {
            "rc" | "replicationcontroller" | "replicationcontrollers" => {
                WorkloadKind::ReplicationController
            }
            "rs" | "replicaset" | "replicasets" => WorkloadKind::ReplicaSet,
            "deploy" | "deployment" | "deployments" => WorkloadKind::Deployment,
            other => {
                return Err(format!(
                    "unknown resource type {other:?}: expected deploy (deployment), rs \
                     (replicaset) or rc (replicationcontroller)"
                ))
            }
        };
        Ok(Workload {
            kind,
            name: name.to_string(),
        })
    }
}

/// How kubectl names a kind in its messages: `pod`, `replicaset.apps`, `deployment.apps`.
pub fn kubectl_kind<T: Object>() -> String {
    let kind = T::KIND.to_lowercase();
    match T::API_VERSION.split_once('/') {
        Some((group, _)) => format!("{kind}.{group}"),
        None => kind,
    }
}

/// kubectl's name of an object of kind `T`: the kind in lower case, its API group when it
/// has one, and the name (`replicaset.apps/web`, `replicationcontroller/web`, `pod/p`).
pub fn kind_reference<T: Object>(name: &str) -> String {
    format!("{}/{name}", kubectl_kind::<T>())
}

/// `{resource}/{name}`, kubectl's way of naming an object in output.
pub(super) fn reference<T: Object>(object: &T) -> String {
    format!("{}/{}", T::RESOURCE, object.metadata().name)
}
