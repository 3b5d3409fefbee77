//! Which nodes load balancers send traffic to: upstream's "stable node set".
//!
//! A node is eligible unless it is being deleted, is labelled
//! `node.kubernetes.io/exclude-from-external-load-balancers` (with a value Go's
//! `strconv.ParseBool` reads as true, or cannot read at all), or carries the
//! cluster autoscaler's `ToBeDeletedByClusterAutoscaler` taint. Readiness is
//! deliberately not part of it: a node whose kubelet flaps keeps its place
//! behind the load balancers (the cloud's health checks handle it), so
//! heartbeats and condition changes never cost a provider call.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Arc;

use ccm_runtime::{Store, WatchEvent};
use k8s_openapi::api::core::v1::Node;

use crate::taints;

/// Excludes a node from external load balancers.
pub(crate) const EXCLUDE_LABEL: &str = "node.kubernetes.io/exclude-from-external-load-balancers";
/// The cluster autoscaler's taint on a node it is about to delete.
pub(crate) const TO_BE_DELETED_TAINT: &str = "ToBeDeletedByClusterAutoscaler";

/// Go's `strconv.ParseBool`, which upstream applies to the exclusion label.
fn parse_go_bool(value: &str) -> Option<bool> {
    match value {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

/// Whether the exclusion label lets the node in (upstream's
/// `nodeIncludedPredicate`): absent, or a value that parses as false.
fn included(node: &Node) -> bool {
    match node
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(EXCLUDE_LABEL))
    {
        None => true,
        Some(value) => parse_go_bool(value) == Some(false),
    }
}

/// Whether load balancers should send traffic to `node`.
pub(crate) fn is_eligible(node: &Node) -> bool {
    node.metadata.deletion_timestamp.is_none()
        && included(node)
        && !taints::has(node, TO_BE_DELETED_TAINT)
}

fn provider_id(node: &Node) -> &str {
    ccm_cloud_provider::provider_id(node).unwrap_or_default()
}

/// The eligible nodes at one moment, sorted by name, and their identity.
#[derive(Debug, Clone)]
pub(crate) struct NodeSet {
    /// The nodes, as the provider receives them.
    pub(crate) nodes: Vec<Arc<Node>>,
    /// A digest of the nodes' names and provider IDs: what a load balancer's
    /// backends depend on. Equal digests need no update.
    pub(crate) identity: u64,
}

impl NodeSet {
    /// The eligible nodes among `nodes`.
    pub(crate) fn of(nodes: Vec<Arc<Node>>) -> Self {
        let mut nodes: Vec<Arc<Node>> = nodes.into_iter().filter(|n| is_eligible(n)).collect();
        nodes.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        let mut hasher = DefaultHasher::new();
        for node in &nodes {
            node.metadata.name.hash(&mut hasher);
            provider_id(node).hash(&mut hasher);
        }
        Self {
            nodes,
            identity: hasher.finish(),
        }
    }

    /// The eligible nodes in the informer's cache.
    pub(crate) fn from_store(store: &Store<Node>) -> Self {
        Self::of(store.state())
    }

    /// Up to 20 node names, for events and logs (upstream's limit).
    pub(crate) fn loggable_names(&self) -> String {
        const MAX: usize = 20;
        let mut names: Vec<&str> = self
            .nodes
            .iter()
            .take(MAX)
            .filter_map(|n| n.metadata.name.as_deref())
            .collect();
        let more = self.nodes.len().saturating_sub(MAX);
        let more = format!("<{more} more>");
        if self.nodes.len() > MAX {
            names.push(&more);
        }
        names.join(", ")
    }
}

/// Follows the Node watch and says which events change the eligible set
/// (membership or a member's provider ID), so that every other node update
/// — heartbeats, conditions, labels and taints that don't decide
/// eligibility — is dismissed at the cost of one map lookup.
#[derive(Debug, Default)]
pub(crate) struct EligibleTracker {
    /// Eligible node name → provider ID.
    members: HashMap<String, String>,
    /// The members being rebuilt by a relist.
    relisting: Option<HashMap<String, String>>,
}

impl EligibleTracker {
    /// Applies one watch event; `true` when the eligible set changed.
    pub(crate) fn apply(&mut self, event: &WatchEvent<Node>) -> bool {
        match event {
            WatchEvent::Apply(node) => {
                let name = node.metadata.name.clone().unwrap_or_default();
                if is_eligible(node) {
                    let id = provider_id(node);
                    if self.members.get(&name).is_some_and(|known| known == id) {
                        return false;
                    }
                    self.members.insert(name, id.to_owned());
                    true
                } else {
                    self.members.remove(&name).is_some()
                }
            }
            WatchEvent::Delete(node) => self
                .members
                .remove(node.metadata.name.as_deref().unwrap_or_default())
                .is_some(),
            WatchEvent::Init => {
                self.relisting = Some(HashMap::new());
                false
            }
            WatchEvent::InitApply(node) => {
                if is_eligible(node) {
                    let name = node.metadata.name.clone().unwrap_or_default();
                    self.relisting
                        .get_or_insert_with(HashMap::new)
                        .insert(name, provider_id(node).to_owned());
                }
                false
            }
            WatchEvent::InitDone => {
                let relisted = self.relisting.take().unwrap_or_default();
                let changed = relisted != self.members;
                self.members = relisted;
                changed
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::api::core::v1::{NodeCondition, NodeSpec, NodeStatus, Taint};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

    use super::*;

    fn node(name: &str) -> Node {
        Node {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..ObjectMeta::default()
            },
            spec: Some(NodeSpec {
                provider_id: Some(format!("fake://{name}")),
                ..NodeSpec::default()
            }),
            status: None,
        }
    }

    fn labelled(name: &str, value: &str) -> Node {
        let mut n = node(name);
        n.metadata.labels = Some(BTreeMap::from([(
            EXCLUDE_LABEL.to_owned(),
            value.to_owned(),
        )]));
        n
    }

    fn with_condition(mut n: Node, ready: &str, heartbeat: i64) -> Node {
        n.status = Some(NodeStatus {
            conditions: Some(vec![NodeCondition {
                type_: "Ready".into(),
                status: ready.into(),
                last_heartbeat_time: Some(Time(jiff::Timestamp::from_second(heartbeat).unwrap())),
                ..NodeCondition::default()
            }]),
            ..NodeStatus::default()
        });
        n
    }

    #[test]
    fn exclusion_label_follows_go_parse_bool() {
        for value in ["true", "True", "TRUE", "t", "T", "1", "yes", "", "maybe"] {
            assert!(!is_eligible(&labelled("n", value)), "{value:?} excludes");
        }
        for value in ["false", "False", "FALSE", "f", "F", "0"] {
            assert!(
                is_eligible(&labelled("n", value)),
                "{value:?} parses as false and includes"
            );
        }
        assert!(is_eligible(&node("n")));
    }

    #[test]
    fn nodes_being_deleted_or_tainted_for_deletion_are_not_eligible() {
        let mut deleting = node("a");
        deleting.metadata.deletion_timestamp = Some(Time(jiff::Timestamp::UNIX_EPOCH));
        assert!(!is_eligible(&deleting));
        let mut tainted = node("b");
        tainted.spec.as_mut().unwrap().taints = Some(vec![Taint {
            key: TO_BE_DELETED_TAINT.into(),
            effect: "NoSchedule".into(),
            ..Taint::default()
        }]);
        assert!(!is_eligible(&tainted));
    }

    #[test]
    fn readiness_does_not_decide_eligibility() {
        assert!(is_eligible(&with_condition(node("n"), "False", 1)));
        assert!(is_eligible(&with_condition(node("n"), "Unknown", 1)));
    }

    #[test]
    fn node_set_identity_follows_names_and_provider_ids_only() {
        let a = NodeSet::of(vec![Arc::new(node("a")), Arc::new(node("b"))]);
        let reordered = NodeSet::of(vec![
            Arc::new(node("b")),
            Arc::new(with_condition(node("a"), "False", 9)),
        ]);
        assert_eq!(
            a.identity, reordered.identity,
            "order and conditions don't matter"
        );
        let mut moved = node("b");
        moved.spec.as_mut().unwrap().provider_id = Some("fake://other".into());
        let changed = NodeSet::of(vec![Arc::new(node("a")), Arc::new(moved)]);
        assert_ne!(a.identity, changed.identity, "a provider ID change matters");
        let excluded = NodeSet::of(vec![Arc::new(node("a")), Arc::new(labelled("b", "true"))]);
        assert_eq!(excluded.nodes.len(), 1);
        assert_ne!(a.identity, excluded.identity);
    }

    #[test]
    fn heartbeats_and_condition_flaps_never_change_the_set() {
        let mut tracker = EligibleTracker::default();
        assert!(
            tracker.apply(&WatchEvent::Apply(node("n1"))),
            "a new node joins"
        );
        let changes = (0..1000)
            .map(|i| with_condition(node("n1"), if i % 7 == 0 { "False" } else { "True" }, i))
            .filter(|n| tracker.apply(&WatchEvent::Apply(n.clone())))
            .count();
        assert_eq!(changes, 0);
    }

    #[test]
    fn membership_and_provider_id_changes_are_reported_once() {
        let mut tracker = EligibleTracker::default();
        let mut n1 = node("n1");
        n1.spec.as_mut().unwrap().provider_id = None;
        assert!(tracker.apply(&WatchEvent::Apply(n1.clone())));
        assert!(
            tracker.apply(&WatchEvent::Apply(node("n1"))),
            "provider ID set"
        );
        assert!(!tracker.apply(&WatchEvent::Apply(node("n1"))));
        assert!(
            tracker.apply(&WatchEvent::Apply(labelled("n1", "true"))),
            "excluded"
        );
        assert!(!tracker.apply(&WatchEvent::Apply(labelled("n1", "true"))));
        assert!(
            !tracker.apply(&WatchEvent::Delete(labelled("n1", "true"))),
            "it was not a member"
        );
        assert!(tracker.apply(&WatchEvent::Apply(node("n2"))));
        assert!(tracker.apply(&WatchEvent::Delete(node("n2"))));
    }

    #[test]
    fn a_relist_reports_a_change_only_when_the_set_differs() {
        let mut tracker = EligibleTracker::default();
        let relist = |tracker: &mut EligibleTracker, nodes: &[Node]| {
            let mut changed = tracker.apply(&WatchEvent::Init);
            for n in nodes {
                changed |= tracker.apply(&WatchEvent::InitApply(n.clone()));
            }
            changed | tracker.apply(&WatchEvent::InitDone)
        };
        assert!(
            relist(&mut tracker, &[node("a"), node("b")]),
            "the first list fills the set"
        );
        assert!(!relist(
            &mut tracker,
            &[with_condition(node("b"), "False", 3), node("a")]
        ));
        assert!(
            relist(&mut tracker, &[node("a")]),
            "b vanished while the watch was down"
        );
    }

    #[test]
    fn loggable_names_are_capped_at_twenty() {
        let set = NodeSet::of(
            (0..25)
                .map(|i| Arc::new(node(&format!("n{i:02}"))))
                .collect(),
        );
        let names = set.loggable_names();
        assert!(names.starts_with("n00, n01"));
        assert!(names.ends_with("n19, <5 more>"), "{names}");
    }

    /// One change a watch can bring: a node written (its exclusion label,
    /// the autoscaler's taint, its provider ID, its heartbeat), deleted, or
    /// the whole list read again.
    #[derive(Debug, Clone)]
    enum Change {
        Write {
            node: usize,
            label: Option<&'static str>,
            tainted: bool,
            provider: usize,
            heartbeat: i64,
        },
        Delete(usize),
        Relist,
    }

    fn change() -> impl proptest::strategy::Strategy<Value = Change> {
        use proptest::prelude::*;
        let label = proptest::option::of(proptest::sample::select(vec!["true", "false", "maybe"]));
        prop_oneof![
            6 => (0_usize..4, label, any::<bool>(), 0_usize..2, 0_i64..3).prop_map(
                |(node, label, tainted, provider, heartbeat)| Change::Write {
                    node,
                    label,
                    tainted,
                    provider,
                    heartbeat,
                }
            ),
            2 => (0_usize..4).prop_map(Change::Delete),
            1 => Just(Change::Relist),
        ]
    }

    fn written(
        name: &str,
        label: Option<&str>,
        tainted: bool,
        provider: usize,
        heartbeat: i64,
    ) -> Node {
        let mut n = match label {
            Some(value) => labelled(name, value),
            None => node(name),
        };
        if let Some(spec) = n.spec.as_mut() {
            spec.provider_id = Some(format!("fake://{name}/{provider}"));
            if tainted {
                spec.taints = Some(vec![Taint {
                    key: TO_BE_DELETED_TAINT.into(),
                    effect: "NoSchedule".into(),
                    ..Taint::default()
                }]);
            }
        }
        with_condition(n, "True", 1_700_000_000 + heartbeat)
    }

    /// The eligible set of `nodes`: name → provider ID.
    fn eligible_set(nodes: &BTreeMap<String, Node>) -> HashMap<String, String> {
        nodes
            .iter()
            .filter(|(_, n)| is_eligible(n))
            .map(|(name, n)| (name.clone(), provider_id(n).to_owned()))
            .collect()
    }

    proptest::proptest! {
        /// Whatever the watch brings, the tracker says "changed" exactly
        /// when the eligible set (members and their provider IDs) changed,
        /// and holds that set; heartbeats alone never count.
        #[test]
        fn a_change_is_reported_exactly_when_the_eligible_set_changes(
            changes in proptest::collection::vec(change(), 1..60),
        ) {
            let mut tracker = EligibleTracker::default();
            let mut cluster: BTreeMap<String, Node> = BTreeMap::new();
            for change in changes {
                let before = eligible_set(&cluster);
                let events: Vec<WatchEvent<Node>> = match change {
                    Change::Write { node, label, tainted, provider, heartbeat } => {
                        let name = format!("n{node}");
                        let n = written(&name, label, tainted, provider, heartbeat);
                        cluster.insert(name, n.clone());
                        vec![WatchEvent::Apply(n)]
                    }
                    Change::Delete(node) => match cluster.remove(&format!("n{node}")) {
                        Some(n) => vec![WatchEvent::Delete(n)],
                        None => Vec::new(),
                    },
                    Change::Relist => std::iter::once(WatchEvent::Init)
                        .chain(cluster.values().cloned().map(WatchEvent::InitApply))
                        .chain(std::iter::once(WatchEvent::InitDone))
                        .collect(),
                };
                let mut changed = false;
                for event in &events {
                    changed |= tracker.apply(event);
                }
                let after = eligible_set(&cluster);
                proptest::prop_assert_eq!(changed, before != after);
                proptest::prop_assert_eq!(&tracker.members, &after);
            }
        }
    }
}
