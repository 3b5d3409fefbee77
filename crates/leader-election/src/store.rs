//! Where the Lease lives: the Kubernetes API in production ([`KubeLeaseStore`]),
//! an in-memory stand-in in the elector's unit tests.

mod kube;

use std::future::Future;

use futures::stream::BoxStream;
use k8s_openapi::api::coordination::v1::Lease;

use crate::LeaseRecord;

pub(crate) use self::kube::KubeLeaseStore;

/// A change to the Lease seen on a watch.
#[derive(Debug, Clone)]
pub(crate) enum LeaseEvent {
    /// The Lease was created or updated (or listed when the watch started).
    Applied(Box<Lease>),
    /// The Lease was deleted.
    Deleted,
}

/// Reads and writes one Lease with optimistic concurrency.
pub(crate) trait LeaseStore {
    /// The Lease, or `None` when it does not exist.
    fn get(&self) -> impl Future<Output = Result<Option<Lease>, LeaseApiError>> + Send;

    /// Creates the Lease holding `record`.
    ///
    /// # Errors
    ///
    /// [`LeaseApiError::AlreadyExists`] when another candidate created it first.
    fn create(
        &self,
        record: &LeaseRecord,
    ) -> impl Future<Output = Result<Lease, LeaseApiError>> + Send;

    /// Replaces the spec of `current` (as read, with its `resourceVersion`)
    /// by `record`.
    ///
    /// # Errors
    ///
    /// [`LeaseApiError::Conflict`] when the Lease changed since `current` was read.
    fn replace(
        &self,
        current: &Lease,
        record: &LeaseRecord,
    ) -> impl Future<Output = Result<Lease, LeaseApiError>> + Send;

    /// Changes to the Lease, best effort: the stream retries on its own and
    /// may miss changes, which the caller's polling covers.
    fn watch(&self) -> BoxStream<'static, LeaseEvent>;
}

/// A request on the Lease that did not succeed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LeaseApiError {
    /// An update carried a stale `resourceVersion`: another candidate wrote
    /// the Lease since it was read, and won that round.
    #[error("Lease {lease} was changed by another writer since it was read (409 Conflict)")]
    Conflict {
        /// `namespace/name` of the Lease.
        lease: String,
    },
    /// Another candidate created the Lease first.
    #[error("Lease {lease} was created by another candidate first (409 AlreadyExists)")]
    AlreadyExists {
        /// `namespace/name` of the Lease.
        lease: String,
    },
    /// The API server refused the request or could not be reached.
    #[error("cannot {verb} Lease {lease}")]
    Request {
        /// `get`, `create` or `update`.
        verb: &'static str,
        /// `namespace/name` of the Lease.
        lease: String,
        /// The client's error.
        #[source]
        source: ::kube::Error,
    },
}
