//! Instance lookups against moto: nodes are found by provider ID or by
//! private DNS name, described as upstream describes them, and their
//! existence and shutdown follow the instances' states.

use ccm_cloud_provider::{CloudError, NodeAddress, NodeAddressType};
use ccm_provider_aws::ZONE_ID_LABEL;
use std::collections::BTreeMap;

use ccm_provider_aws::test_util::proxy::Proxy;
use ccm_provider_aws::test_util::{CLUSTER, REGION, ec2, moto, node, provider, provider_at, seed};

#[tokio::test]
async fn nodes_are_found_by_provider_id_or_private_dns_name_and_described() {
    let moto = moto().await;
    let ec2 = ec2(&moto);
    let estate = seed::estate(&ec2, 2).await.expect("seeded");
    let provider = provider(&moto, "").await;
    let instances = provider.instances().expect("AWS has instances");
    let [a, b] = [&estate.instances[0], &estate.instances[1]];

    let nodes = [a.node(), node(&b.private_dns_name, None)];
    let described = instances
        .instances_metadata(&nodes)
        .await
        .expect("answered");
    let first = described[0].as_ref().expect("found by provider ID");
    assert_eq!(first.provider_id, a.provider_id());
    assert_eq!(first.instance_type, "m5.large");
    assert_eq!(
        (first.zone.as_str(), first.region.as_str()),
        ("us-east-1a", REGION)
    );
    assert!(
        first.additional_labels[ZONE_ID_LABEL].starts_with("use1-az"),
        "{first:?}"
    );
    assert_eq!(
        first.node_addresses,
        [
            NodeAddress::new(NodeAddressType::InternalIp, &a.private_ip),
            NodeAddress::new(NodeAddressType::InternalDns, &a.private_dns_name),
            NodeAddress::new(NodeAddressType::Hostname, &a.private_dns_name),
        ]
    );
    let second = described[1].as_ref().expect("found by private DNS name");
    assert_eq!(second.provider_id, format!("aws:///us-east-1b/{}", b.id));
    assert_eq!(second.zone, "us-east-1b");
}

#[tokio::test]
async fn terminated_instances_do_not_exist_and_stopped_ones_are_shut_down() {
    let moto = moto().await;
    let ec2 = ec2(&moto);
    let estate = seed::estate(&ec2, 3).await.expect("seeded");
    let [running, stopped, terminated] = [
        &estate.instances[0],
        &estate.instances[1],
        &estate.instances[2],
    ];
    ec2.stop_instances()
        .instance_ids(&stopped.id)
        .send()
        .await
        .expect("stopped");
    ec2.terminate_instances()
        .instance_ids(&terminated.id)
        .send()
        .await
        .expect("terminated");
    let provider = provider(&moto, "").await;
    let instances = provider.instances().expect("AWS has instances");

    let never_existed = node("gone", Some("aws:///us-east-1a/i-0123456789abcdef0"));
    let nodes = [
        running.node(),
        stopped.node(),
        terminated.node(),
        never_existed,
    ];
    let exist: Vec<bool> = instances
        .instances_exist(&nodes)
        .await
        .expect("answered")
        .into_iter()
        .map(|r| r.expect("known"))
        .collect();
    assert_eq!(exist, [true, true, false, false]);

    let shutdown = instances
        .instances_shutdown(&nodes)
        .await
        .expect("answered");
    assert!(matches!(shutdown[0], Ok(false)));
    assert!(matches!(shutdown[1], Ok(true)));
    assert!(matches!(shutdown[2], Err(CloudError::InstanceNotFound)));
    assert!(matches!(shutdown[3], Err(CloudError::InstanceNotFound)));

    let err = instances
        .instance_metadata(&terminated.node())
        .await
        .unwrap_err();
    assert!(matches!(err, CloudError::InstanceNotFound), "{err:?}");
}

#[tokio::test]
async fn a_node_named_after_no_instance_is_not_found_and_another_clusters_instance_is_not_ours() {
    let moto = moto().await;
    let ec2 = ec2(&moto);
    let estate = seed::estate(&ec2, 1).await.expect("seeded");
    // An instance in the VPC without this cluster's tag.
    let stranger = ec2
        .run_instances()
        .image_id("ami-12c6146b")
        .min_count(1)
        .max_count(1)
        .subnet_id(&estate.public_subnets[0])
        .send()
        .await
        .expect("ran");
    let stranger_name = stranger.instances()[0]
        .private_dns_name()
        .unwrap_or_default()
        .to_owned();
    let provider = provider(&moto, "").await;
    let instances = provider.instances().expect("AWS has instances");
    let exist = instances
        .instances_exist(&[
            node("ip-10-9-9-9.ec2.internal", None),
            node(&stranger_name, None),
        ])
        .await
        .expect("answered");
    assert!(matches!(exist[..], [Ok(false), Ok(false)]), "{exist:?}");
}

#[tokio::test]
async fn batches_answer_in_input_order() {
    let moto = moto().await;
    let ec2 = ec2(&moto);
    let estate = seed::estate(&ec2, 5).await.expect("seeded");
    let provider = provider(&moto, "").await;
    let instances = provider.instances().expect("AWS has instances");
    let mut nodes: Vec<_> = estate.instances.iter().rev().map(|i| i.node()).collect();
    nodes.insert(
        2,
        node("missing", Some("aws:///us-east-1a/i-0000000000000dead")),
    );
    let described = instances
        .instances_metadata(&nodes)
        .await
        .expect("answered");
    let ids: Vec<String> = described
        .iter()
        .map(|r| match r {
            Ok(m) => m
                .provider_id
                .rsplit('/')
                .next()
                .unwrap_or_default()
                .to_owned(),
            Err(e) => e.kind().to_owned(),
        })
        .collect();
    let mut want: Vec<String> = estate
        .instances
        .iter()
        .rev()
        .map(|i| i.id.clone())
        .collect();
    want.insert(2, "not_found".to_owned());
    assert_eq!(ids, want);
}

#[tokio::test]
async fn a_configured_role_is_assumed_through_sts_for_every_call() {
    let moto = moto().await;
    let ec2 = ec2(&moto);
    let estate = seed::estate(&ec2, 1).await.expect("seeded");
    let role = "arn:aws:iam::123456789012:role/cloud-controller-manager";
    let provider = provider(&moto, &format!("RoleARN = {role}")).await;
    let instances = provider.instances().expect("AWS has instances");
    assert!(
        instances
            .instance_exists(&estate.instances[0].node())
            .await
            .expect("answered")
    );
    let state = moto.state().await;
    let assumed = state["sts"]["AssumedRole"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(
        assumed
            .iter()
            .any(|a| a["role_arn"] == role && a["session_name"] == "aws-cloud-controller-manager"),
        "{assumed:?}"
    );
}

#[tokio::test]
async fn the_role_is_assumed_with_upstreams_source_headers() {
    let moto = moto().await;
    let estate = seed::estate(&ec2(&moto), 1).await.expect("seeded");
    let proxy = Proxy::start(&moto.endpoint).await.expect("proxy started");
    let role = "arn:aws:iam::123456789012:role/cloud-controller-manager";
    let source = "arn:aws:eks:us-east-1:123456789012:cluster/prod";
    let provider = provider_at(
        &proxy.endpoint,
        CLUSTER,
        &format!("RoleARN = {role}\nSourceARN = {source}"),
    )
    .await;
    let instances = provider.instances().expect("AWS has instances");
    assert!(
        instances
            .instance_exists(&estate.instances[0].node())
            .await
            .expect("answered")
    );
    let calls = proxy.calls();
    let assumed: Vec<_> = calls.iter().filter(|c| c.action == "AssumeRole").collect();
    assert_eq!(assumed.len(), 1, "assumed once, then cached: {calls:?}");
    assert_eq!(
        assumed[0].source_headers,
        BTreeMap::from([
            ("x-amz-source-account".to_owned(), "123456789012".to_owned()),
            ("x-amz-source-arn".to_owned(), source.to_owned()),
        ])
    );
    let describe = calls
        .iter()
        .find(|c| c.action == "DescribeInstances")
        .expect("described");
    assert!(describe.source_headers.is_empty(), "only STS carries them");
}
