//! The DigitalOcean schema covers every key the provider defines, says what
//! its parser says, never refuses a Service the provider accepts, and lets
//! the provider record what it records.

use ccm_cloud_provider::CloudError;
use ccm_cloud_provider::annotations::{Finding, FindingKind};
use ccm_cloud_provider::k8s_openapi::api::core::v1::{
    LoadBalancerIngress, LoadBalancerStatus, ServicePort, ServiceSpec, ServiceStatus,
};
use ccm_cloud_provider::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::*;
use crate::load_balancer::service_check::check_service;
use ccm_cloud_provider::annotations::Agreement::{self, Accepted, Looser, Refused};

const UID: &str = "0b7d3a52-2222-4e8f-9a0b-1c2d3e4f5a6b";
const LB_ID: &str = "4de7ac8b-495b-4884-9a69-1050c6793cd6";
const CERT: &str = "892071a0-bb95-49bc-8021-3afd67a210bf";

/// Every `pub const` key of the annotations module.
const KEYS: &[&str] = &[
    LOAD_BALANCER_ID,
    FIREWALL_MANAGED,
    DISOWN,
    NAME,
    TYPE,
    NETWORK,
    NETWORK_STACK,
    IP,
    SUBNET_UUID,
    CERTIFICATE_NAME,
    HTTP3_PORT,
    PROTOCOL,
    HTTP_PORTS,
    TLS_PORTS,
    HTTP2_PORTS,
    CERTIFICATE_ID,
    TLS_PASSTHROUGH,
    REDIRECT_HTTP_TO_HTTPS,
    ENABLE_PROXY_PROTOCOL,
    ENABLE_BACKEND_KEEPALIVE,
    DISABLE_LETS_ENCRYPT_DNS_RECORDS,
    HTTP_IDLE_TIMEOUT_SECONDS,
    HOSTNAME,
    ALGORITHM,
    SIZE_SLUG,
    SIZE_UNIT,
    STICKY_SESSIONS_TYPE,
    STICKY_SESSIONS_COOKIE_NAME,
    STICKY_SESSIONS_COOKIE_TTL,
    OVERRIDE_HEALTH_CHECK,
    HEALTHCHECK_PROTOCOL,
    HEALTHCHECK_PORT,
    HEALTHCHECK_PATH,
    HEALTHCHECK_CHECK_INTERVAL_SECONDS,
    HEALTHCHECK_RESPONSE_TIMEOUT_SECONDS,
    HEALTHCHECK_UNHEALTHY_THRESHOLD,
    HEALTHCHECK_HEALTHY_THRESHOLD,
    ALLOW_RULES,
    DENY_RULES,
];

/// A LoadBalancer Service with TCP ports 80 and 443.
fn service(annotations: &[(&str, &str)]) -> Service {
    let port = |port: i32, node_port: i32| ServicePort {
        port,
        node_port: Some(node_port),
        protocol: Some("TCP".into()),
        ..ServicePort::default()
    };
    Service {
        metadata: ObjectMeta {
            name: Some("web".into()),
            namespace: Some("shop".into()),
            uid: Some(UID.into()),
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
            ports: Some(vec![port(80, 30080), port(443, 30443)]),
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

fn messages(findings: &[Finding]) -> Vec<(FindingKind, &str)> {
    findings
        .iter()
        .map(|f| (f.kind, f.message.as_str()))
        .collect()
}

#[test]
fn every_key_the_provider_defines_has_one_entry() {
    for key in KEYS {
        assert!(SCHEMA.get(key).is_some(), "{key} has no entry");
    }
    let mut described: Vec<&str> = SCHEMA.annotations.iter().map(|a| a.key).collect();
    described.sort_unstable();
    described.dedup();
    assert_eq!(described.len(), SCHEMA.annotations.len(), "duplicate keys");
    assert_eq!(described.len(), KEYS.len(), "entries for keys not in KEYS");
}

#[test]
fn a_service_using_every_annotation_typically_has_only_deprecation_findings() {
    let svc = service(&[
        (LOAD_BALANCER_ID, LB_ID),
        (FIREWALL_MANAGED, "false"),
        (DISOWN, "false"),
        (NAME, "shop-web"),
        (TYPE, "REGIONAL"),
        (NETWORK, "EXTERNAL"),
        (NETWORK_STACK, "DUALSTACK"),
        (IP, "203.0.113.7"),
        (SUBNET_UUID, "6b0a2c1e-5b7d-4e8f-9a0b-1c2d3e4f5a6b"),
        (CERTIFICATE_NAME, "shop-web"),
        (HTTP3_PORT, "443"),
        (PROTOCOL, "http"),
        (HTTP_PORTS, "80"),
        (TLS_PORTS, "443"),
        (HTTP2_PORTS, "8443, 9443"),
        (CERTIFICATE_ID, CERT),
        (TLS_PASSTHROUGH, "false"),
        (REDIRECT_HTTP_TO_HTTPS, "true"),
        (ENABLE_PROXY_PROTOCOL, "true"),
        (ENABLE_BACKEND_KEEPALIVE, "true"),
        (DISABLE_LETS_ENCRYPT_DNS_RECORDS, "false"),
        (HTTP_IDLE_TIMEOUT_SECONDS, "120"),
        (HOSTNAME, "web.example.com"),
        (ALGORITHM, "round_robin"),
        (SIZE_SLUG, "lb-small"),
        (SIZE_UNIT, "2"),
        (STICKY_SESSIONS_TYPE, "cookies"),
        (STICKY_SESSIONS_COOKIE_NAME, "sid"),
        (STICKY_SESSIONS_COOKIE_TTL, "300"),
        (OVERRIDE_HEALTH_CHECK, ""),
        (HEALTHCHECK_PROTOCOL, "http"),
        (HEALTHCHECK_PORT, "80"),
        (HEALTHCHECK_PATH, "/healthz"),
        (HEALTHCHECK_CHECK_INTERVAL_SECONDS, "10"),
        (HEALTHCHECK_RESPONSE_TIMEOUT_SECONDS, "5"),
        (HEALTHCHECK_UNHEALTHY_THRESHOLD, "3"),
        (HEALTHCHECK_HEALTHY_THRESHOLD, "5"),
        (ALLOW_RULES, "ip:203.0.113.9,cidr:198.51.100.0/24"),
        (DENY_RULES, "cidr:192.0.2.0/24"),
    ]);
    assert_eq!(
        messages(&SCHEMA.review(None, &svc)),
        [
            (
                FindingKind::Deprecated,
                "annotation service.beta.kubernetes.io/do-loadbalancer-algorithm is deprecated: \
                 DigitalOcean ignores the algorithm; remove the annotation"
            ),
            (
                FindingKind::Deprecated,
                "annotation service.beta.kubernetes.io/do-loadbalancer-allow-rules is deprecated: \
                 set spec.loadBalancerSourceRanges instead"
            ),
            (
                FindingKind::Deprecated,
                "annotation service.beta.kubernetes.io/do-loadbalancer-size-slug is deprecated: \
                 use service.beta.kubernetes.io/do-loadbalancer-size-unit instead"
            ),
        ]
    );
}

#[test]
fn typos_under_each_prefix_and_bad_values_are_named_with_what_was_meant() {
    let svc = service(&[
        ("service.beta.kubernetes.io/do-loadbalancer-protocl", "http"),
        ("kubernetes.digitalocean.com/load-balancer-idd", LB_ID),
        ("service.kubernetes.io/do-loadbalancer-disowned", "true"),
        (NETWORK, "internal"),
        (SIZE_UNIT, "0"),
        (HTTP_PORTS, "80,"),
        ("example.com/owner", "shop"),
    ]);
    assert_eq!(
        messages(&SCHEMA.review(None, &svc)),
        [
            (
                FindingKind::Unknown,
                "unknown annotation kubernetes.digitalocean.com/load-balancer-idd; \
                 did you mean kubernetes.digitalocean.com/load-balancer-id?"
            ),
            (
                FindingKind::Invalid,
                "annotation service.beta.kubernetes.io/do-loadbalancer-http-ports: \
                 expected comma-separated port numbers, such as 443,8443, got `80,`"
            ),
            (
                FindingKind::Invalid,
                "annotation service.beta.kubernetes.io/do-loadbalancer-network: \
                 expected `EXTERNAL` or `INTERNAL`, got `internal`"
            ),
            (
                FindingKind::Unknown,
                "unknown annotation service.beta.kubernetes.io/do-loadbalancer-protocl; \
                 did you mean service.beta.kubernetes.io/do-loadbalancer-protocol?"
            ),
            (
                FindingKind::Invalid,
                "annotation service.beta.kubernetes.io/do-loadbalancer-size-unit: \
                 expected a whole number from 1 to 100, got `0`"
            ),
            (
                FindingKind::Unknown,
                "unknown annotation service.kubernetes.io/do-loadbalancer-disowned; \
                 did you mean service.kubernetes.io/do-loadbalancer-disown?"
            ),
        ]
    );
}

#[test]
fn the_network_of_an_existing_load_balancer_cannot_change() {
    let old = provisioned(&[(NETWORK, "EXTERNAL")]);
    let new = service(&[(NETWORK, "INTERNAL")]);
    assert_eq!(
        messages(&SCHEMA.review(Some(&old), &new)),
        [(
            FindingKind::Immutable,
            "annotation service.beta.kubernetes.io/do-loadbalancer-network cannot change once \
             the load balancer exists (`EXTERNAL` -> `INTERNAL`): DigitalOcean fixes it when \
             the load balancer is created; delete and recreate the Service (or create a new one \
             and move traffic to it) to change it"
        )]
    );
}

/// The service controller writes what the provider records after the load
/// balancer exists: admission must let it.
#[test]
fn what_the_provider_records_on_the_service_is_not_refused() {
    let old = provisioned(&[]);
    let mut recorded = provisioned(&[]);
    for (key, value) in [
        (LOAD_BALANCER_ID, LB_ID),
        (TYPE, "REGIONAL"),
        (CERTIFICATE_ID, CERT),
    ] {
        recorded
            .metadata
            .annotations
            .get_or_insert_default()
            .insert(key.to_owned(), value.to_owned());
    }
    assert_eq!(SCHEMA.review(Some(&old), &recorded), []);
}

/// `(context annotations, key, value, verdict)`.
type Case = (
    &'static [(&'static str, &'static str)],
    &'static str,
    &'static str,
    Agreement,
);

const WITH_CERT: &[(&str, &str)] = &[(CERTIFICATE_ID, CERT)];
const OVERRIDE: &[(&str, &str)] = &[(OVERRIDE_HEALTH_CHECK, "true")];
const COOKIES: &[(&str, &str)] = &[
    (STICKY_SESSIONS_TYPE, "cookies"),
    (STICKY_SESSIONS_COOKIE_NAME, "sid"),
];

const CASES: &[Case] = &[
    (&[], LOAD_BALANCER_ID, LB_ID, Accepted),
    (&[], LOAD_BALANCER_ID, " ", Accepted),
    (&[], LOAD_BALANCER_ID, "lb-1", Refused),
    (&[], FIREWALL_MANAGED, "false", Accepted),
    (&[], FIREWALL_MANAGED, "no", Accepted),
    (&[], DISOWN, "true", Accepted),
    (&[], DISOWN, "", Accepted),
    (&[], DISOWN, "yes", Refused),
    (&[], NAME, "shop-web.v2", Accepted),
    (&[], NAME, "", Accepted),
    (&[], NAME, "-web", Refused),
    (&[], NAME, "shop web", Refused),
    (&[], TYPE, "REGIONAL", Accepted),
    (&[], TYPE, "REGIONAL_NETWORK", Accepted),
    (&[], TYPE, "", Accepted),
    (&[], TYPE, "regional", Refused),
    (&[], TYPE, "GLOBAL", Refused),
    (&[], NETWORK, "INTERNAL", Accepted),
    (&[], NETWORK, " EXTERNAL ", Accepted),
    (&[], NETWORK, "", Accepted),
    (&[], NETWORK, "internal", Refused),
    (&[], NETWORK_STACK, "DUALSTACK", Accepted),
    (&[], NETWORK_STACK, "IPV4", Accepted),
    (&[], NETWORK_STACK, "", Accepted),
    (&[], NETWORK_STACK, "IPV6", Refused),
    (&[(NETWORK, "INTERNAL")], NETWORK_STACK, "DUALSTACK", Looser),
    (
        &[(TYPE, "REGIONAL_NETWORK")],
        NETWORK_STACK,
        "DUALSTACK",
        Looser,
    ),
    (&[], IP, "203.0.113.7", Accepted),
    (&[], IP, "2001:db8::1", Accepted),
    (&[], IP, "", Accepted),
    (&[], IP, "203.0.113.300", Refused),
    (
        &[],
        SUBNET_UUID,
        "6b0a2c1e-5b7d-4e8f-9a0b-1c2d3e4f5a6b",
        Accepted,
    ),
    (&[], SUBNET_UUID, "subnet-1", Refused),
    (&[], CERTIFICATE_NAME, "shop-web", Accepted),
    (WITH_CERT, HTTP3_PORT, "443", Accepted),
    (WITH_CERT, HTTP3_PORT, "", Accepted),
    (WITH_CERT, HTTP3_PORT, "443,80", Refused),
    (WITH_CERT, HTTP3_PORT, "0", Refused),
    (WITH_CERT, HTTP3_PORT, "8443", Looser),
    (&[], HTTP3_PORT, "443", Looser),
    (&[], PROTOCOL, "http", Accepted),
    (&[], PROTOCOL, "", Accepted),
    (WITH_CERT, PROTOCOL, "http2", Accepted),
    (&[], PROTOCOL, "https", Looser),
    (&[], PROTOCOL, "HTTP", Refused),
    (&[], PROTOCOL, "udp", Refused),
    (&[], HTTP_PORTS, "80", Accepted),
    (&[], HTTP_PORTS, " 80 , 8080 ", Accepted),
    (&[], HTTP_PORTS, "", Accepted),
    (&[], HTTP_PORTS, "80,", Refused),
    (&[], HTTP_PORTS, "http", Refused),
    (&[], HTTP_PORTS, "0", Refused),
    (WITH_CERT, TLS_PORTS, "443", Accepted),
    (&[], TLS_PORTS, "443", Looser),
    (&[], TLS_PORTS, "65536", Refused),
    (WITH_CERT, HTTP2_PORTS, "443", Accepted),
    (&[(HTTP_PORTS, "443")], HTTP2_PORTS, "443", Looser),
    (&[], CERTIFICATE_ID, CERT, Accepted),
    (&[], CERTIFICATE_ID, "", Accepted),
    (&[(TLS_PASSTHROUGH, "true")], CERTIFICATE_ID, CERT, Looser),
    (&[], TLS_PASSTHROUGH, "true", Accepted),
    (&[], TLS_PASSTHROUGH, "", Accepted),
    (&[], TLS_PASSTHROUGH, "yes", Refused),
    (&[], REDIRECT_HTTP_TO_HTTPS, "T", Accepted),
    (&[], REDIRECT_HTTP_TO_HTTPS, "on", Refused),
    (&[], ENABLE_PROXY_PROTOCOL, "1", Accepted),
    (&[], ENABLE_PROXY_PROTOCOL, "enabled", Refused),
    (&[], ENABLE_BACKEND_KEEPALIVE, "FALSE", Accepted),
    (&[], ENABLE_BACKEND_KEEPALIVE, "nope", Refused),
    (&[], DISABLE_LETS_ENCRYPT_DNS_RECORDS, "true", Accepted),
    (&[], DISABLE_LETS_ENCRYPT_DNS_RECORDS, "y", Refused),
    (&[], HTTP_IDLE_TIMEOUT_SECONDS, "30", Accepted),
    (&[], HTTP_IDLE_TIMEOUT_SECONDS, "+600", Accepted),
    (&[], HTTP_IDLE_TIMEOUT_SECONDS, "", Accepted),
    (&[], HTTP_IDLE_TIMEOUT_SECONDS, "29", Refused),
    (&[], HTTP_IDLE_TIMEOUT_SECONDS, "-60", Refused),
    (&[], HOSTNAME, "Web.Example.com", Accepted),
    (&[], ALGORITHM, "least_connections", Accepted),
    (&[], ALGORITHM, "random", Refused),
    (&[], SIZE_SLUG, "lb-large", Accepted),
    (&[], SIZE_SLUG, "lb-huge", Refused),
    (&[(SIZE_UNIT, "3")], SIZE_SLUG, "lb-large", Looser),
    (&[(SIZE_UNIT, "3")], SIZE_SLUG, "", Accepted),
    (&[], SIZE_UNIT, "1", Accepted),
    (&[], SIZE_UNIT, "100", Accepted),
    (&[], SIZE_UNIT, "101", Refused),
    (&[], STICKY_SESSIONS_TYPE, "none", Accepted),
    (&[], STICKY_SESSIONS_TYPE, "Cookies", Refused),
    (&[], STICKY_SESSIONS_TYPE, "cookies", Looser),
    (COOKIES, STICKY_SESSIONS_COOKIE_TTL, "300", Accepted),
    (COOKIES, STICKY_SESSIONS_COOKIE_TTL, "soon", Looser),
    (&[], STICKY_SESSIONS_COOKIE_TTL, "soon", Accepted),
    (&[], STICKY_SESSIONS_COOKIE_NAME, "", Accepted),
    (&[], OVERRIDE_HEALTH_CHECK, "", Accepted),
    (&[], HEALTHCHECK_PROTOCOL, "htp", Accepted),
    (OVERRIDE, HEALTHCHECK_PROTOCOL, "https", Accepted),
    (OVERRIDE, HEALTHCHECK_PROTOCOL, "htp", Looser),
    (&[], HEALTHCHECK_PORT, "x", Accepted),
    (OVERRIDE, HEALTHCHECK_PORT, "80", Accepted),
    (OVERRIDE, HEALTHCHECK_PORT, "x", Looser),
    (OVERRIDE, HEALTHCHECK_PORT, "8080", Looser),
    (OVERRIDE, HEALTHCHECK_PATH, "/ready", Accepted),
    (&[], HEALTHCHECK_CHECK_INTERVAL_SECONDS, "3", Accepted),
    (&[], HEALTHCHECK_CHECK_INTERVAL_SECONDS, "2", Refused),
    (&[], HEALTHCHECK_RESPONSE_TIMEOUT_SECONDS, "300", Accepted),
    (&[], HEALTHCHECK_RESPONSE_TIMEOUT_SECONDS, "301", Refused),
    (&[], HEALTHCHECK_UNHEALTHY_THRESHOLD, "2", Accepted),
    (&[], HEALTHCHECK_UNHEALTHY_THRESHOLD, "1", Refused),
    (&[], HEALTHCHECK_HEALTHY_THRESHOLD, "10", Accepted),
    (&[], HEALTHCHECK_HEALTHY_THRESHOLD, "11", Refused),
    (
        &[],
        ALLOW_RULES,
        "ip:203.0.113.9, cidr:10.0.0.0/8,",
        Accepted,
    ),
    (&[], ALLOW_RULES, "", Accepted),
    (&[], ALLOW_RULES, "10.0.0.0/8", Refused),
    (&[], DENY_RULES, "cidr:2001:db8::/32", Accepted),
    (&[], DENY_RULES, "cidr:x", Refused),
];

/// Admission must never refuse a Service the provider accepts; where the
/// schema is looser, the table says so.
#[test]
fn the_schema_accepts_exactly_what_the_provider_accepts_or_is_looser() {
    for (context, key, value, want) in CASES {
        let mut annotations = context.to_vec();
        annotations.push((key, value));
        let svc = service(&annotations);
        let provider_accepts = !matches!(
            check_service(&svc, LoadBalancerType::Regional),
            Err(CloudError::InvalidInput { .. })
        );
        let got = SCHEMA
            .agreement(&svc, provider_accepts)
            .unwrap_or_else(|e| panic!("{key}: `{value}` with {context:?}: {e}"));
        assert_eq!(got, *want, "{key}: `{value}` with {context:?}");
    }
}
