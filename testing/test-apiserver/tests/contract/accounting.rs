//! Request accounting: counters, open watches and the request log, through
//! the library and over HTTP.

use std::time::Duration;

use anyhow::Context;
use ccm_test_apiserver::{RequestRecord, Stats, TestApiServer, Verb};
use ccm_test_support::eventually;
use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Node, Service};
use kube::Api;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchParams};
use serde_json::json;

async fn get_text(server: &TestApiServer, path: &str) -> anyhow::Result<String> {
    let request = http::Request::get(path).body(Vec::new())?;
    Ok(server.client().request_text(request).await?)
}

#[tokio::test]
async fn requests_are_counted_by_verb_resource_and_subresource() -> anyhow::Result<()> {
    let server = TestApiServer::builder().seed_nodes(2).start().await?;
    let nodes: Api<Node> = Api::all(server.client());
    let cms: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    nodes.get("node-1").await?;
    nodes.list(&ListParams::default()).await?;
    let label = Patch::Merge(json!({"metadata": {"labels": {"a": "b"}}}));
    nodes
        .patch("node-1", &PatchParams::default(), &label)
        .await?;
    nodes
        .patch_status("node-1", &PatchParams::default(), &label)
        .await?;
    nodes
        .patch_status("node-2", &PatchParams::default(), &label)
        .await?;
    let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "a"}}))?;
    let created = cms.create(&PostParams::default(), &cm).await?;
    cms.replace("a", &PostParams::default(), &created).await?;
    cms.delete("a", &DeleteParams::default()).await?;
    cms.delete_collection(&DeleteParams::default(), &ListParams::default())
        .await?;
    let stats = server.stats();
    assert_eq!(stats.count(Verb::Get, "nodes"), 1);
    assert_eq!(stats.count(Verb::List, "nodes"), 1);
    assert_eq!(stats.count(Verb::Patch, "nodes"), 1);
    assert_eq!(stats.count_subresource(Verb::Patch, "nodes", "status"), 2);
    assert_eq!(stats.writes("nodes"), 3);
    for verb in [
        Verb::Create,
        Verb::Update,
        Verb::Delete,
        Verb::DeleteCollection,
    ] {
        assert_eq!(stats.count(verb, "configmaps"), 1, "{verb}");
    }
    assert_eq!(stats.total(), 9);
    server.reset_stats();
    assert_eq!(server.stats().total(), 0);
    assert!(server.requests().is_empty());
    Ok(())
}

#[tokio::test]
async fn open_watches_are_counted_per_resource_while_open() -> anyhow::Result<()> {
    let server = TestApiServer::start().await?;
    let nodes: Api<Node> = Api::all(server.client());
    let services: Api<Service> = Api::all(server.client());
    let from = server.resource_version().to_string();
    let node_watch = nodes.watch(&WatchParams::default(), &from).await?.boxed();
    let service_watch = services
        .watch(&WatchParams::default(), &from)
        .await?
        .boxed();
    let stats = server.stats();
    assert_eq!(stats.open_watches, 2);
    assert_eq!(
        (
            stats.open_watches_on("nodes"),
            stats.open_watches_on("services")
        ),
        (1, 1)
    );
    assert_eq!(stats.count(Verb::Watch, "nodes"), 1);
    drop((node_watch, service_watch));
    eventually(
        "the watches to be counted closed",
        Duration::from_secs(10),
        || async { (server.stats().open_watches == 0).then_some(()) },
    )
    .await?;
    Ok(())
}

#[tokio::test]
async fn the_request_log_keeps_what_rbac_needs() -> anyhow::Result<()> {
    let server = TestApiServer::start().await?;
    let mut config = kube::Config::new(server.url().parse()?);
    config.headers.push((
        http::header::USER_AGENT,
        http::HeaderValue::from_static("accounting-test/1.0"),
    ));
    let client = kube::Client::try_from(config)?;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "kube-system");
    assert!(cms.get_opt("missing").await?.is_none());
    client.apiserver_version().await?;
    let log = server.requests();
    let get = log
        .iter()
        .find(|r| r.resource == "configmaps")
        .context("logged")?;
    assert_eq!(
        (
            get.verb.as_str(),
            get.namespace.as_str(),
            get.name.as_str(),
            get.status
        ),
        ("get", "kube-system", "missing", 404)
    );
    assert_eq!(
        get.path,
        "/api/v1/namespaces/kube-system/configmaps/missing"
    );
    assert_eq!(get.user_agent, "accounting-test/1.0");
    let version = log
        .iter()
        .find(|r| r.path == "/version")
        .context("non-resource requests are logged")?;
    assert_eq!(
        (version.verb.as_str(), version.resource.as_str()),
        ("get", "")
    );
    assert_eq!(server.stats().non_resource.get("/version"), Some(&1));

    // A list of exactly one object by field selector is logged under that
    // name, as kube-apiserver's request info names it for authorization.
    cms.list(&ListParams::default().fields("metadata.name=one"))
        .await?;
    cms.list(&ListParams::default().fields("metadata.name!=one"))
        .await?;
    let log = server.requests();
    let lists: Vec<&str> = log
        .iter()
        .filter(|r| r.resource == "configmaps" && r.verb == "list")
        .map(|r| r.name.as_str())
        .collect();
    assert_eq!(lists, ["one", ""]);
    Ok(())
}

#[tokio::test]
async fn stats_and_the_request_log_are_served_over_http() -> anyhow::Result<()> {
    let server = TestApiServer::builder().seed_nodes(1).start().await?;
    Api::<Node>::all(server.client()).get("node-1").await?;
    let served: Stats = serde_json::from_str(&get_text(&server, "/testapi/stats").await?)?;
    assert_eq!(
        served,
        server.stats(),
        "reading the stats is not itself counted"
    );
    assert_eq!(served.count(Verb::Get, "nodes"), 1);
    let log: serde_json::Value =
        serde_json::from_str(&get_text(&server, "/testapi/requests").await?)?;
    let records: Vec<RequestRecord> = serde_json::from_value(log["records"].clone())?;
    assert_eq!(records, server.requests());
    assert_eq!(log["dropped"], 0);
    let request = http::Request::delete("/testapi/stats").body(Vec::new())?;
    server.client().request_text(request).await?;
    assert_eq!(server.stats().total(), 0);
    Ok(())
}

#[tokio::test]
async fn the_request_log_is_bounded() -> anyhow::Result<()> {
    let server = TestApiServer::builder()
        .request_log_limit(3)
        .seed_nodes(1)
        .start()
        .await?;
    let nodes: Api<Node> = Api::all(server.client());
    for _ in 0..5 {
        nodes.get("node-1").await?;
    }
    assert_eq!(server.requests().len(), 3);
    assert_eq!(
        server.stats().count(Verb::Get, "nodes"),
        5,
        "counts are not bounded"
    );
    Ok(())
}
