//! The framework's retry policy on a paused clock: a store writer fed
//! directly (no API server), a reconcile that fails as scripted, and the
//! instants at which it ran. Timings are exact.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use ccm_cloud_provider::CloudError;
use futures::StreamExt;
use futures::channel::mpsc;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::ObjectMeta;
use kube::runtime::reflector;
use kube::runtime::{WatchStreamExt, watcher};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use ccm_cloud_provider::server_delay::MAX_SERVER_DELAY;

use super::{ControllerConfig, Triggers, drive, only, retry_action};
use crate::{Action, Metrics, ReconcileError, Retry};

/// What a scripted reconcile answers, in turn; success once the script runs
/// out.
type Script = Vec<Result<(), ReconcileError>>;

/// One controller over a hand-fed store of ConfigMaps.
struct Fixture {
    events: mpsc::UnboundedSender<watcher::Result<watcher::Event<ConfigMap>>>,
    runs: Arc<Mutex<Vec<Instant>>>,
    metrics: Metrics,
    shutdown: CancellationToken,
    start: Instant,
    version: u64,
}

fn config_map(version: u64) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some("settings".into()),
            namespace: Some("default".into()),
            resource_version: Some(version.to_string()),
            ..ObjectMeta::default()
        },
        data: Some([("version".to_owned(), version.to_string())].into()),
        ..ConfigMap::default()
    }
}

impl Fixture {
    /// Starts the controller on an empty, listed store.
    fn start(script: Script) -> Self {
        Self::start_where(script, |_| true)
    }

    /// [`Fixture::start`], the changes filtered by `relevant` as
    /// [`super::run_where`] filters them.
    fn start_where(script: Script, relevant: fn(&ConfigMap) -> bool) -> Self {
        let (store, writer) = reflector::store_shared::<ConfigMap>(16);
        let changes = only(writer.subscribe().expect("a shared store"), relevant);
        let (events, fed) = mpsc::unbounded();
        tokio::spawn(
            fed.reflect_shared(writer)
                .for_each(|_| futures::future::ready(())),
        );
        let runs: Arc<Mutex<Vec<Instant>>> = Arc::default();
        let script = Mutex::new(script.into_iter());
        let seen = runs.clone();
        let reconcile = move |_: Arc<ConfigMap>| {
            seen.lock().unwrap().push(Instant::now());
            let outcome = script.lock().unwrap().next().unwrap_or(Ok(()));
            async move { outcome.map(|()| Action::await_change()) }
        };
        let metrics = Metrics::new();
        let shutdown = CancellationToken::new();
        let config = ControllerConfig {
            name: "test",
            concurrency: 1,
        };
        tokio::spawn(drive(
            config,
            changes,
            store,
            Triggers::default(),
            metrics.clone(),
            shutdown.clone(),
            reconcile,
        ));
        for event in [watcher::Event::Init, watcher::Event::InitDone] {
            events.unbounded_send(Ok(event)).unwrap();
        }
        Self {
            events,
            runs,
            metrics,
            shutdown,
            start: Instant::now(),
            version: 0,
        }
    }

    /// The object is created or changed, as a watch event would say.
    fn change(&mut self) {
        self.version += 1;
        let event = watcher::Event::Apply(config_map(self.version));
        self.events.unbounded_send(Ok(event)).unwrap();
    }

    /// When each reconcile ran, from the start.
    fn runs(&self) -> Vec<Duration> {
        let runs = self.runs.lock().unwrap();
        runs.iter().map(|at| *at - self.start).collect()
    }

    /// Waits (on the paused clock) until `n` reconciles ran.
    async fn runs_after(&self, n: usize) -> Vec<Duration> {
        for _ in 0..10_000 {
            if self.runs.lock().unwrap().len() >= n {
                return self.runs();
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("only {:?} after 1000 s", self.runs());
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

fn failure() -> Result<(), ReconcileError> {
    Err(ReconcileError::Cloud(CloudError::msg("the cloud is down")))
}

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

#[tokio::test(start_paused = true)]
async fn failures_are_retried_after_5_s_doubling_and_a_success_resets_the_backoff() {
    let mut f = Fixture::start(vec![failure(), failure(), failure(), Ok(()), failure()]);
    f.change();
    let runs = f.runs_after(4).await;
    assert_eq!(runs, [secs(0), secs(5), secs(5 + 10), secs(5 + 10 + 20)]);

    // Succeeded at 35 s; the next failure waits 5 s again.
    f.change();
    let runs = f.runs_after(6).await;
    assert_eq!(runs[5] - runs[4], secs(5));
}

#[tokio::test(start_paused = true)]
async fn a_delay_the_provider_asks_for_is_waited_exactly_and_does_not_grow_the_backoff() {
    let throttled = Err(ReconcileError::Cloud(CloudError::Throttled {
        retry_after: Duration::from_millis(1500),
    }));
    let mut f = Fixture::start(vec![throttled, failure(), failure()]);
    f.change();
    let runs = f.runs_after(4).await;
    assert_eq!(
        runs,
        [
            secs(0),
            Duration::from_millis(1500),
            Duration::from_millis(1500) + secs(5),
            Duration::from_millis(1500) + secs(5 + 10),
        ],
        "the throttle is not a failure: the first backoff is still 5 s"
    );
}

#[tokio::test(start_paused = true)]
async fn a_delay_beyond_the_ceiling_requeues_at_the_ceiling_without_panicking() {
    let forever = Err(ReconcileError::Cloud(CloudError::Throttled {
        retry_after: Duration::MAX,
    }));
    let years = Err(ReconcileError::Cloud(CloudError::Retry {
        after: secs(10 * 365 * 24 * 3600),
        reason: "provisioning".into(),
    }));
    let mut f = Fixture::start(vec![forever, years]);
    f.change();
    let runs = f.runs_after(3).await;
    assert_eq!(runs, [secs(0), secs(300), secs(600)]);
}

#[test]
fn the_requeue_itself_holds_any_delay_to_the_ceiling() {
    let never = || panic!("no backoff for a requested delay");
    assert_eq!(
        retry_action(Retry::After(Duration::MAX), never),
        Action::requeue(MAX_SERVER_DELAY)
    );
    assert_eq!(
        retry_action(Retry::After(secs(7)), never),
        Action::requeue(secs(7))
    );
    assert_eq!(
        retry_action(Retry::Backoff, || secs(5)),
        Action::requeue(secs(5))
    );
}

#[tokio::test(start_paused = true)]
async fn bad_input_is_not_retried_until_the_object_changes() {
    let invalid = Err(ReconcileError::Invalid("expected a number".into()));
    let mut f = Fixture::start(vec![invalid]);
    f.change();
    f.runs_after(1).await;

    // An hour of virtual time: every timer due in it runs.
    tokio::time::sleep(secs(3600)).await;
    let settled = f.metrics.activity().snapshot();
    assert_eq!((settled.queued, settled.running), (0, 0), "{settled}");
    assert_eq!(f.runs(), [secs(0)], "not retried");
    assert_eq!(settled.retrying, 0, "no retry scheduled");

    let changed_at = f.start.elapsed();
    f.change();
    let runs = f.runs_after(2).await;
    assert_eq!(runs[1], changed_at, "the change is reconciled at once");
}

#[tokio::test(start_paused = true)]
async fn the_activity_counts_queued_running_and_retrying_objects() {
    let mut f = Fixture::start(vec![failure()]);
    let activity = f.metrics.activity();
    // On the paused clock, everything due within 100 ms has run by then.
    let quiet = || async {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let settled = activity.snapshot();
        assert_eq!((settled.queued, settled.running), (0, 0), "{settled}");
        settled
    };
    quiet().await;

    f.change();
    let settled = quiet().await;
    assert_eq!(
        (
            settled.queued,
            settled.running,
            settled.reconciles,
            settled.retrying
        ),
        (0, 0, 1, 1),
        "one reconcile ran and failed; its retry is scheduled"
    );
    f.runs_after(2).await;
    let settled = quiet().await;
    assert_eq!((settled.reconciles, settled.retrying), (2, 0));
}

#[test]
fn a_drained_queue_gives_back_the_table_a_burst_grew() {
    let mut set: std::collections::HashSet<u32> = (0..5_000).collect();
    assert!(set.capacity() >= 5_000);
    super::shrink_when_drained(&mut set);
    assert!(set.capacity() >= 5_000, "not while keys wait");
    set.clear();
    super::shrink_when_drained(&mut set);
    assert_eq!(set.capacity(), 0);
    let mut small: std::collections::HashSet<u32> = (0..100).collect();
    small.clear();
    let kept = small.capacity();
    super::shrink_when_drained(&mut small);
    assert_eq!(small.capacity(), kept, "a small table is kept for reuse");
}

#[tokio::test(start_paused = true)]
async fn changes_the_filter_drops_are_never_reconciled() {
    fn even(map: &ConfigMap) -> bool {
        map.metadata
            .resource_version
            .as_deref()
            .and_then(|v| v.parse::<u64>().ok())
            .is_some_and(|v| v % 2 == 0)
    }
    let mut fixture = Fixture::start_where(Vec::new(), even);
    fixture.change();
    tokio::time::sleep(secs(1)).await;
    assert!(fixture.runs().is_empty(), "version 1 is filtered out");
    fixture.change();
    assert_eq!(fixture.runs_after(1).await, [secs(1)]);
    fixture.change();
    tokio::time::sleep(secs(5)).await;
    assert_eq!(fixture.runs(), [secs(1)], "version 3 is filtered out");
}
