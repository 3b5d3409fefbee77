//! Contract: the status subresource.

use crate::support;

use anyhow::Context;
use k8s_openapi::api::core::v1::{Node, Service};
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;

fn node(name: &str) -> anyhow::Result<Node> {
    Ok(serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"unschedulable": false},
        "status": {"conditions": [{"type": "Ready", "status": "False", "reason": "KubeletNotReady"}]}
    }))?)
}

fn ready(node: &Node) -> Option<String> {
    node.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready")
        .map(|c| c.status.clone())
}

contract_test!(status_writes_never_change_spec, |t| {
    let nodes: Api<Node> = Api::all(t.client());
    let name = ccm_test_support::unique("status-node");
    let created = nodes.create(&PostParams::default(), &node(&name)?).await?;
    assert_eq!(
        ready(&created).as_deref(),
        Some("False"),
        "nodes keep status on create"
    );
    let patch = json!({
        "spec": {"unschedulable": true},
        "status": {"conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]}
    });
    let patched = nodes
        .patch_status(&name, &PatchParams::default(), &Patch::Strategic(patch))
        .await?;
    assert_eq!(ready(&patched).as_deref(), Some("True"));
    // kube-apiserver omits a false `unschedulable` (omitempty); either way
    // the spec in the patch was not applied.
    assert_ne!(patched.spec.and_then(|s| s.unschedulable), Some(true));
    nodes.delete(&name, &DeleteParams::default()).await?;
    Ok(())
});

contract_test!(main_resource_writes_keep_status, |t| {
    let nodes: Api<Node> = Api::all(t.client());
    let name = ccm_test_support::unique("main-node");
    nodes.create(&PostParams::default(), &node(&name)?).await?;
    let patch = json!({
        "spec": {"unschedulable": true},
        "status": {"conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]}
    });
    let patched = nodes
        .patch(&name, &PatchParams::default(), &Patch::Merge(patch))
        .await?;
    assert_eq!(ready(&patched).as_deref(), Some("False"));
    assert_eq!(patched.spec.and_then(|s| s.unschedulable), Some(true));
    nodes.delete(&name, &DeleteParams::default()).await?;
    Ok(())
});

contract_test!(
    service_status_is_cleared_on_create_and_set_through_status,
    |t| {
        let services: Api<Service> = Api::namespaced(t.client(), "default");
        let name = ccm_test_support::unique("status-svc");
        let svc: Service = serde_json::from_value(json!({
            "metadata": {"name": name},
            "spec": {"type": "LoadBalancer", "ports": [{"port": 80}]},
            "status": {"loadBalancer": {"ingress": [{"ip": "192.0.2.1"}]}}
        }))?;
        let created = services.create(&PostParams::default(), &svc).await?;
        let ingress = |s: &Service| {
            s.status
                .as_ref()
                .and_then(|st| st.load_balancer.as_ref())
                .and_then(|lb| lb.ingress.clone())
        };
        assert_eq!(ingress(&created), None);
        let port = created
            .spec
            .as_ref()
            .and_then(|s| s.ports.as_ref())
            .and_then(|p| p.first().cloned())
            .context("port")?;
        assert!(
            port.node_port.is_some_and(|p| (30000..=32767).contains(&p)),
            "{port:?}"
        );
        let status = json!({"status": {"loadBalancer": {"ingress": [{"ip": "192.0.2.7"}]}}});
        let patched = services
            .patch_status(&name, &PatchParams::default(), &Patch::Merge(status))
            .await?;
        assert_eq!(
            ingress(&patched).and_then(|i| i[0].ip.clone()).as_deref(),
            Some("192.0.2.7")
        );
        let main = json!({"status": {"loadBalancer": {"ingress": [{"ip": "192.0.2.99"}]}}});
        let unchanged = services
            .patch(&name, &PatchParams::default(), &Patch::Merge(main))
            .await?;
        assert_eq!(
            ingress(&unchanged).and_then(|i| i[0].ip.clone()).as_deref(),
            Some("192.0.2.7")
        );
        services.delete(&name, &DeleteParams::default()).await?;
        Ok(())
    }
);
