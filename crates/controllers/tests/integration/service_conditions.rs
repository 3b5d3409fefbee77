//! The Service's load-balancer conditions against the fake cloud and the
//! test API server: `LoadBalancerProvisioned` through Pending to True,
//! `LoadBalancerTargetsHealthy` from the cloud's health, a stopped
//! instance named, failures with their reasons, no write and no health
//! call for a steady healthy Service, and the conditions gone with the
//! load balancer.

use crate::support;

use std::collections::BTreeMap;
use std::time::Duration;

use ccm_cloud_provider::TargetState;
use ccm_controllers::ControllerId;
use ccm_provider_fake::{
    ANNOTATION_HEALTHCHECK_INTERVAL, FakeCloud, InjectedError, Instance, InstanceState, Operation,
};
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::api::{Patch, PatchParams};
use support::{Harness, eventually, fast_settings, load_balancer_service, ready_node};

const WAIT: Duration = Duration::from_secs(20);

/// The Service's condition `type_`, once it says `status` and `reason`.
async fn condition_of(h: &Harness, type_: &str, status: &str, reason: &str) -> Condition {
    eventually(&format!("{type_}={status}/{reason}"), WAIT, || async {
        let service = h.services().get("web").await.ok()?;
        service
            .status?
            .conditions?
            .into_iter()
            .find(|c| c.type_ == type_ && c.status == status && c.reason == reason)
    })
    .await
    .expect("a bounded wait")
}

/// A running instance for node `name`.
fn instance(name: &str) -> Instance {
    Instance {
        name: name.into(),
        provider_id: format!("fake://{name}"),
        instance_type: "fake.small".into(),
        zone: "zone-a".into(),
        region: "region-1".into(),
        addresses: Vec::new(),
        state: InstanceState::Running,
        labels: BTreeMap::new(),
    }
}

/// A fresh harness on `fake` with node `n1` and the Service `web`, the
/// service controller started with `settings`.
async fn started(fake: &FakeCloud, settings: &ccm_controllers::ControllerSettings) -> Harness {
    let mut h = Harness::with_cloud(fake.clone()).await;
    h.create_node(&ready_node("n1")).await;
    h.create_service(&load_balancer_service("web", &[])).await;
    h.start(&[ControllerId::Service], settings).await;
    h
}

async fn conditions(h: &Harness) -> Vec<Condition> {
    let service: Service = h.services().get("web").await.expect("the Service");
    service
        .status
        .and_then(|s| s.conditions)
        .unwrap_or_default()
}

#[tokio::test]
async fn a_new_service_is_provisioned_then_healthy_and_a_stopped_instance_is_named() {
    let fake = FakeCloud::default();
    fake.set_auto_instances(true);
    let mut h = Harness::with_cloud(fake.clone()).await;
    fake.add_instance(instance("n1"));
    fake.add_instance(instance("n2"));
    h.create_node(&ready_node("n1")).await;
    h.create_node(&ready_node("n2")).await;
    // Targets registering: the cloud says `initial` for n2 at first.
    fake.set_target_health("n2", Some(TargetState::Initial));
    h.create_service(&load_balancer_service("web", &[])).await;
    h.start(&[ControllerId::Service], &fast_settings()).await;

    let provisioned = condition_of(&h, "LoadBalancerProvisioned", "True", "Provisioned").await;
    assert!(
        provisioned
            .message
            .starts_with("load balancer ready at 100.64."),
        "{}",
        provisioned.message
    );
    let initializing = condition_of(
        &h,
        "LoadBalancerTargetsHealthy",
        "Unknown",
        "TargetsInitializing",
    )
    .await;
    assert_eq!(
        initializing.message,
        "1 of 2 targets healthy; initializing: n2"
    );

    // Registered: the next ask, with backoff, says all healthy.
    fake.set_target_health("n2", None);
    let healthy = condition_of(
        &h,
        "LoadBalancerTargetsHealthy",
        "True",
        "AllTargetsHealthy",
    )
    .await;
    assert_eq!(healthy.message, "2 of 2 targets healthy");
    assert_ne!(
        healthy.last_transition_time,
        initializing.last_transition_time
    );

    // Steady and healthy: no write, no health call over another quiescent
    // window (when no ask is due is `service/health.rs`'s, unit-tested on
    // the paused clock).
    h.settled().await;
    let asks = fake.count(Operation::LoadBalancerHealth);
    let before = conditions(&h).await;
    h.settled().await;
    assert_eq!(
        fake.count(Operation::LoadBalancerHealth),
        asks,
        "a healthy Service is not asked about"
    );
    assert_eq!(conditions(&h).await, before);

    // n1's instance stops: its kubelet stops reporting (a readiness flip,
    // asked about a minute after the last ask at the earliest), and the
    // cloud-node-lifecycle controller taints it shut down (asked at once).
    // The condition names n1.
    assert!(fake.set_instance_state("n1", InstanceState::Stopped));
    h.set_ready("n1", false).await;
    let taint = serde_json::json!({ "spec": { "taints": [{
        "key": "node.cloudprovider.kubernetes.io/shutdown", "effect": "NoSchedule"
    }] } });
    h.nodes()
        .patch("n1", &PatchParams::default(), &Patch::Merge(&taint))
        .await
        .expect("tainted");
    let unhealthy = condition_of(
        &h,
        "LoadBalancerTargetsHealthy",
        "False",
        "TargetsUnhealthy",
    )
    .await;
    assert_eq!(
        unhealthy.message,
        "1 of 2 targets healthy; unhealthy: n1 (Target.InvalidState)"
    );
    let provisioned_now = conditions(&h)
        .await
        .into_iter()
        .find(|c| c.type_ == "LoadBalancerProvisioned")
        .expect("still there");
    assert_eq!(
        provisioned_now.last_transition_time, provisioned.last_transition_time,
        "the other condition is untouched"
    );
    h.stop().await;
}

#[tokio::test]
async fn failures_give_their_reason_and_a_fix_gives_true() {
    let fake = FakeCloud::default();
    fake.set_auto_instances(true);
    fake.fail_next(
        Some(Operation::EnsureLoadBalancer),
        InjectedError::QuotaExceeded("TooManyLoadBalancers: the limit is 50".into()),
        1,
    );
    fake.fail_next(
        Some(Operation::EnsureLoadBalancer),
        InjectedError::Other("the cloud is down".into()),
        1,
    );
    let mut h = started(&fake, &fast_settings()).await;

    let quota = condition_of(&h, "LoadBalancerProvisioned", "False", "QuotaExceeded").await;
    assert_eq!(quota.message, "TooManyLoadBalancers: the limit is 50");
    let failed = condition_of(&h, "LoadBalancerProvisioned", "False", "CloudError").await;
    assert_eq!(failed.message, "the cloud is down");
    condition_of(&h, "LoadBalancerProvisioned", "True", "Provisioned").await;
    condition_of(
        &h,
        "LoadBalancerTargetsHealthy",
        "True",
        "AllTargetsHealthy",
    )
    .await;

    // A malformed annotation: False/InvalidAnnotation, and no cloud change.
    h.settled().await;
    let ensures = fake.count(Operation::EnsureLoadBalancer);
    let patch = serde_json::json!({ "metadata": { "annotations": BTreeMap::from([(
        ANNOTATION_HEALTHCHECK_INTERVAL, "often"
    )]) } });
    h.services()
        .patch("web", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("annotated");
    let invalid = condition_of(&h, "LoadBalancerProvisioned", "False", "InvalidAnnotation").await;
    assert!(
        invalid.message.contains(ANNOTATION_HEALTHCHECK_INTERVAL),
        "{}",
        invalid.message
    );
    h.settled().await;
    assert_eq!(fake.count(Operation::EnsureLoadBalancer), ensures);
    h.stop().await;
}

#[tokio::test]
async fn the_conditions_go_with_the_load_balancer() {
    let fake = FakeCloud::default();
    fake.set_auto_instances(true);
    let mut h = started(&fake, &fast_settings()).await;
    condition_of(
        &h,
        "LoadBalancerTargetsHealthy",
        "True",
        "AllTargetsHealthy",
    )
    .await;

    // Another writer's condition is kept throughout.
    let theirs = serde_json::json!({ "status": { "conditions": [{
        "type": "example.com/Audited", "status": "True", "reason": "Checked",
        "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"
    }] } });
    h.services()
        .patch_status("web", &PatchParams::default(), &Patch::Strategic(&theirs))
        .await
        .expect("their condition");
    let patch =
        serde_json::json!({ "spec": { "type": "ClusterIP", "externalTrafficPolicy": null } });
    h.services()
        .patch("web", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("no longer a LoadBalancer");
    let left = eventually("our conditions removed", WAIT, || async {
        let left = conditions(&h).await;
        (left.len() == 1).then_some(left)
    })
    .await
    .expect("a bounded wait");
    assert_eq!(left[0].type_, "example.com/Audited");
    assert!(fake.load_balancers().is_empty());
    h.stop().await;
}

#[tokio::test]
async fn with_target_health_off_no_health_is_read_and_that_condition_is_left_out() {
    let fake = FakeCloud::default();
    fake.set_auto_instances(true);
    let settings = ccm_controllers::ControllerSettings {
        load_balancer_target_health: false,
        ..fast_settings()
    };
    let mut h = started(&fake, &settings).await;
    condition_of(&h, "LoadBalancerProvisioned", "True", "Provisioned").await;
    h.settled().await;
    assert_eq!(fake.count(Operation::LoadBalancerHealth), 0);
    let types: Vec<String> = conditions(&h).await.into_iter().map(|c| c.type_).collect();
    assert_eq!(types, ["LoadBalancerProvisioned"]);
    h.stop().await;
}
