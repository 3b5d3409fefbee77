//! Knowing when the controllers have nothing left to do.
//!
//! The framework records its work in an [`Activity`]: objects queued for a
//! reconcile, reconciles and passes running, what finished, cloud calls
//! made and retries scheduled. [`Quiescence`] is a barrier over it: it
//! returns once nothing is queued or running and no counter moved for a
//! short window. Tests await it instead of sleeping for a guessed time
//! before asserting that something did *not* happen.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::{Mutex, MutexGuard};
use tokio::time::Instant;

/// What the controllers of one process are doing. Cheap to clone; every
/// clone records into the same counts. Each [`crate::Metrics`] carries one
/// ([`crate::Metrics::activity`]), so everything that records metrics
/// records its activity too.
///
/// # Guarantees
/// - [`controller::run`](crate::controller::run) counts an object as queued
///   from the moment its change or trigger reaches the controller until its
///   reconcile starts, and the reconcile as running until it returns.
/// - [`crate::MeteredCloud`] counts every provider call, fenced ones
///   included.
/// - A controller's own periodic or triggered passes count as running while
///   they hold a [`Busy`] guard ([`Activity::busy`]).
#[derive(Clone, Default)]
pub struct Activity {
    counts: Arc<Mutex<ActivitySnapshot>>,
}

impl fmt::Debug for Activity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Activity").field(&self.snapshot()).finish()
    }
}

/// The counts of an [`Activity`] at one instant.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ActivitySnapshot {
    /// Objects waiting for a reconcile that is due now.
    pub queued: u64,
    /// Reconciles and passes in progress.
    pub running: u64,
    /// Reconciles finished so far.
    pub reconciles: u64,
    /// Passes finished so far. A periodic pass that changed nothing is not
    /// activity: [`Quiescence`] ignores this count.
    pub passes: u64,
    /// Cloud-provider calls made so far.
    pub cloud_calls: u64,
    /// Objects whose last reconcile failed and that wait for a scheduled
    /// retry ([`crate::Retry::Backoff`] or [`crate::Retry::After`]); an
    /// object waiting for a change ([`crate::Retry::AwaitChange`]) is not
    /// counted.
    pub retrying: u64,
}

impl ActivitySnapshot {
    /// Nothing queued and nothing running.
    pub fn is_idle(&self) -> bool {
        self.queued == 0 && self.running == 0
    }

    /// The snapshot without the count of passes, which periodic passes move
    /// even when they have nothing to do.
    fn without_passes(self) -> Self {
        Self { passes: 0, ..self }
    }
}

impl fmt::Display for ActivitySnapshot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} queued, {} running, {} reconciles and {} passes finished, {} cloud calls, {} retrying",
            self.queued,
            self.running,
            self.reconciles,
            self.passes,
            self.cloud_calls,
            self.retrying
        )
    }
}

/// Work in progress: counts as running until dropped, then as a finished
/// reconcile or pass.
#[must_use = "the work counts as running only while the guard is held"]
#[derive(Debug)]
pub struct Busy {
    activity: Activity,
    reconcile: bool,
}

impl Drop for Busy {
    fn drop(&mut self) {
        let mut counts = self.activity.lock();
        counts.running = counts.running.saturating_sub(1);
        if self.reconcile {
            counts.reconciles += 1;
        } else {
            counts.passes += 1;
        }
    }
}

impl Activity {
    fn lock(&self) -> MutexGuard<'_, ActivitySnapshot> {
        self.counts.lock()
    }

    /// Marks a pass as running until the returned guard is dropped. A
    /// controller holds one over each pass it runs outside
    /// [`controller::run`](crate::controller::run), and over the wait (a
    /// debounce) between a trigger and its pass, so that a quiescence
    /// barrier waits for them.
    pub fn busy(&self) -> Busy {
        self.lock().running += 1;
        Busy {
            activity: self.clone(),
            reconcile: false,
        }
    }

    /// The counts now.
    pub fn snapshot(&self) -> ActivitySnapshot {
        *self.lock()
    }

    /// `delta` more (or fewer) objects queued for a reconcile.
    pub(crate) fn add_queued(&self, delta: i64) {
        let mut counts = self.lock();
        counts.queued = counts.queued.saturating_add_signed(delta);
    }

    /// `delta` more (or fewer) objects waiting for a scheduled retry.
    pub(crate) fn add_retrying(&self, delta: i64) {
        let mut counts = self.lock();
        counts.retrying = counts.retrying.saturating_add_signed(delta);
    }

    /// Starts a reconcile of a queued object: one fewer queued, one more
    /// running, in one step so that no snapshot sees it as neither.
    pub(crate) fn start_queued(&self, was_queued: bool) -> Busy {
        let mut counts = self.lock();
        if was_queued {
            counts.queued = counts.queued.saturating_sub(1);
        }
        counts.running += 1;
        drop(counts);
        Busy {
            activity: self.clone(),
            reconcile: true,
        }
    }

    /// One more cloud-provider call.
    pub(crate) fn cloud_call(&self) {
        self.lock().cloud_calls += 1;
    }
}

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
/// [`controller::run`](crate::controller::run), its own passes through
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
            if last.0.is_idle() && now.duration_since(quiet_since) >= self.window {
                return Ok(last.0);
            }
            if now.duration_since(start) >= self.timeout {
                break;
            }
            tokio::time::sleep(poll).await;
            let current = self.sample();
            let moved =
                current.0.without_passes() != last.0.without_passes() || current.1 != last.1;
            if moved || !current.0.is_idle() {
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

#[cfg(test)]
mod tests {
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
                *ticking.lock() += 1;
            }
        });
        let err = Quiescence::new(Activity::default())
            .timeout(Duration::from_secs(5))
            .counter("API requests", || *ticks.lock())
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
    async fn queued_objects_are_not_quiescent() {
        let activity = Activity::default();
        activity.add_queued(1);
        let err = Quiescence::new(activity.clone())
            .timeout(Duration::from_secs(1))
            .settled()
            .await
            .unwrap_err();
        assert!(err.to_string().contains("1 queued"), "{err}");
        let busy = activity.start_queued(true);
        drop(busy);
        let settled = Quiescence::new(activity).settled().await.unwrap();
        assert_eq!((settled.queued, settled.reconciles), (0, 1));
    }
}
