//! Reconciles that never end. A reconcile holds one of its controller's
//! concurrency slots until it returns, so one that hangs (a call that never
//! answers) can stop a controller without killing it; `/healthz` reports
//! the longest one running past [`STALLED_AFTER`], so the kubelet restarts
//! the process and a standby takes over.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use tokio::time::Instant;

/// How long a reconcile may run before its controller counts as stalled:
/// far beyond any reconcile's cloud calls, each bounded by the provider's
/// timeouts and by the lease term.
pub const STALLED_AFTER: Duration = Duration::from_secs(15 * 60);

/// A reconcile that is running.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Running {
    /// The controller's ID.
    pub controller: &'static str,
    /// The object, as `namespace/name` or `name`.
    pub object: String,
    /// How long it has been running.
    pub running_for: Duration,
}

/// Each running reconcile by a unique ID: its controller, its object and
/// when it started.
type RunningMap = Arc<Mutex<HashMap<u64, (&'static str, String, Instant)>>>;

/// The reconciles running now, across controllers.
#[derive(Debug, Clone, Default)]
pub(crate) struct Stalls {
    running: RunningMap,
    next: Arc<AtomicU64>,
}

/// Removes its reconcile from [`Stalls`] when dropped (the reconcile ended,
/// or its future was dropped).
#[derive(Debug)]
pub(crate) struct RunningGuard {
    id: u64,
    running: RunningMap,
}

impl Drop for RunningGuard {
    fn drop(&mut self) {
        self.running.lock().remove(&self.id);
    }
}

impl Stalls {
    /// Records that `controller` started reconciling `object`.
    pub(crate) fn start(&self, controller: &'static str, object: String) -> RunningGuard {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        self.running
            .lock()
            .insert(id, (controller, object, Instant::now()));
        RunningGuard {
            id,
            running: self.running.clone(),
        }
    }

    /// The reconcile that has been running longest, if any runs.
    pub(crate) fn longest(&self) -> Option<Running> {
        let now = Instant::now();
        self.running
            .lock()
            .values()
            .min_by_key(|(_, _, started)| *started)
            .map(|(controller, object, started)| Running {
                controller,
                object: object.clone(),
                running_for: now - *started,
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn the_longest_running_reconcile_is_reported_until_it_ends() {
        let stalls = Stalls::default();
        assert_eq!(stalls.longest(), None);
        let first = stalls.start("service", "default/web".into());
        tokio::time::advance(Duration::from_secs(60)).await;
        let second = stalls.start("route", "n1".into());
        tokio::time::advance(Duration::from_secs(5)).await;
        assert_eq!(
            stalls.longest(),
            Some(Running {
                controller: "service",
                object: "default/web".into(),
                running_for: Duration::from_secs(65),
            })
        );
        drop(first);
        assert_eq!(stalls.longest().map(|r| r.controller), Some("route"));
        drop(second);
        assert_eq!(stalls.longest(), None);
    }
}
