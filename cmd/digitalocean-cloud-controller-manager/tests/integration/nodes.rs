//! Nodes and droplets, end to end: the real binary initializes nodes from
//! their droplets, and acts on nodes whose droplet is off or gone.

use crate::support;

use std::collections::BTreeSet;

use ccm_provider_digitalocean::test_util::{FakeDroplet, account};
use ccm_test_support::{UNINITIALIZED, eventually, has_taint};
use k8s_openapi::api::core::v1::Node;
use kube::api::{Patch, PatchParams};
use serde_json::json;
use support::{Cluster, WAIT};

const SHUTDOWN: &str = "node.cloudprovider.kubernetes.io/shutdown";

fn label<'a>(node: &'a Node, key: &str) -> Option<&'a str> {
    node.metadata.labels.as_ref()?.get(key).map(String::as_str)
}

/// The node's InternalIP and ExternalIP addresses.
fn cloud_addresses(node: &Node) -> BTreeSet<(String, String)> {
    node.status
        .as_ref()
        .and_then(|s| s.addresses.as_ref())
        .into_iter()
        .flatten()
        .filter(|a| a.type_ != "Hostname")
        .map(|a| (a.type_.clone(), a.address.clone()))
        .collect()
}

async fn initialized(cluster: &Cluster, name: &str) -> Node {
    eventually(&format!("{name} is initialized"), WAIT, || async {
        cluster
            .nodes()
            .get(name)
            .await
            .ok()
            .filter(|n| !has_taint(n, UNINITIALIZED))
    })
    .await
    .expect("a bounded wait")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_are_initialized_from_their_droplets() {
    let account = account();
    account.add_droplet(FakeDroplet::new(3001, "node-1"));
    let mut second = FakeDroplet::new(3002, "node-2").with_ipv6("2604:a880:400:d1::7a1:1");
    second.size_slug = "c-4".to_owned();
    account.add_droplet(second);

    let cluster = Cluster::start(account, 2).await;

    let expected = [
        (
            "node-1",
            "digitalocean://3001",
            "s-2vcpu-4gb",
            vec![("InternalIP", "10.10.12.2"), ("ExternalIP", "203.0.12.2")],
        ),
        (
            "node-2",
            "digitalocean://3002",
            "c-4",
            vec![
                ("InternalIP", "10.10.12.3"),
                ("ExternalIP", "203.0.12.3"),
                ("ExternalIP", "2604:a880:400:d1::7a1:1"),
            ],
        ),
    ];
    for (name, provider_id, size, addresses) in expected {
        let node = initialized(&cluster, name).await;
        let spec = node.spec.as_ref().expect("spec");
        assert_eq!(spec.provider_id.as_deref(), Some(provider_id), "{name}");
        assert_eq!(
            label(&node, "node.kubernetes.io/instance-type"),
            Some(size),
            "{name}: the droplet's size is the instance type"
        );
        assert_eq!(
            label(&node, "topology.kubernetes.io/region"),
            Some("nyc3"),
            "{name}"
        );
        let addresses: BTreeSet<(String, String)> = addresses
            .into_iter()
            .map(|(t, a)| (t.to_owned(), a.to_owned()))
            .collect();
        assert_eq!(cloud_addresses(&node), addresses, "{name}");
    }

    // After a short run, what the chart's alert rules and dashboard query
    // is exported.
    let metrics = cluster.ccm.metrics().await.expect("/metrics");
    ccm_test_support::monitoring::check_chart_metrics_exported(
        &metrics,
        &[
            (
                "ccm_route_nodes_missing_routes",
                "DigitalOcean has no routes: the route controller is off",
            ),
            (
                "ccm_service_unhealthy_targets",
                "one series per LoadBalancer Service whose target health is read: this run has none",
            ),
        ],
    )
    .expect("the chart's queries are exported");
    cluster.assert_contract_clean();
}

/// Marks `name` NotReady, as kube-controller-manager does when its kubelet
/// stops posting status.
async fn mark_not_ready(cluster: &Cluster, name: &str) {
    let status = json!({"status": {"conditions": [{
        "type": "Ready",
        "status": "Unknown",
        "reason": "NodeStatusUnknown",
        "message": "Kubelet stopped posting node status.",
        "lastHeartbeatTime": "2024-01-15T10:00:00Z",
        "lastTransitionTime": "2024-01-15T10:00:00Z"
    }]}});
    cluster
        .nodes()
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .expect("node status patched");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_whose_droplet_is_off_is_tainted_and_one_whose_droplet_is_gone_is_deleted() {
    let account = account();
    account.add_droplet(FakeDroplet::new(3101, "node-1"));
    account.add_droplet(FakeDroplet::new(3102, "node-2"));
    let cluster = Cluster::start(account, 2).await;
    initialized(&cluster, "node-1").await;
    initialized(&cluster, "node-2").await;

    cluster.account.set_droplet_status(3101, "off");
    cluster.account.remove_droplet(3102);
    mark_not_ready(&cluster, "node-1").await;
    mark_not_ready(&cluster, "node-2").await;

    eventually("node-1 has the shutdown taint", WAIT, || async {
        cluster
            .nodes()
            .get("node-1")
            .await
            .ok()
            .filter(|n| has_taint(n, SHUTDOWN))
    })
    .await
    .expect("a bounded wait");
    eventually("node-2 is deleted", WAIT, || async {
        cluster
            .nodes()
            .get_opt("node-2")
            .await
            .ok()
            .and_then(|n| n.is_none().then_some(()))
    })
    .await
    .expect("a bounded wait");
    assert!(
        cluster.nodes().get_opt("node-1").await.unwrap().is_some(),
        "a droplet that is off is not gone: its node stays"
    );
    assert_eq!(
        cluster.account.mutations(),
        0,
        "node lifecycle only reads the cloud"
    );
    cluster.assert_contract_clean();
}
