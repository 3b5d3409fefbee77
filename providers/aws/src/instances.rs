//! Instance lookups for nodes (upstream's `InstancesV2`), batched.
//!
//! A node is found by the instance ID in `spec.providerID` or, when that is
//! empty, by private DNS name = node name (or by instance ID when the node
//! is named after its instance). A terminated instance does not exist; a
//! stopped one is shut down, and a stopping one not yet, as upstream
//! (`InstanceShutdownByProviderID`). Metadata carries the zone ID label and
//! the network topology labels (`topology`).

pub(crate) mod lookup;

use std::collections::BTreeMap;
use std::num::NonZeroUsize;
use std::sync::Arc;

use async_trait::async_trait;
use aws_sdk_ec2::types::{Instance, InstanceStateName};
use ccm_cloud_provider::k8s_openapi::api::core::v1::Node;
use ccm_cloud_provider::{BatchResult, CloudError, InstanceMetadata, Instances};

use crate::addresses::node_addresses;
use crate::provider::{AwsProvider, Cloud};
use crate::provider_id;
use crate::topology::{NETWORK_NODE_LABEL, Wanted};
use crate::zones::ZONE_ID_LABEL;
use lookup::{FILTER_VALUES, state};

impl Cloud {
    /// The live (not terminated) instance behind each node.
    async fn live_instances(&self, nodes: &[&Node]) -> BatchResult<Option<Instance>> {
        let found = self.find_instances(nodes).await?;
        Ok(found
            .into_iter()
            .map(|r| r.map(|i| i.filter(|i| state(i) != InstanceStateName::Terminated)))
            .collect())
    }

    async fn metadata(&self, nodes: &[&Node]) -> BatchResult<InstanceMetadata> {
        let instances = self.live_instances(nodes).await?;
        let zone_names: Vec<&str> = instances
            .iter()
            .filter_map(|r| r.as_ref().ok().and_then(Option::as_ref))
            .filter_map(zone)
            .collect();
        let zones = self.zones.lookup(&self.api, &zone_names).await?;
        let wanted: Vec<Wanted<'_>> = nodes
            .iter()
            .zip(&instances)
            .filter(|(node, _)| !has_topology(node))
            .filter_map(|(_, instance)| {
                let instance = instance.as_ref().ok()?.as_ref()?;
                Some(Wanted {
                    id: instance.instance_id()?,
                    instance_type: instance.instance_type().map_or("", |t| t.as_str()),
                })
            })
            .collect();
        let topology = self.topology.labels(&self.api, &self.region, &wanted).await;
        Ok(nodes
            .iter()
            .zip(instances)
            .map(|(node, instance)| {
                let instance = instance?.ok_or(CloudError::InstanceNotFound)?;
                let zone_name = zone(&instance).unwrap_or_default();
                let node_addresses = node_addresses(&instance, &self.config.node_ip_families)
                    .map_err(|e| CloudError::other(e.to_string(), e))?;
                let mut additional_labels = BTreeMap::new();
                if let Some(z) = zones.get(zone_name) {
                    additional_labels.insert(ZONE_ID_LABEL.to_owned(), z.id.clone());
                }
                if let Some(labels) = instance.instance_id().and_then(|id| topology.get(id)) {
                    additional_labels.extend(labels.clone()?);
                }
                let node_names = [instance.private_dns_name(), instance.instance_id()]
                    .into_iter()
                    .flatten()
                    .filter(|name| !name.is_empty())
                    .map(str::to_owned)
                    .collect();
                Ok(InstanceMetadata {
                    provider_id: provider_id_of(node, &instance),
                    instance_type: instance
                        .instance_type()
                        .map(|t| t.as_str().to_owned())
                        .unwrap_or_default(),
                    zone: zone_name.to_owned(),
                    region: self.region.clone(),
                    node_addresses,
                    additional_labels,
                    node_names,
                })
            })
            .collect())
    }
}

/// Whether the node already has its network topology labels (upstream
/// then does not ask again).
fn has_topology(node: &Node) -> bool {
    let first = format!("{NETWORK_NODE_LABEL}1");
    node.metadata
        .labels
        .as_ref()
        .is_some_and(|labels| labels.contains_key(&first))
}

fn zone(instance: &Instance) -> Option<&str> {
    instance.placement().and_then(|p| p.availability_zone())
}

/// The node's own provider ID when it has one, as the node controller
/// compares it; otherwise `aws:///<zone>/<instance-id>`.
fn provider_id_of(node: &Node, instance: &Instance) -> String {
    match ccm_cloud_provider::provider_id(node) {
        Some(id) => id.to_owned(),
        _ => provider_id::format(
            zone(instance).unwrap_or_default(),
            instance.instance_id().unwrap_or_default(),
        ),
    }
}

fn shut_down(instance: Option<&Instance>) -> Result<bool, CloudError> {
    let instance = instance.ok_or(CloudError::InstanceNotFound)?;
    Ok(state(instance) == InstanceStateName::Stopped)
}

fn single<T>(batch: BatchResult<T>) -> Result<T, CloudError> {
    batch?
        .pop()
        .unwrap_or_else(|| Err(CloudError::msg("a batch of one node answered for none")))
}

fn refs(nodes: &[Arc<Node>]) -> Vec<&Node> {
    nodes.iter().map(AsRef::as_ref).collect()
}

#[async_trait]
impl Instances for AwsProvider {
    async fn instance_exists(&self, node: &Node) -> Result<bool, CloudError> {
        let found = self.cloud()?.live_instances(&[node]).await;
        single(found).map(|i| i.is_some())
    }

    async fn instance_shutdown(&self, node: &Node) -> Result<bool, CloudError> {
        let found = self.cloud()?.live_instances(&[node]).await;
        single(found).and_then(|i| shut_down(i.as_ref()))
    }

    async fn instance_metadata(&self, node: &Node) -> Result<InstanceMetadata, CloudError> {
        single(self.cloud()?.metadata(&[node]).await)
    }

    /// AWS takes 200 values per `DescribeInstances` filter.
    fn max_batch_size(&self) -> NonZeroUsize {
        NonZeroUsize::new(FILTER_VALUES).unwrap_or(NonZeroUsize::MIN)
    }

    async fn instances_exist(&self, nodes: &[Arc<Node>]) -> BatchResult<bool> {
        let found = self.cloud()?.live_instances(&refs(nodes)).await?;
        Ok(found.into_iter().map(|r| r.map(|i| i.is_some())).collect())
    }

    async fn instances_shutdown(&self, nodes: &[Arc<Node>]) -> BatchResult<bool> {
        let found = self.cloud()?.live_instances(&refs(nodes)).await?;
        Ok(found
            .into_iter()
            .map(|r| r.and_then(|i| shut_down(i.as_ref())))
            .collect())
    }

    async fn instances_metadata(&self, nodes: &[Arc<Node>]) -> BatchResult<InstanceMetadata> {
        self.cloud()?.metadata(&refs(nodes)).await
    }
}

#[cfg(test)]
mod tests {
    use aws_sdk_ec2::types::InstanceState;

    use super::*;

    #[test]
    fn only_a_stopped_instance_is_shut_down() {
        let in_state = |name: InstanceStateName| {
            Instance::builder()
                .state(InstanceState::builder().name(name).build())
                .build()
        };
        for (name, down) in [
            (InstanceStateName::Stopped, true),
            (InstanceStateName::Stopping, false),
            (InstanceStateName::Running, false),
            (InstanceStateName::Pending, false),
            (InstanceStateName::ShuttingDown, false),
        ] {
            let answer = shut_down(Some(&in_state(name.clone())));
            assert!(matches!(answer, Ok(d) if d == down), "{name:?}: {answer:?}");
        }
        assert!(matches!(shut_down(None), Err(CloudError::InstanceNotFound)));
    }
}
