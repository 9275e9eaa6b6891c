//! `kcm create -f FILE` (2014's `kubecfg create`, kubectl's `pkg/cmd/create/create.go`)
//! and `kcm create deployment NAME --image IMG` (kubectl's `create_deployment.go`; none of
//! it existed in 2014).

use super::deployments::DEPLOYMENTS_APPS;
use super::input::Manifests;
use super::manifest::{report_failures, with_manifest, FilenameOptions, Manifest};
use super::overlap::refuse_overlapping_manifests;
use super::print::emit;
use super::resource::kind_reference;
use super::storage::create_object;
use crate::api::{
    self, Container, Deployment, DeploymentSpec, DeploymentStrategy, LabelSelector, ObjectMeta,
    PodSpec, PodTemplateSpec,
};
use crate::client::Target;
use crate::labels::Set;
use crate::registry::{Registry, StorageError};

/// `kcm create -f FILE`: the same input as `apply`.
pub type CreateOptions = FilenameOptions;

/// `kcm create deployment NAME --image IMG --replicas N`.
#[derive(Clone, Debug)]
pub struct CreateDeploymentOptions {
    pub name: String,
    pub image: String,
    /// `spec.replicas`, 0 to [`api::MAX_REPLICAS`].
    pub replicas: i64,
    pub namespace: String,
}

/// `kcm create -f FILE`: decodes and validates every object, then creates each
/// (create-if-absent), printing `replicationcontrollers/web created` per object.
///
/// # Errors
/// Bad input (nothing is written), etcd unreachable, or objects that could not be
/// created (`... already exists`); the others are still created.
pub async fn create(target: &Target, options: CreateOptions) -> anyhow::Result<()> {
    let manifests = Manifests::read(&options.filename, options.namespace.as_deref())?;
    for p in manifests.iter() {
        let p = p?;
        let meta = p.manifest.metadata();
        anyhow::ensure!(
            meta.resource_version.is_none(),
            "{}: {}: metadata.resourceVersion may not be set on an object to be created \
             (`kcm apply` updates a stored object)",
            p.origin,
            p.manifest.reference()
        );
    }

    let (_client, registry) = super::connect(target).await?;
    refuse_overlapping_manifests(&registry, manifests.controllers()).await?;
    let mut failures = Vec::new();
    // One object decoded at a time (`input`).
    for p in manifests.iter() {
        let p = p?;
        match create_manifest(&registry, &p.manifest).await {
            Ok(()) => emit(&format!("{} created\n", p.manifest.reference()))?,
            Err(e) => failures.push(format!("{e:#}")),
        }
    }
    report_failures(failures, manifests.len(), "created")
}

/// Creates the object of `manifest`.
async fn create_manifest(registry: &Registry, manifest: &Manifest) -> anyhow::Result<()> {
    with_manifest!(manifest, object => create_object(registry, object).await)
}

/// `kcm create deployment NAME --image IMG --replicas N`.
///
/// # Errors
/// An invalid name or image, `deployments.apps "web" already exists`, or etcd failing.
pub async fn create_deployment(
    target: &Target,
    options: CreateDeploymentOptions,
) -> anyhow::Result<()> {
    let d = new_deployment(
        &options.namespace,
        &options.name,
        &options.image,
        options.replicas,
    );
    api::validate(&d).map_err(|e| anyhow::anyhow!("deployment {:?}: {e}", options.name))?;
    let (_client, registry) = super::connect(target).await?;
    registry.create(&d).await.map_err(|e| match e {
        StorageError::AlreadyExists { .. } => {
            anyhow::anyhow!("{DEPLOYMENTS_APPS} {:?} already exists", options.name)
        }
        other => other.into(),
    })?;
    emit(&format!(
        "{} created\n",
        kind_reference::<Deployment>(&options.name)
    ))
}

/// The container name `kubectl create deployment` derives from an image: the last path
/// segment without tag or digest (`registry:5000/team/nginx:1.25` → `nginx`).
pub fn container_name_for(image: &str) -> String {
    let base = image.split('@').next().unwrap_or(image);
    let last = base.rsplit('/').next().unwrap_or(base);
    let name = last.split(':').next().unwrap_or(last);
    let name: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    let name = name.trim_matches('-');
    if name.is_empty() {
        "container".to_string()
    } else {
        name.to_string()
    }
}

/// The Deployment `kcm create deployment NAME --image IMG --replicas N` writes: labels,
/// selector and template labels `app=NAME`, one container, Kubernetes' defaults.
pub fn new_deployment(namespace: &str, name: &str, image: &str, replicas: i64) -> Deployment {
    let labels: Set = [("app", name)].into_iter().collect();
    let template = PodTemplateSpec {
        metadata: ObjectMeta {
            labels: labels.clone(),
            ..ObjectMeta::default()
        },
        spec: PodSpec {
            containers: vec![Container {
                name: container_name_for(image),
                image: image.to_string(),
                ..Container::default()
            }],
            ..PodSpec::default()
        },
        ..PodTemplateSpec::default()
    };
    let mut d = Deployment {
        metadata: ObjectMeta {
            labels: labels.clone(),
            ..ObjectMeta::named(namespace, name)
        },
        spec: DeploymentSpec {
            replicas: Some(replicas),
            selector: Some(LabelSelector {
                match_labels: labels.clone(),
                ..LabelSelector::default()
            }),
            template: Some(template),
            strategy: Some(DeploymentStrategy::default()),
            ..DeploymentSpec::default()
        },
        ..Deployment::default()
    };
    d.set_defaults();
    d
}
