//! Contract: CertificateSigningRequests (`certificates.k8s.io/v1`) as
//! kube-apiserver serves them: the requester recorded whatever the body
//! says (here through impersonation), decisions written through the
//! `approval` subresource with their timestamps, the rules on decision
//! conditions, and the `approve` permission on the signer.

mod support;

use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use kube::Api;
use kube::api::{DeleteParams, PostParams};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

const SIGNER: &str = "kubernetes.io/kubelet-serving";

fn object<T: DeserializeOwned>(value: Value) -> anyhow::Result<T> {
    Ok(serde_json::from_value(value)?)
}

/// A fresh key's serving request for node `node`.
fn request_pem(node: &str) -> anyhow::Result<String> {
    let key = rcgen::KeyPair::generate()?;
    let mut params = rcgen::CertificateParams::new(vec![format!("{node}.example")])?;
    params.distinguished_name = rcgen::DistinguishedName::new();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, format!("system:node:{node}"));
    params
        .distinguished_name
        .push(rcgen::DnType::OrganizationName, "system:nodes");
    Ok(params.serialize_request(&key)?.pem()?)
}

fn csr(name: &str, node: &str, claimed_user: &str) -> anyhow::Result<CertificateSigningRequest> {
    object(json!({
        "metadata": {"name": name},
        "spec": {
            "request": k8s_openapi::ByteString(request_pem(node)?.into_bytes()),
            "signerName": SIGNER,
            "usages": ["digital signature", "server auth"],
            "username": claimed_user,
        }
    }))
}

fn decision(kind: &str) -> Value {
    json!({"type": kind, "status": "True", "reason": "ContractTest", "message": "decided by a test"})
}

/// `csr` with `conditions` as its status, for the approval subresource.
fn with_conditions(
    csr: &CertificateSigningRequest,
    conditions: &[Value],
) -> anyhow::Result<CertificateSigningRequest> {
    let mut value = serde_json::to_value(csr)?;
    value["status"] = json!({"conditions": conditions});
    object(value)
}

/// Lets the group `system:nodes` create requests, as a cluster that
/// rotates kubelet certificates does; answers the role's name.
async fn nodes_may_request(t: &support::Target) -> anyhow::Result<String> {
    let role = ccm_test_support::unique("node-csr");
    let roles: Api<ClusterRole> = Api::all(t.client());
    roles
        .create(
            &PostParams::default(),
            &object(json!({
                "metadata": {"name": role},
                "rules": [{"apiGroups": ["certificates.k8s.io"], "resources": ["certificatesigningrequests"], "verbs": ["create", "get"]}]
            }))?,
        )
        .await?;
    let bindings: Api<ClusterRoleBinding> = Api::all(t.client());
    bindings
        .create(
            &PostParams::default(),
            &object(json!({
                "metadata": {"name": role},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
                "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:nodes"}]
            }))?,
        )
        .await?;
    Ok(role)
}

auth_contract_test!(
    a_request_records_its_requester_and_decisions_go_through_approval,
    |t| {
        let role = nodes_may_request(t).await?;
        let node = ccm_test_support::unique("csr-node");
        let name = ccm_test_support::unique("csr");
        let as_node: Api<CertificateSigningRequest> =
            Api::all(t.client_impersonating(&format!("system:node:{node}"), &["system:nodes"])?);
        let request = csr(&name, &node, "system:admin")?;
        // RBAC changes reach kube-apiserver's authorizer cache within moments.
        let created = ccm_test_support::eventually(
            "a node's request",
            std::time::Duration::from_secs(10),
            || async { as_node.create(&PostParams::default(), &request).await.ok() },
        )
        .await?;
        assert_eq!(
            created.spec.username.as_deref(),
            Some(format!("system:node:{node}").as_str())
        );
        let groups = created.spec.groups.clone().unwrap_or_default();
        assert!(groups.iter().any(|g| g == "system:nodes"), "{groups:?}");
        assert!(
            groups.iter().any(|g| g == "system:authenticated"),
            "{groups:?}"
        );
        assert!(
            created
                .status
                .as_ref()
                .is_none_or(|s| s.conditions.is_none())
        );

        let admin: Api<CertificateSigningRequest> = Api::all(t.client());
        let both = with_conditions(&created, &[decision("Approved"), decision("Denied")])?;
        let err = admin
            .replace_subresource("approval", &name, &PostParams::default(), &both)
            .await
            .expect_err("Approved and Denied together");
        assert!(
            matches!(&err, kube::Error::Api(e) if e.code == 422),
            "{err}"
        );

        let approved = admin
            .replace_subresource(
                "approval",
                &name,
                &PostParams::default(),
                &with_conditions(&created, &[decision("Approved")])?,
            )
            .await?;
        let conditions = approved
            .status
            .and_then(|s| s.conditions)
            .unwrap_or_default();
        assert_eq!(conditions.len(), 1, "{conditions:?}");
        assert_eq!(conditions[0].type_, "Approved");
        assert!(
            conditions[0].last_update_time.is_some(),
            "the server fills lastUpdateTime"
        );
        assert!(
            conditions[0].last_transition_time.is_some(),
            "and lastTransitionTime"
        );
        assert_eq!(
            approved.spec.username, created.spec.username,
            "the spec stays"
        );
        admin.delete(&name, &DeleteParams::default()).await?;
        Api::<ClusterRoleBinding>::all(t.client())
            .delete(&role, &DeleteParams::default())
            .await?;
        Api::<ClusterRole>::all(t.client())
            .delete(&role, &DeleteParams::default())
            .await?;
        Ok(())
    }
);

auth_contract_test!(approving_needs_approve_on_the_signer, |t| {
    let user = ccm_test_support::unique("csr-approver");
    let role = ccm_test_support::unique("csr-approval");
    let roles: Api<ClusterRole> = Api::all(t.client());
    let bindings: Api<ClusterRoleBinding> = Api::all(t.client());
    roles
        .create(
            &PostParams::default(),
            &object(json!({
                "metadata": {"name": role},
                "rules": [{"apiGroups": ["certificates.k8s.io"], "resources": ["certificatesigningrequests/approval"], "verbs": ["update"]}]
            }))?,
        )
        .await?;
    bindings
        .create(
            &PostParams::default(),
            &object(json!({
                "metadata": {"name": role},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
                "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}]
            }))?,
        )
        .await?;
    let node = ccm_test_support::unique("csr-node");
    let name = ccm_test_support::unique("csr");
    let admin: Api<CertificateSigningRequest> = Api::all(t.client());
    let created = admin
        .create(&PostParams::default(), &csr(&name, &node, "")?)
        .await?;
    let as_user: Api<CertificateSigningRequest> = Api::all(t.client_impersonating(&user, &[])?);
    let approve = with_conditions(&created, &[decision("Approved")])?;
    let err = support::within(30, "the refused approval", async {
        as_user
            .replace_subresource("approval", &name, &PostParams::default(), &approve)
            .await
    })
    .await?
    .expect_err("no approve on the signer");
    let kube::Error::Api(status) = &err else {
        anyhow::bail!("expected a 403, got {err}");
    };
    assert_eq!(status.code, 403, "{status:?}");
    assert!(
        status.message.contains(&format!(
            "user not permitted to approve requests with signerName \"{SIGNER}\""
        )),
        "{}",
        status.message
    );
    let mut rules: ClusterRole = roles.get(&role).await?;
    rules.rules.get_or_insert_with(Vec::new).push(object(json!({
        "apiGroups": ["certificates.k8s.io"], "resources": ["signers"], "verbs": ["approve"], "resourceNames": [SIGNER]
    }))?);
    roles.replace(&role, &PostParams::default(), &rules).await?;
    // RBAC changes reach kube-apiserver's authorizer cache within moments.
    let approved = ccm_test_support::eventually(
        "an allowed approval",
        std::time::Duration::from_secs(10),
        || async {
            as_user
                .replace_subresource("approval", &name, &PostParams::default(), &approve)
                .await
                .ok()
        },
    )
    .await?;
    assert!(
        approved
            .status
            .and_then(|s| s.conditions)
            .is_some_and(|c| c[0].type_ == "Approved")
    );
    admin.delete(&name, &DeleteParams::default()).await?;
    bindings.delete(&role, &DeleteParams::default()).await?;
    roles.delete(&role, &DeleteParams::default()).await?;
    Ok(())
});
