//! Server-side printing: `kubectl get`'s `Accept: as=Table` answered with
//! kube-apiserver's columns and cells, kind by kind, on the in-memory
//! server and (with `KUBECONFIG`) a real cluster: nodes, Services, the
//! data kinds, and lists and watches. `tables_more.rs` has the others.

use crate::support;

use anyhow::{Context, ensure};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use support::table::{TABLE, check, create, table};

contract_test!(nodes_print_status_roles_version_and_addresses, |t| {
    let client = t.client();
    let name = ccm_test_support::unique("table-node");
    create(
        &client,
        "/api/v1/nodes",
        json!({ "apiVersion": "v1", "kind": "Node", "metadata": { "name": name,
            "labels": { "node-role.kubernetes.io/worker": "" } } }),
    )
    .await?;
    let status = json!({ "status": {
        "conditions": [{ "type": "Ready", "status": "True", "reason": "KubeletReady", "message": "ok",
                         "lastHeartbeatTime": "2026-01-01T00:00:00Z", "lastTransitionTime": "2026-01-01T00:00:00Z" }],
        "addresses": [{ "type": "InternalIP", "address": "10.0.0.7" }, { "type": "Hostname", "address": name }],
        "nodeInfo": { "kubeletVersion": "v1.33.0", "osImage": "Debian GNU/Linux 12", "kernelVersion": "6.1.0",
                      "containerRuntimeVersion": "containerd://1.7.0", "machineID": "", "systemUUID": "", "bootID": "",
                      "kubeProxyVersion": "", "operatingSystem": "linux", "architecture": "amd64" },
    }});
    let patch = http::Request::patch(format!("/api/v1/nodes/{name}/status"))
        .header(http::header::CONTENT_TYPE, "application/merge-patch+json")
        .body(kube::client::Body::from(serde_json::to_vec(&status)?))?;
    let response = client.send(patch).await?;
    ensure!(
        response.status() == 200,
        "status patch: {}",
        response.status()
    );
    // 1.36 and later show the architecture after the kernel; 1.35 does not.
    let kernel = if t.minor().await? >= 36 {
        "6.1.0 (amd64)"
    } else {
        "6.1.0"
    };
    let t1 = table(&client, &format!("/api/v1/nodes/{name}")).await?;
    let result = check(
        &t1,
        &[
            ("Name", "string", 0),
            ("Status", "string", 0),
            ("Roles", "string", 0),
            ("Age", "string", 0),
            ("Version", "string", 0),
            ("Internal-IP", "string", 1),
            ("External-IP", "string", 1),
            ("OS-Image", "string", 1),
            ("Kernel-Version", "string", 1),
            ("Container-Runtime", "string", 1),
        ],
        &[
            json!(name),
            json!("Ready"),
            json!("worker"),
            json!(""),
            json!("v1.33.0"),
            json!("10.0.0.7"),
            json!("<none>"),
            json!("Debian GNU/Linux 12"),
            json!(kernel),
            json!("containerd://1.7.0"),
        ],
    );
    support::raw(
        &client,
        http::Method::DELETE,
        &format!("/api/v1/nodes/{name}"),
        None,
    )
    .await?;
    result
});

contract_test!(
    a_load_balancer_service_prints_its_ingress_ports_and_selector,
    |t| {
        let client = t.client();
        let name = ccm_test_support::unique("table-svc");
        let created = create(
        &client,
        "/api/v1/namespaces/default/services",
        json!({ "apiVersion": "v1", "kind": "Service", "metadata": { "name": name },
            "spec": { "type": "LoadBalancer", "selector": { "app": "web", "tier": "a" },
                      "ports": [{ "name": "http", "port": 80, "protocol": "TCP" }, { "name": "dns", "port": 53, "protocol": "UDP" }] } }),
    )
    .await?;
        let columns = [
            ("Name", "string", 0),
            ("Type", "string", 0),
            ("Cluster-IP", "string", 0),
            ("External-IP", "string", 0),
            ("Port(s)", "string", 0),
            ("Age", "string", 0),
            ("Selector", "string", 1),
        ];
        let ports = created["spec"]["ports"].as_array().context("ports")?;
        let port = |i: usize, p: i64, proto: &str| {
            format!(
                "{p}:{}/{proto}",
                ports[i]["nodePort"].as_i64().unwrap_or_default()
            )
        };
        let expected = |external: &str| {
            [
                json!(name),
                json!("LoadBalancer"),
                created["spec"]["clusterIP"].clone(),
                json!(external),
                json!(format!("{},{}", port(0, 80, "TCP"), port(1, 53, "UDP"))),
                json!(""),
                json!("app=web,tier=a"),
            ]
        };
        let path = format!("/api/v1/namespaces/default/services/{name}");
        let pending = table(&client, &path).await?;
        let mut result = check(&pending, &columns, &expected("<pending>"));
        if result.is_ok() {
            let status = json!({ "status": { "loadBalancer": { "ingress": [{ "ip": "203.0.113.9" }, { "hostname": "lb.example.com" }] } } });
            let patch = http::Request::patch(format!("{path}/status"))
                .header(http::header::CONTENT_TYPE, "application/merge-patch+json")
                .body(kube::client::Body::from(serde_json::to_vec(&status)?))?;
            let response = client.send(patch).await?;
            ensure!(
                response.status() == 200,
                "status patch: {}",
                response.status()
            );
            let ready = table(&client, &path).await?;
            result = check(&ready, &columns, &expected("203.0.113.9,lb.example.com"));
        }
        support::raw(&client, http::Method::DELETE, &path, None).await?;
        result
    }
);

contract_test!(config_maps_secrets_and_accounts_print_their_counts, |t| {
    let client = t.client();
    let name = ccm_test_support::unique("table-data");
    let ns = "/api/v1/namespaces/default";
    create(
        &client,
        &format!("{ns}/configmaps"),
        json!({ "apiVersion": "v1", "kind": "ConfigMap", "metadata": { "name": name },
                "data": { "a": "1", "b": "2" }, "binaryData": { "c": "AA==" } }),
    )
    .await?;
    create(
        &client,
        &format!("{ns}/secrets"),
        json!({ "apiVersion": "v1", "kind": "Secret", "metadata": { "name": name },
                "type": "Opaque", "data": { "token": "c2VjcmV0" } }),
    )
    .await?;
    create(
        &client,
        &format!("{ns}/serviceaccounts"),
        json!({ "apiVersion": "v1", "kind": "ServiceAccount", "metadata": { "name": name } }),
    )
    .await?;
    let result = async {
        let cm = table(&client, &format!("{ns}/configmaps/{name}")).await?;
        check(
            &cm,
            &[
                ("Name", "string", 0),
                ("Data", "string", 0),
                ("Age", "string", 0),
            ],
            &[json!(name), json!(3), json!("")],
        )?;
        let secret = table(&client, &format!("{ns}/secrets/{name}")).await?;
        check(
            &secret,
            &[
                ("Name", "string", 0),
                ("Type", "string", 0),
                ("Data", "string", 0),
                ("Age", "string", 0),
            ],
            &[json!(name), json!("Opaque"), json!(1), json!("")],
        )?;
        let account = table(&client, &format!("{ns}/serviceaccounts/{name}")).await?;
        check(
            &account,
            &[("Name", "string", 0), ("Age", "string", 0)],
            &[json!(name), json!("")],
        )
    }
    .await;
    for kind in ["configmaps", "secrets", "serviceaccounts"] {
        support::raw(
            &client,
            http::Method::DELETE,
            &format!("{ns}/{kind}/{name}"),
            None,
        )
        .await?;
    }
    result
});

contract_test!(lists_and_watches_print_rows_and_send_columns_once, |t| {
    let client = t.client();
    let label = ccm_test_support::unique("tables");
    let ns = "/api/v1/namespaces/default/configmaps";
    for i in 0..2 {
        create(
            &client,
            ns,
            json!({ "apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": { "name": format!("{label}-{i}"), "labels": { "set": label } } }),
        )
        .await?;
    }
    let result = async {
        let list = table(&client, &format!("{ns}?labelSelector=set%3D{label}")).await?;
        let rows = list["rows"].as_array().context("rows")?;
        ensure!(rows.len() == 2, "{list}");
        ensure!(
            list["metadata"]["resourceVersion"]
                .as_str()
                .is_some_and(|rv| !rv.is_empty()),
            "{list}"
        );
        let none = table(
            &client,
            &format!("{ns}?labelSelector=set%3D{label}&includeObject=None"),
        )
        .await?;
        ensure!(
            none["rows"][0].get("object").is_none_or(Value::is_null),
            "{none}"
        );
        let whole = table(
            &client,
            &format!("{ns}?labelSelector=set%3D{label}&includeObject=Object"),
        )
        .await?;
        ensure!(whole["rows"][0]["object"]["kind"] == "ConfigMap", "{whole}");

        // A watch's events are Tables too; only the first has the columns.
        let request = http::Request::get(format!(
            "{ns}?labelSelector=set%3D{label}&watch=true&timeoutSeconds=5"
        ))
        .header(http::header::ACCEPT, TABLE)
        .body(kube::client::Body::empty())?;
        let response = support::within(20, "the watch", client.send(request)).await??;
        let bytes = support::within(20, "the watch to end", response.into_body().collect())
            .await??
            .to_bytes();
        let events: Vec<Value> = bytes
            .split(|b| *b == b'\n')
            .filter(|l| !l.is_empty())
            .map(serde_json::from_slice)
            .collect::<Result<_, _>>()?;
        ensure!(events.len() == 2, "{events:?}");
        let columns = |e: &Value| {
            e["object"]["columnDefinitions"]
                .as_array()
                .map_or(0, Vec::len)
        };
        ensure!(events[0]["object"]["kind"] == "Table", "{events:?}");
        ensure!(columns(&events[0]) == 3, "{events:?}");
        ensure!(columns(&events[1]) == 0, "{events:?}");
        ensure!(
            events[1]["object"]["rows"].as_array().map_or(0, Vec::len) == 1,
            "{events:?}"
        );
        Ok(())
    }
    .await;
    for i in 0..2 {
        support::raw(
            &client,
            http::Method::DELETE,
            &format!("{ns}/{label}-{i}"),
            None,
        )
        .await?;
    }
    result
});
