//! Overlapping controllers in the CLI: `create` and `run` refuse a controller whose
//! selector overlaps another's in its namespace, `stop` refuses to stop one (resizing it to
//! 0 would delete the other's pods too), and `describe` lists the overlaps among its
//! problems.
//!
//! 2014's kubecfg checked nothing (kubernetes #2210); kubectl's `stop` refused from 2015
//! (#10524: "Detected overlapping controllers ... please manage deletion individually with
//! --cascade=false"). Overlap is [`api::controllers_overlap`]: one controller's pods match
//! the other's selector. Invalid controllers are left out, as the replication manager
//! skips them: they fight no one (validation reports them).

use anyhow::Context as _;

use super::manifest::Manifest;
use crate::api::{self, Object, ReplicationController};
use crate::labels::{Selector, Set};
use crate::registry::{ObjectList, Registry};

/// The valid controllers among `others` that overlap `rc`, each with the labels of a pod
/// both would count, sorted by name.
pub(super) fn overlapping<'a>(
    rc: &'a ReplicationController,
    others: &'a [ReplicationController],
) -> Vec<(&'a ReplicationController, &'a Set)> {
    let mut found: Vec<_> = others
        .iter()
        .filter_map(|other| Some((other, api::controllers_overlap(rc, other)?)))
        .filter(|(other, _)| api::validate(*other).is_ok())
        .collect();
    found.sort_by(|a, b| a.0.metadata.name.cmp(&b.0.metadata.name));
    found
}

/// `replicationcontrollers/b (a pod labelled {app=web} matches both)`, joined by `, `.
fn describe_overlaps(found: &[(&ReplicationController, &Set)]) -> String {
    found
        .iter()
        .map(|(other, labels)| {
            format!(
                "{}/{} (a pod labelled {{{labels}}} matches both)",
                ReplicationController::RESOURCE,
                other.metadata.name
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The problems `describe` lists for `rc`'s overlaps with the controllers of its namespace.
pub(super) fn problems(
    rc: &ReplicationController,
    others: &[ReplicationController],
) -> Vec<String> {
    overlapping(rc, others)
        .into_iter()
        .map(|(other, labels)| {
            format!(
                "its selector overlaps {}/{}'s (a pod labelled {{{labels}}} matches both): \
                 the two fight over pods, each counting the other's as its own",
                ReplicationController::RESOURCE,
                other.metadata.name
            )
        })
        .collect()
}

/// The controllers stored in `namespace`.
pub(super) async fn controllers(
    registry: &Registry,
    namespace: &str,
) -> anyhow::Result<Vec<ReplicationController>> {
    let list: ObjectList<ReplicationController> = registry
        .list(Some(namespace), &Selector::everything())
        .await
        .with_context(|| format!("list the replication controllers in namespace {namespace}"))?;
    Ok(list.items)
}

/// Refuses to create the controllers among `manifests` when one overlaps a controller
/// stored in its namespace or another one of `manifests`; nothing is written then.
///
/// # Errors
/// The first overlap found, naming both controllers; or etcd failing.
pub(super) async fn refuse_overlapping_manifests<'a>(
    registry: &Registry,
    manifests: impl IntoIterator<Item = &'a Manifest>,
) -> anyhow::Result<()> {
    let new: Vec<&ReplicationController> = manifests
        .into_iter()
        .filter_map(|manifest| match manifest {
            Manifest::Controller(rc) => Some(&**rc),
            _ => None,
        })
        .collect();
    refuse_overlapping(registry, &new).await
}

/// Refuses controllers about to be created (`new`) that overlap a stored controller of
/// their namespace or each other. A stored controller of the same name is not compared
/// (the create fails on it anyway).
///
/// # Errors
/// The first overlap found, naming both controllers; or etcd failing.
pub(super) async fn refuse_overlapping(
    registry: &Registry,
    new: &[&ReplicationController],
) -> anyhow::Result<()> {
    let mut namespaces: Vec<&str> = new
        .iter()
        .map(|rc| rc.metadata.namespace.as_str())
        .collect();
    namespaces.sort_unstable();
    namespaces.dedup();
    for namespace in namespaces {
        let mut others = controllers(registry, namespace).await?;
        let in_namespace = new.iter().filter(|rc| rc.metadata.namespace == namespace);
        for rc in in_namespace.clone() {
            others.retain(|other| other.metadata.name != rc.metadata.name);
        }
        others.extend(in_namespace.clone().map(|rc| (*rc).clone()));
        for rc in in_namespace {
            let found = overlapping(rc, &others);
            if !found.is_empty() {
                anyhow::bail!(
                    "{}/{}: its selector {} overlaps {}: the controllers would fight over \
                     pods, each counting the other's as its own (kubernetes #2210); change \
                     its selector and template labels so that neither's pods match the \
                     other's selector",
                    ReplicationController::RESOURCE,
                    rc.metadata.name,
                    rc.spec.selector,
                    describe_overlaps(&found)
                );
            }
        }
    }
    Ok(())
}

/// Refuses to stop `rc` when it overlaps another controller: resized to 0, the manager
/// would delete the other's pods that `rc`'s selector matches, the other would recreate
/// them, and `stop` would wait for them until its timeout.
///
/// # Errors
/// The overlap, naming the other controllers, and what to do instead; or etcd failing.
pub(super) async fn refuse_to_stop_overlapping(
    registry: &Registry,
    rc: &ReplicationController,
) -> anyhow::Result<()> {
    let others = controllers(registry, &rc.metadata.namespace).await?;
    let found = overlapping(rc, &others);
    if found.is_empty() {
        return Ok(());
    }
    let name = &rc.metadata.name;
    anyhow::bail!(
        "cannot stop {}/{name}: its selector overlaps {}; resizing it to 0 would delete the \
         other controller's pods too, and they would be recreated while stop waits. Delete \
         just this controller with `kcm delete rc {name}` (its pods stay, kubectl's \
         --cascade=false), then scale or stop the others",
        ReplicationController::RESOURCE,
        describe_overlaps(&found)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rc(name: &str, selector: &str, labels: &str) -> ReplicationController {
        let set = |pairs: &str| -> Set {
            pairs
                .split(',')
                .map(|pair| pair.split_once('=').unwrap())
                .collect()
        };
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "ns"},
            "spec": {"replicas": 1, "selector": set(selector), "template": {
                "metadata": {"labels": set(labels)},
                "spec": {"containers": [{"name": "c", "image": "i"}]}
            }}
        }))
        .unwrap()
    }

    #[test]
    fn describe_names_each_overlapping_valid_controller() {
        let web = rc("web", "app=web", "app=web,tier=fe");
        let mut invalid = rc("broken", "app=web", "app=web");
        invalid.spec.replicas = -1;
        let others = vec![
            rc("front", "tier=fe", "tier=fe"),
            rc("db", "app=db", "app=db"),
            rc("canary", "app=web,track=canary", "app=web,track=canary"),
            invalid,
            web.clone(),
        ];
        assert_eq!(
            problems(&web, &others),
            [
                "its selector overlaps replicationcontrollers/canary's (a pod labelled \
                 {app=web,track=canary} matches both): the two fight over pods, each counting \
                 the other's as its own",
                "its selector overlaps replicationcontrollers/front's (a pod labelled \
                 {app=web,tier=fe} matches both): the two fight over pods, each counting the \
                 other's as its own",
            ]
        );
        assert!(problems(&others[1], &others).is_empty());
    }
}
