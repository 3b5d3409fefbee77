//! A Service load balancer's conditions: its droplets' health, read from
//! the load balancer's `status` with one GET, and a create beyond the
//! account's load balancer limit refused as `QuotaExceeded`.

use crate::support;

use ccm_cloud_provider::{CloudError, LoadBalancer, LoadBalancerHealth, TargetHealth, TargetState};
use ccm_provider_digitalocean::annotations;
use ccm_provider_digitalocean::test_util::account;
use support::{annotated, node, service};

const UID: &str = "3f2a9c1e-5b7d-4e8f-9a0b-1c2d3e4f5a6b";

fn health_of(targets: &[(&str, TargetState)]) -> LoadBalancerHealth {
    LoadBalancerHealth {
        targets: targets
            .iter()
            .map(|(node, state)| TargetHealth::new(*node, state.clone()))
            .collect(),
    }
}

#[tokio::test]
async fn droplet_health_follows_the_load_balancers_status_with_one_get_each() {
    let account = account();
    account.add_droplets(3);
    account.set_activate_after_reads(5);
    let provider = account.provider().await;
    let svc = service("web", UID, &[]);
    let nodes = [
        node("node-0", Some("digitalocean://1000")),
        node("node-1", Some("digitalocean://1001")),
        // On the load balancer (found by name), but not nameable by droplet ID.
        node("node-2", None),
    ];
    let ensured = provider.ensure_load_balancer("c1", &svc, &nodes).await;
    assert!(
        matches!(ensured, Err(CloudError::Retry { .. })),
        "{ensured:?}"
    );
    let id = account.load_balancers()[0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let get = format!("/v2/load_balancers/{id}");

    // Still `new`, found by the ID the provider recorded when it created it.
    account.clear_requests();
    let health = provider.load_balancer_health("c1", &svc, &nodes).await;
    assert_eq!(
        health.unwrap(),
        Some(health_of(&[
            ("node-0", TargetState::Initial),
            ("node-1", TargetState::Initial),
        ]))
    );
    assert_eq!(account.count("GET", &get), 1);
    assert_eq!(account.request_count(), 1, "{:?}", account.requests());

    let svc = annotated(svc, &[(annotations::LOAD_BALANCER_ID, &id)]);
    account.set_load_balancer_status(0, "active");
    account.clear_requests();
    let health = provider.load_balancer_health("c1", &svc, &nodes).await;
    assert_eq!(
        health.unwrap(),
        Some(health_of(&[
            ("node-0", TargetState::Healthy),
            ("node-1", TargetState::Healthy),
        ]))
    );
    assert_eq!(account.count("GET", &get), 1);
    assert_eq!(account.request_count(), 1, "{:?}", account.requests());

    account.set_load_balancer_status(0, "errored");
    account.clear_requests();
    let errored = TargetState::Unhealthy {
        reason: "errored".into(),
    };
    let health = provider.load_balancer_health("c1", &svc, &nodes).await;
    assert_eq!(
        health.unwrap(),
        Some(health_of(&[
            ("node-0", errored.clone()),
            ("node-1", errored),
        ]))
    );
    assert_eq!(account.request_count(), 1, "{:?}", account.requests());
    assert_eq!(account.mutations(), 0);
}

#[tokio::test]
async fn a_service_without_a_load_balancer_has_no_targets() {
    let account = account();
    account.add_droplets(1);
    let provider = account.provider().await;
    let nodes = [node("node-0", Some("digitalocean://1000"))];
    account.clear_requests();

    let health = provider
        .load_balancer_health("c1", &service("web", UID, &[]), &nodes)
        .await;

    assert_eq!(health.unwrap(), Some(LoadBalancerHealth::default()));
    assert_eq!(account.mutations(), 0);
}

#[tokio::test]
async fn a_create_beyond_the_load_balancer_limit_is_quota_exceeded_not_throttled() {
    let account = account();
    account.set_activate_after_reads(0);
    account.set_load_balancer_limit(1);
    let provider = account.provider().await;
    let first = service("web", UID, &[]);
    provider
        .ensure_load_balancer("c1", &first, &[])
        .await
        .unwrap();

    let second = service("api", "9b1d7c4e-2f3a-4b5c-8d6e-7f8091a2b3c4", &[]);
    let err = provider
        .ensure_load_balancer("c1", &second, &[])
        .await
        .unwrap_err();

    let CloudError::QuotaExceeded { message } = &err else {
        panic!("want QuotaExceeded, got {err:?}");
    };
    assert_eq!(
        message,
        "You have reached your load balancer limit, maximum allowed 1. \
         Please contact support to raise your load balancer limit."
    );
    assert_eq!(err.kind(), "quota_exceeded");
    assert_eq!(account.count("POST", "/v2/load_balancers"), 2);
    assert_eq!(account.load_balancers().len(), 1);

    // Its 429 spent no rate-limit budget: the next call is sent at once.
    account.clear_requests();
    let status = provider.get_load_balancer("c1", &first).await.unwrap();
    assert!(status.is_some());
    assert!(account.request_count() >= 1, "sent, not held back");
}
