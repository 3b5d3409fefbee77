//! Pod CIDRs the cloud assigns to nodes (cloud-provider-aws's `nodeipam`
//! controller reads the IPv6 prefix delegated to an instance's interface).

use std::num::NonZeroUsize;

use async_trait::async_trait;
use ipnet::IpNet;

use crate::BatchResult;

/// The cloud's pod CIDR for one node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PodCidr {
    /// The prefix the node's pods use.
    Prefix(IpNet),
    /// The cloud has no such instance (yet, or any more).
    NotFound,
    /// The provider ID names nothing this capability serves (another
    /// cloud's, a serverless node such as Fargate): left alone.
    NotApplicable(String),
}

/// Reads the pod CIDR the cloud delegated to each node's instance.
///
/// # Contract for implementers
/// - [`PodCidrs::pod_cidrs_of`] takes at most [`PodCidrs::max_batch_size`]
///   provider IDs and answers one result per ID, in input order; `Err` for
///   the whole call when it failed, and `Err` for one ID whose instance has
///   no usable prefix (none, or several): the controller retries it with
///   backoff.
#[async_trait]
pub trait PodCidrs: Send + Sync {
    /// The most provider IDs one call takes.
    fn max_batch_size(&self) -> NonZeroUsize {
        NonZeroUsize::MIN
    }

    /// The pod CIDR of each instance in `provider_ids`, in input order.
    async fn pod_cidrs_of(&self, provider_ids: &[String]) -> BatchResult<PodCidr>;
}
