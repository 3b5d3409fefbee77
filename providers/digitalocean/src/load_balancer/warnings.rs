//! Annotations that take no effect on the load balancer a Service got: the
//! keys a network load balancer has no use for are a Warning event on the
//! Service, and the load balancer is otherwise ensured as asked. (Unknown
//! keys are the service controller's to report, from [`ann::SCHEMA`].)

use ccm_cloud_provider::LoadBalancerWarning;
use ccm_cloud_provider::k8s_openapi::api::core::v1::Service;

use super::annotations::{self as ann, Reader};
use crate::config::LoadBalancerType;

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
    if kind != LoadBalancerType::RegionalNetwork {
        return Vec::new();
    }
    let a = Reader::new(service.metadata.annotations.as_ref());
    let ignored: Vec<&str> = REGIONAL_ONLY
        .iter()
        .copied()
        .filter(|k| a.raw(k).is_some())
        .collect();
    if ignored.is_empty() {
        return Vec::new();
    }
    vec![LoadBalancerWarning {
        reason: "AnnotationIgnored".to_owned(),
        message: format!(
            "{} take no effect on a REGIONAL_NETWORK load balancer, which forwards each port as TCP or UDP; set {}: REGIONAL for HTTP(S) forwarding",
            ignored.join(", "),
            ann::TYPE
        ),
    }]
}
