//! Contract: a LoadBalancer Service's `status.conditions` as the service
//! controller writes them (strategic merge patches on `services/status`,
//! merging by `type`), on the in-memory server and (with `KUBECONFIG`) a real
//! cluster. kube-apiserver 1.35 to 1.37 do not validate these conditions
//! (`ValidateServiceStatusUpdate` checks only `status.loadBalancer`): they
//! are stored as sent, with Go's zero values for fields left out.

use crate::support;

use anyhow::{Context, ensure};
use serde_json::{Value, json};
use support::table::{check, create, table};

const STRATEGIC: &str = "application/strategic-merge-patch+json";
const MERGE: &str = "application/merge-patch+json";
const WHEN: &str = "2026-01-01T00:00:00Z";

/// Creates a LoadBalancer Service named `prefix-<unique>` in `default` and
/// answers its path.
async fn load_balancer(client: &kube::Client, prefix: &str) -> anyhow::Result<(String, Value)> {
    let name = ccm_test_support::unique(prefix);
    let created = create(
        client,
        "/api/v1/namespaces/default/services",
        json!({ "apiVersion": "v1", "kind": "Service", "metadata": { "name": name },
                "spec": { "type": "LoadBalancer", "selector": { "app": "web" },
                          "ports": [{ "port": 80, "protocol": "TCP" }] } }),
    )
    .await?;
    Ok((
        format!("/api/v1/namespaces/default/services/{name}"),
        created,
    ))
}

/// PATCHes `path/status` with `body` as `content_type`: the status code and
/// the answer.
async fn patch_status(
    client: &kube::Client,
    path: &str,
    content_type: &str,
    body: &Value,
) -> anyhow::Result<(u16, Value)> {
    let request = http::Request::patch(format!("{path}/status"))
        .header(http::header::CONTENT_TYPE, content_type)
        .body(kube::client::Body::from(serde_json::to_vec(body)?))?;
    let response = client.send(request).await?;
    let code = response.status().as_u16();
    let bytes = http_body_util::BodyExt::collect(response.into_body())
        .await?
        .to_bytes();
    Ok((code, serde_json::from_slice(&bytes).unwrap_or(Value::Null)))
}

/// As [`patch_status`], failing on anything but 200; answers the conditions.
async fn conditions_after(
    client: &kube::Client,
    path: &str,
    content_type: &str,
    body: Value,
) -> anyhow::Result<Value> {
    let (code, answer) = patch_status(client, path, content_type, &body).await?;
    ensure!(code == 200, "PATCH {path}/status {body}: {code}: {answer}");
    Ok(answer["status"]["conditions"].clone())
}

/// A condition as the controller writes it (every field set).
fn condition(type_: &str, status: &str, reason: &str, message: &str) -> Value {
    json!({ "type": type_, "status": status, "reason": reason, "message": message,
            "lastTransitionTime": WHEN })
}

fn types(conditions: &Value) -> Vec<&str> {
    conditions
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["type"].as_str())
        .collect()
}

async fn delete(client: &kube::Client, path: &str) -> anyhow::Result<()> {
    support::raw(client, http::Method::DELETE, path, None).await?;
    Ok(())
}

contract_test!(
    strategic_patches_merge_conditions_by_type_and_delete_only_their_own,
    |t| {
        let client = t.client();
        let (path, _) = load_balancer(&client, "cond-merge").await?;
        let pending = condition("LoadBalancerProvisioned", "False", "Pending", "creating");
        // The controller's first write: a delete of a type the Service
        // does not have yet is no error.
        let first = json!({ "status": { "conditions": [
            pending,
            { "type": "LoadBalancerTargetsHealthy", "$patch": "delete" },
        ] } });
        let after = conditions_after(&client, &path, STRATEGIC, first).await?;
        assert_eq!(after, json!([pending]));

        let theirs = condition("example.com/Reachable", "True", "Probed", "");
        let other_writer = json!({ "status": { "conditions": [theirs] } });
        let after = conditions_after(&client, &path, STRATEGIC, other_writer).await?;
        assert_eq!(
            types(&after),
            ["example.com/Reachable", "LoadBalancerProvisioned"]
        );

        let provisioned = json!({ "type": "LoadBalancerProvisioned", "status": "True",
            "reason": "Provisioned", "message": "load balancer ready", "lastTransitionTime": WHEN,
            "observedGeneration": 2 });
        let healthy = condition(
            "LoadBalancerTargetsHealthy",
            "True",
            "TargetsHealthy",
            "2 of 2 targets healthy",
        );
        let ours = json!({ "status": { "conditions": [provisioned, healthy] } });
        let after = conditions_after(&client, &path, STRATEGIC, ours).await?;
        // Merged in place: the server's order, new items after the one
        // they follow in the patch.
        assert_eq!(after, json!([theirs, provisioned, healthy]));

        let remove = json!({ "status": { "conditions": [
            { "type": "LoadBalancerTargetsHealthy", "$patch": "delete" },
        ] } });
        let after = conditions_after(&client, &path, STRATEGIC, remove).await?;
        assert_eq!(after, json!([theirs, provisioned]));
        delete(&client, &path).await
    }
);

contract_test!(invalid_conditions_are_stored_as_sent_not_refused, |t| {
    let client = t.client();
    let (path, _) = load_balancer(&client, "cond-invalid").await?;
    let long = "x".repeat(32 * 1024 + 1);
    let sent = json!({ "status": { "conditions": [
        { "type": "LoadBalancerProvisioned", "status": "Bogus", "reason": "not a reason!",
          "message": "", "lastTransitionTime": WHEN },
        { "type": "LoadBalancerProvisioned", "status": "True", "reason": "Provisioned",
          "message": long, "lastTransitionTime": WHEN, "observedGeneration": -1 },
        { "type": "bad type!", "status": "" },
        { "reason": null, "observedGeneration": 0 },
    ] } });
    let stored = conditions_after(&client, &path, MERGE, sent).await?;
    let zero = |type_: &str, status: &str| {
        json!({ "type": type_, "status": status, "reason": "", "message": "",
                "lastTransitionTime": null })
    };
    assert_eq!(
        stored,
        json!([
            { "type": "LoadBalancerProvisioned", "status": "Bogus", "reason": "not a reason!",
              "message": "", "lastTransitionTime": WHEN },
            { "type": "LoadBalancerProvisioned", "status": "True", "reason": "Provisioned",
              "message": long, "lastTransitionTime": WHEN, "observedGeneration": -1 },
            zero("bad type!", ""),
            zero("", ""),
        ]),
        "kube-apiserver stores Service conditions unvalidated, zero values filled in"
    );

    // A PUT of what was read back is as welcome.
    let (code, mut service) = support::raw(&client, http::Method::GET, &path, None).await?;
    ensure!(code == 200, "GET {path}: {code}");
    service["status"]["conditions"][2]["status"] = json!("Maybe");
    let (code, answer) = support::raw(
        &client,
        http::Method::PUT,
        &format!("{path}/status"),
        Some(&service),
    )
    .await?;
    ensure!(code == 200, "PUT {path}/status: {code}: {answer}");
    assert_eq!(answer["status"]["conditions"][2]["status"], "Maybe");

    // An empty list is no list.
    let cleared = json!({ "status": { "conditions": [] } });
    let (code, answer) = patch_status(&client, &path, MERGE, &cleared).await?;
    ensure!(code == 200, "clearing: {code}: {answer}");
    assert_eq!(answer["status"].get("conditions"), None, "{answer}");
    delete(&client, &path).await
});

contract_test!(conditions_of_the_wrong_shape_are_bad_requests, |t| {
    let client = t.client();
    let (path, _) = load_balancer(&client, "cond-shape").await?;
    let (code, mut service) = support::raw(&client, http::Method::GET, &path, None).await?;
    ensure!(code == 200, "GET {path}: {code}");
    for wrong in [
        json!([{ "type": "LoadBalancerProvisioned", "status": true }]),
        json!([{ "type": "LoadBalancerProvisioned", "lastTransitionTime": "yesterday" }]),
    ] {
        service["status"]["conditions"] = wrong.clone();
        let (code, answer) = support::raw(
            &client,
            http::Method::PUT,
            &format!("{path}/status"),
            Some(&service),
        )
        .await?;
        assert_eq!(code, 400, "{wrong}: {answer}");
        assert_eq!(answer["reason"], "BadRequest", "{answer}");
        let message = answer["message"].as_str().context("a message")?;
        assert!(
            message.starts_with("Service in version \"v1\" cannot be handled as a Service: "),
            "{message}"
        );
    }
    delete(&client, &path).await
});

contract_test!(a_first_strategic_patch_keeps_repeated_types_as_sent, |t| {
    let client = t.client();
    let (path, _) = load_balancer(&client, "cond-first").await?;
    // With no conditions yet there is nothing to merge with: the list is
    // taken as sent, repeats and all, less its directives.
    let twice = [
        condition("LoadBalancerProvisioned", "False", "Pending", ""),
        condition("LoadBalancerProvisioned", "True", "Provisioned", ""),
    ];
    let patch = json!({ "status": { "conditions": [
        twice[0], twice[1], { "type": "Gone", "$patch": "delete" },
    ] } });
    let stored = conditions_after(&client, &path, STRATEGIC, patch).await?;
    assert_eq!(stored, json!(twice));
    // Once there are, the patch's items merge by type.
    let again = json!({ "status": { "conditions": [
        condition("LoadBalancerTargetsHealthy", "True", "A", ""),
        condition("LoadBalancerTargetsHealthy", "False", "B", ""),
    ] } });
    let merged = conditions_after(&client, &path, STRATEGIC, again).await?;
    assert_eq!(
        types(&merged),
        [
            "LoadBalancerTargetsHealthy",
            "LoadBalancerProvisioned",
            "LoadBalancerProvisioned"
        ]
    );
    assert_eq!(merged[0]["reason"], "B", "the later item wins: {merged}");
    delete(&client, &path).await
});

contract_test!(conditions_leave_the_service_table_unchanged, |t| {
    let client = t.client();
    let (path, created) = load_balancer(&client, "cond-table").await?;
    let columns = [
        ("Name", "string", 0),
        ("Type", "string", 0),
        ("Cluster-IP", "string", 0),
        ("External-IP", "string", 0),
        ("Port(s)", "string", 0),
        ("Age", "string", 0),
        ("Selector", "string", 1),
    ];
    let node_port = created["spec"]["ports"][0]["nodePort"]
        .as_i64()
        .context("a node port")?;
    let cells = |external: &str| {
        [
            created["metadata"]["name"].clone(),
            json!("LoadBalancer"),
            created["spec"]["clusterIP"].clone(),
            json!(external),
            json!(format!("80:{node_port}/TCP")),
            json!(""),
            json!("app=web"),
        ]
    };
    let before = table(&client, &path).await?;
    let mut result = check(&before, &columns, &cells("<pending>"));
    if result.is_ok() {
        let status = json!({ "status": {
            "loadBalancer": { "ingress": [{ "ip": "203.0.113.9" }] },
            "conditions": [
                condition("LoadBalancerProvisioned", "True", "Provisioned", "ready"),
                condition("LoadBalancerTargetsHealthy", "False", "TargetsUnhealthy", "0 of 2"),
            ],
        } });
        conditions_after(&client, &path, STRATEGIC, status).await?;
        let after = table(&client, &path).await?;
        result = check(&after, &columns, &cells("203.0.113.9"));
    }
    delete(&client, &path).await?;
    result
});
