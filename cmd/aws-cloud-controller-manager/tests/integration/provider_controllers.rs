//! AWS's own controllers end to end against moto: `--controllers=*,tagging`
//! tags every initialized node's instance and takes exactly those tags off
//! a deleted node's instance; `--controllers=*,nodeipam` reads the nodes'
//! interfaces (moto has no IPv6 prefixes on them, so the prefix itself is
//! proven against mocked EC2 in ccm-provider-aws).

use crate::support;

use std::collections::BTreeMap;
use std::time::Duration;

use ccm_test_support::eventually;
use kube::api::DeleteParams;
use support::ccm::launch;
use support::objects::{create_node, is_initialized, kubelet_node, nodes};
use support::{E2e, aws};

const ACT_WITHIN: Duration = Duration::from_secs(60);

async fn instance_tags(
    ec2: &aws_sdk_ec2::Client,
    instance: &str,
) -> anyhow::Result<BTreeMap<String, String>> {
    let out = ec2
        .describe_tags()
        .filters(
            aws_sdk_ec2::types::Filter::builder()
                .name("resource-id")
                .values(instance)
                .build(),
        )
        .send()
        .await?;
    Ok(out
        .tags()
        .iter()
        .map(|t| {
            (
                t.key().unwrap_or_default().to_owned(),
                t.value().unwrap_or_default().to_owned(),
            )
        })
        .collect())
}

fn has_both(tags: &BTreeMap<String, String>) -> bool {
    tags.get("team").map(String::as_str) == Some("platform")
        && tags.get("cost-center").map(String::as_str) == Some("42")
}

#[tokio::test]
async fn initialized_nodes_instances_are_tagged_and_a_deleted_nodes_untagged() -> anyhow::Result<()>
{
    let e2e = E2e::start(
        "tagging",
        3,
        &[
            "--controllers=*,tagging",
            "--tags=team=platform,cost-center=42",
            "--resources=instance",
        ],
    )
    .await?;
    let instances = &e2e.estate.instances;
    // A tag someone set by hand stays when the node goes.
    e2e.ec2
        .create_tags()
        .resources(&instances[0].id)
        .tags(
            aws_sdk_ec2::types::Tag::builder()
                .key("owner")
                .value("alice")
                .build(),
        )
        .send()
        .await?;
    let before = instance_tags(&e2e.ec2, &instances[0].id).await?;
    for instance in instances {
        create_node(&e2e.client, &kubelet_node(instance, true, None)).await?;
    }
    eventually("every instance carries both tags", ACT_WITHIN, || async {
        for instance in instances {
            if !has_both(&instance_tags(&e2e.ec2, &instance.id).await?) {
                return Ok(None);
            }
        }
        Ok(Some(()))
    })
    .await
    .map_err(|e| anyhow::anyhow!("{e}\n{}", e2e.ccm.log_tail()))?;
    // The label follows the tags in a write of its own: wait for it too
    // (checked at once, it failed once on the real API server).
    eventually(
        "every node initialized and labelled as tagged",
        ACT_WITHIN,
        || async {
            let list = nodes(&e2e.client).list(&Default::default()).await?;
            Ok(list
                .items
                .iter()
                .all(|node| {
                    is_initialized(node)
                        && node
                            .metadata
                            .labels
                            .as_ref()
                            .is_some_and(|l| l.contains_key(ccm_provider_aws::TAGGED_LABEL))
                })
                .then_some(()))
        },
    )
    .await
    .map_err(|e| anyhow::anyhow!("{e}\n{}", e2e.ccm.log_tail()))?;

    nodes(&e2e.client)
        .delete(&instances[0].private_dns_name, &DeleteParams::default())
        .await?;
    let left = eventually(
        "the deleted node's instance untagged",
        ACT_WITHIN,
        || async {
            let tags = instance_tags(&e2e.ec2, &instances[0].id).await?;
            Ok((!tags.contains_key("team")).then_some(tags))
        },
    )
    .await?;
    assert_eq!(
        left, before,
        "exactly the --tags are removed, all others kept"
    );
    for instance in &instances[1..] {
        assert!(
            has_both(&instance_tags(&e2e.ec2, &instance.id).await?),
            "other instances keep their tags"
        );
    }
    let metrics = e2e.ccm.metrics().await?;
    let calls = aws::calls(&metrics);
    println!("AWS calls: {calls:?}");
    assert!(
        calls
            .get("create_tags")
            .is_some_and(|n| (1..=3).contains(n)),
        "{calls:?}"
    );
    assert_eq!(calls.get("delete_tags"), Some(&1), "{calls:?}");
    Ok(())
}

#[tokio::test]
async fn nodeipam_reads_the_nodes_interfaces_and_leaves_pod_cidrs_alone() -> anyhow::Result<()> {
    let e2e = E2e::start(
        "nodeipam",
        2,
        &["--controllers=*,nodeipam", "--dualstack=false"],
    )
    .await?;
    let [plain, routed] = [&e2e.estate.instances[0], &e2e.estate.instances[1]];
    create_node(&e2e.client, &kubelet_node(plain, true, None)).await?;
    create_node(
        &e2e.client,
        &kubelet_node(routed, true, Some("10.244.7.0/24")),
    )
    .await?;
    // moto's interfaces carry no IPv6 prefix: the node is retried, and the
    // error counted under upstream's metric name.
    let metrics = eventually(
        "the interface read and its lack of a prefix counted",
        ACT_WITHIN,
        || async {
            let metrics = e2e.ccm.metrics().await?;
            let counted = metrics.lines().any(|l| {
                l.starts_with("cloudprovider_aws_nodeipam_controller_work_item_errors_total{")
                    && l.contains(&plain.id)
            });
            Ok(counted.then_some(metrics))
        },
    )
    .await
    .map_err(|e| anyhow::anyhow!("{e}\n{}", e2e.ccm.log_tail()))?;
    let calls = aws::calls(&metrics);
    assert!(
        calls.contains_key("describe_network_interfaces"),
        "{calls:?}"
    );
    let node = nodes(&e2e.client).get(&routed.private_dns_name).await?;
    assert_eq!(
        node.spec.and_then(|s| s.pod_cidrs),
        Some(vec!["10.244.7.0/24".to_owned()]),
        "a node with pod CIDRs is left alone"
    );
    let node = nodes(&e2e.client).get(&plain.private_dns_name).await?;
    assert_eq!(node.spec.and_then(|s| s.pod_cidrs), None);
    Ok(())
}

#[tokio::test]
async fn bad_provider_controller_flags_exit_64_with_one_line_naming_the_flag() -> anyhow::Result<()>
{
    for (name, flags, expected) in [
        (
            "no-tags",
            &["--controllers=*,tagging", "--resources=instance"][..],
            "aws-cloud-controller-manager: --tags must not be empty and must be a form of key=value",
        ),
        (
            "bad-resource",
            &[
                "--controllers=*,tagging",
                "--tags=team=platform",
                "--resources=volume",
            ][..],
            "aws-cloud-controller-manager: --resources: volume is not a supported resource. Current supported resources [instance]",
        ),
        (
            "bad-mask",
            &[
                "--controllers=*,nodeipam",
                "--dualstack",
                "--cluster-cidr=10.244.0.0/16",
                "--node-cidr-mask-size=8",
            ][..],
            "aws-cloud-controller-manager: --node-cidr-mask-size=8: must be between the --cluster-cidr prefix length (16) and 32",
        ),
    ] {
        // Unreachable on purpose: bad flags are refused before any connection.
        let mut args = vec![
            "--master=http://127.0.0.1:9".to_owned(),
            "--secure-port=0".to_owned(),
        ];
        args.extend(flags.iter().map(|f| (*f).to_owned()));
        let (status, output) = launch(name, &args).run_to_exit().await?;
        assert_eq!(status.code(), Some(64), "{name}: {output}");
        assert_eq!(output.lines().collect::<Vec<_>>(), [expected], "{name}");
    }
    Ok(())
}
