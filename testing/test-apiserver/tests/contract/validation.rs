//! Contract: what kube-apiserver refuses, the test API server refuses too,
//! in the same words, so a controller tested here cannot pass on input a
//! cluster would reject. Each case was found by running this suite against
//! a real kube-apiserver.

use crate::support;

use anyhow::{Context, bail};
use k8s_openapi::api::core::v1::{Event as CoreEvent, Service};
use k8s_openapi::api::events::v1::Event;
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
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

/// Creates a Service of `spec` named `name`; the refusal's message.
async fn refused_service(
    services: &Api<Service>,
    name: &str,
    spec: Value,
) -> anyhow::Result<String> {
    let service: Service =
        serde_json::from_value(json!({ "metadata": {"name": name}, "spec": spec }))?;
    let refused = refusal(services.create(&PostParams::default(), &service).await)?;
    assert_eq!((refused.code, refused.reason.as_str()), (422, "Invalid"));
    Ok(refused.message)
}

contract_test!(
    service_port_names_pairs_types_and_traffic_policy_are_checked,
    |t| {
        let services: Api<Service> = Api::namespaced(t.client(), "default");
        let name = ccm_test_support::unique("svc-rules");
        let prefix = format!("Service \"{name}\" is invalid: ");

        let unnamed = refused_service(
            &services,
            &name,
            json!({ "ports": [{ "name": "http", "port": 80 }, { "port": 81 }] }),
        )
        .await?;
        assert_eq!(
            unnamed,
            format!("{prefix}spec.ports[1].name: Required value")
        );

        let same_name = refused_service(
            &services,
            &name,
            json!({ "ports": [{ "name": "http", "port": 80 }, { "name": "http", "port": 81 }] }),
        )
        .await?;
        assert_eq!(
            same_name,
            format!("{prefix}spec.ports[1].name: Duplicate value: \"http\"")
        );

        let same_pair = refused_service(
        &services,
        &name,
        json!({ "ports": [{ "name": "a", "port": 80 }, { "name": "b", "port": 80, "targetPort": 8080 }] }),
    )
    .await?;
        assert_eq!(
            same_pair,
            format!(
                "{prefix}spec.ports[1]: Duplicate value: {{\"Name\":\"\",\"Protocol\":\"TCP\",\
             \"AppProtocol\":null,\"Port\":80,\"TargetPort\":0,\"NodePort\":0}}"
            )
        );

        let odd_type = refused_service(
            &services,
            &name,
            json!({ "type": "Foo", "ports": [{ "port": 80 }] }),
        )
        .await?;
        assert!(
            odd_type.starts_with(&format!(
                "{prefix}spec.type: Unsupported value: \"Foo\": supported values: \"ClusterIP\", \
             \"ExternalName\", \"LoadBalancer\", \"NodePort\""
            )),
            "{odd_type}"
        );

        let local = refused_service(
        &services,
        &name,
        json!({ "type": "ClusterIP", "externalTrafficPolicy": "Local", "ports": [{ "port": 80 }] }),
    )
    .await?;
        assert_eq!(
            local,
            format!(
                "{prefix}spec.externalTrafficPolicy: Invalid value: \"Local\": may only be set for \
             externally-accessible services"
            )
        );

        let two_protocols = service(&name, &json!({"port": 53}))?;
        let mut both: Service = two_protocols.clone();
        both.spec = Some(serde_json::from_value(json!({
            "ports": [{ "name": "dns", "port": 53, "protocol": "UDP" }, { "name": "dns-tcp", "port": 53, "protocol": "TCP" }]
        }))?);
        services.create(&PostParams::default(), &both).await?;
        services.delete(&name, &DeleteParams::default()).await?;
        Ok(())
    }
);

contract_test!(
    a_load_balancer_class_is_fixed_once_set_and_only_for_load_balancers,
    |t| {
        let services: Api<Service> = Api::namespaced(t.client(), "default");
        let name = ccm_test_support::unique("lb-class");
        let prefix = format!("Service \"{name}\" is invalid: ");

        let on_cluster_ip = refused_service(
        &services,
        &name,
        json!({ "type": "ClusterIP", "loadBalancerClass": "example.com/lb", "ports": [{ "port": 80 }] }),
    )
    .await?;
        assert_eq!(
            on_cluster_ip,
            format!(
                "{prefix}spec.loadBalancerClass: Forbidden: may only be used when `type` is 'LoadBalancer'"
            )
        );

        let lb: Service = serde_json::from_value(json!({
            "metadata": {"name": name},
            "spec": { "type": "LoadBalancer", "loadBalancerClass": "example.com/lb", "ports": [{ "port": 80 }] }
        }))?;
        let created = services.create(&PostParams::default(), &lb).await?;
        let mut changed = created.clone();
        if let Some(spec) = changed.spec.as_mut() {
            spec.load_balancer_class = Some("example.com/other".into());
        }
        let refused = refusal(
            services
                .replace(&name, &PostParams::default(), &changed)
                .await,
        )?;
        assert_eq!(
            refused.message,
            format!(
                "{prefix}spec.loadBalancerClass: Invalid value: \"example.com/other\": may not change once set"
            )
        );
        // No class is shown as JSON's null.
        let mut dropped = created.clone();
        if let Some(spec) = dropped.spec.as_mut() {
            spec.load_balancer_class = None;
        }
        let refused = refusal(
            services
                .replace(&name, &PostParams::default(), &dropped)
                .await,
        )?;
        assert_eq!(
            refused.message,
            format!("{prefix}spec.loadBalancerClass: Invalid value: null: may not change once set")
        );
        services.delete(&name, &DeleteParams::default()).await?;
        Ok(())
    }
);

// A cluster IP or node port that cannot be allocated is refused naming only
// the first allocation that failed (the cluster IP before the node ports);
// an allocated cluster IP cannot change.
contract_test!(allocation_failures_name_the_first_refused_allocation, |t| {
    let services: Api<Service> = Api::namespaced(t.client(), "default");
    let name = ccm_test_support::unique("alloc");
    let holder: Service = serde_json::from_value(json!({"metadata": {"name": name},
            "spec": {"type": "NodePort", "ports": [{"port": 80}]}}))?;
    let holder = services.create(&PostParams::default(), &holder).await?;
    let spec = holder.spec.context("spec")?;
    let ip = spec.cluster_ip.context("clusterIP")?;
    let node_port = spec
        .ports
        .and_then(|p| p.first()?.node_port)
        .context("nodePort")?;
    let other = format!("{name}-b");
    let prefix = format!("Service \"{other}\" is invalid: ");

    let same_ip = refused_service(
        &services,
        &other,
        json!({"type": "NodePort", "clusterIP": ip, "ports": [{"port": 80, "nodePort": 20}]}),
    )
    .await?;
    assert_eq!(
        same_ip,
        format!(
            "{prefix}spec.clusterIPs: Invalid value: [\"{ip}\"]: failed to allocate IP {ip}: \
                 provided IP is already allocated"
        )
    );

    let same_port = refused_service(
        &services,
        &other,
        json!({"type": "NodePort", "ports": [
                {"name": "a", "port": 80, "nodePort": node_port},
                {"name": "b", "port": 81, "nodePort": 20}]}),
    )
    .await?;
    assert_eq!(
        same_port,
        format!(
            "{prefix}spec.ports[0].nodePort: Invalid value: {node_port}: provided port is \
                 already allocated"
        )
    );

    let out_of_range = refused_service(
        &services,
        &other,
        json!({"type": "NodePort", "ports": [
                {"name": "a", "port": 80, "nodePort": 20},
                {"name": "b", "port": 81, "nodePort": 21}]}),
    )
    .await?;
    assert_eq!(
        out_of_range,
        format!(
            "{prefix}spec.ports[0].nodePort: Invalid value: 20: provided port is not in the \
                 valid range. The range of valid ports is 30000-32767"
        )
    );

    let bad_ip = refused_service(
        &services,
        &other,
        json!({"clusterIP": "10.96.0.300", "ports": [{"port": 80}]}),
    )
    .await?;
    assert_eq!(
        bad_ip,
        format!(
            "{prefix}spec.clusterIPs[0]: Invalid value: \"10.96.0.300\": must be a valid IP \
                 address, (e.g. 10.9.8.7 or 2001:db8::ffff)"
        )
    );

    let moved = if ip == "10.96.0.79" {
        "10.96.0.80"
    } else {
        "10.96.0.79"
    };
    let patch = Patch::Merge(json!({"spec": {"clusterIP": moved}}));
    let Err(kube::Error::Api(status)) =
        services.patch(&name, &PatchParams::default(), &patch).await
    else {
        bail!("changing the cluster IP was not refused");
    };
    assert_eq!(
        status.message,
        format!(
            "Service \"{name}\" is invalid: spec.clusterIPs[0]: Invalid value: [\"{moved}\"]: \
                 may not change once set"
        )
    );
    services.delete(&name, &DeleteParams::default()).await?;
    Ok(())
});
