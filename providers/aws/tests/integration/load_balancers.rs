//! Network Load Balancers against moto (classic ELBs in [`classic`]): what a Service gets, how targets
//! follow nodes, what invalid input leaves alone, that deletion leaves
//! nothing the cluster owned, what a dry run sends ([`dry_run`]), target
//! group attributes ([`attributes`]), target health ([`health`]), named security groups
//! ([`security_groups`]), subnets named by annotation ([`subnets`]) and TLS
//! ([`tls`]).

#[path = "load_balancers/attributes.rs"]
mod attributes;
#[path = "load_balancers/classic.rs"]
mod classic;
#[path = "load_balancers/classic_table.rs"]
mod classic_table;
#[path = "load_balancers/dry_run.rs"]
mod dry_run;
#[path = "load_balancers/fixture.rs"]
mod fixture;
#[path = "load_balancers/health.rs"]
mod health;
#[path = "load_balancers/nlb_table.rs"]
mod nlb_table;
#[path = "load_balancers/security_groups.rs"]
mod security_groups;
#[path = "load_balancers/shared_rules.rs"]
mod shared_rules;
#[path = "load_balancers/subnets.rs"]
mod subnets;
#[path = "load_balancers/tls.rs"]
mod tls;
#[path = "load_balancers/type_change.rs"]
mod type_change;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use ccm_cloud_provider::CloudError;
use ccm_provider_aws::annotations as key;
use ccm_provider_aws::test_util::seed::{self, VPC_CIDR};
use ccm_provider_aws::test_util::{CLUSTER, elbv2};

use fixture::*;

#[tokio::test]
async fn a_service_gets_a_tagged_nlb_with_listeners_target_groups_targets_and_node_rules() {
    let f = Fixture::with_global(3, "NLBSecurityGroupMode = Managed").await;
    let svc = service(
        &[
            (key::ADDITIONAL_RESOURCE_TAGS, "team=shop"),
            (key::CROSS_ZONE_LOAD_BALANCING_ENABLED, "true"),
            (key::PROXY_PROTOCOL, "*"),
        ],
        &[(80, 30080), (443, 30443)],
    );
    let ensured = f
        .lb()
        .ensure_load_balancer(CLUSTER, &svc, &f.nodes(&[0, 1, 2]))
        .await
        .expect("ensured");

    let lbs = f.load_balancers().await;
    assert_eq!(lbs.len(), 1);
    let nlb = &lbs[0];
    assert_eq!(nlb.load_balancer_name(), Some(LB_NAME));
    assert_eq!(nlb.r#type().map(|t| t.as_str()), Some("network"));
    assert_eq!(nlb.scheme().map(|s| s.as_str()), Some("internet-facing"));
    let subnets: BTreeSet<&str> = nlb
        .availability_zones()
        .iter()
        .filter_map(|z| z.subnet_id())
        .collect();
    let public: BTreeSet<&str> = f.estate.public_subnets.iter().map(String::as_str).collect();
    assert_eq!(
        subnets, public,
        "the tagged public subnets, not the private or foreign ones"
    );
    assert_eq!(
        ensured.status.ingress[0].hostname.as_deref(),
        nlb.dns_name()
    );
    let attributes = elbv2(&f.moto)
        .describe_load_balancer_attributes()
        .load_balancer_arn(nlb.load_balancer_arn().unwrap_or_default())
        .send()
        .await
        .expect("described");
    let cross_zone = attributes
        .attributes()
        .iter()
        .find(|a| a.key() == Some("load_balancing.cross_zone.enabled"));
    assert_eq!(cross_zone.and_then(|a| a.value()), Some("true"));
    let lb_tags = f.tags(nlb.load_balancer_arn().unwrap_or_default()).await;
    assert!(owned_by_the_service(&lb_tags), "{lb_tags:?}");
    assert_eq!(lb_tags["team"], "shop");

    let listeners = elbv2(&f.moto)
        .describe_listeners()
        .load_balancer_arn(nlb.load_balancer_arn().unwrap_or_default())
        .send()
        .await
        .expect("described");
    let groups = f.target_groups().await;
    assert_eq!((listeners.listeners().len(), groups.len()), (2, 2));
    for listener in listeners.listeners() {
        let node_port = if listener.port() == Some(80) {
            30080
        } else {
            30443
        };
        assert_eq!(listener.protocol().map(|p| p.as_str()), Some("TCP"));
        let tg_arn = listener.default_actions()[0]
            .target_group_arn()
            .unwrap_or_default();
        let tg = groups
            .iter()
            .find(|g| g.target_group_arn() == Some(tg_arn))
            .expect("forwards to a group");
        assert_eq!(tg.port(), Some(node_port));
        assert_eq!(tg.target_type().map(|t| t.as_str()), Some("instance"));
        assert_eq!(tg.health_check_protocol().map(|p| p.as_str()), Some("TCP"));
        assert_eq!(tg.health_check_port(), Some("traffic-port"));
        assert!(
            tg.target_group_name()
                .unwrap_or_default()
                .starts_with("k8s-shop-web-")
        );
        assert!(owned_by_the_service(&f.tags(tg_arn).await));
        assert!(owned_by_the_service(
            &f.tags(listener.listener_arn().unwrap_or_default()).await
        ));
        let want: BTreeSet<(String, i32)> = f
            .estate
            .instances
            .iter()
            .map(|i| (i.id.clone(), node_port))
            .collect();
        assert_eq!(f.targets(tg_arn).await, want);
        let attributes = elbv2(&f.moto)
            .describe_target_group_attributes()
            .target_group_arn(tg_arn)
            .send()
            .await
            .expect("described");
        let proxy = attributes
            .attributes()
            .iter()
            .find(|a| a.key() == Some("proxy_protocol_v2.enabled"));
        assert_eq!(proxy.and_then(|a| a.value()), Some("true"));
    }

    let lb_groups = nlb.security_groups();
    assert_eq!(lb_groups.len(), 1, "the load balancer's own group");
    assert_eq!(
        f.ingress(&lb_groups[0]).await,
        BTreeSet::from([
            rule("tcp", 80, "0.0.0.0/0", ""),
            rule("tcp", 443, "0.0.0.0/0", ""),
            ("icmp".into(), 3, 4, "0.0.0.0/0".into(), String::new()),
        ]),
        "upstream's: the listener ports and ICMP fragmentation-needed from anywhere"
    );
    let client = format!("kubernetes.io/rule/nlb/client={LB_NAME}");
    assert_eq!(
        f.ingress(&f.estate.node_security_group).await,
        BTreeSet::from([
            rule("tcp", 30080, "0.0.0.0/0", &client),
            rule("tcp", 30443, "0.0.0.0/0", &client),
            (
                "icmp".into(),
                3,
                4,
                "0.0.0.0/0".into(),
                "kubernetes.io/rule/nlb/mtu".into()
            ),
        ])
    );

    // Idempotent: the same call again changes nothing and answers the same.
    let groups_before = f.security_group_ids().await;
    let first_calls = calls(&*f.provider);
    // What the ensure has just created is not read back: a new load
    // balancer has no listeners or target groups, a new target group no
    // targets and AWS's default attributes.
    for read in [
        "describe_listeners",
        "describe_target_health",
        "describe_target_group_attributes",
    ] {
        assert!(!first_calls.contains_key(read), "{read}: {first_calls:?}");
    }
    let first: u64 = first_calls.values().sum();
    let changes_before = mutations(&*f.provider);
    assert!(
        changes_before.contains_key("create_load_balancer"),
        "{changes_before:?}"
    );
    let again = f
        .lb()
        .ensure_load_balancer(CLUSTER, &svc, &f.nodes(&[0, 1, 2]))
        .await
        .expect("ensured again");
    let second = calls(&*f.provider).values().sum::<u64>() - first;
    // An existing one is read: it may have drifted.
    let again_calls = calls(&*f.provider);
    for read in ["describe_listeners", "describe_target_health"] {
        assert!(again_calls.contains_key(read), "{read}: {again_calls:?}");
    }
    println!("AWS calls: {first} for the first ensure (3 nodes, 2 ports), {second} for a repeat");
    assert_eq!(again, ensured);
    assert_eq!(
        mutations(&*f.provider),
        changes_before,
        "a second ensure changes nothing"
    );
    assert_eq!(f.load_balancers().await.len(), 1);
    assert_eq!(f.target_groups().await.len(), 2);
    assert_eq!(f.security_group_ids().await, groups_before);
    let status = f
        .lb()
        .get_load_balancer(CLUSTER, &svc)
        .await
        .expect("answered");
    assert_eq!(status, Some(ensured.status));
}

#[tokio::test]
async fn by_default_an_nlb_gets_no_security_group_and_the_nodes_let_its_clients_in() {
    let f = Fixture::new(2).await;
    let groups_before = f.security_group_ids().await;
    let svc = service(&[], &[(80, 30080)]);
    f.lb()
        .ensure_load_balancer(CLUSTER, &svc, &f.nodes(&[0, 1]))
        .await
        .expect("ensured");
    let lbs = f.load_balancers().await;
    assert_eq!(lbs.len(), 1);
    assert!(lbs[0].security_groups().is_empty(), "{:?}", lbs[0]);
    assert_eq!(f.security_group_ids().await, groups_before, "none made");
    let client = format!("kubernetes.io/rule/nlb/client={LB_NAME}");
    assert!(
        f.ingress(&f.estate.node_security_group)
            .await
            .contains(&rule("tcp", 30080, "0.0.0.0/0", &client)),
        "the clients reach the node port"
    );
    f.lb()
        .ensure_load_balancer_deleted(CLUSTER, &svc)
        .await
        .expect("deleted");
    assert!(f.load_balancers().await.is_empty());
    assert_eq!(f.security_group_ids().await, groups_before);
}

#[tokio::test]
async fn targets_follow_nodes_and_target_node_labels() {
    let f = Fixture::new(3).await;
    let svc = service(&[], &[(80, 30080)]);
    let lb = f.lb();
    lb.ensure_load_balancer(CLUSTER, &svc, &f.nodes(&[0, 1]))
        .await
        .expect("ensured");
    let tg = f.target_groups().await[0]
        .target_group_arn()
        .unwrap_or_default()
        .to_owned();
    let ids = |which: &[usize]| -> BTreeSet<(String, i32)> {
        which
            .iter()
            .map(|i| (f.estate.instances[*i].id.clone(), 30080))
            .collect()
    };
    assert_eq!(f.targets(&tg).await, ids(&[0, 1]));

    lb.update_load_balancer(CLUSTER, &svc, &f.nodes(&[1, 2]))
        .await
        .expect("updated");
    assert_eq!(f.targets(&tg).await, ids(&[1, 2]));
    lb.update_load_balancer(CLUSTER, &svc, &[])
        .await
        .expect("updated");
    assert_eq!(f.targets(&tg).await, ids(&[]));

    let labelled = service(&[(key::TARGET_NODE_LABELS, "pool=web")], &[(80, 30080)]);
    let mut nodes = f.nodes(&[0, 1, 2]);
    let mut web = (*nodes[2]).clone();
    web.metadata.labels = Some(BTreeMap::from([("pool".to_owned(), "web".to_owned())]));
    nodes[2] = Arc::new(web);
    lb.update_load_balancer(CLUSTER, &labelled, &nodes)
        .await
        .expect("updated");
    assert_eq!(f.targets(&tg).await, ids(&[2]));
}

#[tokio::test]
async fn a_new_node_port_swaps_the_target_group_and_deletes_the_old_one() {
    let f = Fixture::new(1).await;
    f.lb()
        .ensure_load_balancer(CLUSTER, &service(&[], &[(80, 30080)]), &f.nodes(&[0]))
        .await
        .expect("ensured");
    let old = f.target_groups().await[0]
        .target_group_arn()
        .unwrap_or_default()
        .to_owned();
    f.lb()
        .ensure_load_balancer(CLUSTER, &service(&[], &[(80, 30081)]), &f.nodes(&[0]))
        .await
        .expect("ensured");
    let groups = f.target_groups().await;
    assert_eq!(groups.len(), 1, "{groups:?}");
    assert_ne!(groups[0].target_group_arn(), Some(old.as_str()));
    assert_eq!(groups[0].port(), Some(30081));
}

#[tokio::test]
async fn deleting_the_service_leaves_nothing_the_cluster_owned() {
    let f = Fixture::new(2).await;
    let mut svc = service(&[], &[(80, 30080)]);
    let spec = svc.spec.as_mut().expect("spec");
    spec.load_balancer_source_ranges = Some(vec!["203.0.113.0/24".into()]);
    spec.external_traffic_policy = Some("Local".into());
    spec.health_check_node_port = Some(32000);
    let groups_before = f.security_group_ids().await;
    f.lb()
        .ensure_load_balancer(CLUSTER, &svc, &f.nodes(&[0, 1]))
        .await
        .expect("ensured");
    let health = format!("kubernetes.io/rule/nlb/health={LB_NAME}");
    assert_eq!(
        f.admitted(32000, &health).await,
        f.load_balancer_subnet_cidrs().await,
        "health checks come from the load balancer's subnets"
    );
    // A target group a crash left behind, unattached but the Service's.
    let orphan = elbv2(&f.moto)
        .create_target_group()
        .name("k8s-shop-web-0rphan0000")
        .protocol(aws_sdk_elasticloadbalancingv2::types::ProtocolEnum::Tcp)
        .port(30099)
        .vpc_id(&f.estate.vpc)
        .tags(
            aws_sdk_elasticloadbalancingv2::types::Tag::builder()
                .key(seed::cluster_tag())
                .value("owned")
                .build(),
        )
        .tags(
            aws_sdk_elasticloadbalancingv2::types::Tag::builder()
                .key("kubernetes.io/service-name")
                .value("shop/web")
                .build(),
        )
        .send()
        .await
        .expect("created");
    assert!(orphan.target_groups().len() == 1);

    f.lb()
        .ensure_load_balancer_deleted(CLUSTER, &svc)
        .await
        .expect("deleted");
    assert!(f.load_balancers().await.is_empty());
    assert!(f.target_groups().await.is_empty());
    assert!(
        f.ingress(&f.estate.node_security_group).await.is_empty(),
        "no client, health or MTU rule left"
    );
    assert_eq!(
        f.security_group_ids().await,
        groups_before,
        "the load balancer's group is gone"
    );
    assert_eq!(
        f.lb()
            .get_load_balancer(CLUSTER, &svc)
            .await
            .expect("answered"),
        None
    );
    f.lb()
        .ensure_load_balancer_deleted(CLUSTER, &svc)
        .await
        .expect("deleting again is fine");
}

#[tokio::test]
async fn invalid_input_changes_nothing_in_the_cloud() {
    let f = Fixture::new(1).await;
    let groups_before = f.security_group_ids().await;
    let bad = service(&[(key::HEALTHCHECK_INTERVAL, "1")], &[(80, 30080)]);
    let err = f
        .lb()
        .ensure_load_balancer(CLUSTER, &bad, &f.nodes(&[0]))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, CloudError::InvalidInput { field, .. } if field == key::HEALTHCHECK_INTERVAL),
        "{err:?}"
    );

    // A classic ELB's own keys are checked as strictly.
    let mut classic = service(&[], &[(80, 30080)]);
    classic.metadata.annotations =
        Some([(key::CONNECTION_IDLE_TIMEOUT.to_owned(), "0".to_owned())].into());
    let err = f
        .lb()
        .ensure_load_balancer(CLUSTER, &classic, &f.nodes(&[0]))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, CloudError::InvalidInput { field, .. } if field == key::CONNECTION_IDLE_TIMEOUT),
        "{err:?}"
    );

    let too_few_eips = service(
        &[
            (key::SUBNETS, "public-a,public-b"),
            (key::EIP_ALLOCATIONS, "eipalloc-0abc"),
        ],
        &[(80, 30080)],
    );
    let err = f
        .lb()
        .ensure_load_balancer(CLUSTER, &too_few_eips, &f.nodes(&[0]))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, CloudError::InvalidInput { field, .. } if field == key::EIP_ALLOCATIONS),
        "{err:?}"
    );

    let unknown_subnet = service(
        &[(key::SUBNETS, "subnet-0000000000000dead")],
        &[(80, 30080)],
    );
    let err = f
        .lb()
        .ensure_load_balancer(CLUSTER, &unknown_subnet, &f.nodes(&[0]))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, CloudError::InvalidInput { field, .. } if field == key::SUBNETS),
        "{err:?}"
    );

    let external = service(&[(key::TYPE, "external")], &[(80, 30080)]);
    let err = f
        .lb()
        .ensure_load_balancer(CLUSTER, &external, &f.nodes(&[0]))
        .await
        .unwrap_err();
    assert!(matches!(err, CloudError::ImplementedElsewhere), "{err:?}");

    // The same answers before a new Service is claimed, from the Service
    // alone (no DescribeLoadBalancers).
    let calls_before = calls(&*f.provider).values().sum::<u64>();
    assert!(matches!(
        f.lb().check_service(&bad),
        Some(Err(CloudError::InvalidInput { .. }))
    ));
    assert!(matches!(
        f.lb().check_service(&classic),
        Some(Err(CloudError::InvalidInput { .. }))
    ));
    assert!(matches!(
        f.lb().check_service(&external),
        Some(Err(CloudError::ImplementedElsewhere))
    ));
    let good = service(&[], &[(80, 30080)]);
    assert!(matches!(f.lb().check_service(&good), Some(Ok(()))));
    assert_eq!(calls(&*f.provider).values().sum::<u64>(), calls_before);

    assert!(f.load_balancers().await.is_empty());
    assert!(f.target_groups().await.is_empty());
    assert_eq!(f.security_group_ids().await, groups_before);
    assert!(f.ingress(&f.estate.node_security_group).await.is_empty());
}

#[tokio::test]
async fn an_internal_local_service_checks_healthz_from_its_subnets_and_admits_only_the_vpc() {
    let f = Fixture::new(2).await;
    let mut svc = service(&[(key::INTERNAL, "true")], &[(53, 30053)]);
    let spec = svc.spec.as_mut().expect("spec");
    spec.external_traffic_policy = Some("Local".into());
    spec.health_check_node_port = Some(31999);
    f.lb()
        .ensure_load_balancer(CLUSTER, &svc, &f.nodes(&[0, 1]))
        .await
        .expect("ensured");

    let nlb = &f.load_balancers().await[0];
    assert_eq!(nlb.scheme().map(|s| s.as_str()), Some("internal"));
    let subnets: BTreeSet<&str> = nlb
        .availability_zones()
        .iter()
        .filter_map(|z| z.subnet_id())
        .collect();
    let want = BTreeSet::from([
        f.estate.private_subnet.as_str(),
        f.estate.public_subnets[1].as_str(),
    ]);
    assert_eq!(subnets, want, "the internal-elb subnet wins its zone");

    let tg = &f.target_groups().await[0];
    assert_eq!(tg.health_check_protocol().map(|p| p.as_str()), Some("HTTP"));
    assert_eq!(tg.health_check_path(), Some("/healthz"));
    assert_eq!(tg.health_check_port(), Some("31999"));
    let ingress = f.ingress(&f.estate.node_security_group).await;
    assert!(
        ingress.contains(&rule(
            "tcp",
            30053,
            VPC_CIDR,
            &format!("kubernetes.io/rule/nlb/client={LB_NAME}")
        )),
        "{ingress:?}"
    );
    assert_eq!(
        f.admitted(31999, &format!("kubernetes.io/rule/nlb/health={LB_NAME}"))
            .await,
        f.load_balancer_subnet_cidrs().await,
        "health checks come from the load balancer's subnets: {ingress:?}"
    );
}

#[tokio::test]
async fn the_shared_health_probe_checks_kube_proxy_and_the_nodes_admit_it() {
    let f = Fixture::with_global(1, "ClusterServiceLoadBalancerHealthProbeMode = Shared").await;
    let svc = service(
        &[
            (key::HEALTHCHECK_PORT, "8080"),
            (key::HEALTHCHECK_INTERVAL, "10"),
        ],
        &[(80, 30080)],
    );
    f.lb()
        .ensure_load_balancer(CLUSTER, &svc, &f.nodes(&[0]))
        .await
        .expect("ensured");
    let tg = &f.target_groups().await[0];
    assert_eq!(tg.health_check_protocol().map(|p| p.as_str()), Some("HTTP"));
    assert_eq!(tg.health_check_path(), Some("/healthz"));
    assert_eq!(tg.health_check_port(), Some("10256"));
    assert_eq!(tg.health_check_interval_seconds(), Some(10));
    assert_eq!(
        f.admitted(10256, &format!("kubernetes.io/rule/nlb/health={LB_NAME}"))
            .await,
        f.load_balancer_subnet_cidrs().await,
        "kube-proxy's port is open to the load balancer's subnets"
    );
}
