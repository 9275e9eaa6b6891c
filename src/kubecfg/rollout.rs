//! `kcm rollout status|history|undo|pause|resume|restart deploy/NAME`. Mirrors kubectl's
//! `pkg/cmd/rollout/` and `pkg/polymorphichelpers/` (`DeploymentStatusViewer`,
//! `DeploymentHistoryViewer`, `DeploymentRollbacker`, `ObjectPauser`, `ObjectResumer`,
//! `ObjectRestarter`), with their exact messages; none of it existed in 2014.
//!
//! Invariants:
//! - what a verb decides (the status line, the history table, the revision to roll back
//!   to) is a pure function over what was read, unit-tested;
//! - every spec write is a compare-and-swap on the revision read, retried from the current
//!   object after a conflict (`Registry::guaranteed_update`), its checks re-run on that
//!   object, so unknown fields survive and `generation` follows the spec;
//! - `rollout status` watches the deployment (a resumable etcd watch); it never polls.

use std::collections::BTreeMap;
use std::time::Duration;

use super::deployments::{not_found, read_deployment, DEPLOYMENTS_APPS};
use super::print::{emit, or_none, render_tabbed, template_text};
use super::resource::kind_reference;
use crate::api::{
    self, Deployment, ReplicaSet, ANNOTATIONS_TO_SKIP, CHANGE_CAUSE_ANNOTATION,
    DEPLOYMENT_PROGRESSING, POD_TEMPLATE_HASH_LABEL, TIMED_OUT_REASON,
};
use crate::client::Target;
use crate::etcd_watcher::Watcher;

/// `kcm rollout history|undo|pause|resume|restart deploy/NAME`.
#[derive(Clone, Debug)]
pub struct RolloutOptions {
    /// The deployment's name.
    pub name: String,
    pub namespace: String,
    /// `history --revision N` (the template of revision N) or `undo --to-revision N`; 0
    /// for none (history: the table; undo: the revision before the current).
    pub revision: i64,
}

/// `kcm rollout status deploy/NAME`.
#[derive(Clone, Debug)]
pub struct RolloutStatusOptions {
    /// The deployment's name.
    pub name: String,
    pub namespace: String,
    /// `--revision N`: fail unless the deployment's revision is N; 0 for any.
    pub revision: i64,
    /// Follow the rollout until it ends (else print the current line once).
    pub watch: bool,
    /// Give up after this long; `None` (or zero) waits for ever.
    pub timeout: Option<Duration>,
}

/// The pod template annotation `rollout restart` sets to the current time.
pub const RESTARTED_AT_ANNOTATION: &str = "kubectl.kubernetes.io/restartedAt";

// ---------------------------------------------------------------------------------------
// Pure parts

/// kubectl's `DeploymentStatusViewer.Status`: the line `rollout status` prints for `d` and
/// whether the rollout is complete. `revision` (`--revision`, 0 for any) must be the
/// deployment's current revision.
///
/// # Errors
/// `deployment "web" exceeded its progress deadline`, or a revision mismatch.
pub fn rollout_status(d: &Deployment, revision: i64) -> Result<(String, bool), String> {
    let name = &d.metadata.name;
    if revision > 0 {
        let current = api::revision(&d.metadata.annotations);
        if current != Some(revision) {
            return Err(format!(
                "desired revision ({revision}) is different from the running revision ({})",
                current.unwrap_or(0)
            ));
        }
    }
    if d.metadata.generation > d.status.observed_generation {
        return Ok((
            "Waiting for deployment spec update to be observed...".to_string(),
            false,
        ));
    }
    if d.condition(DEPLOYMENT_PROGRESSING)
        .is_some_and(|c| c.reason == TIMED_OUT_REASON)
    {
        return Err(format!(
            "deployment {name:?} exceeded its progress deadline"
        ));
    }
    let status = &d.status;
    let waiting = |what: String| {
        Ok((
            format!("Waiting for deployment {name:?} rollout to finish: {what}..."),
            false,
        ))
    };
    if status.updated_replicas < d.replicas() {
        return waiting(format!(
            "{} out of {} new replicas have been updated",
            status.updated_replicas,
            d.replicas()
        ));
    }
    if status.replicas > status.updated_replicas {
        return waiting(format!(
            "{} old replicas are pending termination",
            status.replicas - status.updated_replicas
        ));
    }
    if status.available_replicas < status.updated_replicas {
        return waiting(format!(
            "{} of {} updated replicas are available",
            status.available_replicas, status.updated_replicas
        ));
    }
    Ok((format!("deployment {name:?} successfully rolled out"), true))
}

/// kubectl's `deploymentRevision`: the ReplicaSet of `to_revision`, or with 0 the one of
/// the second-highest revision (the one before the current).
///
/// # Errors
/// `unable to find specified revision N in history`, or `no rollout history found for
/// deployment "web"`.
pub fn revision_to_roll_back_to<'a>(
    d: &Deployment,
    owned: &'a [ReplicaSet],
    to_revision: i64,
) -> anyhow::Result<&'a ReplicaSet> {
    let mut by_revision: Vec<(i64, &ReplicaSet)> = owned
        .iter()
        .filter_map(|rs| Some((api::revision(&rs.metadata.annotations)?, rs)))
        .collect();
    if to_revision > 0 {
        return by_revision
            .into_iter()
            .find(|(revision, _)| *revision == to_revision)
            .map(|(_, rs)| rs)
            .ok_or_else(|| {
                anyhow::anyhow!("unable to find specified revision {to_revision} in history")
            });
    }
    by_revision.sort_by_key(|(revision, _)| std::cmp::Reverse(*revision));
    by_revision.get(1).map(|(_, rs)| *rs).ok_or_else(|| {
        anyhow::anyhow!(
            "no rollout history found for deployment {:?}",
            d.metadata.name
        )
    })
}

/// What `rollout undo` writes: `d` with `rs`'s template (the hash label removed) and
/// annotations (the deployment's own kept for the skip list, the ReplicaSet's for the
/// rest), as kubectl's `DeploymentRollbacker` patches it. `None` when the template
/// already matches.
///
/// # Errors
/// A paused deployment (kubectl's message).
pub fn rolled_back(mut d: Deployment, rs: &ReplicaSet) -> anyhow::Result<Option<Deployment>> {
    anyhow::ensure!(
        !d.spec.paused,
        "you cannot rollback a paused deployment; resume it first with 'kcm rollout resume' \
         and try again"
    );
    // kubectl compares the templates as Go values: a missing one is the empty one.
    let mut template = rs.spec.template.clone().unwrap_or_default();
    let current = d.spec.template.clone().unwrap_or_default();
    if api::equal_ignore_hash(&template, &current) {
        return Ok(None);
    }
    template.metadata.labels = template
        .metadata
        .labels
        .iter()
        .filter(|(key, _)| key.as_str() != POD_TEMPLATE_HASH_LABEL)
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    d.spec.template = Some(template);
    let mut annotations: BTreeMap<String, String> = d
        .metadata
        .annotations
        .iter()
        .filter(|(key, _)| ANNOTATIONS_TO_SKIP.contains(&key.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    for (key, value) in &rs.metadata.annotations {
        if !ANNOTATIONS_TO_SKIP.contains(&key.as_str()) {
            annotations.insert(key.clone(), value.clone());
        }
    }
    d.metadata.annotations = annotations;
    Ok(Some(d))
}

/// The text of `rollout history`: kubectl's `REVISION  CHANGE-CAUSE` table of `owned`,
/// in ascending revision order.
pub fn history_text(d: &Deployment, owned: &[ReplicaSet]) -> String {
    let mut revisions: Vec<(i64, &str)> = owned
        .iter()
        .filter_map(|rs| {
            let cause = rs
                .metadata
                .annotations
                .get(CHANGE_CAUSE_ANNOTATION)
                .map_or("", String::as_str);
            Some((api::revision(&rs.metadata.annotations)?, cause))
        })
        .collect();
    revisions.sort_unstable();
    let rows: Vec<Vec<String>> = revisions
        .into_iter()
        .map(|(revision, cause)| vec![revision.to_string(), or_none(cause.to_string())])
        .collect();
    let mut out = format!("{}\n", kind_reference::<Deployment>(&d.metadata.name));
    if rows.is_empty() {
        out.push_str("No rollout history found.\n");
    } else {
        out.push_str(&render_tabbed(&["REVISION", "CHANGE-CAUSE"], &rows));
    }
    out
}

// ---------------------------------------------------------------------------------------
// The verbs

/// `kcm rollout history deploy/NAME [--revision N]`.
///
/// # Errors
/// Not found, `unable to find the specified revision`, or etcd failing.
pub async fn history(target: &Target, options: RolloutOptions) -> anyhow::Result<()> {
    let (_client, registry) = super::connect(target).await?;
    let (d, owned) = read_deployment(&registry, &options.namespace, &options.name).await?;
    if options.revision == 0 {
        return emit(&history_text(&d, &owned));
    }
    let rs = owned
        .iter()
        .find(|rs| api::revision(&rs.metadata.annotations) == Some(options.revision))
        .ok_or_else(|| anyhow::anyhow!("unable to find the specified revision"))?;
    let mut out = format!(
        "{} with revision #{}\n",
        kind_reference::<Deployment>(&d.metadata.name),
        options.revision
    );
    template_text(&mut out, rs.spec.template.as_ref());
    emit(&out)
}

/// `kcm rollout undo deploy/NAME [--to-revision N]`: kubectl's client-side rollback.
///
/// # Errors
/// Not found, paused, an unknown revision, or etcd failing.
pub async fn undo(target: &Target, options: RolloutOptions) -> anyhow::Result<()> {
    let (_client, registry) = super::connect(target).await?;
    let (d, owned) = read_deployment(&registry, &options.namespace, &options.name).await?;
    anyhow::ensure!(
        !d.spec.paused,
        "you cannot rollback a paused deployment; resume it first with 'kcm rollout resume' \
         and try again"
    );
    let rs = revision_to_roll_back_to(&d, &owned, options.revision)?;
    let revision = api::revision(&rs.metadata.annotations).unwrap_or_default();
    let reference = kind_reference::<Deployment>(&d.metadata.name);
    let mut skipped = false;
    registry
        .guaranteed_update::<Deployment, _>(&options.namespace, &options.name, |current| {
            anyhow::ensure!(
                current.metadata.uid == d.metadata.uid,
                "{reference} was replaced meanwhile"
            );
            match rolled_back(current.clone(), rs)? {
                Some(updated) => {
                    skipped = false;
                    Ok(updated)
                }
                None => {
                    skipped = true;
                    Ok(current)
                }
            }
        })
        .await
        .map_err(|e| not_found(e, &options.name))?;
    if skipped {
        emit(&format!(
            "{reference} skipped rollback (current template already matches revision {revision})\n"
        ))
    } else {
        emit(&format!("{reference} rolled back\n"))
    }
}

/// `kcm rollout pause|resume deploy/NAME`: sets `spec.paused`.
///
/// # Errors
/// Not found, `deployments.apps "web" is already paused` / `is not paused`, or etcd
/// failing.
pub async fn set_paused(
    target: &Target,
    options: RolloutOptions,
    paused: bool,
) -> anyhow::Result<()> {
    let (_client, registry) = super::connect(target).await?;
    let name = &options.name;
    registry
        .guaranteed_update::<Deployment, _>(&options.namespace, name, |mut d| {
            match (d.spec.paused, paused) {
                (true, true) => anyhow::bail!("{DEPLOYMENTS_APPS} {name:?} is already paused"),
                (false, false) => anyhow::bail!("{DEPLOYMENTS_APPS} {name:?} is not paused"),
                _ => d.spec.paused = paused,
            }
            Ok(d)
        })
        .await
        .map_err(|e| not_found(e, name))?;
    let verb = if paused { "paused" } else { "resumed" };
    emit(&format!("{} {verb}\n", kind_reference::<Deployment>(name)))
}

/// `kcm rollout restart deploy/NAME`: stamps the pod template with
/// `kubectl.kubernetes.io/restartedAt`, so the controller rolls out new pods.
///
/// # Errors
/// Not found, paused, or etcd failing.
pub async fn restart(target: &Target, options: RolloutOptions) -> anyhow::Result<()> {
    let (_client, registry) = super::connect(target).await?;
    let name = &options.name;
    let now = api::now_rfc3339();
    registry
        .guaranteed_update::<Deployment, _>(&options.namespace, name, |mut d| {
            anyhow::ensure!(
                !d.spec.paused,
                "can't restart paused deployment (run rollout resume first)"
            );
            let template = d.spec.template.get_or_insert_with(Default::default);
            template
                .metadata
                .annotations
                .insert(RESTARTED_AT_ANNOTATION.to_string(), now.clone());
            Ok(d)
        })
        .await
        .map_err(|e| not_found(e, name))?;
    emit(&format!(
        "{} restarted\n",
        kind_reference::<Deployment>(name)
    ))
}

/// `kcm rollout status deploy/NAME`: prints kubectl's progress line each time it changes
/// until the rollout completes (exit 0), exceeds its progress deadline or `--timeout`
/// passes (errors). With `watch` false, prints the current line once.
///
/// # Errors
/// Not found, deleted meanwhile, `deployment "web" exceeded its progress deadline`,
/// `timed out waiting for the condition`, or the watch failing.
pub async fn status(target: &Target, options: RolloutStatusOptions) -> anyhow::Result<()> {
    let (client, registry) = super::connect(target).await?;
    let RolloutStatusOptions {
        namespace,
        name,
        revision,
        watch,
        timeout,
    } = options;
    let d: Deployment = registry
        .get(&namespace, &name)
        .await
        .map_err(|e| not_found(e, &name))?;
    let mut last = String::new();
    let mut report = |d: &Deployment| -> anyhow::Result<bool> {
        let (line, done) = rollout_status(d, revision).map_err(anyhow::Error::msg)?;
        // kubectl prints a line per event; kcm only when it changes.
        if line != last {
            emit(&format!("{line}\n"))?;
            last = line;
        }
        Ok(done)
    };
    if report(&d)? || !watch {
        return Ok(());
    }
    let start = d.metadata.resource_version.map_or(0, |rv| rv.0).to_string();
    let uid = d.metadata.uid.clone();
    let watcher = Watcher::new(&client, registry);
    let mut stream = watcher.resumable_object::<Deployment>(&namespace, &name, &start)?;
    let follow = stream.until(|d| {
        anyhow::ensure!(d.metadata.uid == uid, "object has been deleted");
        report(d)
    });
    match timeout {
        Some(timeout) if !timeout.is_zero() => tokio::time::timeout(timeout, follow)
            .await
            .map_err(|_| anyhow::anyhow!("timed out waiting for the condition"))?,
        _ => follow.await,
    }
}

#[cfg(test)]
mod tests;
