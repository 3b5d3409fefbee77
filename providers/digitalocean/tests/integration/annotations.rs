//! Upstream's `do-loadbalancer-*` annotations: each one reaches the load
//! balancer, and each malformed value is refused before any API call.

use crate::support;

use ccm_cloud_provider::{CloudError, LoadBalancer};
use ccm_provider_digitalocean::annotations as ann;
use ccm_provider_digitalocean::test_util::account;
use serde_json::json;
use support::{annotated, node, port, service};

const UID: &str = "0b7d3a52-1111-4e8f-9a0b-1c2d3e4f5a6b";

#[tokio::test]
async fn each_annotation_reaches_the_load_balancer() {
    let account = account();
    account.set_activate_after_reads(0);
    let provider = account.provider().await;
    let mut svc = service(
        "shop",
        UID,
        &[
            (ann::NAME, "shop"),
            (ann::PROTOCOL, "http"),
            (ann::TLS_PORTS, "443"),
            (ann::HTTP2_PORTS, "8443"),
            (ann::CERTIFICATE_ID, "892071a0-bb95-49bc-8021-3afd67a210bf"),
            (ann::REDIRECT_HTTP_TO_HTTPS, "true"),
            (ann::ENABLE_PROXY_PROTOCOL, "True"),
            (ann::ENABLE_BACKEND_KEEPALIVE, "1"),
            (ann::DISABLE_LETS_ENCRYPT_DNS_RECORDS, "true"),
            (ann::HTTP_IDLE_TIMEOUT_SECONDS, "120"),
            (ann::ALGORITHM, "least_connections"),
            (ann::SIZE_UNIT, "3"),
            (ann::STICKY_SESSIONS_TYPE, "cookies"),
            (ann::STICKY_SESSIONS_COOKIE_NAME, "DO-LB"),
            (ann::STICKY_SESSIONS_COOKIE_TTL, "300"),
            (ann::OVERRIDE_HEALTH_CHECK, ""),
            (ann::HEALTHCHECK_PROTOCOL, "https"),
            (ann::HEALTHCHECK_PORT, "443"),
            (ann::HEALTHCHECK_PATH, "/ready"),
            (ann::HEALTHCHECK_CHECK_INTERVAL_SECONDS, "10"),
            (ann::HEALTHCHECK_RESPONSE_TIMEOUT_SECONDS, "7"),
            (ann::HEALTHCHECK_UNHEALTHY_THRESHOLD, "4"),
            (ann::HEALTHCHECK_HEALTHY_THRESHOLD, "2"),
            (ann::ALLOW_RULES, "ip:1.2.3.4, cidr:10.0.0.0/8"),
            (ann::DENY_RULES, "cidr:2.3.0.0/16"),
        ],
    );
    svc.spec.as_mut().unwrap().ports = Some(vec![
        port("TCP", 80, 30080),
        port("TCP", 443, 30443),
        port("TCP", 8443, 30843),
        port("UDP", 53, 30053),
    ]);

    provider
        .ensure_load_balancer("c1", &svc, &[node("n", Some("digitalocean://7"))])
        .await
        .unwrap();

    let lb = &account.load_balancers()[0];
    assert_eq!(lb["name"], "shop");
    let cert = "892071a0-bb95-49bc-8021-3afd67a210bf";
    assert_eq!(
        lb["forwarding_rules"],
        json!([
            {"entry_protocol": "http", "entry_port": 80, "target_protocol": "http", "target_port": 30080, "tls_passthrough": false},
            {"entry_protocol": "https", "entry_port": 443, "target_protocol": "http", "target_port": 30443, "certificate_id": cert, "tls_passthrough": false},
            {"entry_protocol": "http2", "entry_port": 8443, "target_protocol": "http", "target_port": 30843, "certificate_id": cert, "tls_passthrough": false},
            {"entry_protocol": "udp", "entry_port": 53, "target_protocol": "udp", "target_port": 30053, "tls_passthrough": false},
        ])
    );
    assert_eq!(
        lb["health_check"],
        json!({"protocol": "https", "port": 30443, "path": "/ready", "check_interval_seconds": 10,
               "response_timeout_seconds": 7, "unhealthy_threshold": 4, "healthy_threshold": 2})
    );
    assert_eq!(
        lb["sticky_sessions"],
        json!({"type": "cookies", "cookie_name": "DO-LB", "cookie_ttl_seconds": 300})
    );
    assert_eq!(lb["redirect_http_to_https"], true);
    assert_eq!(lb["enable_proxy_protocol"], true);
    assert_eq!(lb["enable_backend_keepalive"], true);
    assert_eq!(lb["disable_lets_encrypt_dns_records"], true);
    assert_eq!(lb["http_idle_timeout_seconds"], 120);
    assert_eq!(lb["algorithm"], "least_connections");
    assert_eq!(lb["size_unit"], 3);
    assert_eq!(
        lb["firewall"],
        json!({"allow": ["ip:1.2.3.4", "cidr:10.0.0.0/8"], "deny": ["cidr:2.3.0.0/16"]})
    );
}

#[tokio::test]
async fn tls_passthrough_forwards_port_443_untouched() {
    let account = account();
    account.set_activate_after_reads(0);
    let provider = account.provider().await;
    let mut svc = service(
        "tls",
        UID,
        &[
            (ann::TLS_PASSTHROUGH, "true"),
            (ann::SIZE_SLUG, "lb-medium"),
        ],
    );
    svc.spec.as_mut().unwrap().ports = Some(vec![port("TCP", 443, 30443)]);

    provider
        .ensure_load_balancer("c1", &svc, &[])
        .await
        .unwrap();

    let lb = &account.load_balancers()[0];
    assert_eq!(
        lb["forwarding_rules"],
        json!([{"entry_protocol": "https", "entry_port": 443, "target_protocol": "https", "target_port": 30443, "tls_passthrough": true}])
    );
    assert_eq!(lb["size"], "lb-medium");
}

#[tokio::test]
async fn source_ranges_win_over_allow_rules() {
    let account = account();
    account.set_activate_after_reads(0);
    let provider = account.provider().await;
    let mut svc = service("web", UID, &[(ann::ALLOW_RULES, "ip:1.2.3.4")]);
    svc.spec.as_mut().unwrap().load_balancer_source_ranges =
        Some(vec!["10.1.2.0/24".into(), "192.168.0.7/32".into()]);

    provider
        .ensure_load_balancer("c1", &svc, &[])
        .await
        .unwrap();

    assert_eq!(
        account.load_balancers()[0]["firewall"]["allow"],
        json!(["cidr:10.1.2.0/24", "cidr:192.168.0.7/32"])
    );
}

#[tokio::test]
async fn health_check_settings_without_the_override_are_ignored_as_upstream_does() {
    let account = account();
    account.set_activate_after_reads(0);
    let provider = account.provider().await;
    let svc = service(
        "web",
        UID,
        &[
            (ann::HEALTHCHECK_PATH, "/x"),
            (ann::HEALTHCHECK_PORT, "not-a-port"),
        ],
    );

    provider
        .ensure_load_balancer("c1", &svc, &[])
        .await
        .unwrap();

    let hc = &account.load_balancers()[0]["health_check"];
    assert_eq!(
        (hc["port"].as_i64(), hc["path"].as_str()),
        (Some(10256), Some("/healthz"))
    );
}

/// Each malformed value, the annotation (or field) the error must name, and
/// a word of the expected form it must give.
const MALFORMED: &[(&str, &str, &str, &str)] = &[
    (ann::PROTOCOL, "quic", ann::PROTOCOL, "tcp"),
    (ann::TLS_PORTS, "443x", ann::TLS_PORTS, "port numbers"),
    (ann::HTTP_PORTS, "0", ann::HTTP_PORTS, "port numbers"),
    (
        ann::TLS_PASSTHROUGH,
        "yes",
        ann::TLS_PASSTHROUGH,
        "\"true\"",
    ),
    (
        ann::REDIRECT_HTTP_TO_HTTPS,
        "maybe",
        ann::REDIRECT_HTTP_TO_HTTPS,
        "\"true\"",
    ),
    (
        ann::ENABLE_PROXY_PROTOCOL,
        "1.0",
        ann::ENABLE_PROXY_PROTOCOL,
        "\"true\"",
    ),
    (
        ann::ENABLE_BACKEND_KEEPALIVE,
        "on",
        ann::ENABLE_BACKEND_KEEPALIVE,
        "\"true\"",
    ),
    (
        ann::DISABLE_LETS_ENCRYPT_DNS_RECORDS,
        "nope",
        ann::DISABLE_LETS_ENCRYPT_DNS_RECORDS,
        "\"true\"",
    ),
    (
        ann::HTTP_IDLE_TIMEOUT_SECONDS,
        "5",
        ann::HTTP_IDLE_TIMEOUT_SECONDS,
        "30 to 600",
    ),
    (
        ann::HEALTHCHECK_CHECK_INTERVAL_SECONDS,
        "1",
        ann::HEALTHCHECK_CHECK_INTERVAL_SECONDS,
        "3 to 300",
    ),
    (
        ann::HEALTHCHECK_RESPONSE_TIMEOUT_SECONDS,
        "abc",
        ann::HEALTHCHECK_RESPONSE_TIMEOUT_SECONDS,
        "3 to 300",
    ),
    (
        ann::HEALTHCHECK_UNHEALTHY_THRESHOLD,
        "11",
        ann::HEALTHCHECK_UNHEALTHY_THRESHOLD,
        "2 to 10",
    ),
    (
        ann::HEALTHCHECK_HEALTHY_THRESHOLD,
        "1",
        ann::HEALTHCHECK_HEALTHY_THRESHOLD,
        "2 to 10",
    ),
    (
        ann::ALGORITHM,
        "random",
        ann::ALGORITHM,
        "least_connections",
    ),
    (
        ann::STICKY_SESSIONS_TYPE,
        "ip",
        ann::STICKY_SESSIONS_TYPE,
        "cookies",
    ),
    (
        ann::STICKY_SESSIONS_COOKIE_TTL,
        "-5",
        ann::STICKY_SESSIONS_COOKIE_TTL,
        "integer",
    ),
    (ann::SIZE_UNIT, "0", ann::SIZE_UNIT, "1 to 100"),
    (ann::SIZE_UNIT, "101", ann::SIZE_UNIT, "1 to 100"),
    (ann::SIZE_SLUG, "lb-huge", ann::SIZE_SLUG, "lb-small"),
    (ann::NAME, "-bad name", ann::NAME, "255"),
    (ann::TYPE, "GLOBAL", ann::TYPE, "REGIONAL"),
    (
        ann::LOAD_BALANCER_ID,
        "../droplets",
        ann::LOAD_BALANCER_ID,
        "UUID",
    ),
    (ann::ALLOW_RULES, "host:1.2.3.4", ann::ALLOW_RULES, "cidr:"),
    (ann::DENY_RULES, "ip:999.1.1.1", ann::DENY_RULES, "ip:"),
];

#[tokio::test]
async fn malformed_annotations_are_refused_before_any_api_call() {
    let account = account();
    let provider = account.provider().await;
    for (key, value, field, expected) in MALFORMED {
        // Sticky-session TTLs are only read for cookie sessions.
        let mut extra = vec![(*key, *value)];
        if *key == ann::STICKY_SESSIONS_COOKIE_TTL {
            extra.extend([
                (ann::STICKY_SESSIONS_TYPE, "cookies"),
                (ann::STICKY_SESSIONS_COOKIE_NAME, "c"),
            ]);
        }
        let svc = service("web", UID, &extra);
        account.clear_requests();

        let err = provider
            .ensure_load_balancer("c1", &svc, &[node("n", None)])
            .await
            .unwrap_err();

        let CloudError::InvalidInput {
            field: got,
            message,
        } = &err
        else {
            panic!("{key}={value:?}: want InvalidInput, got {err:?}");
        };
        assert_eq!(got, field, "{key}={value:?}");
        assert!(
            message.contains(expected),
            "{key}={value:?}: message {message:?} should give the form {expected:?}"
        );
        assert!(
            account.requests().is_empty(),
            "{key}={value:?} reached the API: {:?}",
            account.requests()
        );
    }
}

/// Combinations that are each fine alone.
#[tokio::test]
async fn conflicting_annotations_are_refused_naming_one_of_them() {
    let account = account();
    let provider = account.provider().await;
    let cases: &[(&[(&str, &str)], &str)] = &[
        (
            &[(ann::SIZE_SLUG, "lb-small"), (ann::SIZE_UNIT, "2")],
            ann::SIZE_UNIT,
        ),
        (
            &[(ann::CERTIFICATE_ID, "c"), (ann::TLS_PASSTHROUGH, "true")],
            ann::CERTIFICATE_ID,
        ),
        (
            &[(ann::HTTP_PORTS, "80"), (ann::TLS_PORTS, "80")],
            ann::TLS_PORTS,
        ),
        (&[(ann::TLS_PORTS, "80")], ann::CERTIFICATE_ID),
        (
            &[
                (ann::STICKY_SESSIONS_TYPE, "cookies"),
                (ann::STICKY_SESSIONS_COOKIE_TTL, "60"),
            ],
            ann::STICKY_SESSIONS_COOKIE_NAME,
        ),
        (
            &[
                (ann::OVERRIDE_HEALTH_CHECK, "true"),
                (ann::HEALTHCHECK_PORT, "81"),
            ],
            ann::HEALTHCHECK_PORT,
        ),
        (
            &[
                (ann::OVERRIDE_HEALTH_CHECK, "true"),
                (ann::HEALTHCHECK_PROTOCOL, "udp"),
            ],
            ann::HEALTHCHECK_PROTOCOL,
        ),
    ];
    for (annotations, field) in cases {
        account.clear_requests();
        let err = provider
            .ensure_load_balancer("c1", &service("web", UID, annotations), &[])
            .await
            .unwrap_err();
        assert!(
            matches!(&err, CloudError::InvalidInput { field: f, .. } if f == field),
            "{annotations:?}: want InvalidInput on {field}, got {err:?}"
        );
        assert!(
            account.requests().is_empty(),
            "{annotations:?} reached the API"
        );
    }
}

#[tokio::test]
async fn a_broken_annotation_leaves_an_existing_load_balancer_as_it_was() {
    let account = account();
    account.set_activate_after_reads(0);
    let provider = account.provider().await;
    let svc = service("web", UID, &[]);
    provider
        .ensure_load_balancer("c1", &svc, &[])
        .await
        .unwrap();
    let before = account.load_balancers();
    account.clear_requests();

    let broken = annotated(svc, &[(ann::HTTP_IDLE_TIMEOUT_SECONDS, "forever")]);
    let err = provider
        .ensure_load_balancer("c1", &broken, &[])
        .await
        .unwrap_err();

    assert!(matches!(err, CloudError::InvalidInput { .. }), "{err:?}");
    assert_eq!(account.mutations(), 0);
    assert_eq!(account.load_balancers(), before);
}

#[tokio::test]
async fn an_unsupported_port_protocol_names_the_port() {
    let account = account();
    let provider = account.provider().await;
    let mut svc = service("web", UID, &[]);
    svc.spec.as_mut().unwrap().ports = Some(vec![port("TCP", 80, 30080), port("SCTP", 9, 30009)]);

    let err = provider
        .ensure_load_balancer("c1", &svc, &[])
        .await
        .unwrap_err();

    assert!(
        matches!(&err, CloudError::InvalidInput { field, .. } if field == "spec.ports[1].protocol"),
        "{err:?}"
    );
}
