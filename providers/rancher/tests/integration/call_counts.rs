//! Rancher API calls per operation, ours against upstream's: the provider
//! drives the Cattle emulator over HTTP and its call log is counted; the
//! upstream figures are what `rancher/rancher.go` sends for the same work,
//! counted from its code with every wait answered at its first poll (the
//! least it can send). Prints the table (`cargo xtask bench --only rancher`
//! publishes it) and fails when a row of ours exceeds upstream's.

use std::sync::Arc;

use ccm_cloud_provider::k8s_openapi::api::core::v1::Node;
use ccm_provider_rancher::emulator::CattleEmulator;

use crate::support::{node, provider, service, settled};

/// One row: the work, our count, upstream's count and how it is derived.
struct Row {
    work: String,
    ours: u64,
    upstream: u64,
    derivation: &'static str,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[allow(clippy::print_stdout, reason = "the benchmark prints its table")]
async fn rancher_calls_are_at_most_upstreams_for_every_operation() {
    let cattle = CattleEmulator::start().await.expect("the emulator starts");
    let provider = provider(&cattle);
    let instances = provider.instances().expect("instances");
    let lb = provider.load_balancer().expect("load balancers");
    let mut rows = Vec::new();
    let mut count = {
        let cattle = cattle.clone();
        let mut last = cattle.requests();
        move || {
            let now = cattle.requests();
            let spent = now - last;
            last = now;
            spent
        }
    };

    // 100 nodes initialized: the node controller asks for their metadata.
    let nodes: Vec<Arc<Node>> = (1..=100)
        .map(|i| {
            cattle.add_host(
                &format!("node-{i}"),
                &format!("10.42.{}.{}", i / 200, i % 200 + 1),
            );
            node(&format!("node-{i}"))
        })
        .collect();
    count();
    for batch in nodes.chunks(instances.max_batch_size().get()) {
        let answers = instances
            .instances_metadata(batch)
            .await
            .expect("one listing");
        assert!(answers.iter().all(Result::is_ok));
    }
    rows.push(Row {
        work: "100 nodes initialized".into(),
        ours: count(),
        upstream: 100 * 6,
        derivation: "per node: NodeAddresses, InstanceID and InstanceType (the ByProviderID forms are unimplemented), each getHostByName = Host.List + GetLink(ipAddresses)",
    });

    let three = &nodes[..3];
    let four = &nodes[..4];
    let h = 3;
    let svc = service(&[(80, 30080)]);
    count();
    let check = lb.check_service(&svc);
    assert!(matches!(check, Some(Ok(()))), "{check:?}");
    settled(|| lb.ensure_load_balancer("bench", &svc, three)).await;
    rows.push(Row {
        work: "one Service created (3 nodes)".into(),
        ours: count(),
        upstream: 16 + 6 * h,
        derivation: "GetLoadBalancer (1) + EnsureLoadBalancer: getLBByName 1, GetSetting 1, getOrCreateEnvironment 2, Create 1, setLBHosts 6 per host (ExternalService.List, getHostByName 2, Create, waitForSvcAction, ActionActivate) + 3, activate wait + action 2, reload 1, deactivate wait 1, publicEndpoints wait 1, reload 1",
    });

    count();
    settled(|| lb.ensure_load_balancer("bench", &svc, three)).await;
    rows.push(Row {
        work: "the same Service again, nothing changed (resync)".into(),
        ours: count(),
        upstream: 9 + h,
        derivation: "EnsureLoadBalancer on an active one: getLBByName 1, GetSetting 1, setLBHosts 1 per host + 3, reload 1, deactivate wait 1, publicEndpoints wait 1, reload 1",
    });

    count();
    settled(|| lb.update_load_balancer("bench", &svc, four)).await;
    rows.push(Row {
        work: "a node joins (3 → 4 nodes)".into(),
        ours: count(),
        upstream: 1 + 1 + 2 * h + 6 * (h + 1) + 3,
        derivation: "UpdateLoadBalancer: getLBByName 1, deleteLBConsumedServices (GetLink 1 + per service GetLink and Delete), setLBHosts for 4 hosts (6 each, all remade) + 3",
    });

    let h = 4;
    let changed = service(&[(80, 30080), (443, 30443)]);
    count();
    settled(|| lb.ensure_load_balancer("bench", &changed, four)).await;
    rows.push(Row {
        work: "its ports changed (4 nodes)".into(),
        ours: count(),
        upstream: 15 + 8 * h,
        derivation: "EnsureLoadBalancer: getLBByName 1, deleteLoadBalancer (GetLink 1 + 2 per host + Delete 1), GetSetting 1, getOrCreateEnvironment 1, Create 1, setLBHosts 6 per host + 3, activate 2, reload 1, waits 2, reload 1",
    });

    count();
    settled(|| lb.ensure_load_balancer_deleted("bench", &changed)).await;
    rows.push(Row {
        work: "deleted (4 nodes)".into(),
        ours: count(),
        upstream: 3 + 2 * h,
        derivation: "EnsureLoadBalancerDeleted: getLBByName 1, deleteLoadBalancer: GetLink(consumedservices) 1, per service GetLink(consumedbyservices) and Delete, Delete 1",
    });
    let left = cattle.snapshot();
    assert!(
        left.load_balancers.is_empty() && left.external_services.is_empty(),
        "{left:?}"
    );

    println!("| work | ours | upstream | ours / upstream | upstream's calls |");
    println!("|---|---|---|---|---|");
    for row in &rows {
        println!(
            "| {} | {} | {} | {:.2} | {} |",
            row.work,
            row.ours,
            row.upstream,
            row.ours as f64 / row.upstream as f64,
            row.derivation
        );
    }
    let over: Vec<&str> = rows
        .iter()
        .filter(|r| r.ours > r.upstream)
        .map(|r| r.work.as_str())
        .collect();
    assert!(over.is_empty(), "more calls than upstream for: {over:?}");
}
