//! The admission webhook's verdicts on DigitalOcean Services: what
//! upstream's CCM fails the Service on is denied, the rest is admitted with
//! a warning, and spelling out a default is no change at all. No API is
//! called: the provider is built, not initialized.

use std::sync::Arc;

use ccm_cloud_provider::{CloudProvider, Environment, ProviderFactory};
use ccm_provider_digitalocean::DigitalOceanProviderFactory;
use ccm_provider_digitalocean::annotations::{
    LOAD_BALANCER_ID, NETWORK, SIZE_UNIT, STICKY_SESSIONS_TYPE, TYPE,
};
use k8s_openapi::api::core::v1::{
    LoadBalancerIngress, LoadBalancerStatus, Service, ServicePort, ServiceSpec, ServiceStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

const LB_ID: &str = "4de7ac8b-495b-4884-9a69-1050c6793cd6";

/// The DigitalOcean provider as the binary builds it, pointed nowhere.
fn digitalocean() -> Arc<dyn CloudProvider> {
    let env = Environment::default()
        .with("DO_ACCESS_TOKEN", "dop_v1_admission")
        .with("REGION", "nyc3")
        .with("DO_OVERRIDE_URL", "http://127.0.0.1:9");
    DigitalOceanProviderFactory::build(None, &env).expect("valid settings")
}

fn service(annotations: &[(&str, &str)]) -> Service {
    Service {
        metadata: ObjectMeta {
            name: Some("web".into()),
            namespace: Some("shop".into()),
            uid: Some("0b7d3a52-3333-4e8f-9a0b-1c2d3e4f5a6b".into()),
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
            ports: Some(vec![ServicePort {
                port: 80,
                node_port: Some(30080),
                protocol: Some("TCP".into()),
                ..ServicePort::default()
            }]),
            ..ServiceSpec::default()
        }),
        ..Service::default()
    }
}

/// A Service the Go CCM made a load balancer for: the ID and type it
/// recorded, and the address in its status.
fn existing(annotations: &[(&str, &str)]) -> Service {
    let mut all = vec![(LOAD_BALANCER_ID, LB_ID), (TYPE, "REGIONAL")];
    all.extend_from_slice(annotations);
    let mut svc = service(&all);
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

fn verdict(old: Option<&Service>, service: &Service) -> (Option<String>, Vec<String>) {
    ccm_app::fuzzing::admission_verdict(digitalocean().as_ref(), old, service, false)
}

#[test]
fn adding_the_default_network_to_an_existing_service_is_no_change() {
    let old = existing(&[]);
    let mut new = existing(&[(NETWORK, "EXTERNAL")]);
    new.metadata.labels = Some([("team".to_owned(), "web".to_owned())].into());
    for strict in [false, true] {
        assert_eq!(
            ccm_app::fuzzing::admission_verdict(digitalocean().as_ref(), Some(&old), &new, strict),
            (None, vec![]),
            "strict: {strict}"
        );
    }
}

#[test]
fn a_change_of_network_is_denied_as_digitaloceans_api_refuses_it() {
    let old = existing(&[]);
    let (refusal, _) = verdict(Some(&old), &existing(&[(NETWORK, "INTERNAL")]));
    assert!(
        refusal.as_deref().is_some_and(|r| r.starts_with(&format!(
            "annotation {NETWORK} cannot change once the load balancer exists (unset -> `INTERNAL`)"
        ))),
        "{refusal:?}"
    );
}

#[test]
fn a_value_upstream_fails_on_is_denied_and_one_it_reads_anyway_warned_about() {
    let (refusal, _) = verdict(None, &service(&[(SIZE_UNIT, "101")]));
    assert!(refusal.is_some(), "DigitalOcean's API refuses the size");
    let (refusal, warnings) = verdict(None, &service(&[(STICKY_SESSIONS_TYPE, "Cookies")]));
    assert_eq!(refusal, None, "upstream reads it as none");
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].contains("admitted because upstream reads any value but cookies as none"),
        "{warnings:?}"
    );
}

#[test]
fn an_unknown_key_is_admitted_with_a_warning_and_refused_in_strict_mode() {
    let typo = "service.beta.kubernetes.io/do-loadbalancer-protocl";
    let svc = service(&[(typo, "http")]);
    let (refusal, warnings) = verdict(None, &svc);
    assert_eq!(refusal, None);
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].starts_with(&format!(
            "unknown annotation {typo}; did you mean service.beta.kubernetes.io/do-loadbalancer-protocol?"
        )),
        "{warnings:?}"
    );
    let (refusal, _) =
        ccm_app::fuzzing::admission_verdict(digitalocean().as_ref(), None, &svc, true);
    assert!(refusal.is_some());
}
