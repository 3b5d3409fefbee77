//! Server-side printing: `kubectl get`'s `Accept: as=Table` answered with
//! kube-apiserver's columns and cells, kind by kind, on the in-memory
//! server and (with `KUBECONFIG`) a real cluster.

mod support;

use anyhow::{Context, ensure};
use http_body_util::BodyExt;
use serde_json::{Value, json};

const TABLE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json";
/// Columns whose cells depend on the time of the request.
const TIMED: &[&str] = &["Age", "Last Seen", "First Seen", "Created At"];

/// GET `path` as a Table (with `query`).
async fn table(client: &kube::Client, path: &str) -> anyhow::Result<Value> {
    let request = http::Request::get(path)
        .header(http::header::ACCEPT, TABLE)
        .body(kube::client::Body::empty())?;
    let response = client.send(request).await?;
    let status = response.status().as_u16();
    let bytes = response.into_body().collect().await?.to_bytes();
    let body: Value = serde_json::from_slice(&bytes).context("a JSON answer")?;
    ensure!(status == 200, "GET {path}: {status}: {body}");
    ensure!(body["kind"] == "Table", "GET {path}: not a Table: {body}");
    Ok(body)
}

/// POSTs `object` to `path`, failing on anything but 201.
async fn create(client: &kube::Client, path: &str, object: Value) -> anyhow::Result<Value> {
    let (code, body) = support::raw(client, http::Method::POST, path, Some(&object)).await?;
    ensure!(code == 201, "POST {path}: {code}: {body}");
    Ok(body)
}

/// Checks the Table's columns against `(name, type, priority)` and its one
/// row's cells against `cells` (time-dependent ones skipped).
fn check(table: &Value, columns: &[(&str, &str, u8)], cells: &[Value]) -> anyhow::Result<()> {
    let defs = table["columnDefinitions"]
        .as_array()
        .context("column definitions")?;
    let got: Vec<(String, String, u64)> = defs
        .iter()
        .map(|c| {
            (
                c["name"].as_str().unwrap_or_default().to_owned(),
                c["type"].as_str().unwrap_or_default().to_owned(),
                c["priority"].as_u64().unwrap_or_default(),
            )
        })
        .collect();
    let want: Vec<(String, String, u64)> = columns
        .iter()
        .map(|(n, t, p)| ((*n).to_owned(), (*t).to_owned(), u64::from(*p)))
        .collect();
    ensure!(got == want, "columns {got:?}, want {want:?}");
    for c in defs.iter().filter(|c| c["name"] == "Name") {
        ensure!(c["format"] == "name", "the Name column's format: {c}");
    }
    let rows = table["rows"].as_array().context("rows")?;
    ensure!(rows.len() == 1, "one row: {rows:?}");
    let row = rows[0]["cells"].as_array().context("cells")?;
    ensure!(
        row.len() == columns.len(),
        "as many cells as columns: {row:?}"
    );
    for (i, (name, ..)) in columns.iter().enumerate() {
        if TIMED.contains(name) {
            continue;
        }
        ensure!(row[i] == cells[i], "{name}: {} (want {})", row[i], cells[i]);
    }
    ensure!(
        rows[0]["object"]["kind"] == "PartialObjectMetadata",
        "rows carry metadata by default: {}",
        rows[0]["object"]
    );
    Ok(())
}

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
            json!("6.1.0"),
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
            &[
                ("Name", "string", 0),
                ("Secrets", "string", 0),
                ("Age", "string", 0),
            ],
            &[json!(name), json!(0), json!("")],
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

contract_test!(
    leases_and_role_bindings_print_who_holds_and_who_is_bound,
    |t| {
        let client = t.client();
        let name = ccm_test_support::unique("table-lease");
        let leases = "/apis/coordination.k8s.io/v1/namespaces/default/leases";
        create(
        &client,
        leases,
        json!({ "apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": { "name": name },
                "spec": { "holderIdentity": "ccm-0", "leaseDurationSeconds": 15 } }),
    )
    .await?;
        let bindings = "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings";
        create(
        &client,
        bindings,
        json!({ "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": { "name": name },
                "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view" },
                "subjects": [
                    { "kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "alice" },
                    { "kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": "devs" },
                    { "kind": "ServiceAccount", "name": "ccm", "namespace": "kube-system" },
                ] }),
    )
    .await?;
        let result = async {
            let lease = table(&client, &format!("{leases}/{name}")).await?;
            check(
                &lease,
                &[
                    ("Name", "string", 0),
                    ("Holder", "string", 0),
                    ("Age", "string", 0),
                ],
                &[json!(name), json!("ccm-0"), json!("")],
            )?;
            let binding = table(&client, &format!("{bindings}/{name}")).await?;
            check(
                &binding,
                &[
                    ("Name", "string", 0),
                    ("Role", "string", 0),
                    ("Age", "string", 0),
                    ("Users", "string", 1),
                    ("Groups", "string", 1),
                    ("ServiceAccounts", "string", 1),
                ],
                &[
                    json!(name),
                    json!("ClusterRole/view"),
                    json!(""),
                    json!("alice"),
                    json!("devs"),
                    json!("kube-system/ccm"),
                ],
            )
        }
        .await;
        support::raw(
            &client,
            http::Method::DELETE,
            &format!("{leases}/{name}"),
            None,
        )
        .await?;
        support::raw(
            &client,
            http::Method::DELETE,
            &format!("{bindings}/{name}"),
            None,
        )
        .await?;
        result
    }
);

contract_test!(events_lead_with_when_they_were_last_seen, |t| {
    let client = t.client();
    let name = ccm_test_support::unique("table-event");
    let events = "/api/v1/namespaces/default/events";
    create(
        &client,
        events,
        json!({ "apiVersion": "v1", "kind": "Event", "metadata": { "name": name },
                "involvedObject": { "kind": "Service", "namespace": "default", "name": "web", "apiVersion": "v1" },
                "type": "Warning", "reason": "SyncLoadBalancerFailed", "message": "no nodes",
                "source": { "component": "service-controller" },
                "firstTimestamp": "2026-01-01T00:00:00Z", "lastTimestamp": "2026-01-01T00:05:00Z", "count": 4 }),
    )
    .await?;
    let result = async {
        let event = table(&client, &format!("{events}/{name}")).await?;
        check(
            &event,
            &[
                ("Last Seen", "string", 0),
                ("Type", "string", 0),
                ("Reason", "string", 0),
                ("Object", "string", 0),
                ("Subobject", "string", 1),
                ("Source", "string", 1),
                ("Message", "string", 0),
                ("First Seen", "string", 1),
                ("Count", "string", 1),
                ("Name", "string", 1),
            ],
            &[
                json!(""),
                json!("Warning"),
                json!("SyncLoadBalancerFailed"),
                json!("service/web"),
                json!(""),
                json!("service-controller"),
                json!("no nodes"),
                json!(""),
                json!(4),
                json!(name),
            ],
        )
    }
    .await;
    support::raw(
        &client,
        http::Method::DELETE,
        &format!("{events}/{name}"),
        None,
    )
    .await?;
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

contract_test!(
    namespaces_endpoints_volumes_pods_and_roles_print_as_kube_apiservers,
    |t| {
        let client = t.client();
        let name = ccm_test_support::unique("table-misc");
        let ns = "/api/v1/namespaces/default";
        create(
            &client,
            "/api/v1/namespaces",
            json!({ "apiVersion": "v1", "kind": "Namespace", "metadata": { "name": name } }),
        )
        .await?;
        create(
        &client,
        &format!("{ns}/endpoints"),
        json!({ "apiVersion": "v1", "kind": "Endpoints", "metadata": { "name": name },
                "subsets": [{ "addresses": [{ "ip": "10.1.0.1" }, { "ip": "10.1.0.2" }],
                              "ports": [{ "name": "a", "port": 80, "protocol": "TCP" }, { "name": "b", "port": 443, "protocol": "TCP" }] }] }),
    )
    .await?;
        create(
        &client,
        "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices",
        json!({ "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "metadata": { "name": name },
                "addressType": "IPv4",
                "endpoints": [{ "addresses": ["10.1.0.1"] }, { "addresses": ["10.1.0.2"] }],
                "ports": [{ "name": "a", "port": 80, "protocol": "TCP" }, { "name": "b", "port": 443, "protocol": "TCP" }] }),
    )
    .await?;
        create(
        &client,
        "/api/v1/persistentvolumes",
        json!({ "apiVersion": "v1", "kind": "PersistentVolume", "metadata": { "name": name },
                "spec": { "capacity": { "storage": "5Gi" }, "accessModes": ["ReadWriteOnce", "ReadOnlyMany"],
                          "persistentVolumeReclaimPolicy": "Retain", "storageClassName": "standard",
                          "volumeMode": "Filesystem", "hostPath": { "path": "/tmp/x" } } }),
    )
    .await?;
        create(
        &client,
        &format!("{ns}/pods"),
        json!({ "apiVersion": "v1", "kind": "Pod", "metadata": { "name": name },
                "spec": { "containers": [{ "name": "a", "image": "busybox" }, { "name": "b", "image": "busybox" }] } }),
    )
    .await?;
        create(
        &client,
        "/apis/rbac.authorization.k8s.io/v1/clusterroles",
        json!({ "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": { "name": name },
                "rules": [] }),
    )
    .await?;
        let result = async {
            let namespace = table(&client, &format!("/api/v1/namespaces/{name}")).await?;
            check(
                &namespace,
                &[
                    ("Name", "string", 0),
                    ("Status", "string", 0),
                    ("Age", "string", 0),
                ],
                &[json!(name), json!("Active"), json!("")],
            )?;
            let endpoints = table(&client, &format!("{ns}/endpoints/{name}")).await?;
            check(
                &endpoints,
                &[
                    ("Name", "string", 0),
                    ("Endpoints", "string", 0),
                    ("Age", "string", 0),
                ],
                &[
                    json!(name),
                    json!("10.1.0.1:80,10.1.0.2:80,10.1.0.1:443 + 1 more..."),
                    json!(""),
                ],
            )?;
            let slice = table(
                &client,
                &format!("/apis/discovery.k8s.io/v1/namespaces/default/endpointslices/{name}"),
            )
            .await?;
            check(
                &slice,
                &[
                    ("Name", "string", 0),
                    ("AddressType", "string", 0),
                    ("Ports", "string", 0),
                    ("Endpoints", "string", 0),
                    ("Age", "string", 0),
                ],
                &[
                    json!(name),
                    json!("IPv4"),
                    json!("80,443"),
                    json!("10.1.0.1,10.1.0.2"),
                    json!(""),
                ],
            )?;
            let volume = table(&client, &format!("/api/v1/persistentvolumes/{name}")).await?;
            check(
                &volume,
                &[
                    ("Name", "string", 0),
                    ("Capacity", "string", 0),
                    ("Access Modes", "string", 0),
                    ("Reclaim Policy", "string", 0),
                    ("Status", "string", 0),
                    ("Claim", "string", 0),
                    ("StorageClass", "string", 0),
                    ("VolumeAttributesClass", "string", 0),
                    ("Reason", "string", 0),
                    ("Age", "string", 0),
                    ("VolumeMode", "string", 1),
                ],
                &[
                    json!(name),
                    json!("5Gi"),
                    json!("RWO,ROX"),
                    json!("Retain"),
                    volume["rows"][0]["cells"][4].clone(),
                    json!(""),
                    json!("standard"),
                    json!("<unset>"),
                    json!(""),
                    json!(""),
                    json!("Filesystem"),
                ],
            )?;
            let pod = table(&client, &format!("{ns}/pods/{name}")).await?;
            check(
                &pod,
                &[
                    ("Name", "string", 0),
                    ("Ready", "string", 0),
                    ("Status", "string", 0),
                    ("Restarts", "string", 0),
                    ("Age", "string", 0),
                    ("IP", "string", 1),
                    ("Node", "string", 1),
                    ("Nominated Node", "string", 1),
                    ("Readiness Gates", "string", 1),
                ],
                &[
                    json!(name),
                    json!("0/2"),
                    json!("Pending"),
                    json!("0"),
                    json!(""),
                    json!("<none>"),
                    json!("<none>"),
                    json!("<none>"),
                    json!("<none>"),
                ],
            )?;
            let role = table(
                &client,
                &format!("/apis/rbac.authorization.k8s.io/v1/clusterroles/{name}"),
            )
            .await?;
            check(
                &role,
                &[("Name", "string", 0), ("Created At", "date", 0)],
                &[json!(name), json!("")],
            )
        }
        .await;
        for path in [
            format!("/api/v1/namespaces/{name}"),
            format!("{ns}/endpoints/{name}"),
            format!("/apis/discovery.k8s.io/v1/namespaces/default/endpointslices/{name}"),
            format!("/api/v1/persistentvolumes/{name}"),
            format!("{ns}/pods/{name}"),
            format!("/apis/rbac.authorization.k8s.io/v1/clusterroles/{name}"),
        ] {
            support::raw(&client, http::Method::DELETE, &path, None).await?;
        }
        result
    }
);
