//! The service-observer controller against the test API server: when a
//! provider's `ServiceObserver` is called, with what, and what happens when
//! it fails or may not change the cloud.

use crate::support;

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ccm_provider_fake::{InjectedError, Operation};
use ccm_runtime::{Fence, Fenced};
use ccm_test_support::cloud_call_count;
use k8s_openapi::api::core::v1::{Namespace, Service};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DeleteParams, PostParams};
use support::{Harness, eventually, fast_settings, load_balancer_service};
use tokio::time::Instant;

/// How long a test waits for an outcome (wall clock).
const WAIT: Duration = Duration::from_secs(10);
/// A period no test waits for.
const HOUR: Duration = Duration::from_secs(3600);

/// One `sync_services` call: when, and the Services as `namespace/name`.
#[derive(Debug, Clone)]
struct SyncCall {
    at: Instant,
    services: BTreeSet<String>,
}

/// The fake cloud's service observer as the tests see it: each call the
/// fake recorded, with the (paused) clock's time it was made.
#[derive(Debug, Clone, Default)]
struct Observer(Arc<Mutex<Vec<SyncCall>>>);

impl Observer {
    fn calls(&self) -> Vec<SyncCall> {
        self.0.lock().unwrap().clone()
    }

    /// Waits until at least `n` calls were made; all calls so far.
    async fn wait_for_calls(&self, n: usize) -> Vec<SyncCall> {
        eventually(&format!("{n} sync_services calls"), WAIT, || async {
            let calls = self.calls();
            (calls.len() >= n).then_some(calls)
        })
        .await
        .expect("a bounded wait")
    }
}

/// A fence a test opens and closes.
#[derive(Debug, Default)]
struct Toggle(AtomicBool);

impl Fence for Toggle {
    fn check(&self) -> Result<(), Fenced> {
        if self.0.load(Ordering::SeqCst) {
            Ok(())
        } else {
            Err(Fenced::new("not the leader"))
        }
    }
}

/// A harness whose fake cloud offers a service observer resyncing every
/// `period` and answering `failures` first; nothing started yet.
async fn harness(period: Duration, failures: Vec<InjectedError>) -> (Harness, Observer) {
    let h = Harness::new().await;
    h.cloud.observe_services(period);
    for failure in failures {
        h.cloud.fail_next(Some(Operation::SyncServices), failure, 1);
    }
    let observer = Observer::default();
    let calls = observer.0.clone();
    h.cloud.on_call(move |call| {
        if call.op == Operation::SyncServices {
            calls.lock().unwrap().push(SyncCall {
                at: Instant::now(),
                services: call.args.iter().cloned().collect(),
            });
        }
    });
    (h, observer)
}

fn cluster_ip_service(name: &str, namespace: &str) -> Service {
    let mut service = load_balancer_service(name, &[]);
    service.metadata.namespace = Some(namespace.into());
    if let Some(spec) = service.spec.as_mut() {
        spec.type_ = Some("ClusterIP".into());
    }
    service
}

/// The API server's own Service, always there.
const KUBERNETES: &str = "default/kubernetes";

/// `names` and the API server's own Service.
fn names(names: &[&str]) -> BTreeSet<String> {
    names
        .iter()
        .chain([&KUBERNETES])
        .map(|n| (*n).to_owned())
        .collect()
}

#[tokio::test(start_paused = true)]
async fn one_call_after_startup_with_every_service_of_every_type_and_namespace() {
    let (mut h, observer) = harness(HOUR, Vec::new()).await;
    h.create_service(&load_balancer_service("web", &[])).await;
    let namespace = Namespace {
        metadata: ObjectMeta {
            name: Some("other".into()),
            ..ObjectMeta::default()
        },
        ..Namespace::default()
    };
    Api::<Namespace>::all(h.client.clone())
        .create(&PostParams::default(), &namespace)
        .await
        .expect("namespace created");
    Api::<Service>::namespaced(h.client.clone(), "other")
        .create(&PostParams::default(), &cluster_ip_service("db", "other"))
        .await
        .expect("service created");
    h.start_observing(&[], &fast_settings()).await;

    let calls = observer.wait_for_calls(1).await;
    assert_eq!(calls[0].services, names(&["default/web", "other/db"]));
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert_eq!(observer.calls().len(), 1, "nothing changed: no other call");
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_burst_of_changes_costs_at_most_two_calls_each_with_the_full_set() {
    let (mut h, observer) = harness(HOUR, Vec::new()).await;
    h.start_observing(&[], &fast_settings()).await;
    let calls = observer.wait_for_calls(1).await;
    assert_eq!(calls[0].services, names(&[]));

    let mut all = names(&[]);
    for i in 0..20 {
        let name = format!("svc-{i}");
        h.create_service(&cluster_ip_service(&name, "default"))
            .await;
        all.insert(format!("default/{name}"));
    }
    let last_change = Instant::now();
    eventually("a call with all 20 Services", WAIT, || async {
        observer
            .calls()
            .last()
            .filter(|c| c.services == all)
            .map(|_| ())
    })
    .await
    .expect("a bounded wait");
    tokio::time::sleep(Duration::from_secs(60)).await;

    let calls = observer.calls();
    let after_burst = &calls[1..];
    assert!(
        (1..=2).contains(&after_burst.len()),
        "{} calls for one burst",
        after_burst.len()
    );
    assert!(after_burst.iter().all(|c| c.services.is_subset(&all)));
    let last = after_burst.last().unwrap();
    assert_eq!(last.services, all);
    assert!(
        last.at >= last_change + Duration::from_secs(1),
        "the call waits for a second of quiet"
    );
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_deleted_service_is_gone_from_the_next_call() {
    let (mut h, observer) = harness(HOUR, Vec::new()).await;
    for name in ["a", "b", "c"] {
        h.create_service(&cluster_ip_service(name, "default")).await;
    }
    h.start_observing(&[], &fast_settings()).await;
    let calls = observer.wait_for_calls(1).await;
    assert_eq!(
        calls[0].services,
        names(&["default/a", "default/b", "default/c"])
    );

    h.services()
        .delete("b", &DeleteParams::default())
        .await
        .expect("service deleted");
    let calls = observer.wait_for_calls(2).await;
    assert_eq!(calls[1].services, names(&["default/a", "default/c"]));
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn the_period_calls_again_without_changes_until_shutdown() {
    let period = Duration::from_secs(60);
    let (mut h, observer) = harness(period, Vec::new()).await;
    h.create_service(&cluster_ip_service("a", "default")).await;
    h.start_observing(&[], &fast_settings()).await;

    let calls = observer.wait_for_calls(3).await;
    let gaps: Vec<Duration> = calls.windows(2).map(|w| w[1].at - w[0].at).collect();
    assert_eq!(gaps[..2], [period, period]);
    assert!(calls.iter().all(|c| c.services == names(&["default/a"])));

    h.stop().await;
    let stopped = observer.calls().len();
    tokio::time::sleep(period * 5).await;
    assert_eq!(observer.calls().len(), stopped, "no call after shutdown");
}

#[tokio::test(start_paused = true)]
async fn a_failed_call_is_retried_with_backoff_and_a_requested_delay_is_honoured() {
    let failures = vec![
        InjectedError::Other("the cloud is down".into()),
        InjectedError::Other("still down".into()),
        InjectedError::Throttled {
            retry_after: Duration::from_millis(1500),
        },
    ];
    let (mut h, observer) = harness(HOUR, failures).await;
    h.create_service(&cluster_ip_service("a", "default")).await;
    h.start_observing(&[], &fast_settings()).await;

    let calls = observer.wait_for_calls(4).await;
    let gaps: Vec<Duration> = calls.windows(2).map(|w| w[1].at - w[0].at).collect();
    assert_eq!(
        gaps,
        [
            Duration::from_secs(5),
            Duration::from_secs(10),
            Duration::from_millis(1500)
        ]
    );
    tokio::time::sleep(Duration::from_secs(600)).await;
    assert_eq!(observer.calls().len(), 4, "a success ends the retries");
    assert_eq!(cloud_call_count(&h.metrics, "sync_services", "error"), 2);
    assert_eq!(
        cloud_call_count(&h.metrics, "sync_services", "throttled"),
        1
    );
    assert_eq!(cloud_call_count(&h.metrics, "sync_services", "success"), 1);
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn no_call_reaches_the_provider_while_the_fence_refuses() {
    let (mut h, observer) = harness(HOUR, Vec::new()).await;
    let fence = Arc::new(Toggle::default());
    h.fence = fence.clone();
    h.create_service(&cluster_ip_service("a", "default")).await;
    h.start_observing(&[], &fast_settings()).await;

    tokio::time::sleep(Duration::from_secs(20)).await;
    assert!(observer.calls().is_empty(), "{:?}", observer.calls());
    assert!(cloud_call_count(&h.metrics, "sync_services", "fenced") >= 5);

    fence.0.store(true, Ordering::SeqCst);
    let opened = Instant::now();
    let calls = observer.wait_for_calls(1).await;
    assert!(
        calls[0].at - opened <= Duration::from_secs(2),
        "a refused call is retried within 2 s"
    );
    assert_eq!(calls[0].services, names(&["default/a"]));
    h.stop().await;
}
