//! Upstream's "generic", "cloud-node-controller", "service-lb-controller"
//! and "misc" flag sections: the cloud, the controllers, leader election and
//! the API client.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use super::{duration, parse_bool, parse_path};

/// The "generic" section.
#[derive(Debug, Clone, Args)]
pub(crate) struct Generic {
    /// Should CIDRs for Pods be allocated and set on the cloud provider.
    /// Accepted: this CCM runs no node-IPAM controller, so pod CIDRs come from
    /// kube-controller-manager.
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_value = "false", default_missing_value = "true", value_parser = parse_bool)]
    pub(super) allocate_node_cidrs: bool,

    /// Run even if the cloud cannot tell this cluster's resources apart
    /// (deprecated upstream).
    #[arg(long, hide = true, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_bool)]
    pub(super) allow_untagged_cloud: Option<bool>,

    /// Type of CIDR allocator to use (upstream's node-IPAM controller; none runs here).
    #[arg(long, value_name = "TYPE", default_value = "RangeAllocator")]
    pub(super) cidr_allocator_type: String,

    /// The path to the cloud provider configuration file; empty for none.
    #[arg(long, value_name = "PATH", value_parser = parse_path)]
    pub(super) cloud_config: Option<PathBuf>,

    /// The provider of cloud services: empty or this binary's provider.
    #[arg(long, value_name = "NAME")]
    pub(super) cloud_provider: Option<String>,

    /// CIDR range for pods in the cluster; routes outside it are never touched.
    #[arg(long, value_name = "CIDR")]
    pub(super) cluster_cidr: Option<String>,

    /// The instance prefix for the cluster: tags cloud resources as owned by this cluster.
    #[arg(long, value_name = "NAME", default_value = "kubernetes")]
    pub(super) cluster_name: String,

    /// Configure cloud routes for the pod CIDRs allocated to nodes (needs
    /// --cluster-cidr when the provider has routes).
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_value = "true", default_missing_value = "true", value_parser = parse_bool)]
    pub(super) configure_cloud_routes: bool,

    /// Interval between starting controllers.
    #[arg(long, value_name = "DURATION", default_value = "0s", value_parser = duration::parse)]
    pub(super) controller_start_interval: Duration,

    /// Controllers to enable: `*` for all, `name` to enable, `-name` to disable.
    /// Names: cloud-node, cloud-node-lifecycle, service, route (or upstream's long names).
    #[arg(long, value_name = "NAMES", value_delimiter = ',', default_value = "*")]
    pub(super) controllers: Vec<String>,

    /// The volume plugin kube-controller-manager's volume controllers use
    /// with an external cloud provider; no volume controller runs here.
    #[arg(long, value_name = "NAME")]
    pub(super) external_cloud_volume_plugin: Option<String>,

    /// Feature gates as key=value pairs, with upstream's gate names.
    #[arg(long, value_name = "GATE=BOOL,...")]
    pub(super) feature_gates: Option<String>,

    /// Burst to use while talking with the Kubernetes API server.
    #[arg(long, value_name = "N", default_value_t = 30, value_parser = parse_i32)]
    pub(super) kube_api_burst: i32,

    /// Content type of requests sent to the API server; this CCM always speaks JSON.
    #[arg(long, value_name = "TYPE")]
    pub(super) kube_api_content_type: Option<String>,

    /// Queries per second to the Kubernetes API server, enforced client-side
    /// (0: client-go's 5; negative: no client-side limit).
    #[arg(long, value_name = "QPS", default_value_t = 20.0, value_parser = parse_f32, allow_negative_numbers = true)]
    pub(super) kube_api_qps: f64,

    /// Run leader election, so that only one replica acts.
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_value = "true", default_missing_value = "true", value_parser = parse_bool)]
    pub(super) leader_elect: bool,

    /// How long a leader's lease is valid.
    #[arg(long, value_name = "DURATION", default_value = "15s", value_parser = duration::parse)]
    pub(super) leader_elect_lease_duration: Duration,

    /// How long a leader retries renewing before it gives up leading.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = duration::parse)]
    pub(super) leader_elect_renew_deadline: Duration,

    /// The kind of lock object; only `leases` is supported.
    #[arg(long, value_name = "KIND", default_value = "leases")]
    pub(super) leader_elect_resource_lock: String,

    /// The name of the Lease used for leader election.
    #[arg(long, value_name = "NAME", default_value = "cloud-controller-manager")]
    pub(super) leader_elect_resource_name: String,

    /// The namespace of the Lease used for leader election.
    #[arg(long, value_name = "NAMESPACE", default_value = "kube-system")]
    pub(super) leader_elect_resource_namespace: String,

    /// How long candidates wait between attempts.
    #[arg(long, value_name = "DURATION", default_value = "2s", value_parser = duration::parse)]
    pub(super) leader_elect_retry_period: Duration,

    /// The resync period of upstream's informers; the watches here never resync.
    #[arg(long, value_name = "DURATION", value_parser = duration::parse)]
    pub(super) min_resync_period: Option<Duration>,

    /// Period of the service controller's full resync of load-balancer
    /// backends (0: upstream's 100s; deprecated upstream).
    #[arg(long, hide = true, value_name = "DURATION", value_parser = duration::parse)]
    pub(super) node_sync_period: Option<Duration>,

    /// Safety-net period of route reconciliation.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = duration::parse)]
    pub(super) route_reconciliation_period: Duration,

    /// Give each controller its own ServiceAccount credentials
    /// (kube-system's node-controller, service-controller, route-controller).
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_value = "false", default_missing_value = "true", value_parser = parse_bool)]
    pub(super) use_service_account_credentials: bool,
}

/// The "cloud-node-controller" section.
#[derive(Debug, Clone, Args)]
pub(crate) struct CloudNodeController {
    /// Concurrent cloud lookups for node initialization (each a batch of nodes).
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = parse_positive)]
    pub(super) concurrent_node_syncs: u16,

    /// Workers updating node status (0: --concurrent-node-syncs); here
    /// status refreshes are batched lookups, so this changes nothing.
    #[arg(long, value_name = "N", value_parser = parse_i32)]
    pub(super) concurrent_node_status_updates: Option<i32>,
}

/// The "cloud-node-lifecycle-controller" section (upstream's newer
/// releases; older ones list `--node-monitor-period` under "generic").
#[derive(Debug, Clone, Args)]
pub(crate) struct CloudNodeLifecycleController {
    /// Workers syncing node status in the lifecycle controller; here one
    /// batched pass checks every node, so this changes nothing.
    #[arg(long, value_name = "N", value_parser = parse_i32)]
    pub(super) concurrent_node_lifecycle_syncs: Option<i32>,

    /// How often not-ready nodes are checked against the cloud.
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = duration::parse)]
    pub(super) node_monitor_period: Duration,
}

/// The "service-lb-controller" section.
#[derive(Debug, Clone, Args)]
pub(crate) struct ServiceLbController {
    /// Services allowed to sync concurrently.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = parse_positive)]
    pub(super) concurrent_service_syncs: u16,

    /// This CCM's own: read each load balancer's target health from the
    /// cloud for the Service's LoadBalancerTargetsHealthy condition; false
    /// makes no health read and leaves that condition out.
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_value = "true", default_missing_value = "true", value_parser = super::parse_bool)]
    pub(super) load_balancer_target_health: bool,
}

/// The "misc" section.
#[derive(Debug, Clone, Args)]
pub(crate) struct Misc {
    /// Path to a kubeconfig file with authorization and API server location.
    #[arg(long, value_name = "PATH", value_parser = parse_path)]
    pub(super) kubeconfig: Option<PathBuf>,

    /// The address of the Kubernetes API server (overrides any value in the kubeconfig).
    #[arg(long, value_name = "URL")]
    pub(super) master: Option<String>,

    /// How often node addresses and labels are refreshed from the cloud.
    #[arg(long, value_name = "DURATION", default_value = "5m", value_parser = duration::parse)]
    pub(super) node_status_update_frequency: Duration,
}

pub(super) fn parse_positive(text: &str) -> Result<u16, String> {
    match text.parse::<u16>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(format!("`{text}` is not a whole number from 1 to 65535")),
    }
}

/// pflag's `int32`.
fn parse_i32(text: &str) -> Result<i32, String> {
    text.parse::<i32>()
        .map_err(|_| format!("`{text}` is not a whole number"))
}

/// pflag's `float32`.
fn parse_f32(text: &str) -> Result<f64, String> {
    match text.parse::<f32>() {
        Ok(q) if q.is_finite() => Ok(f64::from(q)),
        _ => Err(format!("`{text}` is not a number of queries per second")),
    }
}

/// client-go's reading of `--kube-api-qps` and `--kube-api-burst`: 0 means
/// its defaults (5 and 10), a negative QPS means no client-side limit.
pub(super) fn api_limits(qps: f64, burst: i32) -> Result<(Option<f64>, u32), String> {
    let burst = match burst {
        0 => 10,
        b if b > 0 => b.unsigned_abs(),
        b => return Err(format!("--kube-api-burst: `{b}` is negative")),
    };
    let qps = if qps == 0.0 {
        Some(5.0)
    } else if qps < 0.0 {
        None
    } else {
        Some(qps)
    };
    Ok((qps, burst))
}
