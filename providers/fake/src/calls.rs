//! The fake's call log: every provider call recorded by operation and
//! arguments, for tests to count.

use std::fmt;

/// A provider operation, as recorded in the call log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Operation {
    /// `Instances::instance_exists`
    InstanceExists,
    /// `Instances::instance_shutdown`
    InstanceShutdown,
    /// `Instances::instance_metadata`
    InstanceMetadata,
    /// `Instances::instances_exist` (batch)
    InstancesExist,
    /// `Instances::instances_shutdown` (batch)
    InstancesShutdown,
    /// `Instances::instances_metadata` (batch)
    InstancesMetadata,
    /// `LoadBalancer::get_load_balancer`
    GetLoadBalancer,
    /// `LoadBalancer::ensure_load_balancer`
    EnsureLoadBalancer,
    /// `LoadBalancer::update_load_balancer`
    UpdateLoadBalancer,
    /// `LoadBalancer::ensure_load_balancer_deleted`
    EnsureLoadBalancerDeleted,
    /// `LoadBalancer::load_balancer_health`
    LoadBalancerHealth,
    /// `Routes::list_routes`
    ListRoutes,
    /// `Routes::create_route`
    CreateRoute,
    /// `Routes::delete_route`
    DeleteRoute,
    /// `Volumes::volumes_labels` (batch)
    VolumesLabels,
    /// `Inventory::owned_resources`
    OwnedResources,
    /// `Inventory::delete_owned`
    DeleteOwned,
    /// `ServiceObserver::sync_services`
    SyncServices,
    /// `InstanceTags::tag_instances` (batch)
    TagInstances,
    /// `InstanceTags::untag_instances` (batch)
    UntagInstances,
    /// `PodCidrs::pod_cidrs_of` (batch)
    PodCidrsOf,
}

impl Operation {
    /// Every operation, for tables and metrics.
    pub const ALL: [Self; 21] = [
        Self::InstanceExists,
        Self::InstanceShutdown,
        Self::InstanceMetadata,
        Self::InstancesExist,
        Self::InstancesShutdown,
        Self::InstancesMetadata,
        Self::GetLoadBalancer,
        Self::EnsureLoadBalancer,
        Self::UpdateLoadBalancer,
        Self::EnsureLoadBalancerDeleted,
        Self::LoadBalancerHealth,
        Self::ListRoutes,
        Self::CreateRoute,
        Self::DeleteRoute,
        Self::VolumesLabels,
        Self::OwnedResources,
        Self::DeleteOwned,
        Self::SyncServices,
        Self::TagInstances,
        Self::UntagInstances,
        Self::PodCidrsOf,
    ];

    /// The interface method's name, such as `instances_metadata`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::InstanceExists => "instance_exists",
            Self::InstanceShutdown => "instance_shutdown",
            Self::InstanceMetadata => "instance_metadata",
            Self::InstancesExist => "instances_exist",
            Self::InstancesShutdown => "instances_shutdown",
            Self::InstancesMetadata => "instances_metadata",
            Self::GetLoadBalancer => "get_load_balancer",
            Self::EnsureLoadBalancer => "ensure_load_balancer",
            Self::UpdateLoadBalancer => "update_load_balancer",
            Self::EnsureLoadBalancerDeleted => "ensure_load_balancer_deleted",
            Self::LoadBalancerHealth => "load_balancer_health",
            Self::ListRoutes => "list_routes",
            Self::CreateRoute => "create_route",
            Self::DeleteRoute => "delete_route",
            Self::VolumesLabels => "volumes_labels",
            Self::OwnedResources => "owned_resources",
            Self::DeleteOwned => "delete_owned",
            Self::SyncServices => "sync_services",
            Self::TagInstances => "tag_instances",
            Self::UntagInstances => "untag_instances",
            Self::PodCidrsOf => "pod_cidrs_of",
        }
    }

    /// The operation named `name` as [`Operation::as_str`] spells it.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|op| op.as_str() == name)
    }

    /// Whether the operation changes the cloud.
    pub fn is_mutation(self) -> bool {
        matches!(
            self,
            Self::EnsureLoadBalancer
                | Self::UpdateLoadBalancer
                | Self::EnsureLoadBalancerDeleted
                | Self::CreateRoute
                | Self::DeleteRoute
                | Self::DeleteOwned
                | Self::SyncServices
                | Self::TagInstances
                | Self::UntagInstances
        )
    }
}

impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One recorded provider call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    /// Which method was called.
    pub op: Operation,
    /// What it was called for: node names, `namespace/name` of a Service,
    /// a route's CIDR, or volume IDs.
    pub args: Vec<String>,
    /// For batch calls, how many nodes the call carried.
    pub batch_size: Option<usize>,
}
