//! A dry run (`--dry-run`) of the provider against the fake API behind
//! Prism: every request is described to the request fence, reads are sent,
//! and mutations are refused and recorded as the plan.

use crate::support;

use std::sync::Arc;

use ccm_cloud_provider::fence::{Request, RequestFence, scope};
use ccm_cloud_provider::k8s_openapi::api::core::v1::Service;
use ccm_cloud_provider::{CloudError, CloudProvider, LoadBalancer};
use ccm_provider_digitalocean::DigitalOceanProvider;
use ccm_provider_digitalocean::annotations;
use ccm_provider_digitalocean::test_util::{Account, account};
use parking_lot::Mutex;
use support::{annotated, node, port, service};

const UID: &str = "6b1f0c2d-3e4a-4b5c-8d6e-7f8091a2b3c4";

/// One request as the provider described it.
#[derive(Debug, Clone)]
pub(crate) struct Described {
    pub(crate) operation: String,
    pub(crate) mutates: bool,
    pub(crate) detail: String,
}

/// A dry run's fence: lets reads through, refuses mutations, and records
/// every request it is asked about.
#[derive(Debug, Default)]
pub(crate) struct DryRun(Mutex<Vec<Described>>);

impl DryRun {
    pub(crate) fn described(&self) -> Vec<Described> {
        self.0.lock().clone()
    }

    pub(crate) fn planned(&self) -> Vec<Described> {
        self.described().into_iter().filter(|d| d.mutates).collect()
    }
}

impl RequestFence for DryRun {
    fn check(&self) -> Result<(), String> {
        Ok(())
    }

    fn check_request(&self, request: &Request<'_>) -> Result<(), String> {
        self.0.lock().push(Described {
            operation: request.operation.to_owned(),
            mutates: request.mutates,
            detail: request.detail.to_owned(),
        });
        if request.mutates {
            Err("dry run: planned, not sent".into())
        } else {
            Ok(())
        }
    }

    fn dry_run(&self) -> bool {
        true
    }
}

/// A provider and a Service whose load balancer exists, is active and in
/// shape, with its ID recorded on the Service as the controller records it.
async fn in_shape(account: &Account) -> (DigitalOceanProvider, Service, String) {
    account.add_droplets(2);
    account.set_activate_after_reads(0);
    let provider = account.provider().await;
    let svc = service("web", UID, &[]);
    let ensured = provider
        .ensure_load_balancer("c1", &svc, &nodes())
        .await
        .expect("the load balancer is created");
    let id = ensured.service_annotations[annotations::LOAD_BALANCER_ID].clone();
    let svc = annotated(svc, &[(annotations::LOAD_BALANCER_ID, &id)]);
    account.clear_requests();
    (provider, svc, id)
}

fn nodes() -> Vec<Arc<ccm_cloud_provider::k8s_openapi::api::core::v1::Node>> {
    vec![
        node("node-0", Some("digitalocean://1000")),
        node("node-1", Some("digitalocean://1001")),
    ]
}

#[tokio::test]
async fn a_dry_run_of_an_ensure_already_in_shape_sends_its_reads_and_plans_nothing() {
    let account = account();
    let (provider, svc, id) = in_shape(&account).await;
    assert!(provider.describes_requests());
    let fence = Arc::new(DryRun::default());

    let ensured = scope(
        fence.clone(),
        provider.ensure_load_balancer("c1", &svc, &nodes()),
    )
    .await
    .expect("an ensure with nothing to change succeeds in a dry run");

    assert_eq!(
        ensured.service_annotations[annotations::LOAD_BALANCER_ID],
        id
    );
    assert!(fence.planned().is_empty(), "{:?}", fence.planned());
    let described = fence.described();
    assert!(
        described
            .iter()
            .any(|d| d.operation == format!("GET /v2/load_balancers/{id}")),
        "the load balancer is read by its ID: {described:?}"
    );
    assert_eq!(
        described.len(),
        account.request_count(),
        "every request that reached the API was described first: {described:?}"
    );
    assert_eq!(account.mutations(), 0);
}

#[tokio::test]
async fn a_dry_run_plans_the_put_a_changed_port_needs_and_changes_nothing() {
    let account = account();
    let (provider, mut svc, id) = in_shape(&account).await;
    let before = account.load_balancers();
    svc.spec.get_or_insert_default().ports = Some(vec![port("TCP", 8080, 30080)]);
    let fence = Arc::new(DryRun::default());

    let refused = scope(
        fence.clone(),
        provider.ensure_load_balancer("c1", &svc, &nodes()),
    )
    .await
    .expect_err("the update is refused in a dry run");

    assert!(matches!(refused, CloudError::Retry { .. }), "{refused:?}");
    let planned = fence.planned();
    assert_eq!(
        planned.len(),
        1,
        "one mutation, then the ensure stops: {planned:?}"
    );
    assert_eq!(planned[0].operation, format!("PUT /v2/load_balancers/{id}"));
    let detail = &planned[0].detail;
    assert!(detail.contains(r#""entry_port":8080"#), "{detail}");
    assert!(!detail.contains('\n'), "one line: {detail}");
    assert!(detail.chars().count() <= 301, "cut short: {detail}");
    assert!(
        !detail.contains(&account.token),
        "never the token: {detail}"
    );
    assert_eq!(account.mutations(), 0, "{:?}", account.requests());
    assert_eq!(account.load_balancers(), before, "the cloud is unchanged");
}

#[tokio::test]
async fn a_dry_run_of_a_node_change_plans_the_droplets_added_and_removed() {
    let account = account();
    let (provider, svc, id) = in_shape(&account).await;
    account.add_droplets(1);
    let before = account.load_balancers();
    // node-0 goes, node-2 (droplet 1002) comes.
    let moved = vec![
        node("node-1", Some("digitalocean://1001")),
        node("node-2", Some("digitalocean://1002")),
    ];
    let fence = Arc::new(DryRun::default());

    scope(
        fence.clone(),
        provider.update_load_balancer("c1", &svc, &moved),
    )
    .await
    .expect("a dry run plans past the first change");

    let planned = fence.planned();
    let path = format!("/v2/load_balancers/{id}/droplets");
    let operations: Vec<&str> = planned.iter().map(|p| p.operation.as_str()).collect();
    assert_eq!(
        operations,
        [format!("POST {path}"), format!("DELETE {path}")],
        "both changes, in order: {planned:?}"
    );
    assert!(planned[0].detail.contains("1002"), "{planned:?}");
    assert!(planned[1].detail.contains("1000"), "{planned:?}");
    assert_eq!(account.mutations(), 0, "{:?}", account.requests());
    assert_eq!(account.load_balancers(), before, "the cloud is unchanged");

    // Outside a dry run the update makes what was planned.
    provider
        .update_load_balancer("c1", &svc, &moved)
        .await
        .expect("updated");
    let lb = account
        .load_balancers()
        .into_iter()
        .find(|lb| lb["id"] == id.as_str())
        .expect("the load balancer");
    assert_eq!(lb["droplet_ids"], serde_json::json!([1001, 1002]));
}
