//! The guided tour of `kcm up --demo`: the 2014 loop narrated one line per step (a
//! replication controller and its service converge, a deleted pod comes back in its slot,
//! resizes up and down, the same objects through kubectl), then the Deployment part
//! (`rollout_tour`).

use std::path::Path;
use std::time::{Duration, Instant};

use super::{rollout_tour, say, Progress, DEMO_NAMESPACE};
use crate::api::{
    Container, ContainerPort, IntOrString, ObjectMeta, Pod, PodPhase, PodSpec, PodTemplateSpec,
    ReplicationController, ReplicationControllerSpec, Service, ServiceSpec,
};
use crate::labels::{Selector, Set};
use crate::registry::{Registry, StorageError};

const DEMO_NAME: &str = "web";

fn demo_labels() -> Set {
    [("name", DEMO_NAME)].into_iter().collect()
}

/// Active pods of the demo controller, sorted by name.
async fn demo_pods(registry: &Registry) -> anyhow::Result<Vec<Pod>> {
    let mut pods: Vec<Pod> = registry
        .list::<Pod>(Some(DEMO_NAMESPACE), &demo_labels().as_selector())
        .await?
        .items
        .into_iter()
        .filter(Pod::is_active)
        .collect();
    pods.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    Ok(pods)
}

/// Waits until the demo controller has `want` active pods (all Running when there are
/// nodes to run them), showing progress.
async fn converge(registry: &Registry, want: usize, nodes: u16) -> anyhow::Result<Vec<Pod>> {
    let mut progress = Progress::new(format!("waiting for {want} pods"));
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let pods = demo_pods(registry).await?;
        let running = pods
            .iter()
            .filter(|p| p.phase() == PodPhase::Running)
            .count();
        if pods.len() == want && (nodes == 0 || running == want) {
            progress.done();
            return Ok(pods);
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "pods did not converge to {want} within 30s (have {}, {running} running)",
            pods.len()
        );
        progress.tick(format!("{} active, {running} running", pods.len()));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn show_pods(pods: &[Pod]) {
    for pod in pods {
        say(format!(
            "     {:<12} {:<8} host={:<8} ip={}",
            pod.metadata.name,
            pod.phase(),
            if pod.spec.host.is_empty() {
                "-"
            } else {
                &pod.spec.host
            },
            pod.pod_ip().unwrap_or("-")
        ));
    }
}

async fn show_endpoints(registry: &Registry, want: usize) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let endpoints = match registry
            .get::<crate::api::Endpoints>(DEMO_NAMESPACE, DEMO_NAME)
            .await
        {
            Ok(e) => e.endpoints,
            Err(StorageError::NotFound { .. }) => Vec::new(),
            Err(e) => return Err(e.into()),
        };
        if endpoints.len() == want || Instant::now() >= deadline {
            say(format!(
                "     endpoints/demo/web = [{}]",
                endpoints.join(", ")
            ));
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn scale(registry: &Registry, replicas: i64) -> anyhow::Result<ReplicationController> {
    Ok(registry
        .guaranteed_update::<ReplicationController, _>(DEMO_NAMESPACE, DEMO_NAME, |mut rc| {
            rc.spec.replicas = replicas;
            Ok(rc)
        })
        .await?)
}

/// Removes what an earlier tour left in the demo namespace.
async fn clean_demo(registry: &Registry) -> anyhow::Result<()> {
    rollout_tour::clean(registry).await;
    let _ = registry
        .delete::<ReplicationController>(DEMO_NAMESPACE, DEMO_NAME, None)
        .await;
    let _ = registry
        .delete::<Service>(DEMO_NAMESPACE, DEMO_NAME, None)
        .await;
    for pod in registry
        .list::<Pod>(Some(DEMO_NAMESPACE), &Selector::everything())
        .await?
        .items
    {
        let _ = registry
            .delete::<Pod>(DEMO_NAMESPACE, &pod.metadata.name, None)
            .await;
    }
    Ok(())
}

/// The tour's controller: 3 replicas of `nginx` selected by `name=web`, port `http` 80.
fn demo_controller() -> ReplicationController {
    ReplicationController {
        metadata: ObjectMeta {
            labels: demo_labels(),
            ..ObjectMeta::named(DEMO_NAMESPACE, DEMO_NAME)
        },
        spec: ReplicationControllerSpec {
            replicas: 3,
            selector: demo_labels(),
            template: Some(PodTemplateSpec {
                metadata: ObjectMeta {
                    labels: demo_labels(),
                    ..ObjectMeta::default()
                },
                spec: PodSpec {
                    containers: vec![Container {
                        name: DEMO_NAME.into(),
                        image: "nginx".into(),
                        ports: vec![ContainerPort {
                            name: "http".into(),
                            container_port: 80,
                            protocol: "TCP".into(),
                            ..ContainerPort::default()
                        }],
                        ..Container::default()
                    }],
                    ..PodSpec::default()
                },
                ..PodTemplateSpec::default()
            }),
            ..ReplicationControllerSpec::default()
        },
        ..ReplicationController::default()
    }
}

/// The tour's service: port 80 to the pods' port named `http`.
fn demo_service() -> Service {
    Service {
        metadata: ObjectMeta::named(DEMO_NAMESPACE, DEMO_NAME),
        spec: ServiceSpec {
            selector: demo_labels(),
            port: 80,
            protocol: "TCP".into(),
            container_port: Some(IntOrString::String("http".into())),
            ..ServiceSpec::default()
        },
        ..Service::default()
    }
}

/// Step 3 of the tour: deletes `victim`, as a node failure would, and shows the
/// controller recreate it in its slot.
async fn heal(registry: &Registry, victim: &Pod, nodes: u16) -> anyhow::Result<()> {
    let heal_started = Instant::now();
    registry
        .delete::<Pod>(DEMO_NAMESPACE, &victim.metadata.name, None)
        .await?;
    say(format!(
        "3. Deleted pod {} (ip {}), as a node failure would. 2014 waited for the next 10s tick;",
        victim.metadata.name,
        victim.pod_ip().unwrap_or("-")
    ));
    say("   kcm's pod watch queues the controller at once.");
    let recreated = converge(registry, 3, 0).await?;
    let healed_in = heal_started.elapsed();
    let replacement = recreated
        .iter()
        .find(|p| p.metadata.uid != victim.metadata.uid && p.metadata.name == victim.metadata.name)
        .or_else(|| recreated.iter().find(|p| p.phase() == PodPhase::Pending))
        .map(|p| p.metadata.name.clone())
        .unwrap_or_else(|| "a new pod".to_string());
    say(format!(
        "   Recreated in {} ms as {replacement}: the same replica slot, so the same name (slot names are",
        healed_in.as_millis()
    ));
    say("   derived from the controller's uid and written create-if-absent: a retry can never add a pod).");
    let pods = converge(registry, 3, nodes).await?;
    say("   Running again after the kubelet's start delay, with a new IP:");
    show_pods(&pods);
    Ok(())
}

/// The guided tour of the 2014 loop, narrated one line per step.
pub(super) async fn demo(registry: &Registry, nodes: u16, kubeconfig: &Path) -> anyhow::Result<()> {
    let started = Instant::now();
    clean_demo(registry).await?;
    say("");
    say("== The 2014 Kubernetes control loop, on etcd v3 ==");
    let rc = registry.create(&demo_controller()).await?;
    registry.create(&demo_service()).await?;
    say(format!(
        "1. Created replicationcontrollers/demo/web (replicas=3, selector name=web) at resourceVersion {}",
        rc.metadata.resource_version.unwrap_or_default()
    ));
    say("   and services/demo/web (port 80 -> containerPort \"http\"). The manager's watch sees");
    say("   the controller, its sync lists pods matching the selector, finds 0 and creates 3.");
    let pods = converge(registry, 3, nodes).await?;
    say(format!(
        "2. Converged: 3 pods, scheduled and running on the simulated kubelets ({:.1}s):",
        started.elapsed().as_secs_f64()
    ));
    show_pods(&pods);
    say("   The endpoints controller followed them (ip:port, port resolved by name):");
    show_endpoints(registry, 3).await?;

    heal(registry, &pods[0], nodes).await?;

    scale(registry, 5).await?;
    say("4. Resized to 5 (2014's `kubecfg resize`): creates go out in slow-start batches 1, 2, 4, ...");
    let pods = converge(registry, 5, nodes).await?;
    show_pods(&pods);

    scale(registry, 2).await?;
    say("5. Resized to 2: the surplus is ranked (unassigned < pending < running, newer first) and each");
    say("   delete is guarded by the pod's resourceVersion, so a pod that changed is never deleted blind.");
    let pods = converge(registry, 2, nodes).await?;
    show_pods(&pods);
    show_endpoints(registry, 2).await?;
    let rc = registry
        .get::<ReplicationController>(DEMO_NAMESPACE, DEMO_NAME)
        .await?;
    say(format!(
        "6. The manager wrote status.replicas={} (2014 computed it on every read).",
        rc.status.replicas,
    ));
    kubectl_step(kubeconfig).await;
    say("");
    say("== Later Kubernetes: a Deployment's rolling update ==");
    rollout_tour::tour(registry, 7).await?;
    say(format!(
        "Tour done in {:.1}s.",
        started.elapsed().as_secs_f64()
    ));
    say(
        "   Next: `kcm up` (no --demo) keeps running; `kcm watch pods --raw` shows each etcd event",
    );
    say("   and the typed event it became; `kcm describe rc web -n demo` explains a controller,");
    say("   `kcm describe deploy app -n demo` a deployment, `kcm rollout history deploy/app -n demo` its revisions.");
    Ok(())
}

/// The tour's kubectl step: the same objects through kcm's Kubernetes API, when kubectl
/// is on PATH.
async fn kubectl_step(kubeconfig: &Path) {
    say("   The same objects through kcm's Kubernetes API, with kubectl (in 2014 the apiserver");
    say("   served this watch to kubecfg and the controller manager):");
    let Ok(cache) = tempfile::tempdir() else {
        return;
    };
    for args in [
        ["get", "pods", "-o", "wide"],
        ["describe", "rc", DEMO_NAME, ""],
    ] {
        let args: Vec<&str> = args.into_iter().filter(|a| !a.is_empty()).collect();
        say(format!(
            "   $ kubectl {} -n {DEMO_NAMESPACE}",
            args.join(" ")
        ));
        let output = tokio::process::Command::new("kubectl")
            .args(&args)
            .args(["-n", DEMO_NAMESPACE])
            .arg("--cache-dir")
            .arg(cache.path())
            .env("KUBECONFIG", kubeconfig)
            .stdin(std::process::Stdio::null())
            .output()
            .await;
        match output {
            Ok(output) => {
                let text = String::from_utf8_lossy(if output.status.success() {
                    &output.stdout
                } else {
                    &output.stderr
                })
                .into_owned();
                for line in text.lines() {
                    say(format!("   {line}"));
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                say(
                    "   (kubectl is not on PATH: install it to see kcm through the Kubernetes API)",
                );
                return;
            }
            Err(e) => {
                say(format!("   (kubectl did not run: {e})"));
                return;
            }
        }
    }
}
