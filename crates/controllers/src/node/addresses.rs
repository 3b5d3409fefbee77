//! Which addresses a node gets: the cloud's, with upstream's rules for the
//! kubelet's `--node-ip` and Hostname.

use std::net::IpAddr;

use ccm_cloud_provider::{NodeAddress as CloudAddress, NodeAddressType};
use k8s_openapi::api::core::v1::{Node, NodeAddress};

/// The kubelet's `--node-ip`, as it records it for the cloud provider.
pub(crate) const PROVIDED_NODE_IP: &str = "alpha.kubernetes.io/provided-node-ip";

/// Why the cloud's addresses cannot be used for a node.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum AddressError {
    /// The annotation is not one IP or a dual-stack pair.
    #[error("annotation {PROVIDED_NODE_IP}=`{0}` is not one IP or an IPv4,IPv6 pair")]
    Malformed(String),
    /// No cloud address equals a kubelet-provided IP.
    #[error(
        "no address the cloud reports for this instance matches the kubelet's node IP {0} ({PROVIDED_NODE_IP})"
    )]
    NoMatch(IpAddr),
}

/// The kubelet's node IPs, from the node's annotation (upstream's
/// `ParseNodeIPAnnotation`): one IP, or one of each family.
fn provided_node_ips(node: &Node) -> Result<Vec<IpAddr>, AddressError> {
    let Some(value) = node
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(PROVIDED_NODE_IP))
    else {
        return Ok(Vec::new());
    };
    let malformed = || AddressError::Malformed(value.clone());
    let ips = value
        .split(',')
        .map(|ip| ip.trim().parse::<IpAddr>().map_err(|_| malformed()))
        .collect::<Result<Vec<_>, _>>()?;
    let valid = match ips.as_slice() {
        [ip] => !ip.is_unspecified(),
        [a, b] => a.is_ipv4() != b.is_ipv4() && !a.is_unspecified() && !b.is_unspecified(),
        _ => false,
    };
    if valid { Ok(ips) } else { Err(malformed()) }
}

fn to_kube(address: &CloudAddress) -> NodeAddress {
    NodeAddress {
        type_: address.kind.as_str().to_owned(),
        address: address.address.clone(),
    }
}

/// The addresses `node` should have, given what the cloud reports.
///
/// Upstream's rules: when the kubelet provided node IPs, each must be among
/// the cloud's addresses; it becomes the only address of its type, and the
/// cloud's addresses of other types follow. When the cloud reports no
/// Hostname, the kubelet's is kept. Order is the cloud's (dual-stack order
/// kept). An empty answer from the cloud leaves the node's addresses alone
/// (`None`).
///
/// # Errors
/// [`AddressError`] when the provided node IP is malformed or matches no
/// cloud address: the node must not be initialized.
pub(crate) fn desired(
    node: &Node,
    cloud: &[CloudAddress],
) -> Result<Option<Vec<NodeAddress>>, AddressError> {
    let node_ips = provided_node_ips(node)?;
    if cloud.is_empty() {
        return Ok(None);
    }
    let mut addresses = if node_ips.is_empty() {
        cloud.iter().map(to_kube).collect::<Vec<_>>()
    } else {
        let mut enforced = Vec::new();
        let mut enforced_types = Vec::new();
        for ip in &node_ips {
            let matching: Vec<_> = cloud
                .iter()
                .filter(|a| {
                    a.address
                        .parse::<IpAddr>()
                        .is_ok_and(|parsed| parsed == *ip)
                })
                .collect();
            if matching.is_empty() {
                return Err(AddressError::NoMatch(*ip));
            }
            for address in matching {
                enforced.push(to_kube(address));
                enforced_types.push(address.kind);
            }
        }
        enforced.extend(
            cloud
                .iter()
                .filter(|a| !enforced_types.contains(&a.kind))
                .map(to_kube),
        );
        enforced
    };
    if !cloud.iter().any(|a| a.kind == NodeAddressType::Hostname) {
        let kubelet_hostnames = node
            .status
            .as_ref()
            .and_then(|s| s.addresses.as_ref())
            .into_iter()
            .flatten()
            .filter(|a| a.type_ == NodeAddressType::Hostname.as_str());
        addresses.extend(kubelet_hostnames.cloned());
    }
    Ok(Some(addresses))
}

/// The node's current addresses.
pub(crate) fn current(node: &Node) -> &[NodeAddress] {
    node.status
        .as_ref()
        .and_then(|s| s.addresses.as_deref())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::api::core::v1::NodeStatus;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;

    fn node(provided_ip: Option<&str>, kubelet_addresses: &[(&str, &str)]) -> Node {
        let annotations =
            provided_ip.map(|ip| BTreeMap::from([(PROVIDED_NODE_IP.to_owned(), ip.to_owned())]));
        Node {
            metadata: ObjectMeta {
                name: Some("n1".into()),
                annotations,
                ..ObjectMeta::default()
            },
            spec: None,
            status: Some(NodeStatus {
                addresses: Some(
                    kubelet_addresses
                        .iter()
                        .map(|(t, a)| NodeAddress {
                            type_: (*t).into(),
                            address: (*a).into(),
                        })
                        .collect(),
                ),
                ..NodeStatus::default()
            }),
        }
    }

    fn cloud(addresses: &[(NodeAddressType, &str)]) -> Vec<CloudAddress> {
        addresses
            .iter()
            .map(|(kind, a)| CloudAddress::new(*kind, *a))
            .collect()
    }

    fn pairs(addresses: &[NodeAddress]) -> Vec<(&str, &str)> {
        addresses
            .iter()
            .map(|a| (a.type_.as_str(), a.address.as_str()))
            .collect()
    }

    use NodeAddressType::{ExternalIp, Hostname, InternalDns, InternalIp};

    #[test]
    fn cloud_addresses_are_used_in_order_keeping_dual_stack_order() {
        let cloud = cloud(&[
            (InternalIp, "10.0.0.5"),
            (InternalIp, "fd00::5"),
            (Hostname, "ip-10-0-0-5"),
        ]);
        let got = desired(&node(None, &[]), &cloud).unwrap().unwrap();
        assert_eq!(
            pairs(&got),
            [
                ("InternalIP", "10.0.0.5"),
                ("InternalIP", "fd00::5"),
                ("Hostname", "ip-10-0-0-5")
            ]
        );
    }

    #[test]
    fn kubelet_hostname_is_kept_when_the_cloud_reports_none() {
        let cloud = cloud(&[(InternalIp, "10.0.0.5")]);
        let got = desired(
            &node(
                None,
                &[("Hostname", "worker-1"), ("InternalIP", "192.168.0.9")],
            ),
            &cloud,
        )
        .unwrap()
        .unwrap();
        assert_eq!(
            pairs(&got),
            [("InternalIP", "10.0.0.5"), ("Hostname", "worker-1")]
        );
    }

    #[test]
    fn provided_node_ip_is_the_only_address_of_its_type() {
        let cloud = cloud(&[
            (InternalIp, "10.0.0.5"),
            (InternalIp, "10.0.0.6"),
            (ExternalIp, "203.0.113.7"),
            (InternalDns, "ip.internal"),
        ]);
        let got = desired(&node(Some("10.0.0.6"), &[]), &cloud)
            .unwrap()
            .unwrap();
        assert_eq!(
            pairs(&got),
            [
                ("InternalIP", "10.0.0.6"),
                ("ExternalIP", "203.0.113.7"),
                ("InternalDNS", "ip.internal")
            ]
        );
    }

    #[test]
    fn dual_stack_provided_node_ips_both_enforced() {
        let cloud = cloud(&[
            (InternalIp, "10.0.0.5"),
            (InternalIp, "fd00::5"),
            (InternalIp, "10.0.0.6"),
        ]);
        let got = desired(&node(Some("10.0.0.5,fd00::5"), &[]), &cloud)
            .unwrap()
            .unwrap();
        assert_eq!(
            pairs(&got),
            [("InternalIP", "10.0.0.5"), ("InternalIP", "fd00::5")]
        );
    }

    #[test]
    fn provided_node_ip_matching_no_cloud_address_is_an_error() {
        let cloud = cloud(&[(InternalIp, "10.0.0.5")]);
        let err = desired(&node(Some("10.9.9.9"), &[]), &cloud).unwrap_err();
        assert_eq!(err, AddressError::NoMatch("10.9.9.9".parse().unwrap()));
        assert!(
            err.to_string()
                .contains("matches the kubelet's node IP 10.9.9.9")
        );
    }

    #[test]
    fn malformed_provided_node_ip_is_an_error() {
        let cloud = cloud(&[(InternalIp, "10.0.0.5")]);
        for bad in [
            "not-an-ip",
            "10.0.0.5,10.0.0.6",
            "0.0.0.0",
            "10.0.0.5,fd00::5,10.0.0.6",
        ] {
            assert!(
                matches!(
                    desired(&node(Some(bad), &[]), &cloud),
                    Err(AddressError::Malformed(_))
                ),
                "{bad}"
            );
        }
    }

    #[test]
    fn an_empty_cloud_answer_leaves_addresses_alone() {
        assert_eq!(
            desired(&node(None, &[("Hostname", "h")]), &[]).unwrap(),
            None
        );
    }
}
