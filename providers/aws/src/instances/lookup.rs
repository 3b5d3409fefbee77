//! Finding the EC2 instances behind nodes with as few `DescribeInstances`
//! calls as AWS allows: one for any number of instance IDs in the common
//! case, and one per [`FILTER_VALUES`] node names.
//!
//! Up to [`FILTER_VALUES`] IDs are looked up with a filter, which simply
//! does not match an unknown ID. More are sent as `InstanceIds`, which
//! takes any number (upstream's route listing sends every route target's
//! ID this way) but fails the whole call on one unknown ID; then the lookup
//! falls back to a filter per [`FILTER_VALUES`] IDs. Results are not
//! paginated by `MaxResults` (which counts reservations, not instances, and
//! cannot be sent with `InstanceIds`); `NextToken` is followed when AWS
//! pages anyway.

use std::collections::{BTreeSet, HashMap};

use aws_sdk_ec2::types::{Filter, Instance, InstanceStateName};
use ccm_cloud_provider::CloudError;
use ccm_cloud_provider::k8s_openapi::api::core::v1::Node;

use crate::api::ApiError;
use crate::provider::Cloud;
use crate::provider_id;
use crate::tagging::ec2_tags;

/// Most values AWS takes in one filter: the batch size of instance lookups.
pub(crate) const FILTER_VALUES: usize = 200;

/// How a node is found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NodeKey<'a> {
    /// By instance ID, from `spec.providerID` or a node named after it.
    Id(&'a str),
    /// By private DNS name = node name.
    Name(&'a str),
}

/// How `node` is looked up, or why it cannot be.
pub(crate) fn node_key(node: &Node) -> Result<NodeKey<'_>, CloudError> {
    if let Some(provider_id) = ccm_cloud_provider::provider_id(node) {
        return provider_id::instance_id(provider_id)
            .map(NodeKey::Id)
            .map_err(|e| CloudError::other(e.to_string(), e));
    }
    let name = node.metadata.name.as_deref().unwrap_or_default();
    if name.is_empty() {
        return Err(CloudError::msg(
            "node has neither spec.providerID nor a name",
        ));
    }
    Ok(provider_id::instance_id_from_node_name(name).map_or(NodeKey::Name(name), NodeKey::Id))
}

impl Cloud {
    /// The instance behind each node, in input order: `Ok(None)` when there
    /// is none, `Err` for a node that cannot be looked up.
    pub(crate) async fn find_instances(
        &self,
        nodes: &[&Node],
    ) -> Result<Vec<Result<Option<Instance>, CloudError>>, CloudError> {
        let keys: Vec<_> = nodes.iter().map(|n| node_key(n)).collect();
        let ids: BTreeSet<&str> = keys
            .iter()
            .filter_map(|k| match k {
                Ok(NodeKey::Id(id)) => Some(*id),
                _ => None,
            })
            .collect();
        let names: BTreeSet<&str> = keys
            .iter()
            .filter_map(|k| match k {
                Ok(NodeKey::Name(name)) => Some(*name),
                _ => None,
            })
            .collect();
        let by_id = self.instances_by_id(ids.into_iter()).await?;
        let by_name = self.instances_by_name(names.into_iter()).await?;
        Ok(keys
            .into_iter()
            .map(|key| match key? {
                NodeKey::Id(id) => Ok(by_id.get(id).cloned()),
                NodeKey::Name(name) => match by_name.get(name) {
                    None => Ok(None),
                    Some(found) if found.len() == 1 => Ok(Some(found[0].clone())),
                    Some(found) => Err(CloudError::msg(format!(
                        "{} running instances have the private DNS name {name}",
                        found.len()
                    ))),
                },
            })
            .collect())
    }

    /// Instances by ID; IDs AWS does not know are absent from the map.
    pub(crate) async fn instances_by_id<'a>(
        &self,
        ids: impl Iterator<Item = &'a str>,
    ) -> Result<HashMap<String, Instance>, ApiError> {
        let ids: Vec<&str> = ids.collect();
        let mut out = HashMap::new();
        if ids.len() > FILTER_VALUES {
            match self.describe_instance_ids(&ids).await {
                Ok(found) => {
                    for instance in found {
                        if let Some(id) = instance.instance_id() {
                            out.insert(id.to_owned(), instance);
                        }
                    }
                    return Ok(out);
                }
                Err(err) if unknown_id(&err) => {}
                Err(err) => return Err(err),
            }
        }
        for chunk in ids.chunks(FILTER_VALUES) {
            let filter = filter("instance-id", chunk);
            for instance in self.describe_instances(vec![filter]).await? {
                if let Some(id) = instance.instance_id() {
                    out.insert(id.to_owned(), instance);
                }
            }
        }
        Ok(out)
    }

    /// Instances of this cluster that are not terminated, by private DNS
    /// name (upstream's lookup for nodes without a provider ID).
    async fn instances_by_name<'a>(
        &self,
        names: impl Iterator<Item = &'a str>,
    ) -> Result<HashMap<String, Vec<Instance>>, ApiError> {
        let names: Vec<&str> = names.collect();
        let alive = ["pending", "running", "shutting-down", "stopping", "stopped"];
        let mut out: HashMap<String, Vec<Instance>> = HashMap::new();
        for chunk in names.chunks(FILTER_VALUES) {
            let filters = vec![
                filter("private-dns-name", chunk),
                filter("instance-state-name", &alive),
            ];
            for instance in self.describe_instances(filters).await? {
                if !self.tags.is_tagged(ec2_tags(instance.tags())) {
                    continue;
                }
                if let Some(name) = instance.private_dns_name() {
                    out.entry(name.to_owned()).or_default().push(instance);
                }
            }
        }
        Ok(out)
    }

    /// Every instance matching `filters`, across pages.
    pub(crate) async fn describe_instances(
        &self,
        filters: Vec<Filter>,
    ) -> Result<Vec<Instance>, ApiError> {
        self.describe(Some(filters), None).await
    }

    /// The instances `ids` name, in one call and its pages; fails whole
    /// when one of them is unknown to AWS.
    async fn describe_instance_ids(&self, ids: &[&str]) -> Result<Vec<Instance>, ApiError> {
        let ids = ids.iter().map(|id| (*id).to_owned()).collect();
        self.describe(None, Some(ids)).await
    }

    async fn describe(
        &self,
        filters: Option<Vec<Filter>>,
        ids: Option<Vec<String>>,
    ) -> Result<Vec<Instance>, ApiError> {
        self.api
            .paged(
                "DescribeInstances",
                |token| {
                    self.api
                        .ec2
                        .describe_instances()
                        .set_filters(filters.clone())
                        .set_instance_ids(ids.clone())
                        .set_next_token(token)
                        .send()
                },
                |page| {
                    let instances = page
                        .reservations()
                        .iter()
                        .flat_map(|r| r.instances().iter().cloned())
                        .collect();
                    (instances, page.next_token().map(str::to_owned))
                },
            )
            .await
    }
}

/// AWS refused `InstanceIds` for an ID it does not know (gone for over an
/// hour) or cannot read: a filter per chunk then finds the rest.
fn unknown_id(err: &ApiError) -> bool {
    matches!(
        err.code(),
        Some("InvalidInstanceID.NotFound" | "InvalidInstanceID.Malformed")
    )
}

/// An EC2 filter on `name` matching any of `values`.
pub(crate) fn filter(name: &str, values: &[&str]) -> Filter {
    Filter::builder()
        .name(name)
        .set_values(Some(values.iter().map(|v| (*v).to_owned()).collect()))
        .build()
}

/// The instance's state; an instance without one is treated as gone.
pub(crate) fn state(instance: &Instance) -> InstanceStateName {
    instance
        .state()
        .and_then(|s| s.name())
        .cloned()
        .unwrap_or(InstanceStateName::Terminated)
}
