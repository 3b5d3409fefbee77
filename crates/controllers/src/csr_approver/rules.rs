//! The approval rules, as pure functions: what a kubelet serving
//! certificate request must be for this controller to approve it.

use std::net::IpAddr;

use ccm_cloud_provider::{InstanceMetadata, NodeAddress, NodeAddressType};

use super::request::Requested;

/// The signer whose requests this controller decides.
pub(crate) const SIGNER: &str = "kubernetes.io/kubelet-serving";
/// The group every node's credentials carry.
const NODES_GROUP: &str = "system:nodes";
/// The prefix of a node's user name.
const NODE_USER_PREFIX: &str = "system:node:";
/// Usages a serving certificate needs.
const REQUIRED_USAGES: [&str; 2] = ["digital signature", "server auth"];
/// A usage a serving certificate may have (RSA keys).
const OPTIONAL_USAGE: &str = "key encipherment";
/// The longest offending value quoted in a message.
const QUOTE_LIMIT: usize = 128;

/// Why a request is denied: the condition's `reason` and the metric label.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Reason {
    /// The requester is not a node's user.
    NotANode,
    /// The requester is not in `system:nodes`.
    NotInNodesGroup,
    /// `spec.request` is no valid certificate request.
    UnreadableRequest,
    /// The subject is not `CN=system:node:<requester's node>, O=system:nodes`.
    SubjectMismatch,
    /// A usage a serving certificate must not have, or one it needs missing.
    UsageMismatch,
    /// An e-mail, URI or other alternative name.
    ForbiddenAltName,
    /// Neither a DNS name nor an IP address to serve as.
    NoAltName,
    /// A DNS name or IP address the cloud does not report for the node.
    AddressNotOfNode,
    /// The cloud has no instance for the node.
    InstanceNotFound,
    /// The node did not exist or was not initialized in time.
    NodeNotInitialized,
    /// The cloud does not name the node's instance after the node.
    InstanceNameMismatch,
    /// Another node carries the same `spec.providerID`.
    ProviderIdNotUnique,
}

impl Reason {
    /// The condition reason, also the metric label.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::NotANode => "RequesterNotANode",
            Self::NotInNodesGroup => "RequesterNotInNodesGroup",
            Self::UnreadableRequest => "UnreadableRequest",
            Self::SubjectMismatch => "SubjectMismatch",
            Self::UsageMismatch => "UsageMismatch",
            Self::ForbiddenAltName => "ForbiddenAltName",
            Self::NoAltName => "NoAltName",
            Self::AddressNotOfNode => "AddressNotOfNode",
            Self::InstanceNotFound => "InstanceNotFound",
            Self::NodeNotInitialized => "NodeNotInitialized",
            Self::InstanceNameMismatch => "InstanceNameMismatch",
            Self::ProviderIdNotUnique => "ProviderIDNotUnique",
        }
    }
}

/// A denial: the rule broken, naming the offending value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Denial {
    pub(crate) reason: Reason,
    pub(crate) message: String,
}

fn deny(reason: Reason, message: String) -> Denial {
    Denial { reason, message }
}

/// `value` quoted, cut to [`QUOTE_LIMIT`] characters.
fn quote(value: &str) -> String {
    if value.chars().count() <= QUOTE_LIMIT {
        format!("{value:?}")
    } else {
        let cut: String = value.chars().take(QUOTE_LIMIT).collect();
        format!("{cut:?}…")
    }
}

/// What the API server recorded about the request and what it asks for.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Request<'a> {
    /// `spec.username`: who created it (the API server sets it).
    pub(crate) username: &'a str,
    /// `spec.groups`.
    pub(crate) groups: &'a [String],
    /// `spec.usages`.
    pub(crate) usages: &'a [String],
}

/// The node a request may be approved for, checked against everything but
/// the node and the cloud: requester, subject, usages and kinds of names.
///
/// # Errors
/// The first rule the request breaks.
pub(crate) fn node_of(
    request: Request<'_>,
    requested: Result<&Requested, &str>,
) -> Result<String, Denial> {
    let Some(node) = request
        .username
        .strip_prefix(NODE_USER_PREFIX)
        .filter(|n| !n.is_empty())
    else {
        return Err(deny(
            Reason::NotANode,
            format!(
                "the requester {} is not a node: only system:node:<name> may ask for a kubelet serving certificate",
                quote(request.username)
            ),
        ));
    };
    if !request.groups.iter().any(|g| g == NODES_GROUP) {
        return Err(deny(
            Reason::NotInNodesGroup,
            format!(
                "the requester {} is not in the group {NODES_GROUP}",
                quote(request.username)
            ),
        ));
    }
    let requested = requested.map_err(|why| {
        deny(
            Reason::UnreadableRequest,
            format!("spec.request is not a valid certificate request: {why}"),
        )
    })?;
    let user = format!("{NODE_USER_PREFIX}{node}");
    if requested.common_names != [user.as_str()] {
        return Err(deny(
            Reason::SubjectMismatch,
            format!(
                "the subject's common name {} is not the requester's {}",
                quote(&requested.common_names.join(",")),
                quote(&user)
            ),
        ));
    }
    if requested.organizations != [NODES_GROUP] {
        return Err(deny(
            Reason::SubjectMismatch,
            format!(
                "the subject's organization {} is not {NODES_GROUP:?}",
                quote(&requested.organizations.join(","))
            ),
        ));
    }
    if let Some(extra) = request
        .usages
        .iter()
        .find(|u| !REQUIRED_USAGES.contains(&u.as_str()) && u.as_str() != OPTIONAL_USAGE)
    {
        return Err(deny(
            Reason::UsageMismatch,
            format!(
                "the usage {} is not one a serving certificate needs (digital signature, server auth, optionally key encipherment)",
                quote(extra)
            ),
        ));
    }
    if let Some(missing) = REQUIRED_USAGES
        .iter()
        .find(|u| !request.usages.iter().any(|have| have == *u))
    {
        return Err(deny(
            Reason::UsageMismatch,
            format!("the usage {missing:?} is missing: a serving certificate needs it"),
        ));
    }
    let forbidden = requested
        .emails
        .iter()
        .map(|e| format!("e-mail {}", quote(e)))
        .chain(requested.uris.iter().map(|u| format!("URI {}", quote(u))))
        .chain(requested.other_names.iter().map(|o| quote(o)))
        .next();
    if let Some(name) = forbidden {
        return Err(deny(
            Reason::ForbiddenAltName,
            format!("the alternative name {name} is not allowed: only DNS names and IP addresses"),
        ));
    }
    if requested.dns_names.is_empty() && requested.ip_addresses.is_empty() {
        return Err(deny(
            Reason::NoAltName,
            "the request names no DNS name or IP address to serve as".to_owned(),
        ));
    }
    Ok(node.to_owned())
}

/// Whether `instance`, which the cloud found for `node` by its
/// `spec.providerID`, is that node's own: the cloud names it `node`, and
/// no other node (`sharing`: the names of other nodes with the same
/// provider ID) claims it. A kubelet sets its own node's provider ID, so
/// without this a node could borrow another instance's addresses.
///
/// # Errors
/// The first of the two that does not hold.
pub(crate) fn check_instance(
    node: &str,
    instance: &InstanceMetadata,
    sharing: &[String],
) -> Result<(), Denial> {
    if let Some(other) = sharing.first() {
        return Err(deny(
            Reason::ProviderIdNotUnique,
            format!(
                "node {other} has the same spec.providerID {} as node {node}",
                quote(&instance.provider_id)
            ),
        ));
    }
    if !instance.node_names.iter().any(|name| name == node) {
        let names = if instance.node_names.is_empty() {
            "no node name".to_owned()
        } else {
            instance.node_names.join(", ")
        };
        return Err(deny(
            Reason::InstanceNameMismatch,
            format!(
                "the cloud reports {names} for the instance {} of node {node}: a node's certificate is approved only for its own instance",
                quote(&instance.provider_id)
            ),
        ));
    }
    Ok(())
}

/// Whether every DNS name and IP address requested is one of `addresses`,
/// which the cloud reports for `node`'s instance now.
///
/// # Errors
/// The first name that is not.
pub(crate) fn check_addresses(
    node: &str,
    requested: &Requested,
    addresses: &[NodeAddress],
) -> Result<(), Denial> {
    let is_dns = |kind: NodeAddressType| {
        matches!(
            kind,
            NodeAddressType::Hostname | NodeAddressType::InternalDns | NodeAddressType::ExternalDns
        )
    };
    let reported = || {
        let list: Vec<&str> = addresses.iter().map(|a| a.address.as_str()).collect();
        if list.is_empty() {
            "none".to_owned()
        } else {
            list.join(", ")
        }
    };
    for dns in &requested.dns_names {
        let known = addresses
            .iter()
            .any(|a| is_dns(a.kind) && a.address.eq_ignore_ascii_case(dns));
        if !known {
            return Err(deny(
                Reason::AddressNotOfNode,
                format!(
                    "the DNS name {} is not one of node {node}'s addresses that the cloud reports ({})",
                    quote(dns),
                    reported()
                ),
            ));
        }
    }
    for ip in &requested.ip_addresses {
        let known = addresses
            .iter()
            .any(|a| !is_dns(a.kind) && a.address.parse::<IpAddr>().is_ok_and(|have| have == *ip));
        if !known {
            return Err(deny(
                Reason::AddressNotOfNode,
                format!(
                    "the IP address {ip} is not one of node {node}'s addresses that the cloud reports ({})",
                    reported()
                ),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
#[path = "rules_tests.rs"]
mod tests;
