//! The cluster's pod-CIDR routes as inventory: one resource per route and
//! route table, owned by the node its instance is (by the instance's private
//! DNS name, or its provider ID, as the route controller matches them).

use aws_sdk_ec2::types::InstanceStateName;
use ccm_cloud_provider::ipnet::IpNet;
use ccm_cloud_provider::{CloudError, OwnedResource, Owner};

use super::ROUTE;
use crate::instances::lookup::state;
use crate::provider::Cloud;
use crate::provider_id;
use crate::routes::{destination, is_cluster_route};
use crate::tagging::ClusterTags;

/// A route's inventory ID: `<route table ID>:<CIDR>`.
fn route_id(table: &str, cidr: IpNet) -> String {
    format!("{table}:{cidr}")
}

/// The route table and CIDR of a route's inventory ID.
fn parse_route_id(id: &str) -> Result<(&str, IpNet), CloudError> {
    id.split_once(':')
        .and_then(|(table, cidr)| Some((table, cidr.parse().ok()?)))
        .ok_or_else(|| {
            CloudError::msg(format!(
                "`{id}` is not a route of the AWS inventory (<route table ID>:<CIDR>)"
            ))
        })
}

impl Cloud {
    /// Every cluster route in the cluster's route tables, by table.
    pub(super) async fn route_resources(
        &self,
        cluster: &ClusterTags,
    ) -> Result<Vec<OwnedResource>, CloudError> {
        let tables = self.route_tables_of(cluster).await?;
        let mut routes = Vec::new();
        for table in &tables {
            let table_id = table.route_table_id().unwrap_or_default();
            for route in table.routes().iter().filter(|r| is_cluster_route(r)) {
                let (Some(cidr), Some(target)) = (
                    destination(route),
                    route.instance_id().or(route.network_interface_id()),
                ) else {
                    continue;
                };
                routes.push((table_id, cidr, target, route.instance_id()));
            }
        }
        let instances = self
            .instances_by_id(routes.iter().filter_map(|(_, _, _, instance)| *instance))
            .await?;
        let mut out: Vec<OwnedResource> = routes
            .into_iter()
            .map(|(table, cidr, target, instance)| {
                let live = instance
                    .and_then(|id| instances.get(id))
                    .filter(|i| state(i) != InstanceStateName::Terminated);
                let node = live
                    .and_then(|i| i.private_dns_name())
                    .filter(|name| !name.is_empty())
                    .unwrap_or(target);
                // As `list_routes` gives the route controller.
                let provider_id = live.map(|i| {
                    provider_id::format(
                        i.placement()
                            .and_then(|p| p.availability_zone())
                            .unwrap_or_default(),
                        i.instance_id().unwrap_or_default(),
                    )
                });
                OwnedResource {
                    kind: ROUTE.to_owned(),
                    id: route_id(table, cidr),
                    name: format!("{cidr} in {table} to {target}"),
                    owner: Owner::Node(node.to_owned()),
                    cidr: Some(cidr.to_string()),
                    provider_id,
                }
            })
            .collect();
        out.sort();
        Ok(out)
    }

    /// Deletes the route `id` names, if it is still a cluster route in one
    /// of the cluster's tables; a route since replaced by one to a gateway
    /// is not the cluster's and stays.
    pub(super) async fn delete_owned_route(
        &self,
        cluster: &ClusterTags,
        id: &str,
    ) -> Result<(), CloudError> {
        let (table_id, cidr) = parse_route_id(id)?;
        let tables = self.route_tables_of(cluster).await?;
        let still_ours = tables
            .iter()
            .filter(|t| t.route_table_id() == Some(table_id))
            .flat_map(|t| t.routes())
            .any(|r| destination(r) == Some(cidr) && is_cluster_route(r));
        if !still_ours {
            return Ok(());
        }
        tracing::info!(table = table_id, %cidr, "deleting a route of the inventory");
        self.delete_table_route(table_id, cidr).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn route_ids_round_trip_for_both_families() {
        for cidr in ["10.244.1.0/24", "2600:1f14::/64"] {
            let cidr: IpNet = cidr.parse().expect("cidr");
            let id = route_id("rtb-1", cidr);
            assert_eq!(parse_route_id(&id).expect("parsed"), ("rtb-1", cidr));
        }
        assert!(parse_route_id("rtb-1").is_err());
        assert!(parse_route_id("rtb-1:not-a-cidr").is_err());
    }
}
