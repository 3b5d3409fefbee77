//! What travels between the fake cloud's server and its clients: each
//! interface call's arguments and answer as JSON. The interface's own types
//! stay free of serde; these mirror them field by field.

use std::collections::BTreeMap;
use std::time::Duration;

use ccm_cloud_provider::k8s_openapi::api::core::v1::{Node, Service};
use ccm_cloud_provider::server_delay;
use ccm_cloud_provider::{
    CloudError, EnsuredLoadBalancer, InstanceMetadata, IpMode, LoadBalancerHealth,
    LoadBalancerIngress, LoadBalancerStatus, LoadBalancerWarning, NodeAddress, NodeAddressType,
    OwnedResource, Owner, PortStatus, Route, TargetHealth, TargetState,
};
use serde::{Deserialize, Serialize};

/// The header naming the caller: the CCM's leader-election identity.
pub const CALLER_HEADER: &str = "x-fake-cloud-caller";

/// The header that makes a mutation a plan (`--dry-run`): the server says
/// what it would change, changes nothing and logs the call as no mutation.
pub const DRY_RUN_HEADER: &str = "x-fake-cloud-dry-run";

/// The error kind of a dry run's answer when the call would change
/// something; its message lists the changes, one per line.
pub(crate) const PLANNED: &str = "planned";

/// The arguments of one call; which fields are set depends on the
/// operation in the request's path.
#[derive(Debug, Default, Serialize, Deserialize)]
pub(crate) struct Args {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) cluster: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) service: Option<Service>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) nodes: Vec<Node>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) route: Option<WireRoute>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) name_hint: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) ids: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) resource: Option<WireOwned>,
}

/// A [`CloudError`], kind by kind.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub(crate) struct WireError {
    pub(crate) kind: String,
    pub(crate) message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) after_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) field: Option<String>,
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

impl From<&CloudError> for WireError {
    fn from(e: &CloudError) -> Self {
        let (after_ms, field, message) = match e {
            CloudError::Throttled { retry_after } => {
                (Some(millis(*retry_after)), None, e.to_string())
            }
            CloudError::Retry { after, reason } => (Some(millis(*after)), None, reason.clone()),
            CloudError::InvalidInput { field, message } => {
                (None, Some(field.clone()), message.clone())
            }
            _ => (None, None, e.to_string()),
        };
        Self {
            kind: e.kind().to_owned(),
            message,
            after_ms,
            field,
        }
    }
}

impl From<WireError> for CloudError {
    fn from(w: WireError) -> Self {
        // The server's delay, held to the ceiling every server is held to.
        let after =
            server_delay::clamp_delay(Duration::from_millis(w.after_ms.unwrap_or_default()));
        match w.kind.as_str() {
            "not_found" => Self::InstanceNotFound,
            "not_implemented" => Self::NotImplemented,
            "implemented_elsewhere" => Self::ImplementedElsewhere,
            "throttled" => Self::Throttled { retry_after: after },
            "retry" => Self::Retry {
                after,
                reason: w.message,
            },
            "invalid_input" => Self::InvalidInput {
                field: w.field.unwrap_or_default(),
                message: w.message,
            },
            _ => Self::msg(w.message),
        }
    }
}

/// An answer: the value, or the error.
pub(crate) type Answer<T> = Result<T, WireError>;

/// Converts a provider result for the wire.
pub(crate) fn answer<T, W: for<'a> From<&'a T>>(result: &Result<T, CloudError>) -> Answer<W> {
    match result {
        Ok(value) => Ok(W::from(value)),
        Err(e) => Err(WireError::from(e)),
    }
}

/// Converts a provider batch result for the wire.
pub(crate) fn batch_answer<T, W: for<'a> From<&'a T>>(
    result: &ccm_cloud_provider::BatchResult<T>,
) -> Answer<Vec<Answer<W>>> {
    match result {
        Ok(items) => Ok(items.iter().map(answer).collect()),
        Err(e) => Err(WireError::from(e)),
    }
}

/// Plain values that need no mirror.
#[derive(Debug, Serialize, Deserialize)]
#[serde(transparent)]
pub(crate) struct Plain<T>(pub(crate) T);

impl<T: Clone> From<&T> for Plain<T> {
    fn from(value: &T) -> Self {
        Self(value.clone())
    }
}

/// [`InstanceMetadata`].
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct WireMetadata {
    provider_id: String,
    instance_type: String,
    zone: String,
    region: String,
    node_addresses: Vec<(String, String)>,
    additional_labels: BTreeMap<String, String>,
    #[serde(default)]
    node_names: Vec<String>,
}

impl From<&InstanceMetadata> for WireMetadata {
    fn from(m: &InstanceMetadata) -> Self {
        Self {
            provider_id: m.provider_id.clone(),
            instance_type: m.instance_type.clone(),
            zone: m.zone.clone(),
            region: m.region.clone(),
            node_addresses: m
                .node_addresses
                .iter()
                .map(|a| (a.kind.as_str().to_owned(), a.address.clone()))
                .collect(),
            additional_labels: m.additional_labels.clone(),
            node_names: m.node_names.clone(),
        }
    }
}

impl From<WireMetadata> for InstanceMetadata {
    fn from(w: WireMetadata) -> Self {
        Self {
            provider_id: w.provider_id,
            instance_type: w.instance_type,
            zone: w.zone,
            region: w.region,
            node_addresses: w
                .node_addresses
                .into_iter()
                .filter_map(|(kind, address)| {
                    NodeAddressType::parse(&kind).map(|kind| NodeAddress::new(kind, address))
                })
                .collect(),
            additional_labels: w.additional_labels,
            node_names: w.node_names,
        }
    }
}

/// [`LoadBalancerStatus`].
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct WireStatus {
    ingress: Vec<WireIngress>,
}

#[derive(Debug, Serialize, Deserialize)]
struct WireIngress {
    ip: Option<String>,
    hostname: Option<String>,
    ip_mode: Option<String>,
    ports: Vec<(i32, String, Option<String>)>,
}

impl From<&LoadBalancerStatus> for WireStatus {
    fn from(s: &LoadBalancerStatus) -> Self {
        Self {
            ingress: s
                .ingress
                .iter()
                .map(|i| WireIngress {
                    ip: i.ip.clone(),
                    hostname: i.hostname.clone(),
                    ip_mode: i.ip_mode.map(|m| m.as_str().to_owned()),
                    ports: i
                        .ports
                        .iter()
                        .map(|p| (p.port, p.protocol.clone(), p.error.clone()))
                        .collect(),
                })
                .collect(),
        }
    }
}

impl From<WireStatus> for LoadBalancerStatus {
    fn from(w: WireStatus) -> Self {
        Self {
            ingress: w
                .ingress
                .into_iter()
                .map(|i| LoadBalancerIngress {
                    ip: i.ip,
                    hostname: i.hostname,
                    ip_mode: match i.ip_mode.as_deref() {
                        Some("VIP") => Some(IpMode::Vip),
                        Some("Proxy") => Some(IpMode::Proxy),
                        _ => None,
                    },
                    ports: i
                        .ports
                        .into_iter()
                        .map(|(port, protocol, error)| PortStatus {
                            port,
                            protocol,
                            error,
                        })
                        .collect(),
                })
                .collect(),
        }
    }
}

/// `Option<LoadBalancerStatus>`.
#[derive(Debug, Serialize, Deserialize)]
#[serde(transparent)]
pub(crate) struct WireMaybeStatus(pub(crate) Option<WireStatus>);

impl From<&Option<LoadBalancerStatus>> for WireMaybeStatus {
    fn from(s: &Option<LoadBalancerStatus>) -> Self {
        Self(s.as_ref().map(WireStatus::from))
    }
}

/// `Option<LoadBalancerHealth>`: each target as node, state (`healthy`,
/// `initial`, `unhealthy`) and reason.
#[derive(Debug, Serialize, Deserialize)]
#[serde(transparent)]
pub(crate) struct WireMaybeHealth(Option<Vec<(String, String, String)>>);

impl From<&Option<LoadBalancerHealth>> for WireMaybeHealth {
    fn from(h: &Option<LoadBalancerHealth>) -> Self {
        Self(h.as_ref().map(|h| {
            h.targets
                .iter()
                .map(|t| {
                    let (state, reason) = match &t.state {
                        TargetState::Healthy => ("healthy", ""),
                        TargetState::Initial => ("initial", ""),
                        TargetState::Unhealthy { reason } => ("unhealthy", reason.as_str()),
                    };
                    (t.node.clone(), state.to_owned(), reason.to_owned())
                })
                .collect()
        }))
    }
}

impl From<WireMaybeHealth> for Option<LoadBalancerHealth> {
    fn from(w: WireMaybeHealth) -> Self {
        w.0.map(|targets| LoadBalancerHealth {
            targets: targets
                .into_iter()
                .map(|(node, state, reason)| {
                    let state = match state.as_str() {
                        "healthy" => TargetState::Healthy,
                        "initial" => TargetState::Initial,
                        _ => TargetState::Unhealthy { reason },
                    };
                    TargetHealth::new(node, state)
                })
                .collect(),
        })
    }
}

/// [`EnsuredLoadBalancer`].
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct WireEnsured {
    status: WireStatus,
    service_annotations: BTreeMap<String, String>,
    warnings: Vec<(String, String)>,
}

impl From<&EnsuredLoadBalancer> for WireEnsured {
    fn from(e: &EnsuredLoadBalancer) -> Self {
        Self {
            status: WireStatus::from(&e.status),
            service_annotations: e.service_annotations.clone(),
            warnings: e
                .warnings
                .iter()
                .map(|w| (w.reason.clone(), w.message.clone()))
                .collect(),
        }
    }
}

impl From<WireEnsured> for EnsuredLoadBalancer {
    fn from(w: WireEnsured) -> Self {
        Self {
            status: w.status.into(),
            service_annotations: w.service_annotations,
            warnings: w
                .warnings
                .into_iter()
                .map(|(reason, message)| LoadBalancerWarning::new(reason, message))
                .collect(),
        }
    }
}

/// [`Route`], its CIDR as text.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct WireRoute {
    pub(crate) name: String,
    pub(crate) target_node: String,
    pub(crate) target_provider_id: Option<String>,
    pub(crate) destination_cidr: String,
    pub(crate) blackhole: bool,
}

impl From<&Route> for WireRoute {
    fn from(r: &Route) -> Self {
        Self {
            name: r.name.clone(),
            target_node: r.target_node.clone(),
            target_provider_id: r.target_provider_id.clone(),
            destination_cidr: r.destination_cidr.to_string(),
            blackhole: r.blackhole,
        }
    }
}

impl TryFrom<WireRoute> for Route {
    type Error = CloudError;

    fn try_from(w: WireRoute) -> Result<Self, CloudError> {
        let destination_cidr = w.destination_cidr.parse().map_err(|_| {
            CloudError::invalid(
                "route.destination_cidr",
                format!("{:?} is not a CIDR", w.destination_cidr),
            )
        })?;
        Ok(Self {
            name: w.name,
            target_node: w.target_node,
            target_provider_id: w.target_provider_id,
            destination_cidr,
            blackhole: w.blackhole,
        })
    }
}

/// `Vec<Route>`.
#[derive(Debug, Serialize, Deserialize)]
#[serde(transparent)]
pub(crate) struct WireRoutes(pub(crate) Vec<WireRoute>);

impl From<&Vec<Route>> for WireRoutes {
    fn from(routes: &Vec<Route>) -> Self {
        Self(routes.iter().map(WireRoute::from).collect())
    }
}

/// What the server tells clients when they start: the batch sizes the
/// interface's synchronous `max_batch_size` must answer with.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub(crate) struct Limits {
    pub(crate) batch_size: usize,
    pub(crate) volume_batch_size: usize,
}

/// An [`OwnedResource`]: its owner as a kind (`load-balancer-name`,
/// `service`, `node`, `cluster`) and a value (`namespace/name` for a
/// Service).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct WireOwned {
    kind: String,
    id: String,
    name: String,
    owner_kind: String,
    #[serde(default)]
    owner: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    cidr: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    provider_id: Option<String>,
}

impl From<&OwnedResource> for WireOwned {
    fn from(r: &OwnedResource) -> Self {
        let (owner_kind, owner) = match &r.owner {
            Owner::LoadBalancerName(name) => ("load-balancer-name", name.clone()),
            Owner::Service { namespace, name } => ("service", format!("{namespace}/{name}")),
            Owner::Node(name) => ("node", name.clone()),
            Owner::Cluster => ("cluster", String::new()),
        };
        Self {
            kind: r.kind.clone(),
            id: r.id.clone(),
            name: r.name.clone(),
            owner_kind: owner_kind.to_owned(),
            owner,
            cidr: r.cidr.clone(),
            provider_id: r.provider_id.clone(),
        }
    }
}

impl TryFrom<WireOwned> for OwnedResource {
    type Error = CloudError;

    fn try_from(w: WireOwned) -> Result<Self, CloudError> {
        let owner = match w.owner_kind.as_str() {
            "load-balancer-name" => Owner::LoadBalancerName(w.owner),
            "service" => {
                let (namespace, name) = w.owner.split_once('/').unwrap_or_default();
                Owner::Service {
                    namespace: namespace.to_owned(),
                    name: name.to_owned(),
                }
            }
            "node" => Owner::Node(w.owner),
            "cluster" => Owner::Cluster,
            other => {
                return Err(CloudError::msg(format!(
                    "the fake cloud's owner kind `{other}`"
                )));
            }
        };
        Ok(Self {
            kind: w.kind,
            id: w.id,
            name: w.name,
            owner,
            cidr: w.cidr,
            provider_id: w.provider_id,
        })
    }
}

/// `Vec<OwnedResource>`.
#[derive(Debug, Serialize, Deserialize)]
#[serde(transparent)]
pub(crate) struct WireOwnedList(pub(crate) Vec<WireOwned>);

impl From<&Vec<OwnedResource>> for WireOwnedList {
    fn from(list: &Vec<OwnedResource>) -> Self {
        Self(list.iter().map(WireOwned::from).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_servers_delay_is_held_to_the_ceiling() {
        for kind in ["throttled", "retry"] {
            let err = CloudError::from(WireError {
                kind: kind.to_owned(),
                message: String::new(),
                after_ms: Some(u64::MAX),
                field: None,
            });
            let after = match err {
                CloudError::Throttled { retry_after } => retry_after,
                CloudError::Retry { after, .. } => after,
                other => panic!("{kind}: {other:?}"),
            };
            assert_eq!(after, server_delay::MAX_SERVER_DELAY, "{kind}");
        }
    }
}
