//! `kcm describe rc|rs|deploy NAME`: an object's spec, status, pods or ReplicaSets, and
//! what looks wrong. 2014's kubecfg had no describe; kubectl's `pkg/describe`
//! (`ReplicationControllerDescriber`, `ReplicaSetDescriber`, `DeploymentDescriber`). The
//! text is built by pure functions over what was read.

use std::fmt::Write as _;
use std::time::{Duration, SystemTime};

use anyhow::Context as _;

use super::deployments::{read_deployment, split_replica_sets};
use super::print::{
    age_of, emit, label_selector_text, or_none, render_tabbed, render_table, selector_text,
    template_text, Printable, NONE,
};
use super::resource::WorkloadKind;
use super::storage::storage_error;
use super::{events, overlap};
use crate::api::{
    self, Deployment, Object, ObjectMeta, Pod, PodPhase, ReplicaSet, ReplicationController,
    TIMED_OUT_REASON,
};
use crate::client::Target;
use crate::labels::Selector;
use crate::registry::{self, EtcdAlarm, ObjectList, Registry};

/// `kcm describe rc|rs|deploy NAME`.
#[derive(Clone, Debug)]
pub struct DescribeOptions {
    pub kind: WorkloadKind,
    /// The controller's name.
    pub name: String,
    pub namespace: String,
}

/// `kcm describe rc NAME`: the controller's spec and status, its pods, and what looks
/// wrong.
///
/// # Errors
/// Not found, a malformed controller, or etcd failing.
pub async fn describe(target: &Target, options: DescribeOptions) -> anyhow::Result<()> {
    let DescribeOptions {
        kind,
        name,
        namespace,
    } = options;
    match kind {
        WorkloadKind::ReplicaSet => return describe_rs(target, &namespace, &name).await,
        WorkloadKind::Deployment => return describe_deploy(target, &namespace, &name).await,
        WorkloadKind::ReplicationController => {}
    }
    let (client, registry) = super::connect(target).await?;
    let rc: ReplicationController = registry
        .get(&namespace, &name)
        .await
        .map_err(|e| storage_error::<ReplicationController>(e, &name))?;
    // An empty selector would match every pod in the namespace; such a controller is
    // invalid and owns none.
    let pods = if rc.spec.selector.is_empty() {
        None
    } else {
        Some(
            registry
                .list::<Pod>(Some(&namespace), &rc.spec.selector.as_selector())
                .await
                .context("list its pods")?,
        )
    };
    // An alarm explains a controller that does not catch up; alarms that cannot be read
    // are no reason to fail a describe.
    let alarms = registry::active_alarms(&client, Duration::from_secs(2))
        .await
        .unwrap_or_default();
    let others = overlap::controllers(&registry, &namespace).await?;
    let now = SystemTime::now();
    let text = describe_controller(&rc, pods.as_ref(), &others, &alarms, now);
    emit(&with_events(text, &registry, &namespace, &rc.metadata.uid, now).await)
}

/// `text` and, when they can be read, the events about the object with `uid`.
async fn with_events(
    mut text: String,
    registry: &Registry,
    namespace: &str,
    uid: &str,
    now: SystemTime,
) -> String {
    if let Some(events) = events::read(registry, namespace, uid).await {
        text.push_str(&events::events_text(&events, now));
    }
    text
}

/// The text of `kcm describe rc`: `pods` are those matching the selector (`None` when the
/// selector is empty); `others` are the controllers of its namespace, to find overlaps;
/// `alarms` are etcd's raised alarms.
pub fn describe_controller(
    rc: &ReplicationController,
    pods: Option<&ObjectList<Pod>>,
    others: &[ReplicationController],
    alarms: &[EtcdAlarm],
    now: SystemTime,
) -> String {
    let mut out = String::new();
    let meta = &rc.metadata;
    let field = |out: &mut String, label: &str, value: &str| {
        let _ = writeln!(out, "{:<14}{value}", format!("{label}:"));
    };
    field(&mut out, "Name", &meta.name);
    field(&mut out, "Namespace", &meta.namespace);
    field(&mut out, "Labels", &or_none(meta.labels.to_string()));
    field(&mut out, "Selector", &or_none(rc.spec.selector.to_string()));
    field(
        &mut out,
        "Replicas",
        &format!(
            "{} desired, {} current",
            rc.spec.replicas, rc.status.replicas
        ),
    );
    let created = match &meta.creation_timestamp {
        Some(timestamp) => format!("{timestamp} ({} ago)", age_of(meta, now)),
        None => NONE.to_string(),
    };
    field(&mut out, "Created", &created);
    out.push_str(&ownership_lines(meta));

    template_text(&mut out, rc.spec.template.as_ref());

    let mut problems = Vec::new();
    if let Err(e) = api::validate(rc) {
        problems.push(format!("the controller-manager skips this controller: {e}"));
    } else {
        problems.extend(overlap::problems(rc, others));
    }
    match pods {
        None => field(&mut out, "Pods", "<none> (no selector)"),
        Some(pods) => {
            let active = pods.items.iter().filter(|p| p.is_active()).count();
            let failed: Vec<&Pod> = pods
                .items
                .iter()
                .filter(|p| p.phase() == PodPhase::Failed)
                .collect();
            field(
                &mut out,
                "Pods",
                &format!(
                    "{active} active, {} failed, {} in all",
                    failed.len(),
                    pods.items.len()
                ),
            );
            out.push_str(&pod_table(pods.items.iter(), now));
            for pod in failed {
                problems.push(format!(
                    "pod {} Failed (the manager replaces it but does not delete it)",
                    pod.metadata.name
                ));
            }
            for error in &pods.errors {
                problems.push(format!("{error}"));
            }
        }
    }
    // An alarm (NOSPACE: etcd refuses the pod creates and status writes that would make
    // the controller catch up) is the problem, not a missing controller-manager.
    problems.extend(alarms.iter().map(|alarm| alarm.explain()));
    if rc.spec.replicas != rc.status.replicas && alarms.is_empty() {
        problems.push(format!(
            "{} replicas desired but {} current: the replication manager has not caught \
             up yet; is `kcm controller-manager` running?",
            rc.spec.replicas, rc.status.replicas
        ));
    }
    problems_text(&mut out, &problems, 14);
    out
}

/// The `Problems:` section: `<none>` (the label padded to `width`), or one `  - ` line
/// per problem.
pub(super) fn problems_text(out: &mut String, problems: &[String], width: usize) {
    if problems.is_empty() {
        let _ = writeln!(out, "{:<width$}{NONE}", "Problems:");
    } else {
        out.push_str("Problems:\n");
        for problem in problems {
            let _ = writeln!(out, "  - {problem}");
        }
    }
}

/// A controller's pods as an indented table (nothing for none).
fn pod_table<'a>(pods: impl Iterator<Item = &'a Pod>, now: SystemTime) -> String {
    let rows: Vec<Vec<String>> = pods.map(|pod| pod.cells(false, now)).collect();
    if rows.is_empty() {
        return String::new();
    }
    let table = render_table(&Pod::headers(false), &rows);
    table.lines().map(|line| format!("  {line}\n")).collect()
}

/// `kcm describe rs NAME`: the ReplicaSet's spec, status, conditions and the pods it owns.
///
/// # Errors
/// Not found, a malformed ReplicaSet, or etcd failing.
async fn describe_rs(target: &Target, namespace: &str, name: &str) -> anyhow::Result<()> {
    let (_client, registry) = super::connect(target).await?;
    let rs: ReplicaSet = registry
        .get(namespace, name)
        .await
        .map_err(|e| storage_error::<ReplicaSet>(e, name))?;
    let pods = registry
        .list::<Pod>(Some(namespace), &Selector::everything())
        .await
        .context("list its pods")?;
    let owned: Vec<Pod> = pods
        .items
        .into_iter()
        .filter(|pod| {
            api::controller_of(&pod.metadata)
                .is_some_and(|r| r.kind == ReplicaSet::KIND && r.uid == rs.metadata.uid)
        })
        .collect();
    let now = SystemTime::now();
    let text = describe_replica_set(&rs, &owned, now);
    emit(&with_events(text, &registry, namespace, &rs.metadata.uid, now).await)
}

/// The text of `kcm describe rs`: `pods` are those whose controller reference names it.
pub fn describe_replica_set(rs: &ReplicaSet, pods: &[Pod], now: SystemTime) -> String {
    let mut out = String::new();
    let meta = &rs.metadata;
    let field = |out: &mut String, label: &str, value: &str| {
        let _ = writeln!(out, "{:<14}{value}", format!("{label}:"));
    };
    field(&mut out, "Name", &meta.name);
    field(&mut out, "Namespace", &meta.namespace);
    field(&mut out, "Selector", &selector_text(rs));
    field(&mut out, "Labels", &or_none(meta.labels.to_string()));
    field(
        &mut out,
        "Replicas",
        &format!("{} current / {} desired", rs.status.replicas, rs.replicas()),
    );
    let count = |phase: PodPhase| pods.iter().filter(|p| p.phase() == phase).count();
    field(
        &mut out,
        "Pods Status",
        &format!(
            "{} Running / {} Waiting / {} Succeeded / {} Failed",
            count(PodPhase::Running),
            count(PodPhase::Pending) + count(PodPhase::Unknown),
            count(PodPhase::Succeeded),
            count(PodPhase::Failed)
        ),
    );
    out.push_str(&ownership_lines(meta));
    template_text(&mut out, rs.spec.template.as_ref());
    if rs.status.conditions.is_empty() {
        field(&mut out, "Conditions", NONE);
    } else {
        out.push_str("Conditions:\n");
        for c in &rs.status.conditions {
            let _ = writeln!(
                out,
                "  {} {} {}: {}",
                c.type_, c.status, c.reason, c.message
            );
        }
    }
    field(&mut out, "Pods", &pods.len().to_string());
    out.push_str(&pod_table(pods.iter(), now));
    if let Err(e) = api::validate(rs) {
        let _ = writeln!(
            out,
            "Problems:\n  - the controller-manager skips this ReplicaSet: {e}"
        );
    }
    out
}

/// `kcm describe deploy NAME`.
///
/// # Errors
/// Not found, or etcd failing.
async fn describe_deploy(target: &Target, namespace: &str, name: &str) -> anyhow::Result<()> {
    let (_client, registry) = super::connect(target).await?;
    let (d, owned) = read_deployment(&registry, namespace, name).await?;
    let now = SystemTime::now();
    let text = describe_deployment(&d, &owned, now);
    emit(&with_events(text, &registry, namespace, &d.metadata.uid, now).await)
}

/// The text of `kcm describe deploy` (kubectl's `DeploymentDescriber`): `owned` are its
/// ReplicaSets; what looks wrong is listed last.
pub fn describe_deployment(d: &Deployment, owned: &[ReplicaSet], now: SystemTime) -> String {
    let mut out = String::new();
    deployment_spec_text(&mut out, d, now);
    template_text(&mut out, d.spec.template.as_ref());
    deployment_conditions_text(&mut out, d);
    replica_sets_text(&mut out, d, owned);
    problems_text(&mut out, &deployment_problems(d), 24);
    out
}

/// One `Label:  value` line of `describe deploy`, the values aligned at column 24.
fn deployment_field(out: &mut String, label: &str, value: &str) {
    let _ = writeln!(out, "{:<24}{value}", format!("{label}:"));
}

/// The lines of `describe deploy` from `Name` to `Paused`: metadata, replicas, strategy.
fn deployment_spec_text(out: &mut String, d: &Deployment, now: SystemTime) {
    let meta = &d.metadata;
    let field = deployment_field;
    field(out, "Name", &meta.name);
    field(out, "Namespace", &meta.namespace);
    let created = match &meta.creation_timestamp {
        Some(timestamp) => format!("{timestamp} ({} ago)", age_of(meta, now)),
        None => NONE.to_string(),
    };
    field(out, "CreationTimestamp", &created);
    field(out, "Labels", &or_none(meta.labels.to_string()));
    let annotations: Vec<String> = meta
        .annotations
        .iter()
        .map(|(k, v)| format!("{k}: {v}"))
        .collect();
    field(out, "Annotations", &or_none(annotations.join(", ")));
    field(
        out,
        "Selector",
        &label_selector_text(d.spec.selector.as_ref()),
    );
    let status = &d.status;
    field(
        out,
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
    field(out, "StrategyType", d.strategy_type());
    field(
        out,
        "MinReadySeconds",
        &d.spec.min_ready_seconds.to_string(),
    );
    if d.is_rolling_update() {
        field(
            out,
            "RollingUpdateStrategy",
            &format!(
                "{} max unavailable, {} max surge",
                d.max_unavailable(),
                d.max_surge()
            ),
        );
    }
    if d.spec.paused {
        field(out, "Paused", "true");
    }
}

/// The `Conditions:` table of `describe deploy`, headers underlined as kubectl does.
fn deployment_conditions_text(out: &mut String, d: &Deployment) {
    let conditions = &d.status.conditions;
    if conditions.is_empty() {
        deployment_field(out, "Conditions", NONE);
        return;
    }
    out.push_str("Conditions:\n");
    // kubectl underlines the headers.
    let underline = ["----", "------", "------"].map(String::from).to_vec();
    let rows: Vec<Vec<String>> = std::iter::once(underline)
        .chain(
            conditions
                .iter()
                .map(|c| vec![c.type_.clone(), c.status.clone(), c.reason.clone()]),
        )
        .collect();
    let table = render_tabbed(&["Type", "Status", "Reason"], &rows);
    for line in table.lines() {
        let _ = writeln!(out, "  {line}");
    }
}

/// The `OldReplicaSets` (those that still have pods, as kubectl lists them) and
/// `NewReplicaSet` lines of `describe deploy`.
fn replica_sets_text(out: &mut String, d: &Deployment, owned: &[ReplicaSet]) {
    let (old, new) = split_replica_sets(d, owned);
    let summary = |rs: &ReplicaSet| {
        format!(
            "{} ({}/{} replicas created)",
            rs.metadata.name,
            rs.status.replicas,
            rs.replicas()
        )
    };
    let old: Vec<String> = old
        .into_iter()
        .filter(|rs| rs.replicas() > 0 || rs.status.replicas > 0)
        .map(summary)
        .collect();
    deployment_field(out, "OldReplicaSets", &or_none(old.join(", ")));
    deployment_field(out, "NewReplicaSet", &new.map_or(NONE.to_string(), summary));
}

/// What looks wrong with `d`: invalid, not yet observed, a False or timed-out condition.
fn deployment_problems(d: &Deployment) -> Vec<String> {
    let (meta, status) = (&d.metadata, &d.status);
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
    problems
}

/// The metadata lines every `describe` shares, each only when it has something to say:
/// `Controlled By` (kubectl's), the other owners, `Finalizers`, and `Terminating` with
/// the deletionTimestamp. Shared, so every kind's describe shows deletion the same way.
pub fn ownership_lines(meta: &ObjectMeta) -> String {
    let mut out = String::new();
    let mut field = |label: &str, value: String| {
        let _ = writeln!(out, "{:<15}{value}", format!("{label}:"));
    };
    let reference = |r: &api::OwnerReference| format!("{}/{} (uid {})", r.kind, r.name, r.uid);
    if let Some(controller) = api::controller_of(meta) {
        field("Controlled By", reference(controller));
    }
    let others: Vec<String> = meta
        .owner_references
        .iter()
        .filter(|r| !r.is_controller())
        .map(reference)
        .collect();
    if !others.is_empty() {
        field("Owners", others.join(", "));
    }
    if !meta.finalizers.is_empty() {
        field("Finalizers", meta.finalizers.join(", "));
    }
    if let Some(at) = &meta.deletion_timestamp {
        field("Terminating", format!("since {at} (deletionTimestamp)"));
    }
    out
}
