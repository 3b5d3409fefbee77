//! The route controller's metrics: upstream's
//! `route_controller_route_sync_total{outcome,trigger}` (k8s.io/
//! cloud-provider 1.37, ALPHA there), and our
//! `ccm_route_nodes_missing_routes`.

use ccm_runtime::Metrics;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;

use super::schedule::Trigger;

/// How a pass ended: upstream's `outcome` label.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum SyncOutcome {
    /// The pass could not start: the cloud's routes could not be listed. A
    /// failed create or delete within a pass is not an error, as upstream.
    Error,
    /// At least one route was created or deleted.
    Changed,
    /// Nothing was created or deleted.
    Noop,
}

impl SyncOutcome {
    fn label(self) -> &'static str {
        match self {
            Self::Error => "error",
            Self::Changed => "changed",
            Self::Noop => "noop",
        }
    }
}

/// Upstream's label names, in its order.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SyncLabels {
    outcome: &'static str,
    trigger: &'static str,
}

/// The route controller's metrics.
#[derive(Debug, Clone, Default)]
pub(super) struct RouteMetrics {
    syncs: Family<SyncLabels, Counter>,
    /// Nodes left without all their routes by the last completed pass.
    missing: Gauge,
}

impl RouteMetrics {
    /// Registers the route controller's metrics in `metrics`.
    pub(super) fn register(metrics: &Metrics) -> Self {
        let this = Self::default();
        metrics.register(|registry| {
            // Upstream's help; prometheus-client adds the final period.
            registry.register(
                "route_controller_route_sync",
                "A metric counting the number of route reconciles with the cloud provider, labeled by the trigger (periodic or node_change) and the outcome (error if the reconcile failed, changed if at least one route was created or deleted, otherwise noop)",
                this.syncs.clone(),
            );
            registry.register(
                "ccm_route_nodes_missing_routes",
                "Nodes the last route pass left without a route for each pod CIDR (NetworkUnavailable=True)",
                this.missing.clone(),
            );
        });
        this
    }

    /// Counts one finished pass.
    pub(super) fn record_sync(&self, outcome: SyncOutcome, trigger: Trigger) {
        self.syncs
            .get_or_create(&SyncLabels {
                outcome: outcome.label(),
                trigger: trigger.label(),
            })
            .inc();
    }

    /// Sets the nodes the last pass left without all their routes.
    pub(super) fn set_missing(&self, nodes: usize) {
        self.missing.set(i64::try_from(nodes).unwrap_or(i64::MAX));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passes_are_counted_by_upstreams_outcome_and_trigger() {
        let metrics = Metrics::new();
        let route = RouteMetrics::register(&metrics);
        route.record_sync(SyncOutcome::Changed, Trigger::NodeChange);
        route.record_sync(SyncOutcome::Noop, Trigger::Periodic);
        route.record_sync(SyncOutcome::Noop, Trigger::Periodic);
        route.record_sync(SyncOutcome::Error, Trigger::Periodic);
        let text = metrics.encode(None);
        for line in [
            "# HELP route_controller_route_sync A metric counting the number of route reconciles with the cloud provider, labeled by the trigger (periodic or node_change) and the outcome (error if the reconcile failed, changed if at least one route was created or deleted, otherwise noop).",
            "# TYPE route_controller_route_sync counter",
            "route_controller_route_sync_total{outcome=\"changed\",trigger=\"node_change\"} 1",
            "route_controller_route_sync_total{outcome=\"noop\",trigger=\"periodic\"} 2",
            "route_controller_route_sync_total{outcome=\"error\",trigger=\"periodic\"} 1",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} in {text}");
        }
        assert!(
            !text.contains("route_controller_route_sync_total "),
            "no unlabelled sample: {text}"
        );
    }
}
