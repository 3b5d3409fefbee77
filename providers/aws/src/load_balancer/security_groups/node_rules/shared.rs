//! Node rules several load balancers need.
//!
//! EC2 keeps one rule per protocol, ports and CIDR, with one description.
//! Two Network Load Balancers checking the same health port (kube-proxy's
//! 10256, the shared health probe) from the same subnets need the same
//! rule; described for the first, the second's deletion would not find it
//! and the first's would revoke it from under the second. So the second
//! describes it as shared (`kubernetes.io/rule/nlb/health=(shared)`, a
//! name no load balancer can have), and a shared rule is revoked only
//! when no Network Load Balancer in the VPC needs it any more: its
//! target groups' ports and health-check ports and its subnets, read when
//! a load balancer is deleted and the group holds shared rules.

use std::collections::{BTreeMap, BTreeSet};

use aws_sdk_elasticloadbalancingv2::types::{LoadBalancer, ProtocolEnum};
use ccm_cloud_provider::CloudError;
use ccm_cloud_provider::ipnet::IpNet;

use super::{CLIENT_RULE_PREFIX, HEALTH_RULE_PREFIX, Rule};
use crate::instances::lookup::filter;
use crate::load_balancer::naming::{client_rule, health_rule};
use crate::provider::Cloud;

/// What stands for the load balancer's name in a shared rule's description.
const SHARED: &str = "(shared)";

/// The description a rule described `found` gets once the load balancer
/// whose rule would be described `wanted` needs it too: shared, of the
/// kind `wanted` is. `None` when `found` is no load balancer's (a user's
/// rule, or shared already): it stays as it is.
pub(super) fn share(found: &str, wanted: &str) -> Option<String> {
    let one_load_balancers = |d: &str| {
        (d.starts_with(CLIENT_RULE_PREFIX) || d.starts_with(HEALTH_RULE_PREFIX)) && !is_shared(d)
    };
    if !one_load_balancers(found) {
        return None;
    }
    if wanted.starts_with(HEALTH_RULE_PREFIX) {
        Some(health_rule(SHARED))
    } else if wanted.starts_with(CLIENT_RULE_PREFIX) {
        Some(client_rule(SHARED))
    } else {
        None
    }
}

/// Whether the rule is described as shared.
pub(super) fn is_shared(description: &str) -> bool {
    description == health_rule(SHARED) || description == client_rule(SHARED)
}

/// What the Network Load Balancers of a VPC let in: their health checks
/// (port, from each subnet) and their clients (protocol and node port).
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Needs {
    pub(super) health: BTreeSet<(i32, IpNet)>,
    pub(super) client: BTreeSet<(String, i32)>,
}

/// The shared rules among `existing` that nothing in `needs` needs.
pub(super) fn unneeded(existing: &[Rule], needs: &Needs) -> BTreeSet<Rule> {
    existing
        .iter()
        .filter(|r| {
            if r.description == health_rule(SHARED) {
                !needs.health.contains(&(r.from_port, r.cidr))
            } else if r.description == client_rule(SHARED) {
                !needs.client.contains(&(r.protocol.clone(), r.from_port))
            } else {
                false
            }
        })
        .cloned()
        .collect()
}

fn protocols(protocol: Option<&ProtocolEnum>) -> &'static [&'static str] {
    match protocol {
        Some(ProtocolEnum::Udp) => &["udp"],
        Some(ProtocolEnum::TcpUdp) => &["tcp", "udp"],
        _ => &["tcp"],
    }
}

impl Cloud {
    /// What the Network Load Balancers in `vpc_id` other than `excluding`
    /// need: all load balancers, all target groups and the load balancers'
    /// subnets, three reads made only when a group holds shared rules.
    pub(super) async fn shared_rule_needs(
        &self,
        vpc_id: Option<&str>,
        excluding: &str,
    ) -> Result<Needs, CloudError> {
        let lbs: Vec<LoadBalancer> = self
            .network_load_balancers()
            .await?
            .into_iter()
            .filter(|lb| vpc_id.is_none_or(|v| lb.vpc_id() == Some(v)))
            .filter(|lb| lb.load_balancer_name() != Some(excluding))
            .collect();
        let mut needs = Needs::default();
        if lbs.is_empty() {
            return Ok(needs);
        }
        let subnet_ids: BTreeSet<&str> = lbs
            .iter()
            .flat_map(|lb| lb.availability_zones())
            .filter_map(|z| z.subnet_id())
            .collect();
        let ids: Vec<&str> = subnet_ids.into_iter().collect();
        let subnets = self
            .describe_subnets(vec![filter("subnet-id", &ids)])
            .await?;
        let cidr_of: BTreeMap<&str, IpNet> = subnets
            .iter()
            .filter_map(|s| Some((s.subnet_id()?, s.cidr_block()?.parse().ok()?)))
            .collect();
        let cidrs_by_arn: BTreeMap<&str, Vec<IpNet>> = lbs
            .iter()
            .filter_map(|lb| {
                let cidrs = lb
                    .availability_zones()
                    .iter()
                    .filter_map(|z| z.subnet_id().and_then(|id| cidr_of.get(id)).copied())
                    .collect();
                Some((lb.load_balancer_arn()?, cidrs))
            })
            .collect();
        for group in self.describe_target_groups(None, None).await? {
            let cidrs: Vec<IpNet> = group
                .load_balancer_arns()
                .iter()
                .filter_map(|arn| cidrs_by_arn.get(arn.as_str()))
                .flatten()
                .copied()
                .collect();
            let Some(port) = group.port() else { continue };
            if cidrs.is_empty() {
                continue;
            }
            let health_port = match group.health_check_port() {
                None | Some("traffic-port") => port,
                Some(p) => p.parse().unwrap_or(port),
            };
            needs
                .health
                .extend(cidrs.iter().map(|cidr| (health_port, *cidr)));
            needs.client.extend(
                protocols(group.protocol())
                    .iter()
                    .map(|p| ((*p).to_owned(), port)),
            );
        }
        Ok(needs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn net(s: &str) -> IpNet {
        s.parse().expect("cidr")
    }

    #[test]
    fn another_load_balancers_rule_becomes_shared_and_a_users_rule_stays_theirs() {
        let health_a1 = health_rule("a1");
        let health_b2 = health_rule("b2");
        assert_eq!(
            share(&health_a1, &health_b2).as_deref(),
            Some("kubernetes.io/rule/nlb/health=(shared)")
        );
        assert_eq!(
            share(&client_rule("a1"), &client_rule("b2")).as_deref(),
            Some("kubernetes.io/rule/nlb/client=(shared)")
        );
        assert_eq!(share("ssh from the office", &health_b2), None);
        assert_eq!(
            share(&health_rule(SHARED), &health_b2),
            None,
            "shared already"
        );
    }

    #[test]
    fn a_shared_rule_goes_only_when_no_load_balancer_needs_it() {
        let health = Rule::port("tcp", 10256, net("10.0.1.0/24"), &health_rule(SHARED));
        let client = Rule::port("udp", 30053, net("0.0.0.0/0"), &client_rule(SHARED));
        let single = Rule::port("tcp", 10256, net("10.0.2.0/24"), &health_rule("a1"));
        let existing = [health.clone(), client.clone(), single];
        let needed = Needs {
            health: BTreeSet::from([(10256, net("10.0.1.0/24"))]),
            client: BTreeSet::from([("udp".to_owned(), 30053)]),
        };
        assert!(unneeded(&existing, &needed).is_empty());
        assert_eq!(
            unneeded(&existing, &Needs::default()),
            BTreeSet::from([health, client]),
            "a single load balancer's rule is that load balancer's to revoke"
        );
    }
}
