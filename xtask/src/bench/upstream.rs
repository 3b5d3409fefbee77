//! The cloud calls upstream's Go controllers (k8s.io/cloud-provider,
//! `controllers/{node,nodelifecycle,service,route}`) make for the same work,
//! computed from their algorithm at upstream's default flags. Every number
//! is a lower bound for upstream: failures, throttled calls and their retries
//! are not counted.
//!
//! How the Go code reads (kubernetes/cloud-provider, master):
//! - cloud-node: `syncNode` calls `InstanceMetadata` once per tainted node,
//!   one node at a time (`--concurrent-node-syncs=1`), then updates the
//!   Node, patches its status and records a `Synced` event, all through the
//!   controller's own client (20 qps). `UpdateNodeStatus` runs at start and
//!   every `--node-status-update-frequency` (5 min) and calls
//!   `InstanceMetadata` for every initialized node.
//! - cloud-node-lifecycle: every `--node-monitor-period` (5 s), one
//!   `InstanceExists` (and `InstanceShutdown`) call per node that is not
//!   Ready; Ready nodes cost nothing.
//! - service: a "node-set sync" is `syncNodes`, run by the node worker for
//!   every node add, delete, or update that changes the node's exclusion
//!   label or provider ID. It calls `UpdateLoadBalancer` for every Service
//!   whose stable node set (names + provider IDs, without nodes being
//!   deleted, excluded or tainted ToBeDeletedByClusterAutoscaler) differs
//!   from the set it last synced: a change of membership updates every load
//!   balancer. Heartbeats and readiness changes never trigger one, and the
//!   100 s resync of the node informer replays unchanged nodes, which
//!   `shouldSyncUpdatedNode` drops: in a steady state there is no node-set
//!   sync at all. New Services cost one `EnsureLoadBalancer` each.
//! - route: `reconcileNodeRoutes` lists the cloud's routes every
//!   `--route-reconciliation-period` (10 s, `wait.NonSlidingUntil`),
//!   whatever changed, then creates one route per missing pod CIDR and
//!   deletes stale ones.

use std::time::Duration;

use super::harness::{CLOUD_LATENCY, CLOUD_QPS};

/// Upstream's `--node-status-update-frequency`.
const STATUS_REFRESH: Duration = Duration::from_secs(300);
/// Upstream's `--route-reconciliation-period`.
const ROUTE_PERIOD: Duration = Duration::from_secs(10);
/// Upstream's default `--kube-api-qps`, per controller client.
const KUBE_QPS: f64 = 20.0;

/// Upstream's calls of one interface operation.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Expected {
    /// The Go interface method.
    pub(crate) operation: &'static str,
    pub(crate) calls: f64,
    /// How the number was computed.
    pub(crate) basis: String,
}

/// Upstream's calls for one scenario, and how long its algorithm needs at
/// least.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Model {
    pub(crate) calls: Vec<Expected>,
    /// Seconds, and why, when a duration is part of the scenario.
    pub(crate) seconds: Option<(f64, String)>,
}

fn expected(operation: &'static str, calls: f64, basis: impl Into<String>) -> Expected {
    Expected {
        operation,
        calls,
        basis: basis.into(),
    }
}

fn route_lists(window: Duration) -> Expected {
    let lists = (window.as_secs_f64() / ROUTE_PERIOD.as_secs_f64()).ceil();
    expected(
        "ListRoutes",
        lists.max(1.0),
        format!("one list every 10 s over {:.0} s", window.as_secs_f64()),
    )
}

/// The 5-minute status refresh over `window`, prorated.
fn refresh(nodes: usize, window: Duration) -> Expected {
    let passes = window.as_secs_f64() / STATUS_REFRESH.as_secs_f64();
    expected(
        "InstanceMetadata",
        nodes as f64 * passes,
        format!(
            "{nodes} nodes × one refresh per 5 min, prorated to {:.0} s",
            window.as_secs_f64()
        ),
    )
}

/// `nodes` new nodes registering at once, initialized over `window`.
/// `kube_qps` is the client QPS both CCMs run with.
pub(crate) fn burst(nodes: usize, window: Duration, kube_qps: f64) -> Model {
    let n = nodes as f64;
    // One worker: per node a 50 ms call and 3 writes (Node, status, event)
    // through the controller's own client; the cloud allows 20 calls/s.
    let sequential = n * CLOUD_LATENCY.as_secs_f64();
    let cloud = n / CLOUD_QPS;
    let writes = 3.0 * n / kube_qps;
    Model {
        calls: vec![
            expected("InstanceMetadata", n, "one per node at initialization"),
            route_lists(window),
        ],
        seconds: Some((
            sequential.max(cloud).max(writes),
            format!(
                "the longest of {sequential:.0} s (one call of 50 ms per node, one worker), {cloud:.0} s (the cloud's 20 calls/s) and {writes:.0} s (3 writes per node at {kube_qps:.0} qps)"
            ),
        )),
    }
}

/// Routes for `nodes` nodes with pod CIDRs, from a CCM start, over `window`.
pub(crate) fn routes(nodes: usize, window: Duration) -> Model {
    let n = nodes as f64;
    let cloud = n / CLOUD_QPS;
    let writes = n / KUBE_QPS;
    Model {
        calls: vec![
            expected("Initialize", 1.0, "once at start"),
            expected(
                "InstanceMetadata",
                n,
                "the status refresh runs at start: one per node",
            ),
            expected("CreateRoute", n, "one per pod CIDR"),
            route_lists(window),
        ],
        seconds: Some((
            cloud.max(writes),
            format!(
                "the longer of {cloud:.0} s (the cloud's 20 calls/s) and {writes:.0} s (one NetworkUnavailable write per node at 20 qps)"
            ),
        )),
    }
}

/// `services` new LoadBalancer Services on `nodes` nodes, over `window`.
pub(crate) fn services(services: usize, nodes: usize, window: Duration) -> Model {
    let m = services as f64;
    let sequential = m * CLOUD_LATENCY.as_secs_f64();
    let cloud = m / CLOUD_QPS;
    // Finalizer, status, and the Ensuring/Ensured events.
    let writes = 4.0 * m / KUBE_QPS;
    Model {
        calls: vec![
            expected("EnsureLoadBalancer", m, "one per Service"),
            refresh(nodes, window),
            route_lists(window),
        ],
        seconds: Some((
            sequential.max(cloud).max(writes),
            format!(
                "the longest of {sequential:.0} s (one 50 ms call per Service, one worker), {cloud:.0} s (the cloud's 20 calls/s) and {writes:.0} s (4 writes per Service at 20 qps)"
            ),
        )),
    }
}

/// A steady cluster of `nodes` Ready nodes and `services` load balancers,
/// nothing changing, over `window`.
pub(crate) fn steady(nodes: usize, window: Duration) -> Model {
    Model {
        calls: vec![
            refresh(nodes, window),
            expected(
                "InstanceExists",
                0.0,
                "every node is Ready: only not-Ready nodes are checked",
            ),
            expected(
                "UpdateLoadBalancer",
                0.0,
                "no node-set change, so no node-set sync",
            ),
            route_lists(window),
        ],
        seconds: None,
    }
}

/// [`steady`] with upstream's alpha gate
/// `CloudControllerManagerWatchBasedRoutesReconciliation`: its route
/// controller lists routes on a node add, delete, pod-CIDR or address
/// change and at each node-informer resync (every 12 to 24 hours at the
/// default `--min-resync-period`), so none in a quiet window.
pub(crate) fn steady_watch_routes(nodes: usize, window: Duration) -> Model {
    let mut model = steady(nodes, window);
    for call in &mut model.calls {
        if call.operation == "ListRoutes" {
            call.calls = 0.0;
            call.basis = "with the gate: a list on node events and at each informer resync, every 12 to 24 h".into();
        }
    }
    model
}

/// Heartbeats of every node every 10 s over `window`.
pub(crate) fn heartbeats(nodes: usize, window: Duration) -> Model {
    let mut model = steady(nodes, window);
    for call in &mut model.calls {
        if call.operation == "UpdateLoadBalancer" {
            call.basis =
                "a heartbeat changes no exclusion label or provider ID: shouldSyncUpdatedNode drops it"
                    .into();
        }
    }
    model
}

/// `added` nodes registering and as many deleted at once, with `services`
/// load balancers on `nodes` nodes, over `window`.
pub(crate) fn churn(added: usize, services: usize, nodes: usize, window: Duration) -> Model {
    let mut metadata = refresh(nodes, window);
    metadata.calls += added as f64;
    metadata.basis = format!("{added} initializations + {}", metadata.basis);
    Model {
        calls: vec![
            expected(
                "UpdateLoadBalancer",
                2.0 * services as f64,
                format!(
                    "at least 2 node-set syncs × {services} load balancers: one for the membership change, one when the new nodes get their provider IDs"
                ),
            ),
            metadata,
            route_lists(window),
        ],
        seconds: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn calls(model: &Model, operation: &str) -> f64 {
        model
            .calls
            .iter()
            .filter(|c| c.operation == operation)
            .map(|c| c.calls)
            .sum()
    }

    #[test]
    fn a_burst_costs_one_metadata_call_per_node_and_a_list_every_ten_seconds() {
        let model = burst(5000, Duration::from_secs(25), 20.0);
        assert_eq!(calls(&model, "InstanceMetadata"), 5000.0);
        assert_eq!(calls(&model, "ListRoutes"), 3.0);
        let (seconds, _) = model.seconds.unwrap();
        assert_eq!(seconds, 750.0, "3 writes per node at 20 qps dominate");
    }

    #[test]
    fn an_hour_of_steady_state_refreshes_every_node_twelve_times() {
        let model = steady(5000, Duration::from_secs(3600));
        assert_eq!(calls(&model, "InstanceMetadata"), 60_000.0);
        assert_eq!(calls(&model, "ListRoutes"), 360.0);
        assert_eq!(calls(&model, "UpdateLoadBalancer"), 0.0);
        let gated = steady_watch_routes(5000, Duration::from_secs(3600));
        assert_eq!(calls(&gated, "InstanceMetadata"), 60_000.0);
        assert_eq!(
            calls(&gated, "ListRoutes"),
            0.0,
            "no list without a node event"
        );
    }

    #[test]
    fn churn_updates_every_load_balancer_at_least_twice() {
        let model = churn(50, 1000, 5000, Duration::from_secs(30));
        assert_eq!(calls(&model, "UpdateLoadBalancer"), 2000.0);
        assert_eq!(calls(&model, "InstanceMetadata"), 50.0 + 500.0);
    }
}
