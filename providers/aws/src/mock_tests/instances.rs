//! Instances against mocked EC2: batched lookups, states, and what each
//! answer maps to.

use aws_sdk_ec2::Client as Ec2;
use aws_sdk_ec2::operation::describe_availability_zones::DescribeAvailabilityZonesOutput;
use aws_sdk_ec2::operation::describe_instance_topology::DescribeInstanceTopologyOutput;
use aws_sdk_ec2::operation::describe_instances::{
    DescribeInstancesError, DescribeInstancesInput, DescribeInstancesOutput,
};
use aws_sdk_ec2::types::{
    AvailabilityZone, Instance, InstanceState, InstanceStateName, Placement, Reservation,
};
use aws_smithy_mocks::mock;
use ccm_cloud_provider::{CloudError, Instances};

use super::*;
use crate::NETWORK_NODE_LABEL;

fn instance(id: &str, state: InstanceStateName) -> Instance {
    Instance::builder()
        .instance_id(id)
        .instance_type(aws_sdk_ec2::types::InstanceType::M5Large)
        .placement(Placement::builder().availability_zone("us-east-1a").build())
        .private_dns_name(format!("ip-{id}.ec2.internal"))
        .state(InstanceState::builder().name(state).build())
        .build()
}

fn page(instances: Vec<Instance>, next: Option<&str>) -> DescribeInstancesOutput {
    DescribeInstancesOutput::builder()
        .reservations(
            Reservation::builder()
                .set_instances(Some(instances))
                .build(),
        )
        .set_next_token(next.map(str::to_owned))
        .build()
}

fn filter_values<'a>(input: &'a DescribeInstancesInput, name: &str) -> Vec<&'a str> {
    input
        .filters()
        .iter()
        .filter(|f| f.name() == Some(name))
        .flat_map(|f| f.values().iter().map(String::as_str))
        .collect()
}

#[tokio::test]
async fn a_malformed_provider_id_fails_only_its_node_and_is_never_sent_to_aws() {
    let describe = mock!(Ec2::describe_instances)
        .match_requests(|input| filter_values(input, "instance-id") == ["i-0good"])
        .then_output(|| page(vec![instance("i-0good", InstanceStateName::Running)], None));
    let provider = provider(&[&describe], &[]);
    let nodes = [
        node("good", Some("aws:///us-east-1a/i-0good")),
        node("bad", Some("aws:///us-east-1a/vm-17")),
        node("other-cloud", Some("gce://project/zone/vm")),
    ];
    let answers = provider
        .instances_exist(&nodes)
        .await
        .expect("the call succeeds");
    assert!(matches!(answers[0], Ok(true)));
    for (answer, words) in [
        (&answers[1], "does not end in an EC2 instance ID"),
        (&answers[2], "not an AWS provider ID"),
    ] {
        match answer {
            Err(CloudError::Other { message, .. }) => assert!(message.contains(words), "{message}"),
            other => panic!("expected an error, got {other:?}"),
        }
    }
    assert_eq!(describe.num_calls(), 1);
}

#[tokio::test]
async fn an_id_aws_rejects_makes_the_answer_unknown_never_missing() {
    // A node lifecycle controller deletes nodes whose instance does not
    // exist: a rejected ID must not read as "does not exist".
    let describe = mock!(Ec2::describe_instances)
        .then_error(|| DescribeInstancesError::generic(aws_error("InvalidInstanceID.Malformed")));
    let provider = provider(&[&describe], &[]);
    let node = node("kwok-1", Some("aws:///us-east-1a/i-kwok1"));
    let err = provider.instance_exists(&node).await.unwrap_err();
    assert!(
        err.to_string().contains("InvalidInstanceID.Malformed"),
        "{err}"
    );
    assert!(provider.instances_exist(&[node]).await.is_err());
}

#[tokio::test]
async fn lookups_follow_next_token_across_pages() {
    let describe = mock!(Ec2::describe_instances)
        .sequence()
        .output(|| {
            page(
                vec![instance("i-01", InstanceStateName::Running)],
                Some("page-2"),
            )
        })
        .output(|| page(vec![instance("i-02", InstanceStateName::Stopped)], None))
        .build();
    let provider = provider(&[&describe], &[]);
    let nodes = [
        node("a", Some("aws:///us-east-1a/i-01")),
        node("b", Some("aws:///us-east-1a/i-02")),
    ];
    let shutdown = provider.instances_shutdown(&nodes).await.expect("answered");
    assert!(
        matches!(shutdown[..], [Ok(false), Ok(true)]),
        "{shutdown:?}"
    );
    assert_eq!(describe.num_calls(), 2);
}

#[tokio::test]
async fn one_call_answers_for_ids_and_one_for_names_whatever_the_batch() {
    let by_id = mock!(Ec2::describe_instances)
        .match_requests(|input| !filter_values(input, "instance-id").is_empty())
        .then_output(|| {
            page(
                vec![
                    instance("i-01", InstanceStateName::Running),
                    instance("i-02", InstanceStateName::Terminated),
                ],
                None,
            )
        });
    let by_name = mock!(Ec2::describe_instances)
        .match_requests(|input| {
            filter_values(input, "private-dns-name") == ["ip-10-0-1-9.ec2.internal"]
        })
        .then_output(|| {
            let tagged = Instance::builder()
                .instance_id("i-09")
                .private_dns_name("ip-10-0-1-9.ec2.internal")
                .state(
                    InstanceState::builder()
                        .name(InstanceStateName::Stopping)
                        .build(),
                )
                .tags(
                    aws_sdk_ec2::types::Tag::builder()
                        .key("kubernetes.io/cluster/test-cluster")
                        .value("owned")
                        .build(),
                )
                .build();
            page(vec![tagged], None)
        });
    let provider = provider(&[&by_id, &by_name], &[]);
    let nodes = [
        node("a", Some("aws:///us-east-1a/i-01")),
        node("gone", Some("aws:///us-east-1a/i-02")),
        node("missing", Some("aws:///us-east-1a/i-03")),
        node("ip-10-0-1-9.ec2.internal", None),
    ];
    let exist = provider.instances_exist(&nodes).await.expect("answered");
    assert!(
        matches!(exist[..], [Ok(true), Ok(false), Ok(false), Ok(true)]),
        "{exist:?}"
    );
    let shutdown = provider.instances_shutdown(&nodes).await.expect("answered");
    assert!(matches!(shutdown[0], Ok(false)));
    assert!(matches!(shutdown[1], Err(CloudError::InstanceNotFound)));
    assert!(matches!(shutdown[2], Err(CloudError::InstanceNotFound)));
    assert!(
        matches!(shutdown[3], Ok(false)),
        "stopping is not yet shut down, as upstream"
    );
    assert_eq!((by_id.num_calls(), by_name.num_calls()), (2, 2));
    assert_eq!(provider.max_batch_size().get(), 200);
}

#[tokio::test]
async fn metadata_carries_the_zone_id_label_and_a_built_provider_id() {
    let describe = mock!(Ec2::describe_instances)
        .then_output(|| page(vec![instance("i-01", InstanceStateName::Running)], None));
    let zones = mock!(Ec2::describe_availability_zones).then_output(|| {
        DescribeAvailabilityZonesOutput::builder()
            .availability_zones(
                AvailabilityZone::builder()
                    .zone_name("us-east-1a")
                    .zone_id("use1-az6")
                    .zone_type("availability-zone")
                    .build(),
            )
            .build()
    });
    let topology = mock!(Ec2::describe_instance_topology)
        .then_output(|| DescribeInstanceTopologyOutput::builder().build());
    let provider = provider(&[&describe, &zones, &topology], &[]);
    // Named after its instance and without a provider ID yet.
    let meta = provider
        .instance_metadata(&node("i-01.ec2.internal", None))
        .await
        .expect("found");
    assert_eq!(meta.provider_id, "aws:///us-east-1a/i-01");
    assert_eq!(meta.instance_type, "m5.large");
    assert_eq!(
        (meta.zone.as_str(), meta.region.as_str()),
        ("us-east-1a", "us-east-1")
    );
    assert_eq!(meta.additional_labels[crate::ZONE_ID_LABEL], "use1-az6");
    // Zones are cached: a second node costs no DescribeAvailabilityZones.
    provider
        .instance_metadata(&node("x", Some("aws:///us-east-1a/i-01")))
        .await
        .expect("found");
    assert_eq!(zones.num_calls(), 1);
    // An m5.large has no topology, and its type is not asked about again.
    assert_eq!(topology.num_calls(), 1);
    assert!(
        !meta
            .additional_labels
            .keys()
            .any(|k| k.starts_with(NETWORK_NODE_LABEL))
    );
}

/// `n` instance IDs, `i-0000`…
fn ids(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("i-{i:04}")).collect()
}

#[tokio::test]
async fn more_ids_than_a_filter_takes_cost_one_call_as_upstreams_route_listing() {
    let all = ids(250);
    let by_ids = mock!(Ec2::describe_instances)
        .match_requests(|input| input.instance_ids().len() == 250 && input.filters().is_empty())
        .then_output(|| {
            let found = ids(250)
                .iter()
                .map(|id| instance(id, InstanceStateName::Running))
                .collect();
            page(found, None)
        });
    let provider = provider(&[&by_ids], &[]);
    let cloud = provider.cloud().expect("configured");
    let found = cloud
        .instances_by_id(all.iter().map(String::as_str))
        .await
        .expect("answered");
    assert_eq!(found.len(), 250);
    assert_eq!(by_ids.num_calls(), 1);
}

#[tokio::test]
async fn one_unknown_id_among_many_falls_back_to_a_filter_per_200() {
    let all = ids(250);
    let by_ids = mock!(Ec2::describe_instances)
        .match_requests(|input| !input.instance_ids().is_empty())
        .then_error(|| DescribeInstancesError::generic(aws_error("InvalidInstanceID.NotFound")));
    let by_filter = mock!(Ec2::describe_instances)
        .match_requests(|input| {
            input.instance_ids().is_empty() && !filter_values(input, "instance-id").is_empty()
        })
        .then_output(|| page(vec![instance("i-0007", InstanceStateName::Running)], None));
    let provider = provider(&[&by_ids, &by_filter], &[]);
    let cloud = provider.cloud().expect("configured");
    let found = cloud
        .instances_by_id(all.iter().map(String::as_str))
        .await
        .expect("the filters answer");
    assert_eq!(found.keys().collect::<Vec<_>>(), ["i-0007"]);
    assert_eq!(by_ids.num_calls(), 1);
    assert_eq!(by_filter.num_calls(), 2, "one filter per 200 IDs");
}

#[tokio::test]
async fn any_other_failure_of_the_one_call_is_the_lookups_failure() {
    let all = ids(201);
    let by_ids = mock!(Ec2::describe_instances)
        .then_error(|| DescribeInstancesError::generic(aws_error("UnauthorizedOperation")));
    let provider = provider(&[&by_ids], &[]);
    let cloud = provider.cloud().expect("configured");
    let err = cloud
        .instances_by_id(all.iter().map(String::as_str))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Some("UnauthorizedOperation"));
    assert_eq!(by_ids.num_calls(), 1);
}
