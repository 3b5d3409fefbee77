//! Batching: N concurrent lookups cost ceil(N / batch) provider calls.

use std::num::NonZeroUsize;
use std::sync::Arc;
use std::time::Duration;

use ccm_cloud_provider::k8s_openapi::api::core::v1::Node;
use ccm_cloud_provider::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use ccm_cloud_provider::{CloudError, InstanceMetadata, Instances};
use ccm_provider_fake::{FakeCloud, InjectedError, Operation};
use ccm_runtime::{BatchCall, Batcher, STREAM_WINDOWS, lookup_all, lookup_batches};
use futures::StreamExt;
use futures::future::join_all;

fn node(name: &str) -> Arc<Node> {
    Arc::new(Node {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..ObjectMeta::default()
        },
        ..Node::default()
    })
}

fn metadata_call(cloud: &FakeCloud) -> BatchCall<InstanceMetadata> {
    let cloud = cloud.clone();
    Arc::new(move |nodes| {
        let cloud = cloud.clone();
        Box::pin(async move { cloud.instances_metadata(&nodes).await })
    })
}

fn auto_cloud(batch: usize) -> FakeCloud {
    let cloud = FakeCloud::default();
    cloud.set_auto_instances(true);
    cloud.set_batch_size(NonZeroUsize::new(batch).unwrap());
    cloud
}

const WINDOW: Duration = Duration::from_millis(100);

/// A batcher of up to 100 nodes a call over `cloud`, `concurrency` calls at
/// a time, waiting [`WINDOW`] for more lookups.
fn spawn_batcher(cloud: &FakeCloud, concurrency: usize) -> Batcher<InstanceMetadata> {
    Batcher::spawn(
        metadata_call(cloud),
        NonZeroUsize::new(100).unwrap(),
        WINDOW,
        NonZeroUsize::new(concurrency).unwrap(),
    )
}

#[tokio::test(start_paused = true)]
async fn a_burst_of_lookups_costs_ceil_n_over_batch_calls() {
    let cloud = auto_cloud(100);
    let batcher = spawn_batcher(&cloud, 1);
    let lookups = (0..1000).map(|i| batcher.lookup(node(&format!("node-{i}"))));
    let results = join_all(lookups).await;
    assert!(results.iter().all(Result::is_ok));
    assert_eq!(
        results[7].as_ref().unwrap().provider_id,
        "fake://node-7",
        "each node gets its own answer"
    );
    assert_eq!(
        cloud.count(Operation::InstancesMetadata),
        10,
        "ceil(1000 / 100)"
    );
    assert_eq!(cloud.count(Operation::InstanceMetadata), 0);
    assert!(cloud.calls().iter().all(|c| c.batch_size == Some(100)));
}

#[tokio::test(start_paused = true)]
async fn a_lone_lookup_waits_one_window_then_goes_alone() {
    let cloud = auto_cloud(100);
    let batcher = spawn_batcher(&cloud, 1);
    let start = tokio::time::Instant::now();
    batcher.lookup(node("solo")).await.unwrap();
    assert_eq!(start.elapsed(), WINDOW);
    assert_eq!(cloud.calls()[0].batch_size, Some(1));
}

/// `n` lookups, one every `every`, each answered with how long it waited
/// from its own start.
async fn stream(
    batcher: &Batcher<InstanceMetadata>,
    n: usize,
    every: Duration,
) -> Vec<(Duration, Result<InstanceMetadata, CloudError>)> {
    let mut lookups = Vec::new();
    for i in 0..n {
        let batcher = batcher.clone();
        lookups.push(tokio::spawn(async move {
            let start = tokio::time::Instant::now();
            let result = batcher.lookup(node(&format!("s-{i}"))).await;
            (start.elapsed(), result)
        }));
        tokio::time::sleep(every).await;
    }
    let mut answers = Vec::new();
    for lookup in lookups {
        answers.push(lookup.await.unwrap());
    }
    answers
}

#[tokio::test(start_paused = true)]
async fn a_stream_of_lookups_fills_its_batches() {
    // 500 a second: a window catches 50, a batch holds 100.
    let cloud = auto_cloud(100);
    let batcher = spawn_batcher(&cloud, 1);
    let answers = stream(&batcher, 1000, Duration::from_millis(2)).await;
    assert!(answers.iter().all(|(_, r)| r.is_ok()));
    let sizes: Vec<_> = cloud.calls().iter().map(|c| c.batch_size).collect();
    assert_eq!(sizes, [Some(100); 10], "ceil(1000 / 100) full calls");
}

#[tokio::test(start_paused = true)]
async fn a_stream_holds_a_batch_open_ten_windows_at_most() {
    let cloud = auto_cloud(1000);
    let batcher = Batcher::spawn(
        metadata_call(&cloud),
        NonZeroUsize::new(1000).unwrap(),
        WINDOW,
        NonZeroUsize::MIN,
    );
    // 100 a second, endlessly as far as one batch can tell.
    let answers = stream(&batcher, 150, Duration::from_millis(10)).await;
    assert_eq!(
        answers[0].0,
        WINDOW * STREAM_WINDOWS,
        "the first waited the cap"
    );
    let first_call = cloud.calls()[0].batch_size.unwrap();
    assert!(
        (100..=101).contains(&first_call),
        "the first call took what arrived in 1 s: {first_call}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_trickle_does_not_hold_a_batch_open() {
    // One every 60 ms: farther apart than a stream's quarter window.
    let cloud = auto_cloud(100);
    let batcher = spawn_batcher(&cloud, 1);
    let answers = stream(&batcher, 4, Duration::from_millis(60)).await;
    assert_eq!(answers[0].0, WINDOW, "the first waited one window");
    let sizes: Vec<_> = cloud.calls().iter().map(|c| c.batch_size).collect();
    assert_eq!(sizes, [Some(2), Some(2)]);
}

#[tokio::test(start_paused = true)]
async fn lookups_arriving_while_calls_are_busy_join_the_next_batch() {
    let cloud = auto_cloud(100);
    cloud.set_latency(Duration::from_secs(1));
    let batcher = spawn_batcher(&cloud, 1);
    let first = tokio::spawn({
        let batcher = batcher.clone();
        async move { batcher.lookup(node("early")).await }
    });
    // Arrive one by one while the first call is in flight.
    tokio::time::sleep(WINDOW * 2).await;
    let late: Vec<_> = (0..30)
        .map(|i| batcher.lookup(node(&format!("late-{i}"))))
        .collect();
    let (first, late) = tokio::join!(first, join_all(late));
    assert!(first.unwrap().is_ok() && late.iter().all(Result::is_ok));
    let sizes: Vec<_> = cloud.calls().iter().map(|c| c.batch_size).collect();
    assert_eq!(sizes, [Some(1), Some(30)]);
}

#[tokio::test(start_paused = true)]
async fn a_failed_batch_answers_every_node_with_its_error() {
    let cloud = auto_cloud(100);
    cloud.fail_next(
        None,
        InjectedError::Throttled {
            retry_after: Duration::from_secs(4),
        },
        1,
    );
    let batcher = spawn_batcher(&cloud, 1);
    let results = join_all((0..5).map(|i| batcher.lookup(node(&format!("n{i}"))))).await;
    for result in results {
        assert!(
            matches!(result, Err(CloudError::Throttled { retry_after }) if retry_after == Duration::from_secs(4))
        );
    }
    assert_eq!(cloud.count(Operation::InstancesMetadata), 1);
}

#[tokio::test(start_paused = true)]
async fn periodic_passes_chunk_by_batch_size() {
    let cloud = auto_cloud(40);
    let nodes: Vec<_> = (0..100).map(|i| node(&format!("n{i}"))).collect();
    let answers = lookup_all(
        nodes,
        &metadata_call(&cloud),
        NonZeroUsize::new(40).unwrap(),
        NonZeroUsize::new(2).unwrap(),
    )
    .await;
    assert_eq!(answers.len(), 100);
    assert_eq!(answers[99].0.metadata.name.as_deref(), Some("n99"));
    assert_eq!(answers[99].1.as_ref().unwrap().provider_id, "fake://n99");
    let sizes: Vec<_> = cloud
        .calls()
        .iter()
        .map(|c| c.batch_size.unwrap())
        .collect();
    assert_eq!(sizes, [40, 40, 20]);
}

#[tokio::test(start_paused = true)]
async fn batches_arrive_one_call_at_a_time_in_order() {
    let cloud = auto_cloud(40);
    let nodes: Vec<_> = (0..100).map(|i| node(&format!("n{i}"))).collect();
    let mut batches = std::pin::pin!(lookup_batches(
        nodes,
        &metadata_call(&cloud),
        NonZeroUsize::new(40).unwrap(),
        NonZeroUsize::MIN,
    ));
    let first = batches.next().await.expect("a first batch");
    assert_eq!(first.len(), 40);
    assert_eq!(first[0].0.metadata.name.as_deref(), Some("n0"));
    assert_eq!(first[39].1.as_ref().unwrap().provider_id, "fake://n39");
    assert_eq!(
        cloud.count(Operation::InstancesMetadata),
        1,
        "the first batch is handed over before the next call is made"
    );
    let rest: Vec<_> = batches.collect().await;
    let sizes: Vec<_> = rest.iter().map(Vec::len).collect();
    assert_eq!(sizes, [40, 20]);
    assert_eq!(rest[1][19].0.metadata.name.as_deref(), Some("n99"));
    assert_eq!(cloud.count(Operation::InstancesMetadata), 3);
}

/// 400 lookups in batches of 100, each call taking 1 s: how long they take
/// with `concurrency` calls allowed at once.
async fn burst_duration(concurrency: usize) -> Duration {
    let cloud = auto_cloud(100);
    cloud.set_latency(Duration::from_secs(1));
    let batcher = spawn_batcher(&cloud, concurrency);
    let start = tokio::time::Instant::now();
    let lookups = (0..400).map(|i| batcher.lookup(node(&format!("node-{i}"))));
    assert!(join_all(lookups).await.iter().all(Result::is_ok));
    assert_eq!(cloud.count(Operation::InstancesMetadata), 4);
    start.elapsed()
}

#[tokio::test(start_paused = true)]
async fn concurrency_bounds_the_batch_calls_in_flight() {
    let serial = burst_duration(1).await;
    assert!(
        serial >= Duration::from_secs(4) && serial <= Duration::from_secs(4) + WINDOW,
        "one call at a time: four waves of 1 s, took {serial:?}"
    );
    let paired = burst_duration(2).await;
    assert!(
        paired >= Duration::from_secs(2) && paired <= Duration::from_secs(2) + WINDOW,
        "two calls at a time: two waves of 1 s, took {paired:?}"
    );
}
