//! The verdict on one Service: the provider's annotation schema and its
//! offline check, the same two the service controller applies.

use ccm_cloud_provider::annotations::Finding;
use ccm_cloud_provider::{CloudError, LoadBalancer};
use ccm_controllers::wants_load_balancer;
use k8s_openapi::api::core::v1::Service;

/// Which problems admission denies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Policy {
    /// Only what upstream's cloud-controller-manager fails the Service on
    /// too, as the schema says per key; every other problem is admitted
    /// with a warning, so a manifest that applied with the Go CCM applies.
    #[default]
    Upstream,
    /// Every malformed value, unknown key and immutable change, and every
    /// refusal of the provider's own check (`--webhook-strict`).
    Strict,
}

impl Policy {
    fn denies(self, finding: &Finding) -> bool {
        match self {
            Self::Upstream => finding.upstream_fails(),
            Self::Strict => finding.kind.refuses(),
        }
    }
}

/// What admission says about a Service.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Verdict {
    /// `Some(why)` when the Service is refused.
    pub(crate) refusal: Option<String>,
    /// Shown by kubectl as `Warning:` lines; the Service is admitted.
    pub(crate) warnings: Vec<String>,
}

/// The verdict on `service` (and `old`, the stored Service on an update)
/// under `policy`. A Service that wants no load balancer from this CCM
/// (another type, or a `loadBalancerClass`), one another controller
/// implements (the provider's `check_service` says `ImplementedElsewhere`),
/// and any Service when the provider has no load balancers or describes no
/// annotations, is admitted without a word.
pub(crate) fn decide(
    load_balancer: Option<&dyn LoadBalancer>,
    old: Option<&Service>,
    service: &Service,
    policy: Policy,
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
    let old = old.filter(|old| wants_load_balancer(old));
    // Only what this request introduces is refused: an update that keeps a
    // problem the stored Service already had (a finalizer or status write
    // by the service controller, a label change by its owner) is admitted,
    // as the API server's own validation ratchets.
    let before: Vec<Finding> = old.map(|old| schema.review(None, old)).unwrap_or_default();
    let findings = schema.review(old, service);
    // What the schema cannot see (combinations only the provider's parser
    // checks) is judged in the provider's own words, as the service
    // controller's Warning event would quote them, by what upstream does
    // when the key it names is at fault; a key the schema already found at
    // fault is not said twice.
    let refused_by_provider = checked
        .as_ref()
        .and_then(|c| c.as_ref().err())
        .and_then(|err| schema.refusal(err, service))
        .filter(|r| !findings.iter().any(|f| f.key == r.key && f.kind == r.kind));
    let kept_by_provider = |finding: &Finding| {
        old.and_then(|old| load_balancer.check_service(old))
            .and_then(Result::err)
            .is_some_and(|was| was.to_string() == finding.message)
    };
    let (refused, warned): (Vec<_>, Vec<_>) = findings
        .into_iter()
        .map(|f| {
            let kept = before.contains(&f);
            (f, kept)
        })
        .chain(refused_by_provider.map(|f| {
            let kept = kept_by_provider(&f);
            (f, kept)
        }))
        .partition(|(f, kept)| policy.denies(f) && !kept);
    let refusal = (!refused.is_empty()).then(|| {
        refused
            .iter()
            .map(|(f, _)| f.message.as_str())
            .collect::<Vec<_>>()
            .join("; ")
    });
    let warnings = warned.iter().map(|(f, _)| f.warning()).collect();
    Verdict { refusal, warnings }
}
