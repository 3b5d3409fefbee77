//! kube-runtime's watcher against the server: initial list, resumption
//! without relisting, relisting after 410, bookmarks, streaming lists.

use crate::support;

use std::time::Duration;

use anyhow::{Context, bail};
use ccm_test_apiserver::{Failure, RequestMatch, TestApiServer, Verb};
use ccm_test_support::eventually;
use futures::StreamExt;
use futures::stream::BoxStream;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{DeleteParams, ListParams, ObjectMeta, PostParams};
use kube::runtime::watcher::{self, Event, watcher};
use kube::{Api, ResourceExt};
use support::within;
use tokio::sync::mpsc;

/// The watcher's events as they happen: a task drives it, as a controller
/// would, so it reconnects even while the test is not reading.
struct Events {
    rx: mpsc::UnboundedReceiver<String>,
    _driver: AbortOnDrop,
}

struct AbortOnDrop(tokio::task::AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// `INIT`, `INIT_APPLY name`, `INIT_DONE`, `APPLY name`, `DELETE name`.
fn describe(event: &Event<ConfigMap>) -> String {
    match event {
        Event::Init => "INIT".into(),
        Event::InitApply(o) => format!("INIT_APPLY {}", o.name_any()),
        Event::InitDone => "INIT_DONE".into(),
        Event::Apply(o) => format!("APPLY {}", o.name_any()),
        Event::Delete(o) => format!("DELETE {}", o.name_any()),
    }
}

/// The next `n` events, watcher errors included as `ERROR`.
async fn next(events: &mut Events, n: usize) -> anyhow::Result<Vec<String>> {
    let mut seen = Vec::new();
    while seen.len() < n {
        let event = within(30, "a watcher event", events.rx.recv())
            .await?
            .context("the watcher ended")?;
        seen.push(event);
    }
    Ok(seen)
}

async fn create(cms: &Api<ConfigMap>, name: &str, run: &str) -> anyhow::Result<()> {
    let cm = ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some([("run".to_owned(), run.to_owned())].into()),
            ..Default::default()
        },
        ..Default::default()
    };
    cms.create(&PostParams::default(), &cm).await?;
    Ok(())
}

fn watch(cms: &Api<ConfigMap>, config: watcher::Config) -> Events {
    let mut stream: BoxStream<'static, _> = watcher(cms.clone(), config).boxed();
    let (tx, rx) = mpsc::unbounded_channel();
    let driver = tokio::spawn(async move {
        while let Some(event) = stream.next().await {
            let shown = match event {
                Ok(e) => describe(&e),
                Err(_) => "ERROR".into(),
            };
            if tx.send(shown).is_err() {
                break;
            }
        }
    });
    Events {
        rx,
        _driver: AbortOnDrop(driver.abort_handle()),
    }
}

contract_test!(watcher_lists_then_follows_changes, |t| {
    let cms: Api<ConfigMap> = Api::namespaced(t.client(), "default");
    let run = ccm_test_support::unique("follow");
    create(&cms, &format!("{run}-a"), &run).await?;
    let mut events = watch(
        &cms,
        watcher::Config::default().labels(&format!("run={run}")),
    );
    assert_eq!(
        next(&mut events, 3).await?,
        ["INIT", &format!("INIT_APPLY {run}-a"), "INIT_DONE"]
    );
    create(&cms, &format!("{run}-b"), &run).await?;
    cms.delete(&format!("{run}-a"), &DeleteParams::default())
        .await?;
    assert_eq!(
        next(&mut events, 2).await?,
        [format!("APPLY {run}-b"), format!("DELETE {run}-a")]
    );
    cms.delete(&format!("{run}-b"), &DeleteParams::default())
        .await?;
    Ok(())
});

contract_test!(
    watcher_resumes_after_server_timeouts_without_missing_changes,
    |t| {
        let cms: Api<ConfigMap> = Api::namespaced(t.client(), "default");
        let run = ccm_test_support::unique("resume");
        let config = watcher::Config::default()
            .labels(&format!("run={run}"))
            .timeout(1);
        let mut events = watch(&cms, config);
        assert_eq!(next(&mut events, 2).await?, ["INIT", "INIT_DONE"]);
        let names: Vec<String> = (0..4).map(|i| format!("{run}-{i}")).collect();
        let mut seen = Vec::new();
        for name in &names {
            create(&cms, name, &run).await?;
            tokio::time::sleep(Duration::from_millis(600)).await;
            seen.extend(next(&mut events, 1).await?);
        }
        let expected: Vec<String> = names.iter().map(|n| format!("APPLY {n}")).collect();
        assert_eq!(
            seen, expected,
            "no relist (INIT) and no change missed across reconnections"
        );
        for name in &names {
            cms.delete(name, &DeleteParams::default()).await?;
        }
        Ok(())
    }
);

contract_test!(streaming_list_watcher_initializes_from_a_watch, |t| {
    let cms: Api<ConfigMap> = Api::namespaced(t.client(), "default");
    let run = ccm_test_support::unique("stream-watcher");
    create(&cms, &format!("{run}-a"), &run).await?;
    // kube-apiserver serves the initial events from its watch cache, which
    // may trail the write by a moment: wait until a cached list (resource
    // version "0") shows the object, so the stream has it to send.
    let selected = ListParams::default().labels(&format!("run={run}"));
    eventually(
        "the watch cache to hold the object",
        Duration::from_secs(10),
        || async {
            let cached = cms.list(&selected.clone().match_any()).await?;
            Ok((!cached.items.is_empty()).then_some(()))
        },
    )
    .await?;
    let lists_before = t
        .server()
        .map(|server| server.stats().count(Verb::List, "configmaps"));
    let config = watcher::Config::default()
        .labels(&format!("run={run}"))
        .streaming_lists();
    let mut events = watch(&cms, config);
    assert_eq!(
        next(&mut events, 3).await?,
        ["INIT", &format!("INIT_APPLY {run}-a"), "INIT_DONE"]
    );
    create(&cms, &format!("{run}-b"), &run).await?;
    assert_eq!(next(&mut events, 1).await?, [format!("APPLY {run}-b")]);
    if let (Some(server), Some(before)) = (t.server(), lists_before) {
        assert_eq!(
            server.stats().count(Verb::List, "configmaps"),
            before,
            "streaming lists do not list"
        );
    }
    for suffix in ["a", "b"] {
        cms.delete(&format!("{run}-{suffix}"), &DeleteParams::default())
            .await?;
    }
    Ok(())
});

#[tokio::test]
async fn watcher_relists_after_an_expired_watch() -> anyhow::Result<()> {
    let server = TestApiServer::start().await?;
    let cms: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    create(&cms, "a", "x").await?;
    server.fail_next(
        RequestMatch::verb(Verb::Watch).resource("configmaps"),
        Failure::expired(),
        1,
    );
    let mut events = watch(&cms, watcher::Config::default());
    let seen = next(&mut events, 7).await?;
    assert_eq!(
        seen,
        [
            "INIT",
            "INIT_APPLY a",
            "INIT_DONE",
            "ERROR",
            "INIT",
            "INIT_APPLY a",
            "INIT_DONE"
        ]
    );
    assert_eq!(server.stats().count(Verb::List, "configmaps"), 2);
    Ok(())
}

#[tokio::test]
async fn watcher_replays_changes_made_while_its_watch_was_closed() -> anyhow::Result<()> {
    let server = TestApiServer::start().await?;
    let cms: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    let mut events = watch(&cms, watcher::Config::default());
    assert_eq!(next(&mut events, 2).await?, ["INIT", "INIT_DONE"]);
    watch_opened(&server).await?;
    server.close_all_watches();
    create(&cms, "a", "x").await?;
    create(&cms, "b", "x").await?;
    assert_eq!(next(&mut events, 2).await?, ["APPLY a", "APPLY b"]);
    let stats = server.stats();
    assert_eq!(
        stats.count(Verb::List, "configmaps"),
        1,
        "resumed without relisting"
    );
    assert!(stats.count(Verb::Watch, "configmaps") >= 2);
    Ok(())
}

/// Waits until the watcher's watch is open (it lists first).
async fn watch_opened(server: &TestApiServer) -> anyhow::Result<()> {
    eventually("the watch to open", Duration::from_secs(10), || async {
        (server.stats().open_watches_on("configmaps") > 0).then_some(())
    })
    .await
}

/// After a compaction, a watcher resumes from the resourceVersion of its
/// last bookmark when it had one, and must relist when it had not.
async fn relists_after_compaction(bookmarks: bool) -> anyhow::Result<u64> {
    let server = TestApiServer::builder()
        .bookmark_interval(Duration::from_millis(100))
        .start()
        .await?;
    let cms: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    let secrets: Api<Secret> = Api::namespaced(server.client(), "default");
    create(&cms, "watched", "x").await?;
    let config = if bookmarks {
        watcher::Config::default()
    } else {
        watcher::Config::default().disable_bookmarks()
    };
    let mut events = watch(&cms, config);
    assert_eq!(
        next(&mut events, 3).await?,
        ["INIT", "INIT_APPLY watched", "INIT_DONE"]
    );
    for i in 0..3 {
        let secret = Secret {
            metadata: ObjectMeta {
                name: Some(format!("other-{i}")),
                ..Default::default()
            },
            ..Default::default()
        };
        secrets.create(&PostParams::default(), &secret).await?;
    }
    watch_opened(&server).await?;
    // Several bookmark intervals, for a bookmark past the secrets' writes.
    tokio::time::sleep(Duration::from_millis(600)).await;
    server.compact_history();
    server.close_all_watches();
    create(&cms, "after", "x").await?;
    let mut seen = next(&mut events, 1).await?;
    while seen
        .last()
        .is_some_and(|e| e != "APPLY after" && e != "INIT_APPLY after")
    {
        seen.extend(next(&mut events, 1).await?);
        if seen.len() > 10 {
            bail!("the watcher never saw the new object: {seen:?}");
        }
    }
    Ok(server.stats().count(Verb::List, "configmaps"))
}

#[tokio::test]
async fn bookmarks_spare_a_relist_after_compaction() -> anyhow::Result<()> {
    assert_eq!(relists_after_compaction(true).await?, 1, "with bookmarks");
    assert_eq!(
        relists_after_compaction(false).await?,
        2,
        "without bookmarks"
    );
    Ok(())
}
