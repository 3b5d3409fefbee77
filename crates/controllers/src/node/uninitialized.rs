//! `ccm_node_uninitialized`: one series, value 1, per node that still
//! carries the uninitialized taint, read from the node informer's store at
//! scrape time, so a node that is initialized or deleted drops out with no
//! bookkeeping. It lets an alert name the node that stays uninitialized.

use k8s_openapi::api::core::v1::Node;
use kube::ResourceExt;
use kube::runtime::reflector::Store;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::gauge::ConstGauge;

use crate::taints::{self, UNINITIALIZED};

/// The metric's name.
const NAME: &str = "ccm_node_uninitialized";

/// Reads the taint off every node in the store when scraped.
pub(super) struct Uninitialized {
    pub(super) nodes: Store<Node>,
}

impl std::fmt::Debug for Uninitialized {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Uninitialized").finish_non_exhaustive()
    }
}

impl Collector for Uninitialized {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        let mut names: Vec<String> = self
            .nodes
            .state()
            .iter()
            .filter(|node| taints::has(node, UNINITIALIZED))
            .map(|node| node.name_any())
            .collect();
        names.sort_unstable();
        let mut family = encoder.encode_descriptor(
            NAME,
            "1 for each node that still carries the node.cloudprovider.kubernetes.io/uninitialized taint",
            None,
            MetricType::Gauge,
        )?;
        for name in &names {
            let labels = [("node", name.as_str())];
            ConstGauge::new(1_i64).encode(family.encode_family(&labels)?)?;
        }
        Ok(())
    }
}
