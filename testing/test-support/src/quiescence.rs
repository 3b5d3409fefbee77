//! Knowing when the controllers have nothing left to do: a barrier over
//! the [`Activity`] the framework records its work in. Tests await it
//! instead of sleeping for a guessed time before asserting that something
//! did *not* happen.

use std::fmt;
use std::time::Duration;

use ccm_runtime::{Activity, ActivitySnapshot};
use tokio::time::Instant;

/// A counter from outside the framework that must also stand still, such as
/// the API server's request count.
type Probe<'a> = (String, Box<dyn Fn() -> u64 + Send + Sync + 'a>);

/// A barrier that waits until the controllers are quiescent: nothing queued
/// or running, and every count (the [`Activity`]'s but passes, and any added
/// with [`Quiescence::counter`]) unchanged across [`Quiescence::window`].
///
/// # Guarantees
/// [`Quiescence::settled`] returns `Ok` only after observing, at every poll
/// during one whole window, an idle activity and the same counts.
///
/// # Assumptions
/// Work is visible to it: a controller's reconciles through
/// `ccm_runtime::controller::run`, its own passes through
/// [`Activity::busy`]. What travels unseen — a watch event on its way from
/// the API server to the informer, a retry scheduled for later — must
/// either take less than the window or be asserted on separately
/// ([`ActivitySnapshot::retrying`]). On a paused tokio clock the window is
/// virtual time, and waiting through it also runs every timer due within
/// it.
pub struct Quiescence<'a> {
    activity: Activity,
    probes: Vec<Probe<'a>>,
    window: Duration,
    timeout: Duration,
}

impl fmt::Debug for Quiescence<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Quiescence")
            .field("activity", &self.activity)
            .field(
                "counters",
                &self.probes.iter().map(|(name, _)| name).collect::<Vec<_>>(),
            )
            .field("window", &self.window)
            .field("timeout", &self.timeout)
            .finish()
    }
}

/// Why a [`Quiescence`] barrier gave up.
#[derive(Debug, thiserror::Error)]
pub enum QuiescenceError {
    /// The controllers were still busy, or a count kept changing, when the
    /// timeout ran out.
    #[error(
        "not quiescent within {timeout:?} (window {window:?}): last seen {last}; {changes} changes while waiting"
    )]
    Timeout {
        /// How long the barrier waited.
        timeout: Duration,
        /// The quiet window it needed.
        window: Duration,
        /// The activity and extra counters at the last poll.
        last: String,
        /// How many polls saw something change or something running.
        changes: u64,
    },
}

impl<'a> Quiescence<'a> {
    /// The default quiet window: longer than a watch event takes from the
    /// API server to a controller on a loaded machine, shorter than any
    /// backoff.
    pub const DEFAULT_WINDOW: Duration = Duration::from_millis(300);
    /// The default timeout.
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

    /// A barrier over `activity` with the default window and timeout.
    pub fn new(activity: Activity) -> Self {
        Self {
            activity,
            probes: Vec::new(),
            window: Self::DEFAULT_WINDOW,
            timeout: Self::DEFAULT_TIMEOUT,
        }
    }

    /// How long everything must stay unchanged.
    #[must_use]
    pub fn window(mut self, window: Duration) -> Self {
        self.window = window;
        self
    }

    /// How long to wait for such a window before giving up.
    #[must_use]
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Also requires `read` (named `name` in errors) to stand still, such
    /// as the API server's request count or a fake cloud's call log.
    #[must_use]
    pub fn counter(
        mut self,
        name: impl Into<String>,
        read: impl Fn() -> u64 + Send + Sync + 'a,
    ) -> Self {
        self.probes.push((name.into(), Box::new(read)));
        self
    }

    /// What must stand still, and what is reported.
    fn sample(&self) -> (ActivitySnapshot, Vec<u64>) {
        let activity = self.activity.snapshot();
        let counters = self.probes.iter().map(|(_, read)| read()).collect();
        (activity, counters)
    }

    fn describe(&self, (activity, counters): &(ActivitySnapshot, Vec<u64>)) -> String {
        let mut text = activity.to_string();
        for ((name, _), value) in self.probes.iter().zip(counters) {
            text.push_str(&format!(", {name} {value}"));
        }
        text
    }

    /// Waits until the controllers are quiescent and returns the activity
    /// then.
    ///
    /// # Errors
    /// [`QuiescenceError::Timeout`] when no quiet window came within the
    /// timeout.
    pub async fn settled(&self) -> Result<ActivitySnapshot, QuiescenceError> {
        let poll = (self.window / 10).max(Duration::from_millis(1));
        // Bounds the loop by count as well as by time.
        let max_polls = self.timeout.as_nanos() / poll.as_nanos() + 2;
        let start = Instant::now();
        let mut quiet_since = start;
        let mut last = self.sample();
        let mut changes = 0;
        for _ in 0..max_polls {
            let now = Instant::now();
            if is_idle(&last.0) && now.duration_since(quiet_since) >= self.window {
                return Ok(last.0);
            }
            if now.duration_since(start) >= self.timeout {
                break;
            }
            tokio::time::sleep(poll).await;
            let current = self.sample();
            let moved = without_passes(current.0) != without_passes(last.0) || current.1 != last.1;
            if moved || !is_idle(&current.0) {
                quiet_since = Instant::now();
                changes += 1;
            }
            last = current;
        }
        Err(QuiescenceError::Timeout {
            timeout: self.timeout,
            window: self.window,
            last: self.describe(&last),
            changes,
        })
    }
}

/// Nothing queued and nothing running.
fn is_idle(activity: &ActivitySnapshot) -> bool {
    activity.queued == 0 && activity.running == 0
}

/// `activity` without the count of passes, which periodic passes move even
/// when they have nothing to do.
fn without_passes(activity: ActivitySnapshot) -> ActivitySnapshot {
    ActivitySnapshot {
        passes: 0,
        ..activity
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn an_idle_activity_settles_after_one_window() {
        let activity = Activity::default();
        let start = Instant::now();
        let settled = Quiescence::new(activity.clone()).settled().await.unwrap();
        assert_eq!(settled, ActivitySnapshot::default());
        assert!(start.elapsed() >= Quiescence::DEFAULT_WINDOW);
        assert!(start.elapsed() < Quiescence::DEFAULT_WINDOW * 2);
    }

    #[tokio::test(start_paused = true)]
    async fn running_work_holds_the_barrier_until_it_ends() {
        let activity = Activity::default();
        let busy = activity.busy();
        let worker = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(2)).await;
            drop(busy);
        });
        let start = Instant::now();
        let settled = Quiescence::new(activity.clone()).settled().await.unwrap();
        assert!(start.elapsed() >= Duration::from_secs(2) + Quiescence::DEFAULT_WINDOW);
        assert_eq!((settled.running, settled.passes), (0, 1));
        worker.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn passes_that_change_nothing_do_not_hold_the_barrier() {
        let activity = Activity::default();
        let passing = activity.clone();
        let periodic = tokio::spawn(async move {
            for _ in 0..1000 {
                tokio::time::sleep(Duration::from_millis(50)).await;
                drop(passing.busy());
            }
        });
        let settled = Quiescence::new(activity).settled().await.unwrap();
        assert!(settled.passes >= 5, "{settled}");
        periodic.abort();
    }

    #[tokio::test(start_paused = true)]
    async fn a_moving_counter_holds_the_barrier_and_times_out_with_a_clear_message() {
        let ticks = Arc::new(Mutex::new(0u64));
        let ticking = ticks.clone();
        let ticker = tokio::spawn(async move {
            for _ in 0..1000 {
                tokio::time::sleep(Duration::from_millis(100)).await;
                *ticking.lock().unwrap() += 1;
            }
        });
        let err = Quiescence::new(Activity::default())
            .timeout(Duration::from_secs(5))
            .counter("API requests", || *ticks.lock().unwrap())
            .settled()
            .await
            .unwrap_err();
        let message = err.to_string();
        assert!(
            message.starts_with("not quiescent within 5s") && message.contains("API requests"),
            "{message}"
        );
        ticker.abort();
    }

    #[tokio::test(start_paused = true)]
    async fn running_work_is_not_quiescent_and_says_so() {
        let activity = Activity::default();
        let busy = activity.busy();
        let err = Quiescence::new(activity.clone())
            .timeout(Duration::from_secs(1))
            .settled()
            .await
            .unwrap_err();
        assert!(err.to_string().contains("1 running"), "{err}");
        drop(busy);
        let settled = Quiescence::new(activity).settled().await.unwrap();
        assert_eq!((settled.running, settled.passes), (0, 1));
    }
}
