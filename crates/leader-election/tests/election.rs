//! Leader election against the in-memory API server, over loopback HTTP,
//! with the real kube client. Durations are short (lease 3 s, renew
//! deadline 2 s, retry period 0.5 s).
//!
//! Timings are measured on the paused tokio clock: the API server runs in
//! the test's runtime, so the clock only jumps when every task waits on a
//! timer, and bounds are exact. Only the first test runs on the real clock,
//! on two threads, to look for two leaders at once under real concurrency;
//! it asserts no timing.

mod support;

use std::time::Duration;

use anyhow::Context as _;
use ccm_leader_election::{
    ConfigError, Error, LeaderElectionConfig, LeaderElector, LeaseApiError, NotLeader,
};
use ccm_test_apiserver::{Failure, RequestMatch, TestApiServer, Verb};
use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use kube::api::PostParams;
use tokio::time::{Instant, sleep, sleep_until, timeout};
use tokio_util::sync::CancellationToken;

use support::{
    Candidate, DEADLINE, LEASE, LEASE_NAME, NAMESPACE, RETRY, Sampler, lease_record, spawn,
    spawn_with, wait_for_leader,
};

/// Ample for a takeover that waits for expiry on the real clock: lease
/// duration + retry period is the bound asserted, on the paused clock, where
/// it matters.
const TAKEOVER_WITHIN: Duration = Duration::from_secs(6);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_most_one_of_three_candidates_leads_at_any_instant() -> anyhow::Result<()> {
    let server = TestApiServer::start().await?;
    let sampler = Sampler::start();
    let mut candidates: Vec<Candidate> = ["a", "b", "c"]
        .iter()
        .map(|id| spawn(&server, id))
        .collect();
    candidates
        .iter()
        .for_each(|candidate| sampler.watch(candidate));

    // Four handovers: the leader is killed or shut down in turn and a new
    // candidate joins, so that there are always three.
    for round in 0..4 {
        let (leader, _) = wait_for_leader(&candidates, TAKEOVER_WITHIN)
            .await
            .context("no leader")?;
        sleep(Duration::from_secs(1)).await;
        let leader = candidates.remove(leader);
        if round % 2 == 0 {
            leader.task.abort();
        } else {
            leader.shutdown.cancel();
            leader.task.await??;
        }
        let joining = spawn(&server, &format!("joined-{round}"));
        sampler.watch(&joining);
        candidates.push(joining);
    }
    wait_for_leader(&candidates, TAKEOVER_WITHIN)
        .await
        .context("no leader after the last handover")?;
    let report = sampler.finish().await;

    assert!(
        report.overlaps.is_empty(),
        "several leaders at once: {:?}",
        report.overlaps
    );
    assert!(report.samples > 1_000, "only {} samples", report.samples);
    assert!(
        report.samples_with_a_leader > report.samples / 2,
        "{report:?}"
    );
    let record = lease_record(&server).await?.context("no Lease")?;
    assert_eq!(
        record.lease_transitions, 4,
        "one transition per handover: {record:?}"
    );
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn killed_leader_is_replaced_within_lease_duration_plus_retry_period() -> anyhow::Result<()> {
    let server = TestApiServer::start().await?;
    let a = spawn(&server, "a");
    wait_for_leader(std::slice::from_ref(&a), Duration::from_secs(2))
        .await
        .context("a never led")?;
    let followers = vec![spawn(&server, "b"), spawn(&server, "c")];
    sleep(Duration::from_secs(1)).await;

    // Killed without releasing: the others must wait for the Lease to expire.
    a.task.abort();
    let killed = Instant::now();
    let (leader, _) = wait_for_leader(&followers, TAKEOVER_WITHIN)
        .await
        .context("nobody took over")?;
    let waited = killed.elapsed();

    assert!(waited <= LEASE + RETRY, "took {waited:?}");
    // a renewed at most a retry period before it died, and nobody takes
    // over before expiry.
    assert!(waited > LEASE - RETRY, "took over early: {waited:?}");
    let record = lease_record(&server).await?.context("no Lease")?;
    assert_eq!(record.holder(), Some(followers[leader].identity.as_str()));
    assert_eq!(record.lease_transitions, 1);
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn graceful_shutdown_hands_over_at_once() -> anyhow::Result<()> {
    let server = TestApiServer::start().await?;
    let a = spawn(&server, "a");
    wait_for_leader(std::slice::from_ref(&a), Duration::from_secs(2))
        .await
        .context("a never led")?;
    let followers = vec![spawn(&server, "b"), spawn(&server, "c")];
    let sampler = Sampler::start();
    sampler.watch(&a);
    followers
        .iter()
        .for_each(|candidate| sampler.watch(candidate));
    sleep(Duration::from_secs(1)).await;

    a.shutdown.cancel();
    let stopped = Instant::now();
    a.task.await?.context("a's graceful shutdown")?;
    assert_eq!(a.handle.fence(), Err(NotLeader::NotElected));
    let (_, _) = wait_for_leader(&followers, LEASE)
        .await
        .context("nobody took over")?;
    let handover = stopped.elapsed();
    let report = sampler.finish().await;

    assert!(
        handover < Duration::from_millis(50),
        "took {handover:?}, the released Lease should be taken at once"
    );
    assert!(
        report.overlaps.is_empty(),
        "several leaders at once: {:?}",
        report.overlaps
    );
    assert_eq!(
        lease_record(&server)
            .await?
            .context("no Lease")?
            .lease_transitions,
        1
    );
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn leader_whose_requests_fail_is_fenced_within_the_renew_deadline() -> anyhow::Result<()> {
    let server = TestApiServer::start().await?;
    let a = spawn(&server, "a");
    wait_for_leader(std::slice::from_ref(&a), Duration::from_secs(2))
        .await
        .context("a never led")?;
    let followers = vec![spawn(&server, "b"), spawn(&server, "c")];
    let sampler = Sampler::start();
    sampler.watch(&a);
    followers
        .iter()
        .for_each(|candidate| sampler.watch(candidate));
    sleep(Duration::from_secs(1)).await;

    // Every request on Leases fails from now on, watches included.
    server.fail_next(
        RequestMatch::any().resource("leases"),
        Failure::internal_error(),
        u32::MAX,
    );
    server.close_all_watches();
    let failing = Instant::now();

    sleep_until(failing + DEADLINE).await;
    assert!(
        a.handle.fence().is_err(),
        "a still passes its fencing check"
    );
    let result = timeout(Duration::from_secs(1), a.task)
        .await
        .context("run did not return")??;
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

    // Faults last until well after a's Lease expired; the followers keep
    // trying meanwhile.
    let requests = server.stats().total();
    sleep_until(failing + LEASE + 2 * RETRY).await;
    assert!(
        server.stats().total() > requests,
        "the followers tried to take over"
    );
    server.clear_faults();
    let recovered = Instant::now();
    wait_for_leader(&followers, LEASE + RETRY)
        .await
        .context("nobody took over after recovery")?;
    let report = sampler.finish().await;
    assert!(
        report.overlaps.is_empty(),
        "several leaders at once: {:?}",
        report.overlaps
    );
    let early: Vec<_> = report
        .first_led
        .iter()
        .filter(|(identity, at)| identity.as_str() != "a" && **at < recovered)
        .collect();
    assert!(
        early.is_empty(),
        "led while nobody could write the Lease: {early:?}"
    );
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn leader_loses_to_a_write_it_did_not_expect() -> anyhow::Result<()> {
    let server = TestApiServer::start().await?;
    let a = spawn(&server, "a");
    wait_for_leader(std::slice::from_ref(&a), Duration::from_secs(2))
        .await
        .context("a never led")?;

    // Another client takes the Lease: a's next update carries a stale
    // resourceVersion and is refused with 409.
    let leases: Api<Lease> = Api::namespaced(server.client(), NAMESPACE);
    let mut lease = leases.get(LEASE_NAME).await?;
    let spec = lease.spec.get_or_insert_with(Default::default);
    spec.holder_identity = Some("intruder".into());
    spec.lease_duration_seconds = Some(60);
    leases
        .replace(LEASE_NAME, &PostParams::default(), &lease)
        .await?;

    let result = timeout(2 * RETRY, a.task)
        .await
        .context("a did not notice")??;
    match result {
        Err(Error::LeaseTakenOver { holder, .. }) => assert_eq!(holder, "intruder"),
        other => panic!("expected LeaseTakenOver, got {other:?}"),
    }
    assert!(!a.handle.is_leader());
    assert_eq!(
        lease_record(&server).await?.context("no Lease")?.holder(),
        Some("intruder")
    );
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn steady_state_costs_one_update_per_retry_period_and_one_read_per_follower_try()
-> anyhow::Result<()> {
    let server = TestApiServer::start().await?;
    let a = spawn(&server, "a");
    wait_for_leader(std::slice::from_ref(&a), Duration::from_secs(2))
        .await
        .context("a never led")?;
    let _followers = [spawn(&server, "b"), spawn(&server, "c")];
    sleep(Duration::from_secs(1)).await;

    server.reset_stats();
    sleep(Duration::from_secs(5)).await;
    let stats = server.stats();

    let updates = stats.count(Verb::Update, "leases");
    let gets = stats.count(Verb::Get, "leases");
    // The leader renews every 0.5 s without reading first.
    assert!((10..=11).contains(&updates), "{updates} updates");
    // Each follower reads once per try, every 0.5 s to 1.1 s (jittered).
    assert!((2 * 4..=2 * 11).contains(&gets), "{gets} gets");
    assert_eq!(stats.count(Verb::Create, "leases"), 0);
    assert!(a.handle.is_leader());
    Ok(())
}

#[tokio::test(start_paused = true)]
async fn default_durations_elect_write_the_lease_and_release_it() -> anyhow::Result<()> {
    let server = TestApiServer::start().await?;
    let config = LeaderElectionConfig::new(LEASE_NAME, NAMESPACE, "solo");
    let solo = spawn_with(&server, config);
    wait_for_leader(std::slice::from_ref(&solo), Duration::from_secs(2))
        .await
        .context("never led")?;

    let held = lease_record(&server).await?.context("no Lease")?;
    assert_eq!(held.holder(), Some("solo"));
    assert_eq!(held.lease_duration_seconds, 15);
    assert_eq!(held.lease_transitions, 0);
    assert!(held.acquire_time.is_some() && held.acquire_time == held.renew_time);

    solo.shutdown.cancel();
    solo.task.await?.context("graceful shutdown")?;
    let released = lease_record(&server).await?.context("no Lease")?;
    assert_eq!(released.holder(), None);
    assert_eq!(released.lease_duration_seconds, 1);
    assert_eq!(released.lease_transitions, 0);
    assert!(released.renew_time > held.renew_time);
    Ok(())
}

#[tokio::test]
async fn invalid_config_is_refused_before_any_request() -> anyhow::Result<()> {
    let server = TestApiServer::start().await?;
    let config = LeaderElectionConfig::new(LEASE_NAME, NAMESPACE, "a")
        .with_renew_deadline(Duration::from_secs(20));
    let error = LeaderElector::new(server.client(), config)
        .expect_err("renew deadline above lease duration");
    assert!(
        matches!(
            error,
            ConfigError::RenewDeadlineNotBelowLeaseDuration { .. }
        ),
        "{error}"
    );
    assert_eq!(server.stats().total(), 0);

    // A shutdown requested before run starts sends nothing either.
    let elector = LeaderElector::new(server.client(), support::fast_config("a"))?;
    let shutdown = CancellationToken::new();
    shutdown.cancel();
    elector.run(shutdown).await?;
    assert_eq!(server.stats().total(), 0);
    Ok(())
}
