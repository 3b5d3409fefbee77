//! The cluster's identity without `KubernetesClusterID`, as upstream finds
//! it: the cluster tag of the instance the CCM runs on, read through a
//! loopback stand-in for instance metadata (never `169.254.169.254`).
//! `--cluster-name` never stands in for it: two clusters both left on the
//! default name `kubernetes` keep to their own resources.

use std::sync::Arc;

use aws_sdk_ec2::types::{InstanceType, ResourceType, Tag, TagSpecification};
use ccm_cloud_provider::{CloudError, CloudProvider, InitContext, Route};
use ccm_provider_aws::test_util::imds::Imds;
use ccm_provider_aws::test_util::seed::{self, Estate, Seeded};
use ccm_provider_aws::test_util::{
    CLUSTER, Moto, REGION, built, ec2, elbv2, moto, nlb_service, service_overrides,
};

/// Both clusters' `--cluster-name`: the default everyone leaves.
const DEFAULT_NAME: &str = "kubernetes";
/// The second cluster: the seeded estate's foreign subnet is tagged for it.
const OTHER: &str = "another";
const UID_A: &str = "0a1b2c3d-0000-4000-8000-00000000000a";
const UID_B: &str = "0b1b2c3d-0000-4000-8000-00000000000b";

/// The cloud config for moto with no cluster ID, asking `imds` for what it
/// does not say.
fn config_without_cluster_id(moto: &Moto, estate: &Estate, imds: &Imds) -> String {
    format!(
        "[Global]\nRegion = {REGION}\nVPC = {}\n{}{}",
        estate.vpc,
        service_overrides(&moto.endpoint),
        imds.service_override(3)
    )
}

/// The provider of the instance `imds` describes, initialized as the app
/// does, with `--cluster-name` left at its default.
async fn initialized(config: &str) -> Result<Arc<dyn CloudProvider>, CloudError> {
    let provider = built(config);
    provider
        .initialize(&InitContext::new(DEFAULT_NAME))
        .await
        .map(|()| provider)
}

/// An instance in `subnet` with `tags`, in a security group of its own
/// tagged for `cluster`.
async fn instance(
    moto: &Moto,
    estate: &Estate,
    subnet: &str,
    zone: &str,
    cluster: &str,
    tags: &[(&str, &str)],
) -> Seeded {
    let ec2 = ec2(moto);
    let group = ec2
        .create_security_group()
        .group_name(format!("{cluster}-nodes"))
        .description("nodes")
        .vpc_id(&estate.vpc)
        .tag_specifications(spec(
            ResourceType::SecurityGroup,
            &[(&format!("kubernetes.io/cluster/{cluster}"), "owned")],
        ))
        .send()
        .await
        .expect("security group created");
    let out = ec2
        .run_instances()
        .image_id("ami-12c6146b")
        .instance_type(InstanceType::from(seed::INSTANCE_TYPE))
        .min_count(1)
        .max_count(1)
        .subnet_id(subnet)
        .security_group_ids(group.group_id().expect("a group ID"))
        .tag_specifications(spec(ResourceType::Instance, tags))
        .send()
        .await
        .expect("instance run");
    let made = &out.instances()[0];
    Seeded {
        id: made.instance_id().expect("an ID").to_owned(),
        private_dns_name: made.private_dns_name().expect("a name").to_owned(),
        private_ip: made.private_ip_address().expect("an IP").to_owned(),
        zone: zone.to_owned(),
    }
}

fn spec(kind: ResourceType, tags: &[(&str, &str)]) -> TagSpecification {
    TagSpecification::builder()
        .resource_type(kind)
        .set_tags(Some(
            tags.iter()
                .map(|(k, v)| Tag::builder().key(*k).value(*v).build())
                .collect(),
        ))
        .build()
}

/// moto seeded with `nodes` instances, and the instance the CCM runs on,
/// tagged `tags`, with an instance metadata stand-in for it.
async fn this_instance(nodes: usize, tags: &[(&str, &str)]) -> (Moto, Estate, Seeded, Imds) {
    let moto = moto().await;
    let estate = seed::estate(&ec2(&moto), nodes).await.expect("seeded");
    let subnet = estate.public_subnets[0].clone();
    let this = instance(&moto, &estate, &subnet, "us-east-1a", CLUSTER, tags).await;
    let imds = Imds::for_instance(&this.id).await.expect("IMDS stand-in");
    (moto, estate, this, imds)
}

/// The subnets of the load balancer whose name starts with `prefix`.
async fn subnets_of(moto: &Moto, prefix: &str) -> Vec<String> {
    let out = elbv2(moto)
        .describe_load_balancers()
        .send()
        .await
        .expect("described");
    let lb = out
        .load_balancers()
        .iter()
        .find(|lb| {
            lb.load_balancer_name()
                .is_some_and(|n| n.starts_with(prefix))
        })
        .unwrap_or_else(|| panic!("no load balancer named {prefix}..."));
    let mut subnets: Vec<String> = lb
        .availability_zones()
        .iter()
        .filter_map(|z| z.subnet_id().map(str::to_owned))
        .collect();
    subnets.sort();
    subnets
}

#[tokio::test]
async fn two_clusters_named_kubernetes_keep_to_what_their_instance_tags_say() {
    let moto = moto().await;
    let estate = seed::estate(&ec2(&moto), 1).await.expect("seeded");
    let ours = estate.instances[0].clone();
    let theirs = instance(
        &moto,
        &estate,
        &estate.foreign_subnet,
        "us-east-1c",
        OTHER,
        &[(&format!("kubernetes.io/cluster/{OTHER}"), "owned")],
    )
    .await;
    let imds_a = Imds::for_instance(&ours.id).await.expect("IMDS stand-in");
    let imds_b = Imds::for_instance(&theirs.id).await.expect("IMDS stand-in");
    let a = initialized(&config_without_cluster_id(&moto, &estate, &imds_a))
        .await
        .expect("cluster A initialized from its instance's tag");
    let b = initialized(&config_without_cluster_id(&moto, &estate, &imds_b))
        .await
        .expect("cluster B initialized from its instance's tag");
    assert_eq!(imds_a.asked(), ["/latest/meta-data/instance-id"]);

    // Instances: each finds its own node by name, never the other's.
    let a_instances = a.instances().expect("instances");
    let b_instances = b.instances().expect("instances");
    let by_name = |s: &Seeded| ccm_provider_aws::test_util::node(&s.private_dns_name, None);
    assert!(
        a_instances
            .instance_exists(&by_name(&ours))
            .await
            .expect("asked")
    );
    assert!(
        !a_instances
            .instance_exists(&by_name(&theirs))
            .await
            .expect("asked")
    );
    assert!(
        b_instances
            .instance_exists(&by_name(&theirs))
            .await
            .expect("asked")
    );
    assert!(
        !b_instances
            .instance_exists(&by_name(&ours))
            .await
            .expect("asked")
    );

    // Load balancers: each in its own cluster's subnets.
    let a_lb = a.load_balancer().expect("load balancers");
    let b_lb = b.load_balancer().expect("load balancers");
    a_lb.ensure_load_balancer(
        DEFAULT_NAME,
        &nlb_service(UID_A, &[], &[(80, 30080)]),
        &[ours.node()],
    )
    .await
    .expect("A's load balancer");
    b_lb.ensure_load_balancer(
        DEFAULT_NAME,
        &nlb_service(UID_B, &[], &[(80, 30081)]),
        &[theirs.node()],
    )
    .await
    .expect("B's load balancer");
    let mut a_subnets = estate.public_subnets.clone();
    a_subnets.sort();
    assert_eq!(subnets_of(&moto, "a0a1b2c3d").await, a_subnets);
    assert_eq!(
        subnets_of(&moto, "a0b1b2c3d").await,
        std::slice::from_ref(&estate.foreign_subnet)
    );

    // Routes: A's go to A's table; B has no table of its own.
    let route = Route {
        name: String::new(),
        target_node: ours.private_dns_name.clone(),
        target_provider_id: Some(ours.provider_id()),
        destination_cidr: "100.64.1.0/24".parse().expect("cidr"),
        blackhole: false,
    };
    let a_routes = a.routes().expect("routes");
    a_routes
        .create_route(DEFAULT_NAME, "", &route)
        .await
        .expect("A's route");
    assert_eq!(
        a_routes
            .list_routes(DEFAULT_NAME)
            .await
            .expect("listed")
            .len(),
        1
    );
    let refused = b.routes().expect("routes").list_routes(DEFAULT_NAME).await;
    assert!(
        refused.as_ref().is_err_and(|e| e
            .to_string()
            .contains(&format!("kubernetes.io/cluster/{OTHER}"))),
        "B must not take A's route table for its own: {refused:?}"
    );

    // What each would clean up is its own.
    let owned = |p: &Arc<dyn CloudProvider>| {
        let p = p.clone();
        async move {
            let mut ids: Vec<String> = p
                .inventory()
                .expect("inventory")
                .owned_resources(DEFAULT_NAME)
                .await
                .expect("listed")
                .into_iter()
                .map(|r| format!("{} {}", r.kind, r.id))
                .collect();
            ids.sort();
            ids
        }
    };
    let a_owned = owned(&a).await;
    let b_owned = owned(&b).await;
    assert!(
        a_owned.iter().any(|r| r.starts_with("route ")),
        "{a_owned:?}"
    );
    assert_eq!(a_owned.iter().filter(|r| b_owned.contains(r)).count(), 0);
    assert!(!b_owned.is_empty(), "B's own load balancer is listed");
    assert!(
        !b_owned.iter().any(|r| r.starts_with("route ")),
        "{b_owned:?}"
    );
}

#[tokio::test]
async fn the_legacy_tag_names_the_cluster_and_marks_what_it_creates() {
    let (moto, estate, _, imds) = this_instance(1, &[("KubernetesCluster", CLUSTER)]).await;
    let provider = initialized(&config_without_cluster_id(&moto, &estate, &imds))
        .await
        .expect("initialized from the legacy tag");
    provider
        .load_balancer()
        .expect("load balancers")
        .ensure_load_balancer(
            DEFAULT_NAME,
            &nlb_service(UID_A, &[], &[(80, 30080)]),
            &[estate.instances[0].node()],
        )
        .await
        .expect("ensured");
    let elbv2 = elbv2(&moto);
    let lbs = elbv2
        .describe_load_balancers()
        .send()
        .await
        .expect("described");
    let arn = lbs.load_balancers()[0].load_balancer_arn().expect("an ARN");
    let tags = elbv2
        .describe_tags()
        .resource_arns(arn)
        .send()
        .await
        .expect("described");
    let keys: Vec<(&str, &str)> = tags.tag_descriptions()[0]
        .tags()
        .iter()
        .map(|t| (t.key().unwrap_or_default(), t.value().unwrap_or_default()))
        .collect();
    assert!(keys.contains(&("KubernetesCluster", CLUSTER)), "{keys:?}");
    assert!(
        keys.contains(&(&format!("kubernetes.io/cluster/{CLUSTER}"), "owned")),
        "{keys:?}"
    );
}

#[tokio::test]
async fn an_instance_without_a_cluster_tag_says_what_to_set() {
    let (moto, estate, untagged, imds) = this_instance(0, &[("Name", "bastion")]).await;
    let err = initialized(&config_without_cluster_id(&moto, &estate, &imds))
        .await
        .map(|_| ())
        .expect_err("no cluster to serve");
    let CloudError::InvalidInput { field, message } = &err else {
        panic!("a configuration error, not {err:?}");
    };
    assert_eq!(field, "KubernetesClusterID");
    assert_eq!(
        message,
        &format!(
            "not set in [Global] of the cloud config, and instance {} carries no \
             `kubernetes.io/cluster/<cluster ID>` or `KubernetesCluster` tag; set \
             KubernetesClusterID (or the legacy KubernetesClusterTag), or tag this instance \
             kubernetes.io/cluster/<cluster ID>",
            untagged.id
        )
    );
}

#[tokio::test]
async fn instance_metadata_that_cannot_tell_the_instance_says_what_to_set() {
    let moto = moto().await;
    let estate = seed::estate(&ec2(&moto), 0).await.expect("seeded");
    let imds = Imds::start(&[]).await.expect("IMDS stand-in");
    let err = initialized(&config_without_cluster_id(&moto, &estate, &imds))
        .await
        .map(|_| ())
        .expect_err("no cluster to serve");
    let CloudError::InvalidInput { field, message } = &err else {
        panic!("a configuration error, not {err:?}");
    };
    assert_eq!(field, "KubernetesClusterID");
    assert!(
        message.starts_with(
            "not set in [Global] of the cloud config, and this instance's cluster tag cannot be \
             read: instance metadata did not answer /latest/meta-data/instance-id"
        ) && message.ends_with("set KubernetesClusterID (or the legacy KubernetesClusterTag), or tag this instance kubernetes.io/cluster/<cluster ID>")
            && !message.contains('\n'),
        "{message}"
    );
}
