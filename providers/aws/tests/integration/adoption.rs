//! Adopting what cloud-provider-aws built: moto seeded with resources made
//! as upstream's code makes them ([`upstream`], each fixture naming the
//! upstream functions it follows), then this provider asked for the same
//! Service or routes through the counting proxy (a classic ELB, NLBs, a
//! route). It must find and keep
//! them: no create, delete or other change when nothing differs; and a
//! Service deleted afterwards removes them.

#[path = "adoption/upstream.rs"]
mod upstream;

#[path = "adoption/plan.rs"]
mod plan;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use aws_sdk_elasticloadbalancingv2::types::{LoadBalancerSchemeEnum, SubnetMapping};
use ccm_cloud_provider::k8s_openapi::api::core::v1::Service;
use ccm_cloud_provider::{CloudProvider, Route, RouteCreate};
use ccm_provider_aws::annotations as key;
use ccm_provider_aws::test_util::proxy::Proxy;
use ccm_provider_aws::test_util::seed::{self, Estate, VPC_CIDR};
use ccm_provider_aws::test_util::{
    CLUSTER, IngressRule, Moto, classic_service, ec2, elb, elbv2, ingress_rules, moto, nlb_service,
    provider_at, subnet_cidrs,
};
use upstream::{Health, NODE_PORT, Nlb, PORT, UID};

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

/// The changing calls made between two counts, with how many.
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

fn subnets(ids: &[String]) -> Vec<SubnetMapping> {
    ids.iter()
        .map(|id| SubnetMapping::builder().subnet_id(id).build())
        .collect()
}

async fn node_rules(moto: &Moto, estate: &Estate) -> BTreeSet<IngressRule> {
    ingress_rules(&ec2(moto), &estate.node_security_group)
        .await
        .expect("described")
}

/// The provider with `global` added to `[Global]`.
async fn provider(proxy: &Proxy, estate: &Estate, global: &str) -> Arc<dyn CloudProvider> {
    provider_at(
        &proxy.endpoint,
        CLUSTER,
        &format!("VPC = {}\n{global}", estate.vpc),
    )
    .await
}

/// Ensures `svc` on what upstream made, asserting that nothing changed:
/// no changing call, the node rules as they were. The proxy goes with the
/// provider: its clients reach AWS through it.
async fn adopt(moto: &Moto, estate: &Estate, svc: &Service) -> (Arc<dyn CloudProvider>, Proxy) {
    adopt_under(moto, estate, svc, "").await
}

/// [`adopt`] with `global` added to the cloud config's `[Global]`.
async fn adopt_under(
    moto: &Moto,
    estate: &Estate,
    svc: &Service,
    global: &str,
) -> (Arc<dyn CloudProvider>, Proxy) {
    let rules_before = node_rules(moto, estate).await;
    let proxy = Proxy::start(&moto.endpoint).await.expect("proxy");
    let provider = provider(&proxy, estate, global).await;
    let nodes: Vec<_> = estate.instances.iter().map(seed::Seeded::node).collect();
    let before = proxy.actions();
    let ensured = provider
        .load_balancer()
        .expect("AWS has load balancers")
        .ensure_load_balancer(CLUSTER, svc, &nodes)
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
        node_rules(moto, estate).await,
        rules_before,
        "the node rules stay as upstream made them"
    );
    (provider, proxy)
}

/// Two instances and the NLB upstream makes by default for them: internet
/// facing, no security group of its own.
async fn default_nlb(moto: &Moto) -> Estate {
    let estate = seed::estate(&ec2(moto), 2).await.expect("seeded");
    let made = Nlb {
        scheme: LoadBalancerSchemeEnum::InternetFacing,
        subnets: subnets(&estate.public_subnets),
        health: Health::cluster(),
        // Clients from anywhere to the traffic port: no health rule.
        rules: upstream::client_rules("0.0.0.0/0"),
        security_groups: Vec::new(),
    };
    upstream::nlb(moto, &estate, made).await;
    estate
}

#[tokio::test]
async fn an_nlb_upstream_made_is_adopted_without_a_change_and_deleted_with_its_service() {
    let moto = moto().await;
    let estate = default_nlb(&moto).await;
    let svc = nlb_service(UID, &[], &[(PORT, NODE_PORT)]);
    let (provider, _proxy) = adopt(&moto, &estate, &svc).await;

    provider
        .load_balancer()
        .expect("AWS has load balancers")
        .ensure_load_balancer_deleted(CLUSTER, &svc)
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
    let left = node_rules(&moto, &estate).await;
    assert!(
        !left
            .iter()
            .any(|(_, _, _, _, d)| d.contains("kubernetes.io/rule/nlb/")),
        "{left:?}"
    );
}

#[tokio::test]
async fn an_nlb_with_the_managed_group_upstream_made_is_adopted_without_a_change_and_deleted_with_it()
 {
    const RANGES: [&str; 2] = ["198.51.100.0/24", "203.0.113.0/24"];
    let moto = moto().await;
    let estate = seed::estate(&ec2(&moto), 2).await.expect("seeded");
    let group = upstream::managed_group(&moto, &estate, &RANGES).await;
    // Clients from the source ranges: the health checks need a rule of
    // their own.
    let cidrs = subnet_cidrs(&moto, &estate.public_subnets).await;
    let mut rules = upstream::health_rules(NODE_PORT, &cidrs);
    for range in RANGES {
        rules.extend(upstream::client_rules(range));
    }
    let made = Nlb {
        scheme: LoadBalancerSchemeEnum::InternetFacing,
        subnets: subnets(&estate.public_subnets),
        health: Health::cluster(),
        rules,
        security_groups: vec![group.clone()],
    };
    upstream::nlb(&moto, &estate, made).await;
    let svc = nlb_service(
        UID,
        &[(key::SOURCE_RANGES, &RANGES.join(","))],
        &[(PORT, NODE_PORT)],
    );
    let group_rules = ingress_rules(&ec2(&moto), &group).await.expect("described");
    let (provider, _proxy) =
        adopt_under(&moto, &estate, &svc, "NLBSecurityGroupMode = Managed").await;
    assert_eq!(
        ingress_rules(&ec2(&moto), &group).await.expect("described"),
        group_rules,
        "the group's rules stay as upstream made them"
    );
    let lbs = elbv2(&moto)
        .describe_load_balancers()
        .send()
        .await
        .expect("described");
    assert_eq!(
        lbs.load_balancers()[0].security_groups(),
        std::slice::from_ref(&group)
    );

    provider
        .load_balancer()
        .expect("AWS has load balancers")
        .ensure_load_balancer_deleted(CLUSTER, &svc)
        .await
        .expect("deleted");
    let groups = ec2(&moto)
        .describe_security_groups()
        .send()
        .await
        .expect("described");
    assert!(
        !groups
            .security_groups()
            .iter()
            .any(|g| g.group_id() == Some(&group)),
        "the managed group, tagged with the cluster alone, is deleted with its Service"
    );
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
    let mappings = estate
        .public_subnets
        .iter()
        .zip(&eips)
        .map(|(subnet, eip)| {
            SubnetMapping::builder()
                .subnet_id(subnet)
                .allocation_id(eip)
                .build()
        })
        .collect();
    let cidrs = subnet_cidrs(&moto, &estate.public_subnets).await;
    let mut rules = upstream::health_rules(HEALTH_PORT, &cidrs);
    rules.extend(upstream::client_rules("0.0.0.0/0"));
    let made = Nlb {
        scheme: LoadBalancerSchemeEnum::InternetFacing,
        subnets: mappings,
        health: Health::local(HEALTH_PORT),
        rules,
        security_groups: Vec::new(),
    };
    upstream::nlb(&moto, &estate, made).await;
    let allocations = eips.join(",");
    let mut svc = nlb_service(
        UID,
        &[(key::EIP_ALLOCATIONS, &allocations)],
        &[(PORT, NODE_PORT)],
    );
    let spec = svc.spec.as_mut().expect("spec");
    spec.external_traffic_policy = Some("Local".into());
    spec.health_check_node_port = Some(HEALTH_PORT);
    adopt(&moto, &estate, &svc).await;
}

#[tokio::test]
async fn an_internal_nlb_with_private_addresses_upstream_made_is_adopted_without_a_change() {
    let moto = moto().await;
    let estate = seed::estate(&ec2(&moto), 2).await.expect("seeded");
    // Upstream's internal subnets: the internal-elb subnet in its zone, a
    // public one in the other.
    let ids = vec![
        estate.private_subnet.clone(),
        estate.public_subnets[1].clone(),
    ];
    let addresses = ["10.0.3.10", "10.0.2.10"];
    let cidrs = subnet_cidrs(&moto, &ids).await;
    let mappings = ids
        .iter()
        .zip(addresses)
        .map(|(subnet, address)| {
            SubnetMapping::builder()
                .subnet_id(subnet)
                .private_ipv4_address(address)
                .build()
        })
        .collect();
    // Clients from the VPC: the health checks need a rule of their own.
    let mut rules = upstream::health_rules(NODE_PORT, &cidrs);
    rules.extend(upstream::client_rules(VPC_CIDR));
    let made = Nlb {
        scheme: LoadBalancerSchemeEnum::Internal,
        subnets: mappings,
        health: Health::cluster(),
        rules,
        security_groups: Vec::new(),
    };
    upstream::nlb(&moto, &estate, made).await;
    let svc = nlb_service(
        UID,
        &[
            (key::INTERNAL, "true"),
            (key::PRIVATE_IPV4_ADDRESSES, &addresses.join(",")),
        ],
        &[(PORT, NODE_PORT)],
    );
    adopt(&moto, &estate, &svc).await;
}

#[tokio::test]
async fn a_classic_elb_upstream_made_is_adopted_without_a_change_and_deleted_with_its_service() {
    let moto = moto().await;
    let estate = seed::estate(&ec2(&moto), 2).await.expect("seeded");
    let group = upstream::classic(&moto, &estate).await;
    let svc = classic_service(UID, &[], &[(PORT, NODE_PORT)]);
    let (provider, _proxy) = adopt(&moto, &estate, &svc).await;

    provider
        .load_balancer()
        .expect("AWS has load balancers")
        .ensure_load_balancer_deleted(CLUSTER, &svc)
        .await
        .expect("deleted");
    let elbs = elb(&moto)
        .describe_load_balancers()
        .send()
        .await
        .expect("described");
    assert!(elbs.load_balancer_descriptions().is_empty(), "{elbs:?}");
    let groups = ec2(&moto)
        .describe_security_groups()
        .send()
        .await
        .expect("described");
    assert!(
        !groups
            .security_groups()
            .iter()
            .any(|g| g.group_id() == Some(&group)),
        "the ELB's group is deleted"
    );
    assert!(
        !groups
            .security_groups()
            .iter()
            .flat_map(|g| g.ip_permissions())
            .flat_map(|p| p.user_id_group_pairs())
            .any(|p| p.group_id() == Some(&group)),
        "no rule refers to it"
    );
}

#[tokio::test]
async fn a_route_upstream_made_is_listed_and_kept() {
    let moto = moto().await;
    let estate = seed::estate(&ec2(&moto), 2).await.expect("seeded");
    upstream::route(&moto, &estate, POD_CIDR).await;
    let proxy = Proxy::start(&moto.endpoint).await.expect("proxy");
    let provider = provider(&proxy, &estate, "").await;
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
