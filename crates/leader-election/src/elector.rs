//! [`LeaderElector`]: one candidate in the election, run as a task, with
//! the [`LeaderHandle`](crate::LeaderHandle) the rest of the process reads.

mod campaign;
#[cfg(test)]
mod fake_store;
#[cfg(test)]
mod tests;

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use self::campaign::Campaign;
use crate::store::{KubeLeaseStore, LeaseApiError};
use crate::{ConfigError, LeaderElectionConfig, LeaderHandle};

/// One candidate in a leader election on a coordination.k8s.io/v1 Lease.
///
/// Create it with [`new`](Self::new), take a [`LeaderHandle`] with
/// [`handle`](Self::handle) for the code that must act only while leading,
/// then drive it with [`run`](Self::run).
#[derive(Debug)]
pub struct LeaderElector {
    campaign: Campaign<KubeLeaseStore>,
    handle: LeaderHandle,
}

impl LeaderElector {
    /// A candidate for the Lease `config` names, talking to the API server
    /// through `client`. Nothing is sent until [`run`](Self::run).
    ///
    /// # Errors
    ///
    /// A [`ConfigError`] when `config` fails [`LeaderElectionConfig::validate`].
    pub fn new(client: kube::Client, config: LeaderElectionConfig) -> Result<Self, ConfigError> {
        config.validate()?;
        let handle = LeaderHandle::candidate();
        let store = KubeLeaseStore::new(client, &config);
        Ok(Self {
            campaign: Campaign::new(store, config, handle.clone()),
            handle,
        })
    }

    /// The handle reporting this candidate's leadership; clones share it.
    pub fn handle(&self) -> LeaderHandle {
        self.handle.clone()
    }

    /// Runs the election until leadership is lost or `shutdown` is cancelled.
    ///
    /// Until it leads, the candidate tries to acquire the Lease every retry
    /// period (jittered by up to [`JITTER_FACTOR`](crate::JITTER_FACTOR)),
    /// creating it when absent, and taking it over once it is unheld or has
    /// not changed for a lease duration by this candidate's clock. It also
    /// watches the Lease, so a release or an expiry is acted on at once
    /// rather than at the next retry. Once leading, it renews every retry
    /// period.
    ///
    /// # Guarantees
    ///
    /// - Every write carries the `resourceVersion` read: of two candidates
    ///   writing in one round, one gets 409 Conflict and does not lead.
    /// - The handle's [`fence`](LeaderHandle::fence) turns false no later than
    ///   the renew deadline after the last successful renewal was sent, and
    ///   this function returns then with [`Error::LeadershipLost`].
    /// - On shutdown while leading, the handle steps down first, then the
    ///   Lease is released as client-go's `ReleaseOnCancel` does (empty
    ///   holder, `leaseDurationSeconds: 1`, fresh `renewTime`), so another
    ///   candidate takes over at once; this function then returns `Ok`. A
    ///   release that fails is logged, and the Lease expires by itself.
    ///
    /// # Assumptions
    ///
    /// Cancel `shutdown` only once the work guarded by the Lease has stopped:
    /// a mutation already past its fencing check when the Lease is released
    /// may overlap with the next leader's.
    ///
    /// # Errors
    ///
    /// Every [`Error`] means this process led and no longer does; a CCM then
    /// exits non-zero, as upstream does. Failed requests while not leading
    /// are retried (and logged), never returned.
    pub async fn run(self, shutdown: CancellationToken) -> Result<(), Error> {
        self.campaign.run(shutdown).await
    }
}

/// Why [`LeaderElector::run`] stopped while leading.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The Lease was not renewed within the renew deadline: requests failed
    /// or took too long.
    #[error(
        "lost leadership of Lease {lease}: not renewed within the renew deadline \
         ({renew_deadline:?})"
    )]
    LeadershipLost {
        /// `namespace/name` of the Lease.
        lease: String,
        /// The renew deadline that passed.
        renew_deadline: Duration,
        /// The last failed request, if any (none when requests hung).
        #[source]
        last_error: Option<LeaseApiError>,
    },
    /// Another candidate holds the Lease this process was renewing, for
    /// example after this process was paused for longer than the lease
    /// duration.
    #[error("lost leadership of Lease {lease}: it is held by {holder}")]
    LeaseTakenOver {
        /// `namespace/name` of the Lease.
        lease: String,
        /// The identity holding it now.
        holder: String,
    },
}
