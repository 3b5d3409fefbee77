//! Routes against mocked EC2: the route table found, listed, created and
//! deleted, and source/destination checks.

use aws_sdk_ec2::Client as Ec2;
use aws_sdk_ec2::operation::create_route::CreateRouteOutput;
use aws_sdk_ec2::operation::describe_instances::DescribeInstancesOutput;
use aws_sdk_ec2::operation::describe_route_tables::DescribeRouteTablesOutput;
use aws_sdk_ec2::operation::modify_instance_attribute::ModifyInstanceAttributeOutput;
use aws_sdk_ec2::operation::replace_route::ReplaceRouteOutput;
use aws_sdk_ec2::types::{
    Instance, InstanceState, InstanceStateName, Placement, Reservation, Route as Ec2Route,
    RouteState, RouteTable, Tag,
};
use aws_smithy_mocks::{Rule, mock};
use ccm_cloud_provider::{CloudError, Route, Routes};

use super::*;

fn table(routes: Vec<Ec2Route>) -> Rule {
    mock!(Ec2::describe_route_tables).then_output(move || {
        DescribeRouteTablesOutput::builder()
            .route_tables(
                RouteTable::builder()
                    .route_table_id("rtb-1")
                    .tags(
                        Tag::builder()
                            .key("kubernetes.io/cluster/test-cluster")
                            .value("owned")
                            .build(),
                    )
                    .routes(
                        Ec2Route::builder()
                            .destination_cidr_block("10.0.0.0/16")
                            .gateway_id("local")
                            .state(RouteState::Active)
                            .build(),
                    )
                    .set_routes(Some(routes.clone()))
                    .build(),
            )
            .build()
    })
}

fn route(cidr: &str, instance: Option<&str>, state: RouteState) -> Ec2Route {
    Ec2Route::builder()
        .destination_cidr_block(cidr)
        .set_instance_id(instance.map(str::to_owned))
        .network_interface_id("eni-1")
        .state(state)
        .build()
}

fn instance_one() -> Rule {
    mock!(Ec2::describe_instances).then_output(|| {
        DescribeInstancesOutput::builder()
            .reservations(
                Reservation::builder()
                    .instances(
                        Instance::builder()
                            .instance_id("i-1")
                            .private_dns_name("ip-10-0-1-4.ec2.internal")
                            .placement(Placement::builder().availability_zone("us-east-1a").build())
                            .source_dest_check(true)
                            .state(
                                InstanceState::builder()
                                    .name(InstanceStateName::Running)
                                    .build(),
                            )
                            .build(),
                    )
                    .build(),
            )
            .build()
    })
}

fn pod_route(cidr: &str) -> Route {
    Route {
        name: String::new(),
        target_node: "ip-10-0-1-4.ec2.internal".into(),
        target_provider_id: Some("aws:///us-east-1a/i-1".into()),
        destination_cidr: cidr.parse().expect("cidr"),
        blackhole: false,
    }
}

#[tokio::test]
async fn blackhole_routes_are_listed_as_blackholes_and_gateway_routes_not_at_all() {
    let table = table(vec![
        route("100.64.1.0/24", Some("i-1"), RouteState::Active),
        route("100.64.2.0/24", None, RouteState::Blackhole),
    ]);
    let instances = instance_one();
    let provider = provider(&[&table, &instances], &[]);
    let routes = provider.list_routes("test-cluster").await.expect("listed");
    assert_eq!(routes.len(), 2, "{routes:?}");
    assert_eq!(routes[0].destination_cidr.to_string(), "100.64.1.0/24");
    assert_eq!(routes[0].target_node, "ip-10-0-1-4.ec2.internal");
    assert_eq!(
        routes[0].target_provider_id.as_deref(),
        Some("aws:///us-east-1a/i-1")
    );
    assert!(!routes[0].blackhole);
    assert_eq!(routes[0].name, "test-cluster-100.64.1.0/24");
    assert_eq!(routes[1].destination_cidr.to_string(), "100.64.2.0/24");
    assert!(routes[1].blackhole);
    assert_eq!(routes[1].target_node, "");
}

#[tokio::test]
async fn creating_over_a_blackhole_replaces_it_and_turns_off_source_dest_check() {
    let table = table(vec![route(
        "100.64.1.0/24",
        Some("i-9"),
        RouteState::Blackhole,
    )]);
    let instances = instance_one();
    let check = mock!(Ec2::modify_instance_attribute)
        .match_requests(|r| {
            r.instance_id() == Some("i-1")
                && r.source_dest_check().and_then(|v| v.value()) == Some(false)
        })
        .then_output(|| ModifyInstanceAttributeOutput::builder().build());
    let replace = mock!(Ec2::replace_route)
        .match_requests(|r| {
            r.route_table_id() == Some("rtb-1")
                && r.instance_id() == Some("i-1")
                && r.destination_cidr_block() == Some("100.64.1.0/24")
        })
        .then_output(|| ReplaceRouteOutput::builder().build());
    let provider = provider(&[&table, &instances, &check, &replace], &[]);
    provider
        .create_route("test-cluster", "hint", &pod_route("100.64.1.0/24"))
        .await
        .expect("created");
    assert_eq!((check.num_calls(), replace.num_calls()), (1, 1));
}

#[tokio::test]
async fn an_identical_route_is_left_alone() {
    let table = table(vec![route(
        "100.64.1.0/24",
        Some("i-1"),
        RouteState::Active,
    )]);
    let instances = instance_one();
    let check = mock!(Ec2::modify_instance_attribute)
        .then_output(|| ModifyInstanceAttributeOutput::builder().build());
    let create = mock!(Ec2::create_route).then_output(|| CreateRouteOutput::builder().build());
    let provider = provider(&[&table, &instances, &check, &create], &[]);
    provider
        .create_route("test-cluster", "hint", &pod_route("100.64.1.0/24"))
        .await
        .expect("nothing to do");
    assert_eq!(create.num_calls(), 0);
}

#[tokio::test]
async fn a_route_to_a_gateway_is_never_replaced() {
    let table = table(vec![
        Ec2Route::builder()
            .destination_cidr_block("100.64.1.0/24")
            .gateway_id("igw-1")
            .state(RouteState::Active)
            .build(),
    ]);
    let instances = instance_one();
    let check = mock!(Ec2::modify_instance_attribute)
        .then_output(|| ModifyInstanceAttributeOutput::builder().build());
    let provider = provider(&[&table, &instances, &check], &[]);
    let err = provider
        .create_route("test-cluster", "hint", &pod_route("100.64.1.0/24"))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("igw-1"), "{err}");
}

#[tokio::test]
async fn a_route_to_a_node_without_instance_is_instance_not_found() {
    let table = table(Vec::new());
    let none =
        mock!(Ec2::describe_instances).then_output(|| DescribeInstancesOutput::builder().build());
    let provider = provider(&[&table, &none], &[]);
    let err = provider
        .create_route("test-cluster", "hint", &pod_route("100.64.1.0/24"))
        .await
        .unwrap_err();
    assert!(matches!(err, CloudError::InstanceNotFound), "{err:?}");
}
