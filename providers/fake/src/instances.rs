//! The fake's `Instances`: batched lookups answered from its instance table.

use std::num::NonZeroUsize;
use std::sync::Arc;

use async_trait::async_trait;
use ccm_cloud_provider::k8s_openapi::api::core::v1::Node;
use ccm_cloud_provider::{BatchResult, CloudError, InstanceMetadata, Instances};

use crate::instance::{Instance, InstanceState};
use crate::{FakeCloud, Operation};

fn node_name(node: &Node) -> &str {
    node.metadata.name.as_deref().unwrap_or_default()
}

fn provider_id(node: &Node) -> Option<&str> {
    node.spec
        .as_ref()?
        .provider_id
        .as_deref()
        .filter(|id| !id.is_empty())
}

fn exists(instance: Option<&Instance>) -> Result<bool, CloudError> {
    Ok(instance.is_some_and(|i| i.state != InstanceState::Terminated))
}

fn shutdown(instance: Option<&Instance>) -> Result<bool, CloudError> {
    match instance {
        Some(i) if i.state != InstanceState::Terminated => Ok(i.state == InstanceState::Stopped),
        _ => Err(CloudError::InstanceNotFound),
    }
}

fn metadata(instance: Option<&Instance>) -> Result<InstanceMetadata, CloudError> {
    match instance {
        Some(i) if i.state != InstanceState::Terminated => Ok(i.metadata()),
        _ => Err(CloudError::InstanceNotFound),
    }
}

impl FakeCloud {
    /// Answers a single-node call with `answer` applied to the node's instance.
    async fn single<T>(
        &self,
        op: Operation,
        node: &Node,
        answer: fn(Option<&Instance>) -> Result<T, CloudError>,
    ) -> Result<T, CloudError> {
        self.enter(op, vec![node_name(node).to_owned()], None)
            .await?;
        let settings = self.settings();
        let auto = settings.auto_instances.then_some(&settings);
        answer(
            self.state()
                .lookup(node_name(node), provider_id(node), auto),
        )
    }

    /// Answers a batch call: one logged call, then `answer` per node.
    async fn batch<T>(
        &self,
        op: Operation,
        nodes: &[Arc<Node>],
        answer: fn(Option<&Instance>) -> Result<T, CloudError>,
    ) -> BatchResult<T> {
        let settings = self.settings();
        if nodes.len() > settings.batch_size {
            return Err(CloudError::msg(format!(
                "{op}: a batch of {} nodes exceeds the maximum of {}",
                nodes.len(),
                settings.batch_size
            )));
        }
        let names = nodes.iter().map(|n| node_name(n).to_owned()).collect();
        self.enter(op, names, Some(nodes.len())).await?;
        let auto = settings.auto_instances.then_some(&settings);
        let mut state = self.state();
        Ok(nodes
            .iter()
            .map(|n| answer(state.lookup(node_name(n), provider_id(n), auto)))
            .collect())
    }
}

#[async_trait]
impl Instances for FakeCloud {
    async fn instance_exists(&self, node: &Node) -> Result<bool, CloudError> {
        self.single(Operation::InstanceExists, node, exists).await
    }

    async fn instance_shutdown(&self, node: &Node) -> Result<bool, CloudError> {
        self.single(Operation::InstanceShutdown, node, shutdown)
            .await
    }

    async fn instance_metadata(&self, node: &Node) -> Result<InstanceMetadata, CloudError> {
        self.single(Operation::InstanceMetadata, node, metadata)
            .await
    }

    fn max_batch_size(&self) -> NonZeroUsize {
        NonZeroUsize::new(self.settings().batch_size).unwrap_or(NonZeroUsize::MIN)
    }

    async fn instances_exist(&self, nodes: &[Arc<Node>]) -> BatchResult<bool> {
        self.batch(Operation::InstancesExist, nodes, exists).await
    }

    async fn instances_shutdown(&self, nodes: &[Arc<Node>]) -> BatchResult<bool> {
        self.batch(Operation::InstancesShutdown, nodes, shutdown)
            .await
    }

    async fn instances_metadata(&self, nodes: &[Arc<Node>]) -> BatchResult<InstanceMetadata> {
        self.batch(Operation::InstancesMetadata, nodes, metadata)
            .await
    }
}
