//! Upstream's work-item error counter of cloud-provider-aws's controllers,
//! under the provider's prefix
//! (`cloudprovider_aws_tagging_controller_work_item_errors_total`).

use ccm_runtime::Metrics;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;

/// Upstream's label for an error after which the node is retried.
pub(crate) const TOTAL_ERRORS: &str = "total_errors";
/// Upstream's label for the error after which the node is given up on.
pub(crate) const RETRIES_EXHAUSTED: &str = "errors_after_retries_exhausted";

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ErrorLabels {
    error_type: String,
    instance_id: String,
}

/// `<prefix>_<controller>_controller_work_item_errors_total`.
#[derive(Debug, Clone)]
pub(crate) struct WorkItemErrors(Family<ErrorLabels, Counter>);

impl WorkItemErrors {
    /// Registers the counter of `controller` (`tagging`, `nodeipam`).
    pub(crate) fn register(metrics: &Metrics, prefix: &str, controller: &str) -> Self {
        let family = Family::<ErrorLabels, Counter>::default();
        metrics.register(|registry| {
            registry.register(
                format!("{prefix}_{controller}_controller_work_item_errors"),
                "any error in dequeueing the work queue and processing workItem",
                family.clone(),
            );
        });
        Self(family)
    }

    /// Counts one error of kind `error_type` for the node of `provider_id`.
    pub(crate) fn record(&self, error_type: &str, provider_id: &str) {
        let instance_id = provider_id.rsplit('/').next().unwrap_or_default();
        self.0
            .get_or_create(&ErrorLabels {
                error_type: error_type.to_owned(),
                instance_id: instance_id.to_owned(),
            })
            .inc();
    }
}
