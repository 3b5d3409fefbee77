//! A drop-in for upstream's DigitalOcean CCM: the annotations added for it,
//! what cannot be honoured, typos, per-Service ownership, and adopting load
//! balancers the Go CCM built.

use crate::support;

use ccm_cloud_provider::annotations::FindingKind;
use ccm_cloud_provider::k8s_openapi::api::core::v1::{NodeAddress, NodeStatus};
use ccm_cloud_provider::{CloudError, LoadBalancer};
use ccm_provider_digitalocean::annotations as ann;
use ccm_provider_digitalocean::test_util::account;
use serde_json::{Value, json};
use support::{annotated, node, port, service};

const UID: &str = "0b7d3a52-2222-4e8f-9a0b-1c2d3e4f5a6b";
const OTHER_UID: &str = "7c1e9d40-3333-4e8f-9a0b-1c2d3e4f5a6b";
const CERT: &str = "892071a0-bb95-49bc-8021-3afd67a210bf";

fn tags_of(lb: &Value) -> Vec<String> {
    serde_json::from_value(lb["tags"].clone()).unwrap()
}

/// Each new annotation, and each default, and the load-balancer field it
/// sets (`None` field: the value is read from the rendered load balancer).
#[tokio::test]
async fn each_new_annotation_and_default_reaches_the_load_balancer() {
    type Case = (
        &'static str,
        &'static [(&'static str, &'static str)],
        &'static str,
        Value,
    );
    let cases: &[Case] = &[
        ("regional default", &[], "network_stack", json!("DUALSTACK")),
        ("regional default", &[], "network", json!("EXTERNAL")),
        (
            "internal",
            &[(ann::NETWORK, "INTERNAL")],
            "network",
            json!("INTERNAL"),
        ),
        (
            "internal",
            &[(ann::NETWORK, "INTERNAL")],
            "network_stack",
            json!("IPV4"),
        ),
        (
            "ipv4 asked",
            &[(ann::NETWORK_STACK, "IPV4")],
            "network_stack",
            json!("IPV4"),
        ),
        (
            "reserved ip",
            &[(ann::IP, "203.0.113.77")],
            "ip",
            json!("203.0.113.77"),
        ),
        (
            "subnet",
            &[(ann::SUBNET_UUID, "6a9e0b7e-1234-4e8f-9a0b-1c2d3e4f5a6b")],
            "subnet_uuid",
            json!("6a9e0b7e-1234-4e8f-9a0b-1c2d3e4f5a6b"),
        ),
        (
            "network type",
            &[(ann::TYPE, "REGIONAL_NETWORK")],
            "type",
            json!("REGIONAL_NETWORK"),
        ),
        (
            "network type forwards service ports",
            &[(ann::TYPE, "REGIONAL_NETWORK")],
            "forwarding_rules",
            json!([{"entry_protocol": "tcp", "entry_port": 80, "target_protocol": "tcp", "target_port": 80, "tls_passthrough": false}]),
        ),
        (
            "certificate by name",
            &[(ann::CERTIFICATE_NAME, "shop-cert"), (ann::TLS_PORTS, "80")],
            "forwarding_rules",
            json!([{"entry_protocol": "https", "entry_port": 80, "target_protocol": "http", "target_port": 30080,
                    "certificate_id": CERT, "tls_passthrough": false}]),
        ),
        (
            "http3",
            &[
                (ann::CERTIFICATE_ID, CERT),
                (ann::HTTP2_PORTS, "80"),
                (ann::HTTP3_PORT, "80"),
            ],
            "forwarding_rules",
            json!([
                {"entry_protocol": "http2", "entry_port": 80, "target_protocol": "http", "target_port": 30080,
                 "certificate_id": CERT, "tls_passthrough": false},
                {"entry_protocol": "http3", "entry_port": 80, "target_protocol": "http", "target_port": 30080,
                 "certificate_id": CERT, "tls_passthrough": false},
            ]),
        ),
    ];
    for (what, annotations, field, want) in cases {
        let account = account();
        account.set_activate_after_reads(0);
        account.add_certificate(CERT, "shop-cert", "custom");
        let provider = account.provider().await;
        let svc = service("web", UID, annotations);
        let ensured = provider
            .ensure_load_balancer("c1", &svc, &[node("n", Some("digitalocean://7"))])
            .await
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        let lb = &account.load_balancers()[0];
        let got = if *field == "ip" {
            json!(ensured.status.ingress[0].ip)
        } else {
            lb[*field].clone()
        };
        assert_eq!(&got, want, "{what}: {field}");
        assert_eq!(
            ensured.service_annotations[ann::TYPE],
            lb["type"],
            "{what}: the type is recorded on the Service, as upstream"
        );
    }
}

#[tokio::test]
async fn a_network_load_balancer_leaves_out_nodes_without_a_public_ipv4() {
    let account = account();
    account.set_activate_after_reads(0);
    let provider = account.provider_with(&account.upstream_env()).await;
    let private = std::sync::Arc::new({
        let mut n = (*node("p", Some("digitalocean://8"))).clone();
        n.status = None;
        n
    });
    let svc = service("web", UID, &[]);

    let err = provider
        .ensure_load_balancer("c1", &svc, std::slice::from_ref(&private))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("public IPv4"), "{err}");
    assert_eq!(account.mutations(), 0);

    provider
        .ensure_load_balancer(
            "c1",
            &svc,
            &[private.clone(), node("n", Some("digitalocean://7"))],
        )
        .await
        .unwrap();
    assert_eq!(account.load_balancers()[0]["droplet_ids"], json!([7]));

    // An internal one reaches nodes privately: every node is a backend.
    let internal = service("api", OTHER_UID, &[(ann::NETWORK, "INTERNAL")]);
    provider
        .ensure_load_balancer(
            "c1",
            &internal,
            &[private, node("n", Some("digitalocean://7"))],
        )
        .await
        .unwrap();
    assert_eq!(account.load_balancers()[1]["droplet_ids"], json!([7, 8]));
}

#[tokio::test]
async fn upstreams_default_type_is_a_network_load_balancer() {
    let account = account();
    account.set_activate_after_reads(0);
    let provider = account.provider_with(&account.upstream_env()).await;
    let dual_stack = std::sync::Arc::new({
        let mut n = (*node("n", Some("digitalocean://7"))).clone();
        n.status = Some(NodeStatus {
            addresses: Some(vec![
                NodeAddress {
                    type_: "ExternalIP".into(),
                    address: "203.0.113.5".into(),
                },
                NodeAddress {
                    type_: "ExternalIP".into(),
                    address: "2001:db8::5".into(),
                },
            ]),
            ..NodeStatus::default()
        });
        n
    });

    provider
        .ensure_load_balancer(
            "c1",
            &service("web", UID, &[]),
            &[node("n", Some("digitalocean://7"))],
        )
        .await
        .unwrap();
    let lb = &account.load_balancers()[0];
    assert_eq!(lb["type"], "REGIONAL_NETWORK");
    assert_eq!(lb["network_stack"], "IPV4", "not every node has IPv6");

    provider
        .ensure_load_balancer("c1", &service("api", OTHER_UID, &[]), &[dual_stack])
        .await
        .unwrap();
    let lb = &account.load_balancers()[1];
    assert_eq!(lb["network_stack"], "DUALSTACK", "every node has IPv6");
}

/// What DigitalOcean cannot do, or cannot change in place, is refused:
/// InvalidInput naming the annotation, and no change.
#[tokio::test]
async fn what_cannot_be_honoured_is_refused_without_a_change() {
    let account = account();
    account.set_activate_after_reads(0);
    let provider = account.provider().await;
    let svc = service("web", UID, &[]);
    provider
        .ensure_load_balancer("c1", &svc, &[])
        .await
        .unwrap();
    let before = account.load_balancers();
    let cases: &[(&[(&str, &str)], &str)] = &[
        (&[(ann::TYPE, "REGIONAL_NETWORK")], ann::TYPE),
        (&[(ann::NETWORK, "INTERNAL")], ann::NETWORK),
        (&[(ann::NETWORK_STACK, "IPV4")], ann::NETWORK_STACK),
        (
            &[
                (ann::NETWORK, "INTERNAL"),
                (ann::NETWORK_STACK, "DUALSTACK"),
            ],
            ann::NETWORK_STACK,
        ),
        (&[(ann::HTTP3_PORT, "80")], ann::HTTP3_PORT),
        (
            &[(ann::HTTP3_PORT, "8080"), (ann::CERTIFICATE_ID, CERT)],
            ann::HTTP3_PORT,
        ),
        (&[(ann::IP, "not-an-ip")], ann::IP),
        (&[(ann::SUBNET_UUID, "subnet-1")], ann::SUBNET_UUID),
    ];
    for (annotations, field) in cases {
        account.clear_requests();
        let err = provider
            .ensure_load_balancer("c1", &annotated(svc.clone(), annotations), &[])
            .await
            .unwrap_err();
        assert!(
            matches!(&err, CloudError::InvalidInput { field: f, .. } if f == field),
            "{annotations:?}: want InvalidInput on {field}, got {err:?}"
        );
        assert!(err.to_string().len() < 1024, "{err}");
        assert_eq!(account.mutations(), 0, "{annotations:?}");
    }
    assert_eq!(account.load_balancers(), before);
}

/// A typo is the service controller's to report, from the provider's
/// schema (it names the nearest key); the ensure goes on without it.
#[tokio::test]
async fn a_typo_is_named_by_the_schema_with_the_nearest_key_and_otherwise_ignored() {
    let account = account();
    account.set_activate_after_reads(0);
    let provider = account.provider().await;
    let typo = "service.beta.kubernetes.io/do-loadbalancer-protocl";
    let svc = service("web", UID, &[(typo, "http")]);
    let findings = provider
        .annotation_schema()
        .expect("the provider describes its annotations")
        .review(None, &svc);
    assert_eq!(findings.len(), 1, "{findings:?}");
    assert_eq!(findings[0].kind, FindingKind::Unknown);
    assert_eq!(findings[0].key, typo);
    assert_eq!(
        findings[0].message,
        format!("unknown annotation {typo}; did you mean {}?", ann::PROTOCOL)
    );
    let ensured = provider
        .ensure_load_balancer("c1", &svc, &[])
        .await
        .unwrap();
    assert_eq!(ensured.warnings, [], "the ensure no longer warns itself");
    assert_eq!(
        account.load_balancers()[0]["forwarding_rules"][0]["entry_protocol"],
        "tcp"
    );
}

#[tokio::test]
async fn http_annotations_on_a_network_load_balancer_get_a_warning() {
    let account = account();
    account.set_activate_after_reads(0);
    let provider = account.provider().await;
    let svc = service(
        "web",
        UID,
        &[(ann::TYPE, "REGIONAL_NETWORK"), (ann::PROTOCOL, "http")],
    );
    let ensured = provider
        .ensure_load_balancer("c1", &svc, &[])
        .await
        .unwrap();
    assert!(
        ensured
            .warnings
            .iter()
            .any(|w| w.reason == "AnnotationIgnored" && w.message.contains(ann::PROTOCOL)),
        "{:?}",
        ensured.warnings
    );
}

/// Service B's load-balancer-id edited to Service A's: a Warning
/// (InvalidInput), and neither load balancer changes; deleting B deletes
/// B's own only.
#[tokio::test]
async fn another_services_load_balancer_is_never_changed_whatever_the_annotations_say() {
    let account = account();
    account.set_activate_after_reads(0);
    let provider = account.provider().await;
    let a = service("a", UID, &[]);
    let b = service("b", OTHER_UID, &[]);
    let a_id = provider
        .ensure_load_balancer("c1", &a, &[])
        .await
        .unwrap()
        .service_annotations[ann::LOAD_BALANCER_ID]
        .clone();
    provider.ensure_load_balancer("c1", &b, &[]).await.unwrap();
    let before = account.load_balancers();
    account.clear_requests();

    let hijack = annotated(
        b.clone(),
        &[
            (ann::LOAD_BALANCER_ID, &a_id),
            (ann::ENABLE_PROXY_PROTOCOL, "true"),
        ],
    );
    let err = provider
        .ensure_load_balancer("c1", &hijack, &[])
        .await
        .unwrap_err();
    assert!(
        matches!(&err, CloudError::InvalidInput { field, message } if field == ann::LOAD_BALANCER_ID && message.contains(UID)),
        "{err:?}"
    );
    let err = provider
        .update_load_balancer("c1", &hijack, &[node("n", Some("digitalocean://9"))])
        .await
        .unwrap_err();
    assert!(matches!(err, CloudError::InvalidInput { .. }), "{err:?}");
    // A Service without a load balancer of its own, named after A's.
    let by_name = service(
        "c",
        "9d2f0e51-4444-4e8f-9a0b-1c2d3e4f5a6b",
        &[(ann::NAME, before[0]["name"].as_str().unwrap())],
    );
    let err = provider
        .ensure_load_balancer("c1", &by_name, &[])
        .await
        .unwrap_err();
    assert!(
        matches!(&err, CloudError::InvalidInput { field, .. } if field == ann::NAME),
        "{err:?}"
    );
    assert_eq!(account.mutations(), 0);
    assert_eq!(account.load_balancers(), before);

    provider
        .ensure_load_balancer_deleted("c1", &hijack)
        .await
        .unwrap();
    let left = account.load_balancers();
    assert_eq!(left.len(), 1, "B's own load balancer is deleted");
    assert_eq!(left[0]["id"], a_id.as_str(), "A's is not");
}

/// A load balancer as upstream's `buildLoadBalancerRequest` creates it for
/// an unannotated Service with `DEFAULT_LB_TYPE` unset (REGIONAL_NETWORK,
/// kube-proxy health check, the cluster tag).
fn as_upstream_built_it(name: &str, droplet: u64) -> Value {
    json!({
        "name": name, "region": "nyc3", "type": "REGIONAL_NETWORK", "network": "EXTERNAL", "network_stack": "IPV4",
        "forwarding_rules": [{"entry_protocol": "tcp", "entry_port": 80, "target_protocol": "tcp", "target_port": 80}],
        "health_check": {"protocol": "http", "port": 10256, "path": "/healthz", "check_interval_seconds": 3,
            "response_timeout_seconds": 5, "unhealthy_threshold": 3, "healthy_threshold": 5, "proxy_protocol": false},
        "sticky_sessions": {"type": "none"}, "algorithm": "round_robin", "droplet_ids": [droplet],
        "disable_lets_encrypt_dns_records": false, "firewall": {}, "tags": ["k8s:c-1"],
    })
}

#[tokio::test]
async fn a_load_balancer_the_go_ccm_built_is_adopted_without_creating_or_deleting() {
    let account = account();
    let env = account.upstream_env().with("DO_CLUSTER_ID", "c-1");
    let provider = account.provider_with(&env).await;
    let svc = service("web", UID, &[]);
    let name = provider.load_balancer_name("c1", &svc);
    let nodes = [node("n", Some("digitalocean://7"))];
    for recorded in [false, true] {
        let account = ccm_provider_digitalocean::test_util::account();
        let provider = account
            .provider_with(&account.upstream_env().with("DO_CLUSTER_ID", "c-1"))
            .await;
        let id = account.seed_load_balancer(&as_upstream_built_it(&name, 7));
        // Upstream records the ID and type on the Service; a Service it
        // never reconciled since has neither.
        let svc = if recorded {
            annotated(
                svc.clone(),
                &[
                    (ann::LOAD_BALANCER_ID, &id),
                    (ann::TYPE, "REGIONAL_NETWORK"),
                ],
            )
        } else {
            svc.clone()
        };
        account.clear_requests();

        let ensured = provider
            .ensure_load_balancer("c1", &svc, &nodes)
            .await
            .unwrap();

        assert_eq!(ensured.service_annotations[ann::LOAD_BALANCER_ID], id);
        assert_eq!(
            account.count("POST", "/v2/load_balancers"),
            0,
            "recorded={recorded}: no create"
        );
        assert_eq!(
            account.count("DELETE", &format!("/v2/load_balancers/{id}")),
            0
        );
        assert_eq!(
            account.count("PUT", &format!("/v2/load_balancers/{id}")),
            1,
            "recorded={recorded}: one update, adding the Service's tag"
        );
        let lb = &account.load_balancers()[0];
        assert_eq!(
            tags_of(lb),
            [format!("k8s-service:{UID}"), "k8s:c-1".to_owned()]
        );
        assert_eq!(lb["type"], "REGIONAL_NETWORK");

        account.clear_requests();
        provider
            .ensure_load_balancer("c1", &svc, &nodes)
            .await
            .unwrap();
        assert_eq!(account.mutations(), 0, "converged: nothing left to change");

        provider
            .ensure_load_balancer_deleted("c1", &svc)
            .await
            .unwrap();
        assert!(
            account.load_balancers().is_empty(),
            "deleting the Service deletes it"
        );
    }
    drop((account, provider));
}

#[tokio::test]
async fn a_renewed_lets_encrypt_certificate_is_followed_not_replaced() {
    let account = account();
    account.set_activate_after_reads(0);
    let renewed = "c0ffee00-bb95-49bc-8021-3afd67a210bf";
    account.add_certificate(CERT, "shop-le", "lets_encrypt");
    let provider = account.provider().await;
    let svc = service(
        "web",
        UID,
        &[(ann::CERTIFICATE_ID, CERT), (ann::TLS_PORTS, "80")],
    );
    provider
        .ensure_load_balancer("c1", &svc, &[])
        .await
        .unwrap();
    // DigitalOcean renews it: a new certificate with the same name on the
    // load balancer; the old one is gone.
    account.add_certificate(renewed, "shop-le", "lets_encrypt");
    account.remove_certificate(CERT);
    account.renew_certificate(0, renewed);
    account.clear_requests();

    let ensured = provider
        .ensure_load_balancer("c1", &svc, &[])
        .await
        .unwrap();

    assert_eq!(ensured.service_annotations[ann::CERTIFICATE_ID], renewed);
    assert_eq!(
        account.mutations(),
        0,
        "the load balancer keeps the renewed certificate"
    );
    let _ = port("TCP", 80, 30080);
}
