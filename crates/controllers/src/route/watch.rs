//! Which node events can change the routes: a node added or deleted, or its
//! pod CIDRs changed. Heartbeats, conditions, labels and the controller's
//! own condition writes do not.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};

use ccm_runtime::WatchEvent;
use k8s_openapi::api::core::v1::Node;
use kube::ResourceExt;

use super::plan::pod_cidrs;

/// What of a node the routes depend on, its UID and pod CIDRs, as a 64-bit
/// fingerprint: 8 bytes a node for as long as it exists, where the UID and
/// CIDRs themselves took three allocations. Two different states sharing a
/// fingerprint (one chance in 2^64 a change) would cost one missed trigger,
/// which the next periodic pass covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Routed(u64);

impl Routed {
    fn of(node: &Node) -> Self {
        let mut hasher = DefaultHasher::new();
        node.metadata.uid.hash(&mut hasher);
        pod_cidrs(node).hash(&mut hasher);
        Self(hasher.finish())
    }
}

/// Follows the node watch and says which events call for a pass.
#[derive(Debug, Default)]
pub(super) struct NodeWatch {
    known: HashMap<Box<str>, Routed>,
    relist: Option<HashMap<Box<str>, Routed>>,
    listed_once: bool,
}

impl NodeWatch {
    /// Records `event`; `true` when it may change the desired routes.
    ///
    /// The first full list triggers nothing: the controller's first pass,
    /// which waits for that list, covers it. A later relist (after a watch
    /// gap) triggers a pass when it differs from what the watch had shown.
    pub(super) fn observe(&mut self, event: &WatchEvent<Node>) -> bool {
        match event {
            WatchEvent::Apply(node) => {
                let routed = Routed::of(node);
                self.known.insert(node.name_any().into(), routed) != Some(routed)
            }
            WatchEvent::Delete(node) => {
                self.known.remove(node.name_any().as_str());
                true
            }
            WatchEvent::Init => {
                self.relist = Some(HashMap::new());
                false
            }
            WatchEvent::InitApply(node) => {
                self.relist
                    .get_or_insert_with(HashMap::new)
                    .insert(node.name_any().into(), Routed::of(node));
                false
            }
            WatchEvent::InitDone => {
                let listed = self.relist.take().unwrap_or_default();
                let changed = listed != self.known;
                self.known = listed;
                let first = !self.listed_once;
                self.listed_once = true;
                changed && !first
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{NodeCondition, NodeSpec, NodeStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;

    fn node(name: &str, cidrs: &[&str]) -> Node {
        Node {
            metadata: ObjectMeta {
                name: Some(name.into()),
                uid: Some(format!("uid-{name}")),
                ..ObjectMeta::default()
            },
            spec: Some(NodeSpec {
                pod_cidrs: Some(cidrs.iter().map(|c| (*c).to_owned()).collect()),
                ..NodeSpec::default()
            }),
            status: None,
        }
    }

    fn listed(watch: &mut NodeWatch, nodes: &[Node]) -> bool {
        let mut triggered = watch.observe(&WatchEvent::Init);
        for node in nodes {
            triggered |= watch.observe(&WatchEvent::InitApply(node.clone()));
        }
        triggered | watch.observe(&WatchEvent::InitDone)
    }

    #[test]
    fn adds_deletes_and_pod_cidr_changes_trigger() {
        let mut watch = NodeWatch::default();
        assert!(
            !listed(&mut watch, &[node("a", &["10.244.1.0/24"])]),
            "the first pass covers the first list"
        );
        assert!(watch.observe(&WatchEvent::Apply(node("b", &[]))), "added");
        assert!(
            watch.observe(&WatchEvent::Apply(node("b", &["10.244.2.0/24"]))),
            "pod CIDR assigned"
        );
        assert!(
            watch.observe(&WatchEvent::Apply(node(
                "b",
                &["10.244.2.0/24", "fd00::/64"]
            ))),
            "dual-stack CIDR added"
        );
        assert!(
            watch.observe(&WatchEvent::Delete(node("a", &["10.244.1.0/24"]))),
            "deleted"
        );
    }

    #[test]
    fn heartbeats_labels_and_conditions_do_not_trigger() {
        let mut watch = NodeWatch::default();
        listed(&mut watch, &[node("a", &["10.244.1.0/24"])]);
        let mut beat = node("a", &["10.244.1.0/24"]);
        beat.metadata.resource_version = Some("99".into());
        beat.metadata.labels = Some([("team".to_owned(), "x".to_owned())].into());
        beat.status = Some(NodeStatus {
            conditions: Some(vec![NodeCondition {
                type_: "NetworkUnavailable".into(),
                status: "False".into(),
                ..NodeCondition::default()
            }]),
            ..NodeStatus::default()
        });
        assert!(!watch.observe(&WatchEvent::Apply(beat)));
    }

    #[test]
    fn a_relist_triggers_only_when_it_differs() {
        let mut watch = NodeWatch::default();
        listed(&mut watch, &[node("a", &["10.244.1.0/24"])]);
        assert!(!listed(&mut watch, &[node("a", &["10.244.1.0/24"])]));
        assert!(
            listed(
                &mut watch,
                &[node("a", &["10.244.1.0/24"]), node("b", &["10.244.2.0/24"])]
            ),
            "an add the watch missed"
        );
        assert!(
            listed(&mut watch, &[node("b", &["10.244.2.0/24"])]),
            "a delete the watch missed"
        );
    }

    #[test]
    fn a_node_recreated_under_its_name_triggers() {
        let mut watch = NodeWatch::default();
        listed(&mut watch, &[node("a", &["10.244.1.0/24"])]);
        let mut again = node("a", &["10.244.1.0/24"]);
        again.metadata.uid = Some("uid-a-2".into());
        assert!(watch.observe(&WatchEvent::Apply(again)));
    }
}
