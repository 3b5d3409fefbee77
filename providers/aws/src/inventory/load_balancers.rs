//! The cluster's load balancers (NLBs and classic ELBs), target groups and
//! load-balancer security groups, as inventory: listed with their owners,
//! and deleted one by one.

use std::collections::HashMap;

use aws_sdk_elasticloadbalancing::types::LoadBalancerDescription;
use aws_sdk_elasticloadbalancingv2::types::{LoadBalancer, Tag};
use ccm_cloud_provider::{CloudError, OwnedResource, Owner};

use super::{SECURITY_GROUP, TARGET_GROUP, made_for_a_service, not_the_clusters};
use crate::instances::lookup::filter;
use crate::provider::Cloud;
use crate::tagging::{ClusterTags, SERVICE_NAME_TAG, ec2_tags, elb_tags, elbv2_tags};

impl Cloud {
    /// The cluster's load balancers, then their target groups, then their
    /// security groups.
    pub(super) async fn load_balancer_resources(
        &self,
        cluster: &ClusterTags,
    ) -> Result<Vec<OwnedResource>, CloudError> {
        let lbs = self.cluster_load_balancers(cluster).await?;
        let classic = self.cluster_classic_elbs(cluster).await?;
        let by_arn: HashMap<&str, &str> = lbs
            .iter()
            .filter_map(|lb| Some((lb.load_balancer_arn()?, lb.load_balancer_name()?)))
            .collect();
        let by_group: HashMap<&str, &str> = lbs
            .iter()
            .filter_map(|lb| Some((lb.security_groups(), lb.load_balancer_name()?)))
            .chain(
                classic
                    .iter()
                    .filter_map(|lb| Some((lb.security_groups(), lb.load_balancer_name()?))),
            )
            .flat_map(|(groups, name)| groups.iter().map(move |g| (g.as_str(), name)))
            .collect();
        let mut out: Vec<OwnedResource> = by_arn
            .iter()
            .map(|(arn, name)| OwnedResource {
                kind: OwnedResource::LOAD_BALANCER.to_owned(),
                id: (*arn).to_owned(),
                name: (*name).to_owned(),
                owner: Owner::LoadBalancerName((*name).to_owned()),
                cidr: None,
                provider_id: None,
            })
            .chain(
                classic
                    .iter()
                    .filter_map(|lb| lb.load_balancer_name())
                    .map(|name| {
                        // A classic ELB has no ARN: its name is its ID.
                        OwnedResource {
                            kind: OwnedResource::LOAD_BALANCER.to_owned(),
                            id: name.to_owned(),
                            name: name.to_owned(),
                            owner: Owner::LoadBalancerName(name.to_owned()),
                            cidr: None,
                            provider_id: None,
                        }
                    }),
            )
            .collect();
        out.sort();
        out.extend(self.cluster_target_groups(cluster, &by_arn).await?);
        out.extend(self.cluster_security_groups(cluster, &by_group).await?);
        Ok(out)
    }

    /// Network load balancers the cluster made for a Service.
    async fn cluster_load_balancers(
        &self,
        cluster: &ClusterTags,
    ) -> Result<Vec<LoadBalancer>, CloudError> {
        let nlbs = self.network_load_balancers().await?;
        let arns: Vec<&str> = nlbs
            .iter()
            .filter_map(|lb| lb.load_balancer_arn())
            .collect();
        let tags = self.tags_of(&arns).await?;
        Ok(nlbs
            .iter()
            .filter(|lb| {
                lb.load_balancer_arn()
                    .and_then(|arn| tags.get(arn))
                    .is_some_and(|t| made_for_a_service(cluster, elbv2_tags(t)).is_some())
            })
            .cloned()
            .collect())
    }

    /// Classic ELBs the cluster made for a Service.
    async fn cluster_classic_elbs(
        &self,
        cluster: &ClusterTags,
    ) -> Result<Vec<LoadBalancerDescription>, CloudError> {
        let elbs: Vec<LoadBalancerDescription> = self
            .api
            .paged(
                "DescribeLoadBalancers",
                |marker| {
                    self.api
                        .elb
                        .describe_load_balancers()
                        .set_marker(marker)
                        .send()
                },
                |page| {
                    (
                        page.load_balancer_descriptions().to_vec(),
                        page.next_marker().map(str::to_owned),
                    )
                },
            )
            .await?;
        let names: Vec<&str> = elbs
            .iter()
            .filter_map(LoadBalancerDescription::load_balancer_name)
            .collect();
        let mut tags: HashMap<String, Vec<aws_sdk_elasticloadbalancing::types::Tag>> =
            HashMap::new();
        for chunk in names.chunks(20) {
            let described = self
                .api
                .call("DescribeTags", || {
                    self.api
                        .elb
                        .describe_tags()
                        .set_load_balancer_names(Some(
                            chunk.iter().map(|n| (*n).to_owned()).collect(),
                        ))
                        .send()
                })
                .await?;
            for d in described.tag_descriptions() {
                if let Some(name) = d.load_balancer_name() {
                    tags.insert(name.to_owned(), d.tags().to_vec());
                }
            }
        }
        Ok(elbs
            .into_iter()
            .filter(|lb| {
                lb.load_balancer_name()
                    .and_then(|n| tags.get(n))
                    .is_some_and(|t| made_for_a_service(cluster, elb_tags(t)).is_some())
            })
            .collect())
    }

    /// Target groups the cluster made for a Service; `load_balancers` names
    /// the cluster's load balancers by ARN.
    async fn cluster_target_groups(
        &self,
        cluster: &ClusterTags,
        load_balancers: &HashMap<&str, &str>,
    ) -> Result<Vec<OwnedResource>, CloudError> {
        let groups = self.describe_target_groups(None, None).await?;
        let arns: Vec<&str> = groups
            .iter()
            .filter_map(|tg| tg.target_group_arn())
            .collect();
        let tags = self.tags_of(&arns).await?;
        let mut out = Vec::new();
        for tg in &groups {
            let arn = tg.target_group_arn().unwrap_or_default();
            let Some(service) = tags
                .get(arn)
                .and_then(|t| made_for_a_service(cluster, elbv2_tags(t)))
            else {
                continue;
            };
            let load_balancer = tg
                .load_balancer_arns()
                .iter()
                .find_map(|lb| load_balancers.get(lb.as_str()));
            out.push(OwnedResource {
                kind: TARGET_GROUP.to_owned(),
                id: arn.to_owned(),
                name: tg.target_group_name().unwrap_or_default().to_owned(),
                owner: load_balancer
                    .map_or(service, |name| Owner::LoadBalancerName((*name).to_owned())),
                cidr: None,
                provider_id: None,
            });
        }
        out.sort();
        Ok(out)
    }

    /// Security groups the cluster made for a Service's load balancer;
    /// `load_balancers` names the cluster's load balancers by the groups
    /// attached to them.
    async fn cluster_security_groups(
        &self,
        cluster: &ClusterTags,
        load_balancers: &HashMap<&str, &str>,
    ) -> Result<Vec<OwnedResource>, CloudError> {
        let groups = self
            .security_groups(vec![filter("tag-key", &[SERVICE_NAME_TAG])])
            .await?;
        let mut out = Vec::new();
        for group in &groups {
            let id = group.group_id().unwrap_or_default();
            if self.config.elb_security_group.as_deref() == Some(id) {
                continue;
            }
            let Some(service) = made_for_a_service(cluster, ec2_tags(group.tags())) else {
                continue;
            };
            out.push(OwnedResource {
                kind: SECURITY_GROUP.to_owned(),
                id: id.to_owned(),
                name: group.group_name().unwrap_or_default().to_owned(),
                owner: load_balancers
                    .get(id)
                    .map_or(service, |name| Owner::LoadBalancerName((*name).to_owned())),
                cidr: None,
                provider_id: None,
            });
        }
        out.sort();
        Ok(out)
    }

    /// The tags of the ELBv2 resource `arn`; `None` when it is gone.
    async fn elbv2_resource_tags(&self, arn: &str) -> Result<Option<Vec<Tag>>, CloudError> {
        match self.tags_of(&[arn]).await {
            Ok(mut tags) => Ok(tags.remove(arn)),
            Err(e) if e.is("LoadBalancerNotFound") || e.is("TargetGroupNotFound") => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    pub(super) async fn delete_owned_load_balancer(
        &self,
        cluster: &ClusterTags,
        arn: &str,
    ) -> Result<(), CloudError> {
        if !arn.starts_with("arn:") {
            return self.delete_owned_classic(cluster, arn).await;
        }
        let Some(tags) = self.elbv2_resource_tags(arn).await? else {
            return Ok(());
        };
        if made_for_a_service(cluster, elbv2_tags(&tags)).is_none() {
            return Err(not_the_clusters("load balancer", arn, cluster));
        }
        // Its name and VPC find the node rules made for it.
        let described = self
            .api
            .call("DescribeLoadBalancers", || {
                self.api
                    .elbv2
                    .describe_load_balancers()
                    .load_balancer_arns(arn)
                    .send()
            })
            .await;
        let lb = match described {
            Ok(out) => out.load_balancers().first().cloned(),
            Err(e) if e.is("LoadBalancerNotFound") => None,
            Err(e) => return Err(e.into()),
        };
        let Some(lb) = lb else {
            return Ok(());
        };
        tracing::info!(arn, "deleting a network load balancer of the inventory");
        self.delete_network_load_balancer(arn).await?;
        // As the service controller's delete: the nodes stop admitting it.
        let name = lb.load_balancer_name().unwrap_or_default();
        self.remove_node_rules(name, lb.vpc_id().or(self.config.vpc.as_deref()))
            .await
    }

    /// A classic ELB, by name.
    async fn delete_owned_classic(
        &self,
        cluster: &ClusterTags,
        name: &str,
    ) -> Result<(), CloudError> {
        let Some((_, tags)) = self.find_classic(name).await? else {
            return Ok(());
        };
        if made_for_a_service(cluster, elb_tags(&tags)).is_none() {
            return Err(not_the_clusters("classic ELB", name, cluster));
        }
        tracing::info!(name, "deleting a classic ELB of the inventory");
        self.delete_classic_elb(name).await
    }

    pub(super) async fn delete_owned_target_group(
        &self,
        cluster: &ClusterTags,
        arn: &str,
    ) -> Result<(), CloudError> {
        let Some(tags) = self.elbv2_resource_tags(arn).await? else {
            return Ok(());
        };
        if made_for_a_service(cluster, elbv2_tags(&tags)).is_none() {
            return Err(not_the_clusters("target group", arn, cluster));
        }
        tracing::info!(arn, "deleting a target group of the inventory");
        self.delete_target_group(arn).await
    }

    pub(super) async fn delete_owned_security_group(
        &self,
        cluster: &ClusterTags,
        id: &str,
    ) -> Result<(), CloudError> {
        let found = self.security_groups(vec![filter("group-id", &[id])]).await;
        let group = match found {
            Ok(groups) => groups.into_iter().find(|g| g.group_id() == Some(id)),
            Err(e) if e.is("InvalidGroup.NotFound") => None,
            Err(e) => return Err(e.into()),
        };
        let Some(group) = group else {
            return Ok(());
        };
        if self.config.elb_security_group.as_deref() == Some(id)
            || made_for_a_service(cluster, ec2_tags(group.tags())).is_none()
        {
            return Err(not_the_clusters("security group", id, cluster));
        }
        tracing::info!(
            group = id,
            "deleting a load balancer security group of the inventory"
        );
        // A classic ELB's group is referred to by node rules.
        self.revoke_references(id, true).await?;
        self.delete_security_group(id).await
    }
}
