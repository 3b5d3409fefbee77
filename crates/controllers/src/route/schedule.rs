//! When passes run: soon after a node event, every period otherwise, and
//! sooner than the period after a failed pass.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use ccm_runtime::{Activity, FailureBackoff};
use futures::FutureExt;
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::deadline::far_deadline;

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
/// - A trigger runs a pass `debounce` after it; triggers arriving meanwhile
///   join that pass, and a trigger arriving during a pass runs one more pass
///   after it (the running pass may have read the nodes before the change).
/// - Without triggers, a pass runs `period` after the previous one ended.
/// - After a failed pass the next one runs after a backoff of 5 s doubling
///   to 300 s, capped at `period`, but never sooner than the cloud asked.
#[derive(Debug)]
pub(super) struct Schedule {
    /// Notified by the node watch.
    pub(super) trigger: Arc<Notify>,
    /// Wait after a trigger, so a burst of node events costs one pass.
    pub(super) debounce: Duration,
    /// `--route-reconciliation-period`.
    pub(super) period: Duration,
    /// Where a debounce and the pass after it count as running.
    pub(super) activity: Activity,
}

impl Schedule {
    /// Runs `pass` forever on this schedule.
    pub(super) async fn drive<F, Fut>(self, mut pass: F)
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = PassOutcome>,
    {
        let backoff = FailureBackoff::<()>::controller_default();
        let mut next = Instant::now();
        loop {
            let _pass = tokio::select! {
                () = self.trigger.notified() => {
                    let pass = self.activity.busy();
                    tokio::time::sleep(self.debounce).await;
                    // Triggers during the debounce are covered by this pass.
                    let _ = self.trigger.notified().now_or_never();
                    pass
                }
                () = tokio::time::sleep_until(next) => self.activity.busy(),
            };
            let outcome = pass().await;
            let delay = if outcome.failures == 0 {
                backoff.reset(&());
                self.period
            } else {
                let retry = backoff.fail(()).min(self.period);
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

    /// Runs the schedule in the background; returns the trigger and the
    /// times passes started (relative to the start), with outcomes given in
    /// turn by `outcomes` (success once they run out).
    fn run(
        period: Duration,
        outcomes: Vec<PassOutcome>,
    ) -> (Arc<Notify>, Arc<Mutex<Vec<Duration>>>) {
        let trigger = Arc::new(Notify::new());
        let passes = Arc::new(Mutex::new(Vec::new()));
        let schedule = Schedule {
            trigger: trigger.clone(),
            debounce: DEBOUNCE,
            period,
            activity: Activity::default(),
        };
        let start = Instant::now();
        let seen = passes.clone();
        let mut outcomes = outcomes.into_iter();
        tokio::spawn(schedule.drive(move || {
            seen.lock().unwrap().push(start.elapsed());
            let outcome = outcomes.next().unwrap_or_default();
            async move { outcome }
        }));
        (trigger, passes)
    }

    fn secs(s: f64) -> Duration {
        Duration::from_secs_f64(s)
    }

    #[tokio::test(start_paused = true)]
    async fn passes_run_at_once_then_every_period() {
        let (_, passes) = run(secs(10.0), Vec::new());
        tokio::time::sleep(secs(25.0)).await;
        assert_eq!(*passes.lock().unwrap(), [secs(0.0), secs(10.0), secs(20.0)]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_burst_of_triggers_costs_one_pass_after_the_debounce() {
        let (trigger, passes) = run(secs(3600.0), Vec::new());
        tokio::time::sleep(secs(1.0)).await;
        for _ in 0..50 {
            trigger.notify_one();
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        tokio::time::sleep(secs(5.0)).await;
        assert_eq!(*passes.lock().unwrap(), [secs(0.0), secs(1.0) + DEBOUNCE]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_trigger_during_a_pass_runs_another_pass() {
        let trigger = Arc::new(Notify::new());
        let passes = Arc::new(Mutex::new(Vec::new()));
        let schedule = Schedule {
            trigger: trigger.clone(),
            debounce: DEBOUNCE,
            period: secs(3600.0),
            activity: Activity::default(),
        };
        let start = Instant::now();
        let (seen, during) = (passes.clone(), trigger.clone());
        tokio::spawn(schedule.drive(move || {
            seen.lock().unwrap().push(start.elapsed());
            let during = during.clone();
            async move {
                tokio::time::sleep(secs(1.0)).await;
                during.notify_one();
                PassOutcome::default()
            }
        }));
        tokio::time::sleep(secs(2.0)).await;
        let passes = passes.lock().unwrap().clone();
        assert_eq!(passes[..2], [secs(0.0), secs(1.0) + DEBOUNCE]);
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
            passes.lock().unwrap()[..6],
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
        assert_eq!(*passes.lock().unwrap(), [secs(0.0), secs(30.0)]);
    }

    /// Upstream's watch-based routes gate with `--min-resync-period=0`:
    /// node events are the only reason for a pass, and a failed pass is
    /// still retried.
    #[tokio::test(start_paused = true)]
    async fn without_a_period_only_triggers_and_retries_run_passes() {
        let (trigger, passes) = run(Duration::MAX, vec![PassOutcome::default()]);
        tokio::time::sleep(secs(3600.0)).await;
        assert_eq!(*passes.lock().unwrap(), [secs(0.0)], "no periodic pass");
        trigger.notify_one();
        tokio::time::sleep(secs(1.0)).await;
        assert_eq!(
            *passes.lock().unwrap(),
            [secs(0.0), secs(3600.0) + DEBOUNCE]
        );

        let (_, passes) = run(Duration::MAX, vec![PassOutcome::failed(None)]);
        tokio::time::sleep(secs(6.0)).await;
        assert_eq!(*passes.lock().unwrap(), [secs(0.0), secs(5.0)]);
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
}
