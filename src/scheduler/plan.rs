//! Where each pending pod goes: the pure core of the scheduler, no IO. 2014's
//! `generic_scheduler.go` (`findNodesThatFit`, `prioritizeNodes`, `selectHost`) with the
//! predicates and priorities kcm's pods can use:
//!
//! - fit: the node is registered (its kubelet holds `{prefix}/minions/NAME`), is not
//!   cordoned (`spec.unschedulable`, later Kubernetes' `NodeUnschedulable` predicate; 2014
//!   had no cordon) and holds
//!   fewer active pods than its Node's `capacity.pods` (2014's `PodFitsResources` counted
//!   CPU and memory; kcm's pods declare none, so the pod count is the resource). 2014's
//!   `PodFitsPorts` has nothing to check: kcm's containers have no host ports;
//! - priority, in order: fewest pods of the same group on the node (2014's
//!   `ServiceSpreading` counted the pods of the pod's services; kcm counts the pods of its
//!   controller: the same owner, or for a 2014 pod without owner references the same
//!   labels), then fewest active pods (2014's `LeastRequestedPriority`), then the node's
//!   name (2014 picked at random among the best; a fixed order makes spreading exact:
//!   the node holding the most pods of a group holds at most one more than the fewest).

use std::collections::{BTreeMap, HashMap};

/// What makes pods peers: spreading counts a pod's peers on each node.
pub type Group = String;

/// One node as the scheduler sees it.
#[derive(Debug, Default)]
struct NodeLoad {
    capacity: usize,
    /// `spec.unschedulable` (cordoned): its pods count, no new pod goes there.
    unschedulable: bool,
    active: usize,
    peers: HashMap<Group, usize>,
}

/// The nodes pods may go to, and what each holds so far.
#[derive(Debug, Default)]
pub struct Placement {
    nodes: BTreeMap<String, NodeLoad>,
}

impl Placement {
    /// The registered nodes and their `capacity.pods`.
    pub fn new(nodes: impl IntoIterator<Item = (String, usize)>) -> Placement {
        Placement {
            nodes: nodes
                .into_iter()
                .map(|(name, capacity)| {
                    let load = NodeLoad {
                        capacity,
                        ..NodeLoad::default()
                    };
                    (name, load)
                })
                .collect(),
        }
    }

    /// Marks `nodes` cordoned (`spec.unschedulable`): they keep their pods and get no
    /// new one.
    pub fn with_unschedulable<'n>(mut self, nodes: impl IntoIterator<Item = &'n str>) -> Placement {
        for node in nodes {
            if let Some(load) = self.nodes.get_mut(node) {
                load.unschedulable = true;
            }
        }
        self
    }

    /// Counts an active pod of `group` on `node` (one the cache shows bound, or one the
    /// scheduler has just bound). A node not registered is ignored.
    pub fn add(&mut self, node: &str, group: &Group) {
        if let Some(load) = self.nodes.get_mut(node) {
            load.active += 1;
            *load.peers.entry(group.clone()).or_default() += 1;
        }
    }

    /// The node a pod of `group` goes to, or `None` when every node is full.
    pub fn choose(&self, group: &Group) -> Option<&str> {
        self.nodes
            .iter()
            .filter(|(_, load)| !load.unschedulable && load.active < load.capacity)
            .min_by_key(|(name, load)| {
                let peers = load.peers.get(group).copied().unwrap_or(0);
                (peers, load.active, *name)
            })
            .map(|(name, _)| name.as_str())
    }

    /// Places each pod of `pending` (their groups, in the order given) and counts it
    /// where it goes: the node of each, `None` for a pod no node has room for.
    pub fn place_all<'g>(
        &mut self,
        pending: impl IntoIterator<Item = &'g Group>,
    ) -> Vec<Option<String>> {
        pending
            .into_iter()
            .map(|group| {
                let node = self.choose(group)?.to_string();
                self.add(&node, group);
                Some(node)
            })
            .collect()
    }

    /// Whether no node is registered.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spread(placement: &Placement, group: &str) -> Vec<usize> {
        let group = group.to_string();
        placement
            .nodes
            .values()
            .map(|load| load.peers.get(&group).copied().unwrap_or(0))
            .collect()
    }

    #[test]
    fn ten_pods_on_two_nodes_and_3000_on_five_differ_by_at_most_one() {
        for (nodes, pods) in [(2, 10), (5, 3000), (3, 7)] {
            let mut placement = Placement::new((1..=nodes).map(|i| (format!("node-{i}"), 1000)));
            let group = "web".to_string();
            let placed = placement.place_all(std::iter::repeat_n(&group, pods));
            assert!(placed.iter().all(Option::is_some));
            let counts = spread(&placement, "web");
            let (min, max) = (counts.iter().min().unwrap(), counts.iter().max().unwrap());
            assert!(max - min <= 1, "{nodes} nodes, {pods} pods: {counts:?}");
            assert_eq!(counts.iter().sum::<usize>(), pods);
        }
    }

    #[test]
    fn peers_first_then_the_least_loaded_node_then_the_name() {
        let mut placement = Placement::new([("a".to_string(), 10), ("b".to_string(), 10)]);
        let (web, db) = ("web".to_string(), "db".to_string());
        // b is busier, but holds no web pod yet: web goes there.
        placement.add("a", &web);
        placement.add("b", &db);
        placement.add("b", &db);
        assert_eq!(placement.choose(&web), Some("b"));
        // A new group goes to the least loaded node.
        assert_eq!(placement.choose(&"cache".to_string()), Some("a"));
        // Equal in both: the first name.
        let mut even = Placement::new([("b".to_string(), 1), ("a".to_string(), 1)]);
        assert_eq!(even.choose(&web), Some("a"));
        even.add("a", &web);
        assert_eq!(even.choose(&web), Some("b"));
    }

    #[test]
    fn a_cordoned_node_keeps_its_pods_and_gets_no_new_one() {
        let web = "web".to_string();
        let mut placement = Placement::new([("a".to_string(), 10), ("b".to_string(), 10)])
            .with_unschedulable(["a", "unknown"]);
        placement.add("a", &web);
        let placed = placement.place_all([&web, &web, &web]);
        assert_eq!(
            placed,
            [Some("b".into()), Some("b".into()), Some("b".into())]
        );
        let mut cordoned = Placement::new([("a".to_string(), 10)]).with_unschedulable(["a"]);
        assert_eq!(cordoned.place_all([&web]), [None]);
    }

    #[test]
    fn full_and_unregistered_nodes_get_nothing() {
        let mut placement = Placement::new([("a".to_string(), 1), ("b".to_string(), 2)]);
        let web = "web".to_string();
        // A pod bound to a node that is not registered counts nowhere.
        placement.add("gone", &web);
        let placed = placement.place_all([&web, &web, &web, &web]);
        assert_eq!(
            placed,
            [Some("a".into()), Some("b".into()), Some("b".into()), None]
        );
        assert!(Placement::new([]).choose(&web).is_none());
    }
}
