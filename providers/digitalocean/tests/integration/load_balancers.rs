//! Load balancers through the provider's trait methods: created from a
//! Service, polled until active, updated with nodes, deleted; found again
//! after a restart; ownership respected.

use crate::support;

use std::time::Duration;

use ccm_cloud_provider::{CloudError, LoadBalancer};
use ccm_provider_digitalocean::annotations;
use ccm_provider_digitalocean::test_util::{FakeDroplet, account};
use serde_json::json;
use support::{annotated, node, service};

const UID: &str = "3f2a9c1e-5b7d-4e8f-9a0b-1c2d3e4f5a6b";
const DEFAULT_NAME: &str = "a3f2a9c1e5b7d4e8f9a0b1c2d3e4f5a6";

#[tokio::test]
async fn load_balancer_is_created_polled_to_active_updated_and_deleted() {
    let account = account();
    account.add_droplets(4);
    let provider = account.provider().await;
    let svc = service("web", UID, &[]);
    let nodes = [
        node("node-0", Some("digitalocean://1000")),
        node("node-1", Some("digitalocean://1001")),
        node("node-2", None),
    ];
    account.clear_requests();

    let first = provider.ensure_load_balancer("c1", &svc, &nodes).await;
    let Err(CloudError::Retry { after, .. }) = first else {
        panic!("a new load balancer is polled until active: {first:?}");
    };
    assert_eq!(after, Duration::from_secs(15));
    assert_eq!(account.count("POST", "/v2/load_balancers"), 1);
    let lbs = account.load_balancers();
    assert_eq!(lbs.len(), 1);
    let lb = &lbs[0];
    assert_eq!(lb["name"], DEFAULT_NAME);
    assert_eq!(lb["region"]["slug"], "nyc3");
    assert_eq!(lb["type"], "REGIONAL");
    assert_eq!(
        lb["droplet_ids"],
        json!([1000, 1001, 1002]),
        "node-2 found by name"
    );
    assert_eq!(
        lb["forwarding_rules"],
        json!([{"entry_protocol": "tcp", "entry_port": 80, "target_protocol": "tcp", "target_port": 30080, "tls_passthrough": false}])
    );
    assert_eq!(lb["health_check"]["protocol"], "http");
    assert_eq!(
        lb["health_check"]["port"], 10256,
        "Cluster policy checks kube-proxy"
    );
    assert_eq!(lb["health_check"]["path"], "/healthz");
    let id = lb["id"].as_str().unwrap().to_owned();

    account.clear_requests();
    let ensured = provider
        .ensure_load_balancer("c1", &svc, &nodes)
        .await
        .unwrap();
    assert_eq!(ensured.status.ingress.len(), 1);
    assert!(
        ensured.status.ingress[0]
            .ip
            .as_deref()
            .is_some_and(|ip| ip.starts_with("192.0.2."))
    );
    assert_eq!(
        ensured
            .service_annotations
            .get(annotations::LOAD_BALANCER_ID),
        Some(&id)
    );
    let polls = account.requests();
    assert_eq!(
        polls.len(),
        2,
        "one droplet listing for node-2, one GET by ID: {polls:?}"
    );
    assert_eq!(account.count("GET", &format!("/v2/load_balancers/{id}")), 1);
    assert_eq!(
        account.mutations(),
        0,
        "an unchanged load balancer is not PUT"
    );

    // The controller records the ID; from now on lookups are by ID.
    let svc = annotated(svc, &[(annotations::LOAD_BALANCER_ID, &id)]);
    account.add_droplet(FakeDroplet::new(1009, "node-9"));
    account.clear_requests();
    provider
        .update_load_balancer(
            "c1",
            &svc,
            &[
                node("node-0", Some("digitalocean://1000")),
                node("node-9", Some("digitalocean://1009")),
            ],
        )
        .await
        .unwrap();
    assert_eq!(
        account.load_balancers()[0]["droplet_ids"],
        json!([1000, 1009])
    );
    assert_eq!(
        account.count("POST", &format!("/v2/load_balancers/{id}/droplets")),
        1
    );
    assert_eq!(
        account.count("DELETE", &format!("/v2/load_balancers/{id}/droplets")),
        1
    );
    assert_eq!(
        account.count("PUT", &format!("/v2/load_balancers/{id}")),
        0,
        "only backends change"
    );

    let status = provider.get_load_balancer("c1", &svc).await.unwrap();
    assert_eq!(status, Some(ensured.status));

    provider
        .ensure_load_balancer_deleted("c1", &svc)
        .await
        .unwrap();
    assert!(account.load_balancers().is_empty());
    account.clear_requests();
    provider
        .ensure_load_balancer_deleted("c1", &svc)
        .await
        .unwrap();
    assert_eq!(account.mutations(), 0, "already gone: nothing to delete");
    assert_eq!(provider.get_load_balancer("c1", &svc).await.unwrap(), None);
}

#[tokio::test]
async fn a_changed_service_updates_its_load_balancer_with_one_put() {
    let account = account();
    account.add_droplets(2);
    account.set_activate_after_reads(0);
    let provider = account.provider().await;
    let nodes = [node("node-0", Some("digitalocean://1000"))];
    let svc = service("web", UID, &[]);
    let id = provider
        .ensure_load_balancer("c1", &svc, &nodes)
        .await
        .unwrap()
        .service_annotations[annotations::LOAD_BALANCER_ID]
        .clone();

    let svc = annotated(
        svc,
        &[
            (annotations::LOAD_BALANCER_ID, &id),
            (annotations::ENABLE_PROXY_PROTOCOL, "true"),
        ],
    );
    account.clear_requests();
    provider
        .ensure_load_balancer("c1", &svc, &nodes)
        .await
        .unwrap();

    assert_eq!(account.count("PUT", &format!("/v2/load_balancers/{id}")), 1);
    assert_eq!(account.mutations(), 1);
    assert_eq!(account.load_balancers()[0]["enable_proxy_protocol"], true);
}

#[tokio::test]
async fn local_traffic_policy_health_checks_the_services_node_port() {
    let account = account();
    account.set_activate_after_reads(0);
    let provider = account.provider().await;
    let mut svc = service("web", UID, &[]);
    let spec = svc.spec.as_mut().unwrap();
    spec.external_traffic_policy = Some("Local".into());
    spec.health_check_node_port = Some(31234);

    provider
        .ensure_load_balancer("c1", &svc, &[])
        .await
        .unwrap();

    let hc = &account.load_balancers()[0]["health_check"];
    assert_eq!(
        (
            hc["protocol"].as_str(),
            hc["port"].as_i64(),
            hc["path"].as_str()
        ),
        (Some("http"), Some(31234), Some("/healthz"))
    );
}

#[tokio::test]
async fn hostname_annotation_is_reported_instead_of_the_ip() {
    let account = account();
    account.set_activate_after_reads(0);
    let provider = account.provider().await;
    let svc = service("web", UID, &[(annotations::HOSTNAME, "LB.Example.com")]);

    let ensured = provider
        .ensure_load_balancer("c1", &svc, &[])
        .await
        .unwrap();

    assert_eq!(ensured.status.ingress.len(), 1);
    assert_eq!(
        ensured.status.ingress[0].hostname.as_deref(),
        Some("lb.example.com")
    );
    assert_eq!(ensured.status.ingress[0].ip, None);
}

#[tokio::test]
async fn after_a_restart_the_load_balancer_is_found_by_name_not_created_twice() {
    let account = account();
    let svc = service("web", UID, &[]);
    let before = account.provider().await;
    assert!(
        before.ensure_load_balancer("c1", &svc, &[]).await.is_err(),
        "still new"
    );
    drop(before);

    // A new process knows neither the ID nor what it created.
    let after = account.provider().await;
    account.clear_requests();
    let ensured = after.ensure_load_balancer("c1", &svc, &[]).await.unwrap();

    assert_eq!(
        account.count("GET", "/v2/load_balancers"),
        1,
        "found by listing"
    );
    assert_eq!(account.count("POST", "/v2/load_balancers"), 0);
    assert_eq!(account.load_balancers().len(), 1);
    assert_eq!(
        ensured.service_annotations[annotations::LOAD_BALANCER_ID],
        account.load_balancers()[0]["id"]
    );
}

#[tokio::test]
async fn a_custom_name_names_the_load_balancer() {
    let account = account();
    account.set_activate_after_reads(0);
    let provider = account.provider().await;
    let svc = service("web", UID, &[(annotations::NAME, "shop-frontend.prod")]);

    assert_eq!(
        provider.load_balancer_name("c1", &svc),
        "shop-frontend.prod"
    );
    provider
        .ensure_load_balancer("c1", &svc, &[])
        .await
        .unwrap();
    assert_eq!(account.load_balancers()[0]["name"], "shop-frontend.prod");
}

#[tokio::test]
async fn cluster_id_tags_load_balancers_and_another_clusters_are_left_alone() {
    let account = account();
    account.set_activate_after_reads(0);
    let ours = account
        .provider_with(&account.env().with("DO_CLUSTER_ID", "c-ours"))
        .await;
    let svc = service("web", UID, &[]);
    ours.ensure_load_balancer("c1", &svc, &[]).await.unwrap();
    assert_eq!(
        account.load_balancers()[0]["tags"],
        json!([format!("k8s-service:{UID}"), "k8s:c-ours"]),
        "tagged for its Service and its cluster"
    );

    let theirs = account
        .provider_with(&account.env().with("DO_CLUSTER_ID", "c-theirs"))
        .await;
    account.clear_requests();
    let err = theirs
        .ensure_load_balancer("c1", &svc, &[])
        .await
        .unwrap_err();
    assert!(err.to_string().contains("another cluster"), "{err}");
    theirs
        .ensure_load_balancer_deleted("c1", &svc)
        .await
        .unwrap();
    assert_eq!(
        account.mutations(),
        0,
        "another cluster's load balancer is never changed"
    );
    assert_eq!(account.load_balancers().len(), 1);
}

#[tokio::test]
async fn a_disowned_service_is_implemented_elsewhere_from_every_method() {
    let account = account();
    let provider = account.provider().await;
    let svc = service("web", UID, &[(annotations::DISOWN, "true")]);
    account.clear_requests();

    assert!(matches!(
        provider.get_load_balancer("c1", &svc).await,
        Err(CloudError::ImplementedElsewhere)
    ));
    assert!(matches!(
        provider.ensure_load_balancer("c1", &svc, &[]).await,
        Err(CloudError::ImplementedElsewhere)
    ));
    assert!(matches!(
        provider.update_load_balancer("c1", &svc, &[]).await,
        Err(CloudError::ImplementedElsewhere)
    ));
    assert!(matches!(
        provider.ensure_load_balancer_deleted("c1", &svc).await,
        Err(CloudError::ImplementedElsewhere)
    ));
    assert!(matches!(
        provider.load_balancer_health("c1", &svc, &[]).await,
        Err(CloudError::ImplementedElsewhere)
    ));
    assert!(matches!(
        provider.check_service(&svc),
        Some(Err(CloudError::ImplementedElsewhere))
    ));
    assert!(matches!(
        provider.check_service(&service("web", UID, &[])),
        Some(Ok(()))
    ));
    assert!(matches!(
        provider.check_service(&service("web", UID, &[(annotations::DISOWN, "maybe")])),
        Some(Err(CloudError::InvalidInput { .. }))
    ));
    assert!(account.requests().is_empty());
}

#[tokio::test]
async fn an_errored_load_balancer_is_an_error_not_a_retry() {
    let account = account();
    account.set_activate_after_reads(0);
    let provider = account.provider().await;
    let svc = service("web", UID, &[]);
    provider
        .ensure_load_balancer("c1", &svc, &[])
        .await
        .unwrap();
    account.set_load_balancer_status(0, "errored");

    let err = provider
        .ensure_load_balancer("c1", &svc, &[])
        .await
        .unwrap_err();
    assert!(matches!(err, CloudError::Other { .. }), "{err:?}");
    assert!(err.to_string().contains("errored"), "{err}");
}
