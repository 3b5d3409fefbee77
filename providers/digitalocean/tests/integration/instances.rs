//! Nodes as droplets: lookups by provider ID and by name, metadata, status,
//! and batches answered by one droplet listing.

use crate::support;

use std::sync::Arc;

use ccm_cloud_provider::{CloudError, Instances, NodeAddress, NodeAddressType};
use ccm_provider_digitalocean::MAX_BATCH_SIZE;
use ccm_provider_digitalocean::test_util::{FakeDroplet, account};
use support::node;

#[tokio::test]
async fn metadata_by_provider_id_describes_the_droplet() {
    let account = account();
    account.add_droplet(FakeDroplet::new(1001, "worker-a").with_ipv6("2604:a880:800:10::1"));
    let provider = account.provider().await;
    account.clear_requests();

    let meta = provider
        .instance_metadata(&node("worker-a", Some("digitalocean://1001")))
        .await
        .unwrap();

    assert_eq!(meta.provider_id, "digitalocean://1001");
    assert_eq!(meta.instance_type, "s-2vcpu-4gb");
    assert_eq!(meta.region, "nyc3");
    assert_eq!(meta.zone, "", "DigitalOcean has no zones");
    assert_eq!(
        meta.node_addresses,
        [
            NodeAddress::new(NodeAddressType::Hostname, "worker-a"),
            NodeAddress::new(NodeAddressType::InternalIp, "10.10.4.2"),
            NodeAddress::new(NodeAddressType::ExternalIp, "203.0.4.2"),
            NodeAddress::new(NodeAddressType::ExternalIp, "2604:a880:800:10::1"),
        ]
    );
    assert_eq!(account.count("GET", "/v2/droplets/1001"), 1);
    assert_eq!(
        account.requests().len(),
        1,
        "one GET by ID: {:?}",
        account.requests()
    );
}

#[tokio::test]
async fn node_without_provider_id_is_found_by_droplet_name() {
    let account = account();
    account.add_droplets(5);
    let provider = account.provider().await;
    account.clear_requests();

    let meta = provider
        .instance_metadata(&node("node-3", None))
        .await
        .unwrap();

    assert_eq!(meta.provider_id, "digitalocean://1003");
    let requests = account.requests();
    assert_eq!(requests.len(), 1, "{requests:?}");
    assert_eq!(requests[0].path, "/v2/droplets");
    assert!(
        requests[0].query.contains("name=node-3"),
        "filtered by name: {:?}",
        requests[0]
    );
}

#[tokio::test]
async fn one_droplet_listing_answers_a_whole_batch() {
    let account = account();
    account.add_droplets(450);
    let provider = account.provider().await;
    account.clear_requests();
    assert_eq!(provider.max_batch_size().get(), MAX_BATCH_SIZE);

    let mut nodes: Vec<_> = (0..MAX_BATCH_SIZE - 2)
        .map(|i| {
            let by_id = format!("digitalocean://{}", 1000 + i * 2);
            if i % 2 == 0 {
                node(&format!("node-{}", i * 2), Some(&by_id))
            } else {
                node(&format!("node-{}", i * 2), None)
            }
        })
        .collect();
    nodes.push(node("gone", Some("digitalocean://999999")));
    nodes.push(node("never-existed", None));

    let metas = provider.instances_metadata(&nodes).await.unwrap();
    let exist = provider.instances_exist(&nodes).await.unwrap();

    assert_eq!(metas.len(), nodes.len());
    for (i, meta) in metas.iter().take(MAX_BATCH_SIZE - 2).enumerate() {
        let meta = meta.as_ref().unwrap();
        assert_eq!(
            meta.provider_id,
            format!("digitalocean://{}", 1000 + i * 2),
            "node {i}"
        );
    }
    assert!(matches!(
        metas[MAX_BATCH_SIZE - 2],
        Err(CloudError::InstanceNotFound)
    ));
    assert!(matches!(
        metas[MAX_BATCH_SIZE - 1],
        Err(CloudError::InstanceNotFound)
    ));
    assert!(
        exist[..MAX_BATCH_SIZE - 2]
            .iter()
            .all(|e| matches!(e, Ok(true)))
    );
    assert!(matches!(exist[MAX_BATCH_SIZE - 2], Ok(false)));
    assert!(matches!(exist[MAX_BATCH_SIZE - 1], Ok(false)));
    // 450 droplets are 3 pages of 200; each batch call lists them once.
    assert_eq!(
        account.count("GET", "/v2/droplets"),
        6,
        "{:?}",
        account.requests()
    );
    assert_eq!(account.requests().len(), 6);
}

#[tokio::test]
async fn shutdown_follows_the_droplet_status_and_deleted_droplets_do_not_exist() {
    let account = account();
    account.add_droplets(2);
    let provider = account.provider().await;
    let running = node("node-0", Some("digitalocean://1000"));
    let stopped = node("node-1", Some("digitalocean://1001"));
    account.set_droplet_status(1001, "off");

    assert!(!provider.instance_shutdown(&running).await.unwrap());
    assert!(provider.instance_shutdown(&stopped).await.unwrap());
    let batch = provider
        .instances_shutdown(&[running.clone(), stopped.clone()])
        .await
        .unwrap();
    assert!(matches!(batch.as_slice(), [Ok(false), Ok(true)]));

    account.remove_droplet(1001);
    assert!(provider.instance_exists(&running).await.unwrap());
    assert!(!provider.instance_exists(&stopped).await.unwrap());
    assert!(matches!(
        provider.instance_shutdown(&stopped).await,
        Err(CloudError::InstanceNotFound)
    ));
    assert!(matches!(
        provider.instance_metadata(&stopped).await,
        Err(CloudError::InstanceNotFound)
    ));
}

#[tokio::test]
async fn a_foreign_provider_id_is_an_error_never_a_missing_instance() {
    let account = account();
    let provider = account.provider().await;
    account.clear_requests();
    let foreign = node("n", Some("aws:///us-east-1a/i-0abc"));

    // `Ok(false)` would let the node lifecycle controller delete the node.
    let err = provider.instance_exists(&foreign).await.unwrap_err();
    assert!(
        err.to_string().contains("aws:///us-east-1a/i-0abc"),
        "{err}"
    );
    let batch = provider
        .instances_exist(&[foreign.clone(), Arc::clone(&foreign)])
        .await
        .unwrap();
    assert!(batch.iter().all(Result::is_err));
}
