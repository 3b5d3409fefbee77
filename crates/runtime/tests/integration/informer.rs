//! Shared informers and the controller runner against the test API server.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ccm_runtime::controller::{self, ControllerConfig, Triggers};
use ccm_runtime::{Action, Informers, Metrics, WatchEvent};
use ccm_test_apiserver::{Failure, RequestMatch, TestApiServer, Verb};
use ccm_test_support::reconcile_count;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::reflector::ObjectRef;
use tokio_util::sync::CancellationToken;

#[path = "informer/watch_health.rs"]
mod watch_health;

fn node(name: &str) -> Node {
    Node {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..ObjectMeta::default()
        },
        ..Node::default()
    }
}

/// Runs `informers` in a task of their own until `shutdown`.
fn run_informers(
    informers: &Arc<Informers>,
    shutdown: &CancellationToken,
) -> tokio::task::JoinHandle<Result<(), ccm_runtime::InformerError>> {
    let informers = informers.clone();
    let shutdown = shutdown.clone();
    tokio::spawn(async move { informers.run(shutdown).await })
}

/// A test API server, its Node informer running and ready, one subscriber,
/// and a client for nodes.
struct NodeWatch {
    server: TestApiServer,
    nodes: Arc<ccm_runtime::Informer<Node>>,
    subscriber: ccm_runtime::Changes<Node>,
    shutdown: CancellationToken,
    run: tokio::task::JoinHandle<Result<(), ccm_runtime::InformerError>>,
    api: Api<Node>,
}

async fn watching_nodes() -> NodeWatch {
    let server = TestApiServer::start().await.unwrap();
    let informers = Arc::new(Informers::new(server.client()));
    let nodes = informers.nodes();
    let subscriber = nodes.subscribe().unwrap();
    let shutdown = CancellationToken::new();
    let run = run_informers(&informers, &shutdown);
    nodes.wait_until_ready().await;
    let api = Api::all(server.client());
    NodeWatch {
        server,
        nodes,
        subscriber,
        shutdown,
        run,
        api,
    }
}

#[tokio::test]
async fn one_watch_per_kind_however_many_controllers_subscribe() {
    let server = TestApiServer::start().await.unwrap();
    let informers = Arc::new(Informers::new(server.client()));
    let nodes = informers.nodes();
    let subscribers: Vec<_> = (0..3).map(|_| nodes.subscribe().unwrap()).collect();
    let deleted = Arc::new(Mutex::new(Vec::new()));
    let seen = deleted.clone();
    nodes
        .on_event(move |event| {
            if let WatchEvent::Delete(node) = event {
                seen.lock()
                    .unwrap()
                    .push(node.metadata.name.clone().unwrap());
            }
        })
        .unwrap();
    let shutdown = CancellationToken::new();
    let run = run_informers(&informers, &shutdown);
    // Many waiters are all woken when the first list arrives.
    let waiters: Vec<_> = (0..5)
        .map(|_| {
            let nodes = nodes.clone();
            tokio::spawn(async move { nodes.wait_until_ready().await })
        })
        .collect();
    for waiter in waiters {
        tokio::time::timeout(Duration::from_secs(2), waiter)
            .await
            .expect("every waiter wakes")
            .unwrap();
    }
    assert!(nodes.is_ready());
    assert!(
        nodes.subscribe().is_err(),
        "subscribing after the start is refused"
    );

    let api: Api<Node> = Api::all(server.client());
    api.create(&PostParams::default(), &node("n1"))
        .await
        .unwrap();
    // Each subscriber sees the new node.
    for mut subscriber in subscribers {
        let got = tokio::time::timeout(
            Duration::from_secs(5),
            futures::StreamExt::next(&mut subscriber),
        )
        .await
        .unwrap();
        assert_eq!(got.unwrap().metadata.name.as_deref(), Some("n1"));
    }
    api.delete("n1", &DeleteParams::default()).await.unwrap();
    tokio::time::timeout(Duration::from_secs(5), async {
        while deleted.lock().unwrap().is_empty() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the hook sees the deletion");
    assert_eq!(*deleted.lock().unwrap(), ["n1"]);

    let stats = server.stats();
    assert_eq!(stats.open_watches_on("nodes"), 1, "one watch on nodes");
    assert_eq!(stats.count(Verb::List, "nodes"), 1, "one list");
    shutdown.cancel();
    run.await.unwrap().unwrap();
}

/// A real node's status carries what no controller reads; the cache keeps
/// none of it, and subscribers get the cache's own copy of each change.
#[tokio::test]
async fn the_cache_keeps_lean_nodes_and_subscribers_share_its_copy() {
    let NodeWatch {
        server: _server,
        nodes,
        mut subscriber,
        shutdown,
        run,
        api,
    } = watching_nodes().await;
    let mut applied = node("n1");
    applied.metadata.annotations = Some(
        [
            (
                "kubectl.kubernetes.io/last-applied-configuration".to_owned(),
                "{\"kind\":\"Node\"}".to_owned(),
            ),
            ("example.com/kept".to_owned(), "yes".to_owned()),
        ]
        .into(),
    );
    api.create(&PostParams::default(), &applied).await.unwrap();
    let status = serde_json::json!({"status": {
        "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}],
        "images": [{"names": ["registry.k8s.io/pause:3.10"], "sizeBytes": 320_368}],
        "capacity": {"cpu": "2"},
        "volumesInUse": ["kubernetes.io/csi/ebs^vol-1"]
    }});
    api.patch_status("n1", &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap();
    let stored = api.get_status("n1").await.unwrap();
    assert!(
        stored
            .status
            .as_ref()
            .and_then(|s| s.images.as_ref())
            .is_some(),
        "the API server keeps the images"
    );

    let latest = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            let node = futures::StreamExt::next(&mut subscriber).await.unwrap();
            if node
                .status
                .as_ref()
                .and_then(|s| s.addresses.as_ref())
                .is_some()
            {
                return node;
            }
        }
    })
    .await
    .expect("the subscriber sees the status change");
    let cached = nodes.store().get(&ObjectRef::new("n1")).unwrap();
    assert!(Arc::ptr_eq(&latest, &cached), "one copy, shared");
    let status = cached.status.as_ref().unwrap();
    assert_eq!(status.addresses.as_ref().unwrap()[0].address, "10.0.0.1");
    assert_eq!(
        (&status.images, &status.capacity, &status.volumes_in_use),
        (&None, &None, &None)
    );
    assert_eq!(
        cached.metadata.annotations,
        Some([("example.com/kept".to_owned(), "yes".to_owned())].into())
    );
    shutdown.cancel();
    run.await.unwrap().unwrap();
}

#[tokio::test]
async fn the_runner_never_exceeds_its_concurrency_and_records_metrics() {
    let server = TestApiServer::start().await.unwrap();
    let api: Api<Node> = Api::all(server.client());
    for i in 0..8 {
        api.create(&PostParams::default(), &node(&format!("n{i}")))
            .await
            .unwrap();
    }
    let informers = Arc::new(Informers::new(server.client()));
    let metrics = Metrics::new();
    let shutdown = CancellationToken::new();
    let in_flight = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    let done = Arc::new(AtomicUsize::new(0));
    let reconciles = controller::run(
        ControllerConfig {
            name: "test",
            concurrency: 2,
        },
        &informers.nodes(),
        Triggers::default(),
        metrics.clone(),
        shutdown.clone(),
        {
            let (in_flight, peak, done) = (in_flight.clone(), peak.clone(), done.clone());
            move |_node| {
                let (in_flight, peak, done) = (in_flight.clone(), peak.clone(), done.clone());
                async move {
                    let now = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                    peak.fetch_max(now, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    in_flight.fetch_sub(1, Ordering::SeqCst);
                    done.fetch_add(1, Ordering::SeqCst);
                    Ok(Action::await_change())
                }
            }
        },
    )
    .unwrap();
    let reconciles = tokio::spawn(reconciles);
    let run = run_informers(&informers, &shutdown);
    tokio::time::timeout(Duration::from_secs(10), async {
        while done.load(Ordering::SeqCst) < 8 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("all eight reconciled");
    assert_eq!(
        peak.load(Ordering::SeqCst),
        2,
        "two at a time, as configured"
    );
    assert_eq!(reconcile_count(&metrics, "test", "success"), 8);
    let text = metrics.encode(None);
    assert!(
        text.contains("ccm_controller_reconcile_duration_seconds_count{controller=\"test\"} 8"),
        "{text}"
    );
    assert!(
        text.contains("ccm_controller_queue_depth{controller=\"test\"} 0"),
        "{text}"
    );
    shutdown.cancel();
    reconciles.await.unwrap();
    run.await.unwrap().unwrap();
}

#[tokio::test]
async fn a_watch_relists_when_a_restarted_api_server_is_behind_its_resource_version() {
    let first = TestApiServer::start().await.unwrap();
    let addr = first.addr();
    // The client outlives the server: it reconnects to the same address.
    // As the app builds the informers' client: no transport retries.
    let mut config = kube::Config::new(first.url().parse().unwrap());
    config.default_retry = false;
    let client = kube::Client::try_from(config).unwrap();
    let api: Api<Node> = Api::all(first.client());
    for i in 0..20 {
        api.create(&PostParams::default(), &node(&format!("before-{i}")))
            .await
            .unwrap();
    }
    let informers = Arc::new(Informers::new(client));
    let nodes = informers.nodes();
    let shutdown = CancellationToken::new();
    let run = run_informers(&informers, &shutdown);
    tokio::time::timeout(Duration::from_secs(5), nodes.wait_until_ready())
        .await
        .expect("the first list");
    assert_eq!(nodes.store().len(), 20);

    // The server restarts with its storage behind the watch's
    // resourceVersion (an etcd restore): one node, a low resourceVersion.
    first.shutdown();
    // While nothing answers, the watch says why it makes no progress.
    let down = tokio::time::Instant::now() + Duration::from_secs(10);
    while nodes.watch_error().is_none() {
        assert!(
            tokio::time::Instant::now() < down,
            "no watch error while the server was down"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The old listener closes once its aborted task is dropped.
    let mut second = None;
    for _ in 0..50 {
        match TestApiServer::builder().bind(addr).start().await {
            Ok(server) => {
                second = Some(server);
                break;
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
    let second = second.expect("the address is free again within 5 s");
    Api::<Node>::all(second.client())
        .create(&PostParams::default(), &node("after-restart"))
        .await
        .unwrap();

    let restarted = tokio::time::Instant::now();
    let deadline = restarted + Duration::from_secs(30);
    loop {
        let names: Vec<String> = nodes
            .store()
            .state()
            .iter()
            .filter_map(|n| n.metadata.name.clone())
            .collect();
        if names == ["after-restart"] {
            println!("relisted {:?} after the restart", restarted.elapsed());
            assert_eq!(nodes.watch_error(), None, "progress again");
            assert!(informers.watch_errors().is_empty());
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the cache never relisted from the restarted server: {names:?}; its requests: {:?}",
            second
                .requests()
                .iter()
                .map(|r| format!("{} {} {}", r.verb, r.resource, r.status))
                .collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        second
            .requests()
            .iter()
            .any(|r| r.resource == "nodes" && r.verb == "list"),
        "a fresh list from the restarted server"
    );
    shutdown.cancel();
    run.await.unwrap().unwrap();
}

#[tokio::test]
async fn a_reconcile_that_never_ends_is_the_longest_running_until_shutdown() {
    let server = TestApiServer::start().await.unwrap();
    let api: Api<Node> = Api::all(server.client());
    for name in ["hangs", "fine"] {
        api.create(&PostParams::default(), &node(name))
            .await
            .unwrap();
    }
    let informers = Arc::new(Informers::new(server.client()));
    let metrics = Metrics::new();
    let shutdown = CancellationToken::new();
    let reconciles = controller::run(
        ControllerConfig {
            name: "test",
            concurrency: 2,
        },
        &informers.nodes(),
        Triggers::default(),
        metrics.clone(),
        shutdown.clone(),
        |node: Arc<Node>| async move {
            // A call that never answers.
            if node.metadata.name.as_deref() == Some("hangs") {
                std::future::pending::<()>().await;
            }
            Ok(Action::await_change())
        },
    )
    .unwrap();
    let reconciles = tokio::spawn(reconciles);
    let run = run_informers(&informers, &shutdown);
    // Until the other node reconciled and the hung one has run 200 ms.
    let longest = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            if reconcile_count(&metrics, "test", "success") >= 1
                && let Some(longest) = metrics
                    .longest_reconcile()
                    .filter(|r| r.running_for >= Duration::from_millis(200))
            {
                return longest;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the other node reconciled while one hangs");
    assert_eq!(
        (longest.controller, longest.object.as_str()),
        ("test", "hangs")
    );
    assert!(
        longest.running_for >= Duration::from_millis(200),
        "{longest:?}"
    );

    // A graceful stop would wait for it forever: the app gives its
    // controllers a grace period, then drops them.
    shutdown.cancel();
    reconciles.abort();
    let _ = reconciles.await;
    assert_eq!(
        metrics.longest_reconcile(),
        None,
        "dropped with its controller"
    );
    run.await.unwrap().unwrap();
}

/// kube-runtime's own subscriber (`ReflectHandle`) looks each changed object
/// up in the cache when it is read; an object deleted before a slow reader
/// got to it made the stream answer "pending" with nothing to wake it, and
/// the controller never heard of another change (found by the chaos suite's
/// crash points: new Services waited for the 100 s resync).
#[tokio::test]
async fn a_subscriber_that_reads_late_still_sees_every_change_after_a_deletion() {
    let NodeWatch {
        server: _server,
        nodes,
        mut subscriber,
        shutdown,
        run,
        api,
    } = watching_nodes().await;
    api.create(&PostParams::default(), &node("gone"))
        .await
        .unwrap();
    api.delete("gone", &DeleteParams::default()).await.unwrap();
    api.create(&PostParams::default(), &node("kept"))
        .await
        .unwrap();
    // The cache has caught up before the subscriber reads anything.
    tokio::time::timeout(Duration::from_secs(5), async {
        let store = nodes.store();
        while store
            .state()
            .iter()
            .all(|n| n.metadata.name.as_deref() != Some("kept"))
        {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the cache sees the new node");

    let mut names = Vec::new();
    while names.last().map(String::as_str) != Some("kept") {
        let next = tokio::time::timeout(
            Duration::from_secs(5),
            futures::StreamExt::next(&mut subscriber),
        )
        .await
        .expect("the subscriber goes on after the deleted object");
        names.push(next.unwrap().metadata.name.clone().unwrap());
    }
    assert_eq!(names, ["gone", "kept"]);
    shutdown.cancel();
    run.await.unwrap().unwrap();
}
