//! The load balancer's own security group, as upstream's managed mode makes
//! it: named `k8s-{namespace:8}-{name:8}-{hash:10}`, tagged as the Service's,
//! letting the listener ports in from the client ranges, attached when the
//! load balancer is created and deleted after it.
//!
//! `ElbSecurityGroup` in the cloud config replaces it with a group the
//! operator manages, which the provider attaches and never changes. A load
//! balancer created without security groups keeps none: AWS cannot add them
//! later.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use aws_sdk_ec2::types::{ResourceType, SecurityGroup, Tag, TagSpecification};
use cloud_provider::CloudError;
use cloud_provider::ipnet::IpNet;
use sha2::{Digest, Sha256};

use super::{Rule, RuleChanges, flatten};
use crate::instances::lookup::filter;
use crate::load_balancer::spec::{LoadBalancerSpec, ServiceRef};
use crate::provider::Cloud;
use crate::tagging::ec2_tags;

/// How long to wait for AWS to let go of a deleted load balancer's group.
const DETACH_RETRY: Duration = Duration::from_secs(10);

/// Upstream's description of an NLB's managed group.
const MANAGED_DESCRIPTION: &str = "[k8s] Managed SecurityGroup for LoadBalancer";

/// Upstream's name for the Service's load-balancer security group.
pub(crate) fn security_group_name(cluster_name: &str, svc: &ServiceRef) -> String {
    let mut hasher = Sha256::new();
    for part in [cluster_name, &svc.name, &svc.namespace, &svc.uid] {
        hasher.update(part.as_bytes());
    }
    let hash: String = hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let clean = |s: &str| -> String { s.chars().filter(char::is_ascii_alphanumeric).collect() };
    format!(
        "k8s-{:.8}-{:.8}-{:.10}",
        clean(&svc.namespace),
        clean(&svc.name),
        hash
    )
}

/// Ingress for every listener port from `clients`.
pub(crate) fn frontend_rules(spec: &LoadBalancerSpec, clients: &[IpNet]) -> BTreeSet<Rule> {
    let mut rules = BTreeSet::new();
    for port in &spec.ports {
        let protocol = if port.target_protocol.as_str() == "UDP" {
            "udp"
        } else {
            "tcp"
        };
        for cidr in clients {
            rules.insert(Rule::port(protocol, port.port, *cidr, ""));
        }
    }
    rules
}

impl Cloud {
    /// The Service's security group, found by name or created, with exactly
    /// the ingress the listeners need.
    pub(crate) async fn ensure_frontend_security_group(
        &self,
        cluster_name: &str,
        spec: &LoadBalancerSpec,
        vpc_id: &str,
        clients: &[IpNet],
        tags: &BTreeMap<String, String>,
    ) -> Result<String, CloudError> {
        let name = security_group_name(cluster_name, &spec.svc);
        let group = match self
            .find_frontend_security_group(&name, vpc_id, &spec.svc)
            .await?
        {
            Some(group) => group,
            None => {
                self.create_frontend_security_group(&name, MANAGED_DESCRIPTION, vpc_id, tags)
                    .await?
            }
        };
        let id = group.group_id().unwrap_or_default().to_owned();
        let existing: BTreeSet<Rule> = flatten(group.ip_permissions()).into_iter().collect();
        let desired = frontend_rules(spec, clients);
        let changes = RuleChanges {
            grant: desired.difference(&existing).cloned().collect(),
            revoke: existing.difference(&desired).cloned().collect(),
            ..RuleChanges::default()
        };
        if !changes.is_empty() {
            self.apply_rules(&id, &changes).await?;
        }
        Ok(id)
    }

    async fn find_frontend_security_group(
        &self,
        name: &str,
        vpc_id: &str,
        svc: &ServiceRef,
    ) -> Result<Option<SecurityGroup>, CloudError> {
        let found = self
            .security_groups(vec![
                filter("group-name", &[name]),
                filter("vpc-id", &[vpc_id]),
            ])
            .await?;
        let Some(group) = found.into_iter().next() else {
            return Ok(None);
        };
        if !self
            .tags
            .is_owned_for_service(ec2_tags(group.tags()), &svc.key)
        {
            return Err(CloudError::msg(format!(
                "security group {name} exists but is not tagged as cluster {}'s for Service {}; refusing to adopt it",
                self.tags.id(),
                svc.key
            )));
        }
        Ok(Some(group))
    }

    /// Creates a load balancer's own group, without ingress.
    pub(crate) async fn create_frontend_security_group(
        &self,
        name: &str,
        description: &str,
        vpc_id: &str,
        tags: &BTreeMap<String, String>,
    ) -> Result<SecurityGroup, CloudError> {
        let tag_spec = TagSpecification::builder()
            .resource_type(ResourceType::SecurityGroup)
            .set_tags(Some(
                tags.iter()
                    .map(|(k, v)| Tag::builder().key(k).value(v).build())
                    .collect(),
            ))
            .build();
        tracing::info!(name, vpc_id, "creating load balancer security group");
        let created = self
            .api
            .call("CreateSecurityGroup", || {
                self.api
                    .ec2
                    .create_security_group()
                    .group_name(name)
                    .description(description)
                    .vpc_id(vpc_id)
                    .tag_specifications(tag_spec.clone())
                    .send()
            })
            .await?;
        let id = created
            .group_id()
            .ok_or_else(|| CloudError::msg("CreateSecurityGroup answered without a group ID"))?;
        // AWS adds the default egress rule; the new group has no ingress.
        Ok(SecurityGroup::builder()
            .group_id(id)
            .group_name(name)
            .vpc_id(vpc_id)
            .build())
    }

    /// Deletes the Service's security groups among `candidates` and the one
    /// named for it. While AWS still holds one for the deleted load
    /// balancer, the answer is a retry.
    pub(crate) async fn delete_frontend_security_groups(
        &self,
        cluster_name: &str,
        svc: &ServiceRef,
        candidates: &[String],
    ) -> Result<(), CloudError> {
        let name = security_group_name(cluster_name, svc);
        let mut groups = self
            .security_groups(vec![filter("group-name", &[&name])])
            .await?;
        if !candidates.is_empty() {
            let ids: Vec<&str> = candidates.iter().map(String::as_str).collect();
            groups.extend(self.security_groups(vec![filter("group-id", &ids)]).await?);
        }
        for id in self.owned_for_service(&groups, &svc.key) {
            self.delete_security_group(id).await?;
            tracing::info!(group = id, service = %svc.key, "deleted load balancer security group");
        }
        Ok(())
    }

    /// The IDs of `groups` this cluster made for `service`, never the
    /// config's `ElbSecurityGroup`.
    pub(crate) fn owned_for_service<'a>(
        &self,
        groups: &'a [SecurityGroup],
        service: &str,
    ) -> BTreeSet<&'a str> {
        groups
            .iter()
            .filter(|g| self.tags.is_owned_for_service(ec2_tags(g.tags()), service))
            .filter_map(|g| g.group_id())
            .filter(|id| self.config.elb_security_group.as_deref() != Some(*id))
            .collect()
    }

    /// Deletes a load balancer's security group; gone already is fine,
    /// still attached (AWS lets go of a deleted load balancer's groups a
    /// little later) is a retry.
    pub(crate) async fn delete_security_group(&self, id: &str) -> Result<(), CloudError> {
        let deleted = self
            .api
            .call("DeleteSecurityGroup", || {
                self.api.ec2.delete_security_group().group_id(id).send()
            })
            .await;
        match deleted {
            Ok(_) => Ok(()),
            Err(e) if e.is("InvalidGroup.NotFound") => Ok(()),
            Err(e) if e.is("DependencyViolation") => Err(CloudError::Retry {
                after: DETACH_RETRY,
                reason: format!("security group {id} is still attached to a deleted load balancer"),
            }),
            Err(e) => Err(e.into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn svc() -> ServiceRef {
        ServiceRef {
            key: "default/web".into(),
            namespace: "default".into(),
            name: "web".into(),
            uid: "3f2a9c1e-5b7d-4e8f-9a0b-1c2d3e4f5a6b".into(),
            load_balancer_name: "a3f2a9c1e5b7d4e8f9a0b1c2d3e4f5a6".into(),
        }
    }

    #[test]
    fn the_group_name_follows_upstreams_sha256_scheme() {
        // sha256("kubernetes" "web" "default" uid)
        let name = security_group_name("kubernetes", &svc());
        assert_eq!(name, "k8s-default-web-aa469f6c7c");
        assert!(name.len() <= 255);
    }
}
