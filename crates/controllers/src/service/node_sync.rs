//! Keeping load balancers pointed at the eligible nodes.
//!
//! The Node watch hook ([`super::eligible::EligibleTracker`]) bumps a
//! generation only when the eligible set changes. This task waits for a
//! burst of such changes to settle, then hands every Service whose load
//! balancer is behind to the controller, once. Every `--node-sync-period` it
//! makes the same pass as a safety net. The provider calls themselves happen
//! in the controller's reconciles, so they share its concurrency limit,
//! per-Service exclusion and retry policy.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use ccm_runtime::{Activity, Informer, ObjectRef};
use futures::channel::mpsc::UnboundedSender;
use k8s_openapi::api::core::v1::{Node, Service};
use parking_lot::Mutex;
use prometheus_client::metrics::histogram::Histogram;
use tokio::sync::watch;
use tokio::time::{Instant, MissedTickBehavior};

use super::eligible::NodeSet;
use super::records::{Records, key_of};
use super::spec;
use crate::deadline::{FAR_FUTURE, far_deadline};

/// How long the eligible set must stay unchanged before a pass.
pub(crate) const QUIET: Duration = Duration::from_secs(1);
/// The longest a steady stream of changes can delay a pass.
pub(crate) const MAX_SETTLE: Duration = Duration::from_secs(10);
/// Upstream's node sync period, used when `--node-sync-period` is zero.
pub(crate) const DEFAULT_PERIOD: Duration = Duration::from_secs(100);

/// Waits until `changes` has been quiet for `quiet`, or `max` has passed
/// since the call, so that a burst of node changes costs one pass.
pub(crate) async fn settle<T>(changes: &mut watch::Receiver<T>, quiet: Duration, max: Duration) {
    let deadline = Instant::now() + max;
    loop {
        changes.borrow_and_update();
        let wake = (Instant::now() + quiet).min(deadline);
        tokio::select! {
            () = tokio::time::sleep_until(wake) => return,
            changed = changes.changed() => {
                if changed.is_err() || Instant::now() >= deadline {
                    return;
                }
            }
        }
    }
}

/// One node-set pass in flight, for upstream's
/// `service_controller_nodesync_latency_seconds`: from the pass until every
/// Service it handed over has been reconciled.
#[derive(Debug)]
pub(crate) struct Round {
    current: Mutex<Option<(Instant, HashSet<String>)>>,
    latency: Histogram,
}

impl Round {
    pub(crate) fn new(latency: Histogram) -> Self {
        Self {
            current: Mutex::new(None),
            latency,
        }
    }

    fn begin(&self, keys: HashSet<String>) {
        let mut current = self.current.lock();
        *current = (!keys.is_empty()).then(|| (Instant::now(), keys));
    }

    /// The Service `key` was reconciled.
    pub(crate) fn done(&self, key: &str) {
        let mut current = self.current.lock();
        if let Some((started, pending)) = current.as_mut()
            && pending.remove(key)
            && pending.is_empty()
        {
            self.latency.observe(started.elapsed().as_secs_f64());
            *current = None;
        }
    }
}

/// The node-sync task.
#[derive(Debug)]
pub(crate) struct NodeSync {
    /// Bumped by the Node watch hook when the eligible set changes.
    pub(crate) changes: watch::Receiver<u64>,
    /// Counts flips of nodes' readiness and shutdown taints.
    pub(crate) readiness: watch::Receiver<super::readiness::NodeSignals>,
    pub(crate) services: Arc<Informer<Service>>,
    pub(crate) nodes: Arc<Informer<Node>>,
    pub(crate) records: Arc<Mutex<Records>>,
    /// Reconcile requests to the controller.
    pub(crate) trigger: UnboundedSender<ObjectRef<Service>>,
    /// The resync period.
    pub(crate) period: Duration,
    pub(crate) round: Arc<Round>,
    /// Where a settling burst and the pass after it count as running.
    pub(crate) activity: Activity,
}

impl NodeSync {
    /// Runs until the controller stops reading triggers.
    pub(crate) async fn run(mut self) {
        self.services.wait_until_ready().await;
        self.nodes.wait_until_ready().await;
        // The first list of nodes is not a change: every Service is
        // reconciled after the first list of Services anyway.
        self.changes.borrow_and_update();
        self.readiness.borrow_and_update();
        // A period no clock can add (an operator's "never") is a century.
        let period = self.period.min(FAR_FUTURE);
        let mut resync = tokio::time::interval_at(far_deadline(Instant::now(), period), period);
        resync.set_missed_tick_behavior(MissedTickBehavior::Delay);
        loop {
            let (why, _pass) = tokio::select! {
                changed = self.changes.changed() => {
                    if changed.is_err() {
                        return;
                    }
                    let pass = self.activity.busy();
                    settle(&mut self.changes, QUIET, MAX_SETTLE).await;
                    ("the eligible node set changed", pass)
                }
                _ = resync.tick() => ("periodic resync", self.activity.busy()),
                changed = self.readiness.changed() => {
                    if changed.is_err() {
                        return;
                    }
                    let _pass = self.activity.busy();
                    settle(&mut self.readiness, QUIET, MAX_SETTLE).await;
                    if self.ask_health().is_err() {
                        return;
                    }
                    continue;
                }
            };
            if self.pass(why).is_err() {
                return;
            }
        }
    }

    /// Hands the controller every Service whose target health it follows,
    /// after a node's readiness or shutdown taint flipped: each decides
    /// when to ask the cloud again.
    ///
    /// # Errors
    /// When the controller has stopped.
    fn ask_health(&self) -> Result<(), futures::channel::mpsc::TrySendError<ObjectRef<Service>>> {
        let watched = self.records.lock().health_watched();
        if !watched.is_empty() {
            tracing::debug!(
                services = watched.len(),
                "a node's readiness flipped; asking for target health"
            );
        }
        for key in watched {
            let (namespace, name) = key.split_once('/').unwrap_or(("", &key));
            self.trigger
                .unbounded_send(ObjectRef::new(name).within(namespace))?;
        }
        Ok(())
    }

    /// Hands the controller every Service that needs a provider call now.
    ///
    /// # Errors
    /// When the controller has stopped.
    pub(crate) fn pass(
        &self,
        why: &str,
    ) -> Result<usize, futures::channel::mpsc::TrySendError<ObjectRef<Service>>> {
        let nodes = NodeSet::from_store(&self.nodes.store());
        let now = Instant::now();
        let due: Vec<Arc<Service>> = {
            let records = self.records.lock();
            self.services
                .store()
                .state()
                .into_iter()
                .filter(|s| spec::is_ours(s))
                .filter(|s| {
                    records.due(
                        s,
                        spec::fingerprint(s, &BTreeMap::new()),
                        nodes.identity,
                        now,
                    )
                })
                .collect()
        };
        self.round.begin(due.iter().map(|s| key_of(s)).collect());
        if due.is_empty() {
            tracing::debug!(
                nodes = nodes.nodes.len(),
                why,
                "every load balancer is up to date"
            );
        } else {
            tracing::info!(
                services = due.len(),
                nodes = nodes.nodes.len(),
                why,
                "syncing load balancers"
            );
        }
        for service in &due {
            self.trigger
                .unbounded_send(ObjectRef::from_obj(service.as_ref()))?;
        }
        Ok(due.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_burst_of_changes_settles_one_quiet_second_after_the_last() {
        let (tx, mut rx) = watch::channel(0u64);
        let start = Instant::now();
        let burst = tokio::spawn(async move {
            for i in 1..=5 {
                tokio::time::sleep(Duration::from_millis(300)).await;
                tx.send_replace(i);
            }
            tx
        });
        settle(&mut rx, QUIET, MAX_SETTLE).await;
        assert_eq!(
            start.elapsed(),
            Duration::from_millis(1500 + 1000),
            "quiet for 1 s after the last change"
        );
        assert_eq!(*rx.borrow(), 5, "every change of the burst was seen");
        let tx = burst.await.unwrap();
        assert!(!tx.is_closed());
    }

    #[tokio::test(start_paused = true)]
    async fn a_steady_stream_of_changes_cannot_delay_a_pass_forever() {
        let (tx, mut rx) = watch::channel(0u64);
        let start = Instant::now();
        let stream = tokio::spawn(async move {
            for i in 1..=100 {
                tokio::time::sleep(Duration::from_millis(500)).await;
                tx.send_replace(i);
            }
        });
        settle(&mut rx, QUIET, MAX_SETTLE).await;
        assert_eq!(start.elapsed(), MAX_SETTLE);
        stream.abort();
    }

    #[tokio::test(start_paused = true)]
    async fn round_latency_is_observed_when_the_last_service_is_done() {
        let latency = Histogram::new([1.0, 2.0, 4.0].into_iter());
        let round = Round::new(latency.clone());
        round.begin(HashSet::from(["a/x".to_owned(), "a/y".to_owned()]));
        tokio::time::advance(Duration::from_millis(1500)).await;
        round.done("a/x");
        round.done("a/unrelated");
        let mut text = String::new();
        let mut registry = prometheus_client::registry::Registry::default();
        registry.register("nodesync_latency_seconds", "test", latency.clone());
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        assert!(text.contains("nodesync_latency_seconds_count 0"), "{text}");
        round.done("a/y");
        text.clear();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        assert!(text.contains("nodesync_latency_seconds_count 1"), "{text}");
        assert!(text.contains("nodesync_latency_seconds_sum 1.5"), "{text}");
    }
}
