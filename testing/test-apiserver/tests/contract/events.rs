//! Contract: kube-runtime's event `Recorder` (events.k8s.io/v1 create, then
//! a merge patch for a repeat) and the core/v1 view of the same events.

use crate::support;

use anyhow::Context;
use k8s_openapi::api::core::v1::{ConfigMap, Event as CoreEvent, ObjectReference};
use k8s_openapi::api::events::v1::Event;
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::runtime::events::{Event as Publish, EventType, Recorder, Reporter};
use kube::{Api, Resource};
use serde_json::json;

contract_test!(recorder_events_series_and_both_api_groups_agree, |t| {
    let cms: Api<ConfigMap> = Api::namespaced(t.client(), "default");
    let name = ccm_test_support::unique("evented");
    let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": name}}))?;
    let cm = cms.create(&PostParams::default(), &cm).await?;
    let reference: ObjectReference = cm.object_ref(&());
    let reporter = Reporter {
        controller: "test-apiserver-contract".into(),
        instance: None,
    };
    let recorder = Recorder::new(t.client(), reporter);
    let event = Publish {
        type_: EventType::Warning,
        reason: "Tested".into(),
        note: Some("it happened".into()),
        action: "Test".into(),
        secondary: None,
    };
    recorder.publish(&event, &reference).await?;
    recorder.publish(&event, &reference).await?;

    let v1: Api<Event> = Api::namespaced(t.client(), "default");
    let ours =
        |e: &&Event| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name.as_str());
    let listed = v1.list(&ListParams::default()).await?;
    let recorded = listed
        .items
        .iter()
        .find(ours)
        .context("the recorded event")?;
    assert_eq!(
        listed.items.iter().filter(ours).count(),
        1,
        "a repeat patches the same event"
    );
    assert_eq!(recorded.series.as_ref().map(|s| s.count), Some(2));
    assert_eq!(
        recorded.reporting_controller.as_deref(),
        Some("test-apiserver-contract")
    );

    let core: Api<CoreEvent> = Api::namespaced(t.client(), "default");
    let event_name = recorded.metadata.name.clone().context("named")?;
    let seen = core.get(&event_name).await?;
    assert_eq!(seen.message.as_deref(), Some("it happened"));
    assert_eq!(seen.involved_object.name.as_deref(), Some(name.as_str()));
    assert_eq!(seen.type_.as_deref(), Some("Warning"));
    assert_eq!(
        seen.reporting_component.as_deref(),
        Some("test-apiserver-contract")
    );

    v1.delete(&event_name, &DeleteParams::default()).await?;
    cms.delete(&name, &DeleteParams::default()).await?;
    Ok(())
});
