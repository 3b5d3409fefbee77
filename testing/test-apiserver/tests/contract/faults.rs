//! Fault injection: failures for chosen requests, latency, closed watches.

use crate::support;

use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use ccm_test_apiserver::{Failure, RequestMatch, TestApiServer, Verb};
use ccm_test_support::eventually;
use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Node};
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use serde_json::json;
use support::within;

async fn server_with_nodes(n: usize) -> anyhow::Result<TestApiServer> {
    Ok(TestApiServer::builder().seed_nodes(n).start().await?)
}

#[tokio::test]
async fn an_injected_500_fails_only_the_matching_requests() -> anyhow::Result<()> {
    let server = server_with_nodes(1).await?;
    let nodes: Api<Node> = Api::all(server.client());
    server.fail_next(
        RequestMatch::verb(Verb::Patch).resource("nodes"),
        Failure::internal_error(),
        1,
    );
    nodes
        .get("node-1")
        .await
        .context("a GET does not match the injection")?;
    let patch = Patch::Merge(json!({"metadata": {"labels": {"a": "b"}}}));
    match nodes.patch("node-1", &PatchParams::default(), &patch).await {
        Err(kube::Error::Api(s)) => assert_eq!((s.code, s.reason.as_str()), (500, "InternalError")),
        other => bail!("expected the injected 500, got {other:?}"),
    }
    nodes
        .patch("node-1", &PatchParams::default(), &patch)
        .await
        .context("only the next one fails")?;
    Ok(())
}

#[tokio::test]
async fn throttled_requests_carry_retry_after_which_kube_honours() -> anyhow::Result<()> {
    let server = TestApiServer::start().await?;
    let cms: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "a"}}))?;
    cms.create(&PostParams::default(), &cm).await?;
    server.fail_next(
        RequestMatch::verb(Verb::Get).resource("configmaps"),
        Failure::too_many_requests(Duration::from_secs(1)),
        1,
    );
    let started = Instant::now();
    within(20, "the retried GET", cms.get("a")).await??;
    assert!(
        started.elapsed() >= Duration::from_millis(900),
        "retried after {:?}",
        started.elapsed()
    );
    let statuses: Vec<u16> = server
        .requests()
        .into_iter()
        .filter(|r| r.verb == "get" && r.resource == "configmaps")
        .map(|r| r.status)
        .collect();
    assert_eq!(statuses, [429, 200]);
    Ok(())
}

#[tokio::test]
async fn an_injected_410_on_a_watch_is_an_expired_error_event() -> anyhow::Result<()> {
    let server = server_with_nodes(1).await?;
    let nodes: Api<Node> = Api::all(server.client());
    server.fail_next(RequestMatch::verb(Verb::Watch), Failure::expired(), 1);
    let from = server.resource_version().to_string();
    let mut stream = nodes.watch(&WatchParams::default(), &from).await?.boxed();
    match within(10, "the error event", stream.next()).await? {
        Some(Ok(WatchEvent::Error(s))) => assert_eq!((s.code, s.reason.as_str()), (410, "Expired")),
        other => bail!("expected an ERROR 410 event, got {other:?}"),
    }
    assert!(within(10, "the stream end", stream.next()).await?.is_none());
    Ok(())
}

#[tokio::test]
async fn added_latency_delays_every_request_until_cleared() -> anyhow::Result<()> {
    let server = server_with_nodes(1).await?;
    let nodes: Api<Node> = Api::all(server.client());
    server.set_latency(Duration::from_millis(400));
    let started = Instant::now();
    nodes.get("node-1").await?;
    let slow = started.elapsed();
    assert!(slow >= Duration::from_millis(400), "{slow:?}");
    server.clear_faults();
    let started = Instant::now();
    nodes.get("node-1").await?;
    assert!(
        started.elapsed() < slow,
        "{:?} after clearing",
        started.elapsed()
    );
    Ok(())
}

#[tokio::test]
async fn closing_all_watches_ends_their_streams() -> anyhow::Result<()> {
    let server = server_with_nodes(1).await?;
    let nodes: Api<Node> = Api::all(server.client());
    let from = server.resource_version().to_string();
    let mut first = nodes.watch(&WatchParams::default(), &from).await?.boxed();
    let mut second = nodes
        .watch(&WatchParams::default().labels("a=b"), &from)
        .await?
        .boxed();
    eventually("both watches to open", Duration::from_secs(10), || async {
        (server.stats().open_watches >= 2).then_some(())
    })
    .await?;
    server.close_all_watches();
    assert!(
        within(10, "the first stream to end", first.next())
            .await?
            .is_none()
    );
    assert!(
        within(10, "the second stream to end", second.next())
            .await?
            .is_none()
    );
    Ok(())
}
