//! Prometheus metrics shared by every controller, and the `/metrics` text.

use std::sync::Arc;

use ccm_cloud_provider::CloudProvider;
use parking_lot::Mutex;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::activity::Activity;

/// Labels naming a controller.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct ControllerLabels {
    /// The controller's name (`cloud-node`, `service`, ...).
    pub(crate) controller: String,
}

/// Labels of a reconcile outcome.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct ReconcileLabels {
    /// The controller's name.
    pub(crate) controller: String,
    /// `success` or the error kind.
    pub(crate) result: String,
}

/// Labels of a cloud-provider call.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct CloudCallLabels {
    /// The interface method, such as `instances_metadata`.
    pub(crate) operation: String,
    /// `success` or the [`ccm_cloud_provider::CloudError::kind`].
    pub(crate) outcome: String,
}

/// Labels naming a cloud-provider operation.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct OperationLabels {
    /// The interface method.
    pub(crate) operation: String,
}

/// Labels naming a class of cloud mutations.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct ClassLabels {
    /// `routes` or `load_balancers`.
    pub(crate) class: String,
}

fn duration_histogram() -> Histogram {
    // 1 ms .. ~65 s
    Histogram::new(exponential_buckets(0.001, 2.0, 17))
}

/// Every metric the framework records. Cheap to clone; all clones record
/// into the same series.
#[derive(Clone)]
pub struct Metrics {
    registry: Arc<Mutex<Registry>>,
    pub(crate) reconciles: Family<ReconcileLabels, Counter>,
    pub(crate) reconcile_duration: Family<ControllerLabels, Histogram, fn() -> Histogram>,
    pub(crate) queue_depth: Family<ControllerLabels, Gauge>,
    pub(crate) cloud_calls: Family<CloudCallLabels, Counter>,
    pub(crate) cloud_call_duration: Family<OperationLabels, Histogram, fn() -> Histogram>,
    pub(crate) cloud_batch_size: Family<OperationLabels, Histogram, fn() -> Histogram>,
    controller_running: Family<ControllerLabels, Gauge>,
    pub(crate) concurrency_limit: Family<ClassLabels, Gauge>,
    pub(crate) activity: Activity,
    pub(crate) stalls: crate::stalls::Stalls,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// A fresh registry with the framework's metrics registered.
    pub fn new() -> Self {
        let mut registry = Registry::default();
        let reconciles = Family::<ReconcileLabels, Counter>::default();
        registry.register(
            "ccm_controller_reconciles",
            "Reconciles by controller and result (success or error kind)",
            reconciles.clone(),
        );
        let reconcile_duration =
            Family::<ControllerLabels, Histogram, fn() -> Histogram>::new_with_constructor(
                duration_histogram,
            );
        registry.register(
            "ccm_controller_reconcile_duration_seconds",
            "Time spent in one reconcile, by controller",
            reconcile_duration.clone(),
        );
        let queue_depth = Family::<ControllerLabels, Gauge>::default();
        registry.register(
            "ccm_controller_queue_depth",
            "Objects waiting to be reconciled, by controller",
            queue_depth.clone(),
        );
        let cloud_calls = Family::<CloudCallLabels, Counter>::default();
        registry.register(
            "ccm_cloud_provider_calls",
            "Cloud-provider interface calls by operation and outcome",
            cloud_calls.clone(),
        );
        let cloud_call_duration =
            Family::<OperationLabels, Histogram, fn() -> Histogram>::new_with_constructor(
                duration_histogram,
            );
        registry.register(
            "ccm_cloud_provider_call_duration_seconds",
            "Duration of cloud-provider interface calls, by operation",
            cloud_call_duration.clone(),
        );
        let cloud_batch_size =
            Family::<OperationLabels, Histogram, fn() -> Histogram>::new_with_constructor(|| {
                Histogram::new(exponential_buckets(1.0, 2.0, 12))
            });
        registry.register(
            "ccm_cloud_provider_batch_size",
            "Nodes answered per batch call, by operation",
            cloud_batch_size.clone(),
        );
        let controller_running = Family::<ControllerLabels, Gauge>::default();
        registry.register(
            "ccm_controller_running",
            "1 for each enabled controller that runs, 0 for one that is off (capability absent, flags, or not built)",
            controller_running.clone(),
        );
        let concurrency_limit = Family::<ClassLabels, Gauge>::default();
        registry.register(
            "ccm_cloud_provider_concurrency_limit",
            "Cloud mutations of a class allowed in flight at once: halved when the cloud throttles, grown back by one per window of successes",
            concurrency_limit.clone(),
        );
        Self {
            concurrency_limit,
            activity: Activity::default(),
            stalls: crate::stalls::Stalls::default(),
            controller_running,
            registry: Arc::new(Mutex::new(registry)),
            reconciles,
            reconcile_duration,
            queue_depth,
            cloud_calls,
            cloud_call_duration,
            cloud_batch_size,
        }
    }

    /// What the controllers recording into these metrics are doing, for a
    /// test's barrier that waits for quiet.
    pub fn activity(&self) -> Activity {
        self.activity.clone()
    }

    /// The reconcile, of any controller, that has been running longest
    /// (see [`crate::STALLED_AFTER`]).
    pub fn longest_reconcile(&self) -> Option<crate::stalls::Running> {
        self.stalls.longest()
    }

    /// Lets a controller register its own metrics (done once, at start-up).
    pub fn register(&self, f: impl FnOnce(&mut Registry)) {
        f(&mut self.registry.lock());
    }

    /// Records whether enabled controller `controller` runs.
    pub fn set_controller_running(&self, controller: &str, running: bool) {
        self.controller_running
            .get_or_create(&ControllerLabels {
                controller: controller.into(),
            })
            .set(i64::from(running));
    }

    /// The OpenMetrics text for `/metrics`: the framework's and controllers'
    /// metrics, then the provider's own.
    pub fn encode(&self, provider: Option<&dyn CloudProvider>) -> String {
        let mut out = String::new();
        let registry = self.registry.lock();
        // Writing to a String cannot fail.
        let _ = prometheus_client::encoding::text::encode_registry(&mut out, &registry);
        drop(registry);
        if let Some(provider) = provider {
            provider.encode_metrics(&mut out);
            if !out.is_empty() && !out.ends_with('\n') {
                out.push('\n');
            }
        }
        let _ = prometheus_client::encoding::text::encode_eof(&mut out);
        out
    }
}
