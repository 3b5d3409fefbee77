//! Upstream's AWS API metrics, per provider instance:
//!
//! - `cloudprovider_aws_api_request_duration_seconds{request}`: latency of
//!   successful calls;
//! - `cloudprovider_aws_api_request_errors{request}`: failed calls, under
//!   exactly upstream's sample name (see [`UntypedCounter`]);
//! - `cloudprovider_aws_api_throttled_requests_total{operation_name}`: calls
//!   AWS refused with a throttling error;
//! - `cloudprovider_aws_api_response_status_total{service,operation,status_code}`:
//!   calls that ended in an HTTP error status (400 and up), counted once per
//!   call after its retries, as upstream v1.37+ (see [`crate::api`]).
//!
//! `request` uses upstream's snake_case names (`describe_instance`, ...);
//! `operation_name` and `operation` are the API's own (`DescribeInstances`);
//! `service` is the SDK's service ID (`EC2`, `Elastic Load Balancing v2`).

use std::time::Duration;

use prometheus_client::encoding::{EncodeLabelSet, EncodeMetric, MetricEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::metrics::{MetricType, TypedMetric};
use prometheus_client::registry::Registry;

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    request: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OperationLabels {
    operation_name: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StatusLabels {
    service: String,
    operation: String,
    status_code: String,
}

/// Prometheus' default buckets, as upstream's histogram uses.
const BUCKETS: [f64; 11] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// A counter exposed under its bare name. OpenMetrics requires a counter's
/// samples to end in `_total`, but upstream's Go client exposes
/// `cloudprovider_aws_api_request_errors` without it; typed `unknown`, the
/// sample keeps upstream's name, so existing dashboards and alerts match.
#[derive(Debug, Default, Clone)]
struct UntypedCounter(Counter);

impl TypedMetric for UntypedCounter {
    const TYPE: MetricType = MetricType::Unknown;
}

impl EncodeMetric for UntypedCounter {
    fn encode(&self, mut encoder: MetricEncoder<'_>) -> Result<(), std::fmt::Error> {
        encoder.encode_gauge(&self.0.get())
    }

    fn metric_type(&self) -> MetricType {
        Self::TYPE
    }
}

type Histograms = Family<RequestLabels, Histogram, fn() -> Histogram>;

/// The provider's registry of AWS API metrics.
#[derive(Debug)]
pub(crate) struct ApiMetrics {
    registry: Registry,
    durations: Histograms,
    errors: Family<RequestLabels, UntypedCounter>,
    throttled: Family<OperationLabels, Counter>,
    statuses: Family<StatusLabels, Counter>,
}

impl Default for ApiMetrics {
    fn default() -> Self {
        let durations: Histograms = Family::new_with_constructor(|| Histogram::new(BUCKETS));
        let errors = Family::<RequestLabels, UntypedCounter>::default();
        let throttled = Family::<OperationLabels, Counter>::default();
        let statuses = Family::<StatusLabels, Counter>::default();
        let mut registry = Registry::default();
        registry.register(
            "cloudprovider_aws_api_request_duration_seconds",
            "Latency of AWS API calls",
            durations.clone(),
        );
        registry.register(
            "cloudprovider_aws_api_request_errors",
            "AWS API errors",
            errors.clone(),
        );
        // prometheus-client appends `_total` to counters.
        registry.register(
            "cloudprovider_aws_api_throttled_requests",
            "AWS API throttled requests",
            throttled.clone(),
        );
        registry.register(
            "cloudprovider_aws_api_response_status",
            "AWS API error response status code counts (terminal, after retries are exhausted)",
            statuses.clone(),
        );
        Self {
            registry,
            durations,
            errors,
            throttled,
            statuses,
        }
    }
}

impl ApiMetrics {
    /// A call of `operation` succeeded after `elapsed`.
    pub(crate) fn succeeded(&self, operation: &str, elapsed: Duration) {
        self.durations
            .get_or_create(&request(operation))
            .observe(elapsed.as_secs_f64());
    }

    /// A call of `operation` failed.
    pub(crate) fn failed(&self, operation: &str) {
        self.errors.get_or_create(&request(operation)).0.inc();
    }

    /// AWS throttled a call of `operation`.
    pub(crate) fn throttled(&self, operation: &str) {
        self.throttled
            .get_or_create(&OperationLabels {
                operation_name: operation.to_owned(),
            })
            .inc();
    }

    /// A call of `service`'s `operation` ended with the HTTP error `status`.
    pub(crate) fn ended_in_status(&self, service: &str, operation: &str, status: u16) {
        self.statuses
            .get_or_create(&StatusLabels {
                service: service.to_owned(),
                operation: operation.to_owned(),
                status_code: status.to_string(),
            })
            .inc();
    }

    /// Appends the metrics in the OpenMetrics text format, without `# EOF`.
    pub(crate) fn encode(&self, out: &mut String) {
        // Writing to a String cannot fail.
        let _ = prometheus_client::encoding::text::encode_registry(out, &self.registry);
    }
}

fn request(operation: &str) -> RequestLabels {
    RequestLabels {
        request: request_name(operation),
    }
}

/// Upstream's `request` label: snake_case, with its irregular names.
fn request_name(operation: &str) -> String {
    match operation {
        "DescribeInstances" => return "describe_instance".to_owned(),
        "DescribeVolumes" => return "describe_volume".to_owned(),
        _ => {}
    }
    let mut out = String::with_capacity(operation.len() + 4);
    for (i, c) in operation.chars().enumerate() {
        if c.is_ascii_uppercase() {
            if i > 0 {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_labels_follow_upstreams_names() {
        assert_eq!(request_name("DescribeInstances"), "describe_instance");
        assert_eq!(request_name("DescribeVolumes"), "describe_volume");
        assert_eq!(
            request_name("DescribeSecurityGroups"),
            "describe_security_groups"
        );
        assert_eq!(request_name("CreateLoadBalancer"), "create_load_balancer");
    }

    #[test]
    fn encodes_upstream_metric_names_with_their_labels() {
        let metrics = ApiMetrics::default();
        metrics.succeeded("DescribeRouteTables", Duration::from_millis(30));
        metrics.failed("CreateRoute");
        metrics.throttled("DescribeInstances");
        metrics.ended_in_status("Elastic Load Balancing v2", "DescribeLoadBalancers", 400);
        let mut out = String::new();
        metrics.encode(&mut out);
        assert!(
            out.contains(
                "cloudprovider_aws_api_request_duration_seconds_count{request=\"describe_route_tables\"} 1"
            ),
            "{out}"
        );
        assert!(
            out.contains("cloudprovider_aws_api_request_errors{request=\"create_route\"} 1"),
            "{out}"
        );
        assert!(!out.contains("request_errors_total"), "{out}");
        assert!(
            out.contains(
                "cloudprovider_aws_api_throttled_requests_total{operation_name=\"DescribeInstances\"} 1"
            ),
            "{out}"
        );
        assert!(
            out.contains(
                "cloudprovider_aws_api_response_status_total{service=\"Elastic Load Balancing v2\",operation=\"DescribeLoadBalancers\",status_code=\"400\"} 1"
            ),
            "{out}"
        );
        assert!(!out.contains("# EOF"), "{out}");
    }
}
