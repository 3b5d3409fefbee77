//! Nodes as droplets.

use std::collections::HashMap;
use std::num::NonZeroUsize;
use std::sync::Arc;

use async_trait::async_trait;
use ccm_cloud_provider::k8s_openapi::api::core::v1::Node;
use ccm_cloud_provider::{
    BatchResult, CloudError, InstanceMetadata, Instances, NodeAddress, NodeAddressType,
};

use crate::DigitalOceanProvider;
use crate::api::types::{Droplet, DropletEnvelope};
use crate::provider_id::{PROVIDER_ID_PREFIX, droplet_id_from_provider_id, provider_id};

/// The most nodes one batch lookup answers for: one page of the droplet list.
/// (A batch costs one listing of the account's droplets whatever its size.)
pub const MAX_BATCH_SIZE: usize = 200;

/// A droplet status meaning the droplet is powered off.
const STATUS_OFF: &str = "off";

/// How a node names its droplet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum DropletRef {
    /// From `spec.providerID`.
    Id(u64),
    /// From the node name, before the node has a provider ID.
    Name(String),
}

impl DropletRef {
    pub(crate) fn of(node: &Node) -> Result<Self, CloudError> {
        let name = node.metadata.name.as_deref().unwrap_or_default();
        match ccm_cloud_provider::provider_id(node) {
            Some(pid) => droplet_id_from_provider_id(pid)
                .map(Self::Id)
                .ok_or_else(|| {
                    CloudError::msg(format!(
                        "node {name}: provider ID `{pid}` is not {PROVIDER_ID_PREFIX}<droplet-id>"
                    ))
                }),
            None => Ok(Self::Name(name.to_owned())),
        }
    }
}

/// Whether `droplet` answers to node name `name`: its name, or one of its
/// addresses for nodes named by IP (as upstream matches).
fn answers_to(droplet: &Droplet, name: &str) -> bool {
    droplet.name == name
        || [
            droplet.private_ipv4(),
            droplet.public_ipv4(),
            droplet.public_ipv6(),
        ]
        .contains(&Some(name))
}

/// The droplets of one listing, indexed for many lookups.
pub(crate) struct DropletIndex<'a> {
    by_id: HashMap<u64, &'a Droplet>,
    all: &'a [Droplet],
}

impl<'a> DropletIndex<'a> {
    pub(crate) fn new(all: &'a [Droplet]) -> Self {
        Self {
            by_id: all.iter().map(|d| (d.id, d)).collect(),
            all,
        }
    }

    pub(crate) fn find(&self, r: &DropletRef) -> Option<&'a Droplet> {
        match r {
            DropletRef::Id(id) => self.by_id.get(id).copied(),
            DropletRef::Name(name) => self
                .all
                .iter()
                .find(|d| d.name == *name)
                .or_else(|| self.all.iter().find(|d| answers_to(d, name))),
        }
    }
}

fn metadata(droplet: &Droplet) -> InstanceMetadata {
    let mut addresses = vec![NodeAddress::new(NodeAddressType::Hostname, &droplet.name)];
    if let Some(ip) = droplet.private_ipv4() {
        addresses.push(NodeAddress::new(NodeAddressType::InternalIp, ip));
    }
    for ip in [droplet.public_ipv4(), droplet.public_ipv6()]
        .into_iter()
        .flatten()
    {
        addresses.push(NodeAddress::new(NodeAddressType::ExternalIp, ip));
    }
    InstanceMetadata {
        provider_id: provider_id(droplet.id),
        instance_type: droplet.size_slug.clone(),
        zone: String::new(),
        region: droplet.region.slug.clone(),
        node_addresses: addresses,
        additional_labels: Default::default(),
        node_names: vec![droplet.name.clone()],
    }
}

impl DigitalOceanProvider {
    /// One droplet: `GET /v2/droplets/{id}`, or the list filtered by name.
    async fn droplet(&self, r: &DropletRef) -> Result<Option<Droplet>, CloudError> {
        match r {
            DropletRef::Id(id) => match self
                .api
                .get::<DropletEnvelope>(&format!("/v2/droplets/{id}"), &[])
                .await
            {
                Ok(found) => Ok(Some(found.droplet)),
                Err(e) if e.is_not_found() => Ok(None),
                Err(e) => Err(e.into()),
            },
            DropletRef::Name(name) => {
                let found: Vec<Droplet> = self
                    .api
                    .list_all("/v2/droplets", &[("name", name.clone())])
                    .await?;
                Ok(found.into_iter().find(|d| answers_to(d, name)))
            }
        }
    }

    /// Every droplet of the account, all pages.
    pub(crate) async fn all_droplets(&self) -> Result<Vec<Droplet>, CloudError> {
        Ok(self.api.list_all("/v2/droplets", &[]).await?)
    }

    /// Answers `nodes` with `answer`: one droplet lookup for a single node,
    /// one listing of all droplets for several.
    async fn lookup_batch<T>(
        &self,
        nodes: &[&Node],
        answer: impl Fn(Option<&Droplet>) -> Result<T, CloudError> + Send + Sync,
    ) -> BatchResult<T> {
        if nodes.is_empty() {
            return Ok(Vec::new());
        }
        if let [node] = nodes {
            let found = match DropletRef::of(node) {
                Ok(r) => self.droplet(&r).await?,
                Err(e) => return Ok(vec![Err(e)]),
            };
            return Ok(vec![answer(found.as_ref())]);
        }
        let droplets = self.all_droplets().await?;
        let index = DropletIndex::new(&droplets);
        Ok(nodes
            .iter()
            .map(|node| DropletRef::of(node).and_then(|r| answer(index.find(&r))))
            .collect())
    }

    async fn lookup_one<T>(
        &self,
        node: &Node,
        answer: impl Fn(Option<&Droplet>) -> Result<T, CloudError> + Send + Sync,
    ) -> Result<T, CloudError> {
        self.lookup_batch(&[node], answer)
            .await?
            .pop()
            .unwrap_or(Err(CloudError::InstanceNotFound))
    }
}

fn exists(d: Option<&Droplet>) -> Result<bool, CloudError> {
    Ok(d.is_some())
}

fn shutdown(d: Option<&Droplet>) -> Result<bool, CloudError> {
    d.map(|d| d.status == STATUS_OFF)
        .ok_or(CloudError::InstanceNotFound)
}

fn described(d: Option<&Droplet>) -> Result<InstanceMetadata, CloudError> {
    d.map(metadata).ok_or(CloudError::InstanceNotFound)
}

fn refs(nodes: &[Arc<Node>]) -> Vec<&Node> {
    nodes.iter().map(Arc::as_ref).collect()
}

/// Nodes are droplets: by provider ID `digitalocean://<droplet-id>`, or by
/// droplet name (or address) equal to the node name before the node has
/// one. A droplet with status `off` is shut down; a deleted droplet does
/// not exist.
#[async_trait]
impl Instances for DigitalOceanProvider {
    async fn instance_exists(&self, node: &Node) -> Result<bool, CloudError> {
        self.lookup_one(node, exists).await
    }

    async fn instance_shutdown(&self, node: &Node) -> Result<bool, CloudError> {
        self.lookup_one(node, shutdown).await
    }

    async fn instance_metadata(&self, node: &Node) -> Result<InstanceMetadata, CloudError> {
        self.lookup_one(node, described).await
    }

    fn max_batch_size(&self) -> NonZeroUsize {
        NonZeroUsize::new(MAX_BATCH_SIZE).unwrap_or(NonZeroUsize::MIN)
    }

    async fn instances_exist(&self, nodes: &[Arc<Node>]) -> BatchResult<bool> {
        self.lookup_batch(&refs(nodes), exists).await
    }

    async fn instances_shutdown(&self, nodes: &[Arc<Node>]) -> BatchResult<bool> {
        self.lookup_batch(&refs(nodes), shutdown).await
    }

    async fn instances_metadata(&self, nodes: &[Arc<Node>]) -> BatchResult<InstanceMetadata> {
        self.lookup_batch(&refs(nodes), described).await
    }
}
