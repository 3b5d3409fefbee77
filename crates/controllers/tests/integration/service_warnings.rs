//! Warnings a provider returns with a successful ensure, and the findings
//! of its annotation schema, become Warning events on the Service, and the
//! load balancer is ensured all the same (but for a malformed value).

use crate::support;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use ccm_controllers::ControllerId;
use ccm_provider_fake::{
    ANNOTATION_HEALTHCHECK_INTERVAL, ANNOTATION_TYPE, Capability, FakeCloud, Operation,
};
use kube::api::{Patch, PatchParams};
use support::{Harness, eventually, fast_settings, load_balancer_service, ready_node};

const WAIT: Duration = Duration::from_secs(10);
const PREFIX: &str = "service.beta.kubernetes.io/fake-load-balancer-";

/// The fake cloud without its annotation schema: it warns about unknown
/// `fake-load-balancer-*` annotations in the ensure's answer, as a
/// provider without a schema does.
async fn warning() -> (Harness, FakeCloud) {
    let fake = FakeCloud::default();
    fake.set_capability(Capability::AnnotationSchema, false);
    let h = Harness::with_provider(fake.clone(), Arc::new(fake.clone())).await;
    (h, fake)
}

#[tokio::test]
async fn an_unknown_annotation_warns_with_the_nearest_key_and_the_load_balancer_is_ensured() {
    let (mut h, fake) = warning().await;
    h.create_node(&ready_node("n1")).await;
    let typo = format!("{PREFIX}tpye");
    let mut service = load_balancer_service("web", &[]);
    service.metadata.annotations = Some(BTreeMap::from([(typo.clone(), "nlb".to_owned())]));
    h.create_service(&service).await;
    h.start(&[ControllerId::Service], &fast_settings()).await;

    let events = eventually("an UnknownAnnotation event", WAIT, || async {
        let events = h.events("web", "UnknownAnnotation").await;
        (!events.is_empty()).then_some(events)
    })
    .await
    .expect("a bounded wait");
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0].type_.as_deref(), Some("Warning"));
    assert_eq!(
        events[0].note.as_deref(),
        Some(
            format!(r#"Unknown annotation "{typo}" is ignored; did you mean "{ANNOTATION_TYPE}"?"#)
                .as_str()
        )
    );
    eventually("the load balancer ensured", WAIT, || async {
        (!h.events("web", "EnsuredLoadBalancer").await.is_empty()).then_some(())
    })
    .await
    .expect("a bounded wait");
    assert_eq!(fake.load_balancers().len(), 1);
    assert!(
        h.events("web", "SyncLoadBalancerFailed").await.is_empty(),
        "a warning is not a failure"
    );
    h.settled().await;
    assert_eq!(
        fake.count(Operation::EnsureLoadBalancer),
        1,
        "a warning is not retried"
    );
    h.stop().await;
}

#[tokio::test]
async fn known_annotations_raise_no_warning() {
    let (mut h, _) = warning().await;
    h.create_node(&ready_node("n1")).await;
    let mut service = load_balancer_service("web", &[]);
    service.metadata.annotations = Some(BTreeMap::from([
        (ANNOTATION_TYPE.to_owned(), "nlb".to_owned()),
        ("example.com/owner".to_owned(), "team-a".to_owned()),
    ]));
    h.create_service(&service).await;
    h.start(&[ControllerId::Service], &fast_settings()).await;

    eventually("the load balancer ensured", WAIT, || async {
        (!h.events("web", "EnsuredLoadBalancer").await.is_empty()).then_some(())
    })
    .await
    .expect("a bounded wait");
    h.settled().await;
    assert!(h.events("web", "UnknownAnnotation").await.is_empty());
    h.stop().await;
}

/// The provider's annotation schema speaks through the controller: an
/// unknown key is a Warning event in the admission webhook's words and the
/// load balancer is ensured all the same.
#[tokio::test]
async fn the_schemas_unknown_key_is_a_warning_in_the_webhooks_words() {
    let mut h = Harness::new().await;
    h.create_node(&ready_node("n1")).await;
    let typo = format!("{PREFIX}tpye");
    let service = load_balancer_service("web", &[(&typo, "nlb")]);
    h.create_service(&service).await;
    h.start(&[ControllerId::Service], &fast_settings()).await;
    let expected = ccm_provider_fake::SCHEMA.review(None, &service);
    assert_eq!(expected.len(), 1);
    let events = eventually("an UnknownAnnotation event", WAIT, || async {
        let events = h.events("web", "UnknownAnnotation").await;
        (!events.is_empty()).then_some(events)
    })
    .await
    .expect("a bounded wait");
    assert_eq!(
        events[0].note.as_deref(),
        Some(expected[0].message.as_str())
    );
    eventually("the load balancer ensured", WAIT, || async {
        (!h.events("web", "EnsuredLoadBalancer").await.is_empty()).then_some(())
    })
    .await
    .expect("a bounded wait");
    h.stop().await;
}

/// A malformed value is refused before any cloud call: an InvalidAnnotation
/// Warning event in the schema's words, no ensure, no finalizer.
#[tokio::test]
async fn the_schemas_malformed_value_is_refused_before_the_cloud_is_called() {
    let mut h = Harness::new().await;
    h.create_node(&ready_node("n1")).await;
    let service = load_balancer_service("web", &[(ANNOTATION_HEALTHCHECK_INTERVAL, "1")]);
    h.create_service(&service).await;
    h.start(&[ControllerId::Service], &fast_settings()).await;
    let expected = ccm_provider_fake::SCHEMA.review(None, &service);
    let events = eventually("an InvalidAnnotation event", WAIT, || async {
        let events = h.events("web", "InvalidAnnotation").await;
        (!events.is_empty()).then_some(events)
    })
    .await
    .expect("a bounded wait");
    assert_eq!(
        events[0].note.as_deref(),
        Some(expected[0].message.as_str())
    );
    h.settled().await;
    assert_eq!(h.cloud.count(Operation::EnsureLoadBalancer), 0);
    assert!(h.cloud.load_balancers().is_empty());
    h.stop().await;
}

/// A change the cloud cannot make in place, admitted by the webhook with a
/// warning (or past it while it was down), is an ImmutableAnnotation event
/// in the webhook's words; what to do about it is the provider's to say.
#[tokio::test]
async fn an_annotation_changed_on_an_existing_load_balancer_is_a_warning_in_the_webhooks_words() {
    let mut h = Harness::new().await;
    h.create_node(&ready_node("n1")).await;
    let service = load_balancer_service("web", &[]);
    h.create_service(&service).await;
    h.start(&[ControllerId::Service], &fast_settings()).await;
    eventually("the load balancer ensured", WAIT, || async {
        (!h.events("web", "EnsuredLoadBalancer").await.is_empty()).then_some(())
    })
    .await
    .expect("a bounded wait");
    h.settled().await;
    assert!(h.events("web", "ImmutableAnnotation").await.is_empty());

    let stored = h.services().get("web").await.expect("the Service");
    let patch = serde_json::json!({"metadata": {"annotations": {ANNOTATION_TYPE: "nlb"}}});
    let changed = h
        .services()
        .patch("web", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("patched");
    let expected: Vec<String> = ccm_provider_fake::SCHEMA
        .review(Some(&stored), &changed)
        .into_iter()
        .map(|f| f.message)
        .collect();
    assert_eq!(expected.len(), 1, "{expected:?}");
    let events = eventually("an ImmutableAnnotation event", WAIT, || async {
        let events = h.events("web", "ImmutableAnnotation").await;
        (!events.is_empty()).then_some(events)
    })
    .await
    .expect("a bounded wait");
    assert_eq!(events[0].type_.as_deref(), Some("Warning"));
    assert_eq!(events[0].note.as_deref(), Some(expected[0].as_str()));
    h.stop().await;
}
