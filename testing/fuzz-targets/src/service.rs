//! The Service the annotation targets check, built from the input's lines.

use std::collections::BTreeMap;

use ccm_cloud_provider::k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
use ccm_cloud_provider::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// `default/web`, a LoadBalancer with ports `http` 80 and `https` 443 (TCP,
/// node ports 30080 and 30443), changed by `text`: each line `key=value`
/// (split at the first `=`, as `kubectl annotate` takes it; a line without
/// `=` is a key with an empty value) is an annotation, except these keys,
/// which set the Service's own fields:
///
/// - `metadata.name`, `metadata.namespace`, `metadata.uid`;
/// - `spec.externalTrafficPolicy`, `spec.healthCheckNodePort`,
///   `spec.sessionAffinity`, `spec.loadBalancerIP`;
/// - `spec.loadBalancerSourceRanges` (comma-separated);
/// - `spec.ports`: comma-separated `[name:]port[/PROTOCOL][:nodePort]`,
///   replacing the two ports.
pub(crate) fn from_lines(text: &str) -> Service {
    let mut meta = ObjectMeta {
        name: Some("web".to_owned()),
        namespace: Some("default".to_owned()),
        uid: Some("6b1f4bd0-3f0a-4c7e-9d55-2c8e0a1b7f42".to_owned()),
        ..ObjectMeta::default()
    };
    let mut spec = ServiceSpec {
        type_: Some("LoadBalancer".to_owned()),
        ports: Some(vec![
            port(Some("http"), 80, "TCP", Some(30080)),
            port(Some("https"), 443, "TCP", Some(30443)),
        ]),
        ..ServiceSpec::default()
    };
    let mut annotations = BTreeMap::new();
    for line in text.lines() {
        let (key, value) = line.split_once('=').unwrap_or((line, ""));
        let owned = Some(value.to_owned());
        match key {
            "metadata.name" => meta.name = owned,
            "metadata.namespace" => meta.namespace = owned,
            "metadata.uid" => meta.uid = owned,
            "spec.externalTrafficPolicy" => spec.external_traffic_policy = owned,
            "spec.healthCheckNodePort" => spec.health_check_node_port = value.parse().ok(),
            "spec.sessionAffinity" => spec.session_affinity = owned,
            "spec.loadBalancerIP" => spec.load_balancer_ip = owned,
            "spec.loadBalancerSourceRanges" => {
                spec.load_balancer_source_ranges =
                    Some(value.split(',').map(str::to_owned).collect());
            }
            "spec.ports" => spec.ports = Some(value.split(',').filter_map(parse_port).collect()),
            _ => {
                annotations.insert(key.to_owned(), value.to_owned());
            }
        }
    }
    meta.annotations = Some(annotations);
    Service {
        metadata: meta,
        spec: Some(spec),
        status: None,
    }
}

/// `[name:]port[/PROTOCOL][:nodePort]`; `None` when a number is malformed.
fn parse_port(text: &str) -> Option<ServicePort> {
    let parts: Vec<&str> = text.split(':').collect();
    let (name, rest, node_port) = match parts.as_slice() {
        [rest] => (None, *rest, None),
        [a, b] if a.starts_with(|c: char| c.is_ascii_digit()) => (None, *a, Some(*b)),
        [name, rest] => (Some(*name), *rest, None),
        [name, rest, node_port] => (Some(*name), *rest, Some(*node_port)),
        _ => return None,
    };
    let (number, protocol) = rest.split_once('/').unwrap_or((rest, "TCP"));
    let node_port = match node_port {
        Some(n) => Some(n.parse().ok()?),
        None => None,
    };
    Some(port(name, number.parse().ok()?, protocol, node_port))
}

fn port(name: Option<&str>, number: i32, protocol: &str, node_port: Option<i32>) -> ServicePort {
    ServicePort {
        name: name.map(str::to_owned),
        port: number,
        protocol: Some(protocol.to_owned()),
        node_port,
        ..ServicePort::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_annotations_except_the_named_fields() {
        let service = from_lines(
            "service.beta.kubernetes.io/aws-load-balancer-type=nlb\n\
             spec.ports=dns:53/UDP:30053,8080\n\
             spec.externalTrafficPolicy=Local\n\
             service.beta.kubernetes.io/aws-load-balancer-additional-resource-tags=a=b",
        );
        let annotations = service.metadata.annotations.unwrap_or_default();
        assert_eq!(
            annotations
                .get("service.beta.kubernetes.io/aws-load-balancer-additional-resource-tags"),
            Some(&"a=b".to_owned())
        );
        assert_eq!(annotations.len(), 2);
        let spec = service.spec.unwrap_or_default();
        assert_eq!(spec.external_traffic_policy.as_deref(), Some("Local"));
        let ports = spec.ports.unwrap_or_default();
        assert_eq!(
            ports,
            vec![
                port(Some("dns"), 53, "UDP", Some(30053)),
                port(None, 8080, "TCP", None)
            ]
        );
    }
}
