//! The admission webhook's verdicts on AWS Services: what upstream's CCM
//! (cloud-provider-aws v1.36) fails the Service on is denied, the rest is
//! admitted with a warning, and `--webhook-strict` denies every problem.
//! No cloud is called: the provider is built, not initialized.

use std::sync::Arc;

use ccm_cloud_provider::CloudProvider;
use ccm_provider_aws::annotations::{
    BACKEND_PROTOCOL, CONNECTION_IDLE_TIMEOUT, HEALTHCHECK_INTERVAL, INTERNAL, PROXY_PROTOCOL,
    TARGET_GROUP_ATTRIBUTES, TYPE,
};
use ccm_provider_aws::test_util::{built, classic_service, cloud_config_at, nlb_service};
use k8s_openapi::api::core::v1::{LoadBalancerIngress, LoadBalancerStatus, Service, ServiceStatus};

const UID: &str = "8a3c5e7f-1b2d-4c6e-9f0a-2b4d6f8a0c1e";

/// Keys of the AWS Load Balancer Controller, which upstream's CCM ignores,
/// as a manifest written for one carries them to the other.
const LOAD_BALANCER_CONTROLLER_KEYS: &[(&str, &str)] = &[
    (
        "service.beta.kubernetes.io/aws-load-balancer-nlb-target-type",
        "instance",
    ),
    (
        "service.beta.kubernetes.io/aws-load-balancer-scheme",
        "internet-facing",
    ),
    (
        "service.beta.kubernetes.io/aws-load-balancer-healthcheck-success-codes",
        "200-399",
    ),
];

/// The AWS provider as the binary builds it, pointed nowhere.
fn aws() -> Arc<dyn CloudProvider> {
    built(&cloud_config_at("http://127.0.0.1:9", "admission", ""))
}

fn nlb(annotations: &[(&str, &str)]) -> Service {
    nlb_service(UID, annotations, &[(80, 30080)])
}

fn classic(annotations: &[(&str, &str)]) -> Service {
    classic_service(UID, annotations, &[(80, 30080)])
}

/// `service` with a load balancer in its status.
fn provisioned(mut service: Service) -> Service {
    service.status = Some(ServiceStatus {
        load_balancer: Some(LoadBalancerStatus {
            ingress: Some(vec![LoadBalancerIngress {
                hostname: Some("a1-123.elb.us-east-1.amazonaws.com".into()),
                ..LoadBalancerIngress::default()
            }]),
        }),
        ..ServiceStatus::default()
    });
    service
}

fn verdict(old: Option<&Service>, service: &Service) -> (Option<String>, Vec<String>) {
    ccm_app::fuzzing::admission_verdict(aws().as_ref(), old, service, false)
}

fn strict_verdict(old: Option<&Service>, service: &Service) -> (Option<String>, Vec<String>) {
    ccm_app::fuzzing::admission_verdict(aws().as_ref(), old, service, true)
}

#[test]
fn an_nlb_with_the_load_balancer_controllers_keys_is_admitted_with_warnings_naming_them() {
    let (refusal, warnings) = verdict(None, &nlb(LOAD_BALANCER_CONTROLLER_KEYS));
    assert_eq!(refusal, None, "upstream ignores them");
    assert_eq!(
        warnings.len(),
        LOAD_BALANCER_CONTROLLER_KEYS.len(),
        "{warnings:?}"
    );
    for (key, _) in LOAD_BALANCER_CONTROLLER_KEYS {
        assert!(
            warnings
                .iter()
                .any(|w| w.starts_with(&format!("unknown annotation {key}"))
                    && w.contains(
                        "upstream's cloud-controller-manager ignores keys it does not read"
                    )),
            "{key}: {warnings:?}"
        );
    }
}

#[test]
fn strict_mode_denies_the_load_balancer_controllers_keys() {
    let (refusal, _) = strict_verdict(None, &nlb(LOAD_BALANCER_CONTROLLER_KEYS));
    let refusal = refusal.expect("refused");
    for (key, _) in LOAD_BALANCER_CONTROLLER_KEYS {
        assert!(
            refusal.contains(&format!("unknown annotation {key}")),
            "{refusal}"
        );
    }
}

#[test]
fn a_health_check_interval_upstream_fails_on_is_denied() {
    for value in ["3", "ten"] {
        let (refusal, _) = verdict(None, &nlb(&[(HEALTHCHECK_INTERVAL, value)]));
        assert_eq!(
            refusal.as_deref(),
            Some(
                format!(
                    "annotation {HEALTHCHECK_INTERVAL}: expected a whole number from 5 to 300, got `{value}`"
                )
                .as_str()
            ),
            "upstream or AWS fails `{value}`"
        );
    }
}

#[test]
fn a_type_upstream_reads_as_a_classic_elb_is_admitted_with_a_warning() {
    let (refusal, warnings) = verdict(None, &nlb(&[(TYPE, "alb")]));
    assert_eq!(refusal, None);
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].contains("admitted because upstream makes a classic ELB of any value but")
            && warnings[0]
                .contains("makes no load-balancer change for the Service until it is fixed"),
        "{warnings:?}"
    );
    let (refusal, _) = strict_verdict(None, &nlb(&[(TYPE, "alb")]));
    assert!(refusal.is_some(), "strict mode refuses it");
}

#[test]
fn proxy_protocol_is_denied_where_upstream_reads_it() {
    let (refusal, _) = verdict(None, &classic(&[(PROXY_PROTOCOL, "v2")]));
    assert!(refusal.is_some(), "a classic ELB fails upstream");
    let (refusal, warnings) = verdict(None, &nlb(&[(PROXY_PROTOCOL, "v2")]));
    assert_eq!(refusal, None, "an NLB ignores it upstream");
    assert_eq!(warnings.len(), 1, "{warnings:?}");
}

#[test]
fn target_group_attributes_on_a_classic_elb_are_denied_as_upstream_fails_them() {
    let svc = classic(&[(TARGET_GROUP_ATTRIBUTES, "preserve_client_ip.enabled=false")]);
    let (refusal, _) = verdict(None, &svc);
    let refusal = refusal.expect("refused: upstream v1.36 fails the key on a classic ELB");
    assert!(refusal.contains(TARGET_GROUP_ATTRIBUTES), "{refusal}");
}

#[test]
fn classic_elb_settings_on_an_nlb_are_admitted_in_the_providers_words() {
    for (key, value) in [(CONNECTION_IDLE_TIMEOUT, "300"), (BACKEND_PROTOCOL, "http")] {
        let (refusal, warnings) = verdict(None, &nlb(&[(key, value)]));
        assert_eq!(refusal, None, "{key}: upstream ignores it on an NLB");
        assert_eq!(warnings.len(), 1, "{key}: {warnings:?}");
        assert!(
            warnings[0].starts_with(&format!("invalid {key}: ")),
            "the provider's refusal, as the Warning event quotes it: {warnings:?}"
        );
        let (refusal, _) = strict_verdict(None, &nlb(&[(key, value)]));
        assert!(refusal.is_some(), "{key}: strict mode refuses it");
    }
}

#[test]
fn a_change_of_kind_is_denied_and_a_change_of_scheme_warned_about() {
    let old = provisioned(classic(&[]));
    let (refusal, _) = verdict(Some(&old), &nlb(&[]));
    assert!(
        refusal
            .as_deref()
            .is_some_and(|r| r.starts_with(&format!("annotation {TYPE} cannot change"))),
        "{refusal:?}"
    );
    let (refusal, warnings) = verdict(Some(&old), &classic(&[(TYPE, "classic")]));
    assert_eq!(
        (refusal, warnings),
        (None, vec![]),
        "the same kind spelt out"
    );

    let old = provisioned(nlb(&[(INTERNAL, "true")]));
    let (refusal, warnings) = verdict(Some(&old), &nlb(&[(INTERNAL, "false")]));
    assert_eq!(refusal, None, "upstream keeps the scheme");
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].contains("admitted because upstream keeps the scheme"),
        "{warnings:?}"
    );
    let (refusal, _) = strict_verdict(Some(&old), &nlb(&[(INTERNAL, "false")]));
    assert!(refusal.is_some(), "strict mode refuses it");
}
