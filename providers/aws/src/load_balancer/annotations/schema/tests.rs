//! The AWS schema covers every key the provider defines, says what its
//! parser says, and never refuses a Service the provider accepts.

use ccm_cloud_provider::CloudError;
use ccm_cloud_provider::annotations::{Finding, FindingKind};
use ccm_cloud_provider::k8s_openapi::api::core::v1::{
    LoadBalancerIngress, LoadBalancerStatus, ServiceStatus,
};

use super::*;
use crate::load_balancer::service_check::check_service;
use crate::test_util::nlb_service;
use ccm_cloud_provider::annotations::Agreement::{self, Accepted, Looser, Refused};

const UID: &str = "3f2a9c1e-5b7d-4e8f-9a0b-1c2d3e4f5a6b";
const CERT: &str = "arn:aws:acm:us-east-1:123456789012:certificate/0123abcd";

/// Every `pub const` key of the annotations module.
const KEYS: &[&str] = &[
    TYPE,
    INTERNAL,
    SUBNETS,
    EIP_ALLOCATIONS,
    PRIVATE_IPV4_ADDRESSES,
    HEALTHCHECK_PROTOCOL,
    HEALTHCHECK_PORT,
    HEALTHCHECK_PATH,
    HEALTHCHECK_INTERVAL,
    HEALTHCHECK_TIMEOUT,
    HEALTHCHECK_HEALTHY_THRESHOLD,
    HEALTHCHECK_UNHEALTHY_THRESHOLD,
    PROXY_PROTOCOL,
    TARGET_NODE_LABELS,
    TARGET_GROUP_ATTRIBUTES,
    BACKEND_PROTOCOL,
    SECURITY_GROUPS,
    EXTRA_SECURITY_GROUPS,
    ADDITIONAL_RESOURCE_TAGS,
    CROSS_ZONE_LOAD_BALANCING_ENABLED,
    SSL_CERT,
    SSL_PORTS,
    SSL_NEGOTIATION_POLICY,
    IP_ADDRESS_TYPE,
    SOURCE_RANGES,
    ACCESS_LOG_EMIT_INTERVAL,
    ACCESS_LOG_ENABLED,
    ACCESS_LOG_S3_BUCKET_NAME,
    ACCESS_LOG_S3_BUCKET_PREFIX,
    CONNECTION_DRAINING_ENABLED,
    CONNECTION_DRAINING_TIMEOUT,
    CONNECTION_IDLE_TIMEOUT,
];

fn service(annotations: &[(&str, &str)]) -> Service {
    nlb_service(UID, annotations, &[(80, 30080)])
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
    let read = SCHEMA
        .annotations
        .iter()
        .filter(|a| a.ignored.is_none() && a.unsupported.is_none())
        .count();
    assert_eq!(
        read,
        KEYS.len(),
        "entries the provider reads but not in KEYS"
    );
}

#[test]
fn classic_elb_keys_are_checked_and_refused_only_by_a_network_load_balancer() {
    let classic = service(&[
        (TYPE, ""),
        (ACCESS_LOG_ENABLED, "true"),
        (ACCESS_LOG_S3_BUCKET_NAME, "logs"),
        (CONNECTION_IDLE_TIMEOUT, "3600"),
    ]);
    assert!(SCHEMA.review(None, &classic).is_empty());
    check_service(&classic).expect("a valid classic ELB Service");
    let bad = service(&[(TYPE, ""), (CONNECTION_IDLE_TIMEOUT, "forever")]);
    let findings = SCHEMA.review(None, &bad);
    assert_eq!(findings.len(), 1, "{findings:?}");
    assert!(findings[0].kind.refuses(), "{findings:?}");
    let nlb = service(&[(TYPE, "nlb"), (CONNECTION_IDLE_TIMEOUT, "3600")]);
    assert!(matches!(
        check_service(&nlb),
        Err(CloudError::InvalidInput { message, .. }) if message.contains("classic ELBs only")
    ));
}

#[test]
fn a_service_using_every_annotation_typically_has_only_the_deprecation_finding() {
    let svc = service(&[
        (TYPE, "nlb"),
        (INTERNAL, "true"),
        (SUBNETS, "subnet-0123456789abcdef0, private-b"),
        (
            EIP_ALLOCATIONS,
            "eipalloc-0123456789abcdef0,eipalloc-0123456789abcdef1",
        ),
        (PRIVATE_IPV4_ADDRESSES, "10.0.1.10,10.0.2.10"),
        (HEALTHCHECK_PROTOCOL, "HTTP"),
        (HEALTHCHECK_PORT, "traffic-port"),
        (HEALTHCHECK_PATH, "/healthz"),
        (HEALTHCHECK_INTERVAL, "10"),
        (HEALTHCHECK_TIMEOUT, "6"),
        (HEALTHCHECK_HEALTHY_THRESHOLD, "2"),
        (HEALTHCHECK_UNHEALTHY_THRESHOLD, "3"),
        (PROXY_PROTOCOL, "*"),
        (TARGET_NODE_LABELS, "pool=web,lb"),
        (ADDITIONAL_RESOURCE_TAGS, "team=web,cost-center=42"),
        (CROSS_ZONE_LOAD_BALANCING_ENABLED, "true"),
        (
            SSL_CERT,
            "arn:aws:acm:us-east-1:123456789012:certificate/0123abcd",
        ),
        (SSL_PORTS, "443,https"),
        (
            SSL_NEGOTIATION_POLICY,
            "ELBSecurityPolicy-TLS13-1-2-2021-06",
        ),
        (IP_ADDRESS_TYPE, "dualstack"),
        (SOURCE_RANGES, "203.0.113.0/24,198.51.100.0/24"),
    ]);
    assert_eq!(
        messages(&SCHEMA.review(None, &svc)),
        [(
            FindingKind::Deprecated,
            "annotation service.beta.kubernetes.io/load-balancer-source-ranges is deprecated: \
             set spec.loadBalancerSourceRanges instead"
        )]
    );
}

#[test]
fn typos_and_bad_values_are_named_with_what_was_meant() {
    let svc = service(&[
        (
            "service.beta.kubernetes.io/aws-load-balancer-internl",
            "true",
        ),
        (HEALTHCHECK_INTERVAL, "3"),
        (EIP_ALLOCATIONS, "eipalloc-1, 10.0.0.1"),
        (PRIVATE_IPV4_ADDRESSES, "10.0.1.10"),
        (TYPE, "alb"),
    ]);
    assert_eq!(
        messages(&SCHEMA.review(None, &svc)),
        [
            (
                FindingKind::Invalid,
                "annotation service.beta.kubernetes.io/aws-load-balancer-eip-allocations: \
                 expected a comma-separated list of Elastic IP allocation IDs such as \
                 eipalloc-0123456789abcdef0; `10.0.0.1` is not, got `eipalloc-1, 10.0.0.1`"
            ),
            (
                FindingKind::Invalid,
                "annotation service.beta.kubernetes.io/aws-load-balancer-healthcheck-interval: \
                 expected a whole number from 5 to 300, got `3`"
            ),
            (
                FindingKind::Unknown,
                "unknown annotation service.beta.kubernetes.io/aws-load-balancer-internl; \
                 did you mean service.beta.kubernetes.io/aws-load-balancer-internal?"
            ),
            (
                FindingKind::Invalid,
                "annotation service.beta.kubernetes.io/aws-load-balancer-private-ipv4-addresses \
                 needs service.beta.kubernetes.io/aws-load-balancer-internal as well"
            ),
            (
                FindingKind::Invalid,
                "annotation service.beta.kubernetes.io/aws-load-balancer-type: \
                 expected `nlb`, `external`, `nlb-ip`, or none for a classic ELB, got `alb`"
            ),
        ]
    );
}

#[test]
fn the_scheme_of_an_existing_load_balancer_cannot_change() {
    let mut old = service(&[(INTERNAL, "true")]);
    old.status = Some(ServiceStatus {
        load_balancer: Some(LoadBalancerStatus {
            ingress: Some(vec![LoadBalancerIngress {
                hostname: Some("a1-123.elb.us-east-1.amazonaws.com".into()),
                ..LoadBalancerIngress::default()
            }]),
        }),
        ..ServiceStatus::default()
    });
    let new = service(&[(INTERNAL, "false")]);
    assert_eq!(
        messages(&SCHEMA.review(Some(&old), &new)),
        [(
            FindingKind::Immutable,
            "annotation service.beta.kubernetes.io/aws-load-balancer-internal cannot change \
             once the load balancer exists (`true` -> `false`): AWS cannot switch a load \
             balancer between internal and internet-facing; delete and recreate the Service \
             (or create a new one and move traffic to it) to get the other scheme"
        )]
    );
    assert_eq!(
        SCHEMA.review(None, &new),
        [],
        "a new Service may ask for either"
    );
}

/// `(context annotations, key, value, verdict)`.
type Case = (
    &'static [(&'static str, &'static str)],
    &'static str,
    &'static str,
    Agreement,
);

const CASES: &[Case] = &[
    (&[], TYPE, "nlb", Accepted),
    (&[], TYPE, " nlb ", Accepted),
    (&[], TYPE, "external", Accepted),
    (&[], TYPE, "nlb-ip", Accepted),
    (&[], TYPE, "NLB", Refused),
    (&[], TYPE, "", Accepted),
    (&[], TYPE, "classic", Accepted),
    (&[], TYPE, "alb", Refused),
    (&[], INTERNAL, "true", Accepted),
    (&[], INTERNAL, "True", Accepted),
    (&[], INTERNAL, "1", Accepted),
    (&[], INTERNAL, "false", Accepted),
    (&[], INTERNAL, "0.0.0.0/0", Accepted),
    (&[], INTERNAL, "", Accepted),
    (&[], INTERNAL, " ", Accepted),
    (&[], INTERNAL, "yes", Refused),
    (&[], SUBNETS, "subnet-1", Accepted),
    (&[], SUBNETS, " subnet-1, ,public-b ", Accepted),
    (&[], SUBNETS, " , ", Refused),
    (&[], SUBNETS, "", Refused),
    (&[], EIP_ALLOCATIONS, "eipalloc-1,eipalloc-2,", Accepted),
    (&[], EIP_ALLOCATIONS, "10.0.0.1", Refused),
    (&[], EIP_ALLOCATIONS, "", Refused),
    (&[(INTERNAL, "true")], EIP_ALLOCATIONS, "eipalloc-1", Looser),
    (
        &[(INTERNAL, "true")],
        PRIVATE_IPV4_ADDRESSES,
        "10.0.1.10",
        Accepted,
    ),
    (
        &[(INTERNAL, "1")],
        PRIVATE_IPV4_ADDRESSES,
        "10.0.1.10, 10.0.2.10",
        Accepted,
    ),
    (
        &[(INTERNAL, "true")],
        PRIVATE_IPV4_ADDRESSES,
        "10.0.1.300",
        Refused,
    ),
    (&[(INTERNAL, "true")], PRIVATE_IPV4_ADDRESSES, "", Refused),
    (&[], PRIVATE_IPV4_ADDRESSES, "10.0.1.10", Refused),
    (
        &[(INTERNAL, "false")],
        PRIVATE_IPV4_ADDRESSES,
        "10.0.1.10",
        Looser,
    ),
    (&[], HEALTHCHECK_PROTOCOL, "http", Accepted),
    (&[], HEALTHCHECK_PROTOCOL, "HTTPS", Accepted),
    (&[], HEALTHCHECK_PROTOCOL, "Tcp", Accepted),
    (&[], HEALTHCHECK_PROTOCOL, "udp", Refused),
    (&[], HEALTHCHECK_PROTOCOL, "", Refused),
    (&[], HEALTHCHECK_PORT, "traffic-port", Accepted),
    (&[], HEALTHCHECK_PORT, "8080", Accepted),
    (&[], HEALTHCHECK_PORT, "+8080", Accepted),
    (&[], HEALTHCHECK_PORT, "65535", Accepted),
    (&[], HEALTHCHECK_PORT, "0", Refused),
    (&[], HEALTHCHECK_PORT, "65536", Refused),
    (&[], HEALTHCHECK_PORT, "TRAFFIC-PORT", Refused),
    (&[], HEALTHCHECK_PORT, "", Refused),
    (&[], HEALTHCHECK_PATH, "ready", Accepted),
    (
        &[(HEALTHCHECK_PROTOCOL, "HTTP")],
        HEALTHCHECK_PATH,
        "/ready",
        Accepted,
    ),
    (
        &[(HEALTHCHECK_PROTOCOL, "HTTP")],
        HEALTHCHECK_PATH,
        "ready",
        Looser,
    ),
    (&[], HEALTHCHECK_INTERVAL, "5", Accepted),
    (&[], HEALTHCHECK_INTERVAL, "+300", Accepted),
    (&[], HEALTHCHECK_INTERVAL, "4", Refused),
    (&[], HEALTHCHECK_INTERVAL, "301", Refused),
    (&[], HEALTHCHECK_INTERVAL, "ten", Refused),
    (&[], HEALTHCHECK_INTERVAL, "", Refused),
    (&[], HEALTHCHECK_TIMEOUT, "2", Accepted),
    (&[], HEALTHCHECK_TIMEOUT, "121", Refused),
    (&[], HEALTHCHECK_HEALTHY_THRESHOLD, "10", Accepted),
    (&[], HEALTHCHECK_HEALTHY_THRESHOLD, "1", Refused),
    (&[], HEALTHCHECK_UNHEALTHY_THRESHOLD, "2", Accepted),
    (&[], HEALTHCHECK_UNHEALTHY_THRESHOLD, "11", Refused),
    (&[], PROXY_PROTOCOL, "*", Accepted),
    (&[], PROXY_PROTOCOL, "", Accepted),
    (&[], PROXY_PROTOCOL, "v2", Refused),
    (&[], TARGET_NODE_LABELS, "pool=web, lb", Accepted),
    (
        &[],
        TARGET_GROUP_ATTRIBUTES,
        "preserve_client_ip.enabled=false, deregistration_delay.timeout_seconds=30",
        Accepted,
    ),
    (&[], TARGET_GROUP_ATTRIBUTES, "", Accepted),
    (
        &[],
        TARGET_GROUP_ATTRIBUTES,
        "preserve_client_ip.enabled=yes",
        Refused,
    ),
    (
        &[],
        TARGET_GROUP_ATTRIBUTES,
        "slow_start.duration_seconds=30",
        Refused,
    ),
    (&[], TARGET_GROUP_ATTRIBUTES, "=true", Refused),
    (&[(SSL_CERT, CERT)], BACKEND_PROTOCOL, "ssl", Accepted),
    (&[(SSL_CERT, CERT)], BACKEND_PROTOCOL, "tcp", Accepted),
    (&[], BACKEND_PROTOCOL, "TCP", Accepted),
    (&[], BACKEND_PROTOCOL, "ssl", Looser),
    (&[(SSL_CERT, CERT)], BACKEND_PROTOCOL, "http", Looser),
    (&[(SSL_CERT, CERT)], BACKEND_PROTOCOL, "https", Looser),
    (&[(TYPE, "")], BACKEND_PROTOCOL, "http", Accepted),
    (
        &[(TYPE, ""), (SSL_CERT, CERT)],
        BACKEND_PROTOCOL,
        "https",
        Accepted,
    ),
    (&[], BACKEND_PROTOCOL, "grpc", Refused),
    (&[], HEALTHCHECK_PROTOCOL, "SSL", Looser),
    (&[(TYPE, "")], HEALTHCHECK_PROTOCOL, "ssl", Accepted),
    (&[(TYPE, "")], CONNECTION_IDLE_TIMEOUT, "300", Accepted),
    (&[(TYPE, "")], CONNECTION_IDLE_TIMEOUT, "0", Refused),
    (&[], CONNECTION_IDLE_TIMEOUT, "300", Looser),
    (&[(TYPE, "")], CONNECTION_DRAINING_TIMEOUT, "3601", Refused),
    (&[(TYPE, "")], CONNECTION_DRAINING_ENABLED, "true", Accepted),
    (&[(TYPE, "")], ACCESS_LOG_EMIT_INTERVAL, "60", Accepted),
    (&[(TYPE, "")], ACCESS_LOG_EMIT_INTERVAL, "10", Refused),
    (&[(TYPE, "")], ACCESS_LOG_ENABLED, "true", Looser),
    (&[(TYPE, "")], EIP_ALLOCATIONS, "eipalloc-1", Looser),
    (&[], SECURITY_GROUPS, "sg-0a, sg-0b", Accepted),
    (&[], SECURITY_GROUPS, "default", Refused),
    (&[], SECURITY_GROUPS, "", Accepted),
    (&[], EXTRA_SECURITY_GROUPS, "sg-0c", Accepted),
    (&[], EXTRA_SECURITY_GROUPS, "sg-0c,web", Refused),
    (&[], TARGET_NODE_LABELS, "", Accepted),
    (&[], TARGET_NODE_LABELS, "a=b,,c=", Accepted),
    (&[], TARGET_NODE_LABELS, "a=b,=c", Refused),
    (
        &[],
        ADDITIONAL_RESOURCE_TAGS,
        "team=web,cost-center=42",
        Accepted,
    ),
    (&[], ADDITIONAL_RESOURCE_TAGS, "=x", Refused),
    (&[], ADDITIONAL_RESOURCE_TAGS, "aws:owner=x", Looser),
    (
        &[],
        ADDITIONAL_RESOURCE_TAGS,
        "kubernetes.io/service-name=x",
        Looser,
    ),
    (&[], CROSS_ZONE_LOAD_BALANCING_ENABLED, "true", Accepted),
    (&[], CROSS_ZONE_LOAD_BALANCING_ENABLED, "0", Accepted),
    (&[], CROSS_ZONE_LOAD_BALANCING_ENABLED, "on", Refused),
    (&[], CROSS_ZONE_LOAD_BALANCING_ENABLED, "", Refused),
    (&[], SSL_CERT, "arn:aws:acm:r:1:certificate/c", Accepted),
    (&[], SSL_CERT, "", Accepted),
    (&[], SSL_CERT, "my-cert", Refused),
    (&[], SSL_PORTS, "*", Accepted),
    (&[], SSL_PORTS, "", Accepted),
    (&[], SSL_PORTS, "443, admin,", Accepted),
    (&[], SSL_PORTS, " , ", Refused),
    (&[], SSL_NEGOTIATION_POLICY, "", Accepted),
    (
        &[],
        SSL_NEGOTIATION_POLICY,
        "ELBSecurityPolicy-2016-08",
        Accepted,
    ),
    (&[], IP_ADDRESS_TYPE, "ipv4", Accepted),
    (&[], IP_ADDRESS_TYPE, "dualstack", Accepted),
    (&[], IP_ADDRESS_TYPE, "", Accepted),
    (&[], IP_ADDRESS_TYPE, "IPV4", Refused),
    (&[], SOURCE_RANGES, "192.0.2.0/24, 10.0.0.0/8", Accepted),
    (&[], SOURCE_RANGES, "anywhere", Refused),
    (&[], SOURCE_RANGES, "", Looser),
    (&[], SOURCE_RANGES, ",", Looser),
];

/// Admission must never refuse a Service the provider accepts; where the
/// schema is looser, the table says so.
#[test]
fn the_schema_accepts_exactly_what_the_provider_accepts_or_is_looser() {
    for (context, key, value, want) in CASES {
        let mut annotations = context.to_vec();
        annotations.push((key, value));
        let svc = service(&annotations);
        let provider_accepts = !matches!(check_service(&svc), Err(CloudError::InvalidInput { .. }));
        let got = SCHEMA
            .agreement(&svc, provider_accepts)
            .unwrap_or_else(|e| panic!("{key}: `{value}` with {context:?}: {e}"));
        assert_eq!(got, *want, "{key}: `{value}` with {context:?}");
    }
}
