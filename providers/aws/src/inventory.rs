//! [`Inventory`] for AWS: what the provider made for a cluster, for
//! `<binary> audit`, listed in the order it can be deleted.
//!
//! | kind | what | `id` | owner |
//! |---|---|---|---|
//! | `load-balancer` | a Network Load Balancer, or a classic ELB | its ARN, or a classic ELB's name | [`Owner::LoadBalancerName`]: its name |
//! | `target-group` | a target group | its ARN | its load balancer's name, or the Service its tag names |
//! | `security-group` | a load balancer's own security group | its ID | its load balancer's name, or the Service its tag names |
//! | `route` | a pod-CIDR route in one of the cluster's route tables | `<route table ID>:<CIDR>` | [`Owner::Node`]: its instance's private DNS name |
//!
//! # Ownership
//! The cluster is the one the provider serves: `KubernetesClusterID` (or
//! `KubernetesClusterTag`) from the cloud config, else the cluster tag of
//! the instance it runs on, never the `cluster_name` asked about (see
//! `cluster_id`). Load balancers, target groups and
//! security groups are listed when they carry the cluster's owned tag
//! (`kubernetes.io/cluster/<id>=owned`, or the legacy `KubernetesCluster`)
//! *and* `kubernetes.io/service-name`, as everything the provider makes for
//! a Service does: node security groups, which deployment tools tag as the
//! cluster's, are never listed, nor is `ElbSecurityGroup` from the config.
//! Classic ELBs upstream made carry both tags and are listed; their own
//! groups, and the NLB groups of upstream's managed mode, which upstream
//! tags with the cluster alone, are not. Routes are those the route controller sees: routes to instances or
//! network interfaces in `RouteTableID` or the tables tagged for the
//! cluster. Another cluster's resources and untagged ones are never listed.
//!
//! # Owners
//! A load balancer is owned by its name, which the provider derives from
//! the Service's UID: a Service deleted and made again under the same name
//! (a new UID) does not claim its predecessor's load balancer, which its
//! `kubernetes.io/service-name` tag would. A target group or security group
//! attached to a listed load balancer has that load balancer's owner, so it
//! is leaked exactly when the load balancer is; one attached to none (a
//! create interrupted before the listener or load balancer) is the
//! Service's its tag names, which adopts it on its next ensure; a tag that
//! names no `namespace/name` makes it [`Owner::Cluster`]'s. A route is
//! owned by the node the provider maps it to, the private DNS name of its
//! instance (the route controller's `target_node`); a route whose instance
//! is gone is owned by the instance or interface ID, which names no node.
//!
//! # Deletion
//! [`Inventory::delete_owned`] checks that the resource still carries the
//! cluster's marks, then deletes it alone; one already gone is success. A
//! target group or security group AWS still holds for a just-deleted load
//! balancer answers `CloudError::Retry`.

mod load_balancers;
mod routes;

use async_trait::async_trait;
use ccm_cloud_provider::{CloudError, Inventory, OwnedResource, Owner};

use crate::provider::{AwsProvider, Cloud};
use crate::tagging::{ClusterTags, SERVICE_NAME_TAG};

/// The kind of a target group.
pub const TARGET_GROUP: &str = "target-group";
/// The kind of a load balancer's own security group.
pub const SECURITY_GROUP: &str = "security-group";
/// The kind of a pod-CIDR route in one route table.
pub const ROUTE: &str = "route";

impl Cloud {
    async fn owned_resources(&self) -> Result<Vec<OwnedResource>, CloudError> {
        let cluster = &self.tags;
        let mut out = self.load_balancer_resources(cluster).await?;
        out.extend(self.route_resources(cluster).await?);
        Ok(out)
    }

    async fn delete_owned(&self, resource: &OwnedResource) -> Result<(), CloudError> {
        let cluster = &self.tags;
        match resource.kind.as_str() {
            OwnedResource::LOAD_BALANCER => {
                self.delete_owned_load_balancer(cluster, &resource.id).await
            }
            TARGET_GROUP => self.delete_owned_target_group(cluster, &resource.id).await,
            SECURITY_GROUP => {
                self.delete_owned_security_group(cluster, &resource.id)
                    .await
            }
            ROUTE => self.delete_owned_route(cluster, &resource.id).await,
            other => Err(CloudError::msg(format!(
                "the AWS provider makes no {other} resources; not deleting {}",
                resource.id
            ))),
        }
    }
}

/// The Service whose resource carries `tags`, if they say `cluster` made it
/// for one; [`Owner::Cluster`] when the service-name tag is not
/// `namespace/name`.
fn made_for_a_service<'a>(
    cluster: &ClusterTags,
    tags: impl IntoIterator<Item = (&'a str, &'a str)> + Clone,
) -> Option<Owner> {
    if !cluster.is_owned(tags.clone()) {
        return None;
    }
    let (_, service) = tags.into_iter().find(|(k, _)| *k == SERVICE_NAME_TAG)?;
    Some(match service.split_once('/') {
        Some((namespace, name)) if !namespace.is_empty() && !name.is_empty() => Owner::Service {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        },
        _ => Owner::Cluster,
    })
}

fn not_the_clusters(kind: &str, id: &str, cluster: &ClusterTags) -> CloudError {
    CloudError::msg(format!(
        "{kind} {id} is no longer tagged as cluster {}'s for a Service; not deleting it",
        cluster.id()
    ))
}

#[async_trait]
impl Inventory for AwsProvider {
    /// The cluster is the provider's own (see `cluster_id`), whatever
    /// `_cluster_name` says.
    async fn owned_resources(&self, _cluster_name: &str) -> Result<Vec<OwnedResource>, CloudError> {
        self.cloud()?.owned_resources().await
    }

    async fn delete_owned(
        &self,
        _cluster_name: &str,
        resource: &OwnedResource,
    ) -> Result<(), CloudError> {
        self.cloud()?.delete_owned(resource).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tagging::LEGACY_CLUSTER_TAG;

    #[test]
    fn only_what_the_cluster_made_for_a_service_has_an_owner() {
        let cluster = ClusterTags::new("c1", false);
        let service = |tags: &[(&'static str, &'static str)]| {
            made_for_a_service(&cluster, tags.iter().copied())
        };
        assert_eq!(
            service(&[
                ("kubernetes.io/cluster/c1", "owned"),
                (SERVICE_NAME_TAG, "shop/web")
            ]),
            Some(Owner::Service {
                namespace: "shop".into(),
                name: "web".into()
            })
        );
        assert_eq!(
            service(&[(LEGACY_CLUSTER_TAG, "c1"), (SERVICE_NAME_TAG, "web")]),
            Some(Owner::Cluster),
            "a tag naming no namespace/name"
        );
        for foreign in [
            &[("kubernetes.io/cluster/c1", "owned")][..],
            &[
                ("kubernetes.io/cluster/c1", "shared"),
                (SERVICE_NAME_TAG, "shop/web"),
            ],
            &[
                ("kubernetes.io/cluster/c2", "owned"),
                (SERVICE_NAME_TAG, "shop/web"),
            ],
            &[(SERVICE_NAME_TAG, "shop/web")],
        ] {
            assert_eq!(service(foreign), None, "{foreign:?}");
        }
    }
}
