//! Adopting what cloud-provider-aws built: moto seeded with resources made
//! as upstream's code makes them (each fixture names the upstream function
//! it follows), then this provider asked for the same Service and routes.
//! It must find and keep them: no create, delete or other change when
//! nothing differs; and a Service deleted afterwards removes them.

use std::collections::BTreeMap;
use std::sync::Arc;

use aws_sdk_ec2::types::{IpPermission, IpRange};
use aws_sdk_elasticloadbalancingv2::types::{
    Action, ActionTypeEnum, LoadBalancerSchemeEnum, LoadBalancerTypeEnum, ProtocolEnum, Tag,
    TargetDescription, TargetTypeEnum,
};
use cloud_provider::{CloudProvider, Route, RouteCreate};
use provider_aws::test_util::proxy::Proxy;
use provider_aws::test_util::seed::{self, Estate};
use provider_aws::test_util::{
    CLUSTER, Moto, ec2, elbv2, ingress_rules, moto, nlb_service, provider_at,
};
use sha1::{Digest, Sha1};

const UID: &str = "6c1f0e2a-1b2c-4d3e-8f4a-5b6c7d8e9f00";
/// Upstream's `GetLoadBalancerName`: `a` and the UID without dashes, 32 long.
const LB_NAME: &str = "a6c1f0e2a1b2c4d3e8f4a5b6c7d8e9f0";
const PORT: i32 = 80;
const NODE_PORT: i32 = 30080;
const POD_CIDR: &str = "100.64.7.0/24";

/// Actions that change something in AWS.
fn is_change(action: &str) -> bool {
    [
        "Create",
        "Delete",
        "Register",
        "Deregister",
        "Authorize",
        "Revoke",
        "Modify",
        "Set",
        "Add",
        "Remove",
        "Replace",
        "Associate",
    ]
    .iter()
    .any(|verb| action.starts_with(verb))
}

fn changes(before: &BTreeMap<String, u64>, after: &BTreeMap<String, u64>) -> Vec<String> {
    after
        .iter()
        .filter(|(action, _)| is_change(action))
        .filter_map(|(action, n)| {
            let made = n - before.get(action).copied().unwrap_or(0);
            (made > 0).then(|| format!("{action} x{made}"))
        })
        .collect()
}

/// Upstream's `buildTargetGroupName` for a health check of `protocol`
/// every `interval` seconds: `k8s-{namespace:8}-{name:8}-{sha1:10}`.
fn upstream_target_group_name(protocol: &str, interval: &str) -> String {
    let mut hasher = Sha1::new();
    for part in [
        CLUSTER,
        "shop",
        "web",
        &PORT.to_string(),
        &NODE_PORT.to_string(),
        "TCP",
        "instance",
        protocol,
        interval,
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
fn upstream_tags() -> Vec<Tag> {
    [
        (format!("kubernetes.io/cluster/{CLUSTER}"), "owned"),
        ("kubernetes.io/service-name".to_owned(), "shop/web"),
    ]
    .into_iter()
    .map(|(k, v)| Tag::builder().key(k).value(v).build())
    .collect()
}

/// An internet-facing NLB with instance targets, as upstream's
/// `EnsureLoadBalancer` makes it in its default mode (no security group):
/// `ensureLoadBalancerv2` (one public subnet per zone), `createListenerV2`
/// and `ensureTargetGroup` (health check from
/// `buildNLBHealthCheckConfiguration`: TCP to the traffic port every 30 s,
/// thresholds 3), then `updateInstanceSecurityGroupsForNLB` (the client
/// rule, and with it `updateInstanceSecurityGroupForNLBMTU`'s ICMP rule).
async fn upstream_nlb(moto: &Moto, estate: &Estate) {
    let elbv2 = elbv2(moto);
    let lb = elbv2
        .create_load_balancer()
        .name(LB_NAME)
        .r#type(LoadBalancerTypeEnum::Network)
        .scheme(LoadBalancerSchemeEnum::InternetFacing)
        .set_subnets(Some(estate.public_subnets.clone()))
        .set_tags(Some(upstream_tags()))
        .send()
        .await
        .expect("load balancer created");
    let lb_arn = lb.load_balancers()[0]
        .load_balancer_arn()
        .expect("an ARN")
        .to_owned();
    let tg = elbv2
        .create_target_group()
        .name(upstream_target_group_name("TCP", "30"))
        .vpc_id(&estate.vpc)
        .port(NODE_PORT)
        .protocol(ProtocolEnum::Tcp)
        .target_type(TargetTypeEnum::Instance)
        .health_check_interval_seconds(30)
        .health_check_port("traffic-port")
        .health_check_protocol(ProtocolEnum::Tcp)
        .healthy_threshold_count(3)
        .unhealthy_threshold_count(3)
        .set_tags(Some(upstream_tags()))
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
        .set_tags(Some(upstream_tags()))
        .send()
        .await
        .expect("listener created");
    let range = |description: &str| {
        IpRange::builder()
            .cidr_ip("0.0.0.0/0")
            .description(description)
            .build()
    };
    ec2(moto)
        .authorize_security_group_ingress()
        .group_id(&estate.node_security_group)
        .ip_permissions(
            IpPermission::builder()
                .ip_protocol("tcp")
                .from_port(NODE_PORT)
                .to_port(NODE_PORT)
                .ip_ranges(range(&format!("kubernetes.io/rule/nlb/client={LB_NAME}")))
                .build(),
        )
        .ip_permissions(
            IpPermission::builder()
                .ip_protocol("icmp")
                .from_port(3)
                .to_port(4)
                .ip_ranges(range("kubernetes.io/rule/nlb/mtu"))
                .build(),
        )
        .send()
        .await
        .expect("node rules authorized");
}

/// A pod-CIDR route to the first instance, as upstream's `CreateRoute`
/// makes it: the route in the cluster's table, and the instance's
/// source/destination check off.
async fn upstream_route(moto: &Moto, estate: &Estate) {
    let ec2 = ec2(moto);
    let instance = &estate.instances[0];
    ec2.modify_instance_attribute()
        .instance_id(&instance.id)
        .source_dest_check(
            aws_sdk_ec2::types::AttributeBooleanValue::builder()
                .value(false)
                .build(),
        )
        .send()
        .await
        .expect("check turned off");
    ec2.create_route()
        .route_table_id(&estate.route_table)
        .destination_cidr_block(POD_CIDR)
        .instance_id(&instance.id)
        .send()
        .await
        .expect("route created");
}

async fn provider(proxy: &Proxy, estate: &Estate) -> Arc<dyn CloudProvider> {
    provider_at(&proxy.endpoint, CLUSTER, &format!("VPC = {}", estate.vpc)).await
}

#[tokio::test]
async fn an_nlb_upstream_made_is_adopted_without_a_change_and_deleted_with_its_service() {
    let moto = moto().await;
    let estate = seed::estate(&ec2(&moto), 2).await.expect("seeded");
    upstream_nlb(&moto, &estate).await;
    let rules_before = ingress_rules(&ec2(&moto), &estate.node_security_group)
        .await
        .expect("described");
    let proxy = Proxy::start(&moto.endpoint).await.expect("proxy");
    let provider = provider(&proxy, &estate).await;
    let lb = provider.load_balancer().expect("AWS has load balancers");
    let svc = nlb_service(UID, &[], &[(PORT, NODE_PORT)]);
    let nodes: Vec<_> = estate.instances.iter().map(seed::Seeded::node).collect();

    let before = proxy.actions();
    let ensured = lb
        .ensure_load_balancer(CLUSTER, &svc, &nodes)
        .await
        .expect("ensured");
    let after = proxy.actions();
    assert!(
        after.get("DescribeLoadBalancers") > before.get("DescribeLoadBalancers"),
        "the provider's calls went through the proxy: {after:?}"
    );
    assert_eq!(
        changes(&before, &after),
        Vec::<String>::new(),
        "calls: {after:?}"
    );
    assert!(
        !ensured.status.ingress.is_empty(),
        "the adopted load balancer's address is reported"
    );
    assert_eq!(
        ingress_rules(&ec2(&moto), &estate.node_security_group)
            .await
            .expect("described"),
        rules_before,
        "the node rules stay as upstream made them"
    );

    lb.ensure_load_balancer_deleted(CLUSTER, &svc)
        .await
        .expect("deleted");
    let elbv2 = elbv2(&moto);
    let lbs = elbv2
        .describe_load_balancers()
        .send()
        .await
        .expect("described");
    assert!(lbs.load_balancers().is_empty(), "{lbs:?}");
    let tgs = elbv2
        .describe_target_groups()
        .send()
        .await
        .expect("described");
    assert!(tgs.target_groups().is_empty(), "{tgs:?}");
    let left = ingress_rules(&ec2(&moto), &estate.node_security_group)
        .await
        .expect("described");
    assert!(
        !left
            .iter()
            .any(|(_, _, _, _, d)| d.contains("kubernetes.io/rule/nlb/")),
        "{left:?}"
    );
}

#[tokio::test]
async fn a_route_upstream_made_is_listed_and_kept() {
    let moto = moto().await;
    let estate = seed::estate(&ec2(&moto), 2).await.expect("seeded");
    upstream_route(&moto, &estate).await;
    let proxy = Proxy::start(&moto.endpoint).await.expect("proxy");
    let provider = provider(&proxy, &estate).await;
    let routes = provider.routes().expect("AWS has routes");
    let listed = routes.list_routes(CLUSTER).await.expect("listed");
    let instance = &estate.instances[0];
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0].target_node, instance.private_dns_name);
    assert_eq!(listed[0].destination_cidr.to_string(), POD_CIDR);

    let before = proxy.actions();
    let wanted = RouteCreate {
        name_hint: "uid-0".to_owned(),
        route: Route {
            name: String::new(),
            target_node: instance.private_dns_name.clone(),
            target_provider_id: Some(instance.provider_id()),
            destination_cidr: POD_CIDR.parse().expect("cidr"),
            blackhole: false,
        },
    };
    let results = routes
        .create_routes(CLUSTER, &[wanted])
        .await
        .expect("tables read");
    assert!(results.iter().all(Result::is_ok), "{results:?}");
    let after = proxy.actions();
    assert!(
        after.get("DescribeRouteTables") > before.get("DescribeRouteTables"),
        "the batch read the tables through the proxy: {after:?}"
    );
    assert_eq!(
        changes(&before, &after),
        Vec::<String>::new(),
        "calls: {after:?}"
    );
}

/// Upstream's NLB for a Service with `externalTrafficPolicy: Local` and
/// Elastic IPs (`eip-allocations`): `ensureLoadBalancerv2` with one subnet
/// mapping per public subnet, `ensureTargetGroup` with the Local health
/// check of `buildNLBHealthCheckConfiguration` (HTTP `/healthz` on the
/// health check node port, every 10 s, thresholds 2), and
/// `updateInstanceSecurityGroupsForNLB`'s three rules: the health check
/// from the load balancer's subnets, the clients, and ICMP for MTU
/// discovery.
async fn upstream_local_nlb_with_eips(
    moto: &Moto,
    estate: &Estate,
    eips: &[String],
    health_port: i32,
) {
    let elbv2 = elbv2(moto);
    let mappings = estate
        .public_subnets
        .iter()
        .zip(eips)
        .map(|(subnet, eip)| {
            aws_sdk_elasticloadbalancingv2::types::SubnetMapping::builder()
                .subnet_id(subnet)
                .allocation_id(eip)
                .build()
        })
        .collect();
    let lb = elbv2
        .create_load_balancer()
        .name(LB_NAME)
        .r#type(LoadBalancerTypeEnum::Network)
        .scheme(LoadBalancerSchemeEnum::InternetFacing)
        .set_subnet_mappings(Some(mappings))
        .set_tags(Some(upstream_tags()))
        .send()
        .await
        .expect("load balancer created");
    let lb_arn = lb.load_balancers()[0]
        .load_balancer_arn()
        .expect("an ARN")
        .to_owned();
    let tg = elbv2
        .create_target_group()
        .name(upstream_target_group_name("HTTP", "10"))
        .vpc_id(&estate.vpc)
        .port(NODE_PORT)
        .protocol(ProtocolEnum::Tcp)
        .target_type(TargetTypeEnum::Instance)
        .health_check_interval_seconds(10)
        .health_check_port(health_port.to_string())
        .health_check_protocol(ProtocolEnum::Http)
        .health_check_path("/healthz")
        .healthy_threshold_count(2)
        .unhealthy_threshold_count(2)
        .set_tags(Some(upstream_tags()))
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
        .set_tags(Some(upstream_tags()))
        .send()
        .await
        .expect("listener created");
    let subnets = ec2(moto)
        .describe_subnets()
        .set_subnet_ids(Some(estate.public_subnets.clone()))
        .send()
        .await
        .expect("described");
    let health = format!("kubernetes.io/rule/nlb/health={LB_NAME}");
    let health_ranges: Vec<IpRange> = subnets
        .subnets()
        .iter()
        .filter_map(|s| s.cidr_block())
        .map(|cidr| {
            IpRange::builder()
                .cidr_ip(cidr)
                .description(&health)
                .build()
        })
        .collect();
    let anywhere = |description: &str| {
        IpRange::builder()
            .cidr_ip("0.0.0.0/0")
            .description(description)
            .build()
    };
    ec2(moto)
        .authorize_security_group_ingress()
        .group_id(&estate.node_security_group)
        .ip_permissions(
            IpPermission::builder()
                .ip_protocol("tcp")
                .from_port(health_port)
                .to_port(health_port)
                .set_ip_ranges(Some(health_ranges))
                .build(),
        )
        .ip_permissions(
            IpPermission::builder()
                .ip_protocol("tcp")
                .from_port(NODE_PORT)
                .to_port(NODE_PORT)
                .ip_ranges(anywhere(&format!(
                    "kubernetes.io/rule/nlb/client={LB_NAME}"
                )))
                .build(),
        )
        .ip_permissions(
            IpPermission::builder()
                .ip_protocol("icmp")
                .from_port(3)
                .to_port(4)
                .ip_ranges(anywhere("kubernetes.io/rule/nlb/mtu"))
                .build(),
        )
        .send()
        .await
        .expect("node rules authorized");
}

#[tokio::test]
async fn a_local_nlb_with_elastic_ips_upstream_made_is_adopted_without_a_change() {
    const HEALTH_PORT: i32 = 32123;
    let moto = moto().await;
    let estate = seed::estate(&ec2(&moto), 2).await.expect("seeded");
    let mut eips = Vec::new();
    for _ in &estate.public_subnets {
        let eip = ec2(&moto)
            .allocate_address()
            .domain(aws_sdk_ec2::types::DomainType::Vpc)
            .send()
            .await
            .expect("allocated");
        eips.push(eip.allocation_id().expect("an allocation ID").to_owned());
    }
    upstream_local_nlb_with_eips(&moto, &estate, &eips, HEALTH_PORT).await;
    let rules_before = ingress_rules(&ec2(&moto), &estate.node_security_group)
        .await
        .expect("described");
    let proxy = Proxy::start(&moto.endpoint).await.expect("proxy");
    let provider = provider(&proxy, &estate).await;
    let lb = provider.load_balancer().expect("AWS has load balancers");
    let allocations = eips.join(",");
    let mut svc = nlb_service(
        UID,
        &[(provider_aws::annotations::EIP_ALLOCATIONS, &allocations)],
        &[(PORT, NODE_PORT)],
    );
    let spec = svc.spec.as_mut().expect("spec");
    spec.external_traffic_policy = Some("Local".into());
    spec.health_check_node_port = Some(HEALTH_PORT);
    let nodes: Vec<_> = estate.instances.iter().map(seed::Seeded::node).collect();

    let before = proxy.actions();
    lb.ensure_load_balancer(CLUSTER, &svc, &nodes)
        .await
        .expect("ensured");
    let after = proxy.actions();
    assert!(
        after.get("DescribeTargetGroups") > before.get("DescribeTargetGroups")
            || after.get("DescribeListeners") > before.get("DescribeListeners"),
        "the provider read what exists through the proxy: {after:?}"
    );
    assert_eq!(
        changes(&before, &after),
        Vec::<String>::new(),
        "calls: {after:?}"
    );
    assert_eq!(
        ingress_rules(&ec2(&moto), &estate.node_security_group)
            .await
            .expect("described"),
        rules_before,
        "the node rules stay as upstream made them"
    );
}
