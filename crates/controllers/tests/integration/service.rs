//! The service controller against the test API server and the fake cloud:
//! creating, updating and cleaning up load balancers.

use crate::support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use ccm_cloud_provider::k8s_openapi::api::core::v1::Service;
use ccm_controllers::{ControllerId, ControllerSettings};
use ccm_provider_fake::{
    ANNOTATION_LOAD_BALANCER_ID, Capability, FakeCloud, FakeLoadBalancer, Operation,
};
use ccm_test_apiserver::RequestRecord;
use ccm_test_support::ingress_ips;
use kube::api::{DeleteParams, Patch, PatchParams};
use support::{Harness, eventually, fast_settings, load_balancer_service, ready_node};

const FINALIZER: &str = "service.kubernetes.io/load-balancer-cleanup";
const WAIT: Duration = Duration::from_secs(10);

fn has_finalizer(service: &Service) -> bool {
    service
        .metadata
        .finalizers
        .iter()
        .flatten()
        .any(|f| f == FINALIZER)
}

fn load_balancer(h: &Harness, name: &str) -> Option<FakeLoadBalancer> {
    h.cloud
        .load_balancers()
        .into_iter()
        .find(|lb| lb.service == format!("default/{name}"))
}

async fn wait_ingress(h: &Harness, name: &str) -> Service {
    eventually(&format!("{name} has an ingress"), WAIT, || async {
        h.services()
            .get(name)
            .await
            .ok()
            .filter(|s| !ingress_ips(s).is_empty())
    })
    .await
    .expect("a bounded wait")
}

async fn patch(h: &Harness, name: &str, patch: serde_json::Value) {
    h.services()
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("service patched");
}

/// Starts the controller with two ready nodes and one synced Service `web`.
async fn synced_web() -> Harness {
    let mut h = Harness::new().await;
    h.create_node(&ready_node("n1")).await;
    h.create_node(&ready_node("n2")).await;
    h.create_service(&load_balancer_service("web", &[])).await;
    h.start(&[ControllerId::Service], &fast_settings()).await;
    wait_ingress(&h, "web").await;
    h
}

/// The Service writes in `requests`: each patch as `subresource status`
/// (`" 200"` for the object itself, `"status 200"` for its status).
fn service_writes(requests: &[RequestRecord]) -> Vec<String> {
    requests
        .iter()
        .filter(|r| r.resource == "services" && r.verb == "patch")
        .map(|r| format!("{} {}", r.subresource, r.status))
        .collect()
}

/// The fake cloud as a provider that cannot tell ownership or target health
/// from the Service alone: it is asked read-only before an ensure, and no
/// health read follows one.
fn observing() -> FakeCloud {
    let fake = FakeCloud::default();
    fake.set_capability(Capability::ServiceCheck, false);
    fake.set_capability(Capability::Health, false);
    fake
}

#[tokio::test]
async fn create_stores_the_finalizer_then_ensures_then_writes_the_ingress() {
    let fake = observing();
    let mut h = Harness::with_provider(fake.clone(), Arc::new(fake.clone())).await;
    // The Service's writes the API server had taken when the ensure came.
    let at_ensure = Arc::new(Mutex::new(Vec::new()));
    let (log, seen) = (h.server.request_log(), at_ensure.clone());
    fake.on_call(move |call| {
        if call.op == Operation::EnsureLoadBalancer {
            seen.lock().unwrap().push(service_writes(&log.requests()));
        }
    });
    h.create_node(&ready_node("n1")).await;
    h.create_service(&load_balancer_service("web", &[])).await;
    h.server.reset_stats();
    h.start(&[ControllerId::Service], &fast_settings()).await;

    let service = wait_ingress(&h, "web").await;
    assert_eq!(
        *at_ensure.lock().unwrap(),
        [[" 200", "status 200"]],
        "one ensure, with the finalizer stored and LoadBalancerProvisioned=Pending, \
         and no ingress yet"
    );
    let ops: Vec<Operation> = h.cloud.calls().iter().map(|c| c.op).collect();
    assert_eq!(
        ops,
        [Operation::GetLoadBalancer, Operation::EnsureLoadBalancer],
        "a provider that cannot tell ownership from the Service alone is asked \
         read-only first, then one ensure"
    );
    assert_eq!(
        service_writes(&h.server.requests()),
        [" 200", "status 200", " 200", "status 200"],
        "finalizer, LoadBalancerProvisioned=Pending through /status, the provider's \
         annotations, then the ingress with LoadBalancerProvisioned=True through \
         /status (this provider cannot tell target health: no more)"
    );
    let lb = load_balancer(&h, "web").expect("a load balancer exists");
    assert!(has_finalizer(&service));
    assert_eq!(ingress_ips(&service), std::slice::from_ref(&lb.ip));
    assert_eq!(*lb.nodes, ["n1"]);
    assert_eq!(
        service
            .metadata
            .annotations
            .unwrap()
            .get(ANNOTATION_LOAD_BALANCER_ID),
        Some(&lb.name),
        "the provider's ID is recorded"
    );
    for reason in ["EnsuringLoadBalancer", "EnsuredLoadBalancer"] {
        assert_eq!(h.events("web", reason).await.len(), 1, "{reason}");
    }
    h.stop().await;
}

#[tokio::test]
async fn a_provider_that_tells_ownership_from_the_service_costs_one_ensure_per_new_service() {
    let mut h = Harness::new().await;
    h.create_node(&ready_node("n1")).await;
    for name in ["web", "api", "db"] {
        h.create_service(&load_balancer_service(name, &[])).await;
    }
    h.start(&[ControllerId::Service], &fast_settings()).await;
    for name in ["web", "api", "db"] {
        wait_ingress(&h, name).await;
    }
    h.settled().await;
    let ops: Vec<Operation> = h.cloud.calls().iter().map(|c| c.op).collect();
    assert_eq!(
        ops,
        [Operation::EnsureLoadBalancer, Operation::LoadBalancerHealth].repeat(3),
        "no read before each ensure, as upstream's controller; one health read \
         after it, for the Service's conditions, and none once healthy"
    );
    h.stop().await;
}

#[tokio::test]
async fn updates_the_provider_does_not_read_cost_no_provider_call() {
    let mut h = synced_web().await;
    let before = h.settled().await;
    h.cloud.clear_calls();
    h.server.reset_stats();
    patch(
        &h,
        "web",
        serde_json::json!({ "metadata": { "labels": { "team": "web" } } }),
    )
    .await;
    let status = serde_json::json!({ "status": { "conditions": [{ "type": "Example", "status": "True", "reason": "Test", "message": "", "lastTransitionTime": "2024-01-01T00:00:00Z" }] } });
    h.services()
        .patch_status("web", &PatchParams::default(), &Patch::Strategic(&status))
        .await
        .unwrap();
    let after = h.settled().await;
    assert!(
        after.reconciles > before.reconciles,
        "the changes were reconciled"
    );
    assert!(
        h.cloud.calls().is_empty(),
        "no provider call: {:?}",
        h.cloud.calls()
    );
    let our_writes = h
        .server
        .requests()
        .iter()
        .filter(|r| r.resource == "services" && r.verb == "patch")
        .count();
    assert_eq!(our_writes, 2, "only the test's own two writes");
    h.stop().await;
}

#[tokio::test]
async fn each_field_the_provider_reads_causes_one_ensure() {
    let mut h = synced_web().await;
    let changes = [
        (
            "port",
            serde_json::json!({ "spec": { "ports": [{ "port": 8080, "protocol": "TCP" }] } }),
        ),
        (
            "annotation",
            serde_json::json!({ "metadata": { "annotations": { "example.com/tier": "gold" } } }),
        ),
        (
            "traffic policy",
            serde_json::json!({ "spec": { "externalTrafficPolicy": "Local" } }),
        ),
        // kube-apiserver allocates one for Local; the test API server does
        // not, so the test sets it, as a user may.
        (
            "health check node port",
            serde_json::json!({ "spec": { "healthCheckNodePort": 32100 } }),
        ),
        (
            "source ranges",
            serde_json::json!({ "spec": { "loadBalancerSourceRanges": ["10.0.0.0/8"] } }),
        ),
        (
            "IP families",
            serde_json::json!({ "spec": { "ipFamilyPolicy": "PreferDualStack", "ipFamilies": ["IPv4", "IPv6"] } }),
        ),
        (
            "protocol",
            serde_json::json!({ "spec": { "ports": [{ "port": 8080, "protocol": "UDP" }] } }),
        ),
    ];
    for (what, change) in changes {
        let before = h.cloud.count(Operation::EnsureLoadBalancer);
        patch(&h, "web", change).await;
        eventually(
            &format!("an ensure after the {what} change"),
            WAIT,
            || async { (h.cloud.count(Operation::EnsureLoadBalancer) > before).then_some(()) },
        )
        .await
        .expect("a bounded wait");
        h.settled().await;
        assert_eq!(
            h.cloud.count(Operation::EnsureLoadBalancer),
            before + 1,
            "exactly one ensure for the {what} change"
        );
    }
    let lb = load_balancer(&h, "web").unwrap();
    assert_eq!(lb.ports.len(), 1);
    assert_eq!(
        (lb.ports[0].port, lb.ports[0].protocol.as_str()),
        (8080, "UDP")
    );
    assert_eq!(lb.external_traffic_policy.as_deref(), Some("Local"));
    assert_eq!(lb.health_check_node_port, Some(32100));
    assert_eq!(lb.source_ranges, ["10.0.0.0/8"]);
    assert_eq!(h.cloud.count(Operation::UpdateLoadBalancer), 0);
    h.stop().await;
}

#[tokio::test]
async fn a_service_deleted_while_the_ccm_is_down_is_cleaned_up_on_start() {
    let mut h = synced_web().await;
    h.stop().await;
    h.services()
        .delete("web", &DeleteParams::default())
        .await
        .unwrap();
    let terminating = h
        .services()
        .get("web")
        .await
        .expect("the finalizer keeps it");
    assert!(terminating.metadata.deletion_timestamp.is_some());
    h.cloud.clear_calls();

    h.start(&[ControllerId::Service], &fast_settings()).await;
    eventually("the Service is gone", WAIT, || async {
        h.services()
            .get_opt("web")
            .await
            .unwrap()
            .is_none()
            .then_some(())
    })
    .await
    .expect("a bounded wait");
    assert!(
        h.cloud.load_balancers().is_empty(),
        "the load balancer was deleted"
    );
    assert_eq!(h.cloud.count(Operation::EnsureLoadBalancerDeleted), 1);
    assert_eq!(
        h.cloud.count(Operation::EnsureLoadBalancer),
        0,
        "nothing is created for a Service being deleted"
    );
    assert_eq!(h.events("web", "DeletedLoadBalancer").await.len(), 1);
    h.stop().await;
}

async fn wait_cleaned_up(h: &Harness, name: &str) -> Service {
    eventually(&format!("{name} cleaned up"), WAIT, || async {
        h.services()
            .get(name)
            .await
            .ok()
            .filter(|s| !has_finalizer(s))
    })
    .await
    .expect("a bounded wait")
}

#[tokio::test]
async fn type_changed_away_from_load_balancer_deletes_clears_status_then_drops_the_finalizer() {
    let mut h = synced_web().await;
    h.server.reset_stats();
    patch(
        &h,
        "web",
        serde_json::json!({ "spec": { "type": "ClusterIP" } }),
    )
    .await;
    let service = wait_cleaned_up(&h, "web").await;
    assert!(ingress_ips(&service).is_empty(), "status cleared");
    assert!(h.cloud.load_balancers().is_empty());
    let writes: Vec<String> = h
        .server
        .requests()
        .into_iter()
        .filter(|r| r.resource == "services" && r.verb == "patch")
        .map(|r| r.subresource)
        .collect();
    assert_eq!(
        writes,
        ["", "status", ""],
        "the test's type change, then status cleared before the finalizer is removed"
    );
    for reason in ["DeletingLoadBalancer", "DeletedLoadBalancer"] {
        assert_eq!(h.events("web", reason).await.len(), 1, "{reason}");
    }
    h.settled().await;
    assert_eq!(
        h.cloud.count(Operation::EnsureLoadBalancerDeleted),
        1,
        "deleted once"
    );
    h.stop().await;
}

#[tokio::test]
async fn a_class_set_while_the_ccm_was_down_hands_the_service_over() {
    let mut h = synced_web().await;
    h.stop().await;
    // Kubernetes only lets a class be set while changing the type to
    // LoadBalancer, so: away, and back with a class.
    patch(
        &h,
        "web",
        serde_json::json!({ "spec": { "type": "NodePort" } }),
    )
    .await;
    patch(&h, "web", serde_json::json!({ "spec": { "type": "LoadBalancer", "loadBalancerClass": "example.com/other" } })).await;
    h.cloud.clear_calls();
    h.start(&[ControllerId::Service], &fast_settings()).await;

    let service = wait_cleaned_up(&h, "web").await;
    assert!(h.cloud.load_balancers().is_empty());
    assert!(ingress_ips(&service).is_empty());
    h.settled().await;
    let ops: Vec<Operation> = h.cloud.calls().iter().map(|c| c.op).collect();
    assert_eq!(ops, [Operation::EnsureLoadBalancerDeleted]);
    h.stop().await;
}

#[tokio::test]
async fn services_of_another_type_or_class_are_left_entirely_alone() {
    let mut h = Harness::new().await;
    h.create_node(&ready_node("n1")).await;
    let mut classed = load_balancer_service("classed", &[]);
    classed.spec.as_mut().unwrap().load_balancer_class = Some("example.com/other".into());
    h.create_service(&classed).await;
    let mut node_port = load_balancer_service("plain", &[]);
    node_port.spec.as_mut().unwrap().type_ = Some("NodePort".into());
    h.create_service(&node_port).await;
    h.server.reset_stats();
    h.start(&[ControllerId::Service], &fast_settings()).await;
    let settled = h.settled().await;

    assert!(settled.reconciles >= 2, "both Services were looked at");
    assert!(h.cloud.calls().is_empty(), "{:?}", h.cloud.calls());
    let writes = h
        .server
        .requests()
        .into_iter()
        .filter(|r| r.resource == "services" && r.verb != "list" && r.verb != "watch")
        .count();
    assert_eq!(writes, 0);
    for name in ["classed", "plain"] {
        assert!(!has_finalizer(&h.services().get(name).await.unwrap()));
    }
    h.stop().await;
}

#[tokio::test]
async fn provider_calls_never_exceed_concurrent_service_syncs() {
    let fake = observing();
    fake.set_latency(Duration::from_millis(200));
    let mut h = Harness::with_provider(fake.clone(), Arc::new(fake.clone())).await;
    h.create_node(&ready_node("n1")).await;
    for i in 0..9 {
        h.create_service(&load_balancer_service(&format!("svc{i}"), &[]))
            .await;
    }
    let settings = ControllerSettings {
        concurrent_service_syncs: 3,
        ..fast_settings()
    };
    h.start(&[ControllerId::Service], &settings).await;

    for i in 0..9 {
        wait_ingress(&h, &format!("svc{i}")).await;
    }
    assert_eq!(
        fake.most_in_flight(),
        3,
        "three Services at a time, never more"
    );
    h.stop().await;
}
