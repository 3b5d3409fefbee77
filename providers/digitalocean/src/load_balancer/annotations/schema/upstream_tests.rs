//! What the DigitalOcean schema says upstream's CCM does with each key at
//! fault, which decides whether the admission webhook denies a Service or
//! admits it with a warning.

use ccm_cloud_provider::annotations::{Finding, FindingKind, Value};
use ccm_cloud_provider::k8s_openapi::api::core::v1::{
    LoadBalancerIngress, LoadBalancerStatus, ServiceSpec, ServiceStatus,
};
use ccm_cloud_provider::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::*;

fn service(annotations: &[(&str, &str)]) -> Service {
    Service {
        metadata: ObjectMeta {
            name: Some("web".into()),
            namespace: Some("shop".into()),
            annotations: Some(
                annotations
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect(),
            ),
            ..ObjectMeta::default()
        },
        spec: Some(ServiceSpec {
            type_: Some("LoadBalancer".into()),
            ..ServiceSpec::default()
        }),
        ..Service::default()
    }
}

/// `service` with a load balancer in its status.
fn provisioned(annotations: &[(&str, &str)]) -> Service {
    let mut svc = service(annotations);
    svc.status = Some(ServiceStatus {
        load_balancer: Some(LoadBalancerStatus {
            ingress: Some(vec![LoadBalancerIngress {
                ip: Some("203.0.113.7".into()),
                ..LoadBalancerIngress::default()
            }]),
        }),
        ..ServiceStatus::default()
    });
    svc
}

/// The immutable changes from `old` to a Service with `new`, with whether
/// upstream fails on each.
fn changes(old: &Service, new: &[(&str, &str)]) -> Vec<(String, bool)> {
    SCHEMA
        .review(Some(old), &service(new))
        .into_iter()
        .filter(|f| f.kind == FindingKind::Immutable)
        .map(|f| {
            let fails = f.upstream_fails();
            (f.key, fails)
        })
        .collect()
}

#[test]
fn every_key_that_can_be_at_fault_says_what_upstream_does() {
    for annotation in SCHEMA.annotations {
        let key = annotation.key;
        if !matches!(annotation.value, Value::Text) {
            assert!(
                annotation.upstream_on_invalid.is_some(),
                "{key}: what does upstream do with a malformed value?"
            );
        }
        if annotation.immutable.is_some() {
            assert!(
                annotation.upstream_on_change.is_some(),
                "{key}: what does upstream do on a change?"
            );
        }
    }
}

/// `(key, malformed value, whether upstream fails the Service)`.
const CASES: &[(&str, &str, bool)] = &[
    (LOAD_BALANCER_ID, "lb-1", false),
    (DISOWN, "yes", true),
    (NAME, "shop web", true),
    (TYPE, "GLOBAL", true),
    (NETWORK, "internal", true),
    (NETWORK_STACK, "IPV6", true),
    (IP, "203.0.113.300", true),
    (SUBNET_UUID, "subnet-1", true),
    (HTTP3_PORT, "443,80", true),
    (PROTOCOL, "udp", true),
    (HTTP_PORTS, "http", true),
    (TLS_PORTS, "65536", true),
    (HTTP2_PORTS, "80,", true),
    (TLS_PASSTHROUGH, "yes", false),
    (REDIRECT_HTTP_TO_HTTPS, "on", true),
    (ENABLE_PROXY_PROTOCOL, "enabled", true),
    (ENABLE_BACKEND_KEEPALIVE, "nope", true),
    (DISABLE_LETS_ENCRYPT_DNS_RECORDS, "y", true),
    (HTTP_IDLE_TIMEOUT_SECONDS, "29", true),
    (ALGORITHM, "random", false),
    (SIZE_SLUG, "lb-huge", true),
    (SIZE_UNIT, "101", true),
    (STICKY_SESSIONS_TYPE, "Cookies", false),
    (HEALTHCHECK_CHECK_INTERVAL_SECONDS, "2", true),
    (HEALTHCHECK_RESPONSE_TIMEOUT_SECONDS, "301", true),
    (HEALTHCHECK_UNHEALTHY_THRESHOLD, "1", true),
    (HEALTHCHECK_HEALTHY_THRESHOLD, "11", true),
    (ALLOW_RULES, "10.0.0.0/8", true),
    (DENY_RULES, "cidr:x", true),
];

#[test]
fn a_malformed_value_is_denied_only_where_upstream_fails_the_service() {
    for (key, value, fails) in CASES {
        let findings = SCHEMA.review(None, &service(&[(key, value)]));
        let invalid: Vec<&Finding> = findings
            .iter()
            .filter(|f| f.kind == FindingKind::Invalid)
            .collect();
        assert_eq!(invalid.len(), 1, "{key}: `{value}`: {findings:?}");
        assert_eq!(invalid[0].upstream_fails(), *fails, "{key}: `{value}`");
    }
}

#[test]
fn allow_rules_upstream_does_not_read_are_only_warned_about() {
    let mut svc = service(&[(ALLOW_RULES, "10.0.0.0/8")]);
    svc.spec.as_mut().unwrap().load_balancer_source_ranges = Some(vec!["10.0.0.0/8".into()]);
    let findings = SCHEMA.review(None, &svc);
    let invalid = findings
        .iter()
        .find(|f| f.kind == FindingKind::Invalid)
        .expect("still malformed");
    assert!(!invalid.upstream_fails(), "{invalid:?}");
}

#[test]
fn spelling_out_the_default_network_on_an_existing_service_is_no_change() {
    let old = provisioned(&[(LOAD_BALANCER_ID, "4de7ac8b-495b-4884-9a69-1050c6793cd6")]);
    for same in ["EXTERNAL", " EXTERNAL ", ""] {
        let new = service(&[
            (LOAD_BALANCER_ID, "4de7ac8b-495b-4884-9a69-1050c6793cd6"),
            (NETWORK, same),
        ]);
        assert_eq!(SCHEMA.review(Some(&old), &new), [], "`{same}`");
    }
    assert_eq!(
        changes(&old, &[(NETWORK, "INTERNAL")]),
        [(NETWORK.to_owned(), true)],
        "DigitalOcean's API refuses the change upstream sends"
    );
    let internal = provisioned(&[(NETWORK, "INTERNAL")]);
    assert_eq!(
        changes(&internal, &[]),
        [(NETWORK.to_owned(), true)],
        "unset is EXTERNAL"
    );
}

#[test]
fn the_network_stack_is_judged_where_the_service_tells_its_default() {
    let regional = provisioned(&[(TYPE, "REGIONAL")]);
    assert_eq!(
        changes(
            &regional,
            &[(TYPE, "REGIONAL"), (NETWORK_STACK, "DUALSTACK")]
        ),
        []
    );
    assert_eq!(
        changes(&regional, &[(TYPE, "REGIONAL"), (NETWORK_STACK, "IPV4")]),
        [(NETWORK_STACK.to_owned(), true)]
    );
    let internal = provisioned(&[(TYPE, "REGIONAL"), (NETWORK, "INTERNAL")]);
    assert_eq!(
        changes(
            &internal,
            &[
                (TYPE, "REGIONAL"),
                (NETWORK, "INTERNAL"),
                (NETWORK_STACK, "IPV4")
            ]
        ),
        []
    );
    let network = provisioned(&[(TYPE, "REGIONAL_NETWORK")]);
    assert_eq!(
        changes(
            &network,
            &[(TYPE, "REGIONAL_NETWORK"), (NETWORK_STACK, "IPV4")]
        ),
        [],
        "the nodes decide: the provider judges it against the load balancer"
    );
}

#[test]
fn create_only_keys_are_warned_about_when_they_change() {
    let old = provisioned(&[]);
    assert_eq!(
        changes(&old, &[(IP, "203.0.113.9")]),
        [(IP.to_owned(), false)]
    );
    assert_eq!(changes(&old, &[(IP, " ")]), [], "blank is unset");
    assert_eq!(
        changes(
            &old,
            &[(SUBNET_UUID, "6b0a2c1e-5b7d-4e8f-9a0b-1c2d3e4f5a6b")]
        ),
        [(SUBNET_UUID.to_owned(), false)]
    );
}
