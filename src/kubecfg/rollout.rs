//! The Deployment verbs: `kcm rollout status|history|undo|pause|resume|restart`,
//! `kcm describe deploy` and `kcm create deployment`. Mirrors kubectl's
//! `pkg/cmd/rollout/` and `pkg/polymorphichelpers/` (`DeploymentStatusViewer`,
//! `DeploymentHistoryViewer`, `DeploymentRollbacker`, `ObjectPauser`, `ObjectResumer`,
//! `ObjectRestarter`), `pkg/describe`'s `DeploymentDescriber` and `create deployment`, with
//! their exact messages; none of it existed in 2014.
//!
//! Invariants:
//! - what a verb decides (the status line, the history table, the revision to roll back
//!   to, the describe text) is a pure function over what was read, unit-tested;
//! - every spec write is a compare-and-swap on the revision read, retried from the current
//!   object after a conflict (`Registry::guaranteed_update`), its checks re-run on that
//!   object, so unknown fields survive and `generation` follows the spec;
//! - `rollout status` watches the deployment (a resumable etcd watch); it never polls.

use std::collections::BTreeMap;

use super::describe::{problems_text, template_text};
use super::print::{age_of, label_selector_text, or_none};
use super::*;
use crate::api::{
    Deployment, DeploymentSpec, DeploymentStrategy, LabelSelector, ANNOTATIONS_TO_SKIP,
    CHANGE_CAUSE_ANNOTATION, DEPLOYMENT_PROGRESSING, POD_TEMPLATE_HASH_LABEL, REVISION_ANNOTATION,
    TIMED_OUT_REASON,
};

/// The pod template annotation `rollout restart` sets to the current time.
pub const RESTARTED_AT_ANNOTATION: &str = "kubectl.kubernetes.io/restartedAt";

/// kubectl's resource name of deployments, as its errors spell it (`deployments.apps "web"`).
const DEPLOYMENTS_APPS: &str = "deployments.apps";

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
        let current = revision_of(&d.metadata);
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

/// The `deployment.kubernetes.io/revision` annotation of an object, when it is a number.
pub fn revision_of(meta: &ObjectMeta) -> Option<i64> {
    meta.annotations.get(REVISION_ANNOTATION)?.parse().ok()
}

/// A pod template without the `pod-template-hash` label, as JSON (every field, unknown
/// ones included).
fn without_hash(template: Option<&PodTemplateSpec>) -> Value {
    let mut value = serde_json::to_value(template).unwrap_or_default();
    if let Some(labels) = value
        .pointer_mut("/metadata/labels")
        .and_then(Value::as_object_mut)
    {
        labels.remove(POD_TEMPLATE_HASH_LABEL);
        if labels.is_empty() {
            value["metadata"]
                .as_object_mut()
                .map(|m| m.remove("labels"));
        }
    }
    value
}

/// kubectl's `EqualIgnoreHash`: the templates are equal but for the `pod-template-hash`
/// label.
pub fn equal_ignore_hash(a: Option<&PodTemplateSpec>, b: Option<&PodTemplateSpec>) -> bool {
    without_hash(a) == without_hash(b)
}

/// Whether `rs` is controlled by deployment `d` (a controller reference to its uid).
pub fn owned_by(rs: &ReplicaSet, d: &Deployment) -> bool {
    api::controller_of(&rs.metadata)
        .is_some_and(|r| r.kind == Deployment::KIND && r.uid == d.metadata.uid)
}

/// `GetAllReplicaSets`: `owned` (the deployment's ReplicaSets) split into the old ones
/// and the new one, the oldest whose template equals the deployment's ignoring the hash.
pub fn split_replica_sets<'a>(
    d: &Deployment,
    owned: &'a [ReplicaSet],
) -> (Vec<&'a ReplicaSet>, Option<&'a ReplicaSet>) {
    let mut sorted: Vec<&ReplicaSet> = owned.iter().collect();
    sorted.sort_by(|a, b| {
        (&a.metadata.creation_timestamp, &a.metadata.name)
            .cmp(&(&b.metadata.creation_timestamp, &b.metadata.name))
    });
    let new = sorted
        .iter()
        .copied()
        .find(|rs| equal_ignore_hash(rs.spec.template.as_ref(), d.spec.template.as_ref()));
    let old = sorted
        .into_iter()
        .filter(|rs| new.is_none_or(|n| !std::ptr::eq(*rs, n)))
        .collect();
    (old, new)
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
        .filter_map(|rs| Some((revision_of(&rs.metadata)?, rs)))
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
    if equal_ignore_hash(rs.spec.template.as_ref(), d.spec.template.as_ref()) {
        return Ok(None);
    }
    let mut template = rs.spec.template.clone().unwrap_or_default();
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
            Some((revision_of(&rs.metadata)?, cause))
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

/// kubectl's tabwriter with padding 2 (history tables), no trailing spaces.
fn render_tabbed(headers: &[&str], rows: &[Vec<String>]) -> String {
    render_table(headers, rows)
        .lines()
        .map(|line| {
            // render_table pads with three spaces; kubectl's history pads with two.
            let mut out = String::new();
            let mut spaces = 0;
            for c in line.chars() {
                if c == ' ' {
                    spaces += 1;
                    continue;
                }
                if spaces > 0 {
                    out.push_str(&" ".repeat(if spaces >= 3 { spaces - 1 } else { spaces }));
                    spaces = 0;
                }
                out.push(c);
            }
            out.push('\n');
            out
        })
        .collect()
}

/// The text of `kcm describe deploy` (kubectl's `DeploymentDescriber`): `owned` are its
/// ReplicaSets; what looks wrong is listed last.
pub fn describe_deployment(d: &Deployment, owned: &[ReplicaSet], now: SystemTime) -> String {
    let mut out = String::new();
    let meta = &d.metadata;
    let field = |out: &mut String, label: &str, value: &str| {
        let _ = writeln!(out, "{:<24}{value}", format!("{label}:"));
    };
    field(&mut out, "Name", &meta.name);
    field(&mut out, "Namespace", &meta.namespace);
    let created = match &meta.creation_timestamp {
        Some(timestamp) => format!("{timestamp} ({} ago)", age_of(meta, now)),
        None => NONE.to_string(),
    };
    field(&mut out, "CreationTimestamp", &created);
    field(&mut out, "Labels", &or_none(meta.labels.to_string()));
    let annotations: Vec<String> = meta
        .annotations
        .iter()
        .map(|(k, v)| format!("{k}: {v}"))
        .collect();
    field(&mut out, "Annotations", &or_none(annotations.join(", ")));
    field(
        &mut out,
        "Selector",
        &label_selector_text(d.spec.selector.as_ref()),
    );
    let status = &d.status;
    field(
        &mut out,
        "Replicas",
        &format!(
            "{} desired | {} updated | {} total | {} available | {} unavailable",
            d.replicas(),
            status.updated_replicas,
            status.replicas,
            status.available_replicas,
            status.unavailable_replicas
        ),
    );
    field(&mut out, "StrategyType", d.strategy_type());
    field(
        &mut out,
        "MinReadySeconds",
        &d.spec.min_ready_seconds.to_string(),
    );
    if d.is_rolling_update() {
        field(
            &mut out,
            "RollingUpdateStrategy",
            &format!(
                "{} max unavailable, {} max surge",
                d.max_unavailable(),
                d.max_surge()
            ),
        );
    }
    if d.spec.paused {
        field(&mut out, "Paused", "true");
    }
    template_text(&mut out, d.spec.template.as_ref());
    if status.conditions.is_empty() {
        field(&mut out, "Conditions", NONE);
    } else {
        out.push_str("Conditions:\n");
        // kubectl underlines the headers.
        let underline = ["----", "------", "------"].map(String::from).to_vec();
        let rows: Vec<Vec<String>> = std::iter::once(underline)
            .chain(
                status
                    .conditions
                    .iter()
                    .map(|c| vec![c.type_.clone(), c.status.clone(), c.reason.clone()]),
            )
            .collect();
        let table = render_tabbed(&["Type", "Status", "Reason"], &rows);
        for line in table.lines() {
            let _ = writeln!(out, "  {line}");
        }
    }
    let (old, new) = split_replica_sets(d, owned);
    let summary = |rs: &ReplicaSet| {
        format!(
            "{} ({}/{} replicas created)",
            rs.metadata.name,
            rs.status.replicas,
            rs.replicas()
        )
    };
    // kubectl lists the old ReplicaSets that still have pods.
    let old: Vec<String> = old
        .into_iter()
        .filter(|rs| rs.replicas() > 0 || rs.status.replicas > 0)
        .map(summary)
        .collect();
    field(&mut out, "OldReplicaSets", &or_none(old.join(", ")));
    field(
        &mut out,
        "NewReplicaSet",
        &new.map_or(NONE.to_string(), summary),
    );

    let mut problems = Vec::new();
    if let Err(e) = api::validate(d) {
        problems.push(format!("the controller-manager skips this deployment: {e}"));
    }
    if meta.generation > status.observed_generation {
        problems.push(format!(
            "generation {} not yet observed (observedGeneration {}): is `kcm \
             controller-manager` running with the deployment controller?",
            meta.generation, status.observed_generation
        ));
    }
    for c in &status.conditions {
        if c.status == "False" || c.reason == TIMED_OUT_REASON {
            problems.push(format!(
                "{} {}: {} {}",
                c.type_, c.status, c.reason, c.message
            ));
        }
    }
    problems_text(&mut out, &problems, 24);
    out
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

// ---------------------------------------------------------------------------------------
// The verbs

/// The deployment `name` and the ReplicaSets it controls.
async fn read_deployment(
    registry: &Registry,
    namespace: &str,
    name: &str,
) -> anyhow::Result<(Deployment, Vec<ReplicaSet>)> {
    let d: Deployment = registry
        .get(namespace, name)
        .await
        .map_err(|e| not_found(e, name))?;
    let list: ObjectList<ReplicaSet> = registry
        .list(Some(namespace), &Selector::everything())
        .await
        .context("list its ReplicaSets")?;
    let owned = list
        .items
        .into_iter()
        .filter(|rs| owned_by(rs, &d))
        .collect();
    Ok((d, owned))
}

/// kubectl's `deployments.apps "web" not found`.
fn not_found(error: StorageError, name: &str) -> anyhow::Error {
    match error {
        StorageError::NotFound { .. } => anyhow::anyhow!("{DEPLOYMENTS_APPS} {name:?} not found"),
        StorageError::Update { source, .. } => source,
        other => other.into(),
    }
}

/// `kcm describe deploy NAME`.
///
/// # Errors
/// Not found, or etcd failing.
pub async fn describe_deploy(target: &Target, namespace: &str, name: &str) -> anyhow::Result<()> {
    let (_client, registry) = target.connect().await?;
    let (d, owned) = read_deployment(&registry, namespace, name).await?;
    emit(&describe_deployment(&d, &owned, SystemTime::now()))
}

/// `kcm rollout history deploy/NAME [--revision N]`.
///
/// # Errors
/// Not found, `unable to find the specified revision`, or etcd failing.
pub async fn history(target: &Target, options: RolloutOptions) -> anyhow::Result<()> {
    let (_client, registry) = target.connect().await?;
    let (d, owned) = read_deployment(&registry, &options.namespace, &options.name).await?;
    if options.revision == 0 {
        return emit(&history_text(&d, &owned));
    }
    let rs = owned
        .iter()
        .find(|rs| revision_of(&rs.metadata) == Some(options.revision))
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
    let (_client, registry) = target.connect().await?;
    let (d, owned) = read_deployment(&registry, &options.namespace, &options.name).await?;
    anyhow::ensure!(
        !d.spec.paused,
        "you cannot rollback a paused deployment; resume it first with 'kcm rollout resume' \
         and try again"
    );
    let rs = revision_to_roll_back_to(&d, &owned, options.revision)?;
    let revision = revision_of(&rs.metadata).unwrap_or_default();
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
    let (_client, registry) = target.connect().await?;
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
    let (_client, registry) = target.connect().await?;
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
    let (client, registry) = target.connect().await?;
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
    let (_client, registry) = target.connect().await?;
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

#[cfg(test)]
mod tests;
