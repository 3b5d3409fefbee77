//! Contract: the watch protocol as the kube client sees it — replay from a
//! resourceVersion, 410 Expired, bookmarks, timeoutSeconds, selector
//! transitions and streaming lists.

use crate::support;

use std::time::Duration;

use anyhow::{Context, bail};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{
    DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use serde_json::json;
use support::within;

fn cm(name: &str, labels: &serde_json::Value) -> anyhow::Result<ConfigMap> {
    Ok(serde_json::from_value(
        json!({"metadata": {"name": name, "labels": labels}}),
    )?)
}

/// `TYPE name` for events, `BOOKMARK` and `ERROR <code>` for the others.
fn describe(event: &WatchEvent<ConfigMap>) -> String {
    match event {
        WatchEvent::Added(o) => format!("ADDED {}", o.metadata.name.as_deref().unwrap_or("")),
        WatchEvent::Modified(o) => format!("MODIFIED {}", o.metadata.name.as_deref().unwrap_or("")),
        WatchEvent::Deleted(o) => format!("DELETED {}", o.metadata.name.as_deref().unwrap_or("")),
        WatchEvent::Bookmark(_) => "BOOKMARK".into(),
        WatchEvent::Error(e) => format!("ERROR {}", e.code),
    }
}

contract_test!(watch_replays_changes_after_a_resource_version, |t| {
    let cms: Api<ConfigMap> = Api::namespaced(t.client(), "default");
    let name = ccm_test_support::unique("replay");
    let created = cms
        .create(&PostParams::default(), &cm(&name, &json!({}))?)
        .await?;
    let from = created.metadata.resource_version.clone().context("rv")?;
    for v in ["1", "2"] {
        cms.patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"v": v}})),
        )
        .await?;
    }
    cms.delete(&name, &DeleteParams::default()).await?;
    let params = WatchParams::default()
        .fields(&format!("metadata.name={name}"))
        .disable_bookmarks()
        .timeout(30);
    let stream = cms.watch(&params, &from).await?;
    let events: Vec<String> = within(
        20,
        "replayed events",
        stream.take(3).map_ok(|e| describe(&e)).try_collect(),
    )
    .await??;
    let expected = [
        format!("MODIFIED {name}"),
        format!("MODIFIED {name}"),
        format!("DELETED {name}"),
    ];
    assert_eq!(events, expected);
    Ok(())
});

contract_test!(
    watch_from_a_compacted_resource_version_is_410_expired,
    |t| {
        let cms: Api<ConfigMap> = Api::namespaced(t.client(), "default");
        let mut stream = cms
            .watch(&WatchParams::default().disable_bookmarks().timeout(30), "1")
            .await?
            .boxed();
        match within(20, "the expiry event", stream.next()).await? {
            Some(Ok(WatchEvent::Error(status))) => {
                assert_eq!(
                    (status.code, status.reason.as_str()),
                    (410, "Expired"),
                    "{}",
                    status.message
                );
            }
            other => bail!("expected an ERROR event with 410, got {other:?}"),
        }
        Ok(())
    }
);

contract_test!(bookmarks_arrive_when_asked_for, |t| {
    let cms: Api<ConfigMap> = Api::namespaced(t.client(), "default");
    let list = cms.list_metadata(&ListParams::default().limit(1)).await?;
    let from = list.metadata.resource_version.context("list rv")?;
    let params = WatchParams::default().timeout(120);
    let mut stream = cms.watch(&params, &from).await?.boxed();
    let wait = t.bookmark_wait();
    let bookmark = tokio::time::timeout(wait, async {
        while let Some(event) = stream.try_next().await? {
            if let WatchEvent::Bookmark(b) = event {
                return Ok::<_, kube::Error>(Some(b));
            }
        }
        Ok(None)
    })
    .await
    .with_context(|| format!("no bookmark within {wait:?}"))??
    .context("the stream ended without a bookmark")?;
    let at: u64 = bookmark.metadata.resource_version.parse()?;
    assert!(at >= from.parse::<u64>()?);
    Ok(())
});

contract_test!(timeout_seconds_ends_the_stream, |t| {
    let cms: Api<ConfigMap> = Api::namespaced(t.client(), "default");
    let list = cms.list_metadata(&ListParams::default().limit(1)).await?;
    let from = list.metadata.resource_version.context("list rv")?;
    let started = tokio::time::Instant::now();
    let stream = cms
        .watch(
            &WatchParams::default().disable_bookmarks().timeout(1),
            &from,
        )
        .await?;
    let rest: Vec<_> = within(15, "the stream to end", stream.collect::<Vec<_>>()).await?;
    assert!(rest.iter().all(Result::is_ok), "{rest:?}");
    assert!(
        started.elapsed() >= Duration::from_millis(900),
        "ended after {:?}",
        started.elapsed()
    );
    Ok(())
});

contract_test!(selector_watches_see_objects_enter_and_leave, |t| {
    let cms: Api<ConfigMap> = Api::namespaced(t.client(), "default");
    let name = ccm_test_support::unique("transitions");
    let created = cms
        .create(&PostParams::default(), &cm(&name, &json!({}))?)
        .await?;
    let from = created.metadata.resource_version.clone().context("rv")?;
    let label = ccm_test_support::unique("selected");
    let relabel = |value: serde_json::Value| {
        Patch::Merge(json!({"metadata": {"labels": {"watched": value}}}))
    };
    cms.patch(&name, &PatchParams::default(), &relabel(json!(label)))
        .await?;
    cms.patch(
        &name,
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"x": "1"}})),
    )
    .await?;
    cms.patch(&name, &PatchParams::default(), &relabel(json!(null)))
        .await?;
    let params = WatchParams::default()
        .labels(&format!("watched={label}"))
        .disable_bookmarks()
        .timeout(30);
    let stream = cms.watch(&params, &from).await?;
    let events: Vec<String> = within(
        20,
        "transition events",
        stream.take(3).map_ok(|e| describe(&e)).try_collect(),
    )
    .await??;
    assert_eq!(
        events,
        [
            format!("ADDED {name}"),
            format!("MODIFIED {name}"),
            format!("DELETED {name}")
        ]
    );
    cms.delete(&name, &DeleteParams::default()).await?;
    Ok(())
});

contract_test!(
    streaming_lists_send_initial_events_then_the_end_bookmark,
    |t| {
        let cms: Api<ConfigMap> = Api::namespaced(t.client(), "default");
        let run = ccm_test_support::unique("streaming");
        let mut last = String::new();
        for i in 0..3 {
            let created = cms
                .create(
                    &PostParams::default(),
                    &cm(&format!("{run}-{i}"), &json!({"run": run}))?,
                )
                .await?;
            last = created.metadata.resource_version.unwrap_or_default();
        }
        let params = WatchParams::streaming_lists()
            .labels(&format!("run={run}"))
            .timeout(30);
        // Not older than the last create: "0" would let kube-apiserver
        // answer from a watch cache that has not seen it yet (it lags
        // under load).
        let mut stream = cms.watch(&params, &last).await?.boxed();
        let mut added = Vec::new();
        let end = within(20, "the initial-events-end bookmark", async {
            while let Some(event) = stream.try_next().await? {
                match event {
                    WatchEvent::Added(o) => added.extend(o.metadata.name),
                    WatchEvent::Bookmark(b)
                        if b.metadata
                            .annotations
                            .contains_key("k8s.io/initial-events-end") =>
                    {
                        return Ok(Some(b));
                    }
                    _ => {}
                }
            }
            Ok::<_, kube::Error>(None)
        })
        .await??
        .context("the stream ended before the initial events did")?;
        added.sort();
        assert_eq!(
            added,
            (0..3).map(|i| format!("{run}-{i}")).collect::<Vec<_>>()
        );
        assert!(!end.metadata.resource_version.is_empty());
        cms.delete_collection(
            &DeleteParams::default(),
            &ListParams::default().labels(&format!("run={run}")),
        )
        .await?;
        Ok(())
    }
);
