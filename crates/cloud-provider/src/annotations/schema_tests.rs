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
const STACK: &str = "example.com/lb-stack";

fn is_path(v: &str) -> bool {
    v.starts_with('/')
}

/// `nlb`, `alb` and `classic`; unset means `classic`.
fn type_meaning<'a>(value: Option<&'a str>, _: &'a BTreeMap<String, String>) -> Option<&'a str> {
    Some(value.filter(|v| !v.is_empty()).unwrap_or("classic"))
}

/// `v4` when unset on an internal load balancer; unknown when unset on
/// another.
fn stack_meaning<'a>(
    value: Option<&'a str>,
    given: &'a BTreeMap<String, String>,
) -> Option<&'a str> {
    match value {
        Some(v) => Some(v),
        None if given.get(INTERNAL).is_some_and(|v| v == "true") => Some("v4"),
        None => None,
    }
}

/// A network load balancer.
fn is_nlb(service: &Service) -> bool {
    service
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(TYPE))
        .is_some_and(|t| t == "nlb")
}

static SCHEMA: AnnotationSchema = AnnotationSchema {
    prefixes: &[P],
    annotations: &[
        Annotation::new(TYPE, Value::OneOf(&["nlb", "alb", "classic"]))
            .immutable("create a new Service")
            .upstream_accepts("upstream makes a classic load balancer of any other value")
            .upstream_fails_change("upstream fails the ensure when the kind changes")
            .meaning(type_meaning),
        Annotation::new(INTERNAL, Value::Bool)
            .immutable("create a new Service")
            .upstream_fails("upstream fails on a word it cannot read as a boolean")
            .upstream_accepts_change("upstream keeps the scheme it created"),
        Annotation::new("example.com/lb-idle-timeout", Value::Text).ignored("classic ELBs only"),
        Annotation::new("example.com/lb-security-groups", Value::Text)
            .unsupported("it replaces the load balancer's security groups"),
        Annotation::new(PORTS, Value::List(&Value::Int { min: 1, max: 65535 }))
            .requires(&[CERT])
            .upstream_fails_when(
                is_nlb,
                "upstream fails a network load balancer on a bad port and ignores it on others",
            ),
        Annotation::new(CERT, Value::NonEmpty)
            .conflicts(&[OLD_CERT])
            .upstream_fails("the cloud refuses two certificates"),
        Annotation::new(OLD_CERT, Value::NonEmpty)
            .deprecated("use example.com/lb-cert instead")
            .conflicts(&[CERT]),
        Annotation::new(STACK, Value::OneOf(&["v4", "dual"]))
            .immutable("create a new Service")
            .meaning(stack_meaning),
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

#[test]
fn findings_carry_what_upstream_does_with_the_service() {
    let verdicts = |svc: &Service| -> Vec<(String, Option<UpstreamVerdict>, bool)> {
        SCHEMA
            .review(None, svc)
            .into_iter()
            .map(|f| {
                let fails = f.upstream_fails();
                (f.key, f.upstream, fails)
            })
            .collect()
    };
    let accepts = |why| Some(UpstreamVerdict { fails: false, why });
    let fails = |why| Some(UpstreamVerdict { fails: true, why });
    let svc = service(&[
        (TYPE, "NLB"),
        (INTERNAL, "yes"),
        ("example.com/lb-scheme", "internal"),
        (OLD_CERT, "b"),
        (CERT, "a"),
        (NAME, "x"),
    ]);
    assert_eq!(
        verdicts(&svc),
        [
            (OLD_CERT.to_owned(), None, false),
            (
                INTERNAL.to_owned(),
                fails("upstream fails on a word it cannot read as a boolean"),
                true
            ),
            (NAME.to_owned(), None, false),
            ("example.com/lb-scheme".to_owned(), Some(UNKNOWN_KEY), false),
            (
                TYPE.to_owned(),
                accepts("upstream makes a classic load balancer of any other value"),
                false
            ),
            (
                CERT.to_owned(),
                fails("the cloud refuses two certificates"),
                true
            ),
        ],
        "a conflict takes the verdict of its first key; deprecated and unstated keys have none"
    );
    let why = "upstream fails a network load balancer on a bad port and ignores it on others";
    let on_nlb = service(&[(TYPE, "nlb"), (PORTS, "http"), (CERT, "c")]);
    assert_eq!(verdicts(&on_nlb), [(PORTS.to_owned(), fails(why), true)]);
    let on_classic = service(&[(PORTS, "http"), (CERT, "c")]);
    assert_eq!(
        verdicts(&on_classic),
        [(PORTS.to_owned(), accepts(why), false)]
    );
}

#[test]
fn spelling_out_what_unset_means_is_no_change() {
    let old = provisioned(&[]);
    for same in ["classic", " classic "] {
        assert_eq!(
            SCHEMA.review(Some(&old), &service(&[(TYPE, same)])),
            [],
            "`{same}`"
        );
    }
    let changed = SCHEMA.review(Some(&old), &service(&[(TYPE, "nlb")]));
    assert_eq!(
        messages(&changed),
        [(
            FindingKind::Immutable,
            "annotation example.com/lb-type cannot change once the load balancer exists (unset -> `nlb`): create a new Service"
        )]
    );
    assert!(changed[0].upstream_fails(), "{changed:?}");
    let back = SCHEMA.review(Some(&provisioned(&[(TYPE, "classic")])), &service(&[]));
    assert_eq!(back, [], "removing the default is no change either");
}

#[test]
fn a_change_whose_meaning_the_service_cannot_tell_is_not_reported() {
    let internal = provisioned(&[(INTERNAL, "true")]);
    let spelled_out = service(&[(INTERNAL, "true"), (STACK, "v4")]);
    assert_eq!(SCHEMA.review(Some(&internal), &spelled_out), []);
    let external = provisioned(&[]);
    assert_eq!(
        SCHEMA.review(Some(&external), &service(&[(STACK, "v4")])),
        [],
        "unset means what the nodes say: the provider judges it"
    );
    let changed = SCHEMA.review(
        Some(&provisioned(&[(STACK, "dual")])),
        &service(&[(STACK, "v4")]),
    );
    assert_eq!(changed.len(), 1, "{changed:?}");
    assert_eq!(changed[0].upstream, None);
    assert!(!changed[0].upstream_fails(), "unstated: admission warns");
}

#[test]
fn an_immutable_change_upstream_goes_on_with_is_admitted_with_why() {
    let old = provisioned(&[(INTERNAL, "true")]);
    let findings = SCHEMA.review(Some(&old), &service(&[(INTERNAL, "false")]));
    assert_eq!(findings.len(), 1, "{findings:?}");
    assert!(!findings[0].upstream_fails());
    assert_eq!(
        findings[0].warning(),
        "annotation example.com/lb-internal cannot change once the load balancer exists (`true` -> `false`): create a new Service (admitted because upstream keeps the scheme it created)"
    );
}

#[test]
fn warnings_say_why_a_problem_is_admitted_and_what_happens_to_it() {
    let warnings = |annotations: &[(&str, &str)]| -> Vec<String> {
        SCHEMA
            .review(None, &service(annotations))
            .iter()
            .map(Finding::warning)
            .collect()
    };
    assert_eq!(
        warnings(&[("example.com/lb-typ", "nlb")]),
        [
            "unknown annotation example.com/lb-typ; did you mean example.com/lb-type? (ignored here, as upstream's cloud-controller-manager ignores keys it does not read)"
        ]
    );
    assert_eq!(
        warnings(&[(TYPE, "NLB")]),
        [
            "annotation example.com/lb-type: expected one of `nlb`, `alb` or `classic`, got `NLB` (admitted because upstream makes a classic load balancer of any other value; this cloud-controller-manager makes no load-balancer change for the Service until it is fixed)"
        ]
    );
    assert_eq!(
        warnings(&[(NAME, "x")]),
        [
            "annotation example.com/lb-name: expected a path, got `x` (this cloud-controller-manager makes no load-balancer change for the Service until it is fixed)"
        ],
        "a key that says nothing of upstream"
    );
    assert_eq!(
        warnings(&[("example.com/lb-idle-timeout", "1")]),
        [
            "annotation example.com/lb-idle-timeout is ignored by this cloud-controller-manager: classic ELBs only"
        ]
    );
}

#[test]
fn a_provider_refusal_is_a_finding_on_the_key_it_names() {
    let svc = service(&[(CERT, "a")]);
    let refused = SCHEMA
        .refusal(
            &CloudError::invalid(CERT, "the certificate is in another region"),
            &svc,
        )
        .expect("an InvalidInput is a finding");
    assert_eq!(refused.kind, FindingKind::Invalid);
    assert_eq!(refused.key, CERT);
    assert_eq!(
        refused.message,
        format!("invalid {CERT}: the certificate is in another region")
    );
    assert!(refused.upstream_fails());
    let elsewhere = SCHEMA
        .refusal(
            &CloudError::invalid("spec.loadBalancerIP", "not here"),
            &svc,
        )
        .expect("a finding");
    assert_eq!(elsewhere.upstream, None, "not a key of the schema");
    assert_eq!(
        SCHEMA.refusal(&CloudError::ImplementedElsewhere, &svc),
        None
    );
}
