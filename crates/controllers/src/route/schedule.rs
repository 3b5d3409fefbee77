//! When passes run: soon after a node event, every period otherwise, and
//! sooner than the period after a failed pass; with upstream's
//! `CloudControllerManagerWatchBasedRoutesReconciliation` gate, at least
//! [`WATCH_MIN_INTERVAL`] apart.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use ccm_runtime::{Activity, FailureBackoff};
use futures::FutureExt;
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::deadline::far_deadline;

/// Upstream's `minRouteResyncInterval` (KEP 5237): with the watch gate,
/// passes start at least this far apart, as upstream's work queue admits
/// one pass per 10 s (a token bucket of one).
pub(super) const WATCH_MIN_INTERVAL: Duration = Duration::from_secs(10);

/// What caused a pass: upstream's `trigger` label of
/// `route_controller_route_sync_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Trigger {
    /// A node was added or deleted or its pod CIDRs changed.
    NodeChange,
    /// The period (or resync) ran out, or the gate is off.
    Periodic,
}

impl Trigger {
    /// Upstream's label value (its work-queue key).
    pub(super) fn label(self) -> &'static str {
        match self {
            Self::NodeChange => "node_change",
            Self::Periodic => "periodic",
        }
    }
}

/// How a pass went.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct PassOutcome {
    /// Operations or writes that failed.
    pub(super) failures: usize,
    /// The longest delay the cloud asked for.
    pub(super) wait_at_least: Option<Duration>,
}

impl PassOutcome {
    /// A failure, with the delay the cloud asked for, if any.
    pub(super) fn failed(wait_at_least: Option<Duration>) -> Self {
        Self {
            failures: 1,
            wait_at_least,
        }
    }

    /// Both outcomes together.
    #[must_use]
    pub(super) fn and(self, other: Self) -> Self {
        Self {
            failures: self.failures + other.failures,
            wait_at_least: self.wait_at_least.max(other.wait_at_least),
        }
    }
}

/// The pass schedule.
///
/// # Guarantees
/// - The first pass runs at once.
/// - Without the watch gate, a trigger runs a pass `debounce` after it.
///   With it, a trigger runs a pass at once, unless the previous pass
///   started less than [`WATCH_MIN_INTERVAL`] ago: then when that interval
///   is up. Either way, triggers arriving meanwhile join that pass, and a
///   trigger arriving during a pass runs one more pass after it (the
///   running pass may have read the nodes before the change).
/// - Without triggers, a pass runs `period` after the previous one ended.
/// - After a failed pass the next one runs after a backoff of 5 s doubling
///   to 300 s, capped at `period`, but never sooner than the cloud asked.
/// - With the watch gate, no pass of any kind (triggered, retried or
///   periodic) starts within [`WATCH_MIN_INTERVAL`] of the previous pass's
///   start, as upstream's rate limiter holds back every key of its queue.
/// - Each pass is told its [`Trigger`]: with the watch gate, `NodeChange`
///   for a pass a trigger ran or the retry of such a pass, `Periodic`
///   otherwise; without it always `Periodic`, as upstream labels its
///   timer-driven passes.
#[derive(Debug)]
pub(super) struct Schedule {
    /// Notified by the node watch.
    pub(super) trigger: Arc<Notify>,
    /// Wait after a trigger, so a burst of node events costs one pass
    /// (without the watch gate).
    pub(super) debounce: Duration,
    /// `--route-reconciliation-period`, or the resync with the watch gate.
    pub(super) period: Duration,
    /// Where a wait after a trigger and the pass after it count as running.
    pub(super) activity: Activity,
    /// Upstream's `CloudControllerManagerWatchBasedRoutesReconciliation`.
    pub(super) watch_based: bool,
}

impl Schedule {
    /// Runs `pass` forever on this schedule, telling it each pass's
    /// trigger.
    pub(super) async fn drive<F, Fut>(self, mut pass: F)
    where
        F: FnMut(Trigger) -> Fut,
        Fut: Future<Output = PassOutcome>,
    {
        let backoff = FailureBackoff::<()>::controller_default();
        let mut next = Instant::now();
        // What the timer's pass is for: a retry keeps its pass's trigger.
        let mut timed = Trigger::Periodic;
        let mut last_start: Option<Instant> = None;
        loop {
            // With the gate, the earliest a pass may start.
            let allowed = last_start
                .filter(|_| self.watch_based)
                .map(|start| start + WATCH_MIN_INTERVAL);
            let (_pass, trigger) = tokio::select! {
                () = self.trigger.notified() => {
                    let pass = self.activity.busy();
                    match allowed {
                        Some(allowed) => tokio::time::sleep_until(allowed).await,
                        None if self.watch_based => {}
                        None => tokio::time::sleep(self.debounce).await,
                    }
                    // Triggers during the wait are covered by this pass.
                    let _ = self.trigger.notified().now_or_never();
                    (pass, Trigger::NodeChange)
                }
                () = tokio::time::sleep_until(allowed.map_or(next, |a| a.max(next))) => {
                    (self.activity.busy(), timed)
                }
            };
            last_start = Some(Instant::now());
            let label = if self.watch_based {
                trigger
            } else {
                Trigger::Periodic
            };
            let outcome = pass(label).await;
            let delay = if outcome.failures == 0 {
                backoff.reset(&());
                timed = Trigger::Periodic;
                self.period
            } else {
                let retry = backoff.fail(()).min(self.period);
                timed = trigger;
                outcome.wait_at_least.map_or(retry, |wait| retry.max(wait))
            };
            next = far_deadline(Instant::now(), delay);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    const DEBOUNCE: Duration = Duration::from_millis(200);
    const HOUR: Duration = Duration::from_secs(3600);

    /// Passes seen: when each started (relative to the start) and why.
    type Seen = Arc<Mutex<Vec<(Duration, Trigger)>>>;

    fn schedule(trigger: &Arc<Notify>, period: Duration, watch_based: bool) -> Schedule {
        Schedule {
            trigger: trigger.clone(),
            debounce: DEBOUNCE,
            period,
            activity: Activity::default(),
            watch_based,
        }
    }

    /// Runs the schedule in the background, with or without the watch gate;
    /// returns the trigger and the passes seen, with outcomes given in turn
    /// by `outcomes` (success once they run out).
    fn spawn(
        period: Duration,
        outcomes: Vec<PassOutcome>,
        watch_based: bool,
    ) -> (Arc<Notify>, Seen) {
        let trigger = Arc::new(Notify::new());
        let passes = Seen::default();
        let start = Instant::now();
        let seen = passes.clone();
        let mut outcomes = outcomes.into_iter();
        tokio::spawn(schedule(&trigger, period, watch_based).drive(move |why| {
            seen.lock().unwrap().push((start.elapsed(), why));
            let outcome = outcomes.next().unwrap_or_default();
            async move { outcome }
        }));
        (trigger, passes)
    }

    /// [`spawn`] without the watch gate.
    fn run(period: Duration, outcomes: Vec<PassOutcome>) -> (Arc<Notify>, Seen) {
        spawn(period, outcomes, false)
    }

    /// When the passes seen started.
    fn times(passes: &Seen) -> Vec<Duration> {
        passes.lock().unwrap().iter().map(|(at, _)| *at).collect()
    }

    fn secs(s: f64) -> Duration {
        Duration::from_secs_f64(s)
    }

    #[tokio::test(start_paused = true)]
    async fn passes_run_at_once_then_every_period() {
        let (_, passes) = run(secs(10.0), Vec::new());
        tokio::time::sleep(secs(25.0)).await;
        assert_eq!(times(&passes), [secs(0.0), secs(10.0), secs(20.0)]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_burst_of_triggers_costs_one_pass_after_the_debounce() {
        let (trigger, passes) = run(HOUR, Vec::new());
        tokio::time::sleep(secs(1.0)).await;
        for _ in 0..50 {
            trigger.notify_one();
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        tokio::time::sleep(secs(5.0)).await;
        assert_eq!(
            *passes.lock().unwrap(),
            [
                (secs(0.0), Trigger::Periodic),
                (secs(1.0) + DEBOUNCE, Trigger::Periodic)
            ],
            "without the gate every pass is labelled periodic, as upstream's"
        );
    }

    /// A pass of 1 s that sees a trigger at its end: the next pass runs
    /// after the debounce, or with the gate 10 s after the first started.
    #[tokio::test(start_paused = true)]
    async fn a_trigger_during_a_pass_runs_another_pass() {
        for (watch_based, second) in [(false, secs(1.0) + DEBOUNCE), (true, secs(10.0))] {
            let trigger = Arc::new(Notify::new());
            let passes = Seen::default();
            let start = Instant::now();
            let (seen, during) = (passes.clone(), trigger.clone());
            let task = tokio::spawn(schedule(&trigger, HOUR, watch_based).drive(move |why| {
                seen.lock().unwrap().push((start.elapsed(), why));
                let during = during.clone();
                async move {
                    tokio::time::sleep(secs(1.0)).await;
                    during.notify_one();
                    PassOutcome::default()
                }
            }));
            tokio::time::sleep(secs(11.0)).await;
            task.abort();
            assert_eq!(
                times(&passes)[..2],
                [secs(0.0), second],
                "gate {watch_based}"
            );
        }
    }

    #[tokio::test(start_paused = true)]
    async fn failed_passes_retry_with_backoff_capped_by_the_period() {
        let failed = PassOutcome::failed(None);
        let (_, passes) = run(
            secs(12.0),
            vec![failed, failed, failed, PassOutcome::default()],
        );
        tokio::time::sleep(secs(60.0)).await;
        // 5 s, 10 s, then 20 s capped at the 12 s period; then the period.
        assert_eq!(
            times(&passes)[..6],
            [
                secs(0.0),
                secs(5.0),
                secs(15.0),
                secs(27.0),
                secs(39.0),
                secs(51.0)
            ]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_throttled_pass_waits_as_long_as_the_cloud_asked() {
        let (_, passes) = run(secs(10.0), vec![PassOutcome::failed(Some(secs(30.0)))]);
        tokio::time::sleep(secs(35.0)).await;
        assert_eq!(times(&passes), [secs(0.0), secs(30.0)]);
    }

    /// Upstream's watch-based routes gate with `--min-resync-period=0`:
    /// node events are the only reason for a pass, and a failed pass is
    /// still retried, 10 s after it started at the soonest.
    #[tokio::test(start_paused = true)]
    async fn without_a_period_only_triggers_and_retries_run_passes() {
        let (trigger, passes) = spawn(Duration::MAX, vec![PassOutcome::default()], true);
        tokio::time::sleep(HOUR).await;
        assert_eq!(times(&passes), [secs(0.0)], "no periodic pass");
        trigger.notify_one();
        tokio::time::sleep(secs(1.0)).await;
        assert_eq!(times(&passes), [secs(0.0), secs(3600.0)]);

        let (_, passes) = spawn(Duration::MAX, vec![PassOutcome::failed(None)], true);
        tokio::time::sleep(secs(11.0)).await;
        assert_eq!(
            times(&passes),
            [secs(0.0), secs(10.0)],
            "5 s backoff, 10 s gap"
        );
    }

    /// Upstream's work queue under the gate: a token bucket of one, refilled
    /// every 10 s. The first event runs a pass at once; later ones wait for
    /// the 10 s since the last pass started, and share that pass.
    #[tokio::test(start_paused = true)]
    async fn with_the_gate_a_trigger_runs_at_once_and_triggered_passes_start_10s_apart() {
        let (trigger, passes) = spawn(HOUR, Vec::new(), true);
        tokio::time::sleep(secs(20.0)).await;
        trigger.notify_one();
        tokio::time::sleep(secs(1.0)).await;
        trigger.notify_one();
        tokio::time::sleep(secs(4.0)).await;
        trigger.notify_one();
        tokio::time::sleep(secs(5.5)).await;
        trigger.notify_one();
        tokio::time::sleep(secs(24.5)).await;
        trigger.notify_one();
        tokio::time::sleep(secs(1.0)).await;
        use Trigger::{NodeChange, Periodic};
        assert_eq!(
            *passes.lock().unwrap(),
            [
                (secs(0.0), Periodic),
                (secs(20.0), NodeChange),
                (secs(30.0), NodeChange),
                (secs(40.0), NodeChange),
                (secs(55.0), NodeChange),
            ]
        );
    }

    /// Upstream: "even under a constant stream of node events, reconciles
    /// happen at most every 10 seconds".
    #[tokio::test(start_paused = true)]
    async fn with_the_gate_a_stream_of_triggers_runs_one_pass_per_10s() {
        let (trigger, passes) = spawn(HOUR, Vec::new(), true);
        tokio::time::sleep(secs(1.0)).await;
        for _ in 0..350 {
            trigger.notify_one();
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        tokio::time::sleep(secs(20.0)).await;
        assert_eq!(
            times(&passes),
            [secs(0.0), secs(10.0), secs(20.0), secs(30.0), secs(40.0)]
        );
    }

    /// A failed pass is queued again under the same limit, for the same
    /// reason; the periodic pass after a success is `periodic` again.
    #[tokio::test(start_paused = true)]
    async fn with_the_gate_a_failed_pass_retries_10s_after_it_started_and_keeps_its_trigger() {
        let failed = PassOutcome::failed(None);
        let (trigger, passes) = spawn(secs(60.0), vec![PassOutcome::default(), failed], true);
        tokio::time::sleep(secs(20.0)).await;
        trigger.notify_one();
        tokio::time::sleep(secs(100.0)).await;
        use Trigger::{NodeChange, Periodic};
        assert_eq!(
            *passes.lock().unwrap(),
            [
                (secs(0.0), Periodic),
                (secs(20.0), NodeChange),
                (secs(30.0), NodeChange),
                (secs(90.0), Periodic),
            ],
            "the 5 s backoff waits for the 10 s gap"
        );
    }

    #[test]
    fn outcomes_add_up() {
        let a = PassOutcome::failed(Some(secs(3.0)));
        let b = PassOutcome::failed(Some(secs(7.0)));
        assert_eq!(
            a.and(b),
            PassOutcome {
                failures: 2,
                wait_at_least: Some(secs(7.0))
            }
        );
        assert_eq!(
            PassOutcome::default().and(PassOutcome::default()).failures,
            0
        );
    }

    #[test]
    fn trigger_labels_are_upstreams_queue_keys() {
        assert_eq!(Trigger::NodeChange.label(), "node_change");
        assert_eq!(Trigger::Periodic.label(), "periodic");
    }
}
