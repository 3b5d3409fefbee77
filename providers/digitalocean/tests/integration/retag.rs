//! Re-tagging load balancers with the cluster tag through the provider's
//! `ServiceObserver`, as upstream's tags syncer: one list, one batched tag
//! call, only load balancers the Service owns.
//!
//! The tag call goes to the fake directly: DigitalOcean's published spec
//! leaves `load_balancer` out of the tag endpoint's `resource_type`, so
//! Prism refuses what upstream sends and the real API accepts (the last
//! test pins that down).

use crate::dry_run::DryRun;
use crate::support;

use std::sync::Arc;

use ccm_cloud_provider::fence::scope;
use ccm_cloud_provider::k8s_openapi::api::core::v1::Service;
use ccm_cloud_provider::{CloudProvider, Environment, LoadBalancer, ServiceObserver};
use ccm_provider_digitalocean::DigitalOceanProvider;
use ccm_provider_digitalocean::test_util::{Account, account};
use serde_json::json;
use support::service;

const CLUSTER_TAG: &str = "k8s:c1";
const TAG_RESOURCES: &str = "/v2/tags/k8s:c1/resources";
const UIDS: [&str; 3] = [
    "3f2a9c1e-5b7d-4e8f-9a0b-1c2d3e4f5a6b",
    "7c1d2e3f-4a5b-4c6d-8e7f-9a0b1c2d3e4f",
    "9e8d7c6b-5a4f-4e3d-8c2b-1a0f9e8d7c6b",
];

fn services() -> Vec<Arc<Service>> {
    UIDS.iter()
        .enumerate()
        .map(|(i, uid)| Arc::new(service(&format!("svc-{i}"), uid, &[])))
        .collect()
}

/// One load balancer per Service, created without a cluster ID, then
/// tagged `tags[i]`.
async fn load_balancers(account: &Account, tags: [&[&str]; 3]) -> Vec<Arc<Service>> {
    account.set_activate_after_reads(0);
    let creator = account.provider().await;
    let services = services();
    for svc in &services {
        creator.ensure_load_balancer("c1", svc, &[]).await.unwrap();
    }
    for (i, t) in tags.iter().enumerate() {
        account.set_load_balancer_tags(i, t);
    }
    services
}

async fn tagging_provider(account: &Account, env: Environment) -> DigitalOceanProvider {
    account
        .provider_with(&env.with("DO_CLUSTER_ID", "c1"))
        .await
}

fn observer(provider: &DigitalOceanProvider) -> &dyn ServiceObserver {
    provider.service_observer().expect("a service observer")
}

/// The tags of each load balancer, in creation order.
fn tags_of(account: &Account) -> Vec<serde_json::Value> {
    let mut lbs = account.load_balancers();
    lbs.sort_by_key(|lb| lb["name"].as_str().unwrap().to_owned());
    let names: Vec<String> = services()
        .iter()
        .map(|s| ccm_cloud_provider::default_load_balancer_name(s))
        .collect();
    names
        .iter()
        .map(|n| {
            lbs.iter()
                .find(|lb| lb["name"] == n.as_str())
                .expect("load balancer")["tags"]
                .clone()
        })
        .collect()
}

#[tokio::test]
async fn untagged_load_balancers_are_tagged_in_one_call_and_others_owners_are_left_alone() {
    let account = account();
    let other = "k8s-service:0a1b2c3d-0000-4000-8000-000000000000";
    let own0 = format!("k8s-service:{}", UIDS[0]);
    let own1 = format!("k8s-service:{}", UIDS[1]);
    let services = load_balancers(
        &account,
        [&[own0.as_str()], &[own1.as_str(), CLUSTER_TAG], &[other]],
    )
    .await;
    let provider = tagging_provider(&account, account.env_bypassing_prism()).await;
    account.clear_requests();

    observer(&provider).sync_services(&services).await.unwrap();

    assert_eq!(account.count("GET", "/v2/load_balancers"), 1, "one list");
    assert_eq!(
        account.count("POST", TAG_RESOURCES),
        1,
        "one batched tag call"
    );
    assert_eq!(account.count("POST", "/v2/tags"), 0, "the tag exists");
    assert_eq!(
        tags_of(&account),
        vec![
            json!([own0, CLUSTER_TAG]),
            json!([own1, CLUSTER_TAG]),
            json!([other]),
        ],
        "another Service's load balancer is not tagged"
    );

    account.clear_requests();
    observer(&provider).sync_services(&services).await.unwrap();
    assert_eq!(account.requests(), vec![], "not due again for 15 minutes");

    let restarted = tagging_provider(&account, account.env_bypassing_prism()).await;
    account.clear_requests();
    observer(&restarted).sync_services(&services).await.unwrap();
    assert_eq!(account.count("GET", "/v2/load_balancers"), 1);
    assert_eq!(account.mutations(), 0, "every load balancer is tagged");
}

#[tokio::test]
async fn a_missing_tag_is_created_and_the_tagging_retried_once() {
    let account = account();
    let services = load_balancers(&account, [&[], &[], &[]]).await;
    let provider = tagging_provider(&account, account.env_bypassing_prism()).await;
    account.clear_requests();

    observer(&provider).sync_services(&services).await.unwrap();

    let calls: Vec<(String, String)> = account
        .requests()
        .into_iter()
        .map(|r| (r.method, r.path))
        .collect();
    let call = |m: &str, p: &str| (m.to_owned(), p.to_owned());
    assert_eq!(
        calls,
        vec![
            call("GET", "/v2/load_balancers"),
            call("POST", TAG_RESOURCES),
            call("POST", "/v2/tags"),
            call("POST", TAG_RESOURCES),
        ]
    );
    assert_eq!(tags_of(&account), vec![json!([CLUSTER_TAG]); 3]);
}

/// A dry run sends no tagging, so no 404 tells it the tag is missing: it
/// asks, and plans the tag's creation, then the tagging.
#[tokio::test]
async fn a_dry_run_plans_a_missing_tags_creation_before_the_tagging() {
    let account = account();
    let services = load_balancers(&account, [&[], &[], &[]]).await;
    let provider = tagging_provider(&account, account.env_bypassing_prism()).await;
    account.clear_requests();
    let fence = Arc::new(DryRun::default());

    let planned = scope(fence.clone(), observer(&provider).sync_services(&services)).await;

    assert!(planned.is_err(), "the tagging was refused, not sent");
    let operations: Vec<String> = fence.planned().into_iter().map(|p| p.operation).collect();
    assert_eq!(
        operations,
        ["POST /v2/tags".to_owned(), format!("POST {TAG_RESOURCES}")],
        "{:?}",
        fence.described()
    );
    assert_eq!(account.mutations(), 0, "{:?}", account.requests());
    assert_eq!(account.count("GET", "/v2/tags/k8s:c1"), 1);

    // Once the tag exists, the dry run (a new process: re-tagging is due
    // at its start) plans the tagging only.
    observer(&provider).sync_services(&services).await.unwrap();
    account.set_load_balancer_tags(0, &[]);
    let provider = tagging_provider(&account, account.env_bypassing_prism()).await;
    let fence = Arc::new(DryRun::default());
    let planned = scope(fence.clone(), observer(&provider).sync_services(&services)).await;
    assert!(planned.is_err(), "the tagging was refused, not sent");
    let operations: Vec<String> = fence.planned().into_iter().map(|p| p.operation).collect();
    assert_eq!(operations, [format!("POST {TAG_RESOURCES}")]);
}

#[tokio::test]
async fn no_load_balancer_service_means_no_call() {
    let account = account();
    let provider = tagging_provider(&account, account.env_bypassing_prism()).await;
    account.clear_requests();
    let mut cluster_ip = service("internal", UIDS[0], &[]);
    cluster_ip.spec.get_or_insert_default().type_ = Some("ClusterIP".into());
    observer(&provider)
        .sync_services(&[Arc::new(cluster_ip)])
        .await
        .unwrap();
    assert_eq!(account.requests(), vec![]);
}

#[tokio::test]
async fn prism_refuses_the_load_balancer_resource_type_upstream_sends() {
    let account = account();
    let services = load_balancers(&account, [&[], &[CLUSTER_TAG], &[CLUSTER_TAG]]).await;
    let provider = tagging_provider(&account, account.env()).await;
    account.clear_requests();

    let err = observer(&provider)
        .sync_services(&services)
        .await
        .unwrap_err();

    assert!(err.to_string().contains("422"), "{err}");
    assert_eq!(account.count("POST", TAG_RESOURCES), 0, "Prism stopped it");
}
