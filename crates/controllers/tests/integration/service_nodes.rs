//! The service controller following the eligible node set, against the test
//! API server and the fake cloud.

use crate::support;

use std::collections::BTreeMap;
use std::time::Duration;

use ccm_controllers::{ControllerId, ControllerSettings};
use ccm_provider_fake::{InjectedError, Operation};
use ccm_test_apiserver::{Failure, RequestMatch, Verb};
use k8s_openapi::api::core::v1::Service;
use kube::api::{Patch, PatchParams};
use support::{Harness, eventually, fast_settings, load_balancer_service, ready_node};

const WAIT: Duration = Duration::from_secs(30);

fn has_ingress(service: &Service) -> bool {
    service
        .status
        .as_ref()
        .and_then(|s| s.load_balancer.as_ref())
        .and_then(|lb| lb.ingress.as_ref())
        .is_some_and(|i| !i.is_empty())
}

async fn wait_all_synced(h: &Harness, count: usize) {
    eventually(
        &format!("{count} Services with an ingress"),
        WAIT,
        || async {
            let services = h.services().list(&Default::default()).await.ok()?;
            (services.items.iter().filter(|s| has_ingress(s)).count() == count).then_some(())
        },
    )
    .await
    .expect("a bounded wait");
}

async fn started(services: usize, nodes: usize, settings: &ControllerSettings) -> Harness {
    let mut h = Harness::new().await;
    for i in 0..nodes {
        h.create_node(&ready_node(&format!("n{i}"))).await;
    }
    for i in 0..services {
        h.create_service(&load_balancer_service(&format!("svc{i:03}"), &[]))
            .await;
    }
    h.start(&[ControllerId::Service], settings).await;
    wait_all_synced(&h, services).await;
    h.settled().await;
    h
}

/// A kubelet heartbeat: a new `lastHeartbeatTime` on the Ready condition.
async fn heartbeat(h: &Harness, name: &str, beat: i64, ready: bool) {
    let time = jiff::Timestamp::from_second(1_700_000_000 + beat)
        .unwrap()
        .to_string();
    let mut condition = serde_json::to_value(support::ready_condition(ready)).unwrap();
    condition["lastHeartbeatTime"] = serde_json::json!(time);
    condition["lastTransitionTime"] = serde_json::json!(time);
    let patch = serde_json::json!({ "status": { "conditions": [condition] } });
    h.nodes()
        .patch_status(name, &PatchParams::default(), &Patch::Strategic(&patch))
        .await
        .expect("heartbeat");
}

async fn label_node(h: &Harness, name: &str, labels: serde_json::Value) {
    let patch = serde_json::json!({ "metadata": { "labels": labels } });
    h.nodes()
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("node patched");
}

#[tokio::test]
async fn one_node_added_updates_each_of_100_load_balancers_exactly_once() {
    let settings = ControllerSettings {
        concurrent_service_syncs: 5,
        ..fast_settings()
    };
    let start = std::time::Instant::now();
    let mut h = started(100, 3, &settings).await;
    println!("100 load balancers created in {:?}", start.elapsed());
    h.cloud.clear_calls();
    let start = std::time::Instant::now();

    // As a node joins: registered by the kubelet, then given its provider
    // ID by the cloud-node controller: one burst of two changes.
    let mut joining = ready_node("n-new");
    joining.spec.as_mut().unwrap().provider_id = None;
    h.create_node(&joining).await;
    let patch = serde_json::json!({ "spec": { "providerID": "fake://n-new" } });
    h.nodes()
        .patch("n-new", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    eventually("100 updates", WAIT, || async {
        (h.cloud.count(Operation::UpdateLoadBalancer) >= 100).then_some(())
    })
    .await
    .expect("a bounded wait");
    println!(
        "100 load balancers updated {:?} after the node joined",
        start.elapsed()
    );
    h.settled().await;
    assert_eq!(
        h.cloud.count(Operation::UpdateLoadBalancer),
        100,
        "one update per load balancer"
    );
    assert_eq!(
        h.cloud.count(Operation::LoadBalancerHealth),
        100,
        "one health read per updated load balancer, for its conditions"
    );
    assert_eq!(
        h.cloud.calls().len(),
        200,
        "and no other call: {:?}",
        h.cloud.calls().iter().find(|c| !matches!(
            c.op,
            Operation::UpdateLoadBalancer | Operation::LoadBalancerHealth
        ))
    );
    let mut services: Vec<String> = h
        .cloud
        .calls()
        .into_iter()
        .filter(|c| c.op == Operation::UpdateLoadBalancer)
        .flat_map(|c| c.args)
        .collect();
    services.sort();
    services.dedup();
    assert_eq!(services.len(), 100, "every load balancer once");
    assert!(
        h.cloud
            .load_balancers()
            .iter()
            .all(|lb| lb.nodes.len() == 4 && lb.nodes.contains(&"n-new".to_owned()))
    );
    h.stop().await;
}

#[tokio::test]
async fn a_thousand_node_heartbeats_cost_no_provider_call() {
    let mut h = started(5, 2, &fast_settings()).await;
    h.cloud.clear_calls();
    h.server.reset_stats();

    for i in 0..1000 {
        heartbeat(&h, &format!("n{}", i % 2), i, i % 50 != 0).await;
    }
    let node_writes = h
        .server
        .requests()
        .iter()
        .filter(|r| r.resource == "nodes" && r.verb == "patch" && r.status == 200)
        .count();
    assert_eq!(node_writes, 1000);
    h.settled().await;
    assert!(
        h.cloud.calls().is_empty(),
        "no provider call: {} made",
        h.cloud.calls().len()
    );
    let service_writes = h
        .server
        .requests()
        .iter()
        .filter(|r| r.resource == "services" && r.verb == "patch")
        .count();
    assert_eq!(service_writes, 0, "no Service write either");
    h.stop().await;
}

#[tokio::test]
async fn an_excluded_node_leaves_every_load_balancer_and_comes_back() {
    let mut h = started(3, 3, &fast_settings()).await;
    h.cloud.clear_calls();

    label_node(
        &h,
        "n1",
        serde_json::json!({ "node.kubernetes.io/exclude-from-external-load-balancers": "true" }),
    )
    .await;
    eventually("n1 out of every load balancer", WAIT, || async {
        h.cloud
            .load_balancers()
            .iter()
            .all(|lb| *lb.nodes == ["n0", "n2"])
            .then_some(())
    })
    .await
    .expect("a bounded wait");
    h.settled().await;
    assert_eq!(h.cloud.count(Operation::UpdateLoadBalancer), 3);
    assert_eq!(h.events("svc000", "UpdatedLoadBalancer").await.len(), 1);

    // Go's ParseBool reads "false" as false: the node is included again.
    label_node(
        &h,
        "n1",
        serde_json::json!({ "node.kubernetes.io/exclude-from-external-load-balancers": "false" }),
    )
    .await;
    eventually("n1 back", WAIT, || async {
        h.cloud
            .load_balancers()
            .iter()
            .all(|lb| *lb.nodes == ["n0", "n1", "n2"])
            .then_some(())
    })
    .await
    .expect("a bounded wait");
    h.settled().await;
    assert_eq!(h.cloud.count(Operation::UpdateLoadBalancer), 6);
    assert_eq!(h.cloud.mutation_count(), 6, "updates only, no ensure");
    h.stop().await;
}

#[tokio::test]
async fn a_provider_id_change_updates_and_other_label_changes_do_not() {
    let mut h = started(2, 2, &fast_settings()).await;
    h.cloud.clear_calls();
    label_node(&h, "n0", serde_json::json!({ "example.com/rack": "r1" })).await;
    h.settled().await;
    assert!(
        h.cloud.calls().is_empty(),
        "a label that doesn't decide eligibility costs nothing"
    );

    let mut node = ready_node("n9");
    node.spec.as_mut().unwrap().provider_id = None;
    h.create_node(&node).await;
    eventually("2 updates for the new node", WAIT, || async {
        (h.cloud.count(Operation::UpdateLoadBalancer) == 2).then_some(())
    })
    .await
    .expect("a bounded wait");
    h.settled().await;
    let patch = serde_json::json!({ "spec": { "providerID": "fake://n9" } });
    h.nodes()
        .patch("n9", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    eventually("2 more updates for its provider ID", WAIT, || async {
        (h.cloud.count(Operation::UpdateLoadBalancer) == 4).then_some(())
    })
    .await
    .expect("a bounded wait");
    h.settled().await;
    let ops: Vec<Operation> = h.cloud.calls().iter().map(|c| c.op).collect();
    assert_eq!(
        ops.iter()
            .filter(|op| **op == Operation::UpdateLoadBalancer)
            .count(),
        4
    );
    assert_eq!(ops.len(), 8, "and a health read after each update: {ops:?}");
    h.stop().await;
}

#[tokio::test]
async fn a_failed_update_warns_and_its_retry_ensures_the_load_balancer() {
    let mut h = started(1, 1, &fast_settings()).await;
    h.cloud.clear_calls();
    h.cloud.fail_next(
        Some(Operation::UpdateLoadBalancer),
        InjectedError::Other("backend API down".into()),
        1,
    );
    h.create_node(&ready_node("n-new")).await;

    let events = eventually("a Warning event", WAIT, || async {
        let events = h.events("svc000", "UpdateLoadBalancerFailed").await;
        (!events.is_empty()).then_some(events)
    })
    .await
    .expect("a bounded wait");
    let note = events[0].note.clone().unwrap();
    assert!(
        note.contains("n-new") && note.contains("backend API down"),
        "{note}"
    );
    eventually("the retry and its health read", WAIT, || async {
        (h.cloud.count(Operation::LoadBalancerHealth) == 1).then_some(())
    })
    .await
    .expect("a bounded wait");
    let ops: Vec<Operation> = h.cloud.calls().iter().map(|c| c.op).collect();
    assert_eq!(
        ops,
        [
            Operation::UpdateLoadBalancer,
            Operation::EnsureLoadBalancer,
            Operation::LoadBalancerHealth
        ],
        "the retry is a full ensure, followed by its health read"
    );
    assert_eq!(*h.cloud.load_balancers()[0].nodes, ["n-new", "n0"]);
    h.stop().await;
}

#[tokio::test]
async fn periodic_resyncs_make_no_call_when_nothing_changed() {
    let settings = ControllerSettings {
        node_sync_period: Duration::from_millis(500),
        ..fast_settings()
    };
    let mut h = started(3, 2, &settings).await;
    h.cloud.clear_calls();
    let before = h.activity().passes;
    eventually("four resync passes", WAIT, || async {
        (h.activity().passes >= before + 4).then_some(())
    })
    .await
    .expect("a bounded wait");
    h.settled().await;
    assert!(h.cloud.calls().is_empty(), "{:?}", h.cloud.calls());
    h.stop().await;
}

#[tokio::test]
async fn the_node_set_given_to_the_provider_excludes_nodes_being_removed_by_the_autoscaler() {
    let mut h = Harness::new().await;
    h.create_node(&ready_node("n0")).await;
    let mut doomed = ready_node("n1");
    doomed.spec.as_mut().unwrap().taints = Some(vec![k8s_openapi::api::core::v1::Taint {
        key: "ToBeDeletedByClusterAutoscaler".into(),
        effect: "NoSchedule".into(),
        ..Default::default()
    }]);
    h.create_node(&doomed).await;
    let mut not_ready = ready_node("n2");
    not_ready.status.as_mut().unwrap().conditions = Some(vec![support::ready_condition(false)]);
    h.create_node(&not_ready).await;
    let mut svc = load_balancer_service("web", &[]);
    svc.metadata.labels = Some(BTreeMap::from([("app".to_owned(), "web".to_owned())]));
    h.create_service(&svc).await;
    h.start(&[ControllerId::Service], &fast_settings()).await;
    wait_all_synced(&h, 1).await;
    assert_eq!(
        *h.cloud.load_balancers()[0].nodes,
        ["n0", "n2"],
        "readiness does not matter; the autoscaler's taint does"
    );
    h.stop().await;
}

/// Regression (found by `cargo xtask chaos`'s faults suite): an ensure
/// whose status writes failed, then a node change before its retry, left
/// the Service without an ingress for good. The load balancer had been
/// ensured, so the retry found the node set changed and only updated the
/// backends; it succeeded, and nothing wrote the status again. A backends
/// update now restores a missing ingress too. (The first write and the
/// immediate second attempt fail; the retry comes 5 to 10 s later.)
#[tokio::test]
async fn a_lost_status_write_is_restored_by_the_next_backends_update() {
    let mut h = Harness::new().await;
    h.create_node(&ready_node("n0")).await;
    let status_write = RequestMatch::verb(Verb::Patch)
        .resource("services")
        .subresource("status");
    h.server
        .fail_next(status_write, Failure::internal_error(), 2);
    h.create_service(&load_balancer_service("web", &[])).await;
    h.start(&[ControllerId::Service], &fast_settings()).await;
    eventually("the ensure's status write fails", WAIT, || async {
        h.server
            .requests()
            .iter()
            .any(|r| r.resource == "services" && r.subresource == "status" && r.status == 500)
            .then_some(())
    })
    .await
    .expect("a bounded wait");
    assert_eq!(h.cloud.count(Operation::EnsureLoadBalancer), 1);

    // A node joins before the failed write's retry comes due.
    h.create_node(&ready_node("n1")).await;
    eventually("the backends follow the new node", WAIT, || async {
        (h.cloud.count(Operation::UpdateLoadBalancer) >= 1).then_some(())
    })
    .await
    .expect("a bounded wait");
    eventually("the Service has its ingress", WAIT, || async {
        let service = h.services().get("web").await.ok()?;
        has_ingress(&service).then_some(())
    })
    .await
    .expect("a bounded wait");
    assert_eq!(
        h.cloud.count(Operation::EnsureLoadBalancer),
        1,
        "restored without another ensure"
    );
    h.stop().await;
}
