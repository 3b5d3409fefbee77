//! The Network Load Balancer itself: looked up by name and checked for
//! ownership before anything is created, created with its subnets and tags,
//! and kept to the Service's IP address type and cross-zone setting.

use std::collections::{BTreeMap, BTreeSet};

use aws_sdk_elasticloadbalancingv2::types::{
    AvailabilityZone, LoadBalancer, LoadBalancerAttribute, LoadBalancerSchemeEnum,
    LoadBalancerStateEnum, LoadBalancerTypeEnum, SubnetMapping, Tag, TargetGroup,
};
use ccm_cloud_provider::{CloudError, LoadBalancerIngress, LoadBalancerStatus};

use super::annotations::{self as key, invalid};
use super::spec::{LoadBalancerSpec, ServiceRef};
use crate::api::{ApiError, is_planned, planned_id};
use crate::provider::Cloud;
use crate::tagging::elbv2_tags;

const CROSS_ZONE: &str = "load_balancing.cross_zone.enabled";

/// ELBv2 tags for `tags`.
pub(crate) fn elbv2_tag_list(tags: &BTreeMap<String, String>) -> Vec<Tag> {
    tags.iter()
        .map(|(k, v)| Tag::builder().key(k).value(v).build())
        .collect()
}

/// What `status.loadBalancer` says: the DNS name, once AWS gives one and
/// while the load balancer is active or provisioning (as upstream).
pub(crate) fn status(lb: &LoadBalancer) -> LoadBalancerStatus {
    let usable = matches!(
        lb.state().and_then(|s| s.code()),
        Some(LoadBalancerStateEnum::Active | LoadBalancerStateEnum::Provisioning)
    );
    let ingress = lb
        .dns_name()
        .filter(|name| usable && !name.is_empty())
        .map(|name| LoadBalancerIngress {
            hostname: Some(name.to_owned()),
            ..LoadBalancerIngress::default()
        });
    LoadBalancerStatus {
        ingress: ingress.into_iter().collect(),
    }
}

/// The load balancer a dry run plans to create, standing in for it in the
/// rest of the plan: in its subnets, so that the health rule's subnet
/// CIDRs are planned too, and without an address.
fn planned_load_balancer(
    spec: &LoadBalancerSpec,
    (subnets, vpc_id): (&[String], &str),
    scheme: LoadBalancerSchemeEnum,
    security_groups: Option<Vec<String>>,
) -> LoadBalancer {
    let zones = subnets
        .iter()
        .map(|subnet| AvailabilityZone::builder().subnet_id(subnet).build());
    LoadBalancer::builder()
        .load_balancer_arn(planned_id("load-balancer", &spec.svc.load_balancer_name))
        .load_balancer_name(&spec.svc.load_balancer_name)
        .r#type(LoadBalancerTypeEnum::Network)
        .scheme(scheme)
        .vpc_id(vpc_id)
        .ip_address_type(spec.ip_address_type.clone())
        .set_availability_zones(Some(zones.collect()))
        .set_security_groups(security_groups)
        .build()
}

/// A load balancer's target groups and their tags, by ARN.
#[derive(Debug, Default)]
pub(crate) struct AttachedGroups {
    pub(crate) groups: Vec<TargetGroup>,
    pub(crate) tags: BTreeMap<String, Vec<Tag>>,
}

impl Cloud {
    /// Every Network Load Balancer of the account and region, across pages.
    pub(crate) async fn network_load_balancers(&self) -> Result<Vec<LoadBalancer>, CloudError> {
        Ok(self
            .api
            .paged(
                "DescribeLoadBalancers",
                |marker| {
                    self.api
                        .elbv2
                        .describe_load_balancers()
                        .set_marker(marker)
                        .send()
                },
                |page| {
                    (
                        page.load_balancers().to_vec(),
                        page.next_marker().map(str::to_owned),
                    )
                },
            )
            .await?
            .into_iter()
            .filter(|lb| lb.r#type() == Some(&LoadBalancerTypeEnum::Network))
            .collect())
    }

    /// The Network Load Balancer named `name` and its tags, if it exists.
    pub(crate) async fn find_load_balancer(
        &self,
        name: &str,
    ) -> Result<Option<(LoadBalancer, Vec<Tag>)>, CloudError> {
        let Some(lb) = self.describe_network_load_balancer(name).await? else {
            return Ok(None);
        };
        let arn = lb.load_balancer_arn().unwrap_or_default();
        let tags = self.tags_of(&[arn]).await?.remove(arn).unwrap_or_default();
        Ok(Some((lb, tags)))
    }

    /// As [`Cloud::find_load_balancer`], with the load balancer's target
    /// groups: their tags come in the same `DescribeTags` as its own.
    pub(crate) async fn find_with_groups(
        &self,
        name: &str,
    ) -> Result<Option<(LoadBalancer, Vec<Tag>, AttachedGroups)>, CloudError> {
        let Some(lb) = self.describe_network_load_balancer(name).await? else {
            return Ok(None);
        };
        let arn = lb.load_balancer_arn().unwrap_or_default();
        let groups = self.load_balancer_target_groups(arn).await?;
        let arns: Vec<&str> = std::iter::once(arn)
            .chain(groups.iter().filter_map(|g| g.target_group_arn()))
            .collect();
        let mut tags = self.tags_of(&arns).await?;
        let own = tags.remove(arn).unwrap_or_default();
        Ok(Some((lb, own, AttachedGroups { groups, tags })))
    }

    /// The Network Load Balancer named `name`, if it exists; another type
    /// of load balancer by that name is an error.
    pub(crate) async fn describe_network_load_balancer(
        &self,
        name: &str,
    ) -> Result<Option<LoadBalancer>, CloudError> {
        let found = self
            .api
            .call("DescribeLoadBalancers", || {
                self.api.elbv2.describe_load_balancers().names(name).send()
            })
            .await;
        let lbs = match found {
            Ok(out) => out.load_balancers().to_vec(),
            Err(e) if e.is("LoadBalancerNotFound") => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        let Some(lb) = lbs.into_iter().next() else {
            return Ok(None);
        };
        if lb.r#type() != Some(&LoadBalancerTypeEnum::Network) {
            return Err(CloudError::msg(format!(
                "a {} load balancer named {name} exists; not touching it",
                lb.r#type().map_or("non-network", |t| t.as_str())
            )));
        }
        Ok(Some(lb))
    }

    /// Deletes the Network Load Balancer `arn`; one already gone is fine.
    pub(crate) async fn delete_network_load_balancer(&self, arn: &str) -> Result<(), ApiError> {
        let deleted = self
            .api
            .change("DeleteLoadBalancer", || {
                self.api
                    .elbv2
                    .delete_load_balancer()
                    .load_balancer_arn(arn)
                    .send()
            })
            .await;
        match deleted {
            Err(e) if e.is("LoadBalancerNotFound") => Ok(()),
            other => other.map(drop),
        }
    }

    /// The tags of up to 20 ELBv2 resources, by ARN.
    pub(crate) async fn tags_of(
        &self,
        arns: &[&str],
    ) -> Result<BTreeMap<String, Vec<Tag>>, ApiError> {
        let mut out = BTreeMap::new();
        for chunk in arns.chunks(20) {
            let described = self
                .api
                .call("DescribeTags", || {
                    self.api
                        .elbv2
                        .describe_tags()
                        .set_resource_arns(Some(chunk.iter().map(|a| (*a).to_owned()).collect()))
                        .send()
                })
                .await?;
            for d in described.tag_descriptions() {
                if let Some(arn) = d.resource_arn() {
                    out.insert(arn.to_owned(), d.tags().to_vec());
                }
            }
        }
        Ok(out)
    }

    /// Refuses to manage a load balancer that is not this cluster's for this
    /// Service, or whose scheme the Service no longer asks for.
    pub(crate) fn check_existing(
        &self,
        spec: &LoadBalancerSpec,
        lb: &LoadBalancer,
        tags: &[Tag],
    ) -> Result<(), CloudError> {
        self.check_adoptable(
            "load balancer",
            &spec.svc,
            self.tags
                .is_owned_for_service(elbv2_tags(tags), &spec.svc.key),
            (
                lb.scheme() == Some(&LoadBalancerSchemeEnum::Internal),
                spec.internal,
            ),
        )
    }

    /// Refuses a load balancer found by the Service's name that is not
    /// this cluster's for it (`owned`), or whose scheme the Service no
    /// longer asks for (`(internal, wanted internal)`).
    pub(crate) fn check_adoptable(
        &self,
        what: &str,
        svc: &ServiceRef,
        owned: bool,
        (internal, wanted): (bool, bool),
    ) -> Result<(), CloudError> {
        if !owned {
            return Err(CloudError::msg(format!(
                "{what} {} exists but is not tagged as cluster {}'s for Service {}; refusing to adopt it",
                svc.load_balancer_name,
                self.tags.id(),
                svc.key
            )));
        }
        if internal != wanted {
            return Err(invalid(
                key::INTERNAL,
                format!(
                    "the {what} is {} and AWS cannot change that; delete and recreate the Service to change it",
                    if internal {
                        "internal"
                    } else {
                        "internet-facing"
                    }
                ),
            ));
        }
        Ok(())
    }

    /// Creates the load balancer in `subnets`.
    pub(crate) async fn create_load_balancer(
        &self,
        spec: &LoadBalancerSpec,
        (subnets, vpc_id): (&[String], &str),
        security_groups: &[String],
        tags: &BTreeMap<String, String>,
    ) -> Result<LoadBalancer, CloudError> {
        let mappings: Vec<SubnetMapping> = subnets
            .iter()
            .enumerate()
            .map(|(i, subnet)| {
                SubnetMapping::builder()
                    .subnet_id(subnet)
                    .set_allocation_id(spec.eip_allocations.as_ref().map(|e| e[i].clone()))
                    .set_private_ipv4_address(
                        spec.private_ipv4_addresses
                            .as_ref()
                            .map(|p| p[i].to_string()),
                    )
                    .build()
            })
            .collect();
        let scheme = if spec.internal {
            LoadBalancerSchemeEnum::Internal
        } else {
            LoadBalancerSchemeEnum::InternetFacing
        };
        let security_groups = (!security_groups.is_empty()).then(|| security_groups.to_vec());
        tracing::info!(service = %spec.svc.key, name = %spec.svc.load_balancer_name, "creating network load balancer");
        let created = self
            .api
            .change("CreateLoadBalancer", || {
                self.api
                    .elbv2
                    .create_load_balancer()
                    .name(&spec.svc.load_balancer_name)
                    .r#type(LoadBalancerTypeEnum::Network)
                    .scheme(scheme.clone())
                    .ip_address_type(spec.ip_address_type.clone())
                    .set_subnet_mappings(Some(mappings.clone()))
                    .set_security_groups(security_groups.clone())
                    .set_tags(Some(elbv2_tag_list(tags)))
                    .send()
            })
            .await?;
        let Some(created) = created else {
            return Ok(planned_load_balancer(
                spec,
                (subnets, vpc_id),
                scheme,
                security_groups,
            ));
        };
        created
            .load_balancers()
            .first()
            .cloned()
            .ok_or_else(|| CloudError::msg("CreateLoadBalancer answered without a load balancer"))
    }

    /// Brings an existing load balancer to the Service's IP address type and
    /// security groups, and restores ownership tags someone removed.
    pub(crate) async fn update_load_balancer_settings(
        &self,
        spec: &LoadBalancerSpec,
        lb: &LoadBalancer,
        current: &[Tag],
        tags: &BTreeMap<String, String>,
        security_groups: &[String],
    ) -> Result<(), CloudError> {
        let arn = lb.load_balancer_arn().unwrap_or_default();
        let have: BTreeSet<&str> = lb.security_groups().iter().map(String::as_str).collect();
        let want: BTreeSet<&str> = security_groups.iter().map(String::as_str).collect();
        if !have.is_empty() && !want.is_empty() && have != want {
            self.api
                .change("SetSecurityGroups", || {
                    self.api
                        .elbv2
                        .set_security_groups()
                        .load_balancer_arn(arn)
                        .set_security_groups(Some(security_groups.to_vec()))
                        .send()
                })
                .await?;
        }
        if lb.ip_address_type() != Some(&spec.ip_address_type) {
            self.api
                .change("SetIpAddressType", || {
                    self.api
                        .elbv2
                        .set_ip_address_type()
                        .load_balancer_arn(arn)
                        .ip_address_type(spec.ip_address_type.clone())
                        .send()
                })
                .await?;
        }
        let have: BTreeMap<&str, &str> = elbv2_tags(current).collect();
        let missing: BTreeMap<String, String> = tags
            .iter()
            .filter(|(k, v)| have.get(k.as_str()) != Some(&v.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        if !missing.is_empty() {
            self.api
                .change("AddTags", || {
                    self.api
                        .elbv2
                        .add_tags()
                        .resource_arns(arn)
                        .set_tags(Some(elbv2_tag_list(&missing)))
                        .send()
                })
                .await?;
        }
        Ok(())
    }

    /// Cross-zone load balancing on or off, as the Service asks.
    pub(crate) async fn ensure_load_balancer_attributes(
        &self,
        spec: &LoadBalancerSpec,
        arn: &str,
    ) -> Result<(), CloudError> {
        // One a dry run plans to create would have AWS's defaults.
        let current = if is_planned(arn) {
            None
        } else {
            let described = self
                .api
                .call("DescribeLoadBalancerAttributes", || {
                    self.api
                        .elbv2
                        .describe_load_balancer_attributes()
                        .load_balancer_arn(arn)
                        .send()
                })
                .await?;
            Some(described)
        };
        let want = spec.cross_zone.to_string();
        let have = current
            .iter()
            .flat_map(|c| c.attributes())
            .find(|a| a.key() == Some(CROSS_ZONE))
            .and_then(|a| a.value())
            .unwrap_or("false");
        if have != want {
            self.api
                .change("ModifyLoadBalancerAttributes", || {
                    self.api
                        .elbv2
                        .modify_load_balancer_attributes()
                        .load_balancer_arn(arn)
                        .attributes(
                            LoadBalancerAttribute::builder()
                                .key(CROSS_ZONE)
                                .value(&want)
                                .build(),
                        )
                        .send()
                })
                .await?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use aws_sdk_elasticloadbalancingv2::types::LoadBalancerState;

    use super::*;

    fn lb(state: LoadBalancerStateEnum) -> LoadBalancer {
        LoadBalancer::builder()
            .dns_name("a1-123.elb.us-east-1.amazonaws.com")
            .state(LoadBalancerState::builder().code(state).build())
            .build()
    }

    #[test]
    fn status_gives_the_dns_name_while_active_or_provisioning() {
        for state in [
            LoadBalancerStateEnum::Active,
            LoadBalancerStateEnum::Provisioning,
        ] {
            let status = status(&lb(state));
            assert_eq!(
                status.ingress[0].hostname.as_deref(),
                Some("a1-123.elb.us-east-1.amazonaws.com")
            );
            assert_eq!(status.ingress[0].ip, None);
        }
        assert!(
            status(&lb(LoadBalancerStateEnum::Failed))
                .ingress
                .is_empty()
        );
    }
}
