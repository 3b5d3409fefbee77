//! The periodic refresh of initialized nodes' addresses and labels.

use std::num::NonZeroUsize;
use std::time::Duration;

use std::sync::Arc;

use ccm_cloud_provider::{CloudError, InstanceMetadata};
use ccm_runtime::{Activity, BatchCall, Informer, lookup_batches};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use kube::ResourceExt;
use kube::api::Api;
use prometheus_client::metrics::counter::Counter;
use tokio::time::MissedTickBehavior;

use super::{addresses, labels};
use crate::taints::{self, UNINITIALIZED};
use crate::writes::{self, NodeChange};

/// Every `period` (`--node-status-update-frequency`), looks up every
/// initialized node in batches and writes only what changed.
pub(super) struct Refresh {
    pub(super) api: Api<Node>,
    pub(super) informer: Arc<Informer<Node>>,
    pub(super) call: BatchCall<InstanceMetadata>,
    pub(super) max_batch: NonZeroUsize,
    pub(super) concurrency: NonZeroUsize,
    pub(super) period: Duration,
    pub(super) activity: Activity,
    pub(super) counts: RefreshCounts,
}

/// What the refresh cost, apart from initialization: both look nodes up
/// with `instances_metadata`, and a burst of new nodes that outlasts a
/// period shares its window with a refresh of the nodes already done.
#[derive(Debug, Clone, Default)]
pub(super) struct RefreshCounts {
    /// `ccm_node_refresh_cloud_calls`: batch metadata calls.
    pub(super) calls: Counter,
    /// `ccm_node_refresh_nodes`: nodes looked up.
    pub(super) nodes: Counter,
}

impl Refresh {
    pub(super) async fn run(self) {
        self.informer.wait_until_ready().await;
        let mut ticks = tokio::time::interval(self.period);
        ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
        loop {
            ticks.tick().await;
            let _pass = self.activity.busy();
            self.pass().await;
        }
    }

    /// One pass over every initialized node.
    pub(super) async fn pass(&self) {
        let nodes: Vec<_> = self
            .informer
            .store()
            .state()
            .into_iter()
            .filter(|n| !taints::has(n, UNINITIALIZED))
            .collect();
        if nodes.is_empty() {
            return;
        }
        let count = nodes.len();
        // Each batch is applied before the next is taken, so a pass holds
        // a few calls' answers at a time rather than every node's (5,000
        // answers at once, every period, in the benchmark's cluster).
        let mut batches = lookup_batches(nodes, &self.call, self.max_batch, self.concurrency);
        let mut written = 0;
        while let Some(answers) = batches.next().await {
            self.counts.calls.inc();
            self.counts.nodes.inc_by(answers.len() as u64);
            for (node, answer) in answers {
                if self.refresh_node(&node, answer).await {
                    written += 1;
                }
            }
        }
        tracing::debug!(
            nodes = count,
            written,
            "refreshed node addresses and labels"
        );
    }

    /// Applies the cloud's answer for `node`; `true` if anything was
    /// written. Failures are logged: the next pass tries again.
    async fn refresh_node(
        &self,
        node: &Node,
        answer: Result<InstanceMetadata, CloudError>,
    ) -> bool {
        match answer {
            Ok(metadata) => match self.apply(node, &metadata).await {
                Ok(wrote) => wrote,
                Err(err) => {
                    tracing::warn!(node = %node.name_any(), error = %err, "could not refresh node");
                    false
                }
            },
            // The lifecycle controller deals with vanished instances.
            Err(CloudError::InstanceNotFound) => false,
            Err(err) => {
                tracing::warn!(node = %node.name_any(), error = %err, "could not look node up");
                false
            }
        }
    }

    /// Writes the node's changed addresses and labels; `true` if anything
    /// was written.
    async fn apply(&self, node: &Node, metadata: &InstanceMetadata) -> Result<bool, kube::Error> {
        let name = node.name_any();
        let mut wrote = false;
        match addresses::desired(node, &metadata.node_addresses) {
            Ok(Some(desired)) if desired.as_slice() != addresses::current(node) => {
                writes::set_addresses(&self.api, &name, &desired).await?;
                wrote = true;
            }
            Ok(_) => {}
            Err(err) => tracing::warn!(node = %name, error = %err, "keeping the node's addresses"),
        }
        let changed = writes::patch_node(&self.api, node, |current| {
            let labels = labels::changes(current, metadata);
            (!labels.is_empty()).then(|| NodeChange {
                labels,
                ..NodeChange::default()
            })
        })
        .await?;
        Ok(wrote || changed.is_some())
    }
}
