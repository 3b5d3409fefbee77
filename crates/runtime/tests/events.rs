//! Events: repeats aggregate, new messages are new events.

use ccm_runtime::Events;
use k8s_openapi::api::core::v1::{ObjectReference, Service};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use kube::api::{Api, ListParams, PostParams};
use test_apiserver::TestApiServer;

async fn warnings(server: &TestApiServer) -> Vec<Event> {
    let events: Api<Event> = Api::namespaced(server.client(), "default");
    let mut items = events.list(&ListParams::default()).await.unwrap().items;
    items.sort_by_key(|e| e.note.clone());
    items
}

#[tokio::test]
async fn a_repeated_warning_is_one_series_and_a_new_message_a_new_event() {
    let server = TestApiServer::start().await.unwrap();
    let services: Api<Service> = Api::namespaced(server.client(), "default");
    let service = Service {
        metadata: ObjectMeta {
            name: Some("web".into()),
            ..ObjectMeta::default()
        },
        ..Service::default()
    };
    let service = services
        .create(&PostParams::default(), &service)
        .await
        .unwrap();
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
