//! What the AWS schema says upstream's CCM (cloud-provider-aws v1.36) does
//! with each key at fault, which decides whether the admission webhook
//! denies a Service or admits it with a warning.

use ccm_cloud_provider::annotations::{Finding, FindingKind, Value};
use ccm_cloud_provider::k8s_openapi::api::core::v1::{
    LoadBalancerIngress, LoadBalancerStatus, ServiceStatus,
};

use super::*;
use crate::test_util::nlb_service;

const UID: &str = "5d1b7e2a-3c4f-4a6b-8d9e-0f1a2b3c4d5e";
const CERT: &str = "arn:aws:acm:us-east-1:123456789012:certificate/0123abcd";

/// Keys the AWS Load Balancer Controller reads and upstream's CCM does
/// not: a manifest written for the one often carries them to the other.
const LOAD_BALANCER_CONTROLLER_KEYS: &[(&str, &str)] = &[
    (
        "service.beta.kubernetes.io/aws-load-balancer-nlb-target-type",
        "ip",
    ),
    (
        "service.beta.kubernetes.io/aws-load-balancer-scheme",
        "internet-facing",
    ),
    (
        "service.beta.kubernetes.io/aws-load-balancer-healthcheck-success-codes",
        "200-399",
    ),
    (
        "service.beta.kubernetes.io/aws-load-balancer-attributes",
        "load_balancing.cross_zone.enabled=true",
    ),
];

fn service(annotations: &[(&str, &str)]) -> Service {
    nlb_service(UID, annotations, &[(80, 30080)])
}

/// `service` with a load balancer in its status.
fn provisioned(annotations: &[(&str, &str)]) -> Service {
    let mut svc = service(annotations);
    svc.status = Some(ServiceStatus {
        load_balancer: Some(LoadBalancerStatus {
            ingress: Some(vec![LoadBalancerIngress {
                hostname: Some("a1-123.elb.us-east-1.amazonaws.com".into()),
                ..LoadBalancerIngress::default()
            }]),
        }),
        ..ServiceStatus::default()
    });
    svc
}

fn problems(findings: Vec<Finding>) -> Vec<(FindingKind, String, bool)> {
    findings
        .into_iter()
        .filter(|f| f.kind.refuses())
        .map(|f| {
            let fails = f.upstream_fails();
            (f.kind, f.key, fails)
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

/// `(context, key, value, whether upstream fails the Service)`.
type Case = (
    &'static [(&'static str, &'static str)],
    &'static str,
    &'static str,
    bool,
);

const CLASSIC: &[(&str, &str)] = &[(TYPE, "")];
const NLB: &[(&str, &str)] = &[];

const CASES: &[Case] = &[
    // upstream makes a classic ELB of it
    (NLB, TYPE, "alb", false),
    (NLB, TYPE, "NLB", false),
    // anything but `false` is internal upstream
    (NLB, INTERNAL, "yes", false),
    (NLB, SUBNETS, " , ", true),
    (NLB, EIP_ALLOCATIONS, "10.0.0.1", true),
    (
        &[(INTERNAL, "true")],
        PRIVATE_IPV4_ADDRESSES,
        "10.0.1.300",
        true,
    ),
    (NLB, PRIVATE_IPV4_ADDRESSES, "10.0.1.10", true),
    (NLB, HEALTHCHECK_PROTOCOL, "udp", true),
    (CLASSIC, HEALTHCHECK_PROTOCOL, "udp", true),
    (NLB, HEALTHCHECK_PORT, "admin", true),
    (NLB, HEALTHCHECK_INTERVAL, "3", true),
    (CLASSIC, HEALTHCHECK_INTERVAL, "ten", true),
    (NLB, HEALTHCHECK_TIMEOUT, "121", true),
    (NLB, HEALTHCHECK_HEALTHY_THRESHOLD, "1", true),
    (NLB, HEALTHCHECK_UNHEALTHY_THRESHOLD, "11", true),
    (CLASSIC, PROXY_PROTOCOL, "v2", true),
    (NLB, PROXY_PROTOCOL, "v2", false),
    (NLB, TARGET_NODE_LABELS, "a=b,=c", false),
    (NLB, ADDITIONAL_RESOURCE_TAGS, "=x", false),
    (
        NLB,
        TARGET_GROUP_ATTRIBUTES,
        "slow_start.duration_seconds=30",
        true,
    ),
    (NLB, CROSS_ZONE_LOAD_BALANCING_ENABLED, "on", true),
    (NLB, SSL_CERT, "my-cert", true),
    (NLB, SSL_PORTS, " , ", false),
    (NLB, IP_ADDRESS_TYPE, "IPV4", false),
    (NLB, SOURCE_RANGES, "anywhere", true),
    (CLASSIC, ACCESS_LOG_EMIT_INTERVAL, "10", true),
    (NLB, ACCESS_LOG_EMIT_INTERVAL, "10", false),
    (CLASSIC, ACCESS_LOG_ENABLED, "yes", true),
    (NLB, ACCESS_LOG_ENABLED, "yes", true),
    (CLASSIC, CONNECTION_DRAINING_ENABLED, "on", true),
    (NLB, CONNECTION_DRAINING_ENABLED, "on", false),
    (CLASSIC, CONNECTION_DRAINING_TIMEOUT, "3601", true),
    (CLASSIC, CONNECTION_IDLE_TIMEOUT, "0", true),
    (NLB, CONNECTION_IDLE_TIMEOUT, "0", false),
    (
        &[(TYPE, ""), (SSL_CERT, CERT)],
        BACKEND_PROTOCOL,
        "grpc",
        true,
    ),
    (CLASSIC, BACKEND_PROTOCOL, "grpc", false),
    (&[(SSL_CERT, CERT)], BACKEND_PROTOCOL, "grpc", false),
    (CLASSIC, SECURITY_GROUPS, "default", true),
    (NLB, SECURITY_GROUPS, "default", false),
    (NLB, EXTRA_SECURITY_GROUPS, "sg-0c,web", true),
];

#[test]
fn a_malformed_value_is_denied_only_where_upstream_fails_the_service() {
    for (context, key, value, fails) in CASES {
        let mut annotations = context.to_vec();
        annotations.push((key, value));
        let findings = SCHEMA.review(None, &service(&annotations));
        let on_key: Vec<&Finding> = findings
            .iter()
            .filter(|f| f.key == *key && f.kind.refuses())
            .collect();
        assert!(
            !on_key.is_empty() && on_key.iter().all(|f| f.kind == FindingKind::Invalid),
            "{key}: `{value}` with {context:?} should be malformed: {findings:?}"
        );
        for finding in on_key {
            assert_eq!(
                finding.upstream_fails(),
                *fails,
                "{key}: `{value}` with {context:?}: {finding:?}"
            );
        }
    }
}

#[test]
fn the_load_balancer_controllers_keys_on_an_nlb_are_only_warned_about() {
    let findings = SCHEMA.review(None, &service(LOAD_BALANCER_CONTROLLER_KEYS));
    assert_eq!(findings.len(), LOAD_BALANCER_CONTROLLER_KEYS.len());
    for (finding, (key, _)) in findings.iter().zip(
        LOAD_BALANCER_CONTROLLER_KEYS
            .iter()
            .copied()
            .collect::<BTreeMap<_, _>>(),
    ) {
        assert_eq!(finding.kind, FindingKind::Unknown, "{finding:?}");
        assert_eq!(finding.key, key);
        assert!(!finding.upstream_fails(), "upstream ignores {key}");
        assert!(
            finding
                .warning()
                .starts_with(&format!("unknown annotation {key}")),
            "{}",
            finding.warning()
        );
    }
}

#[test]
fn only_a_change_of_kind_fails_upstreams_ensure() {
    let classic = provisioned(&[(TYPE, "")]);
    let changes = |old: &Service, new: &[(&str, &str)]| {
        problems(SCHEMA.review(Some(old), &service(new)))
            .into_iter()
            .filter(|(kind, ..)| *kind == FindingKind::Immutable)
            .collect::<Vec<_>>()
    };
    assert_eq!(
        changes(&classic, &[]),
        [(FindingKind::Immutable, TYPE.to_owned(), true)],
        "a classic ELB asked to be an NLB"
    );
    for same in ["", "classic", "clb", "elb", " classic "] {
        assert_eq!(changes(&classic, &[(TYPE, same)]), [], "`{same}`");
    }
    assert_eq!(
        changes(&classic, &[(TYPE, "alb")]),
        [],
        "upstream makes a classic ELB of `alb` too"
    );
    let nlb = provisioned(&[]);
    assert_eq!(
        changes(&nlb, &[(TYPE, "")]),
        [(FindingKind::Immutable, TYPE.to_owned(), true)]
    );
    assert_eq!(
        changes(&nlb, &[(TYPE, "external")]),
        [],
        "handed to the AWS Load Balancer Controller: not a change of kind"
    );

    let internal = provisioned(&[(INTERNAL, "true")]);
    assert_eq!(
        changes(&internal, &[(INTERNAL, "false")]),
        [(FindingKind::Immutable, INTERNAL.to_owned(), false)],
        "upstream keeps the scheme"
    );
    assert_eq!(changes(&internal, &[(INTERNAL, "True")]), []);
    let internet_facing = provisioned(&[]);
    for same in ["false", "False", "0", ""] {
        assert_eq!(
            changes(&internet_facing, &[(INTERNAL, same)]),
            [],
            "`{same}` is what unset means"
        );
    }

    assert_eq!(
        changes(&nlb, &[(SUBNETS, "subnet-1")]),
        [(FindingKind::Immutable, SUBNETS.to_owned(), false)],
        "upstream keeps an NLB's subnets"
    );
    assert_eq!(
        changes(&classic, &[(TYPE, ""), (SUBNETS, "subnet-1")]),
        [],
        "a classic ELB moves to the new subnets"
    );
    assert_eq!(
        changes(&nlb, &[(EIP_ALLOCATIONS, "eipalloc-1")]),
        [(FindingKind::Immutable, EIP_ALLOCATIONS.to_owned(), false)]
    );
}
