//! What the controllers a provider adds (`provider_controllers`) share:
//! their settings, upstream's per-node retry limit and its work-item
//! error counter.

mod metrics;
mod retries;

use std::collections::BTreeMap;

pub(crate) use metrics::{RETRIES_EXHAUSTED, TOTAL_ERRORS, WorkItemErrors};
pub(crate) use retries::{MAX_RETRIES, RetryBudget};

/// A client-side limit on how fast a controller takes up nodes (upstream's
/// `--*-controller-rate-limit` and `--*-controller-burst-limit`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct QueueRate {
    /// Nodes a second.
    pub qps: f64,
    /// Nodes at once after a quiet spell.
    pub burst: u32,
}

/// What providers' controllers are configured with (from their flags).
#[derive(Debug, Clone, PartialEq)]
pub struct ProviderControllerSettings {
    /// `--tags`: put on every node's instance.
    pub tags: BTreeMap<String, String>,
    /// `--tagging-controller-rate-limit` and `-burst-limit`, when both are
    /// above zero.
    pub tagging_rate: Option<QueueRate>,
    /// `--nodeipam-controller-rate-limit` and `-burst-limit`, when both are
    /// above zero.
    pub nodeipam_rate: Option<QueueRate>,
    /// `--dualstack`: also allocate an IPv4 range from `--cluster-cidr`.
    pub dual_stack: bool,
    /// `--node-cidr-mask-size`: the IPv4 range's prefix length.
    pub node_cidr_mask_size: u8,
}

impl Default for ProviderControllerSettings {
    /// Upstream's defaults.
    fn default() -> Self {
        Self {
            tags: BTreeMap::new(),
            tagging_rate: None,
            nodeipam_rate: None,
            dual_stack: false,
            node_cidr_mask_size: 24,
        }
    }
}
