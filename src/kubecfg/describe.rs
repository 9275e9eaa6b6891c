//! `kcm describe rc`: a controller's spec, status and pods, and what looks wrong. The text
//! is built by a pure function over what was read.

use super::print::{age_of, or_none, render_table, Printable};
use super::*;
use crate::registry::{self, EtcdAlarm};

/// `kcm describe rc NAME`: the controller's spec and status, its pods, and what looks
/// wrong.
///
/// # Errors
/// Not found, a malformed controller, or etcd failing.
pub async fn describe(target: &Target, options: DescribeOptions) -> anyhow::Result<()> {
    let DescribeOptions { name, namespace } = options;
    let (client, registry) = target.connect().await?;
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
    let others = super::overlap::controllers(&registry, &namespace).await?;
    emit(&describe_controller(
        &rc,
        pods.as_ref(),
        &others,
        &alarms,
        SystemTime::now(),
    ))
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

    match &rc.spec.template {
        None => field(&mut out, "Pod Template", NONE),
        Some(template) => {
            out.push_str("Pod Template:\n");
            let _ = writeln!(
                out,
                "  {:<12}{}",
                "Labels:",
                or_none(template.metadata.labels.to_string())
            );
            if template.spec.containers.is_empty() {
                let _ = writeln!(out, "  {:<12}{NONE}", "Containers:");
            } else {
                out.push_str("  Containers:\n");
            }
            for container in &template.spec.containers {
                let _ = writeln!(out, "    {}:", or_none(container.name.clone()));
                let _ = writeln!(
                    out,
                    "      {:<8}{}",
                    "Image:",
                    or_none(container.image.clone())
                );
                let ports: Vec<String> = container.ports.iter().map(port_text).collect();
                let _ = writeln!(out, "      {:<8}{}", "Ports:", or_none(ports.join(", ")));
            }
        }
    }

    let mut problems = Vec::new();
    if let Err(e) = api::validate(rc) {
        problems.push(format!("the controller-manager skips this controller: {e}"));
    } else {
        problems.extend(super::overlap::problems(rc, others));
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
            if !pods.items.is_empty() {
                let rows: Vec<Vec<String>> =
                    pods.items.iter().map(|pod| pod.cells(false, now)).collect();
                let table = render_table(&Pod::headers(false), &rows);
                for line in table.lines() {
                    let _ = writeln!(out, "  {line}");
                }
            }
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
    if problems.is_empty() {
        field(&mut out, "Problems", NONE);
    } else {
        out.push_str("Problems:\n");
        for problem in problems {
            let _ = writeln!(out, "  - {problem}");
        }
    }
    out
}

/// `80/TCP (http)`.
pub(super) fn port_text(port: &ContainerPort) -> String {
    let protocol = if port.protocol.is_empty() {
        "TCP"
    } else {
        &port.protocol
    };
    if port.name.is_empty() {
        format!("{}/{protocol}", port.container_port)
    } else {
        format!("{}/{protocol} ({})", port.container_port, port.name)
    }
}
