//! Resources made as cloud-provider-aws makes them, for the adoption
//! tests: each function names the upstream code it follows.

use aws_sdk_ec2::types::{
    AttributeBooleanValue, IpPermission, IpRange, ResourceType, TagSpecification,
};
use aws_sdk_elasticloadbalancingv2::types::{
    Action, ActionTypeEnum, LoadBalancerSchemeEnum, LoadBalancerTypeEnum, ProtocolEnum,
    SubnetMapping, Tag, TargetDescription, TargetTypeEnum,
};
use ccm_provider_aws::test_util::seed::Estate;
use ccm_provider_aws::test_util::{CLUSTER, Moto, ec2, elbv2};
use sha1::{Digest, Sha1};
use sha2::Sha256;

/// Upstream's `GetLoadBalancerName` of [`UID`]: `a` and the UID without
/// dashes, 32 long.
pub(crate) const LB_NAME: &str = "a6c1f0e2a1b2c4d3e8f4a5b6c7d8e9f0";
pub(crate) const UID: &str = "6c1f0e2a-1b2c-4d3e-8f4a-5b6c7d8e9f00";
pub(crate) const PORT: i32 = 80;
pub(crate) const NODE_PORT: i32 = 30080;

/// A target group's health check, as `buildNLBHealthCheckConfiguration`
/// gives it.
pub(crate) struct Health {
    pub(crate) protocol: ProtocolEnum,
    /// `traffic-port` or a number.
    pub(crate) port: String,
    pub(crate) path: Option<&'static str>,
    pub(crate) interval: i32,
    pub(crate) threshold: i32,
}

impl Health {
    /// The default: TCP to the traffic port every 30 s, thresholds 3.
    pub(crate) fn cluster() -> Self {
        Self {
            protocol: ProtocolEnum::Tcp,
            port: "traffic-port".to_owned(),
            path: None,
            interval: 30,
            threshold: 3,
        }
    }

    /// `externalTrafficPolicy: Local`: HTTP `/healthz` on the health check
    /// node port every 10 s, thresholds 2.
    pub(crate) fn local(port: i32) -> Self {
        Self {
            protocol: ProtocolEnum::Http,
            port: port.to_string(),
            path: Some("/healthz"),
            interval: 10,
            threshold: 2,
        }
    }
}

/// What the NLB is made with.
pub(crate) struct Nlb {
    pub(crate) scheme: LoadBalancerSchemeEnum,
    /// One per zone; with an Elastic IP or private address when given.
    pub(crate) subnets: Vec<SubnetMapping>,
    pub(crate) health: Health,
    /// The node security group's rules for it.
    pub(crate) rules: Vec<IpPermission>,
    /// The load balancer's own: none, as upstream's default mode makes it,
    /// or its [`managed_group`].
    pub(crate) security_groups: Vec<String>,
}

/// Upstream's `buildTargetGroupName`: `k8s-{namespace:8}-{name:8}-{sha1:10}`.
fn target_group_name(health: &Health) -> String {
    let mut hasher = Sha1::new();
    for part in [
        CLUSTER,
        "shop",
        "web",
        &PORT.to_string(),
        &NODE_PORT.to_string(),
        "TCP",
        "instance",
        health.protocol.as_str(),
        &health.interval.to_string(),
    ] {
        hasher.update(part.as_bytes());
    }
    let hash: String = hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("k8s-shop-web-{}", &hash[..10])
}

/// The tags upstream gives a Service's load balancer, target groups and
/// listeners (`ensureLoadBalancerv2`, `ensureTargetGroup`,
/// `createListenerV2`).
fn tags() -> Vec<Tag> {
    [
        (format!("kubernetes.io/cluster/{CLUSTER}"), "owned"),
        ("kubernetes.io/service-name".to_owned(), "shop/web"),
    ]
    .into_iter()
    .map(|(k, v)| Tag::builder().key(k).value(v).build())
    .collect()
}

/// An ingress permission of one range.
pub(crate) fn rule(
    protocol: &str,
    from: i32,
    to: i32,
    cidr: &str,
    description: &str,
) -> IpPermission {
    IpPermission::builder()
        .ip_protocol(protocol)
        .from_port(from)
        .to_port(to)
        .ip_ranges(
            IpRange::builder()
                .cidr_ip(cidr)
                .description(description)
                .build(),
        )
        .build()
}

/// `kubernetes.io/rule/nlb/client=<name>` for the node port from `cidr`,
/// and `updateInstanceSecurityGroupForNLBMTU`'s ICMP rule with it.
pub(crate) fn client_rules(cidr: &str) -> Vec<IpPermission> {
    vec![
        rule(
            "tcp",
            NODE_PORT,
            NODE_PORT,
            cidr,
            &format!("kubernetes.io/rule/nlb/client={LB_NAME}"),
        ),
        rule("icmp", 3, 4, cidr, "kubernetes.io/rule/nlb/mtu"),
    ]
}

/// `kubernetes.io/rule/nlb/health=<name>` for `port` from each of `cidrs`
/// (the load balancer's subnets).
pub(crate) fn health_rules(port: i32, cidrs: &[String]) -> Vec<IpPermission> {
    let description = format!("kubernetes.io/rule/nlb/health={LB_NAME}");
    cidrs
        .iter()
        .map(|cidr| rule("tcp", port, port, cidr, &description))
        .collect()
}

/// The security group upstream's `NLBSecurityGroupMode = Managed` makes for
/// the NLB of Service `shop/web`: `ensureNLBSecurityGroup` (named by
/// `GetSecurityGroupNameForNLB`, described as `[k8s] Managed SecurityGroup
/// for LoadBalancer`, tagged by `buildTags` with the cluster tag alone),
/// then `ensureNLBSecurityGroupRules` and `createSecurityGroupRules`: the
/// listener port and ICMP type 3 code 4, each one permission with every
/// source range, without descriptions. Returns the group.
pub(crate) async fn managed_group(moto: &Moto, estate: &Estate, ranges: &[&str]) -> String {
    let mut hasher = Sha256::new();
    for part in [CLUSTER, "web", "shop", UID] {
        hasher.update(part.as_bytes());
    }
    let hash: String = hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let ec2 = ec2(moto);
    let group = ec2
        .create_security_group()
        .group_name(format!("k8s-shop-web-{}", &hash[..10]))
        .description("[k8s] Managed SecurityGroup for LoadBalancer")
        .vpc_id(&estate.vpc)
        .tag_specifications(
            TagSpecification::builder()
                .resource_type(ResourceType::SecurityGroup)
                .tags(
                    aws_sdk_ec2::types::Tag::builder()
                        .key(format!("kubernetes.io/cluster/{CLUSTER}"))
                        .value("owned")
                        .build(),
                )
                .build(),
        )
        .send()
        .await
        .expect("group created")
        .group_id()
        .expect("an ID")
        .to_owned();
    let from = |protocol: &str, from: i32, to: i32| {
        let mut p = IpPermission::builder()
            .ip_protocol(protocol)
            .from_port(from)
            .to_port(to);
        for range in ranges {
            p = p.ip_ranges(IpRange::builder().cidr_ip(*range).build());
        }
        p.build()
    };
    ec2.authorize_security_group_ingress()
        .group_id(&group)
        .ip_permissions(from("tcp", PORT, PORT))
        .ip_permissions(from("icmp", 3, 4))
        .send()
        .await
        .expect("group rules");
    group
}

/// The NLB of Service `shop/web` (port 80 to node port 30080 on every
/// seeded instance), as upstream's `EnsureLoadBalancer` makes it, with the
/// security groups `made` names: `ensureLoadBalancerv2`,
/// `createListenerV2`, `ensureTargetGroup` and
/// `updateInstanceSecurityGroupsForNLB`.
pub(crate) async fn nlb(moto: &Moto, estate: &Estate, made: Nlb) {
    let elbv2 = elbv2(moto);
    let lb = elbv2
        .create_load_balancer()
        .name(LB_NAME)
        .r#type(LoadBalancerTypeEnum::Network)
        .scheme(made.scheme)
        .set_subnet_mappings(Some(made.subnets))
        .set_security_groups((!made.security_groups.is_empty()).then_some(made.security_groups))
        .set_tags(Some(tags()))
        .send()
        .await
        .expect("load balancer created");
    let lb_arn = lb.load_balancers()[0]
        .load_balancer_arn()
        .expect("an ARN")
        .to_owned();
    let health = &made.health;
    let tg = elbv2
        .create_target_group()
        .name(target_group_name(health))
        .vpc_id(&estate.vpc)
        .port(NODE_PORT)
        .protocol(ProtocolEnum::Tcp)
        .target_type(TargetTypeEnum::Instance)
        .health_check_interval_seconds(health.interval)
        .health_check_port(&health.port)
        .health_check_protocol(health.protocol.clone())
        .set_health_check_path(health.path.map(str::to_owned))
        .healthy_threshold_count(health.threshold)
        .unhealthy_threshold_count(health.threshold)
        .set_tags(Some(tags()))
        .send()
        .await
        .expect("target group created");
    let tg_arn = tg.target_groups()[0]
        .target_group_arn()
        .expect("an ARN")
        .to_owned();
    let targets: Vec<TargetDescription> = estate
        .instances
        .iter()
        .map(|i| {
            TargetDescription::builder()
                .id(&i.id)
                .port(NODE_PORT)
                .build()
        })
        .collect();
    elbv2
        .register_targets()
        .target_group_arn(&tg_arn)
        .set_targets(Some(targets))
        .send()
        .await
        .expect("targets registered");
    elbv2
        .create_listener()
        .load_balancer_arn(&lb_arn)
        .port(PORT)
        .protocol(ProtocolEnum::Tcp)
        .default_actions(
            Action::builder()
                .r#type(ActionTypeEnum::Forward)
                .target_group_arn(&tg_arn)
                .build(),
        )
        .set_tags(Some(tags()))
        .send()
        .await
        .expect("listener created");
    ec2(moto)
        .authorize_security_group_ingress()
        .group_id(&estate.node_security_group)
        .set_ip_permissions(Some(made.rules))
        .send()
        .await
        .expect("node rules authorized");
}

/// A pod-CIDR route to the first instance, as upstream's `CreateRoute`
/// makes it: the instance's source/destination check off, and the route in
/// the cluster's table.
pub(crate) async fn route(moto: &Moto, estate: &Estate, cidr: &str) {
    let ec2 = ec2(moto);
    let instance = &estate.instances[0];
    ec2.modify_instance_attribute()
        .instance_id(&instance.id)
        .source_dest_check(AttributeBooleanValue::builder().value(false).build())
        .send()
        .await
        .expect("check turned off");
    ec2.create_route()
        .route_table_id(&estate.route_table)
        .destination_cidr_block(cidr)
        .instance_id(&instance.id)
        .send()
        .await
        .expect("route created");
}

/// The classic ELB of Service `shop/web` (port 80 to node port 30080 on
/// every seeded instance), as upstream's `EnsureLoadBalancer` makes it for
/// a Service without a type: `buildELBSecurityGroupList` with
/// `createSecurityGroup` (`k8s-elb-<name>`, tagged by `buildTags`),
/// `createSecurityGroupRules` (the port and ICMP 3/4 from anywhere),
/// `ensureLoadBalancer` (created with `buildListener`'s TCP listener,
/// tagged, then its default attributes), `ensureLoadBalancerHealthCheck`
/// (`TCP:30080`, 2/6/5/10), `updateInstanceSecurityGroupsForLoadBalancer`
/// and `ensureLoadBalancerInstances`. Returns the ELB's group.
pub(crate) async fn classic(moto: &Moto, estate: &Estate) -> String {
    use aws_sdk_elasticloadbalancing::types as elb_types;

    let ec2 = ec2(moto);
    let group = ec2
        .create_security_group()
        .group_name(format!("k8s-elb-{LB_NAME}"))
        .description(format!(
            "Security group for Kubernetes ELB {LB_NAME} (shop/web)"
        ))
        .vpc_id(&estate.vpc)
        .send()
        .await
        .expect("group created")
        .group_id()
        .expect("an ID")
        .to_owned();
    ec2.create_tags()
        .resources(&group)
        .tags(
            aws_sdk_ec2::types::Tag::builder()
                .key(format!("kubernetes.io/cluster/{CLUSTER}"))
                .value("owned")
                .build(),
        )
        .send()
        .await
        .expect("group tagged");
    ec2.authorize_security_group_ingress()
        .group_id(&group)
        .ip_permissions(
            IpPermission::builder()
                .ip_protocol("tcp")
                .from_port(PORT)
                .to_port(PORT)
                .ip_ranges(IpRange::builder().cidr_ip("0.0.0.0/0").build())
                .build(),
        )
        .ip_permissions(
            IpPermission::builder()
                .ip_protocol("icmp")
                .from_port(3)
                .to_port(4)
                .ip_ranges(IpRange::builder().cidr_ip("0.0.0.0/0").build())
                .build(),
        )
        .send()
        .await
        .expect("group rules");

    let elb = ccm_provider_aws::test_util::elb(moto);
    let mut create = elb
        .create_load_balancer()
        .load_balancer_name(LB_NAME)
        .listeners(
            elb_types::Listener::builder()
                .protocol("tcp")
                .load_balancer_port(PORT)
                .instance_protocol("tcp")
                .instance_port(NODE_PORT)
                .build()
                .expect("a listener"),
        )
        .set_subnets(Some(estate.public_subnets.clone()))
        .security_groups(&group);
    for (k, v) in [
        (format!("kubernetes.io/cluster/{CLUSTER}"), "owned"),
        ("kubernetes.io/service-name".to_owned(), "shop/web"),
    ] {
        create = create.tags(
            elb_types::Tag::builder()
                .key(k)
                .value(v)
                .build()
                .expect("a tag"),
        );
    }
    create.send().await.expect("ELB created");
    elb.modify_load_balancer_attributes()
        .load_balancer_name(LB_NAME)
        .load_balancer_attributes(
            elb_types::LoadBalancerAttributes::builder()
                .access_log(elb_types::AccessLog::builder().enabled(false).build())
                .connection_draining(
                    elb_types::ConnectionDraining::builder()
                        .enabled(false)
                        .build(),
                )
                .connection_settings(
                    elb_types::ConnectionSettings::builder()
                        .idle_timeout(60)
                        .build()
                        .expect("settings"),
                )
                .cross_zone_load_balancing(
                    elb_types::CrossZoneLoadBalancing::builder()
                        .enabled(false)
                        .build(),
                )
                .build(),
        )
        .send()
        .await
        .expect("attributes");
    elb.configure_health_check()
        .load_balancer_name(LB_NAME)
        .health_check(
            elb_types::HealthCheck::builder()
                .target(format!("TCP:{NODE_PORT}"))
                .healthy_threshold(2)
                .unhealthy_threshold(6)
                .timeout(5)
                .interval(10)
                .build()
                .expect("a health check"),
        )
        .send()
        .await
        .expect("health check");
    ec2.authorize_security_group_ingress()
        .group_id(&estate.node_security_group)
        .ip_permissions(
            IpPermission::builder()
                .ip_protocol("-1")
                .user_id_group_pairs(
                    aws_sdk_ec2::types::UserIdGroupPair::builder()
                        .group_id(&group)
                        .build(),
                )
                .build(),
        )
        .send()
        .await
        .expect("node rule");
    let mut register = elb
        .register_instances_with_load_balancer()
        .load_balancer_name(LB_NAME);
    for i in &estate.instances {
        register = register.instances(elb_types::Instance::builder().instance_id(&i.id).build());
    }
    register.send().await.expect("registered");
    group
}
