//! What the `tagging` and `nodeipam` controllers ask of AWS, against mocked
//! EC2: IPv6 prefixes on interfaces (which moto lacks), instances AWS
//! cannot find and IDs it does not take in a batched `CreateTags`, and the
//! calls for 1,000 nodes (the figures in docs/benchmarks/report.md).

use std::collections::BTreeMap;

use aws_sdk_ec2::Client as Ec2;
use aws_sdk_ec2::operation::create_tags::{CreateTagsError, CreateTagsOutput};
use aws_sdk_ec2::operation::delete_tags::{DeleteTagsError, DeleteTagsOutput};
use aws_sdk_ec2::operation::describe_network_interfaces::DescribeNetworkInterfacesOutput;
use aws_sdk_ec2::types::{Ipv6PrefixSpecification, NetworkInterface, NetworkInterfaceAttachment};
use aws_smithy_mocks::{Rule, mock};
use ccm_cloud_provider::{InstanceTags, PodCidr, PodCidrs, TagOutcome};

use super::*;

fn interface(instance: &str, device: i32, prefixes: &[&str]) -> NetworkInterface {
    NetworkInterface::builder()
        .network_interface_id(format!("eni-{instance}-{device}"))
        .attachment(
            NetworkInterfaceAttachment::builder()
                .instance_id(instance)
                .device_index(device)
                .build(),
        )
        .set_ipv6_prefixes(Some(
            prefixes
                .iter()
                .map(|p| Ipv6PrefixSpecification::builder().ipv6_prefix(*p).build())
                .collect(),
        ))
        .build()
}

fn pid(instance: &str) -> String {
    format!("aws:///us-east-1a/{instance}")
}

fn tags() -> BTreeMap<String, String> {
    BTreeMap::from([
        ("team".to_owned(), "platform".to_owned()),
        ("cost-center".to_owned(), "42".to_owned()),
    ])
}

/// One `DescribeNetworkInterfaces` answering for every instance in its
/// `attachment.instance-id` filter, each with one prefix.
fn interfaces_of_every_instance() -> Rule {
    mock!(Ec2::describe_network_interfaces)
        .match_requests(|r| {
            r.filters()
                .iter()
                .any(|f| f.name() == Some("attachment.instance-id"))
        })
        .then_output(|| DescribeNetworkInterfacesOutput::builder().build())
}

#[tokio::test]
async fn prefixes_of_many_instances_come_from_one_describe_network_interfaces() {
    let describe = mock!(Ec2::describe_network_interfaces)
        .match_requests(|r| {
            let values: Vec<&str> = r
                .filters()
                .iter()
                .filter(|f| f.name() == Some("attachment.instance-id"))
                .flat_map(|f| f.values())
                .map(String::as_str)
                .collect();
            values == ["i-one", "i-two", "i-none", "i-multi", "i-gone"]
        })
        .then_output(|| {
            DescribeNetworkInterfacesOutput::builder()
                .network_interfaces(interface("i-one", 0, &["2600:1f14:1:8000::/80"]))
                .network_interfaces(interface(
                    "i-two",
                    0,
                    &["2600:1f14:2:8000::/80", "2600:1f14:2:9000::/80"],
                ))
                .network_interfaces(interface("i-none", 0, &[]))
                .network_interfaces(interface("i-multi", 1, &["2600:1f14:9:8000::/80"]))
                .network_interfaces(interface("i-multi", 0, &["2600:1f14:4:8000::/80"]))
                .build()
        });
    let provider = provider(&[&describe], &[]);
    let ids: Vec<String> = ["i-one", "i-two", "i-none", "i-multi", "i-gone"]
        .iter()
        .map(|i| pid(i))
        .chain(["aws:///us-east-1a/fargate-ip-10-0-0-1.ec2.internal".to_owned()])
        .collect();
    let answers = provider.pod_cidrs_of(&ids).await.expect("one call");
    assert_eq!(describe.num_calls(), 1);
    assert_eq!(
        answers[0].as_ref().ok(),
        Some(&PodCidr::Prefix("2600:1f14:1:8000::/80".parse().unwrap()))
    );
    let several = answers[1].as_ref().unwrap_err().to_string();
    assert!(
        several.contains("unexpected amount of IPv6 prefixes") && several.contains(": 2"),
        "{several}"
    );
    let none = answers[2].as_ref().unwrap_err().to_string();
    assert!(none.contains(": 0"), "{none}");
    assert_eq!(
        answers[3].as_ref().ok(),
        Some(&PodCidr::Prefix("2600:1f14:4:8000::/80".parse().unwrap())),
        "the primary interface's prefix"
    );
    assert_eq!(answers[4].as_ref().ok(), Some(&PodCidr::NotFound));
    assert!(
        matches!(answers[5], Ok(PodCidr::NotApplicable(_))),
        "a Fargate node is not looked up: {:?}",
        answers[5]
    );
}

#[tokio::test]
async fn instances_aws_cannot_find_are_dropped_from_the_batch_and_the_rest_tagged() {
    let refused = mock!(Ec2::create_tags)
        .match_requests(|r| r.resources().iter().any(|id| id == "i-gone"))
        .then_error(|| {
            CreateTagsError::generic(
                ErrorMetadata::builder()
                    .code("InvalidInstanceID.NotFound")
                    .message("The instance ID 'i-gone' does not exist")
                    .build(),
            )
        });
    let tagged = mock!(Ec2::create_tags)
        .match_requests(|r| {
            r.resources() == ["i-1", "i-2"]
                && r.tags().len() == 2
                && r.tags()
                    .iter()
                    .any(|t| t.key() == Some("team") && t.value() == Some("platform"))
        })
        .then_output(|| CreateTagsOutput::builder().build());
    let provider = provider(&[&refused, &tagged], &[]);
    let answers = provider
        .tag_instances(
            &[
                pid("i-1"),
                pid("i-gone"),
                pid("i-2"),
                "gce://p/z/vm".to_owned(),
            ],
            &tags(),
        )
        .await
        .expect("tagged");
    assert_eq!((refused.num_calls(), tagged.num_calls()), (1, 1));
    let answers: Vec<TagOutcome> = answers.into_iter().map(Result::unwrap).collect();
    assert_eq!(answers[0], TagOutcome::Done);
    assert_eq!(answers[1], TagOutcome::NotFound);
    assert_eq!(answers[2], TagOutcome::Done);
    assert!(
        matches!(answers[3], TagOutcome::NotTaggable(_)),
        "{:?}",
        answers[3]
    );
}

#[tokio::test]
async fn untagging_a_gone_instance_is_not_found_and_never_fails_the_others() {
    let refused = mock!(Ec2::delete_tags)
        .match_requests(|r| r.resources().iter().any(|id| id == "i-gone"))
        .then_error(|| {
            DeleteTagsError::generic(
                ErrorMetadata::builder()
                    .code("InvalidInstanceID.NotFound")
                    .message("The instance IDs 'i-gone' do not exist")
                    .build(),
            )
        });
    let untagged = mock!(Ec2::delete_tags)
        .match_requests(|r| {
            r.resources() == ["i-1"] && r.tags().iter().all(|t| t.value().is_some())
        })
        .then_output(|| DeleteTagsOutput::builder().build());
    let provider = provider(&[&refused, &untagged], &[]);
    let answers = provider
        .untag_instances(&[pid("i-gone"), pid("i-1")], &tags())
        .await
        .expect("untagged");
    assert_eq!(answers[0].as_ref().ok(), Some(&TagOutcome::NotFound));
    assert_eq!(answers[1].as_ref().ok(), Some(&TagOutcome::Done));
    assert_eq!(untagged.num_calls(), 1);
}

#[tokio::test]
async fn an_instance_id_aws_calls_invalid_is_not_taggable_and_the_rest_are_tagged() {
    let refused = mock!(Ec2::create_tags)
        .match_requests(|r| r.resources().iter().any(|id| id == "i-kwok1"))
        .then_error(|| {
            CreateTagsError::generic(
                ErrorMetadata::builder()
                    .code("InvalidID")
                    .message("The ID 'i-kwok1' is not valid")
                    .build(),
            )
        });
    let tagged = mock!(Ec2::create_tags)
        .match_requests(|r| r.resources() == ["i-1", "i-2"])
        .then_output(|| CreateTagsOutput::builder().build());
    let provider = provider(&[&refused, &tagged], &[]);
    let answers = provider
        .tag_instances(&[pid("i-1"), pid("i-kwok1"), pid("i-2")], &tags())
        .await
        .expect("tagged");
    assert_eq!((refused.num_calls(), tagged.num_calls()), (1, 1));
    let answers: Vec<TagOutcome> = answers.into_iter().map(Result::unwrap).collect();
    assert_eq!(answers[0], TagOutcome::Done);
    assert!(
        matches!(&answers[1], TagOutcome::NotTaggable(reason) if reason.contains("InvalidID")),
        "{:?}",
        answers[1]
    );
    assert_eq!(answers[2], TagOutcome::Done);
}

#[tokio::test]
async fn an_invalid_id_aws_does_not_name_is_found_by_splitting_the_batch() {
    let refused = mock!(Ec2::delete_tags)
        .match_requests(|r| r.resources().iter().any(|id| id == "i-kwok1"))
        .then_error(|| DeleteTagsError::generic(aws_error("InvalidID")));
    let untagged = mock!(Ec2::delete_tags)
        .match_requests(|r| !r.resources().iter().any(|id| id == "i-kwok1"))
        .then_output(|| DeleteTagsOutput::builder().build());
    let provider = provider(&[&refused, &untagged], &[]);
    let answers = provider
        .untag_instances(
            &[pid("i-1"), pid("i-kwok1"), pid("i-2"), pid("i-3")],
            &tags(),
        )
        .await
        .expect("untagged");
    let answers: Vec<TagOutcome> = answers.into_iter().map(Result::unwrap).collect();
    assert_eq!(answers[0], TagOutcome::Done);
    assert!(
        matches!(answers[1], TagOutcome::NotTaggable(_)),
        "{:?}",
        answers[1]
    );
    assert_eq!(answers[2..], [TagOutcome::Done, TagOutcome::Done]);
    // All four, then [i-1, i-kwok1] and [i-kwok1] refused; [i-1] and
    // [i-2, i-3] untagged.
    assert_eq!((refused.num_calls(), untagged.num_calls()), (3, 2));
}

#[tokio::test]
async fn a_thousand_nodes_cost_one_create_tags_one_delete_tags_and_five_describe_network_interfaces()
 {
    let create = mock!(Ec2::create_tags)
        .match_requests(|r| r.resources().len() <= 1000)
        .then_output(|| CreateTagsOutput::builder().build());
    let delete = mock!(Ec2::delete_tags)
        .match_requests(|r| r.resources().len() <= 1000)
        .then_output(|| DeleteTagsOutput::builder().build());
    let describe = interfaces_of_every_instance();
    let provider = provider(&[&create, &delete, &describe], &[]);
    let ids: Vec<String> = (0..1000).map(|i| pid(&format!("i-{i:017x}"))).collect();
    let done = |answers: Vec<Result<TagOutcome, ccm_cloud_provider::CloudError>>| {
        answers
            .iter()
            .all(|a| a.as_ref().ok() == Some(&TagOutcome::Done))
    };
    assert!(done(
        provider.tag_instances(&ids, &tags()).await.expect("tagged")
    ));
    assert!(done(
        provider
            .untag_instances(&ids, &tags())
            .await
            .expect("untagged")
    ));
    // The controller hands the provider at most max_batch_size IDs a call.
    let batch = PodCidrs::max_batch_size(&provider).get();
    for chunk in ids.chunks(batch) {
        provider.pod_cidrs_of(chunk).await.expect("looked up");
    }
    let (tag_calls, untag_calls, describe_calls) =
        (create.num_calls(), delete.num_calls(), describe.num_calls());
    println!(
        "figure: tag 1000 joining nodes: {tag_calls} CreateTags (upstream: 1000, one per node; 20 with --tagging-controller-enable-batching, 50 a call)"
    );
    println!(
        "figure: untag 1000 deleted nodes: {untag_calls} DeleteTags (upstream: 1000, one per node)"
    );
    println!(
        "figure: set 1000 pod CIDRs: {describe_calls} DescribeNetworkInterfaces (upstream: 1000, one per node)"
    );
    assert_eq!(tag_calls, 1000usize.div_ceil(1000));
    assert_eq!(untag_calls, 1000usize.div_ceil(1000));
    assert_eq!(describe_calls, 1000usize.div_ceil(200));
}
