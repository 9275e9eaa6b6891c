//! `kcm set image TYPE/NAME CONTAINER=IMAGE...`: kubectl's `set image`
//! (`kubectl/pkg/cmd/set/set_image.go`) for the kinds with a pod template. 2014's kubecfg
//! had no such verb (a rolling update replaced the whole controller); the image change is
//! pure ([`set_images`]), the write a compare-and-swap retried on conflict.

use super::print::emit;
use super::resource::{kind_reference, Workload, WorkloadKind};
use super::storage::update_error;
use crate::api::{self, Deployment, Object, PodTemplateSpec, ReplicaSet, ReplicationController};
use crate::client::Target;
use crate::registry::Registry;

/// `kcm set image TYPE/NAME CONTAINER=IMAGE...`.
#[derive(Clone, Debug)]
pub struct SetImageOptions {
    pub workload: Workload,
    /// `(container, image)` pairs; container `*` is every container.
    pub images: Vec<(String, String)>,
    pub namespace: String,
    /// With `--record`: the command line, for the `kubernetes.io/change-cause` annotation
    /// (written only when an image changes).
    pub change_cause: Option<String>,
}

/// A kind whose objects carry a pod template, so `set image` can change it.
pub trait Templated: Object {
    /// The pod template, when the object has one.
    fn template_mut(&mut self) -> Option<&mut PodTemplateSpec>;
}

impl Templated for ReplicationController {
    fn template_mut(&mut self) -> Option<&mut PodTemplateSpec> {
        self.spec.template.as_mut()
    }
}

impl Templated for Deployment {
    fn template_mut(&mut self) -> Option<&mut PodTemplateSpec> {
        self.spec.template.as_mut()
    }
}

impl Templated for ReplicaSet {
    fn template_mut(&mut self) -> Option<&mut PodTemplateSpec> {
        self.spec.template.as_mut()
    }
}

/// Parses `CONTAINER=IMAGE` (`*=IMAGE` for every container).
///
/// # Errors
/// One without `=`, or with an empty side.
pub fn parse_image_update(text: &str) -> anyhow::Result<(String, String)> {
    match text.split_once('=') {
        Some((container, image)) if !container.is_empty() && !image.is_empty() => {
            Ok((container.to_string(), image.to_string()))
        }
        _ => anyhow::bail!(
            "invalid image update {text:?}: expected CONTAINER=IMAGE (or *=IMAGE for every \
             container)"
        ),
    }
}

/// Sets the images `updates` name in `template` (kubectl's `set image`): `*` names every
/// container. Returns whether any image changed.
///
/// # Errors
/// `unable to find container named "x"` for a name no container has (nothing is changed
/// then, as the caller drops the copy).
pub fn set_images(
    template: Option<&mut PodTemplateSpec>,
    updates: &[(String, String)],
) -> anyhow::Result<bool> {
    let mut empty = Vec::new();
    let containers = template.map_or(&mut empty, |t| &mut t.spec.containers);
    let mut changed = false;
    for (name, image) in updates {
        let mut found = false;
        for container in containers
            .iter_mut()
            .filter(|c| name == "*" || &c.name == name)
        {
            found = true;
            if &container.image != image {
                container.image.clone_from(image);
                changed = true;
            }
        }
        anyhow::ensure!(found, "unable to find container named {name:?}");
    }
    Ok(changed)
}

/// `kcm set image TYPE/NAME CONTAINER=IMAGE...`.
///
/// # Errors
/// Not found, `unable to find container named "x"` (nothing written), or etcd failing.
pub async fn set_image(target: &Target, options: SetImageOptions) -> anyhow::Result<()> {
    let (_client, registry) = super::connect(target).await?;
    match options.workload.kind {
        WorkloadKind::ReplicationController => {
            set_image_kind::<ReplicationController>(&registry, &options).await
        }
        WorkloadKind::ReplicaSet => set_image_kind::<ReplicaSet>(&registry, &options).await,
        WorkloadKind::Deployment => set_image_kind::<Deployment>(&registry, &options).await,
    }
}

async fn set_image_kind<T: Templated>(
    registry: &Registry,
    options: &SetImageOptions,
) -> anyhow::Result<()> {
    let name = &options.workload.name;
    let mut changed = false;
    registry
        .guaranteed_update::<T, _>(&options.namespace, name, |mut object| {
            changed = set_images(object.template_mut(), &options.images)?;
            if let Some(cause) = options.change_cause.as_ref().filter(|_| changed) {
                object
                    .metadata_mut()
                    .annotations
                    .insert(api::CHANGE_CAUSE_ANNOTATION.to_string(), cause.clone());
            }
            Ok(object)
        })
        .await
        .map_err(|e| update_error::<T>(e, name))?;
    let reference = kind_reference::<T>(name);
    if changed {
        emit(&format!("{reference} image updated\n"))
    } else {
        // kubectl prints nothing when the patch is empty; say why on stderr.
        eprintln!("kcm: note: {reference} already runs those images; nothing changed");
        Ok(())
    }
}
