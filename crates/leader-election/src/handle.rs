//! [`LeaderHandle`]: whether this process leads, and the fence that writes
//! check before they leave the process.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::watch;
use tokio::time::Instant;

/// A cloneable view of whether this process leads, for the code that acts
/// only while it does. Get one from
/// [`LeaderElector::handle`](crate::LeaderElector::handle), or
/// [`LeaderHandle::always_leader`] when leader election is off.
///
/// # Guarantees
///
/// [`fence`](Self::fence) turns false by itself, without waiting for the
/// elector's task, once the renew deadline has passed since the last renewal
/// that succeeded (counted from when that request was sent). Another
/// candidate takes over only after a full lease duration without seeing the
/// Lease change, so as long as the two clocks advance at about the same rate
/// (within lease duration ÷ renew deadline of each other), a mutation that
/// passed `fence` was started before any other process could lead.
#[derive(Debug, Clone)]
pub struct LeaderHandle {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    term: Mutex<Term>,
    leading: watch::Sender<bool>,
    renew_failures: AtomicU64,
    /// The `metadata.uid` of the Lease this process acquired last.
    lease_uid: Mutex<Option<String>>,
}

#[derive(Debug, Clone, Copy)]
enum Term {
    NotLeading,
    Until(Instant),
    Always,
}

/// Why [`LeaderHandle::fence`] refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NotLeader {
    /// This process has not acquired the Lease, or has stepped down.
    #[error("this process is not the leader")]
    NotElected,
    /// This process acquired the Lease but has not renewed it within the
    /// renew deadline: another process may take over soon.
    #[error("leadership expired {expired_for:?} ago: the lease was not renewed in time")]
    Expired {
        /// How long ago the renew deadline passed.
        expired_for: Duration,
    },
}

impl LeaderHandle {
    /// A handle that always leads, for `--leader-elect=false` and for tests
    /// of code that needs a handle.
    pub fn always_leader() -> Self {
        Self::with_term(Term::Always)
    }

    /// A handle that never leads, until an elector acquires the Lease.
    pub(crate) fn candidate() -> Self {
        Self::with_term(Term::NotLeading)
    }

    fn with_term(term: Term) -> Self {
        let (leading, _) = watch::channel(matches!(term, Term::Always));
        Self {
            shared: Arc::new(Shared {
                term: Mutex::new(term),
                leading,
                renew_failures: AtomicU64::new(0),
                lease_uid: Mutex::new(None),
            }),
        }
    }

    /// The `metadata.uid` of the Lease this process acquired, once it has:
    /// what an Event about the Lease refers to.
    pub fn lease_uid(&self) -> Option<String> {
        self.shared.lease_uid.lock().clone()
    }

    pub(crate) fn set_lease_uid(&self, uid: Option<String>) {
        *self.shared.lease_uid.lock() = uid;
    }

    /// The fencing check, to call before every cloud mutation: `Ok` when this
    /// process leads and renewed its Lease within the renew deadline.
    ///
    /// Synchronous and cheap (a mutex held for a comparison), so it can be
    /// called right before each request.
    ///
    /// # Errors
    ///
    /// [`NotLeader::NotElected`] when not leading, [`NotLeader::Expired`]
    /// when leading but the renew deadline has passed.
    pub fn fence(&self) -> Result<(), NotLeader> {
        match *self.term() {
            Term::Always => Ok(()),
            Term::NotLeading => Err(NotLeader::NotElected),
            Term::Until(deadline) => {
                let now = Instant::now();
                if now < deadline {
                    Ok(())
                } else {
                    Err(NotLeader::Expired {
                        expired_for: now - deadline,
                    })
                }
            }
        }
    }

    /// When the current term ends unless the Lease is renewed: `None` for
    /// a handle that always leads, now for one that does not lead.
    pub fn valid_until(&self) -> Option<Instant> {
        match *self.term() {
            Term::Always => None,
            Term::NotLeading => Some(Instant::now()),
            Term::Until(deadline) => Some(deadline),
        }
    }

    /// Whether [`fence`](Self::fence) passes now.
    pub fn is_leader(&self) -> bool {
        self.fence().is_ok()
    }

    /// Whether the elector counts this process as leader: true from
    /// acquisition until it steps down, even after the fence has expired.
    pub fn is_leading(&self) -> bool {
        *self.shared.leading.borrow()
    }

    /// The "am I leader" signal: `true` from acquisition until the elector
    /// steps down (leadership lost, or shutdown). It may lag
    /// [`fence`](Self::fence) by the time the elector takes to notice, so
    /// use it to start and stop work, and `fence` to guard each mutation.
    pub fn watch(&self) -> watch::Receiver<bool> {
        self.shared.leading.subscribe()
    }

    /// Renewals of the Lease that failed while leading (an API error, or the
    /// renew deadline passing), since the process started.
    pub fn renew_failures(&self) -> u64 {
        self.shared.renew_failures.load(Ordering::Relaxed)
    }

    /// Counts one failed renewal (see [`LeaderHandle::renew_failures`]).
    pub(crate) fn count_renew_failure(&self) {
        self.shared.renew_failures.fetch_add(1, Ordering::Relaxed);
    }

    /// Records a successful acquisition or renewal: leads until `deadline`.
    pub(crate) fn lead_until(&self, deadline: Instant) {
        *self.term() = Term::Until(deadline);
        self.shared
            .leading
            .send_if_modified(|leading| !std::mem::replace(leading, true));
    }

    /// Stops leading at once.
    pub(crate) fn step_down(&self) {
        *self.term() = Term::NotLeading;
        self.shared
            .leading
            .send_if_modified(|leading| std::mem::replace(leading, false));
    }

    fn term(&self) -> parking_lot::MutexGuard<'_, Term> {
        // The guarded value is a plain enum, valid even if a holder panicked.
        self.shared.term.lock()
    }
}

/// Hand-driven handles for tests of the code that obeys them.
#[cfg(test)]
impl LeaderHandle {
    /// A handle that does not lead until [`set_leader`](Self::set_leader)
    /// says so.
    pub fn not_leader() -> Self {
        Self::with_term(Term::NotLeading)
    }

    /// Makes this handle and its clones lead (without expiry) or stop
    /// leading, as an elector would.
    pub fn set_leader(&self, leading: bool) {
        if leading {
            *self.term() = Term::Always;
            self.shared
                .leading
                .send_if_modified(|leading| !std::mem::replace(leading, true));
        } else {
            self.step_down();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn fence_expires_at_the_deadline_without_help() {
        let handle = LeaderHandle::candidate();
        assert_eq!(handle.fence(), Err(NotLeader::NotElected));

        let deadline = Instant::now() + Duration::from_secs(10);
        handle.lead_until(deadline);
        assert_eq!(handle.fence(), Ok(()));
        assert!(*handle.watch().borrow());

        tokio::time::sleep_until(deadline - Duration::from_millis(1)).await;
        assert!(handle.is_leader());
        tokio::time::sleep(Duration::from_millis(1)).await;
        assert_eq!(
            handle.fence(),
            Err(NotLeader::Expired {
                expired_for: Duration::ZERO
            })
        );
        assert!(!handle.is_leader());
        // The elector has not stepped down yet: /healthz reads this gap.
        assert!(handle.is_leading());
        handle.step_down();
        assert!(!handle.is_leading());
    }

    #[tokio::test(start_paused = true)]
    async fn watch_reports_each_change_once_and_clones_share_state() {
        let handle = LeaderHandle::candidate();
        let mut leading = handle.watch();
        assert!(!*leading.borrow_and_update());

        handle.lead_until(Instant::now() + Duration::from_secs(10));
        handle.lead_until(Instant::now() + Duration::from_secs(12));
        assert!(leading.has_changed().unwrap());
        assert!(*leading.borrow_and_update());

        let clone = handle.clone();
        handle.step_down();
        assert!(leading.has_changed().unwrap());
        assert!(!*leading.borrow_and_update());
        assert_eq!(clone.fence(), Err(NotLeader::NotElected));
    }

    #[test]
    fn hand_driven_handle_follows_set_leader() {
        let handle = LeaderHandle::not_leader();
        let leading = handle.watch();
        assert_eq!(handle.fence(), Err(NotLeader::NotElected));
        handle.set_leader(true);
        assert_eq!(handle.fence(), Ok(()));
        assert!(*leading.borrow());
        handle.set_leader(false);
        assert_eq!(handle.fence(), Err(NotLeader::NotElected));
        assert!(!*leading.borrow());
    }

    #[tokio::test(start_paused = true)]
    async fn always_leader_never_expires() {
        let handle = LeaderHandle::always_leader();
        tokio::time::sleep(Duration::from_secs(3_600)).await;
        assert_eq!(handle.fence(), Ok(()));
        assert!(*handle.watch().borrow());
    }
}
