//! Mutations in a dry run (`--dry-run`): the provider is called with its
//! mutating requests refused and recorded, and the plan says whether the
//! change is already in place.

use std::future::Future;
use std::sync::Arc;

use ccm_cloud_provider::fence::RequestFence;
use ccm_cloud_provider::k8s_openapi::api::core::v1::Service;
use ccm_cloud_provider::{CloudError, Route};

use super::{DRY_RUN_RECHECK, MeteredCloud};
use crate::dry_run::{NOT_SENT, Plan, Planner, Verdict};

impl MeteredCloud {
    /// A mutation in a dry run: called with its mutating requests refused
    /// and recorded, and planned by what the provider tried to send.
    pub(super) async fn planned<T>(
        &self,
        plan: &Plan,
        operation: &'static str,
        batch: Option<usize>,
        object: String,
        call: impl Future<Output = Result<T, CloudError>>,
    ) -> Result<T, CloudError> {
        let controller = controller_of(operation);
        let not_sent = || CloudError::Retry {
            after: DRY_RUN_RECHECK,
            reason: NOT_SENT.to_owned(),
        };
        if !self.inner.describes_requests() {
            plan.record(controller, &object, operation, Verdict::Unknown, Vec::new());
            return Err(not_sent());
        }
        let planner = Arc::new(Planner::default());
        let fence: Arc<dyn RequestFence> = planner.clone();
        let scoped = ccm_cloud_provider::fence::scope(fence, call);
        let result = self.metered(operation, batch, false, scoped).await;
        let refused = planner.take();
        if refused.is_empty() {
            // A failed read is an ordinary failure, planned again on retry.
            if result.is_ok() {
                plan.record(
                    controller,
                    &object,
                    operation,
                    Verdict::AlreadyInPlace,
                    refused,
                );
            }
            return result;
        }
        plan.record(
            controller,
            &object,
            operation,
            Verdict::WouldChange,
            refused,
        );
        Err(not_sent())
    }
}

/// The controller behind a mutating operation, for the dry run's plan.
fn controller_of(operation: &str) -> &'static str {
    match operation {
        "create_route" | "delete_route" => "route",
        "sync_services" => "service-observer",
        "tag_instances" | "untag_instances" => "tagging",
        "delete_owned" => "audit",
        _ => "service",
    }
}

/// A Service as the plan names it: `namespace/name`.
pub(super) fn service_key(service: &Service) -> String {
    format!(
        "{}/{}",
        service.metadata.namespace.as_deref().unwrap_or_default(),
        service.metadata.name.as_deref().unwrap_or_default()
    )
}

/// A route as the plan names it: its CIDR and target node.
pub(super) fn route_key(route: &Route) -> String {
    format!("{} -> {}", route.destination_cidr, route.target_node)
}
