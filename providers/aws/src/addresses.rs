//! A node's addresses from its EC2 instance, by upstream's rules.
//!
//! For `ipv4`: every private IP of each in-use network interface as
//! `InternalIP`, primary interface first; the public IP as `ExternalIP`; the
//! private DNS name as `InternalDNS` and `Hostname`; the public DNS name as
//! `ExternalDNS`. For `ipv6`: the first IPv6 address of each in-use
//! interface as `InternalIP` (AWS gives IPv6 addresses no DNS names, and
//! upstream counts them internal even when routable). `NodeIPFamilies`
//! orders the families.

use std::net::IpAddr;

use aws_sdk_ec2::types::{Instance, InstanceNetworkInterface, NetworkInterfaceStatus};
use ccm_cloud_provider::{NodeAddress, NodeAddressType};

use crate::config::IpFamily;

/// EC2 described an address that is not an IP address.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("instance {instance} has an invalid {kind} address `{address}`")]
pub(crate) struct AddressError {
    instance: String,
    kind: &'static str,
    address: String,
}

/// The node addresses of `instance` for `families`, in that order.
pub(crate) fn node_addresses(
    instance: &Instance,
    families: &[IpFamily],
) -> Result<Vec<NodeAddress>, AddressError> {
    let mut out = Vec::new();
    for family in families {
        match family {
            IpFamily::Ipv4 => ipv4(instance, &mut out)?,
            IpFamily::Ipv6 => ipv6(instance, &mut out)?,
        }
    }
    Ok(out)
}

fn ipv4(instance: &Instance, out: &mut Vec<NodeAddress>) -> Result<(), AddressError> {
    for interface in in_use_interfaces(instance) {
        for private in interface.private_ip_addresses() {
            if let Some(ip) = private.private_ip_address().filter(|ip| !ip.is_empty()) {
                out.push(ip_address(
                    instance,
                    NodeAddressType::InternalIp,
                    "private",
                    ip,
                )?);
            }
        }
    }
    if let Some(ip) = instance.public_ip_address().filter(|ip| !ip.is_empty()) {
        out.push(ip_address(
            instance,
            NodeAddressType::ExternalIp,
            "public",
            ip,
        )?);
    }
    if let Some(name) = instance.private_dns_name().filter(|n| !n.is_empty()) {
        out.push(NodeAddress::new(NodeAddressType::InternalDns, name));
        out.push(NodeAddress::new(NodeAddressType::Hostname, name));
    }
    if let Some(name) = instance.public_dns_name().filter(|n| !n.is_empty()) {
        out.push(NodeAddress::new(NodeAddressType::ExternalDns, name));
    }
    Ok(())
}

fn ipv6(instance: &Instance, out: &mut Vec<NodeAddress>) -> Result<(), AddressError> {
    for interface in in_use_interfaces(instance) {
        if let Some(ip) = interface
            .ipv6_addresses()
            .first()
            .and_then(|a| a.ipv6_address())
        {
            out.push(ip_address(
                instance,
                NodeAddressType::InternalIp,
                "IPv6",
                ip,
            )?);
        }
    }
    Ok(())
}

/// In-use interfaces by device index; interfaces without an attachment last.
fn in_use_interfaces(instance: &Instance) -> Vec<&InstanceNetworkInterface> {
    let mut interfaces: Vec<_> = instance
        .network_interfaces()
        .iter()
        .filter(|i| i.status() == Some(&NetworkInterfaceStatus::InUse))
        .collect();
    interfaces.sort_by_key(|i| {
        i.attachment()
            .and_then(|a| a.device_index())
            .map_or((1, 0), |index| (0, index))
    });
    interfaces
}

fn ip_address(
    instance: &Instance,
    kind: NodeAddressType,
    what: &'static str,
    raw: &str,
) -> Result<NodeAddress, AddressError> {
    let ip: IpAddr = raw.parse().map_err(|_| AddressError {
        instance: instance.instance_id().unwrap_or_default().to_owned(),
        kind: what,
        address: raw.to_owned(),
    })?;
    Ok(NodeAddress::new(kind, ip.to_string()))
}

#[cfg(test)]
mod tests {
    use aws_sdk_ec2::types::{
        InstanceIpv6Address, InstanceNetworkInterfaceAttachment, InstancePrivateIpAddress,
    };

    use super::*;

    fn interface(
        index: Option<i32>,
        status: NetworkInterfaceStatus,
        ips: &[&str],
        v6: &[&str],
    ) -> InstanceNetworkInterface {
        let mut b = InstanceNetworkInterface::builder().status(status);
        if let Some(index) = index {
            b = b.attachment(
                InstanceNetworkInterfaceAttachment::builder()
                    .device_index(index)
                    .build(),
            );
        }
        for ip in ips {
            b = b.private_ip_addresses(
                InstancePrivateIpAddress::builder()
                    .private_ip_address(*ip)
                    .build(),
            );
        }
        for ip in v6 {
            b = b.ipv6_addresses(InstanceIpv6Address::builder().ipv6_address(*ip).build());
        }
        b.build()
    }

    fn instance() -> Instance {
        Instance::builder()
            .instance_id("i-1")
            // Listed out of device order: the primary interface must come first.
            .network_interfaces(interface(
                Some(1),
                NetworkInterfaceStatus::InUse,
                &["10.0.2.9"],
                &["2600::2", "2600::3"],
            ))
            .network_interfaces(interface(
                Some(0),
                NetworkInterfaceStatus::InUse,
                &["10.0.1.4", "10.0.1.5"],
                &["2600::1"],
            ))
            .network_interfaces(interface(
                Some(2),
                NetworkInterfaceStatus::Detaching,
                &["10.0.3.3"],
                &[],
            ))
            .public_ip_address("54.1.2.3")
            .private_dns_name("ip-10-0-1-4.ec2.internal")
            .public_dns_name("ec2-54-1-2-3.compute-1.amazonaws.com")
            .build()
    }

    fn pairs(addresses: &[NodeAddress]) -> Vec<(&str, &str)> {
        addresses
            .iter()
            .map(|a| (a.kind.as_str(), a.address.as_str()))
            .collect()
    }

    #[test]
    fn ipv4_follows_upstream_order_and_skips_interfaces_not_in_use() {
        let addresses = node_addresses(&instance(), &[IpFamily::Ipv4]).expect("valid");
        assert_eq!(
            pairs(&addresses),
            [
                ("InternalIP", "10.0.1.4"),
                ("InternalIP", "10.0.1.5"),
                ("InternalIP", "10.0.2.9"),
                ("ExternalIP", "54.1.2.3"),
                ("InternalDNS", "ip-10-0-1-4.ec2.internal"),
                ("Hostname", "ip-10-0-1-4.ec2.internal"),
                ("ExternalDNS", "ec2-54-1-2-3.compute-1.amazonaws.com"),
            ]
        );
    }

    #[test]
    fn ipv6_takes_the_first_address_of_each_interface_as_internal() {
        let addresses = node_addresses(&instance(), &[IpFamily::Ipv6]).expect("valid");
        assert_eq!(
            pairs(&addresses),
            [("InternalIP", "2600::1"), ("InternalIP", "2600::2")]
        );
    }

    #[test]
    fn families_are_ordered_as_configured() {
        let addresses =
            node_addresses(&instance(), &[IpFamily::Ipv6, IpFamily::Ipv4]).expect("valid");
        assert_eq!(addresses[0].address, "2600::1");
        assert_eq!(addresses[2].address, "10.0.1.4");
    }

    #[test]
    fn an_instance_without_public_address_has_only_internal_ones() {
        let instance = Instance::builder()
            .network_interfaces(interface(
                Some(0),
                NetworkInterfaceStatus::InUse,
                &["10.0.1.4"],
                &[],
            ))
            .private_dns_name("ip-10-0-1-4.ec2.internal")
            .build();
        let addresses = node_addresses(&instance, &[IpFamily::Ipv4]).expect("valid");
        assert!(addresses.iter().all(|a| !matches!(
            a.kind,
            NodeAddressType::ExternalIp | NodeAddressType::ExternalDns
        )));
        assert_eq!(addresses.len(), 3);
    }

    #[test]
    fn an_invalid_address_is_an_error_naming_the_instance() {
        let instance = Instance::builder()
            .instance_id("i-bad")
            .public_ip_address("not-an-ip")
            .build();
        let err = node_addresses(&instance, &[IpFamily::Ipv4]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "instance i-bad has an invalid public address `not-an-ip`"
        );
    }
}
