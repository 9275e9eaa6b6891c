//! `kcm kubelet`: a simulated node that claims unassigned pods and makes them live.
//!
//! In 2014 a pod came to life through two other programs: the scheduler
//! (`plugin/pkg/scheduler`) bound it to a minion by setting its host, and the kubelet on
//! that minion (`pkg/kubelet/kubelet.go`) started its containers and reported
//! `status.phase` and `status.podIP`. kcm has neither; it simulates just enough of both
//! that pods created by the replication manager become Running with an address, so the
//! endpoints controller has something to serve. Each kubelet is its own scheduler: it
//! claims unassigned pods for its node, first come first served.
//!
//! Invariants:
//! - a pod is claimed by exactly one node: the claim is a compare-and-swap on the
//!   resourceVersion of a pod whose `spec.host` is empty, so `spec.host` is written once
//!   and a losing node re-reads and moves on;
//! - a node writes only pods whose `spec.host` is its own name (and the claim that makes
//!   them so), always by compare-and-swap, keeping every field it does not know;
//! - a node claims only while it has fewer than `max_pods` active (not Failed or
//!   Succeeded) pods;
//! - the `status.podIP`s of a node's active pods are distinct addresses of its pod CIDR;
//!   an address goes back to the pool when its pod is deleted or fails, and after a
//!   restart the node reserves the addresses its pods already hold before it hands out
//!   any new one.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap, HashSet};
use std::fmt;
use std::future::Future;
use std::net::Ipv4Addr;
use std::str::FromStr;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng as _, SeedableRng as _};
use tokio::time::Instant;

use crate::api::{Pod, PodPhase};
use crate::client::Target;
use crate::controller::log_notice;
use crate::etcd_watcher::{self, ResumableWatch, Update, WatchEvent, Watcher};
use crate::labels;
use crate::registry::{Registry, StorageError};

/// How long the node waits before retrying after etcd failed a write.
const RETRY_DELAY: Duration = Duration::from_secs(1);

/// How many times a claim re-reads a pod after losing a compare-and-swap to a writer
/// that left it unassigned (say, a label change) before trying again later.
const MAX_CLAIM_ATTEMPTS: usize = 3;

// ---------------------------------------------------------------------------------------
// Pod CIDRs and addresses

/// An IPv4 network in CIDR notation, e.g. `10.244.7.0/24`: a node's pod address range.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct Ipv4Cidr {
    network: Ipv4Addr,
    prefix_len: u8,
}

/// Why a string is not a usable pod CIDR.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid pod CIDR {input:?}: {reason}")]
pub struct ParseCidrError {
    pub input: String,
    pub reason: String,
}

impl Ipv4Cidr {
    /// Longest prefix that still leaves an address for a pod (network, gateway and
    /// broadcast addresses are never handed out).
    pub const MAX_PREFIX_LEN: u8 = 30;

    /// The network `network/prefix_len`.
    ///
    /// # Errors
    /// When the prefix is longer than [`Ipv4Cidr::MAX_PREFIX_LEN`] or `network` has
    /// host bits set.
    pub fn new(network: Ipv4Addr, prefix_len: u8) -> Result<Ipv4Cidr, String> {
        if prefix_len > Self::MAX_PREFIX_LEN {
            return Err(format!(
                "prefix length /{prefix_len} leaves no pod addresses (at most /{})",
                Self::MAX_PREFIX_LEN
            ));
        }
        let mask = u32::MAX
            .checked_shl(32 - u32::from(prefix_len))
            .unwrap_or(0);
        let bits = u32::from(network);
        if bits & !mask != 0 {
            return Err(format!(
                "host bits are set; did you mean {}/{prefix_len}?",
                Ipv4Addr::from(bits & mask)
            ));
        }
        Ok(Ipv4Cidr {
            network,
            prefix_len,
        })
    }

    /// The network address, e.g. `10.244.7.0`.
    pub fn network(&self) -> Ipv4Addr {
        self.network
    }

    pub fn prefix_len(&self) -> u8 {
        self.prefix_len
    }

    /// Addresses in the network, network and broadcast included (256 for a /24).
    fn size(&self) -> u64 {
        1u64 << (32 - u32::from(self.prefix_len))
    }

    /// The addresses pods get: all but the network, the gateway (network + 1) and the
    /// broadcast address, so `.2` to `.254` of a /24.
    pub fn pod_addresses(&self) -> u64 {
        self.size() - 3
    }

    /// Whether `ip` is one of the [`Ipv4Cidr::pod_addresses`].
    pub fn is_pod_address(&self, ip: Ipv4Addr) -> bool {
        self.offset_of(ip)
            .is_some_and(|offset| (2..self.size() - 1).contains(&offset))
    }

    /// `ip`'s distance from the network address, if it is inside the network.
    fn offset_of(&self, ip: Ipv4Addr) -> Option<u64> {
        let offset = u64::from(u32::from(ip)).checked_sub(u64::from(u32::from(self.network)))?;
        (offset < self.size()).then_some(offset)
    }

    fn at_offset(&self, offset: u64) -> Ipv4Addr {
        let offset = u32::try_from(offset).expect("offsets stay inside the network");
        Ipv4Addr::from(u32::from(self.network) + offset)
    }
}

impl fmt::Display for Ipv4Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.network, self.prefix_len)
    }
}

impl FromStr for Ipv4Cidr {
    type Err = ParseCidrError;

    fn from_str(input: &str) -> Result<Self, Self::Err> {
        let error = |reason: String| ParseCidrError {
            input: input.to_string(),
            reason,
        };
        let (address, prefix_len) = input
            .split_once('/')
            .ok_or_else(|| error("expected ADDRESS/PREFIX, e.g. 10.244.1.0/24".into()))?;
        let network: Ipv4Addr = address
            .parse()
            .map_err(|_| error(format!("{address:?} is not an IPv4 address")))?;
        let prefix_len: u8 = prefix_len
            .parse()
            .ok()
            .filter(|len| *len <= 32)
            .ok_or_else(|| error(format!("{prefix_len:?} is not a prefix length 0-32")))?;
        Ipv4Cidr::new(network, prefix_len).map_err(error)
    }
}

/// The pod CIDR of a node started without `--pod-cidr`: `10.244.N.0/24` with
/// `N = fnv1a32(node) % 254 + 1`.
///
/// FNV-1a rather than std's hasher because the result must not change between builds:
/// a restarted node has to find its pods' addresses inside its range. Different names
/// can collide (even odds by about 19 nodes); give nodes that share a cluster distinct
/// `--pod-cidr`s when that matters.
pub fn default_pod_cidr(node: &str) -> Ipv4Cidr {
    let mut hash: u32 = 0x811c_9dc5;
    for byte in node.bytes() {
        hash ^= u32::from(byte);
        hash = hash.wrapping_mul(0x0100_0193);
    }
    let n = u8::try_from(hash % 254 + 1).expect("1..=254 fits in u8");
    Ipv4Cidr::new(Ipv4Addr::new(10, 244, n, 0), 24).expect("a /24 with a zero host part")
}

/// Hands out the pod addresses of one CIDR, next-fit: the search resumes after the last
/// address handed out, so an address just freed is the last to be reused (as CNI's
/// host-local allocator does), which keeps a stale endpoint from pointing at a new pod.
#[derive(Debug, Clone)]
pub struct IpAllocator {
    cidr: Ipv4Cidr,
    used: HashSet<Ipv4Addr>,
    /// Offset from the network address where the next search starts.
    next: u64,
}

impl IpAllocator {
    pub fn new(cidr: Ipv4Cidr) -> IpAllocator {
        IpAllocator {
            cidr,
            used: HashSet::new(),
            next: 2,
        }
    }

    pub fn cidr(&self) -> Ipv4Cidr {
        self.cidr
    }

    /// Addresses currently handed out or reserved.
    pub fn in_use(&self) -> usize {
        self.used.len()
    }

    /// A free address, now marked used; `None` when the range is exhausted.
    pub fn allocate(&mut self) -> Option<Ipv4Addr> {
        let first = 2;
        let end = self.cidr.size() - 1; // the broadcast address
        let span = end - first;
        for step in 0..span {
            let offset = first + (self.next - first + step) % span;
            let ip = self.cidr.at_offset(offset);
            if self.used.insert(ip) {
                self.next = offset + 1;
                if self.next == end {
                    self.next = first;
                }
                return Some(ip);
            }
        }
        None
    }

    /// Marks `ip` used (an address a pod already holds). False, changing nothing, when
    /// `ip` is not a pod address of the range or is already used.
    pub fn reserve(&mut self, ip: Ipv4Addr) -> bool {
        self.cidr.is_pod_address(ip) && self.used.insert(ip)
    }

    /// Returns `ip` to the pool; false if it was not in use.
    pub fn release(&mut self, ip: Ipv4Addr) -> bool {
        self.used.remove(&ip)
    }
}

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
// The node's state: a pure core fed by watch events and write results

/// What a pod of this node waits for.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Action {
    /// Turn Running with an address (also repairs a Running pod whose address is
    /// missing, outside the range or taken by another pod).
    Start,
    /// Turn Failed (the simulated crash).
    Fail,
}

/// A pod whose `spec.host` is this node.
#[derive(Debug)]
struct OwnedPod {
    /// The newest version seen; older watch events are ignored.
    resource_version: i64,
    phase: PodPhase,
    /// The address reserved for it in the allocator.
    ip: Option<Ipv4Addr>,
    timer: Option<(Instant, Action)>,
    /// Whether the dice for failing it have been cast (once per Running pod and process).
    rolled: bool,
}

/// Whether a pod waits for a node: no host and Pending (or no status at all).
pub fn is_claimable(pod: &Pod) -> bool {
    pod.spec.host.is_empty() && pod.phase() == PodPhase::Pending
}

fn is_terminal(phase: PodPhase) -> bool {
    matches!(phase, PodPhase::Failed | PodPhase::Succeeded)
}

/// What one node knows: its pods, the unassigned pods it may claim, its address pool and
/// its timers. Updated only by the loop; no IO.
struct NodeState {
    config: KubeletConfig,
    allocator: IpAllocator,
    owned: HashMap<String, OwnedPod>,
    /// Claimable pods by `namespace/name`, latest version seen.
    unassigned: BTreeMap<String, Pod>,
    /// Due times of the owned pods' timers; an entry whose pod's timer has changed since
    /// is skipped when it comes up.
    timers: BinaryHeap<Reverse<(Instant, String)>>,
    /// Writes wait until then after etcd failed one.
    paused_until: Option<Instant>,
    /// Events of the first list still to come; the node writes nothing until it has
    /// seen them all, so it knows its pods (and their addresses) before it claims or
    /// starts anything.
    initial_list: InitialList,
    rng: StdRng,
}

#[derive(Debug, PartialEq, Eq)]
enum InitialList {
    NotStarted,
    Remaining(usize),
    Done,
}

impl NodeState {
    fn new(config: KubeletConfig, rng: StdRng) -> NodeState {
        NodeState {
            allocator: IpAllocator::new(config.pod_cidr),
            config,
            owned: HashMap::new(),
            unassigned: BTreeMap::new(),
            timers: BinaryHeap::new(),
            paused_until: None,
            initial_list: InitialList::NotStarted,
            rng,
        }
    }

    fn is_synced(&self) -> bool {
        self.initial_list == InitialList::Done
    }

    /// Pods of this node that are not Failed or Succeeded.
    fn active_pods(&self) -> usize {
        self.owned
            .values()
            .filter(|pod| !is_terminal(pod.phase))
            .count()
    }

    /// When the loop should next wake up to write something, if ever.
    fn next_wake(&self) -> Option<Instant> {
        if !self.is_synced() {
            return None;
        }
        if let Some(paused_until) = self.paused_until {
            return Some(paused_until);
        }
        self.timers.peek().map(|Reverse((due, _))| *due)
    }

    fn may_write(&mut self, now: Instant) -> bool {
        if self.paused_until.is_some_and(|until| until > now) {
            return false;
        }
        self.paused_until = None;
        self.is_synced()
    }

    fn pause(&mut self, now: Instant) {
        self.paused_until = Some(now + RETRY_DELAY);
    }

    fn observe_notice(&mut self, update: &Update<Pod>) {
        if let Update::Relisted {
            added,
            modified,
            deleted,
            ..
        } = update
        {
            if self.initial_list == InitialList::NotStarted {
                self.initial_list = InitialList::Remaining(added + modified + deleted);
                self.count_list_event(0);
            }
        }
    }

    fn count_list_event(&mut self, n: usize) {
        if let InitialList::Remaining(remaining) = &mut self.initial_list {
            *remaining = remaining.saturating_sub(n);
            if *remaining == 0 {
                self.initial_list = InitialList::Done;
                tracing::debug!(
                    node = %self.config.node,
                    pods = self.owned.len(),
                    addresses = self.allocator.in_use(),
                    "initial pod list seen"
                );
            }
        }
    }

    fn observe_event(&mut self, event: WatchEvent<Pod>, now: Instant) {
        match event {
            WatchEvent::Added(pod) | WatchEvent::Modified(pod) => self.observe(pod, now),
            WatchEvent::Deleted(pod) => {
                let key = pod.metadata.key();
                if !self.is_older(&key, &pod) {
                    self.unassigned.remove(&key);
                    self.forget(&key);
                }
            }
            WatchEvent::Error(_) => {}
        }
        self.count_list_event(1);
    }

    /// Whether `pod` is a version at or before the one the node already has.
    fn is_older(&self, key: &str, pod: &Pod) -> bool {
        let version = resource_version(pod);
        let known = match (self.owned.get(key), self.unassigned.get(key)) {
            (Some(owned), _) => Some(owned.resource_version),
            (None, Some(unassigned)) => Some(resource_version(unassigned)),
            (None, None) => None,
        };
        known.is_some_and(|known| version <= known)
    }

    /// Takes in a version of a pod read from the watch or returned by a write.
    fn observe(&mut self, pod: Pod, now: Instant) {
        let key = pod.metadata.key();
        if self.is_older(&key, &pod) {
            return;
        }
        if pod.spec.host == self.config.node {
            self.unassigned.remove(&key);
            self.observe_owned(key, &pod, now);
            return;
        }
        // Not (or no longer) ours.
        self.forget(&key);
        if is_claimable(&pod) {
            self.unassigned.insert(key, pod);
        } else {
            self.unassigned.remove(&key);
        }
    }

    fn observe_owned(&mut self, key: String, pod: &Pod, now: Instant) {
        let entry = self.owned.entry(key.clone()).or_insert(OwnedPod {
            resource_version: 0,
            phase: PodPhase::Pending,
            ip: None,
            timer: None,
            rolled: false,
        });
        entry.resource_version = resource_version(pod);
        entry.phase = pod.phase();
        let timer = if is_terminal(entry.phase) {
            if let Some(ip) = entry.ip.take() {
                self.allocator.release(ip);
            }
            None
        } else {
            // Keep the pool in step with the address the pod holds.
            let held = pod.pod_ip().and_then(|ip| ip.parse::<Ipv4Addr>().ok());
            if held != entry.ip {
                if let Some(ip) = entry.ip.take() {
                    self.allocator.release(ip);
                }
                entry.ip = held.filter(|ip| self.allocator.reserve(*ip));
            }
            match entry.phase {
                PodPhase::Pending => match entry.timer {
                    Some((_, Action::Start)) => entry.timer,
                    _ => Some((now + self.config.start_delay, Action::Start)),
                },
                PodPhase::Running if entry.ip.is_none() => {
                    tracing::debug!(pod = %key, ip = ?pod.pod_ip(), "running pod without a usable address; assigning one");
                    Some((now, Action::Start))
                }
                PodPhase::Running if !entry.rolled => {
                    entry.rolled = true;
                    let fail =
                        self.config.fail_rate > 0.0 && self.rng.gen_bool(self.config.fail_rate);
                    fail.then_some((now + self.config.fail_after, Action::Fail))
                }
                PodPhase::Running => entry.timer.filter(|(_, action)| *action == Action::Fail),
                // Unknown (or anything else): leave it alone.
                _ => None,
            }
        };
        let entry = self.owned.get_mut(&key).expect("inserted above");
        if timer != entry.timer {
            entry.timer = timer;
            if let Some((due, _)) = timer {
                self.timers.push(Reverse((due, key)));
            }
        }
    }

    /// Drops a pod that is gone or no longer ours, freeing its address.
    fn forget(&mut self, key: &str) {
        if let Some(pod) = self.owned.remove(key) {
            if let Some(ip) = pod.ip {
                self.allocator.release(ip);
            }
        }
    }

    /// Sets a pod's timer (replacing any other).
    fn schedule(&mut self, key: &str, due: Instant, action: Action) {
        if let Some(pod) = self.owned.get_mut(key) {
            pod.timer = Some((due, action));
            self.timers.push(Reverse((due, key.to_string())));
        }
    }

    /// The next pod whose timer is due by `now`, with its action; the timer is cleared.
    fn next_due(&mut self, now: Instant) -> Option<(String, Action)> {
        while let Some(Reverse((due, _))) = self.timers.peek() {
            if *due > now {
                return None;
            }
            let Reverse((due, key)) = self.timers.pop().expect("peeked");
            let Some(pod) = self.owned.get_mut(&key) else {
                continue;
            };
            match pod.timer {
                Some((when, action)) if when == due => {
                    pod.timer = None;
                    return Some((key, action));
                }
                _ => continue,
            }
        }
        None
    }

    /// The next unassigned pod to claim, taken out of the set; `None` at `max_pods`.
    ///
    /// Picked at random: nodes that see the same backlog in the same order would
    /// otherwise all race for the same pod, and the one a round trip ahead would win
    /// every race and take every pod.
    fn next_claim(&mut self) -> Option<Pod> {
        if self.unassigned.is_empty() || self.active_pods() >= self.config.max_pods {
            return None;
        }
        let index = self.rng.gen_range(0..self.unassigned.len());
        let key = self.unassigned.keys().nth(index).cloned()?;
        self.unassigned.remove(&key)
    }
}

fn resource_version(pod: &Pod) -> i64 {
    pod.metadata.resource_version.map_or(0, |rv| rv.0)
}

// ---------------------------------------------------------------------------------------
// The loop

/// One simulated node (2014's kubelet plus the scheduler's binding, reduced to what the
/// controllers need).
pub struct Kubelet {
    registry: Registry,
    config: KubeletConfig,
    rng: StdRng,
}

/// What woke the loop.
enum Trigger {
    Timer,
    /// Boxed: a pod is large and timers fire often.
    Watch(Box<Update<Pod>>),
}

/// How a claim ended.
enum Claim {
    /// This node owns the pod now (the stored version).
    Won(Pod),
    /// Someone else changed it first; the current version, no longer claimable.
    Lost(Pod),
    /// Deleted meanwhile.
    Gone,
    /// Still unassigned after several conflicts; try later.
    Contended,
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
    /// `fail_after`.
    ///
    /// Shutdown contract: once `shutdown` resolves no new write starts; a write in flight
    /// finishes (bounded by the registry's request timeout), the watch is dropped and
    /// `run` returns `Ok`. Timers do not survive a restart: the next run starts its
    /// Pending pods after `start_delay` again and casts the dice again for Running ones.
    ///
    /// # Errors
    /// Only when the pod watch task dies; etcd failures are retried.
    pub async fn run(
        self,
        watcher: Watcher,
        shutdown: impl Future<Output = ()> + Send,
    ) -> anyhow::Result<()> {
        let pod_events = watcher.resumable_list::<Pod>(None, "", etcd_watcher::everything())?;
        tracing::info!(
            node = %self.config.node,
            pod_cidr = %self.config.pod_cidr,
            max_pods = self.config.max_pods,
            "kubelet starting"
        );
        let node = self.config.node.clone();
        let result = self.run_loop(pod_events, shutdown).await;
        tracing::info!(%node, "kubelet stopped");
        result
    }

    async fn run_loop(
        self,
        mut pod_events: ResumableWatch<Pod>,
        shutdown: impl Future<Output = ()> + Send,
    ) -> anyhow::Result<()> {
        let mut state = NodeState::new(self.config.clone(), self.rng.clone());
        tokio::pin!(shutdown);
        loop {
            let wake = state.next_wake();
            let trigger = tokio::select! {
                biased;
                _ = &mut shutdown => break,
                _ = tokio::time::sleep_until(wake.unwrap_or_else(Instant::now)), if wake.is_some() => Trigger::Timer,
                // Cancel-safe: the watch's work in flight lives in the stream.
                update = pod_events.next() => Trigger::Watch(Box::new(update)),
            };
            match trigger {
                Trigger::Timer => {}
                Trigger::Watch(update) => match *update {
                    Update::Event(event, _) => state.observe_event(event, Instant::now()),
                    notice => {
                        log_notice("pods", &notice);
                        state.observe_notice(&notice);
                    }
                },
            }
            self.act(&mut state).await;
        }
        Ok(())
    }

    /// Does what is due: timers first (they only shrink the node's load or keep it),
    /// then claims while there is room. Stops at the first etcd failure and pauses
    /// writes for a moment; what was not done stays due.
    async fn act(&self, state: &mut NodeState) {
        let now = Instant::now();
        if !state.may_write(now) {
            return;
        }
        while let Some((key, action)) = state.next_due(now) {
            let result = match action {
                Action::Start => self.start(state, &key).await,
                Action::Fail => self.fail(state, &key).await,
            };
            if let Err(e) = result {
                tracing::debug!(pod = %key, ?action, error = %e, "write failed; retrying");
                state.schedule(&key, now + RETRY_DELAY, action);
                state.pause(now);
                return;
            }
        }
        while let Some(pod) = state.next_claim() {
            let key = pod.metadata.key();
            match self.claim(pod.clone()).await {
                Ok(Claim::Won(stored)) => {
                    tracing::info!(pod = %key, node = %self.config.node, "claimed pod");
                    state.observe(stored, now);
                }
                Ok(Claim::Lost(current)) => {
                    tracing::debug!(pod = %key, host = %current.spec.host, "pod taken by another writer");
                    state.observe(current, now);
                }
                Ok(Claim::Gone) => {}
                Ok(Claim::Contended) => {
                    state.unassigned.insert(key, pod);
                    state.pause(now);
                    return;
                }
                Err(e) => {
                    tracing::debug!(pod = %key, error = %e, "claim failed; retrying");
                    state.unassigned.insert(key, pod);
                    state.pause(now);
                    return;
                }
            }
        }
    }

    /// Binds an unassigned pod to this node: `spec.host` and `status.host`, written only
    /// if the pod is still at the version read (so exactly one node wins).
    async fn claim(&self, mut pod: Pod) -> Result<Claim, StorageError> {
        for _ in 0..MAX_CLAIM_ATTEMPTS {
            let mut claimed = pod.clone();
            claimed.spec.host = self.config.node.clone();
            claimed.status.get_or_insert_with(Default::default).host = self.config.node.clone();
            match self.registry.update(&claimed).await {
                Ok(stored) => return Ok(Claim::Won(stored)),
                Err(StorageError::Conflict { .. }) => {}
                Err(e) => return Err(e),
            }
            // Another node (or writer) got there first: look again.
            let meta = &pod.metadata;
            match self.registry.get::<Pod>(&meta.namespace, &meta.name).await {
                Ok(current) if is_claimable(&current) => pod = current,
                Ok(current) => return Ok(Claim::Lost(current)),
                Err(StorageError::NotFound { .. }) => return Ok(Claim::Gone),
                Err(e) => return Err(e),
            }
        }
        Ok(Claim::Contended)
    }

    /// Turns an owned pod Running with an address from the node's range (the one it
    /// holds, if any). Returns an error only for a failure worth retrying.
    async fn start(&self, state: &mut NodeState, key: &str) -> Result<(), StorageError> {
        let Some(owned) = state.owned.get(key) else {
            return Ok(());
        };
        let (ip, fresh) = match owned.ip {
            Some(ip) => (ip, false),
            None => match state.allocator.allocate() {
                Some(ip) => (ip, true),
                None => {
                    tracing::warn!(pod = %key, pod_cidr = %state.allocator.cidr(), "no free pod address; the pod stays Pending until one is freed");
                    let now = Instant::now();
                    state.schedule(key, now + self.config.start_delay, Action::Start);
                    return Ok(());
                }
            },
        };
        let node = &self.config.node;
        let (namespace, name) = split_key(key);
        let result = self
            .registry
            .guaranteed_update::<Pod, _>(namespace, name, |mut pod| {
                ensure_owned(&pod, node)?;
                anyhow::ensure!(
                    matches!(pod.phase(), PodPhase::Pending | PodPhase::Running),
                    "phase is {}",
                    pod.phase()
                );
                let status = pod.status.get_or_insert_with(Default::default);
                status.phase = PodPhase::Running;
                status.host = node.clone();
                status.pod_ip = ip.to_string();
                Ok(pod)
            })
            .await;
        let now = Instant::now();
        match result {
            Ok(stored) => {
                tracing::info!(pod = %key, %ip, "pod running");
                if let Some(owned) = state.owned.get_mut(key) {
                    owned.ip = Some(ip);
                }
                state.observe(stored, now);
                Ok(())
            }
            Err(e) => {
                if fresh {
                    state.allocator.release(ip);
                }
                match e {
                    StorageError::NotFound { .. } => {
                        state.forget(key);
                        Ok(())
                    }
                    // Changed under us in a way that makes starting wrong; the watch
                    // brings the new version.
                    StorageError::Update { source, .. } => {
                        tracing::debug!(pod = %key, reason = %source, "not starting pod");
                        Ok(())
                    }
                    e => Err(e),
                }
            }
        }
    }

    /// The simulated crash: an owned Running pod turns Failed and gives its address back
    /// (`status.podIP` is cleared, since the address may go to another pod).
    async fn fail(&self, state: &mut NodeState, key: &str) -> Result<(), StorageError> {
        let node = &self.config.node;
        let (namespace, name) = split_key(key);
        let result = self
            .registry
            .guaranteed_update::<Pod, _>(namespace, name, |mut pod| {
                ensure_owned(&pod, node)?;
                anyhow::ensure!(pod.phase() == PodPhase::Running, "phase is {}", pod.phase());
                let status = pod.status.get_or_insert_with(Default::default);
                status.phase = PodPhase::Failed;
                status.pod_ip.clear();
                Ok(pod)
            })
            .await;
        match result {
            Ok(stored) => {
                tracing::info!(pod = %key, "pod failed (simulated)");
                state.observe(stored, Instant::now());
                Ok(())
            }
            Err(StorageError::NotFound { .. }) => {
                state.forget(key);
                Ok(())
            }
            Err(StorageError::Update { source, .. }) => {
                tracing::debug!(pod = %key, reason = %source, "not failing pod");
                Ok(())
            }
            Err(e) => Err(e),
        }
    }
}

/// `kcm kubelet`: connects to `target` and runs one node until `shutdown` resolves.
///
/// # Errors
/// When etcd is unreachable at start or the prefix is invalid.
pub async fn run(
    target: &Target,
    config: KubeletConfig,
    shutdown: impl Future<Output = ()> + Send,
) -> anyhow::Result<()> {
    let (client, registry) = target.connect().await?;
    let watcher = Watcher::new(&client, registry.clone());
    Kubelet::new(registry, config)?.run(watcher, shutdown).await
}

fn ensure_owned(pod: &Pod, node: &str) -> anyhow::Result<()> {
    anyhow::ensure!(
        pod.spec.host == node,
        "assigned to {:?}, not to this node",
        pod.spec.host
    );
    Ok(())
}

fn split_key(key: &str) -> (&str, &str) {
    key.split_once('/').expect("pod keys are namespace/name")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{ObjectMeta, PodStatus, ResourceVersion};

    #[track_caller]
    fn check_parse(input: &str, expected: Result<&str, &str>) {
        match (input.parse::<Ipv4Cidr>(), expected) {
            (Ok(cidr), Ok(display)) => assert_eq!(cidr.to_string(), display),
            (Err(e), Err(part)) => {
                let message = e.to_string();
                assert!(
                    message.contains(part),
                    "{message:?} should contain {part:?}"
                );
                assert!(message.starts_with(&format!("invalid pod CIDR {input:?}")));
            }
            (got, want) => panic!("{input:?}: got {got:?}, want {want:?}"),
        }
    }

    #[test]
    fn cidr_parsing() {
        check_parse("10.244.7.0/24", Ok("10.244.7.0/24"));
        check_parse("10.0.0.0/8", Ok("10.0.0.0/8"));
        check_parse("192.168.1.4/30", Ok("192.168.1.4/30"));
        check_parse("10.244.7.5/24", Err("did you mean 10.244.7.0/24?"));
        check_parse("10.244.7.0", Err("expected ADDRESS/PREFIX"));
        check_parse("10.244.7/24", Err("not an IPv4 address"));
        check_parse("fd00::/64", Err("not an IPv4 address"));
        check_parse("10.244.7.0/33", Err("not a prefix length"));
        check_parse("10.244.7.0/x", Err("not a prefix length"));
        check_parse("10.244.7.0/31", Err("leaves no pod addresses"));
    }

    #[test]
    fn pod_addresses_skip_network_gateway_and_broadcast() {
        let cidr: Ipv4Cidr = "10.244.7.0/24".parse().unwrap();
        assert_eq!(cidr.pod_addresses(), 253);
        for (ip, expected) in [
            ("10.244.7.0", false),
            ("10.244.7.1", false),
            ("10.244.7.2", true),
            ("10.244.7.254", true),
            ("10.244.7.255", false),
            ("10.244.8.2", false),
            ("10.244.6.2", false),
        ] {
            assert_eq!(cidr.is_pod_address(ip.parse().unwrap()), expected, "{ip}");
        }
    }

    #[test]
    fn allocation_is_next_fit_over_the_whole_range() {
        let cidr: Ipv4Cidr = "10.244.7.0/24".parse().unwrap();
        let mut allocator = IpAllocator::new(cidr);
        let first: Vec<String> = (0..3)
            .map(|_| allocator.allocate().unwrap().to_string())
            .collect();
        assert_eq!(first, ["10.244.7.2", "10.244.7.3", "10.244.7.4"]);
        // A freed address is not reused while fresh ones remain.
        assert!(allocator.release("10.244.7.3".parse().unwrap()));
        assert!(!allocator.release("10.244.7.3".parse().unwrap()));
        assert_eq!(allocator.allocate().unwrap().to_string(), "10.244.7.5");
        let mut all: HashSet<Ipv4Addr> = HashSet::new();
        while let Some(ip) = allocator.allocate() {
            assert!(cidr.is_pod_address(ip), "{ip}");
            assert!(all.insert(ip), "{ip} handed out twice");
        }
        // 253 addresses, 3 of them held: the rest, the freed .3 included.
        assert_eq!(all.len(), 250);
        assert_eq!(allocator.in_use(), 253);
        assert!(all.contains(&"10.244.7.3".parse().unwrap()));
        // Wraps around to what is freed.
        allocator.release("10.244.7.100".parse().unwrap());
        assert_eq!(allocator.allocate().unwrap().to_string(), "10.244.7.100");
        assert_eq!(allocator.allocate(), None);
    }

    #[test]
    fn reserve_takes_only_free_pod_addresses_of_the_range() {
        let mut allocator = IpAllocator::new("10.244.7.0/24".parse().unwrap());
        assert!(allocator.reserve("10.244.7.2".parse().unwrap()));
        assert!(!allocator.reserve("10.244.7.2".parse().unwrap()));
        assert!(!allocator.reserve("10.244.7.1".parse().unwrap()));
        assert!(!allocator.reserve("10.244.8.9".parse().unwrap()));
        assert_eq!(allocator.allocate().unwrap().to_string(), "10.244.7.3");
    }

    #[test]
    fn smallest_range_has_one_address() {
        let mut allocator = IpAllocator::new("192.168.1.4/30".parse().unwrap());
        assert_eq!(allocator.allocate().unwrap().to_string(), "192.168.1.6");
        assert_eq!(allocator.allocate(), None);
    }

    #[test]
    fn default_cidr_is_a_stable_slash_24_of_10_244() {
        // Pinned values: a change of hash would move every restarted node's range.
        assert_eq!(default_pod_cidr("node-a").to_string(), "10.244.52.0/24");
        assert_eq!(default_pod_cidr("node-b").to_string(), "10.244.209.0/24");
        assert_eq!(default_pod_cidr("").to_string(), "10.244.132.0/24");
        for i in 0..2000 {
            let cidr = default_pod_cidr(&format!("node-{i}"));
            let [a, b, n, host] = cidr.network().octets();
            assert_eq!((a, b, host, cidr.prefix_len()), (10, 244, 0, 24));
            assert!((1..=254).contains(&n), "{cidr}");
        }
    }

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

    // The node's state machine, without etcd.

    fn pod(name: &str, rv: i64, host: &str, phase: Option<PodPhase>, ip: &str) -> Pod {
        let mut pod = Pod {
            metadata: ObjectMeta::named("ns", name),
            ..Pod::default()
        };
        pod.metadata.resource_version = Some(ResourceVersion(rv));
        pod.spec.host = host.into();
        pod.status = phase.map(|phase| PodStatus {
            phase,
            host: host.into(),
            pod_ip: ip.into(),
            ..PodStatus::default()
        });
        pod
    }

    fn state(config: KubeletConfig) -> NodeState {
        let mut state = NodeState::new(
            KubeletConfig {
                pod_cidr: "10.0.0.0/24".parse().unwrap(),
                ..config
            },
            StdRng::seed_from_u64(1),
        );
        state.observe_notice(&Update::Relisted {
            revision: 1,
            added: 0,
            modified: 0,
            deleted: 0,
        });
        state
    }

    #[test]
    fn writes_wait_for_the_whole_initial_list() {
        let mut state = NodeState::new(KubeletConfig::new("n"), StdRng::seed_from_u64(1));
        let now = Instant::now();
        assert!(!state.may_write(now));
        state.observe_notice(&Update::Relisted {
            revision: 9,
            added: 2,
            modified: 0,
            deleted: 0,
        });
        state.observe_event(WatchEvent::Added(pod("a", 3, "", None, "")), now);
        assert!(!state.may_write(now) && state.next_wake().is_none());
        state.observe_event(WatchEvent::Added(pod("b", 5, "n", None, "")), now);
        assert!(state.may_write(now));
        assert!(state.next_wake().is_some());
    }

    #[test]
    fn claims_stop_at_max_pods_and_resume_when_a_pod_ends() {
        let mut state = state(KubeletConfig {
            max_pods: 2,
            ..KubeletConfig::new("n")
        });
        let now = Instant::now();
        state.observe(
            pod("mine", 2, "n", Some(PodPhase::Running), "10.0.0.9"),
            now,
        );
        state.observe(pod("other", 3, "m", None, ""), now);
        state.observe(pod("running", 4, "", Some(PodPhase::Running), ""), now);
        for (name, rv) in [("a", 5), ("b", 6)] {
            state.observe(pod(name, rv, "", None, ""), now);
        }
        let first = state.next_claim().unwrap();
        let (name, rv) = (first.metadata.name.clone(), resource_version(&first));
        assert!(["a", "b"].contains(&name.as_str()), "{name}");
        state.observe(pod(&name, rv + 10, "n", Some(PodPhase::Pending), ""), now);
        assert!(state.next_claim().is_none(), "at max_pods");
        state.observe(pod(&name, rv + 11, "n", Some(PodPhase::Failed), ""), now);
        let second = state.next_claim().unwrap();
        assert_ne!(second.metadata.name, name);
        assert!(state.next_claim().is_none(), "nothing else is claimable");
    }

    #[test]
    fn addresses_held_are_reserved_and_duplicates_repaired() {
        let mut state = state(KubeletConfig::new("n"));
        let now = Instant::now();
        state.observe(pod("a", 2, "n", Some(PodPhase::Running), "10.0.0.2"), now);
        state.observe(pod("b", 3, "n", Some(PodPhase::Running), "10.0.0.2"), now);
        state.observe(
            pod("c", 4, "n", Some(PodPhase::Running), "192.168.0.1"),
            now,
        );
        assert_eq!(state.allocator.in_use(), 1);
        let mut due: Vec<_> = std::iter::from_fn(|| state.next_due(now)).collect();
        due.sort_by(|x, y| x.0.cmp(&y.0));
        assert_eq!(
            due,
            [
                ("ns/b".to_string(), Action::Start),
                ("ns/c".to_string(), Action::Start)
            ]
        );
        // Failing frees the address; an older event does not bring it back.
        state.observe(pod("a", 5, "n", Some(PodPhase::Failed), ""), now);
        assert_eq!(state.allocator.in_use(), 0);
        state.observe(pod("a", 2, "n", Some(PodPhase::Running), "10.0.0.2"), now);
        assert_eq!(state.allocator.in_use(), 0);
    }

    #[test]
    fn pending_pods_start_after_the_delay_and_deleted_ones_never() {
        let delay = Duration::from_millis(500);
        let mut state = state(KubeletConfig {
            start_delay: delay,
            ..KubeletConfig::new("n")
        });
        let now = Instant::now();
        state.observe(pod("a", 2, "n", Some(PodPhase::Pending), ""), now);
        state.observe(pod("b", 3, "n", None, ""), now);
        // A later version does not push the start back.
        state.observe(
            pod("a", 4, "n", Some(PodPhase::Pending), ""),
            now + delay / 2,
        );
        assert_eq!(state.next_wake(), Some(now + delay));
        assert_eq!(state.next_due(now + delay / 2), None);
        state.observe_event(WatchEvent::Deleted(pod("b", 5, "n", None, "")), now);
        assert_eq!(
            state.next_due(now + delay),
            Some(("ns/a".to_string(), Action::Start))
        );
        assert_eq!(state.next_due(now + delay * 2), None);
    }

    #[test]
    fn fail_rate_one_fails_every_running_pod_once() {
        let after = Duration::from_secs(5);
        let mut state = state(KubeletConfig {
            fail_rate: 1.0,
            fail_after: after,
            ..KubeletConfig::new("n")
        });
        let now = Instant::now();
        state.observe(pod("a", 2, "n", Some(PodPhase::Running), "10.0.0.2"), now);
        state.observe(
            pod("a", 3, "n", Some(PodPhase::Running), "10.0.0.2"),
            now + after,
        );
        assert_eq!(state.next_due(now + after - Duration::from_millis(1)), None);
        assert_eq!(
            state.next_due(now + after),
            Some(("ns/a".to_string(), Action::Fail))
        );
        state.observe(
            pod("a", 4, "n", Some(PodPhase::Running), "10.0.0.2"),
            now + after,
        );
        assert_eq!(
            state.next_due(now + after * 3),
            None,
            "the dice are cast once"
        );
    }
}
