//! Instances: a node is found by its provider ID (`{{name}}://<id>`) or,
//! before it has one, by its name; a batch of nodes costs one request.

use std::num::NonZeroUsize;
use std::sync::Arc;

use async_trait::async_trait;
use ccm_cloud_provider::k8s_openapi::api::core::v1::Node;
use ccm_cloud_provider::{
    BatchResult, CloudError, InstanceMetadata, Instances, NodeAddress, NodeAddressType,
};

use crate::api::CloudInstance;
use crate::{PROVIDER_ID_PREFIX, {{Camel}}Provider};

/// The most nodes one lookup asks about.
const BATCH: NonZeroUsize = NonZeroUsize::new(100).expect("not zero");

/// How a node names its instance.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Key {
    Id(String),
    Name(String),
}

fn key(node: &Node) -> Key {
    let provider_id = node.spec.as_ref().and_then(|s| s.provider_id.as_deref());
    match provider_id.and_then(|id| id.strip_prefix(PROVIDER_ID_PREFIX)) {
        Some(id) => Key::Id(id.to_owned()),
        None => Key::Name(node.metadata.name.clone().unwrap_or_default()),
    }
}

impl {{Camel}}Provider {
    /// Each node's instance, in order, `None` when it has none: one request.
    async fn lookup(&self, nodes: &[Arc<Node>]) -> Result<Vec<Option<CloudInstance>>, CloudError> {
        let keys: Vec<Key> = nodes.iter().map(|n| key(n)).collect();
        let (mut ids, mut names) = (Vec::new(), Vec::new());
        for key in &keys {
            match key {
                Key::Id(id) => ids.push(id.clone()),
                Key::Name(name) => names.push(name.clone()),
            }
        }
        let found = self.api.describe_instances(&ids, &names).await?;
        Ok(keys
            .iter()
            .map(|key| {
                found
                    .iter()
                    .find(|i| match key {
                        Key::Id(id) => &i.id == id,
                        Key::Name(name) => &i.name == name,
                    })
                    .cloned()
            })
            .collect())
    }

    fn metadata(&self, instance: &CloudInstance) -> InstanceMetadata {
        let mut addresses = vec![NodeAddress::new(
            NodeAddressType::InternalIp,
            &instance.private_ip,
        )];
        if let Some(public) = &instance.public_ip {
            addresses.push(NodeAddress::new(NodeAddressType::ExternalIp, public));
        }
        addresses.push(NodeAddress::new(NodeAddressType::Hostname, &instance.name));
        InstanceMetadata {
            provider_id: format!("{PROVIDER_ID_PREFIX}{}", instance.id),
            instance_type: instance.instance_type.clone(),
            zone: instance.zone.clone(),
            region: self.settings.region.clone(),
            node_addresses: addresses,
            additional_labels: Default::default(),
            node_names: vec![instance.name.clone()],
        }
    }

    async fn one(&self, node: &Node) -> Result<Option<CloudInstance>, CloudError> {
        let mut found = self.lookup(&[Arc::new(node.clone())]).await?;
        Ok(found.pop().flatten())
    }
}

#[async_trait]
impl Instances for {{Camel}}Provider {
    async fn instance_exists(&self, node: &Node) -> Result<bool, CloudError> {
        Ok(self.one(node).await?.is_some())
    }

    async fn instance_shutdown(&self, node: &Node) -> Result<bool, CloudError> {
        let instance = self.one(node).await?.ok_or(CloudError::InstanceNotFound)?;
        Ok(instance.stopped)
    }

    async fn instance_metadata(&self, node: &Node) -> Result<InstanceMetadata, CloudError> {
        let instance = self.one(node).await?.ok_or(CloudError::InstanceNotFound)?;
        Ok(self.metadata(&instance))
    }

    fn max_batch_size(&self) -> NonZeroUsize {
        BATCH
    }

    async fn instances_exist(&self, nodes: &[Arc<Node>]) -> BatchResult<bool> {
        let found = self.lookup(nodes).await?;
        Ok(found.into_iter().map(|i| Ok(i.is_some())).collect())
    }

    async fn instances_shutdown(&self, nodes: &[Arc<Node>]) -> BatchResult<bool> {
        let found = self.lookup(nodes).await?;
        Ok(found
            .into_iter()
            .map(|i| i.map(|i| i.stopped).ok_or(CloudError::InstanceNotFound))
            .collect())
    }

    async fn instances_metadata(&self, nodes: &[Arc<Node>]) -> BatchResult<InstanceMetadata> {
        let found = self.lookup(nodes).await?;
        Ok(found
            .into_iter()
            .map(|i| i.map(|i| self.metadata(&i)).ok_or(CloudError::InstanceNotFound))
            .collect())
    }
}
