//! The chart check's CCM starts as a standby: an earlier replica's Lease
//! holds it back until the check deletes that Lease, so watching the Lease,
//! creating it and renewing it are all proven under the chart's RBAC.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::ensure;
use serde_json::{Value, json};

use crate::http;

/// `(namespace, name)` of the Lease the CCM elects with, when it elects.
pub(super) fn leader_lease(args: &[String]) -> Option<(String, String)> {
    let flag = |name: &str| {
        args.iter()
            .find_map(|a| a.strip_prefix(&format!("--{name}=")))
            .map(str::to_owned)
    };
    if flag("leader-elect").as_deref() != Some("true") {
        return None;
    }
    Some((
        flag("leader-elect-resource-namespace").unwrap_or_else(|| "kube-system".to_owned()),
        flag("leader-elect-resource-name").unwrap_or_else(|| "cloud-controller-manager".to_owned()),
    ))
}

/// The Lease as an earlier replica holds it (an upgrade: the old pod is
/// still there), so the CCM starts as a standby and waits the way a second
/// replica does, watching the one Lease; [`hand_over`] ends the wait.
pub(super) fn previous_leader(
    api: SocketAddr,
    (namespace, name): &(String, String),
    admin_token: &str,
) -> anyhow::Result<()> {
    let now = jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%S%.6fZ")
        .to_string();
    let lease = json!({
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": { "name": name, "namespace": namespace },
        "spec": {
            "holderIdentity": "previous-replica",
            "leaseDurationSeconds": 60,
            "acquireTime": now,
            "renewTime": now,
            "leaseTransitions": 0,
        },
    });
    let path = format!("/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases");
    let response = http::request_as(
        api,
        "POST",
        &path,
        Some(("application/json", &lease.to_string())),
        Some(admin_token),
    )?;
    ensure!(
        response.status == 201,
        "creating the previous replica's Lease {namespace}/{name}: HTTP {}: {}",
        response.status,
        response.body
    );
    Ok(())
}

/// Once the standby CCM (as `user`) watches the Lease, deletes it, as an
/// old replica's Lease is cleaned up: the CCM sees the deletion and creates
/// its own. Standing by, creating and renewing are then all proven under
/// the chart's RBAC.
pub(super) fn hand_over(
    api: SocketAddr,
    user: &str,
    (namespace, name): &(String, String),
    admin_token: &str,
) -> anyhow::Result<()> {
    let watching = |log: &Value| {
        log["records"].as_array().is_some_and(|records| {
            records
                .iter()
                .any(|r| r["user"] == user && r["resource"] == "leases" && r["verb"] == "watch")
        })
    };
    let mut seen = false;
    for _ in 0..100 {
        let (status, log) = super::get(api, "/testapi/requests")?;
        ensure!(status == 200, "GET /testapi/requests: HTTP {status}");
        if watching(&log) {
            seen = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    ensure!(
        seen,
        "the standby CCM did not watch the Lease {namespace}/{name} within 10 s"
    );
    let path = format!("/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}");
    let response = http::request_as(api, "DELETE", &path, None, Some(admin_token))?;
    ensure!(
        response.status == 200,
        "deleting the previous replica's Lease {namespace}/{name}: HTTP {}: {}",
        response.status,
        response.body
    );
    println!("scenario: the CCM stood by, watching the previous replica's Lease; deleted it");
    Ok(())
}
