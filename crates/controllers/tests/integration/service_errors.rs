//! The service controller's answers to provider errors, against the test API
//! server and the fake cloud: another owner, bad input, retries, backoff.

use crate::support;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ccm_controllers::ControllerId;
use ccm_provider_fake::{
    ANNOTATION_HEALTHCHECK_INTERVAL, ANNOTATION_TYPE, FakeCloud, InjectedError, Operation,
};
use ccm_test_apiserver::{Failure, RequestMatch, Verb};
use k8s_openapi::api::core::v1::Service;
use kube::api::{Patch, PatchParams};
use support::{Harness, eventually, fast_settings, load_balancer_service, ready_node};

const FINALIZER: &str = "service.kubernetes.io/load-balancer-cleanup";
const WAIT: Duration = Duration::from_secs(10);

fn annotated(name: &str, key: &str, value: &str) -> Service {
    let mut service = load_balancer_service(name, &[]);
    service.metadata.annotations = Some(BTreeMap::from([(key.to_owned(), value.to_owned())]));
    service
}

fn has_finalizer(service: &Service) -> bool {
    service
        .metadata
        .finalizers
        .iter()
        .flatten()
        .any(|f| f == FINALIZER)
}

fn has_ingress(service: &Service) -> bool {
    service
        .status
        .as_ref()
        .and_then(|s| s.load_balancer.as_ref())
        .and_then(|lb| lb.ingress.as_ref())
        .is_some_and(|i| !i.is_empty())
}

async fn patch(h: &Harness, name: &str, patch: serde_json::Value) {
    h.services()
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("service patched");
}

async fn started(services: &[Service]) -> Harness {
    let mut h = Harness::new().await;
    h.create_node(&ready_node("n1")).await;
    for service in services {
        h.create_service(service).await;
    }
    h.start(&[ControllerId::Service], &fast_settings()).await;
    h
}

/// Service `web` once our finalizer is gone, within `within`.
async fn released(h: &Harness, within: Duration) -> Service {
    eventually("the finalizer released", within, || async {
        h.services()
            .get("web")
            .await
            .ok()
            .filter(|s| !has_finalizer(s))
    })
    .await
    .expect("a bounded wait")
}

/// Service `web` with its load balancer and ingress.
async fn provisioned() -> Harness {
    let h = started(&[load_balancer_service("web", &[])]).await;
    eventually("an ingress", WAIT, || async {
        h.services().get("web").await.ok().filter(has_ingress)
    })
    .await
    .expect("a bounded wait");
    h
}

#[tokio::test]
async fn implemented_elsewhere_is_told_from_the_service_and_left_alone_without_a_cloud_call() {
    let mut h = started(&[annotated("ext", ANNOTATION_TYPE, "external")]).await;
    eventually("the Service reconciled", WAIT, || async {
        (h.settled().await.reconciles >= 1).then_some(())
    })
    .await
    .expect("a bounded wait");
    let before = h.settled().await;
    assert_eq!(before.retrying, 0, "no retry scheduled");
    assert!(
        h.cloud.calls().is_empty(),
        "the provider tells from the Service alone: no cloud call"
    );
    patch(
        &h,
        "ext",
        serde_json::json!({ "metadata": { "labels": { "team": "x" } } }),
    )
    .await;
    let after = h.settled().await;
    assert!(
        after.reconciles > before.reconciles,
        "the label change was reconciled"
    );
    let service = h.services().get("ext").await.unwrap();
    assert!(!has_finalizer(&service), "no finalizer");
    assert!(!has_ingress(&service), "no status");
    let events: Vec<_> = h.events("ext", "SyncLoadBalancerFailed").await;
    assert!(events.is_empty(), "no event");

    patch(
        &h,
        "ext",
        serde_json::json!({ "metadata": { "annotations": { "example.com/tier": "gold" } } }),
    )
    .await;
    assert_eq!(h.settled().await.retrying, 0);
    assert!(h.cloud.calls().is_empty(), "still no cloud call");
    assert!(!has_finalizer(&h.services().get("ext").await.unwrap()));
    h.stop().await;
}

#[tokio::test]
async fn implemented_elsewhere_answered_only_by_ensure_still_leaves_no_finalizer() {
    let mut h = Harness::new().await;
    h.create_node(&ready_node("n1")).await;
    h.cloud.fail_next(
        Some(Operation::EnsureLoadBalancer),
        InjectedError::ImplementedElsewhere,
        1,
    );
    h.create_service(&load_balancer_service("web", &[])).await;
    h.start(&[ControllerId::Service], &fast_settings()).await;

    eventually("the ensure", WAIT, || async {
        (h.cloud.count(Operation::EnsureLoadBalancer) == 1).then_some(())
    })
    .await
    .expect("a bounded wait");
    let service = released(&h, WAIT).await;
    assert!(!has_ingress(&service));
    let settled = h.settled().await;
    assert_eq!(settled.retrying, 0, "no retry scheduled");
    assert_eq!(
        h.cloud.count(Operation::EnsureLoadBalancer),
        1,
        "not asked again until the Service changes"
    );
    assert!(h.events("web", "SyncLoadBalancerFailed").await.is_empty());
    h.stop().await;
}

#[tokio::test]
async fn a_bad_annotation_gets_a_warning_and_no_cloud_change_until_fixed() {
    let mut h = started(&[annotated("bad", ANNOTATION_HEALTHCHECK_INTERVAL, "often")]).await;
    let events = eventually("a Warning event", WAIT, || async {
        let events = h.events("bad", "InvalidAnnotation").await;
        (!events.is_empty()).then_some(events)
    })
    .await
    .expect("a bounded wait");
    assert_eq!(events[0].type_.as_deref(), Some("Warning"));
    let note = events[0].note.clone().unwrap();
    assert!(
        note.contains(ANNOTATION_HEALTHCHECK_INTERVAL) && note.contains("from 5 to 300"),
        "names the annotation and the expected form: {note}"
    );
    assert_eq!(h.cloud.mutation_count(), 0, "nothing changed in the cloud");
    assert!(!has_finalizer(&h.services().get("bad").await.unwrap()));
    let before = h.settled().await;
    assert_eq!(before.retrying, 0, "waits for a change, no retry scheduled");

    patch(
        &h,
        "bad",
        serde_json::json!({ "metadata": { "labels": { "team": "x" } } }),
    )
    .await;
    let after = h.settled().await;
    assert!(
        after.reconciles > before.reconciles,
        "the label change was reconciled"
    );
    assert!(
        h.cloud.calls().is_empty(),
        "the provider refused it from the Service alone, and it is not retried for a change \
         the provider does not read"
    );
    assert_eq!(h.events("bad", "InvalidAnnotation").await.len(), 1);

    patch(&h, "bad", serde_json::json!({ "metadata": { "annotations": { ANNOTATION_HEALTHCHECK_INTERVAL: "30" } } })).await;
    eventually("a load balancer once fixed", WAIT, || async {
        h.services().get("bad").await.ok().filter(has_ingress)
    })
    .await
    .expect("a bounded wait");
    h.stop().await;
}

#[tokio::test]
async fn a_bad_annotation_on_an_existing_load_balancer_leaves_it_as_it_was() {
    let mut h = provisioned().await;
    let before = h.cloud.load_balancers();

    patch(&h, "web", serde_json::json!({ "metadata": { "annotations": { ANNOTATION_HEALTHCHECK_INTERVAL: "1" } } })).await;
    eventually("a Warning event", WAIT, || async {
        (!h.events("web", "InvalidAnnotation").await.is_empty()).then_some(())
    })
    .await
    .expect("a bounded wait");
    assert_eq!(
        h.cloud.load_balancers(),
        before,
        "the load balancer is as it was"
    );
    let service = h.services().get("web").await.unwrap();
    assert!(
        has_finalizer(&service) && has_ingress(&service),
        "finalizer and ingress kept"
    );
    h.stop().await;
}

/// A harness whose provider records the instant of every ensure, on the
/// paused clock; the first ensure fails with `injected`.
async fn first_ensure_fails(injected: InjectedError) -> (Harness, Timed) {
    let mut h = Harness::new().await;
    let fake = h.cloud.clone();
    let timed = Timed::on(&fake);
    h.create_node(&ready_node("n1")).await;
    fake.fail_next(Some(Operation::EnsureLoadBalancer), injected, 1);
    h.create_service(&load_balancer_service("web", &[])).await;
    h.start(&[ControllerId::Service], &fast_settings()).await;
    (h, timed)
}

/// Fails the first ensure with `injected`, which asks for 1.5 s, and checks
/// that the second comes exactly that much later, not after a backoff.
async fn requested_delay_is_honoured(injected: InjectedError) -> Harness {
    let (h, timed) = first_ensure_fails(injected).await;
    assert_eq!(
        timed.gaps_after(2).await,
        [Duration::from_millis(1500)],
        "retried after the delay asked for, not after a backoff"
    );
    eventually("an ingress", WAIT, || async {
        h.services().get("web").await.ok().filter(has_ingress)
    })
    .await
    .expect("a bounded wait");
    assert_eq!(h.cloud.count(Operation::EnsureLoadBalancer), 2);
    h
}

#[tokio::test(start_paused = true)]
async fn a_retry_the_provider_asks_for_is_honoured_without_an_event() {
    let mut h = requested_delay_is_honoured(InjectedError::Retry {
        after: Duration::from_millis(1500),
    })
    .await;
    assert!(
        h.events("web", "SyncLoadBalancerFailed").await.is_empty(),
        "no Warning event for a retry"
    );
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_throttled_call_is_retried_after_the_delay_the_cloud_gives() {
    let mut h = requested_delay_is_honoured(InjectedError::Throttled {
        retry_after: Duration::from_millis(1500),
    })
    .await;
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_failure_warns_and_is_retried_after_five_seconds() {
    let (mut h, timed) = first_ensure_fails(InjectedError::Other("the cloud is down".into())).await;

    let events = eventually("a Warning event", WAIT, || async {
        let events = h.events("web", "SyncLoadBalancerFailed").await;
        (!events.is_empty()).then_some(events)
    })
    .await
    .expect("a bounded wait");
    assert!(
        events[0]
            .note
            .as_deref()
            .unwrap()
            .contains("the cloud is down")
    );
    assert_eq!(
        timed.gaps_after(2).await,
        [Duration::from_secs(5)],
        "retried after 5 s, neither sooner nor after a longer backoff"
    );
    eventually("an ingress", WAIT, || async {
        h.services().get("web").await.ok().filter(has_ingress)
    })
    .await
    .expect("a bounded wait");
    assert_eq!(h.cloud.count(Operation::EnsureLoadBalancer), 2);
    h.stop().await;
}

#[tokio::test]
async fn a_failed_deletion_keeps_the_finalizer_and_is_retried() {
    let mut h = provisioned().await;
    h.cloud.fail_next(
        Some(Operation::EnsureLoadBalancerDeleted),
        InjectedError::Other("busy".into()),
        1,
    );
    patch(
        &h,
        "web",
        serde_json::json!({ "spec": { "type": "ClusterIP" } }),
    )
    .await;

    eventually("a Warning event", WAIT, || async {
        (!h.events("web", "DeleteLoadBalancerFailed").await.is_empty()).then_some(())
    })
    .await
    .expect("a bounded wait");
    let service = h.services().get("web").await.unwrap();
    assert!(
        has_finalizer(&service),
        "the finalizer stays while the load balancer may exist"
    );
    assert_eq!(h.cloud.load_balancers().len(), 1);
    eventually("the finalizer removed after the retry", WAIT, || async {
        h.services()
            .get("web")
            .await
            .ok()
            .filter(|s| !has_finalizer(s))
    })
    .await
    .expect("a bounded wait");
    assert!(h.cloud.load_balancers().is_empty());
    assert_eq!(h.cloud.count(Operation::EnsureLoadBalancerDeleted), 2);
    h.stop().await;
}

/// The clock at each ensure the fake cloud is asked for (the paused clock
/// in most tests).
#[derive(Debug, Clone, Default)]
struct Timed(Arc<Mutex<Vec<tokio::time::Instant>>>);

impl Timed {
    /// Records `fake`'s ensures from now on.
    fn on(fake: &FakeCloud) -> Self {
        let timed = Self::default();
        let at = timed.0.clone();
        fake.on_call(move |call| {
            if call.op == Operation::EnsureLoadBalancer {
                at.lock().unwrap().push(tokio::time::Instant::now());
            }
        });
        timed
    }

    /// Waits (on the paused clock) until `n` ensures were made; the gaps
    /// between them.
    async fn gaps_after(&self, n: usize) -> Vec<Duration> {
        for _ in 0..5000 {
            if self.0.lock().unwrap().len() >= n {
                break;
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        let at = self.0.lock().unwrap().clone();
        assert!(at.len() >= n, "only {} ensures", at.len());
        at.windows(2).map(|w| w[1] - w[0]).collect()
    }
}

/// A cleanup whose status write fails is retried; the provider had
/// confirmed the deletion, so the retry only writes.
#[tokio::test]
async fn a_cleanup_retried_for_a_failed_write_asks_the_provider_once() {
    let mut h = provisioned().await;
    let status_write = RequestMatch::verb(Verb::Patch)
        .resource("services")
        .subresource("status");
    h.server
        .fail_next(status_write, Failure::internal_error(), 2);
    patch(
        &h,
        "web",
        serde_json::json!({ "spec": { "type": "ClusterIP" } }),
    )
    .await;
    released(&h, 3 * WAIT).await;
    let failed = h
        .server
        .requests()
        .iter()
        .filter(|r| r.subresource == "status" && r.status == 500)
        .count();
    assert_eq!(
        failed, 2,
        "both attempts of the first cleanup's status write failed"
    );
    assert_eq!(h.cloud.count(Operation::EnsureLoadBalancerDeleted), 1);
    assert!(h.cloud.load_balancers().is_empty());
    h.stop().await;
}

// The paused clock is honest here: the test API server runs in this
// runtime and every request goes over loopback, so the clock only jumps
// when every task waits on a timer. Any time spent elsewhere would show as
// a gap longer than the backoff.
#[tokio::test(start_paused = true)]
async fn failures_back_off_from_5_s_doubling_to_300_s_and_a_success_resets_it() {
    let mut h = Harness::new().await;
    let fake = h.cloud.clone();
    let timed = Timed::on(&fake);
    h.create_node(&ready_node("n1")).await;
    fake.fail_next(
        Some(Operation::EnsureLoadBalancer),
        InjectedError::Other("the cloud is down".into()),
        8,
    );
    h.create_service(&load_balancer_service("web", &[])).await;
    h.start(&[ControllerId::Service], &fast_settings()).await;

    let secs = |gaps: &[Duration]| gaps.iter().map(Duration::as_secs_f64).collect::<Vec<_>>();
    let gaps = timed.gaps_after(9).await;
    assert_eq!(
        secs(&gaps),
        [5.0, 10.0, 20.0, 40.0, 80.0, 160.0, 300.0, 300.0],
        "the 100 s resyncs meanwhile never cut a backoff short"
    );
    let service = h.services().get("web").await.unwrap();
    assert!(has_finalizer(&service));

    // The ninth attempt succeeded; a later failure starts again at 5 s.
    eventually("an ingress", WAIT, || async {
        h.services().get("web").await.ok().filter(has_ingress)
    })
    .await
    .expect("a bounded wait");
    fake.fail_next(
        Some(Operation::EnsureLoadBalancer),
        InjectedError::Other("again".into()),
        1,
    );
    patch(
        &h,
        "web",
        serde_json::json!({ "metadata": { "annotations": { "example.com/tier": "gold" } } }),
    )
    .await;
    let gaps = timed.gaps_after(11).await;
    assert_eq!(gaps[9], Duration::from_secs(5));
    h.stop().await;
}

/// Leadership that the provider takes away during its call, as a lease
/// lost while a slow cloud call ran.
#[derive(Debug)]
struct Leadership(std::sync::atomic::AtomicBool);

impl ccm_runtime::Fence for Leadership {
    fn check(&self) -> Result<(), ccm_runtime::Fenced> {
        if self.0.load(std::sync::atomic::Ordering::SeqCst) {
            Ok(())
        } else {
            Err(ccm_runtime::Fenced::new("not the leader"))
        }
    }
}

#[tokio::test]
async fn a_finalizer_is_not_removed_once_leadership_is_lost() {
    let fake = FakeCloud::default();
    fake.set_auto_instances(true);
    let leadership = Arc::new(Leadership(std::sync::atomic::AtomicBool::new(true)));
    let lost = leadership.clone();
    // The ensure takes leadership away while it runs: a lease lost during
    // a slow cloud call.
    fake.on_call(move |call| {
        if call.op == Operation::EnsureLoadBalancer {
            lost.0.store(false, std::sync::atomic::Ordering::SeqCst);
        }
    });
    let mut h = Harness::with_provider(fake.clone(), Arc::new(fake)).await;
    h.fence = leadership.clone();
    h.create_node(&ready_node("n1")).await;
    // Our finalizer on a Service the provider says another controller
    // implements: a leader releases it; one that just lost the lease must
    // not.
    let mut service = annotated("ext", ANNOTATION_TYPE, "external");
    service.metadata.finalizers = Some(vec![FINALIZER.to_owned()]);
    h.create_service(&service).await;
    h.start(&[ControllerId::Service], &fast_settings()).await;

    eventually("the ensure that loses leadership", WAIT, || async {
        (!leadership.0.load(std::sync::atomic::Ordering::SeqCst)).then_some(())
    })
    .await
    .expect("a bounded wait");
    h.settled().await;
    assert!(
        has_finalizer(&h.services().get("ext").await.unwrap()),
        "the finalizer stays once this process no longer leads"
    );
    h.stop().await;
}
