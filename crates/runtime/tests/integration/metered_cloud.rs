//! Every provider call is counted by operation and outcome; mutations are
//! fenced by leadership.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use ccm_cloud_provider::k8s_openapi::api::core::v1::{Node, Service};
use ccm_cloud_provider::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use ccm_cloud_provider::{CloudError, CloudProvider, Instances, Volumes};
use ccm_provider_fake::{Capability, FakeCloud, InjectedError, Operation};
use ccm_runtime::{Fence, Fenced, MeteredCloud, Metrics};
use ccm_test_support::cloud_call_count;

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

fn service() -> Service {
    Service {
        metadata: ObjectMeta {
            name: Some("web".into()),
            namespace: Some("default".into()),
            uid: Some("u-1".into()),
            ..ObjectMeta::default()
        },
        ..Service::default()
    }
}

#[tokio::test]
async fn calls_are_counted_by_operation_and_outcome() {
    let fake = FakeCloud::default();
    let metrics = Metrics::new();
    let cloud = MeteredCloud::new(
        Arc::new(fake.clone()),
        metrics.clone(),
        Arc::new(ccm_runtime::AlwaysLeader),
    );
    let node = Node {
        metadata: ObjectMeta {
            name: Some("ghost".into()),
            ..ObjectMeta::default()
        },
        ..Node::default()
    };

    let instances = cloud.instances().expect("the fake has instances");
    assert!(matches!(
        instances.instance_metadata(&node).await,
        Err(CloudError::InstanceNotFound)
    ));
    fake.fail_next(None, InjectedError::Other("boom".into()), 1);
    assert!(instances.instance_exists(&node).await.is_err());
    assert!(!instances.instance_exists(&node).await.unwrap());

    assert_eq!(
        cloud_call_count(&metrics, "instance_metadata", "not_found"),
        1
    );
    assert_eq!(cloud_call_count(&metrics, "instance_exists", "error"), 1);
    assert_eq!(cloud_call_count(&metrics, "instance_exists", "success"), 1);
    let text = metrics.encode(Some(&cloud));
    assert!(
        text.contains(
            r#"ccm_cloud_provider_calls_total{operation="instance_exists",outcome="success"} 1"#
        ),
        "{text}"
    );
    assert!(text.ends_with("# EOF\n"));
}

#[tokio::test]
async fn mutations_are_refused_without_leadership_and_never_reach_the_cloud() {
    let fake = FakeCloud::default();
    let fence = Arc::new(Toggle::default());
    let metrics = Metrics::new();
    let cloud = MeteredCloud::new(Arc::new(fake.clone()), metrics.clone(), fence.clone());
    let lb = cloud.load_balancer().unwrap();

    let err = lb
        .ensure_load_balancer("c1", &service(), &[])
        .await
        .unwrap_err();
    assert!(
        matches!(err, CloudError::Retry { ref reason, .. } if reason.contains("not the leader")),
        "{err:?}"
    );
    assert_eq!(fake.mutation_count(), 0, "the fake never saw the call");
    assert_eq!(
        cloud_call_count(&metrics, "ensure_load_balancer", "fenced"),
        1
    );
    // Reads are not fenced.
    assert!(lb.get_load_balancer("c1", &service()).await.is_ok());

    fence.0.store(true, Ordering::SeqCst);
    lb.ensure_load_balancer("c1", &service(), &[])
        .await
        .unwrap();
    assert_eq!(fake.count(Operation::EnsureLoadBalancer), 1);
}

#[test]
fn capabilities_follow_the_wrapped_provider() {
    let fake = FakeCloud::default();
    let cloud = MeteredCloud::new(
        Arc::new(fake.clone()),
        Metrics::new(),
        Arc::new(ccm_runtime::AlwaysLeader),
    );
    assert!(
        cloud.instances().is_some() && cloud.load_balancer().is_some() && cloud.routes().is_some()
    );
    assert!(cloud.volumes().is_some() && cloud.inventory().is_some());
    assert!(cloud.service_observer().is_none(), "off until asked for");
    fake.set_capability(Capability::Routes, false);
    assert!(cloud.routes().is_none() && cloud.instances().is_some());
    fake.offer_nothing();
    assert!(
        cloud.instances().is_none() && cloud.load_balancer().is_none() && cloud.routes().is_none()
    );
    assert!(cloud.volumes().is_none() && cloud.inventory().is_none());
}

#[tokio::test(start_paused = true)]
async fn a_herd_meeting_a_rate_limit_is_paced_not_refused_again_and_again() {
    let fake = FakeCloud::default();
    fake.set_auto_instances(true);
    fake.set_rate_limit(Some((20.0, 20))).unwrap();
    let metrics = Metrics::new();
    let cloud = Arc::new(MeteredCloud::new(
        Arc::new(fake.clone()),
        metrics.clone(),
        Arc::new(ccm_runtime::AlwaysLeader),
    ));
    // 200 callers at once, each retrying a refused call after the delay the
    // cloud asked for, as the route controller does.
    let callers = (0..200).map(|i| {
        let cloud = cloud.clone();
        async move {
            let node = Node {
                metadata: ObjectMeta {
                    name: Some(format!("n{i}")),
                    ..ObjectMeta::default()
                },
                ..Node::default()
            };
            for _ in 0..50 {
                match cloud.instance_exists(&node).await {
                    Err(CloudError::Throttled { retry_after }) => {
                        tokio::time::sleep(retry_after).await;
                    }
                    other => return other,
                }
            }
            panic!("still throttled after 50 attempts");
        }
    });
    let results = futures::future::join_all(callers).await;
    assert!(results.iter().all(Result::is_ok));
    let refused = cloud_call_count(&metrics, "instance_exists", "throttled");
    assert!(
        refused <= 30,
        "{refused} refused calls for 200 answers at the cloud's rate"
    );
}

#[tokio::test]
async fn service_syncs_are_counted_and_fenced_like_mutations() {
    let fake = FakeCloud::default();
    fake.observe_services(Duration::from_secs(42));
    let fence = Arc::new(Toggle::default());
    let metrics = Metrics::new();
    let cloud = MeteredCloud::new(Arc::new(fake.clone()), metrics.clone(), fence.clone());
    let sync = cloud
        .service_observer()
        .expect("the wrapper offers the provider's observer");
    assert_eq!(sync.resync_period(), Duration::from_secs(42));
    let services = [Arc::new(service()), Arc::new(service())];

    let err = sync.sync_services(&services).await.unwrap_err();
    assert!(
        matches!(err, CloudError::Retry { ref reason, .. } if reason.contains("not the leader")),
        "{err:?}"
    );
    assert_eq!(
        fake.count(Operation::SyncServices),
        0,
        "the provider never saw the call"
    );
    assert_eq!(cloud_call_count(&metrics, "sync_services", "fenced"), 1);

    fence.0.store(true, Ordering::SeqCst);
    sync.sync_services(&services).await.unwrap();
    let calls = fake.calls();
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert_eq!(calls[0].batch_size, Some(2), "both Services seen");
    assert_eq!(cloud_call_count(&metrics, "sync_services", "success"), 1);
    let text = metrics.encode(Some(&cloud));
    assert!(
        text.contains(
            r#"ccm_cloud_provider_call_duration_seconds_count{operation="sync_services"} 1"#
        ),
        "{text}"
    );
}

#[test]
fn only_a_provider_with_an_observer_offers_one() {
    let fake = FakeCloud::default();
    let cloud = MeteredCloud::new(
        Arc::new(fake.clone()),
        Metrics::new(),
        Arc::new(ccm_runtime::AlwaysLeader),
    );
    assert!(cloud.service_observer().is_none());
    fake.offer_nothing();
    fake.observe_services(Duration::from_secs(42));
    assert!(cloud.service_observer().is_some() && cloud.load_balancer().is_none());
}

#[tokio::test]
async fn volume_lookups_are_counted_and_timed_but_not_fenced() {
    let fake = FakeCloud::default();
    let metrics = Metrics::new();
    // Never the leader: reads still reach the cloud.
    let cloud = MeteredCloud::new(
        Arc::new(fake.clone()),
        metrics.clone(),
        Arc::new(Toggle::default()),
    );
    let answers = cloud
        .volumes_labels(&["vol-1".to_owned(), "vol-2".to_owned()])
        .await
        .unwrap();
    assert_eq!(answers.len(), 2);
    assert_eq!(fake.count(Operation::VolumesLabels), 1);
    assert_eq!(cloud_call_count(&metrics, "volumes_labels", "success"), 1);
    assert_eq!(
        Volumes::max_batch_size(&cloud),
        Volumes::max_batch_size(&fake)
    );
}

/// A fence whose permission lapses at a set time unless renewed.
#[derive(Debug)]
struct Term {
    until: parking_lot::Mutex<tokio::time::Instant>,
}

impl Fence for Term {
    fn check(&self) -> Result<(), Fenced> {
        if tokio::time::Instant::now() < *self.until.lock() {
            Ok(())
        } else {
            Err(Fenced::new("the lease lapsed"))
        }
    }

    fn lapses_at(&self) -> Option<tokio::time::Instant> {
        Some(*self.until.lock())
    }
}

#[tokio::test(start_paused = true)]
async fn a_mutation_waiting_for_its_turn_is_fenced_when_it_would_leave_not_before() {
    let fake = FakeCloud::default();
    let metrics = Metrics::new();
    let term = Arc::new(Term {
        until: parking_lot::Mutex::new(tokio::time::Instant::now() + Duration::from_secs(2)),
    });
    let cloud = MeteredCloud::new(Arc::new(fake.clone()), metrics.clone(), term.clone());
    let lb = cloud.load_balancer().unwrap();
    // The cloud throttles once, asking for 5 s: the next call waits its
    // turn in the pacer, beyond the lease term.
    fake.fail_next(
        Some(Operation::EnsureLoadBalancer),
        InjectedError::Throttled {
            retry_after: Duration::from_secs(5),
        },
        1,
    );
    let first = lb
        .ensure_load_balancer("c", &service(), &[])
        .await
        .unwrap_err();
    assert_eq!(first.kind(), "throttled");
    let calls_before = fake.count(Operation::EnsureLoadBalancer);
    let second = lb
        .ensure_load_balancer("c", &service(), &[])
        .await
        .unwrap_err();
    assert_eq!(second.kind(), "retry", "{second}");
    assert_eq!(
        fake.count(Operation::EnsureLoadBalancer),
        calls_before,
        "the call that waited past the term never reached the cloud"
    );
    assert_eq!(
        cloud_call_count(&metrics, "ensure_load_balancer", "fenced"),
        1
    );
}

#[tokio::test(start_paused = true)]
async fn a_mutation_still_running_when_the_term_lapses_is_cancelled_unless_renewed() {
    let fake = FakeCloud::default();
    fake.set_latency(Duration::from_secs(10));
    let metrics = Metrics::new();
    let start = tokio::time::Instant::now();
    let term = Arc::new(Term {
        until: parking_lot::Mutex::new(start + Duration::from_secs(2)),
    });
    let cloud = MeteredCloud::new(Arc::new(fake.clone()), metrics.clone(), term.clone());
    let lb = cloud.load_balancer().unwrap();
    let err = lb
        .ensure_load_balancer("c", &service(), &[])
        .await
        .unwrap_err();
    assert_eq!(err.kind(), "retry", "{err}");
    assert!(err.to_string().contains("cancelled while it ran"), "{err}");
    assert_eq!(
        start.elapsed(),
        Duration::from_secs(2),
        "cancelled as the term lapsed"
    );
    assert!(fake.load_balancers().is_empty(), "no change landed");

    // Renewed while it runs, it completes.
    *term.until.lock() = tokio::time::Instant::now() + Duration::from_secs(2);
    let renewer = {
        let term = term.clone();
        tokio::spawn(async move {
            for _ in 0..10 {
                tokio::time::sleep(Duration::from_secs(1)).await;
                *term.until.lock() = tokio::time::Instant::now() + Duration::from_secs(2);
            }
        })
    };
    lb.ensure_load_balancer("c", &service(), &[])
        .await
        .expect("a renewed term lets the call finish");
    assert_eq!(fake.load_balancers().len(), 1);
    renewer.abort();
}

/// A provider whose load-balancer operation sends two cloud requests,
/// asking the request fence before each, as the AWS provider's SDK
/// interceptor does; leadership is lost between them.
#[derive(Debug)]
struct TwoRequests {
    leader: Arc<Toggle>,
    sent: AtomicUsize,
}

impl TwoRequests {
    fn send(&self) -> Result<(), CloudError> {
        ccm_cloud_provider::fence::check()?;
        self.sent.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
}

#[async_trait::async_trait]
impl ccm_cloud_provider::LoadBalancer for TwoRequests {
    async fn get_load_balancer(
        &self,
        _: &str,
        _: &Service,
    ) -> Result<Option<ccm_cloud_provider::LoadBalancerStatus>, CloudError> {
        Ok(None)
    }

    async fn ensure_load_balancer(
        &self,
        _: &str,
        _: &Service,
        _: &[Arc<Node>],
    ) -> Result<ccm_cloud_provider::EnsuredLoadBalancer, CloudError> {
        self.send()?;
        self.leader.0.store(false, Ordering::SeqCst);
        self.send()?;
        Ok(ccm_cloud_provider::EnsuredLoadBalancer::default())
    }

    async fn update_load_balancer(
        &self,
        _: &str,
        _: &Service,
        _: &[Arc<Node>],
    ) -> Result<(), CloudError> {
        self.send()
    }

    async fn ensure_load_balancer_deleted(&self, _: &str, _: &Service) -> Result<(), CloudError> {
        self.send()
    }
}

#[async_trait::async_trait]
impl CloudProvider for TwoRequests {
    fn provider_name(&self) -> &'static str {
        "two-requests"
    }

    fn load_balancer(&self) -> Option<&dyn ccm_cloud_provider::LoadBalancer> {
        Some(self)
    }
}

#[tokio::test]
async fn each_request_of_a_multi_request_operation_is_fenced() {
    let leader = Arc::new(Toggle(AtomicBool::new(true)));
    let provider = Arc::new(TwoRequests {
        leader: leader.clone(),
        sent: AtomicUsize::new(0),
    });
    let cloud = MeteredCloud::new(provider.clone(), Metrics::new(), leader.clone());
    let err = cloud
        .load_balancer()
        .unwrap()
        .ensure_load_balancer("c", &service(), &[])
        .await
        .unwrap_err();
    assert_eq!(err.kind(), "retry", "{err}");
    assert!(err.to_string().contains("not the leader"), "{err}");
    assert_eq!(
        provider.sent.load(Ordering::SeqCst),
        1,
        "the request after leadership was lost never left"
    );
    // Outside a mutation (reads), the check always passes.
    assert!(ccm_cloud_provider::fence::check().is_ok());
}
