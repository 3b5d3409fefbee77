//! Names of what the provider creates for a Service, as upstream names them
//! so a cluster moving from upstream's controller finds its own resources.

use sha1::{Digest, Sha1};

use super::spec::{HealthCheck, LoadBalancerSpec, PortMapping, ServiceRef};

/// The description upstream gives node security-group rules for client
/// traffic to the load balancer named `lb`.
pub(crate) fn client_rule(lb: &str) -> String {
    format!("kubernetes.io/rule/nlb/client={lb}")
}

/// The description of node security-group rules for health checks.
pub(crate) fn health_rule(lb: &str) -> String {
    format!("kubernetes.io/rule/nlb/health={lb}")
}

/// The description of the ICMP rules for path MTU discovery, shared by
/// every load balancer reaching a security group.
pub(crate) const MTU_RULE: &str = "kubernetes.io/rule/nlb/mtu";

/// The prefix of every target group name for the Service.
pub(crate) fn target_group_prefix(svc: &ServiceRef) -> String {
    format!(
        "k8s-{:.8}-{:.8}-",
        alphanumeric(&svc.namespace),
        alphanumeric(&svc.name)
    )
}

/// Upstream's target group name, `k8s-{namespace:8}-{name:8}-{hash:10}`. The
/// hash covers what a target group cannot change in place, so a change to
/// any of it makes a new target group.
pub(crate) fn target_group_name(
    cluster_id: &str,
    spec: &LoadBalancerSpec,
    port: &PortMapping,
    health_check: &HealthCheck,
) -> String {
    let mut hasher = Sha1::new();
    for part in [
        cluster_id,
        &spec.svc.namespace,
        &spec.svc.name,
        &port.port.to_string(),
        &port.node_port.to_string(),
        port.target_protocol.as_str(),
        "instance",
        health_check.protocol.as_str(),
        &health_check.interval.to_string(),
    ] {
        hasher.update(part.as_bytes());
    }
    let hash: String = hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("{}{:.10}", target_group_prefix(&spec.svc), hash)
}

fn alphanumeric(s: &str) -> String {
    s.chars().filter(char::is_ascii_alphanumeric).collect()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use aws_sdk_elasticloadbalancingv2::types::{IpAddressType, ProtocolEnum};

    use super::*;
    use crate::load_balancer::spec::HealthCheckPort;

    fn spec(namespace: &str, name: &str) -> LoadBalancerSpec {
        LoadBalancerSpec {
            svc: ServiceRef {
                key: format!("{namespace}/{name}"),
                namespace: namespace.into(),
                name: name.into(),
                uid: "uid".into(),
                load_balancer_name: "a123".into(),
            },
            internal: false,
            subnets: None,
            eip_allocations: None,
            private_ipv4_addresses: None,
            ip_address_type: IpAddressType::Ipv4,
            cross_zone: false,
            proxy_protocol: false,
            target_group_attributes: BTreeMap::new(),
            security_groups: Default::default(),
            additional_tags: BTreeMap::new(),
            target_node_labels: BTreeMap::new(),
            source_ranges: Vec::new(),
            health_check: health(),
            ports: Vec::new(),
        }
    }

    fn health() -> HealthCheck {
        HealthCheck {
            protocol: ProtocolEnum::Tcp,
            port: HealthCheckPort::TrafficPort,
            path: None,
            interval: 30,
            timeout: None,
            healthy_threshold: 3,
            unhealthy_threshold: 3,
        }
    }

    fn port(port: i32, node_port: i32) -> PortMapping {
        PortMapping {
            port,
            name: None,
            listener_protocol: ProtocolEnum::Tcp,
            node_port,
            target_protocol: ProtocolEnum::Tcp,
            certificate_arn: None,
            ssl_policy: None,
        }
    }

    #[test]
    fn target_group_names_match_upstreams_sha1_scheme() {
        // sha1("c1" "default" "web" "80" "30080" "TCP" "instance" "TCP" "30")
        let name = target_group_name("c1", &spec("default", "web"), &port(80, 30080), &health());
        assert_eq!(name, "k8s-default-web-2e7f1b24e2");
        assert!(name.len() <= 32);
    }

    #[test]
    fn names_drop_non_alphanumerics_and_cut_to_eight() {
        let name = target_group_name(
            "c1",
            &spec("kube-system", "my-long-service"),
            &port(53, 31000),
            &health(),
        );
        assert!(name.starts_with("k8s-kubesyst-mylongse-"), "{name}");
        assert_eq!(name.len(), "k8s-kubesyst-mylongse-".len() + 10);
    }

    #[test]
    fn a_change_that_needs_a_new_target_group_changes_the_name() {
        let base = target_group_name("c1", &spec("d", "w"), &port(80, 30080), &health());
        let other_node_port = target_group_name("c1", &spec("d", "w"), &port(80, 30081), &health());
        let mut http = health();
        http.protocol = ProtocolEnum::Http;
        let other_protocol = target_group_name("c1", &spec("d", "w"), &port(80, 30080), &http);
        let other_cluster = target_group_name("c2", &spec("d", "w"), &port(80, 30080), &health());
        assert_ne!(base, other_node_port);
        assert_ne!(base, other_protocol);
        assert_ne!(base, other_cluster);
    }

    #[test]
    fn rule_descriptions_name_the_load_balancer() {
        assert_eq!(client_rule("a1"), "kubernetes.io/rule/nlb/client=a1");
        assert_eq!(health_rule("a1"), "kubernetes.io/rule/nlb/health=a1");
    }
}
