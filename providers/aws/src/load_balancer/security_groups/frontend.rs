//! The load balancer's own security group, as upstream's managed mode
//! (`NLBSecurityGroupMode = Managed`, `ensureNLBSecurityGroup`) makes it:
//! named `k8s-{namespace:8}-{name:8}-{hash:10}`, attached when the load
//! balancer is created and deleted after it.
//!
//! Its ingress is upstream's (`ensureNLBSecurityGroupRules`,
//! `createSecurityGroupRules`), exactly: each listener port (`tcp`, or
//! `udp`) and ICMP type 3 code 4 ("fragmentation needed", for path MTU
//! discovery) from each source range, without descriptions. The source
//! ranges are `spec.loadBalancerSourceRanges`, else the
//! `service.beta.kubernetes.io/load-balancer-source-ranges` annotation,
//! else `0.0.0.0/0`, for internal and dual-stack load balancers too. Rules
//! are matched as upstream matches them, by protocol, ports and CIDR; any
//! other CIDR rule is revoked. Where upstream's rules cannot be made, this
//! differs: upstream sends an IPv6 range as an IPv4 CIDR and a TLS
//! listener's protocol as `tls`, which EC2 refuses; here an IPv6 range gets
//! the listener ports as IPv6 rules (and no ICMP, whose type 3 is IPv4's),
//! and a TLS listener's port is `tcp`.
//!
//! `ElbSecurityGroup` in the cloud config is not used: upstream reads it
//! for classic ELBs only. A load balancer created without security groups
//! keeps none: AWS cannot add them later. Outside the managed mode, an
//! existing load balancer keeps the groups it has, as upstream; its own
//! group among them is still kept in step.
//!
//! Upstream tags its group with the cluster tag alone: a group of the
//! Service's name owned by the cluster is adopted without
//! `kubernetes.io/service-name`, never with that tag naming another
//! Service.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use aws_sdk_ec2::types::{ResourceType, SecurityGroup, Tag, TagSpecification};
use aws_sdk_elasticloadbalancingv2::types::ProtocolEnum;
use ccm_cloud_provider::CloudError;
use ccm_cloud_provider::ipnet::IpNet;
use sha2::{Digest, Sha256};

use super::{Rule, RuleChanges, flatten};
use crate::api::planned_id;
use crate::instances::lookup::filter;
use crate::load_balancer::spec::{LoadBalancerSpec, ServiceRef};
use crate::provider::Cloud;
use crate::tagging::{ClusterTags, SERVICE_NAME_TAG, ec2_tags};

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

/// The source ranges of the managed group's rules: the Service's, else
/// `0.0.0.0/0` (upstream's `GetLoadBalancerSourceRanges`).
fn source_ranges(spec: &LoadBalancerSpec) -> Vec<IpNet> {
    if spec.source_ranges.is_empty() {
        vec![IpNet::V4(Default::default())]
    } else {
        spec.source_ranges.clone()
    }
}

/// The managed group's ingress: every listener port, and ICMP type 3 code
/// 4, from each source range.
pub(crate) fn frontend_rules(spec: &LoadBalancerSpec) -> BTreeSet<Rule> {
    let ranges = source_ranges(spec);
    let mut rules = BTreeSet::new();
    for port in &spec.ports {
        let protocol = if port.listener_protocol == ProtocolEnum::Udp {
            "udp"
        } else {
            "tcp"
        };
        for cidr in &ranges {
            rules.insert(Rule::port(protocol, port.port, *cidr, ""));
        }
    }
    for cidr in ranges.iter().filter(|c| matches!(c, IpNet::V4(_))) {
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

/// What EC2 and upstream's `ipPermissionExists` tell rules apart by:
/// protocol, ports and CIDR, not the description.
type RuleKey<'a> = (&'a str, i32, i32, IpNet);

fn key(rule: &Rule) -> RuleKey<'_> {
    (&rule.protocol, rule.from_port, rule.to_port, rule.cidr)
}

/// What makes `existing` exactly `desired`, as upstream's
/// `setSecurityGroupIngress`: a rule that differs only in its description
/// stays.
pub(crate) fn frontend_changes(existing: &[Rule], desired: &BTreeSet<Rule>) -> RuleChanges {
    let have: BTreeSet<RuleKey<'_>> = existing.iter().map(key).collect();
    let want: BTreeSet<RuleKey<'_>> = desired.iter().map(key).collect();
    RuleChanges {
        grant: desired
            .iter()
            .filter(|r| !have.contains(&key(r)))
            .cloned()
            .collect(),
        revoke: existing
            .iter()
            .filter(|r| !want.contains(&key(r)))
            .cloned()
            .collect(),
        ..RuleChanges::default()
    }
}

/// Whether `tags` make a group of the Service's managed-group name the
/// Service's: owned by the cluster, and naming no other Service (upstream
/// names none).
fn is_services_own(cluster: &ClusterTags, tags: &[Tag], service: &str) -> bool {
    cluster.is_owned(ec2_tags(tags))
        && ec2_tags(tags).all(|(k, v)| k != SERVICE_NAME_TAG || v == service)
}

impl Cloud {
    /// The groups the provider gives the Service's NLB before those the
    /// Service names ([`super::asked::AskedGroups::apply`]); `attached` is
    /// what an existing one has. As upstream's `ensureNLBSecurityGroup`:
    /// none when the Service names its own or the load balancer has none;
    /// for a new one, its own group in the managed mode and none otherwise;
    /// for an existing one in the managed mode, its own group. An existing
    /// one outside the managed mode keeps its groups, its own group among
    /// them kept in step.
    pub(crate) async fn chosen_security_groups(
        &self,
        cluster_name: &str,
        spec: &LoadBalancerSpec,
        attached: Option<&[String]>,
        vpc_id: &str,
        tags: &BTreeMap<String, String>,
    ) -> Result<Vec<String>, CloudError> {
        let managed = self.config.nlb_security_group_managed;
        if !spec.security_groups.instead.is_empty() {
            return Ok(Vec::new());
        }
        match attached {
            Some([]) => Ok(Vec::new()),
            None if !managed => Ok(Vec::new()),
            Some(attached) if !managed => {
                let name = security_group_name(cluster_name, &spec.svc);
                let own = self
                    .find_frontend_security_group(&name, vpc_id, &spec.svc)
                    .await?
                    .filter(|g| attached.iter().any(|a| Some(a.as_str()) == g.group_id()));
                match own {
                    Some(group) => Ok(vec![self.sync_frontend_rules(&group, spec).await?]),
                    None => Ok(attached
                        .iter()
                        .filter(|g| !spec.security_groups.extra.contains(g))
                        .cloned()
                        .collect()),
                }
            }
            _ => Ok(vec![
                self.ensure_frontend_security_group(cluster_name, spec, vpc_id, tags)
                    .await?,
            ]),
        }
    }

    /// The Service's security group, found by name or created, with exactly
    /// the ingress the listeners need.
    async fn ensure_frontend_security_group(
        &self,
        cluster_name: &str,
        spec: &LoadBalancerSpec,
        vpc_id: &str,
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
        self.sync_frontend_rules(&group, spec).await
    }

    /// Gives `group` exactly [`frontend_rules`]; answers its ID.
    async fn sync_frontend_rules(
        &self,
        group: &SecurityGroup,
        spec: &LoadBalancerSpec,
    ) -> Result<String, CloudError> {
        let id = group.group_id().unwrap_or_default().to_owned();
        let changes = frontend_changes(&flatten(group.ip_permissions()), &frontend_rules(spec));
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
        if !is_services_own(&self.tags, group.tags(), &svc.key) {
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
            .change("CreateSecurityGroup", || {
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
        // A dry run plans the group under a stand-in ID.
        let id = match &created {
            Some(created) => created.group_id().map(str::to_owned).ok_or_else(|| {
                CloudError::msg("CreateSecurityGroup answered without a group ID")
            })?,
            None => planned_id("security-group", name),
        };
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
        for id in self.owned_for_service(&groups, cluster_name, svc) {
            self.delete_security_group(id).await?;
            tracing::info!(group = id, service = %svc.key, "deleted load balancer security group");
        }
        Ok(())
    }

    /// Deletes the Service's own groups among `detached` (replaced by the
    /// ones it names). AWS may hold a group a moment after letting go of
    /// it: then it is left for the Service's deletion, which deletes its
    /// group by name, with a warning.
    pub(crate) async fn delete_detached_groups(
        &self,
        cluster_name: &str,
        svc: &ServiceRef,
        detached: &[&str],
    ) {
        let service = svc.key.as_str();
        if detached.is_empty() {
            return;
        }
        let groups: Vec<SecurityGroup> = match self
            .security_groups(vec![filter("group-id", detached)])
            .await
        {
            Ok(groups) => groups,
            Err(e) => {
                tracing::warn!(service, error = %e, "could not read the security groups the load balancer let go of");
                return;
            }
        };
        for id in self.owned_for_service(&groups, cluster_name, svc) {
            match self.delete_security_group(id).await {
                Ok(()) => {
                    tracing::info!(
                        group = id,
                        service,
                        "deleted the load balancer's own security group, replaced by the Service's"
                    );
                }
                Err(e) => {
                    tracing::warn!(group = id, service, error = %e, "the load balancer's own security group stays until the Service is deleted");
                }
            }
        }
    }

    /// The IDs of `groups` this cluster made for `svc`: tagged as the
    /// Service's, or (as upstream tags it) of the Service's managed-group
    /// name and the cluster's; never the config's `ElbSecurityGroup`.
    pub(crate) fn owned_for_service<'a>(
        &self,
        groups: &'a [SecurityGroup],
        cluster_name: &str,
        svc: &ServiceRef,
    ) -> BTreeSet<&'a str> {
        let own_name = security_group_name(cluster_name, svc);
        groups
            .iter()
            .filter(|g| {
                self.tags.is_owned_for_service(ec2_tags(g.tags()), &svc.key)
                    || (g.group_name() == Some(own_name.as_str())
                        && is_services_own(&self.tags, g.tags(), &svc.key))
            })
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
            .change("DeleteSecurityGroup", || {
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

    fn spec_of(annotations: &[(&str, &str)], ports: &[(i32, i32)]) -> LoadBalancerSpec {
        let svc = crate::test_util::nlb_service("u", annotations, ports);
        LoadBalancerSpec::under(&svc, None).expect("valid")
    }

    fn net(s: &str) -> IpNet {
        s.parse().expect("cidr")
    }

    fn rule(protocol: &str, from: i32, to: i32, cidr: &str) -> Rule {
        Rule {
            protocol: protocol.into(),
            from_port: from,
            to_port: to,
            cidr: net(cidr),
            description: String::new(),
        }
    }

    #[test]
    fn without_source_ranges_every_listener_port_and_icmp_come_from_anywhere() {
        use crate::annotations as key;
        // Internal and dual-stack change nothing: upstream's default range
        // is 0.0.0.0/0 alone.
        let spec = spec_of(
            &[(key::INTERNAL, "true"), (key::IP_ADDRESS_TYPE, "dualstack")],
            &[(80, 30080), (443, 30443)],
        );
        assert_eq!(
            frontend_rules(&spec),
            BTreeSet::from([
                rule("icmp", 3, 4, "0.0.0.0/0"),
                rule("tcp", 80, 80, "0.0.0.0/0"),
                rule("tcp", 443, 443, "0.0.0.0/0"),
            ])
        );
    }

    #[test]
    fn each_source_range_gets_the_ports_and_icmp_and_an_ipv6_range_no_icmp() {
        use crate::annotations as key;
        let mut svc = crate::test_util::nlb_service(
            "u",
            &[(key::SOURCE_RANGES, "192.0.2.0/24")],
            &[(53, 30053)],
        );
        let spec = svc.spec.as_mut().expect("spec");
        spec.load_balancer_source_ranges = Some(vec!["10.1.2.3/16".into(), "2001:db8::/32".into()]);
        for port in spec.ports.as_mut().expect("ports") {
            port.protocol = Some("UDP".into());
        }
        let spec = LoadBalancerSpec::under(&svc, None).expect("valid");
        assert_eq!(
            frontend_rules(&spec),
            BTreeSet::from([
                rule("icmp", 3, 4, "10.1.0.0/16"),
                rule("udp", 53, 53, "10.1.0.0/16"),
                rule("udp", 53, 53, "2001:db8::/32"),
            ]),
            "the spec's ranges, normalised, over the annotation's"
        );
        let from_annotation = spec_of(
            &[(key::SOURCE_RANGES, "192.0.2.0/24, 198.51.100.0/24")],
            &[(80, 30080)],
        );
        assert_eq!(
            frontend_rules(&from_annotation),
            BTreeSet::from([
                rule("icmp", 3, 4, "192.0.2.0/24"),
                rule("icmp", 3, 4, "198.51.100.0/24"),
                rule("tcp", 80, 80, "192.0.2.0/24"),
                rule("tcp", 80, 80, "198.51.100.0/24"),
            ])
        );
    }

    #[test]
    fn a_tls_listener_port_is_tcp() {
        use crate::annotations as key;
        let spec = spec_of(
            &[(
                key::SSL_CERT,
                "arn:aws:acm:us-east-1:123456789012:certificate/x",
            )],
            &[(443, 30443)],
        );
        assert_eq!(spec.ports[0].listener_protocol, ProtocolEnum::Tls);
        assert!(frontend_rules(&spec).contains(&rule("tcp", 443, 443, "0.0.0.0/0")));
    }

    #[test]
    fn rules_differing_only_in_description_stay_and_any_other_rule_goes() {
        let desired = BTreeSet::from([
            rule("tcp", 80, 80, "0.0.0.0/0"),
            rule("icmp", 3, 4, "0.0.0.0/0"),
        ]);
        let described = Rule {
            description: "a user's note".into(),
            ..rule("tcp", 80, 80, "0.0.0.0/0")
        };
        let existing = vec![
            described,
            rule("tcp", 8080, 8080, "0.0.0.0/0"),
            rule("tcp", 80, 80, "::/0"),
        ];
        let changes = frontend_changes(&existing, &desired);
        assert_eq!(
            changes.grant,
            BTreeSet::from([rule("icmp", 3, 4, "0.0.0.0/0")])
        );
        assert_eq!(
            changes.revoke,
            BTreeSet::from([
                rule("tcp", 8080, 8080, "0.0.0.0/0"),
                rule("tcp", 80, 80, "::/0")
            ])
        );
        assert!(changes.describe.is_empty());
        let exact: Vec<Rule> = desired.iter().cloned().collect();
        assert!(frontend_changes(&exact, &desired).is_empty());
    }

    #[test]
    fn a_group_upstream_tagged_with_the_cluster_alone_is_the_services_own() {
        let cluster = ClusterTags::new("kubernetes", false);
        let tag = |k: &str, v: &str| Tag::builder().key(k).value(v).build();
        let upstreams = [tag("kubernetes.io/cluster/kubernetes", "owned")];
        assert!(is_services_own(&cluster, &upstreams, "shop/web"));
        let ours = [
            tag("kubernetes.io/cluster/kubernetes", "owned"),
            tag(SERVICE_NAME_TAG, "shop/web"),
        ];
        assert!(is_services_own(&cluster, &ours, "shop/web"));
        let anothers = [
            tag("kubernetes.io/cluster/kubernetes", "owned"),
            tag(SERVICE_NAME_TAG, "shop/api"),
        ];
        assert!(!is_services_own(&cluster, &anothers, "shop/web"));
        let shared = [tag("kubernetes.io/cluster/kubernetes", "shared")];
        assert!(!is_services_own(&cluster, &shared, "shop/web"));
    }
}
