//! What the controllers are configured with (from upstream's flags).

use std::time::Duration;

use ipnet::IpNet;

/// Settings every controller reads from; the app fills them from flags.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ControllerSettings {
    /// `--configure-cloud-routes`.
    pub configure_cloud_routes: bool,
    /// `--cluster-cidr`, split on commas (dual-stack).
    pub cluster_cidrs: Vec<IpNet>,
    /// `--concurrent-service-syncs`.
    pub concurrent_service_syncs: u16,
    /// `--load-balancer-target-health` (ours): read target health for the
    /// Services' `LoadBalancerTargetsHealthy` condition.
    pub load_balancer_target_health: bool,
    /// `--concurrent-node-syncs`: concurrent batch lookups of node
    /// initialization.
    pub concurrent_node_syncs: u16,
    /// `--node-status-update-frequency`.
    pub node_status_update_frequency: Duration,
    /// `--node-monitor-period`.
    pub node_monitor_period: Duration,
    /// The route controller's pass period without node events:
    /// `--route-reconciliation-period`, or with upstream's
    /// `CloudControllerManagerWatchBasedRoutesReconciliation` gate the
    /// informer resync period (`--min-resync-period` times 1 to 2);
    /// `Duration::MAX` for never.
    pub route_reconciliation_period: Duration,
    /// Upstream's `CloudControllerManagerWatchBasedRoutesReconciliation`
    /// gate: the route controller starts passes at least 10 s apart, and
    /// labels those node events run `trigger="node_change"`.
    pub watch_based_routes: bool,
    /// `--node-sync-period`: the service controller's full resync (zero means
    /// upstream's 100 s).
    pub node_sync_period: Duration,
    /// Not a flag: a node younger than this that was never seen Ready is not
    /// deleted when its instance is not found (new instances can take a
    /// while to appear in a cloud's API).
    pub new_node_grace: Duration,
    /// Not a flag: how long a kubelet serving certificate request waits for
    /// its node to exist and be initialized before it is denied.
    pub csr_initialization_wait: Duration,
}

impl Default for ControllerSettings {
    /// Upstream's defaults.
    fn default() -> Self {
        Self {
            configure_cloud_routes: true,
            cluster_cidrs: Vec::new(),
            concurrent_service_syncs: 1,
            load_balancer_target_health: true,
            concurrent_node_syncs: 1,
            node_status_update_frequency: Duration::from_secs(300),
            node_monitor_period: Duration::from_secs(5),
            route_reconciliation_period: Duration::from_secs(10),
            watch_based_routes: false,
            node_sync_period: Duration::ZERO,
            new_node_grace: Duration::from_secs(300),
            csr_initialization_wait: Duration::from_secs(10 * 60),
        }
    }
}
