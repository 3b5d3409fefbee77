//! Contract: authentication (static and ServiceAccount tokens, anonymous
//! requests), TokenRequest and TokenReview, as kube-apiserver answers them
//! with `--token-auth-file` and `--authorization-mode=Node,RBAC`.

use crate::support;

use std::time::Duration;

use anyhow::Context;
use http::Method;
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, ServiceAccount};
use kube::Api;
use kube::api::{DeleteParams, PostParams};
use serde_json::{Value, json};
use support::raw;

/// The audience kube-apiserver (and the test control plane) serves.
const API_AUDIENCE: &str = "https://kubernetes.default.svc.cluster.local";

/// A new namespace with a ServiceAccount `name` in it, and a token for it.
async fn account(
    t: &support::Target,
    name: &str,
    audiences: &[&str],
) -> anyhow::Result<(String, ServiceAccount, String)> {
    let ns = ccm_test_support::unique("auth");
    let namespaces: Api<Namespace> = Api::all(t.client());
    namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": ns}}))?,
        )
        .await?;
    let accounts: Api<ServiceAccount> = Api::namespaced(t.client(), &ns);
    let sa = accounts
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": name}}))?,
        )
        .await?;
    let request = TokenRequest {
        spec: TokenRequestSpec {
            audiences: audiences.iter().map(|a| a.to_string()).collect(),
            ..Default::default()
        },
        ..Default::default()
    };
    let issued = accounts
        .create_token_request(name, &PostParams::default(), &request)
        .await?;
    let token = issued.status.context("a TokenRequest status")?.token;
    Ok((ns, sa, token))
}

async fn delete_namespace(t: &support::Target, ns: &str) -> anyhow::Result<()> {
    let namespaces: Api<Namespace> = Api::all(t.client());
    namespaces.delete(ns, &DeleteParams::default()).await?;
    Ok(())
}

async fn token_review(
    t: &support::Target,
    token: &str,
    audiences: Option<&[&str]>,
) -> anyhow::Result<(u16, Value)> {
    let mut spec = json!({"token": token});
    if let Some(audiences) = audiences {
        spec["audiences"] = json!(audiences);
    }
    let body =
        json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": spec});
    raw(
        &t.client(),
        Method::POST,
        "/apis/authentication.k8s.io/v1/tokenreviews",
        Some(&body),
    )
    .await
}

auth_contract_test!(unknown_bearer_tokens_are_401_with_a_status, |t| {
    let client = t.client_as(Some("not-a-token-anyone-issued"))?;
    let (code, body) = raw(&client, Method::GET, "/api/v1/namespaces", None).await?;
    assert_eq!(code, 401);
    assert_eq!(
        body,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
               "message": "Unauthorized", "reason": "Unauthorized", "code": 401})
    );
    let (code, _) = raw(&client, Method::GET, "/version", None).await?;
    assert_eq!(
        code, 401,
        "even public paths need a valid token once one is sent"
    );
    Ok(())
});

auth_contract_test!(anonymous_requests_see_only_public_information, |t| {
    let anonymous = t.client_as(None)?;
    let (code, version) = raw(&anonymous, Method::GET, "/version", None).await?;
    assert_eq!((code, version["major"].as_str()), (200, Some("1")));
    let (code, body) = raw(&anonymous, Method::GET, "/api/v1/nodes/x", None).await?;
    assert_eq!(code, 403);
    assert_eq!(
        body,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
               "message": "nodes \"x\" is forbidden: User \"system:anonymous\" cannot get resource \"nodes\" in API group \"\" at the cluster scope",
               "reason": "Forbidden", "details": {"name": "x", "kind": "nodes"}, "code": 403})
    );
    let (code, body) = raw(&anonymous, Method::GET, "/api", None).await?;
    assert_eq!(code, 403);
    assert_eq!(
        body["message"],
        "forbidden: User \"system:anonymous\" cannot get path \"/api\""
    );
    assert_eq!(body["details"], json!({}));
    // Authorization comes before routing: a resource nobody serves is 403.
    let (code, body) = raw(&anonymous, Method::GET, "/apis/foo/v1/bars", None).await?;
    assert_eq!(code, 403);
    assert_eq!(
        body["message"],
        "bars.foo is forbidden: User \"system:anonymous\" cannot list resource \"bars\" in API group \"foo\" at the cluster scope"
    );
    assert_eq!(body["details"], json!({"group": "foo", "kind": "bars"}));
    Ok(())
});

auth_contract_test!(service_account_tokens_authenticate_as_the_account, |t| {
    let (ns, sa, token) = account(t, "reader", &[]).await?;
    let client = t.client_as(Some(&token))?;
    // Authenticated users may discover the API (system:discovery).
    let (code, _) = raw(&client, Method::GET, "/api/v1", None).await?;
    assert_eq!(code, 200);
    let configmaps: Api<ConfigMap> = Api::namespaced(client, &ns);
    let err = configmaps
        .list(&Default::default())
        .await
        .expect_err("no role grants it");
    let kube::Error::Api(status) = err else {
        anyhow::bail!("not an API error: {err}");
    };
    assert_eq!(status.code, 403);
    assert_eq!(
        status.message,
        format!(
            "configmaps is forbidden: User \"system:serviceaccount:{ns}:reader\" cannot list resource \"configmaps\" in API group \"\" in the namespace \"{ns}\""
        )
    );
    let (code, review) = token_review(t, &token, None).await?;
    assert_eq!(code, 201);
    let status = &review["status"];
    assert_eq!(status["authenticated"], true);
    assert_eq!(
        status["user"]["username"],
        format!("system:serviceaccount:{ns}:reader")
    );
    assert_eq!(status["user"]["uid"].as_str(), sa.metadata.uid.as_deref());
    assert_eq!(
        status["user"]["groups"],
        json!([
            "system:serviceaccounts",
            format!("system:serviceaccounts:{ns}"),
            "system:authenticated"
        ])
    );
    assert_eq!(status["audiences"], json!([API_AUDIENCE]));
    assert!(
        status["user"]["extra"]["authentication.kubernetes.io/credential-id"][0]
            .as_str()
            .is_some_and(|id| id.starts_with("JTI="))
    );
    delete_namespace(t, &ns).await
});

auth_contract_test!(token_audiences_must_match, |t| {
    let (ns, _, token) = account(t, "audience", &["https://example.com/foo"]).await?;
    let (_, review) = token_review(t, &token, Some(&["https://example.com/foo", "bar"])).await?;
    assert_eq!(review["status"]["authenticated"], true);
    assert_eq!(
        review["status"]["audiences"],
        json!(["https://example.com/foo"])
    );
    let (_, review) = token_review(t, &token, None).await?;
    assert_eq!(review["status"].get("authenticated"), None);
    assert_eq!(review["status"]["user"], json!({}));
    assert!(
        review["status"]["error"]
            .as_str()
            .is_some_and(|e| e.contains("invalid bearer token")),
        "{review}"
    );
    // Nor may it talk to the API server, whose audience it lacks.
    let client = t.client_as(Some(&token))?;
    let (code, _) = raw(&client, Method::GET, "/api/v1", None).await?;
    assert_eq!(code, 401);
    delete_namespace(t, &ns).await
});

auth_contract_test!(token_reviews_of_unknown_or_missing_tokens, |t| {
    let (code, review) = token_review(t, "bogus", None).await?;
    assert_eq!(code, 201);
    assert_eq!(
        review["status"],
        json!({"user": {}, "error": "invalid bearer token"})
    );
    let (code, body) = token_review(t, "", None).await?;
    assert_eq!(code, 400);
    assert_eq!(
        body["message"],
        "token is required for TokenReview in authentication"
    );
    let (code, _) = raw(
        &t.client(),
        Method::GET,
        "/apis/authentication.k8s.io/v1/tokenreviews",
        None,
    )
    .await?;
    assert_eq!(code, 405);
    Ok(())
});

auth_contract_test!(token_requests_default_and_refuse_short_lifetimes, |t| {
    let (ns, _, _) = account(t, "lifetimes", &[]).await?;
    let path = format!("/api/v1/namespaces/{ns}/serviceaccounts/lifetimes/token");
    let body =
        json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}});
    let (code, issued) = raw(&t.client(), Method::POST, &path, Some(&body)).await?;
    assert_eq!(code, 201);
    assert_eq!(issued["spec"]["expirationSeconds"], 3600);
    assert_eq!(issued["spec"]["audiences"], json!([API_AUDIENCE]));
    assert_eq!(issued["metadata"]["name"], "lifetimes");
    let expires: jiff::Timestamp = issued["status"]["expirationTimestamp"]
        .as_str()
        .context("expirationTimestamp")?
        .parse()?;
    let lifetime = expires.duration_since(jiff::Timestamp::now());
    assert!((3590..=3601).contains(&lifetime.as_secs()), "{lifetime:?}");
    let token = issued["status"]["token"].as_str().context("a token")?;
    assert!(token.len() >= 32, "tokens are long random strings");
    let short = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": 599}});
    let (code, refused) = raw(&t.client(), Method::POST, &path, Some(&short)).await?;
    assert_eq!(code, 422);
    assert_eq!(
        refused["message"],
        "TokenRequest.authentication.k8s.io \"\" is invalid: spec.expirationSeconds: Invalid value: 599: may not specify a duration less than 10 minutes"
    );
    let renamed = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "metadata": {"name": "other"}, "spec": {}});
    let (code, refused) = raw(&t.client(), Method::POST, &path, Some(&renamed)).await?;
    assert_eq!(code, 422);
    assert_eq!(
        refused["message"],
        "TokenRequest.authentication.k8s.io \"lifetimes\" is invalid: metadata.name: Invalid value: \"other\": must match the service account name if specified"
    );
    // A missing account is 404 before the lifetime is looked at.
    let missing = format!("/api/v1/namespaces/{ns}/serviceaccounts/nobody/token");
    let (code, refused) = raw(&t.client(), Method::POST, &missing, Some(&short)).await?;
    assert_eq!(code, 404);
    assert_eq!(refused["message"], "serviceaccounts \"nobody\" not found");
    delete_namespace(t, &ns).await
});

auth_contract_test!(a_deleted_service_account_takes_its_tokens_along, |t| {
    let (ns, _, token) = account(t, "doomed", &[]).await?;
    let (_, review) = token_review(t, &token, None).await?;
    assert_eq!(review["status"]["authenticated"], true);
    let accounts: Api<ServiceAccount> = Api::namespaced(t.client(), &ns);
    accounts.delete("doomed", &DeleteParams::default()).await?;
    ccm_test_support::eventually(
        "the deleted account's token to stop authenticating",
        Duration::from_secs(30),
        || async {
            let (_, review) = token_review(t, &token, None).await?;
            anyhow::Ok(
                review["status"]
                    .get("authenticated")
                    .is_none()
                    .then_some(()),
            )
        },
    )
    .await?;
    delete_namespace(t, &ns).await
});

auth_contract_test!(the_client_ca_is_published_for_extension_apiservers, |t| {
    let configmaps: Api<ConfigMap> = Api::namespaced(t.client(), "kube-system");
    let published = configmaps.get("extension-apiserver-authentication").await?;
    let data = published.data.unwrap_or_default();
    // No requestheader flags: no requestheader-* keys.
    assert_eq!(data.keys().collect::<Vec<_>>(), ["client-ca-file"]);
    assert!(data["client-ca-file"].starts_with("-----BEGIN CERTIFICATE-----"));
    if t.server().is_some() {
        assert_eq!(data["client-ca-file"], support::CLIENT_CA);
    }
    Ok(())
});
