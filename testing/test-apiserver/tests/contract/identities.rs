//! What only the test API server can show about authentication: token
//! expiry on demand, the request log's user, token-file users and errors,
//! and the settings a real cluster fixes (anonymous requests, no token file).

use crate::support;

use anyhow::Context;
use ccm_test_apiserver::{AuthorizationMode, Error, TestApiServer};
use http::Method;
use k8s_openapi::api::authentication::v1::TokenRequest;
use k8s_openapi::api::core::v1::{Node, ServiceAccount};
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::json;
use support::raw;

/// Tokens for an administrator, alice (groups ops and dev) and bob.
const TOKENS: &str = "admin-token,root,root-uid,system:masters\n\
                      alice-token,alice,alice-uid,\"ops,dev\"\n\
                      bob-token,bob,bob-uid\n";

async fn server_with(tokens: &str, mode: AuthorizationMode) -> anyhow::Result<TestApiServer> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("tokens.csv");
    std::fs::write(&path, tokens)?;
    Ok(TestApiServer::builder()
        .token_auth_file(&path)
        .authorization_mode(mode)
        .seed_nodes(1)
        .start()
        .await?)
}

/// A ServiceAccount `kube-system/name` and a token TokenRequest issued it.
async fn account_token(server: &TestApiServer, name: &str) -> anyhow::Result<String> {
    let accounts: Api<ServiceAccount> = Api::namespaced(server.client(), "kube-system");
    let sa = serde_json::from_value(json!({"metadata": {"name": name}}))?;
    accounts.create(&PostParams::default(), &sa).await?;
    let issued = accounts
        .create_token_request(name, &PostParams::default(), &TokenRequest::default())
        .await?;
    Ok(issued.status.context("status")?.token)
}

async fn review(server: &TestApiServer, token: &str) -> anyhow::Result<serde_json::Value> {
    let body = json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}});
    let path = "/apis/authentication.k8s.io/v1/tokenreviews";
    Ok(raw(&server.client(), Method::POST, path, Some(&body))
        .await?
        .1)
}

#[tokio::test]
async fn expired_service_account_tokens_are_refused() -> anyhow::Result<()> {
    let server = server_with(TOKENS, AuthorizationMode::AlwaysAllow).await?;
    let token = account_token(&server, "node-controller").await?;
    let client = server.client_with_token(&token)?;
    assert_eq!(
        raw(&client, Method::GET, "/api/v1/nodes", None).await?.0,
        200
    );
    assert_eq!(
        server.expire_service_account_tokens("kube-system", "node-controller"),
        1
    );
    assert_eq!(
        raw(&client, Method::GET, "/api/v1/nodes", None).await?.0,
        401
    );
    let reviewed = review(&server, &token).await?;
    assert_eq!(reviewed["status"].get("authenticated"), None, "{reviewed}");
    // The same over HTTP, for another process.
    let second = account_token(&server, "other").await?;
    let fresh = account_token_again(&server, "node-controller").await?;
    let path = "/testapi/serviceaccounts/kube-system/node-controller/expire-tokens";
    let (code, expired) = raw(&server.client(), Method::POST, path, None).await?;
    assert_eq!((code, expired), (200, json!({"expired": 1})));
    let fresh_client = server.client_with_token(&fresh)?;
    assert_eq!(
        raw(&fresh_client, Method::GET, "/api/v1/nodes", None)
            .await?
            .0,
        401
    );
    let other = server.client_with_token(&second)?;
    assert_eq!(
        raw(&other, Method::GET, "/api/v1/nodes", None).await?.0,
        200,
        "another account's tokens live on"
    );
    Ok(())
}

async fn account_token_again(server: &TestApiServer, name: &str) -> anyhow::Result<String> {
    let accounts: Api<ServiceAccount> = Api::namespaced(server.client(), "kube-system");
    let issued = accounts
        .create_token_request(name, &PostParams::default(), &TokenRequest::default())
        .await?;
    Ok(issued.status.context("status")?.token)
}

#[tokio::test]
async fn the_request_log_records_who_made_each_request() -> anyhow::Result<()> {
    let server = server_with(TOKENS, AuthorizationMode::AlwaysAllow).await?;
    let token = account_token(&server, "node-controller").await?;
    server.reset_stats();
    let nodes: Api<Node> = Api::all(server.client_with_token(&token)?);
    let label = Patch::Merge(json!({"metadata": {"labels": {"a": "b"}}}));
    nodes
        .patch("node-1", &PatchParams::default(), &label)
        .await?;
    let alice = server.client_with_token("alice-token")?;
    raw(&alice, Method::GET, "/api/v1/nodes/node-1", None).await?;
    raw(
        &server.client_with_token("stolen")?,
        Method::GET,
        "/api/v1/nodes",
        None,
    )
    .await?;
    let anonymous = kube::Client::try_from(kube::Config::new(server.url().parse()?))?;
    raw(&anonymous, Method::GET, "/version", None).await?;
    let users: Vec<(String, Option<String>, u16)> = server
        .requests()
        .into_iter()
        .map(|r| (r.verb, r.user, r.status))
        .collect();
    assert_eq!(
        users,
        [
            (
                "patch".to_owned(),
                Some("system:serviceaccount:kube-system:node-controller".to_owned()),
                200
            ),
            ("get".to_owned(), Some("alice".to_owned()), 200),
            ("list".to_owned(), None, 401),
            ("get".to_owned(), Some("system:anonymous".to_owned()), 200),
        ]
    );
    let log = serde_json::to_value(server.requests())?;
    assert_eq!(log[1]["user"], "alice");
    Ok(())
}

#[tokio::test]
async fn without_a_token_file_nothing_is_authenticated() -> anyhow::Result<()> {
    let server = TestApiServer::builder()
        .authorization_mode(AuthorizationMode::Rbac)
        .start()
        .await?;
    let stranger = server.client_with_token("anything")?;
    assert_eq!(
        raw(&stranger, Method::GET, "/api/v1/nodes", None).await?.0,
        200
    );
    let record = server.requests().pop().context("a record")?;
    assert_eq!(record.user, None);
    let log = serde_json::to_value(&record)?;
    assert_eq!(log.get("user"), None, "the log's JSON is as before");
    // SubjectAccessReviews are still decided by RBAC.
    let body = json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
        "spec": {"user": "bob", "resourceAttributes": {"verb": "get", "resource": "nodes"}}});
    let path = "/apis/authorization.k8s.io/v1/subjectaccessreviews";
    let (_, answer) = raw(&server.client(), Method::POST, path, Some(&body)).await?;
    assert_eq!(answer["status"], json!({"allowed": false}));
    let always = TestApiServer::start().await?;
    let (_, answer) = raw(&always.client(), Method::POST, path, Some(&body)).await?;
    assert_eq!(
        answer["status"],
        json!({"allowed": true}),
        "AlwaysAllow allows"
    );
    Ok(())
}

#[tokio::test]
async fn token_file_users_get_their_groups_and_system_authenticated() -> anyhow::Result<()> {
    let server = server_with(TOKENS, AuthorizationMode::Rbac).await?;
    let reviewed = review(&server, "alice-token").await?;
    assert_eq!(
        reviewed["status"],
        json!({"authenticated": true, "audiences": ["https://kubernetes.default.svc.cluster.local"],
               "user": {"username": "alice", "uid": "alice-uid", "groups": ["ops", "dev", "system:authenticated"]}})
    );
    // bob is authenticated but granted nothing beyond discovery.
    let bob = server.client_with_token("bob-token")?;
    assert_eq!(raw(&bob, Method::GET, "/api/v1", None).await?.0, 200);
    let (code, refused) = raw(&bob, Method::GET, "/api/v1/nodes", None).await?;
    assert_eq!(code, 403);
    assert_eq!(
        refused["message"],
        "nodes is forbidden: User \"bob\" cannot list resource \"nodes\" in API group \"\" at the cluster scope"
    );
    // The kubeconfig's user is the file's system:masters user.
    let kubeconfig = std::fs::read_to_string(server.kubeconfig_path())?;
    assert!(kubeconfig.contains("token: admin-token"), "{kubeconfig}");
    Api::<Node>::all(server.client()).get("node-1").await?;
    assert_eq!(
        server.requests().pop().and_then(|r| r.user).as_deref(),
        Some("root")
    );
    Ok(())
}

#[tokio::test]
async fn without_a_masters_token_the_client_is_a_minted_administrator() -> anyhow::Result<()> {
    let server = server_with("bob-token,bob,bob-uid\n", AuthorizationMode::Rbac).await?;
    Api::<Node>::all(server.client()).get("node-1").await?;
    assert_eq!(
        server.requests().pop().and_then(|r| r.user).as_deref(),
        Some("system:apiserver")
    );
    let kubeconfig = std::fs::read_to_string(server.kubeconfig_path())?;
    assert!(!kubeconfig.contains("bob-token"), "{kubeconfig}");
    Ok(())
}

#[tokio::test]
async fn without_anonymous_requests_a_missing_token_is_401() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("tokens.csv");
    std::fs::write(&path, TOKENS)?;
    let server = TestApiServer::builder()
        .token_auth_file(&path)
        .anonymous_auth(false)
        .start()
        .await?;
    let anonymous = kube::Client::try_from(kube::Config::new(server.url().parse()?))?;
    let (code, body) = raw(&anonymous, Method::GET, "/version", None).await?;
    assert_eq!((code, body["reason"].as_str()), (401, Some("Unauthorized")));
    assert_eq!(
        raw(&server.client(), Method::GET, "/version", None)
            .await?
            .0,
        200
    );
    Ok(())
}

#[tokio::test]
async fn a_malformed_token_file_is_refused_naming_the_line() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("tokens.csv");
    std::fs::write(
        &path,
        "admin-token,root,root-uid\nsecret-token,only-a-name\n",
    )?;
    let err = TestApiServer::builder()
        .token_auth_file(&path)
        .start()
        .await
        .expect_err("two columns are too few");
    assert!(matches!(err, Error::TokenFile { line: 2, .. }), "{err:?}");
    let message = err.to_string();
    assert!(message.contains("tokens.csv, line 2"), "{message}");
    assert!(!message.contains("secret-token"), "{message}");
    let missing = TestApiServer::builder()
        .token_auth_file(dir.path().join("absent.csv"))
        .start()
        .await
        .expect_err("no such file");
    assert!(
        matches!(missing, Error::TokenFileRead { .. }),
        "{missing:?}"
    );
    Ok(())
}
