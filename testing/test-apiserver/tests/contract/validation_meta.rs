//! Contract: labels, annotations, Node taints and pod CIDRs, and Lease
//! fields are refused as kube-apiserver refuses them, in its words. Each
//! message was read from kube-apiserver (v1.33, and checked again against
//! v1.35 and v1.37).

use crate::support;

use anyhow::{Context, ensure};
use serde_json::{Value, json};

/// POSTs `object` to `path`, expecting a 422; the message.
async fn refused(client: &kube::Client, path: &str, object: Value) -> anyhow::Result<String> {
    let (code, status) = support::raw(client, http::Method::POST, path, Some(&object)).await?;
    ensure!(code == 422, "POST {path}: {code}: {status}");
    ensure!(status["reason"] == "Invalid", "{status}");
    Ok(status["message"].as_str().context("a message")?.to_owned())
}

contract_test!(
    labels_and_annotations_need_qualified_keys_and_label_values,
    |t| {
        let client = t.client();
        let name = ccm_test_support::unique("meta");
        let path = "/api/v1/namespaces/default/configmaps";
        let cm = |meta: Value| {
            let mut metadata = json!({ "name": name });
            if let (Some(m), Some(extra)) = (metadata.as_object_mut(), meta.as_object()) {
                m.extend(extra.clone());
            }
            json!({ "apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata })
        };
        let prefix = format!("ConfigMap \"{name}\" is invalid: ");

        let value = refused(
            &client,
            path,
            cm(json!({ "labels": { "app": "bad value!" } })),
        )
        .await?;
        assert_eq!(
            value,
            format!(
                "{prefix}metadata.labels: Invalid value: \"bad value!\": a valid label must be an empty \
             string or consist of alphanumeric characters, '-', '_' or '.', and must start and end \
             with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex \
             used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
            )
        );
        let key = refused(
            &client,
            path,
            cm(json!({ "annotations": { "bad key!": "v" } })),
        )
        .await?;
        assert_eq!(
            key,
            format!(
                "{prefix}metadata.annotations: Invalid value: \"bad key!\": name part must consist of \
             alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric \
             character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is \
             '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
            )
        );
        let empty = refused(
            &client,
            path,
            cm(json!({ "labels": { "example.com/": "v" } })),
        )
        .await?;
        assert!(
        empty.starts_with(&format!(
            "{prefix}[metadata.labels: Invalid value: \"example.com/\": name part must be non-empty, "
        )),
        "{empty}"
    );
        let long = refused(
            &client,
            path,
            cm(json!({ "labels": { "a": "v".repeat(64) } })),
        )
        .await?;
        assert!(long.ends_with(": must be no more than 63 bytes"), "{long}");
        let long_key = refused(
            &client,
            path,
            cm(json!({ "labels": { "a".repeat(64): "v" } })),
        )
        .await?;
        assert_eq!(
            long_key,
            format!(
                "{prefix}metadata.labels: Invalid value: \"{}\": name part must be no more than 63 bytes",
                "a".repeat(64)
            )
        );
        let big = refused(
            &client,
            path,
            cm(json!({ "annotations": { "a": "x".repeat(270_000) } })),
        )
        .await?;
        assert_eq!(
            big,
            format!("{prefix}metadata.annotations: Too long: may not be more than 262144 bytes")
        );
        let (code, _) = support::raw(
            &client,
            http::Method::POST,
            path,
            Some(&cm(
                json!({ "labels": { "example.com/x": "", "a": "v1.2_3-x" },
                         "annotations": { "Example.com/Any": "any thing!" } }),
            )),
        )
        .await?;
        ensure!(code == 201, "valid metadata is accepted: {code}");
        support::raw(
            &client,
            http::Method::DELETE,
            &format!("{path}/{name}"),
            None,
        )
        .await?;
        Ok(())
    }
);

contract_test!(
    node_taints_and_pod_cidrs_and_lease_fields_are_checked,
    |t| {
        let client = t.client();
        let name = ccm_test_support::unique("node-rules");
        let node = |spec: Value| json!({ "apiVersion": "v1", "kind": "Node", "metadata": { "name": name }, "spec": spec });
        let prefix = format!("Node \"{name}\" is invalid: ");

        let effect = refused(
            &client,
            "/api/v1/nodes",
            node(json!({ "taints": [{ "key": "a", "effect": "Foo" }] })),
        )
        .await?;
        assert_eq!(
            effect,
            format!(
                "{prefix}metadata.taints[0].effect: Unsupported value: \"Foo\": supported values: \
             \"NoSchedule\", \"PreferNoSchedule\", \"NoExecute\""
            )
        );
        let twin = refused(
        &client,
        "/api/v1/nodes",
        node(json!({ "taints": [{ "key": "a", "effect": "NoSchedule" }, { "key": "a", "effect": "NoSchedule" }] })),
    )
    .await?;
        assert_eq!(
            twin,
            format!(
                "{prefix}metadata.taints[1]: Duplicate value: {{\"Key\":\"a\",\"Value\":\"\",\
             \"Effect\":\"NoSchedule\",\"TimeAdded\":null}}: taints must be unique by key and effect pair"
            )
        );
        let cidr = refused(
            &client,
            "/api/v1/nodes",
            node(json!({ "podCIDR": "x", "podCIDRs": ["x"] })),
        )
        .await?;
        assert_eq!(
            cidr,
            format!(
                "{prefix}spec.podCIDRs[0]: Invalid value: \"x\": must be a valid CIDR value, (e.g. \
             10.9.8.0/24 or 2001:db8::/64)"
            )
        );
        let two = refused(
            &client,
            "/api/v1/nodes",
            node(json!({ "podCIDR": "10.0.0.0/24", "podCIDRs": ["10.0.0.0/24", "10.0.1.0/24"] })),
        )
        .await?;
        assert_eq!(
            two,
            format!(
                "{prefix}spec.podCIDRs: Invalid value: [\"10.0.0.0/24\",\"10.0.1.0/24\"]: \
             may specify no more than one CIDR for each IP family"
            )
        );

        let leases = "/apis/coordination.k8s.io/v1/namespaces/default/leases";
        let lease = |spec: Value| json!({ "apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": { "name": name }, "spec": spec });
        let duration =
            refused(&client, leases, lease(json!({ "leaseDurationSeconds": 0 }))).await?;
        assert_eq!(
            duration,
            format!(
                "Lease.coordination.k8s.io \"{name}\" is invalid: spec.leaseDurationSeconds: Invalid value: 0: must be greater than 0"
            )
        );
        let transitions =
            refused(&client, leases, lease(json!({ "leaseTransitions": -1 }))).await?;
        assert_eq!(
            transitions,
            format!(
                "Lease.coordination.k8s.io \"{name}\" is invalid: spec.leaseTransitions: Invalid value: -1: must be greater \
             than or equal to 0"
            )
        );
        Ok(())
    }
);
