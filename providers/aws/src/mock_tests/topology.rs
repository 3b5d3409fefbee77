//! Network topology labels against mocked EC2 (moto has no
//! `DescribeInstanceTopology`): one call per batch, the labels per layer,
//! and what is remembered as having no topology.

use std::sync::Arc;

use aws_sdk_ec2::Client as Ec2;
use aws_sdk_ec2::operation::describe_availability_zones::DescribeAvailabilityZonesOutput;
use aws_sdk_ec2::operation::describe_instance_topology::{
    DescribeInstanceTopologyError, DescribeInstanceTopologyOutput,
};
use aws_sdk_ec2::operation::describe_instances::DescribeInstancesOutput;
use aws_sdk_ec2::types::{
    AvailabilityZone, Instance, InstanceState, InstanceStateName, InstanceTopology, InstanceType,
    Placement, Reservation,
};
use aws_smithy_mocks::{Rule, mock};
use ccm_cloud_provider::k8s_openapi::api::core::v1::Node;
use ccm_cloud_provider::{BatchResult, CloudError, InstanceMetadata, Instances};

use super::*;

const LAYER_1: &str = "topology.k8s.aws/network-node-layer-1";

/// Instances `(id, type)`, running in us-east-1a.
fn described(instances: &'static [(&'static str, &'static str)]) -> Rule {
    mock!(Ec2::describe_instances).then_output(move || {
        let instances = instances
            .iter()
            .map(|(id, kind)| {
                Instance::builder()
                    .instance_id(*id)
                    .instance_type(InstanceType::from(*kind))
                    .placement(Placement::builder().availability_zone("us-east-1a").build())
                    .state(
                        InstanceState::builder()
                            .name(InstanceStateName::Running)
                            .build(),
                    )
                    .build()
            })
            .collect();
        DescribeInstancesOutput::builder()
            .reservations(
                Reservation::builder()
                    .set_instances(Some(instances))
                    .build(),
            )
            .build()
    })
}

fn zones() -> Rule {
    mock!(Ec2::describe_availability_zones).then_output(|| {
        DescribeAvailabilityZonesOutput::builder()
            .availability_zones(
                AvailabilityZone::builder()
                    .zone_name("us-east-1a")
                    .zone_id("use1-az6")
                    .build(),
            )
            .build()
    })
}

/// AWS's answer: the network nodes of each `(id, nodes)`.
fn topologies(known: &'static [(&'static str, &'static [&'static str])]) -> Rule {
    mock!(Ec2::describe_instance_topology).then_output(move || {
        let instances = known
            .iter()
            .map(|(id, nodes)| {
                InstanceTopology::builder()
                    .instance_id(*id)
                    .set_network_nodes(Some(nodes.iter().map(|n| (*n).to_owned()).collect()))
                    .build()
            })
            .collect();
        DescribeInstanceTopologyOutput::builder()
            .set_instances(Some(instances))
            .build()
    })
}

fn nodes_of(ids: &[&str]) -> Vec<Arc<Node>> {
    ids.iter()
        .map(|id| node(id, Some(&format!("aws:///us-east-1a/{id}"))))
        .collect()
}

fn layers(meta: &InstanceMetadata) -> Vec<(&str, &str)> {
    meta.additional_labels
        .iter()
        .filter(|(k, _)| k.starts_with("topology.k8s.aws/network-node-layer-"))
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect()
}

fn all_ok(answers: BatchResult<InstanceMetadata>) -> Vec<InstanceMetadata> {
    answers
        .expect("the batch is answered")
        .into_iter()
        .map(|a| a.expect("each node is answered"))
        .collect()
}

#[tokio::test]
async fn one_call_labels_a_batch_layer_by_layer_and_types_without_one_are_not_asked_again() {
    let ec2 = described(&[
        ("i-0p5a", "p5.48xlarge"),
        ("i-0p5b", "p5.48xlarge"),
        ("i-0m5", "m5.large"),
    ]);
    let topology = topologies(&[
        ("i-0p5a", &["nn-1", "nn-2", "nn-3"]),
        ("i-0p5b", &["nn-1", "nn-2", "nn-4"]),
    ]);
    let zones = zones();
    let provider = provider(&[&ec2, &zones, &topology], &[]);
    let nodes = nodes_of(&["i-0p5a", "i-0p5b", "i-0m5"]);
    let metas = all_ok(provider.instances_metadata(&nodes).await);
    assert_eq!(
        layers(&metas[0]),
        [
            (LAYER_1, "nn-1"),
            ("topology.k8s.aws/network-node-layer-2", "nn-2"),
            ("topology.k8s.aws/network-node-layer-3", "nn-3"),
        ]
    );
    assert_eq!(
        layers(&metas[1])[2],
        ("topology.k8s.aws/network-node-layer-3", "nn-4")
    );
    assert!(layers(&metas[2]).is_empty());
    assert_eq!(topology.num_calls(), 1, "one call for the batch");

    // The m5.large answered nothing: its type is not asked about again.
    // A node that already has its labels is not asked about either.
    let mut labelled = (*nodes_of(&["i-0p5a"])[0]).clone();
    labelled.metadata.labels = Some([(LAYER_1.to_owned(), "nn-1".to_owned())].into());
    let again = vec![Arc::new(labelled), nodes_of(&["i-0m5"])[0].clone()];
    all_ok(provider.instances_metadata(&again).await);
    assert_eq!(topology.num_calls(), 1);
}

#[tokio::test]
async fn an_expected_type_that_answers_nothing_is_not_asked_about_again() {
    let ec2 = described(&[("i-0p5a", "p5.48xlarge"), ("i-0p5b", "p5.48xlarge")]);
    let topology = topologies(&[("i-0p5b", &["nn-1"])]);
    let zones = zones();
    let provider = provider(&[&ec2, &zones, &topology], &[]);
    all_ok(provider.instances_metadata(&nodes_of(&["i-0p5a"])).await);
    // i-0p5a is remembered (it may be stopping), not its type.
    let metas = all_ok(
        provider
            .instances_metadata(&nodes_of(&["i-0p5a", "i-0p5b"]))
            .await,
    );
    assert_eq!(topology.num_calls(), 2);
    assert!(layers(&metas[0]).is_empty());
    assert_eq!(layers(&metas[1]), [(LAYER_1, "nn-1")]);
    all_ok(provider.instances_metadata(&nodes_of(&["i-0p5a"])).await);
    assert_eq!(topology.num_calls(), 2);
}

#[tokio::test]
async fn a_region_without_the_call_or_the_permission_is_not_asked_again() {
    for code in ["UnauthorizedOperation", "UnsupportedOperation"] {
        let ec2 = described(&[("i-0p5a", "p5.48xlarge")]);
        let topology = mock!(Ec2::describe_instance_topology)
            .then_error(move || DescribeInstanceTopologyError::generic(aws_error(code)));
        let zones = zones();
        let provider = provider(&[&ec2, &zones, &topology], &[]);
        for _ in 0..2 {
            let metas = all_ok(provider.instances_metadata(&nodes_of(&["i-0p5a"])).await);
            assert!(layers(&metas[0]).is_empty(), "{code}");
        }
        assert_eq!(topology.num_calls(), 1, "{code}");
    }
}

#[tokio::test]
async fn a_failed_call_fails_only_nodes_whose_type_is_expected_to_answer() {
    let ec2 = described(&[("i-0p5a", "p5.48xlarge"), ("i-0m5", "m5.large")]);
    let topology = mock!(Ec2::describe_instance_topology)
        .then_error(|| DescribeInstanceTopologyError::generic(aws_error("InvalidParameterValue")));
    let zones = zones();
    let provider = provider(&[&ec2, &zones, &topology], &[]);
    let answers = provider
        .instances_metadata(&nodes_of(&["i-0p5a", "i-0m5"]))
        .await
        .expect("the batch is answered");
    match &answers[0] {
        Err(CloudError::Other { message, .. }) => {
            assert!(
                message.contains("DescribeInstanceTopology failed: InvalidParameterValue"),
                "{message}"
            );
        }
        other => panic!("the p5 node must wait for its topology: {other:?}"),
    }
    let m5 = answers[1]
        .as_ref()
        .expect("the m5 node goes on without labels");
    assert!(layers(m5).is_empty());
    // Nothing was remembered: the next pass asks again.
    let _ = provider.instances_metadata(&nodes_of(&["i-0p5a"])).await;
    assert_eq!(topology.num_calls(), 2);
}

#[tokio::test]
async fn the_configured_pattern_decides_which_types_must_answer() {
    let config = AwsConfig::parse(&ccm_cloud_provider::CloudConfig::new(
        "/etc/aws.conf",
        "[Global]\nSupportedTopologyInstanceTypePattern = ^m5[.]\n",
    ))
    .expect("valid");
    let ec2 = described(&[("i-0m5", "m5.large")]);
    let topology = mock!(Ec2::describe_instance_topology)
        .then_error(|| DescribeInstanceTopologyError::generic(aws_error("InvalidParameterValue")));
    let zones = zones();
    let provider = provider_with(config, &[&ec2, &zones, &topology], &[], GENEROUS);
    let answers = provider
        .instances_metadata(&nodes_of(&["i-0m5"]))
        .await
        .expect("the batch is answered");
    assert!(
        answers[0].is_err(),
        "an m5 must now answer: {:?}",
        answers[0]
    );
}
