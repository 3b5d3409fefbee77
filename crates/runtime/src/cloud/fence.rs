//! Leadership as the cloud calls see it: the [`Fence`] every mutation
//! passes, and its per-request form for providers.

use std::sync::Arc;

use ccm_cloud_provider::fence::RequestFence;
use tokio::time::Instant;

/// Whether this process may change the cloud right now.
///
/// The leader-election crate's handle implements this in the app; tests use
/// [`AlwaysLeader`].
pub trait Fence: Send + Sync + std::fmt::Debug {
    /// `Err` with the reason when mutations must be refused (not leader, or
    /// the lease may have expired).
    ///
    /// # Errors
    /// [`Fenced`] when this process must not change the cloud now.
    fn check(&self) -> Result<(), Fenced>;

    /// When the permission [`Fence::check`] gave lapses unless renewed
    /// (the end of the current lease term); `None` when it never lapses.
    /// A mutation still running then is cancelled unless `check` passes
    /// again.
    fn lapses_at(&self) -> Option<Instant> {
        None
    }
}

/// Why a [`Fence`] refused a mutation: the fence's own error (the
/// leader-election crate's `NotLeader` in the app). Its message is the
/// reason's; it has no separate `source()`.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Fenced(ccm_cloud_provider::BoxError);

impl Fenced {
    /// A refusal for `reason`.
    pub fn new(reason: impl Into<ccm_cloud_provider::BoxError>) -> Self {
        Self(reason.into())
    }
}

/// A fence that always allows mutations (`--leader-elect=false`, tests).
#[derive(Debug, Clone, Copy, Default)]
pub struct AlwaysLeader;

impl Fence for AlwaysLeader {
    fn check(&self) -> Result<(), Fenced> {
        Ok(())
    }
}

/// The leadership check each cloud request of a mutation passes
/// ([`ccm_cloud_provider::fence::check`]).
#[derive(Debug)]
pub(super) struct PerRequest(pub(super) Arc<dyn Fence>);

impl RequestFence for PerRequest {
    fn check(&self) -> Result<(), String> {
        self.0.check().map_err(|reason| reason.to_string())
    }
}
