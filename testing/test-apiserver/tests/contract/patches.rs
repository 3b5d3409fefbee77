//! Contract: merge, JSON and strategic merge patches, with the list merge
//! keys the Kubernetes API types declare for what a CCM touches.

use crate::support;

use anyhow::{Context, bail};
use k8s_openapi::api::core::v1::{ConfigMap, Node, Service};
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

async fn create_node(nodes: &Api<Node>, name: &str) -> anyhow::Result<Node> {
    let node: Node = serde_json::from_value(json!({
        "metadata": {"name": name, "finalizers": ["example.com/a"]},
        "spec": {"taints": [
            {"key": "node.cloudprovider.kubernetes.io/uninitialized", "value": "true", "effect": "NoSchedule"},
            {"key": "example.com/other", "effect": "NoExecute"}
        ]},
        "status": {
            "conditions": [
                {"type": "Ready", "status": "True", "reason": "KubeletReady"},
                {"type": "MemoryPressure", "status": "False", "reason": "KubeletHasSufficientMemory"}
            ],
            "addresses": [{"type": "Hostname", "address": name}]
        }
    }))?;
    Ok(nodes.create(&PostParams::default(), &node).await?)
}

async fn remove_node(nodes: &Api<Node>, name: &str) -> anyhow::Result<()> {
    let clear = json!({"metadata": {"finalizers": null}});
    nodes
        .patch(name, &PatchParams::default(), &Patch::Merge(clear))
        .await?;
    nodes.delete(name, &DeleteParams::default()).await?;
    Ok(())
}

fn conditions(node: &Node) -> Vec<(String, String)> {
    node.status
        .iter()
        .flat_map(|s| s.conditions.iter().flatten())
        .map(|c| (c.type_.clone(), c.status.clone()))
        .collect()
}

fn addresses(node: &Node) -> Vec<(String, String)> {
    node.status
        .iter()
        .flat_map(|s| s.addresses.iter().flatten())
        .map(|a| (a.type_.clone(), a.address.clone()))
        .collect()
}

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

contract_test!(merge_patch_merges_maps_and_null_deletes, |t| {
    let cms: Api<ConfigMap> = Api::namespaced(t.client(), "default");
    let name = ccm_test_support::unique("merge");
    let cm: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": name}, "data": {"a": "1", "b": "2"}}))?;
    cms.create(&PostParams::default(), &cm).await?;
    let patched = cms
        .patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"a": null, "c": "3"}})),
        )
        .await?;
    let data = patched.data.context("data")?;
    assert_eq!(
        data.into_iter().collect::<Vec<_>>(),
        pairs(&[("b", "2"), ("c", "3")])
    );
    cms.delete(&name, &DeleteParams::default()).await?;
    Ok(())
});

contract_test!(
    json_patch_applies_in_order_and_a_failed_test_changes_nothing,
    |t| {
        let cms: Api<ConfigMap> = Api::namespaced(t.client(), "default");
        let name = ccm_test_support::unique("jsonpatch");
        let cm: ConfigMap =
            serde_json::from_value(json!({"metadata": {"name": name}, "data": {"a": "1"}}))?;
        cms.create(&PostParams::default(), &cm).await?;
        let ops: json_patch::Patch = serde_json::from_value(json!([
            {"op": "test", "path": "/data/a", "value": "1"},
            {"op": "replace", "path": "/data/a", "value": "2"},
            {"op": "add", "path": "/data/b", "value": "3"}
        ]))?;
        let patched = cms
            .patch(&name, &PatchParams::default(), &Patch::Json::<()>(ops))
            .await?;
        assert_eq!(
            patched
                .data
                .context("data")?
                .into_iter()
                .collect::<Vec<_>>(),
            pairs(&[("a", "2"), ("b", "3")])
        );
        let failing: json_patch::Patch = serde_json::from_value(json!([
            {"op": "remove", "path": "/data/b"},
            {"op": "test", "path": "/data/a", "value": "1"}
        ]))?;
        match cms
            .patch(&name, &PatchParams::default(), &Patch::Json::<()>(failing))
            .await
        {
            Err(kube::Error::Api(status)) => {
                assert_eq!(status.code, 422, "{}", status.message);
                // No more is said: clients cannot tell which operation failed.
                assert_eq!(
                    (status.reason.as_str(), status.message.as_str()),
                    (
                        "Invalid",
                        "the server rejected our request due to an error in our request"
                    )
                );
                assert!(
                    status.details.is_none_or(|d| d.causes.is_empty()),
                    "no causes"
                );
            }
            other => bail!("a failed test must be refused, got {other:?}"),
        }
        assert!(
            cms.get(&name)
                .await?
                .data
                .context("data")?
                .contains_key("b")
        );
        cms.delete(&name, &DeleteParams::default()).await?;
        Ok(())
    }
);

contract_test!(
    strategic_patch_merges_node_conditions_and_addresses_by_type,
    |t| {
        let nodes: Api<Node> = Api::all(t.client());
        let name = ccm_test_support::unique("smp-node");
        create_node(&nodes, &name).await?;
        let patch = json!({"status": {
            "conditions": [{"type": "Ready", "status": "False", "reason": "KubeletNotReady"}],
            "addresses": [{"type": "InternalIP", "address": "10.0.0.7"}]
        }});
        let patched = nodes
            .patch_status(&name, &PatchParams::default(), &Patch::Strategic(patch))
            .await?;
        assert_eq!(
            conditions(&patched),
            pairs(&[("Ready", "False"), ("MemoryPressure", "False")])
        );
        assert_eq!(
            addresses(&patched),
            pairs(&[("InternalIP", "10.0.0.7"), ("Hostname", name.as_str())]),
            "an item new to the server comes first, in the patch's order"
        );
        let delete = json!({"status": {"addresses": [{"type": "Hostname", "$patch": "delete"}]}});
        let patched = nodes
            .patch_status(&name, &PatchParams::default(), &Patch::Strategic(delete))
            .await?;
        assert_eq!(addresses(&patched), pairs(&[("InternalIP", "10.0.0.7")]));
        remove_node(&nodes, &name).await
    }
);

contract_test!(
    strategic_patch_unions_finalizers_and_replaces_taints_whole,
    |t| {
        let nodes: Api<Node> = Api::all(t.client());
        let name = ccm_test_support::unique("smp-taints");
        create_node(&nodes, &name).await?;
        let patch = json!({
            "metadata": {"finalizers": ["example.com/b"]},
            "spec": {"taints": [{"key": "example.com/other", "effect": "NoExecute"}]}
        });
        let patched = nodes
            .patch(&name, &PatchParams::default(), &Patch::Strategic(patch))
            .await?;
        assert_eq!(
            patched.metadata.finalizers,
            Some(vec!["example.com/b".into(), "example.com/a".into()]),
            "the patch's items first, then the server's"
        );
        let taints: Vec<String> = patched
            .spec
            .and_then(|s| s.taints)
            .unwrap_or_default()
            .into_iter()
            .map(|t| t.key)
            .collect();
        assert_eq!(
            taints,
            ["example.com/other"],
            "spec.taints has no merge key in k8s.io/api"
        );
        let drop_one =
            json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["example.com/a"]}});
        let patched = nodes
            .patch(&name, &PatchParams::default(), &Patch::Strategic(drop_one))
            .await?;
        assert_eq!(
            patched.metadata.finalizers,
            Some(vec!["example.com/b".into()])
        );
        remove_node(&nodes, &name).await
    }
);

contract_test!(strategic_patch_replaces_service_ingress_whole, |t| {
    let services: Api<Service> = Api::namespaced(t.client(), "default");
    let name = ccm_test_support::unique("smp-svc");
    let svc: Service = serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"type": "LoadBalancer", "ports": [{"name": "http", "port": 80}]}
    }))?;
    services.create(&PostParams::default(), &svc).await?;
    let two = json!({"status": {"loadBalancer": {"ingress": [{"ip": "192.0.2.1"}, {"ip": "192.0.2.2"}]}}});
    services
        .patch_status(&name, &PatchParams::default(), &Patch::Strategic(two))
        .await?;
    let one = json!({"status": {"loadBalancer": {"ingress": [{"hostname": "lb.example.com"}]}}});
    let patched = services
        .patch_status(&name, &PatchParams::default(), &Patch::Strategic(one))
        .await?;
    let ingress = serde_json::to_value(
        patched
            .status
            .and_then(|s| s.load_balancer)
            .and_then(|l| l.ingress),
    )?;
    assert_eq!(ingress, json!([{"hostname": "lb.example.com"}]));
    let ports = json!({"spec": {"ports": [{"name": "https", "port": 443}]}});
    let patched = services
        .patch(&name, &PatchParams::default(), &Patch::Strategic(ports))
        .await?;
    let names: Vec<Option<String>> = patched
        .spec
        .and_then(|s| s.ports)
        .unwrap_or_default()
        .into_iter()
        .map(|p| p.name)
        .collect();
    assert_eq!(
        names,
        [Some("https".to_owned()), Some("http".to_owned())],
        "spec.ports merge by port; the patch's items come first"
    );
    services.delete(&name, &DeleteParams::default()).await?;
    Ok(())
});

contract_test!(patch_content_types_are_distinguished, |t| {
    let cms: Api<ConfigMap> = Api::namespaced(t.client(), "default");
    let name = ccm_test_support::unique("ctype");
    let cm: ConfigMap = serde_json::from_value(
        json!({"metadata": {"name": name, "finalizers": ["example.com/x"]}}),
    )?;
    cms.create(&PostParams::default(), &cm).await?;
    let body = json!({"metadata": {"finalizers": ["example.com/y"]}});
    let merged = cms
        .patch(&name, &PatchParams::default(), &Patch::Merge(body.clone()))
        .await?;
    assert_eq!(
        merged.metadata.finalizers,
        Some(vec!["example.com/y".into()]),
        "merge patch replaces lists"
    );
    let strategic = cms
        .patch(
            &name,
            &PatchParams::default(),
            &Patch::Strategic(json!({"metadata": {"finalizers": ["example.com/z"]}})),
        )
        .await?;
    assert_eq!(
        strategic.metadata.finalizers,
        Some(vec!["example.com/z".into(), "example.com/y".into()]),
        "strategic merge patch unions finalizers, the patch's first"
    );
    cms.patch(
        &name,
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": Value::Null}})),
    )
    .await?;
    cms.delete(&name, &DeleteParams::default()).await?;
    Ok(())
});
