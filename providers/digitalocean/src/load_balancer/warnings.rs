//! Annotations that take no effect never pass silently: a key under
//! upstream's prefixes that upstream does not know (a typo, named with the
//! nearest known key), and keys a network load balancer has no use for.
//! Both are Warning events on the Service; the load balancer is otherwise
//! ensured as asked.

use cloud_provider::LoadBalancerWarning;
use cloud_provider::k8s_openapi::api::core::v1::Service;

use super::annotations as ann;
use crate::config::LoadBalancerType;

/// The prefixes whose keys are checked against [`ann::KNOWN`].
const PREFIXES: &[&str] = &[
    ann::PREFIX,
    ann::RECORD_PREFIX,
    "service.kubernetes.io/do-loadbalancer-",
];

/// What decides the forwarding rules of a `REGIONAL` load balancer, which a
/// `REGIONAL_NETWORK` one ignores (it forwards each port as TCP or UDP), as
/// upstream's `buildRegionalNetworkForwardingRule` does.
const REGIONAL_ONLY: &[&str] = &[
    ann::PROTOCOL,
    ann::HTTP_PORTS,
    ann::TLS_PORTS,
    ann::HTTP2_PORTS,
    ann::HTTP3_PORT,
    ann::CERTIFICATE_ID,
    ann::CERTIFICATE_NAME,
    ann::TLS_PASSTHROUGH,
];

/// The warnings for `service`, whose load balancer is of type `kind`.
pub(crate) fn of(service: &Service, kind: LoadBalancerType) -> Vec<LoadBalancerWarning> {
    let annotations = service.metadata.annotations.as_ref();
    let mut known: Vec<&str> = ann::KNOWN.to_vec();
    known.push(ann::DISOWN);
    let mut warnings =
        cloud_provider::annotations::unknown_annotation_warnings(annotations, PREFIXES, &known);
    if kind == LoadBalancerType::RegionalNetwork {
        let ignored: Vec<&str> = REGIONAL_ONLY
            .iter()
            .copied()
            .filter(|k| annotations.is_some_and(|a| a.contains_key(*k)))
            .collect();
        if !ignored.is_empty() {
            warnings.push(LoadBalancerWarning {
                reason: "AnnotationIgnored".to_owned(),
                message: format!(
                    "{} take no effect on a REGIONAL_NETWORK load balancer, which forwards each port as TCP or UDP; set {}: REGIONAL for HTTP(S) forwarding",
                    ignored.join(", "),
                    ann::TYPE
                ),
            });
        }
    }
    warnings
}
