//! Contract: RBAC as kube-apiserver's authorizer decides it, the RBAC kinds
//! as stored objects, the bootstrap roles, and SubjectAccessReview.

use crate::support;

use std::time::Duration;

use anyhow::Context;
use http::Method;
use k8s_openapi::api::authentication::v1::TokenRequest;
use k8s_openapi::api::core::v1::{Namespace, Node, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use support::raw;

fn object<T: DeserializeOwned>(value: Value) -> anyhow::Result<T> {
    Ok(serde_json::from_value(value)?)
}

/// A new namespace, a ServiceAccount in it and a client with its token.
async fn account(t: &support::Target, name: &str) -> anyhow::Result<(String, kube::Client)> {
    let ns = ccm_test_support::unique("rbac");
    let namespaces: Api<Namespace> = Api::all(t.client());
    namespaces
        .create(
            &PostParams::default(),
            &object(json!({"metadata": {"name": ns}}))?,
        )
        .await?;
    let accounts: Api<ServiceAccount> = Api::namespaced(t.client(), &ns);
    accounts
        .create(
            &PostParams::default(),
            &object(json!({"metadata": {"name": name}}))?,
        )
        .await?;
    let issued = accounts
        .create_token_request(name, &PostParams::default(), &TokenRequest::default())
        .await?;
    let token = issued.status.context("a TokenRequest status")?.token;
    Ok((ns.clone(), t.client_as(Some(&token))?))
}

/// The HTTP code `client` gets for `method path` with `body`.
async fn code(
    client: &kube::Client,
    method: Method,
    path: &str,
    body: Option<&Value>,
) -> anyhow::Result<u16> {
    Ok(raw(client, method, path, body).await?.0)
}

/// Waits until `client` gets `want` for `method path`: kube-apiserver's
/// authorizer reads RBAC objects from an informer, a moment behind.
async fn eventually_code(
    client: &kube::Client,
    method: Method,
    path: &str,
    body: Option<&Value>,
    want: u16,
) -> anyhow::Result<()> {
    ccm_test_support::eventually(
        &format!("{method} {path} to answer {want}"),
        Duration::from_secs(30),
        || async {
            let got = code(client, method.clone(), path, body).await?;
            anyhow::Ok((got == want).then_some(()))
        },
    )
    .await
}

async fn access_review(t: &support::Target, spec: Value) -> anyhow::Result<(u16, Value)> {
    let body = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec});
    raw(
        &t.client(),
        Method::POST,
        "/apis/authorization.k8s.io/v1/subjectaccessreviews",
        Some(&body),
    )
    .await
}

auth_contract_test!(cluster_role_bindings_grant_exactly_their_rules, |t| {
    let (ns, client) = account(t, "node-writer").await?;
    let user = format!("system:serviceaccount:{ns}:node-writer");
    let node = ccm_test_support::unique("rbac-node");
    let nodes: Api<Node> = Api::all(t.client());
    nodes
        .create(
            &PostParams::default(),
            &object(json!({"metadata": {"name": node}}))?,
        )
        .await?;
    let status_path = format!("/api/v1/nodes/{node}/status");
    let patch = json!({"metadata": {"labels": {"seen": "yes"}}});
    let (code_before, refused) = raw(&client, Method::PATCH, &status_path, Some(&patch)).await?;
    assert_eq!(code_before, 403);
    assert_eq!(
        refused,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
               "message": format!("nodes \"{node}\" is forbidden: User \"{user}\" cannot patch resource \"nodes/status\" in API group \"\" at the cluster scope"),
               "reason": "Forbidden", "details": {"name": node, "kind": "nodes"}, "code": 403})
    );
    let role = ccm_test_support::unique("node-status-writer");
    let roles: Api<ClusterRole> = Api::all(t.client());
    roles
        .create(
            &PostParams::default(),
            &object(json!({"metadata": {"name": role}, "rules": [
                {"apiGroups": [""], "resources": ["nodes/status"], "verbs": ["patch"]},
                {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"], "resourceNames": [node]}
            ]}))?,
        )
        .await?;
    let bindings: Api<ClusterRoleBinding> = Api::all(t.client());
    bindings
        .create(
            &PostParams::default(),
            &object(json!({"metadata": {"name": role},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
                "subjects": [{"kind": "ServiceAccount", "name": "node-writer", "namespace": ns}]}))?,
        )
        .await?;
    let merge = Patch::Merge(patch.clone());
    let node_path = format!("/api/v1/nodes/{node}");
    eventually_code(&client, Method::GET, &node_path, None, 200).await?;
    let as_account: Api<Node> = Api::all(client.clone());
    as_account
        .patch_status(&node, &PatchParams::default(), &merge)
        .await?;
    // Only the status subresource, only that node, only those verbs.
    assert_eq!(
        code(&client, Method::PATCH, &node_path, Some(&patch)).await?,
        403
    );
    assert_eq!(
        code(&client, Method::GET, "/api/v1/nodes/other", None).await?,
        403
    );
    assert_eq!(
        code(&client, Method::GET, "/api/v1/nodes", None).await?,
        403
    );
    let (_, review) = access_review(t, json!({"user": user, "resourceAttributes": {"verb": "patch", "resource": "nodes", "subresource": "status", "name": node}})).await?;
    assert_eq!(
        review["status"],
        json!({"allowed": true, "reason": format!(
            "RBAC: allowed by ClusterRoleBinding \"{role}\" of ClusterRole \"{role}\" to ServiceAccount \"node-writer/{ns}\""
        )})
    );
    bindings.delete(&role, &DeleteParams::default()).await?;
    roles.delete(&role, &DeleteParams::default()).await?;
    nodes.delete(&node, &DeleteParams::default()).await?;
    Ok(())
});

auth_contract_test!(role_bindings_grant_only_in_their_namespace, |t| {
    let (ns, client) = account(t, "reader").await?;
    let reader = ccm_test_support::unique("configmap-reader");
    let cluster_roles: Api<ClusterRole> = Api::all(t.client());
    cluster_roles
        .create(
            &PostParams::default(),
            &object(json!({"metadata": {"name": reader}, "rules": [
                {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list", "watch"]}
            ]}))?,
        )
        .await?;
    // A RoleBinding may reference a ClusterRole; a ServiceAccount subject
    // without a namespace is in the binding's.
    let bindings: Api<RoleBinding> = Api::namespaced(t.client(), &ns);
    bindings
        .create(
            &PostParams::default(),
            &object(json!({"metadata": {"name": "read"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": reader},
                "subjects": [{"kind": "ServiceAccount", "name": "reader"}]}))?,
        )
        .await?;
    let roles: Api<Role> = Api::namespaced(t.client(), &ns);
    roles
        .create(
            &PostParams::default(),
            &object(json!({"metadata": {"name": "one"}, "rules": [
                {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"], "resourceNames": ["a"]}
            ]}))?,
        )
        .await?;
    bindings
        .create(
            &PostParams::default(),
            &object(json!({"metadata": {"name": "one"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "one"},
                "subjects": [{"kind": "Group", "name": format!("system:serviceaccounts:{ns}")}]}))?,
        )
        .await?;
    let list = format!("/api/v1/namespaces/{ns}/configmaps");
    eventually_code(&client, Method::GET, &list, None, 200).await?;
    eventually_code(&client, Method::GET, &format!("{list}/a"), None, 404).await?;
    assert_eq!(
        code(&client, Method::GET, &format!("{list}/b"), None).await?,
        403
    );
    assert_eq!(
        code(
            &client,
            Method::GET,
            &format!("{list}?watch=true&timeoutSeconds=1"),
            None
        )
        .await?,
        200
    );
    assert_eq!(
        code(
            &client,
            Method::GET,
            "/api/v1/namespaces/default/configmaps",
            None
        )
        .await?,
        403
    );
    assert_eq!(
        code(&client, Method::GET, "/api/v1/configmaps", None).await?,
        403
    );
    // roleRef cannot change.
    let changed = Patch::Merge(json!({"roleRef": {"name": "other"}}));
    let err = bindings
        .patch("one", &PatchParams::default(), &changed)
        .await
        .expect_err("roleRef is immutable");
    let kube::Error::Api(status) = err else {
        anyhow::bail!("not an API error: {err}");
    };
    assert_eq!(status.code, 422);
    // 1.37 says "field is immutable"; 1.35 and 1.36 "cannot change roleRef".
    let words = if t.minor().await? >= 37 {
        "field is immutable"
    } else {
        "cannot change roleRef"
    };
    assert_eq!(
        status.message,
        format!(
            "RoleBinding.rbac.authorization.k8s.io \"one\" is invalid: roleRef: Invalid value: {{\"APIGroup\":\"rbac.authorization.k8s.io\",\"Kind\":\"Role\",\"Name\":\"other\"}}: {words}"
        )
    );
    cluster_roles
        .delete(&reader, &DeleteParams::default())
        .await?;
    let namespaces: Api<Namespace> = Api::all(t.client());
    namespaces.delete(&ns, &DeleteParams::default()).await?;
    Ok(())
});

auth_contract_test!(bootstrap_roles_are_there_from_the_start, |t| {
    let cluster_roles: Api<ClusterRole> = Api::all(t.client());
    let delegator = serde_json::to_value(cluster_roles.get("system:auth-delegator").await?)?;
    assert_eq!(
        delegator["rules"],
        json!([
            {"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"]},
            {"apiGroups": ["authorization.k8s.io"], "resources": ["subjectaccessreviews"], "verbs": ["create"]}
        ])
    );
    assert_eq!(
        delegator["metadata"]["labels"],
        json!({"kubernetes.io/bootstrapping": "rbac-defaults"})
    );
    let roles: Api<Role> = Api::namespaced(t.client(), "kube-system");
    let reader = serde_json::to_value(
        roles
            .get("extension-apiserver-authentication-reader")
            .await?,
    )?;
    assert_eq!(
        reader["rules"],
        json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch"],
                "resourceNames": ["extension-apiserver-authentication"]}])
    );
    let bindings: Api<ClusterRoleBinding> = Api::all(t.client());
    let admin = serde_json::to_value(bindings.get("cluster-admin").await?)?;
    assert_eq!(
        admin["subjects"],
        json!([{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:masters"}])
    );
    let node_controller = serde_json::to_value(
        cluster_roles
            .get("system:controller:node-controller")
            .await?,
    )?;
    let mut rules = vec![
        json!({"apiGroups": [""], "resources": ["nodes"], "verbs": ["delete", "get", "list", "patch", "update", "watch"]}),
        json!({"apiGroups": [""], "resources": ["nodes/status"], "verbs": ["patch", "update"]}),
        json!({"apiGroups": [""], "resources": ["pods/status"], "verbs": ["patch", "update"]}),
        json!({"apiGroups": [""], "resources": ["pods"], "verbs": ["delete", "get", "list", "watch"]}),
    ];
    // 1.37 lets the node controller read Leases; 1.35 and 1.36 do not.
    if t.minor().await? >= 37 {
        rules.push(json!({"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get", "list", "watch"]}));
    }
    rules.push(json!({"apiGroups": ["", "events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch", "update"]}));
    assert_eq!(node_controller["rules"], Value::from(rules));
    for name in [
        "system:discovery",
        "system:basic-user",
        "system:public-info-viewer",
    ] {
        let binding = serde_json::to_value(bindings.get(name).await?)?;
        assert!(
            binding["subjects"]
                .as_array()
                .is_some_and(|s| s.iter().any(|s| s["name"] == "system:authenticated")),
            "{name}: {binding}"
        );
    }
    Ok(())
});

auth_contract_test!(subject_access_reviews_answer_from_the_authorizer, |t| {
    let (code, review) = access_review(
        t,
        json!({"user": "alice", "groups": ["system:authenticated"],
        "nonResourceAttributes": {"verb": "get", "path": "/api"}}),
    )
    .await?;
    assert_eq!(code, 201);
    assert_eq!(review["kind"], "SubjectAccessReview");
    assert_eq!(
        review["status"],
        json!({"allowed": true, "reason": "RBAC: allowed by ClusterRoleBinding \"system:discovery\" of ClusterRole \"system:discovery\" to Group \"system:authenticated\""})
    );
    let (_, review) = access_review(
        t,
        json!({"user": "alice", "groups": ["system:authenticated"],
        "resourceAttributes": {"verb": "get", "resource": "nodes"}}),
    )
    .await?;
    assert_eq!(review["status"], json!({"allowed": false}));
    let (_, review) = access_review(
        t,
        json!({"user": "alice", "groups": ["system:masters"],
        "resourceAttributes": {"verb": "delete", "resource": "nodes", "name": "x"}}),
    )
    .await?;
    assert_eq!(review["status"], json!({"allowed": true}));
    let (code, refused) = access_review(t, json!({"user": "alice"})).await?;
    assert_eq!(code, 422);
    // 1.37 moved the path up to `spec`; 1.35 and 1.36 name the field.
    let path = if t.minor().await? >= 37 {
        "spec"
    } else {
        "spec.resourceAttributes"
    };
    assert_eq!(
        refused["message"],
        format!(
            ".authorization.k8s.io \"\" is invalid: {path}: Invalid value: null: exactly one of nonResourceAttributes or resourceAttributes must be specified"
        )
    );
    let (code, refused) = access_review(
        t,
        json!({"resourceAttributes": {"verb": "get", "resource": "nodes"}}),
    )
    .await?;
    assert_eq!(code, 422);
    assert!(
        refused["message"].as_str().is_some_and(|m| m.ends_with(
            "spec.user: Invalid value: \"\": at least one of user or group must be specified"
        )),
        "{refused}"
    );
    Ok(())
});

auth_contract_test!(self_subject_access_reviews_ask_for_the_caller, |t| {
    let (ns, client) = account(t, "curious").await?;
    let ask = |verb: &str, resource: &str| {
        json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
               "spec": {"resourceAttributes": {"verb": verb, "resource": resource, "namespace": ns}}})
    };
    let path = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews";
    let (code, review) = raw(&client, Method::POST, path, Some(&ask("list", "secrets"))).await?;
    assert_eq!((code, &review["status"]), (201, &json!({"allowed": false})));
    let (_, review) = raw(
        &t.client(),
        Method::POST,
        path,
        Some(&ask("list", "secrets")),
    )
    .await?;
    assert_eq!(review["status"]["allowed"], true, "the administrator may");
    let namespaces: Api<Namespace> = Api::all(t.client());
    namespaces.delete(&ns, &DeleteParams::default()).await?;
    Ok(())
});

auth_contract_test!(rbac_kinds_are_listed_and_discovered, |t| {
    let (code, list) = raw(
        &t.client(),
        Method::GET,
        "/apis/rbac.authorization.k8s.io/v1",
        None,
    )
    .await?;
    assert_eq!(code, 200);
    let mut names: Vec<&str> = list["resources"]
        .as_array()
        .context("resources")?
        .iter()
        .filter_map(|r| r["name"].as_str())
        .collect();
    names.sort_unstable();
    assert_eq!(
        names,
        [
            "clusterrolebindings",
            "clusterroles",
            "rolebindings",
            "roles"
        ]
    );
    let (_, core) = raw(&t.client(), Method::GET, "/api/v1", None).await?;
    let token = core["resources"]
        .as_array()
        .context("resources")?
        .iter()
        .find(|r| r["name"] == "serviceaccounts/token")
        .context("serviceaccounts/token")?;
    assert_eq!(
        (&token["kind"], &token["group"], &token["verbs"]),
        (
            &json!("TokenRequest"),
            &json!("authentication.k8s.io"),
            &json!(["create"])
        )
    );
    let cluster_roles: Api<ClusterRole> = Api::all(t.client());
    let all = cluster_roles.list(&Default::default()).await?;
    assert!(
        all.items
            .iter()
            .any(|r| r.metadata.name.as_deref() == Some("cluster-admin"))
    );
    Ok(())
});

auth_contract_test!(bindings_to_missing_roles_are_named_in_the_reason, |t| {
    let name = ccm_test_support::unique("dangling");
    let missing = format!("{name}-missing");
    let cluster_bindings: Api<ClusterRoleBinding> = Api::all(t.client());
    cluster_bindings
        .create(
            &PostParams::default(),
            &object(json!({"metadata": {"name": name},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": missing},
                "subjects": [{"kind": "User", "name": name}]}))?,
        )
        .await?;
    let bindings: Api<RoleBinding> = Api::namespaced(t.client(), "default");
    bindings
        .create(
            &PostParams::default(),
            &object(json!({"metadata": {"name": name},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": missing},
                "subjects": [{"kind": "User", "name": name}]}))?,
        )
        .await?;
    // 1.37 names the authorizer first; 1.35 and 1.36 do not.
    let authorizer = if t.minor().await? >= 37 { "rbac: " } else { "" };
    let want = json!({"allowed": false, "reason": format!(
        "{authorizer}RBAC: [clusterrole.rbac.authorization.k8s.io \"{missing}\" not found, role.rbac.authorization.k8s.io \"{missing}\" not found]"
    )});
    let spec = json!({"user": name, "resourceAttributes": {"verb": "list", "resource": "pods", "namespace": "default"}});
    ccm_test_support::eventually(
        "both dangling bindings in the reason",
        Duration::from_secs(30),
        || async {
            let (_, review) = access_review(t, spec.clone()).await?;
            anyhow::Ok((review["status"] == want).then_some(()))
        },
    )
    .await?;
    bindings.delete(&name, &DeleteParams::default()).await?;
    cluster_bindings
        .delete(&name, &DeleteParams::default())
        .await?;
    Ok(())
});

auth_contract_test!(
    invalid_rbac_objects_are_refused_in_kube_apiservers_words,
    |t| {
        let name = ccm_test_support::unique("invalid");
        let post = |path: &'static str, body: Value| {
            let client = t.client();
            async move { raw(&client, Method::POST, path, Some(&body)).await }
        };
        let (code, refused) = post(
            "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
            json!({"metadata": {"name": name},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "x"},
               "subjects": [{"kind": "ServiceAccount", "name": "a"}]}),
        )
        .await?;
        assert_eq!(code, 422);
        assert_eq!(
            refused["message"],
            format!(
                "ClusterRoleBinding.rbac.authorization.k8s.io \"{name}\" is invalid: [roleRef.kind: Unsupported value: \"Role\": supported values: \"ClusterRole\", subjects[0].namespace: Required value]"
            )
        );
        assert_eq!(
            refused["details"],
            json!({"name": name, "group": "rbac.authorization.k8s.io", "kind": "ClusterRoleBinding", "causes": [
                {"reason": "FieldValueNotSupported", "message": "Unsupported value: \"Role\": supported values: \"ClusterRole\"", "field": "roleRef.kind"},
                {"reason": "FieldValueRequired", "message": "Required value", "field": "subjects[0].namespace"}
            ]})
        );
        let (code, refused) = post(
        "/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles",
        json!({"metadata": {"name": name}, "rules": [{"verbs": ["get"], "nonResourceURLs": ["/x"]}]}),
    )
    .await?;
        assert_eq!(code, 422);
        assert_eq!(
            refused["message"],
            format!(
                "Role.rbac.authorization.k8s.io \"{name}\" is invalid: rules[0].nonResourceURLs: Invalid value: [\"/x\"]: namespaced rules cannot apply to non-resource URLs"
            )
        );
        let (code, refused) = post(
        "/apis/rbac.authorization.k8s.io/v1/clusterroles",
        json!({"metadata": {"name": name}, "rules": [{"apiGroups": [""], "resources": ["pods"]}]}),
    )
    .await?;
        assert_eq!(code, 422);
        // 1.35 and 1.36 explain; 1.37 says only "Required value".
        let detail = if t.minor().await? >= 37 {
            ""
        } else {
            ": verbs must contain at least one value"
        };
        assert_eq!(
            refused["message"],
            format!(
                "ClusterRole.rbac.authorization.k8s.io \"{name}\" is invalid: rules[0].verbs: Required value{detail}"
            )
        );
        // Subjects' API groups are defaulted as v1 does.
        let bindings: Api<RoleBinding> = Api::namespaced(t.client(), "default");
        let created = bindings
        .create(
            &PostParams::default(),
            &object(json!({"metadata": {"name": name},
                "roleRef": {"kind": "ClusterRole", "name": "view"},
                "subjects": [{"kind": "User", "name": "u"}, {"kind": "ServiceAccount", "name": "sa"}]}))?,
        )
        .await?;
        let created = serde_json::to_value(created)?;
        assert_eq!(created["roleRef"]["apiGroup"], "rbac.authorization.k8s.io");
        assert_eq!(
            created["subjects"][0]["apiGroup"],
            "rbac.authorization.k8s.io"
        );
        assert_eq!(created["subjects"][1].get("apiGroup"), None);
        bindings.delete(&name, &DeleteParams::default()).await?;
        Ok(())
    }
);
