//! Upstream's `cloud_node_lifecycle_controller_*` metrics (k8s.io/
//! cloud-provider 1.37, ALPHA there): how long each monitor pass took, and
//! the cloud's answers about instances.
//!
//! Upstream checks nodes one by one and counts one call per check; our
//! checks are batched, so a batch call counts once per node it answers
//! for, which is the count upstream would show for the same nodes.

use std::sync::Arc;
use std::time::Duration;

use ccm_cloud_provider::{BatchResult, CloudError};
use ccm_runtime::{BatchCall, Metrics};
use futures::FutureExt;
use k8s_openapi::api::core::v1::Node;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};

/// A check the controller asks the cloud: upstream's `operation` label.
/// (Upstream also has `instance_metadata`, for a node without a provider
/// ID on a provider without `InstancesV2`; we never make that call here.)
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Operation {
    /// Whether the node's instance exists.
    InstanceExists,
    /// Whether the node's instance is shut down.
    InstanceShutdown,
}

impl Operation {
    fn label(self) -> &'static str {
        match self {
            Self::InstanceExists => "instance_exists",
            Self::InstanceShutdown => "instance_shutdown",
        }
    }
}

/// Upstream's label names, in its order.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CallLabels {
    operation: &'static str,
    result: &'static str,
}

/// Upstream's `result` label for one node's answer: an existence check
/// answering "no" is `instance_not_found`, as upstream.
fn answer_label(operation: Operation, answer: &Result<bool, CloudError>) -> &'static str {
    match answer {
        Ok(false) if operation == Operation::InstanceExists => "instance_not_found",
        Ok(_) => "success",
        Err(err) => error_label(err),
    }
}

/// Upstream's `result` label for a failed call.
fn error_label(err: &CloudError) -> &'static str {
    match err {
        CloudError::NotImplemented => "not_implemented",
        CloudError::InstanceNotFound => "instance_not_found",
        _ => "error",
    }
}

/// The cloud-node-lifecycle controller's metrics.
#[derive(Debug, Clone)]
pub(super) struct LifecycleMetrics {
    monitor_duration: Histogram,
    calls: Family<CallLabels, Counter>,
}

impl LifecycleMetrics {
    /// Registers upstream's metrics in `metrics`.
    pub(super) fn register(metrics: &Metrics) -> Self {
        let this = Self {
            // 1 ms to about 16 s, as upstream.
            monitor_duration: Histogram::new(exponential_buckets(0.001, 2.0, 15)),
            calls: Family::default(),
        };
        metrics.register(|registry| {
            // Upstream's help; prometheus-client adds the final period.
            registry.register(
                "cloud_node_lifecycle_controller_monitor_nodes_duration_seconds",
                "A metric measuring the duration in seconds of a single MonitorNodes loop execution",
                this.monitor_duration.clone(),
            );
            registry.register(
                "cloud_node_lifecycle_controller_cloud_provider_calls",
                "The total number of cloud provider API calls, labeled by operation and result",
                this.calls.clone(),
            );
        });
        this
    }

    /// Records one whole monitor pass.
    pub(super) fn observe_pass(&self, took: Duration) {
        self.monitor_duration.observe(took.as_secs_f64());
    }

    /// `call`, counting each node's answer under `operation`; a call
    /// dropped before it answered (the controller stopping) counts its
    /// nodes as `canceled`, as upstream counts a call whose context ended.
    pub(super) fn counted(&self, operation: Operation, call: BatchCall<bool>) -> BatchCall<bool> {
        let calls = self.calls.clone();
        Arc::new(move |nodes: Vec<Arc<Node>>| {
            let mut unanswered = Unanswered {
                calls: calls.clone(),
                operation,
                nodes: nodes.len(),
            };
            let answer = call(nodes);
            async move {
                let result = answer.await;
                unanswered.answered(&result);
                result
            }
            .boxed()
        })
    }
}

/// The nodes of a batch call in flight, counted `canceled` if the call is
/// dropped before it answers.
struct Unanswered {
    calls: Family<CallLabels, Counter>,
    operation: Operation,
    nodes: usize,
}

impl Unanswered {
    fn count(&self, result: &'static str, nodes: usize) {
        let labels = CallLabels {
            operation: self.operation.label(),
            result,
        };
        self.calls
            .get_or_create(&labels)
            .inc_by(u64::try_from(nodes).unwrap_or(u64::MAX));
    }

    /// Counts the answer, one per node, and disarms the guard.
    fn answered(&mut self, result: &BatchResult<bool>) {
        let nodes = std::mem::take(&mut self.nodes);
        match result {
            Ok(answers) if answers.len() == nodes => {
                for answer in answers {
                    self.count(answer_label(self.operation, answer), 1);
                }
            }
            // The runtime answers each node with an error.
            Ok(_) => self.count("error", nodes),
            Err(err) => self.count(error_label(err), nodes),
        }
    }
}

impl Drop for Unanswered {
    fn drop(&mut self) {
        if self.nodes > 0 {
            self.count("canceled", self.nodes);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::future::pending;

    use super::*;

    fn call(answer: BatchResult<bool>) -> BatchCall<bool> {
        Arc::new(move |_| {
            let answer = answer.clone();
            async move { answer }.boxed()
        })
    }

    fn nodes(n: usize) -> Vec<Arc<Node>> {
        (0..n).map(|_| Arc::new(Node::default())).collect()
    }

    fn sample(metrics: &Metrics, operation: &str, result: &str) -> Option<u64> {
        let text = metrics.encode(None);
        let prefix = format!(
            "cloud_node_lifecycle_controller_cloud_provider_calls_total{{operation=\"{operation}\",result=\"{result}\"}} "
        );
        text.lines()
            .find_map(|line| line.strip_prefix(prefix.as_str()))
            .and_then(|n| n.trim().parse().ok())
    }

    #[tokio::test]
    async fn each_nodes_answer_counts_once_by_upstreams_result() {
        let metrics = Metrics::new();
        let lifecycle = LifecycleMetrics::register(&metrics);
        let exists = lifecycle.counted(
            Operation::InstanceExists,
            call(Ok(vec![
                Ok(true),
                Ok(false),
                Err(CloudError::InstanceNotFound),
                Err(CloudError::NotImplemented),
                Err(CloudError::msg("boom")),
            ])),
        );
        exists(nodes(5)).await.unwrap();
        let shutdown = lifecycle.counted(
            Operation::InstanceShutdown,
            call(Ok(vec![Ok(true), Ok(false)])),
        );
        shutdown(nodes(2)).await.unwrap();
        let failed = lifecycle.counted(
            Operation::InstanceShutdown,
            call(Err(CloudError::Throttled {
                retry_after: Duration::from_secs(1),
            })),
        );
        failed(nodes(3)).await.unwrap_err();
        let short = lifecycle.counted(Operation::InstanceShutdown, call(Ok(vec![Ok(true)])));
        short(nodes(4)).await.unwrap();

        let count = |op, result| sample(&metrics, op, result);
        assert_eq!(count("instance_exists", "success"), Some(1));
        assert_eq!(count("instance_exists", "instance_not_found"), Some(2));
        assert_eq!(count("instance_exists", "not_implemented"), Some(1));
        assert_eq!(count("instance_exists", "error"), Some(1));
        assert_eq!(
            count("instance_shutdown", "success"),
            Some(2),
            "false is an answer"
        );
        assert_eq!(
            count("instance_shutdown", "error"),
            Some(3 + 4),
            "a failed call and a short answer count every node"
        );
        assert_eq!(count("instance_exists", "canceled"), None);
        let help = "# HELP cloud_node_lifecycle_controller_cloud_provider_calls The total number of cloud provider API calls, labeled by operation and result.";
        assert!(
            metrics.encode(None).lines().any(|l| l == help),
            "upstream's help"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_call_dropped_before_it_answers_counts_as_canceled() {
        let metrics = Metrics::new();
        let lifecycle = LifecycleMetrics::register(&metrics);
        let never: BatchCall<bool> = Arc::new(|_| pending().boxed());
        let exists = lifecycle.counted(Operation::InstanceExists, never);
        let cut = tokio::time::timeout(Duration::from_secs(1), exists(nodes(3))).await;
        assert!(cut.is_err(), "the call never answers");
        assert_eq!(sample(&metrics, "instance_exists", "canceled"), Some(3));
        assert_eq!(sample(&metrics, "instance_exists", "error"), None);
    }

    #[test]
    fn the_pass_histogram_has_upstreams_buckets() {
        let metrics = Metrics::new();
        LifecycleMetrics::register(&metrics).observe_pass(Duration::from_millis(3));
        let text = metrics.encode(None);
        let bounds: Vec<&str> = text
            .lines()
            .filter(|l| {
                l.starts_with(
                    "cloud_node_lifecycle_controller_monitor_nodes_duration_seconds_bucket",
                )
            })
            .filter_map(|l| l.split("le=\"").nth(1)?.split('"').next())
            .collect();
        let upstream: Vec<String> = (0..15)
            .map(|i| format!("{}", 0.001 * f64::from(1u32 << i)))
            .chain(["+Inf".to_owned()])
            .collect();
        assert_eq!(bounds, upstream, "{text}");
        let help = "# HELP cloud_node_lifecycle_controller_monitor_nodes_duration_seconds A metric measuring the duration in seconds of a single MonitorNodes loop execution.";
        assert!(text.lines().any(|l| l == help), "upstream's help: {text}");
        assert!(
            text.contains("cloud_node_lifecycle_controller_monitor_nodes_duration_seconds_count 1"),
            "{text}"
        );
    }
}
