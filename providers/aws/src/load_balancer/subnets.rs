//! Which subnets a Network Load Balancer goes in: the ones the Service names
//! by annotation, or one per zone discovered as upstream discovers them.
//!
//! Discovery takes the VPC's subnets tagged for this cluster or for none; an
//! internet-facing load balancer only takes public ones (whose route table
//! has a route to an internet gateway). Within a zone, a subnet with the
//! role tag (`kubernetes.io/role/elb` or `kubernetes.io/role/internal-elb`)
//! wins, then one with the cluster tag, then the lowest ID. Local and
//! wavelength zones are skipped: NLBs cannot use them.

use std::collections::BTreeMap;

use aws_sdk_ec2::types::{Filter, RouteTable, Subnet};
use aws_sdk_elasticloadbalancingv2::types::LoadBalancer;
use ccm_cloud_provider::CloudError;
use ccm_cloud_provider::ipnet::IpNet;

use super::annotations::{self as key, invalid};
use super::spec::LoadBalancerSpec;
use crate::api::ApiError;
use crate::instances::lookup::filter;
use crate::provider::Cloud;
use crate::tagging::{
    ClusterTags, ROLE_ELB_TAG, ROLE_INTERNAL_ELB_TAG, ec2_tags, has_any_cluster_tag,
};
use crate::zones::REGULAR_ZONE;

impl Cloud {
    /// The subnets for the Service's load balancer, checked against the
    /// Elastic IPs and private addresses it asks for.
    pub(crate) async fn load_balancer_subnets(
        &self,
        spec: &LoadBalancerSpec,
    ) -> Result<Vec<Subnet>, CloudError> {
        let subnets = self
            .subnets_for(spec.internal, spec.subnets.as_deref())
            .await?;
        for (annotation, count) in [
            (
                key::EIP_ALLOCATIONS,
                spec.eip_allocations.as_ref().map(Vec::len),
            ),
            (
                key::PRIVATE_IPV4_ADDRESSES,
                spec.private_ipv4_addresses.as_ref().map(Vec::len),
            ),
        ] {
            if let Some(count) = count.filter(|c| *c != subnets.len()) {
                return Err(invalid(
                    annotation,
                    format!(
                        "expected one value per subnet: {} subnets, {count} values",
                        subnets.len()
                    ),
                ));
            }
        }
        Ok(subnets)
    }

    /// The subnets a load balancer goes in: those `named` (IDs or `Name`
    /// tags), or one per zone found by tags (upstream's `findELBSubnets`).
    ///
    /// # Errors
    /// None found: a message saying what to tag or name.
    pub(crate) async fn subnets_for(
        &self,
        internal: bool,
        named: Option<&[String]>,
    ) -> Result<Vec<Subnet>, CloudError> {
        let subnets = match named {
            Some(named) => self.resolve_subnets(named).await?,
            None => self.discover_subnets(internal).await?,
        };
        if subnets.is_empty() {
            let (scheme, role) = if internal {
                ("an internal", ROLE_INTERNAL_ELB_TAG)
            } else {
                ("an internet-facing", ROLE_ELB_TAG)
            };
            return Err(CloudError::msg(format!(
                "no subnet found for {scheme} load balancer: tag one subnet per zone with {} and {role}, or name them in the {} annotation",
                self.tags.key(),
                key::SUBNETS
            )));
        }
        Ok(subnets)
    }

    /// The CIDRs of `lb`'s subnets, where health checks come from
    /// (upstream's `getSubnetCidrs` of the ensured subnets): read from
    /// `known` subnets, and from AWS only for the others.
    pub(crate) async fn load_balancer_subnet_cidrs(
        &self,
        lb: &LoadBalancer,
        known: &[Subnet],
    ) -> Result<Vec<IpNet>, CloudError> {
        let ids: Vec<&str> = lb
            .availability_zones()
            .iter()
            .filter_map(|z| z.subnet_id())
            .collect();
        let mut found: Vec<Subnet> = known
            .iter()
            .filter(|s| s.subnet_id().is_some_and(|id| ids.contains(&id)))
            .cloned()
            .collect();
        let missing: Vec<&str> = ids
            .iter()
            .copied()
            .filter(|id| !found.iter().any(|s| s.subnet_id() == Some(*id)))
            .collect();
        if !missing.is_empty() {
            found.extend(
                self.describe_subnets(vec![filter("subnet-id", &missing)])
                    .await?,
            );
        }
        Ok(found
            .iter()
            .filter_map(|s| s.cidr_block())
            .filter_map(|cidr| cidr.parse().ok())
            .collect())
    }

    /// The subnets `named` by ID or `Name` tag, as upstream's
    /// `resolveSubnetNameOrIDs`: only those in the cluster's VPC (upstream
    /// v1.34+ filters IDs by VPC too), so a subnet of another VPC is not found.
    ///
    /// # Errors
    /// `InvalidInput` on the `subnets` annotation when the count found is
    /// not the count named.
    async fn resolve_subnets(&self, named: &[String]) -> Result<Vec<Subnet>, CloudError> {
        let (ids, names): (Vec<&str>, Vec<&str>) = named
            .iter()
            .map(String::as_str)
            .partition(|s| s.starts_with("subnet-"));
        let vpc = self.vpc_id().await?;
        let mut found = Vec::new();
        if !ids.is_empty() {
            found.extend(
                self.describe_subnets(vec![filter("subnet-id", &ids), filter("vpc-id", &[vpc])])
                    .await?,
            );
        }
        if !names.is_empty() {
            found.extend(
                self.describe_subnets(vec![filter("tag:Name", &names), filter("vpc-id", &[vpc])])
                    .await?,
            );
        }
        if found.len() != named.len() {
            return Err(invalid(
                key::SUBNETS,
                format!(
                    "expected to find {}, but found {} subnets: name subnets of VPC {vpc} by ID or Name tag",
                    named.len(),
                    found.len()
                ),
            ));
        }
        Ok(found)
    }

    async fn discover_subnets(&self, internal: bool) -> Result<Vec<Subnet>, CloudError> {
        let vpc = self.vpc_id().await?.to_owned();
        let mut candidates: Vec<Subnet> = self
            .describe_subnets(vec![filter("vpc-id", &[&vpc])])
            .await?
            .into_iter()
            .filter(|s| {
                self.tags.is_tagged(ec2_tags(s.tags())) || !has_any_cluster_tag(ec2_tags(s.tags()))
            })
            .collect();
        if let (true, Some(id)) = (candidates.is_empty(), &self.config.subnet_id) {
            candidates = self
                .describe_subnets(vec![filter("subnet-id", &[id])])
                .await?;
        }
        let tables = self
            .describe_route_tables(vec![filter("vpc-id", &[&vpc])])
            .await?;
        let mut by_zone: BTreeMap<String, Subnet> = BTreeMap::new();
        for subnet in candidates {
            let (Some(zone), Some(id)) = (subnet.availability_zone(), subnet.subnet_id()) else {
                continue;
            };
            let public = is_public(&tables, id).ok_or_else(|| {
                CloudError::msg(format!("no route table found for subnet {id} in {vpc}"))
            })?;
            if !internal && !public {
                continue;
            }
            match by_zone.get(zone) {
                Some(current) if !prefer(&self.tags, internal, &subnet, current) => {}
                _ => {
                    by_zone.insert(zone.to_owned(), subnet.clone());
                }
            }
        }
        let names: Vec<&str> = by_zone.keys().map(String::as_str).collect();
        let zones = self.zones.lookup(&self.api, &names).await?;
        Ok(by_zone
            .into_iter()
            .filter(|(zone, _)| zones.get(zone).is_none_or(|z| z.kind == REGULAR_ZONE))
            .map(|(_, s)| s)
            .collect())
    }

    pub(crate) async fn describe_subnets(
        &self,
        filters: Vec<Filter>,
    ) -> Result<Vec<Subnet>, ApiError> {
        self.api
            .paged(
                "DescribeSubnets",
                |token| {
                    self.api
                        .ec2
                        .describe_subnets()
                        .set_filters(Some(filters.clone()))
                        .set_next_token(token)
                        .send()
                },
                |page| {
                    (
                        page.subnets().to_vec(),
                        page.next_token().map(str::to_owned),
                    )
                },
            )
            .await
    }
}

/// Whether `candidate` beats `current` for the same zone.
fn prefer(tags: &ClusterTags, internal: bool, candidate: &Subnet, current: &Subnet) -> bool {
    let role = if internal {
        ROLE_INTERNAL_ELB_TAG
    } else {
        ROLE_ELB_TAG
    };
    let has_role = |s: &Subnet| ec2_tags(s.tags()).any(|(k, _)| k == role);
    let has_cluster = |s: &Subnet| tags.is_tagged(ec2_tags(s.tags()));
    if has_role(candidate) != has_role(current) {
        return has_role(candidate);
    }
    if has_cluster(candidate) != has_cluster(current) {
        return has_cluster(candidate);
    }
    candidate.subnet_id() < current.subnet_id()
}

/// Whether the subnet's route table (its own, or the VPC's main table)
/// routes to an internet gateway; `None` when it has no table.
pub(crate) fn is_public(tables: &[RouteTable], subnet_id: &str) -> Option<bool> {
    let associated = |t: &&RouteTable| {
        t.associations()
            .iter()
            .any(|a| a.subnet_id() == Some(subnet_id))
    };
    let main = |t: &&RouteTable| t.associations().iter().any(|a| a.main() == Some(true));
    let table = tables
        .iter()
        .find(associated)
        .or_else(|| tables.iter().find(main))?;
    Some(
        table
            .routes()
            .iter()
            .any(|r| r.gateway_id().is_some_and(|g| g.starts_with("igw"))),
    )
}

#[cfg(test)]
mod tests {
    use aws_sdk_ec2::types::{Route, RouteTableAssociation, Tag};

    use super::*;

    fn table(main: bool, subnet: Option<&str>, igw: bool) -> RouteTable {
        let mut assoc = RouteTableAssociation::builder().main(main);
        if let Some(s) = subnet {
            assoc = assoc.subnet_id(s);
        }
        let mut b = RouteTable::builder().associations(assoc.build()).routes(
            Route::builder()
                .destination_cidr_block("10.0.0.0/16")
                .gateway_id("local")
                .build(),
        );
        if igw {
            b = b.routes(
                Route::builder()
                    .destination_cidr_block("0.0.0.0/0")
                    .gateway_id("igw-1")
                    .build(),
            );
        }
        b.build()
    }

    fn subnet(id: &str, tags: &[&str]) -> Subnet {
        let mut b = Subnet::builder()
            .subnet_id(id)
            .availability_zone("us-east-1a");
        for t in tags {
            b = b.tags(Tag::builder().key(*t).value("1").build());
        }
        b.build()
    }

    #[test]
    fn a_subnet_is_public_when_its_table_routes_to_an_internet_gateway() {
        let tables = [
            table(true, None, false),
            table(false, Some("subnet-pub"), true),
        ];
        assert_eq!(is_public(&tables, "subnet-pub"), Some(true));
        // No table of its own: the main table decides.
        assert_eq!(is_public(&tables, "subnet-other"), Some(false));
        assert_eq!(
            is_public(&[table(false, Some("subnet-x"), true)], "subnet-y"),
            None
        );
    }

    #[test]
    fn within_a_zone_the_role_tag_wins_then_the_cluster_tag_then_the_lowest_id() {
        let tags = ClusterTags::new("c1", false);
        let role = subnet("subnet-9", &[ROLE_ELB_TAG]);
        let cluster = subnet("subnet-5", &["kubernetes.io/cluster/c1"]);
        let plain_low = subnet("subnet-1", &[]);
        assert!(prefer(&tags, false, &role, &cluster));
        assert!(!prefer(&tags, false, &cluster, &role));
        assert!(prefer(&tags, false, &cluster, &plain_low));
        assert!(prefer(&tags, false, &plain_low, &subnet("subnet-2", &[])));
        // The internal role tag only counts for internal load balancers.
        let internal_role = subnet("subnet-8", &[ROLE_INTERNAL_ELB_TAG]);
        assert!(prefer(&tags, true, &internal_role, &cluster));
        assert!(!prefer(&tags, false, &internal_role, &cluster));
    }
}
