//! The metrics of the load-balancer conditions:
//! `ccm_service_time_to_ingress_seconds` (a Service's creation to its first
//! ingress), `ccm_service_time_to_healthy_seconds` (a load-balancer change
//! to every target healthy) and `ccm_service_unhealthy_targets{namespace,service}`
//! (targets not healthy, per Service whose health the provider can tell).

use ccm_runtime::Context;
use k8s_openapi::api::core::v1::Service;
use kube::ResourceExt;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};

/// A Service's labels.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct ServiceLabels {
    namespace: String,
    service: String,
}

impl ServiceLabels {
    fn of(service: &Service) -> Self {
        Self {
            namespace: service.namespace().unwrap_or_default(),
            service: service.name_any(),
        }
    }
}

/// Targets not healthy per Service.
#[derive(Debug, Clone, Default)]
pub(super) struct UnhealthyTargets(Family<ServiceLabels, Gauge>);

impl UnhealthyTargets {
    /// `service` has `count` targets that are not healthy.
    pub(super) fn set(&self, service: &Service, count: usize) {
        self.0
            .get_or_create(&ServiceLabels::of(service))
            .set(i64::try_from(count).unwrap_or(i64::MAX));
    }

    /// `service` is gone, or its health cannot be told.
    pub(super) fn forget(&self, service: &Service) {
        self.0.remove(&ServiceLabels::of(service));
    }
}

/// The three metrics, registered.
#[derive(Debug, Clone)]
pub(super) struct ConditionMetrics {
    /// A Service's creation to its first ingress.
    pub(super) time_to_ingress: Histogram,
    /// A load-balancer change to every target healthy.
    pub(super) time_to_healthy: Histogram,
    /// Targets not healthy, per Service.
    pub(super) unhealthy: UnhealthyTargets,
}

impl ConditionMetrics {
    pub(super) fn register(ctx: &Context) -> Self {
        // 1 s to about 68 min: AWS NLB targets take minutes.
        let buckets = || Histogram::new(exponential_buckets(1.0, 2.0, 13));
        let metrics = Self {
            time_to_ingress: buckets(),
            time_to_healthy: buckets(),
            unhealthy: UnhealthyTargets::default(),
        };
        ctx.metrics.register(|registry| {
            registry.register(
                "ccm_service_time_to_ingress_seconds",
                "Seconds from a LoadBalancer Service's creation to its first status.loadBalancer.ingress",
                metrics.time_to_ingress.clone(),
            );
            registry.register(
                "ccm_service_time_to_healthy_seconds",
                "Seconds from a change to a Service's load balancer until the cloud reports every target healthy",
                metrics.time_to_healthy.clone(),
            );
            registry.register(
                "ccm_service_unhealthy_targets",
                "Targets of a Service's load balancer that the cloud does not report healthy (unhealthy or initializing)",
                metrics.unhealthy.0.clone(),
            );
        });
        metrics
    }
}
