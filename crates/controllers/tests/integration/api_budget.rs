//! What initializing and routing N nodes, with one LoadBalancer Service,
//! costs the API server, against upstream's budget for the same work
//! (measured on kube-apiserver with upstream's Go CCM): one `nodes/status`
//! write per node for its addresses and one for `NetworkUnavailable`, and
//! about one Event per meaningful change, repeats aggregated.

use crate::support;

use std::collections::BTreeMap;
use std::time::Duration;

use ccm_controllers::{ControllerId, ControllerSettings};
use ccm_test_apiserver::Verb;
use k8s_openapi::api::core::v1::{Node, NodeSpec};
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams};
use support::{Harness, eventually, fast_settings, load_balancer_service, ready_condition};

/// Nodes the kubelets register.
const N: usize = 100;
/// How long the whole scenario may take to converge.
const WAIT: Duration = Duration::from_secs(30);

/// A node as a kubelet registers it once Ready, with a pod CIDR already
/// allocated: the uninitialized taint, no provider ID.
fn kubelet_node(i: usize) -> Node {
    let mut node = support::uninitialized_node(&format!("node-{i}"));
    let spec = node.spec.get_or_insert_with(NodeSpec::default);
    let cidr = format!("10.244.{i}.0/24");
    spec.pod_cidr = Some(cidr.clone());
    spec.pod_cidrs = Some(vec![cidr]);
    if let Some(status) = node.status.as_mut() {
        status.conditions = Some(vec![ready_condition(true)]);
    }
    node
}

fn settings() -> ControllerSettings {
    ControllerSettings {
        configure_cloud_routes: true,
        cluster_cidrs: vec!["10.244.0.0/16".parse().unwrap()],
        ..fast_settings()
    }
}

fn is_initialized(node: &Node) -> bool {
    let spec = node.spec.as_ref();
    let tainted = spec
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|t| t.iter().any(|t| t.key.ends_with("/uninitialized")));
    let routed = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| {
            c.iter()
                .any(|c| c.type_ == "NetworkUnavailable" && c.status == "False")
        });
    !tainted && routed
}

/// Events created, by reason, and the whole list.
async fn events_by_reason(h: &Harness) -> BTreeMap<String, usize> {
    let events: Api<Event> = Api::all(h.client.clone());
    let mut by_reason = BTreeMap::new();
    for event in events
        .list(&ListParams::default())
        .await
        .expect("events listed")
        .items
    {
        *by_reason
            .entry(event.reason.unwrap_or_default())
            .or_default() += 1;
    }
    by_reason
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn initializing_and_routing_nodes_stays_within_upstreams_api_budget() {
    let mut h = Harness::new().await;
    h.start(
        &[
            ControllerId::CloudNode,
            ControllerId::Route,
            ControllerId::Service,
        ],
        &settings(),
    )
    .await;
    h.create_service(&load_balancer_service("web", &[])).await;
    for i in 1..=N {
        h.create_node(&kubelet_node(i)).await;
    }
    eventually("every node initialized and routed", WAIT, || async {
        let nodes = h.nodes().list(&ListParams::default()).await.ok()?;
        (nodes.items.len() == N && nodes.items.iter().all(is_initialized)).then_some(())
    })
    .await
    .expect("a bounded wait");
    h.settled().await;

    let stats = h.server.stats();
    let by_reason = events_by_reason(&h).await;
    let events_created = stats.count(Verb::Create, "events");
    let status_patches = stats.count_subresource(Verb::Patch, "nodes", "status");
    let node_patches = stats.count(Verb::Patch, "nodes");
    let node_lists = stats.count(Verb::List, "nodes");
    eprintln!(
        "events created {events_created} (by reason {by_reason:?}), \
         nodes/status patches {status_patches}, node patches {node_patches}, \
         node lists {node_lists}, all requests {}",
        stats.total()
    );
    assert!(
        status_patches <= 2 * N as u64,
        "upstream writes nodes/status twice per node (addresses, NetworkUnavailable); we wrote {status_patches}"
    );
    // One write per node initializes it (provider ID, labels, the taint's
    // removal); a copy from before that write, still tainted, must not be
    // looked up and written again (it was, and refused, and re-listed).
    assert!(
        node_patches <= N as u64,
        "one node patch per node initializes it; we sent {node_patches}"
    );
    // Upstream: a `Synced` per node (which we do not publish) and the
    // Service's `EnsuringLoadBalancer` and `EnsuredLoadBalancer`.
    assert!(
        events_created <= N as u64 + 2,
        "upstream creates {} Events; we created {events_created}: {by_reason:?}",
        N + 2
    );
    h.stop().await;
}
