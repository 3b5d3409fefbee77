//! Nodes end to end: the `aws-cloud-controller-manager` process initializes
//! kubelet-registered nodes from their EC2 instances, programs their pod
//! CIDRs as routes in the cluster's route table, and deletes the node of a
//! terminated instance.

use crate::support;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use ccm_provider_aws::ZONE_ID_LABEL;
use ccm_provider_aws::test_util::REGION;
use ccm_provider_aws::test_util::seed::INSTANCE_TYPE;
use ccm_test_support::{eventually, has_taint};
use kube::api::DeleteParams;
use support::objects::{
    SHUTDOWN, addresses, condition, create_node, events, is_initialized, kubelet_node, nodes,
    provider_id, set_ready,
};
use support::{E2e, aws};

/// How long the CCM may take to act on a change.
const ACT_WITHIN: Duration = Duration::from_secs(60);

#[tokio::test]
async fn registered_nodes_are_initialized_from_their_instances() -> anyhow::Result<()> {
    let e2e = E2e::start("initialized", 3, &[]).await?;
    for instance in &e2e.estate.instances {
        create_node(&e2e.client, &kubelet_node(instance, false, None)).await?;
    }
    let started = std::time::Instant::now();
    let initialized = eventually("every node initialized", ACT_WITHIN, || async {
        let list = nodes(&e2e.client).list(&Default::default()).await?;
        let done = list.items.iter().filter(|n| is_initialized(n)).count();
        Ok((done == e2e.estate.instances.len()).then_some(list.items))
    })
    .await?;
    println!("3 nodes initialized in {:?}", started.elapsed());

    for instance in &e2e.estate.instances {
        let node = initialized
            .iter()
            .find(|n| n.metadata.name.as_deref() == Some(&instance.private_dns_name))
            .expect("listed");
        assert_eq!(provider_id(node), Some(instance.provider_id().as_str()));
        let labels = node.metadata.labels.clone().unwrap_or_default();
        let label = |k: &str| labels.get(k).map(String::as_str);
        assert_eq!(
            label("node.kubernetes.io/instance-type"),
            Some(INSTANCE_TYPE)
        );
        assert_eq!(
            label("topology.kubernetes.io/zone"),
            Some(instance.zone.as_str())
        );
        assert_eq!(label("topology.kubernetes.io/region"), Some(REGION));
        assert!(
            label(ZONE_ID_LABEL).is_some_and(|id| id.starts_with("use1-az")),
            "{labels:?}"
        );
        let addresses = addresses(node);
        for want in [
            ("InternalIP", instance.private_ip.as_str()),
            ("InternalDNS", instance.private_dns_name.as_str()),
            ("Hostname", instance.private_dns_name.as_str()),
        ] {
            assert!(
                addresses
                    .iter()
                    .any(|(t, a)| (t.as_str(), a.as_str()) == want),
                "{want:?} missing from {addresses:?}"
            );
        }
    }

    // The AWS metrics keep upstream's names, next to the framework's.
    let metrics = e2e.ccm.metrics().await?;
    ccm_test_support::monitoring::check_chart_metrics_exported(
        &metrics,
        &[(
            "ccm_service_unhealthy_targets",
            "one series per LoadBalancer Service whose target health is read: this run has none",
        )],
    )?;
    let calls = aws::calls(&metrics);
    println!("AWS calls to initialize 3 nodes: {calls:?}");
    assert!(
        calls.get("describe_instance").is_some_and(|n| *n >= 1),
        "{calls:?}"
    );
    assert!(
        metrics.contains("# TYPE cloudprovider_aws_api_request_duration_seconds histogram"),
        "{metrics}"
    );
    assert!(
        aws::mutations(&metrics).is_empty(),
        "initializing nodes changes nothing in AWS: {calls:?}"
    );
    Ok(())
}

#[tokio::test]
async fn pod_cidrs_become_routes_to_their_instances_and_go_with_their_nodes() -> anyhow::Result<()>
{
    let e2e = E2e::start("routes", 2, &[]).await?;
    let [a, b] = [&e2e.estate.instances[0], &e2e.estate.instances[1]];
    create_node(&e2e.client, &kubelet_node(a, true, Some("10.244.1.0/24"))).await?;
    create_node(&e2e.client, &kubelet_node(b, true, Some("10.244.2.0/24"))).await?;

    let want = BTreeSet::from([
        ("10.244.1.0/24".to_owned(), a.id.clone()),
        ("10.244.2.0/24".to_owned(), b.id.clone()),
    ]);
    eventually("a route per pod CIDR", ACT_WITHIN, || async {
        let routes = aws::instance_routes(&e2e.ec2, &e2e.estate.route_table).await?;
        Ok((routes == want).then_some(()))
    })
    .await?;
    for instance in [a, b] {
        let (_, source_dest_check) = aws::instance(&e2e.ec2, &instance.id).await?;
        assert_eq!(
            source_dest_check,
            Some(false),
            "an instance that routes pod traffic must not drop it"
        );
    }
    eventually(
        "NetworkUnavailable=False on both nodes",
        ACT_WITHIN,
        || async {
            let list = nodes(&e2e.client).list(&Default::default()).await?;
            let routed = list
                .items
                .iter()
                .filter(|n| condition(n, "NetworkUnavailable").as_deref() == Some("False"))
                .count();
            Ok((routed == 2).then_some(()))
        },
    )
    .await?;

    nodes(&e2e.client)
        .delete(&b.private_dns_name, &DeleteParams::default())
        .await?;
    let want = BTreeSet::from([("10.244.1.0/24".to_owned(), a.id.clone())]);
    eventually("the deleted node's route removed", ACT_WITHIN, || async {
        let routes = aws::instance_routes(&e2e.ec2, &e2e.estate.route_table).await?;
        Ok((routes == want).then_some(()))
    })
    .await?;
    let table = e2e
        .ec2
        .describe_route_tables()
        .route_table_ids(&e2e.estate.route_table)
        .send()
        .await?;
    let gateway_routes = table
        .route_tables()
        .iter()
        .flat_map(|t| t.routes())
        .filter(|r| r.gateway_id().is_some_and(|g| g.starts_with("igw-")))
        .count();
    assert_eq!(
        gateway_routes, 1,
        "routes outside --cluster-cidr are left alone"
    );
    Ok(())
}

#[tokio::test]
async fn the_not_ready_node_of_a_terminated_instance_is_deleted() -> anyhow::Result<()> {
    let e2e = E2e::start("lifecycle", 3, &[]).await?;
    let [gone, stopped, running] = [
        &e2e.estate.instances[0],
        &e2e.estate.instances[1],
        &e2e.estate.instances[2],
    ];
    // Ready at first, so the CCM sees them Ready: a node never seen Ready is
    // spared for five minutes after it registered.
    for instance in [gone, stopped, running] {
        create_node(&e2e.client, &kubelet_node(instance, true, None)).await?;
    }
    eventually("every node initialized", ACT_WITHIN, || async {
        let list = nodes(&e2e.client).list(&Default::default()).await?;
        Ok((list.items.iter().filter(|n| is_initialized(n)).count() == 3).then_some(()))
    })
    .await?;

    // The kubelets stop posting status: the nodes turn NotReady.
    e2e.ec2
        .terminate_instances()
        .instance_ids(&gone.id)
        .send()
        .await?;
    e2e.ec2
        .stop_instances()
        .instance_ids(&stopped.id)
        .send()
        .await?;
    for instance in [gone, stopped, running] {
        set_ready(&e2e.client, &instance.private_dns_name, false).await?;
    }
    let started = std::time::Instant::now();
    eventually(
        "the terminated instance's node deleted",
        ACT_WITHIN,
        || async {
            let node = nodes(&e2e.client).get_opt(&gone.private_dns_name).await?;
            Ok(node.is_none().then_some(()))
        },
    )
    .await?;
    println!("deleted {:?} after NotReady", started.elapsed());
    let deleting = events(&e2e.client, &gone.private_dns_name, "Normal").await?;
    assert!(
        deleting
            .iter()
            .any(|e| e.reason.as_deref() == Some("DeletingNode")),
        "{deleting:?}"
    );
    eventually(
        "the stopped instance's node tainted",
        ACT_WITHIN,
        || async {
            let node = nodes(&e2e.client).get(&stopped.private_dns_name).await?;
            Ok(has_taint(&node, SHUTDOWN).then_some(()))
        },
    )
    .await?;

    // Nodes whose instances still exist stay, NotReady or not.
    let left: BTreeMap<String, bool> = nodes(&e2e.client)
        .list(&Default::default())
        .await?
        .items
        .iter()
        .map(|n| {
            (
                n.metadata.name.clone().unwrap_or_default(),
                has_taint(n, SHUTDOWN),
            )
        })
        .collect();
    assert_eq!(
        left,
        BTreeMap::from([
            (stopped.private_dns_name.clone(), true),
            (running.private_dns_name.clone(), false),
        ])
    );
    Ok(())
}
