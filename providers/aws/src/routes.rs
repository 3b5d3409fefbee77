//! Pod-CIDR routes in the cluster's VPC route tables (upstream's `Routes`).
//!
//! The cluster's tables are `RouteTableID` from the config, or every table
//! tagged for the cluster. A route sends its pod CIDR to the node's
//! instance, whose source/destination check is turned off so it may carry
//! traffic that is not addressed to it.
//!
//! Only routes to instances or network interfaces are the cluster's: gateway,
//! NAT, peering and local routes are never listed, replaced or deleted. A
//! route whose target is gone is listed as a blackhole, and so is a route
//! the cluster's tables disagree on (missing from one, or to different
//! instances), so the controller deletes it and creates it again everywhere.
//!
//! A batch of creates (`batch`) reads the tables once and looks its target
//! instances up together, so a pass's creates cost one `DescribeRouteTables`
//! and one `DescribeInstances` per 200 instances, then only the mutations.

use std::collections::BTreeMap;

use async_trait::async_trait;
use aws_sdk_ec2::types::{
    AttributeBooleanValue, Filter, InstanceStateName, Route as Ec2Route, RouteState, RouteTable,
};
use ccm_cloud_provider::ipnet::IpNet;
use ccm_cloud_provider::k8s_openapi::api::core::v1::{Node, NodeSpec};
use ccm_cloud_provider::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use ccm_cloud_provider::{BatchResult, CloudError, Route, RouteCreate, Routes};

use crate::api::ApiError;
use crate::instances::lookup::{filter, state};
use crate::provider::{AwsProvider, Cloud};
use crate::provider_id;
use crate::tagging::{ClusterTags, ec2_tags};
use crate::throttle::bulk;

mod batch;

/// A cluster route as one table has it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct TableRoute {
    instance_id: Option<String>,
    blackhole: bool,
}

impl Cloud {
    /// The cluster's route tables.
    async fn route_tables(&self) -> Result<Vec<RouteTable>, CloudError> {
        let tables = self.route_tables_of(&self.tags).await?;
        if tables.is_empty() {
            return Err(CloudError::msg(match &self.config.route_table_id {
                Some(id) => format!("route table {id} (RouteTableID) does not exist"),
                None => format!(
                    "no route table is tagged {}; tag the cluster's route table or set RouteTableID in [Global]",
                    self.tags.key()
                ),
            }));
        }
        Ok(tables)
    }

    /// `RouteTableID` from the config, or every table tagged for `cluster`
    /// (owned or shared); possibly none.
    pub(crate) async fn route_tables_of(
        &self,
        cluster: &ClusterTags,
    ) -> Result<Vec<RouteTable>, CloudError> {
        let filters = match &self.config.route_table_id {
            Some(id) => vec![filter("route-table-id", &[id])],
            None => Vec::new(),
        };
        let mut tables = self.describe_route_tables(filters).await?;
        if self.config.route_table_id.is_none() {
            tables.retain(|t| cluster.is_tagged(ec2_tags(t.tags())));
        }
        Ok(tables)
    }

    /// The route tables matching `filters`, across pages.
    pub(crate) async fn describe_route_tables(
        &self,
        filters: Vec<Filter>,
    ) -> Result<Vec<RouteTable>, ApiError> {
        self.api
            .paged(
                "DescribeRouteTables",
                |token| {
                    self.api
                        .ec2
                        .describe_route_tables()
                        .set_filters(Some(filters.clone()))
                        .set_next_token(token)
                        .send()
                },
                |page| {
                    (
                        page.route_tables().to_vec(),
                        page.next_token().map(str::to_owned),
                    )
                },
            )
            .await
    }

    async fn list_routes(&self, cluster_name: &str) -> Result<Vec<Route>, CloudError> {
        let tables = self.route_tables().await?;
        let mut by_cidr: BTreeMap<IpNet, Vec<TableRoute>> = BTreeMap::new();
        for table in &tables {
            for route in table.routes() {
                if let Some((cidr, r)) = cluster_route(route) {
                    by_cidr.entry(cidr).or_default().push(r);
                }
            }
        }
        let ids: Vec<&str> = by_cidr
            .values()
            .flatten()
            .filter_map(|r| r.instance_id.as_deref())
            .collect();
        let instances = self.instances_by_id(ids.into_iter()).await?;
        Ok(by_cidr
            .into_iter()
            .map(|(cidr, in_tables)| {
                let first = in_tables[0].instance_id.clone();
                let instance = first
                    .as_deref()
                    .and_then(|id| instances.get(id))
                    .filter(|i| state(i) != InstanceStateName::Terminated);
                let consistent = in_tables.len() == tables.len()
                    && in_tables.iter().all(|r| r.instance_id == first);
                let blackhole =
                    !consistent || instance.is_none() || in_tables.iter().any(|r| r.blackhole);
                Route {
                    name: format!("{cluster_name}-{cidr}"),
                    target_node: instance
                        .and_then(|i| i.private_dns_name())
                        .unwrap_or_default()
                        .to_owned(),
                    target_provider_id: instance.map(|i| {
                        provider_id::format(
                            i.placement()
                                .and_then(|p| p.availability_zone())
                                .unwrap_or_default(),
                            i.instance_id().unwrap_or_default(),
                        )
                    }),
                    destination_cidr: cidr,
                    blackhole,
                }
            })
            .collect())
    }

    async fn create_route(&self, route: &Route) -> Result<(), CloudError> {
        let instance = self.route_target(route).await?;
        self.allow_forwarding(&instance).await?;
        let instance_id = instance.instance_id().unwrap_or_default();
        self.route_in_tables(
            &self.route_tables().await?,
            route.destination_cidr,
            instance_id,
        )
        .await
    }

    /// Turns off `instance`'s source/destination check, unless it is off.
    async fn allow_forwarding(
        &self,
        instance: &aws_sdk_ec2::types::Instance,
    ) -> Result<(), CloudError> {
        if instance.source_dest_check() == Some(false) {
            return Ok(());
        }
        let instance_id = instance.instance_id().unwrap_or_default();
        self.api
            .change("ModifyInstanceAttribute", || {
                self.api
                    .ec2
                    .modify_instance_attribute()
                    .instance_id(instance_id)
                    .source_dest_check(AttributeBooleanValue::builder().value(false).build())
                    .send()
            })
            .await?;
        Ok(())
    }

    /// Routes `cidr` to `instance_id` in each of `tables` (as read before):
    /// created where missing, replaced where it goes elsewhere or is a
    /// blackhole, left where it is already right; a route to something
    /// other than an instance is never replaced.
    async fn route_in_tables(
        &self,
        tables: &[RouteTable],
        cidr: IpNet,
        instance_id: &str,
    ) -> Result<(), CloudError> {
        for table in tables {
            let table_id = table.route_table_id().unwrap_or_default();
            let existing = table.routes().iter().find(|r| destination(r) == Some(cidr));
            match existing.map(|r| (r, cluster_route(r))) {
                None => self.put_route(table_id, cidr, instance_id, false).await?,
                Some((_, Some((_, current))))
                    if current.instance_id.as_deref() == Some(instance_id)
                        && !current.blackhole => {}
                Some((_, Some(_))) => self.put_route(table_id, cidr, instance_id, true).await?,
                Some((other, None)) => {
                    return Err(CloudError::msg(format!(
                        "route table {table_id} already routes {cidr} to {}, which is not an instance; not replacing it",
                        target_description(other)
                    )));
                }
            }
        }
        Ok(())
    }

    async fn put_route(
        &self,
        table: &str,
        cidr: IpNet,
        instance: &str,
        replace: bool,
    ) -> Result<(), CloudError> {
        let (v4, v6) = split_cidr(cidr);
        let result = if replace {
            self.api
                .change("ReplaceRoute", || {
                    self.api
                        .ec2
                        .replace_route()
                        .route_table_id(table)
                        .set_destination_cidr_block(v4.clone())
                        .set_destination_ipv6_cidr_block(v6.clone())
                        .instance_id(instance)
                        .send()
                })
                .await
                .map(|_| ())
        } else {
            self.api
                .change("CreateRoute", || {
                    self.api
                        .ec2
                        .create_route()
                        .route_table_id(table)
                        .set_destination_cidr_block(v4.clone())
                        .set_destination_ipv6_cidr_block(v6.clone())
                        .instance_id(instance)
                        .send()
                })
                .await
                .map(|_| ())
        };
        match result {
            // Another writer got there first; the next sync reconciles targets.
            Err(e) if e.is("RouteAlreadyExists") => Ok(()),
            other => Ok(other?),
        }
    }

    /// The live instance `route` goes to.
    async fn route_target(
        &self,
        route: &Route,
    ) -> Result<aws_sdk_ec2::types::Instance, CloudError> {
        let node = target_node(route);
        live(
            self.find_instances(&[&node])
                .await?
                .pop()
                .unwrap_or(Ok(None)),
        )
    }

    async fn delete_route(&self, route: &Route) -> Result<(), CloudError> {
        let cidr = route.destination_cidr;
        for table in self.route_tables().await? {
            let table_id = table.route_table_id().unwrap_or_default();
            let ours = table
                .routes()
                .iter()
                .any(|r| destination(r) == Some(cidr) && cluster_route(r).is_some());
            if ours {
                self.delete_table_route(table_id, cidr).await?;
            }
        }
        Ok(())
    }

    /// Deletes the route to `cidr` from one table; gone already is fine.
    pub(crate) async fn delete_table_route(
        &self,
        table_id: &str,
        cidr: IpNet,
    ) -> Result<(), CloudError> {
        let (v4, v6) = split_cidr(cidr);
        let result = self
            .api
            .change("DeleteRoute", || {
                self.api
                    .ec2
                    .delete_route()
                    .route_table_id(table_id)
                    .set_destination_cidr_block(v4.clone())
                    .set_destination_ipv6_cidr_block(v6.clone())
                    .send()
            })
            .await;
        match result {
            Err(e) if e.is("InvalidRoute.NotFound") => Ok(()),
            other => Ok(other.map(drop)?),
        }
    }
}

/// The node `route` goes to, as far as an instance lookup needs it: its
/// name and provider ID.
fn target_node(route: &Route) -> Node {
    Node {
        metadata: ObjectMeta {
            name: Some(route.target_node.clone()),
            ..ObjectMeta::default()
        },
        spec: Some(NodeSpec {
            provider_id: route.target_provider_id.clone(),
            ..NodeSpec::default()
        }),
        ..Node::default()
    }
}

/// The instance a lookup found, if it is not terminated.
fn live(
    found: Result<Option<aws_sdk_ec2::types::Instance>, CloudError>,
) -> Result<aws_sdk_ec2::types::Instance, CloudError> {
    found?
        .filter(|i| state(i) != InstanceStateName::Terminated)
        .ok_or(CloudError::InstanceNotFound)
}

/// The route's destination, if it has a CIDR destination.
pub(crate) fn destination(route: &Ec2Route) -> Option<IpNet> {
    route
        .destination_cidr_block()
        .or(route.destination_ipv6_cidr_block())
        .and_then(|c| c.parse().ok())
}

/// Whether `route` is a cluster route: one to an instance or network
/// interface.
pub(crate) fn is_cluster_route(route: &Ec2Route) -> bool {
    cluster_route(route).is_some()
}

/// The route as a cluster route: one to an instance or network interface.
fn cluster_route(route: &Ec2Route) -> Option<(IpNet, TableRoute)> {
    let cidr = destination(route)?;
    let other_target = route.gateway_id().is_some()
        || route.nat_gateway_id().is_some()
        || route.transit_gateway_id().is_some()
        || route.vpc_peering_connection_id().is_some()
        || route.egress_only_internet_gateway_id().is_some()
        || route.local_gateway_id().is_some()
        || route.carrier_gateway_id().is_some()
        || route.core_network_arn().is_some();
    let to_instance = route.instance_id().is_some() || route.network_interface_id().is_some();
    (to_instance && !other_target).then(|| {
        (
            cidr,
            TableRoute {
                instance_id: route.instance_id().map(str::to_owned),
                blackhole: route.state() == Some(&RouteState::Blackhole),
            },
        )
    })
}

fn target_description(route: &Ec2Route) -> String {
    [
        route.gateway_id(),
        route.nat_gateway_id(),
        route.transit_gateway_id(),
        route.vpc_peering_connection_id(),
    ]
    .into_iter()
    .flatten()
    .next()
    .unwrap_or("another target")
    .to_owned()
}

fn split_cidr(cidr: IpNet) -> (Option<String>, Option<String>) {
    match cidr {
        IpNet::V4(v4) => (Some(v4.to_string()), None),
        IpNet::V6(v6) => (None, Some(v6.to_string())),
    }
}

/// Route work runs in the throttle's bulk lane: other calls never queue
/// behind it.
#[async_trait]
impl Routes for AwsProvider {
    async fn list_routes(&self, cluster_name: &str) -> Result<Vec<Route>, CloudError> {
        bulk(self.cloud()?.list_routes(cluster_name)).await
    }

    async fn create_route(
        &self,
        _cluster_name: &str,
        _name_hint: &str,
        route: &Route,
    ) -> Result<(), CloudError> {
        Box::pin(bulk(self.cloud()?.create_route(route))).await
    }

    async fn create_routes(&self, _cluster_name: &str, routes: &[RouteCreate]) -> BatchResult<()> {
        bulk(self.cloud()?.create_routes(routes)).await
    }

    fn batches_route_creates(&self) -> bool {
        true
    }

    async fn delete_route(&self, _cluster_name: &str, route: &Route) -> Result<(), CloudError> {
        bulk(self.cloud()?.delete_route(route)).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_routes_to_instances_or_interfaces_are_the_clusters() {
        let to_instance = Ec2Route::builder()
            .destination_cidr_block("100.64.1.0/24")
            .instance_id("i-1")
            .state(RouteState::Active)
            .build();
        let (cidr, route) = cluster_route(&to_instance).expect("cluster route");
        assert_eq!(cidr.to_string(), "100.64.1.0/24");
        assert_eq!(route.instance_id.as_deref(), Some("i-1"));
        assert!(!route.blackhole);

        let orphaned = Ec2Route::builder()
            .destination_cidr_block("100.64.2.0/24")
            .network_interface_id("eni-1")
            .state(RouteState::Blackhole)
            .build();
        assert!(cluster_route(&orphaned).expect("cluster route").1.blackhole);

        for foreign in [
            Ec2Route::builder()
                .destination_cidr_block("10.0.0.0/16")
                .gateway_id("local")
                .build(),
            Ec2Route::builder()
                .destination_cidr_block("0.0.0.0/0")
                .nat_gateway_id("nat-1")
                .build(),
            Ec2Route::builder()
                .destination_prefix_list_id("pl-1")
                .instance_id("i-1")
                .build(),
        ] {
            assert_eq!(cluster_route(&foreign), None, "{foreign:?}");
        }
    }

    #[test]
    fn ipv6_destinations_use_the_ipv6_field() {
        let route = Ec2Route::builder()
            .destination_ipv6_cidr_block("2600:1f14::/64")
            .instance_id("i-1")
            .build();
        assert_eq!(
            destination(&route).map(|c| c.to_string()).as_deref(),
            Some("2600:1f14::/64")
        );
        let (v4, v6) = split_cidr("2600:1f14::/64".parse().expect("cidr"));
        assert_eq!((v4, v6.as_deref()), (None, Some("2600:1f14::/64")));
    }
}
