//! What the server does not implement, it refuses loudly with a `Status`.

use anyhow::{Context, bail};
use ccm_test_apiserver::TestApiServer;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::Api;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams, PropagationPolicy};
use serde_json::{Value, json};

/// Sends a raw request; answers the status code and the JSON body.
async fn send(
    server: &TestApiServer,
    request: http::Request<Vec<u8>>,
) -> anyhow::Result<(u16, Value)> {
    let response = server
        .client()
        .send(request.map(kube::client::Body::from))
        .await?;
    let code = response.status().as_u16();
    let bytes = http_body_util::BodyExt::collect(response.into_body())
        .await?
        .to_bytes();
    Ok((code, serde_json::from_slice(&bytes).unwrap_or(Value::Null)))
}

async fn create_cm(server: &TestApiServer, ns: &str, body: Value) -> anyhow::Result<ConfigMap> {
    let cms: Api<ConfigMap> = Api::namespaced(server.client(), ns);
    Ok(cms
        .create(&PostParams::default(), &serde_json::from_value(body)?)
        .await?)
}

#[tokio::test]
async fn server_side_apply_is_415_and_says_why() -> anyhow::Result<()> {
    let server = TestApiServer::start().await?;
    create_cm(&server, "default", json!({"metadata": {"name": "a"}})).await?;
    let cms: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    let apply = Patch::Apply(
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}, "data": {"k": "v"}}),
    );
    match cms.patch("a", &PatchParams::apply("test"), &apply).await {
        Err(kube::Error::Api(s)) => {
            assert_eq!((s.code, s.reason.as_str()), (415, "UnsupportedMediaType"));
            assert!(s.message.contains("server-side apply"), "{}", s.message);
        }
        other => bail!("apply must be refused, got {other:?}"),
    }
    Ok(())
}

#[tokio::test]
async fn yaml_bodies_and_protobuf_only_watches_are_refused() -> anyhow::Result<()> {
    let server = TestApiServer::start().await?;
    let yaml = http::Request::post("/api/v1/namespaces/default/configmaps")
        .header("content-type", "application/yaml")
        .body(b"metadata:\n  name: a\n".to_vec())?;
    let (code, status) = send(&server, yaml).await?;
    assert_eq!(
        (code, status["reason"].as_str()),
        (415, Some("UnsupportedMediaType"))
    );
    let protobuf = http::Request::get("/api/v1/nodes?watch=true")
        .header("accept", "application/vnd.kubernetes.protobuf")
        .body(Vec::new())?;
    let (code, status) = send(&server, protobuf).await?;
    assert_eq!(
        (code, status["reason"].as_str()),
        (406, "NotAcceptable".into())
    );
    Ok(())
}

#[tokio::test]
async fn table_requests_get_tables_older_table_versions_json_and_metadata_requests_partial_metadata()
-> anyhow::Result<()> {
    let server = TestApiServer::builder().seed_nodes(2).start().await?;
    let table = http::Request::get("/api/v1/nodes")
        .header(
            "accept",
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json",
        )
        .body(Vec::new())?;
    let (code, list) = send(&server, table).await?;
    assert_eq!((code, list["kind"].as_str()), (200, Some("Table")));
    assert_eq!(list["rows"].as_array().map(Vec::len), Some(2));
    let older = http::Request::get("/api/v1/nodes")
        .header(
            "accept",
            "application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json",
        )
        .body(Vec::new())?;
    let (code, list) = send(&server, older).await?;
    assert_eq!((code, list["kind"].as_str()), (200, Some("NodeList")));
    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(server.client());
    let metadata = nodes.list_metadata(&ListParams::default()).await?;
    assert_eq!(metadata.items.len(), 2);
    assert_eq!(
        nodes.get_metadata("node-1").await?.metadata.name.as_deref(),
        Some("node-1")
    );
    Ok(())
}

#[tokio::test]
async fn foreground_deletion_with_dependents_is_501() -> anyhow::Result<()> {
    let server = TestApiServer::start().await?;
    let owner = create_cm(&server, "default", json!({"metadata": {"name": "owner"}})).await?;
    let uid = owner.metadata.uid.context("uid")?;
    let reference = json!({"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": uid});
    create_cm(
        &server,
        "default",
        json!({"metadata": {"name": "dependent", "ownerReferences": [reference]}}),
    )
    .await?;
    let cms: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    let foreground = DeleteParams {
        propagation_policy: Some(PropagationPolicy::Foreground),
        ..Default::default()
    };
    match cms.delete("owner", &foreground).await {
        Err(kube::Error::Api(s)) => {
            assert_eq!(s.code, 501);
            assert!(s.message.contains("garbage collector"), "{}", s.message);
        }
        other => bail!("foreground deletion with dependents must be refused, got {other:?}"),
    }
    assert!(cms.get_opt("owner").await?.is_some());
    cms.delete("owner", &DeleteParams::background()).await?;
    assert!(
        cms.get_opt("dependent").await?.is_some(),
        "no garbage collector deletes dependents"
    );
    Ok(())
}

#[tokio::test]
async fn openapi_v2_and_v3_are_served_and_other_openapi_paths_are_not() -> anyhow::Result<()> {
    let server = TestApiServer::start().await?;
    let (code, v2) = send(&server, http::Request::get("/openapi/v2").body(Vec::new())?).await?;
    assert_eq!(code, 200);
    assert_eq!(v2["swagger"], "2.0");
    assert!(v2["definitions"]["io.k8s.api.core.v1.Node"].is_object());
    let (code, status) = send(&server, http::Request::get("/openapi/v4").body(Vec::new())?).await?;
    assert_eq!(code, 404);
    assert!(
        status["message"]
            .as_str()
            .is_some_and(|m| m.contains("/openapi/v3")),
        "{status}"
    );
    let (code, root) = send(&server, http::Request::get("/openapi/v3").body(Vec::new())?).await?;
    assert_eq!(code, 200);
    let url = root["paths"]["api/v1"]["serverRelativeURL"]
        .as_str()
        .context("the core group's document")?;
    let (code, doc) = send(&server, http::Request::get(url).body(Vec::new())?).await?;
    assert_eq!(code, 200);
    assert_eq!(doc["openapi"], "3.0.0");
    assert!(doc["components"]["schemas"]["io.k8s.api.core.v1.Node"].is_object());
    Ok(())
}

#[tokio::test]
async fn namespaces_stay_terminating_without_a_namespace_controller() -> anyhow::Result<()> {
    let server = TestApiServer::start().await?;
    let namespaces: Api<Namespace> = Api::all(server.client());
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": "doomed"}}))?;
    let created = namespaces.create(&PostParams::default(), &ns).await?;
    assert_eq!(
        created.spec.and_then(|s| s.finalizers),
        Some(vec!["kubernetes".to_owned()])
    );
    namespaces
        .delete("doomed", &DeleteParams::default())
        .await?;
    let terminating = namespaces.get("doomed").await?;
    assert_eq!(
        terminating.status.and_then(|s| s.phase).as_deref(),
        Some("Terminating")
    );
    match create_cm(&server, "doomed", json!({"metadata": {"name": "late"}})).await {
        Err(e) => match e.downcast_ref::<kube::Error>() {
            Some(kube::Error::Api(s)) => {
                assert_eq!((s.code, s.reason.as_str()), (403, "Forbidden"));
            }
            _ => bail!("unexpected error {e:#}"),
        },
        Ok(_) => bail!("content in a terminating namespace must be refused"),
    }
    let mut finalize = namespaces.get("doomed").await?;
    finalize.spec = None;
    let body = serde_json::to_vec(&finalize)?;
    let request = http::Request::put("/api/v1/namespaces/doomed/finalize")
        .header("content-type", "application/json")
        .body(body)?;
    let (code, _) = send(&server, request).await?;
    assert_eq!(code, 200);
    assert!(namespaces.get_opt("doomed").await?.is_none());
    Ok(())
}
