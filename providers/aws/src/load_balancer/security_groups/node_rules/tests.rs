//! The node security-group rules a load balancer needs, for each scheme,
//! source range and health-check port.

use std::collections::BTreeMap;

use aws_sdk_ec2::types::GroupIdentifier;

use super::*;
use crate::load_balancer::spec::{HealthCheck, PortMapping, ServiceRef};

fn net(s: &str) -> IpNet {
    s.parse().expect("cidr")
}

fn spec(internal: bool, sources: &[&str], health: HealthCheckPort) -> LoadBalancerSpec {
    LoadBalancerSpec {
        svc: ServiceRef {
            key: "shop/web".into(),
            namespace: "shop".into(),
            name: "web".into(),
            uid: "u".into(),
            load_balancer_name: "a1".into(),
        },
        internal,
        subnets: None,
        eip_allocations: None,
        private_ipv4_addresses: None,
        ip_address_type: IpAddressType::Ipv4,
        cross_zone: false,
        proxy_protocol: false,
        target_group_attributes: BTreeMap::new(),
        security_groups: Default::default(),
        additional_tags: BTreeMap::new(),
        target_node_labels: BTreeMap::new(),
        source_ranges: sources.iter().map(|s| net(s)).collect(),
        health_check: HealthCheck {
            protocol: ProtocolEnum::Tcp,
            port: health,
            path: None,
            interval: 30,
            timeout: None,
            healthy_threshold: 3,
            unhealthy_threshold: 3,
        },
        ports: vec![PortMapping {
            port: 80,
            name: None,
            listener_protocol: ProtocolEnum::Tcp,
            node_port: 30080,
            target_protocol: ProtocolEnum::Tcp,
            certificate_arn: None,
            ssl_policy: None,
        }],
    }
}

const VPC: &str = "10.0.0.0/16";
const SUBNET: &str = "10.0.1.0/24";

#[test]
fn clients_come_from_source_ranges_or_the_vpc_or_anywhere() {
    let vpc = [net(VPC)];
    assert_eq!(
        client_cidrs(
            &spec(false, &["203.0.113.0/24"], HealthCheckPort::TrafficPort),
            &vpc
        ),
        [net("203.0.113.0/24")]
    );
    assert_eq!(
        client_cidrs(&spec(true, &[], HealthCheckPort::TrafficPort), &vpc),
        vpc
    );
    assert_eq!(
        client_cidrs(&spec(false, &[], HealthCheckPort::TrafficPort), &vpc),
        [net("0.0.0.0/0")]
    );
    let mut dual = spec(false, &[], HealthCheckPort::TrafficPort);
    dual.ip_address_type = IpAddressType::Dualstack;
    assert_eq!(client_cidrs(&dual, &vpc), [net("0.0.0.0/0"), net("::/0")]);
}

#[test]
fn an_open_tcp_service_needs_no_separate_health_rule() {
    let rules = desired_rules(
        &spec(false, &[], HealthCheckPort::TrafficPort),
        &[net(VPC)],
        &[net(SUBNET)],
    );
    assert_eq!(
        rules.into_iter().collect::<Vec<_>>(),
        [Rule::port(
            "tcp",
            30080,
            net("0.0.0.0/0"),
            "kubernetes.io/rule/nlb/client=a1"
        )]
    );
}

#[test]
fn restricted_clients_get_a_health_rule_from_the_subnets_on_the_health_port() {
    let rules = desired_rules(
        &spec(false, &["203.0.113.0/24"], HealthCheckPort::Port(32000)),
        &[net(VPC)],
        &[net(SUBNET)],
    );
    let want = BTreeSet::from([
        Rule::port(
            "tcp",
            30080,
            net("203.0.113.0/24"),
            "kubernetes.io/rule/nlb/client=a1",
        ),
        Rule::port(
            "tcp",
            32000,
            net(SUBNET),
            "kubernetes.io/rule/nlb/health=a1",
        ),
    ]);
    assert_eq!(rules, want);
}

#[test]
fn plan_adds_missing_rules_and_the_mtu_rule_for_each_client_range() {
    let desired = desired_rules(
        &spec(false, &["203.0.113.0/24"], HealthCheckPort::TrafficPort),
        &[net(VPC)],
        &[net(SUBNET)],
    );
    let changes = plan(&[], &desired, "a1");
    assert!(changes.revoke.is_empty());
    assert!(desired.is_subset(&changes.grant));
    let mtu = Rule {
        protocol: "icmp".into(),
        from_port: 3,
        to_port: 4,
        cidr: net("203.0.113.0/24"),
        description: MTU_RULE.into(),
    };
    assert!(changes.grant.contains(&mtu));
    assert_eq!(changes.grant.len(), desired.len() + 1);
}

#[test]
fn plan_is_empty_when_rules_are_in_place() {
    let desired = desired_rules(
        &spec(false, &["203.0.113.0/24"], HealthCheckPort::TrafficPort),
        &[net(VPC)],
        &[net(SUBNET)],
    );
    let first = plan(&[], &desired, "a1");
    let existing: Vec<Rule> = first.grant.into_iter().collect();
    assert_eq!(plan(&existing, &desired, "a1"), RuleChanges::default());
}

#[test]
fn removing_a_load_balancer_keeps_other_load_balancers_and_user_rules() {
    let other_client = Rule::port(
        "tcp",
        31000,
        net("198.51.100.0/24"),
        "kubernetes.io/rule/nlb/client=b2",
    );
    let ours = Rule::port(
        "tcp",
        30080,
        net("203.0.113.0/24"),
        "kubernetes.io/rule/nlb/client=a1",
    );
    let user = Rule::port("tcp", 22, net("192.0.2.0/24"), "ssh");
    let mtu = |cidr: &str| Rule {
        protocol: "icmp".into(),
        from_port: 3,
        to_port: 4,
        cidr: net(cidr),
        description: MTU_RULE.into(),
    };
    let existing = vec![
        other_client,
        ours.clone(),
        user,
        mtu("198.51.100.0/24"),
        mtu("203.0.113.0/24"),
    ];
    let changes = plan(&existing, &BTreeSet::new(), "a1");
    assert_eq!(
        changes.revoke,
        BTreeSet::from([ours, mtu("203.0.113.0/24")])
    );
    assert!(changes.grant.is_empty());
}

fn instance(groups: &[&str]) -> Instance {
    let mut b = Instance::builder().instance_id("i-1");
    for g in groups {
        b = b.security_groups(GroupIdentifier::builder().group_id(*g).build());
    }
    b.build()
}

#[test]
fn the_node_group_is_the_tagged_one_or_the_only_one() {
    let tagged = BTreeSet::from(["sg-tagged"]);
    assert_eq!(
        node_security_group(&instance(&["sg-a", "sg-tagged"]), &tagged).expect("one"),
        Some("sg-tagged")
    );
    assert_eq!(
        node_security_group(&instance(&["sg-only"]), &tagged).expect("one"),
        Some("sg-only")
    );
    assert_eq!(
        node_security_group(&instance(&[]), &tagged).expect("none"),
        None
    );
    assert!(node_security_group(&instance(&["sg-a", "sg-b"]), &tagged).is_err());
    let two_tagged = BTreeSet::from(["sg-a", "sg-b"]);
    assert!(node_security_group(&instance(&["sg-a", "sg-b"]), &two_tagged).is_err());
}

#[test]
fn a_rule_another_load_balancer_granted_is_described_as_shared_not_granted_again() {
    let theirs = Rule::port(
        "tcp",
        10256,
        net(SUBNET),
        "kubernetes.io/rule/nlb/health=b2",
    );
    let user = Rule::port("tcp", 10256, net("10.0.2.0/24"), "kube-proxy from the VPC");
    let desired = BTreeSet::from([
        Rule::port(
            "tcp",
            10256,
            net(SUBNET),
            "kubernetes.io/rule/nlb/health=a1",
        ),
        Rule::port(
            "tcp",
            10256,
            net("10.0.2.0/24"),
            "kubernetes.io/rule/nlb/health=a1",
        ),
    ]);
    let changes = plan(&[theirs.clone(), user], &desired, "a1");
    assert!(changes.grant.is_empty(), "{:?}", changes.grant);
    assert!(changes.revoke.is_empty(), "{:?}", changes.revoke);
    assert_eq!(
        changes.describe,
        BTreeSet::from([Rule {
            description: "kubernetes.io/rule/nlb/health=(shared)".into(),
            ..theirs
        }]),
        "the user's rule stays theirs"
    );
}

#[test]
fn a_load_balancer_never_shares_with_itself_or_revokes_a_shared_rule() {
    let client = Rule::port(
        "tcp",
        30080,
        net(SUBNET),
        "kubernetes.io/rule/nlb/client=a1",
    );
    let shared = Rule::port(
        "tcp",
        10256,
        net(SUBNET),
        "kubernetes.io/rule/nlb/health=(shared)",
    );
    // Its health rule would be the same rule as its own client rule.
    let desired = BTreeSet::from([
        client.clone(),
        Rule::port(
            "tcp",
            30080,
            net(SUBNET),
            "kubernetes.io/rule/nlb/health=a1",
        ),
    ]);
    let changes = plan(&[client, shared.clone()], &desired, "a1");
    assert!(changes.describe.is_empty() && changes.revoke.is_empty());
    let gone = plan(&[shared], &BTreeSet::new(), "a1");
    assert!(
        gone.revoke.is_empty(),
        "a shared rule goes only when nothing needs it"
    );
}
