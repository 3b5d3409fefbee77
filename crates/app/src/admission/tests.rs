//! The webhook's answers, for the fake cloud: the verdicts under both
//! policies, the review envelope, and bodies that are not reviews. The
//! providers' own keys are judged in their binaries' tests
//! (`cmd/*/tests/admission.rs`).

mod client_ca;
mod limits;

use ccm_provider_fake::{ANNOTATION_HEALTHCHECK_INTERVAL, ANNOTATION_TYPE, FakeCloud};
use k8s_openapi::api::core::v1::{Service, ServiceSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::{Value, json};

use super::decide::{Policy, Verdict, decide};
use super::*;

fn service(type_: &str, annotations: &[(&str, &str)]) -> Service {
    Service {
        metadata: ObjectMeta {
            name: Some("web".into()),
            namespace: Some("default".into()),
            annotations: Some(
                annotations
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect(),
            ),
            ..ObjectMeta::default()
        },
        spec: Some(ServiceSpec {
            type_: Some(type_.into()),
            ..ServiceSpec::default()
        }),
        ..Service::default()
    }
}

fn review(operation: &str, object: &Service, old: Option<&Service>) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "4f1c0e4e-0000-4000-8000-000000000001",
            "kind": {"group": "", "version": "v1", "kind": "Service"},
            "resource": {"group": "", "version": "v1", "resource": "services"},
            "name": "web",
            "namespace": "default",
            "operation": operation,
            "userInfo": {"username": "alice"},
            "object": object,
            "oldObject": old,
            "dryRun": false,
        }
    }))
    .unwrap()
}

fn answer_under(policy: Policy, body: &[u8]) -> Value {
    let cloud = FakeCloud::default();
    serde_json::to_value(respond(&cloud, body, policy).unwrap()).unwrap()
}

fn answer(body: &[u8]) -> Value {
    answer_under(Policy::Upstream, body)
}

const TYPO: &str = "service.beta.kubernetes.io/fake-load-balancer-typ";

#[test]
fn a_misspelled_annotation_is_admitted_with_a_warning_naming_the_nearest_key() {
    let body = review("CREATE", &service("LoadBalancer", &[(TYPO, "nlb")]), None);
    let answer = answer(&body);
    let response = &answer["response"];
    assert_eq!(response["uid"], "4f1c0e4e-0000-4000-8000-000000000001");
    assert_eq!(response["allowed"], true, "upstream ignores unknown keys");
    assert_eq!(
        response["warnings"],
        json!([format!(
            "unknown annotation {TYPO}; did you mean {ANNOTATION_TYPE}? (ignored here, as upstream's cloud-controller-manager ignores keys it does not read)"
        )])
    );
}

#[test]
fn strict_mode_refuses_a_misspelled_annotation_with_a_suggestion() {
    let body = review("CREATE", &service("LoadBalancer", &[(TYPO, "nlb")]), None);
    let answer = answer_under(Policy::Strict, &body);
    let response = &answer["response"];
    assert_eq!(answer["kind"], "AdmissionReview");
    assert_eq!(answer["apiVersion"], "admission.k8s.io/v1");
    assert_eq!(response["uid"], "4f1c0e4e-0000-4000-8000-000000000001");
    assert_eq!(response["allowed"], false);
    assert_eq!(response["status"]["code"], 422);
    assert_eq!(
        response["status"]["message"],
        format!("unknown annotation {TYPO}; did you mean {ANNOTATION_TYPE}?")
    );
}

#[test]
fn the_refusal_is_the_schema_finding_the_service_controller_publishes() {
    let svc = service("LoadBalancer", &[(ANNOTATION_HEALTHCHECK_INTERVAL, "1")]);
    let cloud = FakeCloud::default();
    let findings = ccm_provider_fake::SCHEMA.review(None, &svc);
    assert_eq!(findings.len(), 1);
    for policy in [Policy::Upstream, Policy::Strict] {
        let verdict = decide(cloud.load_balancer(), None, &svc, policy);
        assert_eq!(
            verdict.refusal.as_deref(),
            Some(findings[0].message.as_str()),
            "{policy:?}: the fake fails a bad interval, as AWS does"
        );
    }
}

#[test]
fn well_formed_and_other_services_are_admitted() {
    let cloud = FakeCloud::default();
    let good = service("LoadBalancer", &[(ANNOTATION_TYPE, "nlb")]);
    assert_eq!(
        decide(cloud.load_balancer(), None, &good, Policy::Upstream),
        Verdict::default()
    );
    let cluster_ip = service("ClusterIP", &[(TYPO, "nlb")]);
    assert_eq!(
        decide(cloud.load_balancer(), None, &cluster_ip, Policy::Strict),
        Verdict::default()
    );
    let mut classed = service("LoadBalancer", &[(TYPO, "nlb")]);
    classed.spec.as_mut().unwrap().load_balancer_class = Some("example.com/other".into());
    assert_eq!(
        decide(cloud.load_balancer(), None, &classed, Policy::Strict),
        Verdict::default()
    );
    let elsewhere = service(
        "LoadBalancer",
        &[(ANNOTATION_TYPE, "external"), (TYPO, "x")],
    );
    assert_eq!(
        decide(cloud.load_balancer(), None, &elsewhere, Policy::Strict),
        Verdict::default(),
        "another controller's annotations are not ours to judge"
    );
    assert_eq!(
        decide(
            None,
            None,
            &service("LoadBalancer", &[(TYPO, "x")]),
            Policy::Strict
        ),
        Verdict::default()
    );
}

#[test]
fn an_immutable_change_on_an_existing_load_balancer_is_refused() {
    let mut old = service("LoadBalancer", &[]);
    old.metadata.finalizers = Some(vec!["service.kubernetes.io/load-balancer-cleanup".into()]);
    let new = service("LoadBalancer", &[(ANNOTATION_TYPE, "nlb")]);
    let answer = answer(&review("UPDATE", &new, Some(&old)));
    assert_eq!(answer["response"]["allowed"], false);
    let message = answer["response"]["status"]["message"].as_str().unwrap();
    assert!(
        message.starts_with(&format!(
            "annotation {ANNOTATION_TYPE} cannot change once the load balancer exists (unset -> `nlb`)"
        )),
        "{message}"
    );
    let fresh = service("LoadBalancer", &[]);
    let answer = self::answer(&review("UPDATE", &new, Some(&fresh)));
    assert_eq!(answer["response"]["allowed"], true, "no load balancer yet");
}

#[test]
fn reviews_of_other_kinds_are_admitted() {
    let body = serde_json::to_vec(&json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "u", "operation": "CREATE", "userInfo": {},
            "kind": {"group": "apps", "version": "v1", "kind": "Deployment"},
            "resource": {"group": "apps", "version": "v1", "resource": "deployments"},
            "object": {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}},
        }
    }))
    .unwrap();
    assert_eq!(answer(&body)["response"]["allowed"], true);
}

#[test]
fn bodies_that_are_not_reviews_are_refused_without_quoting_them() {
    let cloud = FakeCloud::default();
    for body in [
        &b"{\"request\": [1,2"[..],
        b"secret-token-value",
        br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}"#,
        b"",
    ] {
        let err = respond(&cloud, body, Policy::Upstream).unwrap_err();
        assert!(err.starts_with("not an AdmissionReview"), "{err}");
        assert!(!err.contains("secret"), "{err}");
    }
}

#[test]
fn an_update_that_keeps_an_existing_problem_is_admitted() {
    let stored = service("LoadBalancer", &[(TYPO, "nlb")]);
    let mut finalized = stored.clone();
    finalized.metadata.finalizers =
        Some(vec!["service.kubernetes.io/load-balancer-cleanup".into()]);
    let answer = answer(&review("UPDATE", &finalized, Some(&stored)));
    assert_eq!(
        answer["response"]["allowed"], true,
        "the service controller's finalizer write on a Service that bypassed admission"
    );
    let worse = service(
        "LoadBalancer",
        &[(TYPO, "nlb"), (ANNOTATION_HEALTHCHECK_INTERVAL, "1")],
    );
    let answer = self::answer(&review("UPDATE", &worse, Some(&stored)));
    assert_eq!(
        answer["response"]["allowed"], false,
        "a new problem is refused"
    );
    assert_eq!(
        answer["response"]["status"]["message"],
        format!(
            "annotation {ANNOTATION_HEALTHCHECK_INTERVAL}: expected a whole number from 5 to 300, got `1`"
        )
    );
    let strict = answer_under(Policy::Strict, &review("UPDATE", &finalized, Some(&stored)));
    assert_eq!(
        strict["response"]["allowed"], true,
        "strict mode ratchets too"
    );
    assert_eq!(
        strict["response"]["warnings"],
        json!([format!(
            "unknown annotation {TYPO}; did you mean {ANNOTATION_TYPE}? (ignored here, as upstream's cloud-controller-manager ignores keys it does not read)"
        )]),
        "the problem it keeps is still shown"
    );
}

#[test]
fn a_deprecated_key_is_a_warning_under_both_policies() {
    let svc = service(
        "LoadBalancer",
        &[(
            ccm_provider_fake::ANNOTATION_HEALTH_CHECK_INTERVAL_DEPRECATED,
            "30",
        )],
    );
    let cloud = FakeCloud::default();
    for policy in [Policy::Upstream, Policy::Strict] {
        let verdict = decide(cloud.load_balancer(), None, &svc, policy);
        assert_eq!(verdict.refusal, None, "{policy:?}");
        assert_eq!(verdict.warnings.len(), 1, "{policy:?}");
        assert!(
            verdict.warnings[0].ends_with(
                "is deprecated: use service.beta.kubernetes.io/fake-load-balancer-healthcheck-interval instead"
            ),
            "{policy:?}: {:?}",
            verdict.warnings
        );
    }
}
