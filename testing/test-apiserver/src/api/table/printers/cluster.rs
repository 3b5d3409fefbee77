//! Printers of cluster-level kinds: nodes, namespaces, persistent volumes,
//! leases, RBAC, certificate signing requests and webhook configurations.

use std::collections::BTreeSet;

use serde_json::Value;

use super::{AGE, NAME, age_of, col, items, join_or, name, text, text_or};
use crate::api::table::Column;
use crate::api::table::age;

pub(in crate::api::table) const NODE: &[Column] = &[
    NAME,
    col(
        "Status",
        "string",
        0,
        "Whether the node is Ready, and schedulable.",
    ),
    col(
        "Roles",
        "string",
        0,
        "The node's roles, from its node-role labels.",
    ),
    AGE,
    col("Version", "string", 0, "The kubelet's version."),
    col(
        "Internal-IP",
        "string",
        1,
        "The node's first InternalIP address.",
    ),
    col(
        "External-IP",
        "string",
        1,
        "The node's first ExternalIP address.",
    ),
    col(
        "OS-Image",
        "string",
        1,
        "The operating system image the node reports.",
    ),
    col(
        "Kernel-Version",
        "string",
        1,
        "The kernel version the node reports.",
    ),
    col(
        "Container-Runtime",
        "string",
        1,
        "The container runtime and its version.",
    ),
];

/// The node's first address of `kind`, or `<none>`.
fn address(node: &Value, kind: &str) -> Value {
    items(node, "/status/addresses")
        .iter()
        .find(|a| a["type"] == kind)
        .and_then(|a| a["address"].as_str())
        .map_or_else(|| Value::from("<none>"), Value::from)
}

pub(super) fn node(v: &Value, now: jiff::Timestamp) -> Vec<Value> {
    let ready = items(v, "/status/conditions")
        .iter()
        .find(|c| c["type"] == "Ready")
        .map(|c| c["status"].as_str().unwrap_or_default());
    let mut status = vec![
        match ready {
            Some("True") => "Ready",
            Some(_) => "NotReady",
            None => "Unknown",
        }
        .to_owned(),
    ];
    if v.pointer("/spec/unschedulable") == Some(&Value::Bool(true)) {
        status.push("SchedulingDisabled".to_owned());
    }
    let mut roles = BTreeSet::new();
    if let Some(labels) = v.pointer("/metadata/labels").and_then(Value::as_object) {
        for (key, value) in labels {
            if let Some(role) = key.strip_prefix("node-role.kubernetes.io/") {
                if !role.is_empty() {
                    roles.insert(role.to_owned());
                }
            } else if key == "kubernetes.io/role"
                && let Some(role) = value.as_str().filter(|r| !r.is_empty())
            {
                roles.insert(role.to_owned());
            }
        }
    }
    let roles: Vec<String> = roles.into_iter().collect();
    vec![
        name(v),
        Value::from(status.join(",")),
        join_or(&roles, ",", "<none>"),
        age_of(v, now),
        Value::from(text(v, "/status/nodeInfo/kubeletVersion")),
        address(v, "InternalIP"),
        address(v, "ExternalIP"),
        text_or(v, "/status/nodeInfo/osImage", "<unknown>"),
        kernel_version(v),
        text_or(v, "/status/nodeInfo/containerRuntimeVersion", "<unknown>"),
    ]
}

/// The kernel, with the architecture after it when the node reports one
/// (`6.1.0 (amd64)`), as 1.36 and later print it; 1.35 prints the kernel
/// alone.
fn kernel_version(v: &Value) -> Value {
    let kernel = text_or(v, "/status/nodeInfo/kernelVersion", "<unknown>");
    match text(v, "/status/nodeInfo/architecture") {
        "" => kernel,
        arch => Value::from(format!("{} ({arch})", kernel.as_str().unwrap_or_default())),
    }
}

pub(in crate::api::table) const NAMESPACE: &[Column] = &[
    NAME,
    col("Status", "string", 0, "The namespace's phase."),
    AGE,
];

pub(super) fn namespace(v: &Value, now: jiff::Timestamp) -> Vec<Value> {
    vec![
        name(v),
        Value::from(text(v, "/status/phase")),
        age_of(v, now),
    ]
}

pub(in crate::api::table) const PERSISTENT_VOLUME: &[Column] = &[
    NAME,
    col("Capacity", "string", 0, "The volume's storage capacity."),
    col(
        "Access Modes",
        "string",
        0,
        "How the volume may be mounted.",
    ),
    col(
        "Reclaim Policy",
        "string",
        0,
        "What happens to the volume when its claim is released.",
    ),
    col("Status", "string", 0, "The volume's phase."),
    col("Claim", "string", 0, "The claim bound to the volume."),
    col("StorageClass", "string", 0, "The volume's storage class."),
    col(
        "VolumeAttributesClass",
        "string",
        0,
        "The volume's attributes class.",
    ),
    col("Reason", "string", 0, "Why the volume is in its phase."),
    AGE,
    col("VolumeMode", "string", 1, "Filesystem or Block."),
];

/// Access modes as kubectl abbreviates them, in its fixed order.
fn access_modes(v: &Value) -> String {
    let modes: Vec<&str> = items(v, "/spec/accessModes")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    [
        ("ReadWriteOnce", "RWO"),
        ("ReadOnlyMany", "ROX"),
        ("ReadWriteMany", "RWX"),
        ("ReadWriteOncePod", "RWOP"),
    ]
    .iter()
    .filter(|(full, _)| modes.contains(full))
    .map(|(_, short)| *short)
    .collect::<Vec<_>>()
    .join(",")
}

pub(super) fn persistent_volume(v: &Value, now: jiff::Timestamp) -> Vec<Value> {
    let claim = match (
        text(v, "/spec/claimRef/namespace"),
        text(v, "/spec/claimRef/name"),
    ) {
        (_, "") => String::new(),
        (ns, claim) => format!("{ns}/{claim}"),
    };
    vec![
        name(v),
        Value::from(text(v, "/spec/capacity/storage")),
        Value::from(access_modes(v)),
        Value::from(text(v, "/spec/persistentVolumeReclaimPolicy")),
        Value::from(text(v, "/status/phase")),
        Value::from(claim),
        Value::from(text(v, "/spec/storageClassName")),
        text_or(v, "/spec/volumeAttributesClassName", "<unset>"),
        Value::from(text(v, "/status/reason")),
        age_of(v, now),
        text_or(v, "/spec/volumeMode", "<unset>"),
    ]
}

pub(in crate::api::table) const LEASE: &[Column] = &[
    NAME,
    col("Holder", "string", 0, "The identity holding the lease."),
    AGE,
];

pub(super) fn lease(v: &Value, now: jiff::Timestamp) -> Vec<Value> {
    vec![
        name(v),
        Value::from(text(v, "/spec/holderIdentity")),
        age_of(v, now),
    ]
}

pub(in crate::api::table) const ROLE: &[Column] = &[
    NAME,
    col(
        "Created At",
        "date",
        0,
        "When the role was created (RFC 3339).",
    ),
];

pub(super) fn role(v: &Value) -> Vec<Value> {
    vec![name(v), Value::from(text(v, "/metadata/creationTimestamp"))]
}

pub(in crate::api::table) const ROLE_BINDING: &[Column] = &[
    NAME,
    col("Role", "string", 0, "The role bound: kind/name."),
    AGE,
    col("Users", "string", 1, "The users bound."),
    col("Groups", "string", 1, "The groups bound."),
    col(
        "ServiceAccounts",
        "string",
        1,
        "The service accounts bound, namespace/name.",
    ),
];

pub(super) fn role_binding(v: &Value, now: jiff::Timestamp) -> Vec<Value> {
    let mut users = Vec::new();
    let mut groups = Vec::new();
    let mut accounts = Vec::new();
    for subject in items(v, "/subjects") {
        let who = subject["name"].as_str().unwrap_or_default().to_owned();
        match subject["kind"].as_str() {
            Some("User") => users.push(who),
            Some("Group") => groups.push(who),
            Some("ServiceAccount") => accounts.push(format!(
                "{}/{who}",
                subject["namespace"].as_str().unwrap_or_default()
            )),
            _ => {}
        }
    }
    vec![
        name(v),
        Value::from(format!(
            "{}/{}",
            text(v, "/roleRef/kind"),
            text(v, "/roleRef/name")
        )),
        age_of(v, now),
        Value::from(users.join(", ")),
        Value::from(groups.join(", ")),
        Value::from(accounts.join(", ")),
    ]
}

pub(in crate::api::table) const CSR: &[Column] = &[
    NAME,
    AGE,
    col("SignerName", "string", 0, "Who is asked to sign."),
    col("Requestor", "string", 0, "Who asked."),
    col(
        "RequestedDuration",
        "string",
        0,
        "How long the certificate is asked to be valid.",
    ),
    col(
        "Condition",
        "string",
        0,
        "Approved, Denied, Failed, Issued or Pending.",
    ),
];

pub(super) fn csr(v: &Value, now: jiff::Timestamp) -> Vec<Value> {
    let mut conditions: Vec<String> = items(v, "/status/conditions")
        .iter()
        .filter_map(|c| c["type"].as_str())
        .map(str::to_owned)
        .collect();
    conditions.dedup();
    if !text(v, "/status/certificate").is_empty() {
        conditions.push("Issued".to_owned());
    }
    let duration = v
        .pointer("/spec/expirationSeconds")
        .and_then(Value::as_u64)
        .map_or_else(
            || "<none>".to_owned(),
            |s| age::human_duration(std::time::Duration::from_secs(s)),
        );
    vec![
        name(v),
        age_of(v, now),
        Value::from(text(v, "/spec/signerName")),
        Value::from(text(v, "/spec/username")),
        Value::from(duration),
        join_or(&conditions, ",", "Pending"),
    ]
}

pub(in crate::api::table) const WEBHOOK_CONFIGURATION: &[Column] = &[
    NAME,
    col(
        "Webhooks",
        "integer",
        0,
        "How many webhooks the configuration registers.",
    ),
    AGE,
];

pub(super) fn webhook_configuration(v: &Value, now: jiff::Timestamp) -> Vec<Value> {
    vec![
        name(v),
        Value::from(items(v, "/webhooks").len()),
        age_of(v, now),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn now() -> jiff::Timestamp {
        "2026-01-01T01:00:00Z".parse().unwrap()
    }

    #[test]
    fn a_node_prints_readiness_roles_version_and_its_addresses() {
        let node = json!({
            "metadata": { "name": "n1", "creationTimestamp": "2026-01-01T00:00:00Z",
                          "labels": { "node-role.kubernetes.io/worker": "", "node-role.kubernetes.io/control-plane": "" } },
            "spec": { "unschedulable": true },
            "status": {
                "conditions": [{ "type": "Ready", "status": "True" }],
                "addresses": [{ "type": "Hostname", "address": "n1" }, { "type": "InternalIP", "address": "10.0.0.1" }],
                "nodeInfo": { "kubeletVersion": "v1.33.0", "osImage": "Debian" },
            },
        });
        assert_eq!(
            node_cells(&node),
            json!([
                "n1",
                "Ready,SchedulingDisabled",
                "control-plane,worker",
                "60m",
                "v1.33.0",
                "10.0.0.1",
                "<none>",
                "Debian",
                "<unknown>",
                "<unknown>"
            ])
        );
        let mut arm = node;
        arm["status"]["nodeInfo"]["architecture"] = json!("arm64");
        assert_eq!(node_cells(&arm)[8], "<unknown> (arm64)");
        arm["status"]["nodeInfo"]["kernelVersion"] = json!("6.1.0");
        assert_eq!(node_cells(&arm)[8], "6.1.0 (arm64)");
        let bare = json!({ "metadata": { "name": "n2" } });
        assert_eq!(node_cells(&bare)[1], "Unknown");
        assert_eq!(node_cells(&bare)[2], "<none>");
    }

    fn node_cells(v: &Value) -> Value {
        Value::Array(node(v, now()))
    }

    #[test]
    fn a_binding_prints_its_role_and_subjects_by_kind() {
        let binding = json!({
            "metadata": { "name": "b" },
            "roleRef": { "kind": "ClusterRole", "name": "view" },
            "subjects": [
                { "kind": "User", "name": "alice" }, { "kind": "User", "name": "bob" },
                { "kind": "Group", "name": "devs" },
                { "kind": "ServiceAccount", "name": "ccm", "namespace": "kube-system" },
            ],
        });
        let cells = role_binding(&binding, now());
        assert_eq!(cells[1], "ClusterRole/view");
        assert_eq!(cells[3], "alice, bob");
        assert_eq!(cells[4], "devs");
        assert_eq!(cells[5], "kube-system/ccm");
    }

    #[test]
    fn a_webhook_configuration_prints_how_many_webhooks_it_has() {
        let configuration = json!({ "metadata": { "name": "c" }, "webhooks": [{}, {}] });
        assert_eq!(
            webhook_configuration(&configuration, now())[..2],
            [json!("c"), json!(2)]
        );
        let empty = json!({ "metadata": { "name": "e" } });
        assert_eq!(webhook_configuration(&empty, now())[1], json!(0));
    }

    #[test]
    fn a_volume_prints_abbreviated_access_modes_and_its_claim() {
        let pv = json!({
            "metadata": { "name": "pv1" },
            "spec": { "capacity": { "storage": "10Gi" }, "accessModes": ["ReadWriteMany", "ReadWriteOnce"],
                      "persistentVolumeReclaimPolicy": "Delete", "claimRef": { "namespace": "a", "name": "data" } },
            "status": { "phase": "Bound" },
        });
        let cells = persistent_volume(&pv, now());
        assert_eq!(
            cells[1..6],
            [
                json!("10Gi"),
                json!("RWO,RWX"),
                json!("Delete"),
                json!("Bound"),
                json!("a/data")
            ]
        );
        assert_eq!(cells[7], "<unset>");
    }
}
