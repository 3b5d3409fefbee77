//! The open connections of one listener: at most `max` at once, each
//! knowing whether a request is in flight, so that an idle one can be
//! closed after the idle timeout (Go's `IdleTimeout`) or to make room.
//!
//! # Guarantees
//! - A connection with a request in flight (headers received, response body
//!   not yet fully sent) is never closed here.
//! - When the cap is reached, the connection idle the longest (in its TLS
//!   handshake, between requests, or still sending its first request's
//!   headers) is closed to admit the new one; when every connection is
//!   busy, the new one waits in the accept queue until one ends. So idle
//!   and slow clients cannot lock out a scrape, and busy ones are bounded
//!   by the read timeouts and the cap.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// How often a new connection that waits for room looks again for an idle
/// one to close.
const RECHECK: Duration = Duration::from_millis(100);

/// The open connections of one listener.
#[derive(Debug)]
pub(super) struct Connections {
    permits: Arc<Semaphore>,
    open: Mutex<HashMap<u64, Arc<Activity>>>,
    next_id: AtomicU64,
}

impl Connections {
    /// Room for `max` connections at once (at least one).
    pub(super) fn new(max: usize) -> Arc<Self> {
        Arc::new(Self {
            permits: Arc::new(Semaphore::new(max.max(1))),
            open: Mutex::default(),
            next_id: AtomicU64::new(0),
        })
    }

    /// A place for a new connection: at once when there is room, else after
    /// closing the longest-idle connection, else when one ends.
    pub(super) async fn admit(self: &Arc<Self>) -> Admitted {
        loop {
            if let Ok(permit) = self.permits.clone().try_acquire_owned() {
                return self.register(permit);
            }
            if let Some(idle) = self.longest_idle() {
                tracing::debug!("connection limit reached; closing the longest-idle connection");
                idle.evicted.cancel();
            }
            if let Ok(Ok(permit)) =
                tokio::time::timeout(RECHECK, self.permits.clone().acquire_owned()).await
            {
                return self.register(permit);
            }
        }
    }

    fn register(self: &Arc<Self>, permit: OwnedSemaphorePermit) -> Admitted {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let activity = Arc::new(Activity::new());
        self.open.lock().insert(id, activity.clone());
        Admitted {
            id,
            activity,
            connections: self.clone(),
            _permit: permit,
        }
    }

    /// The open connection with nothing in flight for the longest, not
    /// already being closed.
    fn longest_idle(&self) -> Option<Arc<Activity>> {
        self.open
            .lock()
            .values()
            .filter(|a| !a.evicted.is_cancelled() && a.in_flight.load(Ordering::SeqCst) == 0)
            .min_by_key(|a| *a.idle_since.lock())
            .cloned()
    }

    /// How many connections are open.
    #[cfg(test)]
    pub(super) fn open(&self) -> usize {
        self.open.lock().len()
    }
}

/// One admitted connection; dropping it frees its place.
#[derive(Debug)]
pub(super) struct Admitted {
    id: u64,
    pub(super) activity: Arc<Activity>,
    connections: Arc<Connections>,
    _permit: OwnedSemaphorePermit,
}

impl Drop for Admitted {
    fn drop(&mut self) {
        self.connections.open.lock().remove(&self.id);
    }
}

/// Whether a connection has requests in flight, and since when it has not.
#[derive(Debug)]
pub(super) struct Activity {
    in_flight: AtomicUsize,
    idle_since: Mutex<Instant>,
    changed: Notify,
    evicted: CancellationToken,
}

impl Activity {
    fn new() -> Self {
        Self {
            in_flight: AtomicUsize::new(0),
            idle_since: Mutex::new(Instant::now()),
            changed: Notify::new(),
            evicted: CancellationToken::new(),
        }
    }

    /// Marks a request in flight until the returned guard is dropped.
    pub(super) fn begin(self: &Arc<Self>) -> InFlight {
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        self.changed.notify_waiters();
        InFlight(self.clone())
    }

    /// Resolves once nothing has been in flight for `timeout`.
    pub(super) async fn idle_for(&self, timeout: Duration) {
        loop {
            // Created before the check, so a change in between still wakes it.
            let changed = self.changed.notified();
            if self.in_flight.load(Ordering::SeqCst) > 0 {
                changed.await;
                continue;
            }
            let deadline = *self.idle_since.lock() + timeout;
            tokio::select! {
                () = tokio::time::sleep_until(deadline) => {
                    if self.in_flight.load(Ordering::SeqCst) == 0
                        && *self.idle_since.lock() + timeout <= Instant::now()
                    {
                        return;
                    }
                }
                () = changed => {}
            }
        }
    }

    /// Resolves when the connection is closed to make room for another.
    pub(super) async fn evicted(&self) {
        self.evicted.cancelled().await;
    }
}

/// A request in flight on a connection.
#[derive(Debug)]
pub(super) struct InFlight(Arc<Activity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        *self.0.idle_since.lock() = Instant::now();
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
        self.0.changed.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn an_idle_connection_times_out_only_after_its_last_request() {
        let connections = Connections::new(4);
        let admitted = connections.admit().await;
        let activity = admitted.activity.clone();
        let request = activity.begin();
        let idle = tokio::spawn(async move {
            let started = Instant::now();
            activity.idle_for(Duration::from_secs(90)).await;
            started.elapsed()
        });
        tokio::time::sleep(Duration::from_secs(120)).await;
        assert!(!idle.is_finished(), "a request is in flight");
        drop(request);
        let waited = idle.await.unwrap();
        assert_eq!(
            waited,
            Duration::from_secs(210),
            "120 s busy, then 90 s idle"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_full_listener_closes_its_longest_idle_connection_for_a_new_one() {
        let connections = Connections::new(2);
        let oldest = connections.admit().await;
        tokio::time::sleep(Duration::from_secs(1)).await;
        let busy = connections.admit().await;
        let _request = busy.activity.begin();
        tokio::time::sleep(Duration::from_secs(1)).await;
        let waiting = tokio::spawn({
            let connections = connections.clone();
            async move { connections.admit().await }
        });
        tokio::time::timeout(Duration::from_secs(1), oldest.activity.evicted())
            .await
            .expect("the idle connection is told to close");
        assert!(!busy.activity.evicted.is_cancelled(), "busy: never closed");
        assert!(!waiting.is_finished(), "no room until the idle one closes");
        drop(oldest);
        let admitted = tokio::time::timeout(Duration::from_secs(1), waiting)
            .await
            .expect("admitted once the idle connection closed")
            .unwrap();
        assert_eq!(connections.open(), 2);
        drop(admitted);
        assert_eq!(connections.open(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_full_listener_of_busy_connections_waits_for_one_to_end() {
        let connections = Connections::new(1);
        let busy = connections.admit().await;
        let request = busy.activity.begin();
        let waiting = tokio::spawn({
            let connections = connections.clone();
            async move { connections.admit().await }
        });
        tokio::time::sleep(Duration::from_secs(60)).await;
        assert!(!waiting.is_finished(), "still waiting for room");
        assert!(!busy.activity.evicted.is_cancelled());
        drop(request);
        drop(busy);
        tokio::time::timeout(Duration::from_secs(1), waiting)
            .await
            .expect("admitted once the busy one ended")
            .unwrap();
    }
}
