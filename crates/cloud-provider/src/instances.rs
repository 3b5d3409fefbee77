//! Instances (upstream's `cloudprovider.InstancesV2`), asked in batches:
//! what machine is behind a node, and whether it still exists or is shut
//! down.

use std::collections::BTreeMap;
use std::num::NonZeroUsize;
use std::sync::Arc;

use async_trait::async_trait;
use k8s_openapi::api::core::v1::Node;

use crate::CloudError;

/// The node's `spec.providerID`, when set and not empty.
pub fn provider_id(node: &Node) -> Option<&str> {
    node.spec
        .as_ref()
        .and_then(|s| s.provider_id.as_deref())
        .filter(|id| !id.is_empty())
}

/// The answer to a batch call: `Err` when the whole call failed (every node
/// is retried), otherwise one result per input node, in input order.
pub type BatchResult<T> = Result<Vec<Result<T, CloudError>>, CloudError>;

/// The kind of a node address, as in `core/v1` `NodeAddress.type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum NodeAddressType {
    /// `InternalIP`
    InternalIp,
    /// `ExternalIP`
    ExternalIp,
    /// `InternalDNS`
    InternalDns,
    /// `ExternalDNS`
    ExternalDns,
    /// `Hostname`
    Hostname,
}

impl NodeAddressType {
    /// The Kubernetes spelling (`InternalIP`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::InternalIp => "InternalIP",
            Self::ExternalIp => "ExternalIP",
            Self::InternalDns => "InternalDNS",
            Self::ExternalDns => "ExternalDNS",
            Self::Hostname => "Hostname",
        }
    }

    /// Parses the Kubernetes spelling.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "InternalIP" => Self::InternalIp,
            "ExternalIP" => Self::ExternalIp,
            "InternalDNS" => Self::InternalDns,
            "ExternalDNS" => Self::ExternalDns,
            "Hostname" => Self::Hostname,
            _ => return None,
        })
    }
}

/// One address of an instance.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct NodeAddress {
    /// What kind of address this is.
    pub kind: NodeAddressType,
    /// The address itself: an IP for the IP kinds, a name otherwise.
    pub address: String,
}

impl NodeAddress {
    /// Builds an address.
    pub fn new(kind: NodeAddressType, address: impl Into<String>) -> Self {
        Self {
            kind,
            address: address.into(),
        }
    }
}

/// What the cloud knows about the instance behind a node (upstream's
/// `InstanceMetadata`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct InstanceMetadata {
    /// `spec.providerID`, such as `aws:///us-east-1a/i-0abc`.
    pub provider_id: String,
    /// The instance type, for `node.kubernetes.io/instance-type`.
    pub instance_type: String,
    /// The zone, for `topology.kubernetes.io/zone`. Empty when unknown.
    pub zone: String,
    /// The region, for `topology.kubernetes.io/region`. Empty when unknown.
    pub region: String,
    /// Addresses in the cloud's order; dual-stack order is kept as given.
    pub node_addresses: Vec<NodeAddress>,
    /// Further labels the provider sets on the node (such as
    /// `topology.k8s.aws/zone-id`).
    pub additional_labels: BTreeMap<String, String>,
    /// The names a node for this instance may have, as this cloud names
    /// nodes (AWS: the private DNS name and the instance ID; DigitalOcean:
    /// the droplet's name). Empty when the provider cannot tell: the
    /// kubelet-serving CSR approver then denies rather than guess, since a
    /// kubelet sets its own node's `spec.providerID`.
    pub node_names: Vec<String>,
}

/// Instance lookups for nodes (upstream's `InstancesV2`).
///
/// A node is identified by `spec.providerID` when it is set, and otherwise by
/// whatever the provider documents (usually the node name).
///
/// # Contract for implementers
/// - Every method is read-only on the cloud and on its inputs, and is safe
///   to call concurrently and repeatedly.
/// - Return [`CloudError::Throttled`] when the cloud rate-limits the call
///   and [`CloudError::Retry`] when the answer is not known yet; never sleep
///   inside a call to wait for a rate limit to pass.
/// - The batch methods return one result per input node, in input order, or
///   `Err` when the call as a whole failed. Callers never pass more than
///   [`Instances::max_batch_size`] nodes.
#[async_trait]
pub trait Instances: Send + Sync {
    /// Whether the instance for `node` exists. A terminated instance does not
    /// exist.
    ///
    /// # Errors
    /// Not finding the instance is `Ok(false)`, never an error. An error
    /// means the answer is unknown, and the node lifecycle controller never
    /// deletes a node on an unknown answer.
    async fn instance_exists(&self, node: &Node) -> Result<bool, CloudError>;

    /// Whether the instance for `node` is shut down (stopped, not
    /// terminated).
    ///
    /// # Errors
    /// [`CloudError::InstanceNotFound`] when there is no such instance.
    async fn instance_shutdown(&self, node: &Node) -> Result<bool, CloudError>;

    /// The instance's metadata.
    ///
    /// # Errors
    /// [`CloudError::InstanceNotFound`] when there is no such instance.
    async fn instance_metadata(&self, node: &Node) -> Result<InstanceMetadata, CloudError>;

    /// The most nodes one batch call answers for. Defaults to 1, which makes
    /// the batch methods below a loop over the single-node methods.
    fn max_batch_size(&self) -> NonZeroUsize {
        NonZeroUsize::MIN
    }

    /// [`Instances::instance_exists`] for many nodes in one cloud call.
    ///
    /// The default calls the single-node method once per node.
    async fn instances_exist(&self, nodes: &[Arc<Node>]) -> BatchResult<bool> {
        let mut out = Vec::with_capacity(nodes.len());
        for node in nodes {
            out.push(self.instance_exists(node).await);
        }
        Ok(out)
    }

    /// [`Instances::instance_shutdown`] for many nodes in one cloud call.
    ///
    /// The default calls the single-node method once per node.
    async fn instances_shutdown(&self, nodes: &[Arc<Node>]) -> BatchResult<bool> {
        let mut out = Vec::with_capacity(nodes.len());
        for node in nodes {
            out.push(self.instance_shutdown(node).await);
        }
        Ok(out)
    }

    /// [`Instances::instance_metadata`] for many nodes in one cloud call.
    ///
    /// The default calls the single-node method once per node.
    async fn instances_metadata(&self, nodes: &[Arc<Node>]) -> BatchResult<InstanceMetadata> {
        let mut out = Vec::with_capacity(nodes.len());
        for node in nodes {
            out.push(self.instance_metadata(node).await);
        }
        Ok(out)
    }
}
