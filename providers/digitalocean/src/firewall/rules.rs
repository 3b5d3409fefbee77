//! The public-access firewall as the API reads and writes it, the firewall
//! the Services ask for (upstream's `createReconciledFirewallRequest`), and
//! the order-insensitive comparison of the two (upstream's
//! `firewallRequestEqual`).

use std::collections::BTreeSet;
use std::sync::Arc;

use ccm_cloud_provider::CloudError;
use ccm_cloud_provider::k8s_openapi::api::core::v1::{Service, ServicePort};
use serde::{Deserialize, Deserializer, Serialize};

use crate::config::{LoadBalancerType, PublicAccessFirewall};
use crate::load_balancer::KUBE_PROXY_HEALTH_PORT;
use crate::load_balancer::annotations::{self as ann, Reader, invalid};

/// Every IPv4 and IPv6 address.
const ANYWHERE: [&str; 2] = ["0.0.0.0/0", "::/0"];
/// What the API answers for "all ports"; requests may say `all` or nothing.
const ALL_PORTS: &str = "0";

/// Where a rule lets traffic come from or go to. Of the API's fields, the
/// two upstream compares; the others are neither written nor compared.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Target {
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub(crate) addresses: Vec<String>,
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub(crate) load_balancer_uids: Vec<String>,
}

impl Target {
    fn anywhere() -> Self {
        Self {
            addresses: ANYWHERE.map(str::to_owned).to_vec(),
            load_balancer_uids: Vec::new(),
        }
    }
}

/// An inbound rule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct InboundRule {
    pub(crate) protocol: String,
    #[serde(default)]
    pub(crate) ports: String,
    #[serde(default)]
    pub(crate) sources: Target,
}

/// An outbound rule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct OutboundRule {
    pub(crate) protocol: String,
    #[serde(default)]
    pub(crate) ports: String,
    #[serde(default)]
    pub(crate) destinations: Target,
}

/// A firewall's name, rules and droplet tags: the create and update body,
/// and what is compared.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct FirewallSpec {
    pub(crate) name: String,
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub(crate) inbound_rules: Vec<InboundRule>,
    #[serde(default, deserialize_with = "nullable")]
    pub(crate) outbound_rules: Vec<OutboundRule>,
    #[serde(
        default,
        deserialize_with = "nullable",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub(crate) tags: Vec<String>,
}

/// A firewall as the API answers it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub(crate) struct Firewall {
    pub(crate) id: String,
    #[serde(flatten)]
    pub(crate) spec: FirewallSpec,
}

/// `{"firewall": {...}}`.
#[derive(Debug, Deserialize)]
pub(crate) struct FirewallEnvelope {
    pub(crate) firewall: Firewall,
}

/// An array the API may answer as `null`.
fn nullable<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Vec<T>, D::Error> {
    Ok(Option::<Vec<T>>::deserialize(d)?.unwrap_or_default())
}

/// Upstream's allow-all outbound rules. ICMP has no ports, but the spec
/// requires the field, so it is sent as the `0` ("all") the API answers.
fn allow_all_outbound() -> Vec<OutboundRule> {
    [("tcp", "all"), ("udp", "all"), ("icmp", ALL_PORTS)]
        .map(|(protocol, ports)| OutboundRule {
            protocol: protocol.to_owned(),
            ports: ports.to_owned(),
            destinations: Target::anywhere(),
        })
        .to_vec()
}

/// The firewall `services` ask for, as upstream builds it:
/// - every port of a NodePort Service, unless it says
///   `kubernetes.digitalocean.com/firewall-managed: "false"` (an unreadable
///   value counts as managed), opens its node port to anywhere;
/// - a LoadBalancer Service of a `REGIONAL_NETWORK`, `EXTERNAL` load
///   balancer (whose traffic reaches the nodes on the Service's own ports)
///   opens its ports to anywhere and its health-check port to its load
///   balancer (to anywhere before the load balancer's ID is recorded).
///   Other load balancers reach the nodes over the VPC and need no rule.
///
/// Only TCP and UDP ports count.
///
/// # Errors
/// [`CloudError::InvalidInput`] when a LoadBalancer Service's type or
/// network annotation is not one upstream accepts: as upstream, the
/// firewall is then left alone rather than built without the Service.
pub(crate) fn wanted(
    firewall: &PublicAccessFirewall,
    default_lb_type: LoadBalancerType,
    services: &[Arc<Service>],
) -> Result<FirewallSpec, CloudError> {
    let mut inbound = Vec::new();
    for service in services {
        let spec = service.spec.as_ref();
        let ports = spec.and_then(|s| s.ports.as_deref()).unwrap_or_default();
        let a = Reader::new(service.metadata.annotations.as_ref());
        match spec.and_then(|s| s.type_.as_deref()) {
            Some("NodePort") => {
                if !managed(service) {
                    continue;
                }
                for port in ports {
                    let node_port = port.node_port.unwrap_or_default();
                    if let (Some(protocol), true) = (protocol(port), node_port > 0) {
                        inbound.push(inbound_rule(protocol, node_port, Target::anywhere()));
                    }
                }
            }
            Some("LoadBalancer") => {
                let kind = match a.get(ann::TYPE) {
                    None => default_lb_type,
                    Some(v) => LoadBalancerType::parse(v)
                        .ok_or_else(|| invalid(ann::TYPE, v, "REGIONAL or REGIONAL_NETWORK"))?,
                };
                let network = a.one_of(ann::NETWORK, ann::NETWORKS, "EXTERNAL")?;
                if kind != LoadBalancerType::RegionalNetwork || network != "EXTERNAL" {
                    continue;
                }
                let sources = match a.get(ann::LOAD_BALANCER_ID) {
                    Some(id) => Target {
                        addresses: Vec::new(),
                        load_balancer_uids: vec![id.to_owned()],
                    },
                    None => Target::anywhere(),
                };
                inbound.push(inbound_rule("tcp", health_check_port(service), sources));
                for port in ports {
                    if let Some(protocol) = protocol(port) {
                        inbound.push(inbound_rule(protocol, port.port, Target::anywhere()));
                    }
                }
            }
            _ => {}
        }
    }
    // Several load balancers share ports (80, kube-proxy's health port).
    let mut seen = BTreeSet::new();
    inbound.retain(|r| seen.insert(canonical_in(r)));
    inbound.sort_by(|a, b| (&a.protocol, &a.ports).cmp(&(&b.protocol, &b.ports)));
    Ok(FirewallSpec {
        name: firewall.name.clone(),
        inbound_rules: inbound,
        outbound_rules: allow_all_outbound(),
        tags: firewall.tags.clone(),
    })
}

fn managed(service: &Service) -> bool {
    let a = Reader::new(service.metadata.annotations.as_ref());
    if a.get(ann::FIREWALL_MANAGED).is_none() {
        return true;
    }
    a.bool(ann::FIREWALL_MANAGED).unwrap_or_else(|e| {
        let namespace = service.metadata.namespace.as_deref().unwrap_or_default();
        let name = service.metadata.name.as_deref().unwrap_or_default();
        tracing::warn!(%namespace, %name, error = %e, "managing the Service's firewall rules anyway");
        true
    })
}

/// `tcp` or `udp`; TCP when unset, as the API server defaults it.
fn protocol(port: &ServicePort) -> Option<&'static str> {
    match port.protocol.as_deref() {
        None | Some("TCP") => Some("tcp"),
        Some("UDP") => Some("udp"),
        Some(_) => None,
    }
}

/// The node's health-check port with the Local traffic policy, else
/// kube-proxy's (as upstream's `healthCheckPathAndPort`).
fn health_check_port(service: &Service) -> i32 {
    let spec = service.spec.as_ref();
    let local = spec.and_then(|s| s.external_traffic_policy.as_deref()) == Some("Local");
    match spec.and_then(|s| s.health_check_node_port) {
        Some(p) if local && p > 0 => p,
        _ => KUBE_PROXY_HEALTH_PORT,
    }
}

fn inbound_rule(protocol: &str, port: i32, sources: Target) -> InboundRule {
    InboundRule {
        protocol: protocol.to_owned(),
        ports: port.to_string(),
        sources,
    }
}

/// A rule reduced to what is compared: protocol, ports ("all", empty and
/// "0" alike) and the sorted addresses and load-balancer IDs.
type Canonical = (String, String, Vec<String>, Vec<String>);

fn canonical(protocol: &str, ports: &str, target: &Target) -> Canonical {
    let ports = match ports {
        "" | "all" => ALL_PORTS,
        p => p,
    };
    let mut addresses = target.addresses.clone();
    addresses.sort();
    let mut uids = target.load_balancer_uids.clone();
    uids.sort();
    (protocol.to_owned(), ports.to_owned(), addresses, uids)
}

fn canonical_in(r: &InboundRule) -> Canonical {
    canonical(&r.protocol, &r.ports, &r.sources)
}

fn canonical_out(r: &OutboundRule) -> Canonical {
    canonical(&r.protocol, &r.ports, &r.destinations)
}

/// Whether `current` already is `wanted`: same name, same tags and the same
/// rules, in any order.
pub(crate) fn matches(current: &FirewallSpec, wanted: &FirewallSpec) -> bool {
    fn sorted<T, K: Ord>(items: &[T], key: impl Fn(&T) -> K) -> Vec<K> {
        let mut keys: Vec<K> = items.iter().map(key).collect();
        keys.sort();
        keys
    }
    current.name == wanted.name
        && sorted(&current.tags, Clone::clone) == sorted(&wanted.tags, Clone::clone)
        && sorted(&current.inbound_rules, canonical_in)
            == sorted(&wanted.inbound_rules, canonical_in)
        && sorted(&current.outbound_rules, canonical_out)
            == sorted(&wanted.outbound_rules, canonical_out)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use ccm_cloud_provider::k8s_openapi::api::core::v1::ServiceSpec;
    use ccm_cloud_provider::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;

    const LB_ID: &str = "4de7ac8b-495b-4884-9a69-1050c6793cd6";

    fn service(
        kind: &str,
        ports: &[(&str, i32, i32)],
        annotations: &[(&str, &str)],
    ) -> Arc<Service> {
        Arc::new(Service {
            metadata: ObjectMeta {
                name: Some("s".into()),
                namespace: Some("default".into()),
                annotations: Some(
                    annotations
                        .iter()
                        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                        .collect::<BTreeMap<_, _>>(),
                ),
                ..ObjectMeta::default()
            },
            spec: Some(ServiceSpec {
                type_: Some(kind.into()),
                ports: Some(
                    ports
                        .iter()
                        .map(|(protocol, port, node_port)| ServicePort {
                            protocol: Some((*protocol).into()),
                            port: *port,
                            node_port: Some(*node_port),
                            ..ServicePort::default()
                        })
                        .collect(),
                ),
                ..ServiceSpec::default()
            }),
            status: None,
        })
    }

    fn firewall() -> PublicAccessFirewall {
        PublicAccessFirewall {
            name: "k8s-public-access".into(),
            tags: vec!["k8s-worker".into()],
        }
    }

    /// (protocol, ports, load-balancer IDs) of each inbound rule.
    fn inbound(spec: &FirewallSpec) -> Vec<(String, String, Vec<String>)> {
        spec.inbound_rules
            .iter()
            .map(|r| {
                (
                    r.protocol.clone(),
                    r.ports.clone(),
                    r.sources.load_balancer_uids.clone(),
                )
            })
            .collect()
    }

    fn rule(protocol: &str, ports: &str) -> (String, String, Vec<String>) {
        (protocol.into(), ports.into(), Vec::new())
    }

    #[test]
    fn inbound_rules_follow_upstream() {
        use LoadBalancerType::{Regional, RegionalNetwork};
        let no = ann::FIREWALL_MANAGED;
        let cases: Vec<(&str, LoadBalancerType, Vec<Arc<Service>>, Vec<_>)> = vec![
            (
                "node ports of every port, tcp and udp; SCTP and unset node ports skipped",
                Regional,
                vec![service(
                    "NodePort",
                    &[
                        ("TCP", 80, 30080),
                        ("UDP", 53, 30053),
                        ("SCTP", 9, 30009),
                        ("TCP", 81, 0),
                    ],
                    &[],
                )],
                vec![rule("tcp", "30080"), rule("udp", "30053")],
            ),
            (
                "ClusterIP Services and unmanaged NodePort Services open nothing",
                Regional,
                vec![
                    service("ClusterIP", &[("TCP", 80, 0)], &[]),
                    service("NodePort", &[("TCP", 80, 30080)], &[(no, "false")]),
                ],
                vec![],
            ),
            (
                "an unreadable firewall-managed value counts as managed",
                Regional,
                vec![service("NodePort", &[("TCP", 80, 30080)], &[(no, "maybe")])],
                vec![rule("tcp", "30080")],
            ),
            (
                "REGIONAL load balancers need no rule",
                Regional,
                vec![service("LoadBalancer", &[("TCP", 80, 30080)], &[])],
                vec![],
            ),
            (
                "REGIONAL_NETWORK load balancers open their ports and kube-proxy's health port",
                RegionalNetwork,
                vec![service(
                    "LoadBalancer",
                    &[("TCP", 80, 30080), ("UDP", 53, 30053)],
                    &[],
                )],
                vec![rule("tcp", "10256"), rule("tcp", "80"), rule("udp", "53")],
            ),
            (
                "the type annotation overrides DEFAULT_LB_TYPE, and INTERNAL needs no rule",
                Regional,
                vec![
                    service(
                        "LoadBalancer",
                        &[("TCP", 80, 30080)],
                        &[(ann::TYPE, "REGIONAL_NETWORK")],
                    ),
                    service(
                        "LoadBalancer",
                        &[("TCP", 90, 30090)],
                        &[(ann::TYPE, "REGIONAL_NETWORK"), (ann::NETWORK, "INTERNAL")],
                    ),
                ],
                vec![rule("tcp", "10256"), rule("tcp", "80")],
            ),
            (
                "a recorded load balancer's health port is open to it alone; shared ports once",
                RegionalNetwork,
                vec![
                    service(
                        "LoadBalancer",
                        &[("TCP", 80, 30080)],
                        &[(ann::LOAD_BALANCER_ID, LB_ID)],
                    ),
                    service("LoadBalancer", &[("TCP", 80, 30081)], &[]),
                ],
                vec![
                    ("tcp".into(), "10256".into(), vec![LB_ID.to_owned()]),
                    rule("tcp", "10256"),
                    rule("tcp", "80"),
                ],
            ),
        ];
        for (name, default_type, services, want) in cases {
            let spec = wanted(&firewall(), default_type, &services).unwrap();
            let mut got = inbound(&spec);
            let mut want = want;
            got.sort();
            want.sort();
            assert_eq!(got, want, "{name}");
            assert_eq!(spec.name, "k8s-public-access");
            assert_eq!(spec.tags, vec!["k8s-worker".to_owned()]);
            assert_eq!(spec.outbound_rules.len(), 3, "allow-all outbound");
        }
    }

    #[test]
    fn a_bad_type_annotation_leaves_the_firewall_alone() {
        let services = [service(
            "LoadBalancer",
            &[("TCP", 80, 1)],
            &[(ann::TYPE, "GLOBAL")],
        )];
        assert!(matches!(
            wanted(&firewall(), LoadBalancerType::Regional, &services),
            Err(CloudError::InvalidInput { .. })
        ));
    }

    #[test]
    fn comparison_ignores_order_and_spellings_of_all_ports() {
        let services = [
            service("NodePort", &[("TCP", 80, 30080)], &[]),
            service("NodePort", &[("UDP", 53, 30053)], &[]),
        ];
        let want = wanted(&firewall(), LoadBalancerType::Regional, &services).unwrap();
        let mut answered = want.clone();
        answered.inbound_rules.reverse();
        answered.outbound_rules.reverse();
        for r in &mut answered.outbound_rules {
            r.ports = "0".into();
            r.destinations.addresses.reverse();
        }
        assert!(matches(&answered, &want));

        let mut fewer = answered.clone();
        fewer.inbound_rules.pop();
        assert!(!matches(&fewer, &want));
        let mut retagged = answered.clone();
        retagged.tags = vec!["other".into()];
        assert!(!matches(&retagged, &want));
        let mut renamed = answered;
        renamed.name = "other".into();
        assert!(!matches(&renamed, &want));
    }

    #[test]
    fn the_api_answer_decodes_with_null_arrays() {
        let fw: FirewallEnvelope = serde_json::from_value(serde_json::json!({"firewall": {
            "id": "fb6045f1-cf1d-4ca3-bfac-18832663025b",
            "name": "k8s-public-access",
            "status": "succeeded",
            "inbound_rules": null,
            "outbound_rules": [{"protocol": "icmp", "ports": "0",
                "destinations": {"addresses": ["0.0.0.0/0"], "tags": [], "droplet_ids": []}}],
            "tags": null,
            "droplet_ids": [],
        }}))
        .unwrap();
        assert!(fw.firewall.spec.inbound_rules.is_empty());
        assert!(fw.firewall.spec.tags.is_empty());
        assert_eq!(fw.firewall.spec.outbound_rules[0].protocol, "icmp");
    }
}
