//! `kcm kubelet`: a simulated node that claims unassigned pods and makes them live.
//!
//! In 2014 a pod came to life through two other programs: the scheduler
//! (`plugin/pkg/scheduler`) bound it to a minion by setting its host, and the kubelet on
//! that minion (`pkg/kubelet/kubelet.go`) started its containers and reported
//! `status.phase` and `status.podIP`. kcm has neither; it simulates just enough of both
//! that pods created by the replication manager become Running with an address, so the
//! endpoints controller has something to serve. Each kubelet is its own scheduler: it
//! claims unassigned pods for its node, first come first served. Its departures ("node
//! names", "pod status") are in docs/departures.md.
//!
//! Since issue 13 it also reports readiness as the later kubelet does (`containers`):
//! `status.conditions` `Ready` and `status.containerStatuses`, Ready after `--ready-delay`
//! (in the Running write itself by default), and failing images chosen by reference
//! (`--pull-fail-images`, `--crash-images`, `--unready-images`). Each pod has at most one
//! timer, set when its state changes, so a node writes only when something is due.
//!
//! Invariants:
//! - a pod is claimed by exactly one node: the claim is a compare-and-swap on the
//!   resourceVersion of a pod whose `spec.host` is empty, so `spec.host` is written once
//!   and a losing node re-reads and moves on;
//! - a node writes only pods whose `spec.host` is its own name (and the claim that makes
//!   them so), always by compare-and-swap, keeping every field it does not know;
//! - a pod of the node with a `deletionTimestamp` (a graceful delete through the API) is
//!   "stopped" (`node::STOP_TIME`) and then deleted by the node, at the version it saw;
//! - a node claims only while it has fewer than `max_pods` active (not Failed or
//!   Succeeded) pods;
//! - the `status.podIP`s of a node's active pods are distinct addresses of its pod CIDR;
//!   an address goes back to the pool when its pod is deleted or fails, and after a
//!   restart the node reserves the addresses its pods already hold before it hands out
//!   any new one;
//! - a node writes only while it holds its registration (`registration`): one name, one
//!   kubelet. Every write is guarded by the registration key's incarnation, so etcd
//!   refuses a write of a kubelet whose registration lapsed, even one already in flight;
//! - each time it gains its registration, it posts its Node object
//!   (`{prefix}/nodes/{name}`, `node_status`) Ready, before any pod write of that
//!   registration, retrying until it is written or the registration is lost; and posts it
//!   again (a new `uid`) when its watch of that key (`own_node`) shows it deleted after
//!   the last post, as kube's kubelet registers again (`kubectl delete node`);
//! - it claims only while its Node is known not to be cordoned (`spec.unschedulable`,
//!   `kubectl cordon`), as that watch last showed it: a cordoned node keeps running its
//!   pods and claims none until uncordoned. A claim already in flight when the cordon
//!   lands may still complete, as a scheduler's bind may.
//!
//! The loop is this file's; what it does to a pod when something is due (claim, start,
//! the status steps, the delete of a stopped pod, and their events) is `pods`'.

mod containers;
mod ids;
mod ipam;
mod node;
mod node_lease;
mod node_status;
mod own_node;
mod pods;
mod registration;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::SeedableRng as _;
use tokio::time::Instant;

pub use self::containers::{
    glob_match, parse_globs, ImageClass, ImageRules, READY_DELAY_ANNOTATION,
};
pub use self::ipam::{default_pod_cidr, IpAllocator, Ipv4Cidr, ParseCidrError};
pub use self::node::is_claimable;
use self::node::NodeState;
pub use self::node_lease::{lease_document, renew_interval, DEFAULT_NODE_LEASE_DURATION};
use self::node_status::post_node;
pub use self::node_status::{
    architecture, internal_ip, node_document, SystemInfo, KUBELET_VERSION,
};
use self::own_node::OwnNode;
pub use self::registration::{
    registration_key, report_to, NodeTaken, Registration, Status as RegistrationStatus, LEASE_TTL,
    RETRY_WARNING_PERIOD,
};
use crate::api::Pod;
use crate::client::Target;
use crate::controller::log_notice;
use crate::etcd_watcher::{
    BackoffConfig, EngineConfig, Filter, Range, RawItem, RawWatch, ResumableWatch, Start, Update,
    Watcher,
};
use crate::labels;
use crate::record::{Counts, EventBroadcaster, Recorder};
use crate::registry::{FieldRecorder, Registry, StorageError};

/// The `source.component` of a kubelet's events (its `source.host` is the node).
pub const EVENT_COMPONENT: &str = "kubelet";

/// The field manager a kubelet's writes of objects made through the API are recorded as
/// (kube-apiserver records a kubelet's as `kubelet`): a pod's status, its Node.
pub const KUBELET_FIELD_MANAGER: &str = "kcm-kubelet";

/// How long a stopping `kcm kubelet` waits for its queued events to be written.
const EVENTS_FLUSH_LIMIT: Duration = Duration::from_secs(2);

/// How long the node waits before retrying after etcd failed a write.
const RETRY_DELAY: Duration = Duration::from_secs(1);

/// How many waiting updates of the pods' watch one pass of the loop takes in beyond the
/// one that woke it, before it acts (and lets the other triggers in).
const MAX_UPDATES_PER_PASS: usize = 1024;

// ---------------------------------------------------------------------------------------
// Configuration

/// Settings of one simulated node.
#[derive(Clone, Debug)]
pub struct KubeletConfig {
    /// The node's name: what it writes into `spec.host` and `status.host`.
    pub node: String,
    /// Where its pods' addresses come from. Default [`default_pod_cidr`] of the name.
    pub pod_cidr: Ipv4Cidr,
    /// How long a claimed pod stays Pending before it turns Running ("pulling the
    /// image"). Default 500 ms.
    pub start_delay: Duration,
    /// Probability, 0.0 to 1.0, that a pod that turned Running later fails. Default 0.
    pub fail_rate: f64,
    /// How long after turning Running a pod chosen to fail turns Failed. Default 5 s.
    pub fail_after: Duration,
    /// Most active pods the node holds; it claims no more while at the limit. Default
    /// 110 (the later kubelet's default `--max-pods`).
    pub max_pods: usize,
    /// How long a pod that turned Running waits before it turns Ready (its
    /// `kcm.io/ready-delay` annotation overrides it). Default 0: Ready in the same write
    /// as Running.
    pub ready_delay: Duration,
    /// Which images fail to pull, crash or never turn ready.
    pub images: ImageRules,
    /// Claim unassigned pods (bind them to this node) as they appear. Off when a
    /// scheduler binds pods (`kcm up`; `kcm kubelet --no-claim`): the node then runs only
    /// the pods bound to it. Default on.
    pub claim_unassigned: bool,
    /// Where its events about its pods go (`Started`, `Failed`, `BackOff`, `Killing`).
    /// Default: nowhere; `kcm kubelet` and `kcm up` give it a recorder.
    pub events: Recorder,
    /// The duration of its node Lease (`--node-lease-duration-seconds`), renewed every
    /// quarter of it (`node_lease`). Default 40 s.
    pub node_lease_duration: Duration,
}

impl KubeletConfig {
    /// The defaults for node `node`.
    pub fn new(node: impl Into<String>) -> KubeletConfig {
        let node = node.into();
        KubeletConfig {
            pod_cidr: default_pod_cidr(&node),
            node,
            start_delay: Duration::from_millis(500),
            fail_rate: 0.0,
            fail_after: Duration::from_secs(5),
            max_pods: 110,
            ready_delay: Duration::ZERO,
            images: ImageRules::default(),
            claim_unassigned: true,
            events: Recorder::discard(),
            node_lease_duration: DEFAULT_NODE_LEASE_DURATION,
        }
    }

    /// Checks what the types do not.
    ///
    /// # Errors
    /// An invalid node name, a fail rate outside 0..=1, no `max_pods`, or more
    /// `max_pods` than the CIDR has addresses.
    pub fn validate(&self) -> anyhow::Result<()> {
        labels::validate_dns_subdomain(&self.node)
            .map_err(|reason| anyhow::anyhow!("invalid node name {:?}: {reason}", self.node))?;
        anyhow::ensure!(
            (0.0..=1.0).contains(&self.fail_rate),
            "fail rate {} is not between 0 and 1",
            self.fail_rate
        );
        anyhow::ensure!(self.max_pods > 0, "max pods must be at least 1");
        anyhow::ensure!(
            self.node_lease_duration >= Duration::from_secs(1),
            "the node lease duration must be at least 1 s"
        );
        anyhow::ensure!(
            self.max_pods as u64 <= self.pod_cidr.pod_addresses(),
            "max pods {} exceeds the {} pod addresses of {}",
            self.max_pods,
            self.pod_cidr.pod_addresses(),
            self.pod_cidr
        );
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------
// The loop

/// One simulated node (2014's kubelet plus the scheduler's binding, reduced to what the
/// controllers need).
pub struct Kubelet {
    registry: Registry,
    config: KubeletConfig,
    /// What its Node reports about the machine; a new `bootID` per `Kubelet`.
    system: SystemInfo,
    rng: StdRng,
}

/// What woke the loop.
enum Trigger {
    Timer,
    /// Boxed: a pod is large and timers fire often.
    Watch(Box<Update<Pod>>),
    /// The registration's status changed.
    Registration,
    /// An item of the watch of the node's own Node object.
    OwnNode(RawItem),
}

/// etcd refused a write because the node's registration is gone: stop writing.
struct RegistrationRefused;

/// Where posting the Node object of the current registration stands.
#[derive(Debug, Default)]
struct NodePost {
    /// When it is to be posted; `None` once it is (or while not registered).
    due: Option<Instant>,
    /// Failed attempts in a row.
    failures: u32,
    /// The revision of this registration's last post; `None` until it is written.
    posted_at: Option<i64>,
}

impl Kubelet {
    /// A node writing through `registry`.
    ///
    /// # Errors
    /// When `config` does not validate.
    pub fn new(registry: Registry, config: KubeletConfig) -> anyhow::Result<Kubelet> {
        config.validate()?;
        Ok(Kubelet {
            registry,
            system: SystemInfo::detect(&config.node),
            config,
            rng: StdRng::from_entropy(),
        })
    }

    /// Makes the fail-rate dice reproducible.
    pub fn with_seed(mut self, seed: u64) -> Kubelet {
        self.rng = StdRng::seed_from_u64(seed);
        self
    }

    /// Runs the node until `shutdown` resolves: watches pods in every namespace, claims
    /// unassigned ones, starts them after `start_delay` and fails the unlucky ones after
    /// `fail_after`, while it holds `registration` (see [`Registration`]).
    ///
    /// A lost registration stops every write at once; the node writes again once
    /// registered again. Shutdown contract: once `shutdown` resolves no new write
    /// starts; a write in flight finishes (bounded by the registry's request timeout),
    /// the watch is dropped, the registration is released (so a successor registers at
    /// once) and `run` returns `Ok`. Timers do not survive a restart: the next run starts
    /// its Pending pods after `start_delay` again and casts the dice again for Running
    /// ones.
    ///
    /// # Errors
    /// When the pod watch task dies, or the registration was lost and the name is now
    /// held by another ([`NodeTaken`]); etcd failures are retried.
    pub async fn run(
        self,
        watcher: Watcher,
        registration: Registration,
        shutdown: impl Future<Output = ()> + Send,
    ) -> anyhow::Result<()> {
        anyhow::ensure!(
            registration.node() == self.config.node,
            "the registration of node {} cannot serve node {}",
            registration.node(),
            self.config.node
        );
        // The pods bound to this node, and the unassigned ones when it claims them: the
        // watch keeps what it delivered, so a watch of every pod held each pod of the
        // cluster once per kubelet (50 to 60 MB each at 10,000 pods, most of `kcm up
        // --nodes 10`'s memory); and of those only their names, as the node keeps what it
        // needs of each pod itself and forgets a deleted one by its key. Without etcd's
        // previous values: each kubelet asking for them added a read in etcd to every pod
        // write (a third of etcd's CPU in a rollout on four nodes); a pod bound elsewhere
        // after it was delivered, or deleted, comes as a Deleted of its names.
        let pod_events = watcher
            .resumable_list_without_previous::<Pod>(
                None,
                "",
                pods_of(&self.config.node, self.config.claim_unassigned),
            )?
            .keeping_names();
        // Its own Node: whether it is cordoned, and whether it was deleted.
        let node_key = crate::api::node_key(watcher.registry().prefix(), &self.config.node);
        let node_events = watcher
            .engine(EngineConfig {
                range: Range::key(node_key),
                start: Start::List,
                resume: true,
                prev_kv: false,
                backoff: BackoffConfig::default(),
                metrics: Default::default(),
            })
            .into_stream();
        tracing::info!(
            node = %self.config.node,
            pod_cidr = %self.config.pod_cidr,
            max_pods = self.config.max_pods,
            registration = registration.key(),
            "kubelet starting"
        );
        let node = self.config.node.clone();
        // Its node Lease, renewed beside the loop while the registration is held, owned by
        // the Node the loop last posted.
        let (node_uid, posted_uid) = tokio::sync::watch::channel(None);
        let stop_lease = tokio_util::sync::CancellationToken::new();
        let lease = tokio::spawn(node_lease::renew_while_held(
            self.registry.clone(),
            node.clone(),
            self.config.node_lease_duration,
            registration.status(),
            posted_uid,
            stop_lease.clone(),
        ));
        let result = self
            .run_loop(pod_events, node_events, &registration, &node_uid, shutdown)
            .await;
        stop_lease.cancel();
        let _ = lease.await;
        registration.release().await;
        tracing::info!(%node, "kubelet stopped");
        result
    }

    async fn run_loop(
        self,
        mut pod_events: ResumableWatch<Pod>,
        node_events: RawWatch,
        registration: &Registration,
        node_uid: &tokio::sync::watch::Sender<Option<String>>,
        shutdown: impl Future<Output = ()> + Send,
    ) -> anyhow::Result<()> {
        let mut state = NodeState::new(self.config.clone(), self.rng.clone());
        let mut own_node = OwnNode::default();
        // Fused: a stream that ended is never polled again (with resume on, it does not
        // end).
        let mut node_events = futures::StreamExt::fuse(node_events);
        let mut status = registration.status();
        // The registry the node writes through while registered, guarded by the
        // registration; `None` while it is not.
        let mut writer = None;
        // When the Node object is to be posted (once per registration).
        let mut node_post = NodePost::default();
        tokio::pin!(shutdown);
        let mut trigger = Trigger::Registration;
        loop {
            match trigger {
                Trigger::Timer => {}
                Trigger::Watch(update) => {
                    take_update(&mut state, *update);
                    // And every update already waiting, so the writes they make due go out
                    // together (`pods`' windows) rather than one pass of the loop each.
                    for _ in 0..MAX_UPDATES_PER_PASS {
                        match futures::FutureExt::now_or_never(pod_events.next()) {
                            Some(update) => take_update(&mut state, update),
                            None => break,
                        }
                    }
                }
                Trigger::Registration => {
                    let current = status.borrow_and_update().clone();
                    writer = self.follow_registration(current)?;
                    node_post = NodePost {
                        due: writer.as_ref().map(|_| Instant::now()),
                        ..NodePost::default()
                    };
                }
                Trigger::OwnNode(item) => {
                    own_node.observe(item);
                    self.follow_cordon(&mut state, own_node.cordoned());
                    let deleted = node_post
                        .posted_at
                        .is_some_and(|posted| own_node.deleted_since(posted));
                    let marked = node_post
                        .posted_at
                        .is_some_and(|posted| own_node.not_ready_since(posted));
                    if writer.is_some() && node_post.due.is_none() && (deleted || marked) {
                        if deleted {
                            tracing::info!(node = %self.config.node,
                                "Node deleted while this kubelet runs; posting it again");
                        } else {
                            tracing::info!(node = %self.config.node,
                                "Node marked not Ready while this kubelet holds its registration; posting it Ready again");
                        }
                        node_post.due = Some(Instant::now());
                    }
                }
            }
            if let Some(registry) = &writer {
                let mut result = self
                    .post_node_if_due(registry, &mut node_post, node_uid)
                    .await;
                if result.is_ok() && node_post.due.is_none() {
                    result = self.act(registry, &mut state).await;
                }
                if let Err(RegistrationRefused) = result {
                    // The registration task says what happened once it has looked.
                    tracing::debug!(node = %self.config.node,
                        "etcd refused a write: the node's registration is gone");
                    writer = None;
                    node_post = NodePost::default();
                    registration.check_now();
                }
            }
            // Only what the next pass can do: nothing while unregistered (a due timer
            // would wake the loop at once, again and again, and starve the watch and
            // every other task polled with it), only the Node post while it is due.
            let wake = match (&writer, node_post.due) {
                (None, _) => None,
                (Some(_), Some(due)) => Some(due),
                (Some(_), None) => state.next_wake(),
            };
            trigger = tokio::select! {
                biased;
                _ = &mut shutdown => break,
                // The sender lives as long as the registration; if its task ended, the
                // last status stands.
                Ok(()) = status.changed() => Trigger::Registration,
                _ = tokio::time::sleep_until(wake.unwrap_or_else(Instant::now)), if wake.is_some() => Trigger::Timer,
                // Cancel-safe: the watch's work in flight lives in the stream.
                update = pod_events.next() => Trigger::Watch(Box::new(update)),
                // Cancel-safe: the engine's step in flight lives in the stream.
                Some(item) = futures::StreamExt::next(&mut node_events) => Trigger::OwnNode(item),
            };
        }
        Ok(())
    }

    /// The registry to write through once the registration is `status` (the
    /// registration task logs the changes).
    ///
    /// # Errors
    /// [`NodeTaken`] when another holds the name now.
    fn follow_registration(&self, status: RegistrationStatus) -> anyhow::Result<Option<Registry>> {
        match status {
            RegistrationStatus::Held(incarnation) => {
                Ok(Some(self.registry.guarded_by(incarnation)))
            }
            RegistrationStatus::Lost(_) => Ok(None),
            RegistrationStatus::Taken(taken) => Err(anyhow::Error::new(taken)
                .context("this kubelet lost its registration and stopped writing")),
        }
    }

    /// Takes in whether the node's own Node is cordoned, saying so when that changes
    /// for a node that claims pods.
    fn follow_cordon(&self, state: &mut NodeState, cordoned: Option<bool>) {
        if !state.set_cordoned(cordoned) || !self.config.claim_unassigned {
            return;
        }
        if cordoned == Some(true) {
            tracing::info!(node = %self.config.node,
                "node cordoned (spec.unschedulable): claiming no new pod; its pods keep running");
        } else {
            tracing::info!(node = %self.config.node, "node uncordoned: claiming pods again");
        }
    }

    /// Posts the Node object through `registry` when `post` says it is due, and clears it
    /// once it is written; after a failure, it is due a moment later (pod writes wait for
    /// it: the 4th, 8th, 16th… failure in a row is warned about).
    ///
    /// # Errors
    /// When etcd refused the write because the registration is gone.
    async fn post_node_if_due(
        &self,
        registry: &Registry,
        post: &mut NodePost,
        node_uid: &tokio::sync::watch::Sender<Option<String>>,
    ) -> Result<(), RegistrationRefused> {
        if post.due.is_none_or(|due| due > Instant::now()) {
            return Ok(());
        }
        match post_node(registry, &self.config, &self.system).await {
            Ok(posted) => {
                let key = crate::api::node_key(registry.prefix(), &self.config.node);
                let verb = if posted.created { "created" } else { "updated" };
                tracing::info!(node = %self.config.node, %key, "Node {verb}: Ready");
                let uid = posted.document.pointer("/metadata/uid");
                node_uid.send_replace(uid.and_then(serde_json::Value::as_str).map(str::to_string));
                *post = NodePost {
                    posted_at: Some(posted.revision.0),
                    ..NodePost::default()
                };
                Ok(())
            }
            Err(e) => {
                post.failures += 1;
                let failures = post.failures;
                if failures >= 4
                    && failures.is_power_of_two()
                    && !matches!(e, StorageError::OwnerGone { .. })
                {
                    tracing::warn!(node = %self.config.node, error = %e, failures,
                        "posting the Node keeps failing; no pod is written until it succeeds; retrying");
                } else {
                    tracing::debug!(node = %self.config.node, error = %e, "posting the Node failed; retrying");
                }
                post.due = Some(Instant::now() + RETRY_DELAY);
                refused(&e)
            }
        }
    }
}

/// The name of a pod's first container (`""` without one), what its events name.
/// Takes one update of the pods' watch into the node's state.
/// The pods a node watches: those bound to it, and the unassigned ones when it claims
/// them (`claim_unassigned`; where a scheduler binds the pods, they come once bound).
fn pods_of(node: &str, claims: bool) -> Filter<Pod> {
    let node = node.to_string();
    Arc::new(move |pod: &Pod| pod.spec.host == node || (claims && pod.spec.host.is_empty()))
}

fn take_update(state: &mut NodeState, update: Update<Pod>) {
    match update {
        Update::Event(event, _) => state.observe_event(event, Instant::now()),
        notice => {
            log_notice("pods", &notice);
            state.observe_notice(&notice);
        }
    }
}

fn first_container(pod: &Pod) -> &str {
    pod.spec.containers.first().map_or("", |c| c.name.as_str())
}

/// `kcm kubelet`: connects to `target`, registers the node and runs it until `shutdown`
/// resolves.
///
/// # Errors
/// When etcd is unreachable at start, the prefix is invalid, or the node name is taken.
pub async fn run(
    target: &Target,
    config: KubeletConfig,
    healthz: Option<std::net::SocketAddr>,
    fields: Arc<dyn FieldRecorder>,
    shutdown: impl Future<Output = ()> + Send,
) -> anyhow::Result<()> {
    // The binary's signal handlers are installed when its shutdown future is first polled:
    // poll it before the name is registered, so a SIGTERM from then on (say, right after
    // the registration, while the Node is posted) stops the kubelet cleanly, releasing the
    // name, instead of killing the process.
    tokio::pin!(shutdown);
    if futures::FutureExt::now_or_never(&mut shutdown).is_some() {
        return Ok(());
    }
    // A busy status port fails before anything is registered.
    let listener = match healthz {
        Some(addr) => {
            Some(crate::status::bind(addr, "another kcm kubelet", "--healthz-port").await?)
        }
        None => None,
    };
    let (client, registry) = target.connect().await?;
    let registry = registry.with_field_manager(fields, KUBELET_FIELD_MANAGER);
    let (events, events_writer) =
        EventBroadcaster::start(&client, registry.prefix(), Counts::default());
    let config = KubeletConfig {
        events: events.recorder(EVENT_COMPONENT, Some(config.node.clone())),
        ..config
    };
    let kubelet = Kubelet::new(registry.clone(), config)?;
    // The registration renews its lease on a connection of its own (the later kubelet's
    // heartbeat client): its renewals never wait behind the pod watch and writes.
    let heartbeats = crate::client::connect(&target.client).await?;
    let registration = Registration::register(
        &heartbeats,
        registry.prefix(),
        &kubelet.config.node,
        target.client.request_timeout,
    )
    .await
    .map_err(|e| match e.downcast::<NodeTaken>() {
        Ok(taken) => anyhow::anyhow!("{taken}; use another --node"),
        Err(e) => e,
    })?;
    let watcher = Watcher::new(&client, registry);
    let stop_status = tokio_util::sync::CancellationToken::new();
    if let Some(listener) = listener {
        // `/healthz` answers 503 naming the node while its registration is lost, as
        // `kcm up`'s does for its kubelets.
        let health = Arc::new(crate::status::Health::new(client.clone()));
        health
            .loops_running
            .store(true, std::sync::atomic::Ordering::SeqCst);
        tokio::spawn(report_to(
            kubelet.config.node.clone(),
            registration.status(),
            health.nodes.clone(),
        ));
        let metrics = Arc::new(crate::status::Metrics::new());
        let stop = stop_status.clone().cancelled_owned();
        tokio::spawn(crate::status::serve(listener, metrics, health, stop));
    }
    let result = kubelet.run(watcher, registration, shutdown).await;
    stop_status.cancel();
    events.flush(events_writer, EVENTS_FLUSH_LIMIT).await;
    result
}

/// `Err` when `error` says etcd refused a write because the registration is gone.
fn refused(error: &StorageError) -> Result<(), RegistrationRefused> {
    match error {
        StorageError::OwnerGone { .. } => Err(RegistrationRefused),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_validation() {
        KubeletConfig::new("node-a").validate().unwrap();
        let check = |config: KubeletConfig, part: &str| {
            let message = config.validate().unwrap_err().to_string();
            assert!(
                message.contains(part),
                "{message:?} should contain {part:?}"
            );
        };
        check(KubeletConfig::new("Node_A"), "invalid node name \"Node_A\"");
        check(
            KubeletConfig {
                fail_rate: 1.5,
                ..KubeletConfig::new("a")
            },
            "not between 0 and 1",
        );
        check(
            KubeletConfig {
                max_pods: 0,
                ..KubeletConfig::new("a")
            },
            "at least 1",
        );
        check(
            KubeletConfig {
                max_pods: 254,
                ..KubeletConfig::new("a")
            },
            "exceeds the 253 pod addresses",
        );
    }

    #[test]
    fn a_node_watches_its_own_pods_and_the_unassigned_ones_only_when_it_claims() {
        let on = |host: &str| {
            let mut pod = Pod::default();
            pod.spec.host = host.to_string();
            pod
        };
        let seen = |claims: bool| {
            let filter = pods_of("n1", claims);
            ["n1", "", "n2"].map(|host| filter(&on(host)))
        };
        assert_eq!(seen(true), [true, true, false]);
        assert_eq!(seen(false), [true, false, false]);
    }
}
