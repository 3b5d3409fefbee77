//! Which node events may change a load balancer's target health: a node's
//! `Ready` condition flipping (a flap, as often as kubelets flap), or the
//! cloud-node-lifecycle controller's shutdown taint coming or going (the
//! cloud confirmed the instance stopped or started). Neither changes which
//! nodes a load balancer sends traffic to (see `eligible`), so neither
//! costs a provider mutation; they only make the service controller ask
//! the cloud for target health again, for the Services whose health it
//! follows: at once after a shutdown, at most once a minute for flaps.

use std::collections::HashMap;

use ccm_runtime::WatchEvent;
use k8s_openapi::api::core::v1::Node;

use crate::taints;

/// What a node event says about target health.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Flip {
    /// Nothing new.
    None,
    /// A known node's `Ready` condition flipped.
    Readiness,
    /// A known node's shutdown taint came or went.
    Shutdown,
}

/// Counts of flips across all nodes, which the service controller compares
/// with what each Service saw last.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct NodeSignals {
    /// Readiness flaps.
    pub(crate) flaps: u64,
    /// Shutdown taints come or gone.
    pub(crate) shutdowns: u64,
}

impl NodeSignals {
    /// Counts `flip`; false when there was nothing to count.
    pub(crate) fn count(&mut self, flip: Flip) -> bool {
        match flip {
            Flip::None => return false,
            Flip::Readiness => self.flaps += 1,
            Flip::Shutdown => self.shutdowns += 1,
        }
        true
    }
}

/// What the tracker keeps of a node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Seen {
    ready: bool,
    shut_down: bool,
}

impl Seen {
    fn of(node: &Node) -> Self {
        Self {
            ready: is_ready(node),
            shut_down: taints::has(node, taints::SHUTDOWN),
        }
    }

    /// What changed from `self` to `now`, the shutdown first.
    fn flip(self, now: Self) -> Flip {
        if self.shut_down != now.shut_down {
            Flip::Shutdown
        } else if self.ready != now.ready {
            Flip::Readiness
        } else {
            Flip::None
        }
    }
}

/// Whether `node` says it is ready.
fn is_ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
        .is_some_and(|c| c.status == "True")
}

/// The readiness and shutdown taint of every node, as last seen.
#[derive(Debug, Default)]
pub(crate) struct ReadinessTracker {
    seen: HashMap<String, Seen>,
    relisting: Option<HashMap<String, Seen>>,
}

impl ReadinessTracker {
    /// Applies one event; says what flipped on a known node.
    pub(crate) fn apply(&mut self, event: &WatchEvent<Node>) -> Flip {
        match event {
            WatchEvent::Apply(node) => {
                let name = node.metadata.name.clone().unwrap_or_default();
                let now = Seen::of(node);
                self.seen
                    .insert(name, now)
                    .map_or(Flip::None, |was| was.flip(now))
            }
            WatchEvent::Delete(node) => {
                self.seen
                    .remove(node.metadata.name.as_deref().unwrap_or_default());
                Flip::None
            }
            WatchEvent::Init => {
                self.relisting = Some(HashMap::new());
                Flip::None
            }
            WatchEvent::InitApply(node) => {
                let name = node.metadata.name.clone().unwrap_or_default();
                self.relisting
                    .get_or_insert_with(HashMap::new)
                    .insert(name, Seen::of(node));
                Flip::None
            }
            WatchEvent::InitDone => {
                let relisted = self.relisting.take().unwrap_or_default();
                let flips: Vec<Flip> = relisted
                    .iter()
                    .filter_map(|(name, now)| self.seen.get(name).map(|was| was.flip(*now)))
                    .collect();
                self.seen = relisted;
                if flips.contains(&Flip::Shutdown) {
                    Flip::Shutdown
                } else if flips.contains(&Flip::Readiness) {
                    Flip::Readiness
                } else {
                    Flip::None
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{NodeCondition, NodeSpec, NodeStatus, Taint};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;

    fn node(name: &str, ready: &str, heartbeat: i64) -> Node {
        Node {
            metadata: ObjectMeta {
                name: Some(name.into()),
                resource_version: Some(heartbeat.to_string()),
                ..ObjectMeta::default()
            },
            status: Some(NodeStatus {
                conditions: Some(vec![NodeCondition {
                    type_: "Ready".into(),
                    status: ready.into(),
                    ..NodeCondition::default()
                }]),
                ..NodeStatus::default()
            }),
            ..Node::default()
        }
    }

    fn shut_down(mut node: Node) -> Node {
        node.spec = Some(NodeSpec {
            taints: Some(vec![Taint {
                key: taints::SHUTDOWN.into(),
                effect: "NoSchedule".into(),
                ..Taint::default()
            }]),
            ..NodeSpec::default()
        });
        node
    }

    #[test]
    fn only_a_known_node_flipping_counts() {
        let mut tracker = ReadinessTracker::default();
        let mut apply = |node: Node| tracker.apply(&WatchEvent::Apply(node));
        assert_eq!(apply(node("a", "True", 1)), Flip::None, "new");
        assert_eq!(apply(node("a", "True", 2)), Flip::None, "heartbeat");
        assert_eq!(apply(node("a", "False", 3)), Flip::Readiness);
        assert_eq!(
            apply(node("a", "Unknown", 4)),
            Flip::None,
            "still not ready"
        );
        assert_eq!(apply(shut_down(node("a", "Unknown", 5))), Flip::Shutdown);
        assert_eq!(apply(shut_down(node("a", "True", 6))), Flip::Readiness);
        assert_eq!(
            apply(node("a", "False", 7)),
            Flip::Shutdown,
            "the shutdown first"
        );
        assert_eq!(
            tracker.apply(&WatchEvent::Delete(node("a", "True", 8))),
            Flip::None
        );
        assert_eq!(
            tracker.apply(&WatchEvent::Apply(node("a", "False", 9))),
            Flip::None,
            "new again"
        );
    }

    #[test]
    fn a_relist_counts_flips_it_missed() {
        let mut tracker = ReadinessTracker::default();
        tracker.apply(&WatchEvent::Apply(node("a", "True", 1)));
        tracker.apply(&WatchEvent::Apply(node("c", "True", 1)));
        tracker.apply(&WatchEvent::Init);
        tracker.apply(&WatchEvent::InitApply(node("a", "True", 2)));
        tracker.apply(&WatchEvent::InitApply(node("b", "False", 2)));
        assert_eq!(tracker.apply(&WatchEvent::InitDone), Flip::None);
        tracker.apply(&WatchEvent::Init);
        tracker.apply(&WatchEvent::InitApply(node("a", "False", 3)));
        assert_eq!(tracker.apply(&WatchEvent::InitDone), Flip::Readiness);
        tracker.apply(&WatchEvent::Init);
        tracker.apply(&WatchEvent::InitApply(shut_down(node("a", "True", 4))));
        assert_eq!(tracker.apply(&WatchEvent::InitDone), Flip::Shutdown);
    }

    #[test]
    fn signals_count_flips_and_nothing_else() {
        let mut signals = NodeSignals::default();
        assert!(!signals.count(Flip::None));
        assert!(signals.count(Flip::Readiness));
        assert!(signals.count(Flip::Shutdown));
        assert_eq!(
            signals,
            NodeSignals {
                flaps: 1,
                shutdowns: 1
            }
        );
    }
}
