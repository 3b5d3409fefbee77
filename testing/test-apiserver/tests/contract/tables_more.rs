//! Server-side printing, continued from `tables.rs`: leases, role
//! bindings, events, namespaces, endpoints, volumes, pods and roles.

use crate::support;

use serde_json::json;
use support::table::{check, create, table};

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
