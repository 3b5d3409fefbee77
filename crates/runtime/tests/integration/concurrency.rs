//! Cloud mutations under a throttling cloud: the routes in flight shrink to
//! what the cloud takes (few refused calls, all routes at the cloud's
//! rate), and a Service's load balancer never waits behind throttled
//! route work.

use std::sync::Arc;
use std::time::Duration;

use ccm_cloud_provider::{CloudError, CloudProvider, Route};
use ccm_provider_fake::{FakeCloud, InjectedError, Operation};
use ccm_runtime::{AlwaysLeader, MeteredCloud, Metrics};
use ccm_test_support::cloud_call_count;
use tokio::time::Instant;

fn metered(fake: &FakeCloud, metrics: &Metrics) -> Arc<MeteredCloud> {
    Arc::new(MeteredCloud::new(
        Arc::new(fake.clone()),
        metrics.clone(),
        Arc::new(AlwaysLeader),
    ))
}

fn route(i: usize) -> Route {
    Route {
        name: String::new(),
        target_node: format!("n{i}"),
        target_provider_id: None,
        destination_cidr: format!("10.{}.{}.0/24", 64 + i / 256, i % 256)
            .parse()
            .expect("a CIDR"),
        blackhole: false,
    }
}

#[tokio::test(start_paused = true)]
#[allow(clippy::print_stdout, reason = "prints its figures for the report")]
async fn a_route_burst_meets_a_rate_limit_with_few_refused_calls() {
    // The benchmark's cloud: 50 ms a call, 20 calls a second.
    const ROUTES: usize = 5_000;
    let fake = FakeCloud::default();
    fake.set_auto_instances(true);
    fake.set_latency(Duration::from_millis(50));
    fake.set_rate_limit(Some((20.0, 20))).unwrap();
    let metrics = Metrics::new();
    let cloud = metered(&fake, &metrics);
    let start = Instant::now();
    // 200 creates in flight, each retried after the delay the cloud asks
    // for, as the route controller does.
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let workers = (0..200).map(|_| {
        let (cloud, next) = (cloud.clone(), next.clone());
        async move {
            let routes = cloud.routes().expect("the fake has routes");
            loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if i >= ROUTES {
                    return;
                }
                let mut attempts = 0;
                loop {
                    attempts += 1;
                    assert!(attempts <= 1_000, "route {i} still refused");
                    match routes.create_route("c", "hint", &route(i)).await {
                        Ok(()) => break,
                        Err(CloudError::Throttled { retry_after }) => {
                            tokio::time::sleep(retry_after).await;
                        }
                        Err(e) => panic!("route {i}: {e}"),
                    }
                }
            }
        }
    });
    futures::future::join_all(workers).await;
    let elapsed = start.elapsed();
    let calls = fake.count(Operation::CreateRoute);
    let refused = cloud_call_count(&metrics, "create_route", "throttled");
    assert_eq!(fake.routes().len(), ROUTES);
    // Printed for the closing note's figures (shown with --nocapture).
    println!(
        "{ROUTES} routes: {calls} CreateRoute calls ({refused} throttled) in {elapsed:.1?} (the cloud's bound: {} s)",
        ROUTES / 20
    );
    assert!(
        calls as f64 <= 1.05 * ROUTES as f64,
        "{calls} CreateRoute calls ({refused} throttled) for {ROUTES} routes"
    );
    assert!(
        elapsed <= Duration::from_secs_f64(1.1 * ROUTES as f64 / 20.0),
        "{ROUTES} routes took {elapsed:?} at 20 calls a second"
    );
}

#[tokio::test(start_paused = true)]
async fn a_load_balancer_does_not_wait_behind_throttled_routes() {
    let fake = FakeCloud::default();
    fake.set_auto_instances(true);
    let metrics = Metrics::new();
    let cloud = metered(&fake, &metrics);
    // The cloud throttles route creates and asks for 5 s.
    fake.fail_next(
        Some(Operation::CreateRoute),
        InjectedError::Throttled {
            retry_after: Duration::from_secs(5),
        },
        1,
    );
    let routes = cloud.routes().expect("routes");
    let refused = routes.create_route("c", "hint", &route(0)).await;
    assert!(
        matches!(refused, Err(CloudError::Throttled { .. })),
        "{refused:?}"
    );
    let start = Instant::now();
    let mut service = ccm_test_support::load_balancer_service("web", &[]);
    service.metadata.uid = Some("0b0e6a2c-0000-4000-8000-000000000001".into());
    let lbs = cloud.load_balancer().expect("load balancers");
    lbs.ensure_load_balancer("c", &service, &[])
        .await
        .expect("ensured");
    assert_eq!(
        start.elapsed(),
        Duration::ZERO,
        "the load balancer waited behind the routes' pacing"
    );
    // The routes themselves do wait.
    routes
        .create_route("c", "hint", &route(0))
        .await
        .expect("created");
    assert!(start.elapsed() >= Duration::from_secs(5));
    let gauge = metrics.encode(None);
    assert!(
        gauge.contains("ccm_cloud_provider_concurrency_limit{class=\"routes\"} 5"),
        "one throttled answer halves the routes' limit (10 at the start): {gauge}"
    );
    assert!(
        gauge.contains("ccm_cloud_provider_concurrency_limit{class=\"load_balancers\"} 11"),
        "the load balancers' limit grew by one: {gauge}"
    );
}
