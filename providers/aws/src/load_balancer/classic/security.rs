//! A classic ELB's security groups, as upstream manages them
//! (`buildELBSecurityGroupList`, `createSecurityGroupRules`,
//! `updateInstanceSecurityGroupsForLoadBalancer`): the ELB's own group
//! `k8s-elb-<name>` letting clients reach the listener ports (and ICMP
//! "fragmentation needed" for path MTU discovery), unless the Service
//! (`security-groups`) or the config (`ElbSecurityGroup`) names the group
//! instead; the Service's `extra-security-groups` on top; and in each
//! target's node security group a rule letting the ELB's first group in.
//!
//! Rules that refer to the ELB's own group are kept exactly in step. Rules
//! that refer to a named group, which other ELBs may share, are added as
//! nodes need them and removed only when the last ELB using the group is
//! deleted (upstream removes them from every tagged node group whenever
//! one such ELB's nodes change).

use std::collections::BTreeSet;

use aws_sdk_ec2::types::{Instance, IpPermission, SecurityGroup, UserIdGroupPair};
use aws_sdk_elasticloadbalancing::types::LoadBalancerDescription;
use ccm_cloud_provider::CloudError;

use super::ClassicSpec;
use crate::api::MAX_PAGES;
use crate::instances::lookup::filter;
use crate::load_balancer::security_groups::node_rules::node_security_group;
use crate::load_balancer::security_groups::{Rule, RuleChanges, flatten};
use crate::provider::Cloud;
use crate::tagging::ec2_tags;

/// Upstream's name for a classic ELB's own group.
pub(crate) fn own_group_name(lb_name: &str) -> String {
    format!("k8s-elb-{lb_name}")
}

/// The groups of one ELB.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ClassicGroups {
    /// In upstream's order: the first group, then the extra ones.
    pub(crate) attached: Vec<String>,
    /// Whether the first group is the ELB's own.
    pub(crate) own: bool,
}

impl ClassicGroups {
    /// The group node rules let in.
    pub(crate) fn first(&self) -> Option<&str> {
        self.attached.first().map(String::as_str)
    }
}

/// The ingress of the ELB's own group: each listener port from each client
/// range, and ICMP type 3 code 4 from each.
fn own_rules(spec: &ClassicSpec) -> BTreeSet<Rule> {
    let mut rules = BTreeSet::new();
    for cidr in &spec.source_ranges {
        for listener in &spec.listeners {
            rules.insert(Rule::port("tcp", listener.port, *cidr, ""));
        }
        rules.insert(Rule {
            protocol: "icmp".to_owned(),
            from_port: 3,
            to_port: 4,
            cidr: *cidr,
            description: String::new(),
        });
    }
    rules
}

/// Whether `permission` lets `group` in.
fn refers_to(permission: &IpPermission, group: &str) -> bool {
    permission
        .user_id_group_pairs()
        .iter()
        .any(|p| p.group_id() == Some(group))
}

/// All traffic from `group`: upstream's node rule.
fn from_group(group: &str) -> IpPermission {
    IpPermission::builder()
        .ip_protocol("-1")
        .user_id_group_pairs(UserIdGroupPair::builder().group_id(group).build())
        .build()
}

impl Cloud {
    /// The groups the ELB gets, creating and keeping in step its own one
    /// when neither the Service nor the config names one.
    pub(crate) async fn classic_security_groups(
        &self,
        spec: &ClassicSpec,
        vpc_id: &str,
    ) -> Result<ClassicGroups, CloudError> {
        let (chosen, own) = if !spec.security_groups.instead.is_empty() {
            (Vec::new(), false)
        } else if let Some(configured) = &self.config.elb_security_group {
            (vec![configured.clone()], false)
        } else {
            (vec![self.ensure_own_group(spec, vpc_id).await?], true)
        };
        Ok(ClassicGroups {
            attached: spec.security_groups.apply(chosen),
            own,
        })
    }

    /// The groups an existing ELB has, in upstream's order, without
    /// touching any.
    pub(crate) fn attached_groups(
        &self,
        spec: &ClassicSpec,
        lb: &LoadBalancerDescription,
    ) -> ClassicGroups {
        let mut attached: Vec<String> = lb.security_groups().to_vec();
        let rank = |g: &String| {
            if let Some(i) = spec.security_groups.instead.iter().position(|x| x == g) {
                i
            } else if spec.security_groups.extra.contains(g) {
                usize::MAX
            } else {
                spec.security_groups.instead.len()
            }
        };
        attached.sort_by_key(rank);
        let own = spec.security_groups.instead.is_empty()
            && self.config.elb_security_group.is_none()
            && !attached.is_empty();
        ClassicGroups { attached, own }
    }

    async fn ensure_own_group(
        &self,
        spec: &ClassicSpec,
        vpc_id: &str,
    ) -> Result<String, CloudError> {
        let lb_name = &spec.svc.load_balancer_name;
        let name = own_group_name(lb_name);
        let found = self
            .security_groups(vec![
                filter("group-name", &[&name]),
                filter("vpc-id", &[vpc_id]),
            ])
            .await?
            .into_iter()
            .next();
        let group = match found {
            Some(g) if self.tags.is_tagged(ec2_tags(g.tags())) => g,
            Some(_) => {
                return Err(CloudError::msg(format!(
                    "security group {name} exists but is not tagged for cluster {}; refusing to adopt it",
                    self.tags.id()
                )));
            }
            None => {
                let tags = self
                    .tags
                    .owned_for_service(&spec.svc.key, &spec.additional_tags);
                let description = format!(
                    "Security group for Kubernetes ELB {lb_name} ({})",
                    spec.svc.key
                );
                self.create_frontend_security_group(&name, &description, vpc_id, &tags)
                    .await?
            }
        };
        let id = group.group_id().unwrap_or_default().to_owned();
        let existing: BTreeSet<Rule> = flatten(group.ip_permissions()).into_iter().collect();
        let desired = own_rules(spec);
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

    /// The ELB's own group, if this cluster owns one of its name.
    pub(crate) async fn own_classic_group(
        &self,
        lb_name: &str,
        vpc_id: Option<&str>,
    ) -> Result<Option<String>, CloudError> {
        let name = own_group_name(lb_name);
        let mut filters = vec![filter("group-name", &[&name])];
        if let Some(vpc) = vpc_id {
            filters.push(filter("vpc-id", &[vpc]));
        }
        Ok(self
            .security_groups(filters)
            .await?
            .into_iter()
            .find(|g| self.tags.is_owned(ec2_tags(g.tags())))
            .and_then(|g| g.group_id().map(str::to_owned)))
    }

    /// Lets the ELB's first group into each target's node security group;
    /// with the ELB's own group, also closes every other tagged group to it.
    pub(crate) async fn sync_classic_node_rules(
        &self,
        groups: &ClassicGroups,
        vpc_id: &str,
        instances: &[Instance],
    ) -> Result<(), CloudError> {
        if self.config.disable_security_group_ingress {
            return Ok(());
        }
        let Some(first) = groups.first() else {
            return Ok(());
        };
        let all = self
            .security_groups(vec![filter("vpc-id", &[vpc_id])])
            .await?;
        let tagged: BTreeSet<&str> = all
            .iter()
            .filter(|g| self.tags.is_tagged(ec2_tags(g.tags())))
            .filter_map(|g| g.group_id())
            .collect();
        let mut wanted = BTreeSet::new();
        for instance in instances {
            match node_security_group(instance, &tagged)? {
                Some(group) => {
                    wanted.insert(group);
                }
                None => tracing::warn!(
                    instance = instance.instance_id().unwrap_or_default(),
                    "instance has no security group to open for its ELB"
                ),
            }
        }
        for group in &all {
            let Some(id) = group.group_id() else { continue };
            let has = group.ip_permissions().iter().any(|p| refers_to(p, first));
            if wanted.contains(id) && !has {
                tracing::info!(
                    group = id,
                    from = first,
                    "letting the ELB into a node security group"
                );
                self.grant_from_group(id, first).await?;
            } else if has && !wanted.contains(id) && groups.own && tagged.contains(id) {
                tracing::info!(
                    group = id,
                    from = first,
                    "closing a node security group to the ELB"
                );
                self.revoke_from(group, first).await?;
            }
        }
        Ok(())
    }

    async fn grant_from_group(&self, group_id: &str, from: &str) -> Result<(), CloudError> {
        match self.authorize(group_id, vec![from_group(from)]).await {
            Err(e) if e.is("InvalidPermission.Duplicate") => Ok(()),
            other => Ok(other?),
        }
    }

    /// Revokes `group`'s permissions that let `from` in, as they are.
    async fn revoke_from(&self, group: &SecurityGroup, from: &str) -> Result<(), CloudError> {
        let revoke: Vec<IpPermission> = group
            .ip_permissions()
            .iter()
            .filter(|p| refers_to(p, from))
            .map(|p| {
                IpPermission::builder()
                    .set_ip_protocol(p.ip_protocol().map(str::to_owned))
                    .set_from_port(p.from_port())
                    .set_to_port(p.to_port())
                    .user_id_group_pairs(UserIdGroupPair::builder().group_id(from).build())
                    .build()
            })
            .collect();
        self.revoke(group.group_id().unwrap_or_default(), revoke)
            .await
    }

    /// Removes every rule letting `group` in: from all groups (`all`, for a
    /// group about to be deleted) or from this cluster's.
    pub(crate) async fn revoke_references(&self, group: &str, all: bool) -> Result<(), CloudError> {
        if self.config.disable_security_group_ingress && !all {
            return Ok(());
        }
        let referring = self
            .security_groups(vec![filter("ip-permission.group-id", &[group])])
            .await?;
        for g in &referring {
            if all || self.tags.is_tagged(ec2_tags(g.tags())) {
                self.revoke_from(g, group).await?;
            }
        }
        Ok(())
    }

    /// Whether a classic ELB other than `except` has `group`.
    pub(crate) async fn used_by_another_classic(
        &self,
        group: &str,
        except: &str,
    ) -> Result<bool, CloudError> {
        let mut marker: Option<String> = None;
        for _ in 0..MAX_PAGES {
            let page = self
                .api
                .call("DescribeLoadBalancers", || {
                    self.api
                        .elb
                        .describe_load_balancers()
                        .set_marker(marker.clone())
                        .send()
                })
                .await?;
            if page.load_balancer_descriptions().iter().any(|lb| {
                lb.load_balancer_name() != Some(except)
                    && lb.security_groups().iter().any(|g| g == group)
            }) {
                return Ok(true);
            }
            marker = page.next_marker().map(str::to_owned);
            if marker.is_none() {
                return Ok(false);
            }
        }
        // Too many to tell: keep the rules.
        Ok(true)
    }

    /// Deletes the ELB's own group once replaced: its node rules first.
    pub(crate) async fn delete_replaced_own_group(&self, spec: &ClassicSpec, detached: &[String]) {
        let own = own_group_name(&spec.svc.load_balancer_name);
        let groups = match self
            .security_groups(vec![filter("group-name", &[&own])])
            .await
        {
            Ok(g) => g,
            Err(e) => {
                tracing::warn!(service = %spec.svc.key, error = %e, "could not read the ELB's replaced group");
                return;
            }
        };
        for g in groups {
            let Some(id) = g.group_id() else { continue };
            if !detached.iter().any(|d| d == id) || !self.tags.is_owned(ec2_tags(g.tags())) {
                continue;
            }
            let deleted = match self.revoke_references(id, true).await {
                Ok(()) => self.delete_security_group(id).await,
                Err(e) => Err(e),
            };
            if let Err(e) = deleted {
                tracing::warn!(group = id, service = %spec.svc.key, error = %e, "the ELB's own group stays until the Service is deleted");
            }
        }
    }
}
