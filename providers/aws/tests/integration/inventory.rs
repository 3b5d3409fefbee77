//! The inventory against moto: what the provider made for one cluster is
//! listed with its owners, in deletion order, and deleted one by one;
//! another cluster's resources and untagged ones are never listed or
//! touched.

use std::collections::BTreeSet;
use std::sync::Arc;

use aws_sdk_elasticloadbalancingv2::types::{
    LoadBalancerTypeEnum, ProtocolEnum, Tag, TargetTypeEnum,
};
use ccm_cloud_provider::{CloudProvider, Inventory, OwnedResource, Owner, Route};
use ccm_provider_aws::inventory::{ROUTE, SECURITY_GROUP, TARGET_GROUP};
use ccm_provider_aws::test_util::seed::{self, Estate};
use ccm_provider_aws::test_util::{CLUSTER, Moto, ec2, elbv2, moto, nlb_service, provider_at};

/// Cluster B: the seeded estate's foreign subnet is tagged for it.
const OTHER_CLUSTER: &str = "another";
const UID_A: &str = "0a1b2c3d-0000-4000-8000-00000000000a";
const LB_A: &str = "a0a1b2c3d00004000800000000000000";
const UID_B: &str = "0b1b2c3d-0000-4000-8000-00000000000b";
const POD_CIDR: &str = "100.64.1.0/24";

fn inventory(provider: &Arc<dyn CloudProvider>) -> &dyn Inventory {
    provider.inventory().expect("AWS has an inventory")
}

/// Names of every load balancer, target group and security group in moto.
async fn everything(moto: &Moto, estate: &Estate) -> BTreeSet<String> {
    let elbv2 = elbv2(moto);
    let lbs = elbv2
        .describe_load_balancers()
        .send()
        .await
        .expect("described");
    let tgs = elbv2
        .describe_target_groups()
        .send()
        .await
        .expect("described");
    let sgs = ec2(moto)
        .describe_security_groups()
        .filters(
            aws_sdk_ec2::types::Filter::builder()
                .name("vpc-id")
                .values(&estate.vpc)
                .build(),
        )
        .send()
        .await
        .expect("described");
    let lbs = lbs
        .load_balancers()
        .iter()
        .filter_map(|lb| lb.load_balancer_name());
    let tgs = tgs
        .target_groups()
        .iter()
        .filter_map(|tg| tg.target_group_name());
    let sgs = sgs.security_groups().iter().filter_map(|g| g.group_name());
    lbs.chain(tgs).chain(sgs).map(str::to_owned).collect()
}

/// How many node security-group rules are described for load balancer `lb`.
async fn node_rules_of(moto: &Moto, estate: &Estate, lb: &str) -> usize {
    ccm_provider_aws::test_util::ingress_rules(&ec2(moto), &estate.node_security_group)
        .await
        .expect("described")
        .iter()
        .filter(|(_, _, _, _, description)| description.ends_with(&format!("={lb}")))
        .count()
}

/// A network load balancer and target group made without the provider,
/// with `tags`.
async fn made_by_hand(moto: &Moto, estate: &Estate, name: &str, tags: &[(&str, &str)]) {
    let tags: Vec<Tag> = tags
        .iter()
        .map(|(k, v)| Tag::builder().key(*k).value(*v).build())
        .collect();
    let elbv2 = elbv2(moto);
    elbv2
        .create_load_balancer()
        .name(name)
        .r#type(LoadBalancerTypeEnum::Network)
        .subnets(&estate.public_subnets[0])
        .set_tags(Some(tags.clone()).filter(|t| !t.is_empty()))
        .send()
        .await
        .expect("created");
    elbv2
        .create_target_group()
        .name(name)
        .vpc_id(&estate.vpc)
        .protocol(ProtocolEnum::Tcp)
        .port(30999)
        .target_type(TargetTypeEnum::Instance)
        .set_tags(Some(tags).filter(|t| !t.is_empty()))
        .send()
        .await
        .expect("created");
}

#[tokio::test]
async fn the_inventory_lists_and_deletes_exactly_what_the_cluster_made() {
    let moto = moto().await;
    let estate = seed::estate(&ec2(&moto), 1).await.expect("seeded");
    // Managed: the load balancers have security groups to list too.
    let vpc = format!("VPC = {}\nNLBSecurityGroupMode = Managed", estate.vpc);
    let a = provider_at(&moto.endpoint, CLUSTER, &vpc).await;
    let b = provider_at(&moto.endpoint, OTHER_CLUSTER, &vpc).await;
    let node = &estate.instances[0];

    // Cluster A: a Service's load balancer and a pod-CIDR route, made by
    // the provider, and a target group a crash left unattached.
    let lb = a.load_balancer().expect("AWS has load balancers");
    lb.ensure_load_balancer(
        CLUSTER,
        &nlb_service(UID_A, &[], &[(80, 30080)]),
        &[node.node()],
    )
    .await
    .expect("ensured");
    let route = Route {
        name: String::new(),
        target_node: node.private_dns_name.clone(),
        target_provider_id: Some(node.provider_id()),
        destination_cidr: POD_CIDR.parse().expect("cidr"),
        blackhole: false,
    };
    let routes = a.routes().expect("AWS has routes");
    routes
        .create_route(CLUSTER, "", &route)
        .await
        .expect("created");
    let cluster_tag = seed::cluster_tag();
    elbv2(&moto)
        .create_target_group()
        .name("k8s-shop-web-leftover")
        .vpc_id(&estate.vpc)
        .protocol(ProtocolEnum::Tcp)
        .port(30081)
        .target_type(TargetTypeEnum::Instance)
        .tags(Tag::builder().key(&cluster_tag).value("owned").build())
        .tags(
            Tag::builder()
                .key("kubernetes.io/service-name")
                .value("shop/web")
                .build(),
        )
        .send()
        .await
        .expect("created");
    // Cluster B: a Service of the same name, in its own subnet.
    b.load_balancer()
        .expect("AWS has load balancers")
        .ensure_load_balancer(OTHER_CLUSTER, &nlb_service(UID_B, &[], &[(80, 30080)]), &[])
        .await
        .expect("ensured");
    // Nobody's, and A's but not made for a Service.
    made_by_hand(&moto, &estate, "untagged", &[]).await;
    made_by_hand(
        &moto,
        &estate,
        "not-for-a-service",
        &[(&cluster_tag, "owned")],
    )
    .await;
    let b_listed = inventory(&b)
        .owned_resources(OTHER_CLUSTER)
        .await
        .expect("listed");
    let before = everything(&moto, &estate).await;

    let listed = inventory(&a)
        .owned_resources(CLUSTER)
        .await
        .expect("listed");
    let kinds: Vec<&str> = listed.iter().map(|r| r.kind.as_str()).collect();
    assert_eq!(
        kinds,
        [
            OwnedResource::LOAD_BALANCER,
            TARGET_GROUP,
            TARGET_GROUP,
            SECURITY_GROUP,
            ROUTE
        ],
        "{listed:#?}"
    );
    let by_lb = Owner::LoadBalancerName(LB_A.to_owned());
    assert_eq!((listed[0].name.as_str(), &listed[0].owner), (LB_A, &by_lb));
    let (attached, leftover) = if listed[1].name == "k8s-shop-web-leftover" {
        (&listed[2], &listed[1])
    } else {
        (&listed[1], &listed[2])
    };
    assert!(attached.name.starts_with("k8s-shop-web-"), "{attached:?}");
    assert_eq!(
        attached.owner, by_lb,
        "a listener's target group is its load balancer's"
    );
    assert_eq!(
        leftover.owner,
        Owner::Service {
            namespace: "shop".into(),
            name: "web".into()
        },
        "an unattached target group is its Service's"
    );
    assert!(
        listed[3].name.starts_with("k8s-shop-web-"),
        "{:?}",
        listed[3]
    );
    assert_eq!(listed[3].owner, by_lb);
    assert_eq!(listed[4].owner, Owner::Node(node.private_dns_name.clone()));
    assert_eq!(listed[4].cidr.as_deref(), Some(POD_CIDR));
    assert_eq!(
        listed[4].provider_id,
        Some(node.provider_id()),
        "matched to nodes by provider ID too, as the route controller does"
    );
    assert_eq!(listed[4].id, format!("{}:{POD_CIDR}", estate.route_table));
    assert!(
        listed.iter().all(|r| !b_listed.contains(r)),
        "{b_listed:#?}"
    );

    assert!(
        node_rules_of(&moto, &estate, LB_A).await > 0,
        "the nodes admit A's load balancer"
    );
    for resource in &listed {
        inventory(&a)
            .delete_owned(CLUSTER, resource)
            .await
            .unwrap_or_else(|e| panic!("deleting {resource:?}: {e}"));
    }
    assert_eq!(
        node_rules_of(&moto, &estate, LB_A).await,
        0,
        "deleting a leaked load balancer revokes the node rules made for it"
    );
    assert_eq!(
        inventory(&a)
            .owned_resources(CLUSTER)
            .await
            .expect("listed"),
        [],
        "everything listed was deleted"
    );
    for resource in &listed {
        inventory(&a)
            .delete_owned(CLUSTER, resource)
            .await
            .unwrap_or_else(|e| panic!("{resource:?} is already gone: {e}"));
    }

    let names: BTreeSet<&str> = listed[..4].iter().map(|r| r.name.as_str()).collect();
    let left: BTreeSet<String> = before
        .iter()
        .filter(|n| !names.contains(n.as_str()))
        .cloned()
        .collect();
    assert_eq!(
        everything(&moto, &estate).await,
        left,
        "only A's resources went"
    );
    for kept in ["untagged", "not-for-a-service", "nodes"] {
        assert!(left.contains(kept), "{kept} in {left:?}");
    }
    assert_eq!(
        inventory(&b)
            .owned_resources(OTHER_CLUSTER)
            .await
            .expect("listed"),
        b_listed,
        "B's resources are untouched"
    );
    assert_eq!(
        b_listed.len(),
        3,
        "B's load balancer, target group, security group: {b_listed:#?}"
    );
    assert!(
        routes
            .list_routes(CLUSTER)
            .await
            .expect("listed")
            .is_empty(),
        "the route went"
    );
}

#[tokio::test]
async fn a_classic_elb_and_its_group_are_listed_by_name_and_deleted_in_order() {
    let moto = moto().await;
    let estate = seed::estate(&ec2(&moto), 1).await.expect("seeded");
    let a = provider_at(&moto.endpoint, CLUSTER, &format!("VPC = {}", estate.vpc)).await;
    let node = &estate.instances[0];
    a.load_balancer()
        .expect("AWS has load balancers")
        .ensure_load_balancer(
            CLUSTER,
            &ccm_provider_aws::test_util::classic_service(UID_A, &[], &[(80, 30080)]),
            &[node.node()],
        )
        .await
        .expect("ensured");
    let listed = inventory(&a)
        .owned_resources(CLUSTER)
        .await
        .expect("listed");
    let kinds: Vec<(&str, &str)> = listed
        .iter()
        .map(|r| (r.kind.as_str(), r.name.as_str()))
        .collect();
    let own_group = format!("k8s-elb-{LB_A}");
    assert_eq!(
        kinds,
        [
            (OwnedResource::LOAD_BALANCER, LB_A),
            (SECURITY_GROUP, own_group.as_str())
        ],
        "{listed:?}"
    );
    assert_eq!(listed[0].id, LB_A, "a classic ELB's ID is its name");
    assert!(
        listed
            .iter()
            .all(|r| r.owner == Owner::LoadBalancerName(LB_A.to_owned())),
        "{listed:?}"
    );
    for resource in &listed {
        inventory(&a)
            .delete_owned(CLUSTER, resource)
            .await
            .unwrap_or_else(|e| panic!("{}: {e}", resource.id));
    }
    assert!(
        inventory(&a)
            .owned_resources(CLUSTER)
            .await
            .expect("listed")
            .is_empty()
    );
    let elbs = ccm_provider_aws::test_util::elb(&moto)
        .describe_load_balancers()
        .send()
        .await
        .expect("described");
    assert!(elbs.load_balancer_descriptions().is_empty());
}
