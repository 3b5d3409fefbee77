//! Contract: what kube-apiserver refuses, the test API server refuses too,
//! in the same words, so a controller tested here cannot pass on input a
//! cluster would reject. Each case was found by running this suite against
//! a real kube-apiserver.

mod support;

use anyhow::bail;
use k8s_openapi::api::core::v1::{Event as CoreEvent, Service};
use k8s_openapi::api::events::v1::Event;
use kube::Api;
use kube::api::{DeleteParams, PostParams};
use serde_json::{Value, json};

/// The API error `result` must be.
fn refusal<T: std::fmt::Debug>(result: kube::Result<T>) -> anyhow::Result<Box<kube::core::Status>> {
    match result {
        Err(kube::Error::Api(status)) => Ok(status),
        other => bail!("expected a refusal, got {other:?}"),
    }
}

fn service(name: &str, port: &Value) -> anyhow::Result<Service> {
    Ok(serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"type": "ClusterIP", "ports": [port]}
    }))?)
}

contract_test!(
    service_ports_out_of_range_or_unknown_protocols_are_invalid,
    |t| {
        let services: Api<Service> = Api::namespaced(t.client(), "default");
        let name = ccm_test_support::unique("ports");

        let too_high = service(&name, &json!({"port": 70000}))?;
        let refused = refusal(services.create(&PostParams::default(), &too_high).await)?;
        assert_eq!((refused.code, refused.reason.as_str()), (422, "Invalid"));
        assert!(
            refused.message.contains(
                "spec.ports[0].port: Invalid value: 70000: must be between 1 and 65535, inclusive"
            ),
            "{}",
            refused.message
        );

        let target = service(&name, &json!({"port": 80, "targetPort": 70000}))?;
        let refused = refusal(services.create(&PostParams::default(), &target).await)?;
        assert_eq!(
            refused.message,
            format!(
                "Service \"{name}\" is invalid: spec.ports[0].targetPort: Invalid value: 70000: \
             must be between 1 and 65535, inclusive"
            )
        );

        let protocol = service(&name, &json!({"port": 80, "protocol": "SCTPX"}))?;
        let refused = refusal(services.create(&PostParams::default(), &protocol).await)?;
        assert_eq!(
            refused.message,
            format!(
                "Service \"{name}\" is invalid: spec.ports[0].protocol: Unsupported value: \
             \"SCTPX\": supported values: \"SCTP\", \"TCP\", \"UDP\""
            )
        );
        let cause = refused
            .details
            .as_ref()
            .and_then(|d| d.causes.first())
            .map(|c| c.reason.clone());
        assert_eq!(cause.as_deref(), Some("FieldValueNotSupported"));

        let fine = service(&name, &json!({"port": 80, "protocol": "SCTP"}))?;
        services.create(&PostParams::default(), &fine).await?;
        services.delete(&name, &DeleteParams::default()).await?;
        Ok(())
    }
);

contract_test!(
    an_events_v1_note_over_1024_bytes_is_invalid_a_core_message_is_not,
    |t| {
        let long = "x".repeat(3000);
        let name = ccm_test_support::unique("note");
        let v1: Api<Event> = Api::namespaced(t.client(), "default");
        let event: Event = serde_json::from_value(json!({
            "metadata": {"name": name},
            "eventTime": "2026-11-25T00:00:00.000000Z",
            "reportingController": "example.com/contract",
            "reportingInstance": "contract-1",
            "action": "Test",
            "reason": "Tested",
            "type": "Normal",
            "regarding": {"kind": "Node", "name": "n1"},
            "note": long
        }))?;
        let refused = refusal(v1.create(&PostParams::default(), &event).await)?;
        assert_eq!((refused.code, refused.reason.as_str()), (422, "Invalid"));
        assert_eq!(
            refused.message,
            format!(
                "Event \"{name}\" is invalid: message: Invalid value: \"\": can have at most 1024 characters"
            )
        );
        let mut at_limit = event.clone();
        at_limit.note = Some("x".repeat(1024));
        v1.create(&PostParams::default(), &at_limit).await?;
        v1.delete(&name, &DeleteParams::default()).await?;

        let core: Api<CoreEvent> = Api::namespaced(t.client(), "default");
        let core_event: CoreEvent = serde_json::from_value(json!({
            "metadata": {"name": format!("{name}-core")},
            "involvedObject": {"kind": "Node", "name": "n1", "namespace": "default"},
            "reason": "Tested",
            "type": "Normal",
            "message": "x".repeat(3000)
        }))?;
        let created = core.create(&PostParams::default(), &core_event).await?;
        assert_eq!(created.message.map(|m| m.len()), Some(3000));
        core.delete(&format!("{name}-core"), &DeleteParams::default())
            .await?;
        Ok(())
    }
);
