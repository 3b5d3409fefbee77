//! The RBAC objects kube-apiserver creates at startup that a CCM's chart
//! binds to or a kube client needs, as `kubectl get -o json` shows them on
//! kube-apiserver 1.37 (verbs sorted, as its bootstrap policy sorts them);
//! and the `extension-apiserver-authentication` ConfigMap it publishes its
//! client CA in.

use serde_json::{Value, json};

use crate::error::Error;
use crate::resources::{Kind, RBAC_GROUP};
use crate::seed;
use crate::store::Store;

/// Metadata kube-apiserver's bootstrap policy puts on what it creates.
fn bootstrap_metadata(name: &str, namespace: Option<&str>) -> Value {
    let mut metadata = json!({
        "name": name,
        "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"},
        "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"}
    });
    if let Some(ns) = namespace {
        metadata["namespace"] = json!(ns);
    }
    metadata
}

fn subject(kind: &str, name: &str) -> Value {
    json!({"apiGroup": RBAC_GROUP, "kind": kind, "name": name})
}

fn cluster_role(store: &mut Store, name: &str, rules: Value) -> Result<(), Error> {
    let mut body = json!({"metadata": bootstrap_metadata(name, None)});
    body["rules"] = rules;
    seed::create(store, Kind::ClusterRole, None, body)
}

fn cluster_role_binding(store: &mut Store, name: &str, groups: &[&str]) -> Result<(), Error> {
    let body = json!({
        "metadata": bootstrap_metadata(name, None),
        "roleRef": {"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": name},
        "subjects": groups.iter().map(|g| subject("Group", g)).collect::<Vec<_>>()
    });
    seed::create(store, Kind::ClusterRoleBinding, None, body)
}

/// Seeds the bootstrap roles and bindings.
pub(crate) fn seed_policy(store: &mut Store) -> Result<(), Error> {
    let authenticated = "system:authenticated";
    cluster_role(
        store,
        "cluster-admin",
        json!([
            {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
            {"nonResourceURLs": ["*"], "verbs": ["*"]}
        ]),
    )?;
    cluster_role_binding(store, "cluster-admin", &["system:masters"])?;
    cluster_role(
        store,
        "system:discovery",
        json!([{"nonResourceURLs": [
            "/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez", "/openapi",
            "/openapi/*", "/readyz", "/version", "/version/"
        ], "verbs": ["get"]}]),
    )?;
    cluster_role_binding(store, "system:discovery", &[authenticated])?;
    cluster_role(
        store,
        "system:basic-user",
        json!([
            {"apiGroups": ["authorization.k8s.io"], "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"], "verbs": ["create"]},
            {"apiGroups": ["authentication.k8s.io"], "resources": ["selfsubjectreviews"], "verbs": ["create"]}
        ]),
    )?;
    cluster_role_binding(store, "system:basic-user", &[authenticated])?;
    cluster_role(
        store,
        "system:public-info-viewer",
        json!([{"nonResourceURLs": ["/healthz", "/livez", "/readyz", "/version", "/version/"], "verbs": ["get"]}]),
    )?;
    cluster_role_binding(
        store,
        "system:public-info-viewer",
        &[authenticated, "system:unauthenticated"],
    )?;
    cluster_role(
        store,
        "system:auth-delegator",
        json!([
            {"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"]},
            {"apiGroups": ["authorization.k8s.io"], "resources": ["subjectaccessreviews"], "verbs": ["create"]}
        ]),
    )?;
    let reader = "extension-apiserver-authentication-reader";
    seed::create(
        store,
        Kind::Role,
        Some("kube-system"),
        json!({
            "metadata": bootstrap_metadata(reader, Some("kube-system")),
            "rules": [{
                "apiGroups": [""],
                "resources": ["configmaps"],
                "resourceNames": ["extension-apiserver-authentication"],
                "verbs": ["get", "list", "watch"]
            }]
        }),
    )?;
    seed::create(
        store,
        Kind::RoleBinding,
        Some("kube-system"),
        json!({
            "metadata": bootstrap_metadata(&format!("system::{reader}"), Some("kube-system")),
            "roleRef": {"apiGroup": RBAC_GROUP, "kind": "Role", "name": reader},
            "subjects": [
                subject("User", "system:kube-controller-manager"),
                subject("User", "system:kube-scheduler")
            ]
        }),
    )?;
    seed_controller_roles(store)
}

/// kube-apiserver's `system:controller:<name>` roles of the controllers a
/// CCM runs with `--use-service-account-credentials`, bound to the
/// ServiceAccounts `kube-system/<name>` (its bootstrap controller policy).
fn seed_controller_roles(store: &mut Store) -> Result<(), Error> {
    let events = json!({"apiGroups": ["", "events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch", "update"]});
    let controllers = [
        (
            "node-controller",
            json!([
                {"apiGroups": [""], "resources": ["nodes"], "verbs": ["delete", "get", "list", "patch", "update", "watch"]},
                {"apiGroups": [""], "resources": ["nodes/status"], "verbs": ["patch", "update"]},
                {"apiGroups": [""], "resources": ["pods/status"], "verbs": ["patch", "update"]},
                {"apiGroups": [""], "resources": ["pods"], "verbs": ["delete", "get", "list", "watch"]},
                // New in 1.37.
                {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get", "list", "watch"]},
                events
            ]),
        ),
        (
            "route-controller",
            json!([
                {"apiGroups": [""], "resources": ["nodes"], "verbs": ["list", "watch"]},
                {"apiGroups": [""], "resources": ["nodes/status"], "verbs": ["patch"]},
                events
            ]),
        ),
        (
            "service-controller",
            json!([
                {"apiGroups": [""], "resources": ["services"], "verbs": ["get", "list", "watch"]},
                {"apiGroups": [""], "resources": ["services/status"], "verbs": ["patch", "update"]},
                {"apiGroups": [""], "resources": ["nodes"], "verbs": ["list", "watch"]},
                events
            ]),
        ),
    ];
    for (controller, rules) in controllers {
        let name = format!("system:controller:{controller}");
        cluster_role(store, &name, rules)?;
        let body = json!({
            "metadata": bootstrap_metadata(&name, None),
            "roleRef": {"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": controller, "namespace": "kube-system"}]
        });
        seed::create(store, Kind::ClusterRoleBinding, None, body)?;
    }
    Ok(())
}

/// `kube-system/extension-apiserver-authentication` with the client CA
/// under `client-ca-file`. Without requestheader flags kube-apiserver
/// writes no `requestheader-*` keys, and neither does this server.
pub(crate) fn seed_client_ca(store: &mut Store, client_ca: &str) -> Result<(), Error> {
    seed::create(
        store,
        Kind::ConfigMap,
        Some("kube-system"),
        json!({
            "metadata": {"name": "extension-apiserver-authentication", "namespace": "kube-system"},
            "data": {"client-ca-file": client_ca}
        }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::{attributes::Attributes, rbac};
    use crate::resources::by_kind;
    use crate::user::UserInfo;

    #[test]
    fn bootstrap_policy_grants_what_kube_apiserver_grants() {
        let mut store = Store::new(100);
        seed::cluster_basics(&mut store).expect("seeds");
        seed_policy(&mut store).expect("seeds");
        assert_eq!(
            store
                .objects(by_kind(Kind::ClusterRole).storage, None)
                .count(),
            8
        );
        let someone = UserInfo {
            name: "someone".into(),
            groups: vec!["system:authenticated".into()],
            ..UserInfo::default()
        };
        let version = Attributes {
            verb: "get".into(),
            path: "/version".into(),
            ..Attributes::default()
        };
        let decision = rbac::authorize(&store, &someone, &version);
        assert!(decision.allowed);
        let node_controller = UserInfo {
            name: "system:serviceaccount:kube-system:node-controller".into(),
            groups: vec![
                "system:serviceaccounts".into(),
                "system:authenticated".into(),
            ],
            ..UserInfo::default()
        };
        let patch_node = Attributes {
            verb: "patch".into(),
            resource_request: true,
            resource: "nodes".into(),
            name: "n1".into(),
            ..Attributes::default()
        };
        assert!(
            rbac::authorize(&store, &node_controller, &patch_node).allowed,
            "system:controller:node-controller is bound to its ServiceAccount"
        );
        let nodes = Attributes {
            verb: "list".into(),
            resource_request: true,
            resource: "nodes".into(),
            ..version
        };
        assert!(!rbac::authorize(&store, &someone, &nodes).allowed);
        let root = UserInfo {
            groups: vec!["system:masters".into()],
            ..someone
        };
        assert_eq!(
            rbac::authorize(&store, &root, &nodes).reason,
            "RBAC: allowed by ClusterRoleBinding \"cluster-admin\" of ClusterRole \"cluster-admin\" to Group \"system:masters\""
        );
    }
}
