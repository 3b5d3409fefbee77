//! `status.loadBalancer` of a Service: the provider's answer in Kubernetes
//! form, and comparing it with what the Service says.

use ccm_cloud_provider::LoadBalancerStatus;
use k8s_openapi::api::core::v1::{self as core, Service};

/// The provider's status as the Service's `status.loadBalancer.ingress`.
pub(crate) fn ingress_of(status: &LoadBalancerStatus) -> Vec<core::LoadBalancerIngress> {
    status
        .ingress
        .iter()
        .map(|i| core::LoadBalancerIngress {
            ip: i.ip.clone(),
            hostname: i.hostname.clone(),
            ip_mode: i.ip_mode.map(|m| m.as_str().to_owned()),
            ports: (!i.ports.is_empty()).then(|| {
                i.ports
                    .iter()
                    .map(|p| core::PortStatus {
                        port: p.port,
                        protocol: p.protocol.clone(),
                        error: p.error.clone(),
                    })
                    .collect()
            }),
        })
        .collect()
}

/// The Service's `status.loadBalancer.ingress` (empty when unset).
pub(crate) fn current_ingress(service: &Service) -> &[core::LoadBalancerIngress] {
    service
        .status
        .as_ref()
        .and_then(|s| s.load_balancer.as_ref())
        .and_then(|lb| lb.ingress.as_deref())
        .unwrap_or_default()
}

/// Whether two ingress lists say the same thing; an empty port list and an
/// absent one are the same (upstream's `LoadBalancerStatusEqual`).
pub(crate) fn same_ingress(
    a: &[core::LoadBalancerIngress],
    b: &[core::LoadBalancerIngress],
) -> bool {
    let ports = |i: &core::LoadBalancerIngress| i.ports.clone().unwrap_or_default();
    a.len() == b.len()
        && a.iter().zip(b).all(|(x, y)| {
            x.ip == y.ip
                && x.hostname == y.hostname
                && x.ip_mode == y.ip_mode
                && ports(x) == ports(y)
        })
}

#[cfg(test)]
mod tests {
    use ccm_cloud_provider::{IpMode, LoadBalancerIngress, PortStatus};
    use k8s_openapi::api::core::v1::ServiceStatus;

    use super::*;

    #[test]
    fn provider_status_becomes_kubernetes_ingress() {
        let status = LoadBalancerStatus {
            ingress: vec![
                LoadBalancerIngress {
                    ip: Some("203.0.113.7".into()),
                    ip_mode: Some(IpMode::Proxy),
                    ..Default::default()
                },
                LoadBalancerIngress {
                    hostname: Some("lb.example".into()),
                    ports: vec![PortStatus {
                        port: 80,
                        protocol: "TCP".into(),
                        error: None,
                    }],
                    ..Default::default()
                },
            ],
        };
        let ingress = ingress_of(&status);
        assert_eq!(ingress[0].ip.as_deref(), Some("203.0.113.7"));
        assert_eq!(ingress[0].ip_mode.as_deref(), Some("Proxy"));
        assert_eq!(
            ingress[0].ports, None,
            "no port list rather than an empty one"
        );
        assert_eq!(ingress[1].hostname.as_deref(), Some("lb.example"));
        assert_eq!(ingress[1].ports.as_ref().unwrap()[0].port, 80);
    }

    #[test]
    fn unset_and_empty_status_are_the_same_and_differences_are_seen() {
        let mut service = Service::default();
        assert!(current_ingress(&service).is_empty());
        service.status = Some(ServiceStatus::default());
        assert!(same_ingress(current_ingress(&service), &[]));
        let one = vec![core::LoadBalancerIngress {
            ip: Some("203.0.113.7".into()),
            ..Default::default()
        }];
        let mut with_empty_ports = one.clone();
        with_empty_ports[0].ports = Some(Vec::new());
        assert!(same_ingress(&one, &with_empty_ports));
        let mut other = one.clone();
        other[0].ip = Some("203.0.113.8".into());
        assert!(!same_ingress(&one, &other));
        assert!(!same_ingress(&one, &[]));
    }
}
