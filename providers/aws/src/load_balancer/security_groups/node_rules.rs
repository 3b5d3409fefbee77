//! Rules in the nodes' security groups that let a Network Load Balancer's
//! traffic in, as upstream writes them.
//!
//! Network Load Balancers keep the client's address, so nodes must accept
//! the clients themselves: the node ports from `loadBalancerSourceRanges`,
//! or, when the Service names none, from the VPC for an internal load
//! balancer and from anywhere for an internet-facing one. Health checks come
//! from the load balancer's addresses in the VPC. ICMP "fragmentation
//! needed" is let in from the client ranges for path MTU discovery.
//!
//! Each rule's description names the load balancer
//! (`kubernetes.io/rule/nlb/client=<name>`), which is how rules are found
//! again to update or remove, in any security group of the VPC. A rule two
//! load balancers need is described as shared and reference-counted
//! against the VPC's load balancers ([`shared`]).

use std::collections::{BTreeMap, BTreeSet};

use aws_sdk_ec2::types::{Instance, SecurityGroup};
use aws_sdk_elasticloadbalancingv2::types::{IpAddressType, ProtocolEnum};
use ccm_cloud_provider::CloudError;
use ccm_cloud_provider::ipnet::IpNet;

mod shared;

use super::{Rule, RuleChanges, flatten};
use crate::instances::lookup::filter;
use crate::load_balancer::naming::{MTU_RULE, client_rule, health_rule};
use crate::load_balancer::spec::{HealthCheckPort, LoadBalancerSpec};
use crate::provider::Cloud;
use crate::tagging::ec2_tags;

const CLIENT_RULE_PREFIX: &str = "kubernetes.io/rule/nlb/client=";
const HEALTH_RULE_PREFIX: &str = "kubernetes.io/rule/nlb/health=";

/// The client CIDRs of the Service's load balancer.
pub(crate) fn client_cidrs(spec: &LoadBalancerSpec, vpc_cidrs: &[IpNet]) -> Vec<IpNet> {
    if !spec.source_ranges.is_empty() {
        return spec.source_ranges.clone();
    }
    if spec.internal {
        return vpc_cidrs.to_vec();
    }
    let mut anywhere = vec![IpNet::V4(Default::default())];
    if spec.ip_address_type == IpAddressType::Dualstack {
        anywhere.push(IpNet::V6(Default::default()));
    }
    anywhere
}

fn protocol(spec: &LoadBalancerSpec) -> &'static str {
    match spec.ports.first().map(|p| &p.target_protocol) {
        Some(ProtocolEnum::Udp) => "udp",
        _ => "tcp",
    }
}

fn node_ports(spec: &LoadBalancerSpec) -> BTreeSet<i32> {
    spec.ports.iter().map(|p| p.node_port).collect()
}

fn health_ports(spec: &LoadBalancerSpec) -> BTreeSet<i32> {
    match spec.health_check.port {
        HealthCheckPort::TrafficPort => node_ports(spec),
        HealthCheckPort::Port(p) => BTreeSet::from([p]),
    }
}

/// Whether health checks need a rule of their own: upstream's shortcut
/// leaves it out when the client rule already lets them in (TCP from
/// anywhere to the ports they check).
pub(crate) fn needs_health_rule(spec: &LoadBalancerSpec, vpc_cidrs: &[IpNet]) -> bool {
    !(client_cidrs(spec, vpc_cidrs) == [IpNet::V4(Default::default())]
        && protocol(spec) == "tcp"
        && health_ports(spec) == node_ports(spec))
}

/// The rules the Service's load balancer needs in each node security group:
/// its clients to the node ports and, when [`needs_health_rule`], its
/// health checks from `subnet_cidrs` (the load balancer's subnets, as
/// upstream's `updateInstanceSecurityGroupsForNLB`) to the ports checked.
pub(crate) fn desired_rules(
    spec: &LoadBalancerSpec,
    vpc_cidrs: &[IpNet],
    subnet_cidrs: &[IpNet],
) -> BTreeSet<Rule> {
    let lb = &spec.svc.load_balancer_name;
    let protocol = protocol(spec);
    let clients = client_cidrs(spec, vpc_cidrs);
    let mut rules = BTreeSet::new();
    for port in &node_ports(spec) {
        for cidr in &clients {
            rules.insert(Rule::port(protocol, *port, *cidr, &client_rule(lb)));
        }
    }
    if needs_health_rule(spec, vpc_cidrs) {
        for port in &health_ports(spec) {
            for cidr in subnet_cidrs {
                rules.insert(Rule::port("tcp", *port, *cidr, &health_rule(lb)));
            }
        }
    }
    rules
}

/// What to change in a group whose rules are `existing` so that the load
/// balancer `lb` has exactly `desired`, and the shared MTU rules cover
/// every load balancer's client ranges.
///
/// Rules are matched as EC2 matches them, by protocol, ports and CIDR; the
/// description only says whose a rule is. A rule `lb` needs that another
/// load balancer's rule already grants is described as shared
/// ([`shared`]) rather than granted again, so that neither load balancer's
/// deletion revokes what the other still needs; a user's rule that grants
/// it is left as it is.
pub(crate) fn plan(existing: &[Rule], desired: &BTreeSet<Rule>, lb: &str) -> RuleChanges {
    let (client, health) = (client_rule(lb), health_rule(lb));
    let is_ours = |r: &Rule| r.description == client || r.description == health;
    let by_key: BTreeMap<RuleKey<'_>, &Rule> = existing.iter().map(|r| (key(r), r)).collect();
    let desired_keys: BTreeSet<RuleKey<'_>> = desired.iter().map(key).collect();
    let mut changes = RuleChanges::default();
    for wanted in desired {
        match by_key.get(&key(wanted)) {
            None => {
                changes.grant.insert(wanted.clone());
            }
            Some(found) if is_ours(found) => {}
            Some(found) => {
                if let Some(description) = shared::share(&found.description, &wanted.description) {
                    changes.describe.insert(Rule {
                        description,
                        ..(*found).clone()
                    });
                }
            }
        }
    }
    changes.revoke = existing
        .iter()
        .filter(|r| is_ours(r) && !desired_keys.contains(&key(r)))
        .cloned()
        .collect();
    let client_ranges: BTreeSet<IpNet> = existing
        .iter()
        .filter(|r| r.description.starts_with(CLIENT_RULE_PREFIX) && !changes.revoke.contains(*r))
        .chain(changes.grant.iter().filter(|r| r.description == client))
        .map(|r| r.cidr)
        .filter(|c| matches!(c, IpNet::V4(_)))
        .collect();
    let mtu_wanted: BTreeSet<Rule> = client_ranges
        .into_iter()
        .map(|cidr| Rule {
            protocol: "icmp".to_owned(),
            from_port: 3,
            to_port: 4,
            cidr,
            description: MTU_RULE.to_owned(),
        })
        .collect();
    let mtu_have: BTreeSet<Rule> = existing
        .iter()
        .filter(|r| r.description == MTU_RULE)
        .cloned()
        .collect();
    changes
        .grant
        .extend(mtu_wanted.difference(&mtu_have).cloned());
    changes
        .revoke
        .extend(mtu_have.difference(&mtu_wanted).cloned());
    changes
}

/// What EC2 tells rules apart by: protocol, ports and CIDR.
type RuleKey<'a> = (&'a str, i32, i32, IpNet);

fn key(rule: &Rule) -> RuleKey<'_> {
    (&rule.protocol, rule.from_port, rule.to_port, rule.cidr)
}

/// The node security group of `instance`: the one tagged for the cluster,
/// or its only group (upstream's rule).
pub(crate) fn node_security_group<'a>(
    instance: &'a Instance,
    tagged: &BTreeSet<&str>,
) -> Result<Option<&'a str>, CloudError> {
    let groups: Vec<&str> = instance
        .security_groups()
        .iter()
        .filter_map(|g| g.group_id())
        .collect();
    let (ours, others): (Vec<&str>, Vec<&str>) = groups.iter().partition(|g| tagged.contains(**g));
    match (ours.as_slice(), others.as_slice()) {
        ([one], _) | ([], [one]) => Ok(Some(one)),
        ([], []) => Ok(None),
        ([], _) => Err(CloudError::msg(format!(
            "instance {} has several security groups and none is tagged for the cluster; tag the node security group",
            instance.instance_id().unwrap_or_default()
        ))),
        _ => Err(CloudError::msg(format!(
            "instance {} has several security groups tagged for the cluster ({}); tag only one",
            instance.instance_id().unwrap_or_default(),
            ours.join(", ")
        ))),
    }
}

impl Cloud {
    /// Opens the nodes behind `instances` to the Service's load balancer and
    /// closes every other group to it.
    pub(crate) async fn ensure_node_rules(
        &self,
        spec: &LoadBalancerSpec,
        vpc_id: &str,
        vpc_cidrs: &[IpNet],
        subnet_cidrs: &[IpNet],
        instances: &[Instance],
    ) -> Result<(), CloudError> {
        if self.config.disable_security_group_ingress {
            return Ok(());
        }
        let groups = self
            .security_groups(vec![filter("vpc-id", &[vpc_id])])
            .await?;
        let tagged: BTreeSet<&str> = groups
            .iter()
            .filter(|g| self.tags.is_tagged(ec2_tags(g.tags())))
            .filter_map(|g| g.group_id())
            .collect();
        let rules = desired_rules(spec, vpc_cidrs, subnet_cidrs);
        let mut desired: BTreeMap<String, BTreeSet<Rule>> = BTreeMap::new();
        for instance in instances {
            match node_security_group(instance, &tagged)? {
                Some(group) => {
                    desired.insert(group.to_owned(), rules.clone());
                }
                None => tracing::warn!(
                    instance = instance.instance_id().unwrap_or_default(),
                    "instance has no security group to open for its load balancer"
                ),
            }
        }
        self.sync_node_rules(&spec.svc.load_balancer_name, &groups, &desired, None)
            .await
    }

    /// Removes the load balancer's rules from every node security group.
    pub(crate) async fn remove_node_rules(
        &self,
        lb_name: &str,
        vpc_id: Option<&str>,
    ) -> Result<(), CloudError> {
        if self.config.disable_security_group_ingress {
            return Ok(());
        }
        let filters = vpc_id
            .map(|v| vec![filter("vpc-id", &[v])])
            .unwrap_or_default();
        let groups = self.security_groups(filters).await?;
        let any_shared = groups
            .iter()
            .flat_map(|g| flatten(g.ip_permissions()))
            .any(|r| shared::is_shared(&r.description));
        let needs = if any_shared {
            Some(self.shared_rule_needs(vpc_id, lb_name).await?)
        } else {
            None
        };
        self.sync_node_rules(lb_name, &groups, &BTreeMap::new(), needs.as_ref())
            .await
    }

    /// Brings each group to `desired` for `lb_name`; with `needs`, also
    /// revokes the shared rules nothing needs any more.
    async fn sync_node_rules(
        &self,
        lb_name: &str,
        groups: &[SecurityGroup],
        desired: &BTreeMap<String, BTreeSet<Rule>>,
        needs: Option<&shared::Needs>,
    ) -> Result<(), CloudError> {
        let none = BTreeSet::new();
        for group in groups {
            let Some(id) = group.group_id() else { continue };
            let mut existing = flatten(group.ip_permissions());
            let unneeded = needs
                .map(|needs| shared::unneeded(&existing, needs))
                .unwrap_or_default();
            existing.retain(|r| !unneeded.contains(r));
            let mut changes = plan(&existing, desired.get(id).unwrap_or(&none), lb_name);
            changes.revoke.extend(unneeded);
            if !changes.is_empty() {
                tracing::info!(
                    group = id,
                    load_balancer = lb_name,
                    grant = changes.grant.len(),
                    revoke = changes.revoke.len(),
                    "updating node security group"
                );
                self.apply_rules(id, &changes).await?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
