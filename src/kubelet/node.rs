//! The node's state: a pure core fed by watch events and write results. It knows the
//! node's pods, the unassigned pods it may claim, its address pool and its timers, and
//! says what is due; the loop in the parent module does the writes. No IO.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap};
use std::net::Ipv4Addr;
use std::time::SystemTime;

use rand::rngs::StdRng;
use rand::Rng as _;
use tokio::time::Instant;

use super::containers::{
    crash_backoff, pull_reason, ready_delay, remaining, restart_count, ImageClass, ERR_IMAGE_PULL,
    IMAGE_PULL_BACK_OFF, PULL_RETRY,
};
use super::ipam::IpAllocator;
use super::{KubeletConfig, RETRY_DELAY};
use crate::api::{Pod, PodPhase};
use crate::etcd_watcher::{Update, WatchEvent};

/// What a pod of this node waits for.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(super) enum Action {
    /// Turn Running with an address (also repairs a Running pod whose address is
    /// missing, outside the range or taken by another pod).
    Start,
    /// Turn Failed (the simulated crash).
    Fail,
    /// Report a failed image pull: `ErrImagePull`, then `ImagePullBackOff`.
    PullFail,
    /// The ready delay has passed: Ready=True.
    Ready,
    /// A crash-looping container restarts.
    Restart,
    /// The pod is being deleted (`deletionTimestamp`): its containers have stopped, so
    /// the pod is deleted.
    Stop,
}

/// How long a terminating pod's containers take to stop (simulated): well under any
/// grace period (at least a second).
pub(super) const STOP_TIME: std::time::Duration = std::time::Duration::from_millis(500);

/// A pod whose `spec.host` is this node.
#[derive(Debug)]
pub(super) struct OwnedPod {
    /// The newest version seen; older watch events are ignored.
    resource_version: i64,
    phase: PodPhase,
    /// The address reserved for it in the allocator.
    pub(super) ip: Option<Ipv4Addr>,
    timer: Option<(Instant, Action)>,
    /// Whether the dice for failing it have been cast (once per Running pod and process).
    rolled: bool,
    /// Its `metadata.uid` and first container's name, for the events about it.
    pub(super) uid: Box<str>,
    pub(super) container: Box<str>,
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
pub(super) struct NodeState {
    config: KubeletConfig,
    pub(super) allocator: IpAllocator,
    pub(super) owned: HashMap<String, OwnedPod>,
    /// Claimable pods by `namespace/name`, latest version seen.
    pub(super) unassigned: BTreeMap<String, Pod>,
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
    /// The node was at `max_pods` with unassigned pods waiting, when last asked.
    full: bool,
    /// Whether the node's own Node is cordoned (`spec.unschedulable`), as its watch last
    /// showed it; `None` until that watch has listed. The node claims only when it knows
    /// it is not.
    cordoned: Option<bool>,
}

/// The node's room, when it changes: full (at `max_pods` while unassigned pods wait) or
/// no longer.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Room {
    Full { max_pods: usize, waiting: usize },
    Again,
}

#[derive(Debug, PartialEq, Eq)]
enum InitialList {
    NotStarted,
    Remaining(usize),
    Done,
}

impl NodeState {
    pub(super) fn new(config: KubeletConfig, rng: StdRng) -> NodeState {
        NodeState {
            allocator: IpAllocator::new(config.pod_cidr),
            config,
            owned: HashMap::new(),
            unassigned: BTreeMap::new(),
            timers: BinaryHeap::new(),
            paused_until: None,
            initial_list: InitialList::NotStarted,
            rng,
            full: false,
            cordoned: None,
        }
    }

    /// Takes in whether the node's own Node is cordoned (`None`: not known yet); `true`
    /// when that changed from what was known.
    pub(super) fn set_cordoned(&mut self, cordoned: Option<bool>) -> bool {
        let changed = self.cordoned.is_some() && cordoned.is_some() && cordoned != self.cordoned;
        self.cordoned = cordoned;
        changed
    }

    pub(super) fn is_synced(&self) -> bool {
        self.initial_list == InitialList::Done
    }

    /// Pods of this node that are not Failed or Succeeded.
    pub(super) fn active_pods(&self) -> usize {
        self.owned
            .values()
            .filter(|pod| !is_terminal(pod.phase))
            .count()
    }

    /// When the loop should next wake up to write something, if ever.
    pub(super) fn next_wake(&self) -> Option<Instant> {
        if !self.is_synced() {
            return None;
        }
        if let Some(paused_until) = self.paused_until {
            return Some(paused_until);
        }
        self.timers.peek().map(|Reverse((due, _))| *due)
    }

    pub(super) fn may_write(&mut self, now: Instant) -> bool {
        if self.paused_until.is_some_and(|until| until > now) {
            return false;
        }
        self.paused_until = None;
        self.is_synced()
    }

    pub(super) fn pause(&mut self, now: Instant) {
        self.paused_until = Some(now + RETRY_DELAY);
    }

    pub(super) fn observe_notice(&mut self, update: &Update<Pod>) {
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

    pub(super) fn count_list_event(&mut self, n: usize) {
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

    pub(super) fn observe_event(&mut self, event: WatchEvent<Pod>, now: Instant) {
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
    pub(super) fn is_older(&self, key: &str, pod: &Pod) -> bool {
        let version = resource_version(pod);
        let known = match (self.owned.get(key), self.unassigned.get(key)) {
            (Some(owned), _) => Some(owned.resource_version),
            (None, Some(unassigned)) => Some(resource_version(unassigned)),
            (None, None) => None,
        };
        known.is_some_and(|known| version <= known)
    }

    /// Takes in a version of a pod read from the watch or returned by a write.
    pub(super) fn observe(&mut self, pod: Pod, now: Instant) {
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

    pub(super) fn observe_owned(&mut self, key: String, pod: &Pod, now: Instant) {
        let entry = self.owned.entry(key.clone()).or_insert(OwnedPod {
            resource_version: 0,
            phase: PodPhase::Pending,
            ip: None,
            timer: None,
            rolled: false,
            uid: pod.metadata.uid.as_str().into(),
            container: super::first_container(pod).into(),
        });
        entry.resource_version = resource_version(pod);
        entry.phase = pod.phase();
        let timer = if pod.metadata.deletion_timestamp.is_some() {
            // Being deleted: stop the containers, then delete the pod (`kubelet.go`
            // `HandlePodRemoves`, then the status manager's final delete).
            match entry.timer {
                Some((_, Action::Stop)) => entry.timer,
                _ => Some((now + STOP_TIME, Action::Stop)),
            }
        } else if is_terminal(entry.phase) {
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
            let class = self.config.images.pod_class(pod);
            let current = entry.timer;
            let keep = |action: Action, due: Instant| match current {
                Some((_, a)) if a == action => current,
                _ => Some((due, action)),
            };
            match entry.phase {
                PodPhase::Pending if class == ImageClass::PullFail => {
                    match pull_reason(pod, &self.config.images) {
                        Some(IMAGE_PULL_BACK_OFF) => None,
                        Some(ERR_IMAGE_PULL) => keep(Action::PullFail, now + PULL_RETRY),
                        _ => keep(Action::PullFail, now + self.config.start_delay),
                    }
                }
                PodPhase::Pending => keep(Action::Start, now + self.config.start_delay),
                PodPhase::Running if entry.ip.is_none() => {
                    tracing::debug!(pod = %key, ip = ?pod.pod_ip(), "running pod without a usable address; assigning one");
                    Some((now, Action::Start))
                }
                // Waiting out the ready delay (after a restart of the node, counted from
                // when the pod turned Running).
                PodPhase::Running
                    if class == ImageClass::Normal && pod.ready_condition() == Some(false) =>
                {
                    let delay = ready_delay(pod, self.config.ready_delay);
                    let since = pod
                        .status
                        .as_ref()
                        .and_then(|s| s.ready_condition())
                        .and_then(|c| c.last_transition_time.as_deref());
                    keep(
                        Action::Ready,
                        now + remaining(since, delay, SystemTime::now()),
                    )
                }
                PodPhase::Running
                    if class == ImageClass::Crash && pod.ready_condition().is_some() =>
                {
                    keep(Action::Restart, now + crash_backoff(restart_count(pod)))
                }
                PodPhase::Running if !entry.rolled => {
                    entry.rolled = true;
                    let fail =
                        self.config.fail_rate > 0.0 && self.rng.gen_bool(self.config.fail_rate);
                    fail.then_some((now + self.config.fail_after, Action::Fail))
                }
                PodPhase::Running => current.filter(|(_, action)| *action == Action::Fail),
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

    /// The resourceVersion of the newest version seen of an owned pod.
    /// The pod `key` of this node, if it holds it.
    pub(super) fn owned_pod(&self, key: &str) -> Option<&OwnedPod> {
        self.owned.get(key)
    }

    pub(super) fn owned_revision(&self, key: &str) -> Option<i64> {
        self.owned.get(key).map(|pod| pod.resource_version)
    }

    /// Drops a pod that is gone or no longer ours, freeing its address.
    pub(super) fn forget(&mut self, key: &str) {
        if let Some(pod) = self.owned.remove(key) {
            if let Some(ip) = pod.ip {
                self.allocator.release(ip);
            }
        }
    }

    /// Sets a pod's timer (replacing any other).
    pub(super) fn schedule(&mut self, key: &str, due: Instant, action: Action) {
        if let Some(pod) = self.owned.get_mut(key) {
            pod.timer = Some((due, action));
            self.timers.push(Reverse((due, key.to_string())));
        }
    }

    /// The next pod whose timer is due by `now`, with its action; the timer is cleared.
    pub(super) fn next_due(&mut self, now: Instant) -> Option<(String, Action)> {
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

    /// Whether the node just became full (at `max_pods` with unassigned pods waiting)
    /// or stopped being full (room, or no pod waiting) since the last call; `None` when that did not change. A pod
    /// nobody has room for stays Pending without a host, so the kubelet says why once.
    pub(super) fn room_change(&mut self) -> Option<Room> {
        let full = !self.unassigned.is_empty() && self.active_pods() >= self.config.max_pods;
        if full == self.full {
            return None;
        }
        self.full = full;
        Some(if full {
            Room::Full {
                max_pods: self.config.max_pods,
                waiting: self.unassigned.len(),
            }
        } else {
            Room::Again
        })
    }

    /// The next unassigned pod to claim, taken out of the set; `None` at `max_pods`, while
    /// the node is cordoned or not known not to be, and always when a scheduler binds the
    /// pods (`claim_unassigned` off).
    ///
    /// Picked at random: nodes that see the same backlog in the same order would
    /// otherwise all race for the same pod, and the one a round trip ahead would win
    /// every race and take every pod.
    pub(super) fn next_claim(&mut self) -> Option<Pod> {
        if !self.config.claim_unassigned
            || self.cordoned != Some(false)
            || self.unassigned.is_empty()
            || self.active_pods() >= self.config.max_pods
        {
            return None;
        }
        let index = self.rng.gen_range(0..self.unassigned.len());
        let key = self.unassigned.keys().nth(index).cloned()?;
        self.unassigned.remove(&key)
    }

    /// Up to `most` pods to claim at once, as [`NodeState::next_claim`] picks them, and
    /// never more than the room left under `max_pods` (claims in flight are not owned
    /// pods yet, so the room is counted before any is sent).
    pub(super) fn next_claims(&mut self, most: usize) -> Vec<Pod> {
        let room = self.config.max_pods.saturating_sub(self.active_pods());
        std::iter::from_fn(|| self.next_claim())
            .take(room.min(most))
            .collect()
    }
}

fn resource_version(pod: &Pod) -> i64 {
    pod.metadata.resource_version.map_or(0, |rv| rv.0)
}

#[cfg(test)]
mod tests {
    use super::super::ImageRules;
    use super::*;
    use crate::api::{ObjectMeta, PodStatus, ResourceVersion};
    use rand::SeedableRng as _;
    use std::time::Duration;

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
        state.set_cordoned(Some(false));
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
        assert_eq!(
            state.room_change(),
            Some(Room::Full {
                max_pods: 2,
                waiting: 1
            })
        );
        assert_eq!(state.room_change(), None, "said once");
        state.observe(pod(&name, rv + 11, "n", Some(PodPhase::Failed), ""), now);
        assert_eq!(state.room_change(), Some(Room::Again));
        let second = state.next_claim().unwrap();
        assert_ne!(second.metadata.name, name);
        assert!(state.next_claim().is_none(), "nothing else is claimable");
    }

    #[test]
    fn claims_sent_together_never_pass_max_pods() {
        let mut state = state(KubeletConfig {
            max_pods: 3,
            ..KubeletConfig::new("n")
        });
        let now = Instant::now();
        state.observe(
            pod("mine", 2, "n", Some(PodPhase::Running), "10.0.0.9"),
            now,
        );
        for (i, name) in ["a", "b", "c", "d", "e"].into_iter().enumerate() {
            state.observe(pod(name, 3 + i as i64, "", None, ""), now);
        }
        assert_eq!(state.next_claims(32).len(), 2, "the room under max_pods");
        assert_eq!(state.unassigned.len(), 3, "the rest wait");
        assert!(state.next_claims(32).len() <= 2);
        let mut state = state_unknown_node();
        state.observe(pod("f", 3, "", None, ""), now);
        assert!(
            state.next_claims(32).is_empty(),
            "not known not to be cordoned"
        );
    }

    #[test]
    fn a_cordoned_node_claims_nothing_until_uncordoned() {
        let mut state = state(KubeletConfig::new("n"));
        let now = Instant::now();
        state.observe(
            pod("mine", 2, "n", Some(PodPhase::Running), "10.0.0.9"),
            now,
        );
        state.observe(pod("a", 3, "", None, ""), now);
        assert!(state.set_cordoned(Some(true)), "a change");
        assert!(state.next_claim().is_none(), "cordoned");
        assert!(!state.set_cordoned(Some(true)), "no change");
        assert!(state.owned.contains_key("ns/mine"), "its pods stay");
        assert!(state.set_cordoned(Some(false)));
        assert_eq!(state.next_claim().unwrap().metadata.name, "a");
        // Not known (its Node not listed yet): nothing is claimed either.
        let mut state = state_unknown_node();
        state.observe(pod("b", 3, "", None, ""), now);
        assert!(state.next_claim().is_none());
        assert!(
            !state.set_cordoned(Some(false)),
            "first known: not a change"
        );
        assert_eq!(state.next_claim().unwrap().metadata.name, "b");
    }

    fn state_unknown_node() -> NodeState {
        let mut state = state(KubeletConfig::new("n"));
        state.set_cordoned(None);
        state
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

    #[test]
    fn failing_images_get_timers_by_their_reported_state() {
        use super::super::containers::{waiting_reason, Step, CRASH_LOOP_BACK_OFF};
        use crate::api::Container;
        let delay = Duration::from_millis(500);
        let mut state = state(KubeletConfig {
            start_delay: delay,
            ..KubeletConfig::new("n")
        });
        let rules = ImageRules::default();
        let with_image = |mut p: Pod, image: &str| {
            p.spec.containers = vec![Container {
                name: "c".into(),
                image: image.into(),
                ..Container::default()
            }];
            p
        };
        let now = Instant::now();
        let mut p = with_image(pod("a", 2, "n", Some(PodPhase::Pending), ""), "x:fail");
        state.observe(p.clone(), now);
        assert_eq!(
            state.next_due(now + delay),
            Some(("ns/a".into(), Action::PullFail))
        );
        let step = Step {
            rules: &rules,
            now: "2026-01-01T00:00:00Z",
        };
        step.pull_failed(&mut p);
        p.metadata.resource_version = Some(ResourceVersion(3));
        state.observe(p.clone(), now);
        assert_eq!(
            state.next_due(now + PULL_RETRY - Duration::from_millis(1)),
            None
        );
        assert_eq!(
            state.next_due(now + PULL_RETRY),
            Some(("ns/a".into(), Action::PullFail))
        );
        step.pull_failed(&mut p);
        p.metadata.resource_version = Some(ResourceVersion(4));
        state.observe(p, now);
        assert_eq!(state.next_wake(), None, "ImagePullBackOff is final");

        let mut c = with_image(pod("c", 5, "n", Some(PodPhase::Pending), ""), "x:crash");
        step.started(&mut c, true);
        c.status.as_mut().unwrap().pod_ip = "10.0.0.3".into();
        state.observe(c.clone(), now);
        assert_eq!(
            state.next_due(now + Duration::from_secs(2)),
            Some(("ns/c".into(), Action::Restart))
        );
        step.restarted(&mut c);
        assert_eq!(waiting_reason(&c), Some(CRASH_LOOP_BACK_OFF));
        c.metadata.resource_version = Some(ResourceVersion(6));
        state.observe(c, now);
        assert_eq!(state.next_due(now + Duration::from_secs(3)), None);
        assert_eq!(
            state.next_due(now + Duration::from_secs(4)),
            Some(("ns/c".into(), Action::Restart))
        );

        // Unready images and 2014 pods (no conditions) need nothing once running.
        let mut u = with_image(pod("u", 7, "n", Some(PodPhase::Pending), ""), "x:unready");
        step.started(&mut u, true);
        u.status.as_mut().unwrap().pod_ip = "10.0.0.4".into();
        state.observe(u, now);
        state.observe(pod("old", 8, "n", Some(PodPhase::Running), "10.0.0.5"), now);
        assert_eq!(state.next_wake(), None);
    }

    #[test]
    fn a_pod_waiting_out_its_ready_delay_gets_a_ready_timer() {
        use super::super::containers::Step;
        let mut state = state(KubeletConfig {
            ready_delay: Duration::from_secs(60),
            ..KubeletConfig::new("n")
        });
        let rules = ImageRules::default();
        let now = Instant::now();
        let mut p = pod("a", 2, "n", Some(PodPhase::Pending), "");
        Step {
            rules: &rules,
            now: &crate::api::now_rfc3339(),
        }
        .started(&mut p, false);
        p.status.as_mut().unwrap().pod_ip = "10.0.0.2".into();
        state.observe(p, now);
        let wake = state.next_wake().expect("a Ready timer");
        assert!(wake > now + Duration::from_secs(58) && wake <= now + Duration::from_secs(60));
        assert_eq!(state.next_due(wake), Some(("ns/a".into(), Action::Ready)));
    }
}
