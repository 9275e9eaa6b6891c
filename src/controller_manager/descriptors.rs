//! The controller table and how controllers start: the kube-controller-manager's
//! `NewControllerDescriptors()`, `ControllerContext`, its init functions
//! (`cmd/kube-controller-manager/app/core.go`: `startReplicationController`,
//! `startReplicaSetController` and `startDeploymentController` of `apps.go`,
//! `startEndpointsController`, `startGarbageCollectorController`,
//! `startNodeLifecycleController` and `startNamespaceController` of `core.go`) and
//! `StartControllers`, plus the `--controllers` grammar
//! (`IsControllerEnabled`).
//!
//! Adding a controller is one row here and one module: its init function asks the
//! shared informer factory for the informers it reads and returns the controller's
//! future, or declines.

use std::sync::Arc;

use futures::future::BoxFuture;
use tokio_util::sync::CancellationToken;

use crate::deployment::{DeploymentConfig, DeploymentController};
use crate::endpoints::{EndpointsConfig, EndpointsController};
use crate::etcd_watcher::Watcher;
use crate::garbagecollector::{GarbageCollector, GcConfig};
use crate::informer::InformerFactory;
use crate::namespace::{NamespaceConfig, NamespaceController};
use crate::nodelifecycle::{NodeLifecycleConfig, NodeLifecycleController};
use crate::record::EventBroadcaster;
use crate::registry::Registry;
use crate::replicaset::{ReplicaSetConfig, ReplicaSetController};
use crate::replication_2014::ReplicationManager as ReplicationManager2014;
use crate::replication_manager::{ManagerConfig, ReplicationManager};
use crate::scheduler::{Scheduler, SchedulerConfig};
use crate::status::Metrics;

/// The controllers `kcm controller-manager` can run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Controller {
    /// The replication manager.
    Replication,
    /// The ReplicaSet controller.
    ReplicaSet,
    /// The Deployment controller.
    Deployment,
    /// The endpoints controller.
    Endpoints,
    /// The late-2014 replication manager, as it was (a teaching instrument).
    Replication2014,
    /// The garbage collector (and terminated-pod collection).
    GarbageCollector,
    /// The node lifecycle controller (Nodes whose kubelet is gone turn Ready Unknown).
    NodeLifecycle,
    /// The scheduler (binds unassigned pods, spreading each controller's over the nodes).
    Scheduler,
    /// The namespace controller (empties a terminating namespace, then deletes it).
    Namespace,
}

/// One row of the controller table (the kube-controller-manager's
/// `NewControllerDescriptors()`): the name `--controllers` knows it by, its aliases,
/// whether `*` enables it, and the function that starts it.
#[derive(Clone, Copy)]
pub struct Descriptor {
    pub controller: Controller,
    pub name: &'static str,
    pub aliases: &'static [&'static str],
    pub disabled_by_default: bool,
    pub init: InitFn,
}

impl std::fmt::Debug for Descriptor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Descriptor")
            .field("name", &self.name)
            .field("aliases", &self.aliases)
            .field("disabled_by_default", &self.disabled_by_default)
            .finish_non_exhaustive()
    }
}

/// Every controller kcm has, in the order they start.
pub const DESCRIPTORS: &[Descriptor] = &[
    Descriptor {
        controller: Controller::Replication,
        name: "replication",
        aliases: &["replicationcontroller", "replicationcontroller-controller"],
        disabled_by_default: false,
        init: start_replication_manager,
    },
    Descriptor {
        controller: Controller::ReplicaSet,
        name: "replicaset",
        aliases: &["replicaset-controller"],
        disabled_by_default: false,
        init: start_replicaset_controller,
    },
    Descriptor {
        controller: Controller::Deployment,
        name: "deployment",
        aliases: &["deployment-controller"],
        disabled_by_default: false,
        init: start_deployment_controller,
    },
    Descriptor {
        controller: Controller::Endpoints,
        name: "endpoints",
        aliases: &["endpoint", "endpoints-controller"],
        disabled_by_default: false,
        init: start_endpoints_controller,
    },
    Descriptor {
        controller: Controller::GarbageCollector,
        name: "garbagecollector",
        aliases: &["garbage-collector-controller"],
        disabled_by_default: false,
        init: start_garbage_collector,
    },
    Descriptor {
        controller: Controller::NodeLifecycle,
        name: "nodelifecycle",
        aliases: &["node-lifecycle-controller"],
        disabled_by_default: false,
        init: start_node_lifecycle_controller,
    },
    Descriptor {
        controller: Controller::Namespace,
        name: "namespace",
        aliases: &["namespace-controller"],
        disabled_by_default: false,
        init: start_namespace_controller,
    },
    Descriptor {
        controller: Controller::Scheduler,
        name: "scheduler",
        aliases: &["kube-scheduler"],
        // Kubelets claim unassigned pods unless told otherwise (`kcm kubelet --no-claim`);
        // `kcm up` runs the scheduler and tells its kubelets.
        disabled_by_default: true,
        init: start_scheduler,
    },
    Descriptor {
        controller: Controller::Replication2014,
        name: "replication-2014",
        aliases: &[],
        disabled_by_default: true,
        init: start_replication_2014,
    },
];

/// The descriptor a `--controllers` entry names (by name or alias), if any.
pub fn descriptor(name: &str) -> Option<&'static Descriptor> {
    DESCRIPTORS
        .iter()
        .find(|d| d.name == name || d.aliases.contains(&name))
}

impl Controller {
    /// The name `--controllers` knows it by.
    pub fn name(self) -> &'static str {
        DESCRIPTORS
            .iter()
            .find(|d| d.controller == self)
            .map_or("?", |d| d.name)
    }
}

/// Checks one `--controllers` entry: `*`, a known name or alias, or one prefixed by `-`.
///
/// # Errors
/// `"foo" is not in the list of known controllers` (the kube-controller-manager's words).
pub fn check_controller_entry(entry: &str) -> Result<String, String> {
    let entry = entry.trim();
    let name = entry.strip_prefix('-').unwrap_or(entry);
    if entry == "*" || descriptor(name).is_some() {
        Ok(entry.to_string())
    } else {
        Err(format!("{name:?} is not in the list of known controllers"))
    }
}

/// The controllers a `--controllers` list enables, in table order, with Kubernetes'
/// rule (`IsControllerEnabled`): the first entry that names a controller (`name` or
/// `-name`, by name or alias) decides; otherwise `*` enables it unless it is off by
/// default; otherwise it is off. Entries must have passed [`check_controller_entry`].
pub fn enabled_controllers(entries: &[String]) -> Vec<Controller> {
    let star = entries.iter().any(|e| e.trim() == "*");
    DESCRIPTORS
        .iter()
        .filter(|d| {
            let explicit = entries.iter().find_map(|entry| {
                let entry = entry.trim();
                let (on, name) = match entry.strip_prefix('-') {
                    Some(name) => (false, name),
                    None => (true, entry),
                };
                (name == d.name || d.aliases.contains(&name)).then_some(on)
            });
            explicit.unwrap_or(star && !d.disabled_by_default)
        })
        .map(|d| d.controller)
        .collect()
}

// ---------------------------------------------------------------------------------------
// Starting controllers

/// Every controller's settings.
#[derive(Clone, Debug)]
pub struct Settings {
    pub replication: ManagerConfig,
    pub replicaset: ReplicaSetConfig,
    pub deployment: DeploymentConfig,
    pub endpoints: EndpointsConfig,
    pub garbagecollector: GcConfig,
    pub nodelifecycle: NodeLifecycleConfig,
    pub scheduler: SchedulerConfig,
    pub namespace: NamespaceConfig,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            replication: ManagerConfig::default(),
            replicaset: ReplicaSetConfig::default(),
            deployment: DeploymentConfig::default(),
            endpoints: EndpointsConfig::default(),
            garbagecollector: GcConfig::default(),
            nodelifecycle: NodeLifecycleConfig::default(),
            scheduler: SchedulerConfig::default(),
            // The namespaced resources the API serves: the registry is kcm's discovery.
            namespace: NamespaceConfig::new(crate::apiserver::namespaced_directories()),
        }
    }
}

/// What an init function gets: the kube-controller-manager's `ControllerContext`. One
/// per leadership term (or per process without leader election).
pub struct ControllerContext {
    pub registry: Registry,
    pub watcher: Watcher,
    /// The term's shared informers; started after every init function ran.
    pub informers: InformerFactory,
    pub metrics: Arc<Metrics>,
    pub settings: Settings,
    /// The process's event writer; each controller records through its own recorder.
    pub events: EventBroadcaster,
    /// Cancelled when the term ends or the process stops.
    pub stop: CancellationToken,
}

/// A started controller: runs until the context's `stop` is cancelled, then drains.
pub type ControllerFuture = BoxFuture<'static, anyhow::Result<()>>;

/// What an init function did.
pub enum Init {
    Started(ControllerFuture),
    /// It chose not to run, and why (logged once).
    Declined(String),
}

/// Starts one controller on a context.
pub type InitFn = fn(&ControllerContext) -> anyhow::Result<Init>;

fn start_replication_manager(ctx: &ControllerContext) -> anyhow::Result<Init> {
    let mut config = ctx.settings.replication.clone();
    config.events = ctx.events.recorder("replication-controller", None);
    let manager = ReplicationManager::new(ctx.registry.clone(), config, ctx.metrics.clone());
    Ok(Init::Started(
        manager.start(&ctx.informers, ctx.stop.clone().cancelled_owned()),
    ))
}

fn start_replicaset_controller(ctx: &ControllerContext) -> anyhow::Result<Init> {
    let mut config = ctx.settings.replicaset.clone();
    config.events = ctx.events.recorder("replicaset-controller", None);
    let controller = ReplicaSetController::new(ctx.registry.clone(), config, ctx.metrics.clone());
    Ok(Init::Started(
        controller.start(&ctx.informers, ctx.stop.clone().cancelled_owned()),
    ))
}

fn start_deployment_controller(ctx: &ControllerContext) -> anyhow::Result<Init> {
    let mut config = ctx.settings.deployment.clone();
    config.events = ctx.events.recorder("deployment-controller", None);
    let controller = DeploymentController::new(ctx.registry.clone(), config, ctx.metrics.clone());
    Ok(Init::Started(
        controller.start(&ctx.informers, ctx.stop.clone().cancelled_owned()),
    ))
}

fn start_endpoints_controller(ctx: &ControllerContext) -> anyhow::Result<Init> {
    let controller = EndpointsController::new(
        ctx.registry.clone(),
        ctx.settings.endpoints.clone(),
        ctx.metrics.clone(),
    );
    Ok(Init::Started(
        controller.start(&ctx.informers, ctx.stop.clone().cancelled_owned()),
    ))
}

fn start_garbage_collector(ctx: &ControllerContext) -> anyhow::Result<Init> {
    let collector = GarbageCollector::new(
        ctx.registry.clone(),
        ctx.settings.garbagecollector.clone(),
        ctx.metrics.clone(),
    );
    Ok(Init::Started(
        collector.start(&ctx.informers, ctx.stop.clone()),
    ))
}

/// The node lifecycle controller reads the Node and registration informers.
fn start_node_lifecycle_controller(ctx: &ControllerContext) -> anyhow::Result<Init> {
    let mut config = ctx.settings.nodelifecycle.clone();
    config.events = ctx.events.recorder("node-controller", None);
    let controller =
        NodeLifecycleController::new(ctx.registry.clone(), config, ctx.metrics.clone());
    Ok(Init::Started(
        controller.start(&ctx.informers, ctx.stop.clone().cancelled_owned()),
    ))
}

/// The namespace controller reads no informer: it lists the Namespace documents each
/// period, and the keys of the terminating ones.
fn start_namespace_controller(ctx: &ControllerContext) -> anyhow::Result<Init> {
    let controller = NamespaceController::new(ctx.registry.clone(), ctx.settings.namespace.clone());
    Ok(Init::Started(
        controller.start(ctx.stop.clone().cancelled_owned()),
    ))
}

/// The scheduler, on the shared pod informer.
fn start_scheduler(ctx: &ControllerContext) -> anyhow::Result<Init> {
    let mut config = ctx.settings.scheduler.clone();
    config.events = ctx.events.recorder("default-scheduler", None);
    let scheduler = Scheduler::new(ctx.registry.clone(), config);
    Ok(Init::Started(
        scheduler.start(&ctx.informers, ctx.stop.clone().cancelled_owned()),
    ))
}

/// The 2014 loop, with the manager's `--sync-period`: it shares nothing with the
/// informers (it lists and watches etcd itself, as 2014 did).
fn start_replication_2014(ctx: &ControllerContext) -> anyhow::Result<Init> {
    let manager = ReplicationManager2014::new(ctx.registry.clone(), ctx.watcher.clone());
    let period = ctx.settings.replication.sync_period;
    Ok(Init::Started(Box::pin(
        manager.run(period, ctx.stop.clone()),
    )))
}

/// `StartControllers`: runs the init function of every enabled controller of `table`, in
/// table order, and returns the started ones by name. The caller starts the informer
/// factory afterwards, so every controller subscribed before the first list.
///
/// # Errors
/// When an init function fails; the controllers started before it are returned to
/// nobody and stop with the context.
pub fn start_controllers(
    ctx: &ControllerContext,
    table: &[Descriptor],
    enabled: &[Controller],
) -> anyhow::Result<Vec<(&'static str, ControllerFuture)>> {
    let mut started = Vec::new();
    for descriptor in table.iter().filter(|d| enabled.contains(&d.controller)) {
        match (descriptor.init)(ctx)? {
            Init::Started(future) => {
                tracing::info!(controller = descriptor.name, "controller started");
                started.push((descriptor.name, future));
            }
            Init::Declined(why) => {
                tracing::warn!(controller = descriptor.name, reason = %why, "controller declined to start");
            }
        }
    }
    Ok(started)
}

/// The `--help` text of `--controllers`, in the kube-controller-manager's words: the
/// grammar, every controller, and the ones `*` leaves off.
pub fn controllers_help() -> String {
    let names = |filter: fn(&Descriptor) -> bool| {
        let names: Vec<String> = DESCRIPTORS
            .iter()
            .filter(|d| filter(d))
            .map(|d| match d.aliases {
                [] => d.name.to_string(),
                aliases => format!("{} (aliases {})", d.name, aliases.join(", ")),
            })
            .collect();
        if names.is_empty() {
            "none".to_string()
        } else {
            names.join("; ")
        }
    };
    format!(
        "A list of controllers to enable. '*' enables all on-by-default controllers, 'foo' enables the controller named 'foo', '-foo' disables the controller named 'foo'; the first mention of a controller wins.\nAll controllers: {}.\nDisabled-by-default controllers: {}.",
        names(|_| true),
        names(|d| d.disabled_by_default),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[track_caller]
    fn check(spec: &str, expected: &[Controller]) {
        let entries: Vec<String> = spec.split(',').map(String::from).collect();
        for entry in &entries {
            check_controller_entry(entry).unwrap();
        }
        assert_eq!(
            enabled_controllers(&entries),
            expected,
            "--controllers {spec}"
        );
    }

    #[test]
    fn the_kubernetes_controllers_grammar() {
        use Controller::{
            Deployment, Endpoints, GarbageCollector, Namespace, NodeLifecycle, ReplicaSet,
            Replication,
        };
        check(
            "*",
            &[
                Replication,
                ReplicaSet,
                Deployment,
                Endpoints,
                GarbageCollector,
                NodeLifecycle,
                Namespace,
            ],
        );
        check("replication", &[Replication]);
        check(
            "-endpoints,*",
            &[
                Replication,
                ReplicaSet,
                Deployment,
                GarbageCollector,
                NodeLifecycle,
                Namespace,
            ],
        );
        check(
            "*,-endpoints,-garbagecollector,-nodelifecycle",
            &[Replication, ReplicaSet, Deployment, Namespace],
        );
        check("node-lifecycle-controller", &[NodeLifecycle]);
        check("namespace-controller", &[Namespace]);
        check("garbage-collector-controller", &[GarbageCollector]);
        check("endpoints-controller", &[Endpoints]);
        check("replicaset-controller", &[ReplicaSet]);
        check("deployment-controller", &[Deployment]);
        check(
            "-deployment,-garbagecollector,-nodelifecycle,*",
            &[Replication, ReplicaSet, Endpoints, Namespace],
        );
        check(
            "-replicaset,-garbagecollector,*",
            &[Replication, Deployment, Endpoints, NodeLifecycle, Namespace],
        );
        check("replication,endpoints", &[Replication, Endpoints]);
        // The first explicit mention wins.
        check("replication,-replication", &[Replication]);
        check(
            "-replicationcontroller,replication,*",
            &[
                ReplicaSet,
                Deployment,
                Endpoints,
                GarbageCollector,
                NodeLifecycle,
                Namespace,
            ],
        );
        // Without `*`, only what is named runs.
        check("-endpoints", &[]);
        // The 2014 loop is off by default: `*` leaves it off, naming it turns it on.
        use Controller::Replication2014;
        check(
            "*,-replication",
            &[
                ReplicaSet,
                Deployment,
                Endpoints,
                GarbageCollector,
                NodeLifecycle,
                Namespace,
            ],
        );
        check("replication-2014,-replication", &[Replication2014]);
        check(
            "replication-2014,*,-replication,-garbagecollector,-nodelifecycle",
            &[
                ReplicaSet,
                Deployment,
                Endpoints,
                Namespace,
                Replication2014,
            ],
        );
    }

    #[test]
    fn unknown_entries_are_refused_with_the_kubernetes_message() {
        for entry in ["foo", "-foo"] {
            assert_eq!(
                check_controller_entry(entry).unwrap_err(),
                r#""foo" is not in the list of known controllers"#
            );
        }
        assert!(check_controller_entry("-endpoint").is_ok());
    }

    async fn context() -> ControllerContext {
        // Connecting without credentials is lazy: nothing here talks to etcd.
        let client = etcd_client::Client::connect(["http://127.0.0.1:1"], None)
            .await
            .unwrap();
        let registry = Registry::new(&client, "/registry").unwrap();
        let watcher = Watcher::new(&client, registry.clone());
        let metrics = Arc::new(Metrics::new());
        ControllerContext {
            informers: InformerFactory::new(watcher.clone(), Default::default(), metrics.clone()),
            registry,
            watcher,
            metrics,
            settings: Settings::default(),
            events: EventBroadcaster::discard(),
            stop: CancellationToken::new(),
        }
    }

    #[tokio::test]
    async fn each_kind_is_asked_for_only_by_the_controllers_that_read_it() {
        use Controller::{Deployment, Endpoints, ReplicaSet, Replication};
        for (enabled, informers) in [
            (
                &[Replication, ReplicaSet, Deployment, Endpoints][..],
                &[
                    "replicationcontrollers",
                    "pods",
                    "replicasets",
                    "deployments",
                    "services",
                ][..],
            ),
            // The Deployment controller reads pods for `Recreate`.
            (&[Deployment], &["deployments", "replicasets", "pods"]),
            (
                &[Replication, Endpoints][..],
                &["replicationcontrollers", "pods", "services"][..],
            ),
            // The ReplicaSet controller reads ReplicationControllers for its coexistence
            // rule.
            (
                &[ReplicaSet],
                &["replicasets", "pods", "replicationcontrollers"],
            ),
            (&[Replication], &["replicationcontrollers", "pods"]),
            (&[Endpoints], &["services", "pods"]),
            // The garbage collector reads every kind kcm stores.
            (
                &[Controller::GarbageCollector],
                &[
                    "pods",
                    "replicationcontrollers",
                    "services",
                    "endpoints",
                    "replicasets",
                    "deployments",
                ],
            ),
            // The 2014 loop lists and watches etcd itself.
            (&[Controller::Replication2014], &[]),
            (&[Controller::NodeLifecycle], &["nodes", "minions"]),
            (&[], &[]),
        ] {
            let ctx = context().await;
            let started = start_controllers(&ctx, DESCRIPTORS, enabled).unwrap();
            let names: Vec<_> = started.iter().map(|(name, _)| *name).collect();
            let expected: Vec<_> = DESCRIPTORS
                .iter()
                .filter(|d| enabled.contains(&d.controller))
                .map(|d| d.name)
                .collect();
            assert_eq!(names, expected);
            assert_eq!(ctx.informers.resources(), informers, "{enabled:?}");
        }
    }

    #[tokio::test]
    async fn a_declining_controller_is_skipped_and_the_others_start() {
        let declines: InitFn = |_| Ok(Init::Declined("nothing to do".into()));
        let starts: InitFn = |_| Ok(Init::Started(Box::pin(async { Ok(()) })));
        let table = [
            Descriptor {
                init: declines,
                ..DESCRIPTORS[0]
            },
            Descriptor {
                init: starts,
                ..DESCRIPTORS[3]
            },
        ];
        let ctx = context().await;
        let all = [Controller::Replication, Controller::Endpoints];
        let started = start_controllers(&ctx, &table, &all).unwrap();
        assert_eq!(started.len(), 1);
        assert_eq!(started[0].0, "endpoints");
        let failing: InitFn = |_| anyhow::bail!("no settings");
        let table = [Descriptor {
            init: failing,
            ..DESCRIPTORS[0]
        }];
        assert!(start_controllers(&ctx, &table, &all).is_err());
    }
}
