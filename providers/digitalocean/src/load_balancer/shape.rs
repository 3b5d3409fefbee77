//! What a load balancer is fixed as at creation — its type, network and
//! network stack — resolved from the Service's annotations, the existing
//! load balancer and upstream's defaults.
//!
//! An annotation that asks an existing load balancer to become something
//! DigitalOcean cannot change in place is refused ([`CloudError::InvalidInput`]):
//! the Service keeps the load balancer it has, and a Warning says why.
//! Without the annotation, an existing load balancer keeps what it is, so
//! one built by the Go CCM or an older release is never reshaped.

use std::sync::Arc;

use ccm_cloud_provider::CloudError;
use ccm_cloud_provider::k8s_openapi::api::core::v1::Node;

use super::annotations as ann;
use super::options::Options;
use super::request::Shape;
use crate::api::types::LoadBalancer;
use crate::config::LoadBalancerType;

const IPV4: &str = "IPV4";
const DUALSTACK: &str = "DUALSTACK";

/// The shape of the Service's load balancer.
///
/// # Errors
/// [`CloudError::InvalidInput`] when the annotations ask for what the
/// existing load balancer cannot become, or for dual-stack on a network
/// load balancer whose nodes lack IPv6.
pub(crate) fn resolve(
    options: &Options,
    existing: Option<&LoadBalancer>,
    default_type: LoadBalancerType,
    nodes: &[Arc<Node>],
) -> Result<Shape, CloudError> {
    let current = existing.map(|lb| (of(lb), lb.id.as_str()));
    let kind = match (options.kind, current) {
        (Some(wanted), Some((was, id))) if wanted != was.kind => {
            return Err(fixed(ann::TYPE, id, was.kind.as_str(), wanted.as_str()));
        }
        (Some(wanted), _) => wanted,
        (None, Some((was, _))) => was.kind,
        (None, None) => default_type,
    };
    let internal = options.internal;
    if let Some((was, id)) = current
        && was.internal != internal
    {
        let name = |i: bool| if i { "INTERNAL" } else { "EXTERNAL" };
        return Err(fixed(ann::NETWORK, id, name(was.internal), name(internal)));
    }
    let network_stack = match (options.network_stack, current) {
        (Some(wanted), Some((was, id))) if wanted != was.network_stack => {
            return Err(fixed(ann::NETWORK_STACK, id, was.network_stack, wanted));
        }
        (Some(wanted), _) => wanted,
        (None, Some((was, _))) => was.network_stack,
        (None, None) if internal => IPV4,
        (None, None) => match kind {
            LoadBalancerType::Regional => DUALSTACK,
            LoadBalancerType::RegionalNetwork if all_dual_stack(nodes) => DUALSTACK,
            LoadBalancerType::RegionalNetwork => IPV4,
        },
    };
    if existing.is_none()
        && options.network_stack == Some(DUALSTACK)
        && kind == LoadBalancerType::RegionalNetwork
        && !all_dual_stack(nodes)
    {
        return Err(CloudError::invalid(
            ann::NETWORK_STACK,
            "DUALSTACK network load balancers need every node to have an IPv6 address, and some have none",
        ));
    }
    Ok(Shape {
        kind,
        internal,
        network_stack,
    })
}

/// What an existing load balancer is, with the API's defaults for what it
/// leaves out (`REGIONAL`, `EXTERNAL`, `IPV4`).
pub(crate) fn of(lb: &LoadBalancer) -> Shape {
    Shape {
        kind: lb
            .kind
            .as_deref()
            .and_then(LoadBalancerType::parse)
            .unwrap_or(LoadBalancerType::Regional),
        internal: lb.network.as_deref() == Some("INTERNAL"),
        network_stack: match lb.network_stack.as_deref() {
            Some(DUALSTACK) => DUALSTACK,
            _ => IPV4,
        },
    }
}

fn fixed(key: &str, id: &str, is: &str, asked: &str) -> CloudError {
    CloudError::invalid(
        key,
        format!(
            "load balancer {id} is {is}, which cannot change after creation; `{asked}` would need a new load balancer (delete and recreate the Service, or remove the annotation)"
        ),
    )
}

/// Whether every node has an external IPv4 and an external IPv6 address
/// (upstream's `isAllDualStack`); false without nodes.
fn all_dual_stack(nodes: &[Arc<Node>]) -> bool {
    !nodes.is_empty()
        && nodes
            .iter()
            .all(|node| external_stacks(node) == (true, true))
}

/// Whether `node` has an external IPv4 address, and an external IPv6 one.
fn external_stacks(node: &Node) -> (bool, bool) {
    let (mut v4, mut v6) = (false, false);
    let addresses = node
        .status
        .as_ref()
        .and_then(|s| s.addresses.as_deref())
        .unwrap_or_default();
    for a in addresses.iter().filter(|a| a.type_ == "ExternalIP") {
        match a.address.parse::<std::net::IpAddr>() {
            Ok(std::net::IpAddr::V4(_)) => v4 = true,
            Ok(std::net::IpAddr::V6(_)) => v6 = true,
            Err(_) => {}
        }
    }
    (v4, v6)
}

/// The nodes that can be backends, as upstream's `filterAndClassifyNodes`:
/// an external network load balancer reaches nodes on their public IPv4, so
/// nodes without one (no public address yet, or IPv6 only) are left out;
/// other load balancers take every node.
///
/// # Errors
/// When nodes were left out and none remain (upstream's "no eligible
/// backends"): a Warning, and a retry once nodes have public addresses.
pub(crate) fn backends(
    nodes: &[Arc<Node>],
    kind: LoadBalancerType,
    internal: bool,
) -> Result<Vec<Arc<Node>>, CloudError> {
    if internal || kind != LoadBalancerType::RegionalNetwork {
        return Ok(nodes.to_vec());
    }
    let eligible: Vec<Arc<Node>> = nodes
        .iter()
        .filter(|n| external_stacks(n).0)
        .cloned()
        .collect();
    if eligible.is_empty() && !nodes.is_empty() {
        return Err(CloudError::msg(format!(
            "none of the {} nodes has a public IPv4 address yet, which an EXTERNAL REGIONAL_NETWORK load balancer needs in its backends",
            nodes.len()
        )));
    }
    if eligible.len() < nodes.len() {
        tracing::debug!(
            left_out = nodes.len() - eligible.len(),
            "nodes without a public IPv4 address left out of a network load balancer"
        );
    }
    Ok(eligible)
}
