//! Tests of [`AnnotationSchema::review`].

use k8s_openapi::api::core::v1::{
    LoadBalancerIngress, LoadBalancerStatus, ServiceSpec, ServiceStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::*;

const P: &str = "example.com/lb-";
const TYPE: &str = "example.com/lb-type";
const INTERNAL: &str = "example.com/lb-internal";
const PORTS: &str = "example.com/lb-ports";
const CERT: &str = "example.com/lb-cert";
const OLD_CERT: &str = "example.com/lb-certificate";
const NAME: &str = "example.com/lb-name";

fn is_path(v: &str) -> bool {
    v.starts_with('/')
}

static SCHEMA: AnnotationSchema = AnnotationSchema {
    prefixes: &[P],
    annotations: &[
        Annotation::new(TYPE, Value::OneOf(&["nlb", "alb", "classic"]))
            .immutable("create a new Service"),
        Annotation::new(INTERNAL, Value::Bool).immutable("create a new Service"),
        Annotation::new("example.com/lb-idle-timeout", Value::Text).ignored("classic ELBs only"),
        Annotation::new("example.com/lb-security-groups", Value::Text)
            .unsupported("it replaces the load balancer's security groups"),
        Annotation::new(PORTS, Value::List(&Value::Int { min: 1, max: 65535 })).requires(&[CERT]),
        Annotation::new(CERT, Value::NonEmpty).conflicts(&[OLD_CERT]),
        Annotation::new(OLD_CERT, Value::NonEmpty)
            .deprecated("use example.com/lb-cert instead")
            .conflicts(&[CERT]),
        Annotation::new(
            NAME,
            Value::Custom {
                expected: "a path",
                check: is_path,
            },
        ),
    ],
};

fn service(annotations: &[(&str, &str)]) -> Service {
    Service {
        metadata: ObjectMeta {
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

fn provisioned(annotations: &[(&str, &str)]) -> Service {
    let mut svc = service(annotations);
    svc.status = Some(ServiceStatus {
        load_balancer: Some(LoadBalancerStatus {
            ingress: Some(vec![LoadBalancerIngress {
                ip: Some("192.0.2.1".into()),
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
fn well_formed_annotations_have_no_findings() {
    let svc = service(&[
        (TYPE, "nlb"),
        (INTERNAL, " True "),
        (PORTS, "443, 8443,"),
        (CERT, "arn:cert"),
        (NAME, "/x"),
        ("example.com/other", "anything"),
    ]);
    assert_eq!(SCHEMA.review(None, &svc), []);
}

#[test]
fn a_misspelled_key_is_unknown_with_a_suggestion() {
    let svc = service(&[
        ("example.com/lb-typ", "nlb"),
        ("example.com/lb-zzzzzz", "1"),
    ]);
    assert_eq!(
        messages(&SCHEMA.review(None, &svc)),
        [
            (
                FindingKind::Unknown,
                "unknown annotation example.com/lb-typ; did you mean example.com/lb-type?"
            ),
            (
                FindingKind::Unknown,
                "unknown annotation example.com/lb-zzzzzz"
            ),
        ]
    );
}

#[test]
fn malformed_values_name_the_expected_form() {
    let svc = service(&[
        (TYPE, "NLB"),
        (INTERNAL, "yes"),
        (PORTS, "443,http"),
        (CERT, "c"),
        (NAME, "x"),
    ]);
    assert_eq!(
        messages(&SCHEMA.review(None, &svc)),
        [
            (
                FindingKind::Invalid,
                "annotation example.com/lb-internal: expected true or false, got `yes`"
            ),
            (
                FindingKind::Invalid,
                "annotation example.com/lb-name: expected a path, got `x`"
            ),
            (
                FindingKind::Invalid,
                "annotation example.com/lb-ports: expected a comma-separated list of a whole number from 1 to 65535; `http` is not, got `443,http`"
            ),
            (
                FindingKind::Invalid,
                "annotation example.com/lb-type: expected one of `nlb`, `alb` or `classic`, got `NLB`"
            ),
        ]
    );
    let empty_list = service(&[(PORTS, " , "), (CERT, "c")]);
    assert_eq!(
        messages(&SCHEMA.review(None, &empty_list)),
        [(
            FindingKind::Invalid,
            "annotation example.com/lb-ports: expected a comma-separated list of a whole number from 1 to 65535, got `,`"
        )]
    );
}

#[test]
fn requirements_conflicts_and_deprecations_are_found() {
    let svc = service(&[(PORTS, "443"), (CERT, "a"), (OLD_CERT, "b")]);
    let findings = SCHEMA.review(None, &svc);
    assert_eq!(
        messages(&findings),
        [
            (
                FindingKind::Deprecated,
                "annotation example.com/lb-certificate is deprecated: use example.com/lb-cert instead"
            ),
            (
                FindingKind::Invalid,
                "annotations example.com/lb-cert and example.com/lb-certificate cannot be used together: keep one"
            ),
        ],
        "the conflict is reported once"
    );
    let missing = service(&[(PORTS, "443")]);
    assert_eq!(
        messages(&SCHEMA.review(None, &missing)),
        [(
            FindingKind::Invalid,
            "annotation example.com/lb-ports needs example.com/lb-cert as well"
        )]
    );
}

#[test]
fn immutable_annotations_cannot_change_once_the_load_balancer_exists() {
    let old = provisioned(&[(TYPE, "nlb")]);
    let changed = service(&[(TYPE, "alb"), (INTERNAL, "true")]);
    assert_eq!(
        messages(&SCHEMA.review(Some(&old), &changed)),
        [
            (
                FindingKind::Immutable,
                "annotation example.com/lb-type cannot change once the load balancer exists (`nlb` -> `alb`): create a new Service"
            ),
            (
                FindingKind::Immutable,
                "annotation example.com/lb-internal cannot change once the load balancer exists (unset -> `true`): create a new Service"
            ),
        ]
    );
    let same = service(&[(TYPE, " nlb")]);
    assert_eq!(
        SCHEMA.review(Some(&old), &same),
        [],
        "trimmed values are equal"
    );
    let never_provisioned = service(&[(TYPE, "nlb")]);
    assert_eq!(
        SCHEMA.review(Some(&never_provisioned), &changed),
        [],
        "no load balancer yet: anything may change"
    );
    let mut finalized = service(&[(TYPE, "nlb")]);
    finalized.metadata.finalizers = Some(vec![CLEANUP_FINALIZER.into()]);
    assert_eq!(SCHEMA.review(Some(&finalized), &changed).len(), 2);
}

#[test]
fn long_values_are_cut_so_messages_stay_under_one_kib() {
    let long = "x".repeat(5000);
    let svc = service(&[(NAME, &long)]);
    let findings = SCHEMA.review(None, &svc);
    assert_eq!(findings.len(), 1);
    assert!(
        findings[0].message.len() < 1024,
        "{}",
        findings[0].message.len()
    );
    let key = format!("{P}{}", "y".repeat(5000));
    let findings = SCHEMA.review(None, &service(&[(&key, "1")]));
    assert!(findings[0].message.len() < 1024);
}

#[test]
fn findings_become_invalid_input_errors() {
    let finding = &SCHEMA.review(None, &service(&[(INTERNAL, "yes")]))[0];
    assert_eq!(
        finding.to_error().to_string(),
        format!("invalid {INTERNAL}: {}", finding.message)
    );
    assert_eq!(finding.kind.reason(), "InvalidAnnotation");
    assert!(FindingKind::Unknown.refuses() && !FindingKind::Deprecated.refuses());
}

#[test]
fn parse_bool_takes_gos_spellings() {
    for yes in ["1", "t", "T", "TRUE", "true", "True"] {
        assert_eq!(parse_bool(yes), Some(true));
    }
    for no in ["0", "f", "F", "FALSE", "false", "False"] {
        assert_eq!(parse_bool(no), Some(false));
    }
    assert_eq!(parse_bool("yes"), None);
}

#[test]
fn ignored_keys_are_admitted_with_a_warning_whatever_their_value() {
    let svc = service(&[("example.com/lb-idle-timeout", "not a number")]);
    assert_eq!(
        messages(&SCHEMA.review(None, &svc)),
        [(
            FindingKind::Ignored,
            "annotation example.com/lb-idle-timeout is ignored by this cloud-controller-manager: classic ELBs only"
        )]
    );
    assert!(!FindingKind::Ignored.refuses());
}

#[test]
fn immutable_values_that_mean_the_same_are_no_change() {
    let old = provisioned(&[(INTERNAL, "true")]);
    assert_eq!(
        SCHEMA.review(Some(&old), &service(&[(INTERNAL, "True")])),
        []
    );
    assert_eq!(SCHEMA.review(Some(&old), &service(&[(INTERNAL, "1")])), []);
    assert_eq!(
        SCHEMA
            .review(Some(&old), &service(&[(INTERNAL, "false")]))
            .len(),
        1
    );
}

#[test]
fn unsupported_keys_are_refused_whatever_their_value() {
    let svc = service(&[("example.com/lb-security-groups", "sg-1")]);
    assert_eq!(
        messages(&SCHEMA.review(None, &svc)),
        [(
            FindingKind::Invalid,
            "annotation example.com/lb-security-groups is not supported by this cloud-controller-manager yet: it replaces the load balancer's security groups; remove it to get a load balancer without it"
        )]
    );
}
