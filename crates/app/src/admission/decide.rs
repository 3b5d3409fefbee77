//! The verdict on one Service: the provider's annotation schema and its
//! offline check, the same two the service controller applies.

use ccm_controllers::wants_load_balancer;
use cloud_provider::annotations::Finding;
use cloud_provider::{CloudError, LoadBalancer};
use k8s_openapi::api::core::v1::Service;

/// What admission says about a Service.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Verdict {
    /// `Some(why)` when the Service is refused.
    pub(crate) refusal: Option<String>,
    /// Shown by kubectl as `Warning:` lines; the Service is admitted.
    pub(crate) warnings: Vec<String>,
}

/// The verdict on `service` (and `old`, the stored Service on an update).
/// A Service that wants no load balancer from this CCM (another type, or a
/// `loadBalancerClass`), one another controller implements (the provider's
/// `check_service` says `ImplementedElsewhere`), and any Service when the
/// provider has no load balancers or describes no annotations, is admitted
/// without a word.
pub(crate) fn decide(
    load_balancer: Option<&dyn LoadBalancer>,
    old: Option<&Service>,
    service: &Service,
) -> Verdict {
    if !wants_load_balancer(service) {
        return Verdict::default();
    }
    let Some(load_balancer) = load_balancer else {
        return Verdict::default();
    };
    let checked = load_balancer.check_service(service);
    if matches!(checked, Some(Err(CloudError::ImplementedElsewhere))) {
        return Verdict::default();
    }
    let Some(schema) = load_balancer.annotation_schema() else {
        return Verdict::default();
    };
    // Only what this request introduces is refused: an update that keeps a
    // problem the stored Service already had (a finalizer or status write
    // by the service controller, a label change by its owner) is admitted,
    // as the API server's own validation ratchets.
    let before: Vec<Finding> = old
        .filter(|old| wants_load_balancer(old))
        .map(|old| schema.review(None, old))
        .unwrap_or_default();
    let findings = schema.review(old, service);
    let (refused, warned): (Vec<_>, Vec<_>) = findings
        .into_iter()
        .partition(|f| f.kind.refuses() && !before.contains(f));
    let mut refusal = (!refused.is_empty()).then(|| {
        refused
            .iter()
            .map(|f| f.message.as_str())
            .collect::<Vec<_>>()
            .join("; ")
    });
    // What the schema cannot see (combinations only the provider's parser
    // checks) is refused in the provider's own words, as the service
    // controller's Warning event would quote them.
    if refusal.is_none()
        && let Some(Err(err @ CloudError::InvalidInput { .. })) = checked
    {
        refusal = Some(err.to_string());
    }
    Verdict {
        refusal,
        warnings: warned.into_iter().map(|f| f.message).collect(),
    }
}
