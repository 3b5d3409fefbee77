//! Security groups around a Network Load Balancer: the load balancer's own
//! ([`frontend`]), the ones its Service names ([`asked`]), and the rules
//! that let it reach the nodes ([`node_rules`]).
//! Both work on [`Rule`]s: one protocol, port range, CIDR and description.

pub(crate) mod asked;
pub(crate) mod frontend;
pub(crate) mod node_rules;

use std::collections::{BTreeMap, BTreeSet};

use aws_sdk_ec2::types::{Filter, IpPermission, IpRange, Ipv6Range, SecurityGroup};
use ccm_cloud_provider::CloudError;
use ccm_cloud_provider::ipnet::IpNet;

use crate::api::ApiError;
use crate::provider::Cloud;

/// One ingress rule: what EC2 calls an IP permission with a single range.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct Rule {
    /// `tcp`, `udp` or `icmp`.
    pub(crate) protocol: String,
    pub(crate) from_port: i32,
    pub(crate) to_port: i32,
    pub(crate) cidr: IpNet,
    pub(crate) description: String,
}

impl Rule {
    pub(crate) fn port(protocol: &str, port: i32, cidr: IpNet, description: &str) -> Self {
        Self {
            protocol: protocol.to_owned(),
            from_port: port,
            to_port: port,
            cidr,
            description: description.to_owned(),
        }
    }
}

/// The CIDR rules of a security group's ingress permissions; rules naming
/// other groups or prefix lists are not the provider's and are skipped.
pub(crate) fn flatten(permissions: &[IpPermission]) -> Vec<Rule> {
    let mut out = Vec::new();
    for p in permissions {
        let protocol = p.ip_protocol().unwrap_or_default().to_owned();
        let (from_port, to_port) = (p.from_port().unwrap_or(-1), p.to_port().unwrap_or(-1));
        let v4 = p.ip_ranges().iter().map(|r| (r.cidr_ip(), r.description()));
        let v6 = p
            .ipv6_ranges()
            .iter()
            .map(|r| (r.cidr_ipv6(), r.description()));
        for (cidr, description) in v4.chain(v6) {
            if let Some(cidr) = cidr.and_then(|c| c.parse::<IpNet>().ok()) {
                out.push(Rule {
                    protocol: protocol.clone(),
                    from_port,
                    to_port,
                    cidr,
                    description: description.unwrap_or_default().to_owned(),
                });
            }
        }
    }
    out
}

/// `rules` as EC2 permissions, one per protocol and port range.
pub(crate) fn permissions<'a>(rules: impl IntoIterator<Item = &'a Rule>) -> Vec<IpPermission> {
    let mut grouped: BTreeMap<(&str, i32, i32), Vec<&Rule>> = BTreeMap::new();
    for rule in rules {
        grouped
            .entry((rule.protocol.as_str(), rule.from_port, rule.to_port))
            .or_default()
            .push(rule);
    }
    grouped
        .into_iter()
        .map(|((protocol, from, to), rules)| {
            let mut b = IpPermission::builder()
                .ip_protocol(protocol)
                .from_port(from)
                .to_port(to);
            for rule in rules {
                let description = (!rule.description.is_empty()).then(|| rule.description.clone());
                b = match rule.cidr {
                    IpNet::V4(_) => b.ip_ranges(
                        IpRange::builder()
                            .cidr_ip(rule.cidr.to_string())
                            .set_description(description)
                            .build(),
                    ),
                    IpNet::V6(_) => b.ipv6_ranges(
                        Ipv6Range::builder()
                            .cidr_ipv6(rule.cidr.to_string())
                            .set_description(description)
                            .build(),
                    ),
                };
            }
            b.build()
        })
        .collect()
}

/// Rules to add, remove and describe anew in one security group.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct RuleChanges {
    pub(crate) grant: BTreeSet<Rule>,
    pub(crate) revoke: BTreeSet<Rule>,
    /// Rules that stay, with the description they get.
    pub(crate) describe: BTreeSet<Rule>,
}

impl RuleChanges {
    pub(crate) fn is_empty(&self) -> bool {
        self.grant.is_empty() && self.revoke.is_empty() && self.describe.is_empty()
    }
}

impl Cloud {
    /// Security groups matching `filters`, across pages.
    pub(crate) async fn security_groups(
        &self,
        filters: Vec<Filter>,
    ) -> Result<Vec<SecurityGroup>, ApiError> {
        self.api
            .paged(
                "DescribeSecurityGroups",
                |token| {
                    let request = self.api.ec2.describe_security_groups();
                    request
                        .set_filters(Some(filters.clone()))
                        .set_next_token(token)
                        .send()
                },
                |page| {
                    (
                        page.security_groups().to_vec(),
                        page.next_token().map(str::to_owned),
                    )
                },
            )
            .await
    }

    /// Applies `changes` to the group: new descriptions first, then
    /// revocations, then grants. A rule already gone or already there (a
    /// concurrent writer, or a user's rule with another description) is not
    /// an error.
    pub(crate) async fn apply_rules(
        &self,
        group_id: &str,
        changes: &RuleChanges,
    ) -> Result<(), CloudError> {
        if !changes.describe.is_empty() {
            self.api
                .change("UpdateSecurityGroupRuleDescriptionsIngress", || {
                    self.api
                        .ec2
                        .update_security_group_rule_descriptions_ingress()
                        .group_id(group_id)
                        .set_ip_permissions(Some(permissions(&changes.describe)))
                        .send()
                })
                .await?;
        }
        if !changes.revoke.is_empty() {
            self.revoke(group_id, permissions(&changes.revoke)).await?;
        }
        if changes.grant.is_empty() {
            return Ok(());
        }
        let granted = self.authorize(group_id, permissions(&changes.grant)).await;
        match granted {
            // One duplicate fails the whole call: grant the rules one by one.
            Err(e) if e.is("InvalidPermission.Duplicate") => {
                for rule in &changes.grant {
                    match self.authorize(group_id, permissions([rule])).await {
                        Err(e) if e.is("InvalidPermission.Duplicate") => {}
                        other => other?,
                    }
                }
                Ok(())
            }
            other => Ok(other?),
        }
    }

    /// Revokes `revoke` from the group; a rule already gone is fine.
    pub(crate) async fn revoke(
        &self,
        group_id: &str,
        revoke: Vec<IpPermission>,
    ) -> Result<(), CloudError> {
        let revoked = self
            .api
            .change("RevokeSecurityGroupIngress", || {
                self.api
                    .ec2
                    .revoke_security_group_ingress()
                    .group_id(group_id)
                    .set_ip_permissions(Some(revoke.clone()))
                    .send()
            })
            .await;
        match revoked {
            Err(e) if e.is("InvalidPermission.NotFound") => Ok(()),
            other => Ok(other.map(drop)?),
        }
    }

    pub(crate) async fn authorize(
        &self,
        group_id: &str,
        grant: Vec<IpPermission>,
    ) -> Result<(), ApiError> {
        self.api
            .change("AuthorizeSecurityGroupIngress", || {
                self.api
                    .ec2
                    .authorize_security_group_ingress()
                    .group_id(group_id)
                    .set_ip_permissions(Some(grant.clone()))
                    .send()
            })
            .await
            .map(|_| ())
    }

    /// The VPC's IPv4 and IPv6 CIDR blocks, read at most every ten minutes
    /// ([`super::recent`]).
    pub(crate) async fn vpc_cidrs(&self, vpc_id: &str) -> Result<Vec<IpNet>, CloudError> {
        if let Some(cidrs) = self.recent.vpc_cidrs(vpc_id) {
            return Ok(cidrs);
        }
        let described = self
            .api
            .call("DescribeVpcs", || {
                self.api.ec2.describe_vpcs().vpc_ids(vpc_id).send()
            })
            .await?;
        let vpc = described
            .vpcs()
            .first()
            .ok_or_else(|| CloudError::msg(format!("VPC {vpc_id} does not exist")))?;
        let mut cidrs: Vec<IpNet> = vpc
            .cidr_block_association_set()
            .iter()
            .filter(|a| {
                a.cidr_block_state()
                    .and_then(|s| s.state())
                    .is_none_or(|s| s.as_str() == "associated")
            })
            .filter_map(|a| a.cidr_block())
            .chain(
                vpc.ipv6_cidr_block_association_set()
                    .iter()
                    .filter_map(|a| a.ipv6_cidr_block()),
            )
            .filter_map(|c| c.parse().ok())
            .collect();
        if cidrs.is_empty() {
            cidrs.extend(vpc.cidr_block().and_then(|c| c.parse::<IpNet>().ok()));
        }
        self.recent.remember_vpc_cidrs(vpc_id, &cidrs);
        Ok(cidrs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn net(s: &str) -> IpNet {
        s.parse().expect("cidr")
    }

    #[test]
    fn permissions_round_trip_through_flatten() {
        let rules = vec![
            Rule::port(
                "tcp",
                30080,
                net("10.0.0.0/16"),
                "kubernetes.io/rule/nlb/client=a1",
            ),
            Rule::port(
                "tcp",
                30080,
                net("2600:1f14::/56"),
                "kubernetes.io/rule/nlb/client=a1",
            ),
            Rule::port("tcp", 30081, net("10.0.0.0/16"), ""),
        ];
        let perms = permissions(&rules);
        assert_eq!(perms.len(), 2, "one permission per port range");
        let mut back = flatten(&perms);
        back.sort();
        let mut want = rules;
        want.sort();
        assert_eq!(back, want);
    }

    #[test]
    fn flatten_skips_group_references() {
        let perm = IpPermission::builder()
            .ip_protocol("tcp")
            .from_port(1)
            .to_port(2)
            .user_id_group_pairs(
                aws_sdk_ec2::types::UserIdGroupPair::builder()
                    .group_id("sg-1")
                    .build(),
            )
            .build();
        assert!(flatten(&[perm]).is_empty());
    }
}
