//! A watch's health as `/readyz` reads it: healthy again as soon as a
//! re-watch succeeds, reported through every failed try.

use super::*;

/// Waits up to `limit` for `done`, checking every few milliseconds;
/// panics with `what` when it never holds.
async fn wait_until(limit: Duration, what: &str, mut done: impl FnMut() -> bool) {
    tokio::time::timeout(limit, async {
        while !done() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("not within {limit:?}: {what}"));
}

/// The statuses of the server's answers to node watches, in order.
fn node_watch_answers(server: &TestApiServer) -> Vec<u16> {
    server
        .requests()
        .iter()
        .filter(|r| r.resource == "nodes" && r.verb == "watch")
        .map(|r| r.status)
        .collect()
}

/// kube-runtime's watcher yields nothing when a re-watch succeeds, so on a
/// quiet cluster no event follows a watch error; the error used to count
/// against readiness until the next event or for a whole minute.
#[tokio::test]
async fn a_watch_that_recovers_is_healthy_again_without_an_event() {
    let NodeWatch {
        server,
        nodes,
        subscriber: _subscriber,
        shutdown,
        run,
        api: _,
    } = watching_nodes().await;
    wait_until(Duration::from_secs(5), "the watch opens", || {
        server.stats().open_watches_on("nodes") == 1
    })
    .await;
    server.fail_next(
        RequestMatch::verb(Verb::Watch).resource("nodes"),
        Failure::internal_error(),
        1,
    );
    server.close_all_watches();
    wait_until(
        Duration::from_secs(10),
        "the failed re-watch is reported",
        || nodes.watch_error().is_some(),
    )
    .await;
    let failed = tokio::time::Instant::now();
    assert_eq!(node_watch_answers(&server), [200, 500]);

    // The watcher retries after its backoff (0.8 s to 1.6 s); nothing changes.
    wait_until(Duration::from_secs(10), "the watch is retried", || {
        node_watch_answers(&server).len() == 3
    })
    .await;
    let rewatched = tokio::time::Instant::now();
    assert_eq!(node_watch_answers(&server), [200, 500, 200]);
    wait_until(
        Duration::from_secs(1),
        "the successful re-watch clears the error",
        || nodes.watch_error().is_none(),
    )
    .await;
    println!(
        "healthy {:?} after the re-watch succeeded, {:?} after the error",
        rewatched.elapsed(),
        failed.elapsed()
    );
    assert_eq!(server.stats().open_watches_on("nodes"), 1);
    assert_eq!(
        server.stats().count(Verb::List, "nodes"),
        1,
        "resumed, not relisted"
    );
    shutdown.cancel();
    run.await.unwrap().unwrap();
}

#[tokio::test]
async fn a_watch_that_keeps_failing_stays_reported_between_tries() {
    let NodeWatch {
        server,
        nodes,
        subscriber: _subscriber,
        shutdown,
        run,
        api: _,
    } = watching_nodes().await;
    wait_until(Duration::from_secs(5), "the watch opens", || {
        server.stats().open_watches_on("nodes") == 1
    })
    .await;
    server.fail_next(
        RequestMatch::any().resource("nodes"),
        Failure::internal_error(),
        u32::MAX,
    );
    server.close_all_watches();
    wait_until(
        Duration::from_secs(10),
        "the failed re-watch is reported",
        || nodes.watch_error().is_some(),
    )
    .await;
    let failures = || {
        server
            .requests()
            .iter()
            .filter(|r| r.resource == "nodes" && r.status == 500)
            .count()
    };
    let first = failures();
    // Two more tries, each after a backoff: checked all along.
    let mut checks = 0;
    wait_until(Duration::from_secs(15), "two more tries", || {
        checks += 1;
        assert!(
            nodes.watch_error().is_some(),
            "healthy between tries, after {} failures",
            failures()
        );
        failures() >= first + 2
    })
    .await;
    assert!(checks > 100, "checked throughout the backoff: {checks}");
    assert!(
        nodes.watch_error().unwrap().contains("500"),
        "{:?}",
        nodes.watch_error()
    );
    shutdown.cancel();
    run.await.unwrap().unwrap();
}
