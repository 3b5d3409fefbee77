//! Contract: CertificateSigningRequests (`certificates.k8s.io/v1`) as
//! kube-apiserver serves them: the requester recorded whatever the body
//! says (here through impersonation), decisions written through the
//! `approval` subresource with their timestamps, the rules on decision
//! conditions, and the `approve` permission on the signer.

use crate::support;

use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use kube::Api;
use kube::api::{DeleteParams, PostParams};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

const SIGNER: &str = ccm_test_support::KUBELET_SERVING_SIGNER;

fn object<T: DeserializeOwned>(value: Value) -> anyhow::Result<T> {
    Ok(serde_json::from_value(value)?)
}

/// A fresh key's serving request for `node`, whose body claims to be
/// `claimed_user`'s.
fn csr(name: &str, node: &str, claimed_user: &str) -> anyhow::Result<CertificateSigningRequest> {
    let pem = ccm_test_support::kubelet_serving_request(
        &format!("system:node:{node}"),
        &[&format!("{node}.example")],
    );
    let mut csr =
        ccm_test_support::kubelet_serving_csr(name, &pem, &["digital signature", "server auth"]);
    csr.spec.username = Some(claimed_user.to_owned());
    Ok(csr)
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

/// A ClusterRole `role` of `rules`, bound to `subject`.
async fn grant(
    t: &support::Target,
    role: &str,
    rules: Value,
    subject: Value,
) -> anyhow::Result<()> {
    let roles: Api<ClusterRole> = Api::all(t.client());
    roles
        .create(
            &PostParams::default(),
            &object(json!({"metadata": {"name": role}, "rules": rules}))?,
        )
        .await?;
    let bindings: Api<ClusterRoleBinding> = Api::all(t.client());
    bindings
        .create(
            &PostParams::default(),
            &object(json!({
                "metadata": {"name": role},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
                "subjects": [subject]
            }))?,
        )
        .await?;
    Ok(())
}

/// Removes what [`grant`] made.
async fn revoke(t: &support::Target, role: &str) -> anyhow::Result<()> {
    Api::<ClusterRoleBinding>::all(t.client())
        .delete(role, &DeleteParams::default())
        .await?;
    Api::<ClusterRole>::all(t.client())
        .delete(role, &DeleteParams::default())
        .await?;
    Ok(())
}

/// Lets the group `system:nodes` create requests, as a cluster that
/// rotates kubelet certificates does; answers the role's name.
async fn nodes_may_request(t: &support::Target) -> anyhow::Result<String> {
    let role = ccm_test_support::unique("node-csr");
    grant(
        t,
        &role,
        json!([{"apiGroups": ["certificates.k8s.io"], "resources": ["certificatesigningrequests"], "verbs": ["create", "get"]}]),
        json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:nodes"}),
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
        revoke(t, &role).await
    }
);

auth_contract_test!(approving_needs_approve_on_the_signer, |t| {
    let user = ccm_test_support::unique("csr-approver");
    let role = ccm_test_support::unique("csr-approval");
    grant(
        t,
        &role,
        json!([{"apiGroups": ["certificates.k8s.io"], "resources": ["certificatesigningrequests/approval"], "verbs": ["update"]}]),
        json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}),
    )
    .await?;
    let roles: Api<ClusterRole> = Api::all(t.client());
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
    revoke(t, &role).await
});

contract_test!(an_invalid_request_is_refused_field_by_field, |t| {
    let name = ccm_test_support::unique("csr-invalid");
    let body = json!({"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
        "metadata": {"name": name},
        "spec": {"request": "aGVsbG8=", "signerName": "example.com/x",
                 "usages": ["digital signature", "bogus", "digital signature"], "expirationSeconds": 5}});
    let (code, refused) = support::raw(
        &t.client(),
        http::Method::POST,
        "/apis/certificates.k8s.io/v1/certificatesigningrequests",
        Some(&body),
    )
    .await?;
    assert_eq!(code, 422);
    let causes: Vec<(String, String)> = refused["details"]["causes"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            let text = |key: &str| c[key].as_str().unwrap_or_default().to_owned();
            (text("field"), text("message"))
        })
        .collect();
    // The request's bytes are shown as JSON shows bytes: base64.
    let want = [
        ("spec.request", "Invalid value: \"aGVsbG8=\": PEM block type must be CERTIFICATE REQUEST".to_owned()),
        ("spec.usages[1]", format!("Unsupported value: \"bogus\": supported values: {}",
            "\"any\", \"cert sign\", \"client auth\", \"code signing\", \"content commitment\", \
             \"crl sign\", \"data encipherment\", \"decipher only\", \"digital signature\", \
             \"email protection\", \"encipher only\", \"ipsec end system\", \"ipsec tunnel\", \
             \"ipsec user\", \"key agreement\", \"key encipherment\", \"microsoft sgc\", \
             \"netscape sgc\", \"ocsp signing\", \"s/mime\", \"server auth\", \"signing\", \
             \"timestamping\"")),
        ("spec.usages[2]", "Duplicate value: \"digital signature\"".to_owned()),
        ("spec.expirationSeconds", "Invalid value: 5: may not specify a duration less than 600 seconds (10 minutes)".to_owned()),
    ]
    .map(|(field, message)| (field.to_owned(), message));
    assert_eq!(causes, want);
    Ok(())
});
