//! Controller IDs: used by `--controllers`, metrics, logs and events. They
//! are upstream's and are never renamed.

use std::fmt;

/// One of the controllers a cloud-controller-manager runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ControllerId {
    /// Initializes new nodes from cloud metadata and keeps their addresses current.
    CloudNode,
    /// Deletes nodes whose instances are gone; taints shut-down nodes.
    CloudNodeLifecycle,
    /// Provisions load balancers for Services of type LoadBalancer.
    Service,
    /// Programs cloud routes for pod CIDRs.
    Route,
    /// Labels PersistentVolumes with their cloud volume's zone and region
    /// (what kube-apiserver's `PersistentVolumeLabel` admission plugin did).
    PersistentVolumeLabel,
    /// Approves kubelet serving certificate requests whose names and
    /// addresses the cloud confirms. Not upstream's, and off unless named.
    KubeletServingCsrApprover,
}

impl ControllerId {
    /// Every controller, in start order.
    pub const ALL: [Self; 6] = [
        Self::CloudNode,
        Self::CloudNodeLifecycle,
        Self::Service,
        Self::Route,
        Self::PersistentVolumeLabel,
        Self::KubeletServingCsrApprover,
    ];

    /// The controllers `--controllers=*` enables: all but those that must
    /// be named.
    pub const DEFAULT: [Self; 5] = [
        Self::CloudNode,
        Self::CloudNodeLifecycle,
        Self::Service,
        Self::Route,
        Self::PersistentVolumeLabel,
    ];

    /// Whether `*` enables it.
    pub fn is_default(self) -> bool {
        Self::DEFAULT.contains(&self)
    }

    /// Upstream's canonical name, such as `cloud-node-controller`.
    pub fn name(self) -> &'static str {
        match self {
            Self::CloudNode => "cloud-node-controller",
            Self::CloudNodeLifecycle => "cloud-node-lifecycle-controller",
            Self::Service => "service-lb-controller",
            Self::Route => "node-route-controller",
            Self::PersistentVolumeLabel => "persistentvolume-label-controller",
            Self::KubeletServingCsrApprover => "kubelet-serving-csr-approver",
        }
    }

    /// Upstream's short alias, such as `cloud-node`.
    pub fn alias(self) -> &'static str {
        match self {
            Self::CloudNode => "cloud-node",
            Self::CloudNodeLifecycle => "cloud-node-lifecycle",
            Self::Service => "service",
            Self::Route => "route",
            Self::PersistentVolumeLabel => "persistentvolume-label",
            Self::KubeletServingCsrApprover => "kubelet-serving-csr-approver",
        }
    }

    /// The ServiceAccount in kube-system whose credentials the controller
    /// uses with `--use-service-account-credentials`, as upstream names it
    /// (both node controllers share `node-controller`).
    pub fn service_account(self) -> &'static str {
        match self {
            Self::CloudNode | Self::CloudNodeLifecycle => "node-controller",
            Self::Service => "service-controller",
            Self::Route => "route-controller",
            // The name upstream's in-tree PersistentVolumeLabel controller used.
            Self::PersistentVolumeLabel => "pvl-controller",
            // Not upstream's: an account of its own, which holds the
            // approval rights and nothing else.
            Self::KubeletServingCsrApprover => "kubelet-serving-csr-approver",
        }
    }

    /// The controller named `name` (canonical name or alias).
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|id| id.name() == name || id.alias() == name)
    }
}

impl fmt::Display for ControllerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.alias())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_aliases_both_parse() {
        assert_eq!(ControllerId::parse("service"), Some(ControllerId::Service));
        assert_eq!(
            ControllerId::parse("service-lb-controller"),
            Some(ControllerId::Service)
        );
        assert_eq!(
            ControllerId::parse("node-route-controller"),
            Some(ControllerId::Route)
        );
        assert_eq!(
            ControllerId::parse("persistentvolume-label"),
            Some(ControllerId::PersistentVolumeLabel)
        );
        assert_eq!(
            ControllerId::parse("kubelet-serving-csr-approver"),
            Some(ControllerId::KubeletServingCsrApprover)
        );
        assert!(!ControllerId::KubeletServingCsrApprover.is_default());
        assert_eq!(ControllerId::parse("nodeipam"), None);
    }
}
