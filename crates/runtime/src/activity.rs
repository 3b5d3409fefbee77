//! Knowing when the controllers have nothing left to do.
//!
//! The framework records its work in an [`Activity`]: objects queued for a
//! reconcile, reconciles and passes running, what finished, cloud calls
//! made and retries scheduled. The proving ground's barrier over it
//! (`ccm_test_support::Quiescence`) returns once nothing is queued or
//! running and no counter moved for a short window, so tests need not sleep
//! for a guessed time before asserting that something did *not* happen.

use std::fmt;
use std::sync::Arc;

use parking_lot::{Mutex, MutexGuard};

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
    /// activity: a barrier waiting for quiet ignores this count.
    pub passes: u64,
    /// Cloud-provider calls made so far.
    pub cloud_calls: u64,
    /// Objects whose last reconcile failed and that wait for a scheduled
    /// retry ([`crate::Retry::Backoff`] or [`crate::Retry::After`]); an
    /// object waiting for a change ([`crate::Retry::AwaitChange`]) is not
    /// counted.
    pub retrying: u64,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_queued_object_counts_until_its_reconcile_ends_and_a_retry_until_it_runs() {
        let activity = Activity::default();
        activity.add_queued(1);
        activity.add_retrying(1);
        let queued = activity.snapshot();
        assert_eq!((queued.queued, queued.retrying), (1, 1));
        let busy = activity.start_queued(true);
        let running = activity.snapshot();
        assert_eq!((running.queued, running.running), (0, 1));
        drop(busy);
        activity.add_retrying(-1);
        let done = activity.snapshot();
        assert_eq!((done.queued, done.running), (0, 0), "{done}");
        assert_eq!((done.reconciles, done.retrying), (1, 0));
    }

    #[test]
    fn a_pass_that_ends_is_counted_apart_from_reconciles() {
        let activity = Activity::default();
        drop(activity.busy());
        activity.cloud_call();
        let after = activity.snapshot();
        assert_eq!(
            (after.passes, after.reconciles, after.cloud_calls),
            (1, 0, 1)
        );
    }
}
