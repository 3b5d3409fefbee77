//! Events: repeats aggregate, new messages are new events, and many
//! similar messages are combined, as client-go's event correlator does.

use ccm_runtime::Events;
use ccm_test_apiserver::{TestApiServer, Verb};
use k8s_openapi::api::core::v1::{ObjectReference, Service};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};

async fn warnings(server: &TestApiServer) -> Vec<Event> {
    let events: Api<Event> = Api::namespaced(server.client(), "default");
    let mut items = events.list(&ListParams::default()).await.unwrap().items;
    items.sort_by_key(|e| e.note.clone());
    items
}

/// A Service `default/<name>`, created.
async fn service(server: &TestApiServer, name: &str) -> Service {
    let services: Api<Service> = Api::namespaced(server.client(), "default");
    let service = Service {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..ObjectMeta::default()
        },
        ..Service::default()
    };
    services
        .create(&PostParams::default(), &service)
        .await
        .unwrap()
}

#[tokio::test]
async fn a_repeat_after_the_object_changed_is_the_same_series() {
    let server = TestApiServer::start().await.unwrap();
    let created = service(&server, "web").await;
    let services: Api<Service> = Api::namespaced(server.client(), "default");
    let patch = Service {
        metadata: ObjectMeta {
            labels: Some([("changed".to_owned(), "yes".to_owned())].into()),
            ..ObjectMeta::default()
        },
        ..Service::default()
    };
    let changed = services
        .patch("web", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    assert_ne!(
        created.metadata.resource_version,
        changed.metadata.resource_version
    );
    let events = Events::new(server.client(), "service-controller", Some("test".into()));

    // Upstream's correlator keys an event by the object's kind, namespace,
    // name and UID, not its resourceVersion, which a caller's reference may
    // carry.
    let at = |service: &Service| ObjectReference {
        resource_version: service.metadata.resource_version.clone(),
        ..service.object_ref(&())
    };
    let reason = "UpdatedLoadBalancer";
    let note = "Updated load balancer with new hosts";
    events.normal(&at(&created), reason, note).await;
    events.normal(&at(&changed), reason, note).await;

    let all = warnings(&server).await;
    assert_eq!(all.len(), 1, "{all:?}");
    assert_eq!(all[0].series.as_ref().map(|s| s.count), Some(2));
    assert_eq!(
        all[0]
            .regarding
            .as_ref()
            .and_then(|r| r.resource_version.clone()),
        created.metadata.resource_version,
        "the series keeps the reference it was first published with"
    );
    assert_eq!(server.stats().count(Verb::Create, "events"), 1);
}

#[tokio::test]
async fn similar_events_past_ten_messages_are_one_combined_event() {
    let server = TestApiServer::start().await.unwrap();
    let reference = service(&server, "web").await.object_ref(&());
    let events = Events::new(server.client(), "route_controller", Some("test".into()));

    // As the route controller's failures: one reason, a new message each.
    for attempt in 1..=15 {
        let note = format!("Could not create route after {attempt}s: throttled");
        events
            .warning(&reference, "FailedToCreateRoute", note)
            .await;
    }

    let all = warnings(&server).await;
    assert_eq!(all.len(), 10, "nine distinct, then one combined: {all:?}");
    let combined: Vec<_> = all
        .iter()
        .filter(|e| {
            e.note
                .as_deref()
                .is_some_and(|n| n.starts_with("(combined from similar events): "))
        })
        .collect();
    assert_eq!(combined.len(), 1, "{all:?}");
    assert_eq!(
        combined[0].note.as_deref(),
        Some("(combined from similar events): Could not create route after 10s: throttled")
    );
    assert_eq!(combined[0].series.as_ref().map(|s| s.count), Some(6));
    assert_eq!(server.stats().count(Verb::Create, "events"), 10);

    // Another reason on the same object is not combined with these.
    events
        .warning(&reference, "SyncLoadBalancerFailed", "bad size-unit")
        .await;
    assert_eq!(warnings(&server).await.len(), 11);
}

#[tokio::test]
async fn a_repeated_warning_is_one_series_and_a_new_message_a_new_event() {
    let server = TestApiServer::start().await.unwrap();
    let service = service(&server, "web").await;
    let reference: ObjectReference = service.object_ref(&());
    let events = Events::new(server.client(), "service-controller", Some("test".into()));

    events
        .warning(&reference, "SyncLoadBalancerFailed", "bad size-unit")
        .await;
    events
        .warning(&reference, "SyncLoadBalancerFailed", "bad size-unit")
        .await;
    events
        .warning(
            &reference,
            "SyncLoadBalancerFailed",
            "bad http-idle-timeout",
        )
        .await;

    let all = warnings(&server).await;
    assert_eq!(all.len(), 2, "{all:?}");
    assert_eq!(all[0].note.as_deref(), Some("bad http-idle-timeout"));
    assert_eq!(all[1].note.as_deref(), Some("bad size-unit"));
    assert_eq!(
        all[1].series.as_ref().map(|s| s.count),
        Some(2),
        "the repeat is counted"
    );
    assert_eq!(all[0].type_.as_deref(), Some("Warning"));
}
