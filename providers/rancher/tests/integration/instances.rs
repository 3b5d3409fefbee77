//! Hosts as nodes, against the Cattle emulator: upstream's name matching,
//! provider IDs, and a server that ignores `include=ipAddresses`.

use std::sync::Arc;

use ccm_cloud_provider::k8s_openapi::api::core::v1::{Node, NodeSpec};
use ccm_cloud_provider::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use ccm_cloud_provider::{
    CloudError, CloudProvider, Environment, NodeAddressType, ProviderFactory,
};
use ccm_provider_rancher::emulator::{ACCESS_KEY, CattleEmulator, SECRET_KEY};
use ccm_provider_rancher::{
    ACCESS_KEY_VARIABLE, RancherProviderFactory, SECRET_KEY_VARIABLE, URL_VARIABLE,
};

fn provider(cattle: &CattleEmulator) -> Arc<dyn CloudProvider> {
    let env = Environment::default()
        .with(URL_VARIABLE, cattle.url())
        .with(ACCESS_KEY_VARIABLE, ACCESS_KEY)
        .with(SECRET_KEY_VARIABLE, SECRET_KEY);
    RancherProviderFactory::build(None, &env).expect("builds")
}

fn node(name: &str, provider_id: Option<String>) -> Arc<Node> {
    Arc::new(Node {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..ObjectMeta::default()
        },
        spec: Some(NodeSpec {
            provider_id,
            ..NodeSpec::default()
        }),
        status: None,
    })
}

#[tokio::test]
async fn a_batch_is_one_listing_found_by_fqdn_short_name_or_provider_id() {
    let cattle = CattleEmulator::start().await.expect("starts");
    cattle.add_host("worker-1.example.com", "10.0.0.1");
    let second = cattle.add_host("worker-2", "10.0.0.2");
    let provider = provider(&cattle);
    let instances = provider.instances().expect("instances");
    let nodes = [
        node("worker-1", None),
        node("worker-x", Some(format!("rancher://{}", second.uuid))),
        node("worker-3", None),
    ];
    let before = cattle.requests();
    let answers = instances
        .instances_metadata(&nodes)
        .await
        .expect("answered");
    assert_eq!(
        cattle.requests() - before,
        1,
        "one host listing for the batch"
    );
    let first = answers[0]
        .as_ref()
        .expect("worker-1 matches worker-1.example.com");
    assert_eq!(first.instance_type, "rancher");
    assert_eq!(
        (first.zone.as_str(), first.region.as_str()),
        ("FailureDomain1", "Region1")
    );
    let kinds: Vec<(NodeAddressType, &str)> = first
        .node_addresses
        .iter()
        .map(|a| (a.kind, a.address.as_str()))
        .collect();
    assert_eq!(
        kinds,
        [
            (NodeAddressType::ExternalIp, "10.0.0.1"),
            (NodeAddressType::InternalIp, "10.0.0.1"),
            (NodeAddressType::Hostname, "worker-1.example.com"),
        ]
    );
    let by_id = answers[1].as_ref().expect("found by provider ID");
    assert_eq!(by_id.provider_id, format!("rancher://{}", second.uuid));
    assert!(matches!(answers[2], Err(CloudError::InstanceNotFound)));
}

#[tokio::test]
async fn without_include_the_addresses_come_through_each_hosts_link() {
    let cattle = CattleEmulator::start().await.expect("starts");
    cattle.set_honours_include(false);
    cattle.add_host("worker-1", "10.0.0.1");
    cattle.add_host("worker-2", "10.0.0.2");
    let provider = provider(&cattle);
    let instances = provider.instances().expect("instances");
    let nodes = [node("worker-1", None), node("worker-2", None)];
    let before = cattle.requests();
    let answers = instances
        .instances_metadata(&nodes)
        .await
        .expect("answered");
    assert_eq!(
        cattle.requests() - before,
        3,
        "the listing, then one link per host"
    );
    for (answer, ip) in answers.iter().zip(["10.0.0.1", "10.0.0.2"]) {
        let metadata = answer.as_ref().expect("found");
        assert!(
            metadata.node_addresses.iter().any(|a| a.address == ip),
            "{metadata:?}"
        );
    }
}

#[tokio::test]
async fn a_stopped_host_is_shut_down_and_a_removed_one_does_not_exist() {
    let cattle = CattleEmulator::start().await.expect("starts");
    let stopped = cattle.add_host("worker-1", "10.0.0.1");
    let removed = cattle.add_host("worker-2", "10.0.0.2");
    cattle.stop_host(&stopped.uuid);
    cattle.remove_host(&removed.uuid);
    let provider = provider(&cattle);
    let instances = provider.instances().expect("instances");
    let nodes = [node("worker-1", None), node("worker-2", None)];
    let shutdown = instances
        .instances_shutdown(&nodes)
        .await
        .expect("answered");
    assert!(matches!(shutdown[0], Ok(true)), "{shutdown:?}");
    let exist = instances.instances_exist(&nodes).await.expect("answered");
    assert!(matches!(exist[1], Ok(false)), "{exist:?}");
}
