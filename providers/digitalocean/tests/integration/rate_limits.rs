//! The API's rate limit: 429 and a spent `RateLimit-Remaining` answer
//! Throttled with the server's reset time; `DO_API_RATE_LIMIT_QPS` paces
//! requests on the client.

use crate::support;

use std::time::{Duration, Instant};

use ccm_cloud_provider::{CloudError, Instances, LoadBalancer};
use ccm_provider_digitalocean::test_util::account;
use support::{node, service};

fn throttled_for(result: Result<impl std::fmt::Debug, CloudError>) -> Duration {
    match result {
        Err(CloudError::Throttled { retry_after }) => retry_after,
        other => panic!("want Throttled, got {other:?}"),
    }
}

#[tokio::test]
async fn a_429_is_throttled_until_the_servers_reset_time() {
    let account = account();
    account.add_droplets(1);
    let provider = account.provider().await;
    account.throttle_next(1, 30);

    let wait = throttled_for(
        provider
            .instance_exists(&node("node-0", Some("digitalocean://1000")))
            .await,
    );

    // RateLimit-Reset is whole seconds: 29 s and a fraction to 30 s remain.
    assert!(
        (Duration::from_secs(28)..=Duration::from_secs(30)).contains(&wait),
        "{wait:?}"
    );
}

#[tokio::test]
async fn after_a_429_nothing_is_sent_until_the_reset() {
    let account = account();
    account.add_droplets(3);
    let provider = account.provider().await;
    account.throttle_next(1, 120);
    let nodes = [node("node-0", None), node("node-1", None)];

    throttled_for(provider.instances_metadata(&nodes).await);
    account.clear_requests();
    let wait = throttled_for(
        provider
            .ensure_load_balancer("c1", &service("web", "u-1", &[]), &nodes)
            .await,
    );

    assert!(wait > Duration::from_secs(100), "{wait:?}");
    assert!(
        account.requests().is_empty(),
        "held back: {:?}",
        account.requests()
    );
}

#[tokio::test]
async fn a_spent_budget_is_throttled_without_calling_the_api() {
    let account = account();
    account.add_droplets(1);
    let provider = account.provider().await;
    let n = node("node-0", Some("digitalocean://1000"));
    // This call's answer says 0 requests remain this hour.
    account.set_remaining(1);
    assert!(provider.instance_exists(&n).await.unwrap());
    account.clear_requests();

    let wait = throttled_for(provider.instance_exists(&n).await);

    assert!(
        wait > Duration::ZERO && wait <= Duration::from_secs(60),
        "until RateLimit-Reset: {wait:?}"
    );
    assert!(account.requests().is_empty());
}

#[tokio::test]
async fn a_throttled_batch_fails_as_a_whole() {
    let account = account();
    account.add_droplets(2);
    let provider = account.provider().await;
    account.throttle_next(1, 10);

    let nodes = [node("node-0", None), node("node-1", None)];
    throttled_for(provider.instances_exist(&nodes).await);
}

#[tokio::test]
async fn client_side_rate_limit_spaces_requests() {
    let account = account();
    account.add_droplets(1);
    let provider = account
        .provider_with(&account.env().with("DO_API_RATE_LIMIT_QPS", "20"))
        .await;
    let n = node("node-0", Some("digitalocean://1000"));

    let start = Instant::now();
    for _ in 0..6 {
        provider.instance_exists(&n).await.unwrap();
    }

    // 50 ms apart: the first of six waits for the one initialize sent.
    assert!(
        start.elapsed() >= Duration::from_millis(250),
        "{:?}",
        start.elapsed()
    );
}
