//! The cloud provider's node taints, and writing taints without clobbering
//! another writer's.

use k8s_openapi::api::core::v1::{Node, Taint};

/// Set by the kubelet with `--cloud-provider=external`; removed once the
/// cloud-node controller initialized the node.
pub(crate) const UNINITIALIZED: &str = "node.cloudprovider.kubernetes.io/uninitialized";
/// Added while the node's instance is shut down.
pub(crate) const SHUTDOWN: &str = "node.cloudprovider.kubernetes.io/shutdown";

/// The node's taints.
pub(crate) fn of(node: &Node) -> &[Taint] {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_deref())
        .unwrap_or_default()
}

/// Whether the node has a taint with `key`.
pub(crate) fn has(node: &Node, key: &str) -> bool {
    of(node).iter().any(|t| t.key == key)
}

/// The node's taints without those with `key`.
pub(crate) fn without(node: &Node, key: &str) -> Vec<Taint> {
    of(node).iter().filter(|t| t.key != key).cloned().collect()
}

/// The shutdown taint (`NoSchedule`, as upstream).
pub(crate) fn shutdown() -> Taint {
    Taint {
        key: SHUTDOWN.into(),
        effect: "NoSchedule".into(),
        value: None,
        time_added: None,
    }
}
