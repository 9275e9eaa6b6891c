//! The rolling-update part of `kcm up --demo`: a Deployment of 10 replicas at
//! Kubernetes' default strategy (25%/25%: at most 13 pods, at least 8 ready), a `set
//! image` whose old and new ReplicaSets trade pods, a failing image that stops where
//! Kubernetes stops (old 8 / new 5) until the progress deadline, and `rollout undo`
//! (kubectl's client-side rollback, [`crate::kubecfg::rollout`]).

use std::time::{Duration, Instant};

use super::{say, Progress, DEMO_NAMESPACE};
use crate::api::{self, Deployment, ReplicaSet, DEPLOYMENT_PROGRESSING, TIMED_OUT_REASON};
use crate::kubecfg::rollout::{revision_to_roll_back_to, rolled_back, rollout_status};
use crate::kubecfg::{new_deployment, split_replica_sets};

use crate::labels::Selector;
use crate::registry::Registry;

const NAME: &str = "app";
const REPLICAS: i64 = 10;
/// Short, so the failing image reaches its deadline within the tour.
const PROGRESS_DEADLINE_SECONDS: i64 = 5;
/// How long one phase of the tour may take.
const PHASE_LIMIT: Duration = Duration::from_secs(60);

/// The deployment and the ReplicaSets it owns.
async fn read(registry: &Registry) -> anyhow::Result<(Deployment, Vec<ReplicaSet>)> {
    let d: Deployment = registry.get(DEMO_NAMESPACE, NAME).await?;
    let owned = registry
        .list::<ReplicaSet>(Some(DEMO_NAMESPACE), &Selector::everything())
        .await?
        .items
        .into_iter()
        .filter(|rs| api::is_controlled_by(rs, &d))
        .collect();
    Ok((d, owned))
}

/// `old app-6d4b9: 6 wanted, 8 ready   new app-7f9c2: 5 wanted, 3 ready`: the
/// ReplicaSets with pods or a size, the new one last.
fn trade_line(d: &Deployment, owned: &[ReplicaSet]) -> String {
    let (old, new) = split_replica_sets(d, owned);
    let show = |rs: &ReplicaSet| {
        format!(
            "{}: {} wanted, {} ready",
            rs.metadata.name,
            rs.replicas(),
            rs.status.ready_replicas
        )
    };
    let mut parts: Vec<String> = old
        .into_iter()
        .filter(|rs| rs.replicas() > 0 || rs.status.replicas > 0)
        .map(|rs| format!("old {}", show(rs)))
        .collect();
    if let Some(new) = new {
        parts.push(format!("new {}", show(new)));
    }
    parts.join("   ")
}

/// Follows the rollout, printing the ReplicaSets each time they change, until `done`.
async fn follow(
    registry: &Registry,
    what: &str,
    mut done: impl FnMut(&Deployment) -> bool,
) -> anyhow::Result<(Deployment, Vec<ReplicaSet>)> {
    let mut progress = Progress::new(what.to_string());
    let deadline = Instant::now() + PHASE_LIMIT;
    let mut last = String::new();
    loop {
        let (d, owned) = read(registry).await?;
        let line = trade_line(&d, &owned);
        if line != last {
            progress.done();
            progress = Progress::new(what.to_string());
            say(format!("     {line}"));
            last = line;
        }
        if done(&d) {
            progress.done();
            return Ok((d, owned));
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "the deployment did not get there within {PHASE_LIMIT:?}: {}",
            rollout_status(&d, 0).map_or_else(|e| e, |(line, _)| line)
        );
        progress.tick(rollout_status(&d, 0).map_or_else(|e| e, |(line, _)| line));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn rolled_out(d: &Deployment) -> bool {
    rollout_status(d, 0).is_ok_and(|(_, done)| done)
}

/// Sets every container's image, as `kcm set image deploy/app *=IMAGE` does.
async fn set_image(registry: &Registry, image: &str) -> anyhow::Result<()> {
    registry
        .guaranteed_update::<Deployment, _>(DEMO_NAMESPACE, NAME, |mut d| {
            for container in &mut d
                .spec
                .template
                .get_or_insert_with(Default::default)
                .spec
                .containers
            {
                container.image = image.to_string();
            }
            Ok(d)
        })
        .await?;
    Ok(())
}

/// Removes what an earlier tour left (the ReplicaSets and pods go with the namespace's
/// other leftovers in the caller's clean-up).
pub(super) async fn clean(registry: &Registry) {
    let _ = registry
        .delete::<Deployment>(DEMO_NAMESPACE, NAME, None)
        .await;
    if let Ok(list) = registry
        .list::<ReplicaSet>(Some(DEMO_NAMESPACE), &Selector::everything())
        .await
    {
        for rs in list.items {
            let _ = registry
                .delete::<ReplicaSet>(DEMO_NAMESPACE, &rs.metadata.name, None)
                .await;
        }
    }
}

/// The tour's rolling update, steps `first` onwards.
pub(super) async fn tour(registry: &Registry, first: usize) -> anyhow::Result<()> {
    let started = Instant::now();
    let mut d = new_deployment(DEMO_NAMESPACE, NAME, "nginx:1.24", REPLICAS);
    d.spec.progress_deadline_seconds = Some(PROGRESS_DEADLINE_SECONDS);
    registry.create(&d).await?;
    say(format!(
        "{first}. Created deployment.apps/{NAME} (`kcm create deployment {NAME} --image nginx:1.24 --replicas 10`):"
    ));
    say("   the deployment controller makes a ReplicaSet named after its template's hash, which makes the pods.");
    follow(registry, "waiting for the deployment", rolled_out).await?;

    set_image(registry, "nginx:1.25").await?;
    say(format!(
        "{}. `kcm set image deploy/{NAME} *=nginx:1.25`: a new ReplicaSet; at 25%/25% of 10 the two trade",
        first + 1
    ));
    say("   pods with at most 13 pods and at least 8 ready at every etcd revision:");
    follow(registry, "rolling out nginx:1.25", rolled_out).await?;

    set_image(registry, "nginx:fail").await?;
    say(format!(
        "{}. `kcm set image deploy/{NAME} *=nginx:fail`: the new pods never become ready (ImagePullBackOff), so",
        first + 2
    ));
    say("   the rollout stops where Kubernetes stops (old 8 / new 5) and no ready pod is lost:");
    let (d, _) = follow(registry, "waiting for the progress deadline", |d| {
        d.condition(DEPLOYMENT_PROGRESSING)
            .is_some_and(|c| c.reason == TIMED_OUT_REASON)
    })
    .await?;
    say(format!(
        "   After progressDeadlineSeconds ({PROGRESS_DEADLINE_SECONDS}s here) without progress, `kcm rollout status` says:"
    ));
    say(format!(
        "     {}",
        rollout_status(&d, 0).map_or_else(|e| format!("kcm: {e} (exit 1)"), |(line, _)| line)
    ));

    let (d, owned) = read(registry).await?;
    let target = revision_to_roll_back_to(&d, &owned, 0)?.clone();
    registry
        .guaranteed_update::<Deployment, _>(DEMO_NAMESPACE, NAME, |current| {
            Ok(rolled_back(current.clone(), &target)?.unwrap_or(current))
        })
        .await?;
    say(format!(
        "{}. `kcm rollout undo deploy/{NAME}`: the template of revision {} (nginx:1.25) again; the failing",
        first + 3,
        api::revision(&target.metadata.annotations).unwrap_or_default()
    ));
    say("   pods go first, and that ReplicaSet comes back under a new revision number:");
    let (d, _) = follow(registry, "rolling back", rolled_out).await?;
    say(format!(
        "   Rolled out at revision {} in {:.1}s for the whole rolling-update tour.",
        api::revision(&d.metadata.annotations).unwrap_or_default(),
        started.elapsed().as_secs_f64()
    ));
    Ok(())
}
