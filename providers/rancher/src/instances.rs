//! Instances: Rancher hosts. A node is found by its provider ID
//! (`rancher://<host uuid>`) or, before it has one, by its name as
//! upstream matches it (case-insensitive; an FQDN on one side matches a
//! short hostname on the other). One host list, with each host's addresses
//! included, answers a whole batch of nodes; upstream lists every host once
//! per node and fetches its addresses with a second request.

use std::num::NonZeroUsize;
use std::sync::Arc;

use async_trait::async_trait;
use ccm_cloud_provider::k8s_openapi::api::core::v1::Node;
use ccm_cloud_provider::{
    BatchResult, CloudError, InstanceMetadata, Instances, NodeAddress, NodeAddressType,
};

use crate::cattle::Host;
use crate::{PROVIDER_ID_PREFIX, PROVIDER_NAME, RancherProvider};

/// The most nodes one lookup answers for: one host list serves any number,
/// so this only bounds the answer's size.
const BATCH: NonZeroUsize = NonZeroUsize::new(500).expect("not zero");

/// Upstream's zone for every node (`GetZone`): Rancher has no zones.
pub(crate) const ZONE: &str = "FailureDomain1";
/// Upstream's region for every node.
pub(crate) const REGION: &str = "Region1";

/// How a node names its host.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Key {
    Uuid(String),
    Name(String),
}

fn key(node: &Node) -> Key {
    let provider_id = node.spec.as_ref().and_then(|s| s.provider_id.as_deref());
    match provider_id.and_then(|id| id.strip_prefix(PROVIDER_ID_PREFIX)) {
        Some(uuid) if !uuid.is_empty() => Key::Uuid(uuid.to_owned()),
        _ => Key::Name(node.metadata.name.clone().unwrap_or_default()),
    }
}

/// Whether Rancher's `hostname` names node `name`, as upstream's
/// `getHostByName` decides: when exactly one side is an FQDN, only its first
/// label is compared; case does not matter.
pub(crate) fn hostname_matches(hostname: &str, name: &str) -> bool {
    let short = |s: &str| s.split('.').next().unwrap_or_default().to_owned();
    let (rancher_fqdn, node_fqdn) = (hostname.contains('.'), name.contains('.'));
    let (a, b) = match (rancher_fqdn, node_fqdn) {
        (true, false) => (short(hostname), name.to_owned()),
        (false, true) => (hostname.to_owned(), short(name)),
        _ => (hostname.to_owned(), name.to_owned()),
    };
    a.eq_ignore_ascii_case(&b)
}

/// The host behind each key, `None` when there is none. Several hosts
/// matching one name is an error for that node, as upstream.
fn find<'h>(hosts: &'h [Host], key: &Key) -> Result<Option<&'h Host>, CloudError> {
    let mut found = hosts.iter().filter(|h| match key {
        Key::Uuid(uuid) => &h.uuid == uuid,
        Key::Name(name) => hostname_matches(&h.hostname, name),
    });
    let first = found.next();
    if first.is_some()
        && let Some(second) = found.next()
        && let Key::Name(name) = key
    {
        return Err(CloudError::msg(format!(
            "several Rancher hosts match node {name}: {} and {}",
            first.map(|h| h.hostname.as_str()).unwrap_or_default(),
            second.hostname
        )));
    }
    Ok(first)
}

/// Whether a host is powered off or cut off: deactivated, or its agent
/// disconnected.
fn is_shut_down(host: &Host) -> bool {
    host.lifecycle.state.eq_ignore_ascii_case("inactive")
        || host
            .agent_state
            .as_deref()
            .is_some_and(|s| s.eq_ignore_ascii_case("disconnected"))
}

/// A host's addresses, first to last.
pub(crate) fn addresses(host: &Host) -> Vec<&str> {
    host.ip_addresses
        .iter()
        .flatten()
        .map(|ip| ip.address.as_str())
        .filter(|a| !a.is_empty())
        .collect()
}

impl RancherProvider {
    /// Every existing host with its addresses: one listing, with the
    /// addresses included. A host listed without them (a server that
    /// ignores `include`) has them read through its `ipAddresses` link, as
    /// upstream reads every host's.
    pub(crate) async fn hosts(&self) -> Result<Vec<Host>, CloudError> {
        let hosts: Vec<Host> = self
            .client
            .list(
                "hosts",
                &[("removed_null", "1"), ("include", "ipAddresses")],
            )
            .await?;
        let mut found = Vec::with_capacity(hosts.len());
        for mut host in hosts.into_iter().filter(|h| h.lifecycle.in_play()) {
            if host.ip_addresses.is_none() {
                host.ip_addresses = Some(self.client.link(&host.resource, "ipAddresses").await?);
            }
            found.push(host);
        }
        Ok(found)
    }

    /// Each node's host, in order.
    async fn lookup(
        &self,
        nodes: &[Arc<Node>],
    ) -> Result<Vec<Result<Option<Host>, CloudError>>, CloudError> {
        let hosts = self.hosts().await?;
        Ok(nodes
            .iter()
            .map(|node| find(&hosts, &key(node)).map(|h| h.cloned()))
            .collect())
    }

    async fn one(&self, node: &Node) -> Result<Option<Host>, CloudError> {
        let hosts = self.hosts().await?;
        find(&hosts, &key(node)).map(|h| h.cloned())
    }
}

/// What upstream reports for a host: each address as both external and
/// internal, then the hostname; type `rancher`; its fixed zone and region.
fn metadata(host: &Host) -> Result<InstanceMetadata, CloudError> {
    let ips = addresses(host);
    if ips.is_empty() {
        // Upstream: a host without addresses is not (yet) an instance.
        return Err(CloudError::InstanceNotFound);
    }
    let mut node_addresses = Vec::with_capacity(ips.len() * 2 + 1);
    for ip in ips {
        node_addresses.push(NodeAddress::new(NodeAddressType::ExternalIp, ip));
        node_addresses.push(NodeAddress::new(NodeAddressType::InternalIp, ip));
    }
    node_addresses.push(NodeAddress::new(NodeAddressType::Hostname, &host.hostname));
    Ok(InstanceMetadata {
        provider_id: format!("{PROVIDER_ID_PREFIX}{}", host.uuid),
        instance_type: PROVIDER_NAME.to_owned(),
        zone: ZONE.to_owned(),
        region: REGION.to_owned(),
        node_addresses,
        additional_labels: Default::default(),
        node_names: vec![host.hostname.clone()],
    })
}

#[async_trait]
impl Instances for RancherProvider {
    async fn instance_exists(&self, node: &Node) -> Result<bool, CloudError> {
        Ok(self.one(node).await?.is_some())
    }

    async fn instance_shutdown(&self, node: &Node) -> Result<bool, CloudError> {
        let host = self.one(node).await?.ok_or(CloudError::InstanceNotFound)?;
        Ok(is_shut_down(&host))
    }

    async fn instance_metadata(&self, node: &Node) -> Result<InstanceMetadata, CloudError> {
        let host = self.one(node).await?.ok_or(CloudError::InstanceNotFound)?;
        metadata(&host)
    }

    fn max_batch_size(&self) -> NonZeroUsize {
        BATCH
    }

    async fn instances_exist(&self, nodes: &[Arc<Node>]) -> BatchResult<bool> {
        let found = self.lookup(nodes).await?;
        Ok(found.into_iter().map(|h| h.map(|h| h.is_some())).collect())
    }

    async fn instances_shutdown(&self, nodes: &[Arc<Node>]) -> BatchResult<bool> {
        let found = self.lookup(nodes).await?;
        Ok(found
            .into_iter()
            .map(|h| {
                h?.map(|h| is_shut_down(&h))
                    .ok_or(CloudError::InstanceNotFound)
            })
            .collect())
    }

    async fn instances_metadata(&self, nodes: &[Arc<Node>]) -> BatchResult<InstanceMetadata> {
        let found = self.lookup(nodes).await?;
        Ok(found
            .into_iter()
            .map(|h| metadata(&h?.ok_or(CloudError::InstanceNotFound)?))
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_match_as_upstream_matches_them() {
        assert!(hostname_matches("node-1", "node-1"));
        assert!(hostname_matches("Node-1", "node-1"));
        assert!(hostname_matches("node-1.example.com", "node-1"));
        assert!(hostname_matches("node-1", "node-1.example.com"));
        assert!(hostname_matches("node-1.example.com", "NODE-1.example.com"));
        assert!(!hostname_matches("node-1.a.com", "node-1.b.com"));
        assert!(!hostname_matches("node-10", "node-1"));
    }

    fn host(hostname: &str, uuid: &str) -> Host {
        Host {
            hostname: hostname.into(),
            uuid: uuid.into(),
            ..Host::default()
        }
    }

    #[test]
    fn two_hosts_of_one_name_are_an_error_for_that_node_only() {
        let hosts = [host("a.x", "u1"), host("a.y", "u2"), host("b", "u3")];
        assert!(find(&hosts, &Key::Name("a".into())).is_err());
        let b = find(&hosts, &Key::Name("b".into())).expect("one");
        assert_eq!(b.map(|h| h.uuid.as_str()), Some("u3"));
        let by_uuid = find(&hosts, &Key::Uuid("u2".into())).expect("by uuid");
        assert_eq!(by_uuid.map(|h| h.hostname.as_str()), Some("a.y"));
    }
}
