//! The election loop against an in-memory Lease, on a paused clock: timings
//! are exact, so the bounds below are tight.

use std::time::Duration;

use tokio::task::JoinHandle;
use tokio::time::{Instant, sleep, sleep_until};
use tokio_util::sync::CancellationToken;

use super::Error;
use super::campaign::Campaign;
use super::fake_store::{FakeLeaseStore, FakeLeases, Fault};
use crate::{LeaderElectionConfig, LeaderHandle, LeaseApiError, NotLeader};

const LEASE: Duration = LeaderElectionConfig::DEFAULT_LEASE_DURATION;
const DEADLINE: Duration = LeaderElectionConfig::DEFAULT_RENEW_DEADLINE;
const RETRY: Duration = LeaderElectionConfig::DEFAULT_RETRY_PERIOD;
const TICK: Duration = Duration::from_millis(10);

struct Candidate {
    handle: LeaderHandle,
    store: FakeLeaseStore,
    shutdown: CancellationToken,
    task: JoinHandle<Result<(), Error>>,
}

fn spawn(leases: &FakeLeases, identity: &str, latency: Duration) -> Candidate {
    let config = LeaderElectionConfig::new("ccm", "kube-system", identity);
    config.validate().unwrap();
    let handle = LeaderHandle::candidate();
    let store = leases.store(latency);
    let shutdown = CancellationToken::new();
    let campaign = Campaign::new(store.clone(), config, handle.clone());
    let task = tokio::spawn(campaign.run(shutdown.clone()));
    Candidate {
        handle,
        store,
        shutdown,
        task,
    }
}

fn holder(leases: &FakeLeases) -> Option<String> {
    leases
        .record()
        .and_then(|record| record.holder().map(str::to_owned))
}

/// Samples every tick until `until`; returns when `candidate` first led,
/// and panics if two candidates ever lead at once.
async fn first_led(
    candidates: &[&LeaderHandle],
    watched: &LeaderHandle,
    until: Instant,
) -> Option<Instant> {
    let mut first = None;
    while Instant::now() < until {
        let leaders = candidates
            .iter()
            .filter(|handle| handle.is_leader())
            .count();
        assert!(leaders <= 1, "{leaders} leaders at once");
        if first.is_none() && watched.is_leader() {
            first = Some(Instant::now());
        }
        sleep(TICK).await;
    }
    first
}

#[tokio::test(start_paused = true)]
async fn lone_candidate_creates_the_lease_and_leads() {
    let leases = FakeLeases::new();
    let a = spawn(&leases, "a", Duration::ZERO);
    assert_eq!(a.handle.lease_uid(), None);
    sleep(TICK).await;

    assert_eq!(a.handle.fence(), Ok(()));
    // What the "became leader" Event refers to.
    assert_eq!(a.handle.lease_uid().as_deref(), Some("lease-uid-1"));
    assert!(*a.handle.watch().borrow());
    let record = leases.record().unwrap();
    assert_eq!(record.holder(), Some("a"));
    assert_eq!(record.lease_duration_seconds, 15);
    assert_eq!(record.lease_transitions, 0);
}

#[tokio::test(start_paused = true)]
async fn leader_renews_every_retry_period_and_the_follower_never_leads() {
    let leases = FakeLeases::new();
    let a = spawn(&leases, "a", Duration::ZERO);
    sleep(TICK).await;
    let acquired = leases.record().unwrap();
    let b = spawn(&leases, "b", Duration::ZERO);

    let start = Instant::now();
    let b_led = first_led(
        &[&a.handle, &b.handle],
        &b.handle,
        start + Duration::from_secs(120),
    )
    .await;

    assert_eq!(b_led, None);
    assert!(a.handle.is_leader());
    // One create, then one renewal per retry period.
    assert_eq!(leases.writes(), 1 + 60);
    let renewed = leases.record().unwrap();
    assert_eq!(renewed.holder(), Some("a"));
    assert_eq!(renewed.acquire_time, acquired.acquire_time);
    assert_eq!(renewed.lease_transitions, 0);
    assert_ne!(renewed.renew_time, acquired.renew_time);
}

#[tokio::test(start_paused = true)]
async fn three_candidates_starting_together_elect_one() {
    let leases = FakeLeases::new();
    let latency = Duration::from_millis(5);
    let a = spawn(&leases, "a", latency);
    let b = spawn(&leases, "b", latency);
    let c = spawn(&leases, "c", latency);
    let start = Instant::now();
    first_led(
        &[&a.handle, &b.handle, &c.handle],
        &a.handle,
        start + Duration::from_secs(30),
    )
    .await;

    let leaders = [&a, &b, &c]
        .iter()
        .filter(|candidate| candidate.handle.is_leader())
        .count();
    assert_eq!(leaders, 1);
    let record = leases.record().unwrap();
    assert_eq!(record.lease_transitions, 0);
}

#[tokio::test(start_paused = true)]
async fn killed_leader_is_replaced_once_its_lease_expires() {
    let leases = FakeLeases::new();
    let a = spawn(&leases, "a", Duration::ZERO);
    sleep(TICK).await;
    let b = spawn(&leases, "b", Duration::ZERO);
    sleep(Duration::from_secs(5)).await;

    a.task.abort();
    let killed = Instant::now();
    let b_led = first_led(&[&b.handle], &b.handle, killed + LEASE + RETRY)
        .await
        .expect("b never led");

    // a renewed at most one retry period before it was killed, and b saw it
    // at once through its watch.
    let waited = b_led - killed;
    assert!(
        waited > LEASE - RETRY - TICK && waited <= LEASE + TICK,
        "{waited:?}"
    );
    let record = leases.record().unwrap();
    assert_eq!(record.holder(), Some("b"));
    assert_eq!(record.lease_transitions, 1);
}

#[tokio::test(start_paused = true)]
async fn graceful_shutdown_releases_and_the_follower_leads_at_once() {
    let leases = FakeLeases::new();
    let latency = Duration::from_millis(1);
    let a = spawn(&leases, "a", latency);
    sleep(Duration::from_millis(50)).await;
    let b = spawn(&leases, "b", latency);
    sleep(Duration::from_secs(7)).await;

    a.shutdown.cancel();
    let stopped = Instant::now();
    a.task.await.unwrap().unwrap();
    assert!(!a.handle.is_leader());
    assert!(!*a.handle.watch().borrow());

    let b_led = first_led(
        &[&a.handle, &b.handle],
        &b.handle,
        stopped + Duration::from_secs(1),
    )
    .await
    .expect("b never led");
    assert!(
        b_led - stopped < Duration::from_millis(50),
        "{:?}",
        b_led - stopped
    );
    let record = leases.record().unwrap();
    assert_eq!(record.holder(), Some("b"));
    assert_eq!(record.lease_transitions, 1);
}

#[tokio::test(start_paused = true)]
async fn released_lease_reads_as_client_go_writes_it() {
    let leases = FakeLeases::new();
    let a = spawn(&leases, "a", Duration::ZERO);
    sleep(Duration::from_secs(3)).await;
    let before = leases.record().unwrap();

    a.shutdown.cancel();
    a.task.await.unwrap().unwrap();

    let released = leases.record().unwrap();
    assert_eq!(released.holder(), None);
    assert_eq!(released.lease_duration_seconds, 1);
    assert_eq!(released.lease_transitions, before.lease_transitions);
    assert!(released.renew_time > before.renew_time);
}

#[tokio::test(start_paused = true)]
async fn shutdown_while_following_leaves_the_lease_alone() {
    let leases = FakeLeases::new();
    let a = spawn(&leases, "a", Duration::ZERO);
    sleep(TICK).await;
    let b = spawn(&leases, "b", Duration::ZERO);
    sleep(Duration::from_secs(3)).await;
    let writes = leases.writes();

    b.shutdown.cancel();
    b.task.await.unwrap().unwrap();

    assert_eq!(holder(&leases).as_deref(), Some("a"));
    assert_eq!(leases.writes(), writes);
    assert!(a.handle.is_leader());
}

#[tokio::test(start_paused = true)]
async fn failing_leader_stops_mutating_within_the_renew_deadline() {
    let leases = FakeLeases::new();
    let a = spawn(&leases, "a", Duration::ZERO);
    sleep(TICK).await;
    let b = spawn(&leases, "b", Duration::ZERO);
    sleep(Duration::from_secs(5)).await;

    a.store.set_fault(Fault::InternalError);
    let failing = Instant::now();
    let mut fenced_at = None;
    while fenced_at.is_none() && Instant::now() < failing + LEASE {
        sleep(TICK).await;
        if let Err(NotLeader::Expired { .. } | NotLeader::NotElected) = a.handle.fence() {
            fenced_at = Some(Instant::now());
        }
    }
    let fenced_after = fenced_at.expect("fence never turned false") - failing;
    // The last renewal succeeded at most one retry period before the fault.
    assert!(
        fenced_after > DEADLINE - RETRY && fenced_after <= DEADLINE,
        "{fenced_after:?}"
    );

    let result = a.task.await.unwrap();
    assert!(
        Instant::now() - failing <= DEADLINE,
        "{:?}",
        Instant::now() - failing
    );
    match result {
        Err(Error::LeadershipLost {
            last_error: Some(LeaseApiError::Request { source, .. }),
            ..
        }) => assert!(
            matches!(source, kube::Error::Api(ref status) if status.code == 500),
            "{source}"
        ),
        other => panic!("expected LeadershipLost after 500s, got {other:?}"),
    }
    assert!(!*a.handle.watch().borrow());

    let b_led = first_led(&[&a.handle, &b.handle], &b.handle, failing + LEASE + RETRY).await;
    assert!(b_led.is_some(), "b must take over once a's lease expires");
}

#[tokio::test(start_paused = true)]
async fn hanging_requests_end_leadership_at_the_renew_deadline() {
    let leases = FakeLeases::new();
    let a = spawn(&leases, "a", Duration::ZERO);
    sleep(Duration::from_secs(1)).await;

    a.store.set_fault(Fault::Hang);
    let hanging = Instant::now();
    let result = a.task.await.unwrap();

    assert!(Instant::now() - hanging <= DEADLINE);
    assert!(
        matches!(
            result,
            Err(Error::LeadershipLost {
                last_error: None,
                ..
            })
        ),
        "{result:?}"
    );
    assert!(!a.handle.is_leader());
}

#[tokio::test(start_paused = true)]
async fn renew_deadline_counts_from_when_the_renewal_was_sent() {
    let leases = FakeLeases::new();
    let latency = Duration::from_secs(1);
    let a = spawn(&leases, "a", latency);
    let start = Instant::now();
    // A get (1 s), then a create sent at 1 s that answers at 2 s.
    sleep_until(start + Duration::from_millis(2_001)).await;
    assert!(a.handle.is_leader());

    a.store.set_fault(Fault::Hang);
    sleep_until(start + Duration::from_secs(1) + DEADLINE - TICK).await;
    assert_eq!(a.handle.fence(), Ok(()));
    sleep(TICK).await;
    assert!(
        matches!(a.handle.fence(), Err(NotLeader::Expired { .. })),
        "{:?}",
        a.handle.fence()
    );
}

#[tokio::test(start_paused = true)]
async fn leader_that_finds_another_holder_steps_down_at_once() {
    let leases = FakeLeases::new();
    let a = spawn(&leases, "a", Duration::ZERO);
    sleep(Duration::from_secs(3)).await;

    let mut usurped = leases.record().unwrap();
    usurped.holder_identity = "x".into();
    usurped.lease_transitions += 1;
    leases.overwrite(&usurped);
    let result = a.task.await.unwrap();

    match result {
        Err(Error::LeaseTakenOver { holder, .. }) => assert_eq!(holder, "x"),
        other => panic!("expected LeaseTakenOver, got {other:?}"),
    }
    assert!(!a.handle.is_leader());
    assert_eq!(leases.record(), Some(usurped));
}

#[tokio::test(start_paused = true)]
async fn failing_follower_retries_at_the_jittered_period_not_in_a_loop() {
    let leases = FakeLeases::new();
    let a = spawn(&leases, "a", Duration::ZERO);
    sleep(TICK).await;
    a.shutdown.cancel();
    a.task.await.unwrap().unwrap();
    // The Lease is released: acquirable at once, but b's writes fail.
    let b = spawn(&leases, "b", Duration::ZERO);
    b.store.set_fault(Fault::WritesFail);

    sleep(Duration::from_secs(20)).await;
    // A get and a failed update per try; a try at once, one more when the
    // watch first reports the Lease, then one every 2 s to 4.4 s.
    let requests = b.store.requests();
    assert!(
        (2 * 5..=2 * 12).contains(&requests),
        "{requests} requests in 20 s"
    );
    b.store.set_fault(Fault::None);
    let recovered = Instant::now();
    let b_led = first_led(&[&b.handle], &b.handle, recovered + Duration::from_secs(5))
        .await
        .expect("b never led");

    assert!(
        b_led - recovered <= RETRY.mul_f64(2.2) + TICK,
        "{:?}",
        b_led - recovered
    );
    let record = leases.record().unwrap();
    assert_eq!(record.holder(), Some("b"));
    assert_eq!(record.lease_transitions, 1);
}
